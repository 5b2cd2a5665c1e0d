//! The state every task of a client shares (below `client.rs`, `session.rs` and
//! `watch.rs`): the options, the current connection, the listened keys with the content
//! the client holds for each, the login, the snapshot directory; and the one way a
//! request goes out (`Shared::call`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use nacelle_cipher::{cipher_rule, CipherRule, DataKey};
use nacelle_proto::config::{ConfigQueryRequest, ConfigQueryResponse};
use nacelle_proto::fuzzy::{self, ConfigFuzzyWatchRequest};
use nacelle_proto::{error_code, Message, Payload};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::auth::Auth;
use crate::error::{ClientError, Result};
use crate::grpc::Conn;
use crate::key::Key;
use crate::metrics::MetricEvent;
use crate::options::{Options, Transport};
use crate::snapshot::{Saved, Snapshot};

/// A config as the server served it (decrypted when it was encrypted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Its key.
    pub key: Key,
    /// The content (plaintext of an encrypted config).
    pub content: String,
    /// The md5 the server holds (of the ciphertext for an encrypted config): what
    /// listeners compare and what a compare-and-set publish names.
    pub md5: String,
    /// `yaml`, `json`, `properties`, `text`, …
    pub content_type: String,
    /// Last modification, ms since the epoch (0 when the server did not say, or the
    /// value came from the snapshot directory of an older client).
    pub last_modified: i64,
    /// Whether the server served a beta (gray) variant to this client.
    pub beta: bool,
}

/// How to publish, beyond the content.
#[derive(Debug, Clone, Default)]
pub struct PublishOptions {
    /// `yaml`, `json`, `properties`, `toml`, `xml`, `html`, `text` (server default `text`).
    pub content_type: Option<String>,
    /// Compare-and-set: publish only if the server's md5 is still this one.
    pub cas_md5: Option<String>,
    /// Publish the variant of this tag.
    pub tag: Option<String>,
    /// Beta (gray) release to these client IPs only.
    pub beta_ips: Vec<String>,
    /// The config's application name.
    pub app_name: Option<String>,
    /// Description.
    pub desc: Option<String>,
    /// The config's tags.
    pub config_tags: Vec<String>,
    /// A message recorded with the history row (Nacelle's `message`).
    pub message: Option<String>,
}

impl PublishOptions {
    /// Options with only the content type set.
    pub fn typed(content_type: impl Into<String>) -> Self {
        PublishOptions {
            content_type: Some(content_type.into()),
            ..Default::default()
        }
    }
}

/// A listened key's new state, as delivered to its listeners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The key.
    pub key: Key,
    /// Its content now; `None`: removed (or never created).
    pub config: Option<Config>,
}

/// One listened key.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The md5 the client holds (`""`: no content).
    pub(crate) md5: String,
    /// The content the client holds.
    pub(crate) value: Option<Config>,
    /// Whether a server has confirmed it since the client started (else it came from
    /// the snapshot directory, or nothing is known yet).
    pub(crate) fresh: bool,
    /// Where changes go; closed receivers are dropped at the next change.
    pub(crate) subscribers: Vec<mpsc::UnboundedSender<Change>>,
    /// Watches of the key being started (not subscribed yet): the entry stays while any
    /// is, even when the last subscriber goes.
    pub(crate) starting: usize,
}

impl Entry {
    /// Whether nothing holds the key any more: no live subscriber, none starting.
    pub(crate) fn unused(&mut self) -> bool {
        self.subscribers.retain(|tx| !tx.is_closed());
        self.subscribers.is_empty() && self.starting == 0
    }
}

/// A request to the refresh worker: re-read a key and deliver it if it changed.
#[derive(Debug)]
pub(crate) struct Refresh {
    pub(crate) key: Key,
    pub(crate) attempt: u32,
    pub(crate) reply: Option<oneshot::Sender<Result<()>>>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) opts: Options,
    pub(crate) conn_tx: watch::Sender<Option<Arc<Conn>>>,
    /// A std mutex: held for map updates only, never across an await.
    pub(crate) listens: Mutex<HashMap<Key, Entry>>,
    pub(crate) auth: Auth,
    pub(crate) http: reqwest::Client,
    pub(crate) snapshot: Option<Snapshot>,
    pub(crate) refresh_tx: mpsc::UnboundedSender<Refresh>,
    pub(crate) shutdown: CancellationToken,
    /// Why the last connection attempt failed, for the error of a call that found none.
    pub(crate) last_failure: Mutex<String>,
    /// HTTP transport: whether the last request reached a server.
    pub(crate) http_up: AtomicBool,
    /// HTTP transport: the server the last request reached (index into the servers).
    pub(crate) http_server: AtomicUsize,
    /// HTTP transport: a key was added to or removed from the listen set (the held poll
    /// restarts with the new set).
    pub(crate) listen_changed: Notify,
    /// The group watches served by the server's fuzzy watch, by id (`crate::group`).
    pub(crate) groups: Mutex<HashMap<u64, GroupReg>>,
}

/// Locks a std mutex, also when a panicking thread poisoned it (the data are plain maps
/// and strings, consistent after every statement).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// The current connection, waiting up to `wait_for_server` for one.
    pub(crate) async fn conn(&self) -> Result<Arc<Conn>> {
        let mut rx = self.conn_tx.subscribe();
        let wait = async {
            rx.wait_for(|c| c.is_some())
                .await
                .map(|c| c.as_ref().map(Arc::clone))
        };
        tokio::select! {
            () = self.shutdown.cancelled() => Err(ClientError::Closed),
            r = tokio::time::timeout(self.opts.wait_for_server, wait) => match r {
                Ok(Ok(Some(c))) => Ok(c),
                Ok(_) => Err(ClientError::Closed),
                Err(_) => Err(ClientError::Unavailable(lock(&self.last_failure).clone())),
            },
        }
    }

    /// Whether a connection is up now (HTTP: whether the last request reached a server).
    pub(crate) fn connected(&self) -> bool {
        match self.opts.transport {
            Transport::Grpc => self.conn_tx.borrow().is_some(),
            Transport::HttpLongPolling => self.http_up.load(Ordering::Relaxed),
        }
    }

    /// One request: the token (logging in when due), the current connection, the call,
    /// and its metric.
    pub(crate) async fn call<M: Message>(&self, kind: &'static str, msg: &M) -> Result<Payload> {
        let started = Instant::now();
        let result = self.call_inner(msg).await;
        self.opts.metrics.record(MetricEvent::Request {
            kind,
            elapsed: started.elapsed(),
            ok: result.is_ok(),
        });
        result
    }

    async fn call_inner<M: Message>(&self, msg: &M) -> Result<Payload> {
        let token = self.auth.token(&self.opts.servers).await?;
        let conn = self.conn().await?;
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &token {
            headers.push(("accessToken", t.expose()));
        }
        if let Some(app) = &self.opts.app_name {
            headers.push(("app", app));
        }
        let answer = conn.call(msg, &headers).await?;
        if let Ok(head) = answer.head() {
            if head.error_code == error_code::NO_RIGHT && token.is_some() {
                // A refused token (expired, server restarted with another secret): the next
                // call logs in again.
                self.auth.invalidate();
            }
        }
        Ok(answer)
    }

    /// Reads `key` over gRPC (`None`: not found), decrypting a `cipher-aes-` config
    /// (`crate::fetch::query` picks the transport).
    pub(crate) async fn grpc_query(&self, key: &Key, tag: Option<&str>) -> Result<Option<Config>> {
        let mut req = ConfigQueryRequest::new(&key.data_id, &key.group, &key.namespace);
        req.tag = tag.map(str::to_string);
        let answer = self.call("query", &req).await?;
        let resp: ConfigQueryResponse = answer
            .parse_body()
            .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
        if !resp.head.is_ok() {
            if answer.type_name() == ConfigQueryResponse::TYPE
                && resp.head.error_code == error_code::CONFIG_NOT_FOUND
            {
                return Ok(None);
            }
            return Err(ClientError::from_head(&resp.head, "query"));
        }
        let mut content = resp.content.unwrap_or_default();
        let edk = resp.encrypted_data_key.unwrap_or_default();
        if !edk.is_empty() && matches!(cipher_rule(&key.data_id), CipherRule::Known(_)) {
            content = DataKey::parse(&edk)?.decrypt(&content)?;
        }
        Ok(Some(Config {
            key: key.clone(),
            content,
            md5: resp.md5.unwrap_or_default(),
            content_type: resp.content_type.unwrap_or_else(|| "text".into()),
            last_modified: resp.last_modified,
            beta: resp.beta,
        }))
    }

    /// Takes a value read from a server for a listened key: marks the key confirmed and,
    /// when its md5 differs from the one held, stores it, saves the snapshot and delivers
    /// it to the key's listeners.
    pub(crate) fn apply(&self, key: &Key, value: Option<Config>) {
        let md5 = value.as_ref().map(|c| c.md5.clone()).unwrap_or_default();
        let change = {
            let mut listens = lock(&self.listens);
            let Some(entry) = listens.get_mut(key) else {
                return;
            };
            entry.fresh = true;
            if entry.md5 == md5 {
                return;
            }
            entry.md5 = md5;
            entry.value = value;
            let change = Change {
                key: key.clone(),
                config: entry.value.clone(),
            };
            entry
                .subscribers
                .retain(|tx| tx.send(change.clone()).is_ok());
            change
        };
        tracing::debug!(key = %key, md5 = %change.config.as_ref().map_or("", |c| &c.md5), "change delivered");
        self.opts.metrics.record(MetricEvent::Change { key });
        self.save(key, change.config.as_ref());
    }

    /// Saves a key's content in the snapshot directory (failures are logged: the snapshot
    /// is a fallback, never a reason to fail a delivery).
    pub(crate) fn save(&self, key: &Key, value: Option<&Config>) {
        let Some(snap) = &self.snapshot else {
            return;
        };
        let saved = value.map(|c| Saved {
            content: c.content.clone(),
            md5: c.md5.clone(),
            content_type: c.content_type.clone(),
            last_modified: c.last_modified,
        });
        if let Err(e) = snap.store(key, saved.as_ref()) {
            tracing::warn!(key = %key, error = %e, "cannot write the snapshot");
        }
    }

    /// Sends a `WATCH`; `Ok(false)`: the server does not know the request (`302`).
    pub(crate) async fn fuzzy_watch(&self, req: &ConfigFuzzyWatchRequest) -> Result<bool> {
        let answer = self.call("fuzzy_watch", req).await?;
        let head = answer
            .head()
            .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
        if head.is_ok() {
            return Ok(true);
        }
        match head.error_code {
            error_code::NO_HANDLER => Ok(false),
            error_code::FUZZY_WATCH_PATTERN_MATCH_COUNT_OVER_LIMIT => {
                // The server watches the first keys (500 on Nacos and Nacelle) and reports
                // the others only once some of those go.
                tracing::warn!(pattern = ?req.group_key_pattern, "the pattern matches more keys than the server reports");
                Ok(true)
            }
            _ => Err(ClientError::from_head(&head, "fuzzy watch")),
        }
    }

    /// Asks the refresh worker to re-read `key` (after a push, or a listen answer saying
    /// it changed).
    pub(crate) fn refresh_later(&self, key: Key) {
        let req = Refresh {
            key,
            attempt: 0,
            reply: None,
        };
        if self.refresh_tx.send(req).is_err() {
            tracing::debug!("refresh worker gone (client shut down)");
        }
    }
}

/// A group watch registered for server pushes.
#[derive(Debug)]
pub(crate) struct GroupReg {
    /// The pattern as sent (the default namespace spelled `public`, as Nacos 3.0 wants).
    pub(crate) pattern: String,
    /// The client's namespace (keys are built with it).
    pub(crate) namespace: String,
    pub(crate) group: String,
    pub(crate) data_id: String,
    /// Group keys the server reported present (sent back as `receivedGroupKeys`).
    pub(crate) known: HashSet<String>,
    pub(crate) tx: mpsc::UnboundedSender<Membership>,
}

/// What the server (or a listing) says about a key's membership.
#[derive(Debug)]
pub(crate) enum Membership {
    Present(Key),
    Gone(Key),
}

impl GroupReg {
    /// A `WATCH` of this pattern carrying the keys held.
    pub(crate) fn request(&self, initializing: bool) -> ConfigFuzzyWatchRequest {
        ConfigFuzzyWatchRequest {
            group_key_pattern: Some(self.pattern.clone()),
            received_group_keys: Some(self.known.iter().cloned().collect()),
            watch_type: Some(fuzzy::WATCH.to_string()),
            initializing,
            module: Some("config".to_string()),
            ..Default::default()
        }
    }
}
