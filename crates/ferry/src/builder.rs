//! [`Ferry`]: what a program that runs connectors registers — connectors, offset stores, sinks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use ferry_api::{ConnectorPlugin, SourceConnector};
use ferry_plugin::{OffsetStorePlugin, SinkPlugin, WorkerPlugins};
use ferry_runtime::config::{ConfigErrors, Properties, WorkerConfig};

use crate::RunError;

/// A Ferry program: the connectors it runs and the offset stores and sinks its worker file may
/// choose, besides the runtime's built-ins (the offsets file; the `stdout` and `file:PATH` sinks).
///
/// ```no_run
/// use std::process::ExitCode;
///
/// fn main() -> ExitCode {
///     ferry::Ferry::builder()
///         .connectors(ferry_connectors::builtin_connectors())
///         .offset_store(ferry_kafka::KafkaStorePlugin)
///         .sink(ferry_kafka::KafkaSinkPlugin)
///         .run_cli()
/// }
/// ```
#[derive(Clone, Default)]
pub struct Ferry {
    connectors: Vec<ConnectorPlugin>,
    worker: WorkerPlugins,
    transforms: ferry_runtime::transforms::TransformRegistry,
}

impl Ferry {
    /// The runtime's built-in backends and no connector.
    pub fn builder() -> Ferry {
        Ferry::default()
    }

    /// What the `ferry` binary registers: the built-in connectors (those of `ferry-connectors`,
    /// PostgresSource and PostgresCdcSource), the Kafka offset store and sink, and the PostgreSQL offset store.
    pub fn standard() -> Ferry {
        Ferry::builder()
            .connectors(ferry_connectors::builtin_connectors())
            .connectors(ferry_postgres::source::connectors())
            .connectors(ferry_postgres_cdc::connectors())
            .offset_store(ferry_kafka::KafkaStorePlugin)
            .sink(ferry_kafka::KafkaSinkPlugin)
            .offset_store(ferry_postgres::PostgresStorePlugin)
    }

    /// Registers a connector (`connector.class` is matched against its names).
    #[must_use]
    pub fn connector(mut self, plugin: ConnectorPlugin) -> Self {
        self.connectors.push(plugin);
        self
    }

    /// Registers connectors.
    #[must_use]
    pub fn connectors(mut self, plugins: impl IntoIterator<Item = ConnectorPlugin>) -> Self {
        self.connectors.extend(plugins);
        self
    }

    /// Registers an offset store (`offset.storage=<its name>`); listed after the built-in file store
    /// in messages, in registration order.
    #[must_use]
    pub fn offset_store(mut self, plugin: impl OffsetStorePlugin + 'static) -> Self {
        self.worker.add_store(Arc::new(plugin));
        self
    }

    /// Registers a sink (`sink=<its name>`); listed before the built-in `stdout` and `file:PATH` in
    /// messages, in registration order.
    #[must_use]
    pub fn sink(mut self, plugin: impl SinkPlugin + 'static) -> Self {
        self.worker.add_sink(Arc::new(plugin));
        self
    }

    /// Registers transformations and predicates besides Kafka Connect's built-in ones
    /// (`transforms.<alias>.type` / `predicates.<alias>.type` are matched against their names).
    #[must_use]
    pub fn transforms(
        mut self,
        transformations: impl IntoIterator<Item = ferry_api::transform::TransformationPlugin>,
        predicates: impl IntoIterator<Item = ferry_api::transform::PredicatePlugin>,
    ) -> Self {
        self.transforms.add(transformations, predicates);
        self
    }

    /// The built-in and registered transformations and predicates.
    pub fn transform_registry(&self) -> &ferry_runtime::transforms::TransformRegistry {
        &self.transforms
    }

    /// The registered connectors.
    pub fn connector_plugins(&self) -> &[ConnectorPlugin] {
        &self.connectors
    }

    /// The registered offset stores and sinks.
    pub fn worker_plugins(&self) -> &WorkerPlugins {
        &self.worker
    }

    /// The connector answering to `class`, new.
    pub fn resolve_connector(&self, class: &str) -> Option<Box<dyn SourceConnector>> {
        self.connectors
            .iter()
            .find(|p| p.answers_to(class))
            .map(ConnectorPlugin::make)
    }

    /// Reads a worker file's properties with the registered backends.
    ///
    /// # Errors
    /// Every problem of the file, each naming the file, key and line.
    pub fn parse_worker(&self, props: &Properties) -> Result<WorkerConfig, ConfigErrors> {
        WorkerConfig::from_properties_with(props, &self.worker)
    }

    /// Loads and checks a worker file; every problem is reported at once.
    pub(crate) fn load_worker(&self, path: &Path) -> Result<WorkerConfig, RunError> {
        let props = Properties::load(path)?;
        Ok(self.parse_worker(&props)?)
    }

    /// Runs `ferry standalone WORKER [CONNECTOR...]` until SIGTERM or SIGINT.
    ///
    /// # Errors
    /// What kept the worker from starting, or what went wrong while it ran.
    pub async fn run_standalone(
        &self,
        worker: &Path,
        connectors: &[PathBuf],
    ) -> Result<(), RunError> {
        crate::standalone::run(self, worker, connectors).await
    }

    /// The `ferry` command line (`standalone`, `offsets …`): parses the arguments, sets up logging and
    /// the async runtime, runs the command. The exit code is 0 on success, 2 on an error.
    pub fn run_cli(self) -> ExitCode {
        crate::cli::run(&self)
    }
}
