//! Who and what a v3 request must pass before its handler runs, in the order of Nacos's
//! filters: the request is read, its credentials are checked, then the permission the
//! endpoint's `@Secured` names, then Nacos's param check filter. A handler takes
//! [`Admitted<G>`], whose gate `G` names the permission and the param extractor: the
//! handler states only that, and every check runs before its first line.

use std::marker::PhantomData;
use std::ops::Deref;

use axum::extract::{FromRequest, Request};
use nacelle_core::Action;

use super::V3Error;
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// What admits a request to an endpoint: Nacos's `@Secured` and
/// `@ExtractorManager.Extractor` annotations of it, as types (one per kind of endpoint).
pub(crate) trait Gate {
    /// The permission checked after the credentials.
    const SECURED: Secured;
    /// The param check run after the permission.
    const EXTRACTOR: Extractor;
    /// The client API (`ConfigOpenApiController` is not `@NacosApi`): its refusals are
    /// plain text ([`V3Error::into_client`]).
    const CLIENT_API: bool = false;
}

/// The parameters of a request that passed gate `G` ([`admit`]): an extractor, so a
/// handler taking it runs only for an admitted request; the refusal is the v3 answer.
pub(crate) struct Admitted<G> {
    params: Params,
    gate: PhantomData<fn() -> G>,
}

impl<G> Deref for Admitted<G> {
    type Target = Params;
    fn deref(&self) -> &Params {
        &self.params
    }
}

impl<G: Gate> FromRequest<AppState> for Admitted<G> {
    type Rejection = V3Error;

    async fn from_request(req: Request, st: &AppState) -> Result<Self, V3Error> {
        let p = Params::from_request(req, st).await;
        match admit(st, p, G::EXTRACTOR, G::SECURED) {
            Ok(params) => Ok(Admitted {
                params,
                gate: PhantomData,
            }),
            Err(e) if G::CLIENT_API => Err(e.into_client()),
            Err(e) => Err(e),
        }
    }
}

/// The config API's reads (`signType = CONFIG`, `ConfigDefaultHttpParamExtractor`).
pub(crate) struct ReadConfig;

impl Gate for ReadConfig {
    const SECURED: Secured = Secured::Config(Action::Read);
    const EXTRACTOR: Extractor = Extractor::ConfigDefault;
}

/// The config API's writes (and its listener query, which Nacos secures as a write).
pub(crate) struct WriteConfig;

impl Gate for WriteConfig {
    const SECURED: Secured = Secured::Config(Action::Write);
    const EXTRACTOR: Extractor = Extractor::ConfigDefault;
}

/// The config search (`/list`, `ConfigBlurSearchHttpParamExtractor`).
pub(crate) struct SearchConfigs;

impl Gate for SearchConfigs {
    const SECURED: Secured = Secured::Config(Action::Read);
    const EXTRACTOR: Extractor = Extractor::ConfigBlurSearch;
}

/// The client API's read (`/v3/client/cs/config`): a config read, refused in plain text.
pub(crate) struct ClientReadConfig;

impl Gate for ClientReadConfig {
    const SECURED: Secured = Secured::Config(Action::Read);
    const EXTRACTOR: Extractor = Extractor::ConfigDefault;
    const CLIENT_API: bool = true;
}

/// What an endpoint's `@Secured` annotation checks, in Nacos's auth filter, before its
/// parameters are validated.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Secured {
    /// `signType = CONFIG`: `<namespace>:<group>:config/<dataId>` built from the raw
    /// `namespaceId` (else `tenant`), `groupName` (else `group`) and `dataId` parameters.
    Config(Action),
    /// `resource = "…"`: a fixed resource string (the namespace API's).
    Resource(Action, &'static str),
}

/// The parameters of a v3 request, admitted in Nacos's filter order: the request is read,
/// then its credentials are checked (Nacos's auth filters, order 6: a missing or bad token
/// is a 403 before anything else; the service decides, by the caller's protocol, whether
/// an anonymous caller may go on), then the permission `secured` names (the same filter:
/// 403 before any 400 of the parameters), then the param check filter (order 8) runs with
/// `extractor`. The service operation still checks every key it touches.
fn admit(
    st: &AppState,
    p: Result<Params, ApiError>,
    extractor: Extractor,
    secured: Secured,
) -> Result<Params, V3Error> {
    let p = p?;
    st.service.access().authenticated(&p.caller)?;
    let first_non_blank = |names: &[&str]| -> Option<&str> {
        names
            .iter()
            .find_map(|n| p.get(n).filter(|v| !v.trim().is_empty()))
    };
    match secured {
        Secured::Config(action) => st.service.access().authorize_v3_scope(
            &p.caller,
            action,
            first_non_blank(&["namespaceId", "tenant"]),
            first_non_blank(&["groupName", "group"]),
            p.get("dataId"),
        )?,
        Secured::Resource(action, resource) => st
            .service
            .access()
            .authorize_resource(&p.caller, action, resource)?,
    }
    check_params(&p, extractor)?;
    Ok(p)
}

/// Which of Nacos's param extractors guards an endpoint (`@ExtractorManager.Extractor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extractor {
    /// `ConfigDefaultHttpParamExtractor`: `namespaceId` (else `tenant`, else
    /// `namespace`), `dataId`, `groupName` (else `group`), `ip`.
    ConfigDefault,
    /// `ConfigBlurSearchHttpParamExtractor` (`/list`): nothing when `search=blur` is sent,
    /// else `tenant`, `dataId`, `group` (the legacy names, as in Nacos).
    ConfigBlurSearch,
    /// `ExtractorManager.DefaultHttpExtractor`, of a controller without an extractor
    /// (`NamespaceControllerV3`): nothing is checked.
    None,
}

/// Nacos's `ParamCheckRule` defaults (`nacos.core.param.check.enabled=true`).
const MAX_NAMESPACE_ID_LEN: usize = 64;
const MAX_DATA_ID_LEN: usize = 256;
const MAX_GROUP_LEN: usize = 128;
const MAX_IP_LEN: usize = 128;

/// Nacos's `ParamCheckerFilter` (`DefaultParamChecker`), which answers before the
/// controller: a value over its length or with a character outside its pattern is a
/// plain-text 400. Blank values pass. Checked in Nacos's order: namespace, dataId, group,
/// ip. Nacelle keeps its own (wider) name rules in `ConfigKey::parse` for v1/v2/gRPC;
/// this filter is what Nacos 3 adds in front of its v3 controllers.
fn check_params(p: &Params, extractor: Extractor) -> Result<(), V3Error> {
    let first_non_blank = |names: &[&str]| -> Option<&str> {
        names
            .iter()
            .find_map(|n| p.get(n).filter(|v| !v.trim().is_empty()))
    };
    let (ns, data_id, group, ip) = match extractor {
        Extractor::ConfigDefault => (
            first_non_blank(&["namespaceId", "tenant", "namespace"]),
            p.get("dataId"),
            first_non_blank(&["groupName", "group"]),
            p.get("ip"),
        ),
        Extractor::ConfigBlurSearch => {
            if p.get("search") == Some("blur") {
                return Ok(());
            }
            (p.get("tenant"), p.get("dataId"), p.get("group"), None)
        }
        Extractor::None => return Ok(()),
    };
    let blank = |v: &Option<&str>| v.is_none_or(|v| v.trim().is_empty());
    if let Some(ns) = ns.filter(|_| !blank(&ns)) {
        if ns.chars().count() > MAX_NAMESPACE_ID_LEN {
            return Err(too_long("namespaceId/tenant", MAX_NAMESPACE_ID_LEN));
        }
        if !ns
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(illegal("namespaceId/tenant"));
        }
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.');
    if let Some(d) = data_id.filter(|_| !blank(&data_id)) {
        if d.chars().count() > MAX_DATA_ID_LEN {
            return Err(too_long("dataId", MAX_DATA_ID_LEN));
        }
        if !d.chars().all(name_char) {
            return Err(illegal("dataId"));
        }
    }
    if let Some(g) = group.filter(|_| !blank(&group)) {
        if g.chars().count() > MAX_GROUP_LEN {
            return Err(too_long("group", MAX_GROUP_LEN));
        }
        if !g.chars().all(name_char) {
            return Err(illegal("group"));
        }
    }
    if let Some(ip) = ip.filter(|_| !blank(&ip)) {
        if ip.chars().count() > MAX_IP_LEN {
            return Err(too_long("ip", MAX_IP_LEN));
        }
        // `^[^\u4E00-\u9FA5\s]*$`
        if ip
            .chars()
            .any(|c| ('\u{4E00}'..='\u{9FA5}').contains(&c) || is_java_whitespace(c))
        {
            return Err(illegal("ip"));
        }
    }
    Ok(())
}

/// Java regex `\s`: `[ \t\n\x0B\f\r]`.
fn is_java_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

fn too_long(name: &str, max: usize) -> V3Error {
    V3Error::plain_400(format!(
        "Param '{name}' is illegal, the param length should not exceed {max}.\n"
    ))
}

fn illegal(name: &str) -> V3Error {
    V3Error::plain_400(format!(
        "Param '{name}' is illegal, illegal characters should not appear in the param.\n"
    ))
}
