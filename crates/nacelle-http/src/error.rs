//! Errors of the HTTP adapter and their two wire formats: v1 answers plain text
//! (`caused: …;`) with the status code; v2 answers the `{code, message, data}` envelope.
//! Each format is produced here and nowhere else.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use nacelle_core::{AuthFailure, CoreError, StoreError};
use serde_json::json;

/// An error of an HTTP request, before it is rendered in a protocol's format.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    #[error("Required request parameter '{0}' for method parameter type String is not present")]
    Missing(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("Cas publish fail, server md5 may have changed.")]
    CasMismatch,
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("{0}")]
    Unavailable(String),
    /// Over a rate limit: Nacos's TPS control answer (429, the reason as plain text).
    #[error("{0}")]
    TooManyRequests(String),
    #[error("{0}")]
    Internal(String),
    /// Authentication or authorization refused the request: 403 in Spring's error body,
    /// whatever the API version (Nacos's auth filter answers before any controller).
    #[error("{0}")]
    Auth(AuthFailure),
    /// Too many failed logins: 429 with `Retry-After`.
    #[error("too many failed logins; retry in {0} s")]
    Throttled(u64),
}

impl ApiError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::Missing(_) | ApiError::Invalid(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) | ApiError::Auth(_) => StatusCode::FORBIDDEN,
            ApiError::Throttled(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::CasMismatch | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unsupported(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// Nacos v2 error code and message for this error.
    fn v2_code(&self) -> (i32, &'static str) {
        match self {
            ApiError::Missing(_) => (10000, "parameter missing"),
            ApiError::Invalid(_) | ApiError::TooLarge(_) => (20002, "parameter validate error"),
            ApiError::Forbidden(_) | ApiError::Auth(_) => (10001, "access denied"),
            ApiError::Throttled(_) => (10001, "too many requests"),
            ApiError::NotFound(_) => (20004, "resource not found"),
            ApiError::Conflict(_) => (20005, "resource conflict"),
            ApiError::Unsupported(_) => (20006, "api not supported"),
            ApiError::CasMismatch
            | ApiError::Unavailable(_)
            | ApiError::TooManyRequests(_)
            | ApiError::Internal(_) => (30000, "server error"),
        }
    }
}

/// A namespace refusal as the v1/v2 APIs answer it: by the kind [`CoreError`] gives it.
impl From<nacelle_service::NamespaceError> for ApiError {
    fn from(e: nacelle_service::NamespaceError) -> Self {
        CoreError::from(e).into()
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::Invalid(m) => ApiError::Invalid(m),
            CoreError::NotFound(m) => ApiError::NotFound(m),
            CoreError::Conflict(m) => ApiError::Conflict(m),
            CoreError::CasMismatch => ApiError::CasMismatch,
            CoreError::TooLarge(m) => ApiError::TooLarge(m),
            CoreError::Unsupported(m) => ApiError::Unsupported(m),
            CoreError::NotReady(m) => ApiError::Unavailable(format!("server is not ready: {m}")),
            CoreError::OverLimit(m) => ApiError::TooManyRequests(m),
            CoreError::Cipher(m) => ApiError::Internal(m),
            CoreError::Auth(f) => ApiError::Auth(f),
            CoreError::ReviewRequired(m) => ApiError::Forbidden(m),
            CoreError::Throttled { retry_after_s } => ApiError::Throttled(retry_after_s),
            CoreError::Store(StoreError::CasMismatch) => ApiError::CasMismatch,
            CoreError::Store(StoreError::NotFound(m)) => ApiError::NotFound(m),
            CoreError::Store(StoreError::Conflict(m)) => ApiError::Conflict(m),
            CoreError::Store(StoreError::Rejected(m)) => ApiError::Invalid(m),
            CoreError::Store(StoreError::Unavailable(m)) => {
                tracing::warn!(error = %m, "database error");
                ApiError::Unavailable(format!("database unavailable: {m}"))
            }
        }
    }
}

/// v1 format: plain text `caused: <message>;` with the status code. Also the rejection
/// format of the shared parameter extractor.
impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(r) = self.auth_response() {
            return r;
        }
        let status = self.status();
        if let ApiError::TooManyRequests(m) = &self {
            return too_many_requests(m);
        }
        (
            status,
            [(header::CONTENT_TYPE, "text/plain;charset=UTF-8")],
            format!("caused: {self};"),
        )
            .into_response()
    }
}

/// An [`ApiError`] rendered in the v2 `{code, message, data}` envelope.
#[derive(Debug)]
pub(crate) struct V2Error(pub ApiError);

impl From<ApiError> for V2Error {
    fn from(e: ApiError) -> Self {
        V2Error(e)
    }
}

impl From<CoreError> for V2Error {
    fn from(e: CoreError) -> Self {
        V2Error(e.into())
    }
}

/// Nacos's TPS control answer, the same for every API version (its filter runs before the
/// controllers): 429, no caching, the reason and a newline as the body.
fn too_many_requests(reason: &str) -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (header::CONTENT_TYPE, "text/plain;charset=UTF-8"),
            (header::CACHE_CONTROL, "no-cache,no-store"),
            (header::PRAGMA, "no-cache"),
        ],
        format!("{reason}\n"),
    )
        .into_response()
}

impl IntoResponse for V2Error {
    fn into_response(self) -> Response {
        if let ApiError::TooManyRequests(m) = &self.0 {
            return too_many_requests(m);
        }
        if let Some(r) = self.0.auth_response() {
            return r;
        }
        let (code, message) = self.0.v2_code();
        let data = self.0.to_string();
        (
            self.0.status(),
            axum::Json(json!({"code": code, "message": message, "data": data})),
        )
            .into_response()
    }
}

impl ApiError {
    /// The answer of an authentication failure or a throttled login, the same on every
    /// API version. A 403's body names the request path, which only the router knows:
    /// [`AuthRejected`] marks the response and [`fill_auth_error`] writes the body.
    fn auth_response(&self) -> Option<Response> {
        match self {
            ApiError::Auth(f) => {
                let mut r = StatusCode::FORBIDDEN.into_response();
                r.extensions_mut().insert(AuthRejected(f.message()));
                Some(r)
            }
            ApiError::Throttled(s) => Some(
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        (header::CONTENT_TYPE, "text/plain;charset=UTF-8".to_string()),
                        (header::RETRY_AFTER, s.to_string()),
                    ],
                    format!("caused: {self};"),
                )
                    .into_response(),
            ),
            _ => None,
        }
    }
}

/// Marks a 403 of an authentication failure with Nacos's message.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuthRejected(pub &'static str);

/// Writes the body of a 403 that [`AuthRejected`] marks as Spring (so Nacos) does:
/// `{"timestamp":…,"status":403,"error":"Forbidden","message":…,"path":…}`; any other
/// response is returned as it is. Called by the outer layer ([`crate::observe::observe`])
/// on every response, with the request's path.
pub(crate) fn fill_auth_error(response: Response, path: &str) -> Response {
    let Some(AuthRejected(message)) = response.extensions().get::<AuthRejected>().copied() else {
        return response;
    };
    let timestamp = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3f+00:00")
        .to_string();
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({
            "timestamp": timestamp,
            "status": 403,
            "error": "Forbidden",
            "message": message,
            "path": path,
        })),
    )
        .into_response()
}

/// Unknown paths: 404 in the v1 plain-text style.
pub(crate) async fn not_found_route(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no such API: {}", uri.path()))
}
