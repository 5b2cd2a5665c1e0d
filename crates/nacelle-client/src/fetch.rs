//! A read of one key over the client's transport: gRPC (`Shared::grpc_query`) or HTTP v1
//! (`http_transport::query`). Below the client and the session, above both transports.

use crate::error::Result;
use crate::key::Key;
use crate::options::Transport;
use crate::shared::{Config, Shared};

/// Reads `key` (`None`: not found), decrypting a `cipher-aes-` config.
pub(crate) async fn query(shared: &Shared, key: &Key, tag: Option<&str>) -> Result<Option<Config>> {
    if shared.opts.transport == Transport::HttpLongPolling {
        return crate::http_transport::query(shared, key, tag).await;
    }
    shared.grpc_query(key, tag).await
}
