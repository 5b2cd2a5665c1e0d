//! `rollout start|ls|status|pause|resume|advance|abort`: staged rollouts over the client's
//! admin calls (`docs/rollouts.md`).

use std::path::PathBuf;
use std::time::Duration;

use nacelle_client::{NewRollout, PromGuard, Rollout, RolloutAction};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::input;
use crate::output::{self, Output};
use crate::{connect, Conn, KeyArgs};

// `nacelle rollout`.
#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    cmd: RolloutCommand,
}

// A rollout named by its id, with a reason.
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The rollout's id.
    id: i64,
    /// Why (recorded with a pause or an abort).
    #[arg(long, short = 'm', default_value = "", hide_default_value = true)]
    message: String,
    #[command(flatten)]
    conn: Conn,
}

// The rollout commands.
#[derive(Debug, clap::Subcommand)]
pub enum RolloutCommand {
    /// Roll a new content of a key out in growing steps, each baked under guards.
    #[command(after_help = "Examples:\n  \
        nacelle rollout start app.yaml ./app.yaml --steps 5,25,50,100 --bake 10m \\\n      \
        --guard-prom 'sum(rate(http_errors_total{app=\"shop\"}[1m])) > 1'\n  \
        nacelle rollout start app.yaml ./app.yaml --steps 10,100 --bake 30s \\\n      \
        --canary-labels env=canary --guard-http http://shop/health --guard-delivery 30s\n  \
        nacelle rollout start app.yaml ./app.yaml --steps 50,100 --manual\n\n\
        Steps are shares of all clients in percent (a client stays in as the share grows);\n\
        --canary-labels/--canary-ips add a first step for those clients. Each step bakes for\n\
        --bake (units ms, s, m, h), then the next starts (with --manual: on `rollout advance`);\n\
        the last promotes the content. Any failing guard rolls the rollout back.")]
    Start(Box<StartArgs>),
    /// List rollouts, newest first.
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle rollout ls\n  nacelle rollout ls --active -o json"
    )]
    Ls {
        /// Only running and paused ones.
        #[arg(long)]
        active: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a rollout: its state, step, guards and last reason.
    #[command(
        visible_alias = "show",
        after_help = "Examples:\n  nacelle rollout status 12"
    )]
    Status(IdArgs),
    /// Hold a running rollout at its step (its gray stays; nothing advances).
    #[command(after_help = "Examples:\n  nacelle rollout pause 12 -m 'checking a graph'")]
    Pause(IdArgs),
    /// Resume a paused rollout (its step bakes again from now).
    Resume(IdArgs),
    /// Release the current step: the next starts now (how a --manual rollout advances).
    Advance(IdArgs),
    /// Stop a rollout: its gray is stopped, the formal config stays.
    #[command(after_help = "Examples:\n  nacelle rollout abort 12 -m 'wrong file'")]
    Abort(IdArgs),
}

// `nacelle rollout start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The new content: a file; `-` or nothing: stdin.
    file: Option<PathBuf>,
    /// Shares of clients in percent, increasing (e.g. 5,25,50,100).
    #[arg(long, value_delimiter = ',', required = true)]
    steps: Vec<f64>,
    /// How long each step bakes (`500ms`, `30s`, `10m`, `1h`).
    #[arg(long, default_value = "10m")]
    bake: String,
    /// A canary step first: clients with all these labels (`k=v,k2=v2`), or a label
    /// expression (`env=pre&&region=hz,sh||canary=true`).
    #[arg(long)]
    canary_labels: Option<String>,
    /// A canary step first: clients at these IPs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    canary_ips: Vec<String>,
    /// Roll back when this Prometheus instant query returns anything.
    #[arg(long)]
    guard_prom: Option<String>,
    /// ... or only when one of its values is above this.
    #[arg(long, requires = "guard_prom", allow_negative_numbers = true)]
    guard_prom_threshold: Option<f64>,
    /// The Prometheus to ask (default: the server's --prometheus-url).
    #[arg(long, requires = "guard_prom")]
    guard_prom_url: Option<String>,
    /// Roll back when this URL answers non-2xx or not at all.
    #[arg(long)]
    guard_http: Option<String>,
    /// Roll back when a cohort client has not taken the new version this long after
    /// being told (`30s`).
    #[arg(long)]
    guard_delivery: Option<String>,
    /// Advance only on `nacelle rollout advance`.
    #[arg(long)]
    manual: bool,
    /// Content type (default: the formal config's).
    #[arg(long = "type", short = 't')]
    content_type: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

/// `10m`, `30s`, `500ms`, `1h`, or a bare number of seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let bad = || {
        CliError::Usage(format!(
            "`{s}` is not a duration (e.g. 500ms, 30s, 10m, 1h)"
        ))
    };
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// `k=v,k2=v2` (every comma-separated item a pair) as the expression `k=v&&k2=v2`; any
/// other text (an expression with `&&`, `||`, or a value list `k=v1,v2`) as it is.
pub(crate) fn canary_expr(labels: &str) -> String {
    let items: Vec<&str> = labels.split(',').map(str::trim).collect();
    let pairs = items.len() > 1 && items.iter().all(|i| i.contains('='));
    if pairs && !labels.contains("&&") && !labels.contains("||") {
        items.join("&&")
    } else {
        labels.trim().to_string()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(crate) async fn rollout(a: RolloutArgs) -> Result<()> {
    match a.cmd {
        RolloutCommand::Start(s) => start(*s).await,
        RolloutCommand::Ls { active, conn } => ls(active, conn).await,
        RolloutCommand::Status(i) => {
            let client = connect(&i.conn).await?;
            let r = client.admin().rollout(i.id).await?;
            print_one(&r, i.conn.output, "is");
            Ok(())
        }
        RolloutCommand::Pause(i) => act(i, RolloutAction::Pause, "paused").await,
        RolloutCommand::Resume(i) => act(i, RolloutAction::Resume, "resumed").await,
        RolloutCommand::Advance(i) => act(i, RolloutAction::Advance, "released").await,
        RolloutCommand::Abort(i) => act(i, RolloutAction::Abort, "aborted").await,
    }
}

async fn start(a: StartArgs) -> Result<()> {
    let bake = parse_duration(&a.bake)?;
    let delivery = a
        .guard_delivery
        .as_deref()
        .map(parse_duration)
        .transpose()?;
    let content = input::read_content(a.file.as_deref())?;
    let plan = NewRollout {
        steps: a.steps.clone(),
        bake_ms: millis(bake),
        manual: a.manual,
        canary_labels: a.canary_labels.as_deref().map(canary_expr),
        canary_ips: a.canary_ips.clone(),
        prometheus: a.guard_prom.clone().map(|query| PromGuard {
            query,
            threshold: a.guard_prom_threshold,
            url: a.guard_prom_url.clone(),
        }),
        health_url: a.guard_http.clone(),
        delivery_ms: delivery.map(millis),
        content_type: a.content_type.clone(),
    };
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let r = client.admin().start_rollout(key, &content, &plan).await?;
    print_one(&r, a.conn.output, "started");
    Ok(())
}

async fn act(i: IdArgs, action: RolloutAction, verb: &str) -> Result<()> {
    let client = connect(&i.conn).await?;
    let r = client
        .admin()
        .rollout_action(i.id, action, &i.message)
        .await?;
    print_one(&r, i.conn.output, verb);
    Ok(())
}

fn rollout_json(r: &Rollout) -> serde_json::Value {
    json!({"id": r.id, "namespaceId": r.namespace_id, "group": r.group, "dataId": r.data_id,
           "state": r.state, "step": r.step, "steps": r.steps, "percent": r.percent,
           "bakeMs": r.bake_ms, "manual": r.manual, "guards": r.guards, "md5": r.md5,
           "stepStartedTime": r.step_started_time, "reason": r.reason,
           "leaseHolder": r.lease_holder, "author": r.author, "createdTime": r.created_time,
           "cohort": r.cohort.as_ref().map(|c| json!({
               "listeners": c.listeners, "cohort": c.cohort, "holding": c.holding,
               "complete": c.complete,
               "nodes": c.nodes.iter().map(|n| json!({"node": n.node, "listeners": n.listeners,
                   "cohort": n.cohort, "holding": n.holding, "error": n.error}))
                   .collect::<Vec<_>>()}))})
}

fn stage_text(r: &Rollout) -> String {
    match r.stages.get(r.step.saturating_sub(1) as usize) {
        Some(s) if s.kind == "canary" => "canary".to_string(),
        _ => format!("{}%", r.percent),
    }
}

async fn ls(active: bool, conn: Conn) -> Result<()> {
    let client = connect(&conn).await?;
    let all = client.admin().rollouts(active, 100).await?;
    output::list(
        conn.output,
        &all,
        &["ID", "KEY", "STATE", "STEP", "REASON"],
        rollout_json,
        |r| {
            vec![
                r.id.to_string(),
                format!("{}/{}", r.group, r.data_id),
                r.state.clone(),
                format!("{}/{} ({})", r.step, r.steps, stage_text(r)),
                r.reason.clone(),
            ]
        },
    );
    if conn.output == Output::Table && all.is_empty() {
        eprintln!("no rollout");
    }
    Ok(())
}

fn print_one(r: &Rollout, out: Output, verb: &str) {
    match out {
        Output::Json => output::json(&rollout_json(r)),
        Output::Table => {
            println!(
                "rollout {} {verb}: {} at step {}/{} ({}) of {}/{}",
                r.id,
                r.state,
                r.step,
                r.steps,
                stage_text(r),
                r.group,
                r.data_id
            );
            let steps: Vec<String> = r
                .stages
                .iter()
                .map(|s| match (&s.rule, s.percent) {
                    (Some(rule), _) => format!("canary({rule})"),
                    (None, Some(p)) => format!("{p}%"),
                    _ => "?".into(),
                })
                .collect();
            let mode = if r.manual { "manual" } else { "automatic" };
            println!(
                "  steps {}; bake {} ms; {mode}",
                steps.join(" → "),
                r.bake_ms
            );
            if r.guards.as_object().is_some_and(|g| !g.is_empty()) {
                println!("  guards {}", r.guards);
            }
            if !r.reason.is_empty() {
                println!("  {}", r.reason);
            }
            if !r.lease_holder.is_empty() {
                println!("  driven by {}", r.lease_holder);
            }
            if let Some(c) = &r.cohort {
                let partial = if c.complete {
                    ""
                } else {
                    " (not every node answered)"
                };
                println!(
                    "  cohort {} of {} listening clients, {} holding this step's version{partial}",
                    c.cohort, c.listeners, c.holding
                );
                for n in &c.nodes {
                    match &n.error {
                        Some(e) => println!("    {}: unknown ({e})", n.node),
                        None => println!(
                            "    {}: {} of {}, {} holding",
                            n.node, n.cohort, n.listeners, n.holding
                        ),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10m").ok(), Some(Duration::from_secs(600)));
        assert_eq!(
            parse_duration("500ms").ok(),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_duration("1.5h").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("30").ok(), Some(Duration::from_secs(30)));
        assert!(parse_duration("10 minutes").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn canary_labels() {
        assert_eq!(canary_expr("env=canary,zone=a"), "env=canary&&zone=a");
        assert_eq!(canary_expr("env=canary"), "env=canary");
        assert_eq!(canary_expr("region=hz,sh"), "region=hz,sh");
        assert_eq!(canary_expr("a=1&&b=2,3"), "a=1&&b=2,3");
    }
}
