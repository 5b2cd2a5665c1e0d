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
/// framing.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
                   script-src 'self'; connect-src 'self'; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'self'";

fn serve(asset: &'static Asset) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CSP),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        asset.body,
    )
        .into_response()
}

/// Routes of every asset, the console's home and the redirects to it.
pub(crate) fn routes(mut router: Router<AppState>) -> Router<AppState> {
    let index = nacelle_console::index();
    router = router
        .route("/", get(|| async { Redirect::temporary(HOME) }))
        .route("/nacos", get(|| async { Redirect::temporary(HOME) }))
        .route(HOME, get(move || async move { serve(index) }))
        .route(
            "/nacos/index.html",
            get(move || async move { serve(index) }),
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
