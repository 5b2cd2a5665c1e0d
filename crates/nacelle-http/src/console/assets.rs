//! The console's pages at `/nacos/`: the single-page app embedded in the binary by the
//! `nacelle-console` crate, each asset on a literal route of its own (`/nacos/assets/…`),
//! with `/` and `/nacos` redirecting to `/nacos/`. Nothing here shadows the APIs: they
//! live under `/nacos/v1`, `/nacos/v2`, `/nacos/console/api`, `/nacos/actuator`, `/metrics`.

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use nacelle_console::Asset;

use crate::AppState;

/// The console's address.
pub(crate) const HOME: &str = "/nacos/";

/// The page's security policy: scripts, styles and requests only from this server; no
/// framing. The index page adds a fresh nonce to `style-src` for the `<style>` element
/// the code editor (CodeMirror) writes its styles into (`serve_index`).
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                   script-src 'self'; connect-src 'self'; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'self'";

/// Where the index page holds its nonce (`<meta name="csp-nonce" content="…">`).
const NONCE_SLOT: &str = "__CSP_NONCE__";

fn serve(asset: &'static Asset) -> Response {
    respond(asset.content_type, CSP.to_string(), asset.body.into())
}

/// The index page with a fresh nonce, in its `<meta name="csp-nonce">` and in the
/// policy's `style-src`: only the page's own scripts, which read it, can add a `<style>`.
fn serve_index(index: &'static Asset) -> Response {
    let mut random = [0u8; 16];
    if getrandom::getrandom(&mut random).is_err() {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "no randomness for the page's nonce",
        )
            .into_response();
    }
    let nonce: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let body = String::from_utf8_lossy(index.body).replace(NONCE_SLOT, &nonce);
    let csp = CSP.replace(
        "style-src 'self'",
        &format!("style-src 'self' 'nonce-{nonce}'"),
    );
    respond(index.content_type, csp, body.into_bytes().into())
}

fn respond(content_type: &'static str, csp: String, body: axum::body::Body) -> Response {
    let csp = HeaderValue::from_str(&csp).unwrap_or_else(|_| HeaderValue::from_static(CSP));
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::CONTENT_SECURITY_POLICY, csp),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Routes of every asset, the console's home and the redirects to it.
pub(crate) fn routes(mut router: Router<AppState>) -> Router<AppState> {
    let index = nacelle_console::index();
    router = router
        .route("/", get(|| async { Redirect::temporary(HOME) }))
        .route("/nacos", get(|| async { Redirect::temporary(HOME) }))
        .route(HOME, get(move || async move { serve_index(index) }))
        .route(
            "/nacos/index.html",
            get(move || async move { serve_index(index) }),
        );
    for asset in nacelle_console::ASSETS {
        router = router.route(asset.path, get(move || async move { serve(asset) }));
    }
    router
}

/// The asset routes, as metric labels.
pub(crate) fn is_page(path: &str) -> bool {
    path == "/"
        || path == "/nacos"
        || path == HOME
        || path == "/nacos/index.html"
        || nacelle_console::ASSETS.iter().any(|a| a.path == path)
}
