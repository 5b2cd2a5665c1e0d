//! The memory request bodies may take: a budget checked before a body is read.
//!
//! A body is read (and held whole) before its handler learns who is asking, so without a
//! bound anyone who reaches the port could make the server hold `max_request_bytes` per
//! connection. Every request that has a body reserves its size first — its
//! `Content-Length`, or frame by frame when it has none — from two pools:
//!
//! - **all bodies** (`max_body_memory`): every request;
//! - **unauthenticated bodies** (`max_unauthenticated_body_memory`), with authentication
//!   on: requests that carry no valid token in a header or the query string (anonymous
//!   ones, and clients that send their credentials in the body: the Node.js client's
//!   `username`/`password` form fields). A caller with a valid token is never held back
//!   by them.
//!
//! A body larger than its pool is refused with 413 at once, one that does not fit now
//! with 503 at once; neither is read. The reservation is given back when the body has been
//! read (or dropped): a held long poll keeps nothing reserved.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// Default of [`crate::HttpOptions::max_body_memory`]: what all bodies being read may
/// take together.
pub const DEFAULT_MAX_BODY_MEMORY: usize = 256 * 1024 * 1024;
/// Default of [`crate::HttpOptions::max_unauthenticated_body_memory`]: what the bodies of
/// requests without a valid header or query token may take together (one publish of the
/// largest config fits).
pub const DEFAULT_MAX_UNAUTHENTICATED_BODY_MEMORY: usize = 32 * 1024 * 1024;

/// One pool of bytes.
#[derive(Debug)]
struct Pool {
    name: &'static str,
    capacity: usize,
    used: AtomicUsize,
}

impl Pool {
    fn new(name: &'static str, capacity: usize) -> Arc<Pool> {
        Arc::new(Pool {
            name,
            capacity,
            used: AtomicUsize::new(0),
        })
    }

    /// Takes `n` bytes if they fit.
    fn try_take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= self.capacity)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Which pools a request's body is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// A valid token in a header or the query string, or authentication off.
    Trusted,
    /// Anything else while authentication is on.
    Unauthenticated,
}

/// Why a body was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Larger than its pool can ever hold (413).
    TooLarge(String),
    /// Does not fit now (503).
    Busy(String),
}

/// The budget of one server (shared by its listeners).
#[derive(Debug, Clone)]
pub struct BodyBudget {
    all: Arc<Pool>,
    unauthenticated: Arc<Pool>,
}

impl BodyBudget {
    /// A budget of `all` bytes for every body being read, of which requests without a
    /// valid header or query token may take `unauthenticated`.
    pub fn new(all: usize, unauthenticated: usize) -> BodyBudget {
        BodyBudget {
            all: Pool::new("max_body_memory", all),
            unauthenticated: Pool::new("max_unauthenticated_body_memory", unauthenticated),
        }
    }

    /// Bytes reserved now in all pools (the first) and by unauthenticated requests.
    pub fn in_use(&self) -> (usize, usize) {
        (
            self.all.used.load(Ordering::Acquire),
            self.unauthenticated.used.load(Ordering::Acquire),
        )
    }

    /// Admits a body of `declared` bytes (its `Content-Length`; `None`: unknown, reserved
    /// as it arrives) in `lane`.
    pub(crate) fn admit(&self, lane: Lane, declared: Option<u64>) -> Result<Reservation, Refusal> {
        let pools = match lane {
            Lane::Trusted => vec![self.all.clone()],
            Lane::Unauthenticated => vec![self.unauthenticated.clone(), self.all.clone()],
        };
        let mut reservation = Reservation { pools, bytes: 0 };
        let Some(declared) = declared else {
            return Ok(reservation);
        };
        let n = usize::try_from(declared).unwrap_or(usize::MAX);
        if let Some(pool) = reservation.pools.iter().find(|p| n > p.capacity) {
            return Err(Refusal::TooLarge(format!(
                "request body of {n} bytes is larger than the server lets such requests \
                 take ({} = {} bytes){}",
                pool.name,
                pool.capacity,
                unauthenticated_hint(lane)
            )));
        }
        if !reservation.grow(n) {
            return Err(Refusal::Busy(busy_message(lane)));
        }
        Ok(reservation)
    }
}

fn unauthenticated_hint(lane: Lane) -> &'static str {
    match lane {
        Lane::Trusted => "",
        Lane::Unauthenticated => "; send the access token in a header or the query string",
    }
}

fn busy_message(lane: Lane) -> String {
    format!(
        "server busy: request bodies being read take the memory the server allows them; \
         retry{}",
        unauthenticated_hint(lane)
    )
}

/// Bytes reserved for one request's body, given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    pools: Vec<Arc<Pool>>,
    bytes: usize,
}

impl Reservation {
    /// Reserves `n` more bytes in every pool, all or none.
    fn grow(&mut self, n: usize) -> bool {
        for (i, pool) in self.pools.iter().enumerate() {
            if !pool.try_take(n) {
                for taken in &self.pools[..i] {
                    taken.give(n);
                }
                return false;
            }
        }
        self.bytes += n;
        true
    }

    /// Gives everything back.
    fn release(&mut self) {
        for pool in &self.pools {
            pool.give(self.bytes);
        }
        self.bytes = 0;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.release();
    }
}

/// The error of a body whose frames no longer fit the budget (a body without a
/// `Content-Length`); the handler answers 503.
#[derive(Debug)]
pub(crate) struct OverBudget(pub(crate) String);

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OverBudget {}

pin_project_lite::pin_project! {
    /// A request body counted in the budget: with a declared length, reserved up front;
    /// without one, frame by frame. The reservation goes once the body ends or is dropped.
    pub(crate) struct Budgeted<B> {
        #[pin]
        inner: B,
        reservation: Option<Reservation>,
        declared: bool,
        lane: Lane,
    }
}

impl<B> Budgeted<B> {
    pub(crate) fn new(inner: B, reservation: Reservation, declared: bool, lane: Lane) -> Self {
        Budgeted {
            inner,
            reservation: Some(reservation),
            declared,
            lane,
        }
    }
}

impl<B> HttpBody for Budgeted<B>
where
    B: HttpBody<Data = bytes::Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = match this.inner.poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(p) => p,
        };
        match polled {
            Some(Ok(frame)) => {
                if !*this.declared {
                    let n = frame.data_ref().map_or(0, bytes::Bytes::len);
                    let fits = this.reservation.as_mut().is_some_and(|r| r.grow(n));
                    if !fits {
                        *this.reservation = None;
                        let message = busy_message(*this.lane);
                        return Poll::Ready(Some(Err(Box::new(OverBudget(message)))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                *this.reservation = None;
                Poll::Ready(Some(Err(e.into())))
            }
            None => {
                *this.reservation = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_admitted_only_while_every_pool_of_its_lane_has_room() {
        let budget = BodyBudget::new(100, 40);
        let a = budget.admit(Lane::Unauthenticated, Some(30));
        assert!(a.is_ok());
        // The unauthenticated pool is full for 30 more; a trusted request still fits.
        assert!(matches!(
            budget.admit(Lane::Unauthenticated, Some(30)),
            Err(Refusal::Busy(_))
        ));
        let b = budget.admit(Lane::Trusted, Some(70));
        assert!(b.is_ok());
        assert_eq!(budget.in_use(), (100, 30));
        assert!(matches!(
            budget.admit(Lane::Trusted, Some(1)),
            Err(Refusal::Busy(_))
        ));
        // Larger than a pool can ever hold: 413, whatever is in use.
        assert!(matches!(
            budget.admit(Lane::Unauthenticated, Some(41)),
            Err(Refusal::TooLarge(_))
        ));
        assert!(matches!(
            budget.admit(Lane::Trusted, Some(101)),
            Err(Refusal::TooLarge(_))
        ));
        drop((a, b));
        assert_eq!(budget.in_use(), (0, 0));
    }

    #[test]
    fn a_growing_reservation_takes_all_pools_or_none() {
        let budget = BodyBudget::new(100, 40);
        let Ok(mut r) = budget.admit(Lane::Unauthenticated, None) else {
            panic!("an unknown length is admitted");
        };
        assert!(r.grow(40));
        assert!(!r.grow(1));
        assert_eq!(budget.in_use(), (40, 40));
        drop(r);
        assert_eq!(budget.in_use(), (0, 0));
    }
}
