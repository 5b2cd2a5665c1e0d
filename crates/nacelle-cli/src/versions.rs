//! `history`, `diff` and `rollback`: a config's versions over the HTTP history API.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use nacelle_client::{Client, Key, PublishOptions};
use serde_json::json;
use similar::TextDiff;

use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::{connect, Conn, KeyArgs};

// `nacelle history`.
#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Page number (from 1).
    #[arg(long, default_value_t = 1)]
    page: u32,
    /// Page size (the server caps it at 500).
    #[arg(long, default_value_t = 20)]
    size: u32,
    #[command(flatten)]
    conn: Conn,
}

// `nacelle diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The history version (`nacelle history` lists them) on the left.
    #[arg(long, conflicts_with = "file")]
    from: Option<String>,
    /// The history version on the right (default: the server's current content).
    #[arg(long, requires = "from")]
    to: Option<String>,
    /// A local file, compared with the server's current content.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Lines of context.
    #[arg(long, default_value_t = 3)]
    context: usize,
    #[command(flatten)]
    conn: Conn,
}

// `nacelle rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The history version to publish again.
    #[arg(long)]
    to: String,
    /// A message recorded with the history row (default `rollback to revision <to>`).
    #[arg(long, short = 'm')]
    message: Option<String>,
    /// Do not ask.
    #[arg(long, short = 'y', num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) yes: bool,
    #[command(flatten)]
    conn: Conn,
}

pub(crate) async fn history(a: HistoryArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let page = client.admin().history(key.clone(), a.page, a.size).await?;
    match a.conn.output {
        Output::Json => {
            let items: Vec<_> = page
                .page_items
                .iter()
                .map(|h| {
                    json!({"id": h.id, "opType": h.op_type, "lastModifiedTime": h.last_modified_time,
                           "srcUser": h.src_user, "srcIp": h.src_ip, "message": h.message})
                })
                .collect();
            output::json(&json!({"dataId": key.data_id, "group": key.group,
                "namespace": key.namespace, "totalCount": page.total_count, "items": items}));
        }
        Output::Table => {
            if page.page_items.is_empty() {
                eprintln!("no history for {key}");
            }
            let rows: Vec<Vec<String>> = page
                .page_items
                .iter()
                .map(|h| {
                    let op = match h.op_type.trim() {
                        "I" => "insert",
                        "U" => "update",
                        "D" => "delete",
                        other => other,
                    };
                    vec![
                        h.id.clone(),
                        op.to_string(),
                        h.last_modified_time.clone(),
                        h.src_user.clone(),
                        h.src_ip.clone(),
                        h.message.clone(),
                    ]
                })
                .collect();
            output::table(&["VERSION", "OP", "TIME", "USER", "IP", "MESSAGE"], &rows);
        }
    }
    Ok(())
}

/// The server's current content of `key` (`""` when it does not exist).
async fn current(client: &Client, key: &Key) -> Result<(String, Option<nacelle_client::Config>)> {
    let c = client.get(key.clone()).await?;
    Ok((c.as_ref().map(|c| c.content.clone()).unwrap_or_default(), c))
}

async fn version(client: &Client, key: &Key, nid: &str) -> Result<String> {
    match client.admin().history_entry(key.clone(), nid).await {
        Ok(h) => Ok(h.content),
        Err(nacelle_client::ClientError::NotFound(_)) => Err(CliError::NotFound(format!(
            "version {nid} of {key} not found (see `nacelle history`)"
        ))),
        Err(e) => Err(e.into()),
    }
}

fn unified(old: &str, new: &str, old_name: &str, new_name: &str, context: usize) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header(old_name, new_name)
        .to_string()
}

pub(crate) async fn diff(a: DiffArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let (old, new, old_name, new_name) = match (&a.file, &a.from) {
        (Some(path), _) => {
            let local = std::fs::read_to_string(path)
                .map_err(CliError::io(format!("reading {}", path.display())))?;
            let (now, _) = current(&client, &key).await?;
            (
                now,
                local,
                format!("server {key}"),
                path.display().to_string(),
            )
        }
        (None, Some(from)) => {
            let old = version(&client, &key, from).await?;
            let (new, new_name) = match &a.to {
                Some(to) => (
                    version(&client, &key, to).await?,
                    format!("{key} version {to}"),
                ),
                None => (current(&client, &key).await?.0, format!("server {key}")),
            };
            (old, new, format!("{key} version {from}"), new_name)
        }
        (None, None) => {
            return Err(CliError::Usage(
                "say what to compare: --file PATH, or --from VERSION [--to VERSION]".into(),
            ))
        }
    };
    let text = unified(&old, &new, &old_name, &new_name, a.context);
    match a.conn.output {
        Output::Json => output::json(&json!({"from": old_name, "to": new_name,
            "identical": old == new, "diff": text})),
        Output::Table => {
            if old == new {
                eprintln!("identical");
            }
            print!("{text}");
        }
    }
    Ok(())
}

/// Asks `question`; true only for an explicit yes. Refuses without a terminal.
pub(crate) fn confirm(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "{question} — stdin is not a terminal: pass --yes to confirm"
        )));
    }
    eprint!("{question} [y/N] ");
    std::io::stderr()
        .flush()
        .map_err(CliError::io("writing the prompt"))?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(CliError::io("reading the answer"))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

pub(crate) async fn rollback(a: RollbackArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let target = version(&client, &key, &a.to).await?;
    let (now, cfg) = current(&client, &key).await?;
    if now == target && cfg.is_some() {
        eprintln!("{key} already has the content of version {}", a.to);
        return Ok(());
    }
    if !a.yes {
        eprint!(
            "{}",
            unified(
                &now,
                &target,
                &format!("server {key}"),
                &format!("version {}", a.to),
                3
            )
        );
        if !confirm(&format!("Roll {key} back to version {}?", a.to))? {
            return Err(CliError::Cancelled);
        }
    }
    // Compare-and-set on what was shown: a change made meanwhile is not overwritten.
    let opts = PublishOptions {
        content_type: cfg.as_ref().map(|c| c.content_type.clone()),
        cas_md5: cfg.as_ref().map(|c| c.md5.clone()),
        message: Some(
            a.message
                .clone()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| format!("rollback to revision {}", a.to)),
        ),
        ..Default::default()
    };
    client.publish_with(key.clone(), &target, &opts).await?;
    match a.conn.output {
        Output::Json => output::json(&json!({"rolledBack": true, "dataId": key.data_id,
            "group": key.group, "namespace": key.namespace, "version": a.to})),
        Output::Table => println!("rolled {key} back to version {}", a.to),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_unified() {
        let d = unified("a\nb\n", "a\nc\n", "old", "new", 3);
        assert_eq!(d, "--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
    }
}
