//! The audit trail as an administrator reads it (`GET /nacos/nacelle/v1/audit`,
//! docs/audit.md).

use nacelle_testkit::daemon::wait_for;
use nacelle_testkit::{Api, TestResult, SOON};
use serde_json::Value;

/// The audit list API.
pub const AUDIT: &str = "/nacos/nacelle/v1/audit";

/// The newest entries (one page of up to 500) matching the filters `params` (`action`,
/// `key`: a target prefix, `user`, `since`, …), read with the administrator's `token`.
pub async fn audit_entries(
    api: &Api,
    token: &str,
    params: &[(&str, &str)],
) -> TestResult<Vec<Value>> {
    let r = api
        .http
        .get(api.url(AUDIT))
        .query(&[("accessToken", token), ("pageSize", "500")])
        .query(params)
        .send()
        .await?;
    let status = r.status().as_u16();
    let body: Value = r.json().await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["code"], 0, "{body}");
    Ok(body["data"]["pageItems"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

/// The entries matching `params`, once `ready` holds of them (the appender writes in the
/// background): polled until [`SOON`], an error naming the filters and the last entries
/// otherwise.
pub async fn audit_until(
    api: &Api,
    token: &str,
    params: &[(&str, &str)],
    ready: impl Fn(&[Value]) -> bool,
) -> TestResult<Vec<Value>> {
    let what = format!("audit entries matching {params:?}");
    let ready = &ready;
    let items = wait_for(&what, SOON, || async move {
        let items = audit_entries(api, token, params)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if ready(&items) {
            Ok(Some(items))
        } else {
            // Kept as the reason the wait failed, should it.
            Err(anyhow::anyhow!("the last entries: {items:?}"))
        }
    })
    .await?;
    Ok(items)
}
