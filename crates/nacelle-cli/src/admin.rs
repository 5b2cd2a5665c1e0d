//! `ns`, `export`, `import`.

use std::path::PathBuf;

use nacelle_client::ImportPolicy;
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, ns_label, Output};
use crate::{connect, Conn};

/// `nacelle ns`.
#[derive(Debug, clap::Args)]
pub struct NsArgs {
    #[command(subcommand)]
    cmd: NsCommand,
    #[command(flatten)]
    conn: Conn,
}

/// The namespace commands.
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
        #[arg(long, default_value = "")]
        desc: String,
    },
    /// Delete a namespace (asks first unless --yes).
    Delete {
        /// Its id.
        id: String,
        /// Do not ask.
        #[arg(long, short = 'y')]
        yes: bool,
    },
}

/// `nacelle export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only this group.
    #[arg(long, short = 'g')]
    group: Option<String>,
    /// The zip to write (default `nacelle-export-<namespace>.zip`).
    #[arg(long, short = 'f')]
    file: Option<PathBuf>,
    #[command(flatten)]
    conn: Conn,
}

/// What an import does with existing keys.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Policy {
    /// Write nothing when any key exists.
    Abort,
    /// Leave existing keys alone.
    Skip,
    /// Replace existing keys.
    Overwrite,
}

/// `nacelle import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Nacos zip.
    file: PathBuf,
    /// What to do with keys that exist already.
    #[arg(long, value_enum, default_value = "abort")]
    policy: Policy,
    #[command(flatten)]
    conn: Conn,
}

pub(crate) async fn ns(a: NsArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let admin = client.admin();
    match a.cmd {
        NsCommand::List => {
            let list = admin.namespaces().await?;
            match a.conn.output {
                Output::Json => {
                    let items: Vec<_> = list
                        .iter()
                        .map(|n| {
                            json!({"id": n.namespace, "name": n.namespace_show_name,
                                        "desc": n.namespace_desc, "configCount": n.config_count})
                        })
                        .collect();
                    output::json(&json!(items));
                }
                Output::Table => {
                    let rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|n| {
                            vec![
                                ns_label(&n.namespace).to_string(),
                                n.namespace_show_name.clone(),
                                n.config_count.to_string(),
                                n.namespace_desc.clone(),
                            ]
                        })
                        .collect();
                    output::table(&["ID", "NAME", "CONFIGS", "DESCRIPTION"], &rows);
                }
            }
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
    eprintln!(
        "importing {} ({} bytes) into {}…",
        a.file.display(),
        zip.len(),
        ns_label(&ns)
    );
    let report = client.admin().import(&ns, &zip, policy).await?;
    if !report.fail_data.is_empty() {
        let keys: Vec<String> = report
            .fail_data
            .iter()
            .map(|k| format!("{}/{}", k.group, k.data_id))
            .collect();
        return Err(CliError::Client(nacelle_client::ClientError::Invalid(
            format!(
                "import aborted, nothing written: {} config(s) exist already in {} ({}); \
             use --policy skip or --policy overwrite",
                keys.len(),
                ns_label(&ns),
                keys.join(", ")
            ),
        )));
    }
    match a.conn.output {
        Output::Json => output::json(&json!({"namespace": ns, "succCount": report.succ_count,
            "skipCount": report.skip_count, "unrecognizedCount": report.unrecognized_count})),
        Output::Table => output::table(
            &["IMPORTED", "SKIPPED", "UNRECOGNIZED"],
            &[vec![
                report.succ_count.to_string(),
                report.skip_count.to_string(),
                report.unrecognized_count.to_string(),
            ]],
        ),
    }
    Ok(())
}
