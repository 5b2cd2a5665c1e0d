//! `/nacos/console/api/configs` (search, delete selected), `/config` (read the formal
//! config, publish with compare-and-set), `/validate` (the core's syntax check by type,
//! with the error's line and column) and `/diff` (a unified diff computed on the server).
//! Export of a selection is the Nacos export (`/nacos/v1/cs/configs?export=true&ids=…`).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use nacelle_core::content::check_syntax;
use nacelle_core::{ConfigKey, ConfigMeta, ConfigType, NamespaceId, Variant};
use nacelle_service::{ConfigService, ConfigView, PublishRequest, SearchMode, SearchQuery};
use serde::Serialize;
use serde_json::json;

use super::{key_of, ok, page_of, src_user, Answer, ConsoleError};
use crate::error::ApiError;
use crate::params::Params;
use crate::AppState;

/// A config in a list: no content.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfigRow<'a> {
    id: i64,
    namespace: &'a str,
    data_id: &'a str,
    group: &'a str,
    r#type: &'static str,
    app_name: &'a str,
    md5: &'a str,
    modified: i64,
}

impl<'a> ConfigRow<'a> {
    fn of(c: &'a ConfigView) -> Self {
        ConfigRow {
            id: c.id(),
            namespace: c.key().tenant(),
            data_id: c.key().data_id(),
            group: c.key().group(),
            r#type: c.config_type().as_str(),
            app_name: c.app_name(),
            md5: c.md5(),
            modified: c.modified_ms(),
        }
    }
}

/// `GET namespace, dataId, group, appName (each may hold `*` wildcards; case is ignored),
/// pageNo, pageSize` → `{total, pageNo, pages, items}`.
pub(crate) async fn search(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let q = SearchQuery {
        // People type names in any case: the console's search ignores it.
        mode: SearchMode::BlurIgnoreCase,
        namespace: NamespaceId::parse(p.get("namespace"))?,
        data_id: p.or_empty("dataId").trim().to_string(),
        group: p.or_empty("group").trim().to_string(),
        app_name: p.or_empty("appName").trim().to_string(),
        config_tags: String::new(),
        types: String::new(),
        content: String::new(),
        page: page_of(&p, 20)?,
    };
    let page = st.service.search(&p.caller, &q)?;
    let items: Vec<ConfigRow<'_>> = page.items.iter().map(ConfigRow::of).collect();
    ok(json!({
        "total": page.total_count,
        "pageNo": page.page_number,
        "pages": page.pages_available,
        "items": items,
    }))
}

/// The formal config of `key` (never a gray variant, whoever asks), if any.
pub(crate) fn formal(
    service: &ConfigService,
    p: &Params,
    key: &ConfigKey,
) -> Result<Option<ConfigView>, ConsoleError> {
    Ok(service.formal(&p.caller, key)?)
}

/// `GET namespace, dataId, group` → the formal config with its content and md5 (the
/// `casMd5` of a later publish); 404 when absent.
pub(crate) async fn read(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let Some(c) = formal(&st.service, &p, &key)? else {
        return Err(ConsoleError::new(
            StatusCode::NOT_FOUND,
            format!("config {key} does not exist"),
        ));
    };
    ok(json!({
        "id": c.id(),
        "namespace": c.key().tenant(),
        "dataId": c.key().data_id(),
        "group": c.key().group(),
        "type": c.config_type().as_str(),
        "content": c.content_text(),
        "md5": c.md5(),
        "appName": c.app_name(),
        "desc": c.desc(),
        "tags": c.config_tags(),
        "created": c.created_ms(),
        "modified": c.modified_ms(),
        "srcUser": c.source().src_user,
        "srcIp": c.source().src_ip,
    }))
}

/// A formal publish of `content` for `key` as the console sends it.
pub(crate) fn publish_request(
    p: &Params,
    key: ConfigKey,
    content: String,
    config_type: Option<String>,
) -> PublishRequest {
    PublishRequest {
        key,
        content,
        config_type,
        meta: ConfigMeta {
            app_name: p.or_empty("appName"),
            desc: p.or_empty("desc"),
            config_tags: p.or_empty("tags"),
            ..ConfigMeta::default()
        },
        src_user: src_user(p),
        // Present, even empty, is a compare-and-set (`""`: the config must not exist).
        cas_md5: p.get("casMd5").map(|m| m.trim().to_string()),
        variant: Variant::Formal,
        message: p.or_empty(crate::params::MESSAGE),
        change_id: None,
    }
}

/// `POST namespace, dataId, group, content, type, appName, desc, tags, casMd5` →
/// `{md5, modified}`. `casMd5` is the md5 of the version the editor opened, `""` for a new
/// config (which then must still not exist); a mismatch is 409 with `conflict: true` and
/// nothing is written.
pub(crate) async fn publish(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let key = key_of(&p)?;
    let content = p.required("content")?.to_string();
    let req = publish_request(&p, key, content, p.get("type").map(str::to_string));
    let stored = st.service.publish(&p.caller, req).await?;
    ok(json!({"md5": stored.md5, "modified": stored.modified_ms}))
}

/// `DELETE ids=1,2,…` → `{removed}`.
pub(crate) async fn delete_many(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    let ids = p
        .required("ids")?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| ApiError::Invalid(format!("invalid id : {s}")))
        })
        .collect::<Result<Vec<i64>, ApiError>>()?;
    if ids.is_empty() {
        return Err(ApiError::Invalid("no config selected".into()).into());
    }
    let removed = st
        .service
        .remove_by_ids(&p.caller, &ids, &super::note(&p))
        .await?;
    ok(json!({ "removed": removed }))
}

/// `POST type, content[, namespace]` → `{ok: true, type, mode}` or `{ok: false, type,
/// mode, message, line, column}`: the core's syntax check of that type (the one publishes
/// use), and `mode`, what a publish of invalid content into that namespace does
/// (`reject`, `warn` or `off`: the server's `content_validation` for it), so the page
/// blocks, asks for confirmation, or says nothing, as the server will.
pub(crate) async fn validate(State(st): State<AppState>, p: Result<Params, ApiError>) -> Answer {
    let p = p?;
    // Only for signed-in users when authentication is on, like every console request.
    st.service.access().authenticated(&p.caller)?;
    let namespace = NamespaceId::parse(p.get("namespace"))?;
    let mode = st
        .service
        .limits()
        .content_validation
        .mode_for(&namespace)
        .as_str();
    let ty = ConfigType::parse_lenient(p.get("type").unwrap_or(""));
    let content = p.required("content")?;
    match check_syntax(ty, content) {
        Ok(()) => ok(json!({"ok": true, "type": ty.as_str(), "mode": mode})),
        Err(e) => ok(json!({
            "ok": false,
            "type": ty.as_str(),
            "mode": mode,
            "message": e.message,
            "line": e.line,
            "column": e.column,
        })),
    }
}

/// Lines of context around each change in a diff.
const DIFF_CONTEXT: usize = 3;

/// How long a diff may search for the smallest edit script before it settles for a
/// larger (still correct) one: two unrelated 10 MB configs must not hold a thread.
const DIFF_TIMEOUT: Duration = Duration::from_secs(1);

/// Texts up to this size (both together) are diffed on the request's task; larger ones on
/// the blocking pool.
const INLINE_DIFF_BYTES: usize = 64 * 1024;

/// A unified diff of `old` → `new` with headers naming them.
pub(crate) fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(DIFF_CONTEXT)
        .header(old_name, new_name)
        .to_string()
}

/// [`unified`], on the blocking pool when the texts are large.
pub(crate) async fn unified_off_thread(
    old: String,
    new: String,
    old_name: String,
    new_name: String,
) -> Result<String, ConsoleError> {
    if old.len() + new.len() <= INLINE_DIFF_BYTES {
        return Ok(unified(&old, &new, &old_name, &new_name));
    }
    tokio::task::spawn_blocking(move || unified(&old, &new, &old_name, &new_name))
        .await
        .map_err(|e| ConsoleError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("diff: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_names_and_marks_lines() {
        let d = unified("a: 1\nb: 2\n", "a: 1\nb: 3\n", "current", "edited");
        assert!(d.starts_with("--- current\n+++ edited\n"), "{d}");
        assert!(d.contains("-b: 2\n+b: 3\n"), "{d}");
        assert_eq!(unified("same\n", "same\n", "a", "b"), "");
    }
}
