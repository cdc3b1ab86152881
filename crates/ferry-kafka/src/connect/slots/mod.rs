//! Task ownership for distributed mode: which worker runs which task.
//!
//! librdkafka cannot join Kafka Connect's `connect` group protocol, so the workers form an ordinary
//! consumer group with `partition.assignment.strategy=cooperative-sticky` whose partitions stand for
//! task slots: connector `c` has its own slot topic `<group>-slots-<c>` ([`topic`]) with one partition
//! per task, partition p = task p, and the owner of slot 0 also runs the connector instance. A topic
//! per connector (rather than one shared topic) because a topic can only grow: a connector's task
//! count can then grow on its own topic (CreatePartitions), and deleting a connector only drops its
//! topic from the subscription. Nothing is ever produced to these topics.
//!
//! Cooperative rebalancing revokes in one round and assigns in the next, and the revoking member
//! rejoins only after its rebalance callback returned, which here waits (bounded) for the handler's
//! `revoked` — the worker's stop and final commit — so two live owners of a slot never overlap while
//! both members are healthy. A member whose session expired gets `lost` instead (librdkafka's
//! `assignment_lost`): the group may already have given the slots away, so it must stop without
//! committing.
//!
//! The workers also share one **leader slot**: the single partition of `<group>-leader` ([`leader`]),
//! which every member subscribes to from [`TaskSlots::join`] through a second consumer group,
//! `<group>-leader` (a group of its own so that it does not count in the task group's balance, and
//! so that a static member's hold never delays a new leader). Its owner publishes its REST URL there
//! and only then is told `assigned([Leader])`; [`TaskSlots::leader_url`] reads the newest URL.
//! Nothing is read through either group: every assigned partition is paused. The only commits are
//! the membership checks' ([`lease`]): offset 0 of the owned slot partitions, which nothing reads.

mod callback;
mod close;
mod leader;
mod lease;
mod topic;
mod worker_group;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_plugin::{GroupHandler, MembershipLease, Slot};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use crate::connect::store::ConnectStoreError;
use callback::{HandlerThread, Job, SlotsContext};
use close::{Closer, Threads};
use leader::LeaderTopic;
pub use topic::{TopicNameError, leader_topic_name, slot_topic_name};

/// How to join the slot group.
#[derive(Clone)]
pub struct SlotsConfig {
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// The worker group's `group.id`; also the prefix of the slot topics.
    pub group_id: String,
    /// `session.timeout.ms`: how long the group waits for a silent member.
    pub session_timeout: Duration,
    /// `heartbeat.interval.ms`; must be below the session timeout.
    pub heartbeat_interval: Duration,
    /// The rebalance timeout (`max.poll.interval.ms`): how long the group waits for members to rejoin.
    pub rebalance_timeout: Duration,
    /// How long a rebalance waits for [`SlotHandler::revoked`]; must be below the rebalance timeout.
    pub revoke_timeout: Duration,
    /// Replication factor of new slot topics (-1: the broker's default).
    pub replication_factor: i16,
    /// Timeout of admin and metadata calls.
    pub admin_timeout: Duration,
    /// Further librdkafka client settings (security, …), applied to every client of the slots.
    pub client_settings: Vec<(String, String)>,
    /// This worker's REST base URL (`http://host:port`), published when it becomes the leader.
    pub advertised_url: String,
    /// This worker's id (`host:port`, Kafka Connect's `worker_id`), published with the URL.
    pub worker_id: String,
    /// Static membership (KIP-345), Ferry's form of Kafka Connect's KIP-415 delay
    /// (`scheduled.rebalance.max.delay.ms`): `(group.instance.id, hold)`. The member joins with that
    /// instance id and a session timeout of `hold`, so when it goes away (killed, or closed — a
    /// static member does not leave the group) the group keeps its slots for `hold`, and gives them
    /// back to it when it rejoins with the same id within that time; only after `hold` do they move.
    /// `hold` replaces `session_timeout`. The instance id must be stable across restarts of this
    /// worker and unique in the group (the worker id suits). `None`: a dynamic member, whose slots
    /// move as soon as the group notices it is gone.
    ///
    /// Verified on Apache Kafka 4.4 (tests/static_slots.rs); tansu 0.6, the test broker of earlier
    /// rounds, did not rebalance a cooperative group with static members.
    pub static_member: Option<(String, Duration)>,
    /// Confirmed whenever the coordinator accepts a commit of the owned slots (see
    /// [`MembershipLease`]): the slot consumer commits them every [`SlotsConfig::confirm_interval`]
    /// — nothing is read through the group, so the offsets mean nothing, but the coordinator accepts
    /// a commit only from a current member of the current generation. `None`: no lease.
    pub lease: Option<Arc<MembershipLease>>,
}

// Client settings may hold credentials: Debug shows their keys only.
impl std::fmt::Debug for SlotsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotsConfig")
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("group_id", &self.group_id)
            .field("session_timeout", &self.session_timeout)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("rebalance_timeout", &self.rebalance_timeout)
            .field("revoke_timeout", &self.revoke_timeout)
            .field("replication_factor", &self.replication_factor)
            .field("admin_timeout", &self.admin_timeout)
            .field(
                "client_settings",
                &self
                    .client_settings
                    .iter()
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            )
            .field("advertised_url", &self.advertised_url)
            .field("worker_id", &self.worker_id)
            .field("static_member", &self.static_member)
            .field("lease", &self.lease.as_ref().map(|l| l.validity()))
            .finish()
    }
}

impl SlotsConfig {
    /// Kafka Connect's defaults: session 10 s, heartbeat 3 s, rebalance 60 s; revoke waits 30 s.
    /// `advertised_url` is the worker's REST base URL (`http://host:port`); its `host:port` is the
    /// worker id.
    pub fn new(
        bootstrap_servers: impl Into<String>,
        group_id: impl Into<String>,
        advertised_url: impl Into<String>,
    ) -> Self {
        let advertised_url: String = advertised_url.into();
        let worker_id = advertised_url
            .split_once("://")
            .map_or(advertised_url.as_str(), |(_, rest)| rest)
            .trim_end_matches('/')
            .to_owned();
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            group_id: group_id.into(),
            session_timeout: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(3),
            rebalance_timeout: Duration::from_secs(60),
            revoke_timeout: Duration::from_secs(30),
            replication_factor: -1,
            admin_timeout: Duration::from_secs(30),
            client_settings: Vec::new(),
            advertised_url,
            worker_id,
            static_member: None,
            lease: None,
        }
    }

    /// The lease a worker with these settings needs: valid for half the session timeout, so that a
    /// worker that stops hearing from the coordinator holds its tasks' records well before the group
    /// may give the tasks away.
    pub fn membership_lease(&self) -> MembershipLease {
        MembershipLease::new(self.session_timeout / 2)
    }

    /// How often the membership lease is confirmed: every heartbeat, and at least six times per
    /// session timeout. A round confirms the commit the previous round sent, so the lease is at
    /// most about two intervals old when confirmed — within its half-session validity.
    pub fn confirm_interval(&self) -> Duration {
        self.heartbeat_interval.min(self.session_timeout / 6)
    }

    /// The session timeout the member joins with: the static hold, or `session_timeout`.
    fn effective_session_timeout(&self) -> Duration {
        self.static_member
            .as_ref()
            .map_or(self.session_timeout, |(_, hold)| *hold)
    }

    fn validate(&self) -> Result<(), SlotsError> {
        let bad = |m: String| Err(SlotsError::Config(m));
        let session_timeout = self.effective_session_timeout().min(self.session_timeout);
        if self.heartbeat_interval.is_zero() || self.heartbeat_interval >= session_timeout {
            return bad(format!(
                "the heartbeat interval ({:?}) must be above zero and below the session timeout ({:?}; \
                 for a static member, its hold)",
                self.heartbeat_interval, session_timeout
            ));
        }
        if let Some((instance_id, _)) = &self.static_member
            && instance_id.trim().is_empty()
        {
            return bad("a static member needs a non-empty group.instance.id".to_owned());
        }
        if self.revoke_timeout.is_zero() || self.revoke_timeout >= self.rebalance_timeout {
            return bad(format!(
                "the revoke timeout ({:?}) must be above zero and below the rebalance timeout ({:?}), or \
                 the group removes the member while it is still stopping its tasks",
                self.revoke_timeout, self.rebalance_timeout
            ));
        }
        if self.replication_factor == 0 || self.replication_factor < -1 {
            return bad(format!(
                "the slot topics' replication factor must be at least 1, or -1 for the broker's default, \
                 not {}",
                self.replication_factor
            ));
        }
        if self.admin_timeout.is_zero() {
            return bad("the admin timeout must be above zero".to_owned());
        }
        topic::slot_topic(&self.group_id, "x").map_err(|e| SlotsError::Config(e.to_string()))?;
        topic::leader_topic(&self.group_id).map_err(|e| SlotsError::Config(e.to_string()))?;
        if !(self.advertised_url.starts_with("http://")
            || self.advertised_url.starts_with("https://"))
        {
            return bad(format!(
                "the advertised URL {:?} must be this worker's REST base URL, http://host:port \
                 (rest.advertised.host.name and rest.advertised.port)",
                self.advertised_url
            ));
        }
        if self.worker_id.trim().is_empty() {
            return bad("the worker id (host:port) must not be empty".to_owned());
        }
        Ok(())
    }

    /// A consumer of the group `group_id` that only takes part in its rebalances.
    fn consumer(
        &self,
        group_id: &str,
        instance_id: Option<&str>,
        session_timeout: Duration,
        context: SlotsContext,
    ) -> Result<BaseConsumer<SlotsContext>, KafkaError> {
        let ms = |d: Duration| d.as_millis().to_string();
        let mut client = self.client();
        if let Some(instance_id) = instance_id {
            client.set("group.instance.id", instance_id);
        }
        client
            .set("group.id", group_id)
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", ms(session_timeout))
            .set("heartbeat.interval.ms", ms(self.heartbeat_interval))
            .set("max.poll.interval.ms", ms(self.rebalance_timeout))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "false")
            // New slot topics must show up in the subscription soon after they are created.
            .set("topic.metadata.refresh.interval.ms", "1000")
            .create_with_context(context)
    }

    fn client(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (k, v) in &self.client_settings {
            config.set(k, v);
        }
        crate::settings::client_settings(&mut config, &self.client_settings);
        config
    }
}

/// What went wrong with the task slots.
#[derive(Debug, thiserror::Error)]
pub enum SlotsError {
    /// The configuration cannot work; fix it.
    #[error("task slots: invalid configuration: {0}")]
    Config(String),
    /// A Kafka call failed.
    #[error("task slots of group {group}: {what} failed: {source}")]
    Kafka {
        /// The group.
        group: String,
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: Box<KafkaError>,
    },
    /// The broker refused or did not do something; the message says what to do.
    #[error("task slots of group {group}: {message}")]
    Broker {
        /// The group.
        group: String,
        /// What happened and what to do.
        message: String,
    },
    /// Reading or writing the leader topic failed.
    #[error("task slots of group {group}: {source}")]
    LeaderTopic {
        /// The group.
        group: String,
        /// The topic's error (it says whether a retry may help).
        #[source]
        source: ConnectStoreError,
    },
    /// The slots were closed, or their poll thread stopped.
    #[error("task slots of group {0} are closed")]
    Closed(String),
}

enum Command {
    Subscribe(Vec<String>, SyncSender<Result<(), KafkaError>>),
}

/// This worker's membership in the slot group. Dropping it leaves the group (revoking every slot
/// through the handler first), blocking up to the rebalance timeout — from async code prefer
/// [`TaskSlots::close`] on a blocking thread or [`WorkerGroup::leave`](ferry_plugin::WorkerGroup::leave),
/// which do the same and say whether they finished.
pub struct TaskSlots {
    config: SlotsConfig,
    admin: Arc<AdminClient<DefaultClientContext>>,
    /// Looks topics up. A consumer, not the admin client: librdkafka's admin client is a producer,
    /// whose metadata requests let a broker with `auto.create.topics.enable=true` (Kafka's default)
    /// create a missing slot topic with its default partition count before Ferry creates it.
    metadata: Arc<BaseConsumer>,
    commands: SyncSender<Command>,
    /// The subscription: the leader topic and every added connector's slot topic.
    subscribed: tokio::sync::Mutex<BTreeSet<String>>,
    owned: Arc<Mutex<BTreeSet<Slot>>>,
    leader: Arc<LeaderTopic>,
    closer: Arc<Closer>,
}

impl TaskSlots {
    /// Creates the group's leader topic when missing (1 partition, compacted) and joins the group,
    /// subscribed to the leader topic only (see [`TaskSlots::add_connector`]). Returns once the
    /// subscription is in place, not once slots are assigned: those come through `handler`.
    pub async fn join(
        config: SlotsConfig,
        handler: Arc<dyn GroupHandler>,
    ) -> Result<Self, SlotsError> {
        config.validate()?;
        let group = config.group_id.clone();
        let kafka = |what: &str, source| SlotsError::Kafka {
            group: group.clone(),
            what: what.to_owned(),
            source: Box::new(source),
        };
        let leader_topic =
            topic::leader_topic(&group).map_err(|e| SlotsError::Config(e.to_string()))?;
        let leader = Arc::new(LeaderTopic::open(&config, &leader_topic).await.map_err(
            |source| SlotsError::LeaderTopic {
                group: group.clone(),
                source,
            },
        )?);
        let admin: AdminClient<DefaultClientContext> = config
            .client()
            .create()
            .map_err(|e| kafka("creating the admin client", e))?;
        let metadata: BaseConsumer = config
            .client()
            .set("allow.auto.create.topics", "false")
            .create()
            .map_err(|e| kafka("creating the metadata client", e))?;
        let (jobs_tx, jobs_rx) = sync_channel(16);
        let owned = Arc::new(Mutex::new(BTreeSet::new()));
        let leader_held = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (consumer, leader_consumer) =
            join_consumers(&config, &leader_topic, jobs_tx, &owned, &leader_held)?;
        let handler_thread = HandlerThread {
            handler,
            leader: Arc::clone(&leader),
            runtime: tokio::runtime::Handle::current(),
            leader_held,
            stop: Arc::clone(&stop),
            own_url: config.advertised_url.clone(),
        };
        let (threads, commands_tx) = start_threads(
            &config,
            handler_thread,
            jobs_rx,
            consumer,
            leader_consumer,
            &stop,
        )?;
        let slots = Self {
            closer: Arc::new(Closer {
                group: group.clone(),
                stop,
                threads: Mutex::new(Some(threads)),
            }),
            config,
            admin: Arc::new(admin),
            metadata: Arc::new(metadata),
            commands: commands_tx,
            subscribed: tokio::sync::Mutex::new(BTreeSet::new()),
            owned,
            leader,
        };
        Ok(slots)
    }

    /// The slots this worker holds in the group now: a slot counts from its assignment (its
    /// `assigned` call may still be queued) until it is given up (after `revoked` returned or timed
    /// out, or at once when lost).
    pub fn owned(&self) -> BTreeSet<Slot> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The REST base URL the newest leader published (reading the leader topic to its end), if any.
    pub async fn leader_url(&self) -> Result<Option<String>, SlotsError> {
        let newest = self
            .leader
            .newest()
            .await
            .map_err(|source| SlotsError::LeaderTopic {
                group: self.config.group_id.clone(),
                source,
            })?;
        Ok(newest.map(|record| record.url))
    }

    /// Makes `connector`'s `tasks` slots part of the group: creates its slot topic with `tasks`
    /// partitions (or grows it to that many), waits until the metadata shows them, and subscribes.
    /// A topic with more partitions than `tasks` is left as it is (Kafka cannot shrink a topic): the
    /// worker must ignore slots at or above the connector's task count. Brokers without
    /// CreatePartitions (such as tansu 0.6) cannot grow a slot topic: pass the connector's `tasks.max` as
    /// `tasks` so the topic never needs to grow while `tasks.max` stays.
    pub async fn add_connector(&self, connector: &str, tasks: usize) -> Result<(), SlotsError> {
        let topic = topic::slot_topic(&self.config.group_id, connector)
            .map_err(|e| SlotsError::Config(e.to_string()))?;
        if tasks == 0 {
            return Err(SlotsError::Config(format!(
                "connector {connector:?} needs at least one task slot"
            )));
        }
        let partitions = i32::try_from(tasks).map_err(|_| {
            SlotsError::Config(format!(
                "connector {connector:?}: {tasks} task slots is too many"
            ))
        })?;
        let mut subscribed = self.subscribed.lock().await;
        self.ensure_topic(&topic, partitions).await?;
        let mut next = subscribed.clone();
        next.insert(topic);
        self.subscribe(next.iter().cloned().collect()).await?;
        *subscribed = next;
        Ok(())
    }

    /// Drops `connector`'s slots from the subscription: their owners get `revoked`. The topic stays
    /// (delete it once no worker subscribes to it).
    pub async fn remove_connector(&self, connector: &str) -> Result<(), SlotsError> {
        let topic = topic::slot_topic(&self.config.group_id, connector)
            .map_err(|e| SlotsError::Config(e.to_string()))?;
        let mut subscribed = self.subscribed.lock().await;
        let mut next = subscribed.clone();
        if !next.remove(&topic) {
            return Ok(());
        }
        self.subscribe(next.iter().cloned().collect()).await?;
        *subscribed = next;
        Ok(())
    }

    /// Leaves the group: every owned slot is revoked through the handler first. Waits up to `timeout`.
    pub fn close(self, timeout: Duration) -> Result<(), SlotsError> {
        self.closer.close(timeout)
    }

    async fn subscribe(&self, topics: Vec<String>) -> Result<(), SlotsError> {
        let (tx, rx) = sync_channel(1);
        let closed = || SlotsError::Closed(self.config.group_id.clone());
        self.commands
            .send(Command::Subscribe(topics, tx))
            .map_err(|_| closed())?;
        let result = tokio::task::spawn_blocking(move || rx.recv())
            .await
            .map_err(|_| closed())?
            .map_err(|_| closed())?;
        result.map_err(|source| SlotsError::Kafka {
            group: self.config.group_id.clone(),
            what: "changing the subscription to the slot topics".to_owned(),
            source: Box::new(source),
        })
    }

    /// Creates slot topic `topic` with `partitions` partitions, or grows it to them, and waits until
    /// the metadata shows them all.
    async fn ensure_topic(&self, topic: &str, partitions: i32) -> Result<(), SlotsError> {
        let timeout = self.config.admin_timeout;
        let options = AdminOptions::new()
            .operation_timeout(Some(timeout))
            .request_timeout(Some(timeout));
        let existing = self.partition_count(topic).await?;
        match existing {
            None => self.create_topic(topic, partitions, &options).await?,
            Some(n) if n < partitions => self.grow_topic(topic, n, partitions, &options).await?,
            Some(_) => return Ok(()),
        }
        self.await_partitions(topic, partitions).await
    }

    /// The error of a failed Kafka call (`what` was being done).
    fn kafka_error(&self, what: String, source: KafkaError) -> SlotsError {
        SlotsError::Kafka {
            group: self.config.group_id.clone(),
            what,
            source: Box::new(source),
        }
    }

    /// The error of something the broker refused or did not do.
    fn broker_error(&self, message: String) -> SlotsError {
        SlotsError::Broker {
            group: self.config.group_id.clone(),
            message,
        }
    }

    /// Creates slot topic `topic` with `partitions` partitions; one that exists already is fine.
    async fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        options: &AdminOptions,
    ) -> Result<(), SlotsError> {
        let new = NewTopic::new(
            topic,
            partitions,
            TopicReplication::Fixed(i32::from(self.config.replication_factor)),
        );
        let results = self
            .admin
            .create_topics([&new], options)
            .await
            .map_err(|e| self.kafka_error(format!("creating slot topic {topic}"), e))?;
        for result in results {
            match result {
                Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((_, code)) => {
                    return Err(self.broker_error(format!(
                        "creating slot topic {topic} with {partitions} partitions failed: {code}; \
                         create it yourself or grant CreateTopics"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Grows slot topic `topic` from `n` to `partitions` partitions.
    async fn grow_topic(
        &self,
        topic: &str,
        n: i32,
        partitions: i32,
        options: &AdminOptions,
    ) -> Result<(), SlotsError> {
        let grow = NewPartitions::new(topic, partitions as usize);
        let results = self
            .admin
            .create_partitions([&grow], options)
            .await
            .map_err(|e| {
                if matches!(e, KafkaError::AdminOp(RDKafkaErrorCode::UnsupportedFeature)) {
                    self.broker_error(format!(
                        "slot topic {topic} has {n} partitions and needs {partitions}, but the \
                         broker does not support CreatePartitions. The topic holds no data: \
                         delete it while no worker runs the connector, or create the \
                         connector's slots with its tasks.max up front"
                    ))
                } else {
                    self.kafka_error(format!("growing slot topic {topic}"), e)
                }
            })?;
        for result in results {
            if let Err((_, code)) = result {
                return Err(self.broker_error(format!(
                    "growing slot topic {topic} from {n} to {partitions} partitions failed: \
                     {code}; grow it yourself or grant Alter on the topic"
                )));
            }
        }
        Ok(())
    }

    /// Waits until the metadata shows `partitions` partitions of `topic`: subscribing before it
    /// does would leave slots unassigned.
    async fn await_partitions(&self, topic: &str, partitions: i32) -> Result<(), SlotsError> {
        let timeout = self.config.admin_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self
                .partition_count(topic)
                .await?
                .is_some_and(|n| n >= partitions)
            {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(self.broker_error(format!(
                    "slot topic {topic} did not show {partitions} partitions in the metadata within \
                     {timeout:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The topic's partition count, or `None` if the broker does not know it.
    async fn partition_count(&self, topic: &str) -> Result<Option<i32>, SlotsError> {
        let client = Arc::clone(&self.metadata);
        let name = topic.to_owned();
        let timeout = self.config.admin_timeout;
        let metadata =
            tokio::task::spawn_blocking(move || client.fetch_metadata(Some(&name), timeout))
                .await
                .map_err(|_| SlotsError::Closed(self.config.group_id.clone()))?
                .map_err(|source| SlotsError::Kafka {
                    group: self.config.group_id.clone(),
                    what: format!("fetching the metadata of slot topic {topic}"),
                    source: Box::new(source),
                })?;
        Ok(metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
            .map(|t| t.partitions().len() as i32))
    }
}

impl Drop for TaskSlots {
    fn drop(&mut self) {
        if let Err(e) = self.closer.close(self.config.rebalance_timeout) {
            tracing::warn!("{e}");
        }
    }
}

/// Makes the task slot consumer (static when asked) and the leader slot consumer, subscribed to
/// the leader topic; both queue their rebalance events on `jobs`.
fn join_consumers(
    config: &SlotsConfig,
    leader_topic: &str,
    jobs: SyncSender<Job>,
    owned: &Arc<Mutex<BTreeSet<Slot>>>,
    leader_held: &Arc<AtomicBool>,
) -> Result<(BaseConsumer<SlotsContext>, BaseConsumer<SlotsContext>), SlotsError> {
    let kafka = |what: &str, source| SlotsError::Kafka {
        group: config.group_id.clone(),
        what: what.to_owned(),
        source: Box::new(source),
    };
    let context = |group_id: &str| SlotsContext {
        group_id: group_id.to_owned(),
        slots_group: config.group_id.clone(),
        leader_topic: leader_topic.to_owned(),
        jobs: jobs.clone(),
        revoke_timeout: config.revoke_timeout,
        owned: Arc::clone(owned),
        leader_held: Arc::clone(leader_held),
    };
    // The task slots: static when asked, so a departed member's tasks wait for its return.
    let consumer = config
        .consumer(
            &config.group_id,
            config.static_member.as_ref().map(|(id, _)| id.as_str()),
            config.effective_session_timeout(),
            context(&config.group_id),
        )
        .map_err(|e| kafka("creating the slot consumer", e))?;
    // The leader slot has a group of its own: in the task group it would count in the assignor's
    // balance (two tasks on two workers could end up both on one, the other only leading), and a
    // dead leader must be replaced at once, not after the static hold.
    let leader_group = topic::leader_group(&config.group_id);
    let leader_consumer = config
        .consumer(
            &leader_group,
            None,
            config.session_timeout,
            context(&leader_group),
        )
        .map_err(|e| kafka("creating the leader slot consumer", e))?;
    leader_consumer
        .subscribe(&[leader_topic])
        .map_err(|e| kafka("subscribing to the leader topic", e))?;
    drop(jobs);
    Ok((consumer, leader_consumer))
}

/// Starts the handler thread (running `handler_thread` on `jobs`) and the poll thread (polling
/// both consumers, taking commands from the returned sender, until `stop`).
fn start_threads(
    config: &SlotsConfig,
    handler_thread: HandlerThread,
    jobs: Receiver<Job>,
    consumer: BaseConsumer<SlotsContext>,
    leader_consumer: BaseConsumer<SlotsContext>,
    stop: &Arc<AtomicBool>,
) -> Result<(Threads, SyncSender<Command>), SlotsError> {
    let group = &config.group_id;
    let (handler_done_tx, handler_done_rx) = sync_channel(1);
    let handler_thread = std::thread::Builder::new()
        .name(format!("slots-handler-{}", config.group_id))
        .spawn(move || {
            handler_thread.run(jobs);
            let _ = handler_done_tx.send(());
        })
        .map_err(|e| SlotsError::Broker {
            group: group.clone(),
            message: format!("starting the handler thread failed: {e}"),
        })?;
    let (commands_tx, commands_rx) = sync_channel(4);
    let (closed_tx, closed_rx) = sync_channel(1);
    let stop_flag = Arc::clone(stop);
    let lease = config
        .lease
        .clone()
        .map(|lease| (lease, config.confirm_interval()));
    let poll_thread = std::thread::Builder::new()
        .name(format!("slots-poll-{}", config.group_id))
        .spawn(move || {
            poll_loop(consumer, leader_consumer, commands_rx, &stop_flag, lease);
            let _ = closed_tx.send(());
        })
        .map_err(|e| SlotsError::Broker {
            group: group.clone(),
            message: format!("starting the poll thread failed: {e}"),
        })?;
    let threads = Threads {
        poll: poll_thread,
        handler: handler_thread,
        closed: closed_rx,
        handler_done: handler_done_rx,
    };
    Ok((threads, commands_tx))
}

/// The poll thread: polls the consumer (which serves the rebalance callbacks) and applies
/// subscription changes until told to close; dropping the consumer then leaves the group, serving the
/// final revocation on this same thread.
fn poll_loop(
    consumer: BaseConsumer<SlotsContext>,
    leader_consumer: BaseConsumer<SlotsContext>,
    commands: Receiver<Command>,
    stop: &AtomicBool,
    lease: Option<(Arc<MembershipLease>, Duration)>,
) {
    let consumer = Arc::new(consumer);
    let confirmer =
        lease.and_then(|(lease, every)| lease::Confirmer::spawn(&consumer, lease, every));
    while !stop.load(Ordering::Acquire) {
        // Every assigned partition is paused (nothing is read through the groups); should a record
        // arrive anyway, it is ignored.
        let _ = consumer.poll(Duration::from_millis(25));
        let _ = leader_consumer.poll(Duration::from_millis(25));
        match commands.try_recv() {
            Ok(Command::Subscribe(topics, reply)) => {
                let result = if topics.is_empty() {
                    consumer.unsubscribe();
                    Ok(())
                } else {
                    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
                    consumer.subscribe(&names)
                };
                let _ = reply.send(result);
            }
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {}
        }
    }
    let closing = std::time::Instant::now();
    if let Some(confirmer) = confirmer {
        confirmer.stop();
    }
    tracing::info!(
        "leaving the group: membership checks stopped after {:.1?}",
        closing.elapsed()
    );
    // Tasks first: the leader serves REST writes until its tasks have stopped.
    drop(consumer);
    tracing::info!(
        "leaving the group: task slot consumer closed after {:.1?}",
        closing.elapsed()
    );
    drop(leader_consumer);
    tracing::info!(
        "leaving the group: leader slot consumer closed after {:.1?}",
        closing.elapsed()
    );
}

#[cfg(test)]
mod tests {
    use super::SlotsConfig;

    /// The slots' clients connect every broker at once (a group join took 59–67 ms instead of
    /// 10–21 ms with sparse connections), unless the worker's client settings say otherwise.
    #[test]
    fn the_slots_clients_connect_every_broker_unless_the_worker_says_otherwise() {
        let mut config = SlotsConfig::new("127.0.0.1:1", "g", "http://127.0.0.1:8083");
        assert_eq!(
            config.client().get("enable.sparse.connections"),
            Some("false")
        );
        config
            .client_settings
            .push(("enable.sparse.connections".to_owned(), "true".to_owned()));
        assert_eq!(
            config.client().get("enable.sparse.connections"),
            Some("true")
        );
    }
}
