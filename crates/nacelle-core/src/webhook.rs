//! Webhooks (docs/webhooks.md): a subscription of a URL to the events of the keys of one
//! namespace whose group and dataId match two patterns ([`Webhook`]), and the durable
//! deliveries of those events ([`Delivery`]), which every node of a cluster claims with a
//! lease so that each is sent by one node at a time ([`DeliveryClaim`]).

use std::fmt;

use crate::key::NamespaceId;

/// The event kinds a webhook can subscribe to: the key events (named as their audit
/// actions) and the change-request events (`change-` and the request event's name).
pub const EVENT_KINDS: [&str; 18] = [
    "publish",
    "remove",
    "gray-publish",
    "gray-stop",
    "promote",
    "import",
    "clone",
    "metadata",
    "change-created",
    "change-opened",
    "change-edited",
    "change-commented",
    "change-approved",
    "change-rejected",
    "change-rebased",
    "change-scheduled",
    "change-published",
    "change-closed",
];

/// A webhook as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Assigned by the store (ignored when creating).
    pub id: i64,
    /// The namespace whose events it receives (exact).
    pub namespace: NamespaceId,
    /// Group pattern: `*`, `x*`, `*x`, `*x*` or an exact name (the schemas' shapes).
    pub group_pattern: String,
    /// DataId pattern, the same shapes. A change request matches when any of its keys does.
    pub data_id_pattern: String,
    /// Where events are POSTed (`http://` or `https://`).
    pub url: String,
    /// The HMAC-SHA256 key of the `X-Nacelle-Signature` header. Never shown by the API.
    pub secret: String,
    /// The event kinds it receives ([`EVENT_KINDS`]); empty: every kind.
    pub events: Vec<String>,
    pub enabled: bool,
    pub description: String,
    pub created_by: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl fmt::Debug for Webhook {
    /// Everything but the secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("id", &self.id)
            .field("namespace", &self.namespace)
            .field("group_pattern", &self.group_pattern)
            .field("data_id_pattern", &self.data_id_pattern)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Whether it receives events of `kind`.
    pub fn wants(&self, kind: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == kind)
    }

    /// The event kinds as stored: comma-separated.
    pub fn events_text(&self) -> String {
        self.events.join(",")
    }

    /// Event kinds from their stored text.
    pub fn events_of(text: &str) -> Vec<String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// Where a delivery is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt (or being attempted under a lease).
    Pending,
    /// A receiver answered 2xx.
    Delivered,
    /// Given up: attempts or age exhausted.
    Failed,
}

impl DeliveryStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// The status named `s`.
    pub fn parse(s: &str) -> Option<DeliveryStatus> {
        [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
        ]
        .into_iter()
        .find(|d| d.as_str() == s)
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A delivery to enqueue: one event for one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub hook_id: i64,
    /// The event's id (the same for every webhook the event goes to).
    pub event_id: String,
    /// The event kind ([`EVENT_KINDS`]).
    pub kind: String,
    /// The JSON body, exactly as it is sent and signed.
    pub body: String,
    /// When the event happened; the first attempt is due then.
    pub created_ms: i64,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: i64,
    pub hook_id: i64,
    pub event_id: String,
    pub kind: String,
    pub body: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: u32,
    /// The last attempt's HTTP status; 0 when none answered.
    pub last_code: u16,
    /// The last attempt's failure (connection refused, timeout, a non-2xx status).
    pub last_error: String,
    /// When the next attempt is due (pending deliveries).
    pub next_attempt_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// Claim the due deliveries for one sender: each claimed row gets `owner` and a lease
/// until `lease_until_ms`; a row is claimable while pending, due (`next_attempt_ms <=
/// now_ms`) and not leased (`lease_until_ms <= now_ms`), so a row whose claimer died is
/// claimed again after the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryClaim {
    /// Unique per claim (a UUID): what the outcome must name to be recorded.
    pub owner: String,
    pub now_ms: i64,
    pub lease_until_ms: i64,
    /// Claimed at most.
    pub limit: u32,
}

/// The outcome of one attempt, recorded by [`crate::store::Webhooks::finish_delivery`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryResult {
    /// `Pending` (retry at `next_attempt_ms`), `Delivered` or `Failed`.
    pub status: DeliveryStatus,
    /// The HTTP status (0: none).
    pub code: u16,
    pub error: String,
    pub next_attempt_ms: i64,
    pub now_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_empty_means_all() {
        let mut hook = Webhook {
            id: 1,
            namespace: NamespaceId::default(),
            group_pattern: "*".into(),
            data_id_pattern: "*".into(),
            url: "http://x".into(),
            secret: "s3cr3t-key".into(),
            events: Webhook::events_of(" publish, ,remove"),
            enabled: true,
            description: String::new(),
            created_by: String::new(),
            created_ms: 0,
            updated_ms: 0,
        };
        assert_eq!(hook.events_text(), "publish,remove");
        assert!(hook.wants("remove") && !hook.wants("promote"));
        hook.events.clear();
        assert!(hook.wants("promote"));
        assert!(!format!("{hook:?}").contains("s3cr3t"));
        assert_eq!(
            DeliveryStatus::parse("failed"),
            Some(DeliveryStatus::Failed)
        );
    }
}
