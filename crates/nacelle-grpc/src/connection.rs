//! A registered connection: who the client is, its outbound stream, the keys it listens to
//! and its pending pushes.
//!
//! The hub calls [`KeyListener::notify`] on the publishing task; that path only takes a
//! short lock on the pending table and queues the framed push on the stream (bounded by
//! the unanswered-request limit), so a slow client never holds up a publish or another
//! connection. Locks are `parking_lot` mutexes: they are held for a few map operations and
//! never across an `.await`.

use std::collections::HashSet;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures::task::AtomicWaker;
use nacelle_core::{Caller, ConfigKey, CoreError};
use nacelle_metrics::Metrics;
use nacelle_proto::config::ConfigChangeNotifyRequest;
use nacelle_proto::connection::{ClientDetectionRequest, ConnectResetRequest};
use nacelle_proto::fuzzy::{
    self, ConfigFuzzyWatchChangeNotifyRequest, ConfigFuzzyWatchSyncRequest, FuzzyWatchContext,
};
use nacelle_proto::Payload;
use nacelle_service::{
    ChangeEvent, GroupChange, GroupSubscriber, PatternError, PatternWatched, Subscriber, Watch,
    WatchItem,
};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::codec::{self, Code, Status};
use crate::push::{PushPolicy, PushTable};
use crate::rpc::{Outbound, Sent};
use crate::stats::{self, GrpcStats};
use crate::wire;

/// Who the client is: what it said in `ConnectionSetupRequest`, and the [`Caller`] every
/// request of the connection acts as.
#[derive(Debug, Clone)]
pub(crate) struct ConnMeta {
    /// The caller's IP as text: the socket's IP, or the reported `metadata.clientIp`
    /// where the trusted-proxy rule allows it. Used for the per-IP limit and logs.
    pub client_ip: Arc<str>,
    /// The caller of every request on this connection (IP, app name, labels).
    pub caller: Caller,
    pub remote: SocketAddr,
    /// The `AppName` label, `-` when absent (as Nacos records it).
    pub app_name: String,
    pub client_version: String,
    pub tenant: String,
}

/// A millisecond clock advanced by the push sweeper, so that the per-message paths
/// (activity stamps, push deadlines) read one atomic instead of the system clock.
#[derive(Debug)]
pub(crate) struct CoarseClock {
    epoch: Instant,
    ms: AtomicU64,
}

impl CoarseClock {
    pub fn new() -> Self {
        CoarseClock {
            epoch: Instant::now(),
            ms: AtomicU64::new(0),
        }
    }

    /// Reads the system clock and advances the coarse one; returns the instant read.
    pub fn tick(&self) -> Instant {
        let now = Instant::now();
        let ms = now.saturating_duration_since(self.epoch).as_millis() as u64;
        self.ms.fetch_max(ms, Ordering::Relaxed);
        now
    }

    /// Milliseconds since the epoch, as of the last tick.
    pub fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::Relaxed)
    }

    /// The instant of the last tick.
    pub fn now(&self) -> Instant {
        self.epoch + Duration::from_millis(self.now_ms())
    }
}

/// The close signal of one bi-stream: set once, awaited by its session task only.
/// Checking it is an atomic load and waiting registers the waker without a lock, so the
/// session pays nothing for it on every message it reads.
#[derive(Debug, Default)]
pub(crate) struct Closer {
    closed: AtomicBool,
    waker: AtomicWaker,
}

impl Closer {
    /// Sets the signal; returns whether it was already set.
    pub fn close(&self) -> bool {
        let was = self.closed.swap(true, Ordering::AcqRel);
        self.waker.wake();
        was
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Completes once the signal is set. Meant for one waiting task at a time.
    pub async fn wait(&self) {
        poll_fn(|cx| {
            if self.is_closed() {
                return Poll::Ready(());
            }
            self.waker.register(cx.waker());
            if self.is_closed() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

/// The status a stream ends with when the server stops: `UNAVAILABLE`, what gRPC says of
/// a server that is going away (clients retry), and what a Java Nacos server's
/// `shutdownNow()` leaves its clients with.
pub(crate) fn shutdown_status() -> Status {
    Status::new(Code::Unavailable, "the server is shutting down")
}

/// Why a connection was closed by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// It left `outbound_queue` server requests unanswered (it stopped reading).
    Slow,
    /// A push failed `push_max_tries` times.
    Unacked,
    /// It did not answer an idle probe.
    Idle,
    /// The same TCP connection registered again.
    Replaced,
    /// The server is stopping.
    Shutdown,
}

/// A registered connection. Shared by the registry, its session task and (weakly) its
/// key listeners in the service's watch.
pub(crate) struct Connection {
    pub id: Arc<str>,
    pub meta: ConnMeta,
    out: Arc<Outbound>,
    closer: Arc<Closer>,
    /// Milliseconds since the clock's epoch of the last message received on this
    /// connection (unary or stream); the idle prober reads it.
    last_active_ms: AtomicU64,
    clock: Arc<CoarseClock>,
    pending: Mutex<PushTable>,
    /// The server's list of connections with pushes pending, which this one joins when it
    /// sends a push.
    unacked: Arc<Unacked>,
    /// The keys this connection listens to: one service watch, which owns the key limit.
    watch: Watch,
    /// The outstanding idle probe: its request id and the instant it was sent.
    probe: Mutex<Option<(String, u64)>>,
    policy: PushPolicy,
    stats: GrpcStats,
    /// The server's metrics (push latency).
    metrics: Metrics,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("client_ip", &self.meta.client_ip)
            .field("closed", &self.closer.is_closed())
            .finish()
    }
}

/// Everything a connection needs from the server besides its own state.
#[derive(Debug)]
pub(crate) struct ConnDeps {
    /// The connection's watch, opened for its caller.
    pub watch: Watch,
    pub policy: PushPolicy,
    pub stats: GrpcStats,
    pub clock: Arc<CoarseClock>,
    pub metrics: Metrics,
    pub unacked: Arc<Unacked>,
}

impl Connection {
    pub fn new(
        id: Arc<str>,
        meta: ConnMeta,
        out: Arc<Outbound>,
        closer: Arc<Closer>,
        deps: ConnDeps,
    ) -> Self {
        let now = deps.clock.now_ms();
        Connection {
            id,
            meta,
            out,
            closer,
            last_active_ms: AtomicU64::new(now),
            clock: deps.clock,
            pending: Mutex::new(PushTable::default()),
            unacked: deps.unacked,
            watch: deps.watch,
            probe: Mutex::new(None),
            policy: deps.policy,
            stats: deps.stats,
            metrics: deps.metrics,
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Records that the client just sent something.
    pub fn touch(&self) {
        self.last_active_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// Whether the server closed this connection.
    pub fn is_closed(&self) -> bool {
        self.closer.is_closed()
    }

    /// Closes the connection now: its stream ends, its session unregisters it.
    pub fn close(&self, reason: CloseReason) {
        if self.closer.close() {
            return; // already closed
        }
        let c = self.stats.counters();
        match reason {
            CloseReason::Slow => stats::inc(&c.dropped_slow),
            CloseReason::Unacked => stats::inc(&c.dropped_unacked),
            CloseReason::Idle => stats::inc(&c.dropped_idle),
            CloseReason::Replaced | CloseReason::Shutdown => {}
        }
        if reason == CloseReason::Shutdown {
            // Every connection at once: the server logs the count (see `server`).
            tracing::debug!(conn = %self.id, client_ip = %self.meta.client_ip, ?reason, "closing gRPC connection");
        } else {
            tracing::info!(conn = %self.id, client_ip = %self.meta.client_ip, ?reason, "closing gRPC connection");
        }
    }

    /// Sends a payload to the client.
    pub fn send(&self, p: &Payload) {
        self.send_framed(codec::encode(p));
    }

    /// Sends an already framed message; a client that leaves too many requests unanswered
    /// cannot keep up: it is disconnected.
    fn send_framed(&self, frame: Bytes) {
        match self.out.send(frame) {
            Sent::Queued | Sent::Closed => {}
            Sent::Full => self.close(CloseReason::Slow),
        }
    }

    /// Sends `ConnectResetRequest` then ends the stream, so the client reconnects
    /// (elsewhere). Only for a connection refused at registration: a Java client that is
    /// not yet running on it ignores both, and reconnects on its own.
    pub fn reset(&self, request_id: &str) {
        self.send(&wire::message(&ConnectResetRequest::new(request_id)));
        self.out.finish(&Status::ok());
    }

    /// Ends the stream with `UNAVAILABLE` because the server is stopping, and closes the
    /// connection: one signal, on which every client reconnects once. No
    /// `ConnectResetRequest` before it: the Java client takes a reset and the end of the
    /// stream as two reconnect signals (see `server`).
    pub fn end_for_shutdown(&self) {
        self.out.finish(&shutdown_status());
        self.close(CloseReason::Shutdown);
    }

    // ------------------------------------------------------------ listening

    /// Listens to each `(key, tenant as the client spelled it, md5)` (pushes echo the
    /// tenant); listening again to a key updates its md5. Returns the keys whose md5
    /// already differs. All or nothing: over the key limit, nothing changes.
    pub fn listen(
        self: &Arc<Self>,
        requester: &Caller,
        items: Vec<(ConfigKey, &str, String)>,
    ) -> Result<Vec<ConfigKey>, CoreError> {
        let items = items
            .into_iter()
            .map(|(key, tenant_as_sent, md5)| WatchItem {
                key,
                md5,
                subscriber: Arc::new(KeyListener {
                    conn: Arc::downgrade(self),
                    tenant: tenant_as_sent.into(),
                }),
            })
            .collect();
        let added = self.watch.add(requester, items)?;
        stats::add(&self.stats.counters().listened_keys, added.new_keys as u64);
        Ok(added.changed)
    }

    /// Stops listening to `key`.
    pub fn unlisten(&self, key: &ConfigKey) {
        if self.watch.remove(key) {
            stats::sub(&self.stats.counters().listened_keys, 1);
        }
    }

    /// Drops every listen and pending push (the connection is gone).
    pub fn release(&self) {
        let dropped = self.watch.clear();
        stats::sub(&self.stats.counters().listened_keys, dropped as u64);
        self.pending.lock().clear();
    }

    // ------------------------------------------------------------ group patterns

    /// Watches the keys `pattern` covers (Nacos 3.0 fuzzy watch): the service lists them
    /// and this connection sends the sync batches before returning, then a
    /// `ConfigFuzzyWatchChangeNotifyRequest` per later change. `received` are the keys the
    /// client holds; `initializing` asks for the closing `FINISH_FUZZY_WATCH_INIT_NOTIFY`.
    pub fn watch_pattern(
        self: &Arc<Self>,
        requester: &Caller,
        pattern: &str,
        received: &HashSet<ConfigKey>,
        initializing: bool,
    ) -> Result<PatternWatched, PatternError> {
        let tenant = pattern
            .split(fuzzy::PATTERN_SPLITTER)
            .next()
            .unwrap_or_default();
        let listener = Arc::new(PatternListener {
            conn: Arc::downgrade(self),
            pattern: pattern.into(),
            tenant: tenant.into(),
            initializing,
        });
        self.watch
            .watch_pattern(requester, pattern, received, listener)
    }

    /// Stops watching `pattern`.
    pub fn unwatch_pattern(&self, pattern: &str) -> Result<bool, CoreError> {
        self.watch.unwatch_pattern(pattern)
    }

    /// Sends a server request of a pattern watch (sync batch or change). These are not
    /// retried: a client whose stream breaks watches again on its next connection, with
    /// the keys it holds, and gets the difference. (Not counted in `pushes_sent`, which
    /// counts change pushes against their acks.)
    fn send_fuzzy<M: nacelle_proto::Message>(&self, msg: &M) {
        if self.is_closed() {
            return;
        }
        self.send(&wire::message(msg));
    }

    // ------------------------------------------------------------ pushes

    /// Pushes a change of a listened key.
    fn push_change(self: &Arc<Self>, event: &Arc<ChangeEvent>, tenant: &str) {
        if self.is_closed() {
            return;
        }
        // The request id is the change's sequence number: its acks are matched by number.
        let encode = || {
            codec::encode(&wire::message(&ConfigChangeNotifyRequest::new(
                event.seq.to_string(),
                event.key.data_id(),
                event.key.group(),
                tenant,
            )))
        };
        // The common case: the client names the namespace as we store it, and every such
        // connection shares one framed message.
        let (frame, own_frame) = if tenant == event.key.tenant() {
            (event.encoded.get_or_init(encode).clone(), None)
        } else {
            let own = encode();
            (own.clone(), Some(own))
        };
        let list = {
            let mut pending = self.pending.lock();
            pending.sent(event, own_frame, self.clock.now() + self.policy.ack_timeout);
            pending.list()
        };
        if list {
            self.unacked.list(self.clone());
        }
        stats::inc(&self.stats.counters().pushes_sent);
        self.send_framed(frame);
    }

    /// A response arrived on the stream (its JSON body): the ack of a push or of a probe,
    /// matched by its `requestId`. A response without one is ignored.
    ///
    /// The id is first read quickly ([`wire::request_id_hint`]); only when that is not a
    /// push this connection waits for is the body parsed as JSON. A hint can only ever
    /// match a push of this very connection, so a client sending odd JSON can at worst ack
    /// its own pushes — as it could with a plain ack.
    pub fn on_response(&self, body: &[u8]) {
        let hint = wire::request_id_hint(body);
        if let Some(seq) = hint.and_then(|id| id.parse::<u64>().ok()) {
            if self.ack_push(seq) {
                return;
            }
        }
        let Some(id) = wire::request_id_of(body) else {
            return;
        };
        if hint != Some(id.as_str()) {
            if let Ok(seq) = id.parse::<u64>() {
                if self.ack_push(seq) {
                    return;
                }
            }
        }
        self.out.answered();
        let mut probe = self.probe.lock();
        if probe.as_ref().map(|(p, _)| p.as_str()) == Some(id.as_str()) {
            *probe = None;
        }
    }

    /// Acks the push `seq` if it is pending; returns whether it was.
    fn ack_push(&self, seq: u64) -> bool {
        let Some(committed_at) = self.pending.lock().ack(seq) else {
            return false;
        };
        self.out.answered();
        stats::inc(&self.stats.counters().push_acks);
        self.metrics.push_acked(committed_at.elapsed());
        true
    }

    /// Handles pushes due at `now`: resends retries; gives up on the connection after too
    /// many failures. Called by the push sweeper ([`Unacked::sweep`]) on every tick while
    /// pushes are pending; returns whether any still is (the connection stays listed).
    fn fire_due_pushes(&self, now: Instant) -> bool {
        let due = {
            let mut pending = self.pending.lock();
            if self.is_closed() {
                pending.clear();
            }
            if !pending.stays_listed() {
                return false;
            }
            pending.fire_due(now, &self.policy)
        };
        if due.give_up {
            self.close(CloseReason::Unacked);
            return true;
        }
        let c = self.stats.counters();
        for p in due.resend {
            stats::inc(&c.push_retries);
            stats::inc(&c.pushes_sent);
            self.send_framed(p);
        }
        true
    }

    // ------------------------------------------------------------ probes

    /// Probes an idle connection, or drops it if an earlier probe went unanswered for
    /// `timeout_ms`. Called by the prober.
    pub fn probe_if_idle(
        &self,
        idle_after_ms: u64,
        timeout_ms: u64,
        request_id: impl FnOnce() -> String,
    ) {
        let now = self.now_ms();
        let last = self.last_active_ms.load(Ordering::Relaxed);
        let mut probe = self.probe.lock();
        if let Some((_, sent)) = probe.as_ref() {
            if last >= *sent {
                *probe = None; // it spoke since: alive
            } else if now.saturating_sub(*sent) >= timeout_ms {
                drop(probe);
                self.close(CloseReason::Idle);
                return;
            } else {
                return;
            }
        }
        if now.saturating_sub(last) >= idle_after_ms {
            let id = request_id();
            let msg = wire::message(&ClientDetectionRequest::new(id.as_str()));
            *probe = Some((id, now));
            drop(probe);
            self.send(&msg);
        }
    }
}

/// Request ids of pattern pushes (`fz-<n>`), apart from change pushes (the event's sequence
/// number) and probes.
static FUZZY_REQUEST_ID: AtomicU64 = AtomicU64::new(1);

fn fuzzy_request_id() -> String {
    format!("fz-{}", FUZZY_REQUEST_ID.fetch_add(1, Ordering::Relaxed))
}

/// The subscriber of one (connection, pattern): the pattern and its namespace part as the
/// client wrote them (group keys carry that spelling), and a weak reference to the
/// connection.
struct PatternListener {
    conn: Weak<Connection>,
    pattern: Arc<str>,
    tenant: Arc<str>,
    initializing: bool,
}

impl PatternListener {
    fn group_key(&self, key: &ConfigKey) -> String {
        fuzzy::group_key(key.data_id(), key.group(), &self.tenant)
    }
}

impl GroupSubscriber for PatternListener {
    /// Nacos's batches: `nacos.config.push.batchSize` (20) keys each, `ADD_CONFIG` for a
    /// key the client lacks, `DELETE_CONFIG` for one it holds that is gone; `totalBatch` /
    /// `currentBatch` from 1; after an initializing request, a closing
    /// `FINISH_FUZZY_WATCH_INIT_NOTIFY` (Nacos sends it once every batch is acked; here it
    /// follows them on the stream, which keeps their order).
    fn sync(&self, present: &[ConfigKey], gone: &[ConfigKey]) {
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        let contexts: Vec<FuzzyWatchContext> = present
            .iter()
            .map(|k| (k, fuzzy::ADD_CONFIG))
            .chain(gone.iter().map(|k| (k, fuzzy::DELETE_CONFIG)))
            .map(|(k, t)| FuzzyWatchContext {
                group_key: self.group_key(k),
                changed_type: t.to_string(),
            })
            .collect();
        let sync_type = if self.initializing {
            fuzzy::INIT_NOTIFY
        } else {
            fuzzy::DIFF_SYNC_NOTIFY
        };
        let batches: Vec<&[FuzzyWatchContext]> = contexts.chunks(fuzzy::SYNC_BATCH_SIZE).collect();
        let total = batches.len() as u32;
        for (i, batch) in batches.into_iter().enumerate() {
            conn.send_fuzzy(&ConfigFuzzyWatchSyncRequest::batch(
                fuzzy_request_id(),
                &self.pattern,
                sync_type,
                batch.to_vec(),
                total,
                i as u32 + 1,
            ));
        }
        if self.initializing {
            conn.send_fuzzy(&ConfigFuzzyWatchSyncRequest::finish(
                fuzzy_request_id(),
                &self.pattern,
            ));
        }
    }

    fn changed(&self, key: &ConfigKey, change: GroupChange) {
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        let change_type = match change {
            GroupChange::Added => fuzzy::ADD_CONFIG,
            GroupChange::Changed => fuzzy::CONFIG_CHANGED,
            GroupChange::Removed => fuzzy::DELETE_CONFIG,
        };
        conn.send_fuzzy(&ConfigFuzzyWatchChangeNotifyRequest::new(
            fuzzy_request_id(),
            self.group_key(key),
            change_type,
        ));
    }
}

/// The connections with pushes pending (awaiting an ack or a retry): what the push
/// sweeper (`server::sweep_pushes`) visits on each pass, instead of every registered
/// connection. A connection joins when it sends a push while not listed and leaves at the
/// first pass that finds nothing pending ([`PushTable::stays_listed`]), so an idle
/// connection costs the sweeper nothing, however many are registered.
#[derive(Debug, Default)]
pub(crate) struct Unacked {
    conns: Mutex<Vec<Arc<Connection>>>,
}

impl Unacked {
    fn list(&self, conn: Arc<Connection>) {
        self.conns.lock().push(conn);
    }

    /// One pass of the sweeper: resends or gives up what is due at `now` on every listed
    /// connection (outside the list's lock, which pushes take), keeps those that still
    /// have pushes pending, and records in `stats` how many they are
    /// (`unacked_connections`).
    pub fn sweep(&self, now: Instant, stats: &GrpcStats) {
        let listed = std::mem::take(&mut *self.conns.lock());
        let still: Vec<Arc<Connection>> = listed
            .into_iter()
            .filter(|c| c.fire_due_pushes(now))
            .collect();
        let mut conns = self.conns.lock();
        conns.extend(still);
        stats
            .counters()
            .unacked_connections
            .store(conns.len() as u64, Ordering::Relaxed);
    }
}

/// The watch's subscriber for one (connection, key): holds the tenant as the client
/// spelled it, and only a weak reference to the connection so the service never keeps one
/// alive.
struct KeyListener {
    conn: Weak<Connection>,
    tenant: Arc<str>,
}

impl Subscriber for KeyListener {
    fn notify(&self, event: &Arc<ChangeEvent>) {
        if let Some(conn) = self.conn.upgrade() {
            conn.push_change(event, &self.tenant);
        }
    }
}
