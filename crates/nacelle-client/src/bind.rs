//! Typed hot reload: a [`Binding<T>`] holds the current `Arc<T>` parsed from one key or
//! from several layered keys (later layers win, objects merged key by key, the way Spring
//! Cloud Alibaba merges shared and extension configs). A version that fails to parse,
//! deserialize or pass the validator keeps the last good value and is reported
//! ([`Binding::last_error`], [`Binding::errors`]).

use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};

use crate::client::{Client, Watch};
use crate::error::{ClientError, Result};
use crate::format::{merge, Format};
use crate::key::{IntoKey, Key};
use crate::metrics::MetricEvent;
use crate::shared::{lock, Change};

/// A user check of a parsed value: `Err(reason)` rejects the version.
pub type Validator<T> = Arc<dyn Fn(&T) -> std::result::Result<(), String> + Send + Sync>;

/// Why a version of a bound key was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} (md5 {md5}): {reason}")]
pub struct BindError {
    /// The key whose new version was rejected.
    pub key: Key,
    /// That version's md5 (`""`: removed).
    pub md5: String,
    /// The parser's, deserializer's or validator's reason.
    pub reason: String,
}

/// Builds a [`Binding`]: `client.binder::<T>().layer("shared.yaml", Format::Yaml)
/// .layer("app.yaml", Format::Yaml).validate(|c| …).bind().await`.
#[must_use]
pub struct Binder<T> {
    client: Client,
    layers: Vec<(Key, Format)>,
    validator: Option<Validator<T>>,
}

impl<T> std::fmt::Debug for Binder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binder")
            .field("layers", &self.layers)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Send + Sync + 'static> Binder<T> {
    pub(crate) fn new(client: Client) -> Self {
        Binder {
            client,
            layers: Vec::new(),
            validator: None,
        }
    }

    /// Adds a layer; later layers override earlier ones. A layer whose key does not exist
    /// contributes nothing.
    pub fn layer(mut self, key: impl IntoKey, format: Format) -> Self {
        let key = self.client.key(key);
        self.layers.push((key, format));
        self
    }

    /// Rejects versions for which `check` returns `Err(reason)`.
    pub fn validate<F>(mut self, check: F) -> Self
    where
        F: Fn(&T) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        self.validator = Some(Arc::new(check));
        self
    }

    /// Listens to every layer and builds the first value. Fails when a key cannot be read
    /// (no server and no snapshot) or the first value is rejected.
    pub async fn bind(self) -> Result<Binding<T>> {
        if self.layers.is_empty() {
            return Err(ClientError::Config(
                "a binding needs at least one key".into(),
            ));
        }
        let mut watches: Vec<Watch> = Vec::with_capacity(self.layers.len());
        for (key, _) in &self.layers {
            watches.push(self.client.watch(key.clone()).await?);
        }
        let mut layers = Layers {
            formats: self.layers.iter().map(|(_, f)| *f).collect(),
            good: vec![None; self.layers.len()],
            validator: self.validator,
        };
        let mut first = None;
        for (i, w) in watches.iter().enumerate() {
            let change = Change {
                key: w.key().clone(),
                config: w.initial().cloned(),
            };
            match layers.offer(i, &change) {
                Ok(v) => first = Some(v),
                Err(e) => return Err(ClientError::Invalid(e.to_string())),
            }
        }
        let first = first.ok_or_else(|| ClientError::Config("no layer".into()))?;
        let (errors, _) = broadcast::channel(64);
        let (version, _) = watch::channel(1u64);
        let state = Arc::new(State {
            current: RwLock::new(first),
            last_error: Mutex::new(None),
            errors,
            version,
            keys: self.layers.iter().map(|(k, _)| k.clone()).collect(),
        });
        let task_state = Arc::clone(&state);
        let metrics = self.client.shared().opts.metrics.clone();
        let streams = futures::stream::select_all(
            watches
                .into_iter()
                .enumerate()
                .map(|(i, w)| w.map(move |c| (i, c)).boxed()),
        );
        let task = tokio::spawn(async move {
            let mut streams = streams;
            while let Some((i, change)) = streams.next().await {
                match layers.offer(i, &change) {
                    Ok(value) => {
                        match task_state.current.write() {
                            Ok(mut cur) => *cur = value,
                            Err(p) => *p.into_inner() = value,
                        }
                        *lock(&task_state.last_error) = None;
                        task_state.version.send_modify(|v| *v += 1);
                        metrics.record(MetricEvent::Reloaded { key: &change.key });
                        tracing::info!(key = %change.key, "reloaded");
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "rejected a new version; keeping the last good value");
                        metrics.record(MetricEvent::Rejected { key: &change.key });
                        *lock(&task_state.last_error) = Some(e.clone());
                        // No receiver: nobody listens to the error stream.
                        let _unheard = task_state.errors.send(e);
                    }
                }
            }
        });
        Ok(Binding {
            state,
            task,
            client: self.client,
        })
    }
}

/// Each layer's last accepted value tree, and how to build a `T` from them.
struct Layers<T> {
    formats: Vec<Format>,
    good: Vec<Option<Value>>,
    validator: Option<Validator<T>>,
}

impl<T> Layers<T> {
    /// Takes layer `i`'s new version: the merged value when it is accepted.
    fn offer(&mut self, i: usize, change: &Change) -> std::result::Result<Arc<T>, BindError>
    where
        T: DeserializeOwned,
    {
        let reject = |reason: String| BindError {
            key: change.key.clone(),
            md5: change
                .config
                .as_ref()
                .map(|c| c.md5.clone())
                .unwrap_or_default(),
            reason,
        };
        let tree = match &change.config {
            Some(c) => Some(self.formats[i].parse(&c.content).map_err(reject)?),
            None => None,
        };
        let mut candidate = self.good.clone();
        candidate[i] = tree;
        let mut merged = Value::Object(Map::new());
        for v in candidate.iter().flatten() {
            merge(&mut merged, v.clone());
        }
        let value: T = serde_json::from_value(merged)
            .map_err(|e| reject(format!("does not fit the bound type: {e}")))?;
        if let Some(check) = &self.validator {
            check(&value).map_err(|r| reject(format!("rejected by the validator: {r}")))?;
        }
        self.good = candidate;
        Ok(Arc::new(value))
    }
}

struct State<T> {
    current: RwLock<Arc<T>>,
    last_error: Mutex<Option<BindError>>,
    errors: broadcast::Sender<BindError>,
    version: watch::Sender<u64>,
    keys: Vec<Key>,
}

/// A typed value kept current with its keys. Dropping it stops listening for it.
pub struct Binding<T> {
    state: Arc<State<T>>,
    task: tokio::task::JoinHandle<()>,
    client: Client,
}

impl<T> std::fmt::Debug for Binding<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("keys", &self.state.keys)
            .field("version", &*self.state.version.borrow())
            .finish_non_exhaustive()
    }
}

impl<T> Drop for Binding<T> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T> Binding<T> {
    /// The current good value.
    pub fn get(&self) -> Arc<T> {
        match self.state.current.read() {
            Ok(v) => Arc::clone(&v),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// How many good values there have been (1 after `bind`).
    pub fn version(&self) -> u64 {
        *self.state.version.borrow()
    }

    /// Wakes at every new good value: `rx.changed().await`.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.state.version.subscribe()
    }

    /// Why the latest version was rejected, until a good one arrives.
    pub fn last_error(&self) -> Option<BindError> {
        lock(&self.state.last_error).clone()
    }

    /// Every rejection from now on.
    pub fn errors(&self) -> broadcast::Receiver<BindError> {
        self.state.errors.subscribe()
    }

    /// The bound keys, in layer order.
    pub fn keys(&self) -> &[Key] {
        &self.state.keys
    }

    /// Whether some layer's value has not been confirmed by a server yet (it came from
    /// the snapshot directory).
    pub fn is_stale(&self) -> bool {
        self.state.keys.iter().any(|k| !self.client.is_fresh(k))
    }
}

impl Client {
    /// Binds one key in `format` to a `T`.
    pub async fn bind<T>(&self, key: impl IntoKey, format: Format) -> Result<Binding<T>>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        self.binder::<T>().layer(key, format).bind().await
    }

    /// A builder of a layered binding with an optional validator.
    pub fn binder<T>(&self) -> Binder<T>
    where
        T: DeserializeOwned + Send + Sync + 'static,
    {
        Binder::new(self.clone())
    }
}
