//! `ferry standalone WORKER.properties [CONNECTOR.properties...]`: the worker, its herder and its REST
//! API (Kafka Connect's connect-standalone).

use std::path::Path;
use std::sync::Arc;

use ferry_api::SourceConnector;
use ferry_herder::StandaloneHerder;
use ferry_offsets::{OffsetBackingStore, StoreError};
use ferry_plugin::{OpenMode, SinkProvider, TaskSinkContext};
use ferry_rest::RestServer;
use ferry_runtime::config::{
    ConnectorConfig, Properties, WorkerConfig, load_connector_file, scrub,
};
use ferry_runtime::sink::{RecordSink, SinkError};
use ferry_runtime::stores::{FileConfigStore, MemoryStatusStore};
use ferry_runtime::{Worker, WorkerSettings};

use crate::{Ferry, RunError};

/// Opens the worker's offset store (`offset.storage`) as its plugin does: e.g. the offsets file,
/// refused without being touched when damaged or locked.
pub(crate) async fn open_store(
    config: &WorkerConfig,
    mode: OpenMode,
) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
    config.offset_storage.spec().open(mode).await
}

/// Every task's sink, from the sink plugin's provider (which applies the connector's
/// `key.converter` / `value.converter` where it sets them). Says once per connector start, by its
/// first task, which converters apply — as when the sink was made per connector.
struct ConnectorSinks {
    config: WorkerConfig,
    provider: Arc<dyn SinkProvider>,
}

impl std::fmt::Display for ConnectorSinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.provider.fmt(f)
    }
}

impl ConnectorSinks {
    fn say_converters(&self, task: &TaskSinkContext<'_>) {
        if task.task == 0 {
            let name = task.connector;
            if self.provider.uses_converters() {
                tracing::info!(
                    connector = %name,
                    "connector {name:?}: keys converted with {}, values with {}",
                    task.key_converter.unwrap_or(self.config.key_converter),
                    task.value_converter.unwrap_or(self.config.value_converter)
                );
            } else if task.key_converter.is_some() || task.value_converter.is_some() {
                tracing::warn!(
                    connector = %name,
                    "connector {name:?}: key.converter / value.converter have no effect with sink={} (converters apply \
                     to records sent to Kafka); ignored",
                    self.config.sink
                );
            }
        }
    }
}

#[ferry_api::async_trait]
impl SinkProvider for ConnectorSinks {
    async fn open(&self, task: &TaskSinkContext<'_>) -> Result<Arc<dyn RecordSink>, SinkError> {
        self.say_converters(task);
        self.provider.open(task).await
    }

    async fn open_transactional(
        &self,
        task: &TaskSinkContext<'_>,
        transactional_id: &str,
    ) -> Result<Option<Arc<dyn ferry_plugin::TransactionalSink>>, SinkError> {
        self.say_converters(task);
        self.provider
            .open_transactional(task, transactional_id)
            .await
    }

    fn uses_converters(&self) -> bool {
        self.provider.uses_converters()
    }

    async fn cluster_id(&self) -> Option<String> {
        self.provider.cluster_id().await
    }

    async fn flush(&self, timeout: std::time::Duration) -> Result<(), SinkError> {
        self.provider.flush(timeout).await
    }
}

/// Checks a command-line connector file as the herder will when it starts the connector: with its
/// config-provider placeholders resolved (a value that is a placeholder is checked resolved). Returns
/// the checked configuration holding the file's values as written (placeholders kept).
fn check_connector_file(
    ferry: &Ferry,
    worker: &WorkerConfig,
    props: Properties,
) -> Result<(ConnectorConfig, Box<dyn SourceConnector>), RunError> {
    let raw = props.to_config();
    let resolved = worker.config_providers.resolve(&raw).map_err(|errors| {
        RunError::ConnectorFiles(
            errors
                .into_iter()
                .map(|(_, m)| format!("{}: {m}", props.path().display()))
                .collect(),
        )
    })?;
    // Without placeholders the file itself is checked (its errors carry line numbers).
    let checked = if resolved.secrets.is_empty() {
        props
    } else {
        Properties::from_pairs(props.path(), resolved.config)
    };
    let (mut config, connector) = ConnectorConfig::from_properties_with(
        &checked,
        |class| ferry.resolve_connector(class),
        ferry.transform_registry(),
        Some(worker.sink.spec().as_ref()),
    )
    // Messages of a resolved file may hold a secret: scrubbed before they leave.
    .map_err(|e| RunError::ConnectorFiles(vec![scrub(e.to_string(), &resolved.secrets)]))?;
    config.props = raw;
    Ok((config, connector))
}

/// A connector of the command line: its checked configuration and its connector.
type CommandLineConnector = (ConnectorConfig, Box<dyn SourceConnector>);

/// Checks every connector file of the command line, reporting every file's problems at once, and
/// refuses two files with one connector name.
fn check_connector_files(
    ferry: &Ferry,
    config: &WorkerConfig,
    connector_files: &[std::path::PathBuf],
) -> Result<Vec<CommandLineConnector>, RunError> {
    let mut connectors = Vec::new();
    let mut problems = Vec::new();
    for file in connector_files {
        match load_connector_file(file)
            .map_err(|e| RunError::ConnectorFiles(vec![e.to_string()]))
            .and_then(|props| check_connector_file(ferry, config, props))
        {
            Ok(parsed) => connectors.push(parsed),
            Err(RunError::ConnectorFiles(messages)) => problems.extend(messages),
            Err(other) => return Err(other),
        }
    }
    if !problems.is_empty() {
        return Err(RunError::ConnectorFiles(problems));
    }
    // Every file parsed (no problems), so `connectors` is in `connector_files` order.
    let mut names = std::collections::HashMap::new();
    for ((c, _), file) in connectors.iter().zip(connector_files) {
        if let Some(first) = names.insert(c.name.clone(), file) {
            return Err(RunError::DuplicateName {
                first: first.clone(),
                second: file.clone(),
                name: c.name.clone(),
            });
        }
    }
    Ok(connectors)
}

/// The worker's settings from its file.
fn worker_settings(config: &WorkerConfig) -> WorkerSettings {
    WorkerSettings {
        offset_flush_interval: config.offset_flush_interval,
        offset_flush_timeout: config.offset_flush_timeout,
        offset_flush_strict_bound: config.offset_flush_strict_bound,
        task_shutdown_graceful_timeout: config.task_shutdown_graceful_timeout,
        topic_tracking: config.topic_tracking,
        // With exactly-once enabled, every task is fenced as in distributed mode, by
        // `<offsets topic>-<connector>-<task>`: an exactly-once task's transactional sink, an
        // at-least-once task's offset writer. Without, a standalone worker's tasks are not fenced.
        task_fencing: config.transactional_id_prefix.clone(),
        exactly_once_source: config.exactly_once_source,
        ..WorkerSettings::default()
    }
}

/// Stops a started worker: the REST server first (requests in progress finish), then the herder
/// (outstanding records, final commits), then the sink's flush.
///
/// # Errors
/// The offset store failed while the worker ran: records delivered after that have no committed
/// offsets, so the exit is not clean.
async fn stop(
    herder: &StandaloneHerder,
    provider: &dyn SinkProvider,
    stop_rest: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
    flush_timeout: std::time::Duration,
) -> Result<(), RunError> {
    // No request may change a connector while the worker stops: requests in progress finish first.
    let _ = stop_rest.send(());
    let _ = server.await;
    tracing::info!("stopping: waiting for outstanding records, committing offsets");
    herder.shutdown().await;
    if let Err(e) = provider.flush(flush_timeout).await {
        tracing::warn!("sink flush at exit failed: {e}");
    }
    // Offsets of records delivered after the store failed were never committed: not a clean exit.
    if let Some(failure) = herder.worker().store_failure() {
        return Err(RunError::StoreFailed(failure));
    }
    tracing::info!("stopped");
    Ok(())
}

pub(crate) async fn run(
    ferry: &Ferry,
    worker_file: &Path,
    connector_files: &[std::path::PathBuf],
) -> Result<(), RunError> {
    // Everything is validated before anything starts.
    let config = ferry.load_worker(worker_file)?;
    let connectors = check_connector_files(ferry, &config, connector_files)?;
    // Connectors created over REST by an earlier run; a damaged file is refused, never overwritten.
    let connectors_file = Arc::new(FileConfigStore::open(&config.connectors_file)?);
    // Bound before anything is created: a taken port refuses the start with nothing changed.
    let mut rest = RestServer::bind(&config.rest).await?;
    if let Some(levels) = crate::cli::log_levels() {
        rest = rest.with_log_levels(levels);
    }

    let store = open_store(&config, OpenMode::ReadWrite).await?;
    let provider = config.sink.spec().start().await?;
    // The worker's own sink (for connectors started without one of their own).
    let sink = provider
        .open(&TaskSinkContext::new("", 0, None, None))
        .await?;
    tracing::info!(
        "ferry standalone: offsets in {}, records to {}, committing every {} ms; connectors created over \
         REST are kept in {}",
        store.describe(),
        sink.describe(),
        config.offset_flush_interval.as_millis(),
        connectors_file.path().display()
    );
    let settings = worker_settings(&config);
    // Listen before any task starts: once a record may have been delivered, SIGTERM and SIGINT must
    // stop the worker cleanly, never kill the process by the default action.
    let signals = StopSignals::listen()?;
    let sinks = ConnectorSinks {
        config: config.clone(),
        provider: provider.clone(),
    };
    let worker = Worker::with_sinks(
        settings,
        store.clone(),
        Arc::new(sinks),
        Arc::new(MemoryStatusStore::new()),
        rest.worker_id(),
    );
    let plugins = ferry.connector_plugins().to_vec();
    let herder = Arc::new(
        StandaloneHerder::new(
            worker,
            store.clone(),
            plugins,
            rest.worker_id(),
            connectors_file,
        )
        .with_config_providers(config.config_providers.clone())
        .with_transforms(ferry.transform_registry().clone())
        .with_sink_spec(config.sink.spec().clone()),
    );
    // Served while the worker starts: `GET /health` answers 503 "starting", every other request
    // waits for the start (as Kafka Connect's REST server does).
    let (stop_rest, rest_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rest.serve(herder.clone(), async move {
        let _ = rest_stopped.await;
    });
    let command_line = connectors.into_iter().map(|(c, _)| c.props).collect();
    if let Err(e) = herder.start(command_line).await {
        // Requests waiting for the start would hold a graceful stop of the server forever.
        server.abort();
        herder.shutdown().await;
        return Err(e.into());
    }

    signals.wait().await;
    stop(
        &herder,
        provider.as_ref(),
        stop_rest,
        server,
        config.offset_flush_timeout,
    )
    .await
}

/// The SIGTERM and SIGINT listeners. A signal that arrives after [`StopSignals::listen`] is kept until
/// [`StopSignals::wait`] takes it.
pub(crate) struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub(crate) fn listen() -> Result<Self, RunError> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind, signal_name| {
            signal(kind).map_err(|source| RunError::Signal {
                signal: signal_name,
                source,
            })
        };
        let term = listen(SignalKind::terminate(), "SIGTERM")?;
        let int = listen(SignalKind::interrupt(), "SIGINT")?;
        Ok(Self { term, int })
    }

    pub(crate) async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => tracing::info!("SIGTERM received"),
            _ = self.int.recv() => tracing::info!("SIGINT received"),
        }
    }
}
