//! Running a real Ferry worker until its committed offsets reach a target, and the per-run
//! directories its store and output live in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::{Config, SourceConnector};
use ferry_offsets::{FileStore, OffsetBackingStore, StoredOffset};
use ferry_runtime::sink::RecordSink;
use ferry_runtime::{ConnectorSpec, TaskState, Worker, WorkerSettings};

use crate::BenchResult;

/// `offset.flush.interval.ms` of every end-to-end worker: short, so the last commit follows the last
/// acknowledgement closely (at most this much, plus one store fsync, is in each Ferry time for it).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);
/// How often the bench looks at the committed offsets; the granularity of the Ferry times.
const CHECK_INTERVAL: Duration = Duration::from_millis(2);
/// How long one run may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(1800);

/// A fresh, empty directory for one run; removed by [`RunDir::remove`].
pub struct RunDir(PathBuf);

impl RunDir {
    /// `work_dir/name`, emptied if an earlier (failed) run left it behind.
    pub fn create(work_dir: &Path, name: &str) -> BenchResult<Self> {
        let dir = work_dir.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                crate::BenchError::from(format!(
                    "cannot clear the run directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| {
            crate::BenchError::from(format!(
                "cannot create the run directory {}: {e}",
                dir.display()
            ))
        })?;
        Ok(Self(dir))
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Removes the directory and everything in it.
    pub fn remove(self) -> BenchResult<()> {
        std::fs::remove_dir_all(&self.0).map_err(|e| {
            crate::BenchError::from(format!(
                "cannot remove the run directory {}: {e}",
                self.0.display()
            ))
        })
    }
}

/// Opens a new FileStore at `path` (blocking; it is empty, so this is a create and a lock).
pub fn open_store(path: &Path) -> BenchResult<Arc<FileStore>> {
    FileStore::open(path).map(Arc::new).map_err(|e| {
        crate::BenchError::from(format!(
            "cannot open the offset store {}: {e}",
            path.display()
        ))
    })
}

/// A connector configuration from pairs; `name` and `tasks.max=1` are added.
pub fn connector_config(name: &str, pairs: &[(&str, String)]) -> Config {
    let mut config: Config = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    config.insert("name".to_owned(), name.to_owned());
    config.insert("tasks.max".to_owned(), "1".to_owned());
    config
}

/// Starts `connector` in a new worker over `store` and `sink`, then waits until `done` holds for the
/// connector's committed offsets. Returns the worker (still running: the caller stops it untimed).
/// Must run inside the runtime (the worker spawns its tasks).
pub async fn run_until_committed(
    store: Arc<FileStore>,
    sink: Arc<dyn RecordSink>,
    connector: &dyn SourceConnector,
    name: &str,
    config: Config,
    done: impl Fn(&[StoredOffset]) -> bool,
) -> BenchResult<Worker> {
    run_all_until_committed(
        store,
        sink,
        connector,
        vec![(name.to_owned(), config, 1)],
        |_, c| done(c),
    )
    .await
}

/// [`run_until_committed`] for several connectors of one class in one worker, each `(name, config,
/// tasks_max)`; waits until `done(name, committed)` holds for every one of them.
pub async fn run_all_until_committed(
    store: Arc<FileStore>,
    sink: Arc<dyn RecordSink>,
    connector: &dyn SourceConnector,
    connectors: Vec<(String, Config, usize)>,
    done: impl Fn(&str, &[StoredOffset]) -> bool,
) -> BenchResult<Worker> {
    let settings = WorkerSettings {
        offset_flush_interval: FLUSH_INTERVAL,
        offset_flush_timeout: Duration::from_secs(60),
        task_shutdown_graceful_timeout: Duration::from_secs(120),
        ..WorkerSettings::default()
    };
    let started = Instant::now();
    let worker = Worker::new(settings, store.clone(), sink);
    let names: Vec<String> = connectors.iter().map(|(n, _, _)| n.clone()).collect();
    for (name, mut config, tasks_max) in connectors {
        config.insert("tasks.max".to_owned(), tasks_max.to_string());
        let spec = ConnectorSpec {
            name: name.clone(),
            tasks_max,
            tolerate_delivery_errors: false,
            transforms: Default::default(),
            error_handling: Default::default(),
            secrets: Vec::new(),
            config,
        };
        worker
            .start_connector(spec, connector)
            .map_err(|e| crate::BenchError::from(format!("starting the connector {name}: {e}")))?;
    }
    let mut pending = names;
    loop {
        let mut still = Vec::with_capacity(pending.len());
        for name in pending {
            let committed = store.connector_offsets(&name).await.map_err(|e| {
                crate::BenchError::from(format!("reading the committed offsets of {name}: {e}"))
            })?;
            if done(&name, &committed) {
                continue;
            }
            for (task, status) in worker.task_statuses(&name).unwrap_or_default() {
                if status.state == TaskState::Failed {
                    return Err(crate::BenchError::from(format!(
                        "Ferry task {task} of {name} failed: {}",
                        status.trace.unwrap_or_default()
                    )));
                }
            }
            if started.elapsed() > DEADLINE {
                return Err(crate::BenchError::from(format!(
                    "the committed offsets of {name} did not reach the end within {DEADLINE:?}: {}",
                    describe(&committed)
                )));
            }
            still.push(name);
        }
        if still.is_empty() {
            return Ok(worker);
        }
        pending = still;
        tokio::time::sleep(CHECK_INTERVAL).await;
    }
}

/// The integer `field` of a committed offset value (`{"seq":41}` → 41).
pub fn offset_field(value: &[u8], field: &str) -> Option<i64> {
    serde_json::from_slice::<serde_json::Value>(value)
        .ok()?
        .get(field)?
        .as_i64()
}

fn describe(committed: &[StoredOffset]) -> String {
    let shown: Vec<String> = committed
        .iter()
        .map(|(k, v)| {
            format!(
                "{} = {}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    if shown.is_empty() {
        "nothing committed".to_owned()
    } else {
        shown.join(", ")
    }
}
