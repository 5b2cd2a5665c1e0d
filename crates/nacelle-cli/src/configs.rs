//! `get`, `put`, `rm`, `ls`/`search`, `watch`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::Stdio;

use futures::StreamExt;
use nacelle_client::{Change, Config, Key, PublishOptions};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::input;
use crate::output::{self, ns_label, Output};
use crate::{connect, Conn, KeyArgs};

// `nacelle get`.
#[derive(Debug, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Read the variant of this tag.
    #[arg(long)]
    tag: Option<String>,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// `nacelle put`.
#[derive(Debug, clap::Args)]
pub struct PutArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The file to publish; `-` or nothing: stdin.
    file: Option<PathBuf>,
    /// Content type (yaml, json, properties, toml, xml, html, text); default: from the
    /// file's extension, else the data id's.
    #[arg(long = "type", short = 't')]
    content_type: Option<String>,
    /// Publish only if the server's md5 is still this one.
    #[arg(long)]
    cas: Option<String>,
    /// Publish the variant of this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Beta release to these client IPs only (comma-separated).
    #[arg(long, value_delimiter = ',')]
    beta_ips: Vec<String>,
    /// Description.
    #[arg(long)]
    desc: Option<String>,
    /// A message recorded with the history row (why the change was made).
    #[arg(long, short = 'm')]
    message: Option<String>,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// `nacelle rm`.
#[derive(Debug, clap::Args)]
pub struct RmArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Remove only the variant of this tag.
    #[arg(long)]
    tag: Option<String>,
    /// A message recorded with the history row (sent over HTTP: gRPC removals carry
    /// none).
    #[arg(long, short = 'm')]
    message: Option<String>,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// `nacelle ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Data id pattern (`*` matches anything).
    #[arg(default_value = "*")]
    pattern: String,
    /// Group pattern. Default: every group.
    #[arg(long, short = 'g', default_value = "", hide_default_value = true)]
    group: String,
    /// Page number (from 1).
    #[arg(long, default_value_t = 1)]
    page: u32,
    /// Page size.
    #[arg(long, default_value_t = 100)]
    size: u32,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// `nacelle watch`.
#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Data ids to watch.
    #[arg(required = true)]
    data_ids: Vec<String>,
    /// Their group.
    #[arg(long, short = 'g', default_value = nacelle_client::DEFAULT_GROUP)]
    group: String,
    /// Run this shell command (`sh -c`) on every change, the content on its stdin.
    #[arg(long)]
    exec: Option<String>,
    /// Stop after this many changes.
    #[arg(long)]
    count: Option<u64>,
    /// Print the current values first.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    initial: bool,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

fn config_json(c: &Config) -> serde_json::Value {
    json!({
        "dataId": c.key.data_id,
        "group": c.key.group,
        "namespace": c.key.namespace,
        "md5": c.md5,
        "type": c.content_type,
        "lastModified": c.last_modified,
        "beta": c.beta,
        "content": c.content,
    })
}

fn not_found(key: &Key) -> CliError {
    CliError::NotFound(format!("config {key} not found"))
}

pub(crate) async fn get(a: GetArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let got = match &a.tag {
        Some(t) => client.get_tagged(key.clone(), t).await?,
        None => client.get(key.clone()).await?,
    };
    let c = got.ok_or_else(|| not_found(&key))?;
    match a.conn.output {
        Output::Json => output::json(&config_json(&c)),
        Output::Table => {
            let mut out = std::io::stdout();
            out.write_all(c.content.as_bytes())
                .and_then(|()| {
                    if !c.content.ends_with('\n') && out.is_terminal() {
                        out.write_all(b"\n")
                    } else {
                        Ok(())
                    }
                })
                .map_err(CliError::io("writing stdout"))?;
        }
    }
    Ok(())
}

/// The content type a file name implies.
pub(crate) fn type_of_name(name: &str) -> Option<String> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    let t = match ext.as_str() {
        "yaml" | "yml" => "yaml",
        "json" => "json",
        "properties" => "properties",
        "toml" => "toml",
        "xml" => "xml",
        "html" | "htm" => "html",
        "txt" | "text" => "text",
        _ => return None,
    };
    Some(t.to_string())
}

pub(crate) async fn put(a: PutArgs) -> Result<()> {
    let file = input::named_file(a.file.as_deref());
    let content = input::read_content(file)?;
    let file_name = file.map(|p| p.display().to_string());
    let content_type = a
        .content_type
        .clone()
        .or_else(|| file_name.as_deref().and_then(type_of_name))
        .or_else(|| type_of_name(&a.key.data_id));
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let opts = PublishOptions {
        content_type: content_type.clone(),
        cas_md5: a.cas.clone(),
        tag: a.tag.clone(),
        beta_ips: a.beta_ips.clone(),
        desc: a.desc.clone(),
        message: a.message.clone(),
        ..Default::default()
    };
    client.publish_with(key.clone(), &content, &opts).await?;
    match a.conn.output {
        Output::Json => output::json(&json!({
            "published": true,
            "dataId": key.data_id,
            "group": key.group,
            "namespace": key.namespace,
            "type": content_type,
            "bytes": content.len(),
        })),
        Output::Table => println!(
            "published {key} ({} bytes{})",
            content.len(),
            content_type.map(|t| format!(", {t}")).unwrap_or_default()
        ),
    }
    Ok(())
}

pub(crate) async fn rm(a: RmArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    match a.message.as_deref().filter(|m| !m.trim().is_empty()) {
        Some(message) => {
            client
                .admin()
                .remove_with_message(key.clone(), a.tag.as_deref(), message)
                .await?
        }
        None => client.remove_tagged(key.clone(), a.tag.as_deref()).await?,
    }
    match a.conn.output {
        Output::Json => output::json(&json!({"removed": true, "dataId": key.data_id,
            "group": key.group, "namespace": key.namespace})),
        Output::Table => println!("removed {key}"),
    }
    Ok(())
}

pub(crate) async fn ls(a: LsArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let ns = client.namespace().to_string();
    let page = client
        .admin()
        .search(&ns, &a.pattern, &a.group, a.page, a.size)
        .await?;
    output::page(
        a.conn.output,
        &page,
        &["DATA ID", "GROUP", "TYPE", "MD5"],
        |c| {
            json!({"dataId": c.data_id, "group": c.group, "namespace": c.tenant,
                   "type": c.content_type, "md5": c.md5, "appName": c.app_name})
        },
        |c| {
            vec![
                c.data_id.clone(),
                c.group.clone(),
                c.content_type.clone(),
                c.md5.clone(),
            ]
        },
    );
    let what = format!("configs in {}", ns_label(&ns));
    output::page_footer(a.conn.output, &page, &what);
    Ok(())
}

/// Prints one event of `watch` and runs its command.
async fn report(event: &str, change: &Change, a: &WatchArgs) -> Result<()> {
    let key = &change.key;
    let md5 = change.config.as_ref().map_or("", |c| c.md5.as_str());
    match a.conn.output {
        Output::Json => {
            let mut v = json!({"event": event, "dataId": key.data_id, "group": key.group,
                               "namespace": key.namespace, "md5": md5});
            if let Some(c) = &change.config {
                v["type"] = json!(c.content_type);
                v["content"] = json!(c.content);
            }
            output::json(&v);
        }
        Output::Table => {
            println!("--- {event} {key} md5={md5}");
            if let Some(c) = &change.config {
                print!("{}", c.content);
                if !c.content.ends_with('\n') {
                    println!();
                }
            }
        }
    }
    std::io::stdout()
        .flush()
        .map_err(CliError::io("writing stdout"))?;
    if let Some(cmd) = &a.exec {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("NACELLE_EVENT", event)
            .env("NACELLE_DATA_ID", &key.data_id)
            .env("NACELLE_GROUP", &key.group)
            .env("NACELLE_NAMESPACE", &key.namespace)
            .env("NACELLE_MD5", md5)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(CliError::io(format!("running `{cmd}`")))?;
        if let Some(mut stdin) = child.stdin.take() {
            let content = change
                .config
                .as_ref()
                .map(|c| c.content.clone())
                .unwrap_or_default();
            use tokio::io::AsyncWriteExt;
            // A command that does not read its stdin closes it early: not an error.
            if let Err(e) = stdin.write_all(content.as_bytes()).await {
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    return Err(CliError::io(format!("feeding `{cmd}`"))(e));
                }
            }
        }
        let status = child
            .wait()
            .await
            .map_err(CliError::io(format!("running `{cmd}`")))?;
        if !status.success() {
            eprintln!("warning: `{cmd}` exited with {status}");
        }
    }
    Ok(())
}

pub(crate) async fn watch(a: WatchArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let mut watches = Vec::new();
    for id in &a.data_ids {
        let w = client.watch((a.group.as_str(), id.as_str())).await?;
        if a.initial {
            let change = Change {
                key: w.key().clone(),
                config: w.initial().cloned(),
            };
            report("initial", &change, &a).await?;
        }
        watches.push(w);
    }
    eprintln!(
        "watching {} (ctrl-c to stop)",
        watches
            .iter()
            .map(|w| w.key().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut all = futures::stream::select_all(watches);
    let mut seen = 0u64;
    while a.count.is_none_or(|n| seen < n) {
        let Some(change) = all.next().await else {
            break;
        };
        let event = if change.config.is_some() {
            "changed"
        } else {
            "removed"
        };
        report(event, &change, &a).await?;
        seen += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_extensions() {
        assert_eq!(type_of_name("a/b.YML").as_deref(), Some("yaml"));
        assert_eq!(
            type_of_name("app.properties").as_deref(),
            Some("properties")
        );
        assert_eq!(type_of_name("noext"), None);
        assert_eq!(type_of_name("x.bin"), None);
    }
}
