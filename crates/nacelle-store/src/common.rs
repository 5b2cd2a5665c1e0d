//! What the backends share: tag lists, the retry rule for write transactions, the operation
//! deadline, and the check that an existing database has the columns we write.

use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use nacelle_core::StoreError;

use crate::map_err;

/// Splits `config_tags` into distinct, trimmed, non-empty tags.
pub(crate) fn split_tags(tags: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for t in tags.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Why one attempt of a write transaction did not complete.
#[derive(Debug)]
pub(crate) enum TxError {
    /// The database failed; retried when it is a deadlock or serialization failure.
    Sql(sqlx::Error),
    /// A definite answer (CAS mismatch, not found…): returned as it is.
    Store(StoreError),
    /// Another writer inserted the same new key first: the next attempt sees its row.
    Raced,
}

impl From<sqlx::Error> for TxError {
    fn from(e: sqlx::Error) -> Self {
        TxError::Sql(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

/// Attempts of one write before giving up on repeated deadlocks or races.
const MAX_ATTEMPTS: u32 = 10;

/// Whether the database aborted a transaction only because of concurrent ones: deadlock
/// (MySQL 1213 and PostgreSQL both report SQLSTATE 40001 or 40P01).
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("40001" | "40P01")),
        _ => false,
    }
}

/// Runs `attempt` (one whole transaction) until it succeeds, fails definitely, or has lost
/// to concurrent writers [`MAX_ATTEMPTS`] times. The transaction of a failed attempt has been
/// rolled back (dropped) before the next one starts.
pub(crate) async fn with_retries<T, F, Fut>(mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TxError>>,
{
    let mut n = 0;
    loop {
        n += 1;
        let last = n >= MAX_ATTEMPTS;
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(TxError::Store(e)) => return Err(e),
            Err(TxError::Sql(e)) if !is_transient(&e) || last => return Err(map_err(e)),
            Err(TxError::Raced) if last => {
                return Err(StoreError::Unavailable(format!(
                    "gave up after {MAX_ATTEMPTS} attempts: concurrent writers of the same key kept winning"
                )))
            }
            Err(TxError::Sql(e)) => tracing::debug!("retrying a write after: {e}"),
            Err(TxError::Raced) => tracing::debug!("retrying a write that raced an insert"),
        }
        tokio::time::sleep(backoff(n)).await;
    }
}

/// A short pause that grows with the attempt number, with jitter so racing writers spread.
fn backoff(attempt: u32) -> Duration {
    let jitter = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 10;
    Duration::from_millis(u64::from(attempt) * 5 + jitter)
}

/// Bounds an operation by `limit`, so a database that stopped answering on an open
/// connection turns into [`StoreError::Unavailable`] instead of a hang.
pub(crate) async fn timed<T>(
    limit: Duration,
    fut: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::Unavailable(format!(
            "the database did not answer within {} ms",
            limit.as_millis()
        ))),
    }
}

/// The columns Nacelle reads and writes, per table. An existing database must have them
/// all; Nacos 2.4 (and 2.1 and later) does.
pub(crate) const REQUIRED_COLUMNS: &[(&str, &[&str])] = &[
    (
        "config_info",
        &[
            "id",
            "data_id",
            "group_id",
            "content",
            "md5",
            "gmt_create",
            "gmt_modified",
            "src_user",
            "src_ip",
            "app_name",
            "tenant_id",
            "c_desc",
            "c_use",
            "effect",
            "type",
            "c_schema",
            "encrypted_data_key",
        ],
    ),
    (
        "his_config_info",
        &[
            "id",
            "nid",
            "data_id",
            "group_id",
            "app_name",
            "content",
            "md5",
            "gmt_create",
            "gmt_modified",
            "src_user",
            "src_ip",
            "op_type",
            "tenant_id",
            "encrypted_data_key",
        ],
    ),
    (
        "config_tags_relation",
        &[
            "id",
            "tag_name",
            "tag_type",
            "data_id",
            "group_id",
            "tenant_id",
            "nid",
        ],
    ),
    (
        "tenant_info",
        &[
            "id",
            "kp",
            "tenant_id",
            "tenant_name",
            "tenant_desc",
            "create_source",
            "gmt_create",
            "gmt_modified",
        ],
    ),
];

/// Given the `(table, column)` pairs the database has, names the required ones it lacks,
/// as `table.column`.
pub(crate) fn missing_columns(present: &[(String, String)]) -> Vec<String> {
    let mut missing = Vec::new();
    for (table, cols) in REQUIRED_COLUMNS {
        for col in *cols {
            let found = present
                .iter()
                .any(|(t, c)| t.eq_ignore_ascii_case(table) && c.eq_ignore_ascii_case(col));
            if !found {
                missing.push(format!("{table}.{col}"));
            }
        }
    }
    missing
}

/// Splits a schema script into statements at lines ending in `;`. Our scripts keep every
/// `;` at the end of a line and none inside strings or comments.
pub(crate) fn statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for line in script.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        if trimmed.ends_with(';') {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_trimmed_and_distinct() {
        assert_eq!(split_tags(" a, b,a,,c "), vec!["a", "b", "c"]);
        assert!(split_tags("").is_empty());
    }

    #[test]
    fn missing_columns_are_named() {
        let mut present: Vec<(String, String)> = REQUIRED_COLUMNS
            .iter()
            .flat_map(|(t, cols)| cols.iter().map(|c| (t.to_uppercase(), c.to_string())))
            .collect();
        assert!(missing_columns(&present).is_empty());
        present.retain(|(_, c)| c != "encrypted_data_key");
        assert_eq!(
            missing_columns(&present),
            vec![
                "config_info.encrypted_data_key".to_string(),
                "his_config_info.encrypted_data_key".to_string()
            ]
        );
    }

    #[test]
    fn scripts_split_at_line_ends() {
        let s = "-- comment;\nCREATE TABLE a (\n  x INT\n);\n\nCREATE TABLE b (y INT);\n";
        let st = statements(s);
        assert_eq!(st.len(), 2);
        assert!(st[0].starts_with("CREATE TABLE a"));
        assert!(st[1].starts_with("CREATE TABLE b"));
    }
}
