//! Nacelle's own API data, shared by the server and its clients; none of it is Nacos wire
//! format (that is `nacelle-proto`'s).
//!
//! - [`audit`]: the audit trail's hash chain (canonical entry encoding, SHA-256, the
//!   verification walk): the store computes it, `nacelle audit verify` and the SDK check
//!   it with the same code, so a client does not take the server's word for it.
//! - [`clients`]: the live view's answer (`GET /nacos/nacelle/v1/clients`): who listens
//!   to a key on each node and what each holds. The service builds it, cluster members
//!   exchange it, the SDK and the CLI read it.
//!
//! # Invariant
//! Depends on no Nacelle crate and on no transport (serde and sha2 only).

pub mod audit;
pub mod clients;
