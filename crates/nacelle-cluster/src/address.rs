//! Member addresses: `host:port` as the member list and `cluster.conf` give them. Below
//! both the member list ([`crate::members`]) and the notifier ([`crate::notify`]), which
//! each parse them.

use crate::ClusterError;

/// Parses `host:port` (IPv6 as `[addr]:port`).
pub fn parse_member(s: &str) -> Result<(String, u16), ClusterError> {
    let s = s.trim();
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| ClusterError::InvalidMember(s.to_string()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port
        .parse()
        .map_err(|_| ClusterError::InvalidMember(s.to_string()))?;
    if host.is_empty() || port == 0 {
        return Err(ClusterError::InvalidMember(s.to_string()));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members() {
        assert_eq!(
            parse_member("10.0.0.1:8848").ok(),
            Some(("10.0.0.1".into(), 8848))
        );
        assert_eq!(parse_member("[::1]:8848").ok(), Some(("::1".into(), 8848)));
        assert!(parse_member("10.0.0.1").is_err());
        assert!(parse_member("10.0.0.1:x").is_err());
        assert!(parse_member("10.0.0.1:0").is_err());
    }
}
