//! Records that flow between the store, the service and the adapters.
//!
//! These types are deliberately not `Serialize`: only protocol adapters know wire formats.

use bytes::Bytes;

use crate::error::CoreError;
use std::sync::Arc;

use crate::caller::Caller;
use crate::gray::{GrayRule, GraySpec};
use crate::key::{tag_of, ConfigKey, ConfigType, NamespaceId};

/// Optional descriptive fields of a config, stored beside its content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigMeta {
    pub app_name: String,
    pub desc: String,
    pub r#use: String,
    pub effect: String,
    pub schema: String,
    /// Comma-separated tags (`config_tags`), at most 5, each at most 64 characters.
    pub config_tags: String,
    pub encrypted_data_key: String,
}

/// Who made a change, from where and why; recorded in history (`src_user`, `src_ip` in
/// Nacos's columns, the message and change request in Nacelle's `nacelle_history_note`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpSource {
    pub src_user: String,
    pub src_ip: String,
    /// The publish message the writer gave (`""`: none).
    pub message: String,
    /// The change request the write belongs to, when there is one.
    pub change_id: Option<i64>,
}

/// Which variant of a key a write addresses: the formal config every client gets, or a
/// gray variant (beta by IP, tag, label rule — see [`crate::gray`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    Formal,
    Gray(GraySpec),
}

impl Variant {
    /// The variant a write names on the wire, with one "blank means absent" rule for both
    /// fields: a `betaIps` list with at least one non-blank entry is the beta (every entry
    /// must be an IP address or a CIDR; it wins over a tag, as in Nacos), else a non-blank
    /// tag (checked by [`crate::key::check_tag`]), else the formal config.
    pub fn from_wire(beta_ips: Option<&str>, tag: Option<&str>) -> Result<Variant, CoreError> {
        let beta = beta_ips.unwrap_or("");
        if beta.split(',').any(|ip| !ip.trim().is_empty()) {
            return Ok(Variant::Gray(GraySpec::beta(beta)?));
        }
        Ok(match tag_of(tag)? {
            Some(t) => Variant::Gray(GraySpec::tag(t)?),
            None => Variant::Formal,
        })
    }

    /// [`Variant::from_wire`] plus Nacelle's extension for label rules: a non-blank
    /// `grayName` with `grayRule` (a tagv2 expression such as `AppName=shop` or
    /// `env=pre&&region=hz`) and an optional `grayPriority` (an integer, default 0). The
    /// extension cannot be combined with `betaIps` or a tag.
    pub fn from_wire_ext(
        beta_ips: Option<&str>,
        tag: Option<&str>,
        gray_name: Option<&str>,
        gray_rule: Option<&str>,
        gray_priority: Option<&str>,
    ) -> Result<Variant, CoreError> {
        let blank = |v: Option<&str>| v.is_none_or(|v| v.trim().is_empty());
        if blank(gray_name) {
            if !blank(gray_rule) {
                return Err(CoreError::invalid("grayRule needs a grayName"));
            }
            return Variant::from_wire(beta_ips, tag);
        }
        let name = gray_name.unwrap_or("");
        if Variant::from_wire(beta_ips, tag)? != Variant::Formal {
            return Err(CoreError::invalid(
                "grayName cannot be combined with betaIps or tag",
            ));
        }
        let rule = gray_rule
            .filter(|r| !r.trim().is_empty())
            .ok_or_else(|| CoreError::invalid("grayName needs a grayRule"))?;
        let priority = match gray_priority.map(str::trim).filter(|p| !p.is_empty()) {
            None => None,
            Some(p) => Some(p.parse::<i32>().map_err(|_| {
                CoreError::invalid(format!("grayPriority `{p}` is not an integer"))
            })?),
        };
        Ok(Variant::Gray(GraySpec::labels(name, rule, priority)?))
    }
}

/// One gray variant of a key, as served: its rule, priority and content.
#[derive(Debug, Clone)]
pub struct Gray {
    pub name: Arc<str>,
    pub rule: GrayRule,
    pub priority: i32,
    /// The variant's content and metadata (`id` is the gray row's, `revision` its change
    /// log position).
    pub config: Arc<StoredConfig>,
}

/// The gray variants of one key, highest priority first (ties by name).
#[derive(Debug, Clone, Default)]
pub struct GraySet {
    grays: Vec<Gray>,
}

impl GraySet {
    /// A set from its variants, sorted as they are matched.
    pub fn new(mut grays: Vec<Gray>) -> GraySet {
        grays.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
        GraySet { grays }
    }

    /// The first variant whose rule selects `caller` asking for `tag`.
    pub fn select(&self, caller: &Caller, tag: Option<&str>) -> Option<&Gray> {
        self.grays.iter().find(|g| g.rule.matches(caller, tag))
    }

    /// The variant named `name`.
    pub fn get(&self, name: &str) -> Option<&Gray> {
        self.grays.iter().find(|g| &*g.name == name)
    }

    /// Every variant, in match order.
    pub fn iter(&self) -> impl Iterator<Item = &Gray> {
        self.grays.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.grays.is_empty()
    }

    pub fn len(&self) -> usize {
        self.grays.len()
    }
}

/// One config as stored: the formal variant of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConfig {
    /// Row id in `config_info`.
    pub id: i64,
    pub key: ConfigKey,
    pub content: Bytes,
    pub md5: String,
    pub config_type: ConfigType,
    pub meta: ConfigMeta,
    /// The user and IP of the last change.
    pub source: OpSource,
    pub created_ms: i64,
    pub modified_ms: i64,
    /// Monotonic revision: the `nid` of the history row written with this version. A
    /// newer version always has a larger revision, so an older event never overwrites it.
    pub revision: i64,
}

/// A request to write a config; validated by the service before it reaches the store.
#[derive(Debug, Clone)]
pub struct PublishRecord {
    pub key: ConfigKey,
    pub content: Bytes,
    pub md5: String,
    pub config_type: ConfigType,
    pub meta: ConfigMeta,
    pub source: OpSource,
    /// Compare-and-set: only write if the stored md5 equals this (an absent config has md5 "").
    pub cas_md5: Option<String>,
    /// Time of the change in ms.
    pub now_ms: i64,
    /// The gray variant written, `None` for the formal config. Compare-and-set then
    /// compares with that variant's md5 (`""` when it does not exist yet).
    pub gray: Option<GraySpec>,
}

/// One gray variant as stored (`config_info_gray`, or Nacos 2.4's `config_info_beta` /
/// `config_info_tag`): its name, its rule as stored (type, expression, priority), and its
/// content as a config record whose `id` is the gray row's and whose `revision` is the
/// position of its last change in Nacelle's gray change log (0 for a row no Nacelle node
/// has written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGray {
    pub name: String,
    pub rule_type: String,
    pub rule_expr: String,
    pub priority: i32,
    pub config: StoredConfig,
}

/// History operation types as Nacos writes them in `his_config_info.op_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpType {
    Insert,
    Update,
    Delete,
}

impl OpType {
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Insert => "I",
            OpType::Update => "U",
            OpType::Delete => "D",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "I" => Some(OpType::Insert),
            "U" => Some(OpType::Update),
            "D" => Some(OpType::Delete),
            _ => None,
        }
    }
}

/// One row of `his_config_info`. It holds the content of the version that the operation
/// replaced or removed (for `I`, the inserted content), as Nacos does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    /// `nid`, the history row id.
    pub nid: i64,
    /// `id`, the config row id it belongs to.
    pub config_id: i64,
    pub key: ConfigKey,
    pub app_name: String,
    pub content: String,
    pub md5: String,
    pub source: OpSource,
    pub op_type: OpType,
    pub created_ms: i64,
    pub modified_ms: i64,
    pub encrypted_data_key: String,
}

/// One row of Nacelle's gray change log (`nacelle_gray_log`): a gray write with the
/// variant's name and rule as they were. The entry holds the version the write replaced or
/// removed (for `I`, the inserted one), as [`HistoryEntry`] does; `config_id` is the gray
/// row's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrayHistoryEntry {
    pub entry: HistoryEntry,
    pub gray_name: String,
    pub rule_type: String,
    pub rule_expr: String,
    pub priority: i32,
}

/// One change in the database's change log (`his_config_info`), as a cluster member
/// following the log sees it: which key changed, how, and when. The content is not carried:
/// a follower reloads the key from the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// `nid` of the history row; the revision the change produced.
    pub nid: i64,
    pub key: ConfigKey,
    pub op_type: OpType,
    /// `gmt_modified` of the history row, in ms (whole seconds on MySQL).
    pub modified_ms: i64,
}

/// Which `his_config_info` rows a purge removes: rows older than `older_than_ms`, and rows
/// beyond the newest `keep_per_key` of their key. The newest row of a key is never removed,
/// whatever its age: a config's revision, `history/previous` and the change-log follower
/// rely on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistoryRetention {
    /// Rows whose `gmt_modified` is before this time (ms since the epoch) are removed;
    /// `None`: no age limit.
    pub older_than_ms: Option<i64>,
    /// Only the newest N rows of each key are kept (N is at least 1; 0 counts as 1);
    /// `None`: no count limit.
    pub keep_per_key: Option<u32>,
}

impl HistoryRetention {
    /// Whether the rule removes nothing at all (neither limit set).
    pub fn keeps_everything(&self) -> bool {
        self.older_than_ms.is_none() && self.keep_per_key.is_none()
    }
}

/// Which log a history purge walks ([`crate::ConfigStore::purge_history`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryLog {
    /// `his_config_info`, by key (on a Nacos 2.5/3.0 schema, by key and kind: formal, or
    /// gray of one name).
    Configs,
    /// The gray change log `nacelle_gray_log`, by key and gray name.
    Grays,
}

impl HistoryLog {
    /// Both logs, in the order a purge run walks them.
    pub const ALL: [HistoryLog; 2] = [HistoryLog::Configs, HistoryLog::Grays];
}

/// What one batch of a history purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PurgeStep {
    /// Rows deleted by this batch.
    pub deleted: u64,
    /// The `after_nid` of the next batch; `None` when the purge has gone through the whole
    /// log.
    pub resume_after: Option<i64>,
}

/// A namespace (`tenant_info` row, or the built-in default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Namespace id; the default namespace for the built-in one.
    pub id: NamespaceId,
    pub name: String,
    pub desc: String,
}

/// A page of results, numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub total_count: u64,
    pub page_number: u64,
    pub pages_available: u64,
    pub items: Vec<T>,
}

impl<T> Page<T> {
    /// Builds a page from the total count and the items of that page.
    pub fn new(total_count: u64, page_number: u64, page_size: u64, items: Vec<T>) -> Self {
        let pages_available = if page_size == 0 {
            0
        } else {
            total_count.div_ceil(page_size)
        };
        Page {
            total_count,
            page_number,
            pages_available,
            items,
        }
    }

    /// The same page with each item turned by `f`, or the first error `f` returns.
    pub fn try_map<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<Page<U>, E> {
        Ok(Page {
            total_count: self.total_count,
            page_number: self.page_number,
            pages_available: self.pages_available,
            items: self.items.into_iter().map(f).collect::<Result<_, _>>()?,
        })
    }
}

/// Page request: 1-based page number and a page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub page_no: u64,
    pub page_size: u64,
}

impl PageRequest {
    /// Largest history page. Nacos clamps larger history page sizes to it rather than
    /// rejecting them; config search has no such cap in Nacos (the Python 1.x client's
    /// `get_configs` asks for 1000 items by default).
    pub const MAX_PAGE_SIZE: u64 = 500;
    /// Largest page number or size at all: Nacos reads both as a Java `int`.
    pub const MAX_PAGE_PARAM: u64 = i32::MAX as u64;

    /// Row offset of this page.
    pub fn offset(&self) -> u64 {
        (self.page_no.saturating_sub(1)).saturating_mul(self.page_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_from_wire() -> Result<(), CoreError> {
        assert_eq!(Variant::from_wire(None, None)?, Variant::Formal);
        assert_eq!(Variant::from_wire(Some(" , "), Some(" "))?, Variant::Formal);
        let Variant::Gray(beta) = Variant::from_wire(Some(" 1.1.1.1, ,2.2.2.2 "), Some("t"))?
        else {
            panic!("a beta list is a beta");
        };
        assert_eq!(
            (beta.name.as_str(), beta.rule.expr()),
            ("beta", "1.1.1.1,2.2.2.2".to_string())
        );
        let Variant::Gray(tag) = Variant::from_wire(Some(""), Some(" t1 "))? else {
            panic!("a tag is a tag variant");
        };
        assert_eq!(tag.name, "tag_t1");
        assert!(Variant::from_wire(None, Some("a b")).is_err());
        assert!(Variant::from_wire(Some("1.1.1.1,nope"), None).is_err());
        Ok(())
    }

    fn caller(ip: &str, app: Option<&str>, labels: &[(&str, &str)]) -> Caller {
        let mut c = Caller::anonymous(crate::Protocol::Grpc, ip.parse().ok());
        c.app_name = app.map(Arc::from);
        c.labels = crate::Labels::new(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        c
    }

    #[test]
    fn the_first_matching_rule_by_priority_wins() -> Result<(), CoreError> {
        let config = Arc::new(StoredConfig {
            id: 1,
            key: ConfigKey::from_trusted("", "G", "d"),
            content: bytes::Bytes::new(),
            md5: String::new(),
            config_type: ConfigType::Text,
            meta: Default::default(),
            source: Default::default(),
            created_ms: 0,
            modified_ms: 0,
            revision: 0,
        });
        let gray = |spec: GraySpec| Gray {
            name: spec.name.into(),
            rule: spec.rule,
            priority: spec.priority,
            config: config.clone(),
        };
        let set = GraySet::new(vec![
            gray(GraySpec::labels("low", "AppName=shop", Some(1))?),
            gray(GraySpec::labels("high", "env=pre", Some(10))?),
            gray(GraySpec::beta("127.0.0.2")?),
        ]);
        let name = |c: &Caller| set.select(c, None).map(|g| g.name.to_string());
        assert_eq!(
            name(&caller("127.0.0.2", Some("shop"), &[("env", "pre")])).as_deref(),
            Some("beta")
        );
        assert_eq!(
            name(&caller("127.0.0.3", Some("shop"), &[("env", "pre")])).as_deref(),
            Some("high")
        );
        assert_eq!(
            name(&caller("127.0.0.3", Some("shop"), &[])).as_deref(),
            Some("low")
        );
        assert_eq!(name(&caller("127.0.0.3", None, &[])), None);
        Ok(())
    }
}

/// A JSON Schema bound to the keys of a namespace whose group and dataId match two
/// patterns (`nacelle_config_schema`, docs/schema-validation.md). The store keeps the
/// text as given; the service compiles and applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRecord {
    /// The namespace whose keys it covers (exact).
    pub namespace: NamespaceId,
    /// The group pattern: exact, `*`, `x*`, `*x` or `*x*`.
    pub group: String,
    /// The dataId pattern, of the same shapes.
    pub data_id: String,
    /// The JSON Schema document, as text.
    pub schema: String,
    /// What it is for (free text, may be empty).
    pub description: String,
    /// Who set it.
    pub src_user: String,
    /// When it was last set, ms since the epoch.
    pub modified_ms: i64,
}
