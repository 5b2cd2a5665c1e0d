//! The live view's questions to the other members: each member's part of "who runs what"
//! for one key, asked over its HTTP API (`GET /nacos/nacelle/v1/clients?scope=local`) with
//! the cluster secret, all members at once, each bounded by [`PEER_TIMEOUT`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nacelle_api::clients::NodeClients;
use nacelle_core::ConfigKey;
use nacelle_service::cluster::SECRET_HEADER;
use nacelle_service::PeerQueries;
use serde::Deserialize;

use crate::members::Membership;

/// How long one member may take to answer before it is shown with an error.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(3);

/// The path a member answers its own part of the live view on.
pub const CLIENTS_PATH: &str = "/nacos/nacelle/v1/clients";

/// Asks the members the membership lists.
#[derive(Debug)]
pub(crate) struct Peers {
    pub membership: Arc<Membership>,
    pub client: reqwest::Client,
    pub secret: String,
}

/// The envelope of Nacelle's API.
#[derive(Deserialize)]
struct Envelope {
    code: i64,
    #[serde(default)]
    message: String,
    data: Option<NodeClients>,
}

async fn ask(
    client: reqwest::Client,
    secret: String,
    address: String,
    key: ConfigKey,
) -> NodeClients {
    let url = format!("http://{address}{CLIENTS_PATH}");
    let query = [
        ("namespaceId", key.tenant()),
        ("groupName", key.group()),
        ("dataId", key.data_id()),
        ("scope", "local"),
    ];
    let sent = client
        .get(url)
        .query(&query)
        .header(SECRET_HEADER, &secret)
        .timeout(PEER_TIMEOUT)
        .send()
        .await;
    let answer = match sent {
        Ok(r) => {
            let status = r.status();
            match r.json::<Envelope>().await {
                Ok(Envelope {
                    code: 0,
                    data: Some(data),
                    ..
                }) => Ok(data),
                Ok(e) => Err(format!("HTTP {status}, code {}: {}", e.code, e.message)),
                Err(e) => Err(format!("HTTP {status}: unreadable answer: {e}")),
            }
        }
        Err(e) if e.is_timeout() => Err(format!("no answer within {PEER_TIMEOUT:?}")),
        Err(e) => Err(format!("unreachable: {e}")),
    };
    match answer {
        Ok(mut part) => {
            part.node = address;
            part.is_self = false;
            part
        }
        Err(error) => {
            tracing::debug!(member = %address, %error, "live view: a member did not answer");
            NodeClients {
                node: address,
                error: Some(error),
                ..Default::default()
            }
        }
    }
}

impl PeerQueries for Peers {
    fn clients_of(
        &self,
        key: &ConfigKey,
    ) -> Pin<Box<dyn Future<Output = Vec<NodeClients>> + Send>> {
        let asks: Vec<_> = self
            .membership
            .peers()
            .into_iter()
            .map(|address| {
                let asked = tokio::spawn(ask(
                    self.client.clone(),
                    self.secret.clone(),
                    address.clone(),
                    key.clone(),
                ));
                (address, asked)
            })
            .collect();
        Box::pin(async move {
            let mut parts = Vec::with_capacity(asks.len());
            for (address, asked) in asks {
                match asked.await {
                    Ok(part) => parts.push(part),
                    Err(e) => parts.push(NodeClients {
                        node: address,
                        error: Some(format!("the question was lost: {e}")),
                        ..Default::default()
                    }),
                }
            }
            parts
        })
    }
}
