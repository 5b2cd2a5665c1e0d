//! The storage seam. SQLite, MySQL/MariaDB and PostgreSQL implement it in
//! `nacelle-store`; this crate never depends on a database driver.
//!
//! The store is cut into role traits by what callers need: [`Configs`] (formal configs),
//! [`Grays`] (gray variants), [`History`] (history pages, entries, retention),
//! [`ChangeLog`] (what cluster members follow), [`Namespaces`], [`Identities`] (users,
//! roles, permissions), [`Schemas`] (JSON Schemas of config keys), [`Audit`] (the audit
//! trail), [`Webhooks`] (webhooks and their deliveries), [`Rollouts`] (staged rollouts)
//! and [`Health`].
//! [`ConfigStore`] is all of them at once, what the server wires. Every method of every
//! role is written once, in [`store_roles!`]: the traits are generated from that list,
//! and so is [`Layered`], the one forwarding of every method through a [`StoreLayer`]
//! (the deadline of the networked backends, the lazy start of the server). A method
//! added to the list is forwarded by every layer, and seen by every test that enumerates
//! the list, without anyone remembering to.
//!
//! Contract for every implementation:
//! - a write returns only after its transaction has committed (config row, history row,
//!   tag relations together);
//! - every write of a config's content appends one `his_config_info` row whose `nid` is
//!   the new revision; [`StoredConfig::revision`] is the largest `nid` among the history
//!   rows of its key ([`Configs::update_metadata`] changes description and tags in place,
//!   as Nacos does, without one);
//! - a history purge ([`History::purge_history`]) never deletes the newest row of a key;
//! - `publish` with `cas_md5` is atomic against concurrent writers on any node sharing the
//!   database, and concurrent first publishes of one key never fail or duplicate it;
//! - a backend that cannot reach its database fails with [`StoreError::Unavailable`] within
//!   a few seconds instead of hanging (whole-table loads within a longer, still bounded,
//!   time: [`Cost`]);
//! - errors are [`StoreError`]s, never panics.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::StoredConfig;

/// Result of removing a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// The config existed and was removed; the revision is the `nid` of its `D` history row.
    Removed { revision: i64 },
    /// Nothing was stored under that key.
    Absent,
}

/// What a batch publish ([`ConfigStore::publish_batch`]) does with a record whose key
/// already holds a config (Nacos's `SameConfigPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamePolicy {
    /// The batch stops at its first record (in order) whose key exists, as Nacos's
    /// `batchInsertOrUpdate` does: the records before it are written, it and every one
    /// after it are not.
    Abort,
    /// Records whose key exists are left out; the others are written.
    Skip,
    /// Records whose key exists replace it.
    Overwrite,
}

/// What happened to one record of a committed batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchItem {
    /// Written (inserted or, under [`SamePolicy::Overwrite`], updated).
    Written(Box<StoredConfig>),
    /// Not written: its key existed under [`SamePolicy::Skip`], or it comes after the
    /// conflict that stopped a [`SamePolicy::Abort`] batch.
    Skipped,
    /// Its key existed under [`SamePolicy::Abort`]: the batch stopped here, nothing from
    /// this record on was written.
    Conflict,
}

/// The result of a batch publish: its transaction committed; one item per record, in
/// the order of the records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    pub items: Vec<BatchItem>,
}

/// How much work one store call is, for a layer that bounds it in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// One operation on a few rows.
    One,
    /// A read of a whole table (the cache's load at start).
    Bulk,
    /// A batch of this many writes in one transaction.
    Batch(usize),
}

/// One call of a store method, as a [`StoreLayer`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The method's name (`"publish"`, `"gray_history"` …): one of [`METHODS`].
    pub name: &'static str,
    /// How much work it is.
    pub cost: Cost,
}

/// The boxed future of a store call (what `#[async_trait]` methods return).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Something put in front of a store that every call goes through: a deadline, a store
/// that is not connected yet. [`Layered`] makes it a [`ConfigStore`] by forwarding every
/// method of [`store_roles!`] to [`StoreLayer::run`], so a layer cannot leave one out.
pub trait StoreLayer: Send + Sync + Debug + 'static {
    /// The backend's name (see [`ConfigStore::backend`]).
    fn backend(&self) -> &'static str;

    /// Runs `call`: `op` makes the call on the store below, given that store.
    fn run<'a, T, F>(&'a self, call: Call, op: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(&'a dyn ConfigStore) -> StoreFuture<'a, T> + Send + 'a;
}

/// A [`StoreLayer`] as a [`ConfigStore`]: every method goes through the layer.
#[derive(Debug)]
pub struct Layered<L>(pub L);

/// Calls `$callback! { … }` with every role of the store and every method of each role,
/// written once here. Each role reads
/// `#[doc…] Role { #[doc…] [cost] fn name(arg: Type, …) -> Ok; … }`: `Ok` is what the
/// method returns on success (every method returns `Result<Ok, StoreError>`), `cost` a
/// [`Cost`] expression that may use the arguments. Types are written with `$crate::`
/// paths, so a callback works in any crate.
///
/// The role traits, [`Layered`] and [`METHODS`] are generated from it here; a test can
/// generate a call of every method from it too (see `nacelle-store`'s
/// `tests/deadline.rs`).
#[macro_export]
macro_rules! store_roles {
    ($callback:ident) => {
        $callback! {
            /// Formal configs: what every client gets.
            Configs {
                /// Every formal config, for loading the in-memory cache at start.
                [$crate::store::Cost::Bulk]
                fn load_all() -> ::std::vec::Vec<$crate::model::StoredConfig>;

                /// One formal config, read from the database (used to reload a changed key).
                [$crate::store::Cost::One]
                fn get(key: &$crate::key::ConfigKey) -> ::std::option::Option<$crate::model::StoredConfig>;

                /// Inserts or updates a config in one transaction with its history row and
                /// tag relations — or, when `record.gray` is set, that gray variant
                /// (`config_info_gray`) with its row in the gray change log. Honors
                /// `record.cas_md5` (against the variant written): on mismatch nothing is
                /// written and [`StoreError::CasMismatch`](crate::StoreError::CasMismatch)
                /// is returned.
                [$crate::store::Cost::One]
                fn publish(record: &$crate::model::PublishRecord) -> $crate::model::StoredConfig;

                /// Publishes every record in **one** transaction (each with its history row
                /// and tag relations, as `publish`), deciding per record under `policy`
                /// what to do when its key exists, from the rows read under their locks in
                /// that transaction. Either every write of the batch commits or none does.
                /// Records must have distinct keys and no `cas_md5`
                /// ([`StoreError::Rejected`](crate::StoreError::Rejected) otherwise).
                [$crate::store::Cost::Batch(records.len())]
                fn publish_batch(
                    records: &[$crate::model::PublishRecord],
                    policy: $crate::store::SamePolicy
                ) -> $crate::store::BatchOutcome;

                /// Deletes a config in one transaction with its `D` history row.
                [$crate::store::Cost::One]
                fn remove(
                    key: &$crate::key::ConfigKey,
                    source: &$crate::model::OpSource,
                    now_ms: i64
                ) -> $crate::store::RemoveOutcome;

                /// Changes the formal config's description (`c_desc`) and tags (its
                /// `config_tags_relation` rows, replaced as a publish replaces them) in
                /// place, in one transaction, as Nacos 3's `updateConfigInfoMetadata`
                /// does: no history row, content, md5, revision and modification time
                /// unchanged. `None` leaves that field as it is; `Some("")` clears it.
                /// [`StoreError::NotFound`](crate::StoreError::NotFound) when the key holds
                /// no formal config.
                [$crate::store::Cost::One]
                fn update_metadata(
                    key: &$crate::key::ConfigKey,
                    desc: ::std::option::Option<&str>,
                    config_tags: ::std::option::Option<&str>
                ) -> ();
            }

            /// Gray variants (beta by IP, tag, label rule) and their change log.
            Grays {
                /// Every gray variant of every key, for loading the cache at start:
                /// Nacelle's and Nacos 2.5/3.0's `config_info_gray`, plus Nacos 2.4's
                /// `config_info_beta` / `config_info_tag` rows that have no
                /// `config_info_gray` row of the same name.
                [$crate::store::Cost::Bulk]
                fn load_grays() -> ::std::vec::Vec<$crate::model::StoredGray>;

                /// The gray variants of one key, read from the database (as in
                /// `load_grays`).
                [$crate::store::Cost::One]
                fn grays_of(key: &$crate::key::ConfigKey) -> ::std::vec::Vec<$crate::model::StoredGray>;

                /// Deletes the gray variant `name` of `key` in one transaction with its `D`
                /// row in the gray change log.
                [$crate::store::Cost::One]
                fn remove_gray(
                    key: &$crate::key::ConfigKey,
                    name: &str,
                    source: &$crate::model::OpSource,
                    now_ms: i64
                ) -> $crate::store::RemoveOutcome;

                /// Promotes the gray variant `name` of `record.key`: `record` (built by the
                /// service from the variant's content and the formal config's metadata;
                /// `record.gray` is `None`) becomes the formal config and the variant is
                /// deleted, in one transaction with the formal history row and the gray
                /// change-log row. [`StoreError::NotFound`](crate::StoreError::NotFound)
                /// when the variant does not exist;
                /// [`StoreError::CasMismatch`](crate::StoreError::CasMismatch) when its md5
                /// is no longer `record.md5` (it changed since the service read it).
                [$crate::store::Cost::One]
                fn promote_gray(
                    record: &$crate::model::PublishRecord,
                    name: &str
                ) -> $crate::model::StoredConfig;

                /// The gray change log of one key, newest first: the history of its gray
                /// operations.
                [$crate::store::Cost::One]
                fn gray_history(
                    key: &$crate::key::ConfigKey,
                    page: $crate::model::PageRequest
                ) -> $crate::model::Page<$crate::model::GrayHistoryEntry>;
            }

            /// The history of formal configs, and its retention.
            History {
                /// History of one key, newest first.
                [$crate::store::Cost::One]
                fn history_page(
                    key: &$crate::key::ConfigKey,
                    page: $crate::model::PageRequest
                ) -> $crate::model::Page<$crate::model::HistoryEntry>;

                /// One history entry by `nid`.
                [$crate::store::Cost::One]
                fn history_entry(nid: i64) -> ::std::option::Option<$crate::model::HistoryEntry>;

                /// The newest history entry of config row `config_id`: what
                /// `/history/previous` shows.
                [$crate::store::Cost::One]
                fn history_previous(config_id: i64) -> ::std::option::Option<$crate::model::HistoryEntry>;

                /// One batch of a history purge of `log`: deletes at most `batch` rows with
                /// `nid > after_nid` that `rule` condemns, in `nid` order, and never the
                /// newest row of a key (that row stays whatever its age) — for the gray
                /// change log, of a key's gray variant (its revision, or the `D` row of its
                /// stop). Call again from `PurgeStep::resume_after` until it is `None`.
                ///
                /// A batch finds its rows with one read and removes them with one `DELETE`
                /// of at most `batch` rows by primary key, its own short transaction, so
                /// writers wait at most for one batch. A row is only removed while a newer
                /// row of its key exists and rows are only ever removed by a purge, so
                /// purges running at once (every node of a cluster on one database) are
                /// safe: the deletes are idempotent.
                [$crate::store::Cost::One]
                fn purge_history(
                    log: $crate::model::HistoryLog,
                    rule: &$crate::model::HistoryRetention,
                    after_nid: i64,
                    batch: u32
                ) -> $crate::model::PurgeStep;
            }

            /// The change logs cluster members follow: `his_config_info` and the gray log.
            ChangeLog {
                /// The change log: history rows with `nid > after_nid`, in `nid` order, at
                /// most `limit`.
                ///
                /// Cluster members follow it to catch changes whose notification they
                /// missed. On a shared database, `nid`s are handed out when a transaction
                /// inserts its row, not when it commits: a row with a smaller `nid` can
                /// become visible shortly after one with a larger `nid` (the longest a
                /// write transaction stays open), and rolled-back inserts leave gaps that
                /// never fill. A follower should therefore re-read a short window behind
                /// its position rather than trusting that nothing below it can still
                /// appear.
                [$crate::store::Cost::One]
                fn changes_since(
                    after_nid: i64,
                    limit: u32
                ) -> ::std::vec::Vec<$crate::model::ChangeRecord>;

                /// The largest `nid` in the change log, 0 when it is empty: where a
                /// follower that has just loaded everything starts.
                [$crate::store::Cost::One]
                fn max_history_nid() -> i64;

                /// The gray change log (`nacelle_gray_log`): rows with `nid > after_nid`,
                /// in `nid` order, at most `limit` — the same contract as
                /// `changes_since`.
                [$crate::store::Cost::One]
                fn gray_changes_since(
                    after_nid: i64,
                    limit: u32
                ) -> ::std::vec::Vec<$crate::model::ChangeRecord>;

                /// The largest `nid` of the gray change log, 0 when it is empty.
                [$crate::store::Cost::One]
                fn max_gray_nid() -> i64;
            }

            /// Custom namespaces (`tenant_info`). The default namespace is not stored.
            Namespaces {
                /// Custom namespaces, oldest first.
                [$crate::store::Cost::One]
                fn list_namespaces() -> ::std::vec::Vec<$crate::model::Namespace>;

                /// Creates a namespace;
                /// [`StoreError::Conflict`](crate::StoreError::Conflict) when the id
                /// exists.
                [$crate::store::Cost::One]
                fn create_namespace(ns: &$crate::model::Namespace, now_ms: i64) -> ();

                /// Updates name and description;
                /// [`StoreError::NotFound`](crate::StoreError::NotFound) when absent.
                [$crate::store::Cost::One]
                fn update_namespace(ns: &$crate::model::Namespace, now_ms: i64) -> ();

                /// Deletes a namespace; returns whether it existed.
                [$crate::store::Cost::One]
                fn delete_namespace(id: &$crate::key::NamespaceId) -> bool;
            }

            /// Users, role bindings and permissions (Nacos's `users`, `roles`,
            /// `permissions`) and Nacelle's per-user token state.
            Identities {
                /// Every user, role binding and permission and the per-user token state,
                /// read in one go for the authorizer's directory.
                [$crate::store::Cost::One]
                fn load_identities() -> $crate::auth::IdentityRecords;

                /// Applies one change to users, roles or permissions in one transaction. A
                /// row that already exists is
                /// [`StoreError::Conflict`](crate::StoreError::Conflict); a user, binding
                /// or grant that is absent where one must exist is
                /// [`StoreError::NotFound`](crate::StoreError::NotFound).
                [$crate::store::Cost::One]
                fn write_identity(write: &$crate::auth::IdentityWrite) -> ();
            }

            /// Change requests (`nacelle_change`, its items and events) and the review
            /// policies that require them (`nacelle_review_policy`).
            ChangeRequests {
                /// Creates a change request with its items and its `created` event; its id.
                [$crate::store::Cost::One]
                fn create_change(change: &$crate::change::NewChange) -> $crate::change::ChangeId;

                /// One change request with its items and events.
                [$crate::store::Cost::One]
                fn get_change(
                    id: $crate::change::ChangeId
                ) -> ::std::option::Option<$crate::change::ChangeRequest>;

                /// Change requests matching `filter`, newest first, without items or
                /// events (`item_count` set).
                [$crate::store::Cost::One]
                fn list_changes(
                    filter: &$crate::change::ChangeFilter,
                    page: $crate::model::PageRequest
                ) -> $crate::model::Page<$crate::change::ChangeRequest>;

                /// Applies `update` in one transaction if the request still has
                /// `update.expected_version`, recording its event; the new version.
                /// [`StoreError::CasMismatch`](crate::StoreError::CasMismatch) when the
                /// version moved, [`StoreError::NotFound`](crate::StoreError::NotFound)
                /// when there is no such request.
                [$crate::store::Cost::One]
                fn update_change(
                    id: $crate::change::ChangeId,
                    update: &$crate::change::ChangeUpdate
                ) -> i64;

                /// Publishes an approved change request: in **one** transaction, if it is
                /// still `approved` at `expected_version` and every key of `writes` still
                /// holds its base md5, writes every key (each with its history row, as
                /// `publish`/`remove`), marks the request `published` and records `event`.
                /// Otherwise writes nothing and says why (`Moved`, `Stale`). Keys must be
                /// distinct ([`StoreError::Rejected`](crate::StoreError::Rejected)).
                [$crate::store::Cost::Batch(writes.len())]
                fn publish_change(
                    id: $crate::change::ChangeId,
                    expected_version: i64,
                    writes: &[$crate::change::ChangeWrite],
                    event: &$crate::change::NewChangeEvent,
                    now_ms: i64
                ) -> $crate::change::ChangePublishOutcome;

                /// Approved requests whose scheduled time is at or before `now_ms`, with
                /// their versions, oldest schedule first.
                [$crate::store::Cost::One]
                fn due_changes(now_ms: i64) -> ::std::vec::Vec<($crate::change::ChangeId, i64)>;

                /// Every review policy.
                [$crate::store::Cost::One]
                fn review_policies() -> ::std::vec::Vec<$crate::change::ReviewPolicy>;

                /// Creates or replaces the policy of its namespace and group pattern.
                [$crate::store::Cost::One]
                fn set_review_policy(policy: &$crate::change::ReviewPolicy) -> ();

                /// Deletes the policy of `namespace` and `group_pattern`; whether it existed.
                [$crate::store::Cost::One]
                fn delete_review_policy(
                    namespace: &$crate::key::NamespaceId,
                    group_pattern: &str
                ) -> bool;
            }

            /// JSON Schemas of config keys (`nacelle_config_schema`): what a publish of
            /// a matching key must satisfy (docs/schema-validation.md).
            Schemas {
                /// Every schema of every namespace, for the service's validators (read at
                /// start, after each change and periodically to follow other nodes).
                [$crate::store::Cost::One]
                fn load_schemas() -> ::std::vec::Vec<$crate::model::SchemaRecord>;

                /// Inserts the schema of (`namespace`, `group`, `data_id`), or replaces the
                /// one stored under those patterns, in one transaction.
                [$crate::store::Cost::One]
                fn put_schema(record: &$crate::model::SchemaRecord) -> ();

                /// Deletes the schema stored under (`namespace`, `group`, `data_id`);
                /// returns whether it existed.
                [$crate::store::Cost::One]
                fn delete_schema(
                    namespace: &$crate::key::NamespaceId,
                    group: &str,
                    data_id: &str
                ) -> bool;
            }

            /// The audit trail (`nacelle_audit`, docs/audit.md): a hash chain of entries
            /// whose head row (`nacelle_audit_head`) is locked by every append, so appenders
            /// on every node sharing the database take turns and `seq` stays contiguous.
            Audit {
                /// Appends `events` in order, in **one** transaction: each gets the next
                /// seq, the previous entry's hash as `prev_hash` and its own hash; the head
                /// moves to the last. Returns the entries as stored.
                [$crate::store::Cost::Batch(events.len())]
                fn append_audit(
                    events: &[$crate::audit::AuditEvent]
                ) -> ::std::vec::Vec<$crate::audit::AuditEntry>;

                /// Entries matching `filter`, newest first.
                [$crate::store::Cost::One]
                fn audit_page(
                    filter: &$crate::audit::AuditFilter,
                    page: $crate::model::PageRequest
                ) -> $crate::model::Page<$crate::audit::AuditEntry>;

                /// The head, and at most `limit` entries with `seq > after_seq` in seq
                /// order, read in one transaction: what a verification walks.
                [$crate::store::Cost::One]
                fn audit_range(after_seq: i64, limit: u32) -> $crate::audit::AuditRange;

                /// One batch of retention: deletes at most `batch` of the oldest entries
                /// whose time is before `before_ms` (only a prefix of the chain: it stops
                /// at the first newer entry) and moves the head's anchor to the last one
                /// deleted, in one transaction, so the rest still verifies.
                [$crate::store::Cost::One]
                fn purge_audit(before_ms: i64, batch: u32) -> $crate::audit::AuditPurge;
            }

            /// Webhooks and their deliveries (`nacelle_webhook`,
            /// `nacelle_webhook_delivery`, docs/webhooks.md). A delivery is sent by one
            /// node at a time: a sender claims due rows with a lease (a compare-and-set
            /// `UPDATE` per row), and only the claim's owner records the outcome.
            Webhooks {
                /// Every webhook (the service keeps them in memory and re-reads them).
                [$crate::store::Cost::One]
                fn load_webhooks() -> ::std::vec::Vec<$crate::webhook::Webhook>;

                /// Stores a new webhook (its `id` ignored); answers the id assigned.
                [$crate::store::Cost::One]
                fn create_webhook(hook: &$crate::webhook::Webhook) -> i64;

                /// Replaces every field of webhook `hook.id` but its creation; whether it
                /// existed.
                [$crate::store::Cost::One]
                fn update_webhook(hook: &$crate::webhook::Webhook) -> bool;

                /// Deletes a webhook and its deliveries in one transaction; whether it
                /// existed.
                [$crate::store::Cost::One]
                fn delete_webhook(id: i64) -> bool;

                /// Inserts pending deliveries, due at their `created_ms`, in one
                /// transaction.
                [$crate::store::Cost::Batch(deliveries.len())]
                fn enqueue_deliveries(deliveries: &[$crate::webhook::NewDelivery]) -> ();

                /// Claims at most `claim.limit` due, unleased pending deliveries (oldest
                /// due first) for `claim.owner` until `claim.lease_until_ms`; answers those
                /// this claim won. Two claimers never win the same row.
                [$crate::store::Cost::One]
                fn claim_deliveries(
                    claim: &$crate::webhook::DeliveryClaim
                ) -> ::std::vec::Vec<$crate::webhook::Delivery>;

                /// Records an attempt of delivery `id` claimed by `owner` (attempts + 1,
                /// status, code, error, next attempt) and releases its lease; `false` (and
                /// nothing written) when the row is no longer that owner's.
                [$crate::store::Cost::One]
                fn finish_delivery(
                    id: i64,
                    owner: &str,
                    result: &$crate::webhook::DeliveryResult
                ) -> bool;

                /// The deliveries of webhook `hook_id`, newest first.
                [$crate::store::Cost::One]
                fn deliveries(
                    hook_id: i64,
                    page: $crate::model::PageRequest
                ) -> $crate::model::Page<$crate::webhook::Delivery>;

                /// Makes a delivered or failed delivery pending again, due at `now_ms`,
                /// with its attempts reset; whether it was (a pending one is left alone).
                [$crate::store::Cost::One]
                fn redeliver(id: i64, now_ms: i64) -> bool;

                /// Deletes at most `batch` delivered or failed deliveries created before
                /// `before_ms`; answers how many.
                [$crate::store::Cost::One]
                fn purge_deliveries(before_ms: i64, batch: u32) -> u64;
            }

            /// Staged rollouts (`nacelle_rollout`, docs/rollouts.md): their plans and
            /// state, and the lease of the node driving each.
            Rollouts {
                /// Creates a rollout (running, step 0); its id.
                /// [`StoreError::Conflict`](crate::StoreError::Conflict) when its key has an
                /// active (running or paused) rollout already.
                [$crate::store::Cost::One]
                fn create_rollout(rollout: &$crate::rollout::NewRollout) -> $crate::rollout::RolloutId;

                /// One rollout.
                [$crate::store::Cost::One]
                fn get_rollout(
                    id: $crate::rollout::RolloutId
                ) -> ::std::option::Option<$crate::rollout::Rollout>;

                /// Rollouts, newest first, at most `limit`: only the active ones (running or
                /// paused) when `active_only`.
                [$crate::store::Cost::One]
                fn list_rollouts(
                    active_only: bool,
                    limit: u32
                ) -> ::std::vec::Vec<$crate::rollout::Rollout>;

                /// Applies a transition if the rollout is still at
                /// `update.expected_version` (bumping it); the rollout as stored after it.
                /// [`StoreError::CasMismatch`](crate::StoreError::CasMismatch) when the
                /// version moved, [`StoreError::NotFound`](crate::StoreError::NotFound)
                /// when there is no such rollout.
                [$crate::store::Cost::One]
                fn update_rollout(
                    id: $crate::rollout::RolloutId,
                    update: &$crate::rollout::RolloutUpdate
                ) -> $crate::rollout::Rollout;

                /// Takes or renews the lease of an active rollout for `node` until
                /// `now_ms + lease_ms`, if `node` holds it already or it expired before
                /// `now_ms` (one compare-and-set `UPDATE`); whether `node` holds it now.
                [$crate::store::Cost::One]
                fn claim_rollout(
                    id: $crate::rollout::RolloutId,
                    node: &str,
                    now_ms: i64,
                    lease_ms: i64
                ) -> bool;
            }

            /// Whether the database answers.
            Health {
                /// Checks that the database answers (used by readiness and reconnection).
                [$crate::store::Cost::One]
                fn ping() -> ();
            }
        }
    };
}

/// Generates, from [`store_roles!`], the role traits, [`METHODS`] and the forwarding of
/// [`Layered`].
macro_rules! define_roles {
    ($(
        $(#[$role_meta:meta])*
        $role:ident {$(
            $(#[$meta:meta])*
            [$cost:expr]
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ok:ty;
        )*}
    )*) => {
        $(
            $(#[$role_meta])*
            #[async_trait]
            pub trait $role: Send + Sync + Debug + 'static {$(
                $(#[$meta])*
                async fn $name(&self $(, $arg: $ty)*) -> Result<$ok, StoreError>;
            )*}

            #[async_trait]
            impl<L: StoreLayer> $role for Layered<L> {$(
                async fn $name(&self $(, $arg: $ty)*) -> Result<$ok, StoreError> {
                    let call = Call {
                        name: stringify!($name),
                        cost: $cost,
                    };
                    self.0.run(call, move |store| store.$name($($arg),*)).await
                }
            )*}
        )*

        /// The name of every store method, role by role, in [`store_roles!`] order.
        pub const METHODS: &[&str] = &[$($(stringify!($name)),*),*];

        /// The whole store: every role, and the backend's name. What the server wires and
        /// the backends implement.
        pub trait ConfigStore: $($role +)* {
            /// A short name of the backend for logs ("sqlite", "mysql", "postgres").
            fn backend(&self) -> &'static str;
        }
    };
}

store_roles!(define_roles);

impl<L: StoreLayer> ConfigStore for Layered<L> {
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
}

/// The role traits, imported for their methods only: `use nacelle_core::store::prelude::*;`
/// lets code call any store method on a `dyn ConfigStore` without naming the roles.
pub mod prelude {
    pub use super::{
        Audit as _, ChangeLog as _, ChangeRequests as _, ConfigStore, Configs as _, Grays as _,
        Health as _, History as _, Identities as _, Namespaces as _, Rollouts as _, Schemas as _,
        Webhooks as _,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_listed_once() {
        let mut names = METHODS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len());
        assert!(METHODS.contains(&"gray_history"));
        assert!(METHODS.contains(&"update_metadata"));
    }
}
