//! An audited event as an operation reports it ([`Audited`]) and what it is about
//! ([`Subject`]: a key or a change request) — the event type the trail records and the
//! webhooks subscribe to (`crate::webhooks` is fed from the trail, never the other way).

use nacelle_core::audit::AuditAction;
use nacelle_core::change::{ChangeItem, ChangeOp};
use nacelle_core::{md5_hex, ConfigKey, NamespaceId};

/// The target of an operation on `key`: `namespace/group/dataId` (the default namespace
/// as `public`).
pub fn key_target(key: &ConfigKey) -> String {
    let ns = match key.tenant() {
        "" => "public",
        t => t,
    };
    format!("{ns}/{}/{}", key.group(), key.data_id())
}

/// One audited event as an operation reports it.
#[derive(Debug, Clone)]
pub(crate) struct Audited<'a> {
    pub action: AuditAction,
    /// The name of its `tracing` audit line (`config.publish`, `login` …).
    pub log_event: &'a str,
    /// Who: the caller's user unless the event names another (a login's user name).
    pub user: Option<&'a str>,
    pub target: String,
    pub detail: String,
    /// `None`: it succeeded; `Some(reason)`: it was refused or failed.
    pub refused: Option<String>,
    pub change_id: Option<i64>,
    /// What the event is about, for the webhooks (`crate::webhooks`): a key or a change
    /// request. `None`: no webhook event.
    pub subject: Option<Subject>,
}

impl<'a> Audited<'a> {
    pub(crate) fn new(action: AuditAction, log_event: &'a str, target: String) -> Self {
        Audited {
            action,
            log_event,
            user: None,
            target,
            detail: String::new(),
            refused: None,
            change_id: None,
            subject: None,
        }
    }

    /// An event on `key`: its target, and the key as the webhooks' subject.
    pub(crate) fn of_key(action: AuditAction, log_event: &'a str, key: &ConfigKey) -> Self {
        let mut event = Audited::new(action, log_event, key_target(key));
        event.subject = Some(Subject::Key {
            key: key.clone(),
            md5: None,
        });
        event
    }

    /// The md5 the key holds after the event (webhooks' `md5`).
    pub(crate) fn md5(mut self, md5: &str) -> Self {
        if let Some(Subject::Key { md5: m, .. }) = &mut self.subject {
            *m = Some(md5.to_string());
        }
        self
    }

    /// An event of a change request.
    pub(crate) fn change(mut self, change: ChangeSubject) -> Self {
        self.change_id = Some(change.id);
        self.subject = Some(Subject::Change(change));
        self
    }

    pub(crate) fn user(mut self, user: Option<&'a str>) -> Self {
        self.user = user;
        self
    }

    pub(crate) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// The outcome of `result`.
    pub(crate) fn outcome<T, E: std::fmt::Display>(mut self, result: &Result<T, E>) -> Self {
        self.refused = result.as_ref().err().map(|e| e.to_string());
        self
    }

    pub(crate) fn refused(mut self, reason: impl Into<String>) -> Self {
        self.refused = Some(reason.into());
        self
    }
}

/// What an event is about, beside its audit entry.
#[derive(Debug, Clone)]
pub(crate) enum Subject {
    /// A key (publish, remove, gray changes, import, clone), with the md5 it holds after.
    Key { key: ConfigKey, md5: Option<String> },
    /// A change request.
    Change(ChangeSubject),
}

/// A change request as its webhook events show it.
#[derive(Debug, Clone)]
pub(crate) struct ChangeSubject {
    pub(crate) id: i64,
    pub(crate) namespace: NamespaceId,
    pub(crate) title: String,
    /// The request's event: `created`, `opened`, `approved`, `published` …
    pub(crate) event: &'static str,
    /// (group, dataId, op, md5 of the proposed content for a publish).
    pub(crate) keys: Vec<(String, String, &'static str, Option<String>)>,
}

impl ChangeSubject {
    pub(crate) fn new(
        id: i64,
        namespace: &NamespaceId,
        title: &str,
        event: &'static str,
        items: &[ChangeItem],
    ) -> Self {
        let keys = items
            .iter()
            .map(|i| {
                let md5 = match &i.op {
                    ChangeOp::Publish { content, .. } => Some(md5_hex(content.as_bytes())),
                    ChangeOp::Remove => None,
                };
                (i.group.clone(), i.data_id.clone(), i.op.as_str(), md5)
            })
            .collect();
        ChangeSubject {
            id,
            namespace: namespace.clone(),
            title: title.to_string(),
            event,
            keys,
        }
    }
}
