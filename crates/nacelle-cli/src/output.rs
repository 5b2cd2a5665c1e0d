//! Output for people (aligned tables) and for scripts (`--output json`).

use nacelle_client::Page;
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

/// Prints a listing: for scripts one JSON array of `item(x)`, for people the `row(x)` of
/// every `x` under `header`.
pub fn list<T>(
    out: Output,
    items: impl IntoIterator<Item = T>,
    header: &[&str],
    item: impl FnMut(T) -> Value,
    row: impl FnMut(T) -> Vec<String>,
) {
    match out {
        Output::Json => json(&Value::Array(items.into_iter().map(item).collect())),
        Output::Table => table(header, &items.into_iter().map(row).collect::<Vec<_>>()),
    }
}

/// Prints a page of a listing: for scripts `{totalCount, pageNumber, pagesAvailable,
/// items}`, the items as `item` writes them; for people as [`list`] does.
pub fn page<'a, T>(
    out: Output,
    page: &'a Page<T>,
    header: &[&str],
    mut item: impl FnMut(&'a T) -> Value,
    row: impl FnMut(&'a T) -> Vec<String>,
) {
    match out {
        Output::Json => json(&serde_json::json!({"totalCount": page.total_count,
            "pageNumber": page.page_number, "pagesAvailable": page.pages_available,
            "items": page.page_items.iter().map(&mut item).collect::<Vec<_>>()})),
        Output::Table => list(out, &page.page_items, header, item, row),
    }
}

/// For people, when there is more than one page: `page N of M (T <what>)` on stderr.
pub fn page_footer<T>(out: Output, page: &Page<T>, what: &str) {
    if out == Output::Table && page.pages_available > 1 {
        eprintln!(
            "page {} of {} ({} {what})",
            page.page_number, page.pages_available, page.total_count
        );
    }
}

/// `public` for the default namespace (the client's [`nacelle_client::namespace_label`]).
pub fn ns_label(ns: &str) -> &str {
    nacelle_client::namespace_label(ns)
}
