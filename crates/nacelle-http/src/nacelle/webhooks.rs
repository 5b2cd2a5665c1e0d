//! `/nacos/nacelle/v1/webhooks` (docs/webhooks.md): webhooks for administrators — `GET`
//! lists (or, given `id`, answers one), `POST` creates, `PUT` changes the given fields,
//! `DELETE` removes one with its deliveries; `GET /webhook/deliveries?id=` lists a hook's
//! deliveries, newest first; `POST /webhook/redeliver?deliveryId=` sends a finished
//! delivery again.
//!
//! Fields come as query or form parameters, or as an `application/json` body with the same
//! names (`events` may then be an array). A secret is never answered: `secretFingerprint`
//! shows which one is set. The service decides everything; this file reads parameters and
//! writes the v3 envelope.

use axum::extract::State;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::webhook::Delivery;
use nacelle_service::{WebhookSpec, WebhookView};
use serde::Serialize;
use serde_json::Value;

use super::fields::Fields;
use crate::page::PageJson;
use crate::v3::{namespace_id, page, success, V3Error, V3Params};
use crate::AppState;

/// The paths of [`routes`].
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/nacelle/v1/webhooks",
    "/nacos/nacelle/v1/webhook/deliveries",
    "/nacos/nacelle/v1/webhook/redeliver",
];

/// Largest page of deliveries.
const MAX_PAGE_SIZE: u64 = 500;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/nacos/nacelle/v1/webhooks",
            get(list).post(create).put(update).delete(remove),
        )
        .route("/nacos/nacelle/v1/webhook/deliveries", get(deliveries))
        .route("/nacos/nacelle/v1/webhook/redeliver", post(redeliver))
}

/// A webhook as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookJson {
    id: i64,
    namespace_id: String,
    group: String,
    data_id: String,
    url: String,
    /// `sha256:` and 12 hex digits of the secret's SHA-256: which secret is set.
    secret_fingerprint: String,
    /// Empty: every kind.
    events: Vec<String>,
    enabled: bool,
    description: String,
    created_by: String,
    /// ms since the epoch.
    created_time: i64,
    modified_time: i64,
}

impl HookJson {
    fn of(v: WebhookView) -> Self {
        HookJson {
            id: v.id,
            namespace_id: namespace_id(&v.namespace).to_string(),
            group: v.group_pattern,
            data_id: v.data_id_pattern,
            url: v.url,
            secret_fingerprint: v.secret_fingerprint,
            events: v.events,
            enabled: v.enabled,
            description: v.description,
            created_by: v.created_by,
            created_time: v.created_ms,
            modified_time: v.updated_ms,
        }
    }
}

/// A delivery as the API shows it (its body too: what was signed and sent).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeliveryJson {
    id: i64,
    hook_id: i64,
    event_id: String,
    kind: String,
    /// `pending`, `delivered` or `failed`.
    status: &'static str,
    attempts: u32,
    /// The last attempt's HTTP status (`null`: none answered).
    last_code: Option<u16>,
    last_error: String,
    /// ms since the epoch.
    next_attempt_time: Option<i64>,
    created_time: i64,
    modified_time: i64,
    body: Value,
}

impl DeliveryJson {
    fn of(d: &Delivery) -> Self {
        let pending = d.status == nacelle_core::webhook::DeliveryStatus::Pending;
        DeliveryJson {
            id: d.id,
            hook_id: d.hook_id,
            event_id: d.event_id.clone(),
            kind: d.kind.clone(),
            status: d.status.as_str(),
            attempts: d.attempts,
            last_code: (d.last_code != 0).then_some(d.last_code),
            last_error: d.last_error.clone(),
            next_attempt_time: pending.then_some(d.next_attempt_ms),
            created_time: d.created_ms,
            modified_time: d.updated_ms,
            body: serde_json::from_str(&d.body).unwrap_or_else(|_| Value::String(d.body.clone())),
        }
    }
}

impl Fields<'_> {
    fn boolean(&self, name: &str) -> Result<Option<bool>, V3Error> {
        match self.list(name).as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(V3Error::invalid(format!(
                "parameter '{name}' must be true or false, got `{other}`"
            ))),
        }
    }

    fn id(&self, name: &str) -> Result<i64, V3Error> {
        let raw = self
            .list(name)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| V3Error::invalid(format!("parameter '{name}' is required")))?;
        raw.trim().parse::<i64>().map_err(|_| {
            V3Error::invalid(format!(
                "parameter '{name}' must be an integer, got `{raw}`"
            ))
        })
    }

    /// The spec of a create or update: every field given.
    fn spec(&self) -> Result<WebhookSpec, V3Error> {
        Ok(WebhookSpec {
            namespace: self.list("namespaceId"),
            group_pattern: self.list("group"),
            data_id_pattern: self.list("dataId"),
            url: self.list("url"),
            secret: self.list("secret"),
            events: self.list("events"),
            enabled: self.boolean("enabled")?,
            description: self.list("description"),
        })
    }
}

/// `GET [id]` → every webhook, or the one of `id`.
async fn list(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    let f = Fields::of(&p)?;
    if f.list("id").is_some_and(|v| !v.trim().is_empty()) {
        let hook = admin.get(f.id("id")?).await?;
        return Ok(success(HookJson::of(hook)));
    }
    let hooks = admin.list().await?;
    Ok(success(
        hooks.into_iter().map(HookJson::of).collect::<Vec<_>>(),
    ))
}

/// `POST namespaceId, group, dataId, url, secret, events, enabled, description` → the
/// webhook created (`url` and `secret` required; patterns default to `*`).
async fn create(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    let spec = Fields::of(&p)?.spec()?;
    Ok(success(HookJson::of(admin.create(spec).await?)))
}

/// `PUT id, [group, dataId, url, secret, events, enabled, description]` → the webhook
/// changed.
async fn update(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    let f = Fields::of(&p)?;
    let id = f.id("id")?;
    Ok(success(HookJson::of(admin.update(id, f.spec()?).await?)))
}

/// `DELETE id` → `true`.
async fn remove(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    admin.delete(Fields::of(&p)?.id("id")?).await?;
    Ok(success(true))
}

/// `GET id, [pageNo, pageSize]` → a `Page` of the hook's deliveries, newest first.
async fn deliveries(
    State(st): State<AppState>,
    V3Params(p): V3Params,
) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    let id = Fields::of(&p)?.id("id")?;
    let page = admin.deliveries(id, page(&p, Some(MAX_PAGE_SIZE))?).await?;
    Ok(success(PageJson::of(&page, DeliveryJson::of)))
}

/// `POST deliveryId` → `true`: a delivered or failed delivery is sent again.
async fn redeliver(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let admin = st.webhooks.admin(&p.caller)?;
    admin.redeliver(Fields::of(&p)?.id("deliveryId")?).await?;
    Ok(success(true))
}
