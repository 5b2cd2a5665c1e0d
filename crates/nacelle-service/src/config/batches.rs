//! The shape the audit appender and the webhook enqueuer share: a bounded in-memory queue
//! drained in batches, each written to the database with retries for a bounded time, and
//! flushed once when the server stops serving.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The first retry's delay; each next one doubles, up to [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(100);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(5);

/// Takes what `rx` holds in batches of up to `max` and hands each to `write`, until the
/// queue closes, or `finish` is cancelled: then what is queued is written (in batches)
/// and it returns.
pub(crate) async fn drain<T, W, Fut>(
    mut rx: mpsc::Receiver<T>,
    max: usize,
    finish: &CancellationToken,
    mut write: W,
) where
    W: FnMut(Vec<T>) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut batch = Vec::with_capacity(max);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, max) => {
                if n == 0 {
                    return;
                }
                write(std::mem::take(&mut batch)).await;
            }
            _ = finish.cancelled() => {
                while let Ok(item) = rx.try_recv() {
                    batch.push(item);
                    if batch.len() >= max {
                        write(std::mem::take(&mut batch)).await;
                    }
                }
                if !batch.is_empty() {
                    write(batch).await;
                }
                return;
            }
        }
    }
}

/// Runs `attempt` until it succeeds, retrying with backoff (100 ms doubling to 5 s, each
/// retry logged with `what`) for up to `bound` — only once after `finish` was cancelled.
/// The last error when it gives up.
pub(crate) async fn with_retry<T, E, A, Fut>(
    what: &str,
    bound: Duration,
    finish: &CancellationToken,
    mut attempt: A,
) -> Result<T, E>
where
    E: Display,
    A: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut wait = FIRST_RETRY_WAIT;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() >= bound || finish.is_cancelled() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "{what} failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_RETRY_WAIT);
            }
        }
    }
}
