//! `nacelle webhook add|ls|rm|deliveries|redeliver` (docs/webhooks.md): webhooks of the
//! namespace of `-n`, for administrators. A secret is read from `--secret`,
//! `NACELLE_WEBHOOK_SECRET` or stdin (`--secret-stdin`) and never printed; listings show
//! its fingerprint.

use std::io::Read;

use nacelle_client::{Webhook, WebhookDelivery, WebhookSpec};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, ns_label, Output};
use crate::{connect, Conn};

// `nacelle webhook`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    #[command(subcommand)]
    cmd: WebhookCommand,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// The webhook commands.
#[derive(Debug, clap::Subcommand)]
pub enum WebhookCommand {
    /// Add a webhook to the namespace (`-n`): events of the keys matching the patterns
    /// are POSTed to URL, signed with the secret.
    Add {
        /// Where events are POSTed (http:// or https://).
        url: String,
        /// The group pattern: `*`, `x*`, `*x`, `*x*` or a group.
        #[arg(long, short = 'g', default_value = "*")]
        group: String,
        /// The dataId pattern, of the same shapes (`'*.yaml'`).
        #[arg(long, short = 'd', default_value = "*")]
        data_id: String,
        /// The HMAC-SHA256 key of `X-Nacelle-Signature` (8 to 256 characters).
        #[arg(long, env = "NACELLE_WEBHOOK_SECRET", hide_env_values = true)]
        secret: Option<String>,
        /// Read the secret from stdin (its first line).
        #[arg(long, conflicts_with = "secret")]
        secret_stdin: bool,
        /// Event kinds, comma-separated (`publish,remove,change-approved`); default: all.
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
        /// What it is for.
        #[arg(long, default_value = "", hide_default_value = true)]
        desc: String,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// List the webhooks (of every namespace).
    Ls,
    /// Remove a webhook and its delivery log.
    Rm {
        /// The webhook's id.
        id: i64,
    },
    /// A webhook's deliveries, newest first: status, attempts, last code or error.
    Deliveries {
        /// The webhook's id.
        id: i64,
        /// Page number (from 1).
        #[arg(long, default_value_t = 1)]
        page: u32,
        /// Page size (at most 500).
        #[arg(long, default_value_t = 20)]
        size: u32,
    },
    /// Send a delivered or failed delivery again.
    Redeliver {
        /// The delivery's id (from `deliveries`).
        delivery: i64,
    },
}

fn hook_json(h: &Webhook) -> serde_json::Value {
    json!({"id": h.id, "namespace": h.namespace_id, "group": h.group, "dataId": h.data_id,
           "url": h.url, "secretFingerprint": h.secret_fingerprint, "events": h.events,
           "enabled": h.enabled, "description": h.description, "createdBy": h.created_by,
           "createdTime": h.created_time, "modifiedTime": h.modified_time})
}

fn delivery_json(d: &WebhookDelivery) -> serde_json::Value {
    json!({"id": d.id, "hookId": d.hook_id, "eventId": d.event_id, "kind": d.kind,
           "status": d.status, "attempts": d.attempts, "lastCode": d.last_code,
           "lastError": d.last_error, "nextAttemptTime": d.next_attempt_time,
           "createdTime": d.created_time, "modifiedTime": d.modified_time, "body": d.body})
}

fn secret_from_stdin() -> Result<String> {
    let mut s = String::new();
    std::io::stdin()
        .read_to_string(&mut s)
        .map_err(CliError::io("reading the secret from stdin"))?;
    Ok(s.lines().next().unwrap_or_default().to_string())
}

pub(crate) async fn webhook(a: WebhookArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let admin = client.admin();
    let out = a.conn.output;
    match a.cmd {
        WebhookCommand::Add {
            url,
            group,
            data_id,
            secret,
            secret_stdin,
            events,
            desc,
            disabled,
        } => {
            let secret = match (secret, secret_stdin) {
                (_, true) => secret_from_stdin()?,
                (Some(s), false) => s,
                (None, false) => {
                    return Err(CliError::Usage(
                        "a webhook needs a secret: --secret, NACELLE_WEBHOOK_SECRET or \
                         --secret-stdin"
                            .into(),
                    ))
                }
            };
            let spec = WebhookSpec {
                namespace: Some(client.namespace().to_string()),
                group: Some(group),
                data_id: Some(data_id),
                url: Some(url),
                secret: Some(secret),
                events: Some(
                    events
                        .into_iter()
                        .filter(|e| !e.trim().is_empty())
                        .collect(),
                ),
                enabled: Some(!disabled),
                description: Some(desc),
            };
            let h = admin.create_webhook(&spec).await?;
            match out {
                Output::Json => output::json(&hook_json(&h)),
                Output::Table => println!(
                    "webhook {} added: {}>>{}>>{} → {}",
                    h.id,
                    ns_label(&h.namespace_id),
                    h.group,
                    h.data_id,
                    h.url
                ),
            }
        }
        WebhookCommand::Ls => {
            let hooks = admin.webhooks().await?;
            output::list(
                out,
                &hooks,
                &[
                    "ID",
                    "NAMESPACE",
                    "GROUP",
                    "DATA ID",
                    "URL",
                    "EVENTS",
                    "ENABLED",
                    "SECRET",
                ],
                hook_json,
                |h| {
                    vec![
                        h.id.to_string(),
                        ns_label(&h.namespace_id).to_string(),
                        h.group.clone(),
                        h.data_id.clone(),
                        h.url.clone(),
                        if h.events.is_empty() {
                            "*".to_string()
                        } else {
                            h.events.join(",")
                        },
                        if h.enabled { "yes" } else { "no" }.to_string(),
                        h.secret_fingerprint.clone(),
                    ]
                },
            );
        }
        WebhookCommand::Rm { id } => {
            admin.delete_webhook(id).await?;
            match out {
                Output::Json => output::json(&json!({"removed": true, "id": id})),
                Output::Table => println!("webhook {id} removed"),
            }
        }
        WebhookCommand::Deliveries { id, page, size } => {
            let page = admin.webhook_deliveries(id, page, size).await?;
            output::page(
                out,
                &page,
                &[
                    "ID",
                    "EVENT",
                    "STATUS",
                    "ATTEMPTS",
                    "CODE",
                    "ERROR",
                    "CREATED_MS",
                ],
                delivery_json,
                |d| {
                    vec![
                        d.id.to_string(),
                        d.kind.clone(),
                        d.status.clone(),
                        d.attempts.to_string(),
                        d.last_code.map(|c| c.to_string()).unwrap_or_default(),
                        d.last_error.clone(),
                        d.created_time.to_string(),
                    ]
                },
            );
        }
        WebhookCommand::Redeliver { delivery } => {
            admin.redeliver_webhook(delivery).await?;
            match out {
                Output::Json => output::json(&json!({"redelivered": true, "id": delivery})),
                Output::Table => println!("delivery {delivery} will be sent again"),
            }
        }
    }
    Ok(())
}
