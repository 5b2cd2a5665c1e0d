//! Wildcard listening over a group: [`crate::Client::watch_group`] → a [`GroupWatch`]
//! stream of [`GroupEvent`]s for every key of a group whose dataId matches a pattern.
//!
//! Two ways to learn which keys exist (`docs/client.md`, "Wildcard listening"):
//! - **server push** — Nacos 3.0's fuzzy watch: a `ConfigFuzzyWatchRequest` for
//!   `namespace>>group>>pattern`; the server sends the keys it covers (sync batches) and
//!   every key added or removed later. Re-sent on every new connection with the keys held
//!   (`initializing: false`), so the server answers only the difference.
//! - **polling** — for servers that answer the request as unknown (`302`, Nacos 2.x and
//!   r-nacos), the HTTP transport, or when forced by [`crate::GroupWatchMode::Polling`]:
//!   the group is listed with the search API every `group_poll_interval`.
//!
//! Either way each key found is listened to like [`crate::Client::watch`] (so content
//! changes and removals arrive as pushes, and the first value of a new key is read), and
//! the stream reports `Added` (with content) the first time a key has content, `Changed`
//! after, `Removed` when it goes.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures::StreamExt;
use nacelle_proto::fuzzy::{self, ConfigFuzzyWatchRequest};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::error::{ClientError, Result};
use crate::key::{namespace_label, part_matches, valid_part, Key};
use crate::options::{GroupWatchMode, Transport};
use crate::shared::{lock, Change, Config, GroupReg, Membership};

/// Something that happened to a key of a watched group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    /// The key has content for the first time in this watch (it existed when the watch
    /// started, or was created since).
    Added(Config),
    /// Its content changed.
    Changed(Config),
    /// It was removed.
    Removed(Key),
}

static NEXT_GROUP: AtomicU64 = AtomicU64::new(1);

/// The keys of a group whose dataId matches a pattern, as a [`futures::Stream`] of
/// [`GroupEvent`]s. Dropping it stops the watch (the server watch is cancelled).
#[derive(Debug)]
pub struct GroupWatch {
    rx: mpsc::UnboundedReceiver<GroupEvent>,
    server_push: bool,
    stop: CancellationToken,
}

impl GroupWatch {
    /// Whether the server pushes the group's membership (fuzzy watch); `false`: polling.
    pub fn is_server_push(&self) -> bool {
        self.server_push
    }

    /// The next event; `None` once the client is gone.
    pub async fn next_event(&mut self) -> Option<GroupEvent> {
        self.rx.recv().await
    }
}

impl futures::Stream for GroupWatch {
    type Item = GroupEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<GroupEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for GroupWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Client {
    /// Watches every key of `group` (in the client's namespace) whose dataId matches
    /// `data_id_pattern` — `*`, `prefix*`, `*suffix`, `*part*` or an exact dataId. The
    /// stream starts with an `Added` per existing key, then reports keys created,
    /// changed and removed. Uses the server's fuzzy watch when it has one (at most 500
    /// keys per pattern and 20 patterns per connection on Nacelle and Nacos 3.0), else
    /// polls the search API (see [`crate::GroupWatchMode`]).
    pub async fn watch_group(&self, group: &str, data_id_pattern: &str) -> Result<GroupWatch> {
        if group.is_empty() || group.contains('*') {
            return Err(ClientError::Invalid(format!(
                "a group watch needs an exact group, not `{group}`"
            )));
        }
        if !valid_part(data_id_pattern) {
            return Err(ClientError::Invalid(format!(
                "invalid dataId pattern `{data_id_pattern}`: use *, x*, *x, *x* or a dataId"
            )));
        }
        let shared = self.shared();
        let namespace = self.namespace().to_string();
        let (mtx, mrx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let mut server_push = None;
        if shared.opts.group_watch == GroupWatchMode::Auto
            && shared.opts.transport == Transport::Grpc
        {
            let id = NEXT_GROUP.fetch_add(1, Ordering::Relaxed);
            let reg = GroupReg {
                pattern: fuzzy::pattern(namespace_label(&namespace), group, data_id_pattern),
                namespace: namespace.clone(),
                group: group.to_string(),
                data_id: data_id_pattern.to_string(),
                known: HashSet::new(),
                tx: mtx.clone(),
            };
            let req = reg.request(true);
            // Registered before the request: the sync may arrive before the answer.
            lock(&shared.groups).insert(id, reg);
            match shared.fuzzy_watch(&req).await {
                Ok(true) => server_push = Some(id),
                Ok(false) => {
                    lock(&shared.groups).remove(&id);
                    tracing::info!(
                        group,
                        data_id_pattern,
                        "the server has no fuzzy watch; polling the group"
                    );
                }
                Err(e) => {
                    lock(&shared.groups).remove(&id);
                    return Err(e);
                }
            }
        }
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let task = GroupTask {
            client: self.clone(),
            namespace,
            group: group.to_string(),
            data_id: data_id_pattern.to_string(),
            server_push,
            out: out_tx,
            members: HashMap::new(),
        };
        let first = if server_push.is_none() {
            Some(task.list().await?)
        } else {
            None
        };
        // The task keeps a sender: with polling nobody else holds one.
        tokio::spawn(task.run((mtx, mrx), first, stop.clone()));
        Ok(GroupWatch {
            rx: out_rx,
            server_push: server_push.is_some(),
            stop,
        })
    }
}

/// One member key: its watch's forwarding task and whether it was reported present.
struct Member {
    task: tokio::task::JoinHandle<()>,
    present: bool,
}

struct GroupTask {
    client: Client,
    namespace: String,
    group: String,
    data_id: String,
    /// The registration id when the server pushes; `None`: polling.
    server_push: Option<u64>,
    out: mpsc::UnboundedSender<GroupEvent>,
    members: HashMap<Key, Member>,
}

impl GroupTask {
    /// The group's keys matching the pattern, from the search API (every page). The whole
    /// group is listed and the pattern applied here: servers read a blur search's `*`
    /// differently (Nacos and Nacelle as a wildcard, r-nacos as a literal character in a
    /// substring match).
    async fn list(&self) -> Result<Vec<Key>> {
        const PAGE: u32 = 200;
        let admin = self.client.admin();
        let mut keys = Vec::new();
        let mut page_no = 1;
        loop {
            let page = admin
                .search(&self.namespace, "", &self.group, page_no, PAGE)
                .await?;
            let n = page.page_items.len();
            keys.extend(
                page.page_items
                    .into_iter()
                    .filter(|c| c.group == self.group && part_matches(&self.data_id, &c.data_id))
                    .map(|c| Key::new(&self.namespace, &c.group, &c.data_id)),
            );
            if n < PAGE as usize || u64::from(page_no) * u64::from(PAGE) >= page.total_count {
                return Ok(keys);
            }
            page_no += 1;
        }
    }

    fn emit(&self, e: GroupEvent) -> bool {
        self.out.send(e).is_ok()
    }

    async fn run(
        mut self,
        (_keep, mut membership): (
            mpsc::UnboundedSender<Membership>,
            mpsc::UnboundedReceiver<Membership>,
        ),
        first: Option<Vec<Key>>,
        stop: CancellationToken,
    ) {
        let (ktx, mut changes) = mpsc::unbounded_channel::<Change>();
        for key in first.unwrap_or_default() {
            self.present(key, &ktx).await;
        }
        let every = self.client.shared().opts.group_poll_interval;
        let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let shutdown = self.client.shared().shutdown.clone();
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = shutdown.cancelled() => break,
                m = membership.recv() => match m {
                    Some(Membership::Present(k)) => self.present(k, &ktx).await,
                    Some(Membership::Gone(k)) => {
                        if let Some(m) = self.members.remove(&k) {
                            m.task.abort();
                            if m.present && !self.emit(GroupEvent::Removed(k)) {
                                break;
                            }
                        }
                    }
                    None => break,
                },
                Some(change) = changes.recv() => {
                    let Some(m) = self.members.get_mut(&change.key) else { continue };
                    let event = match change.config {
                        Some(c) if m.present => Some(GroupEvent::Changed(c)),
                        Some(c) => { m.present = true; Some(GroupEvent::Added(c)) }
                        None if m.present => { m.present = false; Some(GroupEvent::Removed(change.key)) }
                        None => None,
                    };
                    if let Some(e) = event {
                        if !self.emit(e) { break; }
                    }
                }
                _ = poll.tick(), if self.server_push.is_none() => match self.list().await {
                    Ok(keys) => {
                        let now: HashSet<&Key> = keys.iter().collect();
                        let gone: Vec<Key> = self.members.keys().filter(|k| !now.contains(k)).cloned().collect();
                        for k in gone {
                            if let Some(m) = self.members.remove(&k) {
                                m.task.abort();
                                if m.present && !self.emit(GroupEvent::Removed(k)) {
                                    return;
                                }
                            }
                        }
                        for k in keys {
                            self.present(k, &ktx).await;
                        }
                    }
                    Err(e) => tracing::warn!(group = %self.group, error = %e, "listing the group failed; next try in {every:?}"),
                },
            }
        }
        for m in self.members.values() {
            m.task.abort();
        }
        if let Some(id) = self.server_push {
            let shared = self.client.shared();
            let reg = lock(&shared.groups).remove(&id);
            if let Some(reg) = reg {
                let req = ConfigFuzzyWatchRequest {
                    watch_type: Some(fuzzy::CANCEL_WATCH.to_string()),
                    received_group_keys: Some(Vec::new()),
                    ..reg.request(false)
                };
                // Best effort: a connection that is gone took the server watch with it.
                if let Err(e) = shared.call("fuzzy_watch", &req).await {
                    tracing::debug!(error = %e, "cancelling the fuzzy watch failed");
                }
            }
        }
    }

    /// A key of the group exists: listen to it (once) and report its content.
    async fn present(&mut self, key: Key, changes: &mpsc::UnboundedSender<Change>) {
        if self.members.contains_key(&key) {
            return;
        }
        let mut watch = match self.client.watch(key.clone()).await {
            Ok(w) => w,
            Err(e) => {
                // Polling lists it again; a pushed key is re-reported on the next connection.
                tracing::warn!(key = %key, error = %e, "cannot watch a key of the group");
                return;
            }
        };
        let initial = watch.initial().cloned();
        let tx = changes.clone();
        let task = tokio::spawn(async move {
            while let Some(c) = watch.next().await {
                if tx.send(c).is_err() {
                    return;
                }
            }
        });
        let present = initial.is_some();
        self.members.insert(key, Member { task, present });
        if let Some(c) = initial {
            // A dropped GroupWatch ends the task at its next select.
            let _watch_dropped = self.out.send(GroupEvent::Added(c));
        }
    }
}
