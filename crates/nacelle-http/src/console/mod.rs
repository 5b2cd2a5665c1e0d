//! The console's JSON API under `/nacos/console/api/…` and the console's static assets at
//! `/nacos/` (`assets`). Every handler reads the request through the same [`Params`]
//! extractor as the Nacos APIs — so the request's `Caller` (IP, app, and the authenticated
//! user) is built by the same rules — and calls the same `ConfigService` operations; the
//! console decides nothing the service does not. Errors are JSON `{"error", "status"}`
//! with the status the Nacos APIs would give (`ConsoleError`), plus `conflict: true` for a
//! compare-and-set failure (409).
//!
//! One file per resource: `namespaces`, `configs` (search, read, publish, delete,
//! validate, diff), `history`, `gray`, `listeners` (and the cluster view), `assets`.

pub(crate) mod assets;
pub(crate) mod configs;
pub(crate) mod gray;
pub(crate) mod history;
pub(crate) mod listeners;
pub(crate) mod namespaces;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::{ConfigKey, CoreError, PageRequest};
use serde::Serialize;
use serde_json::json;

use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// The console API's routes (literal paths, so each is its own metric label).
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/console/api/namespaces",
    "/nacos/console/api/configs",
    "/nacos/console/api/config",
    "/nacos/console/api/validate",
    "/nacos/console/api/diff",
    "/nacos/console/api/history",
    "/nacos/console/api/history/entry",
    "/nacos/console/api/history/gray",
    "/nacos/console/api/history/rollback",
    "/nacos/console/api/grays",
    "/nacos/console/api/grays/promote",
    "/nacos/console/api/grays/abandon",
    "/nacos/console/api/listeners",
    "/nacos/console/api/listeners/ip",
    "/nacos/console/api/cluster",
];

/// The console API and the console's pages, to merge into the HTTP router.
pub(crate) fn routes(router: Router<AppState>) -> Router<AppState> {
    let r = router
        .route(
            "/nacos/console/api/namespaces",
            get(namespaces::list)
                .post(namespaces::create)
                .put(namespaces::update)
                .delete(namespaces::delete),
        )
        .route(
            "/nacos/console/api/configs",
            get(configs::search).delete(configs::delete_many),
        )
        .route(
            "/nacos/console/api/config",
            get(configs::read).post(configs::publish),
        )
        .route("/nacos/console/api/validate", post(configs::validate))
        .route("/nacos/console/api/diff", post(history::diff))
        .route("/nacos/console/api/history", get(history::list))
        .route("/nacos/console/api/history/entry", get(history::entry))
        .route("/nacos/console/api/history/gray", get(history::gray_list))
        .route(
            "/nacos/console/api/history/rollback",
            post(history::rollback),
        )
        .route(
            "/nacos/console/api/grays",
            get(gray::list).post(gray::create),
        )
        .route("/nacos/console/api/grays/promote", post(gray::promote))
        .route("/nacos/console/api/grays/abandon", post(gray::abandon))
        .route("/nacos/console/api/listeners", get(listeners::of_key))
        .route("/nacos/console/api/listeners/ip", get(listeners::of_ip))
        .route("/nacos/console/api/cluster", get(listeners::cluster));
    assets::routes(r)
}

/// An error of a console request: the status the Nacos APIs give the same failure, and a
/// JSON body the pages show where the failure belongs.
#[derive(Debug)]
pub(crate) struct ConsoleError {
    status: StatusCode,
    message: String,
    /// A compare-and-set failure: someone changed the config since it was opened.
    conflict: bool,
}

impl ConsoleError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ConsoleError {
            status,
            message: message.into(),
            conflict: false,
        }
    }
}

impl From<ApiError> for ConsoleError {
    fn from(e: ApiError) -> Self {
        let conflict = matches!(e, ApiError::CasMismatch);
        let status = if conflict {
            StatusCode::CONFLICT
        } else {
            e.status()
        };
        ConsoleError {
            status,
            message: e.to_string(),
            conflict,
        }
    }
}

impl From<nacelle_service::NamespaceError> for ConsoleError {
    fn from(e: nacelle_service::NamespaceError) -> Self {
        CoreError::from(e).into()
    }
}

impl From<CoreError> for ConsoleError {
    fn from(e: CoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.message, "status": self.status.as_u16()});
        if self.conflict {
            body["conflict"] = true.into();
        }
        (self.status, axum::Json(body)).into_response()
    }
}

/// A console handler's result.
pub(crate) type Answer = Result<Response, ConsoleError>;

/// A JSON answer.
pub(crate) fn ok<T: Serialize>(value: T) -> Answer {
    Ok(axum::Json(value).into_response())
}

/// The key named by `namespace`, `group` and `dataId`.
pub(crate) fn key_of(p: &Params) -> Result<ConfigKey, ConsoleError> {
    let data_id = p.required("dataId")?;
    let group = p.required("group")?;
    Ok(ConfigKey::parse(p.get("namespace"), group, data_id)?)
}

/// `pageNo` (default 1) and `pageSize` (default `size`, at most 500).
pub(crate) fn page_of(p: &Params, size: u64) -> Result<PageRequest, ConsoleError> {
    Ok(PageRequest {
        page_no: p.page_number("pageNo", 1, PageRequest::MAX_PAGE_PARAM)?,
        page_size: p.page_number("pageSize", size, PageRequest::MAX_PAGE_SIZE)?,
    })
}

/// Who the history records as making a change through the console: the signed-in user,
/// else nobody named (the IP is recorded by the service either way).
pub(crate) fn src_user(p: &Params) -> String {
    p.caller.user().map(str::to_string).unwrap_or_default()
}

/// The console's note of a write without content: the signed-in user and the `message`.
pub(crate) fn note(p: &Params) -> nacelle_service::WriteNote {
    nacelle_service::WriteNote::with_message(&src_user(p), &p.or_empty(crate::params::MESSAGE))
}
