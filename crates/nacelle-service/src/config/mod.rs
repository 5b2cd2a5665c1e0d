//! The config core: configs and their gray variants in memory, the one commit path every
//! write goes through (`commit.rs`), validation, listening and notification, history,
//! namespaces, identity and the authorizer (`auth/`), encryption, the audit log every
//! operation records in (`audit/`), and the gates through which features take part in
//! its decisions (`gates.rs`). Nothing here imports a feature folder of the crate.

pub(crate) mod audit;
pub mod auth;
pub(crate) mod batches;
pub(crate) mod cipher;
mod cipher_state;
pub mod cluster;
pub mod commit;
pub mod follow;
pub(crate) mod gates;
pub(crate) mod history;
pub(crate) mod hub;
mod key_map;
pub mod limits;
pub mod live;
pub(crate) mod namespaces;
mod patterns;
pub(crate) mod read;
pub mod replication;
pub mod request;
pub mod service;
pub mod transfer;
pub(crate) mod view;
pub mod watch;
mod write;
