//! `ferry distributed WORKER.properties`: assembles a distributed worker from the herder's
//! [`DistributedHerder`], Kafka's config and status topics and task-slot consumer group, and the
//! offset store and sink the registry's `kafka` plugins make (`backends`) — then serves the REST API
//! until SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use ferry_herder::{DistributedHerder, DistributedSettings};
use ferry_kafka::connect::slots::{SlotsConfig, TaskSlots};
use ferry_kafka::connect::{InternalTopicConfig, KafkaConfigBackingStore, KafkaStatusBackingStore};
use ferry_offsets::OffsetBackingStore;
use ferry_plugin::{OpenMode, Properties, StatusBackingStore, WorkerGroup};
use ferry_rest::RestServer;
use ferry_runtime::{Worker, WorkerSettings};

use super::{DistributedConfig, InternalTopic};
use crate::standalone::StopSignals;
use crate::{Ferry, RunError};

/// How often other workers' config and status writes are read.
const REFRESH_EVERY: Duration = Duration::from_millis(500);
/// How long a broker call of the internal stores may make no progress.
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

fn topic_config(config: &DistributedConfig, topic: &InternalTopic) -> InternalTopicConfig {
    let mut clients = config.client_overrides.to_vec();
    clients.extend(config.admin_overrides.to_vec());
    InternalTopicConfig {
        bootstrap_servers: config.bootstrap_servers.clone(),
        topic: topic.name.clone(),
        partitions: topic.partitions,
        replication_factor: topic.replication_factor,
        client_overrides: clients,
        timeout: STORE_TIMEOUT,
    }
}

/// Runs one distributed worker until SIGTERM or SIGINT.
pub(crate) async fn run(
    ferry: &Ferry,
    props: &Properties,
    config: DistributedConfig,
) -> Result<(), RunError> {
    // The offset store and sink come from the registry, as in standalone; checked before anything
    // is bound or created.
    let (store_spec, sink_spec) = super::backends::kafka_backends(
        ferry.worker_plugins(),
        props,
        (config.key_converter, config.value_converter),
    )
    .map_err(kafka)?;
    // Bound first: a taken port refuses the start before anything is created.
    let mut rest = RestServer::bind(&config.rest).await?;
    if let Some(levels) = crate::cli::log_levels() {
        rest = rest.with_log_levels(levels);
    }
    let port = rest
        .local_addrs()
        .get(config.advertised_listener)
        .map_or(0, |a| a.port());
    let worker_id = config.worker_id(port);
    let rest_url = format!("{}://{worker_id}", config.advertised_scheme());

    let (config_store, status_store) = internal_stores(&config).await?;
    let offsets: Arc<dyn OffsetBackingStore> = store_spec.open(OpenMode::ReadWrite).await?;
    let sinks = sink_spec.start().await?;
    tracing::info!(
        "ferry distributed: worker {worker_id} in group {}; configs in {}, statuses in {}, offsets in {}, \
         records to {}",
        config.group_id,
        config.config_topic.name,
        config.status_topic.name,
        offsets.describe(),
        sink_spec
    );

    let signals = StopSignals::listen()?;
    let membership = Arc::new(slots_config(&config, &rest_url).membership_lease());
    let statuses: Arc<dyn StatusBackingStore> = status_store.clone();
    let settings = worker_settings(&config, membership.clone());
    let worker = Worker::with_sinks(
        settings,
        offsets.clone(),
        sinks.clone(),
        statuses.clone(),
        worker_id.clone(),
    );
    let herder = DistributedHerder::new(
        worker,
        offsets.clone(),
        ferry.connector_plugins().to_vec(),
        DistributedSettings {
            worker_id: worker_id.clone(),
            rest_url: rest_url.clone(),
            scheduled_rebalance_max_delay: config.scheduled_rebalance_max_delay,
            handoff_timeout: DistributedSettings::DEFAULT_HANDOFF_TIMEOUT,
            config_providers: config.config_providers.clone(),
            transforms: ferry.transform_registry().clone(),
            sink: Some(sink_spec.clone()),
        },
        config_store.clone(),
        statuses,
    );
    // Served while the worker joins and starts: `GET /health` answers 503 "starting", every other
    // request waits for the start (as Kafka Connect's REST server does).
    let (stop_rest, rest_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rest.serve(herder.clone(), async move {
        let _ = rest_stopped.await;
    });
    let started = async {
        let group: Arc<dyn WorkerGroup> =
            Arc::new(join_group(&config, &rest_url, &herder, membership).await?);
        herder.start(group).await.map_err(RunError::from)
    };
    if let Err(e) = started.await {
        // Requests waiting for the start would hold a graceful stop of the server forever.
        server.abort();
        return Err(e);
    }
    signals.wait().await;
    let _ = stop_rest.send(());
    let _ = server.await;
    tracing::info!("stopping: leaving the group (revoked tasks commit their offsets)");
    herder.shutdown(config.rebalance_timeout).await;
    if let Err(e) = sinks.flush(config.offset_flush_timeout).await {
        tracing::warn!("sink flush at exit failed: {e}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The config and status topics, opened (created when missing) and read to their end, each kept
/// fresh by a refresher; cluster-scoped log levels are applied from the config topic.
async fn internal_stores(
    config: &DistributedConfig,
) -> Result<(Arc<KafkaConfigBackingStore>, Arc<KafkaStatusBackingStore>), RunError> {
    let config_store = Arc::new(
        KafkaConfigBackingStore::open(&topic_config(config, &config.config_topic))
            .await
            .map_err(kafka)?,
    );
    config_store.spawn_refresher(REFRESH_EVERY);
    if let Some(levels) = crate::cli::log_levels() {
        apply_cluster_log_levels(&config_store, levels);
    }
    let status_store = Arc::new(
        KafkaStatusBackingStore::open(&topic_config(config, &config.status_topic))
            .await
            .map_err(kafka)?,
    );
    spawn_status_refresher(&status_store);
    Ok((config_store, status_store))
}

/// The worker's settings from its file: every task fenced by its transactional id, and its slots
/// held through `membership`.
fn worker_settings(
    config: &DistributedConfig,
    membership: Arc<ferry_plugin::MembershipLease>,
) -> WorkerSettings {
    WorkerSettings {
        offset_flush_interval: config.offset_flush_interval,
        offset_flush_timeout: config.offset_flush_timeout,
        offset_flush_strict_bound: config.offset_flush_strict_bound,
        task_shutdown_graceful_timeout: config.task_shutdown_graceful_timeout,
        topic_tracking: config.topic_tracking,
        // Every task commits through its own transactional producer, `<group.id>-<connector>-<task>`:
        // the broker, not the status topic, stops a task's previous owner from committing.
        task_fencing: Some(config.group_id.clone()),
        membership: Some(membership),
        exactly_once_source: config.exactly_once_source,
        ..WorkerSettings::default()
    }
}

async fn join_group(
    config: &DistributedConfig,
    rest_url: &str,
    herder: &Arc<DistributedHerder>,
    membership: Arc<ferry_plugin::MembershipLease>,
) -> Result<TaskSlots, RunError> {
    let mut slots = slots_config(config, rest_url);
    slots.lease = Some(membership);
    TaskSlots::join(slots, herder.handler())
        .await
        .map_err(kafka)
}

/// A Kafka piece that cannot be set up, as a [`RunError`].
fn kafka(error: impl std::error::Error + Send + Sync + 'static) -> RunError {
    RunError::Kafka(Box::new(error))
}

/// The slot group's settings from the worker file.
fn slots_config(config: &DistributedConfig, rest_url: &str) -> SlotsConfig {
    let mut slots = SlotsConfig::new(
        config.bootstrap_servers.clone(),
        config.group_id.clone(),
        rest_url,
    );
    slots.session_timeout = config.session_timeout;
    slots.heartbeat_interval = config.heartbeat_interval;
    slots.rebalance_timeout = config.rebalance_timeout;
    // A revoked task stops (graceful timeout) then commits (flush timeout); checked below the
    // rebalance timeout when the file was read.
    slots.revoke_timeout = config.task_shutdown_graceful_timeout + config.offset_flush_timeout;
    slots.replication_factor = config.config_topic.replication_factor;
    let mut clients = config.client_overrides.to_vec();
    clients.extend(config.consumer_overrides.to_vec());
    slots.client_settings = clients;
    slots
}

/// Reads the status topic every [`REFRESH_EVERY`], so REST answers show other workers' statuses.
fn spawn_status_refresher(store: &Arc<KafkaStatusBackingStore>) {
    let store = Arc::downgrade(store);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(REFRESH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(store) = store.upgrade() else {
                return;
            };
            if let Err(e) = store.refresh().await {
                tracing::warn!("reading the status topic failed (retried): {e}");
            }
        }
    });
}

/// Writes `?scope=cluster` log levels to the config topic, where every worker reads them.
struct ConfigTopicLogLevels(Arc<KafkaConfigBackingStore>);

impl ferry_rest::ClusterLogLevels for ConfigTopicLogLevels {
    fn put<'a>(
        &'a self,
        namespace: &'a str,
        level: &'a str,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), ferry_rest::LogLevelError>> + Send + 'a>,
    > {
        Box::pin(async move {
            self.0
                .put_logger_level(namespace, level)
                .await
                .map_err(|e| ferry_rest::LogLevelError::Write {
                    namespace: namespace.to_owned(),
                    level: level.to_owned(),
                    source: Box::new(e),
                })
        })
    }
}

/// Applies every `logger-cluster-…` record the config store reads from now on (KIP-976), and
/// writes `?scope=cluster` levels there.
fn apply_cluster_log_levels(
    store: &Arc<KafkaConfigBackingStore>,
    levels: Arc<ferry_rest::LogLevels>,
) {
    levels.set_cluster(Arc::new(ConfigTopicLogLevels(store.clone())));
    let Some(mut updates) = store.take_logger_levels() else {
        return;
    };
    tokio::spawn(async move {
        while let Some((namespace, level)) = updates.recv().await {
            if let Err(e) = levels.set(&namespace, &level) {
                tracing::warn!(
                    "the cluster log level {level} of {namespace} from the config topic was not applied: {}",
                    e.message
                );
            }
        }
    });
}
