//! The webhooks' feed: the audit trail hands every event that happened (outcome `ok`)
//! and names a subject to [`WebhookState`] (an [`AuditSubscriber`]); each matching enabled
//! hook gets one delivery on the bounded queue, without waiting.

use nacelle_core::audit::AuditEvent;
use nacelle_core::webhook::{NewDelivery, EVENT_KINDS};
use nacelle_core::NamespaceId;
use serde_json::{json, Map, Value};

use crate::config::audit::log::AuditSubscriber;
use crate::config::audit::Subject;
use crate::webhooks::state::{LiveHook, WebhookState};

impl LiveHook {
    /// Whether the hook receives `kind` events of `subject`.
    fn wants(&self, kind: &str, subject: &Subject) -> bool {
        if !self.hook.enabled || !self.hook.wants(kind) {
            return false;
        }
        match subject {
            Subject::Key { key, .. } => self.matches(key.namespace(), key.group(), key.data_id()),
            Subject::Change(c) => c
                .keys
                .iter()
                .any(|(g, d, _, _)| self.matches(&c.namespace, g, d)),
        }
    }
}

/// The event kind of an audited event about `subject`, if webhooks carry it.
fn kind_of(action: &str, subject: &Subject) -> Option<String> {
    let kind = match subject {
        Subject::Key { .. } => action.to_string(),
        Subject::Change(c) => format!("change-{}", c.event),
    };
    EVENT_KINDS.contains(&kind.as_str()).then_some(kind)
}

pub(super) fn namespace_label(ns: &NamespaceId) -> &str {
    match ns.as_str() {
        "" => "public",
        ns => ns,
    }
}

/// The JSON body of an event (docs/webhooks.md, "The body").
fn body_of(event_id: &str, kind: &str, e: &AuditEvent, subject: &Subject) -> String {
    let mut body = Map::new();
    body.insert("id".into(), json!(event_id));
    body.insert("kind".into(), json!(kind));
    body.insert("time".into(), json!(e.time_ms));
    match subject {
        Subject::Key { key, md5 } => {
            body.insert(
                "namespaceId".into(),
                json!(namespace_label(key.namespace())),
            );
            body.insert("group".into(), json!(key.group()));
            body.insert("dataId".into(), json!(key.data_id()));
            body.insert("md5".into(), json!(md5));
        }
        Subject::Change(c) => {
            body.insert("namespaceId".into(), json!(namespace_label(&c.namespace)));
            let keys: Vec<Value> = c
                .keys
                .iter()
                .map(|(g, d, op, md5)| json!({"group": g, "dataId": d, "op": op, "md5": md5}))
                .collect();
            body.insert(
                "change".into(),
                json!({"id": c.id, "title": c.title, "event": c.event, "keys": keys}),
            );
        }
    }
    body.insert("changeId".into(), json!(e.change_id));
    body.insert("user".into(), json!(e.user));
    body.insert("address".into(), json!(e.address));
    body.insert("protocol".into(), json!(e.protocol));
    body.insert("detail".into(), json!(e.detail));
    Value::Object(body).to_string()
}

impl AuditSubscriber for WebhookState {
    /// Queues a delivery of the event `e` about `subject` for every enabled hook that
    /// wants it, without waiting; a full queue drops it (logged, counted).
    fn recorded(&self, e: &AuditEvent, subject: Subject) {
        let hooks = self.hooks.read().clone();
        if hooks.is_empty() {
            return;
        }
        let Some(kind) = kind_of(&e.action, &subject) else {
            return;
        };
        let mut body = None;
        let event_id = uuid::Uuid::new_v4().to_string();
        for h in hooks.iter().filter(|h| h.wants(&kind, &subject)) {
            let body = body
                .get_or_insert_with(|| body_of(&event_id, &kind, e, &subject))
                .clone();
            let d = NewDelivery {
                hook_id: h.hook.id,
                event_id: event_id.clone(),
                kind: kind.clone(),
                body,
                created_ms: e.time_ms,
            };
            if self.tx.try_send(d).is_err() {
                self.metrics.webhook_dropped(1);
                tracing::error!(
                    target: "nacelle::webhooks",
                    hook = h.hook.id,
                    kind = kind.as_str(),
                    "webhook queue full (or closed): delivery dropped"
                );
            }
        }
    }
}
