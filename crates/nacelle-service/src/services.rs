//! [`Services`]: the config core and its features, wired — what the server and the
//! adapters hold. The one place that knows every component: it builds them around one
//! core (each installs its gate or subscription on the core), loads them in order
//! ([`Services::load`]) and spawns their background work ([`Services::spawn_tasks`]).

use std::sync::Arc;

use nacelle_core::{ConfigStore, CoreError};
use tokio_util::task::TaskTracker;

use crate::audit::Audit;
use crate::changes::{ChangeRequests, POLICY_REFRESH};
use crate::config::limits::Limits;
use crate::config::service::ConfigService;
use crate::rollouts::{DriverConfig, GuardProbe, Rollouts};
use crate::schemas::{Schemas, SCHEMA_REFRESH};
use crate::webhooks::{WebhookTransport, Webhooks};

/// The config core and its features. Cheap to clone: every component is a handle.
#[derive(Clone, Debug)]
pub struct Services {
    /// The config core: configs, grays, history, namespaces, listening, identity, the
    /// commit path and the audit log every feature records through.
    pub config: ConfigService,
    /// Change requests and the review policies the core's writes are checked against.
    pub changes: ChangeRequests,
    /// The JSON Schemas every publish is checked against.
    pub schemas: Schemas,
    /// Webhooks, fed from the audit log.
    pub webhooks: Webhooks,
    /// Staged rollouts and their driver.
    pub rollouts: Rollouts,
    /// The audit trail: its appender and its reading.
    pub audit: Audit,
}

/// What the background work needs from the server: how it reaches the outside, and
/// whether other nodes share the database.
pub struct Background {
    /// Webhook POSTs go through it.
    pub webhook_transport: Arc<dyn WebhookTransport>,
    /// The rollout driver's settings and probes; `None`: rollouts are not driven here.
    pub rollout_driver: Option<(DriverConfig, Arc<dyn GuardProbe>)>,
    /// Other nodes share the database: what they change is re-read periodically.
    pub shared: bool,
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field(
                "rollout_driver",
                &self.rollout_driver.as_ref().map(|(c, _)| c),
            )
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl Services {
    /// The core over `store` and every feature around it; not ready until
    /// [`Services::load`] completes.
    pub fn new(store: Arc<dyn ConfigStore>, limits: Limits) -> Result<Services, CoreError> {
        Services::around(ConfigService::new(store, limits))
    }

    /// Every feature around `config`, a core that has none yet.
    pub fn around(config: ConfigService) -> Result<Services, CoreError> {
        Ok(Services {
            changes: ChangeRequests::new(&config)?,
            schemas: Schemas::new(&config)?,
            webhooks: Webhooks::new(&config)?,
            rollouts: Rollouts::new(&config),
            audit: Audit::new(&config),
            config,
        })
    }

    /// Loads what the features hold (review policies, schemas, webhooks), then the core,
    /// whose load marks the whole ready: no write is taken before the policies and
    /// schemas that govern it are in memory. Returns the number of configs loaded.
    pub async fn load(&self) -> Result<usize, CoreError> {
        self.changes.refresh_policies().await?;
        self.schemas.refresh().await?;
        self.webhooks.refresh().await?;
        self.config.load().await
    }

    /// Spawns the features' background work on `tracker`: the re-reads of what other
    /// nodes change (when `bg.shared`), scheduled change requests, the rollout driver, the
    /// webhook enqueuer and sender, and — last, as it ends last — the audit appender.
    /// Each task ends at shutdown ([`ConfigService::begin_shutdown`], then
    /// [`Services::finish`] for those that flush).
    pub fn spawn_tasks(&self, tracker: &TaskTracker, bg: Background) {
        let changes = self.changes.clone();
        tracker.spawn(async move { changes.follow(POLICY_REFRESH).await });
        if let Some((config, probe)) = bg.rollout_driver {
            self.rollouts.set_driver(config, probe);
            let rollouts = self.rollouts.clone();
            tracker.spawn(async move { rollouts.drive().await });
        }
        if bg.shared {
            let schemas = self.schemas.clone();
            tracker.spawn(async move { schemas.follow(SCHEMA_REFRESH).await });
            if self.config.auth_enabled() {
                let core = self.config.clone();
                tracker.spawn(async move {
                    core.follow_identities(crate::config::auth::IDENTITY_REFRESH)
                        .await
                });
            }
        }
        let enqueuer = self.webhooks.clone();
        tracker.spawn(async move { enqueuer.run_enqueuer().await });
        let sender = self.webhooks.clone();
        let transport = bg.webhook_transport;
        tracker.spawn(async move { sender.run_sender(transport).await });
        let audit = self.audit.clone();
        tracker.spawn(async move { audit.run_appender().await });
    }

    /// After the server stopped serving: the webhook enqueuer stores what is queued and
    /// the sender stops; the audit appender flushes its queue and ends.
    pub fn finish(&self) {
        self.webhooks.finish();
        self.audit.finish();
    }
}
