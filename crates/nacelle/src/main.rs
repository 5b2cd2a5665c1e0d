//! The `nacelle` command: `nacelle serve [flags]`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nacelle::settings::{LogFormat, ServeArgs};
use nacelle::Settings;
use tracing_subscriber::EnvFilter;

/// mimalloc: glibc's malloc serialises on arena locks under many small allocations across
/// threads (seen in profiles of the GET path); mimalloc's thread-local heaps do not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "nacelle",
    version,
    about = "A Nacos-compatible configuration center"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (embedded SQLite in ./nacelle-data unless --db says otherwise).
    Serve(ServeArgs),
}

fn init_logging(settings: &Settings) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&settings.log)
        .map_err(|e| anyhow::anyhow!("invalid log filter `{}`: {e}", settings.log))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match settings.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("initialising logs: {e}"))
}

async fn shutdown_signal() -> anyhow::Result<&'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => { r?; Ok("SIGINT") }
            _ = term.recv() => Ok("SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await?;
        Ok("ctrl-c")
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let Command::Serve(args) = cli.command;
    let settings = Settings::load(args)?;
    init_logging(&settings)?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        data_dir = %settings.data_dir.display(),
        db = %settings.database_display(),
        "starting nacelle"
    );
    let mut server = nacelle::start(&settings).await?;
    tokio::select! {
        sig = shutdown_signal() => {
            tracing::info!(signal = sig?, "shutting down");
            server.shutdown().await?;
        }
        r = server.wait() => r?,
    }
    tracing::info!("stopped");
    Ok(())
}
