//! An axum service whose settings reload live: `GET /` answers with the greeting of the
//! current `app.yaml`; publish a new version and the next request shows it, a broken one
//! is refused and reported at `GET /health`.
//!
//! ```sh
//! nacelle serve &                      # a server on 127.0.0.1:8848
//! nacelle put app.yaml - <<< 'greeting: hello'
//! cargo run -p nacelle-client --example axum_reload
//! curl localhost:3000/                 # hello
//! nacelle put app.yaml - <<< 'greeting: bonjour'
//! curl localhost:3000/                 # bonjour
//! ```
//! `NACELLE_SERVER` (default `127.0.0.1:8848`) and `LISTEN` (default `127.0.0.1:3000`)
//! override the addresses.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use nacelle_client::{Binding, Client, Format};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Settings {
    greeting: String,
    #[serde(default)]
    shout: bool,
}

async fn hello(State(settings): State<Arc<Binding<Settings>>>) -> String {
    let s = settings.get();
    if s.shout {
        s.greeting.to_uppercase()
    } else {
        s.greeting.clone()
    }
}

async fn health(State(settings): State<Arc<Binding<Settings>>>) -> String {
    match settings.last_error() {
        None => format!("ok (settings version {})", settings.version()),
        Some(e) => format!("serving the last good settings; the newest was refused: {e}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let server = std::env::var("NACELLE_SERVER").unwrap_or_else(|_| "127.0.0.1:8848".into());
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let client = Client::builder()
        .server_addrs([server])
        .app_name("axum-example")
        .snapshot_dir(std::env::temp_dir().join("axum-example-snapshot"))
        .build()
        .await?;
    let settings = client
        .binder::<Settings>()
        .layer("app.yaml", Format::Yaml)
        .validate(|s: &Settings| {
            if s.greeting.trim().is_empty() {
                Err("greeting is blank".into())
            } else {
                Ok(())
            }
        })
        .bind()
        .await?;
    let app = Router::new()
        .route("/", get(hello))
        .route("/health", get(health))
        .with_state(Arc::new(settings));
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    tracing::info!("listening on {listen}");
    axum::serve(listener, app).await?;
    Ok(())
}
