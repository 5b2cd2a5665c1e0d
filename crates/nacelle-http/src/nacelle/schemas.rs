//! `/nacos/nacelle/v1/schemas` — the JSON Schemas of config keys
//! (docs/schema-validation.md): `GET` lists (optionally of one `namespaceId`) or, given
//! `group` and `dataId`, answers one; `PUT`/`POST` sets one; `DELETE` removes one;
//! `POST /check` checks a content against the schemas of its key without publishing.
//!
//! Parameters come as query or form fields, or as an `application/json` body with the
//! same names (where `schema` may be the JSON Schema itself rather than its text). The
//! service decides everything (permissions, patterns, compilation); this file only reads
//! parameters and writes the v3 envelope.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use nacelle_core::{ConfigKey, CoreError, NamespaceId, SchemaRecord};
use nacelle_service::schemas::SchemaSpec;
use nacelle_service::{SchemaCheck, SchemaProblem};
use serde::Serialize;
use serde_json::Value;

use super::fields::Fields;
use crate::params::Params;
use crate::v3::{namespace_id, success, ErrorCode, V3Error, V3Params};
use crate::AppState;

/// The routes of this file.
pub(crate) const ROUTES: &[&str] = &[
    "/nacos/nacelle/v1/schemas",
    "/nacos/nacelle/v1/schemas/check",
];

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/nacos/nacelle/v1/schemas",
            get(get_schemas)
                .put(set_schema)
                .post(set_schema)
                .delete(remove_schema),
        )
        .route("/nacos/nacelle/v1/schemas/check", post(check))
}

/// A schema as the API shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SchemaJson {
    namespace_id: String,
    group: String,
    data_id: String,
    /// The JSON Schema document (stored as text; shown as JSON).
    schema: Value,
    description: String,
    src_user: String,
    /// ms since the epoch.
    modified_time: i64,
}

impl SchemaJson {
    fn of(r: SchemaRecord) -> Self {
        SchemaJson {
            namespace_id: namespace_id(&r.namespace).to_string(),
            schema: serde_json::from_str(&r.schema).unwrap_or(Value::String(r.schema)),
            group: r.group,
            data_id: r.data_id,
            description: r.description,
            src_user: r.src_user,
            modified_time: r.modified_ms,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProblemJson {
    schema: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    document: Option<usize>,
    /// JSON pointer of the failing value (`""`: the whole document); absent when the
    /// content could not be checked at all.
    path: Option<String>,
    rule: String,
    schema_path: Option<String>,
    message: String,
    /// The whole refusal, as a publish words it.
    text: String,
}

impl ProblemJson {
    fn of(p: SchemaProblem) -> Self {
        ProblemJson {
            text: p.to_string(),
            schema: p.schema,
            document: p.document,
            path: p.path,
            rule: p.rule,
            schema_path: p.schema_path,
            message: p.message,
        }
    }
}

#[derive(Serialize)]
struct CheckJson {
    valid: bool,
    schemas: Vec<String>,
    problems: Vec<ProblemJson>,
}

impl Fields<'_> {
    fn required(&self, name: &str) -> Result<String, V3Error> {
        self.get(name)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| V3Error::missing(name))
    }

    /// `namespaceId` (else `tenant`): blank and `public` are the default namespace.
    fn namespace(&self) -> Result<NamespaceId, V3Error> {
        let raw = self.get("namespaceId").or_else(|| self.get("tenant"));
        Ok(NamespaceId::parse(raw.as_deref())?)
    }
}

/// The parameters, with good credentials (the service checks every permission).
fn admitted(st: &AppState, p: Params) -> Result<Params, V3Error> {
    st.service.access().authenticated(&p.caller)?;
    Ok(p)
}

/// `GET [namespaceId]` → the schemas the caller may read; `GET namespaceId, group, dataId`
/// → that one (404/20004 when there is none).
async fn get_schemas(
    State(st): State<AppState>,
    V3Params(p): V3Params,
) -> Result<Response, V3Error> {
    let p = admitted(&st, p)?;
    let f = Fields::of(&p)?;
    let (group, data_id) = (f.get("group"), f.get("dataId"));
    if group.is_none() && data_id.is_none() {
        let filter = match f.get("namespaceId").or_else(|| f.get("tenant")) {
            Some(_) => Some(f.namespace()?),
            None => None,
        };
        let all = st.schemas.list(&p.caller, filter.as_ref())?;
        return Ok(success(
            all.into_iter().map(SchemaJson::of).collect::<Vec<_>>(),
        ));
    }
    let (group, data_id) = (f.required("group")?, f.required("dataId")?);
    let one = st
        .schemas
        .get(&p.caller, &f.namespace()?, &group, &data_id)?;
    Ok(success(SchemaJson::of(one)))
}

/// `PUT|POST namespaceId, group, dataId, schema[, description]` → the schema as stored.
async fn set_schema(
    State(st): State<AppState>,
    V3Params(p): V3Params,
) -> Result<Response, V3Error> {
    let p = admitted(&st, p)?;
    let f = Fields::of(&p)?;
    let spec = SchemaSpec {
        namespace: f.namespace()?,
        group: f.required("group")?,
        data_id: f.required("dataId")?,
        schema: f.required("schema")?,
        description: f.get("description").unwrap_or_default(),
    };
    let src_user = f.get("srcUser").unwrap_or_default();
    let set = st.schemas.set(&p.caller, spec, &src_user).await?;
    Ok(success(SchemaJson::of(set)))
}

/// `DELETE namespaceId, group, dataId` → `data: true`; 404/20004 when there was none.
async fn remove_schema(
    State(st): State<AppState>,
    V3Params(p): V3Params,
) -> Result<Response, V3Error> {
    let p = admitted(&st, p)?;
    let f = Fields::of(&p)?;
    let (ns, group, data_id) = (f.namespace()?, f.required("group")?, f.required("dataId")?);
    if st.schemas.remove(&p.caller, &ns, &group, &data_id).await? {
        Ok(success(true))
    } else {
        Err(V3Error::api(
            StatusCode::NOT_FOUND,
            ErrorCode::RESOURCE_NOT_FOUND,
            format!("no schema {}>>{group}>>{data_id}", namespace_id(&ns)),
        ))
    }
}

/// `POST namespaceId, group, dataId, content[, type]` → `{valid, schemas, problems}`: the
/// schemas that apply to the key and what fails (nothing is published).
async fn check(State(st): State<AppState>, V3Params(p): V3Params) -> Result<Response, V3Error> {
    let p = admitted(&st, p)?;
    let f = Fields::of(&p)?;
    let ns = f.namespace()?;
    let (group, data_id) = (f.required("group")?, f.required("dataId")?);
    let key = ConfigKey::parse(Some(ns.as_str()), &group, &data_id)?;
    let content = f
        .get("content")
        .ok_or_else(|| V3Error::missing("content"))?;
    let config_type = f.get("type");
    let SchemaCheck { schemas, problems } = st
        .schemas
        .check(&p.caller, &key, config_type.as_deref(), &content)
        .await
        .map_err(|e: CoreError| V3Error::from(e))?;
    Ok(success(CheckJson {
        valid: problems.is_empty(),
        schemas,
        problems: problems.into_iter().map(ProblemJson::of).collect(),
    }))
}
