//! `nacelle audit ls|verify`: the audit trail (docs/audit.md). `verify` downloads the chain
//! and checks every hash and link here, with the hash the server uses
//! (`nacelle_api::audit`), so it does not take the server's word for it.

use nacelle_client::AuditQuery;
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::{connect, Conn};

// `nacelle audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AuditCommand {
    /// List entries, newest first.
    Ls(LsArgs),
    /// Verify the hash chain (downloaded and checked locally); exits 1 naming the first
    /// bad entry.
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
struct LsArgs {
    /// From this time: ms since the epoch, or an age (`30m`, `2h`, `7d`).
    #[arg(long)]
    since: Option<String>,
    /// Before this time: ms since the epoch, or an age.
    #[arg(long)]
    until: Option<String>,
    /// Only this user's entries.
    #[arg(long)]
    user: Option<String>,
    /// Only targets starting with this (`public/DEFAULT_GROUP/app.yaml`, `dev/`, a user).
    #[arg(long)]
    key: Option<String>,
    /// Only this action (`publish`, `remove`, `login-failed`, …).
    #[arg(long)]
    action: Option<String>,
    /// Page number (from 1).
    #[arg(long, default_value_t = 1)]
    page: u32,
    /// Page size (at most 500).
    #[arg(long, default_value_t = 50)]
    size: u32,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    #[command(flatten)]
    conn: Conn,
}

pub(crate) async fn audit(a: AuditArgs) -> Result<()> {
    match a.command {
        AuditCommand::Ls(a) => ls(a).await,
        AuditCommand::Verify(a) => verify(a).await,
    }
}

/// A time as `--since`/`--until` take it: ms since the epoch, or an age before now
/// (`<n>s|m|h|d`).
fn time_arg(name: &str, raw: &str, now_ms: i64) -> Result<i64> {
    let raw = raw.trim();
    if let Ok(ms) = raw.parse::<i64>() {
        return Ok(ms);
    }
    let (digits, unit) = raw.split_at(raw.len().saturating_sub(1));
    let per = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match digits.parse::<i64>() {
        Ok(n) if per > 0 && n >= 0 => Ok(now_ms.saturating_sub(n.saturating_mul(per))),
        _ => Err(CliError::Usage(format!(
            "--{name} `{raw}`: give ms since the epoch or an age such as 30m, 2h, 7d"
        ))),
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

async fn ls(a: LsArgs) -> Result<()> {
    let now = now_ms();
    let q = AuditQuery {
        since_ms: a
            .since
            .as_deref()
            .map(|s| time_arg("since", s, now))
            .transpose()?,
        until_ms: a
            .until
            .as_deref()
            .map(|s| time_arg("until", s, now))
            .transpose()?,
        user: a.user.clone(),
        key: a.key.clone(),
        action: a.action.clone(),
        page_no: a.page,
        page_size: a.size,
    };
    let client = connect(&a.conn).await?;
    let page = client.admin().audit(&q).await?;
    output::page(
        a.conn.output,
        &page,
        &[
            "SEQ", "TIME_MS", "USER", "ADDRESS", "ACTION", "TARGET", "OUTCOME", "DETAIL",
        ],
        |e| {
            json!({"seq": e.seq, "time": e.time, "user": e.user, "address": e.address,
                "protocol": e.protocol, "action": e.action, "target": e.target,
                "outcome": e.outcome, "detail": e.detail, "changeId": e.change_id,
                "prevHash": e.prev_hash, "hash": e.hash})
        },
        |e| {
            vec![
                e.seq.to_string(),
                e.time.to_string(),
                e.user.clone(),
                e.address.clone(),
                e.action.clone(),
                e.target.clone(),
                e.outcome.clone(),
                e.detail.clone(),
            ]
        },
    );
    Ok(())
}

async fn verify(a: VerifyArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let check = client.admin().verify_audit().await?;
    match (&check.broken, a.conn.output) {
        (None, Output::Json) => output::json(&json!({"ok": true, "checked": check.checked,
            "anchorSeq": check.anchor_seq})),
        (None, Output::Table) => println!(
            "audit chain verified: {} entries after seq {}",
            check.checked, check.anchor_seq
        ),
        (Some(b), Output::Json) => output::json(&json!({"ok": false, "checked": check.checked,
            "anchorSeq": check.anchor_seq, "seq": b.seq, "problem": b.problem.name(),
            "message": b.to_string()})),
        (Some(_), Output::Table) => {}
    }
    match check.broken {
        None => Ok(()),
        Some(b) => Err(CliError::AuditBroken(b.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_epoch_ms_or_ages() {
        let now = 10_000_000;
        assert!(matches!(time_arg("since", "1234", now), Ok(1234)));
        assert!(matches!(time_arg("since", "2h", now), Ok(t) if t == now - 7_200_000));
        assert!(matches!(time_arg("since", "1d", now), Ok(t) if t == now - 86_400_000));
        assert!(time_arg("since", "yesterday", now).is_err());
        assert!(time_arg("since", "h", now).is_err());
    }
}
