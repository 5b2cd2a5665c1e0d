//! Change requests and review policies (docs/change-requests.md): the one place that
//! decides who may create, review and publish a change request, which direct writes a
//! review policy refuses, and how a request's keys are written — all together or not at
//! all, each against the md5 it was based on.
//!
//! A request's life: `draft` → `open` → `approved` (enough approvals from users other than
//! its author who hold `a` on every key) or `rejected` → `published`; `closed` abandons
//! it. An edit or a rebase makes earlier approvals void (the request goes back to `open`).
//! A publish that finds a key changed since its base writes nothing and marks the request
//! stale; a rebase takes the keys' current md5s as the new bases.
//!
//! Policies are held in memory (read at load, after each local change and every
//! [`POLICY_REFRESH`] on a shared database), so a policy set on one node is enforced by
//! the others within that time.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use nacelle_core::change::{
    ChangeEventKind, ChangeFilter, ChangeId, ChangeItem, ChangeOp, ChangePublishOutcome,
    ChangeRequest, ChangeState, ChangeUpdate, ChangeWrite, ChangeWritten, NewChange,
    NewChangeEvent, ReviewPolicy,
};
use nacelle_core::{
    now_millis, Action, Caller, ConfigKey, ConfigMeta, CoreError, NamespaceId, Page, PageRequest,
    StoreError, Variant,
};
use nacelle_metrics::StoreOp;

use crate::config::audit::Audited;
use crate::config::audit::ChangeSubject;
use crate::config::commit::{Effect, WriteKind};
use crate::config::request::PublishRequest;
use crate::config::service::ConfigService;
use crate::config::transfer::type_from_extension;
use nacelle_core::store::ChangeRequests as ChangeStore;

mod policies;

use crate::config::gates::ReviewPolicies;
use policies::PolicyState;

/// Most keys in one change request.
pub const MAX_CHANGE_ITEMS: usize = 100;
/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 256;
/// Longest description, comment or reason, in characters.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Most review policies.
pub const MAX_POLICIES: usize = 1000;
/// How often a node re-reads the review policies on a shared database.
pub const POLICY_REFRESH: Duration = Duration::from_secs(2);

/// A change request as its author writes it.
#[derive(Debug, Clone, Default)]
pub struct ChangeInput {
    /// The namespace (blank, `public`: the default one).
    pub namespace: Option<String>,
    pub title: String,
    pub description: String,
    pub items: Vec<ItemInput>,
    /// Created as a draft (not yet open for review).
    pub draft: bool,
}

/// One key of a change request as its author writes it.
#[derive(Debug, Clone, Default)]
pub struct ItemInput {
    pub group: String,
    pub data_id: String,
    /// The new content; `None` removes the key.
    pub content: Option<String>,
    /// The content's type (blank: from the dataId's extension).
    pub config_type: Option<String>,
}

/// One key of a change request beside what the server holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemDiff {
    pub key: ConfigKey,
    /// `publish` or `remove`.
    pub op: &'static str,
    /// The md5 the change is based on (`""`: absent).
    pub base_md5: String,
    /// The md5 the key has now (`""`: absent).
    pub current_md5: String,
    /// The content now (`None`: absent).
    pub current: Option<String>,
    /// The content after the change (`None`: removed).
    pub proposed: Option<String>,
}

impl ItemDiff {
    /// Whether the key changed since the request was based.
    pub fn moved(&self) -> bool {
        self.base_md5 != self.current_md5
    }
}

/// A change request with what its policy asks: what the service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeView {
    pub request: ChangeRequest,
    /// Approvals the policies covering its keys require (0: none covers them).
    pub required_approvals: u32,
    /// Who approved it (counted since its last edit or rebase).
    pub approvers: Vec<String>,
}

impl ChangeView {
    fn of(request: ChangeRequest, required_approvals: u32) -> Self {
        let approvers = request.approvers().into_iter().map(String::from).collect();
        ChangeView {
            request,
            required_approvals,
            approvers,
        }
    }
}

/// The change-request operations for one caller: what [`ConfigService::changes`] hands out
/// once the service is ready and the caller's credentials are good.
#[derive(Debug, Clone, Copy)]
pub struct Changes<'a> {
    requests: &'a ChangeRequests,
    caller: &'a Caller,
}

fn check_text(what: &str, text: &str, max: usize) -> Result<(), CoreError> {
    if text.chars().count() > max {
        return Err(CoreError::Invalid(format!(
            "{what} is longer than {max} characters"
        )));
    }
    Ok(())
}

fn store_err(e: StoreError, id: ChangeId) -> CoreError {
    match e {
        StoreError::CasMismatch => CoreError::Conflict(format!(
            "change request {id} changed meanwhile: reload it and try again"
        )),
        StoreError::NotFound(_) => not_found(id),
        e => e.into(),
    }
}

/// Change requests and review policies: a component that owns the policies in memory
/// (the core asks them through [`crate::config::gates::ReviewPolicies`] before every direct
/// write) and reaches the config core through its handle. Cheap to clone.
#[derive(Clone)]
pub struct ChangeRequests {
    core: ConfigService,
    store: Arc<dyn ChangeStore>,
    policies: Arc<PolicyState>,
}

impl std::fmt::Debug for ChangeRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeRequests").finish_non_exhaustive()
    }
}

fn not_found(id: ChangeId) -> CoreError {
    CoreError::NotFound(format!("change request {id} not found"))
}

impl ChangeRequests {
    /// The change requests of `core`'s keys; from now on `core` refuses a direct write of
    /// a key a review policy governs. One per core: a second one is refused.
    pub fn new(core: &ConfigService) -> Result<ChangeRequests, CoreError> {
        let policies = Arc::new(PolicyState::default());
        if !core.set_review_policies(policies.clone()) {
            return Err(CoreError::Conflict(
                "the config core has its review policies already".into(),
            ));
        }
        Ok(ChangeRequests {
            core: core.clone(),
            store: core.store().clone(),
            policies,
        })
    }

    /// The change-request operations for `caller`.
    pub fn changes<'a>(&'a self, caller: &'a Caller) -> Result<Changes<'a>, CoreError> {
        self.core.guard()?;
        self.core.authenticated(caller)?;
        Ok(Changes {
            requests: self,
            caller,
        })
    }

    /// Re-reads the review policies from the database.
    pub async fn refresh_policies(&self) -> Result<(), CoreError> {
        let policies = self
            .core
            .store_call(StoreOp::Changes, self.store.review_policies())
            .await?;
        *self.policies.list.write() = Arc::new(policies);
        Ok(())
    }

    /// Keeps the policies current until shutdown (changes made by other nodes), and
    /// publishes approved change requests whose time has come, every `every`.
    pub async fn follow(&self, every: Duration) {
        self.core
            .periodically(every, || async {
                if let Err(e) = self.refresh_policies().await {
                    tracing::debug!(error = %e, "re-reading review policies failed");
                }
                self.publish_due().await;
            })
            .await
    }

    /// Publishes every approved change request whose scheduled time has passed. On a
    /// shared database every node tries; the request's version makes one publish win and
    /// the others find it `Moved`.
    pub async fn publish_due(&self) {
        if !self.core.is_ready() {
            return;
        }
        let due = match self
            .core
            .store_call(StoreOp::Changes, self.store.due_changes(now_millis()))
            .await
        {
            Ok(due) => due,
            Err(e) => {
                tracing::debug!(error = %e, "reading scheduled change requests failed");
                return;
            }
        };
        for (id, version) in due {
            let caller = Caller::internal();
            match self
                .publish_change(&caller, id, Some(version), "scheduled")
                .await
            {
                Ok(_) => tracing::info!(id, "published a scheduled change request"),
                Err(CoreError::Conflict(_)) => {}
                Err(e) => tracing::warn!(id, error = %e, "scheduled change request not published"),
            }
        }
    }

    /// Every review policy.
    pub fn review_policies(&self, caller: &Caller) -> Result<Vec<ReviewPolicy>, CoreError> {
        self.core.guard()?;
        self.core.authenticated(caller)?;
        let all = self.policies.list.read().clone();
        Ok(all
            .iter()
            .filter(|p| self.core.sees_namespace(caller, p.namespace.as_str()))
            .cloned()
            .collect())
    }

    /// Sets the policy of `namespace` and `group_pattern` (administrators only):
    /// `required_approvals` 0 removes it.
    pub async fn set_review_policy(
        &self,
        caller: &Caller,
        namespace: Option<&str>,
        group_pattern: &str,
        required_approvals: u32,
    ) -> Result<(), CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        let namespace = NamespaceId::parse(namespace)?;
        let pattern = group_pattern.trim();
        if pattern.is_empty() || pattern.chars().count() > 128 {
            return Err(CoreError::Invalid(
                "group pattern must have 1 to 128 characters (`*` for every group)".into(),
            ));
        }
        if !pattern
            .chars()
            .all(|c| c == '*' || c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(CoreError::Invalid(format!(
                "group pattern `{pattern}` may hold only letters, digits, `-_.:` and `*`"
            )));
        }
        if required_approvals > 10 {
            return Err(CoreError::Invalid(
                "required approvals must be 0 to 10".into(),
            ));
        }
        let detail = format!("{} {pattern} {required_approvals}", namespace.as_str());
        let result = if required_approvals == 0 {
            self.core
                .store_call(
                    StoreOp::Changes,
                    self.store.delete_review_policy(&namespace, pattern),
                )
                .await
                .map(|_| ())
        } else {
            if self.policies.list.read().len() >= MAX_POLICIES {
                return Err(CoreError::TooLarge(format!(
                    "at most {MAX_POLICIES} review policies"
                )));
            }
            let policy = ReviewPolicy {
                namespace,
                group_pattern: pattern.to_string(),
                required_approvals,
                updated_by: caller.operator("").to_string(),
                updated_ms: now_millis(),
            };
            self.core
                .store_call(StoreOp::Changes, self.store.set_review_policy(&policy))
                .await
        };
        self.core.audit_outcome(
            nacelle_core::audit::AuditAction::PolicyChange,
            "review.policy",
            caller,
            &detail,
            result.is_ok(),
        );
        result?;
        self.refresh_policies().await
    }

    /// Approvals the policies covering `keys` require (the most any of them asks).
    fn required_for<'a>(&self, keys: impl Iterator<Item = &'a ConfigKey>) -> u32 {
        keys.filter_map(|k| self.policies.policy_of(k))
            .map(|p| p.required_approvals)
            .max()
            .unwrap_or(0)
    }

    /// The md5 the formal config of `key` has now (`""`: absent).
    fn current_md5(&self, key: &ConfigKey) -> String {
        self.core
            .inner
            .cache
            .get(key)
            .map(|c| c.md5.clone())
            .unwrap_or_default()
    }

    /// Reads request `id` and the view of it.
    async fn load_change(&self, id: ChangeId) -> Result<ChangeRequest, CoreError> {
        self.core
            .store_call(StoreOp::Changes, self.store.get_change(id))
            .await?
            .ok_or_else(|| not_found(id))
    }

    /// A request as it is shown: its approvals required, and an encrypted dataId's sealed
    /// content opened (the caller's read permission on the namespace is checked by the
    /// caller of this).
    fn view_of(&self, mut request: ChangeRequest) -> Result<ChangeView, CoreError> {
        let keys: Vec<ConfigKey> = request
            .items
            .iter()
            .map(|i| i.key(&request.namespace))
            .collect();
        for (item, key) in request.items.iter_mut().zip(&keys) {
            if let ChangeOp::Publish { content, .. } = &mut item.op {
                *content = self.core.open_from_change(key, std::mem::take(content))?;
            }
        }
        let required = self.required_for(keys.iter());
        Ok(ChangeView::of(request, required))
    }

    /// Publishes request `id` (see [`Changes::publish`]); `version`, when given, must be
    /// the request's.
    async fn publish_change(
        &self,
        caller: &Caller,
        id: ChangeId,
        version: Option<i64>,
        how: &str,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.load_change(id).await?;
        if version.is_some_and(|v| v != cr.version) {
            return Err(store_err(StoreError::CasMismatch, id));
        }
        let view = self.view_of(cr)?;
        let cr = &view.request;
        let ready = match cr.state {
            ChangeState::Approved => true,
            ChangeState::Open => view.required_approvals == 0,
            _ => false,
        };
        if !ready {
            return Err(CoreError::Conflict(format!(
                "change request {id} is {} and needs {} approval(s) ({} so far): it cannot be published",
                cr.state,
                view.required_approvals,
                view.approvers.len()
            )));
        }
        if cr.stale {
            return Err(CoreError::Conflict(format!(
                "change request {id} is stale: rebase it on the current configs first"
            )));
        }
        let mut writes = Vec::with_capacity(cr.items.len());
        for item in &cr.items {
            let key = item.key(&cr.namespace);
            self.core.authorize_key(caller, &key, Action::Write)?;
            writes.push(match &item.op {
                ChangeOp::Publish {
                    content,
                    config_type,
                } => {
                    let req = PublishRequest {
                        key,
                        content: content.clone(),
                        config_type: Some(config_type.as_str().to_string()),
                        meta: self.kept_meta(&item.key(&cr.namespace)),
                        src_user: cr.author.clone(),
                        cas_md5: None,
                        variant: Variant::Formal,
                        message: cr.title.clone(),
                        change_id: Some(cr.id),
                    };
                    // Checked by type and, for an encrypted dataId, encrypted with a
                    // fresh data key — as a direct publish is.
                    let record = self.core.validate_publish(caller, req)?;
                    let record = self.core.checked_and_sealed(record).await?;
                    ChangeWrite::Publish {
                        record: Box::new(record),
                        base_md5: item.base_md5.clone(),
                    }
                }
                ChangeOp::Remove => ChangeWrite::Remove {
                    key,
                    base_md5: item.base_md5.clone(),
                    source: nacelle_core::OpSource {
                        src_user: caller.operator(&cr.author).to_string(),
                        src_ip: caller.ip_string(),
                        message: cr.title.clone(),
                        change_id: Some(cr.id),
                    },
                },
            });
        }
        let event = NewChangeEvent {
            kind: ChangeEventKind::Published,
            user: caller.operator(how).to_string(),
            text: if how == "scheduled" {
                "published at its scheduled time".into()
            } else {
                String::new()
            },
        };
        let now = now_millis();
        let commit = self
            .core
            .begin(
                WriteKind::ChangePublish,
                writes.iter().map(ChangeWrite::key),
            )
            .await;
        let outcome = commit
            .store(
                self.store
                    .publish_change(id, cr.version, &writes, &event, now),
            )
            .await
            .map_err(|e| store_err(e, id))?;
        let ChangePublishOutcome::Published(written) = outcome else {
            drop(commit);
            return self.unpublished(caller, id, cr, how, outcome).await;
        };
        let effects = writes
            .iter()
            .zip(written)
            .map(|(w, done)| match done {
                ChangeWritten::Published(stored) => Effect::Formal(Arc::from(stored)),
                ChangeWritten::Removed(revision) => Effect::Removed(w.key().clone(), revision),
            })
            .collect();
        let subject = ChangeSubject::new(id, &cr.namespace, &cr.title, "published", &cr.items);
        let event = Audited::new(
            nacelle_core::audit::AuditAction::ChangePublish,
            "change.publish",
            id.to_string(),
        )
        .change(subject);
        commit.finish(caller, effects, vec![event]).await;
        self.view_of(self.load_change(id).await?)
    }

    /// The answer to a publish of request `id` that the store did not commit: it moved
    /// meanwhile, or some of its keys changed since it was based (then it is marked stale).
    async fn unpublished(
        &self,
        caller: &Caller,
        id: ChangeId,
        cr: &ChangeRequest,
        how: &str,
        outcome: ChangePublishOutcome,
    ) -> Result<ChangeView, CoreError> {
        match outcome {
            ChangePublishOutcome::Published(_) => self.view_of(self.load_change(id).await?),
            ChangePublishOutcome::Moved => Err(store_err(StoreError::CasMismatch, id)),
            ChangePublishOutcome::Stale(keys) => {
                let names: Vec<String> = keys
                    .iter()
                    .map(|k| format!("{}/{}", k.group(), k.data_id()))
                    .collect();
                let mut up = ChangeUpdate::event(
                    cr.version,
                    NewChangeEvent {
                        kind: ChangeEventKind::Stale,
                        user: caller.operator(how).to_string(),
                        text: names.join(", "),
                    },
                    now_millis(),
                );
                up.stale = Some(true);
                self.core
                    .store_call(StoreOp::Changes, self.store.update_change(id, &up))
                    .await
                    .map_err(|e| store_err(e, id))?;
                Err(CoreError::Conflict(format!(
                    "change request {id} is stale: {} changed since it was based; nothing was \
                     written (look at the diff, then rebase)",
                    names.join(", ")
                )))
            }
        }
    }

    /// The description, tags and app of the key's formal config, kept by a publish of a
    /// change request (which changes only content and type).
    fn kept_meta(&self, key: &ConfigKey) -> ConfigMeta {
        self.core
            .inner
            .cache
            .get(key)
            .map(|c| ConfigMeta {
                encrypted_data_key: String::new(),
                ..c.meta.clone()
            })
            .unwrap_or_default()
    }
}

impl Changes<'_> {
    /// Checks the items as publishes would be checked, refusing what a request cannot
    /// hold; their keys, each with its current md5 as the base.
    async fn checked_items(
        &self,
        namespace: &NamespaceId,
        items: Vec<ItemInput>,
    ) -> Result<Vec<ChangeItem>, CoreError> {
        let s = self.requests;
        if items.is_empty() {
            return Err(CoreError::Invalid(
                "a change request needs at least one config".into(),
            ));
        }
        if items.len() > MAX_CHANGE_ITEMS {
            return Err(CoreError::Invalid(format!(
                "a change request holds at most {MAX_CHANGE_ITEMS} configs ({} given)",
                items.len()
            )));
        }
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let name = format!("{}/{}", item.group, item.data_id);
            let in_item = |e: CoreError| match e {
                CoreError::Invalid(m) | CoreError::TooLarge(m) => {
                    CoreError::Invalid(format!("config {name}: {m}"))
                }
                other => other,
            };
            let key =
                ConfigKey::new(namespace.clone(), &item.group, &item.data_id).map_err(in_item)?;
            if !seen.insert(key.clone()) {
                return Err(CoreError::Invalid(format!("config {name} appears twice")));
            }
            s.core.authorize_key(self.caller, &key, Action::Write)?;
            let op = match item.content {
                Some(content) => {
                    let config_type = match item.config_type.as_deref().map(str::trim) {
                        Some(t) if !t.is_empty() => t.to_string(),
                        _ => type_from_extension(&item.data_id).to_string(),
                    };
                    // Checked as a publish of it would be: size, type, content by type.
                    let req = PublishRequest {
                        key: key.clone(),
                        content,
                        config_type: Some(config_type),
                        meta: ConfigMeta::default(),
                        src_user: String::new(),
                        cas_md5: None,
                        variant: Variant::Formal,
                        message: String::new(),
                        change_id: None,
                    };
                    let record = s.core.validate_publish(self.caller, req).map_err(in_item)?;
                    s.core.check_content_type(&record).await.map_err(in_item)?;
                    // An encrypted dataId's content is held sealed, never in clear.
                    let content = String::from_utf8_lossy(&record.content).into_owned();
                    ChangeOp::Publish {
                        content: s.core.seal_for_change(&key, content)?,
                        config_type: record.config_type,
                    }
                }
                None => ChangeOp::Remove,
            };
            out.push(ChangeItem {
                group: key.group().to_string(),
                data_id: key.data_id().to_string(),
                op,
                base_md5: s.current_md5(&key),
            });
        }
        Ok(out)
    }

    fn user(&self) -> Result<String, CoreError> {
        if !self.requests.core.auth_enabled() {
            return Ok(self.caller.operator("").to_string());
        }
        self.caller
            .user()
            .map(str::to_string)
            .ok_or(CoreError::Auth(nacelle_core::AuthFailure::UserNotFound))
    }

    /// Opens a change request (a draft when `input.draft`): the caller needs write
    /// permission on every key.
    pub async fn create(&self, input: ChangeInput) -> Result<ChangeView, CoreError> {
        let s = self.requests;
        let author = self.user()?;
        check_text("title", &input.title, MAX_TITLE_CHARS)?;
        check_text("description", &input.description, MAX_TEXT_CHARS)?;
        if input.title.trim().is_empty() {
            return Err(CoreError::Invalid("a change request needs a title".into()));
        }
        let namespace = NamespaceId::parse(input.namespace.as_deref())?;
        if !namespace.is_default() && !s.core.namespace_exists(namespace.as_str()).await? {
            return Err(CoreError::NotFound(format!(
                "namespace {} not found",
                namespace.as_str()
            )));
        }
        let items = self.checked_items(&namespace, input.items).await?;
        let change = NewChange {
            namespace,
            title: input.title.trim().to_string(),
            description: input.description,
            author,
            state: if input.draft {
                ChangeState::Draft
            } else {
                ChangeState::Open
            },
            items,
            now_ms: now_millis(),
        };
        let id = s
            .core
            .store_call(StoreOp::Changes, s.store.create_change(&change))
            .await?;
        let subject = ChangeSubject::new(
            id,
            &change.namespace,
            &change.title,
            "created",
            &change.items,
        );
        let event = Audited::new(
            nacelle_core::audit::AuditAction::ChangeCreate,
            "change.create",
            id.to_string(),
        );
        self.requests.core.audit(self.caller, event.change(subject));
        self.get(id).await
    }

    /// Request `id`: the caller needs read permission on every key.
    pub async fn get(&self, id: ChangeId) -> Result<ChangeView, CoreError> {
        let s = self.requests;
        let cr = s.load_change(id).await?;
        for item in &cr.items {
            s.core
                .authorize_key(self.caller, &item.key(&cr.namespace), Action::Read)?;
        }
        if cr.items.is_empty() {
            s.core.authorize(self.caller, Action::Read, || {
                nacelle_core::auth::namespace_resource(cr.namespace.as_str())
            })?;
        }
        s.view_of(cr)
    }

    /// Requests matching `filter`, newest first: only those of namespaces the caller sees.
    pub async fn list(
        &self,
        filter: &ChangeFilter,
        page: PageRequest,
    ) -> Result<Page<ChangeRequest>, CoreError> {
        let s = self.requests;
        let mut filter = filter.clone();
        match &filter.namespace {
            Some(ns) => s.core.authorize(self.caller, Action::Read, || {
                nacelle_core::auth::namespace_resource(ns.as_str())
            })?,
            // Across namespaces: the store counts and pages only those the caller sees.
            None if !s.core.is_admin(self.caller) => {
                let visible: Vec<NamespaceId> = s
                    .core
                    .namespaces(self.caller)?
                    .list()
                    .await?
                    .into_iter()
                    .map(|n| n.namespace.id)
                    .collect();
                if visible.is_empty() {
                    return Ok(Page::new(
                        0,
                        page.page_no,
                        page.page_size.max(1),
                        Vec::new(),
                    ));
                }
                filter.namespaces = Some(visible);
            }
            None => {}
        }
        let mut page = s
            .core
            .store_call(StoreOp::Changes, s.store.list_changes(&filter, page))
            .await?;
        page.items
            .retain(|c| s.core.sees_namespace(self.caller, c.namespace.as_str()));
        Ok(page)
    }

    /// Every key of request `id` beside what the server holds now (plaintext, as the
    /// console shows configs).
    pub async fn diff(&self, id: ChangeId) -> Result<Vec<ItemDiff>, CoreError> {
        let s = self.requests;
        let view = self.get(id).await?;
        let cr = view.request;
        let mut out = Vec::with_capacity(cr.items.len());
        for item in cr.items {
            let key = item.key(&cr.namespace);
            let current = s.core.formal(self.caller, &key)?;
            let (op, proposed) = match item.op {
                ChangeOp::Publish { content, .. } => ("publish", Some(content)),
                ChangeOp::Remove => ("remove", None),
            };
            out.push(ItemDiff {
                op,
                base_md5: item.base_md5,
                current_md5: current
                    .as_ref()
                    .map(|c| c.md5().to_string())
                    .unwrap_or_default(),
                current: current.map(|c| c.content_text().into_owned()),
                proposed,
                key,
            });
        }
        Ok(out)
    }

    /// Records `event` on request `id` (at `version` when given) with `change` applied.
    async fn update(
        &self,
        cr: &ChangeRequest,
        version: Option<i64>,
        kind: ChangeEventKind,
        text: String,
        change: impl FnOnce(&mut ChangeUpdate),
    ) -> Result<ChangeView, CoreError> {
        let s = self.requests;
        if version.is_some_and(|v| v != cr.version) {
            return Err(store_err(StoreError::CasMismatch, cr.id));
        }
        check_text("text", &text, MAX_TEXT_CHARS)?;
        let event = NewChangeEvent {
            kind,
            user: self.user()?,
            text,
        };
        let mut up = ChangeUpdate::event(cr.version, event, now_millis());
        change(&mut up);
        s.core
            .store_call(StoreOp::Changes, s.store.update_change(cr.id, &up))
            .await
            .map_err(|e| store_err(e, cr.id))?;
        let view = self.get(cr.id).await;
        // The request as it is now (an edit changed its keys), else as it was.
        let now = view.as_ref().map(|v| &v.request).unwrap_or(cr);
        let subject =
            ChangeSubject::new(cr.id, &now.namespace, &now.title, kind.as_str(), &now.items);
        let event = Audited::new(
            nacelle_core::audit::AuditAction::ChangeEvent,
            "change.event",
            format!("{} {}", cr.id, kind.as_str()),
        );
        self.requests.core.audit(self.caller, event.change(subject));
        view
    }

    /// Request `id` if it is not published or closed.
    async fn live(&self, id: ChangeId) -> Result<ChangeRequest, CoreError> {
        let cr = self.get(id).await?.request;
        if cr.state.is_final() {
            return Err(CoreError::Conflict(format!(
                "change request {id} is {}",
                cr.state
            )));
        }
        Ok(cr)
    }

    /// Whether the caller wrote the request (or administers the server).
    fn is_author_or_admin(&self, cr: &ChangeRequest) -> bool {
        self.caller.user() == Some(cr.author.as_str()) || self.requests.core.is_admin(self.caller)
    }

    fn author_only(&self, cr: &ChangeRequest, what: &str) -> Result<(), CoreError> {
        if self.is_author_or_admin(cr) {
            return Ok(());
        }
        Err(CoreError::ReviewRequired(format!(
            "only the author of change request {} (or an administrator) may {what} it",
            cr.id
        )))
    }

    /// Opens a draft for review.
    pub async fn open(&self, id: ChangeId, version: Option<i64>) -> Result<ChangeView, CoreError> {
        let cr = self.live(id).await?;
        self.author_only(&cr, "open")?;
        if cr.state != ChangeState::Draft && cr.state != ChangeState::Rejected {
            return Err(CoreError::Conflict(format!(
                "change request {id} is {}, not a draft",
                cr.state
            )));
        }
        self.update(&cr, version, ChangeEventKind::Opened, String::new(), |u| {
            u.state = Some(ChangeState::Open);
        })
        .await
    }

    /// Replaces the request's keys (and title, description when given): earlier
    /// approvals no longer count, and the bases are the keys' current md5s.
    pub async fn edit(
        &self,
        id: ChangeId,
        version: Option<i64>,
        input: ChangeInput,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.live(id).await?;
        self.author_only(&cr, "edit")?;
        check_text("title", &input.title, MAX_TITLE_CHARS)?;
        check_text("description", &input.description, MAX_TEXT_CHARS)?;
        let items = self.checked_items(&cr.namespace, input.items).await?;
        let state = if cr.state == ChangeState::Draft {
            ChangeState::Draft
        } else {
            ChangeState::Open
        };
        let title = Some(input.title.trim().to_string()).filter(|t| !t.is_empty());
        let description = Some(input.description).filter(|d| !d.is_empty());
        self.update(&cr, version, ChangeEventKind::Edited, String::new(), |u| {
            u.items = Some(items);
            u.state = Some(state);
            u.stale = Some(false);
            u.title = title;
            u.description = description;
        })
        .await
    }

    /// Takes the keys' current md5s as the new bases (after looking at the diff): the
    /// request is no longer stale, and earlier approvals no longer count.
    pub async fn rebase(
        &self,
        id: ChangeId,
        version: Option<i64>,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.live(id).await?;
        self.author_only(&cr, "rebase")?;
        let items: Vec<ChangeItem> = cr
            .items
            .iter()
            .map(|i| ChangeItem {
                base_md5: self.requests.current_md5(&i.key(&cr.namespace)),
                ..i.clone()
            })
            .collect();
        let state = match cr.state {
            ChangeState::Draft => ChangeState::Draft,
            _ => ChangeState::Open,
        };
        self.update(&cr, version, ChangeEventKind::Rebased, String::new(), |u| {
            u.items = Some(items);
            u.state = Some(state);
            u.stale = Some(false);
        })
        .await
    }

    /// Adds a comment (anyone who may read the request).
    pub async fn comment(&self, id: ChangeId, text: String) -> Result<ChangeView, CoreError> {
        let cr = self.get(id).await?.request;
        if text.trim().is_empty() {
            return Err(CoreError::Invalid("a comment needs a text".into()));
        }
        self.update(&cr, None, ChangeEventKind::Commented, text, |_| {})
            .await
    }

    /// Checks that the caller may review request `cr`: not its author, and `a` on every
    /// key (or an administrator).
    fn check_reviewer(&self, cr: &ChangeRequest) -> Result<(), CoreError> {
        let s = self.requests;
        let user = self.user()?;
        if s.core.auth_enabled() && user == cr.author {
            return Err(CoreError::ReviewRequired(format!(
                "the author of change request {} cannot review it",
                cr.id
            )));
        }
        if !s.core.auth_enabled() {
            return Err(CoreError::ReviewRequired(
                "reviewing a change request needs authentication on (reviewers are users)".into(),
            ));
        }
        for item in &cr.items {
            s.core
                .authorize_key(self.caller, &item.key(&cr.namespace), Action::Approve)?;
        }
        Ok(())
    }

    /// Approves an open request (the version seen, when given, must be the current one):
    /// once enough users approved it, it is `approved`.
    pub async fn approve(
        &self,
        id: ChangeId,
        version: Option<i64>,
        comment: String,
    ) -> Result<ChangeView, CoreError> {
        let view = self.get(id).await?;
        let cr = &view.request;
        if cr.state != ChangeState::Open && cr.state != ChangeState::Approved {
            return Err(CoreError::Conflict(format!(
                "change request {id} is {}: only an open request is reviewed",
                cr.state
            )));
        }
        self.check_reviewer(cr)?;
        let user = self.user()?;
        let mut approvers: Vec<String> = view.approvers.clone();
        if !approvers.contains(&user) {
            approvers.push(user);
        }
        let enough = approvers.len() as u32 >= view.required_approvals.max(1);
        self.update(cr, version, ChangeEventKind::Approved, comment, |u| {
            if enough {
                u.state = Some(ChangeState::Approved);
            }
        })
        .await
    }

    /// Rejects an open or approved request, with a reason.
    pub async fn reject(
        &self,
        id: ChangeId,
        version: Option<i64>,
        reason: String,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.get(id).await?.request;
        if cr.state != ChangeState::Open && cr.state != ChangeState::Approved {
            return Err(CoreError::Conflict(format!(
                "change request {id} is {}: only an open request is reviewed",
                cr.state
            )));
        }
        self.check_reviewer(&cr)?;
        if reason.trim().is_empty() {
            return Err(CoreError::Invalid("a rejection needs a reason".into()));
        }
        self.update(&cr, version, ChangeEventKind::Rejected, reason, |u| {
            u.state = Some(ChangeState::Rejected);
        })
        .await
    }

    /// Abandons the request.
    pub async fn close(&self, id: ChangeId, reason: String) -> Result<ChangeView, CoreError> {
        let cr = self.live(id).await?;
        self.author_only(&cr, "close")?;
        self.update(&cr, None, ChangeEventKind::Closed, reason, |u| {
            u.state = Some(ChangeState::Closed);
            u.publish_at_ms = Some(None);
        })
        .await
    }

    /// Schedules the publish of the request at `at_ms` (`None`: unschedules): the server
    /// publishes it then if it is approved; a cluster publishes it once.
    pub async fn schedule(
        &self,
        id: ChangeId,
        at_ms: Option<i64>,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.live(id).await?;
        self.author_only(&cr, "schedule")?;
        if at_ms.is_some_and(|t| t <= 0) {
            return Err(CoreError::Invalid(
                "the time must be ms since the epoch".into(),
            ));
        }
        let text = at_ms.map(|t| t.to_string()).unwrap_or_default();
        self.update(&cr, None, ChangeEventKind::Scheduled, text, |u| {
            u.publish_at_ms = Some(at_ms);
        })
        .await
    }

    /// Publishes the request: every key in one transaction, or nothing when one of them
    /// changed since its base (the request is then stale). The caller needs write
    /// permission on every key; the request must be approved (or open when no policy
    /// asks for approvals).
    pub async fn publish(
        &self,
        id: ChangeId,
        version: Option<i64>,
    ) -> Result<ChangeView, CoreError> {
        let cr = self.get(id).await?;
        self.requests
            .publish_change(self.caller, cr.request.id, version, "")
            .await
    }
}
