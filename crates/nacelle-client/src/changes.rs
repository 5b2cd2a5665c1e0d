//! Change requests and review policies over Nacelle's own HTTP API
//! (`/nacos/nacelle/v1/…`, `docs/change-requests.md`): open a request over several keys,
//! review it, publish it in one transaction; set the policies that require it.

use serde::Deserialize;
use serde_json::json;

use crate::admin::{lenient_string, Admin, Page};
use crate::error::{ClientError, Result};

/// One key of a change request.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeItem {
    /// Its group.
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    /// Its data id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// `publish` or `remove`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub op: String,
    /// The content's type (a publish).
    #[serde(default, rename = "type")]
    pub content_type: Option<String>,
    /// The new content (a publish).
    #[serde(default)]
    pub content: Option<String>,
    /// The md5 the change is based on (`""`: the key did not exist).
    #[serde(default, deserialize_with = "lenient_string")]
    pub base_md5: String,
}

/// One event of a change request's life.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeEvent {
    /// `created`, `opened`, `edited`, `commented`, `approved`, `rejected`, `rebased`,
    /// `stale`, `scheduled`, `published` or `closed`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub kind: String,
    /// Who.
    #[serde(default, deserialize_with = "lenient_string")]
    pub user: String,
    /// When, ms since the epoch.
    #[serde(default)]
    pub time: i64,
    /// The comment, reason or stale keys.
    #[serde(default, deserialize_with = "lenient_string")]
    pub text: String,
}

/// A change request (a listing leaves out its items, events and approvals).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeRequest {
    /// Its id.
    pub id: i64,
    /// Its namespace (`public`: the default one).
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_id: String,
    /// Title.
    #[serde(default, deserialize_with = "lenient_string")]
    pub title: String,
    /// Description.
    #[serde(default, deserialize_with = "lenient_string")]
    pub description: String,
    /// Who wrote it.
    #[serde(default, deserialize_with = "lenient_string")]
    pub author: String,
    /// `draft`, `open`, `approved`, `rejected`, `published` or `closed`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub state: String,
    /// A publish found a key changed since its base: rebase it.
    #[serde(default)]
    pub stale: bool,
    /// Changes with every change of the request; actions may name the version they saw.
    #[serde(default)]
    pub version: i64,
    /// Created, ms since the epoch.
    #[serde(default)]
    pub created_time: i64,
    /// Last changed, ms since the epoch.
    #[serde(default)]
    pub updated_time: i64,
    /// When the server publishes it (if approved), ms since the epoch.
    #[serde(default)]
    pub publish_at: Option<i64>,
    /// How many keys it holds.
    #[serde(default)]
    pub item_count: usize,
    /// Approvals its policies require.
    #[serde(default)]
    pub required_approvals: Option<u32>,
    /// Who approved it (since its last edit or rebase).
    #[serde(default)]
    pub approvers: Vec<String>,
    /// Its keys.
    #[serde(default)]
    pub items: Vec<ChangeItem>,
    /// Its events, oldest first.
    #[serde(default)]
    pub events: Vec<ChangeEvent>,
}

/// One key of a request beside the server's content.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeDiff {
    /// Group.
    #[serde(default, deserialize_with = "lenient_string")]
    pub group: String,
    /// Data id.
    #[serde(default, deserialize_with = "lenient_string")]
    pub data_id: String,
    /// `publish` or `remove`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub op: String,
    /// The key changed since the request was based.
    #[serde(default)]
    pub moved: bool,
    /// The server's content now (`None`: absent).
    #[serde(default)]
    pub current: Option<String>,
    /// The content after the change (`None`: removed).
    #[serde(default)]
    pub proposed: Option<String>,
    /// Unified diff, server → change.
    #[serde(default, deserialize_with = "lenient_string")]
    pub diff: String,
}

/// What a request does to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeEdit {
    /// Publish `content` (type from the data id's extension unless given).
    Publish {
        group: String,
        data_id: String,
        content: String,
        content_type: Option<String>,
    },
    /// Remove the key.
    Remove { group: String, data_id: String },
}

/// A new change request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewChange {
    /// Namespace (blank: the client's).
    pub namespace: Option<String>,
    pub title: String,
    pub description: String,
    /// Created as a draft (opened for review later).
    pub draft: bool,
    pub items: Vec<ChangeEdit>,
}

/// What to do to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeAction {
    /// Open a draft (or a rejected request) for review.
    Open,
    /// Approve (not its author; needs permission `a` on every key).
    Approve,
    /// Reject, with a reason.
    Reject,
    /// Comment.
    Comment,
    /// Take the keys' current md5s as new bases (after a stale publish).
    Rebase,
    /// Abandon.
    Close,
    /// Publish every key in one transaction.
    Publish,
}

impl ChangeAction {
    fn path(self) -> &'static str {
        match self {
            ChangeAction::Open => "open",
            ChangeAction::Approve => "approve",
            ChangeAction::Reject => "reject",
            ChangeAction::Comment => "comment",
            ChangeAction::Rebase => "rebase",
            ChangeAction::Close => "close",
            ChangeAction::Publish => "publish",
        }
    }
}

/// A review policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewPolicy {
    /// Namespace (`public`: the default one).
    #[serde(default, deserialize_with = "lenient_string")]
    pub namespace_id: String,
    /// Group pattern (`*` globs).
    #[serde(default, deserialize_with = "lenient_string")]
    pub group_pattern: String,
    /// Approvals a request needs.
    #[serde(default)]
    pub required_approvals: u32,
    /// Who set it.
    #[serde(default, deserialize_with = "lenient_string")]
    pub updated_by: String,
    /// When, ms since the epoch.
    #[serde(default)]
    pub updated_time: i64,
}

fn parse<T: serde::de::DeserializeOwned>(kind: &str, v: serde_json::Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| ClientError::Protocol(format!("{kind}: {e}")))
}

impl Admin {
    /// Change requests, newest first (`state`: one state only; `namespace`: blank is the
    /// client's namespace).
    pub async fn changes(
        &self,
        namespace: Option<&str>,
        state: Option<&str>,
        page_no: u32,
        page_size: u32,
    ) -> Result<Page<ChangeRequest>> {
        let ns = namespace.map_or_else(|| self.client().namespace().to_string(), str::to_string);
        let (pn, ps) = (page_no.to_string(), page_size.to_string());
        let data = self
            .send_v2("change-list", &|http, base| {
                let mut q = vec![
                    ("namespaceId", ns.as_str()),
                    ("pageNo", pn.as_str()),
                    ("pageSize", ps.as_str()),
                ];
                if let Some(s) = state {
                    q.push(("state", s));
                }
                http.get(format!("{base}/nacelle/v1/changes")).query(&q)
            })
            .await?;
        parse("change list", data)
    }

    /// One change request, with its keys and events.
    pub async fn change(&self, id: i64) -> Result<ChangeRequest> {
        let id = id.to_string();
        let data = self
            .send_v2("change-get", &|http, base| {
                http.get(format!("{base}/nacelle/v1/change"))
                    .query(&[("id", id.as_str())])
            })
            .await?;
        parse("change", data)
    }

    /// Opens a change request (a draft when `change.draft`).
    pub async fn create_change(&self, change: &NewChange) -> Result<ChangeRequest> {
        let ns = change
            .namespace
            .clone()
            .unwrap_or_else(|| self.client().namespace().to_string());
        let items: Vec<serde_json::Value> = change
            .items
            .iter()
            .map(|i| match i {
                ChangeEdit::Publish {
                    group,
                    data_id,
                    content,
                    content_type,
                } => json!({"group": group, "dataId": data_id, "content": content,
                            "type": content_type}),
                ChangeEdit::Remove { group, data_id } => {
                    json!({"group": group, "dataId": data_id, "remove": true})
                }
            })
            .collect();
        let body = json!({
            "namespaceId": ns,
            "title": change.title,
            "description": change.description,
            "draft": change.draft,
            "items": items,
        });
        let data = self
            .send_v2("change-create", &|http, base| {
                http.post(format!("{base}/nacelle/v1/changes")).json(&body)
            })
            .await?;
        parse("change", data)
    }

    /// Every key of request `id` beside the server's content.
    pub async fn change_diff(&self, id: i64) -> Result<Vec<ChangeDiff>> {
        let id = id.to_string();
        let data = self
            .send_v2("change-diff", &|http, base| {
                http.get(format!("{base}/nacelle/v1/change/diff"))
                    .query(&[("id", id.as_str())])
            })
            .await?;
        parse("change diff", data)
    }

    /// Does `action` to request `id`; `version`, when given, must be the request's (what
    /// the caller saw); `text` is the comment or reason.
    pub async fn change_action(
        &self,
        id: i64,
        action: ChangeAction,
        version: Option<i64>,
        text: &str,
    ) -> Result<ChangeRequest> {
        let id = id.to_string();
        let version = version.map(|v| v.to_string());
        let data = self
            .send_v2("change-action", &|http, base| {
                let mut form = vec![("id", id.as_str()), ("text", text)];
                if let Some(v) = &version {
                    form.push(("version", v));
                }
                http.post(format!("{base}/nacelle/v1/change/{}", action.path()))
                    .form(&form)
            })
            .await?;
        parse("change", data)
    }

    /// Schedules the publish of request `id` at `at_ms` (ms since the epoch; `None`:
    /// unschedules).
    pub async fn schedule_change(&self, id: i64, at_ms: Option<i64>) -> Result<ChangeRequest> {
        let id = id.to_string();
        let at = at_ms.map(|t| t.to_string()).unwrap_or_default();
        let data = self
            .send_v2("change-schedule", &|http, base| {
                http.post(format!("{base}/nacelle/v1/change/schedule"))
                    .form(&[("id", id.as_str()), ("publishAt", at.as_str())])
            })
            .await?;
        parse("change", data)
    }

    /// Every review policy.
    pub async fn review_policies(&self) -> Result<Vec<ReviewPolicy>> {
        let data = self
            .send_v2("policy-list", &|http, base| {
                http.get(format!("{base}/nacelle/v1/review-policies"))
            })
            .await?;
        parse("review policies", data)
    }

    /// Sets the policy of `namespace` and `group_pattern` (administrators): direct writes
    /// to the keys it covers are refused and requests need `required_approvals`
    /// approvals; 0 removes it.
    pub async fn set_review_policy(
        &self,
        namespace: &str,
        group_pattern: &str,
        required_approvals: u32,
    ) -> Result<()> {
        let n = required_approvals.to_string();
        self.send_v2("policy-set", &|http, base| {
            http.post(format!("{base}/nacelle/v1/review-policies"))
                .form(&[
                    ("namespaceId", namespace),
                    ("groupPattern", group_pattern),
                    ("requiredApprovals", n.as_str()),
                ])
        })
        .await
        .map(drop)
    }
}
