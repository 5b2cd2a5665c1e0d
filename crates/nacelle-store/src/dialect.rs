//! How the databases differ in our SQL, in one place: the [`Dialect`] trait each sqlx
//! database type implements (placeholders, time conversion, integer casts, the tag
//! aggregate, row locks, generated ids), [`spell`], which turns a statement written once
//! with `?` placeholders into the dialect's, and [`Arg`], a value bound to a statement.
//!
//! Every statement the store runs is written once with `?` placeholders and spelled by
//! these, once per dialect when a store opens.

/// How a database spells what differs in our SQL. Implemented by sqlx's database types
/// (`sqlx::Sqlite`, `sqlx::MySql`, `sqlx::Postgres`).
pub trait Dialect: sqlx::Database {
    /// Placeholders are `$1, $2…` (PostgreSQL) rather than `?`.
    const NUMBERED_PLACEHOLDERS: bool;
    /// A bound time value (see [`Dialect::time_value`]) as the column's SQL type.
    const TIME_PARAM: &'static str;
    /// What follows `FROM config_info … WHERE …` to lock the row until the transaction ends.
    const FOR_UPDATE: &'static str;
    /// Ends the config insert: the generated id comes back as column `id`, or no row
    /// when the unique key is taken (where the dialect can say so).
    const INSERT_CONFIG_TAIL: &'static str;
    /// Ends the history insert: the generated `nid` comes back as column `nid`.
    const INSERT_HISTORY_TAIL: &'static str;
    /// `UPDATE` reports the rows it matched (not only those it changed, as MySQL does).
    const UPDATE_COUNTS_MATCHED_ROWS: bool;
    /// Ends an insert into a table of Nacelle's whose generated `id` comes back as column
    /// `id` (`""` where the dialect cannot: MySQL, which reads `LAST_INSERT_ID()`).
    const RETURNING_ID: &'static str;
    /// A time column as ms since the epoch.
    fn ms(col: &str) -> String;
    /// An integer expression as a signed 64-bit value (MySQL's ids are unsigned); the
    /// expression itself where integers are signed already.
    fn signed(expr: &str) -> String {
        expr.to_string()
    }
    /// The tag names of config row `c`, comma-separated in relation order.
    fn tag_list() -> &'static str;
    /// The value bound for a time of `ms` milliseconds: `ms` itself unless the dialect
    /// keeps another unit.
    fn time_value(ms: i64) -> i64 {
        ms
    }
    /// `ms` as the backend keeps it (MySQL's `DATETIME`: whole seconds); exact by default.
    fn stored_ms(ms: i64) -> i64 {
        ms
    }
    /// Rows an `UPDATE`/`DELETE` reported.
    fn rows_affected(done: &Self::QueryResult) -> u64;
    /// String concatenation of two expressions (`||` by default, MySQL's `CONCAT`).
    fn concat(a: &str, b: &str) -> String {
        format!("({a} || {b})")
    }
    /// Whether text `haystack` contains `needle` (`instr`, PostgreSQL's `strpos`).
    fn contains(haystack: &str, needle: &str) -> String {
        format!("instr({haystack}, {needle}) > 0")
    }
}

/// One bound value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    Text(&'a str),
    Int(i64),
    /// An integer column that may be NULL.
    OptInt(Option<i64>),
}

/// `sql` with `?` turned into `$1, $2…` where the dialect numbers its placeholders. Our
/// statements hold no `?` inside strings or comments.
pub(crate) fn spell<D: Dialect>(sql: &str) -> String {
    if !D::NUMBERED_PLACEHOLDERS {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for ch in sql.chars() {
        if ch == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_for_postgres() {
        assert_eq!(
            spell::<sqlx::Postgres>("a = ? AND b = ? LIMIT ?"),
            "a = $1 AND b = $2 LIMIT $3"
        );
        assert_eq!(spell::<sqlx::MySql>("a = ?"), "a = ?");
    }
}
