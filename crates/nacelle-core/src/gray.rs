//! The gray (canary) model: a key has its formal config plus zero or more gray variants,
//! each with a rule and a priority; the first rule that matches a caller, by priority,
//! decides what that caller sees (as Nacos 2.5/3.0 do).
//!
//! Rule kinds, as Nacos stores them in `config_info_gray.gray_rule`
//! (`{"type", "version", "expr", "priority"}`):
//! - `beta` — the caller's IP is in a list of addresses or CIDRs (Nacos: addresses only).
//!   Gray name `beta`, priority `i32::MAX`.
//! - `tag` — the caller asks for a tag (`tag` parameter, `Vipserver-Tag` header or label,
//!   gRPC `tag`). Gray name `tag_<t>`, priority `i32::MAX - 1`.
//! - `tagv2` — a label expression in Nacos's tagv2 syntax, matched against the labels the
//!   client sent and its app name: version `1.0.0` is one `key=v1,v2` item, `1.1.0` an OR
//!   (`||`) of AND (`&&`) clauses of such items. Gray names are chosen by the publisher.
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

/// The rule of one gray variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrayRule {
    /// Callers whose IP is one of these addresses or inside one of these networks.
    Beta(IpList),
    /// Callers that ask for this tag.
    Tag(String),
    /// Callers whose labels match this expression.
    Labels(LabelExpr),
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
            other => Err(CoreError::invalid(format!(
                "unknown gray rule type `{other}` (known: beta, tag, tagv2)"
            ))),
        }
    }

    /// The stored type name.
    pub fn kind(&self) -> &'static str {
        match self {
            GrayRule::Beta(_) => TYPE_BETA,
            GrayRule::Tag(_) => TYPE_TAG,
            GrayRule::Labels(_) => TYPE_TAGV2,
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
        }
    }

    /// Whether `caller`, asking for `tag` (the request's tag, else the caller's own), is
    /// selected by this rule.
    pub fn matches(&self, caller: &Caller, tag: Option<&str>) -> bool {
        match self {
            GrayRule::Beta(ips) => caller.ip.is_some_and(|ip| ips.contains(ip)),
            GrayRule::Tag(t) => tag == Some(t.as_str()),
            GrayRule::Labels(e) => e.matches(caller),
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
/// `ClientIp` its IP; any other key is the client's label of that name, or of that name
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
        "ClientIp" => return caller.ip.map(|ip| ip.to_string()),
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
