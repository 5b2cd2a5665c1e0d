//! The webhooks' HTTP client: the [`WebhookTransport`] the service's sender POSTs through
//! (docs/webhooks.md). One `reqwest` client for the server (connection reuse per
//! receiver); HTTPS verified against the Mozilla roots; no redirects followed (a receiver
//! answering 3xx has not received the event); the attempt's whole time bounded by its
//! timeout.

use std::future::Future;
use std::pin::Pin;

use nacelle_service::{WebhookPost, WebhookTransport};

/// POSTs webhook deliveries.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
}

impl HttpTransport {
    /// A client that follows no redirect.
    pub fn new() -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(HttpTransport { client })
    }
}

impl WebhookTransport for HttpTransport {
    fn post(&self, post: WebhookPost) -> Pin<Box<dyn Future<Output = Result<u16, String>> + Send>> {
        let client = self.client.clone();
        Box::pin(async move {
            let mut req = client.post(&post.url).timeout(post.timeout).body(post.body);
            for (name, value) in post.headers {
                req = req.header(name, value);
            }
            match req.send().await {
                Ok(resp) => Ok(resp.status().as_u16()),
                Err(e) if e.is_timeout() => {
                    Err(format!("no answer within {} s", post.timeout.as_secs_f64()))
                }
                Err(e) if e.is_connect() => Err(format!("cannot connect: {}", root_cause(&e))),
                Err(e) => Err(root_cause(&e)),
            }
        })
    }
}

/// The innermost cause of `e` (reqwest's own message says only "error sending request").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
