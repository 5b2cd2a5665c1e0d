//! The audit trail's records (docs/audit.md): what happened ([`AuditAction`]), one event as
//! the service reports it ([`AuditEvent`]), one stored entry of the hash chain
//! ([`AuditEntry`]), and the queries of the `Audit` store role. The hash itself is
//! computed by `nacelle-api::audit` (shared with clients); this crate only carries it.

use std::fmt;

/// What an audited event did. The string form ([`AuditAction::as_str`]) is what is
/// stored, hashed and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuditAction {
    Publish,
    Remove,
    GrayPublish,
    GrayStop,
    Promote,
    Import,
    Clone,
    Metadata,
    Login,
    LoginFailed,
    Refused,
    UserCreate,
    UserDelete,
    PasswordChange,
    RoleAdd,
    RoleDelete,
    PermissionAdd,
    PermissionDelete,
    NamespaceCreate,
    NamespaceUpdate,
    NamespaceDelete,
    ChangeCreate,
    ChangeEvent,
    ChangePublish,
    PolicyChange,
    EmergencyWrite,
    SchemaSet,
    SchemaRemove,
    WebhookChange,
    RolloutStart,
    RolloutStep,
    RolloutPause,
    RolloutResume,
    RolloutAdvance,
    RolloutRollback,
    RolloutPromote,
    RolloutAbort,
}

impl AuditAction {
    /// Every action, in declaration order.
    pub const ALL: [AuditAction; 37] = [
        AuditAction::Publish,
        AuditAction::Remove,
        AuditAction::GrayPublish,
        AuditAction::GrayStop,
        AuditAction::Promote,
        AuditAction::Import,
        AuditAction::Clone,
        AuditAction::Metadata,
        AuditAction::Login,
        AuditAction::LoginFailed,
        AuditAction::Refused,
        AuditAction::UserCreate,
        AuditAction::UserDelete,
        AuditAction::PasswordChange,
        AuditAction::RoleAdd,
        AuditAction::RoleDelete,
        AuditAction::PermissionAdd,
        AuditAction::PermissionDelete,
        AuditAction::NamespaceCreate,
        AuditAction::NamespaceUpdate,
        AuditAction::NamespaceDelete,
        AuditAction::ChangeCreate,
        AuditAction::ChangeEvent,
        AuditAction::ChangePublish,
        AuditAction::PolicyChange,
        AuditAction::EmergencyWrite,
        AuditAction::SchemaSet,
        AuditAction::SchemaRemove,
        AuditAction::WebhookChange,
        AuditAction::RolloutStart,
        AuditAction::RolloutStep,
        AuditAction::RolloutPause,
        AuditAction::RolloutResume,
        AuditAction::RolloutAdvance,
        AuditAction::RolloutRollback,
        AuditAction::RolloutPromote,
        AuditAction::RolloutAbort,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::Publish => "publish",
            AuditAction::Remove => "remove",
            AuditAction::GrayPublish => "gray-publish",
            AuditAction::GrayStop => "gray-stop",
            AuditAction::Promote => "promote",
            AuditAction::Import => "import",
            AuditAction::Clone => "clone",
            AuditAction::Metadata => "metadata",
            AuditAction::Login => "login",
            AuditAction::LoginFailed => "login-failed",
            AuditAction::Refused => "refused",
            AuditAction::UserCreate => "user-create",
            AuditAction::UserDelete => "user-delete",
            AuditAction::PasswordChange => "password-change",
            AuditAction::RoleAdd => "role-add",
            AuditAction::RoleDelete => "role-delete",
            AuditAction::PermissionAdd => "permission-add",
            AuditAction::PermissionDelete => "permission-delete",
            AuditAction::NamespaceCreate => "namespace-create",
            AuditAction::NamespaceUpdate => "namespace-update",
            AuditAction::NamespaceDelete => "namespace-delete",
            AuditAction::ChangeCreate => "change-create",
            AuditAction::ChangeEvent => "change-event",
            AuditAction::ChangePublish => "change-publish",
            AuditAction::PolicyChange => "policy-change",
            AuditAction::EmergencyWrite => "emergency-write",
            AuditAction::SchemaSet => "schema-set",
            AuditAction::SchemaRemove => "schema-remove",
            AuditAction::WebhookChange => "webhook-change",
            AuditAction::RolloutStart => "rollout-start",
            AuditAction::RolloutStep => "rollout-step",
            AuditAction::RolloutPause => "rollout-pause",
            AuditAction::RolloutResume => "rollout-resume",
            AuditAction::RolloutAdvance => "rollout-advance",
            AuditAction::RolloutRollback => "rollout-rollback",
            AuditAction::RolloutPromote => "rollout-promote",
            AuditAction::RolloutAbort => "rollout-abort",
        }
    }

    /// The action named `s` (its stored name).
    pub fn parse(s: &str) -> Option<AuditAction> {
        Self::ALL.into_iter().find(|a| a.as_str() == s.trim())
    }
}

impl fmt::Display for AuditAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One audited event, before the chain gives it a place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// When it happened, ms since the epoch.
    pub time_ms: i64,
    /// The authenticated user (or the user a login named); `""` when anonymous.
    pub user: String,
    /// The client's address as the server trusts it; `""` for internal callers.
    pub address: String,
    /// The protocol's short name (`http-v1`, `grpc`, …).
    pub protocol: String,
    /// The stored name of an [`AuditAction`] (text, so entries written by a newer version
    /// remain readable).
    pub action: String,
    /// What it acted on: `namespace/group/dataId`, a user, a role, a namespace id.
    pub target: String,
    /// `ok`, or `refused: <reason>`.
    pub outcome: String,
    /// More about it: the publish message, the md5, a gray name, a permission.
    pub detail: String,
    /// The change request it belongs to, when there is one.
    pub change_id: Option<i64>,
}

/// One entry of the chain: an event, its place and its hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// Position in the chain: contiguous from 1, assigned when appended.
    pub seq: i64,
    pub event: AuditEvent,
    /// The hash of the entry before (`GENESIS_HASH` for the first).
    pub prev_hash: String,
    /// SHA-256 of this entry's canonical encoding (`nacelle-api::audit`).
    pub hash: String,
}

/// The head of the chain: its last entry and the anchor retention left (the last entry
/// removed by a purge; seq 0 and the genesis hash when none was).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditHead {
    pub last_seq: i64,
    pub last_hash: String,
    pub anchor_seq: i64,
    pub anchor_hash: String,
}

/// A run of the chain, for verification: the head as it was read, and the entries after
/// `after_seq` in seq order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditRange {
    pub head: AuditHead,
    pub entries: Vec<AuditEntry>,
}

/// Which entries a query lists; every field narrows it (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    /// From this time on (ms, inclusive).
    pub since_ms: Option<i64>,
    /// Before this time (ms, exclusive).
    pub until_ms: Option<i64>,
    /// Exactly this user.
    pub user: Option<String>,
    /// Targets starting with this (`ns/group/dataId`, `ns/group/`, a user name).
    pub target: Option<String>,
    /// Exactly this action (stored name).
    pub action: Option<String>,
}

/// What one batch of an audit purge did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuditPurge {
    /// Entries deleted by this batch.
    pub deleted: u64,
    /// Whether older entries may remain (call again).
    pub more: bool,
}
