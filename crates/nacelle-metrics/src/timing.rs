//! The store time of the request being served, so that a slow request can be logged with
//! its cause: time in the database, or time spent elsewhere (waiting for a key's write
//! lock, the runtime, the content check).
//!
//! An adapter runs each request inside [`scope`]; the service adds the duration of each
//! store call it makes with [`add_store_time`] (a no-op outside a scope: the change-log
//! follower, the cache load). Both run in the request's task, so a task-local cell is
//! enough: no lock, no allocation.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

struct Request {
    store_nanos: Cell<u64>,
}

tokio::task_local! {
    static REQUEST: Request;
}

/// What a request's scope gathered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gathered {
    /// Time spent in store calls.
    pub store: Duration,
}

/// Runs `fut` as one request (a fresh store-time counter); returns its output and what it
/// gathered.
pub async fn scope<F: Future>(fut: F) -> (F::Output, Gathered) {
    let fresh = Request {
        store_nanos: Cell::new(0),
    };
    REQUEST
        .scope(fresh, async move {
            let out = fut.await;
            let gathered = REQUEST
                .try_with(|r| Gathered {
                    store: Duration::from_nanos(r.store_nanos.get()),
                })
                .unwrap_or(Gathered {
                    store: Duration::ZERO,
                });
            (out, gathered)
        })
        .await
}

/// Adds `d` to the store time of the current request, if any.
pub fn add_store_time(d: Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    // Outside a request scope there is nobody to tell: not an error.
    let _outside_a_request =
        REQUEST.try_with(|r| r.store_nanos.set(r.store_nanos.get().saturating_add(nanos)));
}

/// Why a slow request was slow, from its total time and its store time.
pub fn slow_cause(total: Duration, store: Duration) -> &'static str {
    if store * 2 >= total && !store.is_zero() {
        "store"
    } else {
        "queueing"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn store_time_is_summed_inside_a_scope_only() {
        add_store_time(Duration::from_millis(5));
        let ((), gathered) = scope(async {
            add_store_time(Duration::from_millis(2));
            tokio::task::yield_now().await;
            add_store_time(Duration::from_millis(3));
        })
        .await;
        let store = gathered.store;
        assert_eq!(store, Duration::from_millis(5));
        assert_eq!(
            slow_cause(Duration::from_millis(8), store),
            "store",
            "5 of 8 ms in the store"
        );
        assert_eq!(slow_cause(Duration::from_millis(20), store), "queueing");
        assert_eq!(slow_cause(Duration::ZERO, Duration::ZERO), "queueing");
    }
}
