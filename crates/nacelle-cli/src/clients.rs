//! `nacelle clients KEY`: who runs what (docs/live-view.md) — every client listening to a
//! key on each node of the cluster, what it holds (the formal config, a gray, or an
//! unknown md5) and since when, with the counts.

use nacelle_client::KeyClients;

use crate::error::Result;
use crate::output::{self, Output};
use crate::{connect, Conn, KeyArgs};

// `nacelle clients`.
#[derive(Debug, clap::Args)]
pub struct ClientsArgs {
    #[command(flatten)]
    key: KeyArgs,
    /// Only the counts, not each client.
    #[arg(long)]
    summary: bool,
    #[command(flatten)]
    conn: Conn,
}

/// ms since the epoch as UTC time.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

fn short(md5: &str) -> &str {
    md5.get(..8).unwrap_or(md5)
}

fn counts_line(c: &nacelle_client::HoldCounts) -> String {
    let mut parts = vec![format!("{} formal", c.formal)];
    for (name, n) in &c.grays {
        parts.push(format!("{n} gray {name}"));
    }
    parts.push(format!("{} unknown", c.unknown));
    format!("{} clients: {}", c.total, parts.join(", "))
}

fn print_table(view: &KeyClients, summary: bool) {
    println!(
        "{}/{}/{}  formal md5 {}",
        output::ns_label(&view.namespace),
        view.group,
        view.data_id,
        if view.formal_md5.is_empty() {
            "-"
        } else {
            &view.formal_md5
        }
    );
    for g in &view.grays {
        println!("  gray {}  md5 {}", g.name, g.md5);
    }
    println!("cluster: {}", counts_line(&view.total));
    for n in &view.nodes {
        let me = if n.is_self { " (answering)" } else { "" };
        match &n.error {
            Some(e) => println!("  node {}{me}: NOT ASKED: {e}", n.node),
            None => println!("  node {}{me}: {}", n.node, counts_line(&n.counts)),
        }
    }
    if summary {
        return;
    }
    let rows: Vec<Vec<String>> = view
        .nodes
        .iter()
        .flat_map(|n| {
            n.clients.iter().map(move |c| {
                let labels: Vec<String> =
                    c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                vec![
                    n.node.clone(),
                    c.ip.clone(),
                    c.protocol.clone(),
                    c.app.clone(),
                    labels.join(","),
                    c.holds.clone(),
                    short(&c.held_md5).to_string(),
                    if c.in_sync { "yes" } else { "no" }.to_string(),
                    when(c.since),
                ]
            })
        })
        .collect();
    if !rows.is_empty() {
        println!();
        output::table(
            &[
                "NODE", "IP", "PROTOCOL", "APP", "LABELS", "HOLDS", "MD5", "IN SYNC", "SINCE",
            ],
            &rows,
        );
    }
}

pub(crate) async fn clients(a: ClientsArgs) -> Result<()> {
    let client = connect(&a.conn).await?;
    let key = a.key.key(&client);
    let view = client.admin().clients(key).await?;
    match a.conn.output {
        Output::Json => output::json(&serde_json::json!(view)),
        Output::Table => print_table(&view, a.summary),
    }
    if !view.complete {
        eprintln!("warning: not every node answered; the counts cover those that did");
    }
    Ok(())
}
