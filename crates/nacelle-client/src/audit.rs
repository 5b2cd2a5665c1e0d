//! The audit trail over Nacelle's own API (`/nacos/nacelle/v1/audit`, docs/audit.md): list
//! entries, read the chain, have the server verify it — or verify it here, with the same
//! hash the server computes (`nacelle_api::audit`), so a verification does not have to
//! trust the server's word. An administrator only. Also the writes that carry a message
//! and have no gRPC form (a removal with a message, over HTTP v1).

use nacelle_api::audit::{Break, EntryFields, Verifier};
use serde::Deserialize;

use crate::admin::{lenient_string, Admin, Page};
use crate::error::{ClientError, Result};
use crate::key::IntoKey;

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// Position in the chain (contiguous from 1).
    #[serde(default)]
    pub seq: i64,
    /// When, ms since the epoch.
    #[serde(default)]
    pub time: i64,
    /// Who (`""`: anonymous).
    #[serde(default, deserialize_with = "lenient_string")]
    pub user: String,
    /// From where.
    #[serde(default, deserialize_with = "lenient_string")]
    pub address: String,
    /// Over which protocol (`http-v1`, `grpc`, …).
    #[serde(default, deserialize_with = "lenient_string")]
    pub protocol: String,
    /// What (`publish`, `login-failed`, …).
    #[serde(default, deserialize_with = "lenient_string")]
    pub action: String,
    /// On what (`namespace/group/dataId`, a user, a namespace id).
    #[serde(default, deserialize_with = "lenient_string")]
    pub target: String,
    /// `ok`, or `refused: <reason>`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub outcome: String,
    /// More (md5, message, gray name).
    #[serde(default, deserialize_with = "lenient_string")]
    pub detail: String,
    /// The change request, when there is one.
    #[serde(default)]
    pub change_id: Option<i64>,
    /// The previous entry's hash.
    #[serde(default, deserialize_with = "lenient_string")]
    pub prev_hash: String,
    /// This entry's hash.
    #[serde(default, deserialize_with = "lenient_string")]
    pub hash: String,
}

impl AuditEntry {
    /// The fields the entry's hash covers.
    pub fn fields(&self) -> EntryFields<'_> {
        EntryFields {
            seq: self.seq,
            time_ms: self.time,
            user: &self.user,
            address: &self.address,
            protocol: &self.protocol,
            action: &self.action,
            target: &self.target,
            outcome: &self.outcome,
            detail: &self.detail,
            change_id: self.change_id,
            prev_hash: &self.prev_hash,
        }
    }
}

/// Which entries to list; every field narrows it.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// From this time (ms since the epoch, inclusive).
    pub since_ms: Option<i64>,
    /// Before this time (ms, exclusive).
    pub until_ms: Option<i64>,
    /// This user.
    pub user: Option<String>,
    /// Targets starting with this (`namespace/group/dataId`; `public` is the default
    /// namespace).
    pub key: Option<String>,
    /// This action.
    pub action: Option<String>,
    /// Page number, from 1.
    pub page_no: u32,
    /// Page size (at most 500).
    pub page_size: u32,
}

/// The head of the chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditHead {
    /// The last entry's seq.
    #[serde(default)]
    pub last_seq: i64,
    /// The last entry's hash.
    #[serde(default, deserialize_with = "lenient_string")]
    pub last_hash: String,
    /// The last entry retention removed (0: none).
    #[serde(default)]
    pub anchor_seq: i64,
    /// Its hash (the genesis hash when none was removed).
    #[serde(default, deserialize_with = "lenient_string")]
    pub anchor_hash: String,
}

/// A run of the chain.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AuditChain {
    /// The head as the server read it.
    #[serde(default)]
    pub head: AuditHead,
    /// Entries in seq order.
    #[serde(default)]
    pub entries: Vec<AuditEntry>,
}

/// The outcome of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditCheck {
    /// Entries checked.
    pub checked: u64,
    /// Where the walk started (the retention anchor; 0: the beginning).
    pub anchor_seq: i64,
    /// The first bad entry; `None`: the chain is whole.
    pub broken: Option<Break>,
}

impl Admin {
    /// A page of audit entries matching `q`, newest first.
    pub async fn audit(&self, q: &AuditQuery) -> Result<Page<AuditEntry>> {
        let mut params: Vec<(&str, String)> = vec![
            ("pageNo", q.page_no.max(1).to_string()),
            ("pageSize", q.page_size.max(1).to_string()),
        ];
        let optional = [
            ("since", q.since_ms.map(|v| v.to_string())),
            ("until", q.until_ms.map(|v| v.to_string())),
            ("user", q.user.clone()),
            ("key", q.key.clone()),
            ("action", q.action.clone()),
        ];
        params.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        let data = self
            .send_v2("audit", &|http, base| {
                http.get(format!("{base}/nacelle/v1/audit")).query(&params)
            })
            .await?;
        decode(data)
    }

    /// Up to `limit` entries after `after_seq`, with the head.
    pub async fn audit_chain(&self, after_seq: i64, limit: u32) -> Result<AuditChain> {
        let (after, limit) = (after_seq.to_string(), limit.to_string());
        let data = self
            .send_v2("audit-chain", &|http, base| {
                http.get(format!("{base}/nacelle/v1/audit/chain"))
                    .query(&[("afterSeq", after.as_str()), ("limit", limit.as_str())])
            })
            .await?;
        decode(data)
    }

    /// Downloads the whole chain from its anchor and verifies it here: every hash
    /// recomputed, seq contiguity and links checked, the end compared with the head.
    pub async fn verify_audit(&self) -> Result<AuditCheck> {
        let first = self.audit_chain(0, 1).await?;
        let mut v = Verifier::new(first.head.anchor_seq, &first.head.anchor_hash);
        let check = |v: &Verifier, broken: Option<Break>| AuditCheck {
            checked: v.checked(),
            anchor_seq: first.head.anchor_seq,
            broken,
        };
        loop {
            let chain = self.audit_chain(v.position(), 1000).await?;
            if chain.entries.is_empty() {
                let end = v.finish(chain.head.last_seq, &chain.head.last_hash);
                return Ok(check(&v, end.err()));
            }
            for e in &chain.entries {
                if let Err(b) = v.check(&e.fields(), &e.hash) {
                    return Ok(check(&v, Some(b)));
                }
            }
        }
    }

    /// Removes a config (or its variant of `tag`) over HTTP v1 with a message recorded in
    /// its history row (the gRPC removal carries none).
    pub async fn remove_with_message(
        &self,
        key: impl IntoKey,
        tag: Option<&str>,
        message: &str,
    ) -> Result<()> {
        let key = self.client().key(key);
        self.send("remove", &|http, base| {
            let mut q = key.v1_params();
            q.push(("message", message));
            q.extend(tag.map(|t| ("tag", t)));
            http.delete(format!("{base}/v1/cs/configs")).query(&q)
        })
        .await
        .map(drop)
    }
}

fn decode<T: serde::de::DeserializeOwned>(data: serde_json::Value) -> Result<T> {
    serde_json::from_value(data).map_err(|e| ClientError::Protocol(format!("audit answer: {e}")))
}
