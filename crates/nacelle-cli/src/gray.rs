//! `gray ls|create|promote|stop`: gray releases of a key over the client's HTTP admin
//! calls (`docs/gray-release.md`).

use std::path::PathBuf;

use nacelle_client::{GrayRule, GrayVariant, BETA_GRAY_NAME};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::input;
use crate::output::{self, Output};
use crate::{connect, Conn, KeyArgs};

// `nacelle gray`.
#[derive(Debug, clap::Args)]
pub struct GrayArgs {
    #[command(subcommand)]
    cmd: GrayCommand,
}

// The gray commands.
#[derive(Debug, clap::Subcommand)]
pub enum GrayCommand {
    /// List a key's gray variants (highest priority first).
    #[command(
        visible_alias = "list",
        after_help = "Examples:\n  nacelle gray ls app.yaml\n  nacelle gray ls app.yaml -g SHOP -n prod -o json"
    )]
    Ls {
        #[command(flatten)]
        key: KeyArgs,
        #[command(flatten)]
        conn: Conn,
    },
    /// Publish a gray variant (the key needs a formal config) from a file or stdin.
    #[command(after_help = "Examples:\n  \
        nacelle gray create app.yaml ./canary.yaml --ips 10.0.0.7,10.1.0.0/16\n  \
        nacelle gray create app.yaml ./canary.yaml --app shop --name shop-canary --priority 10\n  \
        echo 'feature: on' | nacelle gray create app.yaml --labels 'env=pre&&region=hz,sh' --name pre\n\n\
        --ips makes the beta (its name is always `beta`, its priority the highest); --labels\n\
        and --app need a --name. A label expression joins `key=v1,v2` items with && and\n\
        clauses with ||; --app NAME is the expression AppName=NAME.")]
    Create(CreateArgs),
    /// Make a gray variant the formal config (and remove the variant).
    #[command(
        after_help = "Examples:\n  nacelle gray promote app.yaml              # the beta\n  nacelle gray promote app.yaml --name shop-canary"
    )]
    Promote(VariantArgs),
    /// Stop (abandon) a gray variant: its callers get the formal config back.
    #[command(
        visible_alias = "abandon",
        after_help = "Examples:\n  nacelle gray stop app.yaml                 # the beta\n  nacelle gray stop app.yaml --name shop-canary -o json"
    )]
    Stop(VariantArgs),
}

// One gray variant of a key (`promote`, `stop`).
#[derive(Debug, clap::Args)]
pub struct VariantArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The variant's name.
    #[arg(long, default_value = BETA_GRAY_NAME)]
    name: String,
    #[command(flatten)]
    conn: Conn,
}

// `nacelle gray create`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("rule").required(true).args(["ips", "labels", "app"])))]
pub struct CreateArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// The variant's content: a file; `-` or nothing: stdin.
    file: Option<PathBuf>,
    /// The beta: callers with these IPs or CIDRs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    ips: Vec<String>,
    /// A label expression (`env=pre&&region=hz,sh||canary=true`).
    #[arg(long)]
    labels: Option<String>,
    /// Every instance of this application (`AppName=<app>`).
    #[arg(long)]
    app: Option<String>,
    /// The variant's name (needed with --labels and --app).
    #[arg(long)]
    name: Option<String>,
    /// Its priority: higher is matched first (default 0, at most 2147483645).
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Content type (default: the server's formal config's).
    #[arg(long = "type", short = 't')]
    content_type: Option<String>,
    #[command(flatten)]
    conn: Conn,
}

pub(crate) async fn gray(a: GrayArgs) -> Result<()> {
    match a.cmd {
        GrayCommand::Ls { key, conn } => ls(key, conn).await,
        GrayCommand::Create(c) => create(c).await,
        GrayCommand::Promote(v) => promote(v).await,
        GrayCommand::Stop(v) => stop(v).await,
    }
}

fn gray_json(g: &GrayVariant) -> serde_json::Value {
    json!({"name": g.gray_name, "type": g.rule_type, "rule": g.expr,
           "priority": g.priority, "md5": g.md5, "lastModified": g.last_modified,
           "srcUser": g.src_user, "srcIp": g.src_ip, "content": g.content})
}

async fn ls(key: KeyArgs, conn: Conn) -> Result<()> {
    let client = connect(&conn).await?;
    let k = key.key(&client);
    let grays = client.admin().grays(k.clone()).await?;
    output::list(
        conn.output,
        &grays,
        &["NAME", "TYPE", "PRIORITY", "MD5", "RULE"],
        gray_json,
        |g| {
            vec![
                g.gray_name.clone(),
                g.rule_type.clone(),
                g.priority.to_string(),
                g.md5.clone(),
                g.expr.clone(),
            ]
        },
    );
    if conn.output == Output::Table && grays.is_empty() {
        eprintln!("no gray variant of {k}");
    }
    Ok(())
}

/// The rule the flags of `create` describe.
fn rule_of(a: &CreateArgs) -> Result<GrayRule> {
    if !a.ips.is_empty() {
        if a.name.as_deref().is_some_and(|n| n != BETA_GRAY_NAME) || a.priority.is_some() {
            return Err(CliError::Usage(
                "--ips makes the beta, whose name (`beta`) and priority are fixed; \
                 drop --name/--priority, or use --labels 'ClientIp=…' for a named rule"
                    .into(),
            ));
        }
        if a.ips.iter().any(|ip| ip.trim().is_empty()) {
            return Err(CliError::Usage("--ips has an empty entry".into()));
        }
        return Ok(GrayRule::Ips(a.ips.clone()));
    }
    let expr = match (&a.labels, &a.app) {
        (Some(l), None) => l.clone(),
        (None, Some(app)) => format!("AppName={app}"),
        _ => return Err(CliError::Usage("give one of --ips, --labels, --app".into())),
    };
    let name = a.name.clone().ok_or_else(|| {
        CliError::Usage("--labels and --app need a --name for the variant".into())
    })?;
    Ok(GrayRule::Labels {
        name,
        expr,
        priority: a.priority,
    })
}

async fn create(a: CreateArgs) -> Result<()> {
    let rule = rule_of(&a)?;
    let content = input::read_content(a.file.as_deref())?;
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    client
        .admin()
        .publish_gray(key.clone(), &content, &rule, a.content_type.as_deref())
        .await?;
    match a.conn.output {
        Output::Json => output::json(&json!({"created": true, "dataId": key.data_id,
            "group": key.group, "namespace": key.namespace, "name": rule.name(),
            "bytes": content.len()})),
        Output::Table => println!(
            "published gray `{}` of {key} ({} bytes)",
            rule.name(),
            content.len()
        ),
    }
    Ok(())
}

async fn promote(VariantArgs { key, name, conn }: VariantArgs) -> Result<()> {
    let client = connect(&conn).await?;
    let k = key.key(&client);
    client.admin().promote_gray(k.clone(), &name).await?;
    match conn.output {
        Output::Json => output::json(&json!({"promoted": true, "dataId": k.data_id,
            "group": k.group, "namespace": k.namespace, "name": name})),
        Output::Table => println!("promoted gray `{name}` of {k} to the formal config"),
    }
    Ok(())
}

async fn stop(VariantArgs { key, name, conn }: VariantArgs) -> Result<()> {
    let client = connect(&conn).await?;
    let k = key.key(&client);
    let admin = client.admin();
    // The server answers success for a variant that does not exist: ask first, so a
    // mistyped name says so (exit 3).
    if !admin
        .grays(k.clone())
        .await?
        .iter()
        .any(|g| g.gray_name == name)
    {
        return Err(CliError::NotFound(format!("no gray `{name}` of {k}")));
    }
    admin.stop_gray(k.clone(), &name).await?;
    match conn.output {
        Output::Json => output::json(&json!({"stopped": true, "dataId": k.data_id,
            "group": k.group, "namespace": k.namespace, "name": name})),
        Output::Table => println!("stopped gray `{name}` of {k}"),
    }
    Ok(())
}
