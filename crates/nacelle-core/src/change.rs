//! Change requests: reviewed, multi-key changes of one namespace, published in one
//! transaction (docs/change-requests.md), and the review policies that require them.
//!
//! A change request holds key changes ([`ChangeItem`]: publish a content of a type, or
//! remove), each recorded against the md5 its key had when the change was based (`""`:
//! absent). Its life is a [`ChangeState`]; what happened to it (opened, commented,
//! approved, rejected, rebased, published …) is its list of [`ChangeEvent`]s. Publishing
//! writes every key in one transaction, and only if every key still has its base md5;
//! otherwise nothing is written and the request is *stale* until rebased.

use std::fmt;

use crate::auth::pattern_matches;
use crate::key::{ConfigKey, ConfigType, NamespaceId};
use crate::model::{OpSource, PublishRecord, StoredConfig};

/// The id of a change request.
pub type ChangeId = i64;

/// Where a change request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeState {
    /// Being written by its author; nobody reviews it yet.
    Draft,
    /// Waiting for reviews.
    Open,
    /// Approved by as many reviewers as its policy requires: may be published.
    Approved,
    /// A reviewer rejected it; the author may edit and reopen it.
    Rejected,
    /// Written to the configs (final).
    Published,
    /// Abandoned (final).
    Closed,
}

impl ChangeState {
    /// Every state, in life order.
    pub const ALL: [ChangeState; 6] = [
        ChangeState::Draft,
        ChangeState::Open,
        ChangeState::Approved,
        ChangeState::Rejected,
        ChangeState::Published,
        ChangeState::Closed,
    ];

    /// The state's name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeState::Draft => "draft",
            ChangeState::Open => "open",
            ChangeState::Approved => "approved",
            ChangeState::Rejected => "rejected",
            ChangeState::Published => "published",
            ChangeState::Closed => "closed",
        }
    }

    /// The state named `s` (case-insensitive).
    pub fn parse(s: &str) -> Option<ChangeState> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether nothing can happen to it any more.
    pub fn is_final(self) -> bool {
        matches!(self, ChangeState::Published | ChangeState::Closed)
    }
}

impl fmt::Display for ChangeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a change request does to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeOp {
    /// Publish this content with this type.
    Publish {
        content: String,
        config_type: ConfigType,
    },
    /// Remove the key.
    Remove,
}

impl ChangeOp {
    /// The operation's name, as stored (`publish` / `remove`).
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeOp::Publish { .. } => "publish",
            ChangeOp::Remove => "remove",
        }
    }
}

/// One key of a change request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeItem {
    pub group: String,
    pub data_id: String,
    pub op: ChangeOp,
    /// The md5 of the key's formal content the change is based on; `""` when the key did
    /// not exist. Publishing requires the key to hold exactly this.
    pub base_md5: String,
}

impl ChangeItem {
    /// The item's key in namespace `ns`.
    pub fn key(&self, ns: &NamespaceId) -> ConfigKey {
        ConfigKey::from_trusted(ns.as_str(), &self.group, &self.data_id)
    }
}

/// What happened to a change request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeEventKind {
    Created,
    Opened,
    Edited,
    Commented,
    Approved,
    Rejected,
    Rebased,
    /// A publish found a key changed since its base: nothing was written.
    Stale,
    Scheduled,
    Published,
    Closed,
}

impl ChangeEventKind {
    const ALL: [ChangeEventKind; 11] = [
        ChangeEventKind::Created,
        ChangeEventKind::Opened,
        ChangeEventKind::Edited,
        ChangeEventKind::Commented,
        ChangeEventKind::Approved,
        ChangeEventKind::Rejected,
        ChangeEventKind::Rebased,
        ChangeEventKind::Stale,
        ChangeEventKind::Scheduled,
        ChangeEventKind::Published,
        ChangeEventKind::Closed,
    ];

    /// The kind's name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeEventKind::Created => "created",
            ChangeEventKind::Opened => "opened",
            ChangeEventKind::Edited => "edited",
            ChangeEventKind::Commented => "commented",
            ChangeEventKind::Approved => "approved",
            ChangeEventKind::Rejected => "rejected",
            ChangeEventKind::Rebased => "rebased",
            ChangeEventKind::Stale => "stale",
            ChangeEventKind::Scheduled => "scheduled",
            ChangeEventKind::Published => "published",
            ChangeEventKind::Closed => "closed",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Option<ChangeEventKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether it changes what was reviewed, so earlier approvals no longer count.
    pub fn resets_approvals(self) -> bool {
        matches!(self, ChangeEventKind::Edited | ChangeEventKind::Rebased)
    }
}

/// One event of a change request's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeEvent {
    pub kind: ChangeEventKind,
    pub user: String,
    pub time_ms: i64,
    /// The comment, the reason of a rejection or emergency, the keys found stale …
    pub text: String,
}

/// A change request as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    pub id: ChangeId,
    pub namespace: NamespaceId,
    pub title: String,
    pub description: String,
    pub author: String,
    pub state: ChangeState,
    /// A publish found a key changed since its base; cleared by a rebase.
    pub stale: bool,
    /// Bumped by every change of the request: what an update compares and sets.
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// When an approved request is published by the server itself.
    pub publish_at_ms: Option<i64>,
    /// Its keys (empty in a listing).
    pub items: Vec<ChangeItem>,
    /// Its events, oldest first (empty in a listing).
    pub events: Vec<ChangeEvent>,
    /// How many keys it holds (also in a listing).
    pub item_count: usize,
}

impl ChangeRequest {
    /// The distinct users whose approval counts: approvals after the last edit or rebase,
    /// not withdrawn by a rejection of the same user after them.
    pub fn approvers(&self) -> Vec<&str> {
        let start = self
            .events
            .iter()
            .rposition(|e| e.kind.resets_approvals())
            .map_or(0, |i| i + 1);
        let mut out: Vec<&str> = Vec::new();
        for e in &self.events[start..] {
            match e.kind {
                ChangeEventKind::Approved if !out.contains(&e.user.as_str()) => {
                    out.push(&e.user);
                }
                ChangeEventKind::Rejected => out.retain(|u| *u != e.user),
                _ => {}
            }
        }
        out
    }
}

/// A new change request, as the store creates it (with its `Created` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChange {
    pub namespace: NamespaceId,
    pub title: String,
    pub description: String,
    pub author: String,
    pub state: ChangeState,
    pub items: Vec<ChangeItem>,
    pub now_ms: i64,
}

/// An event to record with an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewChangeEvent {
    pub kind: ChangeEventKind,
    pub user: String,
    pub text: String,
}

/// A change of a change request, applied only if it still has `expected_version`
/// ([`StoreError::CasMismatch`](crate::StoreError::CasMismatch) otherwise); its event is
/// recorded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeUpdate {
    pub expected_version: i64,
    pub state: Option<ChangeState>,
    pub stale: Option<bool>,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Replaces every item (an edit, or a rebase with fresh base md5s).
    pub items: Option<Vec<ChangeItem>>,
    /// `Some(None)` clears the schedule.
    pub publish_at_ms: Option<Option<i64>>,
    pub event: NewChangeEvent,
    pub now_ms: i64,
}

impl ChangeUpdate {
    /// An update that only records `event` (and bumps the version).
    pub fn event(expected_version: i64, event: NewChangeEvent, now_ms: i64) -> Self {
        ChangeUpdate {
            expected_version,
            state: None,
            stale: None,
            title: None,
            description: None,
            items: None,
            publish_at_ms: None,
            event,
            now_ms,
        }
    }
}

/// Which change requests a listing shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeFilter {
    pub namespace: Option<NamespaceId>,
    /// Only requests of these namespaces (the ones a caller may see); `None`: any.
    pub namespaces: Option<Vec<NamespaceId>>,
    pub state: Option<ChangeState>,
    pub author: Option<String>,
}

/// One key write of a change request's publish.
#[derive(Debug, Clone)]
pub enum ChangeWrite {
    /// Publish `record` (formal, without `cas_md5`: the base below is what is checked).
    Publish {
        record: Box<PublishRecord>,
        base_md5: String,
    },
    /// Remove `key`.
    Remove {
        key: ConfigKey,
        base_md5: String,
        source: OpSource,
    },
}

impl ChangeWrite {
    /// The key it writes.
    pub fn key(&self) -> &ConfigKey {
        match self {
            ChangeWrite::Publish { record, .. } => &record.key,
            ChangeWrite::Remove { key, .. } => key,
        }
    }

    /// The md5 the key must hold for the publish to go ahead.
    pub fn base_md5(&self) -> &str {
        match self {
            ChangeWrite::Publish { base_md5, .. } | ChangeWrite::Remove { base_md5, .. } => {
                base_md5
            }
        }
    }
}

/// What one key write of a published change request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeWritten {
    /// Published: the stored config.
    Published(Box<StoredConfig>),
    /// Removed at this revision (`None`: it was absent already).
    Removed(Option<i64>),
}

/// The result of publishing a change request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangePublishOutcome {
    /// Committed: one entry per write, in order; the request is `published`.
    Published(Vec<ChangeWritten>),
    /// These keys no longer hold their base md5: nothing was written.
    Stale(Vec<ConfigKey>),
    /// The request is no longer approved at the expected version (someone else published,
    /// closed or changed it): nothing was written.
    Moved,
}

/// A review policy: direct writes to the matching keys are refused, and a change request
/// touching them needs `required_approvals` approvals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewPolicy {
    pub namespace: NamespaceId,
    /// Group pattern: exact, or with `*` wildcards as permission resources have them
    /// (`*` alone: every group).
    pub group_pattern: String,
    pub required_approvals: u32,
    pub updated_by: String,
    pub updated_ms: i64,
}

impl ReviewPolicy {
    /// Whether the policy covers `key`.
    pub fn covers(&self, key: &ConfigKey) -> bool {
        self.namespace == *key.namespace() && pattern_matches(&self.group_pattern, key.group())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: ChangeEventKind, user: &str) -> ChangeEvent {
        ChangeEvent {
            kind,
            user: user.into(),
            time_ms: 0,
            text: String::new(),
        }
    }

    #[test]
    fn approvals_count_once_per_user_and_reset_on_edit() {
        use ChangeEventKind::*;
        let mut cr = ChangeRequest {
            id: 1,
            namespace: NamespaceId::default_namespace(),
            title: "t".into(),
            description: String::new(),
            author: "alice".into(),
            state: ChangeState::Open,
            stale: false,
            version: 1,
            created_ms: 0,
            updated_ms: 0,
            publish_at_ms: None,
            items: vec![],
            events: vec![
                event(Created, "alice"),
                event(Approved, "bob"),
                event(Approved, "bob"),
                event(Approved, "carol"),
            ],
            item_count: 0,
        };
        assert_eq!(cr.approvers(), ["bob", "carol"]);
        cr.events.push(event(Rejected, "bob"));
        assert_eq!(cr.approvers(), ["carol"]);
        cr.events.push(event(Edited, "alice"));
        assert!(cr.approvers().is_empty());
        cr.events.push(event(Approved, "dave"));
        assert_eq!(cr.approvers(), ["dave"]);
    }

    #[test]
    fn states_parse_and_policies_cover_by_group_pattern() {
        assert_eq!(ChangeState::parse("Approved"), Some(ChangeState::Approved));
        assert_eq!(ChangeState::parse("nope"), None);
        let policy = ReviewPolicy {
            namespace: NamespaceId::from_trusted("prod"),
            group_pattern: "PAY*".into(),
            required_approvals: 1,
            updated_by: String::new(),
            updated_ms: 0,
        };
        assert!(policy.covers(&ConfigKey::from_trusted("prod", "PAYMENTS", "a")));
        assert!(!policy.covers(&ConfigKey::from_trusted("prod", "ORDERS", "a")));
        assert!(!policy.covers(&ConfigKey::from_trusted("dev", "PAYMENTS", "a")));
    }
}
