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
use nacelle_core::{CoreError, PageRequest};
use nacelle_service::auth::admin::NameFilter;
use serde::Serialize;
use serde_json::json;

use super::{json, RestResult};
use crate::error::{ApiError, V2Error};
use crate::page::PageJson;
use crate::params::Params;
use crate::AppState;

/// An API family: its paths and its answer format. Every handler is written once, generic
/// over the family, and registered under both.
trait Family: Send + Sync + 'static {
    /// Where each endpoint lives in this family.
    const PATHS: Paths;
    /// An error in the family's format.
    type Error: From<ApiError> + From<CoreError> + IntoResponse + Send;
    /// A successful answer.
    fn reply<T: Serialize>(data: T) -> Response;
    /// A write's answer.
    fn done(message: &str) -> Response;
}

/// Nacos 2.x, `/nacos/v1/auth`: raw JSON, `RestResult` for writes, errors as the v1 API
/// answers them.
struct V1;

/// Nacos 3.0, `/nacos/v3/auth`: the `{code: 0, message: "success", data}` envelope, errors
/// as the v2 API answers them.
struct V3;

impl Family for V1 {
    const PATHS: Paths = Paths {
        login: &["/nacos/v1/auth/login", "/nacos/v1/auth/users/login"],
        user: "/nacos/v1/auth/users",
        user_list: "/nacos/v1/auth/users",
        user_search: "/nacos/v1/auth/users/search",
        user_admin: "/nacos/v1/auth/users/admin",
        role: "/nacos/v1/auth/roles",
        role_list: "/nacos/v1/auth/roles",
        role_search: "/nacos/v1/auth/roles/search",
        permission: "/nacos/v1/auth/permissions",
        permission_list: "/nacos/v1/auth/permissions",
    };
    type Error = ApiError;
    fn reply<T: Serialize>(data: T) -> Response {
        json(&data)
    }
    fn done(message: &str) -> Response {
        json(&RestResult::ok(message))
    }
}

impl Family for V3 {
    const PATHS: Paths = Paths {
        login: &["/nacos/v3/auth/user/login"],
        user: "/nacos/v3/auth/user",
        user_list: "/nacos/v3/auth/user/list",
        user_search: "/nacos/v3/auth/user/search",
        user_admin: "/nacos/v3/auth/user/admin",
        role: "/nacos/v3/auth/role",
        role_list: "/nacos/v3/auth/role/list",
        role_search: "/nacos/v3/auth/role/search",
        permission: "/nacos/v3/auth/permission",
        permission_list: "/nacos/v3/auth/permission/list",
    };
    type Error = V2Error;
    fn reply<T: Serialize>(data: T) -> Response {
        json(&json!({"code": 0, "message": "success", "data": data}))
    }
    fn done(message: &str) -> Response {
        Self::reply(message)
    }
}

/// One family's path of each endpoint. Nacos 3 renamed them (`users` → `user`) and gave
/// each list a path of its own; 2.x lists with a `GET` of the collection.
struct Paths {
    login: &'static [&'static str],
    /// Create (`POST`), change the password (`PUT`), delete (`DELETE`).
    user: &'static str,
    user_list: &'static str,
    user_search: &'static str,
    user_admin: &'static str,
    /// Grant (`POST`), revoke (`DELETE`).
    role: &'static str,
    role_list: &'static str,
    role_search: &'static str,
    /// Add (`POST`), remove (`DELETE`).
    permission: &'static str,
    permission_list: &'static str,
}

impl Paths {
    /// Every path, for the metrics' route label.
    fn all(&self) -> impl Iterator<Item = &'static str> {
        let paths = [
            self.user,
            self.user_list,
            self.user_search,
            self.user_admin,
            self.role,
            self.role_list,
            self.role_search,
            self.permission,
            self.permission_list,
        ];
        self.login.iter().copied().chain(paths)
    }
}

/// The routes of both families.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().merge(family::<V1>()).merge(family::<V3>())
}

/// The routes of family `F`: every endpoint, at its path in `F`.
fn family<F: Family>() -> Router<AppState> {
    let paths = F::PATHS;
    let login_routes = paths
        .login
        .iter()
        .fold(Router::new(), |r, path| r.route(path, post(login)));
    login_routes
        .route(
            paths.user,
            post(create_user::<F>)
                .put(update_user::<F>)
                .delete(delete_user::<F>),
        )
        .route(paths.user_list, get(list_users::<F>))
        .route(paths.user_search, get(search_users::<F>))
        .route(paths.user_admin, post(create_admin::<F>))
        .route(paths.role, post(add_role::<F>).delete(delete_role::<F>))
        .route(paths.role_list, get(list_roles::<F>))
        .route(paths.role_search, get(search_roles::<F>))
        .route(
            paths.permission,
            post(add_permission::<F>).delete(delete_permission::<F>),
        )
        .route(paths.permission_list, get(list_permissions::<F>))
}

/// `path` when it is one of the routes above (its metric label).
pub(crate) fn route(path: &str) -> Option<&'static str> {
    V1::PATHS.all().chain(V3::PATHS.all()).find(|r| *r == path)
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

async fn login(State(st): State<AppState>, p: Params) -> Response {
    let (user, password) = match (p.required("username"), p.required("password")) {
        (Ok(u), Ok(pw)) => (u.to_string(), pw.to_string()),
        (Err(e), _) | (_, Err(e)) => return e.into_response(),
    };
    match st.service.access().login(&user, &password, &p.caller).await {
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

/// What every handler of a family answers: its format's success or its format's error.
type Answer<F> = Result<Response, <F as Family>::Error>;

async fn list_users<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let page = page(&p)?;
    let users = st
        .service
        .access()
        .admin(&p.caller)?
        .users(&filter(&p, "username"), page)?;
    // The password hash is never shown (Nacos lists it).
    Ok(F::reply(PageJson::of(&users, |u| json!({"username": u}))))
}

async fn search_users<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let names = st
        .service
        .access()
        .admin(&p.caller)?
        .search_users(&p.or_empty("username"))?;
    Ok(F::reply(names))
}

async fn create_user<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let (user, password) = (p.required("username")?, p.required("password")?);
    let admin = st.service.access().admin(&p.caller)?;
    admin.create_user(user, password).await?;
    Ok(F::done("create user ok!"))
}

async fn update_user<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let (user, password) = (p.required("username")?, p.required("newPassword")?);
    st.service
        .access()
        .change_password(&p.caller, user, password)
        .await?;
    Ok(F::done("update user ok!"))
}

async fn delete_user<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let user = p.required("username")?;
    st.service
        .access()
        .admin(&p.caller)?
        .delete_user(user)
        .await?;
    Ok(F::done("delete user ok!"))
}

async fn create_admin<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    match st
        .service
        .access()
        .create_admin(&p.caller, p.non_blank("password"))
        .await
    {
        Ok(password) => Ok(F::reply(
            json!({"username": nacelle_core::auth::DEFAULT_ADMIN, "password": password}),
        )),
        // Nacos answers 200 with the code in the body.
        Err(CoreError::Conflict(m)) => Ok(json(&json!({"code": 409, "message": m, "data": null}))),
        Err(e) => Err(e.into()),
    }
}

async fn list_roles<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let page = page(&p)?;
    let (role, user) = (filter(&p, "role"), filter(&p, "username"));
    let roles = st
        .service
        .access()
        .admin(&p.caller)?
        .roles(&role, &user, page)?;
    Ok(F::reply(PageJson::of(
        &roles,
        |r| json!({"role": r.role, "username": r.username}),
    )))
}

async fn search_roles<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let names = st
        .service
        .access()
        .admin(&p.caller)?
        .search_roles(&p.or_empty("role"))?;
    Ok(F::reply(names))
}

async fn add_role<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let (role, user) = (p.required("role")?, p.required("username")?);
    st.service
        .access()
        .admin(&p.caller)?
        .add_role(role, user)
        .await?;
    Ok(F::done("add role ok!"))
}

async fn delete_role<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let role = p.required("role")?;
    let user = p.non_blank("username");
    st.service
        .access()
        .admin(&p.caller)?
        .delete_role(role, user)
        .await?;
    Ok(F::done(&match user {
        Some(u) => format!("delete role of user {u} ok!"),
        None => "delete role ok!".to_string(),
    }))
}

fn permission(p: &Params) -> Result<PermissionRecord, ApiError> {
    Ok(PermissionRecord {
        role: p.required("role")?.to_string(),
        resource: p.required("resource")?.to_string(),
        action: p.required("action")?.to_string(),
    })
}

async fn list_permissions<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let page = page(&p)?;
    let permissions = st
        .service
        .access()
        .admin(&p.caller)?
        .permissions(&filter(&p, "role"), page)?;
    Ok(F::reply(PageJson::of(
        &permissions,
        |r| json!({"role": r.role, "resource": r.resource, "action": r.action}),
    )))
}

async fn add_permission<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let permission = permission(&p)?;
    let admin = st.service.access().admin(&p.caller)?;
    admin.add_permission(permission).await?;
    Ok(F::done("add permission ok!"))
}

async fn delete_permission<F: Family>(State(st): State<AppState>, p: Params) -> Answer<F> {
    let permission = permission(&p)?;
    let admin = st.service.access().admin(&p.caller)?;
    admin.delete_permission(permission).await?;
    Ok(F::done("delete permission ok!"))
}
