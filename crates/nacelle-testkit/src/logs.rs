//! The log of a test binary, captured in memory: tests that check what the server logs
//! (a header's name but never its value, a validation warning but never the content)
//! install it once per binary and read it back as text.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

/// A log sink shared by every thread of the test binary.
#[derive(Debug, Clone, Default)]
pub struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        let bytes = self.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Installs (on the first call in this binary) a global subscriber with `filter`
/// (`EnvFilter` syntax) that writes into the returned log; later calls return the same log
/// whatever filter they name, so a binary should use one filter.
pub fn capture(filter: &str) -> &'static CapturedLog {
    static LOG: OnceLock<CapturedLog> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = CapturedLog::default();
        let sink = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        // Only fails when the binary already set another subscriber; the log then stays
        // empty and the test reading it fails, saying what it missed.
        let _already_set = tracing::subscriber::set_global_default(subscriber);
        log
    })
}
