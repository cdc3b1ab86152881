//! `Seq`: task p emits `{"p": "<p>", "n": n}` for n = 0, 1, 2, … on partition `{"p": "<p>"}`, resuming
//! after its committed offset `{"n": n, "i": instance}`; `i` names the task instance (unique in the
//! process), so the store can tell which instance committed what.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, ConnectMap, SourceConnector, SourceOffset,
    SourcePartition, SourceRecord, SourceTask, SourceTaskContext, async_trait,
};
use ferry_herder::Plugin;
use serde_json::json;

use super::lock;

static INSTANCES: AtomicI64 = AtomicI64::new(1);

/// One task start: which task, with which `tag`, resuming after which committed `n`.
#[derive(Debug, Clone)]
pub struct Start {
    pub task: String,
    pub tag: String,
    pub instance: i64,
    pub resumed_after: Option<i64>,
    /// When it started (after reading its offset).
    pub at: Instant,
}

/// What every `Seq` task of the process started with.
pub type Starts = Arc<Mutex<Vec<Start>>>;

/// The `Seq` plugin; starts are recorded in `starts`.
pub fn plugin(starts: &Starts) -> Plugin {
    let starts = starts.clone();
    Plugin::new(["Seq"], move || {
        Box::new(Seq {
            starts: starts.clone(),
        })
    })
}

pub fn partition(task: &str) -> SourcePartition {
    ConnectMap::new().with("p", task).expect("valid partition")
}

struct Seq {
    starts: Starts,
}

impl SourceConnector for Seq {
    fn config_keys(&self) -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional("tag", None, "marks the task configurations"),
            ConfigKey::optional("topic", None, "unused"),
        ]
    }

    fn validate(&self, _config: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }

    fn task_configs(&self, config: &Config, max: usize) -> Result<Vec<Config>, ConnectError> {
        let tag = config.get("tag").cloned().unwrap_or_default();
        Ok((0..max)
            .map(|task| {
                Config::from([
                    ("task".to_owned(), task.to_string()),
                    ("tag".to_owned(), tag.clone()),
                ])
            })
            .collect())
    }

    fn create_task(&self) -> Box<dyn SourceTask> {
        Box::new(SeqTask {
            starts: self.starts.clone(),
            task: String::new(),
            instance: 0,
            next: 0,
        })
    }
}

struct SeqTask {
    starts: Starts,
    task: String,
    instance: i64,
    next: i64,
}

#[async_trait]
impl SourceTask for SeqTask {
    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        self.task = context.configs().get("task").cloned().unwrap_or_default();
        self.instance = INSTANCES.fetch_add(1, Ordering::SeqCst);
        let committed = context
            .offset_storage_reader()
            .offset(&partition(&self.task))
            .await?
            .and_then(|o| o.get("n").and_then(ferry_api::Value::as_i64));
        self.next = committed.map_or(0, |n| n + 1);
        lock(&self.starts).push(Start {
            task: self.task.clone(),
            tag: context.configs().get("tag").cloned().unwrap_or_default(),
            instance: self.instance,
            resumed_after: committed,
            at: Instant::now(),
        });
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let n = self.next;
        self.next += 1;
        let offset: SourceOffset = ConnectMap::new()
            .with("n", n)
            .and_then(|m| m.with("i", self.instance))
            .expect("valid offset");
        Ok(vec![SourceRecord::from_maps(
            Some(partition(&self.task)),
            Some(offset),
            "seq",
            Some(json!({"p": self.task, "n": n, "i": self.instance})),
        )])
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        Ok(())
    }
}
