//! Nacos HTTP v2 API (`/nacos/v2`): every answer is a `{code, message, data}` envelope.

pub(crate) mod config;
