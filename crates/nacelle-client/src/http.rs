//! One HTTP request to the first server that can be reached (the admin calls and the HTTP
//! transport share it): the token in headers (never in the URL, unless the application
//! asks for [`TokenPlacement::QueryParameter`]), failover on connection errors, and the
//! mapping of Nacos's HTTP errors to [`ClientError`].

use crate::error::transport_error;
use crate::error::{ClientError, Result};
use crate::options::{ServerAddr, TokenPlacement};
use crate::secret::Secret;
use crate::shared::Shared;

/// `req` carrying `token` as Nacos servers read it from headers: `Authorization: Bearer`
/// (Nacos 1.x–3.x, Nacelle) and `accessToken` (Nacos 2.x/3.x identity headers, Nacelle) —
/// not the `accessToken` query parameter, which would put the token in every URL. Both
/// headers are marked sensitive (kept out of HTTP/2 header compression tables).
pub(crate) fn with_token(
    req: reqwest::RequestBuilder,
    token: &Secret,
) -> Result<reqwest::RequestBuilder> {
    use reqwest::header::{HeaderValue, AUTHORIZATION};
    let value = |text: &str| {
        HeaderValue::from_str(text)
            .map(|mut v| {
                v.set_sensitive(true);
                v
            })
            // The token itself stays out of the message.
            .map_err(|_| ClientError::Auth("the access token is not a valid header value".into()))
    };
    let bearer = value(&format!("Bearer {}", token.expose()))?;
    let plain = value(token.expose())?;
    Ok(req
        .header(AUTHORIZATION, bearer)
        .header("accessToken", plain))
}

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
            req = match shared.opts.token_placement {
                TokenPlacement::Headers => with_token(req, t)?,
                // Asked for: the URL then holds the token, so no error shows a URL.
                TokenPlacement::QueryParameter => req.query(&[("accessToken", t.expose())]),
            };
        }
        let what = server.to_string();
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() || e.is_timeout() => {
                last = transport_error(&what, e);
                continue;
            }
            Err(e) => return Err(transport_error(&what, e)),
        };
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.map_err(|e| transport_error(&what, e))?;
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
