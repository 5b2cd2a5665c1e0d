//! Login and the administration of users, roles and permissions, in Nacos's paths and
//! bodies: 2.x under `/nacos/v1/auth/…` (raw JSON, `RestResult` for writes) and 3.0 under
//! `/nacos/v3/auth/…` (the `{code: 0, message: "success", data}` envelope). Every rule —
//! who may do what, the last administrator, password checks — is the service's.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::auth::PermissionRecord;
use nacelle_core::{CoreError, Page, PageRequest};
use nacelle_service::auth::admin::NameFilter;
use serde::Serialize;
use serde_json::json;

use super::{json, RestResult};
use crate::error::{ApiError, V2Error};
use crate::params::Params;
use crate::AppState;

/// Which API family a request came in on: its answer format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Nacos 2.x `/nacos/v1/auth`.
    V1,
    /// Nacos 3.0 `/nacos/v3/auth`.
    V3,
}

/// The routes of both families.
pub(crate) fn routes() -> Router<AppState> {
    use Flavor::{V1, V3};
    Router::new()
        .route(
            "/nacos/v1/auth/login",
            post(|s: State<AppState>, p: Params| login(s, p, V1)),
        )
        .route(
            "/nacos/v1/auth/users/login",
            post(|s: State<AppState>, p: Params| login(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/user/login",
            post(|s: State<AppState>, p: Params| login(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/users",
            get(|s: State<AppState>, p: Params| list_users(s, p, V1))
                .post(|s: State<AppState>, p: Params| create_user(s, p, V1))
                .put(|s: State<AppState>, p: Params| update_user(s, p, V1))
                .delete(|s: State<AppState>, p: Params| delete_user(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/user",
            post(|s: State<AppState>, p: Params| create_user(s, p, V3))
                .put(|s: State<AppState>, p: Params| update_user(s, p, V3))
                .delete(|s: State<AppState>, p: Params| delete_user(s, p, V3)),
        )
        .route(
            "/nacos/v3/auth/user/list",
            get(|s: State<AppState>, p: Params| list_users(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/users/search",
            get(|s: State<AppState>, p: Params| search_users(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/user/search",
            get(|s: State<AppState>, p: Params| search_users(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/users/admin",
            post(|s: State<AppState>, p: Params| create_admin(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/user/admin",
            post(|s: State<AppState>, p: Params| create_admin(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/roles",
            get(|s: State<AppState>, p: Params| list_roles(s, p, V1))
                .post(|s: State<AppState>, p: Params| add_role(s, p, V1))
                .delete(|s: State<AppState>, p: Params| delete_role(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/role",
            post(|s: State<AppState>, p: Params| add_role(s, p, V3))
                .delete(|s: State<AppState>, p: Params| delete_role(s, p, V3)),
        )
        .route(
            "/nacos/v3/auth/role/list",
            get(|s: State<AppState>, p: Params| list_roles(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/roles/search",
            get(|s: State<AppState>, p: Params| search_roles(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/role/search",
            get(|s: State<AppState>, p: Params| search_roles(s, p, V3)),
        )
        .route(
            "/nacos/v1/auth/permissions",
            get(|s: State<AppState>, p: Params| list_permissions(s, p, V1))
                .post(|s: State<AppState>, p: Params| add_permission(s, p, V1))
                .delete(|s: State<AppState>, p: Params| delete_permission(s, p, V1)),
        )
        .route(
            "/nacos/v3/auth/permission",
            post(|s: State<AppState>, p: Params| add_permission(s, p, V3))
                .delete(|s: State<AppState>, p: Params| delete_permission(s, p, V3)),
        )
        .route(
            "/nacos/v3/auth/permission/list",
            get(|s: State<AppState>, p: Params| list_permissions(s, p, V3)),
        )
}

/// The paths above, for the metrics' route label.
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/v1/auth/login",
    "/nacos/v1/auth/users/login",
    "/nacos/v3/auth/user/login",
    "/nacos/v1/auth/users",
    "/nacos/v3/auth/user",
    "/nacos/v3/auth/user/list",
    "/nacos/v1/auth/users/search",
    "/nacos/v3/auth/user/search",
    "/nacos/v1/auth/users/admin",
    "/nacos/v3/auth/user/admin",
    "/nacos/v1/auth/roles",
    "/nacos/v3/auth/role",
    "/nacos/v3/auth/role/list",
    "/nacos/v1/auth/roles/search",
    "/nacos/v3/auth/role/search",
    "/nacos/v1/auth/permissions",
    "/nacos/v3/auth/permission",
    "/nacos/v3/auth/permission/list",
];

/// An error in the family's format.
fn fail(flavor: Flavor, e: impl Into<ApiError>) -> Response {
    match flavor {
        Flavor::V1 => e.into().into_response(),
        Flavor::V3 => V2Error(e.into()).into_response(),
    }
}

/// A successful answer: v1 as given, v3 in the envelope.
fn reply<T: Serialize>(flavor: Flavor, data: T) -> Response {
    match flavor {
        Flavor::V1 => json(&data),
        Flavor::V3 => json(&json!({"code": 0, "message": "success", "data": data})),
    }
}

/// A write's answer: v1 `RestResult` with the message as data, v3 the envelope.
fn done(flavor: Flavor, message: &str) -> Response {
    match flavor {
        Flavor::V1 => json(&RestResult::ok(message)),
        Flavor::V3 => reply(flavor, message),
    }
}

fn answer(flavor: Flavor, result: Result<(), CoreError>, message: &str) -> Response {
    match result {
        Ok(()) => done(flavor, message),
        Err(e) => fail(flavor, e),
    }
}

/// `pageNo` / `pageSize` (1 and 100 when absent; the size at most 500).
fn page(p: &Params) -> Result<PageRequest, ApiError> {
    let number = |name: &str, default: u64| -> Result<u64, ApiError> {
        match p.non_blank(name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= 1 && *n <= PageRequest::MAX_PAGE_PARAM)
                .ok_or_else(|| ApiError::Invalid(format!("{name} must be a positive number"))),
        }
    };
    Ok(PageRequest {
        page_no: number("pageNo", 1)?,
        page_size: number("pageSize", 100)?.min(PageRequest::MAX_PAGE_SIZE),
    })
}

/// A name filter from parameter `name` and `search` (`accurate` by default, or `blur`).
fn filter(p: &Params, name: &str) -> NameFilter {
    NameFilter {
        text: p.or_empty(name),
        blur: p
            .get("search")
            .is_some_and(|s| s.trim().eq_ignore_ascii_case("blur")),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PageJson<T: Serialize> {
    total_count: u64,
    page_number: u64,
    pages_available: u64,
    page_items: Vec<T>,
}

fn page_json<T, U: Serialize>(page: Page<T>, f: impl Fn(T) -> U) -> PageJson<U> {
    PageJson {
        total_count: page.total_count,
        page_number: page.page_number,
        pages_available: page.pages_available,
        page_items: page.items.into_iter().map(f).collect(),
    }
}

async fn login(State(st): State<AppState>, p: Params, _flavor: Flavor) -> Response {
    let (user, password) = match (p.required("username"), p.required("password")) {
        (Ok(u), Ok(pw)) => (u.to_string(), pw.to_string()),
        (Err(e), _) | (_, Err(e)) => return e.into_response(),
    };
    match st.service.login(&user, &password, &p.caller).await {
        Ok(login) => {
            let body = json!({
                "accessToken": login.token,
                "tokenTtl": login.ttl_s,
                "globalAdmin": login.global_admin,
                "username": login.username,
            });
            let mut response = json(&body);
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", login.token)) {
                response.headers_mut().insert(header::AUTHORIZATION, v);
            }
            response
        }
        // Wrong credentials: 403 with Nacos's plain-text message.
        Err(CoreError::Auth(f)) => (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "text/plain;charset=UTF-8")],
            f.message(),
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

async fn list_users(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let page = match page(&p) {
        Ok(page) => page,
        Err(e) => return fail(flavor, e),
    };
    match st
        .service
        .auth_admin(&p.caller)
        .and_then(|a| a.users(&filter(&p, "username"), page))
    {
        // The password hash is never shown (Nacos lists it).
        Ok(page) => reply(flavor, page_json(page, |u| json!({"username": u}))),
        Err(e) => fail(flavor, e),
    }
}

async fn search_users(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    match st
        .service
        .auth_admin(&p.caller)
        .and_then(|a| a.search_users(&p.or_empty("username")))
    {
        Ok(names) => reply(flavor, names),
        Err(e) => fail(flavor, e),
    }
}

async fn create_user(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let (user, password) = match (p.required("username"), p.required("password")) {
        (Ok(u), Ok(pw)) => (u, pw),
        (Err(e), _) | (_, Err(e)) => return fail(flavor, e),
    };
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.create_user(user, password).await,
        Err(e) => Err(e),
    };
    answer(flavor, result, "create user ok!")
}

async fn update_user(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let (user, password) = match (p.required("username"), p.required("newPassword")) {
        (Ok(u), Ok(pw)) => (u, pw),
        (Err(e), _) | (_, Err(e)) => return fail(flavor, e),
    };
    let result = st.service.change_password(&p.caller, user, password).await;
    answer(flavor, result, "update user ok!")
}

async fn delete_user(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let user = match p.required("username") {
        Ok(u) => u,
        Err(e) => return fail(flavor, e),
    };
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.delete_user(user).await,
        Err(e) => Err(e),
    };
    answer(flavor, result, "delete user ok!")
}

async fn create_admin(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    match st
        .service
        .create_admin(&p.caller, p.non_blank("password"))
        .await
    {
        Ok(password) => reply(
            flavor,
            json!({"username": nacelle_core::auth::DEFAULT_ADMIN, "password": password}),
        ),
        // Nacos answers 200 with the code in the body.
        Err(CoreError::Conflict(m)) => json(&json!({"code": 409, "message": m, "data": null})),
        Err(e) => fail(flavor, e),
    }
}

async fn list_roles(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let page = match page(&p) {
        Ok(page) => page,
        Err(e) => return fail(flavor, e),
    };
    let (role, user) = (filter(&p, "role"), filter(&p, "username"));
    match st
        .service
        .auth_admin(&p.caller)
        .and_then(|a| a.roles(&role, &user, page))
    {
        Ok(page) => reply(
            flavor,
            page_json(page, |r| json!({"role": r.role, "username": r.username})),
        ),
        Err(e) => fail(flavor, e),
    }
}

async fn search_roles(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    match st
        .service
        .auth_admin(&p.caller)
        .and_then(|a| a.search_roles(&p.or_empty("role")))
    {
        Ok(names) => reply(flavor, names),
        Err(e) => fail(flavor, e),
    }
}

async fn add_role(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let (role, user) = match (p.required("role"), p.required("username")) {
        (Ok(r), Ok(u)) => (r, u),
        (Err(e), _) | (_, Err(e)) => return fail(flavor, e),
    };
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.add_role(role, user).await,
        Err(e) => Err(e),
    };
    answer(flavor, result, "add role ok!")
}

async fn delete_role(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let role = match p.required("role") {
        Ok(r) => r,
        Err(e) => return fail(flavor, e),
    };
    let user = p.non_blank("username");
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.delete_role(role, user).await,
        Err(e) => Err(e),
    };
    let message = match user {
        Some(u) => format!("delete role of user {u} ok!"),
        None => "delete role ok!".to_string(),
    };
    answer(flavor, result, &message)
}

fn permission(p: &Params) -> Result<PermissionRecord, ApiError> {
    Ok(PermissionRecord {
        role: p.required("role")?.to_string(),
        resource: p.required("resource")?.to_string(),
        action: p.required("action")?.to_string(),
    })
}

async fn list_permissions(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let page = match page(&p) {
        Ok(page) => page,
        Err(e) => return fail(flavor, e),
    };
    match st
        .service
        .auth_admin(&p.caller)
        .and_then(|a| a.permissions(&filter(&p, "role"), page))
    {
        Ok(page) => reply(
            flavor,
            page_json(
                page,
                |r| json!({"role": r.role, "resource": r.resource, "action": r.action}),
            ),
        ),
        Err(e) => fail(flavor, e),
    }
}

async fn add_permission(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let permission = match permission(&p) {
        Ok(perm) => perm,
        Err(e) => return fail(flavor, e),
    };
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.add_permission(permission).await,
        Err(e) => Err(e),
    };
    answer(flavor, result, "add permission ok!")
}

async fn delete_permission(State(st): State<AppState>, p: Params, flavor: Flavor) -> Response {
    let permission = match permission(&p) {
        Ok(perm) => perm,
        Err(e) => return fail(flavor, e),
    };
    let result = match st.service.auth_admin(&p.caller) {
        Ok(a) => a.delete_permission(permission).await,
        Err(e) => Err(e),
    };
    answer(flavor, result, "delete permission ok!")
}
