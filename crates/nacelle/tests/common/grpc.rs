//! A raw Nacos 2.x gRPC client for these tests (tonic and nacelle-proto): the handshake a
//! real SDK does, then unary publishes and queries on the registered connection.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use nacelle_proto::config::{
    ConfigBatchListenRequest, ConfigListenContext, ConfigPublishRequest, ConfigQueryRequest,
    ConfigQueryResponse,
};
use nacelle_proto::connection::{ConnectionSetupRequest, HealthCheckRequest, ServerCheckRequest};
use nacelle_proto::grpc::bi_request_stream_client::BiRequestStreamClient;
use nacelle_proto::grpc::request_client::RequestClient;
use nacelle_proto::{types, Payload, ResponseHead};
use tonic::transport::Channel;

const WAIT: Duration = Duration::from_secs(10);

fn json<T: serde::Serialize>(msg: &T) -> Result<Vec<u8>> {
    Ok(serde_json::to_vec(msg)?)
}

async fn unary(
    client: &mut RequestClient<Channel>,
    type_name: &str,
    body: Vec<u8>,
) -> Result<Payload> {
    Ok(
        tokio::time::timeout(WAIT, client.request(Payload::new(type_name, body)))
            .await
            .with_context(|| format!("{type_name} timed out"))?
            .map_err(|s| anyhow!("{type_name}: {s}"))?
            .into_inner(),
    )
}

/// A registered connection: its unary client, and the bi-stream kept open.
pub struct Registered {
    client: RequestClient<Channel>,
    _stream: tokio::sync::mpsc::Sender<Payload>,
    _inbound: tonic::Streaming<Payload>,
}

impl Registered {
    /// `ServerCheckRequest`, the bi-stream with `ConnectionSetupRequest`, health checks
    /// until registered.
    pub async fn connect(channel: Channel) -> Result<Registered> {
        let mut client = RequestClient::new(channel.clone());
        let check = json(&ServerCheckRequest {
            request_id: Some("check".into()),
        })?;
        let check = unary(&mut client, types::SERVER_CHECK_REQUEST, check).await?;
        anyhow::ensure!(check.head()?.is_ok(), "server check failed");
        let (tx, rx) = tokio::sync::mpsc::channel::<Payload>(4);
        let setup = ConnectionSetupRequest::new("nacelle-test", "", Some("nacelle-test"));
        tx.send(Payload::new(types::CONNECTION_SETUP_REQUEST, json(&setup)?))
            .await?;
        let outbound =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|p| (p, rx)) });
        let mut streams = BiRequestStreamClient::new(channel);
        let inbound = tokio::time::timeout(WAIT, streams.request_bi_stream(outbound))
            .await??
            .into_inner();
        let deadline = Instant::now() + WAIT;
        loop {
            let health = json(&HealthCheckRequest {
                request_id: Some("health".into()),
            })?;
            let answer = unary(&mut client, types::HEALTH_CHECK_REQUEST, health).await?;
            if answer.head()?.is_ok() {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "never registered");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(Registered {
            client,
            _stream: tx,
            _inbound: inbound,
        })
    }

    /// Publishes `content` under (`id`, `group`) in the public namespace; the answer's head.
    pub async fn publish(&mut self, id: &str, group: &str, content: &str) -> Result<ResponseHead> {
        let publish = ConfigPublishRequest::new(id, group, "", content);
        let answer = unary(
            &mut self.client,
            types::CONFIG_PUBLISH_REQUEST,
            json(&publish)?,
        )
        .await?;
        Ok(answer.head()?)
    }

    /// Listens to (`id`, `group`) in the public namespace saying it holds `md5` (a
    /// `ConfigBatchListenRequest` as an SDK's listen sync sends it); the answer's head.
    pub async fn listen(&mut self, id: &str, group: &str, md5: &str) -> Result<ResponseHead> {
        let listen = ConfigBatchListenRequest::new(
            true,
            vec![ConfigListenContext {
                data_id: Some(id.into()),
                group: Some(group.into()),
                tenant: Some(String::new()),
                md5: Some(md5.into()),
            }],
        );
        let answer = unary(
            &mut self.client,
            types::CONFIG_BATCH_LISTEN_REQUEST,
            json(&listen)?,
        )
        .await?;
        Ok(answer.head()?)
    }

    /// Queries (`id`, `group`) in the public namespace.
    pub async fn query(&mut self, id: &str, group: &str) -> Result<ConfigQueryResponse> {
        let query = ConfigQueryRequest::new(id, group, "");
        let answer = unary(&mut self.client, types::CONFIG_QUERY_REQUEST, json(&query)?).await?;
        Ok(answer.parse_body()?)
    }
}
