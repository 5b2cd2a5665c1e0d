//! Login: Nacos's `POST /nacos/v1/auth/login` on a server's HTTP port, `username` and
//! `password` in a form body — never in the URL (answer
//! `{"accessToken","tokenTtl","globalAdmin","username"}`), the token kept until nine
//! tenths of its TTL have passed, then a fresh login before the next call.
//!
//! Secrets stay out of every message: the password and tokens are never in a URL, a
//! transport error is shown without its URL ([`crate::error::transport_error`]), text a
//! server answered is scrubbed of the secret sent ([`scrub`]), and the `Debug` of every
//! type holding one ([`LoginAnswer`], [`Secret`], the credentials) redacts it.

use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::transport_error;
use crate::error::{ClientError, Result};
use crate::metrics::{MetricEvent, Sink};
use crate::options::{Credentials, ServerAddr};
use crate::secret::{scrub, Secret, REDACTED};

/// Nacos's login answer.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginAnswer {
    /// The token to send as `accessToken`.
    pub access_token: String,
    /// Its lifetime in seconds.
    pub token_ttl: u64,
    /// Whether the user is an administrator.
    #[serde(default)]
    pub global_admin: bool,
    /// The user's name.
    #[serde(default)]
    pub username: Option<String>,
}

impl std::fmt::Debug for LoginAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginAnswer")
            .field("access_token", &REDACTED)
            .field("token_ttl", &self.token_ttl)
            .field("global_admin", &self.global_admin)
            .field("username", &self.username)
            .finish()
    }
}

#[derive(Debug, Clone)]
struct Token {
    value: Secret,
    refresh_at: Instant,
}

/// The credentials and the current token of a client.
#[derive(Debug)]
pub(crate) struct Auth {
    credentials: Option<Credentials>,
    /// A token given by the application (a saved CLI profile), used as is.
    fixed: Option<Secret>,
    metrics: Sink,
    http: reqwest::Client,
    /// A std mutex: held only to copy or replace the token, never across a login.
    token: std::sync::Mutex<Option<Token>>,
    /// One login at a time; callers that waited find the fresh token.
    login: tokio::sync::Mutex<()>,
}

/// The HTTP client [`login`] takes.
pub type HttpClient = reqwest::Client;

/// A plain HTTP client for [`login`] (10 s timeout).
pub fn http_client() -> Result<HttpClient> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))
}

/// Logs in at `server` once: `POST /nacos/v1/auth/login` with `username` and `password`
/// in a form body (Nacos reads them as request parameters, query or form alike; Nacelle's
/// v1 and v3 logins too). No error it returns holds the password or the URL.
pub async fn login(
    http: &reqwest::Client,
    server: &ServerAddr,
    username: &str,
    password: &str,
) -> Result<LoginAnswer> {
    let url = format!("{}/v1/auth/login", server.http_base());
    let what = format!("login at {server}");
    let resp = http
        .post(&url)
        .form(&[("username", username), ("password", password)])
        .send()
        .await
        .map_err(|e| transport_error(&what, e))?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| transport_error(&what, e))?;
    let body = scrub(body.trim(), &[password]);
    if status == reqwest::StatusCode::FORBIDDEN || status == reqwest::StatusCode::UNAUTHORIZED {
        return Err(ClientError::Auth(format!("{username} at {server}: {body}")));
    }
    if !status.is_success() {
        return Err(ClientError::Auth(format!(
            "{what} answered {status}: {body}"
        )));
    }
    serde_json::from_str(&body)
        .map_err(|e| ClientError::Auth(format!("{what}: not a Nacos login answer ({e})")))
}

impl Auth {
    pub(crate) fn new(
        credentials: Option<Credentials>,
        fixed: Option<Secret>,
        http: reqwest::Client,
        metrics: Sink,
    ) -> Auth {
        Auth {
            credentials,
            fixed,
            metrics,
            http,
            token: std::sync::Mutex::new(None),
            login: tokio::sync::Mutex::new(()),
        }
    }

    fn current(&self) -> Option<Token> {
        self.token
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The token to send, logging in (at the first server that answers) when there is none
    /// or it is due for refresh; `None` without credentials.
    pub(crate) async fn token(&self, servers: &[ServerAddr]) -> Result<Option<Secret>> {
        let Some(creds) = &self.credentials else {
            return Ok(self.fixed.clone());
        };
        if let Some(t) = self.current().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(Some(t.value));
        }
        let _one_login = self.login.lock().await;
        if let Some(t) = self.current().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(Some(t.value));
        }
        let mut last = ClientError::Config("no server address given".into());
        for server in servers {
            let started = Instant::now();
            match login(&self.http, server, &creds.username, creds.password.expose()).await {
                Ok(answer) => {
                    let ttl = Duration::from_secs(answer.token_ttl);
                    let token = Token {
                        value: Secret::new(answer.access_token.clone()),
                        refresh_at: started + ttl.mul_f64(0.9),
                    };
                    tracing::debug!(server = %server, ttl_s = answer.token_ttl, "logged in");
                    self.metrics.record(MetricEvent::Login {
                        server: &server.to_string(),
                        ttl_s: answer.token_ttl,
                    });
                    let token_value = token.value.clone();
                    match self.token.lock() {
                        Ok(mut t) => *t = Some(token),
                        Err(p) => *p.into_inner() = Some(token),
                    }
                    return Ok(Some(token_value));
                }
                Err(e @ ClientError::Auth(_)) => return Err(e),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Forgets the token (the server refused it): the next call logs in again.
    pub(crate) fn invalidate(&self) {
        match self.token.lock() {
            Ok(mut t) => *t = None,
            Err(p) => *p.into_inner() = None,
        }
    }
}
