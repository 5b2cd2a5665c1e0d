//! `schema`: the JSON Schemas of config keys (`docs/schema-validation.md`) — set, get,
//! ls, rm, and check a file against the schemas of a key without publishing it.

use std::path::PathBuf;

use nacelle_client::{Schema, DEFAULT_GROUP};
use serde_json::json;

use crate::error::{CliError, Result};
use crate::input;
use crate::output::{self, ns_label, Output};
use crate::{connect, Conn};

// `nacelle schema`.
#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    #[command(subcommand)]
    cmd: SchemaCommand,
    #[command(flatten)]
    pub(crate) conn: Conn,
}

// A schema's patterns (in the namespace of `-n`).
#[derive(Debug, Clone, clap::Args)]
pub struct Patterns {
    /// The group pattern: `*`, `x*`, `*x`, `*x*` or a group.
    #[arg(long, short = 'g', default_value = DEFAULT_GROUP)]
    group: String,
    /// The dataId pattern, of the same shapes (`'*.yaml'`).
    #[arg(long, short = 'd')]
    data_id: String,
}

// The schema commands.
#[derive(Debug, clap::Subcommand)]
pub enum SchemaCommand {
    /// Set (create or replace) the schema of a group and dataId pattern (administrators).
    Set {
        #[command(flatten)]
        patterns: Patterns,
        /// The JSON Schema file; `-`: stdin.
        #[arg(long, short = 'f')]
        file: PathBuf,
        /// What the schema is for.
        #[arg(long, default_value = "", hide_default_value = true)]
        desc: String,
    },
    /// Print a schema.
    Get {
        #[command(flatten)]
        patterns: Patterns,
    },
    /// List the schemas of the namespace (or of every namespace with --all).
    Ls {
        /// Every namespace.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
        all: bool,
    },
    /// Remove a schema (administrators).
    Rm {
        #[command(flatten)]
        patterns: Patterns,
    },
    /// Check a file against the schemas of a key, without publishing it.
    Check {
        /// The key's data id.
        key: String,
        /// The file; `-`: stdin.
        file: PathBuf,
        /// The key's group.
        #[arg(long, short = 'g', default_value = DEFAULT_GROUP)]
        group: String,
        /// The content's type (default: from the file's extension, else the key's).
        #[arg(long = "type", short = 't')]
        content_type: Option<String>,
    },
}

fn schema_json(s: &Schema) -> serde_json::Value {
    json!({"namespace": s.namespace_id, "group": s.group, "dataId": s.data_id,
           "schema": s.schema, "description": s.description, "srcUser": s.src_user,
           "modifiedTime": s.modified_time})
}

pub(crate) async fn schema(a: SchemaArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let admin = client.admin();
    let ns = client.namespace().to_string();
    let out = a.conn.output;
    match a.cmd {
        SchemaCommand::Set {
            patterns,
            file,
            desc,
        } => {
            let text = input::read_content(Some(&file))?;
            let set = admin
                .set_schema(&ns, &patterns.group, &patterns.data_id, &text, &desc)
                .await?;
            match out {
                Output::Json => output::json(&schema_json(&set)),
                Output::Table => println!(
                    "schema set: {}>>{}>>{}",
                    ns_label(&set.namespace_id),
                    set.group,
                    set.data_id
                ),
            }
        }
        SchemaCommand::Get { patterns } => {
            let s = admin
                .schema(&ns, &patterns.group, &patterns.data_id)
                .await?;
            match out {
                Output::Json => output::json(&schema_json(&s)),
                Output::Table => {
                    let pretty = serde_json::to_string_pretty(&s.schema)
                        .unwrap_or_else(|_| s.schema.to_string());
                    println!("{pretty}");
                }
            }
        }
        SchemaCommand::Ls { all } => {
            let list = admin.schemas((!all).then_some(ns.as_str())).await?;
            output::list(
                out,
                &list,
                &["NAMESPACE", "GROUP", "DATA ID", "BY", "DESCRIPTION"],
                schema_json,
                |s| {
                    vec![
                        ns_label(&s.namespace_id).to_string(),
                        s.group.clone(),
                        s.data_id.clone(),
                        s.src_user.clone(),
                        s.description.clone(),
                    ]
                },
            );
        }
        SchemaCommand::Rm { patterns } => {
            admin
                .remove_schema(&ns, &patterns.group, &patterns.data_id)
                .await?;
            match out {
                Output::Json => output::json(&json!({"removed": true})),
                Output::Table => println!(
                    "schema removed: {}>>{}>>{}",
                    ns_label(&ns),
                    patterns.group,
                    patterns.data_id
                ),
            }
        }
        SchemaCommand::Check {
            key,
            file,
            group,
            content_type,
        } => {
            let content = input::read_content(Some(&file))?;
            let content_type = content_type
                .or_else(|| crate::configs::type_of_name(&file.to_string_lossy()))
                .or_else(|| crate::configs::type_of_name(&key));
            let check = admin
                .check_schemas(&ns, &group, &key, content_type.as_deref(), &content)
                .await?;
            match out {
                Output::Json => output::json(&json!({
                    "valid": check.valid,
                    "schemas": check.schemas,
                    "problems": check.problems.iter().map(|p| json!({
                        "schema": p.schema, "document": p.document, "path": p.path,
                        "rule": p.rule, "schemaPath": p.schema_path, "message": p.message,
                    })).collect::<Vec<_>>(),
                })),
                Output::Table if check.schemas.is_empty() => {
                    println!("no schema applies to {group}/{key}")
                }
                Output::Table => {
                    for p in &check.problems {
                        println!("{}", p.text);
                    }
                    if check.valid {
                        println!("valid against {}", check.schemas.join(", "));
                    }
                }
            }
            if !check.valid {
                return Err(CliError::Rejected(format!(
                    "{} problem(s) against the schemas of {group}/{key}",
                    check.problems.len()
                )));
            }
        }
    }
    Ok(())
}
