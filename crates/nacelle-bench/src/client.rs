//! A minimal keep-alive HTTP/1.1 client connection on hyper, so the load generator spends
//! as little of the shared CPU as possible.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One keep-alive connection (opened again when the server has closed it while idle).
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: String,
    addr: SocketAddr,
}

impl Conn {
    /// Connects and performs the HTTP/1.1 handshake.
    pub async fn connect(addr: SocketAddr) -> Result<Self> {
        Ok(Conn {
            sender: Self::handshake(addr).await?,
            host: addr.to_string(),
            addr,
        })
    }

    async fn handshake(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // The connection ends when the bench drops its sender or the server closes it;
            // a failed request is reported by the request itself.
            let _ended = conn.await;
        });
        Ok(sender)
    }

    async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<(StatusCode, Bytes)> {
        // A server closes a keep-alive connection idle past its own timeout (r-nacos's
        // actix after 5 s, e.g. the publishing connection between `--pause-ms` rounds):
        // a request is never sent on a closed one; it goes on a new connection.
        if self.sender.is_closed() || self.sender.ready().await.is_err() {
            self.sender = Self::handshake(self.addr).await?;
            self.sender.ready().await?;
        }
        let resp = self.sender.send_request(req).await?;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// `GET path`.
    pub async fn get(&mut self, path: &str) -> Result<(StatusCode, Bytes)> {
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header("host", &self.host)
            .body(Full::new(Bytes::new()))?;
        self.send(req).await
    }

    /// `POST path` with a form body and extra headers.
    pub async fn post_form(
        &mut self,
        path: &str,
        body: String,
        headers: &[(&str, &str)],
    ) -> Result<(StatusCode, Bytes)> {
        let mut b = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", &self.host)
            .header("content-type", "application/x-www-form-urlencoded");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        self.send(b.body(Full::new(Bytes::from(body)))?).await
    }

    /// `POST path` with a JSON body.
    pub async fn post_json(&mut self, path: &str, body: String) -> Result<(StatusCode, Bytes)> {
        let req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header("host", &self.host)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?;
        self.send(req).await
    }
}

/// Form-encodes pairs.
pub fn form(pairs: &[(&str, &str)]) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                utf8_percent_encode(k, NON_ALPHANUMERIC),
                utf8_percent_encode(v, NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Lowercase hex md5.
pub fn md5_hex(s: &str) -> String {
    use md5::{Digest, Md5};
    hex::encode(Md5::digest(s.as_bytes()))
}
