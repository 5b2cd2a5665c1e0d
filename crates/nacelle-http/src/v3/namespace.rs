//! `/nacos/v3/admin/core/namespace` (Nacos 3's `NamespaceControllerV3`): one namespace,
//! create, update, delete, `/list` (the default namespace first) and `/check` (how many
//! namespaces have the id: 0 or 1). The same service operations as the v1 and console
//! namespace APIs; the service's typed refusals ([`NamespaceError`]) become Nacos 3's
//! codes here, in [`namespace_error`].
//!
//! Wire facts (alibaba/nacos 3.0.3): `NamespaceControllerV3`, `NamespaceForm.validate()`
//! (`namespaceId` and `namespaceName` must be sent: 400/10000), `NamespaceOperationService`
//! (duplicate or the default id: 400/22002; unknown: 404/22001), `api/model/response/
//! Namespace` and `NamespaceTypeEnum` (`GLOBAL` 0, `CUSTOM` 1). The controller has no param
//! check extractor.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use nacelle_core::Action;
use nacelle_service::{NamespaceError, NamespaceInfo};

use super::admission::{Admitted, Extractor, Gate, Secured};
use super::{namespace_id, request_param, success, ErrorCode, V3Error};
use crate::params::Params;
use crate::v1::namespaces::{NamespaceJson, DEFAULT_QUOTA};
use crate::AppState;

/// The resources `NamespaceControllerV3` secures its endpoints with (`@Secured(resource =
/// Commons.NACOS_ADMIN_CORE_CONTEXT_V3 + …)`): `/list` names `/namespace`, every other
/// endpoint `namespaces` without a slash, exactly as Nacos 3 spells them. Only an
/// administrator, or a permission whose pattern matches the string (`*`), passes.
const NAMESPACE_LIST: &str = "/v3/admin/core/namespace";
const NAMESPACE: &str = "/v3/admin/corenamespaces";

/// One namespace, `/check` (no param check extractor: `NamespaceControllerV3` has none).
pub(crate) struct ReadNamespace;

impl Gate for ReadNamespace {
    const SECURED: Secured = Secured::Resource(Action::Read, NAMESPACE);
    const EXTRACTOR: Extractor = Extractor::None;
}

/// `/list`, secured under its own resource string.
pub(crate) struct ListNamespaces;

impl Gate for ListNamespaces {
    const SECURED: Secured = Secured::Resource(Action::Read, NAMESPACE_LIST);
    const EXTRACTOR: Extractor = Extractor::None;
}

/// Create, update, delete.
pub(crate) struct WriteNamespace;

impl Gate for WriteNamespace {
    const SECURED: Secured = Secured::Resource(Action::Write, NAMESPACE);
    const EXTRACTOR: Extractor = Extractor::None;
}

/// How Nacos 3 describes the built-in default namespace
/// (`NamespaceOperationService.DEFAULT_NAMESPACE_DESCRIPTION`; Nacos 2's v1 API, and so
/// Nacelle's, says "Public Namespace").
const DEFAULT_NAMESPACE_DESC: &str = "Default Namespace";
/// `NamespaceTypeEnum.GLOBAL` (the default namespace) and `CUSTOM` in Nacos 3.
const TYPE_GLOBAL: u8 = 0;
const TYPE_CUSTOM: u8 = 1;

/// `Namespace` as Nacos 3 writes it: the default namespace's id is `public`, its
/// description Nacos 3's, its type `GLOBAL`.
fn namespace_json(n: &NamespaceInfo) -> NamespaceJson<'_> {
    let id = &n.namespace.id;
    NamespaceJson {
        namespace: namespace_id(id),
        namespace_show_name: &n.namespace.name,
        namespace_desc: if id.is_default() {
            DEFAULT_NAMESPACE_DESC
        } else {
            &n.namespace.desc
        },
        quota: DEFAULT_QUOTA,
        config_count: n.config_count,
        r#type: if id.is_default() {
            TYPE_GLOBAL
        } else {
            TYPE_CUSTOM
        },
    }
}

/// The service's namespace refusals as Nacos 3 answers them: a bad id or name is
/// 400/22000 (`ILLEGAL_NAMESPACE`), a duplicate or the default id 400/22002
/// (`NAMESPACE_ALREADY_EXIST`), an unknown namespace 404/22001 (`NAMESPACE_NOT_EXIST`).
fn namespace_error(e: NamespaceError) -> V3Error {
    match e {
        NamespaceError::IllegalId(m) | NamespaceError::IllegalName(m) => {
            V3Error::api(StatusCode::BAD_REQUEST, ErrorCode::ILLEGAL_NAMESPACE, m)
        }
        NamespaceError::Reserved(m) | NamespaceError::Exists(m) => V3Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::NAMESPACE_ALREADY_EXIST,
            m,
        ),
        NamespaceError::Missing(m) => {
            V3Error::api(StatusCode::NOT_FOUND, ErrorCode::NAMESPACE_NOT_EXIST, m)
        }
        NamespaceError::Core(e) => e.into(),
    }
}

/// A namespace write's answer: `data: true`, or its refusal ([`namespace_error`]).
fn written<T>(result: Result<T, NamespaceError>) -> Result<Response, V3Error> {
    result.map_err(namespace_error)?;
    Ok(success(true))
}

/// `NamespaceForm` of a create or an update, as `validate()` checks it: `namespaceId`,
/// then `namespaceName`, must be sent (either may be empty); `namespaceDesc` is optional.
struct NamespaceForm<'p> {
    id: &'p str,
    name: &'p str,
    desc: &'p str,
}

impl<'p> NamespaceForm<'p> {
    fn of(p: &'p Params) -> Result<Self, V3Error> {
        let sent = |name: &str| {
            p.get(name).ok_or_else(|| {
                V3Error::api(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::PARAMETER_MISSING,
                    format!("required parameter '{name}' is missing"),
                )
            })
        };
        Ok(NamespaceForm {
            id: sent("namespaceId")?,
            name: sent("namespaceName")?,
            desc: p.get("namespaceDesc").unwrap_or(""),
        })
    }
}

/// `GET ?namespaceId=` → `Namespace`; unknown: 404/22001. An id no namespace can have is
/// unknown too (Nacos looks it up without checking it).
pub(crate) async fn get(
    State(st): State<AppState>,
    p: Admitted<ReadNamespace>,
) -> Result<Response, V3Error> {
    let id = request_param(&p, "namespaceId", "String")?;
    match match st.service.namespaces(&p.caller) {
        Ok(n) => n.get(id).await,
        Err(e) => Err(e.into()),
    } {
        Ok(n) => Ok(success(namespace_json(&n))),
        Err(NamespaceError::IllegalId(m)) => Err(namespace_error(NamespaceError::Missing(m))),
        Err(e) => Err(namespace_error(e)),
    }
}

/// `GET /list` → `List<Namespace>`, the default namespace first.
pub(crate) async fn list(
    State(st): State<AppState>,
    p: Admitted<ListNamespaces>,
) -> Result<Response, V3Error> {
    let all = st.service.namespaces(&p.caller)?.list().await?;
    Ok(success(all.iter().map(namespace_json).collect::<Vec<_>>()))
}

/// `POST namespaceId (sent, may be blank: a UUID), namespaceName[, namespaceDesc]` →
/// `data: true`.
pub(crate) async fn create(
    State(st): State<AppState>,
    p: Admitted<WriteNamespace>,
) -> Result<Response, V3Error> {
    let f = NamespaceForm::of(&p)?;
    let namespaces = st.service.namespaces(&p.caller)?;
    written(namespaces.create(Some(f.id), f.name, f.desc).await)
}

/// `PUT namespaceId, namespaceName[, namespaceDesc]` → `data: true`.
pub(crate) async fn update(
    State(st): State<AppState>,
    p: Admitted<WriteNamespace>,
) -> Result<Response, V3Error> {
    let f = NamespaceForm::of(&p)?;
    let namespaces = st.service.namespaces(&p.caller)?;
    written(namespaces.update(f.id, f.name, f.desc).await)
}

/// `DELETE ?namespaceId=` → `data: true`, whether or not the namespace existed (as Nacos
/// answers); the default namespace is refused (400/22002).
pub(crate) async fn delete(
    State(st): State<AppState>,
    p: Admitted<WriteNamespace>,
) -> Result<Response, V3Error> {
    let id = request_param(&p, "namespaceId", "String")?;
    // Whether the namespace existed is not answered.
    written(st.service.namespaces(&p.caller)?.delete(id).await)
}

/// `GET /check?namespaceId=` → `data`: the number of namespaces with this id (0 or 1).
pub(crate) async fn check(
    State(st): State<AppState>,
    p: Admitted<ReadNamespace>,
) -> Result<Response, V3Error> {
    let id = request_param(&p, "namespaceId", "String")?;
    let exists = st.service.namespaces(&p.caller)?.exists(id).await?;
    Ok(success(u8::from(exists)))
}
