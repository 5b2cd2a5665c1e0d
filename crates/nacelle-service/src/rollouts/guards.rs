//! The guards that reach outside (a Prometheus query, a health URL): which addresses a
//! rollout may name, and one evaluation of them.
//!
//! The server fetches guard URLs on behalf of whoever started the rollout (anyone with
//! `w` on the key), so a rollout may name only what an administrator allowed: the
//! server's `--prometheus-url`, and the URL prefixes of `--rollout-guard-urls`. What a
//! failing guard reports is the server's own words (a status, a timeout, a series
//! count), never text from the remote side: a reason is readable by anyone who may read
//! the key. The probe (the binary's HTTP client) follows no redirect.

use nacelle_core::rollout::Guards;
use nacelle_core::CoreError;
use url::Url;

use super::state::RolloutRuntime;

/// Whether `url` is among what an administrator allowed: `allowed` holds URL prefixes
/// (`https://prom.internal:9090`, `http://shop.internal/health`); `url` matches one when
/// its scheme, host and port are the prefix's and its path starts with the prefix's path
/// at a segment boundary. No credentials in a guard URL. The error says why, in words a
/// rollout's author can act on.
pub(crate) fn check_allowed(what: &str, url: &str, allowed: &[String]) -> Result<(), CoreError> {
    let parsed = Url::parse(url.trim())
        .map_err(|e| CoreError::invalid(format!("the {what} `{url}` is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(CoreError::invalid(format!(
            "the {what} `{url}` must be http:// or https://"
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(CoreError::invalid(format!(
            "the {what} must not carry credentials"
        )));
    }
    if allowed.iter().any(|prefix| under(&parsed, prefix)) {
        return Ok(());
    }
    Err(CoreError::invalid(format!(
        "the {what} `{url}` is not among the guard addresses an administrator allowed \
         (the server's --prometheus-url and --rollout-guard-urls; docs/rollouts.md)"
    )))
}

/// Whether `url` lies under the allowed `prefix`.
fn under(url: &Url, prefix: &str) -> bool {
    let Ok(prefix) = Url::parse(prefix.trim()) else {
        return false;
    };
    if url.scheme() != prefix.scheme()
        || url.host_str() != prefix.host_str()
        || url.port_or_known_default() != prefix.port_or_known_default()
    {
        return false;
    }
    let base = prefix.path().trim_end_matches('/');
    let path = url.path();
    path == base || base.is_empty() || path.starts_with(&format!("{base}/"))
}

/// The addresses guards may name on this server: the Prometheus of `--prometheus-url`
/// (for Prometheus guards) and `--rollout-guard-urls` (for both kinds).
pub(crate) fn allowed_for(rt: &RolloutRuntime, prometheus: bool) -> Vec<String> {
    let mut allowed = rt.config.guard_urls.clone();
    if prometheus {
        allowed.extend(rt.config.prometheus_url.clone());
    }
    allowed
}

/// Checks that every URL `guards` names is allowed on this server (a rollout's start).
pub(crate) fn check_guard_urls(rt: &RolloutRuntime, guards: &Guards) -> Result<(), CoreError> {
    if let Some(url) = guards.prometheus.as_ref().and_then(|p| p.url.as_deref()) {
        check_allowed("Prometheus URL", url, &allowed_for(rt, true))?;
    }
    if let Some(url) = &guards.http {
        check_allowed("health URL", url, &allowed_for(rt, false))?;
    }
    Ok(())
}

/// A guard's failure: its kind (the metric's label) and why, in the server's words.
pub(crate) type Failing = (&'static str, String);

/// Evaluates the Prometheus and health guards once; the first failing one. A guard that
/// cannot be evaluated (no answer, a timeout, an error status, an answer that is not
/// Prometheus's) fails: guards fail closed.
pub(crate) async fn probe(rt: &RolloutRuntime, g: &Guards) -> Option<Failing> {
    let limit = rt.config.probe_timeout;
    if let Some(p) = &g.prometheus {
        let Some(url) = p.url.clone().or_else(|| rt.config.prometheus_url.clone()) else {
            return Some(("prometheus", "no Prometheus URL is configured".into()));
        };
        if let Err(e) = check_allowed("Prometheus URL", &url, &allowed_for(rt, true)) {
            return Some(("prometheus", e.to_string()));
        }
        let answer = tokio::time::timeout(limit, rt.probe.prometheus(&url, &p.query)).await;
        let unhealthy = match answer {
            Err(_) => Some(format!(
                "Prometheus query `{}` did not answer within {} ms",
                p.query,
                limit.as_millis()
            )),
            Ok(Err(e)) => Some(format!("Prometheus query `{}` failed: {e}", p.query)),
            Ok(Ok(values)) => match p.threshold {
                None if values.is_empty() => None,
                None => Some(format!(
                    "Prometheus query `{}` returned {} series",
                    p.query,
                    values.len()
                )),
                Some(t) => values
                    .iter()
                    .find(|v| **v > t)
                    .map(|v| format!("Prometheus query `{}` is {v}, above {t}", p.query)),
            },
        };
        if let Some(why) = unhealthy {
            return Some(("prometheus", why));
        }
    }
    if let Some(url) = &g.http {
        if let Err(e) = check_allowed("health URL", url, &allowed_for(rt, false)) {
            return Some(("http", e.to_string()));
        }
        let unhealthy = match tokio::time::timeout(limit, rt.probe.http(url)).await {
            Err(_) => Some(format!(
                "health URL {url} did not answer within {} ms",
                limit.as_millis()
            )),
            Ok(Err(e)) => Some(format!("health URL {url} failed: {e}")),
            Ok(Ok(status)) if (200..300).contains(&status) => None,
            Ok(Ok(status)) => Some(format!("health URL {url} answered {status}")),
        };
        if let Some(why) = unhealthy {
            return Some(("http", why));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(url: &str, prefixes: &[&str]) -> bool {
        let prefixes: Vec<String> = prefixes.iter().map(|p| p.to_string()).collect();
        check_allowed("health URL", url, &prefixes).is_ok()
    }

    #[test]
    fn a_url_is_allowed_only_under_a_registered_prefix() {
        let p = ["http://shop.internal/health", "https://prom.internal:9090"];
        assert!(allowed("http://shop.internal/health", &p));
        assert!(allowed("http://shop.internal/health/", &p));
        assert!(allowed("http://shop.internal/health/deep?x=1", &p));
        assert!(allowed("http://shop.internal:80/health", &p));
        assert!(allowed("https://prom.internal:9090/api/v1/query", &p));
        // Not a segment boundary, another path, host, port or scheme.
        assert!(!allowed("http://shop.internal/healthz", &p));
        assert!(!allowed("http://shop.internal/admin", &p));
        assert!(!allowed("http://shop.internal.evil.example/health", &p));
        assert!(!allowed("http://shop.internal:8080/health", &p));
        assert!(!allowed("https://shop.internal/health", &p));
        assert!(!allowed("http://prom.internal:9090/", &p));
        // The userinfo trick and credentials.
        assert!(!allowed("http://shop.internal@169.254.169.254/health", &p));
        assert!(!allowed("http://user:pw@shop.internal/health", &p));
        // Not http(s), not a URL, nothing registered.
        assert!(!allowed("file:///etc/passwd", &["file:///"]));
        assert!(!allowed("not a url", &p));
        assert!(!allowed("http://shop.internal/health", &[]));
        // A prefix of a whole origin allows every path on it.
        assert!(allowed(
            "http://10.0.0.5:8080/anything",
            &["http://10.0.0.5:8080"]
        ));
        assert!(allowed(
            "http://10.0.0.5:8080/anything",
            &["http://10.0.0.5:8080/"]
        ));
    }

    #[test]
    fn dot_segments_cannot_climb_out_of_a_prefix() {
        // The URL parser resolves `..` before the path is compared.
        let p = ["http://shop.internal/health"];
        assert!(!allowed("http://shop.internal/health/../admin", &p));
        assert!(!allowed("http://shop.internal/health/%2e%2e/admin", &p));
    }
}
