//! What operations record in the audit log: the event type ([`Audited`], about a
//! [`Subject`]) and the log that writes its `tracing` line, hands it to its subscriber (the
//! webhooks) and queues it for the appender (the `crate::audit` feature) without waiting.

mod event;
pub(crate) mod log;

pub use event::key_target;
pub(crate) use event::{Audited, ChangeSubject, Subject};
pub use log::QUEUE_CAPACITY;
