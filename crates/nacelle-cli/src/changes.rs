//! `change create|ls|show|diff|open|approve|reject|comment|rebase|close|publish|schedule`
//! and `policy ls|set|rm`: change requests and review policies over the client's admin
//! calls (`docs/change-requests.md`).

use std::path::PathBuf;

use nacelle_client::{ChangeAction, ChangeEdit, ChangeRequest, NewChange};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::output::{self, Output};
use crate::{connect, Conn};

// `nacelle change`.
#[derive(Debug, clap::Args)]
pub struct ChangeArgs {
    #[command(subcommand)]
    cmd: ChangeCommand,
}

// A request named by its id, with the version the user saw (optional).
#[derive(Debug, clap::Args)]
pub struct IdArgs {
    /// The change request's id.
    id: i64,
    /// Act only if the request is still at this version (what `show` printed).
    #[arg(long)]
    version: Option<i64>,
    #[command(flatten)]
    conn: Conn,
}

// A request named by its id, with a text.
#[derive(Debug, clap::Args)]
pub struct TextArgs {
    /// The change request's id.
    id: i64,
    /// The comment or reason.
    #[arg(long, short = 'm')]
    message: Option<String>,
    /// Act only if the request is still at this version.
    #[arg(long)]
    version: Option<i64>,
    #[command(flatten)]
    conn: Conn,
}

// The change-request commands.
#[derive(Debug, clap::Subcommand)]
pub enum ChangeCommand {
    /// Open a change request over one or more keys.
    #[command(after_help = "Examples:\n  \
        nacelle change create -t 'raise limits' --put limits.yaml=./limits.yaml --put app.yaml=./app.yaml\n  \
        nacelle change create -t 'drop old' --rm old.yaml -g SHOP -n prod --draft\n\n\
        --put DATA_ID=FILE publishes the file's content (type from the extension);\n\
        --rm DATA_ID removes the key. Both use the group of -g (default DEFAULT_GROUP).")]
    Create(CreateArgs),
    /// List change requests, newest first.
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle change ls\n  nacelle change ls --state open -n prod -o json"
    )]
    Ls {
        /// Only requests in this state (draft, open, approved, rejected, published, closed).
        #[arg(long)]
        state: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// Show a change request: its keys, approvals and events.
    #[command(
        after_help = "Examples:\n  nacelle change show 12\n  nacelle change show 12 -o json"
    )]
    Show(IdArgs),
    /// Unified diff of every key of a request against the server.
    #[command(after_help = "Examples:\n  nacelle change diff 12")]
    Diff(IdArgs),
    /// Open a draft (or a rejected request) for review.
    Open(IdArgs),
    /// Approve a request (not your own; needs permission `a` on its keys).
    #[command(
        after_help = "Examples:\n  nacelle change approve 12 --version 3 -m 'checked the dashboards'"
    )]
    Approve(TextArgs),
    /// Reject a request, with a reason.
    #[command(after_help = "Examples:\n  nacelle change reject 12 -m 'limit too high'")]
    Reject(TextArgs),
    /// Comment on a request.
    Comment(TextArgs),
    /// Take the keys' current versions as the request's bases (after a stale publish).
    Rebase(IdArgs),
    /// Abandon a request.
    Close(TextArgs),
    /// Publish every key of an approved request in one transaction.
    #[command(after_help = "Examples:\n  nacelle change publish 12")]
    Publish(IdArgs),
    /// Publish an approved request at a time (ms since the epoch, or RFC 3339), or clear it.
    #[command(
        after_help = "Examples:\n  nacelle change schedule 12 --at 2026-12-24T06:00:00Z\n  nacelle change schedule 12 --clear"
    )]
    Schedule {
        /// The change request's id.
        id: i64,
        /// When: RFC 3339 (`2026-12-24T06:00:00Z`) or ms since the epoch.
        #[arg(long, conflicts_with = "clear", required_unless_present = "clear")]
        at: Option<String>,
        /// Unschedule it.
        #[arg(long)]
        clear: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

// `nacelle change create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Its title.
    #[arg(long, short = 't')]
    title: String,
    /// Why (shown to reviewers).
    #[arg(long, short = 'd', default_value = "", hide_default_value = true)]
    description: String,
    /// Publish a file's content: DATA_ID=FILE (repeatable).
    #[arg(long = "put", value_name = "DATA_ID=FILE")]
    puts: Vec<String>,
    /// Remove a key: DATA_ID (repeatable).
    #[arg(long = "rm", value_name = "DATA_ID")]
    removes: Vec<String>,
    /// The keys' group.
    #[arg(long, short = 'g', default_value = nacelle_client::DEFAULT_GROUP)]
    group: String,
    /// Create it as a draft (open it for review later).
    #[arg(long)]
    draft: bool,
    #[command(flatten)]
    conn: Conn,
}

pub(crate) async fn change(a: ChangeArgs) -> Result<()> {
    match a.cmd {
        ChangeCommand::Create(c) => create(c).await,
        ChangeCommand::Ls { state, conn } => ls(state, conn).await,
        ChangeCommand::Show(i) => show(i).await,
        ChangeCommand::Diff(i) => diff(i).await,
        ChangeCommand::Open(i) => act(i.id, ChangeAction::Open, i.version, None, i.conn).await,
        ChangeCommand::Rebase(i) => act(i.id, ChangeAction::Rebase, i.version, None, i.conn).await,
        ChangeCommand::Publish(i) => {
            act(i.id, ChangeAction::Publish, i.version, None, i.conn).await
        }
        ChangeCommand::Approve(t) => {
            act(t.id, ChangeAction::Approve, t.version, t.message, t.conn).await
        }
        ChangeCommand::Reject(t) => {
            act(t.id, ChangeAction::Reject, t.version, t.message, t.conn).await
        }
        ChangeCommand::Comment(t) => {
            act(t.id, ChangeAction::Comment, t.version, t.message, t.conn).await
        }
        ChangeCommand::Close(t) => {
            act(t.id, ChangeAction::Close, t.version, t.message, t.conn).await
        }
        ChangeCommand::Schedule {
            id,
            at,
            clear: _,
            conn,
        } => schedule(id, at, conn).await,
    }
}

fn change_json(c: &ChangeRequest) -> serde_json::Value {
    json!({
        "id": c.id, "namespace": c.namespace_id, "title": c.title,
        "description": c.description, "author": c.author, "state": c.state,
        "stale": c.stale, "version": c.version, "created": c.created_time,
        "updated": c.updated_time, "publishAt": c.publish_at, "items": c.item_count,
        "requiredApprovals": c.required_approvals, "approvers": c.approvers,
        "keys": c.items.iter().map(|i| json!({"group": i.group, "dataId": i.data_id,
            "op": i.op, "type": i.content_type, "baseMd5": i.base_md5})).collect::<Vec<_>>(),
        "events": c.events.iter().map(|e| json!({"kind": e.kind, "user": e.user,
            "time": e.time, "text": e.text})).collect::<Vec<_>>(),
    })
}

/// The items `--put` and `--rm` describe.
fn items_of(a: &CreateArgs) -> Result<Vec<ChangeEdit>> {
    let mut items = Vec::new();
    for put in &a.puts {
        let (data_id, file) = put
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--put takes DATA_ID=FILE, not `{put}`")))?;
        let path = PathBuf::from(file);
        let content = std::fs::read_to_string(&path)
            .map_err(CliError::io(format!("reading {}", path.display())))?;
        items.push(ChangeEdit::Publish {
            group: a.group.clone(),
            data_id: data_id.to_string(),
            content,
            content_type: None,
        });
    }
    for data_id in &a.removes {
        items.push(ChangeEdit::Remove {
            group: a.group.clone(),
            data_id: data_id.clone(),
        });
    }
    if items.is_empty() {
        return Err(CliError::Usage(
            "a change request needs at least one --put or --rm".into(),
        ));
    }
    Ok(items)
}

async fn create(a: CreateArgs) -> Result<()> {
    let items = items_of(&a)?;
    let client = connect(&a.conn).await?;
    let change = NewChange {
        namespace: None,
        title: a.title.clone(),
        description: a.description.clone(),
        draft: a.draft,
        items,
    };
    let c = client.admin().create_change(&change).await?;
    print_one(&c, a.conn.output, "created");
    Ok(())
}

async fn ls(state: Option<String>, conn: Conn) -> Result<()> {
    let client = connect(&conn).await?;
    let page = client
        .admin()
        .changes(None, state.as_deref(), 1, 100)
        .await?;
    output::list(
        conn.output,
        &page.page_items,
        &["ID", "STATE", "AUTHOR", "KEYS", "TITLE"],
        change_json,
        |c| {
            let state = if c.stale {
                format!("{} (stale)", c.state)
            } else {
                c.state.clone()
            };
            vec![
                c.id.to_string(),
                state,
                c.author.clone(),
                c.item_count.to_string(),
                c.title.clone(),
            ]
        },
    );
    if conn.output == Output::Table && page.total_count > page.page_items.len() as u64 {
        eprintln!(
            "{} of {} shown (newest first)",
            page.page_items.len(),
            page.total_count
        );
    }
    Ok(())
}

fn print_one(c: &ChangeRequest, out: Output, verb: &str) {
    match out {
        Output::Json => output::json(&change_json(c)),
        Output::Table => {
            let stale = if c.stale { ", stale: rebase it" } else { "" };
            println!(
                "change request {} {verb}: {} (version {}{stale})",
                c.id, c.state, c.version
            );
            println!("  {}", c.title);
            if let Some(n) = c.required_approvals {
                let who = if c.approvers.is_empty() {
                    "none yet".to_string()
                } else {
                    c.approvers.join(", ")
                };
                println!("  approvals: {} of {n} needed ({who})", c.approvers.len());
            }
            for i in &c.items {
                println!("  {} {}/{}", i.op, i.group, i.data_id);
            }
        }
    }
}

async fn show(i: IdArgs) -> Result<()> {
    let client = connect(&i.conn).await?;
    let c = client.admin().change(i.id).await?;
    match i.conn.output {
        Output::Json => output::json(&change_json(&c)),
        Output::Table => {
            print_one(&c, Output::Table, "is");
            println!("  by {} in namespace {}", c.author, c.namespace_id);
            if !c.description.is_empty() {
                println!("  {}", c.description);
            }
            for e in &c.events {
                let text = if e.text.is_empty() {
                    String::new()
                } else {
                    format!(": {}", e.text)
                };
                println!("  {} {} {}{text}", e.time, e.kind, e.user);
            }
        }
    }
    Ok(())
}

async fn diff(i: IdArgs) -> Result<()> {
    let client = connect(&i.conn).await?;
    let diffs = client.admin().change_diff(i.id).await?;
    match i.conn.output {
        Output::Json => output::json(&json!(diffs
            .iter()
            .map(
                |d| json!({"group": d.group, "dataId": d.data_id, "op": d.op,
                "moved": d.moved, "diff": d.diff})
            )
            .collect::<Vec<_>>())),
        Output::Table => {
            for d in &diffs {
                if d.moved {
                    eprintln!(
                        "note: {}/{} changed on the server since the request was based",
                        d.group, d.data_id
                    );
                }
                print!("{}", d.diff);
                if d.diff.is_empty() {
                    println!("# {}/{}: no difference", d.group, d.data_id);
                }
            }
        }
    }
    Ok(())
}

async fn act(
    id: i64,
    action: ChangeAction,
    version: Option<i64>,
    message: Option<String>,
    conn: Conn,
) -> Result<()> {
    let client = connect(&conn).await?;
    let text = message.unwrap_or_default();
    let c = client
        .admin()
        .change_action(id, action, version, &text)
        .await?;
    let verb = match action {
        ChangeAction::Open => "opened",
        ChangeAction::Approve => "approved",
        ChangeAction::Reject => "rejected",
        ChangeAction::Comment => "commented",
        ChangeAction::Rebase => "rebased",
        ChangeAction::Close => "closed",
        ChangeAction::Publish => "published",
    };
    print_one(&c, conn.output, verb);
    Ok(())
}

/// `at` as ms since the epoch: a number, or RFC 3339.
fn parse_time(at: &str) -> Result<i64> {
    if let Ok(ms) = at.trim().parse::<i64>() {
        return Ok(ms);
    }
    chrono::DateTime::parse_from_rfc3339(at.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| CliError::Usage(format!("--at `{at}`: not ms nor RFC 3339 ({e})")))
}

async fn schedule(id: i64, at: Option<String>, conn: Conn) -> Result<()> {
    let at = at.as_deref().map(parse_time).transpose()?;
    let client = connect(&conn).await?;
    let c = client.admin().schedule_change(id, at).await?;
    print_one(&c, conn.output, "scheduled");
    Ok(())
}

// `nacelle policy`.
#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    cmd: PolicyCommand,
}

// The review-policy commands.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// List the review policies.
    #[command(visible_alias = "list")]
    Ls {
        #[command(flatten)]
        conn: Conn,
    },
    /// Require reviewed change requests for a namespace's groups (administrators).
    #[command(
        after_help = "Examples:\n  nacelle policy set -n prod --approvals 2\n  nacelle policy set -n prod --group 'PAY*' --approvals 1"
    )]
    Set {
        /// Group pattern (`*` globs).
        #[arg(long, short = 'g', default_value = "*")]
        group: String,
        /// Approvals a request needs (1 to 10).
        #[arg(long)]
        approvals: u32,
        #[command(flatten)]
        conn: Conn,
    },
    /// Remove a policy (administrators).
    Rm {
        /// Group pattern.
        #[arg(long, short = 'g', default_value = "*")]
        group: String,
        #[command(flatten)]
        conn: Conn,
    },
}

pub(crate) async fn policy(a: PolicyArgs) -> Result<()> {
    match a.cmd {
        PolicyCommand::Ls { conn } => {
            let client = connect(&conn).await?;
            let all = client.admin().review_policies().await?;
            output::list(
                conn.output,
                &all,
                &["NAMESPACE", "GROUP", "APPROVALS", "SET BY"],
                |p| {
                    json!({"namespace": p.namespace_id, "group": p.group_pattern,
                        "approvals": p.required_approvals, "updatedBy": p.updated_by,
                        "updated": p.updated_time})
                },
                |p| {
                    vec![
                        p.namespace_id.clone(),
                        p.group_pattern.clone(),
                        p.required_approvals.to_string(),
                        p.updated_by.clone(),
                    ]
                },
            );
            Ok(())
        }
        PolicyCommand::Set {
            group,
            approvals,
            conn,
        } => {
            if approvals == 0 {
                return Err(CliError::Usage(
                    "--approvals must be at least 1 (`nacelle policy rm` removes a policy)".into(),
                ));
            }
            set(&group, approvals, conn).await
        }
        PolicyCommand::Rm { group, conn } => set(&group, 0, conn).await,
    }
}

async fn set(group: &str, approvals: u32, conn: Conn) -> Result<()> {
    let client = connect(&conn).await?;
    let ns = client.namespace().to_string();
    client
        .admin()
        .set_review_policy(&ns, group, approvals)
        .await?;
    let label = output::ns_label(&ns);
    match conn.output {
        Output::Json => output::json(&json!({"namespace": label, "group": group,
            "approvals": approvals})),
        Output::Table if approvals == 0 => {
            println!("removed the review policy of {label} groups `{group}`")
        }
        Output::Table => println!(
            "namespace {label}, groups `{group}`: direct writes refused, change requests need {approvals} approval(s)"
        ),
    }
    Ok(())
}
