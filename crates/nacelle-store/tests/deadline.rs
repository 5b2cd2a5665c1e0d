//! Every store method of the networked backends fails with `StoreError::Unavailable`
//! within its deadline when the database black-holes (accepts connections, never answers),
//! instead of hanging. The calls are generated from `nacelle_core::store_roles!`, the list
//! the store traits themselves are generated from: a method added there is called here
//! without anyone remembering to (and needs a [`Sample`] for a new argument type, or this
//! file does not compile).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use bytes::Bytes;
use nacelle_core::auth::{IdentityWrite, PermissionRecord};
use nacelle_core::change::{
    ChangeEventKind, ChangeFilter, ChangeItem, ChangeOp, ChangeState, ChangeUpdate, ChangeWrite,
    NewChange, NewChangeEvent, ReviewPolicy,
};
use nacelle_core::store::{Cost, METHODS};
use nacelle_core::{
    ConfigKey, ConfigMeta, ConfigStore, ConfigType, HistoryLog, HistoryRetention, Namespace,
    NamespaceId, OpSource, PageRequest, PublishRecord, SamePolicy, SchemaRecord, StoreError,
};
use nacelle_store::StoreOptions;
use nacelle_testkit::{run_on, Backend, Proxy, ProxyMode, TestDb};

/// The values every call is made with.
struct Samples {
    key: ConfigKey,
    record: PublishRecord,
    records: Vec<PublishRecord>,
    source: OpSource,
    namespace: Namespace,
    namespace_id: NamespaceId,
    retention: HistoryRetention,
    identity: IdentityWrite,
    change: NewChange,
    change_filter: ChangeFilter,
    change_update: ChangeUpdate,
    change_writes: Vec<ChangeWrite>,
    change_event: NewChangeEvent,
    policy: ReviewPolicy,
    schema: SchemaRecord,
    audit: Vec<nacelle_core::audit::AuditEvent>,
    audit_filter: nacelle_core::audit::AuditFilter,
    webhook: nacelle_core::webhook::Webhook,
    deliveries: Vec<nacelle_core::webhook::NewDelivery>,
    claim: nacelle_core::webhook::DeliveryClaim,
    delivery_result: nacelle_core::webhook::DeliveryResult,
    rollout: nacelle_core::rollout::NewRollout,
    rollout_update: nacelle_core::rollout::RolloutUpdate,
}

impl Samples {
    fn new() -> Self {
        let key = ConfigKey::from_trusted("", "G", "deadline");
        let record = PublishRecord {
            key: key.clone(),
            content: Bytes::from_static(b"x"),
            md5: nacelle_core::md5_hex(b"x"),
            config_type: ConfigType::Text,
            meta: ConfigMeta::default(),
            source: OpSource::default(),
            cas_md5: None,
            now_ms: 1_700_000_000_000,
            gray: None,
        };
        let change_event = NewChangeEvent {
            kind: ChangeEventKind::Commented,
            user: "u".into(),
            text: "t".into(),
        };
        Samples {
            change: NewChange {
                namespace: NamespaceId::from_trusted(""),
                title: "t".into(),
                description: String::new(),
                author: "u".into(),
                state: ChangeState::Open,
                items: vec![ChangeItem {
                    group: "G".into(),
                    data_id: "deadline".into(),
                    op: ChangeOp::Remove,
                    base_md5: String::new(),
                }],
                now_ms: 1,
            },
            change_filter: ChangeFilter::default(),
            change_update: ChangeUpdate::event(1, change_event.clone(), 1),
            change_writes: vec![ChangeWrite::Publish {
                record: Box::new(record.clone()),
                base_md5: String::new(),
            }],
            change_event,
            policy: ReviewPolicy {
                namespace: NamespaceId::from_trusted(""),
                group_pattern: "*".into(),
                required_approvals: 1,
                updated_by: "u".into(),
                updated_ms: 1,
            },
            records: vec![record.clone()],
            record,
            key,
            source: OpSource::default(),
            namespace: Namespace {
                id: NamespaceId::from_trusted("deadline"),
                name: "deadline".into(),
                desc: String::new(),
            },
            namespace_id: NamespaceId::from_trusted("deadline"),
            // A rule that condemns rows, so the purge has to ask the database.
            retention: HistoryRetention {
                older_than_ms: None,
                keep_per_key: Some(1),
            },
            identity: IdentityWrite::AddPermission(PermissionRecord {
                role: "r".into(),
                resource: "*:*:*".into(),
                action: "rw".into(),
            }),
            schema: SchemaRecord {
                namespace: NamespaceId::from_trusted("deadline"),
                group: "G".into(),
                data_id: "*.json".into(),
                schema: "{}".into(),
                description: String::new(),
                src_user: "nacos".into(),
                modified_ms: 1_700_000_000_000,
            },
            audit: vec![nacelle_core::audit::AuditEvent {
                time_ms: 1_700_000_000_000,
                user: "u".into(),
                address: String::new(),
                protocol: "internal".into(),
                action: "publish".into(),
                target: "/G/deadline".into(),
                outcome: "ok".into(),
                detail: String::new(),
                change_id: None,
            }],
            audit_filter: nacelle_core::audit::AuditFilter::default(),
            webhook: nacelle_core::webhook::Webhook {
                id: 1,
                namespace: NamespaceId::from_trusted(""),
                group_pattern: "*".into(),
                data_id_pattern: "*".into(),
                url: "http://127.0.0.1:9/hook".into(),
                secret: "deadline-secret".into(),
                events: Vec::new(),
                enabled: true,
                description: String::new(),
                created_by: "u".into(),
                created_ms: 1,
                updated_ms: 1,
            },
            deliveries: vec![nacelle_core::webhook::NewDelivery {
                hook_id: 1,
                event_id: "e".into(),
                kind: "publish".into(),
                body: "{}".into(),
                created_ms: 1,
            }],
            claim: nacelle_core::webhook::DeliveryClaim {
                owner: "o".into(),
                now_ms: 2,
                lease_until_ms: 3,
                limit: 10,
            },
            delivery_result: nacelle_core::webhook::DeliveryResult {
                status: nacelle_core::webhook::DeliveryStatus::Delivered,
                code: 200,
                error: String::new(),
                next_attempt_ms: 2,
                now_ms: 2,
            },
            rollout: nacelle_core::rollout::NewRollout {
                key: ConfigKey::from_trusted("", "G", "deadline"),
                content: "x".into(),
                config_type: ConfigType::Text,
                base_md5: String::new(),
                plan: nacelle_core::rollout::RolloutPlan {
                    steps: vec![50.0, 100.0],
                    bake_ms: 1000,
                    ..Default::default()
                },
                author: "u".into(),
                now_ms: 1,
            },
            rollout_update: nacelle_core::rollout::RolloutUpdate {
                expected_version: 1,
                state: nacelle_core::rollout::RolloutState::Paused,
                step: 0,
                step_started_ms: 1,
                advanced_to: -1,
                reason: String::new(),
                now_ms: 1,
            },
        }
    }
}

/// A value of an argument type, taken from the samples.
trait Sample<'a> {
    fn sample(s: &'a Samples) -> Self;
}

macro_rules! samples {
    ($($t:ty => |$s:ident| $e:expr;)*) => {
        $(impl<'a> Sample<'a> for $t {
            fn sample($s: &'a Samples) -> Self {
                $e
            }
        })*
    };
}

samples! {
    &'a ConfigKey => |s| &s.key;
    &'a PublishRecord => |s| &s.record;
    &'a [PublishRecord] => |s| &s.records;
    &'a OpSource => |s| &s.source;
    &'a Namespace => |s| &s.namespace;
    &'a NamespaceId => |s| &s.namespace_id;
    &'a HistoryRetention => |s| &s.retention;
    &'a IdentityWrite => |s| &s.identity;
    &'a NewChange => |s| &s.change;
    &'a ChangeFilter => |s| &s.change_filter;
    &'a ChangeUpdate => |s| &s.change_update;
    &'a [ChangeWrite] => |s| &s.change_writes;
    &'a NewChangeEvent => |s| &s.change_event;
    &'a ReviewPolicy => |s| &s.policy;
    &'a SchemaRecord => |s| &s.schema;
    &'a [nacelle_core::audit::AuditEvent] => |s| &s.audit;
    &'a nacelle_core::audit::AuditFilter => |s| &s.audit_filter;
    &'a nacelle_core::webhook::Webhook => |s| &s.webhook;
    &'a [nacelle_core::webhook::NewDelivery] => |s| &s.deliveries;
    &'a nacelle_core::webhook::DeliveryClaim => |s| &s.claim;
    &'a nacelle_core::webhook::DeliveryResult => |s| &s.delivery_result;
    &'a nacelle_core::rollout::NewRollout => |s| &s.rollout;
    &'a nacelle_core::rollout::RolloutUpdate => |s| &s.rollout_update;
    bool => |_s| true;
    &'a str => |_s| "beta";
    Option<&'a str> => |_s| Some("d");
    SamePolicy => |_s| SamePolicy::Overwrite;
    PageRequest => |_s| PageRequest { page_no: 1, page_size: 10 };
    HistoryLog => |_s| HistoryLog::Configs;
    i64 => |_s| 0;
    u32 => |_s| 10;
}

/// One call of a store method, its outcome reduced to success or the error.
type Outcome<'a> = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>;

/// Generates `every_call`: each method of `store_roles!` called with samples, with its name
/// and cost.
macro_rules! every_call {
    ($(
        $(#[$role_meta:meta])*
        $role:ident {$(
            $(#[$meta:meta])*
            [$cost:expr]
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ok:ty;
        )*}
    )*) => {
        fn every_call<'a>(
            store: &'a dyn ConfigStore,
            s: &'a Samples,
        ) -> Vec<(&'static str, Cost, Outcome<'a>)> {
            vec![$($({
                $(let $arg = <$ty as Sample>::sample(s);)*
                let cost = $cost;
                let call: Outcome<'a> =
                    Box::pin(async move { store.$name($($arg),*).await.map(|_| ()) });
                (stringify!($name), cost, call)
            }),*),*]
        }
    };
}

nacelle_core::store_roles!(every_call);

/// Opens the store through a proxy, black-holes it, and calls every method at once: each
/// must fail with the deadline's `Unavailable` within its deadline (plus slack for a busy
/// machine), never hang.
async fn every_method_times_out(backend: Backend) -> anyhow::Result<()> {
    let db = TestDb::create(backend).await?;
    let proxy = Proxy::start(db.server_addr()?).await?;
    let op_timeout = Duration::from_millis(500);
    let options = StoreOptions {
        max_connections: 4,
        // Longer than every deadline: only the deadline layer can end a call.
        acquire_timeout: Duration::from_secs(120),
        op_timeout,
    };
    let store: Arc<dyn ConfigStore> =
        nacelle_store::open_with(&db.url_via(proxy.addr)?, &options).await?;
    store.ping().await?;
    proxy.set(ProxyMode::Blackhole);

    let samples = Samples::new();
    let calls = every_call(store.as_ref(), &samples);
    let mut names: Vec<&str> = calls.iter().map(|(name, _, _)| *name).collect();
    names.sort_unstable();
    let mut listed = METHODS.to_vec();
    listed.sort_unstable();
    ensure!(names == listed, "calls {names:?} != methods {listed:?}");

    let started = Instant::now();
    let waits = calls.into_iter().map(|(name, cost, call)| async move {
        let limit = nacelle_store::deadline_for(op_timeout, cost);
        let outcome = tokio::time::timeout(limit + Duration::from_secs(30), call)
            .await
            .with_context(|| format!("{name} hung"))?;
        let took = started.elapsed();
        match outcome {
            Err(StoreError::Unavailable(m)) if m.contains("did not answer within") => {
                ensure!(
                    took < limit + Duration::from_secs(10),
                    "{name}: {took:?}, deadline {limit:?}"
                );
                println!("{name}: failed after {} ms: {m}", took.as_millis());
                Ok(())
            }
            other => anyhow::bail!("{name}: {other:?}"),
        }
    });
    let results = futures::future::join_all(waits).await;
    for r in results {
        r?;
    }
    drop(store);
    drop(proxy);
    drop(db);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql_every_method_times_out_when_the_database_black_holes() -> nacelle_testkit::TestResult
{
    run_on(Backend::MariaDb, every_method_times_out).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_every_method_times_out_when_the_database_black_holes(
) -> nacelle_testkit::TestResult {
    run_on(Backend::Postgres, every_method_times_out).await
}
