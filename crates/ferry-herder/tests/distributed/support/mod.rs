//! A cluster of distributed herders in one process, over shared memory stores and the simulated
//! group, with a sink and an offset store that record what every task instance did.

#![allow(dead_code)]

pub mod connector;
pub mod group;
pub mod statuses;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_api::{Config, OffsetStorageReader, RecordMetadata, SourceRecord, async_trait};
use ferry_herder::{DistributedHerder, DistributedSettings, Herder};
use ferry_offsets::{
    MemoryStore, OffsetBackingStore, OffsetWrite, StoreError, StoredOffset, StoredRecord,
};
use ferry_runtime::sink::{PendingDelivery, RecordSink, SinkError};
use ferry_runtime::stores::{ConfigBackingStore, MemoryConfigStore};
use ferry_runtime::{TargetState, TaskId, Worker, WorkerSettings};

pub use connector::Starts;
pub use group::Coordinator;

/// How long any awaited condition may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until `cond` holds; fails the test after [`DEADLINE`].
pub async fn eventually(what: &str, cond: impl FnMut() -> bool) {
    ferry_testkit::eventually(what, DEADLINE, cond).await;
}

/// [`eventually`] for a condition that must be awaited.
pub async fn eventually_async<F, Fut>(what: &str, cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    ferry_testkit::eventually_async(what, DEADLINE, cond).await;
}

/// One record a sink delivered: by which worker and task instance, which partition, which `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub worker: String,
    pub instance: i64,
    pub p: String,
    pub n: i64,
}

/// Every worker's sink appends here.
pub type Log = Arc<Mutex<Vec<Delivered>>>;

struct LogSink {
    worker: String,
    log: Log,
}

#[async_trait]
impl RecordSink for LogSink {
    fn describe(&self) -> String {
        format!("the log of {}", self.worker)
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        let value = record.value.as_ref().expect("Seq records have a value");
        lock(&self.log).push(Delivered {
            worker: self.worker.clone(),
            instance: value["i"].as_i64().expect("i"),
            p: value["p"].as_str().expect("p").to_owned(),
            n: value["n"].as_i64().expect("n"),
        });
        Ok(PendingDelivery::ready(Ok(RecordMetadata {
            topic: record.topic.clone(),
            partition: None,
            offset: None,
        })))
    }

    async fn flush(&self, _: Duration) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Per partition key: the last committed `(n, instance)`, and the instances that committed before it.
type Seen = BTreeMap<Vec<u8>, ((i64, i64), HashSet<i64>)>;

/// The shared offset store, checking every write: per partition, `n` never moves backwards, and once
/// a task instance committed, no earlier instance commits that partition again.
#[derive(Default)]
pub struct CheckedStore {
    pub inner: MemoryStore,
    /// Per key: the last `(n, instance)` and the instances that committed before it.
    seen: Mutex<Seen>,
    pub violations: Mutex<Vec<String>>,
    /// Every commit: the key as text, `n`, the committing instance.
    pub history: Mutex<Vec<(String, i64, i64)>>,
}

#[async_trait]
impl OffsetBackingStore for CheckedStore {
    fn describe(&self) -> String {
        "the checked memory store".to_owned()
    }

    async fn get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.inner.get(keys).await
    }

    async fn set(&self, batch: &[OffsetWrite]) -> Result<(), StoreError> {
        {
            let mut seen = lock(&self.seen);
            for write in batch {
                let Some(value) = &write.value else {
                    seen.remove(&write.key);
                    continue;
                };
                let v: serde_json::Value = serde_json::from_slice(value).expect("json offset");
                let (n, i) = (v["n"].as_i64().expect("n"), v["i"].as_i64().unwrap_or(0));
                let key = String::from_utf8_lossy(&write.key).into_owned();
                lock(&self.history).push((key.clone(), n, i));
                match seen.get_mut(&write.key) {
                    None => {
                        seen.insert(write.key.clone(), ((n, i), HashSet::new()));
                    }
                    Some(((last_n, last_i), retired)) => {
                        if n < *last_n {
                            lock(&self.violations).push(format!(
                                "{key}: offset moved backwards from {last_n} (instance {last_i}) to {n} (instance {i})"
                            ));
                        }
                        if retired.contains(&i) {
                            lock(&self.violations).push(format!(
                                "{key}: instance {i} committed {n} after instance {last_i} took over"
                            ));
                        }
                        if i != *last_i {
                            retired.insert(*last_i);
                        }
                        *last_n = n;
                        *last_i = i;
                    }
                }
            }
        }
        self.inner.set(batch).await
    }

    async fn connector_offsets(&self, connector: &str) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.connector_offsets(connector).await
    }

    async fn entries(&self) -> Result<Vec<StoredOffset>, StoreError> {
        self.inner.entries().await
    }

    async fn history(&self) -> Result<Vec<StoredRecord>, StoreError> {
        self.inner.history().await
    }
}

impl CheckedStore {
    /// The committed `n` of `Seq` task `task`'s partition.
    pub async fn committed(&self, connector: &str, task: usize) -> Option<i64> {
        let reader = ferry_offsets::StoreOffsetReader::new(connector, Arc::new(self.inner.clone()));
        reader
            .offset(&connector::partition(&task.to_string()))
            .await
            .expect("read")
            .and_then(|o| o.get("n").and_then(ferry_api::Value::as_i64))
    }

    /// The commits of `Seq` task `task`'s partition, in store order: `(n, instance)`.
    pub fn commits(&self, task: usize) -> Vec<(i64, i64)> {
        let p = format!("\"p\":\"{task}\"");
        lock(&self.history)
            .iter()
            .filter(|(key, _, _)| key.contains(&p))
            .map(|&(_, n, i)| (n, i))
            .collect()
    }

    pub fn violations(&self) -> Vec<String> {
        lock(&self.violations).clone()
    }
}

/// One worker of the cluster.
pub struct Node {
    pub id: usize,
    pub worker_id: String,
    pub herder: Arc<DistributedHerder>,
    /// Crashed or shut down.
    pub gone: bool,
}

/// Herders sharing the stores and the group.
pub struct Cluster {
    pub coordinator: Arc<Coordinator>,
    pub configs: Arc<MemoryConfigStore>,
    pub statuses: Arc<statuses::FaultyStatuses>,
    pub offsets: Arc<CheckedStore>,
    pub log: Log,
    pub starts: Starts,
    pub nodes: Vec<Node>,
    settings: fn() -> WorkerSettings,
    /// `scheduled.rebalance.max.delay.ms` of workers joining from now on (default 0: no hold-back).
    pub delay: Duration,
    /// The handoff timeout of workers joining from now on (default 500 ms: a crashed worker never
    /// releases its tasks, a short handoff keeps the tests quick).
    pub handoff: Duration,
    /// The membership lease of workers joining from now on (default none).
    pub lease: Option<Arc<ferry_plugin::MembershipLease>>,
}

/// Commits every 20 ms.
pub fn fast() -> WorkerSettings {
    WorkerSettings {
        offset_flush_interval: Duration::from_millis(20),
        offset_flush_timeout: Duration::from_secs(5),
        task_shutdown_graceful_timeout: Duration::from_secs(10),
        ..WorkerSettings::default()
    }
}

/// A `Seq` connector configuration.
pub fn seq(name: &str, tasks: usize, tag: &str) -> Config {
    Config::from([
        ("name".to_owned(), name.to_owned()),
        ("connector.class".to_owned(), "Seq".to_owned()),
        ("tasks.max".to_owned(), tasks.to_string()),
        ("tag".to_owned(), tag.to_owned()),
    ])
}

impl Cluster {
    pub fn new() -> Self {
        Self {
            coordinator: Coordinator::new(),
            configs: Arc::new(MemoryConfigStore::new()),
            statuses: statuses::FaultyStatuses::new(),
            offsets: Arc::new(CheckedStore::default()),
            log: Log::default(),
            starts: Starts::default(),
            nodes: Vec::new(),
            settings: fast,
            delay: Duration::ZERO,
            handoff: Duration::from_millis(500),
            lease: None,
        }
    }

    /// Starts a new worker and lets it join; returns its index.
    pub async fn join(&mut self) -> usize {
        let id = self.nodes.len();
        let worker_id = format!("w{id}:8083");
        let sink: Arc<dyn RecordSink> = Arc::new(LogSink {
            worker: worker_id.clone(),
            log: self.log.clone(),
        });
        let worker = Worker::with_status(
            WorkerSettings {
                membership: self.lease.clone(),
                ..(self.settings)()
            },
            self.offsets.clone(),
            sink,
            self.statuses.clone(),
            worker_id.as_str(),
        );
        let settings = DistributedSettings {
            worker_id: worker_id.clone(),
            rest_url: format!("http://{worker_id}"),
            scheduled_rebalance_max_delay: self.delay,
            handoff_timeout: self.handoff,
            config_providers: Default::default(),
            transforms: Default::default(),
            sink: None,
        };
        let herder = DistributedHerder::new(
            worker,
            self.offsets.clone(),
            vec![connector::plugin(&self.starts)],
            settings.clone(),
            self.configs.clone(),
            self.statuses.clone(),
        );
        let group = self
            .coordinator
            .join(id, &settings.rest_url, herder.handler())
            .await;
        herder.start(Arc::new(group)).await.expect("starts");
        self.nodes.push(Node {
            id,
            worker_id,
            herder,
            gone: false,
        });
        id
    }

    /// Graceful stop of worker `i` (leaves the group: its tasks stop with final commits).
    pub async fn leave(&mut self, i: usize) {
        self.nodes[i].herder.shutdown(Duration::from_secs(20)).await;
        self.nodes[i].gone = true;
    }

    /// Worker `i` dies at once.
    pub async fn crash(&mut self, i: usize) {
        // As SIGKILL: every task dies at once, without a final commit or a last status.
        let worker = self.nodes[i].herder.worker();
        for connector in worker.connector_names() {
            for id in worker.tasks(&connector) {
                worker.abort_task(&id).await;
            }
        }
        self.coordinator.crash(i).await;
        self.nodes[i].herder.shutdown(Duration::from_secs(1)).await;
        self.nodes[i].gone = true;
    }

    /// Worker `i`'s session expires (`lost`), then it rejoins.
    pub async fn lose_and_rejoin(&mut self, i: usize) {
        self.coordinator.lose(i).await;
        self.coordinator.rejoin(i).await;
    }

    /// The live nodes' indexes.
    pub fn live(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .filter(|n| !n.gone)
            .map(|n| n.id)
            .collect()
    }

    /// The herder holding the leader slot.
    pub fn leader(&self) -> Arc<DistributedHerder> {
        self.nodes
            .iter()
            .find(|n| !n.gone && n.herder.is_leader())
            .map(|n| n.herder.clone())
            .expect("a leader")
    }

    pub async fn wait_leader(&self) -> Arc<DistributedHerder> {
        eventually("a leader", || {
            self.nodes.iter().any(|n| !n.gone && n.herder.is_leader())
        })
        .await;
        self.leader()
    }

    /// A live worker that is not the leader.
    pub fn follower(&self) -> Arc<DistributedHerder> {
        self.nodes
            .iter()
            .find(|n| !n.gone && !n.herder.is_leader())
            .map(|n| n.herder.clone())
            .expect("a follower")
    }

    /// The live workers' herders now, for watching ownership while the cluster changes (a worker
    /// that joins later is not in it).
    pub fn live_herders(&self) -> Vec<(usize, Arc<DistributedHerder>)> {
        self.nodes
            .iter()
            .filter(|n| !n.gone)
            .map(|n| (n.id, n.herder.clone()))
            .collect()
    }

    /// Which live workers run task `task` of `connector` now.
    pub fn owners(&self, connector: &str, task: usize) -> Vec<usize> {
        let id = TaskId::new(connector, task);
        self.nodes
            .iter()
            .filter(|n| !n.gone && n.herder.worker().tasks(connector).contains(&id))
            .map(|n| n.id)
            .collect()
    }

    /// How many tasks of `connector` run on each live worker.
    pub fn spread(&self, connector: &str) -> BTreeMap<usize, usize> {
        self.nodes
            .iter()
            .filter(|n| !n.gone)
            .map(|n| (n.id, n.herder.worker().tasks(connector).len()))
            .collect()
    }

    /// Waits until tasks `0..tasks` of `connector` each run on exactly one live worker and each
    /// committed past its offset now.
    pub async fn wait_running(&self, connector: &str, tasks: usize) {
        let mut before = Vec::new();
        for task in 0..tasks {
            before.push(self.offsets.committed(connector, task).await);
        }
        eventually(
            &format!("{tasks} tasks of {connector} running once each"),
            || (0..tasks).all(|t| self.owners(connector, t).len() == 1),
        )
        .await;
        for (task, before) in before.into_iter().enumerate() {
            eventually_async(
                &format!("task {task} of {connector} committing"),
                || async { self.offsets.committed(connector, task).await > before },
            )
            .await;
        }
    }

    /// Every record delivered for `connector`'s task partition `p`, in delivery order.
    pub fn delivered(&self, p: usize) -> Vec<Delivered> {
        let p = p.to_string();
        lock(&self.log)
            .iter()
            .filter(|d| d.p == p)
            .cloned()
            .collect()
    }

    /// Stops every live worker gracefully.
    pub async fn shutdown(&mut self) {
        for i in self.live() {
            self.leave(i).await;
        }
    }

    /// Creates a connector through the leader.
    pub async fn create(&self, config: Config) {
        let name = config["name"].clone();
        self.wait_leader()
            .await
            .create_connector(&name, config, TargetState::Running)
            .await
            .expect("created");
    }

    pub async fn task_count(&self, connector: &str) -> Option<usize> {
        let snapshot = self.configs.snapshot().await.expect("snapshot");
        snapshot
            .connectors
            .get(connector)?
            .tasks
            .as_ref()
            .map(Vec::len)
    }
}

/// Partition `p`'s delivered `n`s cover `0..=max` without a hole.
pub fn assert_no_gap(p: usize, delivered: &[Delivered]) {
    let seen: BTreeSet<i64> = delivered.iter().map(|d| d.n).collect();
    if let Some(&max) = seen.iter().next_back() {
        let missing: Vec<i64> = (0..=max).filter(|n| !seen.contains(n)).collect();
        assert!(
            missing.is_empty(),
            "partition {p}: records {missing:?} were never delivered (a gap)"
        );
    }
}
