//! One HTTP request to the first server that can be reached (the admin calls and the HTTP
//! transport share it): the token as `accessToken`, failover on connection errors, and the
//! mapping of Nacos's HTTP errors to [`ClientError`].

use crate::error::{ClientError, Result};
use crate::options::ServerAddr;
use crate::shared::Shared;

/// Builds the request against one server's base URL (`http://host:port/nacos`).
pub(crate) type Build<'a> = &'a (dyn Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder + Sync);

/// A server's answer, whatever its status.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Which of the servers answered (its index).
    pub(crate) server: usize,
    pub(crate) status: reqwest::StatusCode,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) body: bytes::Bytes,
}

impl Answer {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).trim().to_string()
    }

    /// The body of a 2xx answer, else the error the status means.
    pub(crate) fn ok_body(self, servers: &[ServerAddr]) -> Result<bytes::Bytes> {
        if self.status.is_success() {
            return Ok(self.body);
        }
        Err(self.error(servers))
    }

    /// The error a non-2xx answer means.
    pub(crate) fn error(&self, servers: &[ServerAddr]) -> ClientError {
        let text = self.text();
        let server = servers
            .get(self.server)
            .map(ToString::to_string)
            .unwrap_or_default();
        match self.status.as_u16() {
            404 => ClientError::NotFound(text),
            403 | 401 => ClientError::Forbidden(text),
            400 | 413 => ClientError::Invalid(text),
            503 => ClientError::Unavailable(format!("{server}: {text}")),
            500 if text.contains("Cas publish fail") => ClientError::CasConflict,
            code => ClientError::Server {
                code: i32::from(code),
                message: text,
            },
        }
    }
}

/// Sends the request built by `build` to the first of `servers` that can be reached.
pub(crate) async fn send(
    shared: &Shared,
    servers: &[ServerAddr],
    build: Build<'_>,
) -> Result<Answer> {
    let token = shared.auth.token(servers).await?;
    let mut last = ClientError::Config("no server address given".into());
    for (i, server) in servers.iter().enumerate() {
        let mut req = build(&shared.http, &server.http_base());
        if let Some(t) = &token {
            req = req.query(&[("accessToken", t)]);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() || e.is_timeout() => {
                last = ClientError::Unavailable(format!("{server}: {e}"));
                continue;
            }
            Err(e) => return Err(ClientError::Unavailable(format!("{server}: {e}"))),
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp
            .bytes()
            .await
            .map_err(|e| ClientError::Unavailable(format!("{server}: {e}")))?;
        if status == reqwest::StatusCode::FORBIDDEN || status == reqwest::StatusCode::UNAUTHORIZED {
            // A refused token (expired, another secret): the next call logs in again.
            shared.auth.invalidate();
        }
        return Ok(Answer {
            server: i,
            status,
            headers,
            body,
        });
    }
    Err(last)
}
