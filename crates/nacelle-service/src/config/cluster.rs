//! What the service knows of the cluster: a read-only view of the members, installed by
//! the cluster module at wiring time. Kept here so protocol adapters can show it without
//! depending on the cluster crate.

/// Health of a member as seen from this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Up,
    Suspicious,
    Down,
}

impl MemberState {
    /// Nacos's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberState::Up => "UP",
            MemberState::Suspicious => "SUSPICIOUS",
            MemberState::Down => "DOWN",
        }
    }
}

/// One member of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub ip: String,
    pub port: u16,
    pub state: MemberState,
    /// Last successful health check, ms since the epoch (0 if never).
    pub last_refresh_ms: i64,
    /// Consecutive failed health checks.
    pub fail_count: u32,
    /// Whether this member is the node answering.
    pub is_self: bool,
    /// Change notifications this node sent to the member (zero for itself).
    pub notified: NotifyCounts,
}

/// Change notifications sent to one member, by path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotifyCounts {
    /// Delivered by `ConfigChangeClusterSyncRequest` on the member's cluster gRPC port.
    pub via_grpc: u64,
    /// Delivered by the HTTP `dataChange` call (gRPC failed or was unavailable).
    pub via_http: u64,
    /// Attempts that failed on both paths (each is retried with backoff).
    pub failed: u64,
}

impl MemberInfo {
    /// `ip:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// A view of the members, implemented by the cluster module.
pub trait MembershipView: Send + Sync + 'static {
    /// Every member, this node included.
    fn members(&self) -> Vec<MemberInfo>;
}

/// The resource a permission names to let a user other than an administrator read the
/// member list (Nacos 2.x/3.x: `Commons.NACOS_CORE_CONTEXT + "/cluster"`).
pub const CLUSTER_RESOURCE: &str = "/v1/core/cluster";

/// The header (HTTP) or `metadata.headers` key (gRPC) carrying the cluster secret on calls
/// between members.
pub const SECRET_HEADER: &str = "Nacelle-Cluster-Secret";

/// Compares a presented secret with the expected one without an early exit, so the time
/// taken does not reveal how much of a guess matched.
pub fn secret_matches(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_comparison() {
        assert!(secret_matches("s3cret", "s3cret"));
        assert!(!secret_matches("s3cre", "s3cret"));
        assert!(!secret_matches("s3cretx", "s3cret"));
        assert!(!secret_matches("", "s3cret"));
    }
}
