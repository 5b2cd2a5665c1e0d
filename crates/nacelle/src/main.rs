//! The `nacelle` command: `nacelle serve [flags]`, `backup`, `restore`, `check` of the
//! embedded SQLite database, and the client commands of `nacelle-cli` (`get`, `put`,
//! `watch`, …; docs/cli.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use nacelle::settings::{LogFormat, ServeArgs};
use nacelle::Settings;
use tracing_subscriber::EnvFilter;

mod alloc;

#[derive(Debug, Parser)]
#[command(
    name = "nacelle",
    version,
    about = "A Nacos-compatible configuration center",
    long_about = "A Nacos-compatible configuration center.\n\n`nacelle serve` runs the server; \
                  backup, restore and check maintain its SQLite database; the other commands \
                  read and change the configs of a running server (docs/cli.md)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (embedded SQLite in ./nacelle-data unless --db says otherwise).
    Serve(Box<ServeArgs>),
    /// Copy the SQLite database to a new file, also while a server runs on it. The backup
    /// holds every write acknowledged before it began.
    Backup {
        #[command(flatten)]
        db: DbArgs,
        /// The backup file to create (must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Replace the SQLite database with a backup (stop the server first).
    Restore {
        #[command(flatten)]
        db: DbArgs,
        /// The backup file.
        #[arg(long)]
        from: PathBuf,
        /// Replace an existing database.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
        force: bool,
    },
    /// Check the SQLite database: integrity, and the tables and columns Nacelle needs.
    Check {
        #[command(flatten)]
        db: DbArgs,
    },
    // The client commands (nacelle-cli).
    #[command(flatten)]
    Client(Box<nacelle_cli::Command>),
}

// Which database a maintenance command works on: resolved as `serve` resolves it
// (flag > env > TOML file > default `nacelle.db` in the data directory).
#[derive(Debug, clap::Args)]
struct DbArgs {
    /// TOML settings file, as for `serve`.
    #[arg(long, env = "NACELLE_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory. Default `./nacelle-data`.
    #[arg(long, env = "NACELLE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Database URL (`sqlite://path`).
    #[arg(long, env = "NACELLE_DB")]
    db: Option<String>,
}

impl DbArgs {
    /// The SQLite file these arguments name.
    fn sqlite_file(self) -> anyhow::Result<PathBuf> {
        let settings = Settings::load(ServeArgs {
            config: self.config,
            data_dir: self.data_dir,
            db: self.db,
            ..ServeArgs::default()
        })?;
        let url = settings.database_url();
        nacelle_store::backup::sqlite_file(&url).ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not an SQLite database: back up MySQL/MariaDB with mysqldump and \
                 PostgreSQL with pg_dump (docs/operations.md)",
                settings.database_display()
            )
        })
    }
}

/// Runs a blocking maintenance step off the async runtime and prints its summary.
async fn maintenance(
    what: &'static str,
    path: PathBuf,
    step: impl FnOnce() -> Result<nacelle_store::backup::DbSummary, nacelle_store::backup::BackupError>
        + Send
        + 'static,
) -> anyhow::Result<()> {
    let summary = tokio::task::spawn_blocking(step).await??;
    println!("{}", describe(what, &path, &summary));
    Ok(())
}

fn describe(what: &str, path: &Path, s: &nacelle_store::backup::DbSummary) -> String {
    format!(
        "{what}: {} ({} bytes): {} configs, {} history rows, last change nid {}",
        path.display(),
        s.bytes,
        s.configs,
        s.history_rows,
        s.max_nid
    )
}

fn init_logging(settings: &Settings) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&settings.log)
        .map_err(|e| anyhow::anyhow!("invalid log filter `{}`: {e}", settings.log))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_logs(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR").as_deref(),
        ));
    let result = match settings.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("initialising logs: {e}"))
}

/// Whether text logs carry ANSI colour codes: only when stderr is a terminal, and not when
/// `NO_COLOR` is set to anything but the empty string (<https://no-color.org>). A file, a
/// pipe or the journal gets plain text.
fn colour_logs(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
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

/// The whole command: the subcommands, and the client flags before them too
/// (`nacelle -n dev ls`; nacelle-cli's `global_flags`).
fn command() -> clap::Command {
    nacelle_cli::global_flags(Cli::command())
}

/// The command line, parsed (exits on `--help`, `--version` and errors, as clap does).
fn parse() -> Cli {
    let mut cmd = command();
    let matches = cmd.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut cmd).exit());
    if !matches!(cli.command, Command::Client(_)) {
        if let Some(flag) = nacelle_cli::client_flag_given(&matches) {
            cmd.error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{flag} is a flag of the client commands (get, put, ls, …), not of this one"
                ),
            )
            .exit();
        }
    }
    cli
}

/// The server and the maintenance commands create only private files: the database, its
/// WAL, backups, restored files, secrets (docs/deploy.md, "File permissions"). The data
/// directory and the database file also get their modes explicitly
/// (`nacelle::private_files`); the umask covers whatever else SQLite or a later change
/// creates. Process-wide, so set before the runtime starts any thread; the client
/// commands keep the user's umask (their exports are the user's files).
fn private_umask() {
    #[cfg(unix)]
    {
        use rustix::fs::Mode;
        let _previous =
            rustix::process::umask(Mode::from_bits_truncate(nacelle::private_files::UMASK));
    }
}

fn main() -> ExitCode {
    let cli = parse();
    if !matches!(cli.command, Command::Client(_)) {
        private_umask();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(alloc::on_worker_park)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Command::Client(cmd) = cli.command {
        return ExitCode::from(runtime.block_on(nacelle_cli::run(*cmd, command)));
    }
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    use nacelle_store::backup;
    let args = match cli.command {
        Command::Serve(args) => *args,
        Command::Backup { db, out } => {
            let src = db.sqlite_file()?;
            let dest = out.clone();
            return maintenance("backup", out, move || backup::backup(&src, &dest)).await;
        }
        Command::Restore { db, from, force } => {
            let target = db.sqlite_file()?;
            let dest = target.clone();
            return maintenance("restored", target, move || {
                backup::restore(&from, &dest, force)
            })
            .await;
        }
        Command::Check { db } => {
            let path = db.sqlite_file()?;
            let p = path.clone();
            return maintenance("ok", path, move || backup::check(&p)).await;
        }
        Command::Client(_) => anyhow::bail!("client commands are run by nacelle_cli::run"),
    };
    let settings = Settings::load(args)?;
    init_logging(&settings)?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        data_dir = %settings.data_dir.display(),
        db = %settings.database_display(),
        "starting nacelle"
    );
    let mut server = nacelle::start(&settings).await?;
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    tokio::spawn(alloc::settle_owed_collections(workers));
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

#[cfg(test)]
mod tests {
    use super::{colour_logs, command};
    use std::ffi::OsStr;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(colour_logs(true, None));
        assert!(colour_logs(true, Some(OsStr::new(""))));
        assert!(!colour_logs(true, Some(OsStr::new("1"))));
        assert!(!colour_logs(false, None), "a file, a pipe, the journal");
        assert!(!colour_logs(false, Some(OsStr::new("1"))));
    }

    /// Every help text in the command tree, each with where it is shown.
    fn help_texts(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        let path = format!("{path} {}", cmd.get_name());
        for text in [cmd.get_about(), cmd.get_long_about()]
            .into_iter()
            .flatten()
        {
            out.push((path.clone(), text.to_string()));
        }
        for arg in cmd.get_arguments() {
            for text in [arg.get_help(), arg.get_long_help()].into_iter().flatten() {
                out.push((format!("{path} --{}", arg.get_id()), text.to_string()));
            }
        }
        for sub in cmd.get_subcommands() {
            help_texts(sub, &path, out);
        }
    }

    #[test]
    fn help_opens_with_what_nacelle_is() {
        for help in [command().render_help(), command().render_long_help()] {
            let help = help.to_string();
            assert!(
                help.starts_with("A Nacos-compatible configuration center"),
                "{help}"
            );
        }
    }

    /// A doc comment clap took as help shows itself by its rustdoc links; and a command
    /// without a text of its own would show whatever its types' doc comments say.
    #[test]
    fn help_is_written_for_users() {
        let mut texts = Vec::new();
        help_texts(&command(), "", &mut texts);
        for (place, text) in &texts {
            assert!(!text.contains("[`"), "{place}: a developer's note: {text}");
        }
        let mut commands = vec![command()];
        while let Some(cmd) = commands.pop() {
            let name = cmd.get_name().to_string();
            assert!(
                cmd.get_about().is_some(),
                "`{name}` has no text of its own in the help"
            );
            commands.extend(cmd.get_subcommands().cloned());
        }
    }
}
