//! The write plan: *what* a publish or a remove writes, decided once for every backend.
//!
//! A backend reads the current row of the key under its row lock ([`Current`]), asks
//! [`plan_publish`] or [`plan_remove`] what to write, and executes the [`Plan`] in the same
//! transaction: the SQL backends through sqlx (`sql.rs`), the SQLite writer thread through
//! rusqlite. Neither decides anything itself, so the backends cannot drift apart.
//!
//! The rules, as Java Nacos 2.4 writes its rows (`ExternalConfigInfoPersistServiceImpl`
//! `addConfigInfo`/`updateConfigInfo`/`removeConfigInfo`, `insertConfigHistoryAtomic`):
//! - compare-and-set compares with the stored md5, `""` when the config is absent;
//! - an insert's history row has config id 0 and holds the inserted version;
//! - an update's history row has the config's id and holds the *replaced* version
//!   (content, md5, app name, encryption key of the old row), written by the new source;
//! - a delete's history row holds the removed version;
//! - the history md5 is computed from the history row's content (Nacos's
//!   `MD5Utils.md5Hex(configInfo.getContent())`), never copied from `config_info.md5`,
//!   which a foreign writer may have left empty or stale;
//! - tag relations are replaced on every update (Nacos: "delete all tags and then
//!   recreate", whenever `config_tags` is given, which for us is always), inserted on an
//!   insert, deleted with the config.
//!
//! Variant rows (beta, tag, gray) become further [`Target`]s with plans of their own, not
//! further copies of the executors.

use std::borrow::Cow;

use nacelle_core::{
    ConfigKey, ConfigMeta, GraySpec, OpSource, OpType, PublishRecord, SamePolicy, StoreError,
    StoredConfig,
};

/// Splits `config_tags` into distinct, trimmed, non-empty tags: the relations written for
/// a config.
pub(crate) fn split_tags(tags: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for t in tags.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// Which kind of row a plan writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// `config_info` with its `config_tags_relation` rows, history in `his_config_info`:
    /// what every client gets.
    Formal,
    /// `config_info_gray` row `name` with its rule as Nacos 2.5/3.0 store it (`gray_rule`
    /// JSON); history in Nacelle's gray change log (`nacelle_gray_log`). No tag relations.
    Gray {
        name: &'a str,
        rule: String,
        /// The `ext_info` of its `his_config_info` row on a Nacos 2.5/3.0 schema
        /// ([`gray_ext_info`]).
        ext_info: String,
        /// The Nacos 2.4 row that mirrors this gray, for the beta and tag variants.
        legacy: Option<Legacy<'a>>,
    },
}

/// The Nacos 2.4 table a beta or tag variant is mirrored in (as Nacos 2.5's compatible
/// mode does), so a Nacos 2.4 node sharing the database sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Legacy<'a> {
    /// `config_info_beta` with this `beta_ips` (empty for a delete).
    Beta { ips: String },
    /// `config_info_tag` with this `tag_id`.
    Tag { tag: &'a str },
}

impl<'a> Legacy<'a> {
    /// The mirror of gray `name` (`beta`, `tag_<t>`; none for other names), whose beta
    /// list is `ips`.
    fn of(name: &'a str, ips: impl FnOnce() -> String) -> Option<Legacy<'a>> {
        use nacelle_core::gray::{BETA_NAME, TAG_NAME_PREFIX};
        if name == BETA_NAME {
            return Some(Legacy::Beta { ips: ips() });
        }
        name.strip_prefix(TAG_NAME_PREFIX)
            .map(|tag| Legacy::Tag { tag })
    }
}

/// The `gray_rule` JSON of a gray, as Nacos 2.5/3.0 write it:
/// `{"type":"beta","version":"1.0.0","expr":"1.1.1.1","priority":2147483647}`.
pub(crate) fn gray_rule_json(spec: &GraySpec) -> String {
    // Written by hand to keep Nacos's field order (type, version, expr, priority).
    let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    format!(
        r#"{{"type":{},"version":{},"expr":{},"priority":{}}}"#,
        quoted(spec.rule.kind()),
        quoted(spec.rule.version()),
        quoted(&spec.rule.expr()),
        spec.priority
    )
}

/// The `ext_info` Nacos 2.5/3.0 write in a gray write's `his_config_info` row
/// (`ConfigExtInfoUtil.getExtInfoFromGrayInfo`): `{"gray_name":…,"src_user":…,
/// "gray_rule":"<the rule's type, expr, version, priority — the priority as text>"}`,
/// blank fields left out.
pub(crate) fn gray_ext_info(name: &str, rule_json: &str, src_user: &str) -> String {
    // Written by hand to keep Java's field order (Jackson's ObjectNode keeps insertion order).
    let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut outer: Vec<String> = Vec::new();
    if !name.trim().is_empty() {
        outer.push(format!(r#""gray_name":{}"#, quoted(name)));
    }
    if !src_user.trim().is_empty() {
        outer.push(format!(r#""src_user":{}"#, quoted(src_user)));
    }
    if let Ok(serde_json::Value::Object(rule)) = serde_json::from_str(rule_json) {
        let inner: Vec<String> = ["type", "expr", "version", "priority"]
            .iter()
            .filter_map(|field| {
                let text = match rule.get(*field)? {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => return None,
                    other => other.to_string(),
                };
                Some(format!("{}:{}", quoted(field), quoted(&text)))
            })
            .collect();
        outer.push(format!(
            r#""gray_rule":{}"#,
            quoted(&format!("{{{}}}", inner.join(",")))
        ));
    }
    format!("{{{}}}", outer.join(","))
}

/// The parts of a stored `gray_rule` JSON: type, expression, priority. Lenient as Nacos's
/// reader is: a missing priority is 0.
pub(crate) fn parse_gray_rule(json: &str) -> Result<(String, String, i32), StoreError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| StoreError::Rejected(format!("gray_rule is not JSON: {e}")))?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let priority = v
        .get("priority")
        .and_then(|x| x.as_i64())
        .and_then(|p| i32::try_from(p).ok())
        .unwrap_or(0);
    Ok((text("type"), text("expr"), priority))
}

/// What a write needs of the row it replaces, read under its row lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Current {
    pub id: i64,
    pub content: String,
    /// The stored md5, computed from the content when the column is empty: what clients
    /// see and what compare-and-set compares with.
    pub md5: String,
    pub app_name: String,
    pub encrypted_data_key: String,
    /// `gmt_create` in ms, as the backend stores it.
    pub created_ms: i64,
}

impl Current {
    /// A current row from its columns (`md5` as stored, possibly empty).
    pub fn new(
        id: i64,
        content: String,
        md5: String,
        app_name: String,
        encrypted_data_key: String,
        created_ms: i64,
    ) -> Self {
        let md5 = if md5.is_empty() {
            nacelle_core::md5_hex(content.as_bytes())
        } else {
            md5
        };
        Current {
            id,
            content,
            md5,
            app_name,
            encrypted_data_key,
            created_ms,
        }
    }
}

/// The new version of a config row (insert or update).
#[derive(Debug, Clone)]
pub(crate) struct NewRow<'a> {
    pub rec: &'a PublishRecord,
    /// The content as text (the service only passes UTF-8).
    pub content: Cow<'a, str>,
    /// `gmt_create`: now for an insert, kept for an update (ms as the backend stores it).
    pub created_ms: i64,
    /// `gmt_modified` (ms as the backend stores it).
    pub modified_ms: i64,
}

/// What happens to the config row.
#[derive(Debug, Clone)]
pub(crate) enum RowWrite<'a> {
    /// A new row; the database generates its id. Losing the unique key to a concurrent
    /// insert makes the write retry (and become an update).
    Insert(NewRow<'a>),
    /// The existing row `id` takes the new version.
    Update { id: i64, row: NewRow<'a> },
    /// The row `id` is deleted.
    Delete { id: i64 },
}

/// The tag relations to write for the config row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TagWrite<'a> {
    /// Delete the row's existing relations first.
    pub clear: bool,
    /// Relations to insert, one per tag (`tag_type` NULL), in this order.
    pub insert: Vec<&'a str>,
}

/// The `his_config_info` row of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryRow<'a> {
    /// The config's id; 0 for an insert.
    pub config_id: i64,
    pub app_name: &'a str,
    pub content: Cow<'a, str>,
    /// md5 of `content`.
    pub md5: String,
    pub encrypted_data_key: &'a str,
    /// Who made the change (the new source, also on updates and deletes).
    pub source: &'a OpSource,
    pub op: OpType,
    /// `gmt_create` and `gmt_modified` of the row: the time of the change.
    pub now_ms: i64,
}

/// Everything one write stores, in one transaction.
#[derive(Debug, Clone)]
pub(crate) struct Plan<'a> {
    pub target: Target<'a>,
    pub key: &'a ConfigKey,
    pub row: RowWrite<'a>,
    pub tags: TagWrite<'a>,
    pub history: HistoryRow<'a>,
}

impl Plan<'_> {
    /// The config as stored once the plan committed, given the row id (generated for an
    /// insert) and the history row's `nid`; `None` for a delete.
    pub fn stored(&self, id: i64, revision: i64) -> Option<StoredConfig> {
        let row = match &self.row {
            RowWrite::Insert(row) | RowWrite::Update { row, .. } => row,
            RowWrite::Delete { .. } => return None,
        };
        let rec = row.rec;
        Some(StoredConfig {
            id,
            key: rec.key.clone(),
            content: rec.content.clone(),
            md5: rec.md5.clone(),
            config_type: rec.config_type,
            meta: ConfigMeta {
                config_tags: self.tags.insert.join(","),
                ..rec.meta.clone()
            },
            source: rec.source.clone(),
            created_ms: row.created_ms,
            modified_ms: row.modified_ms,
            revision,
        })
    }
}

/// Plans a publish of `rec` over `current` (the row under lock, `None` when absent) at
/// `now_ms`, the time as the backend stores it (MySQL: whole seconds). Fails with
/// [`StoreError::CasMismatch`] when `rec.cas_md5` is set and differs from the stored md5.
pub(crate) fn plan_publish<'a>(
    rec: &'a PublishRecord,
    current: Option<&'a Current>,
    now_ms: i64,
) -> Result<Plan<'a>, StoreError> {
    if let Some(expected) = &rec.cas_md5 {
        let actual = current.map(|c| c.md5.as_str()).unwrap_or("");
        if actual != expected {
            return Err(StoreError::CasMismatch);
        }
    }
    let content = String::from_utf8_lossy(&rec.content);
    let target = match &rec.gray {
        None => Target::Formal,
        Some(spec) => {
            let rule = gray_rule_json(spec);
            Target::Gray {
                name: &spec.name,
                ext_info: gray_ext_info(&spec.name, &rule, &rec.source.src_user),
                rule,
                legacy: Legacy::of(&spec.name, || spec.rule.expr()),
            }
        }
    };
    // Gray rows have no tag relations.
    let tags = match target {
        Target::Formal => split_tags(&rec.meta.config_tags),
        Target::Gray { .. } => Vec::new(),
    };
    let formal = target == Target::Formal;
    let (row, tags, history) = match current {
        None => (
            RowWrite::Insert(NewRow {
                rec,
                content: content.clone(),
                created_ms: now_ms,
                modified_ms: now_ms,
            }),
            TagWrite {
                clear: false,
                insert: tags,
            },
            HistoryRow {
                config_id: 0,
                app_name: &rec.meta.app_name,
                md5: nacelle_core::md5_hex(content.as_bytes()),
                content,
                encrypted_data_key: &rec.meta.encrypted_data_key,
                source: &rec.source,
                op: OpType::Insert,
                now_ms,
            },
        ),
        Some(old) => (
            RowWrite::Update {
                id: old.id,
                row: NewRow {
                    rec,
                    content,
                    created_ms: old.created_ms,
                    modified_ms: now_ms,
                },
            },
            TagWrite {
                clear: formal,
                insert: tags,
            },
            replaced(old, &rec.source, OpType::Update, now_ms),
        ),
    };
    Ok(Plan {
        target,
        key: &rec.key,
        row,
        tags,
        history,
    })
}

/// Plans the removal of `key`'s formal config; `None` when nothing is stored under it.
pub(crate) fn plan_remove<'a>(
    key: &'a ConfigKey,
    source: &'a OpSource,
    current: Option<&'a Current>,
    now_ms: i64,
) -> Option<Plan<'a>> {
    plan_delete(Target::Formal, key, source, current, now_ms)
}

/// Plans the removal of gray `name` of `key` whose stored rule is `rule` (recorded in
/// the change log); `None` when that gray does not exist.
pub(crate) fn plan_remove_gray<'a>(
    key: &'a ConfigKey,
    name: &'a str,
    rule: String,
    source: &'a OpSource,
    current: Option<&'a Current>,
    now_ms: i64,
) -> Option<Plan<'a>> {
    let legacy = Legacy::of(name, String::new);
    let ext_info = gray_ext_info(name, &rule, &source.src_user);
    let target = Target::Gray {
        name,
        rule,
        ext_info,
        legacy,
    };
    plan_delete(target, key, source, current, now_ms)
}

fn plan_delete<'a>(
    target: Target<'a>,
    key: &'a ConfigKey,
    source: &'a OpSource,
    current: Option<&'a Current>,
    now_ms: i64,
) -> Option<Plan<'a>> {
    let old = current?;
    let clear = target == Target::Formal;
    Some(Plan {
        target,
        key,
        row: RowWrite::Delete { id: old.id },
        tags: TagWrite {
            clear,
            insert: Vec::new(),
        },
        history: replaced(old, source, OpType::Delete, now_ms),
    })
}

/// The history row of an update or delete: the old version, by the new source.
fn replaced<'a>(old: &'a Current, source: &'a OpSource, op: OpType, now_ms: i64) -> HistoryRow<'a> {
    HistoryRow {
        config_id: old.id,
        app_name: &old.app_name,
        content: Cow::Borrowed(&old.content),
        md5: nacelle_core::md5_hex(old.content.as_bytes()),
        encrypted_data_key: &old.encrypted_data_key,
        source,
        op,
        now_ms,
    }
}

/// What a batch publish does to each record, decided from the current rows of its records
/// (read under their locks, in the batch's transaction) before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchStep {
    /// Publish it (with [`plan_publish`]).
    Write,
    /// Leave it out.
    Skip,
    /// Leave it out: the existing key that stopped an [`SamePolicy::Abort`] batch.
    Conflict,
}

/// The order in which a batch locks and writes its records: by key, so that two batches
/// (or a batch and single publishes) sharing keys take their row locks in one order.
/// Refuses a batch with a repeated key or a compare-and-set (the current rows are read
/// once, before any write).
pub(crate) fn batch_order(records: &[PublishRecord]) -> Result<Vec<usize>, StoreError> {
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by(|&a, &b| records[a].key.cmp(&records[b].key));
    for pair in order.windows(2) {
        if records[pair[0]].key == records[pair[1]].key {
            return Err(StoreError::Rejected(format!(
                "a batch holds {} twice",
                records[pair[0]].key.group_key()
            )));
        }
    }
    if records.iter().any(|r| r.cas_md5.is_some()) {
        return Err(StoreError::Rejected(
            "a batch publish takes no compare-and-set".into(),
        ));
    }
    Ok(order)
}

/// Decides a batch from `currents` (one per record, in the order of the records): under
/// [`SamePolicy::Abort`] the records before the first existing key are written, that one
/// is the conflict and the rest are skipped (Nacos's `batchInsertOrUpdate`).
pub(crate) fn plan_batch(currents: &[Option<Current>], policy: SamePolicy) -> Vec<BatchStep> {
    let fresh = |c: &Option<Current>| {
        if c.is_none() {
            BatchStep::Write
        } else {
            BatchStep::Skip
        }
    };
    match policy {
        SamePolicy::Abort => {
            let stop = currents.iter().position(Option::is_some);
            (0..currents.len())
                .map(|i| match stop {
                    Some(s) if i == s => BatchStep::Conflict,
                    Some(s) if i > s => BatchStep::Skip,
                    _ => BatchStep::Write,
                })
                .collect()
        }
        SamePolicy::Skip => currents.iter().map(fresh).collect(),
        SamePolicy::Overwrite => vec![BatchStep::Write; currents.len()],
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tags_are_trimmed_and_distinct() {
        assert_eq!(super::split_tags(" a, b,a,,c "), vec!["a", "b", "c"]);
        assert!(super::split_tags("").is_empty());
    }

    #[test]
    fn gray_ext_info_is_what_nacos_writes() {
        let rule =
            r#"{"type":"beta","version":"1.0.0","expr":"1.1.1.1,2.2.2.2","priority":2147483647}"#;
        assert_eq!(
            super::gray_ext_info("beta", rule, "nacos"),
            r#"{"gray_name":"beta","src_user":"nacos","gray_rule":"{\"type\":\"beta\",\"expr\":\"1.1.1.1,2.2.2.2\",\"version\":\"1.0.0\",\"priority\":\"2147483647\"}"}"#
        );
        assert_eq!(
            super::gray_ext_info("tag_x", "not json", ""),
            r#"{"gray_name":"tag_x"}"#
        );
    }

    use super::*;
    use bytes::Bytes;
    use nacelle_core::{md5_hex, ConfigType};

    fn record(content: &str, tags: &str) -> PublishRecord {
        PublishRecord {
            key: ConfigKey::from_trusted("ns", "G", "d"),
            content: Bytes::from(content.to_string()),
            md5: md5_hex(content.as_bytes()),
            config_type: ConfigType::Yaml,
            meta: ConfigMeta {
                app_name: "new-app".into(),
                config_tags: tags.into(),
                encrypted_data_key: "new-edk".into(),
                ..Default::default()
            },
            source: OpSource {
                src_user: "bob".into(),
                src_ip: "10.0.0.2".into(),
                ..OpSource::default()
            },
            cas_md5: None,
            now_ms: 9_999,
            gray: None,
        }
    }

    fn current(content: &str, stored_md5: &str) -> Current {
        Current::new(
            7,
            content.into(),
            stored_md5.into(),
            "old-app".into(),
            "old-edk".into(),
            1_000,
        )
    }

    #[test]
    fn insert_records_the_new_version_with_config_id_zero() -> Result<(), StoreError> {
        let rec = record("v1", " a, b,a,,");
        let plan = plan_publish(&rec, None, 5_000)?;
        assert_eq!(plan.target, Target::Formal);
        assert!(matches!(&plan.row, RowWrite::Insert(r) if r.created_ms == 5_000));
        assert_eq!(
            plan.tags,
            TagWrite {
                clear: false,
                insert: vec!["a", "b"]
            }
        );
        let h = &plan.history;
        assert_eq!((h.config_id, h.op), (0, OpType::Insert));
        assert_eq!(
            (h.content.as_ref(), h.md5.as_str()),
            ("v1", md5_hex(b"v1").as_str())
        );
        assert_eq!((h.app_name, h.encrypted_data_key), ("new-app", "new-edk"));
        assert_eq!(h.now_ms, 5_000);

        let stored = plan.stored(42, 3).ok_or(StoreError::CasMismatch)?;
        assert_eq!((stored.id, stored.revision), (42, 3));
        assert_eq!(stored.meta.config_tags, "a,b");
        assert_eq!((stored.created_ms, stored.modified_ms), (5_000, 5_000));
        assert_eq!(stored.source, rec.source);
        Ok(())
    }

    #[test]
    fn update_records_the_replaced_version_and_rewrites_tags() -> Result<(), StoreError> {
        let rec = record("v2", "");
        let old = current("v1", "");
        let plan = plan_publish(&rec, Some(&old), 5_000)?;
        assert!(matches!(&plan.row, RowWrite::Update { id: 7, row } if row.content == "v2"));
        // Nacos deletes and recreates the relations on every update, none left here.
        assert_eq!(
            plan.tags,
            TagWrite {
                clear: true,
                insert: vec![]
            }
        );
        let h = &plan.history;
        assert_eq!((h.config_id, h.op), (7, OpType::Update));
        assert_eq!(h.content, "v1");
        assert_eq!(h.md5, md5_hex(b"v1"));
        assert_eq!((h.app_name, h.encrypted_data_key), ("old-app", "old-edk"));
        assert_eq!(h.source, &rec.source, "written by the new source");
        let stored = plan.stored(7, 4).ok_or(StoreError::CasMismatch)?;
        assert_eq!((stored.created_ms, stored.modified_ms), (1_000, 5_000));
        Ok(())
    }

    #[test]
    fn history_md5_is_that_of_its_content_not_the_stored_column() -> Result<(), StoreError> {
        // A foreign writer left a stale md5: CAS compares with it, history does not copy it.
        let old = current("v1", "stale");
        let mut rec = record("v2", "");
        rec.cas_md5 = Some("stale".into());
        let plan = plan_publish(&rec, Some(&old), 1)?;
        assert_eq!(plan.history.md5, md5_hex(b"v1"));
        Ok(())
    }

    #[test]
    fn compare_and_set_checks_the_stored_md5_or_empty_when_absent() {
        let old = current("v1", "");
        let cas = |expected: &str, cur: Option<&Current>| {
            let mut rec = record("v2", "");
            rec.cas_md5 = Some(expected.into());
            plan_publish(&rec, cur, 1).map(|_| ())
        };
        let mismatch = |r: Result<(), StoreError>| matches!(r, Err(StoreError::CasMismatch));
        assert!(cas("", None).is_ok());
        assert!(mismatch(cas("x", None)));
        assert!(cas(&md5_hex(b"v1"), Some(&old)).is_ok());
        assert!(mismatch(cas("", Some(&old))));
        assert!(mismatch(cas("x", Some(&old))));
    }

    #[test]
    fn remove_records_the_removed_version() {
        let key = ConfigKey::from_trusted("ns", "G", "d");
        let who = OpSource {
            src_user: "carol".into(),
            src_ip: "10.0.0.3".into(),
            ..OpSource::default()
        };
        assert!(plan_remove(&key, &who, None, 1).is_none());
        let old = current("v1", "");
        let Some(plan) = plan_remove(&key, &who, Some(&old), 8_000) else {
            panic!("a present config plans a delete");
        };
        assert!(matches!(plan.row, RowWrite::Delete { id: 7 }));
        assert_eq!(
            plan.tags,
            TagWrite {
                clear: true,
                insert: vec![]
            }
        );
        let h = &plan.history;
        assert_eq!((h.config_id, h.op, h.now_ms), (7, OpType::Delete, 8_000));
        assert_eq!((h.content.as_ref(), h.app_name), ("v1", "old-app"));
        assert_eq!(h.source, &who);
        assert!(plan.stored(7, 9).is_none());
    }

    #[test]
    fn batches_decide_per_policy_and_lock_in_key_order() {
        let with_id = |id: &str| PublishRecord {
            key: ConfigKey::from_trusted("ns", "G", id),
            ..record("v", "")
        };
        let records = [with_id("c"), with_id("a"), with_id("b")];
        assert_eq!(batch_order(&records).ok(), Some(vec![1, 2, 0]));
        let currents = [None, Some(current("old", "")), None];
        use BatchStep::{Conflict, Skip, Write};
        // ABORT stops at the first existing key in the records' order (not the locks').
        assert_eq!(
            plan_batch(&currents, SamePolicy::Abort),
            vec![Write, Conflict, Skip]
        );
        assert_eq!(
            plan_batch(
                &[Some(current("x", "")), None, Some(current("y", ""))],
                SamePolicy::Abort
            ),
            vec![Conflict, Skip, Skip]
        );
        assert_eq!(
            plan_batch(&currents, SamePolicy::Skip),
            vec![Write, Skip, Write]
        );
        assert_eq!(plan_batch(&currents, SamePolicy::Overwrite), vec![Write; 3]);
        assert_eq!(
            plan_batch(&[None, None, None], SamePolicy::Abort),
            vec![Write; 3]
        );
        let twice = [with_id("a"), with_id("a")];
        assert!(matches!(batch_order(&twice), Err(StoreError::Rejected(_))));
    }
}
