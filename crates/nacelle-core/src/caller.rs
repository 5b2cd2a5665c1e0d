//! Who is asking: the [`Caller`] every service operation takes, and the rule that decides
//! which client IP a caller has ([`TrustedProxies`]).
//!
//! Adapters build a `Caller` from what they can trust (the socket address, forwarded
//! headers only from a trusted proxy, an authenticated identity) and from what the client
//! says about itself (app name, labels); the service alone decides what a caller sees.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::auth::Identity;
use crate::error::CoreError;

/// The protocol a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Nacos 1.x HTTP API (`/nacos/v1`).
    HttpV1,
    /// Nacos 2.x HTTP API (`/nacos/v2`).
    HttpV2,
    /// Nacos 3.x HTTP client (open) API (`/nacos/v3/client`): served like gRPC (an
    /// encrypted config as ciphertext with its data key; the client decrypts).
    HttpV3,
    /// Nacos 3.x HTTP admin API (`/nacos/v3/admin`): an administrative API, never open to
    /// anonymous callers when authentication is on (Nacos's `AuthAdminFilter`).
    HttpV3Admin,
    /// Nacos 2.x gRPC.
    Grpc,
    /// Another cluster member.
    Cluster,
    /// The server itself (start-up, change-log follower, tests).
    Internal,
}

impl Protocol {
    /// A short name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpV1 => "http-v1",
            Protocol::HttpV2 => "http-v2",
            Protocol::HttpV3 => "http-v3",
            Protocol::HttpV3Admin => "http-v3-admin",
            Protocol::Grpc => "grpc",
            Protocol::Cluster => "cluster",
            Protocol::Internal => "internal",
        }
    }
}

/// Who is asking, as far as the server can tell.
///
/// `ip` is the client IP under the [`TrustedProxies`] policy, never a value the client
/// could forge from an untrusted address: limits, history, audit and listener queries use
/// it. `reported_ip`, `app_name` and `labels` are what the client says about itself; they
/// select gray variants (see [`Caller::gray_ip`]) but grant nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Who the credentials of the request say the caller is (verified by the service's
    /// authenticator; checked by its authorizer on every secured operation).
    pub identity: Identity,
    /// The client IP as trusted by policy; `None` for internal callers.
    pub ip: Option<IpAddr>,
    /// The IP the client reports about itself, believed from anyone as Nacos does, and
    /// used only to target gray variants: gRPC `metadata.clientIp` of the connection's
    /// `ConnectionSetupRequest`; HTTP the first `X-Forwarded-For` entry, else
    /// `X-Real-IP`. `None` when the client reports none (or nothing that parses as an IP).
    pub reported_ip: Option<IpAddr>,
    pub protocol: Protocol,
    /// The application name the client reported (`Client-AppName`, label `AppName`).
    pub app_name: Option<Arc<str>>,
    /// Labels the client sent (gRPC `ConnectionSetupRequest.labels`), shared by every
    /// request of a connection.
    pub labels: Labels,
    /// An administrator's reason for writing directly to a key under a review policy
    /// (HTTP header `X-Nacelle-Emergency`); audited with the write.
    pub emergency: Option<Arc<str>>,
}

/// Labels a client sent about itself; shared, and free to build when there are none (an
/// HTTP request builds a [`Caller`] per request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Option<Arc<BTreeMap<String, String>>>);

impl Labels {
    /// No labels.
    pub fn none() -> Self {
        Labels(None)
    }

    /// Labels from a map; an empty map is [`Labels::none`].
    pub fn new(map: BTreeMap<String, String>) -> Self {
        if map.is_empty() {
            Labels(None)
        } else {
            Labels(Some(Arc::new(map)))
        }
    }

    /// The value of label `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.as_ref()?.get(name).map(String::as_str)
    }

    /// Every label, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    /// Whether there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl Caller {
    /// An anonymous caller from `ip` over `protocol`, with no app name and no labels.
    pub fn anonymous(protocol: Protocol, ip: Option<IpAddr>) -> Self {
        Caller {
            identity: Identity::Anonymous,
            ip,
            reported_ip: None,
            protocol,
            app_name: None,
            labels: Labels::none(),
            emergency: None,
        }
    }

    /// The server itself.
    pub fn internal() -> Self {
        let mut caller = Caller::anonymous(Protocol::Internal, None);
        caller.identity = Identity::Trusted;
        caller
    }

    /// The verified user's name, if any (what history rows record as `src_user`).
    pub fn user(&self) -> Option<&str> {
        self.identity.user()
    }

    /// Who a write is recorded as made by (history's `src_user`, a config's `createUser`):
    /// the verified user whenever there is one, whatever the request claims — no user
    /// writes history in another's name —; the client's own `src_user` (`claimed`) only
    /// from a caller without one (authentication off, or a server-internal caller), as
    /// Nacos does.
    pub fn operator<'a>(&'a self, claimed: &'a str) -> &'a str {
        self.user().unwrap_or(claimed)
    }

    /// The address gray rules match (a beta's IP list, the `ClientIp` label, a percent
    /// cohort): the IP the client reports about itself, else its IP. Nacos matches the
    /// reported IP (`ConnectionMeta.clientIp`, `WebUtils.getRemoteIp`), so a beta for the
    /// address a client reports reaches it behind NAT, a proxy or a sidecar; a client that
    /// reports none is matched by its own address. A targeting rule, not a permission:
    /// a client may claim any address, and reads of the key are authorized as ever.
    pub fn gray_ip(&self) -> Option<IpAddr> {
        self.reported_ip.or(self.ip)
    }

    /// The client IP as text (`""` when there is none), as history rows record it.
    pub fn ip_string(&self) -> String {
        self.ip.map(|ip| ip.to_string()).unwrap_or_default()
    }
}

/// The proxies whose forwarded-address headers (HTTP `X-Real-IP` / `X-Forwarded-For`) and
/// reported client IPs (gRPC `clientIp`) are believed. Empty by default: then a caller's
/// IP is always its socket address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<IpNet>,
}

impl TrustedProxies {
    /// No trusted proxy.
    pub fn none() -> Self {
        TrustedProxies::default()
    }

    /// Parses a comma-separated list of CIDRs or bare addresses (`10.0.0.0/8, ::1`).
    pub fn parse_list(list: &str) -> Result<Self, CoreError> {
        let mut nets = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            nets.push(parse_net(item)?);
        }
        Ok(TrustedProxies { nets })
    }

    /// Builds the policy from separate entries (each a CIDR or an address).
    pub fn from_entries<S: AsRef<str>>(entries: &[S]) -> Result<Self, CoreError> {
        let mut nets = Vec::new();
        for e in entries {
            nets.push(parse_net(e.as_ref().trim())?);
        }
        Ok(TrustedProxies { nets })
    }

    /// Whether no proxy is trusted.
    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }

    /// Whether `peer` is a trusted proxy.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.nets.iter().any(|n| n.contains(&peer))
    }

    /// The caller's IP for an HTTP request from socket address `peer` that carried
    /// `forwarded` (the address a proxy header names, already parsed): the forwarded address
    /// when `peer` is trusted, else `peer` itself.
    pub fn resolve(&self, peer: IpAddr, forwarded: Option<IpAddr>) -> IpAddr {
        let peer = peer.to_canonical();
        match forwarded {
            Some(f) if self.trusts(peer) => f.to_canonical(),
            _ => peer,
        }
    }

    /// The caller's IP for a gRPC connection from `peer` whose client reported
    /// `reported` (`metadata.clientIp`): the reported address when it equals the socket
    /// address or the connection comes through a trusted proxy, else the socket address.
    pub fn resolve_reported(&self, peer: IpAddr, reported: Option<&str>) -> IpAddr {
        let peer = peer.to_canonical();
        let reported = reported
            .map(str::trim)
            .and_then(|r| r.parse::<IpAddr>().ok())
            .map(|r| r.to_canonical());
        match reported {
            Some(r) if r == peer || self.trusts(peer) => r,
            _ => peer,
        }
    }
}

impl fmt::Display for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.nets.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl FromStr for TrustedProxies {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TrustedProxies::parse_list(s)
    }
}

fn parse_net(item: &str) -> Result<IpNet, CoreError> {
    if let Ok(net) = item.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    match item.parse::<IpAddr>() {
        Ok(ip) => Ok(IpNet::from(ip.to_canonical())),
        Err(_) => Err(CoreError::invalid(format!(
            "invalid trusted proxy `{item}`: expected an IP address or a CIDR such as 10.0.0.0/8"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn parses_lists() {
        let t = TrustedProxies::parse_list(" 10.0.0.0/8 , ::1,192.168.1.7").expect("valid");
        assert!(t.trusts(ip("10.1.2.3")));
        assert!(t.trusts(ip("::1")));
        assert!(t.trusts(ip("192.168.1.7")));
        assert!(!t.trusts(ip("192.168.1.8")));
        assert!(TrustedProxies::parse_list("").expect("empty").is_empty());
        assert!(TrustedProxies::parse_list("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse_list("proxy.local").is_err());
    }

    #[test]
    fn mapped_ipv4_is_canonical() {
        let t = TrustedProxies::parse_list("127.0.0.1").expect("valid");
        assert!(t.trusts(ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn forwarded_only_from_trusted() {
        let none = TrustedProxies::none();
        assert_eq!(
            none.resolve(ip("1.2.3.4"), Some(ip("9.9.9.9"))),
            ip("1.2.3.4")
        );
        let t = TrustedProxies::parse_list("1.2.3.0/24").expect("valid");
        assert_eq!(t.resolve(ip("1.2.3.4"), Some(ip("9.9.9.9"))), ip("9.9.9.9"));
        assert_eq!(t.resolve(ip("1.2.3.4"), None), ip("1.2.3.4"));
        assert_eq!(t.resolve(ip("5.5.5.5"), Some(ip("9.9.9.9"))), ip("5.5.5.5"));
    }

    #[test]
    fn reported_ip_rule() {
        let none = TrustedProxies::none();
        let peer = ip("10.0.0.5");
        assert_eq!(none.resolve_reported(peer, Some("10.0.0.5")), peer);
        assert_eq!(none.resolve_reported(peer, Some("10.9.9.9")), peer);
        assert_eq!(none.resolve_reported(peer, Some("bogus")), peer);
        assert_eq!(none.resolve_reported(peer, None), peer);
        let t = TrustedProxies::parse_list("10.0.0.0/24").expect("valid");
        assert_eq!(
            t.resolve_reported(peer, Some("172.16.0.1")),
            ip("172.16.0.1")
        );
    }
}
