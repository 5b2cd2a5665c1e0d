//! Writes: publish, remove, remove by ids, and reloading a key changed elsewhere.
//!
//! validate (core's rules, then the content by its type under the namespace's validation
//! mode) → the key's write lock → store (one transaction) → cache (only if the revision
//! is newer) → release the lock → notify the key's listeners → tell the cluster observer.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use nacelle_core::content::{check_syntax, is_checked, ContentError};
use nacelle_core::gray::BETA_NAME;
use nacelle_core::key::tag_of;
use nacelle_core::rules::{check_content, check_meta, parse_config_type};
use nacelle_core::store::RemoveOutcome;
use nacelle_core::Action;
use nacelle_core::{
    md5_hex, now_millis, Caller, ConfigKey, ConfigMeta, ConfigType, CoreError, GraySpec, OpSource,
    PublishRecord, StoreError, StoredConfig, ValidationMode, Variant,
};

use nacelle_metrics::StoreOp;

use nacelle_core::audit::AuditAction;
use nacelle_core::rules::check_message;

use crate::config::audit::Audited;
use crate::config::commit::{Commit, Effect, WriteKind};
use crate::config::request::{PublishRequest, WriteNote};
use crate::config::service::ConfigService;
use crate::config::view::Published;

/// Content up to this many bytes is parsed on the publishing task; larger content on the
/// blocking pool, so that a large document (a 1 MiB YAML or TOML file takes tens of
/// milliseconds, see docs/operations.md) never stalls a runtime worker.
const INLINE_CHECK_BYTES: usize = 16 * 1024;

impl ConfigService {
    /// The write rate limit of the caller's IP (`Limits::write_rate_per_ip`), the same for
    /// every protocol; internal callers (no IP) are never limited. Over the limit the write
    /// is [`CoreError::OverLimit`] and a warning names the address.
    fn write_allowed(&self, caller: &Caller) -> Result<(), CoreError> {
        let (Some(limiter), Some(ip)) = (&self.inner.write_rate, caller.ip) else {
            return Ok(());
        };
        if limiter.try_take(ip, Instant::now()) {
            return Ok(());
        }
        if limiter.should_log(Instant::now()) {
            tracing::warn!(%ip, rate = limiter.rate(), "write refused: over the write rate limit of its address (logged at most once a second)");
        }
        Err(CoreError::OverLimit(format!(
            "over the write rate limit of {}/s for {ip}",
            limiter.rate()
        )))
    }

    /// Refuses a direct write of `key` when a review policy covers it (`crate::changes`), unless an
    /// administrator gave an emergency reason (audited).
    pub(crate) fn review_gate(&self, caller: &Caller, key: &ConfigKey) -> Result<(), CoreError> {
        let Some(policy) = self.inner.gates.review.get().and_then(|p| p.policy_of(key)) else {
            return Ok(());
        };
        // The server's own writes (a rollout's steps, rollback and promotion) passed the
        // gate when the rollout was started.
        if caller.protocol == nacelle_core::Protocol::Internal
            && matches!(caller.identity, nacelle_core::Identity::Trusted)
        {
            return Ok(());
        }
        if let Some(reason) = caller.emergency.as_deref().filter(|r| !r.trim().is_empty()) {
            if self.auth_enabled() && self.is_admin(caller) {
                let detail = format!("{key}: {reason}");
                self.audit_outcome(
                    nacelle_core::audit::AuditAction::EmergencyWrite,
                    "config.emergency",
                    caller,
                    &detail,
                    true,
                );
                return Ok(());
            }
            return Err(CoreError::ReviewRequired(
                "an emergency write needs an administrator (ROLE_ADMIN) with authentication on"
                    .into(),
            ));
        }
        let ns = match key.namespace().as_str() {
            "" => "public",
            ns => ns,
        };
        Err(CoreError::ReviewRequired(format!(
            "config {}/{} in namespace '{ns}' is under review policy '{}' ({} approval(s)): \
             change it through a change request",
            key.group(),
            key.data_id(),
            policy.group_pattern,
            policy.required_approvals
        )))
    }

    /// Validates and publishes a config for `caller`; answers once the version is
    /// committed and visible to readers, after its listeners were notified (or their walk
    /// started, see [`crate::config::hub`]). History records the caller's IP.
    pub async fn publish(
        &self,
        caller: &Caller,
        req: PublishRequest,
    ) -> Result<Published, CoreError> {
        let key = req.key.clone();
        let action = match &req.variant {
            Variant::Formal => AuditAction::Publish,
            Variant::Gray(_) => AuditAction::GrayPublish,
        };
        let spec = match &req.variant {
            Variant::Gray(spec) => Some(spec),
            Variant::Formal => None,
        };
        let mut refusal = Audited::of_key(action, publish_log_event(action), &key)
            .detail(note_detail(&gray_fact(spec), &req.message));
        refusal.change_id = req.change_id;
        let stored = self
            .on_record(caller, refusal, self.publish_checked(caller, req))
            .await?;
        Ok(Published::of(&stored))
    }

    /// Runs the write `op` for `caller`, with every refusal on record: a write that
    /// commits is audited by the commit path; one refused (a permission, a review policy,
    /// a schema, bad input) or failed writes one audit entry, `refusal` with the reason.
    /// Not a write refused because the service is not ready, or because the address went
    /// over its write rate: those are logged (`write_allowed`), and a flood of them must not
    /// become a flood of audit rows.
    pub(crate) async fn on_record<T>(
        &self,
        caller: &Caller,
        refusal: Audited<'_>,
        op: impl std::future::Future<Output = Result<T, CoreError>>,
    ) -> Result<T, CoreError> {
        let result = op.await;
        if let Err(e) = &result {
            self.audit_refusal(caller, refusal, e);
        }
        result
    }

    /// The audit entry of a write refused with `error` (see [`Self::on_record`]).
    pub(crate) fn audit_refusal(&self, caller: &Caller, refusal: Audited<'_>, error: &CoreError) {
        if matches!(error, CoreError::NotReady(_) | CoreError::OverLimit(_)) {
            return;
        }
        self.audit(caller, refusal.md5("").refused(error.to_string()));
    }

    async fn publish_checked(
        &self,
        caller: &Caller,
        req: PublishRequest,
    ) -> Result<Arc<StoredConfig>, CoreError> {
        self.guard()?;
        self.authenticated(caller)?;
        let record = self.validate_publish(caller, req)?;
        self.authorize_key(caller, &record.key, Action::Write)?;
        self.review_gate(caller, &record.key)?;
        // Only a write that would go ahead uses the address's budget: a client retrying a
        // refused write (the Node client re-sends a 403 until its timeout) must keep
        // hearing why it was refused, not "over the write rate limit".
        self.write_allowed(caller)?;
        // The content is checked by its type on the plaintext; an encrypted dataId's is
        // then encrypted (crate::config::cipher).
        let record = self.checked_and_sealed(record).await?;
        let gray = record.gray.is_some();
        let kind = if gray {
            WriteKind::GrayPublish
        } else {
            WriteKind::Publish
        };
        let commit = self.begin(kind, std::iter::once(&record.key)).await;
        if gray && !self.inner.cache.contains_key(&record.key) {
            return Err(CoreError::NotFound(
                "config data not exist: publish the formal config before a gray (beta, \
                 tag or label) variant of it"
                    .into(),
            ));
        }
        let stored = match commit.store(self.inner.store.publish(&record)).await {
            Ok(s) => Arc::new(s),
            Err(StoreError::CasMismatch) => return Err(CoreError::CasMismatch),
            Err(e) => return Err(e.into()),
        };
        let action = if gray {
            AuditAction::GrayPublish
        } else {
            AuditAction::Publish
        };
        let facts = format!("{}md5={}", gray_fact(record.gray.as_ref()), stored.md5);
        let mut event = Audited::of_key(action, publish_log_event(action), &stored.key)
            .md5(&stored.md5)
            .detail(note_detail(&facts, &record.source.message));
        event.change_id = record.source.change_id;
        let effect = if gray {
            Effect::Grays(stored.key.clone(), Some(stored.revision))
        } else {
            Effect::Formal(stored.clone())
        };
        commit.finish(caller, vec![effect], vec![event]).await;
        Ok(stored)
    }

    /// Stops (deletes) the gray variant `name` of `key`; the callers that saw it are told
    /// and get the config they see now. `Ok(false)` when there was no such gray.
    pub async fn stop_gray(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        name: &str,
        note: &WriteNote,
    ) -> Result<bool, CoreError> {
        let refusal = gray_refusal(AuditAction::GrayStop, "gray.stop", key, name, note);
        let op = async {
            let (source, commit) = self
                .gray_write(caller, key, note, WriteKind::GrayStop)
                .await?;
            self.stop_gray_in(caller, key, name, (source, commit)).await
        };
        self.on_record(caller, refusal, op).await
    }

    /// The checks and the commit's start every write on a gray goes through: the
    /// readiness guard, write permission, the review gate, the history source, the key's
    /// lock.
    async fn gray_write(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        note: &WriteNote,
        kind: WriteKind,
    ) -> Result<(OpSource, Commit<'_>), CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Write)?;
        self.review_gate(caller, key)?;
        let source = self.source_of(caller, note)?;
        Ok((source, self.begin(kind, std::iter::once(key)).await))
    }

    /// Stops the gray `name` of `key` within its commit (see [`Self::stop_gray`]).
    async fn stop_gray_in(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        name: &str,
        (source, commit): (OpSource, Commit<'_>),
    ) -> Result<bool, CoreError> {
        let removal = self
            .inner
            .store
            .remove_gray(key, name, &source, now_millis());
        let outcome = commit.store(removal).await?;
        let RemoveOutcome::Removed { revision } = outcome else {
            // Nothing stopped; memory is made true to the database all the same.
            commit
                .finish(caller, vec![Effect::Grays(key.clone(), None)], vec![])
                .await;
            return Ok(false);
        };
        let detail = note_detail(&format!("gray={name}"), &source.message);
        let mut event = Audited::of_key(AuditAction::GrayStop, "gray.stop", key).detail(detail);
        event.change_id = source.change_id;
        let effect = Effect::Grays(key.clone(), Some(revision));
        commit.finish(caller, vec![effect], vec![event]).await;
        Ok(true)
    }

    /// Promotes the gray variant `name` of `key`: its content becomes the formal config
    /// (keeping the formal config's type, description and other metadata; the gray's app
    /// name and encryption key) and the gray is removed, in one transaction with history.
    /// Callers that saw the gray already hold its content and are not woken; every other
    /// listener is told once. [`CoreError::NotFound`] when there is no such gray.
    pub async fn promote_gray(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        name: &str,
        note: &WriteNote,
    ) -> Result<Published, CoreError> {
        let refusal = gray_refusal(AuditAction::Promote, "gray.promote", key, name, note);
        let op = async {
            let (source, commit) = self
                .gray_write(caller, key, note, WriteKind::Promote)
                .await?;
            let gray = self
                .inner
                .grays
                .get(key)
                .and_then(|set| set.get(name).map(|g| g.config.clone()))
                .ok_or_else(|| CoreError::NotFound(format!("no gray `{name}` to promote")))?;
            let formal = self.inner.cache.get(key).map(|c| c.value().clone());
            let mut meta = formal.as_ref().map(|f| f.meta.clone()).unwrap_or_default();
            meta.app_name = gray.meta.app_name.clone();
            meta.encrypted_data_key = gray.meta.encrypted_data_key.clone();
            let record = PublishRecord {
                key: key.clone(),
                content: gray.content.clone(),
                md5: gray.md5.clone(),
                config_type: formal.as_ref().map(|f| f.config_type).unwrap_or_default(),
                meta,
                source: source.clone(),
                cas_md5: None,
                now_ms: now_millis(),
                gray: None,
            };
            let stored = match commit
                .store(self.inner.store.promote_gray(&record, name))
                .await
            {
                Ok(s) => Arc::new(s),
                Err(StoreError::NotFound(_)) => {
                    commit.refresh_grays(key).await;
                    return Err(CoreError::NotFound(format!("no gray `{name}` to promote")));
                }
                Err(StoreError::CasMismatch) => {
                    commit.refresh_grays(key).await;
                    return Err(CoreError::Conflict(format!(
                        "gray `{name}` changed while being promoted; try again"
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            let detail = note_detail(&format!("gray={name} md5={}", stored.md5), &source.message);
            let mut event = Audited::of_key(AuditAction::Promote, "gray.promote", key)
                .md5(&stored.md5)
                .detail(detail);
            event.change_id = source.change_id;
            // Callers that saw the gray hold its content already: the walk skips them.
            let effects = vec![
                Effect::Formal(stored.clone()),
                Effect::Grays(key.clone(), None),
            ];
            commit.finish(caller, effects, vec![event]).await;
            Ok(Published::of(&stored))
        };
        self.on_record(caller, refusal, op).await
    }

    /// The history source of a write without content: the operator
    /// ([`Caller::operator`]), the caller's IP, the checked message.
    fn source_of(&self, caller: &Caller, note: &WriteNote) -> Result<OpSource, CoreError> {
        Ok(OpSource {
            src_user: caller.operator(&note.src_user).to_string(),
            src_ip: caller.ip_string(),
            message: check_message(&note.message)?,
            change_id: note.change_id,
        })
    }

    pub(crate) fn validate_publish(
        &self,
        caller: &Caller,
        req: PublishRequest,
    ) -> Result<PublishRecord, CoreError> {
        let gray = match req.variant {
            Variant::Formal => None,
            Variant::Gray(spec) => Some(spec),
        };
        check_content(&req.content, self.inner.limits.max_content_bytes)?;
        let src_user = caller.operator(&req.src_user).to_string();
        let meta = check_meta(req.meta, &src_user)?;
        let config_type = parse_config_type(req.config_type.as_deref())?;
        let md5 = md5_hex(req.content.as_bytes());
        let message = check_message(&req.message)?;
        Ok(PublishRecord {
            key: req.key,
            content: Bytes::from(req.content),
            md5,
            config_type,
            meta,
            source: OpSource {
                src_user,
                src_ip: caller.ip_string(),
                message,
                change_id: req.change_id,
            },
            cas_md5: req.cas_md5,
            now_ms: now_millis(),
            gray,
        })
    }

    /// Parses the content as its type under the validation mode of the key's namespace:
    /// `reject` refuses content that does not parse ([`CoreError::Invalid`] with the
    /// parser's problem and line), `warn` logs the key and the problem (never the content)
    /// and lets it through, `off` does not parse. Then the JSON Schemas that apply to the
    /// key (`crate::schemas`), under every mode.
    pub(crate) async fn check_content_type(&self, record: &PublishRecord) -> Result<(), CoreError> {
        self.check_content(&record.key, record.config_type, &record.content)
            .await
    }

    /// The write hook of every publish: the cipher rule turns the record into what is
    /// stored (`crate::config::cipher`), and the content is checked by its type on the
    /// plaintext ([`Self::check_content_type`]).
    pub(crate) async fn checked_and_sealed(
        &self,
        record: PublishRecord,
    ) -> Result<PublishRecord, CoreError> {
        let sealed = self.seal(record)?;
        let record = sealed.record;
        let plaintext = sealed.plaintext.as_ref().unwrap_or(&record.content);
        self.check_content(&record.key, record.config_type, plaintext)
            .await?;
        Ok(record)
    }

    async fn check_content(
        &self,
        key: &ConfigKey,
        config_type: ConfigType,
        content: &Bytes,
    ) -> Result<(), CoreError> {
        let mode = self
            .inner
            .limits
            .content_validation
            .mode_for(key.namespace());
        if mode != ValidationMode::Off && is_checked(config_type) {
            self.check_syntax_by_type(key, config_type, content, mode)
                .await?;
        }
        // Schemas always refuse, whatever the mode: they are an explicit opt-in.
        match self.inner.gates.content.get() {
            Some(gate) => gate.check(key, config_type, content).await,
            None => Ok(()),
        }
    }

    async fn check_syntax_by_type(
        &self,
        key: &ConfigKey,
        config_type: ConfigType,
        content: &Bytes,
        mode: ValidationMode,
    ) -> Result<(), CoreError> {
        let outcome = if content.len() <= INLINE_CHECK_BYTES {
            syntax_of(config_type, content)
        } else {
            let content = content.clone();
            tokio::task::spawn_blocking(move || syntax_of(config_type, &content))
                .await
                .unwrap_or_else(|e| {
                    Err(ContentError {
                        config_type,
                        line: None,
                        column: None,
                        message: format!("the parser failed: {e}"),
                    })
                })
        };
        let Err(problem) = outcome else {
            return Ok(());
        };
        if mode == ValidationMode::Reject {
            return Err(CoreError::Invalid(problem.to_string()));
        }
        tracing::warn!(
            namespace = key.namespace().as_str(),
            group = key.group(),
            data_id = key.data_id(),
            %problem,
            "content does not parse as its type; publishing it anyway (content_validation = warn)"
        );
        Ok(())
    }

    /// Removes the config of `key` (the variant named by `tag`; blank means the formal
    /// config); `Ok(true)` also when nothing was stored, as Nacos answers. Listeners are
    /// told the key changed.
    pub async fn remove(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        tag: Option<&str>,
        note: &WriteNote,
    ) -> Result<bool, CoreError> {
        // A tag names a gray: its removal is that gray's stop.
        let gray = tag_of(tag)
            .ok()
            .flatten()
            .and_then(|t| GraySpec::tag(t).ok())
            .map(|spec| spec.name);
        let refusal = match &gray {
            Some(name) => gray_refusal(AuditAction::GrayStop, "gray.stop", key, name, note),
            None => remove_refusal(key, note),
        };
        let op = self.remove_checked(caller, key, tag, note);
        self.on_record(caller, refusal, op).await
    }

    async fn remove_checked(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        tag: Option<&str>,
        note: &WriteNote,
    ) -> Result<bool, CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Write)?;
        self.review_gate(caller, key)?;
        self.write_allowed(caller)?;
        if let Some(t) = tag_of(tag)? {
            let name = GraySpec::tag(t)?.name;
            let commit = (
                self.source_of(caller, note)?,
                self.begin(WriteKind::GrayStop, std::iter::once(key)).await,
            );
            self.stop_gray_in(caller, key, &name, commit).await?;
            return Ok(true);
        }
        let source = self.source_of(caller, note)?;
        let commit = self.begin(WriteKind::Remove, std::iter::once(key)).await;
        let removed = self.inner.store.remove(key, &source, now_millis());
        let revision = match commit.store(removed).await? {
            RemoveOutcome::Removed { revision } => Some(revision),
            RemoveOutcome::Absent => None,
        };
        let events = match revision {
            Some(_) => {
                let mut event = Audited::of_key(AuditAction::Remove, "config.remove", key)
                    .detail(note_detail("", &source.message));
                event.change_id = source.change_id;
                vec![event]
            }
            None => vec![],
        };
        commit
            .finish(caller, vec![Effect::Removed(key.clone(), revision)], events)
            .await;
        Ok(true)
    }

    /// Changes the description and/or the tags of `key`'s formal config in place, as Nacos
    /// 3.1's `PUT /v3/admin/cs/config/metadata` does: no new version, no history row, the
    /// content, md5 and modification time unchanged, so no listener is woken. `None`
    /// keeps a field; the values follow the publish rules (lengths, at most 5 tags).
    /// [`CoreError::NotFound`] when the key has no formal config. The cache is refreshed
    /// from the database, and the other cluster members are told as of a write (their
    /// change-log followers cannot see it: it writes no history row).
    pub async fn update_metadata(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        desc: Option<&str>,
        config_tags: Option<&str>,
    ) -> Result<(), CoreError> {
        let refusal = Audited::of_key(AuditAction::Metadata, "config.metadata", key);
        let op = self.update_metadata_checked(caller, key, desc, config_tags);
        self.on_record(caller, refusal, op).await
    }

    async fn update_metadata_checked(
        &self,
        caller: &Caller,
        key: &ConfigKey,
        desc: Option<&str>,
        config_tags: Option<&str>,
    ) -> Result<(), CoreError> {
        self.guard()?;
        self.authorize_key(caller, key, Action::Write)?;
        self.review_gate(caller, key)?;
        self.write_allowed(caller)?;
        let checked = check_meta(
            ConfigMeta {
                desc: desc.unwrap_or_default().to_string(),
                config_tags: config_tags.unwrap_or_default().to_string(),
                ..ConfigMeta::default()
            },
            "",
        )?;
        let desc = desc.map(|_| checked.desc.as_str());
        let config_tags = config_tags.map(|_| checked.config_tags.as_str());
        let commit = self.begin(WriteKind::Metadata, std::iter::once(key)).await;
        let result = commit
            .store(self.inner.store.update_metadata(key, desc, config_tags))
            .await;
        let event = Audited::of_key(AuditAction::Metadata, "config.metadata", key);
        if let Err(e) = result {
            drop(commit);
            return Err(match e {
                StoreError::NotFound(_) => {
                    CoreError::NotFound(format!("config {key} does not exist"))
                }
                e => e.into(),
            });
        }
        let effect = Effect::Reread(key.clone());
        commit.finish(caller, vec![effect], vec![event]).await;
        Ok(())
    }

    /// Stops the beta (gray by IP) release of `key`; success also when it had none, as
    /// Nacos answers.
    pub async fn stop_beta(&self, caller: &Caller, key: &ConfigKey) -> Result<(), CoreError> {
        self.stop_gray(caller, key, BETA_NAME, &WriteNote::default())
            .await?;
        Ok(())
    }

    /// Removes the configs whose row ids are in `ids` (`delType=ids`); unknown ids are
    /// ignored. Returns how many were removed.
    pub async fn remove_by_ids(
        &self,
        caller: &Caller,
        ids: &[i64],
        note: &WriteNote,
    ) -> Result<usize, CoreError> {
        self.guard()?;
        // Bad or missing credentials are refused even when no id matches.
        let checked = self
            .authenticated(caller)
            .and_then(|()| self.write_allowed(caller));
        if let Err(e) = checked {
            let ids = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
            let refusal = Audited::new(AuditAction::Remove, "config.remove", format!("ids={ids}"));
            self.audit_refusal(caller, refusal, &e);
            return Err(e);
        }
        let keys: Vec<ConfigKey> = self
            .inner
            .cache
            .iter()
            .filter(|e| ids.contains(&e.id))
            .map(|e| e.key().clone())
            .collect();
        // All or nothing: a key the caller may not write refuses the whole request (and
        // that key's removal is on record as refused).
        for key in &keys {
            let checked = self
                .authorize_key(caller, key, Action::Write)
                .and_then(|()| self.review_gate(caller, key));
            if let Err(e) = checked {
                self.audit_refusal(caller, remove_refusal(key, note), &e);
                return Err(e);
            }
        }
        for key in &keys {
            self.remove(caller, key, None, note).await?;
        }
        Ok(keys.len())
    }

    /// [`ConfigService::reload`]; `force`: the database's row replaces the cached one even
    /// when its revision is older ([`ConfigService::resync`]).
    pub(crate) async fn reload_key(&self, key: &ConfigKey, force: bool) -> Result<bool, CoreError> {
        // The revision to tell listeners of, if the cache changed.
        let event = {
            // A reload is no commit (it only copies the database), but it holds the
            // key's lock as one does, so the cache sees the two in order.
            let _guard = self.write_lock(key).lock().await;
            let formal = match self
                .store_call(StoreOp::Get, self.inner.store.get(key))
                .await?
            {
                Some(cfg) => {
                    let cfg = Arc::new(cfg);
                    let changed = self
                        .inner
                        .cache
                        .get(key)
                        // A metadata change in place (`update_metadata`) keeps md5 and
                        // revision: the cached record is replaced, no listener is woken.
                        .map(|c| {
                            let newer =
                                c.revision < cfg.revision || (force && c.revision != cfg.revision);
                            c.md5 != cfg.md5 || newer || c.meta != cfg.meta
                        })
                        .unwrap_or(true);
                    let applied = if force {
                        changed && {
                            self.inner.cache.insert(key.clone(), cfg.clone());
                            true
                        }
                    } else {
                        changed && self.apply(cfg.clone())
                    };
                    applied.then_some(cfg.revision)
                }
                None => self.inner.cache.remove(key).map(|(_, old)| old.revision),
            };
            let rows = self
                .store_call(StoreOp::GrayRead, self.inner.store.grays_of(key))
                .await?;
            let grays = self.set_grays(key, rows);
            match (formal, grays) {
                (Some(revision), _) => Some(revision),
                (None, true) => Some(
                    self.inner
                        .cache
                        .get(key)
                        .map(|c| c.revision)
                        .unwrap_or_default(),
                ),
                (None, false) => None,
            }
        };
        // Told outside the write lock, as in `publish`.
        match event {
            Some(revision) => {
                self.notify(key, revision);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// [`check_syntax`] of a record's content (which came as a `String`, so it is UTF-8).
fn syntax_of(config_type: ConfigType, content: &[u8]) -> Result<(), ContentError> {
    match std::str::from_utf8(content) {
        Ok(text) => check_syntax(config_type, text),
        Err(e) => Err(ContentError {
            config_type,
            line: None,
            column: None,
            message: format!("not UTF-8: {e}"),
        }),
    }
}

/// An audit entry's detail: `facts` (md5, gray name), then the message when there is one.
fn note_detail(facts: &str, message: &str) -> String {
    match (facts.trim(), message) {
        (f, "") => f.to_string(),
        ("", m) => format!("message={m}"),
        (f, m) => format!("{f} message={m}"),
    }
}

/// The gray fact of an audit entry's detail (`gray=<name> `), empty for a formal publish.
fn gray_fact(spec: Option<&GraySpec>) -> String {
    spec.map(|s| format!("gray={} ", s.name))
        .unwrap_or_default()
}

/// The `tracing` audit line's name of a publish.
fn publish_log_event(action: AuditAction) -> &'static str {
    match action {
        AuditAction::GrayPublish => "gray.publish",
        _ => "config.publish",
    }
}

/// The refusal entry of a write on the gray `name` of `key`.
fn gray_refusal<'a>(
    action: AuditAction,
    log_event: &'a str,
    key: &ConfigKey,
    name: &str,
    note: &WriteNote,
) -> Audited<'a> {
    let mut event = Audited::of_key(action, log_event, key)
        .detail(note_detail(&format!("gray={name}"), &note.message));
    event.change_id = note.change_id;
    event
}

/// The refusal entry of a removal of `key`'s formal config.
fn remove_refusal<'a>(key: &ConfigKey, note: &WriteNote) -> Audited<'a> {
    let mut event = Audited::of_key(AuditAction::Remove, "config.remove", key)
        .detail(note_detail("", &note.message));
    event.change_id = note.change_id;
    event
}
