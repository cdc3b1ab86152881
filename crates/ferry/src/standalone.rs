//! `ferry standalone WORKER.properties [CONNECTOR.properties...]`: the worker, its herder and its REST
//! API (Kafka Connect's connect-standalone).

use std::path::Path;
use std::sync::Arc;

use ferry_api::SourceConnector;
use ferry_kafka::{
    KafkaOffsetStore, KafkaOffsetStoreConfig, KafkaSink, KafkaSinkConfig, RecordConverters,
};
use ferry_offsets::{FileStore, OffsetBackingStore};
use ferry_postgres::store::{PostgresOffsetStore, PostgresOffsetStoreConfig};
use ferry_runtime::config::{
    ConnectorConfig, OffsetStorageSpec, Properties, SinkSpec, WorkerConfig,
};
use ferry_runtime::herder::{Plugin, StandaloneHerder};
use ferry_runtime::rest::RestServer;
use ferry_runtime::sink::{
    RecordSink, SinkError, SinkProvider, TaskSinkContext, file::FileSink, stdout::StdoutSink,
};
use ferry_runtime::stores::{FileConfigStore, MemoryStatusStore};
use ferry_runtime::{Worker, WorkerSettings};

/// Every connector built into the `ferry` binary: the server-less ones of `ferry-connectors` and
/// PostgresSource (`PostgresSource`, `io.confluent.connect.jdbc.JdbcSourceConnector`).
pub(crate) fn connector_plugins() -> Vec<Plugin> {
    let mut plugins = ferry_connectors::builtin_connectors();
    plugins.extend(ferry_postgres::source::connectors());
    plugins
}

/// Finds a built-in connector by `connector.class`.
pub(crate) fn resolve_connector(class: &str) -> Option<Box<dyn SourceConnector>> {
    connector_plugins()
        .into_iter()
        .find(|p| p.answers_to(class))
        .map(|p| p.make())
}

/// Loads and checks the worker file; every problem is reported at once.
pub(crate) fn load_worker(path: &Path) -> Result<WorkerConfig, String> {
    let props = Properties::load(path).map_err(|e| e.to_string())?;
    WorkerConfig::from_properties(&props).map_err(|e| e.to_string())
}

/// Opens the worker's offset store (`offset.storage`): the offsets file, refused without being touched
/// when damaged or locked; the Kafka offsets topic, created compacted when missing and read to its
/// end; or the PostgreSQL offsets table, created when missing and refused when it has another shape.
pub(crate) async fn open_store(
    config: &WorkerConfig,
) -> Result<Arc<dyn OffsetBackingStore>, String> {
    match &config.offset_storage {
        OffsetStorageSpec::File(path) => {
            let path = path.clone();
            let store = tokio::task::spawn_blocking(move || FileStore::open(path))
                .await
                .map_err(|e| format!("opening the offset store panicked: {e}"))?
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
        OffsetStorageSpec::Kafka(spec) => {
            let mut store_config =
                KafkaOffsetStoreConfig::new(spec.bootstrap_servers.clone(), spec.topic.clone());
            store_config.partitions = spec.partitions;
            store_config.replication_factor = spec.replication_factor;
            store_config.client_overrides = spec.client_overrides.to_vec();
            let store = KafkaOffsetStore::open(store_config)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
        OffsetStorageSpec::Postgres(spec) => {
            let store_config =
                PostgresOffsetStoreConfig::new(spec.url.expose()).with_table(spec.table.clone());
            let store = PostgresOffsetStore::open(store_config)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
    }
}

/// The worker's sink, and for the Kafka sink the shared producer connectors' sinks are made from.
async fn open_sink(
    config: &WorkerConfig,
) -> Result<(Arc<dyn RecordSink>, Option<KafkaSink>), String> {
    Ok(match &config.sink {
        SinkSpec::File(path) => (
            Arc::new(FileSink::open(path).await.map_err(|e| e.to_string())?),
            None,
        ),
        SinkSpec::Stdout => (
            Arc::new(StdoutSink::new().map_err(|e| e.to_string())?),
            None,
        ),
        SinkSpec::Kafka {
            bootstrap_servers,
            producer_overrides,
        } => {
            let kafka = KafkaSink::new(&KafkaSinkConfig {
                bootstrap_servers: bootstrap_servers.clone(),
                producer_overrides: producer_overrides.clone(),
                converters: RecordConverters::new(config.key_converter, config.value_converter),
            })
            .map_err(|e| e.to_string())?;
            (Arc::new(kafka.clone()), Some(kafka))
        }
    })
}

/// Every task's sink: the worker's, or for Kafka the shared producer with the connector's
/// `key.converter` / `value.converter` where it sets them.
struct ConnectorSinks {
    config: WorkerConfig,
    sink: Arc<dyn RecordSink>,
    kafka: Option<KafkaSink>,
}

impl std::fmt::Display for ConnectorSinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sink.describe())
    }
}

#[ferry_api::async_trait]
impl SinkProvider for ConnectorSinks {
    async fn open(&self, task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        Ok(self.connector_sink(task))
    }

    fn uses_converters(&self) -> bool {
        self.kafka.is_some()
    }

    async fn flush(&self, timeout: std::time::Duration) -> Result<(), SinkError> {
        self.sink.flush(timeout).await
    }
}

impl ConnectorSinks {
    fn connector_sink(&self, task: &TaskSinkContext<'_>) -> Arc<dyn RecordSink> {
        let name = task.connector;
        // Said once per connector start (by its first task), as when the sink was made per connector.
        let say = task.task == 0;
        let Some(kafka) = &self.kafka else {
            if say && (task.key_converter.is_some() || task.value_converter.is_some()) {
                tracing::warn!(
                    connector = %name,
                    "connector {name:?}: key.converter / value.converter have no effect with sink={} (converters apply \
                     to records sent to Kafka); ignored",
                    self.config.sink
                );
            }
            return self.sink.clone();
        };
        let converters = RecordConverters::new(
            task.key_converter.unwrap_or(self.config.key_converter),
            task.value_converter.unwrap_or(self.config.value_converter),
        );
        if say {
            tracing::info!(
                connector = %name,
                "connector {name:?}: keys converted with {}, values with {}",
                converters.key.spec(),
                converters.value.spec()
            );
        }
        Arc::new(kafka.with_converters(converters))
    }
}

pub(crate) async fn run(
    worker_file: &Path,
    connector_files: &[std::path::PathBuf],
) -> Result<(), String> {
    // Everything is validated before anything starts.
    let config = load_worker(worker_file)?;
    let mut connectors = Vec::new();
    let mut problems = Vec::new();
    for file in connector_files {
        match Properties::load(file)
            .map_err(|e| e.to_string())
            .and_then(|props| {
                ConnectorConfig::from_properties(&props, resolve_connector)
                    .map_err(|e| e.to_string())
            }) {
            Ok(parsed) => connectors.push(parsed),
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    // Every file parsed (no problems), so `connectors` is in `connector_files` order.
    let mut names = std::collections::HashMap::new();
    for ((c, _), file) in connectors.iter().zip(connector_files) {
        if let Some(first) = names.insert(c.name.clone(), file) {
            return Err(format!(
                "{} and {} both use the connector name {:?}; names must be unique (they key the offsets)",
                first.display(),
                file.display(),
                c.name
            ));
        }
    }
    // Connectors created over REST by an earlier run; a damaged file is refused, never overwritten.
    let connectors_file = Arc::new(FileConfigStore::open(&config.connectors_file)?);
    // Bound before anything is created: a taken port refuses the start with nothing changed.
    let rest = RestServer::bind(&config.rest).await?;

    let store = open_store(&config).await?;
    let (sink, kafka) = open_sink(&config).await?;
    tracing::info!(
        "ferry standalone: offsets in {}, records to {}, committing every {} ms; connectors created over \
         REST are kept in {}",
        store.describe(),
        sink.describe(),
        config.offset_flush_interval.as_millis(),
        connectors_file.path().display()
    );
    let settings = WorkerSettings {
        offset_flush_interval: config.offset_flush_interval,
        offset_flush_timeout: config.offset_flush_timeout,
        task_shutdown_graceful_timeout: config.task_shutdown_graceful_timeout,
        ..WorkerSettings::default()
    };
    // Listen before any task starts: once a record may have been delivered, SIGTERM and SIGINT must
    // stop the worker cleanly, never kill the process by the default action.
    let signals = StopSignals::listen()?;
    let sinks = ConnectorSinks {
        config: config.clone(),
        sink: sink.clone(),
        kafka,
    };
    let worker = Worker::with_sinks(
        settings,
        store.clone(),
        Arc::new(sinks),
        Arc::new(MemoryStatusStore::new()),
        rest.worker_id(),
    );
    let plugins = connector_plugins();
    let herder = Arc::new(StandaloneHerder::new(
        worker,
        store.clone(),
        plugins,
        rest.worker_id(),
        connectors_file,
    ));
    let command_line = connectors.into_iter().map(|(c, _)| c.props).collect();
    if let Err(e) = herder.start(command_line).await {
        herder.shutdown().await;
        return Err(e);
    }
    let (stop_rest, rest_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rest.serve(herder.clone(), async move {
        let _ = rest_stopped.await;
    });

    signals.wait().await;
    // No request may change a connector while the worker stops: requests in progress finish first.
    let _ = stop_rest.send(());
    let _ = server.await;
    tracing::info!("stopping: waiting for outstanding records, committing offsets");
    herder.shutdown().await;
    if let Err(e) = sink.flush(config.offset_flush_timeout).await {
        tracing::warn!("sink flush at exit failed: {e}");
    }
    // Offsets of records delivered after the store failed were never committed: not a clean exit.
    if let Some(failure) = herder.worker().store_failure() {
        return Err(format!("stopped after the offset store failed: {failure}"));
    }
    tracing::info!("stopped");
    Ok(())
}

/// The SIGTERM and SIGINT listeners. A signal that arrives after [`StopSignals::listen`] is kept until
/// [`StopSignals::wait`] takes it.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> Result<Self, String> {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate())
            .map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
        let int = signal(SignalKind::interrupt())
            .map_err(|e| format!("cannot listen for SIGINT: {e}"))?;
        Ok(Self { term, int })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM received"),
            _ = self.int.recv() => tracing::info!("SIGINT received"),
        }
    }
}
