//! `ns`, `export`, `import`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nacelle_client::ImportPolicy;
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, ns_label, Output};
use crate::{connect, Conn};

// `nacelle ns`.
#[derive(Debug, clap::Args)]
pub struct NsArgs {
    #[command(subcommand)]
    cmd: NsCommand,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// The namespace commands.
#[derive(Debug, clap::Subcommand)]
pub enum NsCommand {
    /// List namespaces.
    List,
    /// Create a namespace.
    Create {
        /// Its id (letters, digits, `_`, `-`).
        id: String,
        /// Display name (default: the id).
        #[arg(long)]
        name: Option<String>,
        /// Description.
        #[arg(long, default_value = "", hide_default_value = true)]
        desc: String,
    },
    /// Delete a namespace (asks first unless --yes).
    Delete {
        /// Its id.
        id: String,
        /// Do not ask.
        #[arg(long, short = 'y', num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
        yes: bool,
    },
}

// `nacelle export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only this group.
    #[arg(long, short = 'g')]
    group: Option<String>,
    /// The zip to write (default `nacelle-export-<namespace>.zip`).
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

/// What an import does with existing keys.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Policy {
    /// Stop at the first key that exists (those before it are written), as Nacos does.
    Abort,
    /// Leave existing keys alone.
    Skip,
    /// Replace existing keys.
    Overwrite,
}

// `nacelle import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Nacos zip.
    file: PathBuf,
    /// What to do with keys that exist already.
    #[arg(long, value_enum, default_value = "abort")]
    policy: Policy,
    /// No progress on stderr (the result is still printed).
    #[arg(long, short = 'q', num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    quiet: bool,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

pub(crate) async fn ns(a: NsArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let admin = client.admin();
    match a.cmd {
        NsCommand::List => {
            let list = admin.namespaces().await?;
            output::list(
                a.conn.output,
                &list,
                &["ID", "NAME", "CONFIGS", "DESCRIPTION"],
                |n| {
                    json!({"id": n.namespace, "name": n.namespace_show_name,
                        "desc": n.namespace_desc, "configCount": n.config_count})
                },
                |n| {
                    vec![
                        ns_label(&n.namespace).to_string(),
                        n.namespace_show_name.clone(),
                        n.config_count.to_string(),
                        n.namespace_desc.clone(),
                    ]
                },
            );
        }
        NsCommand::Create { id, name, desc } => {
            let name = name.unwrap_or_else(|| id.clone());
            admin.create_namespace(&id, &name, &desc).await?;
            match a.conn.output {
                Output::Json => output::json(&json!({"created": true, "id": id})),
                Output::Table => println!("created namespace {id}"),
            }
        }
        NsCommand::Delete { id, yes } => {
            if !yes && !crate::versions::confirm(&format!("Delete namespace {id}?"))? {
                return Err(CliError::Cancelled);
            }
            admin.delete_namespace(&id).await?;
            match a.conn.output {
                Output::Json => output::json(&json!({"deleted": true, "id": id})),
                Output::Table => println!("deleted namespace {id}"),
            }
        }
    }
    Ok(())
}

pub(crate) async fn export(a: ExportArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let ns = client.namespace().to_string();
    let zip = client.admin().export(&ns, a.group.as_deref()).await?;
    let path = a
        .file
        .unwrap_or_else(|| PathBuf::from(format!("nacelle-export-{}.zip", ns_label(&ns))));
    std::fs::write(&path, &zip).map_err(CliError::io(format!("writing {}", path.display())))?;
    match a.conn.output {
        Output::Json => output::json(&json!({"file": path.display().to_string(),
            "bytes": zip.len(), "namespace": ns})),
        Output::Table => println!(
            "exported {} to {} ({} bytes)",
            ns_label(&ns),
            path.display(),
            zip.len()
        ),
    }
    Ok(())
}

/// The progress bar of an import: bytes sent, then a note while the server works.
fn import_bar(file: &Path, ns: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    let style =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {bytes}/{total_bytes} {msg}")
            .map(|s| s.progress_chars("=> "))
            // The template is a constant: a parse failure is a bug, shown as the default style.
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(format!(
        "importing {} into {}",
        file.display(),
        ns_label(ns)
    ));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

pub(crate) async fn import(a: ImportArgs) -> Result<()> {
    let zip =
        std::fs::read(&a.file).map_err(CliError::io(format!("reading {}", a.file.display())))?;
    let client = connect(&a.conn).await?;
    let ns = client.namespace().to_string();
    let policy = match a.policy {
        Policy::Abort => ImportPolicy::Abort,
        Policy::Skip => ImportPolicy::Skip,
        Policy::Overwrite => ImportPolicy::Overwrite,
    };
    // A bar only for a person watching: a terminal, and neither JSON nor --quiet.
    let bar = (std::io::stderr().is_terminal() && a.conn.output == Output::Table && !a.quiet)
        .then(|| import_bar(&a.file, &ns));
    let admin = client.admin();
    let report = match &bar {
        Some(bar) => {
            let shown = bar.clone();
            let progress: nacelle_client::Progress = Arc::new(move |sent, total| {
                shown.set_length(total);
                shown.set_position(sent);
                if sent >= total {
                    shown.set_message("the server is importing…");
                }
            });
            let r = admin
                .import_with_progress(&ns, &zip, policy, progress)
                .await;
            bar.finish_and_clear();
            r?
        }
        None => {
            if !a.quiet {
                eprintln!(
                    "importing {} ({} bytes) into {}…",
                    a.file.display(),
                    zip.len(),
                    ns_label(&ns)
                );
            }
            admin.import(&ns, &zip, policy).await?
        }
    };
    if !report.fail_data.is_empty() {
        let keys: Vec<String> = report
            .fail_data
            .iter()
            .map(|k| format!("{}/{}", k.group, k.data_id))
            .collect();
        return Err(CliError::Client(nacelle_client::ClientError::Invalid(
            format!(
                "import aborted at {}, which exists already in {}: {} config(s) written \
                 before it, {} not imported; use --policy skip or --policy overwrite",
                keys.join(", "),
                ns_label(&ns),
                report.succ_count,
                report.skip_count + 1,
            ),
        )));
    }
    let skipped: Vec<String> = report
        .skip_data
        .iter()
        .map(|k| format!("{}/{}", k.group, k.data_id))
        .collect();
    let unrecognized: Vec<&str> = report
        .unrecognized_data
        .iter()
        .map(|u| u.item_name.as_str())
        .collect();
    match a.conn.output {
        Output::Json => output::json(&json!({"namespace": ns, "succCount": report.succ_count,
            "skipCount": report.skip_count, "unrecognizedCount": report.unrecognized_count,
            "skipped": skipped, "unrecognized": unrecognized})),
        Output::Table => {
            output::table(
                &["IMPORTED", "SKIPPED", "UNRECOGNIZED"],
                &[vec![
                    report.succ_count.to_string(),
                    report.skip_count.to_string(),
                    report.unrecognized_count.to_string(),
                ]],
            );
            for k in &skipped {
                println!("skipped (exists): {k}");
            }
            for u in &unrecognized {
                println!("unrecognized entry: {u}");
            }
        }
    }
    Ok(())
}
