//! Webhooks (docs/webhooks.md): a URL subscribed to the events of the keys of one
//! namespace whose group and dataId match two patterns — publishes, removals, gray
//! changes, imports and clones, and the events of change requests.
//!
//! **Fed from the audit trail.** The webhooks subscribe to the audit log
//! (`crate::config::audit::log::AuditSubscriber`, in `feed.rs`): every event that happened (outcome
//! `ok`) and names a subject (a key, or a change request with its keys) reaches the feed,
//! and the matching enabled hooks get one delivery each, put
//! on a bounded in-memory queue without waiting (full: dropped, logged and counted in
//! `nacelle_webhook_dropped_total`). No write path calls anything else, and no write waits
//! for a receiver or for the database here.
//!
//! **Durable.** One task per server ([`ConfigService::run_webhook_enqueuer`]) writes the
//! queue in batches (one transaction each) to `nacelle_webhook_delivery`; another
//! ([`ConfigService::run_webhook_sender`]) claims due deliveries with a lease (every node of
//! a cluster may claim; each row is won by one, see the store's `Webhooks` role), POSTs
//! them through the [`WebhookTransport`] the server wires (a timeout per attempt), and
//! records the outcome: delivered (2xx), retried with exponential backoff, or failed once
//! retries are exhausted. A delivery whose sender died is claimed again after its lease;
//! pending deliveries survive a restart.
//!
//! Managing hooks and reading their deliveries is the [`WebhookAdmin`] handle:
//! administrators only. Secrets never leave the service but as a fingerprint.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use nacelle_core::audit::AuditAction;
use nacelle_core::webhook::{
    Delivery, DeliveryClaim, DeliveryResult, DeliveryStatus, NewDelivery, Webhook, EVENT_KINDS,
};
use nacelle_core::{now_millis, Caller, CoreError, NamespaceId, Page, PageRequest};
use nacelle_metrics::StoreOp;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::batches::{drain, with_retry};
use crate::config::service::ConfigService;
use nacelle_core::pattern::{check_pattern, MAX_DATA_ID_PATTERN_CHARS, MAX_GROUP_PATTERN_CHARS};
mod feed;
use feed::namespace_label;
pub(crate) mod state;

use nacelle_core::store::Webhooks as WebhookStore;
use state::{LiveHook, WebhookState};
use std::fmt;

pub use state::QUEUE_CAPACITY;

/// Webhooks at most (all namespaces together).
pub const MAX_WEBHOOKS: usize = 100;
/// The longest URL.
pub const MAX_URL_CHARS: usize = 1024;
/// A secret's length bounds, in characters.
pub const MIN_SECRET_CHARS: usize = 8;
pub const MAX_SECRET_CHARS: usize = 256;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 256;
/// Deliveries written in one transaction at most.
pub const ENQUEUE_BATCH: usize = 200;
/// How long the enqueuer keeps retrying a batch the database refuses before dropping it.
pub const ENQUEUE_RETRY_BOUND: Duration = Duration::from_secs(60);
/// Deliveries one sender claims (and sends concurrently) at a time.
pub const CLAIM_BATCH: u32 = 32;
/// How long a claim holds its deliveries: another node takes them over after it.
pub const LEASE: Duration = Duration::from_secs(60);
/// Time allowed to one attempt (connect, send, the receiver's answer).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay; each next one doubles, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A delivery is given up once its next attempt would fall later than this after the
/// event, or after [`MAX_ATTEMPTS`] attempts.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
pub const MAX_ATTEMPTS: u32 = 300;
/// How often a sender looks for due deliveries when nothing woke it (deliveries
/// enqueued by another node, retries coming due), and re-reads the hooks.
pub const POLL: Duration = Duration::from_secs(1);
/// How long shutdown waits for the attempts under way before aborting them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// How often the hooks are re-read from the database (changes made on other nodes).
pub const HOOK_REFRESH: Duration = Duration::from_secs(2);

type HmacSha256 = Hmac<Sha256>;

/// The error of a delivery whose webhook was deleted (given up at once).
const GONE: &str = "the webhook no longer exists";

/// Sends one webhook POST; the server wires an HTTP client (`nacelle` crate). The service
/// knows no HTTP client.
pub trait WebhookTransport: Send + Sync + 'static {
    /// POSTs `post`; answers the receiver's HTTP status, or why there was none
    /// (connection refused, timeout after `post.timeout`, a bad URL).
    fn post(&self, post: WebhookPost) -> Pin<Box<dyn Future<Output = Result<u16, String>> + Send>>;
}

/// One POST of a delivery.
#[derive(Debug, Clone)]
pub struct WebhookPost {
    pub url: String,
    /// `Content-Type`, `User-Agent`, `X-Nacelle-Event`, `X-Nacelle-Delivery`,
    /// `X-Nacelle-Hook`, `X-Nacelle-Signature`.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body, exactly as signed.
    pub body: String,
    pub timeout: Duration,
}

/// The signature header's value of `body` under `secret`: `sha256=` and the lowercase hex
/// HMAC-SHA256, as GitHub signs its webhooks.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match HmacSha256::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes a key of any length.
        Err(_) => return String::new(),
    };
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    let mut hex = String::with_capacity(7 + tag.len() * 2);
    hex.push_str("sha256=");
    for b in tag {
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// What the API shows of a secret: `sha256:` and the first 12 hex digits of its SHA-256.
pub fn fingerprint(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The delay before attempt `attempts + 1`, after `attempts` failed ones: 1 s doubling,
/// at most [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let exp = attempts.saturating_sub(1).min(20);
    (FIRST_BACKOFF * 2u32.pow(exp)).min(MAX_BACKOFF)
}

/// Webhooks: a component that owns the hooks in memory, the queue of deliveries and the
/// tasks that store and send them; subscribed to the audit log, reaching the config core
/// through its handle. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    core: ConfigService,
    store: Arc<dyn WebhookStore>,
    state: Arc<WebhookState>,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhooks").finish_non_exhaustive()
    }
}

impl Webhooks {
    /// The webhooks of `core`: from now on every event of its audit log that names a
    /// subject reaches them. One per core: a second one is refused.
    pub fn new(core: &ConfigService) -> Result<Webhooks, CoreError> {
        let state = Arc::new(WebhookState::new(core.metrics().clone()));
        if !core.subscribe_audit(state.clone()) {
            return Err(CoreError::Conflict(
                "the config core has its webhooks already".into(),
            ));
        }
        Ok(Webhooks {
            core: core.clone(),
            store: core.store().clone(),
            state,
        })
    }

    /// Re-reads the webhooks from the database.
    pub async fn refresh(&self) -> Result<(), CoreError> {
        let all = self
            .core
            .store_call(StoreOp::Webhooks, self.store.load_webhooks())
            .await?;
        let live: Vec<Arc<LiveHook>> = all
            .into_iter()
            .filter_map(|h| {
                let id = h.id;
                let live = LiveHook::of(h);
                if live.is_none() {
                    tracing::warn!(
                        hook = id,
                        "ignoring a webhook whose patterns cannot be read"
                    );
                }
                live.map(Arc::new)
            })
            .collect();
        *self.state.hooks.write() = Arc::new(live);
        Ok(())
    }

    /// The enqueuer: writes queued deliveries in batches of up to [`ENQUEUE_BATCH`], each
    /// in one transaction, retrying for up to [`ENQUEUE_RETRY_BOUND`]; wakes the sender.
    /// Ends after [`ConfigService::finish_webhooks`], once the queue is empty. Run it once
    /// per service (a second call returns at once).
    pub async fn run_enqueuer(&self) {
        let Some(rx) = self.state.rx.lock().take() else {
            return;
        };
        let finish = self.state.finish.clone();
        drain(rx, ENQUEUE_BATCH, &finish, |batch| {
            self.enqueue(batch, &finish)
        })
        .await;
    }

    /// Stores `batch` and wakes the sender, retrying while the database refuses for up
    /// to [`ENQUEUE_RETRY_BOUND`] (once only after shutdown began); then drops it, logged
    /// and counted.
    async fn enqueue(&self, batch: Vec<NewDelivery>, finish: &CancellationToken) {
        let stored = with_retry(
            "storing webhook deliveries",
            ENQUEUE_RETRY_BOUND,
            finish,
            || {
                self.core
                    .store_call(StoreOp::Webhooks, self.store.enqueue_deliveries(&batch))
            },
        )
        .await;
        match stored {
            Ok(()) => self.state.wake.notify_one(),
            Err(e) => {
                self.core.metrics().webhook_dropped(batch.len() as u64);
                tracing::error!(
                    target: "nacelle::webhooks",
                    dropped = batch.len(),
                    error = %e,
                    "webhook deliveries could not be stored; dropped"
                );
            }
        }
    }

    /// Tells the enqueuer to store what is queued and end, and the sender to stop (after
    /// the server stopped serving). Deliveries being sent keep their lease and are sent
    /// again once it runs out.
    pub fn finish(&self) {
        self.state.finish.cancel();
    }

    /// The sender: claims due deliveries (at most [`CLAIM_BATCH`] at a time, leased for
    /// [`LEASE`]), sends them concurrently through `transport` and records each outcome;
    /// waits for a wake-up or [`POLL`] when none is due. Re-reads the hooks every
    /// [`HOOK_REFRESH`]. Ends after [`ConfigService::finish_webhooks`].
    pub async fn run_sender(&self, transport: Arc<dyn WebhookTransport>) {
        let finish = self.state.finish.clone();
        let mut refreshed = Instant::now();
        loop {
            if finish.is_cancelled() {
                return;
            }
            if !self.core.is_ready() {
                // The database not reached yet, or the cache loading: nothing to claim.
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = finish.cancelled() => return,
                }
                continue;
            }
            if refreshed.elapsed() >= HOOK_REFRESH {
                refreshed = Instant::now();
                if let Err(e) = self.refresh().await {
                    tracing::warn!(error = %e, "re-reading the webhooks failed");
                }
            }
            if self.state.hooks.read().is_empty() {
                // No webhook anywhere (as of the last read): no delivery to look for.
                tokio::select! {
                    _ = self.state.wake.notified() => {}
                    _ = tokio::time::sleep(POLL) => {}
                    _ = finish.cancelled() => return,
                }
                continue;
            }
            let now = now_millis();
            let claim = DeliveryClaim {
                owner: uuid::Uuid::new_v4().to_string(),
                now_ms: now,
                lease_until_ms: now + LEASE.as_millis() as i64,
                limit: CLAIM_BATCH,
            };
            let claimed = self
                .core
                .store_call(StoreOp::Webhooks, self.store.claim_deliveries(&claim))
                .await;
            match claimed {
                Ok(batch) if !batch.is_empty() => {
                    let mut sends = tokio::task::JoinSet::new();
                    for d in batch {
                        let (s, t, owner) = (self.clone(), transport.clone(), claim.owner.clone());
                        sends.spawn(async move { s.attempt(t.as_ref(), d, &owner).await });
                    }
                    let drained = async { while sends.join_next().await.is_some() {} };
                    tokio::pin!(drained);
                    tokio::select! {
                        _ = &mut drained => {}
                        _ = finish.cancelled() => {
                            // Attempts ending soon are recorded; the others are aborted
                            // (dropping the set) and sent again once their lease ran out.
                            let _late = tokio::time::timeout(SHUTDOWN_GRACE, drained).await;
                            return;
                        }
                    }
                }
                Ok(_) => {
                    tokio::select! {
                        _ = self.state.wake.notified() => {}
                        _ = tokio::time::sleep(POLL) => {}
                        _ = finish.cancelled() => return,
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claiming webhook deliveries failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(POLL) => {}
                        _ = finish.cancelled() => return,
                    }
                }
            }
        }
    }

    /// One attempt of delivery `d` (claimed by `owner`), its outcome recorded.
    async fn attempt(&self, transport: &dyn WebhookTransport, d: Delivery, owner: &str) {
        let outcome = match self.hook_of(d.hook_id).await {
            Err(e) => Err(e),
            Ok(None) => Err(GONE.to_string()),
            Ok(Some(h)) if !h.enabled => Err("the webhook is disabled".to_string()),
            Ok(Some(h)) => {
                let post = WebhookPost {
                    headers: vec![
                        ("Content-Type", "application/json".into()),
                        (
                            "User-Agent",
                            format!("Nacelle-Webhook/{}", env!("CARGO_PKG_VERSION")),
                        ),
                        ("X-Nacelle-Event", d.kind.clone()),
                        ("X-Nacelle-Delivery", d.id.to_string()),
                        ("X-Nacelle-Hook", h.id.to_string()),
                        (
                            "X-Nacelle-Signature",
                            signature(&h.secret, d.body.as_bytes()),
                        ),
                    ],
                    url: h.url,
                    body: d.body.clone(),
                    timeout: ATTEMPT_TIMEOUT,
                };
                match transport.post(post).await {
                    Ok(code) if (200..300).contains(&code) => Ok(code),
                    Ok(code) => Err(format!("HTTP {code}")),
                    Err(e) => Err(e),
                }
            }
        };
        let now = now_millis();
        let attempts = d.attempts.saturating_add(1);
        let result = match outcome {
            Ok(code) => DeliveryResult {
                status: DeliveryStatus::Delivered,
                code,
                error: String::new(),
                next_attempt_ms: now,
                now_ms: now,
            },
            Err(error) => {
                let code = error
                    .strip_prefix("HTTP ")
                    .and_then(|c| c.parse::<u16>().ok())
                    .unwrap_or(0);
                let next = now + backoff(attempts).as_millis() as i64;
                let give_up = attempts >= MAX_ATTEMPTS
                    || next > d.created_ms + MAX_AGE.as_millis() as i64
                    || error == GONE;
                DeliveryResult {
                    status: if give_up {
                        DeliveryStatus::Failed
                    } else {
                        DeliveryStatus::Pending
                    },
                    code,
                    error,
                    next_attempt_ms: if give_up { now } else { next },
                    now_ms: now,
                }
            }
        };
        let label = match result.status {
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Pending => "retry",
            DeliveryStatus::Failed => "failed",
        };
        self.core.metrics().webhook_delivery(label);
        if result.status != DeliveryStatus::Delivered {
            tracing::warn!(
                target: "nacelle::webhooks",
                hook = d.hook_id,
                delivery = d.id,
                attempts,
                error = result.error.as_str(),
                outcome = label,
                "webhook delivery attempt failed"
            );
        }
        let call = self.store.finish_delivery(d.id, owner, &result);
        match self.core.store_call(StoreOp::Webhooks, call).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                delivery = d.id,
                "a webhook delivery's lease ran out before its outcome was recorded; \
                 another sender took it over"
            ),
            Err(e) => tracing::warn!(
                delivery = d.id,
                error = %e,
                "recording a webhook delivery's outcome failed; it is sent again after its lease"
            ),
        }
    }

    /// Webhook `id` as this node knows it. One missing or disabled here is looked up
    /// again in the database first: it may have been created or enabled on another node
    /// since this node last read them.
    async fn hook_of(&self, id: i64) -> Result<Option<Webhook>, String> {
        let cached = || {
            self.state
                .hooks
                .read()
                .iter()
                .find(|h| h.hook.id == id)
                .map(|h| h.hook.clone())
        };
        if let Some(h) = cached().filter(|h| h.enabled) {
            return Ok(Some(h));
        }
        // Unknown here and unreadable: tried again later, not given up.
        self.refresh()
            .await
            .map_err(|e| format!("cannot read the webhook: {e}"))?;
        Ok(cached())
    }

    /// Managing webhooks and reading their deliveries, for an administrator: a ready
    /// service and `ROLE_ADMIN` (with authentication on).
    pub fn admin<'a>(&'a self, caller: &'a Caller) -> Result<WebhookAdmin<'a>, CoreError> {
        self.core.guard()?;
        self.core.require_admin(caller)?;
        Ok(WebhookAdmin {
            service: self,
            caller,
        })
    }
}

/// A webhook as the API shows it: everything but the secret, which is shown as a
/// fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookView {
    pub id: i64,
    pub namespace: NamespaceId,
    pub group_pattern: String,
    pub data_id_pattern: String,
    pub url: String,
    pub secret_fingerprint: String,
    /// Empty: every kind.
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: String,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl WebhookView {
    fn of(h: &Webhook) -> Self {
        WebhookView {
            id: h.id,
            namespace: h.namespace.clone(),
            group_pattern: h.group_pattern.clone(),
            data_id_pattern: h.data_id_pattern.clone(),
            url: h.url.clone(),
            secret_fingerprint: fingerprint(&h.secret),
            events: h.events.clone(),
            enabled: h.enabled,
            description: h.description.clone(),
            created_by: h.created_by.clone(),
            created_ms: h.created_ms,
            updated_ms: h.updated_ms,
        }
    }
}

/// The fields of a webhook to create or change; `None` keeps the current value (on
/// create: the default — `*` patterns, every event kind, enabled, no description).
#[derive(Debug, Clone, Default)]
pub struct WebhookSpec {
    /// The namespace (`public`/blank: the default one). Create only.
    pub namespace: Option<String>,
    pub group_pattern: Option<String>,
    pub data_id_pattern: Option<String>,
    pub url: Option<String>,
    pub secret: Option<String>,
    /// Event kinds, comma-separated (blank: every kind).
    pub events: Option<String>,
    pub enabled: Option<bool>,
    pub description: Option<String>,
}

/// What [`Webhooks::admin`] hands an administrator.
#[derive(Debug)]
pub struct WebhookAdmin<'a> {
    service: &'a Webhooks,
    caller: &'a Caller,
}

/// `url` if it is an `http://` or `https://` URL with a host and no blanks.
fn check_url(url: &str) -> Result<(), CoreError> {
    if url.chars().count() > MAX_URL_CHARS {
        return Err(CoreError::invalid(format!(
            "url is longer than {MAX_URL_CHARS} characters"
        )));
    }
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
        .ok_or_else(|| {
            CoreError::invalid(format!("url `{url}` is not an http:// or https:// URL"))
        })?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = host.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(CoreError::invalid(format!("url `{url}` has no host")));
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(CoreError::invalid(format!(
            "url `{url}` contains a blank or a control character"
        )));
    }
    Ok(())
}

fn check_secret(secret: &str) -> Result<(), CoreError> {
    let n = secret.chars().count();
    if !(MIN_SECRET_CHARS..=MAX_SECRET_CHARS).contains(&n) {
        return Err(CoreError::invalid(format!(
            "secret must have {MIN_SECRET_CHARS} to {MAX_SECRET_CHARS} characters, it has {n}"
        )));
    }
    if secret.chars().any(char::is_control) {
        return Err(CoreError::invalid("secret contains a control character"));
    }
    Ok(())
}

fn check_events(raw: &str) -> Result<Vec<String>, CoreError> {
    let events = Webhook::events_of(raw);
    if let Some(bad) = events.iter().find(|e| !EVENT_KINDS.contains(&e.as_str())) {
        return Err(CoreError::invalid(format!(
            "unknown event kind `{bad}`; one of: {}",
            EVENT_KINDS.join(", ")
        )));
    }
    let mut unique = events;
    unique.dedup();
    Ok(unique)
}

fn check_description(d: &str) -> Result<(), CoreError> {
    if d.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(CoreError::invalid(format!(
            "description is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    Ok(())
}

/// Applies the given fields of `spec` to `hook`, each checked.
fn apply(hook: &mut Webhook, spec: WebhookSpec) -> Result<(), CoreError> {
    if let Some(g) = spec.group_pattern {
        check_pattern(&g, "group", MAX_GROUP_PATTERN_CHARS)?;
        hook.group_pattern = g;
    }
    if let Some(d) = spec.data_id_pattern {
        check_pattern(&d, "dataId", MAX_DATA_ID_PATTERN_CHARS)?;
        hook.data_id_pattern = d;
    }
    if let Some(url) = spec.url {
        let url = url.trim().to_string();
        check_url(&url)?;
        hook.url = url;
    }
    if let Some(secret) = spec.secret {
        check_secret(&secret)?;
        hook.secret = secret;
    }
    if let Some(events) = spec.events {
        hook.events = check_events(&events)?;
    }
    if let Some(enabled) = spec.enabled {
        hook.enabled = enabled;
    }
    if let Some(d) = spec.description {
        check_description(&d)?;
        hook.description = d;
    }
    Ok(())
}

impl WebhookAdmin<'_> {
    /// Every webhook, by id.
    pub async fn list(&self) -> Result<Vec<WebhookView>, CoreError> {
        let s = self.service;
        let all = s
            .core
            .store_call(StoreOp::Webhooks, s.store.load_webhooks())
            .await?;
        Ok(all.iter().map(WebhookView::of).collect())
    }

    async fn find(&self, id: i64) -> Result<Webhook, CoreError> {
        let s = self.service;
        let all = s
            .core
            .store_call(StoreOp::Webhooks, s.store.load_webhooks())
            .await?;
        all.into_iter()
            .find(|h| h.id == id)
            .ok_or_else(|| CoreError::NotFound(format!("webhook {id} not found")))
    }

    /// One webhook.
    pub async fn get(&self, id: i64) -> Result<WebhookView, CoreError> {
        Ok(WebhookView::of(&self.find(id).await?))
    }

    fn audited(&self, detail: String, ok: bool) {
        self.service.core.audit_outcome(
            AuditAction::WebhookChange,
            "webhook.change",
            self.caller,
            &detail,
            ok,
        );
    }

    /// Creates a webhook: `url` and `secret` are required.
    pub async fn create(&self, spec: WebhookSpec) -> Result<WebhookView, CoreError> {
        let s = self.service;
        let namespace = NamespaceId::parse(spec.namespace.as_deref())?;
        if !namespace.is_default() && !s.core.namespace_exists(namespace.as_str()).await? {
            return Err(CoreError::NotFound(format!(
                "namespace {} not found",
                namespace.as_str()
            )));
        }
        if spec.url.as_deref().is_none_or(|u| u.trim().is_empty()) {
            return Err(CoreError::invalid("url is required"));
        }
        if spec.secret.as_deref().is_none_or(str::is_empty) {
            return Err(CoreError::invalid("secret is required"));
        }
        let existing = s
            .core
            .store_call(StoreOp::Webhooks, s.store.load_webhooks())
            .await?;
        if existing.len() >= MAX_WEBHOOKS {
            return Err(CoreError::TooLarge(format!(
                "at most {MAX_WEBHOOKS} webhooks"
            )));
        }
        let now = now_millis();
        let mut hook = Webhook {
            id: 0,
            namespace,
            group_pattern: "*".into(),
            data_id_pattern: "*".into(),
            url: String::new(),
            secret: String::new(),
            events: Vec::new(),
            enabled: true,
            description: String::new(),
            created_by: self.caller.operator("").to_string(),
            created_ms: now,
            updated_ms: now,
        };
        apply(&mut hook, spec)?;
        let result = s
            .core
            .store_call(StoreOp::Webhooks, s.store.create_webhook(&hook))
            .await;
        let detail = format!(
            "create {} {}>>{}>>{} {}",
            result.as_ref().map(i64::to_string).unwrap_or_default(),
            namespace_label(&hook.namespace),
            hook.group_pattern,
            hook.data_id_pattern,
            hook.url
        );
        self.audited(detail, result.is_ok());
        hook.id = result?;
        s.refresh().await?;
        Ok(WebhookView::of(&hook))
    }

    /// Changes the given fields of webhook `id`.
    pub async fn update(&self, id: i64, spec: WebhookSpec) -> Result<WebhookView, CoreError> {
        let s = self.service;
        if spec.namespace.is_some() {
            return Err(CoreError::invalid(
                "a webhook's namespace cannot change: create another one",
            ));
        }
        let mut hook = self.find(id).await?;
        apply(&mut hook, spec)?;
        hook.updated_ms = now_millis();
        let result = s
            .core
            .store_call(StoreOp::Webhooks, s.store.update_webhook(&hook))
            .await;
        self.audited(
            format!("update {id} {}", hook.url),
            matches!(result, Ok(true)),
        );
        if !result? {
            return Err(CoreError::NotFound(format!("webhook {id} not found")));
        }
        s.refresh().await?;
        Ok(WebhookView::of(&hook))
    }

    /// Deletes webhook `id` and its deliveries.
    pub async fn delete(&self, id: i64) -> Result<(), CoreError> {
        let s = self.service;
        let result = s
            .core
            .store_call(StoreOp::Webhooks, s.store.delete_webhook(id))
            .await;
        self.audited(format!("delete {id}"), matches!(result, Ok(true)));
        if !result? {
            return Err(CoreError::NotFound(format!("webhook {id} not found")));
        }
        s.refresh().await
    }

    /// The deliveries of webhook `id`, newest first.
    pub async fn deliveries(
        &self,
        id: i64,
        page: PageRequest,
    ) -> Result<Page<Delivery>, CoreError> {
        let s = self.service;
        self.find(id).await?;
        Ok(s.core
            .store_call(StoreOp::Webhooks, s.store.deliveries(id, page))
            .await?)
    }

    /// Sends delivery `id` again (a delivered or failed one), from its first attempt.
    pub async fn redeliver(&self, delivery_id: i64) -> Result<(), CoreError> {
        let s = self.service;
        let done = s
            .core
            .store_call(
                StoreOp::Webhooks,
                s.store.redeliver(delivery_id, now_millis()),
            )
            .await?;
        if !done {
            return Err(CoreError::Conflict(format!(
                "delivery {delivery_id} does not exist or is still pending"
            )));
        }
        s.state.wake.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_github_style_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(fingerprint("secret").starts_with("sha256:"));
        assert_eq!(fingerprint("secret").len(), 7 + 12);
    }

    #[test]
    fn backoff_doubles_from_a_second_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(9), Duration::from_secs(256));
        assert_eq!(backoff(10), Duration::from_secs(300));
        assert_eq!(backoff(400), Duration::from_secs(300));
    }

    #[test]
    fn urls_must_be_http_with_a_host() {
        for good in [
            "http://127.0.0.1:8080/hook",
            "https://example.com",
            "HTTPS://a.b/c?d=1",
        ] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://x",
            "http://",
            "https:///path",
            "http://a b",
            "localhost:80",
            "http://:80/",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_event_kinds_are_named() {
        assert_eq!(
            check_events("publish, change-approved").ok(),
            Some(vec!["publish".to_string(), "change-approved".to_string()])
        );
        let err = check_events("publish,deploy").err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("`deploy`")));
    }
}
