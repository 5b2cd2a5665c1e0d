//! [`Client`]: get, publish, remove, and listen (a [`Watch`] stream or a callback).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use nacelle_cipher::{cipher_rule, CipherRule, DataKey};
use nacelle_proto::config::{addition, ConfigPublishRequest, ConfigRemoveRequest};
use nacelle_proto::response::{ConfigPublishResponse, ConfigRemoveResponse};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::auth::Auth;
use crate::error::{ClientError, Result};
use crate::key::{IntoKey, Key};
use crate::options::Transport;
use crate::options::{ClientBuilder, Options, ServerAddr};
use crate::session;
use crate::shared::{lock, Change, Config, Entry, PublishOptions, Refresh, Shared};
use crate::snapshot::Snapshot;

/// A client of one Nacelle (or Nacos 2.x) cluster. Cheap to clone; the connection and
/// the listeners are shared by the clones and end when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl Client {
    /// A builder; see [`ClientBuilder`].
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    pub(crate) async fn start(opts: Options) -> Result<Client> {
        let http = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .timeout(opts.request_timeout.max(std::time::Duration::from_secs(60)))
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        let (refresh_tx, refresh_rx) = mpsc::unbounded_channel();
        let (conn_tx, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            auth: Auth::new(
                opts.credentials.clone(),
                opts.access_token.clone(),
                http.clone(),
                opts.metrics.clone(),
            ),
            snapshot: opts.snapshot_dir.as_deref().map(Snapshot::new),
            opts,
            conn_tx,
            listens: Mutex::new(HashMap::new()),
            http,
            refresh_tx,
            shutdown: CancellationToken::new(),
            last_failure: Mutex::new("not connected yet".into()),
            http_up: std::sync::atomic::AtomicBool::new(false),
            http_server: std::sync::atomic::AtomicUsize::new(0),
            listen_changed: tokio::sync::Notify::new(),
            groups: Mutex::new(HashMap::new()),
        });
        tokio::spawn(session::run(Arc::clone(&shared)));
        tokio::spawn(session::refresher(Arc::clone(&shared), refresh_rx));
        Ok(Client {
            inner: Arc::new(Inner { shared }),
        })
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The namespace calls use when a key names none.
    pub fn namespace(&self) -> &str {
        &self.shared().opts.namespace
    }

    /// The key `k` names in this client's namespace.
    pub fn key(&self, k: impl IntoKey) -> Key {
        k.into_key(self.namespace())
    }

    /// The configured servers.
    pub fn servers(&self) -> &[ServerAddr] {
        &self.shared().opts.servers
    }

    /// The server the client is connected to now, if any (HTTP transport: the one the
    /// last request reached).
    pub fn connected_to(&self) -> Option<ServerAddr> {
        let shared = self.shared();
        if shared.opts.transport == Transport::HttpLongPolling {
            if !shared.connected() {
                return None;
            }
            let i = shared
                .http_server
                .load(std::sync::atomic::Ordering::Relaxed);
            return shared.opts.servers.get(i).cloned();
        }
        shared.conn_tx.borrow().as_ref().map(|c| c.server.clone())
    }

    /// Waits until a server is connected (up to the `wait_for_server` option; gRPC
    /// transport only).
    pub async fn wait_connected(&self) -> Result<ServerAddr> {
        Ok(self.shared().conn().await?.server.clone())
    }

    /// Reads a config; `Ok(None)` when it does not exist.
    pub async fn get(&self, key: impl IntoKey) -> Result<Option<Config>> {
        let key = self.key(key);
        let span = tracing::debug_span!("nacelle_client.get", key = %key);
        crate::fetch::query(self.shared(), &key, None)
            .instrument(span)
            .await
    }

    /// Reads the variant of `tag`; `Ok(None)` when there is none.
    pub async fn get_tagged(&self, key: impl IntoKey, tag: &str) -> Result<Option<Config>> {
        let key = self.key(key);
        let span = tracing::debug_span!("nacelle_client.get", key = %key, tag);
        crate::fetch::query(self.shared(), &key, Some(tag))
            .instrument(span)
            .await
    }

    /// Publishes `content` (type `text` unless the server infers otherwise).
    pub async fn publish(&self, key: impl IntoKey, content: &str) -> Result<()> {
        self.publish_with(key, content, &PublishOptions::default())
            .await
    }

    /// Publishes `content` with options (type, compare-and-set, tag, beta IPs, …). A
    /// `cipher-aes-` dataId is encrypted here with a fresh data key, as Nacos's Java
    /// client does.
    pub async fn publish_with(
        &self,
        key: impl IntoKey,
        content: &str,
        opts: &PublishOptions,
    ) -> Result<()> {
        let key = self.key(key);
        let span = tracing::debug_span!("nacelle_client.publish", key = %key);
        async {
            if self.shared().opts.transport == Transport::HttpLongPolling {
                return crate::http_transport::publish(self.shared(), &key, content, opts).await;
            }
            let mut req =
                ConfigPublishRequest::new(&key.data_id, &key.group, &key.namespace, content);
            if matches!(cipher_rule(&key.data_id), CipherRule::Known(_)) {
                let data_key = DataKey::generate()?;
                req.content = Some(data_key.encrypt(content)?);
                req = req.with_addition(addition::ENCRYPTED_DATA_KEY, data_key.as_str());
            }
            req.cas_md5 = opts.cas_md5.clone();
            let fields = [
                (addition::TYPE, opts.content_type.clone()),
                (addition::TAG, opts.tag.clone()),
                (addition::APP_NAME, opts.app_name.clone()),
                (addition::DESC, opts.desc.clone()),
                (addition::MESSAGE, opts.message.clone()),
                (
                    addition::BETA_IPS,
                    (!opts.beta_ips.is_empty()).then(|| opts.beta_ips.join(",")),
                ),
                (
                    addition::CONFIG_TAGS,
                    (!opts.config_tags.is_empty()).then(|| opts.config_tags.join(",")),
                ),
            ];
            for (name, value) in fields {
                if let Some(v) = value {
                    req = req.with_addition(name, v);
                }
            }
            let answer = self.shared().call("publish", &req).await?;
            let resp: ConfigPublishResponse = answer
                .parse_body()
                .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
            if resp.head.is_ok() {
                Ok(())
            } else {
                Err(ClientError::from_head(&resp.head, "publish"))
            }
        }
        .instrument(span)
        .await
    }

    /// Removes a config (success also when it did not exist).
    pub async fn remove(&self, key: impl IntoKey) -> Result<()> {
        self.remove_tagged(key, None).await
    }

    /// Removes a config, or only its variant of `tag`.
    pub async fn remove_tagged(&self, key: impl IntoKey, tag: Option<&str>) -> Result<()> {
        let key = self.key(key);
        let span = tracing::debug_span!("nacelle_client.remove", key = %key);
        async {
            if self.shared().opts.transport == Transport::HttpLongPolling {
                return crate::http_transport::remove(self.shared(), &key, tag).await;
            }
            let mut req = ConfigRemoveRequest::new(&key.data_id, &key.group, &key.namespace);
            req.tag = tag.map(str::to_string);
            let answer = self.shared().call("remove", &req).await?;
            let resp: ConfigRemoveResponse = answer
                .parse_body()
                .map_err(|e| ClientError::Protocol(format!("{}: {e}", answer.type_name())))?;
            if resp.head.is_ok() {
                Ok(())
            } else {
                Err(ClientError::from_head(&resp.head, "remove"))
            }
        }
        .instrument(span)
        .await
    }

    /// Listens to a key. The [`Watch`] holds its value now ([`Watch::initial`]; from the
    /// snapshot directory, flagged stale, when no server answers) and then yields every
    /// change — including the first value of a key created after the watch began, and a
    /// change made while the client was disconnected (delivered after it reconnects).
    /// Fails when no server answers and the snapshot has nothing for the key.
    pub async fn watch(&self, key: impl IntoKey) -> Result<Watch> {
        let key = self.key(key);
        let span = tracing::debug_span!("nacelle_client.watch", key = %key);
        self.watch_key(key).instrument(span).await
    }

    async fn watch_key(&self, key: Key) -> Result<Watch> {
        let shared = self.shared();
        let is_new = {
            let mut listens = lock(&shared.listens);
            if let Some(entry) = listens.get_mut(&key) {
                entry.starting += 1;
                false
            } else {
                let saved = shared.snapshot.as_ref().and_then(|s| s.load(&key));
                let value = saved.map(|s| Config {
                    key: key.clone(),
                    content: s.content,
                    md5: s.md5,
                    content_type: s.content_type,
                    last_modified: s.last_modified,
                    beta: false,
                });
                listens.insert(
                    key.clone(),
                    Entry {
                        md5: value.as_ref().map(|c| c.md5.clone()).unwrap_or_default(),
                        value,
                        fresh: false,
                        subscribers: Vec::new(),
                        starting: 1,
                    },
                );
                true
            }
        };
        // The current value, read by the refresh worker so that no older answer can
        // overwrite a newer one.
        let fresh = lock(&shared.listens).get(&key).is_some_and(|e| e.fresh);
        if !fresh {
            let (tx, rx) = oneshot::channel();
            let req = Refresh {
                key: key.clone(),
                attempt: 0,
                reply: Some(tx),
            };
            let read = match shared.refresh_tx.send(req) {
                Ok(()) => rx.await.unwrap_or(Err(ClientError::Closed)),
                Err(_) => Err(ClientError::Closed),
            };
            if let Err(e) = read {
                let has_snapshot = lock(&shared.listens)
                    .get(&key)
                    .is_some_and(|e| e.value.is_some());
                if !(e.is_unavailable() && has_snapshot) {
                    // No watch after all: the key goes when nothing else holds it.
                    self.release(&key, true);
                    return Err(e);
                }
                tracing::warn!(key = %key, error = %e, "no server: starting from the snapshot");
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (initial, md5, stale) = {
            let mut listens = lock(&shared.listens);
            let entry = listens.get_mut(&key).ok_or(ClientError::Closed)?;
            entry.starting = entry.starting.saturating_sub(1);
            entry.subscribers.push(tx);
            (entry.value.clone(), entry.md5.clone(), !entry.fresh)
        };
        if is_new && shared.opts.transport == Transport::HttpLongPolling {
            // The held poll restarts with the new key.
            shared.listen_changed.notify_one();
        } else if is_new && shared.connected() {
            // Disconnected (or failing): the session re-sends the whole set on reconnect.
            if let Err(e) = session::listen(shared, &[(key.clone(), md5)]).await {
                tracing::warn!(key = %key, error = %e, "listen request failed; re-sent on reconnect");
            }
        }
        Ok(Watch {
            key,
            initial,
            stale,
            rx,
            client: self.clone(),
        })
    }

    /// Calls `callback` with every change of `key` (see [`Client::watch`]) on a task of
    /// its own, until the returned [`Listener`] is dropped. The current value is not
    /// passed; it is [`Listener::initial`].
    pub async fn listen<F>(&self, key: impl IntoKey, callback: F) -> Result<Listener>
    where
        F: Fn(Change) + Send + 'static,
    {
        let mut watch = self.watch(key).await?;
        let initial = watch.initial.take();
        let task = tokio::spawn(async move {
            while let Some(change) = watch.next_change().await {
                callback(change);
            }
        });
        Ok(Listener { initial, task })
    }

    /// Called when a watch of `key` goes (`starting`: one that never subscribed): when
    /// nothing else holds the key, forgets it (its md5 and value) and stops listening to it
    /// on the server — gRPC `ConfigBatchListenRequest` with `listen: false`, HTTP the next
    /// poll without it.
    fn release(&self, key: &Key, starting: bool) {
        let shared = &self.inner.shared;
        let gone = {
            let mut listens = lock(&shared.listens);
            match listens.get_mut(key) {
                Some(entry) => {
                    if starting {
                        entry.starting = entry.starting.saturating_sub(1);
                    }
                    let unused = entry.unused();
                    if unused {
                        listens.remove(key);
                    }
                    unused
                }
                None => false,
            }
        };
        if !gone {
            return;
        }
        tracing::debug!(key = %key, "last watch dropped: unlistening");
        if shared.opts.transport == Transport::HttpLongPolling {
            shared.listen_changed.notify_one();
            return;
        }
        if !shared.connected() {
            // The set re-sent on the next connection no longer has it.
            return;
        }
        // Drop runs outside async code: the request goes from a task. Without a runtime
        // (a watch dropped after it ended) the server keeps the listener until the
        // connection ends; a push for it is then ignored (no entry).
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(key = %key, "no runtime to unlisten from");
            return;
        };
        let shared = Arc::clone(shared);
        let key = key.clone();
        rt.spawn(async move {
            if let Err(e) = session::unlisten(&shared, &key).await {
                tracing::debug!(key = %key, error = %e, "unlisten failed; the next connection leaves it out");
            }
        });
    }

    /// Whether the client's value of a listened key has been confirmed by a server
    /// (`false`: from the snapshot directory, or not listened).
    pub fn is_fresh(&self, key: impl IntoKey) -> bool {
        let key = self.key(key);
        lock(&self.shared().listens)
            .get(&key)
            .is_some_and(|e| e.fresh)
    }
}

/// The changes of one listened key; a [`futures::Stream`] of [`Change`].
#[derive(Debug)]
pub struct Watch {
    key: Key,
    initial: Option<Config>,
    stale: bool,
    rx: mpsc::UnboundedReceiver<Change>,
    /// Keeps the client (its connection, its session) alive as long as the watch.
    client: Client,
}

impl Watch {
    /// The key.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The value when the watch began (`None`: the key did not exist).
    pub fn initial(&self) -> Option<&Config> {
        self.initial.as_ref()
    }

    /// Whether [`Watch::initial`] came from the snapshot directory (no server answered).
    pub fn started_stale(&self) -> bool {
        self.stale
    }

    /// The client this watch listens through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The next change (`None` once the client shut down).
    pub async fn next_change(&mut self) -> Option<Change> {
        self.rx.recv().await
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Closed first, so the release sees this subscriber gone.
        self.rx.close();
        self.client.release(&self.key, false);
    }
}

impl futures::Stream for Watch {
    type Item = Change;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Change>> {
        self.rx.poll_recv(cx)
    }
}

/// A callback listener; dropping it stops the callbacks.
#[derive(Debug)]
pub struct Listener {
    initial: Option<Config>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// The value when the listener began.
    pub fn initial(&self) -> Option<&Config> {
        self.initial.as_ref()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}
