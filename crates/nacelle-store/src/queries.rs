//! The config core's statements — configs, grays (and their Nacos 2.4 mirrors), tags,
//! history and its notes, the change logs and their purges — written once with `?`
//! placeholders and spelled per [`Dialect`], and the argument lists of the write
//! statements in their column order. Each feature's statements live with the code that
//! runs them (`changes.rs`, `rollouts.rs`, `audit.rs`, …); the backend holds them all in
//! one `QuerySet` (`store.rs`).
//!
//! [`statements`] turns a write [`Plan`] into the statements that execute it, with their
//! arguments in column order; every backend runs that list as it is.
//!
//! The three backends select the same column names with times as ms, so one row decoder
//! serves them all (`sql.rs`); a dialect says only how its SQL differs: placeholders,
//! time conversion, integer casts, the tag aggregate, row locks, generated ids.

use nacelle_core::{ConfigKey, HistoryLog};

use nacelle_core::StoreError;

use crate::dialect::{spell, Arg, Dialect};
use crate::plan::{Legacy, NewRow, Plan, RowWrite, Target};

/// The config core's statements in one dialect, built once when a store opens.
#[derive(Debug, Clone)]
pub(crate) struct Queries {
    pub load_all: String,
    pub get: String,
    pub history_count: String,
    pub history_page: String,
    pub history_entry: String,
    pub history_previous: String,
    pub changes_since: String,
    pub max_nid: String,
    pub lock_current: String,
    pub insert_config: String,
    pub update_config: String,
    pub delete_config: String,
    pub delete_tags: String,
    /// The description of a config row, changed in place (`update_metadata`).
    pub update_desc: String,
    pub insert_tag: String,
    pub insert_history: String,
    /// On a Nacos 2.5/3.0 schema: the `his_config_info` row of a gray write
    /// ([`Queries::for_schema`]).
    pub insert_gray_history: Option<String>,
    /// The history purge of `his_config_info`: by key (on a Nacos 2.5/3.0 schema, by key
    /// and kind: formal, or gray of one name).
    pub purge: PurgeSql,
    /// The purge of the gray change log `nacelle_gray_log` (by key and gray name).
    pub purge_gray: PurgeSql,
    /// Every `config_info_gray` row / those of one key (columns of `config_from_row`
    /// plus `gray_name`, `gray_rule`).
    pub load_grays: String,
    pub grays_of: String,
    /// Nacos 2.4's beta and tag rows, all / of one key (`gray_name` and `gray_rule`
    /// columns hold the beta list and the tag).
    pub load_legacy_betas: String,
    pub legacy_betas_of: String,
    pub load_legacy_tags: String,
    pub legacy_tags_of: String,
    pub lock_gray: String,
    pub insert_gray: String,
    pub update_gray: String,
    pub delete_gray: String,
    pub insert_gray_log: String,
    pub gray_changes_since: String,
    pub gray_history_count: String,
    pub gray_history_page: String,
    pub max_gray_nid: String,
    /// Beta and tag variants are mirrored into Nacos 2.4's `config_info_beta` /
    /// `config_info_tag`, which every Nacelle database has (schema script 1 creates
    /// Nacos 2.4's tables when absent, also on a Nacos 3.0 database that dropped them).
    pub delete_legacy_beta: String,
    pub insert_legacy_beta: String,
    pub delete_legacy_tag: String,
    pub insert_legacy_tag: String,
    /// The note (message, change request) of a history row (`nacelle_history_note`).
    pub insert_note: String,
    /// The note of a gray change-log row (`nacelle_gray_note`, schema script 8).
    pub insert_gray_note: String,
}

const KEY_MATCH: &str = "data_id = ? AND group_id = ? AND tenant_id = ?";

/// The statements of one log's purge ([`crate::sql::purge_batch`]).
#[derive(Debug, Clone)]
pub struct PurgeSql {
    /// Candidates by age: `after_nid`, `until_nid`, cutoff time, limit.
    pub by_age: String,
    /// Candidates beyond the newest N: `after_nid`, `until_nid`, N - 1, limit.
    pub by_count: String,
    /// Candidates by age or count: `after_nid`, `until_nid`, cutoff time, N - 1, limit.
    pub by_age_or_count: String,
    /// The log's newest `nid` as column `n` (where the walk ends).
    pub newest: String,
    /// `DELETE … WHERE nid IN (` before the list of condemned `nid`s.
    pub delete_prefix: &'static str,
}

impl PurgeSql {
    /// The purge of log `table`, whose rows are grouped by the key plus `partition`
    /// (expressions over the row, `{a}` standing for its alias, that must be equal for a
    /// row to count as newer). A row is condemned by age (`gmt_modified` before the cutoff)
    /// or by count (older than the N-th newest of its group), and only while a newer row of
    /// its group exists.
    fn new<D: Dialect>(table: &str, partition: &[&str], delete_prefix: &'static str) -> Self {
        let same: String = partition
            .iter()
            .map(|e| {
                format!(
                    " AND {} = {}",
                    e.replace("{a}", "n."),
                    e.replace("{a}", "h.")
                )
            })
            .collect();
        let by_age = format!("h.gmt_modified < {}", D::TIME_PARAM);
        // Older than the N-th newest row of its group (NULL, so false, with fewer rows).
        let by_count = format!(
            "h.nid < (SELECT n.nid FROM {table} n WHERE n.data_id = h.data_id AND \
             n.group_id = h.group_id AND n.tenant_id = h.tenant_id{same} \
             ORDER BY n.nid DESC LIMIT 1 OFFSET ?)"
        );
        let purge = |condemned: &str| spell::<D>(&purge_candidates::<D>(table, condemned, &same));
        PurgeSql {
            by_age: purge(&by_age),
            by_count: purge(&by_count),
            by_age_or_count: purge(&format!("({by_age} OR {by_count})")),
            newest: spell::<D>(&newest_nid::<D>(table)),
            delete_prefix,
        }
    }
}

impl Queries {
    /// The purge statements of `log`.
    pub fn purge_of(&self, log: HistoryLog) -> &PurgeSql {
        match log {
            HistoryLog::Configs => &self.purge,
            HistoryLog::Grays => &self.purge_gray,
        }
    }

    /// The statements as `D` spells them, for Nacelle's own schema.
    pub fn new<D: Dialect>() -> Self {
        Self::for_schema::<D>(false)
    }

    /// The statements as `D` spells them. `publish_type`: `his_config_info` has Nacos
    /// 2.5/3.0's `publish_type`, `gray_name` and `ext_info` columns — then gray writes
    /// also get a history row there (`publish_type = 'gray'`, as Nacos writes them), and
    /// everything formal (history listings, revisions, the purge) reads only formal rows.
    pub fn for_schema<D: Dialect>(publish_type: bool) -> Self {
        let time = D::TIME_PARAM;
        let formal = |alias: &str| {
            if publish_type {
                format!(" AND ({alias}publish_type IS NULL OR {alias}publish_type = 'formal')")
            } else {
                String::new()
            }
        };
        let (formal_any, formal_h) = (formal(""), formal("h."));
        let config_columns = format!(
            "{} AS id, c.data_id, c.group_id, c.tenant_id, c.content, c.md5, c.type, \
             c.app_name, c.c_desc, c.c_use, c.effect, c.c_schema, c.encrypted_data_key, \
             c.src_user, c.src_ip, {} AS gmt_create, {} AS gmt_modified, \
             (SELECT {} FROM config_tags_relation r WHERE r.id = c.id) AS config_tags, \
             {} AS revision",
            D::signed("c.id"),
            D::ms("c.gmt_create"),
            D::ms("c.gmt_modified"),
            D::tag_list(),
            D::signed(&format!(
                "COALESCE((SELECT MAX(h.nid) FROM his_config_info h WHERE h.data_id = c.data_id \
                 AND h.group_id = c.group_id AND h.tenant_id = c.tenant_id{formal_h}), 0)"
            )),
        );
        let history_columns = format!(
            "{} AS id, {} AS nid, data_id, group_id, tenant_id, app_name, content, md5, \
             src_user, src_ip, op_type, encrypted_data_key, {} AS gmt_create, \
             {} AS gmt_modified",
            D::signed("id"),
            D::signed("nid"),
            D::ms("gmt_create"),
            D::ms("gmt_modified"),
        );
        // A history row's note (message, change request), from the note table beside its
        // log: `nacelle_history_note` for `his_config_info`, `nacelle_gray_note` for the
        // gray change log (whose `nid`s are its own).
        let with_notes = |log: &str, notes: &str| {
            let note =
                |column: &str| format!("(SELECT {column} FROM {notes} n WHERE n.nid = {log}.nid)");
            format!(
                "{history_columns}, {} AS note_message, {} AS note_change_id",
                note("n.message"),
                note(&D::signed("n.change_id")),
            )
        };
        let gray_history_columns = with_notes("nacelle_gray_log", "nacelle_gray_note");
        let history_columns = with_notes("his_config_info", "nacelle_history_note");
        let gray_columns = |rule_cols: &str, table: &str, name_match: &str| {
            format!(
                "{} AS id, c.data_id, c.group_id, c.tenant_id, c.content, c.md5, \
                 'text' AS type, c.app_name, '' AS c_desc, '' AS c_use, '' AS effect, \
                 '' AS c_schema, {edk} AS encrypted_data_key, c.src_user, c.src_ip, \
                 {} AS gmt_create, {} AS gmt_modified, '' AS config_tags, {rule_cols}, \
                 {} AS revision FROM {table} c",
                D::signed("c.id"),
                D::ms("c.gmt_create"),
                D::ms("c.gmt_modified"),
                D::signed(&format!(
                    "COALESCE((SELECT MAX(l.nid) FROM nacelle_gray_log l WHERE \
                     l.data_id = c.data_id AND l.group_id = c.group_id AND \
                     l.tenant_id = c.tenant_id AND l.gray_name = {name_match}), 0)"
                )),
                edk = if table == "config_info_tag" {
                    "''"
                } else {
                    "c.encrypted_data_key"
                },
            )
        };
        let grays = gray_columns(
            "c.gray_name, c.gray_rule",
            "config_info_gray",
            "c.gray_name",
        );
        let betas = gray_columns(
            "'beta' AS gray_name, c.beta_ips AS gray_rule",
            "config_info_beta",
            "'beta'",
        );
        let tags = gray_columns(
            "c.tag_id AS gray_name, c.tag_id AS gray_rule",
            "config_info_tag",
            &D::concat("'tag_'", "c.tag_id"),
        );
        let key_match_c = "c.data_id = ? AND c.group_id = ? AND c.tenant_id = ?";
        let q = |sql: String| spell::<D>(&sql);
        Queries {
            // A row goes only while a newer row of its key exists; on a 2.5/3.0 schema, a
            // newer row of the same kind (formal, or gray of the same name). The gray change
            // log by key and gray name.
            purge: PurgeSql::new::<D>(
                "his_config_info",
                if publish_type {
                    &[
                        "COALESCE({a}publish_type, 'formal')",
                        "COALESCE({a}gray_name, '')",
                    ]
                } else {
                    &[]
                },
                DELETE_HISTORY,
            ),
            purge_gray: PurgeSql::new::<D>("nacelle_gray_log", &["{a}gray_name"], DELETE_GRAY_LOG),
            load_all: q(format!(
                "SELECT {config_columns} FROM config_info c ORDER BY c.id"
            )),
            get: q(format!(
                "SELECT {config_columns} FROM config_info c \
                 WHERE c.data_id = ? AND c.group_id = ? AND c.tenant_id = ?"
            )),
            history_count: q(format!(
                "SELECT {} AS n FROM his_config_info WHERE {KEY_MATCH}{formal_any}",
                D::signed("COUNT(*)")
            )),
            history_page: q(format!(
                "SELECT {history_columns} FROM his_config_info WHERE {KEY_MATCH}{formal_any} \
                 ORDER BY nid DESC LIMIT ? OFFSET ?"
            )),
            history_entry: q(format!(
                "SELECT {history_columns} FROM his_config_info WHERE nid = ?{formal_any}"
            )),
            history_previous: q(format!(
                "SELECT {history_columns} FROM his_config_info WHERE id = ?{formal_any} \
                 ORDER BY nid DESC LIMIT 1"
            )),
            insert_gray_history: publish_type.then(|| {
                q(format!(
                    "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, \
                     content, md5, gmt_create, gmt_modified, src_user, src_ip, op_type, \
                     encrypted_data_key, publish_type, gray_name, ext_info) VALUES \
                     (?, ?, ?, ?, ?, ?, ?, {time}, {time}, ?, ?, ?, ?, 'gray', ?, ?)"
                ))
            }),
            changes_since: q(change_log::<D>("his_config_info")),
            max_nid: q(newest_nid::<D>("his_config_info")),
            lock_current: q(format!(
                "SELECT {} AS id, content, md5, app_name, encrypted_data_key, \
                 {} AS gmt_create FROM config_info WHERE {KEY_MATCH}{}",
                D::signed("id"),
                D::ms("gmt_create"),
                D::FOR_UPDATE
            )),
            insert_config: q(format!(
                "INSERT INTO config_info (data_id, group_id, tenant_id, content, md5, \
                 gmt_create, gmt_modified, src_user, src_ip, app_name, c_desc, c_use, effect, \
                 type, c_schema, encrypted_data_key) VALUES (?, ?, ?, ?, ?, {time}, {time}, ?, \
                 ?, ?, ?, ?, ?, ?, ?, ?){}",
                D::INSERT_CONFIG_TAIL
            )),
            update_config: q(format!(
                "UPDATE config_info SET content = ?, md5 = ?, gmt_modified = {time}, \
                 src_user = ?, src_ip = ?, app_name = ?, c_desc = ?, c_use = ?, effect = ?, \
                 type = ?, c_schema = ?, encrypted_data_key = ? WHERE id = ?"
            )),
            delete_config: q("DELETE FROM config_info WHERE id = ?".into()),
            delete_tags: q("DELETE FROM config_tags_relation WHERE id = ?".into()),
            update_desc: q("UPDATE config_info SET c_desc = ? WHERE id = ?".into()),
            insert_tag: q(
                "INSERT INTO config_tags_relation (id, tag_name, tag_type, data_id, \
                 group_id, tenant_id) VALUES (?, ?, NULL, ?, ?, ?)"
                    .into(),
            ),
            insert_history: q(format!(
                "INSERT INTO his_config_info (id, data_id, group_id, tenant_id, app_name, \
                 content, md5, gmt_create, gmt_modified, src_user, src_ip, op_type, \
                 encrypted_data_key) VALUES (?, ?, ?, ?, ?, ?, ?, {time}, {time}, ?, ?, ?, ?){}",
                D::INSERT_HISTORY_TAIL
            )),
            load_grays: q(format!("SELECT {grays} ORDER BY c.id")),
            grays_of: q(format!("SELECT {grays} WHERE {key_match_c} ORDER BY c.id")),
            load_legacy_betas: q(format!("SELECT {betas} ORDER BY c.id")),
            legacy_betas_of: q(format!("SELECT {betas} WHERE {key_match_c}")),
            load_legacy_tags: q(format!("SELECT {tags} ORDER BY c.id")),
            legacy_tags_of: q(format!("SELECT {tags} WHERE {key_match_c} ORDER BY c.id")),
            lock_gray: q(format!(
                "SELECT {} AS id, content, md5, app_name, encrypted_data_key, \
                 {} AS gmt_create, gray_rule FROM config_info_gray WHERE {KEY_MATCH} \
                 AND gray_name = ?{}",
                D::signed("id"),
                D::ms("gmt_create"),
                D::FOR_UPDATE
            )),
            insert_gray: q(format!(
                "INSERT INTO config_info_gray (data_id, group_id, tenant_id, content, md5, \
                 gmt_create, gmt_modified, src_user, src_ip, app_name, gray_name, gray_rule, \
                 encrypted_data_key) VALUES (?, ?, ?, ?, ?, {time}, {time}, ?, ?, ?, ?, ?, ?){}",
                D::INSERT_CONFIG_TAIL
            )),
            update_gray: q(format!(
                "UPDATE config_info_gray SET content = ?, md5 = ?, gmt_modified = {time}, \
                 src_user = ?, src_ip = ?, app_name = ?, gray_rule = ?, \
                 encrypted_data_key = ? WHERE id = ?"
            )),
            delete_gray: q("DELETE FROM config_info_gray WHERE id = ?".into()),
            insert_gray_log: q(format!(
                "INSERT INTO nacelle_gray_log (id, data_id, group_id, tenant_id, gray_name, \
                 gray_rule, app_name, content, md5, gmt_create, gmt_modified, src_user, \
                 src_ip, op_type, encrypted_data_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, \
                 {time}, {time}, ?, ?, ?, ?){}",
                D::INSERT_HISTORY_TAIL
            )),
            gray_history_count: q(format!(
                "SELECT {} AS n FROM nacelle_gray_log WHERE {KEY_MATCH}",
                D::signed("COUNT(*)")
            )),
            gray_history_page: q(format!(
                "SELECT {gray_history_columns}, gray_name, gray_rule FROM nacelle_gray_log \
                 WHERE {KEY_MATCH} ORDER BY nid DESC LIMIT ? OFFSET ?"
            )),
            gray_changes_since: q(change_log::<D>("nacelle_gray_log")),
            max_gray_nid: q(newest_nid::<D>("nacelle_gray_log")),
            delete_legacy_beta: q(format!("DELETE FROM config_info_beta WHERE {KEY_MATCH}")),
            insert_legacy_beta: q(format!(
                "INSERT INTO config_info_beta (data_id, group_id, tenant_id, app_name, content, \
                 md5, beta_ips, src_ip, src_user, gmt_create, gmt_modified, \
                 encrypted_data_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {time}, {time}, ?)"
            )),
            delete_legacy_tag: q(format!(
                "DELETE FROM config_info_tag WHERE {KEY_MATCH} AND tag_id = ?"
            )),
            insert_legacy_tag: q(format!(
                "INSERT INTO config_info_tag (data_id, group_id, tenant_id, tag_id, app_name, \
                 content, md5, src_ip, src_user, gmt_create, gmt_modified) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {time}, {time})"
            )),
            insert_note: q(
                "INSERT INTO nacelle_history_note (nid, message, change_id) VALUES (?, ?, ?)"
                    .into(),
            ),
            insert_gray_note: q(
                "INSERT INTO nacelle_gray_note (nid, message, change_id) VALUES (?, ?, ?)".into(),
            ),
        }
    }
}

/// The rows of change log `table` after a `nid` (`?`), in `nid` order, at most `?`.
fn change_log<D: Dialect>(table: &str) -> String {
    format!(
        "SELECT {} AS nid, data_id, group_id, tenant_id, op_type, {} AS gmt_modified \
         FROM {table} WHERE nid > ? ORDER BY nid LIMIT ?",
        D::signed("nid"),
        D::ms("gmt_modified")
    )
}

/// The newest `nid` of change log `table` as column `n`, 0 when it is empty.
fn newest_nid<D: Dialect>(table: &str) -> String {
    format!(
        "SELECT {} AS n FROM {table}",
        D::signed("COALESCE(MAX(nid), 0)")
    )
}

/// The `nid`s of history rows in the window `(?, ?]` that `condemned` selects, oldest first,
/// at most `?` of them; never the newest row of a key (a newer row of the key must exist).
/// The window bounds what one statement reads, also when little of it is condemned. The row walk
/// goes by primary key from the position; the newer-row test and the N-th newest row use
/// `idx_did` (`data_id`, whose InnoDB entries end in the primary key `nid`; SQLite has
/// `idx_his_key`), the age test `idx_gmt_modified` where the planner prefers it.
fn purge_candidates<D: Dialect>(table: &str, condemned: &str, newer_filter: &str) -> String {
    format!(
        "SELECT {} AS nid FROM {table} h WHERE h.nid > ? AND h.nid <= ? AND {condemned} \
         AND EXISTS \
         (SELECT 1 FROM {table} n WHERE n.data_id = h.data_id AND n.group_id = \
         h.group_id AND n.tenant_id = h.tenant_id AND n.nid > h.nid{newer_filter}) \
         ORDER BY h.nid LIMIT ?",
        D::signed("h.nid")
    )
}

const DELETE_HISTORY: &str = "DELETE FROM his_config_info WHERE nid IN (";
const DELETE_GRAY_LOG: &str = "DELETE FROM nacelle_gray_log WHERE nid IN (";

/// Deletes the log rows `nids` in one statement. The ids are integers read from the
/// database and written as literals, so the statement is the same in every dialect and
/// needs no placeholders however many rows a batch holds.
pub(crate) fn delete_logged(purge: &PurgeSql, nids: &[i64]) -> String {
    let list: Vec<String> = nids.iter().map(i64::to_string).collect();
    format!("{}{})", purge.delete_prefix, list.join(", "))
}

/// The key's three columns, in [`KEY_MATCH`] order.
pub(crate) fn key_args(key: &ConfigKey) -> [Arg<'_>; 3] {
    [
        Arg::Text(key.data_id()),
        Arg::Text(key.group()),
        Arg::Text(key.tenant()),
    ]
}

/// A value of a planned statement: bound as it is, or the config row's id, which an
/// insert learns only from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param<'a> {
    Value(Arg<'a>),
    RowId,
    /// The history row's `nid`, learnt from the history insert (the note's key).
    Revision,
}

/// What a statement gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returns {
    Nothing,
    /// The generated id of the config row (column `id`); none when the key was taken.
    RowId,
    /// The generated `nid` of the history row (column `nid`): the new revision.
    Revision,
}

impl Returns {
    /// The column a `RETURNING` clause names.
    pub fn column(self) -> &'static str {
        match self {
            Returns::Revision => "nid",
            _ => "id",
        }
    }
}

/// One statement of a write, in execution order.
#[derive(Debug, Clone)]
pub(crate) struct Statement<'a> {
    pub sql: &'a str,
    pub params: Vec<Param<'a>>,
    pub returns: Returns,
}

/// The statements that execute `plan`, spelled by `D`.
pub(crate) fn statements<'a, D: Dialect>(q: &'a Queries, plan: &'a Plan<'_>) -> Vec<Statement<'a>> {
    let (gray, legacy) = match &plan.target {
        Target::Formal => (None, None),
        Target::Gray {
            name, rule, legacy, ..
        } => (Some((*name, rule.as_str())), legacy.as_ref()),
    };
    let ext_info = match &plan.target {
        Target::Gray { ext_info, .. } => ext_info.as_str(),
        Target::Formal => "",
    };
    let text = |s: &'a str| Param::Value(Arg::Text(s));
    let int = |i: i64| Param::Value(Arg::Int(i));
    let key = key_args(plan.key).map(Param::Value);
    let mut out = Vec::with_capacity(3 + plan.tags.insert.len());
    let fields = |row: &'a NewRow<'_>| {
        let (rec, m) = (row.rec, &row.rec.meta);
        [
            text(&rec.source.src_user),
            text(&rec.source.src_ip),
            text(&m.app_name),
            text(&m.desc),
            text(&m.r#use),
            text(&m.effect),
            text(rec.config_type.as_str()),
            text(&m.schema),
            text(&m.encrypted_data_key),
        ]
    };
    // A new row's first columns, formal or gray: the key, the content and its times.
    let inserted = |row: &'a NewRow<'_>| {
        let mut params = key.to_vec();
        params.extend([
            text(&row.content),
            text(&row.rec.md5),
            int(D::time_value(row.created_ms)),
            int(D::time_value(row.modified_ms)),
        ]);
        params
    };
    match (&plan.row, gray) {
        (RowWrite::Insert(row), None) => {
            let mut params = inserted(row);
            params.extend(fields(row));
            out.push(Statement {
                sql: &q.insert_config,
                params,
                returns: Returns::RowId,
            });
        }
        (RowWrite::Insert(row), Some((name, rule))) => {
            let mut params = inserted(row);
            params.extend([
                text(&row.rec.source.src_user),
                text(&row.rec.source.src_ip),
                text(&row.rec.meta.app_name),
                text(name),
                text(rule),
                text(&row.rec.meta.encrypted_data_key),
            ]);
            out.push(Statement {
                sql: &q.insert_gray,
                params,
                returns: Returns::RowId,
            });
        }
        (RowWrite::Update { id, row }, None) => {
            let mut params = vec![
                text(&row.content),
                text(&row.rec.md5),
                int(D::time_value(row.modified_ms)),
            ];
            params.extend(fields(row));
            params.push(int(*id));
            out.push(Statement {
                sql: &q.update_config,
                params,
                returns: Returns::Nothing,
            });
        }
        (RowWrite::Update { id, row }, Some((_, rule))) => out.push(Statement {
            sql: &q.update_gray,
            params: vec![
                text(&row.content),
                text(&row.rec.md5),
                int(D::time_value(row.modified_ms)),
                text(&row.rec.source.src_user),
                text(&row.rec.source.src_ip),
                text(&row.rec.meta.app_name),
                text(rule),
                text(&row.rec.meta.encrypted_data_key),
                int(*id),
            ],
            returns: Returns::Nothing,
        }),
        (RowWrite::Delete { id }, gray) => out.push(Statement {
            sql: if gray.is_some() {
                &q.delete_gray
            } else {
                &q.delete_config
            },
            params: vec![int(*id)],
            returns: Returns::Nothing,
        }),
    }
    if let Some(legacy) = legacy {
        // The 2.4 mirror: deleted, then written again unless the gray goes.
        let row = match &plan.row {
            RowWrite::Insert(row) | RowWrite::Update { row, .. } => Some(row),
            RowWrite::Delete { .. } => None,
        };
        match legacy {
            Legacy::Beta { ips } => {
                out.push(Statement {
                    sql: &q.delete_legacy_beta,
                    params: key.to_vec(),
                    returns: Returns::Nothing,
                });
                if let Some(row) = row {
                    let mut params = key.to_vec();
                    params.extend([
                        text(&row.rec.meta.app_name),
                        text(&row.content),
                        text(&row.rec.md5),
                        text(ips),
                        text(&row.rec.source.src_ip),
                        text(&row.rec.source.src_user),
                        int(D::time_value(row.created_ms)),
                        int(D::time_value(row.modified_ms)),
                        text(&row.rec.meta.encrypted_data_key),
                    ]);
                    out.push(Statement {
                        sql: &q.insert_legacy_beta,
                        params,
                        returns: Returns::Nothing,
                    });
                }
            }
            Legacy::Tag { tag } => {
                let mut params = key.to_vec();
                params.push(text(tag));
                out.push(Statement {
                    sql: &q.delete_legacy_tag,
                    params: params.clone(),
                    returns: Returns::Nothing,
                });
                if let Some(row) = row {
                    params.extend([
                        text(&row.rec.meta.app_name),
                        text(&row.content),
                        text(&row.rec.md5),
                        text(&row.rec.source.src_ip),
                        text(&row.rec.source.src_user),
                        int(D::time_value(row.created_ms)),
                        int(D::time_value(row.modified_ms)),
                    ]);
                    out.push(Statement {
                        sql: &q.insert_legacy_tag,
                        params,
                        returns: Returns::Nothing,
                    });
                }
            }
        }
    }
    if plan.tags.clear {
        out.push(Statement {
            sql: &q.delete_tags,
            params: vec![Param::RowId],
            returns: Returns::Nothing,
        });
    }
    for tag in &plan.tags.insert {
        let mut params = vec![Param::RowId, text(tag)];
        params.extend(key);
        out.push(Statement {
            sql: &q.insert_tag,
            params,
            returns: Returns::Nothing,
        });
    }
    let h = &plan.history;
    let now = int(D::time_value(h.now_ms));
    let (sql, mut params) = match gray {
        // The gray change log records the gray row's id (0 for an insert, as history
        // does) and its name and rule.
        Some((name, rule)) => {
            let mut params = vec![int(h.config_id)];
            params.extend(key);
            params.extend([text(name), text(rule)]);
            (&q.insert_gray_log, params)
        }
        None => {
            let mut params = vec![int(h.config_id)];
            params.extend(key);
            (&q.insert_history, params)
        }
    };
    params.extend([text(h.app_name), text(&h.content), text(&h.md5), now, now]);
    params.extend([
        text(&h.source.src_user),
        text(&h.source.src_ip),
        text(h.op.as_str()),
        text(h.encrypted_data_key),
    ]);
    // On a Nacos 2.5/3.0 schema a gray write also has a `his_config_info` row, as Nacos
    // writes it (after the gray log's row, which gives the revision).
    let mirror = match (gray, &q.insert_gray_history) {
        (Some((name, _)), Some(sql)) => {
            let mut p = params[..params.len()].to_vec();
            // The gray log's parameters are (id, key, name, rule, …): the history row's are
            // (id, key, …, name, ext_info).
            p.drain(4..6);
            p.extend([text(name), text(ext_info)]);
            Some(Statement {
                sql: sql.as_str(),
                params: p,
                returns: Returns::Nothing,
            })
        }
        _ => None,
    };
    out.push(Statement {
        sql,
        params,
        returns: Returns::Revision,
    });
    out.extend(mirror);
    // The note of a history row (message, change request), when it has one: keyed by the
    // row's `nid` (of `his_config_info`, or of the gray change log), in the same
    // transaction.
    if !h.source.message.is_empty() || h.source.change_id.is_some() {
        out.push(Statement {
            sql: match gray {
                None => &q.insert_note,
                Some(_) => &q.insert_gray_note,
            },
            params: vec![
                Param::Revision,
                text(&h.source.message),
                Param::Value(Arg::OptInt(h.source.change_id)),
            ],
            returns: Returns::Nothing,
        });
    }
    out
}

/// The statements of a metadata update of config row `id` of `key`: its description when
/// `desc` is given, its tag relations replaced when `tags` is given (as a publish replaces
/// them: all deleted, then one per tag in order).
pub(crate) fn metadata_statements<'a>(
    q: &'a Queries,
    key: &'a ConfigKey,
    id: i64,
    desc: Option<&'a str>,
    tags: Option<&[&'a str]>,
) -> Vec<Statement<'a>> {
    let value = |a: Arg<'a>| Param::Value(a);
    let mut out = Vec::new();
    if let Some(desc) = desc {
        out.push(Statement {
            sql: &q.update_desc,
            params: vec![value(Arg::Text(desc)), value(Arg::Int(id))],
            returns: Returns::Nothing,
        });
    }
    if let Some(tags) = tags {
        out.push(Statement {
            sql: &q.delete_tags,
            params: vec![value(Arg::Int(id))],
            returns: Returns::Nothing,
        });
        for tag in tags {
            let mut params = vec![value(Arg::Int(id)), value(Arg::Text(tag))];
            params.extend(key_args(key).map(value));
            out.push(Statement {
                sql: &q.insert_tag,
                params,
                returns: Returns::Nothing,
            });
        }
    }
    out
}

/// What the statements of a plan have returned so far: the config row's id (known from
/// the start for an update or delete) and the new revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Written {
    pub row_id: Option<i64>,
    pub revision: Option<i64>,
}

impl Written {
    /// Nothing run yet.
    pub fn new(plan: &Plan<'_>) -> Self {
        let row_id = match plan.row {
            RowWrite::Insert(_) => None,
            RowWrite::Update { id, .. } | RowWrite::Delete { id } => Some(id),
        };
        Written {
            row_id,
            revision: None,
        }
    }

    /// The values to bind for `st`.
    pub fn args<'a>(&self, st: &Statement<'a>) -> Result<Vec<Arg<'a>>, StoreError> {
        st.params
            .iter()
            .map(|p| match *p {
                Param::Value(a) => Ok(a),
                Param::RowId => self.row_id.map(Arg::Int).ok_or_else(|| {
                    StoreError::Unavailable("a statement needs a row id not yet known".into())
                }),
                Param::Revision => self.revision.map(Arg::Int).ok_or_else(|| {
                    StoreError::Unavailable("a statement needs a revision not yet known".into())
                }),
            })
            .collect()
    }

    /// The values of a statement that binds no value learnt while writing.
    pub fn fixed<'a>(st: &Statement<'a>) -> Result<Vec<Arg<'a>>, StoreError> {
        Written {
            row_id: None,
            revision: None,
        }
        .args(st)
    }

    /// Records what `st` returned. `false`: the config insert found its key taken by a
    /// concurrent insert (the write should retry, and will become an update).
    pub fn record(&mut self, st: &Statement<'_>, value: Option<i64>) -> bool {
        match st.returns {
            Returns::Nothing => true,
            Returns::RowId => {
                self.row_id = value;
                value.is_some()
            }
            Returns::Revision => {
                self.revision = value;
                true
            }
        }
    }

    /// The config row's id and the revision, once every statement ran.
    pub fn finish(self) -> Result<(i64, i64), StoreError> {
        match (self.row_id, self.revision) {
            (Some(id), Some(revision)) => Ok((id, revision)),
            _ => Err(StoreError::Unavailable(
                "the database returned no generated id".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_planned_statement_binds_one_value_per_placeholder() -> Result<(), StoreError> {
        use crate::plan::{plan_publish, plan_remove, Current};
        use bytes::Bytes;
        use nacelle_core::{ConfigMeta, ConfigType, OpSource, PublishRecord};

        let rec = PublishRecord {
            key: ConfigKey::from_trusted("", "G", "d"),
            content: Bytes::from_static(b"v"),
            md5: nacelle_core::md5_hex(b"v"),
            config_type: ConfigType::Text,
            meta: ConfigMeta {
                config_tags: "a,b".into(),
                ..Default::default()
            },
            source: OpSource::default(),
            cas_md5: None,
            now_ms: 1,
            gray: None,
        };
        let old = Current::new(
            3,
            "old".into(),
            String::new(),
            String::new(),
            String::new(),
            0,
        );
        let q = Queries::new::<sqlx::Sqlite>();
        let plans = [
            plan_publish(&rec, None, 1)?,
            plan_publish(&rec, Some(&old), 1)?,
            plan_remove(&rec.key, &rec.source, Some(&old), 1)
                .ok_or(StoreError::NotFound("plan".into()))?,
        ];
        for plan in &plans {
            let sts = statements::<sqlx::Sqlite>(&q, plan);
            for st in &sts {
                assert_eq!(st.sql.matches('?').count(), st.params.len(), "{}", st.sql);
            }
            assert_eq!(sts.last().map(|s| s.returns), Some(Returns::Revision));
        }
        // Insert: row, two tags, history. Update: row, clear tags, two tags, history.
        let count = |i: usize| statements::<sqlx::Sqlite>(&q, &plans[i]).len();
        assert_eq!((count(0), count(1), count(2)), (4, 5, 3));
        Ok(())
    }
}
