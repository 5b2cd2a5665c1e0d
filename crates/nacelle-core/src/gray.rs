//! The gray (canary) model: a key has its formal config plus zero or more gray variants,
//! each with a rule and a priority; the first rule that matches a caller, by priority,
//! decides what that caller sees (as Nacos 2.5/3.0 do).
//!
//! Rule kinds, as Nacos stores them in `config_info_gray.gray_rule`
//! (`{"type", "version", "expr", "priority"}`):
//! - `beta` — the caller's IP is in a list of addresses or CIDRs (Nacos: addresses only).
//!   The IP every rule sees is [`Caller::gray_ip`]: the one the client reports about
//!   itself, as Nacos matches it, else its own address.
//!   Gray name `beta`, priority `i32::MAX`.
//! - `tag` — the caller asks for a tag (`tag` parameter, `Vipserver-Tag` header or label,
//!   gRPC `tag`). Gray name `tag_<t>`, priority `i32::MAX - 1`.
//! - `tagv2` — a label expression in Nacos's tagv2 syntax, matched against the labels the
//!   client sent and its app name: version `1.0.0` is one `key=v1,v2` item, `1.1.0` an OR
//!   (`||`) of AND (`&&`) clauses of such items. Gray names are chosen by the publisher.
//! - `percent` (Nacelle's own) — a [`Cohort`]: a share of all clients, chosen by a stable
//!   hash of each client's identity (address, app name, labels) and a seed, so a client
//!   stays in or out as long as the seed is kept, a larger share holds every client of
//!   a smaller one (the steps of a rollout), and another seed draws anew. Expression
//!   `<percent>~<seed>`, e.g. `25~rollout-7` (`<percent>[@<seed>]`: the [`CohortDraw`] of
//!   rules written before, kept as it was).
//!   Nacos does not know this type: a Nacos node sharing the database ignores such grays.
//!
//! This module parses and matches rules; it knows no wire or storage format beyond the
//! rule's own text.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use crate::caller::Caller;
use crate::error::CoreError;
use crate::key::check_tag;

/// The gray name of the beta (IP list) variant.
pub const BETA_NAME: &str = "beta";
/// Gray names of tag variants start with this (`tag_<t>`).
pub const TAG_NAME_PREFIX: &str = "tag_";
/// Priority of the beta rule, as Nacos gives it: above everything.
pub const BETA_PRIORITY: i32 = i32::MAX;
/// Priority of a tag rule, as Nacos gives it: just below beta.
pub const TAG_PRIORITY: i32 = i32::MAX - 1;
/// Highest priority a label rule may have: below beta and tag rules.
pub const MAX_LABEL_PRIORITY: i32 = i32::MAX - 2;
/// Longest gray name (`config_info_gray.gray_name` is `varchar(128)`; Nacelle keeps
/// room for the `tag_` prefix and stays short in history listings).
pub const MAX_GRAY_NAME_LEN: usize = 64;
/// Longest rule expression (Nacos 2.4's `beta_ips` column is `varchar(1024)`).
pub const MAX_RULE_EXPR_LEN: usize = 1024;
/// Most entries of a beta list.
pub const MAX_BETA_ENTRIES: usize = 256;

/// Rule type names as stored.
pub const TYPE_BETA: &str = "beta";
pub const TYPE_TAG: &str = "tag";
pub const TYPE_TAGV2: &str = "tagv2";
pub const TYPE_PERCENT: &str = "percent";

/// The rule of one gray variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrayRule {
    /// Callers whose IP is one of these addresses or inside one of these networks.
    Beta(IpList),
    /// Callers that ask for this tag.
    Tag(String),
    /// Callers whose labels match this expression.
    Labels(LabelExpr),
    /// A share of all callers, by a stable hash of their identity.
    Percent(Cohort),
}

impl GrayRule {
    /// Parses a rule from its stored parts: the type name and the expression. Unknown
    /// types and malformed expressions are [`CoreError::Invalid`] with the reason.
    pub fn parse(kind: &str, expr: &str) -> Result<GrayRule, CoreError> {
        if expr.len() > MAX_RULE_EXPR_LEN {
            return Err(CoreError::invalid(format!(
                "gray rule expression too long, over {MAX_RULE_EXPR_LEN} bytes"
            )));
        }
        match kind.trim() {
            TYPE_BETA => Ok(GrayRule::Beta(IpList::parse(expr)?)),
            TYPE_TAG => {
                let tag = expr.trim();
                if tag.is_empty() {
                    return Err(CoreError::invalid("a tag rule needs a tag"));
                }
                check_tag(tag)?;
                Ok(GrayRule::Tag(tag.to_string()))
            }
            TYPE_TAGV2 => Ok(GrayRule::Labels(LabelExpr::parse(expr)?)),
            TYPE_PERCENT => Ok(GrayRule::Percent(Cohort::parse(expr)?)),
            other => Err(CoreError::invalid(format!(
                "unknown gray rule type `{other}` (known: beta, tag, tagv2, percent)"
            ))),
        }
    }

    /// The stored type name.
    pub fn kind(&self) -> &'static str {
        match self {
            GrayRule::Beta(_) => TYPE_BETA,
            GrayRule::Tag(_) => TYPE_TAG,
            GrayRule::Labels(_) => TYPE_TAGV2,
            GrayRule::Percent(_) => TYPE_PERCENT,
        }
    }

    /// The rule version Nacos writes beside it.
    pub fn version(&self) -> &'static str {
        match self {
            GrayRule::Labels(e) if e.clauses.len() > 1 || e.clauses.iter().any(|c| c.len() > 1) => {
                "1.1.0"
            }
            _ => "1.0.0",
        }
    }

    /// The expression in its canonical text form.
    pub fn expr(&self) -> String {
        match self {
            GrayRule::Beta(ips) => ips.to_string(),
            GrayRule::Tag(t) => t.clone(),
            GrayRule::Labels(e) => e.to_string(),
            GrayRule::Percent(c) => c.to_string(),
        }
    }

    /// Whether `caller`, asking for `tag` (the request's tag, else the caller's own), is
    /// selected by this rule.
    pub fn matches(&self, caller: &Caller, tag: Option<&str>) -> bool {
        match self {
            GrayRule::Beta(ips) => caller.gray_ip().is_some_and(|ip| ips.contains(ip)),
            GrayRule::Tag(t) => tag == Some(t.as_str()),
            GrayRule::Labels(e) => e.matches(caller),
            GrayRule::Percent(c) => c.contains(caller),
        }
    }
}

/// What a publish asks for: a named gray with its rule and priority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraySpec {
    pub name: String,
    pub rule: GrayRule,
    pub priority: i32,
}

impl GraySpec {
    /// The beta variant for an IP list (Nacos's `betaIps`).
    pub fn beta(ips: &str) -> Result<GraySpec, CoreError> {
        Ok(GraySpec {
            name: BETA_NAME.to_string(),
            rule: GrayRule::Beta(IpList::parse(ips)?),
            priority: BETA_PRIORITY,
        })
    }

    /// The tag variant `tag` (checked by the tag rules).
    pub fn tag(tag: &str) -> Result<GraySpec, CoreError> {
        check_tag(tag)?;
        Ok(GraySpec {
            name: format!("{TAG_NAME_PREFIX}{tag}"),
            rule: GrayRule::Tag(tag.to_string()),
            priority: TAG_PRIORITY,
        })
    }

    /// A label rule named `name` with expression `expr` at `priority` (default 0). The
    /// names `beta` and `tag_…` are reserved for their kinds.
    pub fn labels(name: &str, expr: &str, priority: Option<i32>) -> Result<GraySpec, CoreError> {
        let name = check_gray_name(name)?;
        if name == BETA_NAME || name.starts_with(TAG_NAME_PREFIX) {
            return Err(CoreError::invalid(format!(
                "gray name `{name}` is reserved (beta and tag_… name beta and tag variants)"
            )));
        }
        let priority = priority.unwrap_or(0);
        if priority > MAX_LABEL_PRIORITY {
            return Err(CoreError::invalid(format!(
                "gray priority {priority} too high: label rules rank below beta and tag \
                 (at most {MAX_LABEL_PRIORITY})"
            )));
        }
        Ok(GraySpec {
            name: name.to_string(),
            rule: GrayRule::Labels(LabelExpr::parse(expr)?),
            priority,
        })
    }

    /// A share of all clients named `name` (reserved names refused as for label rules)
    /// at `priority` (default 0).
    pub fn percent(
        name: &str,
        cohort: Cohort,
        priority: Option<i32>,
    ) -> Result<GraySpec, CoreError> {
        let labelled = GraySpec::labels(name, "AppName=x", priority)?;
        Ok(GraySpec {
            rule: GrayRule::Percent(cohort),
            ..labelled
        })
    }

    /// A gray as stored by anyone (Nacos or Nacelle): its name, rule type, expression and
    /// priority, checked as a publish would be except for the reserved names.
    pub fn from_stored(
        name: &str,
        kind: &str,
        expr: &str,
        priority: i32,
    ) -> Result<GraySpec, CoreError> {
        Ok(GraySpec {
            name: check_gray_name(name)?.to_string(),
            rule: GrayRule::parse(kind, expr)?,
            priority,
        })
    }
}

/// Checks a gray name: 1 to [`MAX_GRAY_NAME_LEN`] characters of letters, digits and
/// `_ - . :`. Returns it trimmed.
pub fn check_gray_name(name: &str) -> Result<&str, CoreError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(CoreError::invalid("gray name is empty"));
    }
    if name.chars().count() > MAX_GRAY_NAME_LEN {
        return Err(CoreError::invalid(format!(
            "gray name too long, over {MAX_GRAY_NAME_LEN}"
        )));
    }
    if !name.chars().all(is_rule_char) {
        return Err(CoreError::invalid(format!(
            "invalid gray name `{name}`: letters, digits and _ - . : only"
        )));
    }
    Ok(name)
}

/// Characters of label keys, values and gray names (`[a-zA-Z0-9-_:.]`, as tagv2 allows).
fn is_rule_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')
}

/// A beta list: addresses and networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpList {
    /// Entries as given (trimmed), in order, for display and storage.
    entries: Vec<String>,
    addrs: BTreeSet<IpAddr>,
    nets: Vec<IpNet>,
}

impl IpList {
    /// Parses a comma-separated list of IP addresses and CIDRs; blanks are skipped, at
    /// least one entry is needed and every entry must be an address or a network.
    pub fn parse(list: &str) -> Result<IpList, CoreError> {
        let mut out = IpList {
            entries: Vec::new(),
            addrs: BTreeSet::new(),
            nets: Vec::new(),
        };
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            // A repeated entry is skipped whole: otherwise its network would be kept once
            // per repetition (found by the `gray_rule` fuzz target), so a list within the
            // entry limit could make every match scan millions of networks.
            if out.entries.iter().any(|e| e == entry) {
                continue;
            }
            if let Ok(ip) = IpAddr::from_str(entry) {
                out.addrs.insert(ip);
            } else if let Ok(net) = IpNet::from_str(entry) {
                out.nets.push(net);
            } else {
                return Err(CoreError::invalid(format!(
                    "invalid betaIps entry `{entry}`: an IP address or a CIDR is expected"
                )));
            }
            out.entries.push(entry.to_string());
            if out.entries.len() > MAX_BETA_ENTRIES {
                return Err(CoreError::invalid(format!(
                    "too many betaIps entries, over {MAX_BETA_ENTRIES}"
                )));
            }
        }
        if out.entries.is_empty() {
            return Err(CoreError::invalid("betaIps is empty"));
        }
        Ok(out)
    }

    /// Whether `ip` is listed or inside a listed network (an IPv4-mapped IPv6 address
    /// counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        self.addrs.contains(&ip) || self.nets.iter().any(|n| n.contains(&ip))
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }
}

impl std::fmt::Display for IpList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.entries.join(","))
    }
}

/// A tagv2 label expression: an OR of clauses, each an AND of `key=v1,v2` items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelExpr {
    clauses: Vec<Vec<LabelItem>>,
}

/// One `key=v1,v2` item: the label `key` has one of the values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelItem {
    pub key: String,
    pub values: Vec<String>,
}

impl LabelExpr {
    /// Parses `a=x,y&&b=z||c=w`. Keys and values are `[a-zA-Z0-9-_:.]+`; a key appears at
    /// most once per clause (as Nacos's tagv2 requires).
    pub fn parse(expr: &str) -> Result<LabelExpr, CoreError> {
        let bad = |why: String| CoreError::invalid(format!("invalid label expression: {why}"));
        let expr = expr.trim();
        if expr.is_empty() {
            return Err(bad("empty".into()));
        }
        let mut clauses = Vec::new();
        for clause in expr.split("||") {
            let mut items: Vec<LabelItem> = Vec::new();
            for item in clause.split("&&") {
                let item = item.trim();
                let (key, values) = item
                    .split_once('=')
                    .ok_or_else(|| bad(format!("`{item}` is not key=value")))?;
                let key = key.trim();
                if key.is_empty() || !key.chars().all(is_rule_char) {
                    return Err(bad(format!("invalid label key `{key}`")));
                }
                let values: Vec<String> = values
                    .split(',')
                    .map(str::trim)
                    .map(str::to_string)
                    .collect();
                if let Some(v) = values
                    .iter()
                    .find(|v| v.is_empty() || !v.chars().all(is_rule_char))
                {
                    return Err(bad(format!("invalid value `{v}` of label `{key}`")));
                }
                if items.iter().any(|i| i.key == key) {
                    return Err(bad(format!("label `{key}` appears twice in one clause")));
                }
                items.push(LabelItem {
                    key: key.to_string(),
                    values,
                });
            }
            clauses.push(items);
        }
        Ok(LabelExpr { clauses })
    }

    /// Whether the caller's labels satisfy one clause entirely.
    pub fn matches(&self, caller: &Caller) -> bool {
        self.clauses.iter().any(|clause| {
            clause.iter().all(|item| {
                label_of(caller, &item.key).is_some_and(|v| item.values.iter().any(|x| x == &v))
            })
        })
    }
}

impl std::fmt::Display for LabelExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let clauses: Vec<String> = self
            .clauses
            .iter()
            .map(|c| {
                c.iter()
                    .map(|i| format!("{}={}", i.key, i.values.join(",")))
                    .collect::<Vec<_>>()
                    .join("&&")
            })
            .collect();
        f.write_str(&clauses.join("||"))
    }
}

/// The value a label expression sees for `key`: `AppName` is the caller's app name,
/// `ClientIp` its [`Caller::gray_ip`]; any other key is the client's label of that name, or of that name
/// with Nacos's `app_` prefix (Java and Python clients prefix application labels; Python
/// also turns `.` into `_`, so `app_nacos_config_gray_label` is accepted for
/// `nacos.config.gray.label`).
fn label_of(caller: &Caller, key: &str) -> Option<String> {
    match key {
        "AppName" => {
            if let Some(app) = &caller.app_name {
                return Some(app.to_string());
            }
        }
        "ClientIp" => return caller.gray_ip().map(|ip| ip.to_string()),
        _ => {}
    }
    let labels = &caller.labels;
    labels
        .get(key)
        .or_else(|| labels.get(&format!("app_{key}")))
        .or_else(|| labels.get(&format!("app_{}", key.replace('.', "_"))))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::caller::{Labels, Protocol};

    fn caller(ip: &str, app: Option<&str>, labels: &[(&str, &str)]) -> Caller {
        let mut c = Caller::anonymous(Protocol::Grpc, ip.parse().ok());
        c.app_name = app.map(Arc::from);
        c.labels = Labels::new(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        c
    }

    #[test]
    fn rules_match_the_reported_ip_else_the_callers_own() -> Result<(), CoreError> {
        let ip = |s: &str| s.parse::<IpAddr>().map_err(|_| CoreError::invalid("ip"));
        // A client on 127.0.0.1 that reports 192.0.2.2 (Nacos's clientIp): the reported
        // address is the one a beta, the ClientIp label and a cohort see.
        let mut reporting = caller("127.0.0.1", None, &[]);
        reporting.reported_ip = Some(ip("192.0.2.2")?);
        assert_eq!(reporting.gray_ip(), Some(ip("192.0.2.2")?));
        assert!(GrayRule::parse("beta", "192.0.2.2")?.matches(&reporting, None));
        assert!(!GrayRule::parse("beta", "127.0.0.1")?.matches(&reporting, None));
        assert!(GrayRule::parse("tagv2", "ClientIp=192.0.2.2")?.matches(&reporting, None));
        let mut at_reported = caller("192.0.2.2", None, &[]);
        for cohort in [Cohort::parse("50~s")?, Cohort::parse("50@s")?] {
            assert_eq!(
                cohort.bucket(&reporting),
                cohort.bucket(&at_reported),
                "a cohort draws the reported address"
            );
        }
        // One that reports nothing is matched by its own address.
        at_reported.ip = Some(ip("127.0.0.1")?);
        assert_eq!(at_reported.gray_ip(), Some(ip("127.0.0.1")?));
        assert!(GrayRule::parse("beta", "127.0.0.1")?.matches(&at_reported, None));
        assert!(!GrayRule::parse("beta", "192.0.2.2")?.matches(&at_reported, None));
        Ok(())
    }

    #[test]
    fn beta_lists_take_addresses_and_networks() -> Result<(), CoreError> {
        let list = IpList::parse(" 127.0.0.2, 10.1.0.0/16 ,,::1")?;
        assert_eq!(list.to_string(), "127.0.0.2,10.1.0.0/16,::1");
        assert!(list.contains("127.0.0.2".parse().map_err(|_| CoreError::invalid("ip"))?));
        assert!(list.contains("10.1.200.3".parse().map_err(|_| CoreError::invalid("ip"))?));
        assert!(list.contains(
            "::ffff:127.0.0.2"
                .parse()
                .map_err(|_| CoreError::invalid("ip"))?
        ));
        assert!(!list.contains("127.0.0.3".parse().map_err(|_| CoreError::invalid("ip"))?));
        assert!(IpList::parse("1.2.3.4,not-an-ip").is_err());
        assert!(IpList::parse(" , ").is_err());
        assert!(IpList::parse("1.2.3.4/40").is_err());
        Ok(())
    }

    #[test]
    fn label_expressions_parse_and_match_as_tagv2() -> Result<(), CoreError> {
        let e = LabelExpr::parse("region=hz,sh && env=pre || canary=true")?;
        assert_eq!(e.to_string(), "region=hz,sh&&env=pre||canary=true");
        assert!(e.matches(&caller(
            "1.1.1.1",
            None,
            &[("region", "sh"), ("env", "pre")]
        )));
        assert!(!e.matches(&caller("1.1.1.1", None, &[("region", "sh")])));
        // Java's app_ prefix, and Python's underscored form of a dotted key.
        assert!(e.matches(&caller("1.1.1.1", None, &[("app_canary", "true")])));
        let dotted = LabelExpr::parse("nacos.config.gray.label=blue")?;
        assert!(dotted.matches(&caller(
            "1.1.1.1",
            None,
            &[("app_nacos.config.gray.label", "blue")]
        )));
        assert!(dotted.matches(&caller(
            "1.1.1.1",
            None,
            &[("app_nacos_config_gray_label", "blue")]
        )));
        // The app name and the IP are labels too.
        let app = LabelExpr::parse("AppName=shop")?;
        assert!(app.matches(&caller("1.1.1.1", Some("shop"), &[])));
        assert!(!app.matches(&caller("1.1.1.1", Some("cart"), &[])));
        for bad in ["", "a", "a=", "=x", "a=x&&a=y", "a=x y", "a=x||", "a b=c"] {
            assert!(LabelExpr::parse(bad).is_err(), "{bad:?} parsed");
        }
        Ok(())
    }

    #[test]
    fn rules_parse_by_type_and_specs_check_names() -> Result<(), CoreError> {
        assert_eq!(
            GrayRule::parse("tag", "blue")?,
            GrayRule::Tag("blue".into())
        );
        assert!(GrayRule::parse("tag", "much-too-long-tag-name").is_err());
        assert!(GrayRule::parse("weird", "x").is_err());
        assert_eq!(GrayRule::parse("tagv2", "a=b")?.version(), "1.0.0");
        assert_eq!(GrayRule::parse("tagv2", "a=b&&c=d")?.version(), "1.1.0");
        assert_eq!(GraySpec::tag("blue")?.name, "tag_blue");
        assert!(GraySpec::labels("beta", "a=b", None).is_err());
        assert!(GraySpec::labels("tag_x", "a=b", None).is_err());
        assert!(GraySpec::labels("canary", "a=b", Some(i32::MAX)).is_err());
        assert!(GraySpec::labels("bad name", "a=b", None).is_err());
        assert_eq!(GraySpec::labels(" canary ", "a=b", Some(5))?.name, "canary");
        Ok(())
    }

    /// Found by the `gray_rule` fuzz target: a repeated network was kept once per
    /// repetition, so the stored form (deduplicated) parsed to a different rule and a long
    /// list of repetitions made every match scan them all.
    #[test]
    fn repeated_beta_entries_are_kept_once() {
        let list = "6.10.0.2/16,::6.10.0.2/61,::6.10.0.2/16,::16.10.0.2/16,::6.01.0.2/16,::6.10.0.2/16,::1";
        let rule = GrayRule::parse("beta", list).expect("a valid list");
        let again = GrayRule::parse(rule.kind(), &rule.expr()).expect("its stored form");
        assert_eq!(again, rule);
        let GrayRule::Beta(ips) = &rule else {
            panic!("a beta rule");
        };
        assert_eq!(ips.nets.len(), 5);
        let many = vec!["10.0.0.0/8"; 100_000].join(",");
        let ips = IpList::parse(&many).expect("one network");
        assert_eq!((ips.entries.len(), ips.nets.len()), (1, 1));
    }
}

/// Buckets a client identity falls into: [`Cohort`] shares are whole basis points.
pub const COHORT_BUCKETS: u32 = 10_000;
/// Longest cohort seed.
pub const MAX_COHORT_SEED_LEN: usize = 64;

/// How a [`Cohort`] puts a client into a bucket; written in its expression, so every node
/// and every version puts a client in the same bucket for a stored rule.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CohortDraw {
    /// Each seed draws anew (`<percent>~<seed>`, every rollout started since this
    /// version): the bucket is a hash of the seed and the whole identity, so two seeds'
    /// cohorts are independent — a client in one rollout's 10 % is in another's 10 % with
    /// a chance of 10 % — while within one seed a larger share holds every client of a
    /// smaller one.
    #[default]
    Independent,
    /// The seed shifts one window over an ordering every seed shares (`<percent>@<seed>`
    /// and `<percent>`, the rules written before): golden-ratio spacing of the address
    /// plus an offset of the seed, app and labels. Two seeds' cohorts of clients that
    /// differ only by address overlap almost wholly or not at all. Kept so that a rule
    /// stored earlier (a rollout under way) keeps its clients.
    Shifted,
}

/// A share of all clients (the `percent` rule): those whose identity, hashed with the
/// seed, falls into the first `basis_points` of [`COHORT_BUCKETS`] buckets.
///
/// A client's identity is its IP address, its app name and its labels except `taskId`
/// (the Java client numbers its connections with it, so one process would otherwise land
/// in several buckets). How the bucket follows from the identity and the seed is the
/// rule's [`CohortDraw`]:
/// - [`CohortDraw::Independent`]: the seed, the app name, the labels (sorted by name, as
///   `name=value`) and the address (its 4 or 16 bytes), NUL-separated, are hashed with
///   FNV-1a (64 bit), finished by SplitMix64's mixer twice; the bucket is the top 32 bits
///   scaled to 10 000. Each client is an independent draw: of n clients a share p holds
///   n·p ± √(n·p·(1−p)) (200 clients at 10 %: 20 ± 4.2).
/// - [`CohortDraw::Shifted`]: the seed, the app name and the labels hashed as above into
///   an offset; the address (IPv4 as its 32-bit number, IPv6 as the XOR of its two 64-bit
///   halves) multiplied by 2^64/φ (golden-ratio hashing) and added; the bucket is the top
///   32 bits of the sum scaled to 10 000.
///
/// Written out here because it is part of the stored meaning of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cohort {
    basis_points: u32,
    seed: String,
    draw: CohortDraw,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// 2^64 / φ: consecutive multiples are spread as evenly as any sequence can be.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

fn fnv_feed(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(FNV_PRIME);
    }
}

/// SplitMix64's finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of the seed, the app name and the labels but `taskId`, NUL-separated.
fn seed_app_labels(seed: &str, caller: &Caller) -> u64 {
    let mut h = FNV_OFFSET;
    fnv_feed(&mut h, seed.as_bytes());
    fnv_feed(&mut h, b"\0");
    fnv_feed(&mut h, caller.app_name.as_deref().unwrap_or("").as_bytes());
    for (name, value) in caller.labels.iter().filter(|(n, _)| *n != "taskId") {
        fnv_feed(&mut h, b"\0");
        fnv_feed(&mut h, name.as_bytes());
        fnv_feed(&mut h, b"=");
        fnv_feed(&mut h, value.as_bytes());
    }
    h
}

/// The top 32 bits of `x` scaled to [`COHORT_BUCKETS`].
fn bucket_of(x: u64) -> u32 {
    (((x >> 32) * u64::from(COHORT_BUCKETS)) >> 32) as u32
}

impl Cohort {
    /// A cohort of `percent` (0.01 to 100, at most two decimals) under `seed`, drawn
    /// [`CohortDraw::Independent`]ly.
    pub fn new(percent: f64, seed: &str) -> Result<Cohort, CoreError> {
        let bp = (percent * 100.0).round();
        if !percent.is_finite()
            || !(1.0..=f64::from(COHORT_BUCKETS)).contains(&bp)
            || (bp - percent * 100.0).abs() > 1e-6
        {
            return Err(CoreError::invalid(format!(
                "a cohort is 0.01 to 100 percent in steps of 0.01, not {percent}"
            )));
        }
        check_seed(seed)?;
        Ok(Cohort {
            basis_points: bp as u32,
            seed: seed.to_string(),
            draw: CohortDraw::Independent,
        })
    }

    /// The same cohort drawn by `draw`.
    pub fn with_draw(self, draw: CohortDraw) -> Cohort {
        Cohort { draw, ..self }
    }

    /// Parses `<percent>~<seed>` ([`CohortDraw::Independent`]), `<percent>@<seed>` or
    /// `<percent>` ([`CohortDraw::Shifted`]).
    pub fn parse(expr: &str) -> Result<Cohort, CoreError> {
        let expr = expr.trim();
        let (p, seed, draw) = match (expr.split_once('~'), expr.split_once('@')) {
            (Some((p, seed)), None) => (p, seed, CohortDraw::Independent),
            (None, Some((p, seed))) => (p, seed, CohortDraw::Shifted),
            (None, None) => (expr, "", CohortDraw::Shifted),
            (Some(_), Some(_)) => ("", "", CohortDraw::Shifted),
        };
        let percent: f64 = p.trim().parse().map_err(|_| {
            CoreError::invalid(format!(
                "a percent rule is `<percent>~<seed>` (e.g. `25~rollout-7`) or \
                 `<percent>[@<seed>]`, not `{expr}`"
            ))
        })?;
        Ok(Cohort::new(percent, seed.trim())?.with_draw(draw))
    }

    /// The share in percent.
    pub fn percent(&self) -> f64 {
        f64::from(self.basis_points) / 100.0
    }

    /// The seed.
    pub fn seed(&self) -> &str {
        &self.seed
    }

    /// How clients are drawn.
    pub fn draw(&self) -> CohortDraw {
        self.draw
    }

    /// The bucket (0 to 9 999) of `caller` in this cohort's draw.
    pub fn bucket(&self, caller: &Caller) -> u32 {
        match self.draw {
            CohortDraw::Independent => {
                let mut h = seed_app_labels(&self.seed, caller);
                fnv_feed(&mut h, b"\0");
                match caller.gray_ip() {
                    Some(IpAddr::V4(v4)) => fnv_feed(&mut h, &v4.octets()),
                    Some(IpAddr::V6(v6)) => fnv_feed(&mut h, &v6.octets()),
                    None => {}
                }
                bucket_of(mix64(mix64(h).wrapping_add(GOLDEN)))
            }
            CohortDraw::Shifted => {
                // The offset of this seed, app and labels.
                let z = mix64(seed_app_labels(&self.seed, caller));
                let address: u64 = match caller.gray_ip() {
                    Some(IpAddr::V4(v4)) => u64::from(u32::from(v4)),
                    Some(IpAddr::V6(v6)) => {
                        let n = u128::from(v6);
                        (n as u64) ^ ((n >> 64) as u64)
                    }
                    None => 0,
                };
                bucket_of(z.wrapping_add(address.wrapping_mul(GOLDEN)))
            }
        }
    }

    /// Whether `caller` is in the cohort.
    pub fn contains(&self, caller: &Caller) -> bool {
        self.bucket(caller) < self.basis_points
    }
}

fn check_seed(seed: &str) -> Result<(), CoreError> {
    if seed.len() > MAX_COHORT_SEED_LEN
        || !seed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(CoreError::invalid(format!(
            "a cohort seed is up to {MAX_COHORT_SEED_LEN} letters, digits and `-_.:`, not `{seed}`"
        )));
    }
    Ok(())
}

impl std::fmt::Display for Cohort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, frac) = (self.basis_points / 100, self.basis_points % 100);
        match frac {
            0 => write!(f, "{whole}")?,
            f2 if f2 % 10 == 0 => write!(f, "{whole}.{}", f2 / 10)?,
            f2 => write!(f, "{whole}.{f2:02}")?,
        }
        match self.draw {
            CohortDraw::Independent => write!(f, "~{}", self.seed),
            CohortDraw::Shifted if self.seed.is_empty() => Ok(()),
            CohortDraw::Shifted => write!(f, "@{}", self.seed),
        }
    }
}

#[cfg(test)]
mod cohort_tests {
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::caller::{Labels, Protocol};

    fn client(i: u8) -> Caller {
        Caller::anonymous(
            Protocol::Grpc,
            Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, i))),
        )
    }

    /// 10 000 synthetic clients of one app on consecutive addresses (the hardest case: they
    /// differ by address only).
    fn fleet() -> Vec<Caller> {
        (0..10_000u32)
            .map(|i| {
                let mut c = Caller::anonymous(
                    Protocol::Grpc,
                    Some(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i))),
                );
                c.app_name = Some("shop".into());
                c
            })
            .collect()
    }

    fn members(c: &Cohort, clients: &[Caller]) -> Vec<bool> {
        clients.iter().map(|cl| c.contains(cl)).collect()
    }

    /// Two rollouts' 10 % cohorts (seeds `rollout-<a>`, `rollout-<b>`, as rollouts seed
    /// them) over 10 000 clients overlap as independent draws do: about 1 % of the clients
    /// (100 ± 10; the bound allows 5 standard deviations), for every pair tried; each is
    /// about 10 % (1 000 ± 30; bound ±150). The old shifted draw is printed for contrast.
    #[test]
    fn two_rollouts_cohorts_are_independent_draws() -> Result<(), CoreError> {
        let clients = fleet();
        let mut overlaps = Vec::new();
        for (a, b) in [(1, 2), (2, 3), (7, 8), (10, 11), (41, 97), (100, 101)] {
            let ca = Cohort::new(10.0, &format!("rollout-{a}"))?;
            let cb = Cohort::new(10.0, &format!("rollout-{b}"))?;
            let (ia, ib) = (members(&ca, &clients), members(&cb, &clients));
            for (seed, inside) in [(a, &ia), (b, &ib)] {
                let n = inside.iter().filter(|x| **x).count();
                assert!(
                    (850..=1150).contains(&n),
                    "rollout-{seed}: {n} of 10 000 at 10 %"
                );
            }
            let both = ia.iter().zip(&ib).filter(|(x, y)| **x && **y).count();
            assert!(
                (50..=150).contains(&both),
                "rollout-{a} and rollout-{b}: {both} clients in both 10 % cohorts (~100 expected)"
            );
            overlaps.push(both);
        }
        let shifted: Vec<usize> = [(1, 2), (2, 3), (7, 8)]
            .iter()
            .map(|(a, b)| -> Result<usize, CoreError> {
                let ca = Cohort::parse(&format!("10@rollout-{a}"))?;
                let cb = Cohort::parse(&format!("10@rollout-{b}"))?;
                let (ia, ib) = (members(&ca, &clients), members(&cb, &clients));
                Ok(ia.iter().zip(&ib).filter(|(x, y)| **x && **y).count())
            })
            .collect::<Result<_, _>>()?;
        println!(
            "clients in both of two rollouts' 10 % cohorts, of 10 000: independent {overlaps:?} \
             (~100 expected), shifted {shifted:?}"
        );
        Ok(())
    }

    /// Within one rollout the cohort only widens: every client of a step is in every later
    /// step (5 → 10 → 25 → 50 → 100 %), and its share is near the step's.
    #[test]
    fn a_rollouts_cohort_only_widens() -> Result<(), CoreError> {
        let clients = fleet();
        for seed in ["rollout-1", "rollout-2", "", "a.b:c"] {
            let mut previous = vec![false; clients.len()];
            for percent in [5.0, 10.0, 25.0, 50.0, 100.0] {
                let inside = members(&Cohort::new(percent, seed)?, &clients);
                for (i, was) in previous.iter().enumerate() {
                    assert!(!was || inside[i], "{seed}: client {i} left at {percent} %");
                }
                let n = inside.iter().filter(|x| **x).count() as f64;
                assert!(
                    (n / 100.0 - percent).abs() <= 1.5,
                    "{seed}: {percent} % holds {n} of 10 000"
                );
                previous = inside;
            }
            assert!(previous.iter().all(|x| *x), "100 % is everyone");
        }
        Ok(())
    }

    /// The shifted draw of rules stored before (`<p>@<seed>`, `<p>`) is unchanged: its
    /// cohorts of 10, 50 and 100 % of 200 clients on distinct loopback addresses are within
    /// ±5 % of their share and nested, for every seed tried, and its buckets are the ones
    /// it always gave (pinned), so a rollout under way keeps its clients across the upgrade.
    #[test]
    fn shifted_cohorts_are_near_their_share_nested_and_unchanged() -> Result<(), CoreError> {
        let clients: Vec<Caller> = (1..=200).map(client).collect();
        let seeds: Vec<String> = ["", "r1", "rollout-7", "app.yaml:3"]
            .into_iter()
            .map(String::from)
            .chain((0..40).map(|i| format!("seed-{i}")))
            .collect();
        let mut worst: f64 = 0.0;
        for seed in &seeds {
            let mut previous: Vec<bool> = vec![false; clients.len()];
            for percent in [10.0, 25.0, 50.0, 100.0] {
                let c = Cohort::new(percent, seed)?.with_draw(CohortDraw::Shifted);
                let inside: Vec<bool> = clients.iter().map(|cl| c.contains(cl)).collect();
                let n = inside.iter().filter(|x| **x).count() as f64;
                let share = n / clients.len() as f64 * 100.0;
                assert!(
                    (share - percent).abs() <= 5.0,
                    "seed {seed:?}: {percent} % cohort holds {share} %"
                );
                worst = worst.max((share - percent).abs());
                for (i, was) in previous.iter().enumerate() {
                    assert!(
                        !was || inside[i],
                        "seed {seed:?}: client {i} left at {percent} %"
                    );
                }
                previous = inside;
            }
        }
        println!(
            "shifted cohorts of 200 consecutive addresses, {} seeds: at most {worst} points off",
            seeds.len()
        );
        let pinned: Vec<u32> = [1u8, 2, 3, 200]
            .iter()
            .map(|i| -> Result<u32, CoreError> {
                Ok(Cohort::parse("25@rollout-7")?.bucket(&client(*i)))
            })
            .collect::<Result<_, _>>()?;
        assert_eq!(
            pinned, SHIFTED_BUCKETS,
            "the stored meaning of `25@rollout-7` changed"
        );
        Ok(())
    }

    /// The buckets of 127.0.0.1, .2, .3 and .200 under `25@rollout-7`, as every version
    /// before the independent draw computed them.
    const SHIFTED_BUCKETS: [u32; 4] = [9984, 6165, 2345, 9872];

    #[test]
    fn identity_is_address_app_and_labels_but_not_the_task_id() -> Result<(), CoreError> {
        for draw in [CohortDraw::Independent, CohortDraw::Shifted] {
            let c = |seed: &str| -> Result<Cohort, CoreError> {
                Ok(Cohort::new(50.0, seed)?.with_draw(draw))
            };
            let base = client(9);
            let b = c("s")?.bucket(&base);
            assert_eq!(b, c("s")?.bucket(&client(9)), "stable");
            let mut task = BTreeMap::new();
            task.insert("taskId".to_string(), "3".to_string());
            let with_task = Caller {
                labels: Labels::new(task),
                ..client(9)
            };
            assert_eq!(c("s")?.bucket(&with_task), b, "taskId is not identity");
            // Another app on the same host, and another seed, are drawn again (over many
            // addresses at least one differs).
            let moved_app = (1..=50).any(|i| {
                let mut other = client(i);
                other.app_name = Some("shop".into());
                c("s").is_ok_and(|c| c.bucket(&other) != c.bucket(&client(i)))
            });
            assert!(moved_app, "{draw:?}");
            let (ca, cb) = (c("a")?, c("b")?);
            assert!((1..=50).any(|i| ca.bucket(&client(i)) != cb.bucket(&client(i))));
        }
        Ok(())
    }

    #[test]
    fn parse_and_print() -> Result<(), CoreError> {
        for (expr, printed, draw) in [
            ("25", "25", CohortDraw::Shifted),
            ("12.5@r-7", "12.5@r-7", CohortDraw::Shifted),
            (" 0.01 @x", "0.01@x", CohortDraw::Shifted),
            ("100@a.b:c", "100@a.b:c", CohortDraw::Shifted),
            ("25~rollout-7", "25~rollout-7", CohortDraw::Independent),
            (" 12.5 ~ r ", "12.5~r", CohortDraw::Independent),
            ("30~", "30~", CohortDraw::Independent),
        ] {
            let c = Cohort::parse(expr)?;
            assert_eq!(
                (c.to_string().as_str(), c.draw()),
                (printed, draw),
                "{expr}"
            );
            assert_eq!(Cohort::parse(&c.to_string())?, c);
        }
        assert_eq!(
            Cohort::new(25.0, "r")?.to_string(),
            "25~r",
            "new rules draw anew"
        );
        for bad in [
            "0",
            "100.5",
            "-3",
            "12.345",
            "x",
            "5@bad seed",
            "5~bad seed",
            "5~a@b",
            "5@a~b",
            "NaN",
            "inf",
            "",
        ] {
            assert!(Cohort::parse(bad).is_err(), "{bad}");
        }
        let rule = GrayRule::parse(TYPE_PERCENT, "20@r")?;
        assert_eq!((rule.kind(), rule.expr().as_str()), ("percent", "20@r"));
        let rule = GrayRule::parse(TYPE_PERCENT, "20~r")?;
        assert_eq!(rule.expr(), "20~r");
        let spec = GraySpec::percent("canary", Cohort::parse("5@r")?, None)?;
        assert_eq!(spec.priority, 0);
        assert!(GraySpec::percent("beta", Cohort::parse("5")?, None).is_err());
        Ok(())
    }
}
