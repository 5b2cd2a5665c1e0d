//! Inputs of service operations. Adapters fill these from their wire formats; the service
//! validates them.

use nacelle_core::{ConfigKey, ConfigMeta, NamespaceId, PageRequest, Variant};

/// A publish as a client asked for it.
#[derive(Debug, Clone)]
pub struct PublishRequest {
    pub key: ConfigKey,
    pub content: String,
    /// The `type` parameter as sent; blank or unknown names become `text`.
    pub config_type: Option<String>,
    pub meta: ConfigMeta,
    /// `src_user` as the client sent it: recorded in history only when the caller has no
    /// verified user ([`nacelle_core::Caller::operator`]); the IP comes from the caller.
    pub src_user: String,
    /// Compare-and-set on the current md5 (`casMd5`), when given.
    pub cas_md5: Option<String>,
    pub variant: Variant,
    /// The publish message (`message`), recorded with the history row; `""`: none.
    pub message: String,
    /// The change request this write belongs to (set by change requests, not by clients).
    pub change_id: Option<i64>,
}

/// Who asks for a write that carries no content (a remove, a gray stop or promotion) and
/// why: recorded in its history row as a publish's are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteNote {
    /// `src_user` as the client sent it (used only without a verified user, as for a
    /// publish).
    pub src_user: String,
    /// The message (`message`); `""`: none.
    pub message: String,
    /// The change request the write belongs to.
    pub change_id: Option<i64>,
}

impl WriteNote {
    /// A note with only a claimed user.
    pub fn by(src_user: &str) -> Self {
        WriteNote {
            src_user: src_user.to_string(),
            ..WriteNote::default()
        }
    }

    /// A note with a claimed user and a message.
    pub fn with_message(src_user: &str, message: &str) -> Self {
        WriteNote {
            src_user: src_user.to_string(),
            message: message.to_string(),
            change_id: None,
        }
    }
}

/// How search matches dataId, group and appName.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Exact match; an empty filter matches everything.
    Accurate,
    /// `*` is a wildcard for any run of characters (SQL `LIKE` with `%`), as Nacos does;
    /// a value without `*` must match exactly.
    Blur,
    /// As `Blur`, ignoring case (Unicode lowercase of both sides): the console's search.
    /// Nacos's own APIs keep `Blur`, case-sensitive as Nacos's `utf8_bin` columns are.
    BlurIgnoreCase,
}

/// A config search (`?search=accurate|blur`).
#[derive(Debug, Clone)]
pub struct SearchQuery {
    pub mode: SearchMode,
    pub namespace: NamespaceId,
    pub data_id: String,
    pub group: String,
    pub app_name: String,
    /// Comma-separated tags; a config matches when it has any of them.
    pub config_tags: String,
    /// Comma-separated config types; a config matches when its type is one of them
    /// (blank: any). Nacos 3's `type` filter of `/v3/admin/cs/config/list`.
    pub types: String,
    /// A pattern the stored content must match as `data_id` does (blank: any). Nacos 3's
    /// `configDetail` filter.
    pub content: String,
    pub page: PageRequest,
}
