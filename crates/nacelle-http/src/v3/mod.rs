//! Nacos 3's HTTP API under `/nacos/v3` (the client API, `/v3/client/cs/…`, and the admin
//! API, `/v3/admin/…`): the router, the `Result` envelope `{code, message, data}`, the
//! error mapping (one place) and the parameter helpers every v3 handler shares; what a
//! request must pass before its handler runs (credentials, permission, Nacos's parameter
//! check filter) is in `admission`. The login routes (`/nacos/v3/auth/…`) live in `v1::auth`.
//!
//! Wire facts: `/work/shared/docs/nacos3-api.md`, read from alibaba/nacos 3.0.3
//! (`NacosApiExceptionHandler`, `ParamCheckerFilter`, `DefaultParamChecker`,
//! `ConfigFormV3`, `PageForm`, `ConfigControllerV3`, `ConfigOpenApiController`).

mod admission;
pub(crate) mod client;
pub(crate) mod config;
pub(crate) mod history;
pub(crate) mod listener;
pub(crate) mod namespace;

use axum::extract::{FromRequest, Request};
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post, put};
use axum::Router;
use nacelle_core::key::DEFAULT_NAMESPACE_NAME;
use nacelle_core::{ConfigKey, CoreError, NamespaceId, PageRequest};
use serde::Serialize;
use serde_json::json;

use crate::error::ApiError;
use crate::params::Params;
use crate::v1::json;
use crate::AppState;

/// The paths of [`routes`], as metric labels (`observe`); keep in step with the router.
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/v3/client/cs/config",
    "/nacos/v3/admin/cs/config",
    "/nacos/v3/admin/cs/config/batch",
    "/nacos/v3/admin/cs/config/list",
    "/nacos/v3/admin/cs/config/metadata",
    "/nacos/v3/admin/cs/config/beta",
    "/nacos/v3/admin/cs/config/listener",
    "/nacos/v3/admin/cs/config/export",
    "/nacos/v3/admin/cs/config/import",
    "/nacos/v3/admin/cs/config/clone",
    "/nacos/v3/admin/cs/history",
    "/nacos/v3/admin/cs/history/list",
    "/nacos/v3/admin/cs/history/previous",
    "/nacos/v3/admin/cs/history/configs",
    "/nacos/v3/admin/cs/listener",
    "/nacos/v3/admin/core/namespace",
    "/nacos/v3/admin/core/namespace/list",
    "/nacos/v3/admin/core/namespace/check",
];

/// Every v3 route (the login routes are in `v1::auth`). Add a route by appending a line
/// (and its path to [`ROUTES`]).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/nacos/v3/client/cs/config", get(client::get_config))
        .route(
            "/nacos/v3/admin/cs/config",
            get(config::get_config)
                .post(config::publish_config)
                .delete(config::delete_config),
        )
        .route(
            "/nacos/v3/admin/cs/config/batch",
            delete(config::delete_batch),
        )
        .route("/nacos/v3/admin/cs/config/list", get(config::list))
        .route(
            "/nacos/v3/admin/cs/config/metadata",
            put(config::update_metadata),
        )
        .route(
            "/nacos/v3/admin/cs/config/beta",
            get(config::get_beta).delete(config::stop_beta),
        )
        .route("/nacos/v3/admin/cs/config/listener", get(config::listeners))
        .route("/nacos/v3/admin/cs/config/export", get(config::export))
        .route("/nacos/v3/admin/cs/config/import", post(config::import))
        .route("/nacos/v3/admin/cs/config/clone", post(config::clone))
        .route("/nacos/v3/admin/cs/history", get(history::entry))
        .route("/nacos/v3/admin/cs/history/list", get(history::list))
        .route(
            "/nacos/v3/admin/cs/history/previous",
            get(history::previous),
        )
        .route("/nacos/v3/admin/cs/history/configs", get(history::configs))
        .route("/nacos/v3/admin/cs/listener", get(listener::by_ip))
        .route(
            "/nacos/v3/admin/core/namespace",
            get(namespace::get)
                .post(namespace::create)
                .put(namespace::update)
                .delete(namespace::delete),
        )
        .route("/nacos/v3/admin/core/namespace/list", get(namespace::list))
        .route(
            "/nacos/v3/admin/core/namespace/check",
            get(namespace::check),
        )
        // Anything else under /nacos/v3: Spring's 404 (static routes above win).
        .route("/nacos/v3/{*rest}", any(not_found))
        // A known path with another method: Spring's 405.
        .method_not_allowed_fallback(method_not_allowed)
}

/// One of Nacos's `ErrorCode`s (`api/model/v2/ErrorCode.java`): the code and its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ErrorCode {
    pub code: i32,
    pub message: &'static str,
}

impl ErrorCode {
    const fn new(code: i32, message: &'static str) -> Self {
        ErrorCode { code, message }
    }
    pub const PARAMETER_MISSING: ErrorCode = ErrorCode::new(10000, "parameter missing");
    pub const ACCESS_DENIED: ErrorCode = ErrorCode::new(10001, "access denied");
    pub const DATA_ACCESS_ERROR: ErrorCode = ErrorCode::new(10002, "data access error");
    pub const PARAMETER_VALIDATE_ERROR: ErrorCode =
        ErrorCode::new(20002, "parameter validate error");
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode::new(20004, "resource not found");
    pub const RESOURCE_CONFLICT: ErrorCode = ErrorCode::new(20005, "resource conflict");
    pub const ILLEGAL_NAMESPACE: ErrorCode = ErrorCode::new(22000, "illegal namespace");
    pub const NAMESPACE_NOT_EXIST: ErrorCode = ErrorCode::new(22001, "namespace not exist");
    pub const NAMESPACE_ALREADY_EXIST: ErrorCode = ErrorCode::new(22002, "namespace already exist");
    pub const SERVER_ERROR: ErrorCode = ErrorCode::new(30000, "server error");
    pub const METADATA_ILLEGAL: ErrorCode = ErrorCode::new(100002, "Imported metadata is invalid");
    #[allow(dead_code)] // Nacos's list, for completeness: no v3 answer of Nacelle uses it
    pub const DATA_VALIDATION_FAILED: ErrorCode = ErrorCode::new(100003, "No valid data was read");
    pub const PARSING_DATA_FAILED: ErrorCode = ErrorCode::new(100004, "Failed to parse data");
    pub const DATA_EMPTY: ErrorCode = ErrorCode::new(100005, "Imported file data is empty");
    pub const NO_SELECTED_CONFIG: ErrorCode = ErrorCode::new(100006, "No configuration selected");
}

/// Nacos's `Result<T>`: exactly `code`, `message`, `data` (a `null` data is written).
#[derive(Debug, Serialize)]
pub(crate) struct Envelope<T: Serialize> {
    pub code: i32,
    pub message: &'static str,
    pub data: T,
}

/// `Result.success(data)`: HTTP 200, `{"code":0,"message":"success","data":…}`.
pub(crate) fn success<T: Serialize>(data: T) -> Response {
    json(&Envelope {
        code: 0,
        message: "success",
        data,
    })
}

/// `Result.failure(code, data)` returned as a value: HTTP **200** with the error code in
/// the body (the client API's not-found, import and clone refusals).
pub(crate) fn failure<T: Serialize>(code: ErrorCode, data: T) -> Response {
    json(&Envelope {
        code: code.code,
        message: code.message,
        data,
    })
}

/// An error of a v3 request, in one of the forms Nacos 3 answers it.
#[derive(Debug)]
pub(crate) enum V3Error {
    /// `NacosApiException(status, code, detail)` as `NacosApiExceptionHandler` writes it:
    /// HTTP `status`, body `{"code":code,"message":code's message,"data":detail}`.
    Api {
        status: StatusCode,
        code: ErrorCode,
        detail: String,
    },
    /// A plain-text answer (Nacos's param check filter, and the client API's validation
    /// through `GlobalExceptionHandler`): the status and the body as sent.
    Plain { status: StatusCode, body: String },
    /// Answered the same on every API version: an authentication failure (Spring's 403
    /// JSON), a throttled login, the TPS limit's 429.
    Common(ApiError),
}

impl V3Error {
    /// A `NacosApiException`.
    pub(crate) fn api(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        V3Error::Api {
            status,
            code,
            detail: detail.into(),
        }
    }

    /// `Required parameter '<name>' type String is not present` (400/10000), as the forms'
    /// `validate()` words it.
    pub(crate) fn missing(name: &str) -> Self {
        V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARAMETER_MISSING,
            format!("Required parameter '{name}' type String is not present"),
        )
    }

    /// A bad parameter value (400/20002).
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARAMETER_VALIDATE_ERROR,
            detail,
        )
    }

    /// A plain-text 400 with Nacos's body for it (the filter ends it with a newline, as
    /// `println` does).
    pub(crate) fn plain_400(body: impl Into<String>) -> Self {
        V3Error::Plain {
            status: StatusCode::BAD_REQUEST,
            body: body.into(),
        }
    }

    /// The client API's form of this error (`ConfigOpenApiController` is not `@NacosApi`:
    /// its validation errors are plain text `caused: <detail>;`, status kept).
    pub(crate) fn into_client(self) -> Self {
        match self {
            V3Error::Api { status, detail, .. } => V3Error::Plain {
                status,
                body: format!("caused: {detail};"),
            },
            other => other,
        }
    }
}

impl From<ApiError> for V3Error {
    fn from(e: ApiError) -> Self {
        let (status, code) = match &e {
            ApiError::Missing(name) => return V3Error::missing(name),
            ApiError::Auth(_) | ApiError::Throttled(_) | ApiError::TooManyRequests(_) => {
                return V3Error::Common(e)
            }
            ApiError::Invalid(_) => (StatusCode::BAD_REQUEST, ErrorCode::PARAMETER_VALIDATE_ERROR),
            ApiError::TooLarge(_) => (e.status(), ErrorCode::PARAMETER_VALIDATE_ERROR),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::ACCESS_DENIED),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, ErrorCode::RESOURCE_NOT_FOUND),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, ErrorCode::RESOURCE_CONFLICT),
            // Nacos's publish with a stale casMd5: NacosApiException(500, RESOURCE_CONFLICT).
            ApiError::CasMismatch => (
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::RESOURCE_CONFLICT,
            ),
            ApiError::Unavailable(_) => (e.status(), ErrorCode::DATA_ACCESS_ERROR),
            ApiError::Unsupported(_) | ApiError::Internal(_) => {
                (e.status(), ErrorCode::SERVER_ERROR)
            }
        };
        V3Error::Api {
            status,
            code,
            detail: e.to_string(),
        }
    }
}

impl From<CoreError> for V3Error {
    fn from(e: CoreError) -> Self {
        ApiError::from(e).into()
    }
}

impl IntoResponse for V3Error {
    fn into_response(self) -> Response {
        match self {
            V3Error::Api {
                status,
                code,
                detail,
            } => {
                let mut r =
                    json(&json!({"code": code.code, "message": code.message, "data": detail}));
                *r.status_mut() = status;
                r
            }
            V3Error::Plain { status, body } => (
                status,
                [
                    (header::CONTENT_TYPE, "text/plain;charset=UTF-8"),
                    (header::CACHE_CONTROL, "no-cache,no-store"),
                    (header::PRAGMA, "no-cache"),
                ],
                body,
            )
                .into_response(),
            V3Error::Common(e) => e.into_response(),
        }
    }
}

/// An unknown path under `/nacos/v3`: Spring's 404 error JSON (Nacos has no "api not found"
/// `Result`; `server.error.include-message=ALWAYS` writes the message of Spring 6's
/// `NoResourceFoundException`: `No static resource <path under the context path>.`).
pub(crate) async fn not_found(uri: Uri) -> Response {
    let path = uri.path();
    let under_context = path.strip_prefix("/nacos/").unwrap_or(path);
    spring_error(
        StatusCode::NOT_FOUND,
        format!("No static resource {under_context}."),
        path,
    )
}

/// Spring's error JSON of `status` for `path`.
fn spring_error(status: StatusCode, message: String, path: &str) -> Response {
    let timestamp = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3f+00:00")
        .to_string();
    let mut r = json(&json!({
        "timestamp": timestamp,
        "status": status.as_u16(),
        "error": status.canonical_reason().unwrap_or_default(),
        "message": message,
        "path": path,
    }));
    *r.status_mut() = status;
    r
}

/// A v3 path asked with a method it does not have (e.g. `PUT /v3/admin/cs/config`):
/// Spring's 405 JSON, `Request method 'PUT' is not supported`.
async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    spring_error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Request method '{method}' is not supported"),
        uri.path(),
    )
}

/// The parameters of a request to an API answered in the v3 format (Nacelle's own API,
/// `crate::nacelle`): a request that could not be read is refused in that format. The
/// service checks the caller of each operation; the v3 admin API runs Nacos's filters
/// first ([`admission`]).
pub(crate) struct V3Params(pub Params);

impl FromRequest<AppState> for V3Params {
    type Rejection = V3Error;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, V3Error> {
        Ok(V3Params(Params::from_request(req, st).await?))
    }
}

/// A parameter a controller requires with `@RequestParam` (present, possibly empty);
/// absent: Spring's `MissingServletRequestParameterException`, 400/10000 `Required request
/// parameter '<name>' for method parameter type <java_type> is not present`.
pub(crate) fn request_param<'p>(
    p: &'p Params,
    name: &str,
    java_type: &str,
) -> Result<&'p str, V3Error> {
    p.get(name).ok_or_else(|| {
        V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARAMETER_MISSING,
            format!(
                "Required request parameter '{name}' for method parameter type {java_type} is not present"
            ),
        )
    })
}

/// The key a `ConfigFormV3` names, validated as `ConfigFormV3.validate()` does:
/// `groupName` first (the legacy `group` is not read), then `dataId`, blank = missing;
/// then Nacelle's name rules (`ConfigKey::parse`, blank namespace = `public`).
pub(crate) fn config_key(p: &Params) -> Result<ConfigKey, V3Error> {
    let group = p
        .non_blank("groupName")
        .ok_or_else(|| V3Error::missing("groupName"))?;
    let data_id = p
        .non_blank("dataId")
        .ok_or_else(|| V3Error::missing("dataId"))?;
    Ok(ConfigKey::parse(p.get("namespaceId"), group, data_id)?)
}

/// `PageForm` (`pageNo`, `pageSize`; defaults 1 and 100), checked as `PageForm.validate()`:
/// below 1 is 400/20002 `Required parameter 'pageNo' should be positive integer, current
/// is <n>`; not an `int` is 400/20002 too. `max_size` clamps the size (history: 500).
pub(crate) fn page(p: &Params, max_size: Option<u64>) -> Result<PageRequest, V3Error> {
    let read = |name: &str, default: i64| -> Result<u64, V3Error> {
        let n = match p.non_blank(name) {
            None => default,
            Some(v) => v
                .trim()
                .parse::<i32>()
                .map(i64::from)
                .map_err(|_| V3Error::invalid(format!("For input string: \"{v}\"")))?,
        };
        if n < 1 {
            return Err(V3Error::invalid(format!(
                "Required parameter '{name}' should be positive integer, current is {n}"
            )));
        }
        Ok(n as u64)
    };
    let page_no = read("pageNo", 1)?;
    let page_size = read("pageSize", 100)?;
    Ok(PageRequest {
        page_no,
        page_size: max_size.map_or(page_size, |m| page_size.min(m)),
    })
}

/// A namespace id as Nacos 3 writes it in its models: the default namespace is `public`.
pub(crate) fn namespace_id(ns: &NamespaceId) -> &str {
    if ns.is_default() {
        DEFAULT_NAMESPACE_NAME
    } else {
        ns.as_str()
    }
}
