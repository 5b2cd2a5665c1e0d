//! Output for people (aligned tables) and for scripts (`--output json`).

use serde_json::Value;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns (content printed as is).
    Table,
    /// One JSON document (per event, for `watch`).
    Json,
}

/// Prints rows under a header, each column as wide as its widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(&cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                out.push_str(&cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// Prints a JSON value on one line.
pub fn json(v: &Value) {
    println!("{v}");
}

/// `public` for the default namespace (the client's [`nacelle_client::namespace_label`]).
pub fn ns_label(ns: &str) -> &str {
    nacelle_client::namespace_label(ns)
}
