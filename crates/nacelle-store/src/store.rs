//! Every role of the store, implemented once for every backend: [`Store`] over a
//! [`Backend`], which says only what differs — which pools reads and small writes use,
//! how a write step runs (a sqlx transaction retried as a whole, or SQLite's writer
//! thread), how a purge's `DELETE` runs, and which values the database refuses.
//! Reads are the shared sqlx code (`sql.rs`), writes of configs and grays the one write
//! executor (`write.rs`).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use nacelle_core::audit::{AuditEntry, AuditEvent, AuditFilter, AuditPurge, AuditRange};
use nacelle_core::auth::{IdentityRecords, IdentityWrite};
use nacelle_core::change::{
    ChangeFilter, ChangeId, ChangePublishOutcome, ChangeRequest, ChangeUpdate, ChangeWrite,
    NewChange, NewChangeEvent, ReviewPolicy,
};
use nacelle_core::rollout::{NewRollout, Rollout, RolloutId, RolloutUpdate};
use nacelle_core::store::{
    Audit, ChangeLog, ChangeRequests, ConfigStore, Configs, Grays, Health, History, Identities,
    Namespaces, RemoveOutcome, Rollouts, Schemas, Webhooks,
};
use nacelle_core::webhook::{Delivery, DeliveryClaim, DeliveryResult, NewDelivery, Webhook};
use nacelle_core::{
    BatchOutcome, ChangeRecord, ConfigKey, GrayHistoryEntry, HistoryEntry, HistoryLog,
    HistoryRetention, Namespace, NamespaceId, OpSource, Page, PageRequest, PublishRecord,
    PurgeStep, SamePolicy, SchemaRecord, StoreError, StoredConfig, StoredGray,
};
use sqlx::Pool;

use crate::audit::AuditQueries;
use crate::changes::ChangeQueries;
use crate::config_schema::SchemaQueries;
use crate::dialect::Dialect;
use crate::identity::IdentityQueries;
use crate::namespaces::NamespaceQueries;
use crate::queries::Queries;
use crate::rollouts::RolloutQueries;
use crate::sql::{self, Exec};
use crate::webhooks::WebhookQueries;
use crate::write::{self, Step};

/// What one kind of backend does its own way.
#[async_trait]
pub(crate) trait Backend: Send + Sync + Debug + 'static {
    /// The sqlx database of its reads.
    type Db: Exec;

    /// The backend's name for logs ("sqlite", "mysql", "postgres").
    fn name(&self) -> &'static str;
    /// Its statements.
    fn queries(&self) -> &QuerySet;
    /// The pool reads use.
    fn reader(&self) -> &Pool<Self::Db>;
    /// The pool namespace and identity writes use.
    fn writer(&self) -> &Pool<Self::Db>;
    /// Runs one write of the executor and answers once it committed.
    async fn write<S: Step>(&self, step: S) -> Result<S::Out, StoreError>;
    /// Runs one purge `DELETE` (its own transaction): the rows deleted.
    async fn delete_logged(&self, sql: String) -> Result<u64, StoreError>;

    /// Refuses a write whose values the database cannot store, before it reaches the
    /// database.
    fn refuse(&self, _write: Checked<'_>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Every statement of the store as one dialect spells it, built once when a store opens:
/// the config core's ([`Queries`], `queries.rs`) and each feature's, which lives with the
/// code that runs it.
#[derive(Debug, Clone)]
pub(crate) struct QuerySet {
    /// Configs, grays, tags, history, the change logs and their purges.
    pub config: Queries,
    /// Namespaces.
    pub namespaces: NamespaceQueries,
    /// Change requests and review policies (shared with the publish step, which may run on
    /// SQLite's writer thread).
    pub changes: Arc<ChangeQueries>,
    /// Staged rollouts.
    pub rollouts: RolloutQueries,
    /// JSON Schemas of config keys.
    pub schemas: SchemaQueries,
    /// Users, roles, permissions and token states.
    pub identity: IdentityQueries,
    /// The audit trail.
    pub audit: AuditQueries,
    /// Webhooks and their deliveries.
    pub webhooks: WebhookQueries,
}

impl QuerySet {
    /// The statements as `D` spells them, for Nacelle's own schema.
    pub fn new<D: Dialect>() -> Self {
        QuerySet {
            config: Queries::new::<D>(),
            namespaces: NamespaceQueries::new::<D>(),
            changes: Arc::new(ChangeQueries::new::<D>()),
            rollouts: RolloutQueries::new::<D>(),
            schemas: SchemaQueries::new::<D>(),
            identity: IdentityQueries::new::<D>(),
            audit: AuditQueries::new::<D>(),
            webhooks: WebhookQueries::new::<D>(),
        }
    }
}

/// A write whose values a database may refuse before they are sent (PostgreSQL cannot
/// store the NUL character).
#[derive(Debug, Clone, Copy)]
pub enum Checked<'a> {
    /// A publish (or promotion) of this record.
    Publish(&'a PublishRecord),
    /// A removal of a config or gray of this key, by this source.
    Remove(&'a ConfigKey, &'a OpSource),
    /// A metadata update: key, description, tags.
    Metadata(&'a ConfigKey, Option<&'a str>, Option<&'a str>),
    /// A namespace created or updated.
    Namespace(&'a Namespace),
}

/// The store of a [`Backend`]: every role of [`ConfigStore`].
#[derive(Debug, Clone)]
pub struct Store<B>(pub(crate) B);

impl<B: Backend> ConfigStore for Store<B> {
    fn backend(&self) -> &'static str {
        self.0.name()
    }
}

#[async_trait]
impl<B: Backend> Configs for Store<B> {
    async fn load_all(&self) -> Result<Vec<StoredConfig>, StoreError> {
        sql::load_all(self.0.reader(), &self.0.queries().config).await
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<StoredConfig>, StoreError> {
        sql::get(self.0.reader(), &self.0.queries().config, key).await
    }

    async fn publish(&self, rec: &PublishRecord) -> Result<StoredConfig, StoreError> {
        self.0.refuse(Checked::Publish(rec))?;
        self.0.write(write::Publish(rec.clone())).await
    }

    async fn publish_batch(
        &self,
        records: &[PublishRecord],
        policy: SamePolicy,
    ) -> Result<BatchOutcome, StoreError> {
        for rec in records {
            self.0.refuse(Checked::Publish(rec))?;
        }
        let step = write::PublishBatch(records.to_vec(), policy);
        self.0.write(step).await
    }

    async fn remove(
        &self,
        key: &ConfigKey,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        self.0.refuse(Checked::Remove(key, source))?;
        let step = write::Remove(key.clone(), source.clone(), now_ms);
        self.0.write(step).await
    }

    async fn update_metadata(
        &self,
        key: &ConfigKey,
        desc: Option<&str>,
        config_tags: Option<&str>,
    ) -> Result<(), StoreError> {
        self.0.refuse(Checked::Metadata(key, desc, config_tags))?;
        let (desc, tags) = (desc.map(str::to_string), config_tags.map(str::to_string));
        self.0
            .write(write::UpdateMetadata(key.clone(), desc, tags))
            .await
    }
}

#[async_trait]
impl<B: Backend> Grays for Store<B> {
    async fn load_grays(&self) -> Result<Vec<StoredGray>, StoreError> {
        sql::load_grays(self.0.reader(), &self.0.queries().config).await
    }

    async fn grays_of(&self, key: &ConfigKey) -> Result<Vec<StoredGray>, StoreError> {
        sql::grays_of(self.0.reader(), &self.0.queries().config, key).await
    }

    async fn remove_gray(
        &self,
        key: &ConfigKey,
        name: &str,
        source: &OpSource,
        now_ms: i64,
    ) -> Result<RemoveOutcome, StoreError> {
        self.0.refuse(Checked::Remove(key, source))?;
        let step = write::RemoveGray(key.clone(), name.to_string(), source.clone(), now_ms);
        self.0.write(step).await
    }

    async fn promote_gray(
        &self,
        record: &PublishRecord,
        name: &str,
    ) -> Result<StoredConfig, StoreError> {
        self.0.refuse(Checked::Publish(record))?;
        let step = write::Promote(record.clone(), name.to_string());
        self.0.write(step).await
    }

    async fn gray_history(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<GrayHistoryEntry>, StoreError> {
        sql::gray_history(self.0.reader(), &self.0.queries().config, key, page).await
    }
}

#[async_trait]
impl<B: Backend> History for Store<B> {
    async fn history_page(
        &self,
        key: &ConfigKey,
        page: PageRequest,
    ) -> Result<Page<HistoryEntry>, StoreError> {
        sql::history_page(self.0.reader(), &self.0.queries().config, key, page).await
    }

    async fn history_entry(&self, nid: i64) -> Result<Option<HistoryEntry>, StoreError> {
        sql::history_entry(self.0.reader(), &self.0.queries().config, nid).await
    }

    async fn history_previous(&self, config_id: i64) -> Result<Option<HistoryEntry>, StoreError> {
        sql::history_previous(self.0.reader(), &self.0.queries().config, config_id).await
    }

    /// Candidates are read through the reader pool with the shared code; the `DELETE` is
    /// the backend's (on SQLite it goes to the writer thread, queued behind the writes
    /// already waiting, so a publish waits at most for one batch).
    async fn purge_history(
        &self,
        log: HistoryLog,
        rule: &HistoryRetention,
        after_nid: i64,
        batch: u32,
    ) -> Result<PurgeStep, StoreError> {
        let delete = |sql| self.0.delete_logged(sql);
        let (q, position) = (self.0.queries().config.purge_of(log), (after_nid, batch));
        sql::purge_batch(self.0.reader(), q, rule, position, delete).await
    }
}

#[async_trait]
impl<B: Backend> ChangeLog for Store<B> {
    async fn changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        sql::changes_since(self.0.reader(), &self.0.queries().config, after_nid, limit).await
    }

    async fn max_history_nid(&self) -> Result<i64, StoreError> {
        sql::max_history_nid(self.0.reader(), &self.0.queries().config).await
    }

    async fn gray_changes_since(
        &self,
        after_nid: i64,
        limit: u32,
    ) -> Result<Vec<ChangeRecord>, StoreError> {
        sql::gray_changes_since(self.0.reader(), &self.0.queries().config, after_nid, limit).await
    }

    async fn max_gray_nid(&self) -> Result<i64, StoreError> {
        sql::max_gray_nid(self.0.reader(), &self.0.queries().config).await
    }
}

#[async_trait]
impl<B: Backend> Namespaces for Store<B> {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>, StoreError> {
        crate::namespaces::list(self.0.reader(), &self.0.queries().namespaces).await
    }

    async fn create_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        self.0.refuse(Checked::Namespace(ns))?;
        crate::namespaces::create(self.0.writer(), &self.0.queries().namespaces, ns, now_ms).await
    }

    async fn update_namespace(&self, ns: &Namespace, now_ms: i64) -> Result<(), StoreError> {
        self.0.refuse(Checked::Namespace(ns))?;
        crate::namespaces::update(self.0.writer(), &self.0.queries().namespaces, ns, now_ms).await
    }

    async fn delete_namespace(&self, id: &NamespaceId) -> Result<bool, StoreError> {
        crate::namespaces::delete(self.0.writer(), &self.0.queries().namespaces, id.as_str()).await
    }
}

#[async_trait]
impl<B: Backend> Identities for Store<B> {
    async fn load_identities(&self) -> Result<IdentityRecords, StoreError> {
        crate::identity::load(self.0.reader(), &self.0.queries().identity).await
    }

    async fn write_identity(&self, write: &IdentityWrite) -> Result<(), StoreError> {
        crate::identity::write(self.0.writer(), &self.0.queries().identity, write).await
    }
}

#[async_trait]
impl<B: Backend> ChangeRequests for Store<B> {
    async fn create_change(&self, change: &NewChange) -> Result<ChangeId, StoreError> {
        crate::changes::create(self.0.writer(), &self.0.queries().changes, change).await
    }

    async fn get_change(&self, id: ChangeId) -> Result<Option<ChangeRequest>, StoreError> {
        crate::changes::get(self.0.reader(), &self.0.queries().changes, id).await
    }

    async fn list_changes(
        &self,
        filter: &ChangeFilter,
        page: PageRequest,
    ) -> Result<Page<ChangeRequest>, StoreError> {
        crate::changes::list(self.0.reader(), &self.0.queries().changes, filter, page).await
    }

    async fn update_change(&self, id: ChangeId, update: &ChangeUpdate) -> Result<i64, StoreError> {
        crate::changes::update(self.0.writer(), &self.0.queries().changes, id, update).await
    }

    async fn publish_change(
        &self,
        id: ChangeId,
        expected_version: i64,
        writes: &[ChangeWrite],
        event: &NewChangeEvent,
        now_ms: i64,
    ) -> Result<ChangePublishOutcome, StoreError> {
        for w in writes {
            match w {
                ChangeWrite::Publish { record, .. } => self.0.refuse(Checked::Publish(record))?,
                ChangeWrite::Remove { key, source, .. } => {
                    self.0.refuse(Checked::Remove(key, source))?
                }
            }
        }
        let step = crate::changes::PublishChange {
            sql: Arc::clone(&self.0.queries().changes),
            id,
            version: expected_version,
            writes: writes.to_vec(),
            event: event.clone(),
            now_ms,
        };
        self.0.write(step).await
    }

    async fn due_changes(&self, now_ms: i64) -> Result<Vec<(ChangeId, i64)>, StoreError> {
        crate::changes::due(self.0.reader(), &self.0.queries().changes, now_ms).await
    }

    async fn review_policies(&self) -> Result<Vec<ReviewPolicy>, StoreError> {
        crate::changes::policies(self.0.reader(), &self.0.queries().changes).await
    }

    async fn set_review_policy(&self, policy: &ReviewPolicy) -> Result<(), StoreError> {
        crate::changes::set_policy(self.0.writer(), &self.0.queries().changes, policy).await
    }

    async fn delete_review_policy(
        &self,
        namespace: &NamespaceId,
        group_pattern: &str,
    ) -> Result<bool, StoreError> {
        crate::changes::delete_policy(
            self.0.writer(),
            &self.0.queries().changes,
            namespace,
            group_pattern,
        )
        .await
    }
}

#[async_trait]
impl<B: Backend> Schemas for Store<B> {
    async fn load_schemas(&self) -> Result<Vec<SchemaRecord>, StoreError> {
        crate::config_schema::load(self.0.reader(), &self.0.queries().schemas).await
    }

    async fn put_schema(&self, record: &SchemaRecord) -> Result<(), StoreError> {
        crate::config_schema::put(self.0.writer(), &self.0.queries().schemas, record).await
    }

    async fn delete_schema(
        &self,
        namespace: &NamespaceId,
        group: &str,
        data_id: &str,
    ) -> Result<bool, StoreError> {
        crate::config_schema::delete(
            self.0.writer(),
            &self.0.queries().schemas,
            namespace,
            group,
            data_id,
        )
        .await
    }
}

#[async_trait]
impl<B: Backend> Audit for Store<B> {
    /// On the writer pool (SQLite: its one connection, beside the writer thread, which
    /// never touches the audit tables; MySQL/PostgreSQL: the pool, the head row's lock
    /// serializing appenders across nodes).
    async fn append_audit(&self, events: &[AuditEvent]) -> Result<Vec<AuditEntry>, StoreError> {
        crate::audit::append(self.0.writer(), &self.0.queries().audit, events).await
    }

    async fn audit_page(
        &self,
        filter: &AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditEntry>, StoreError> {
        crate::audit::page(self.0.reader(), filter, page).await
    }

    async fn audit_range(&self, after_seq: i64, limit: u32) -> Result<AuditRange, StoreError> {
        crate::audit::range(self.0.reader(), &self.0.queries().audit, after_seq, limit).await
    }

    async fn purge_audit(&self, before_ms: i64, batch: u32) -> Result<AuditPurge, StoreError> {
        crate::audit::purge(self.0.writer(), &self.0.queries().audit, before_ms, batch).await
    }
}

/// Webhooks: reads on the reader pool, writes (claims included) on the writer pool.
#[async_trait]
impl<B: Backend> Webhooks for Store<B> {
    async fn load_webhooks(&self) -> Result<Vec<Webhook>, StoreError> {
        crate::webhooks::load(self.0.reader(), &self.0.queries().webhooks).await
    }

    async fn create_webhook(&self, hook: &Webhook) -> Result<i64, StoreError> {
        crate::webhooks::create(self.0.writer(), &self.0.queries().webhooks, hook).await
    }

    async fn update_webhook(&self, hook: &Webhook) -> Result<bool, StoreError> {
        crate::webhooks::update(self.0.writer(), &self.0.queries().webhooks, hook).await
    }

    async fn delete_webhook(&self, id: i64) -> Result<bool, StoreError> {
        crate::webhooks::delete(self.0.writer(), &self.0.queries().webhooks, id).await
    }

    async fn enqueue_deliveries(&self, deliveries: &[NewDelivery]) -> Result<(), StoreError> {
        crate::webhooks::enqueue(self.0.writer(), &self.0.queries().webhooks, deliveries).await
    }

    async fn claim_deliveries(&self, claim: &DeliveryClaim) -> Result<Vec<Delivery>, StoreError> {
        crate::webhooks::claim(self.0.writer(), &self.0.queries().webhooks, claim).await
    }

    async fn finish_delivery(
        &self,
        id: i64,
        owner: &str,
        result: &DeliveryResult,
    ) -> Result<bool, StoreError> {
        crate::webhooks::finish(
            self.0.writer(),
            &self.0.queries().webhooks,
            id,
            owner,
            result,
        )
        .await
    }

    async fn deliveries(
        &self,
        hook_id: i64,
        page: PageRequest,
    ) -> Result<Page<Delivery>, StoreError> {
        crate::webhooks::page(self.0.reader(), &self.0.queries().webhooks, hook_id, page).await
    }

    async fn redeliver(&self, id: i64, now_ms: i64) -> Result<bool, StoreError> {
        crate::webhooks::redeliver(self.0.writer(), &self.0.queries().webhooks, id, now_ms).await
    }

    async fn purge_deliveries(&self, before_ms: i64, batch: u32) -> Result<u64, StoreError> {
        crate::webhooks::purge(
            self.0.writer(),
            &self.0.queries().webhooks,
            before_ms,
            batch,
        )
        .await
    }
}

#[async_trait]
impl<B: Backend> Rollouts for Store<B> {
    async fn create_rollout(&self, rollout: &NewRollout) -> Result<RolloutId, StoreError> {
        crate::rollouts::create(self.0.writer(), &self.0.queries().rollouts, rollout).await
    }

    async fn get_rollout(&self, id: RolloutId) -> Result<Option<Rollout>, StoreError> {
        crate::rollouts::get(self.0.reader(), &self.0.queries().rollouts, id).await
    }

    async fn list_rollouts(
        &self,
        active_only: bool,
        limit: u32,
    ) -> Result<Vec<Rollout>, StoreError> {
        crate::rollouts::list(
            self.0.reader(),
            &self.0.queries().rollouts,
            active_only,
            limit,
        )
        .await
    }

    async fn update_rollout(
        &self,
        id: RolloutId,
        update: &RolloutUpdate,
    ) -> Result<Rollout, StoreError> {
        crate::rollouts::update(self.0.writer(), &self.0.queries().rollouts, id, update).await
    }

    async fn claim_rollout(
        &self,
        id: RolloutId,
        node: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        crate::rollouts::claim(
            self.0.writer(),
            &self.0.queries().rollouts,
            id,
            node,
            now_ms,
            lease_ms,
        )
        .await
    }
}

#[async_trait]
impl<B: Backend> Health for Store<B> {
    async fn ping(&self) -> Result<(), StoreError> {
        sql::ping(self.0.reader()).await
    }
}
