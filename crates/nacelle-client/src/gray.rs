//! Gray releases over the HTTP API (`docs/gray-release.md`): list a key's variants,
//! publish one (the beta by IPs, or a labelled rule with a name and a priority), promote
//! one to the formal config, stop (abandon) one. Listing and promoting are Nacelle's
//! extensions of the v2 API; publishing and stopping are Nacos's v2 calls.

use serde::Deserialize;

use crate::admin::{lenient_string, Admin};
use crate::error::{ClientError, Result};
use crate::key::IntoKey;

/// The gray name of the beta (the variant by IPs), as Nacos names it.
pub const BETA_GRAY_NAME: &str = "beta";

/// One gray variant of a key, as the server lists it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrayVariant {
    /// Its name (`beta`, `tag_<t>`, or the name it was published with).
    #[serde(default, deserialize_with = "lenient_string")]
    pub gray_name: String,
    /// Rule type: `beta`, `tag` or `tagv2`.
    #[serde(default, rename = "type", deserialize_with = "lenient_string")]
    pub rule_type: String,
    /// The rule: the IP list, the tag, or the label expression.
    #[serde(default, deserialize_with = "lenient_string")]
    pub expr: String,
    /// Higher is matched first.
    #[serde(default)]
    pub priority: i64,
    /// The variant's content.
    #[serde(default, deserialize_with = "lenient_string")]
    pub content: String,
    /// Its md5.
    #[serde(default, deserialize_with = "lenient_string")]
    pub md5: String,
    /// Last modification, ms since the epoch.
    #[serde(default)]
    pub last_modified: i64,
    /// Who published it.
    #[serde(default, deserialize_with = "lenient_string")]
    pub src_user: String,
    /// From where.
    #[serde(default, deserialize_with = "lenient_string")]
    pub src_ip: String,
}

/// Who a gray variant is served to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrayRule {
    /// The beta: callers whose IP is in the list (addresses or CIDRs). Its name is always
    /// [`BETA_GRAY_NAME`] and its priority the highest.
    Ips(Vec<String>),
    /// A label expression (`env=pre&&region=hz,sh||canary=true`; `AppName=shop` matches
    /// an application), under a name of its own.
    Labels {
        /// The variant's name (not `beta` nor `tag_…`).
        name: String,
        /// The expression.
        expr: String,
        /// Its priority (server default 0; at most 2147483645).
        priority: Option<i32>,
    },
}

impl GrayRule {
    /// The name the variant gets.
    pub fn name(&self) -> &str {
        match self {
            GrayRule::Ips(_) => BETA_GRAY_NAME,
            GrayRule::Labels { name, .. } => name,
        }
    }
}

impl Admin {
    /// The gray variants of a key, highest priority first.
    pub async fn grays(&self, key: impl IntoKey) -> Result<Vec<GrayVariant>> {
        let key = self.client().key(key);
        let data = self
            .send_v2("gray-list", &|http, base| {
                http.get(format!("{base}/v2/cs/config/gray"))
                    .query(&key.v2_params())
            })
            .await?;
        serde_json::from_value(data).map_err(|e| ClientError::Protocol(format!("gray list: {e}")))
    }

    /// Publishes a gray variant of a key (which needs a formal config already), with
    /// `content_type` when given.
    pub async fn publish_gray(
        &self,
        key: impl IntoKey,
        content: &str,
        rule: &GrayRule,
        content_type: Option<&str>,
    ) -> Result<()> {
        let key = self.client().key(key);
        let priority = match rule {
            GrayRule::Labels {
                priority: Some(p), ..
            } => Some(p.to_string()),
            _ => None,
        };
        self.send_v2("gray-publish", &|http, base| {
            let mut form = key.v2_params();
            form.push(("content", content));
            form.extend(content_type.map(|t| ("type", t)));
            let mut req = http.post(format!("{base}/v2/cs/config"));
            match rule {
                // Nacos's way to publish a beta: the `betaIps` header.
                GrayRule::Ips(ips) => req = req.header("betaIps", ips.join(",")),
                GrayRule::Labels { name, expr, .. } => {
                    form.push(("grayName", name));
                    form.push(("grayRule", expr));
                    if let Some(p) = &priority {
                        form.push(("grayPriority", p));
                    }
                }
            }
            req.form(&form)
        })
        .await
        .map(drop)
    }

    /// Makes a gray variant the formal config (in one transaction on the server) and
    /// removes it.
    pub async fn promote_gray(&self, key: impl IntoKey, gray_name: &str) -> Result<()> {
        let key = self.client().key(key);
        self.send_v2("gray-promote", &|http, base| {
            let mut form = key.v2_params();
            form.push(("grayName", gray_name));
            http.post(format!("{base}/v2/cs/config/gray/promote"))
                .form(&form)
        })
        .await
        .map(drop)
    }

    /// Stops (abandons) a gray variant: its callers get the formal config again.
    pub async fn stop_gray(&self, key: impl IntoKey, gray_name: &str) -> Result<()> {
        let key = self.client().key(key);
        self.send_v2("gray-stop", &|http, base| {
            let mut q = key.v2_params();
            q.push(("grayName", gray_name));
            http.delete(format!("{base}/v2/cs/config")).query(&q)
        })
        .await
        .map(drop)
    }
}
