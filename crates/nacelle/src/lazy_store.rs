//! A store that becomes available once the database could be opened. Until then every call
//! fails with `StoreError::Unavailable`, so the server can start, answer liveness and stay
//! not-ready while it retries the connection in the background.
//!
//! [`Lazy`] is a store layer: `nacelle_core::store::Layered` forwards every store method to
//! it, generated from the one list of methods, so none can be left out.

use std::sync::{Arc, OnceLock};

use nacelle_core::store::{Call, ConfigStore, Layered, StoreFuture, StoreLayer};
use nacelle_core::StoreError;

/// The store the service sees: every call goes to the real store once [`Lazy::set`] was
/// called.
pub type LazyStore = Layered<Lazy>;

/// Delegates to the real store once [`Lazy::set`] was called.
#[derive(Debug)]
pub struct Lazy {
    inner: OnceLock<Arc<dyn ConfigStore>>,
    /// The database as shown in errors (password masked).
    display: String,
}

impl Lazy {
    /// A store not connected yet to the database shown as `display`.
    pub fn store(display: String) -> LazyStore {
        Layered(Lazy {
            inner: OnceLock::new(),
            display,
        })
    }

    /// Installs the opened store. Only the first store counts: the service may already be
    /// reading from it, so a later one is dropped (with a warning; `start` opens the
    /// database either at once or in the background, never both, so it does not happen).
    pub fn set(&self, store: Arc<dyn ConfigStore>) {
        if self.inner.set(store).is_err() {
            tracing::warn!(db = %self.display, "database already connected; a second connection was dropped");
        }
    }
}

impl StoreLayer for Lazy {
    fn backend(&self) -> &'static str {
        self.inner
            .get()
            .map(|s| s.backend())
            .unwrap_or("connecting")
    }

    fn run<'a, T, F>(&'a self, _call: Call, op: F) -> StoreFuture<'a, T>
    where
        T: Send + 'a,
        F: FnOnce(&'a dyn ConfigStore) -> StoreFuture<'a, T> + Send + 'a,
    {
        match self.inner.get() {
            Some(store) => op(store.as_ref()),
            None => {
                let e = StoreError::Unavailable(format!("not connected to {} yet", self.display));
                Box::pin(std::future::ready(Err(e)))
            }
        }
    }
}
