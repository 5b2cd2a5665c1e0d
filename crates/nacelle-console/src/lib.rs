//! The web console's static assets, embedded at compile time with `include_bytes!` — the
//! pages are hand-written HTML, CSS and ES modules; the code editor is CodeMirror 6,
//! `assets/editor.bundle.js`, built by esbuild from `editor-src/` and committed (no Node
//! toolchain at `cargo build`; `scripts/check-console-bundle.sh` proves the committed
//! bundle is what `editor-src/package-lock.json` builds). The HTTP adapter serves them at `/nacos/` (`nacelle-http`'s
//! `console::assets`); the console's JSON API lives there too. Browser tests are in
//! `e2e/` (driven from `crates/nacelle/tests/console_browser.rs`).
//!
//! **Invariant:** depends on no crate; an asset is a path, a content type and bytes.

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// The URL path it is served at.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

macro_rules! asset {
    ($file:literal, $ty:expr) => {
        Asset {
            path: concat!("/nacos/assets/", $file),
            content_type: $ty,
            body: include_bytes!(concat!("../assets/", $file)),
        }
    };
}

const JS_TYPE: &str = "text/javascript;charset=UTF-8";

/// The page every console URL loads (`/nacos/`).
static INDEX: Asset = Asset {
    path: "/nacos/",
    content_type: "text/html;charset=UTF-8",
    body: include_bytes!("../assets/index.html"),
};

/// Every asset besides the index page.
pub static ASSETS: &[Asset] = &[
    asset!("style.css", "text/css;charset=UTF-8"),
    asset!("app.js", JS_TYPE),
    asset!("api.js", JS_TYPE),
    asset!("ui.js", JS_TYPE),
    asset!("pages.js", JS_TYPE),
    asset!("editor.js", JS_TYPE),
    asset!("editor.bundle.js", JS_TYPE),
    asset!("auth.js", JS_TYPE),
    asset!("changes.js", JS_TYPE),
    asset!("audit.js", JS_TYPE),
    asset!("messages.js", JS_TYPE),
    asset!("i18n.js", JS_TYPE),
    asset!("zh.js", JS_TYPE),
    asset!("icon.svg", "image/svg+xml"),
];

/// The index page.
pub fn index() -> &'static Asset {
    &INDEX
}

/// Bytes of every embedded file, the index included (docs/console.md states it).
pub fn total_bytes() -> usize {
    INDEX.body.len() + ASSETS.iter().map(|a| a.body.len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_are_distinct_and_typed() {
        let mut paths: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), ASSETS.len());
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{} is empty", a.path);
            if a.path.ends_with(".js") {
                assert_eq!(a.content_type, JS_TYPE);
            }
        }
        // The shipped size stays small (docs/console.md): the pages plus the editor
        // bundle (CodeMirror with its modes and merge view, about 430 KB of it).
        assert!(
            total_bytes() < 640 * 1024,
            "console assets: {} bytes",
            total_bytes()
        );
    }
}
