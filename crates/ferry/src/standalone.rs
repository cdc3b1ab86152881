//! `ferry standalone WORKER.properties CONNECTOR.properties...`

use std::path::Path;
use std::sync::Arc;

use ferry_api::SourceConnector;
use ferry_offsets::{FileStore, OffsetBackingStore};
use ferry_runtime::config::{ConnectorConfig, ErrorTolerance, Properties, SinkSpec, WorkerConfig};
use ferry_runtime::sink::{RecordSink, file::FileSink, stdout::StdoutSink};
use ferry_runtime::{ConnectorSpec, Worker, WorkerSettings};

/// Finds a built-in connector by `connector.class`.
pub(crate) fn resolve_connector(class: &str) -> Option<Box<dyn SourceConnector>> {
    ferry_connectors::builtin_connectors()
        .into_iter()
        .find(|(names, _)| names.contains(&class))
        .map(|(_, make)| make())
}

/// Loads and checks the worker file; every problem is reported at once.
pub(crate) fn load_worker(path: &Path) -> Result<WorkerConfig, String> {
    let props = Properties::load(path).map_err(|e| e.to_string())?;
    WorkerConfig::from_properties(&props).map_err(|e| e.to_string())
}

/// Opens the worker's offset store; refuses a damaged or locked one without touching it.
pub(crate) async fn open_store(config: &WorkerConfig) -> Result<Arc<FileStore>, String> {
    let path = config.offset_storage_file.clone();
    let store = tokio::task::spawn_blocking(move || FileStore::open(path))
        .await
        .map_err(|e| format!("opening the offset store panicked: {e}"))?
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(store))
}

pub(crate) async fn run(worker_file: &Path, connector_files: &[std::path::PathBuf]) -> Result<(), String> {
    // Everything is validated before anything starts.
    let config = load_worker(worker_file)?;
    let mut connectors = Vec::new();
    let mut problems = Vec::new();
    for file in connector_files {
        match Properties::load(file)
            .map_err(|e| e.to_string())
            .and_then(|props| ConnectorConfig::from_properties(&props, resolve_connector).map_err(|e| e.to_string()))
        {
            Ok(parsed) => connectors.push(parsed),
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    let mut names = std::collections::HashSet::new();
    for (c, _) in &connectors {
        if !names.insert(c.name.clone()) {
            return Err(format!("two connector files use the name {:?}; names must be unique (they key the offsets)", c.name));
        }
    }

    let store = open_store(&config).await?;
    let sink: Arc<dyn RecordSink> = match &config.sink {
        SinkSpec::File(path) => Arc::new(FileSink::open(path).await.map_err(|e| e.to_string())?),
        SinkSpec::Stdout => Arc::new(StdoutSink::new().map_err(|e| e.to_string())?),
    };
    tracing::info!(
        "ferry standalone: offsets in {}, records to {}, committing every {} ms",
        store.describe(),
        sink.describe(),
        config.offset_flush_interval.as_millis()
    );
    let settings = WorkerSettings {
        offset_flush_interval: config.offset_flush_interval,
        offset_flush_timeout: config.offset_flush_timeout,
        task_shutdown_graceful_timeout: config.task_shutdown_graceful_timeout,
    };
    let store_dyn: Arc<dyn OffsetBackingStore> = store.clone();
    let worker = Worker::new(settings, store_dyn, sink.clone());
    for (connector_config, connector) in &connectors {
        let spec = ConnectorSpec {
            name: connector_config.name.clone(),
            tasks_max: connector_config.tasks_max,
            tolerate_delivery_errors: connector_config.errors_tolerance == ErrorTolerance::All,
            config: connector_config.props.clone(),
        };
        if let Err(e) = worker.start_connector(spec, connector.as_ref()) {
            worker.shutdown().await;
            return Err(e.to_string());
        }
    }

    wait_for_signal().await?;
    tracing::info!("stopping: waiting for outstanding records, committing offsets");
    worker.shutdown().await;
    if let Err(e) = sink.flush(config.offset_flush_timeout).await {
        tracing::warn!("sink flush at exit failed: {e}");
    }
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() -> Result<(), String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("cannot listen for SIGINT: {e}"))?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
    Ok(())
}
