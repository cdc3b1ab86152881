//! PostgreSQL change data capture → Kafka: Ferry (`ferry distributed`, PostgresCdcSource under
//! Debezium's class name and keys) against Debezium 3.6's PostgreSQL connector in a Kafka Connect 4.4
//! distributed worker (Kafka's stock JVM flags), on the broker of the run and the PostgreSQL 15 of
//! `scripts/install-test-deps` (127.0.0.1:5432, user postgres, database test).
//!
//! Four runs: Ferry as shipped (its producer's defaults; offsets committed every second, as in
//! examples/postgres-cdc), the same with continuous commits (`offset.flush.interval.ms=0`), Ferry given
//! the producer settings Kafka Connect forces on Debezium's producer ([`CONNECT_PRODUCER`]: the same
//! producer pipeline, so the connectors alone differ), and Debezium.
//! The contenders run one after the other, never together (two cores), each on a table of its own
//! with the same contents and the same change stream, with its own slot, publication
//! (`publication.autocreate.mode=filtered`) and `topic.prefix`, the same connector configuration
//! (pgoutput, `snapshot.mode=initial`, JsonConverter with `schemas.enable=true` for key and value, set
//! on the connector). One contender's run:
//!
//! 1. the table is created and filled with `snapshot_rows` rows; the worker starts; the connector is
//!    created; **snapshot**: from the accepted creation request until the topic's end offset
//!    (ListOffsets every [`POLL`]) holds every row;
//! 2. one marker row is inserted and waited for: the connector streams and is caught up;
//! 3. **streaming**: `writers` connections insert `inserts` new rows and then update `updates` of the
//!    snapshot's rows, `rows_per_transaction` rows per transaction (one statement each), all at once;
//!    timed from the first commit to the last change in the topic; the worker's CPU over the same span
//!    (and the slot's walsender's and the broker's, which share the cores);
//! 4. **latency**: one connection inserts `latency_rows` single-row transactions paced at
//!    `latency_rate` per second, noting when each commit returned; a consumer (`fetch.wait.max.ms=5`)
//!    reading the topic from its end notes when each row's record arrives (the row's id from the
//!    record's key); latency = arrival − commit, both on this process's monotonic clock;
//! 5. the topic must then hold exactly one record per row and change; the worker's `VmHWM` is its peak.
//!
//! The table, slot and publication of a run are dropped when the run ends, failed or not
//! ([`PgObjects`]'s drop), and any an interrupted earlier run left behind (the `ferry_bench_cdc_`
//! prefix) before the section starts.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_testkit::{ConnectOptions, ConnectWorker, Jvm, KafkaBroker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{ClientConfig, Message};

use crate::e2e::RunDir;
use crate::e2e::connect::{
    CONNECT_FLUSH_MS, CONNECT_PRODUCER, FerryWorker, TopicWatch, Worker, cpu_seconds, peak_rss,
    unique,
};
use crate::kafka::create_topic;
use crate::measure::{human_bytes, human_count, human_duration};
use crate::results::{Cdc, CdcContender, quantile};
use crate::{BenchResult, Plan};

pub const FERRY: &str = "Ferry (`ferry distributed`, PostgresCdcSource), its producer defaults";
pub const FERRY_CONTINUOUS: &str =
    "Ferry, its producer defaults, continuous offset commits (offset.flush.interval.ms=0)";
pub const FERRY_CONNECT_PRODUCER: &str = "Ferry, Kafka Connect's producer settings";
/// Ferry's `offset.flush.interval.ms` but in [`FERRY_CONTINUOUS`]: examples/postgres-cdc's (the slot
/// is acknowledged up to what is committed, so it commits often).
pub const FERRY_FLUSH_MS: u64 = 1000;
pub const DEBEZIUM: &str = "Debezium 3.6 in Kafka Connect 4.4 (distributed worker)";
/// Every table, slot and publication the section creates starts with this.
const PREFIX: &str = "ferry_bench_cdc_";
const CONNECTOR: &str = "bench-cdc";
/// libpq-style connection of the writers (install-test-deps: trust for 127.0.0.1, user postgres).
const PG_CONNECT: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";
/// How often the topic's end offset is asked for (the times' granularity).
const POLL: Duration = Duration::from_millis(10);
/// How long one phase may take before the bench gives up.
const DEADLINE: Duration = Duration::from_secs(900);
/// How long the bench waits before the final count (a retried send would add a record late).
const SETTLE: Duration = Duration::from_millis(1000);

/// Sizes of the section.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub snapshot_rows: u64,
    pub inserts: u64,
    pub updates: u64,
    pub writers: u64,
    pub rows_per_transaction: u64,
    pub latency_rows: u64,
    pub latency_rate: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Ferry as shipped: its producer's defaults (librdkafka's, idempotent).
    Ferry,
    /// The same with continuous offset commits (the file examples' setting): the task's `commit`
    /// then runs after every commit cycle, on the task's loop.
    FerryContinuous,
    /// Ferry given the producer settings Kafka Connect forces on its own, as the worker-process case
    /// does: the same producer pipeline as Debezium's, so the connectors alone differ.
    FerryConnectProducer,
    Debezium,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ferry => FERRY,
            Kind::FerryContinuous => FERRY_CONTINUOUS,
            Kind::FerryConnectProducer => FERRY_CONNECT_PRODUCER,
            Kind::Debezium => DEBEZIUM,
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Kind::Ferry => "ferry",
            Kind::FerryContinuous => "ferry0",
            Kind::FerryConnectProducer => "ferrykc",
            Kind::Debezium => "debezium",
        }
    }
}

/// Runs both contenders in turn.
pub fn run(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
    broker: &KafkaBroker,
) -> BenchResult<Cdc> {
    let sizes = plan.cdc;
    if sizes.updates > sizes.snapshot_rows {
        return Err("cdc: more updates than snapshot rows".into());
    }
    let ferry = crate::crash::require_ferry_binary()?;
    drop_leftovers()?;
    eprintln!(
        "  table of {} rows; then {} writers: {} inserts + {} updates, {} rows per transaction; then \
         {} single-row transactions at {}/s",
        human_count(sizes.snapshot_rows),
        sizes.writers,
        human_count(sizes.inserts),
        human_count(sizes.updates),
        sizes.rows_per_transaction,
        human_count(sizes.latency_rows),
        sizes.latency_rate
    );
    let mut contenders = Vec::new();
    for kind in [
        Kind::Ferry,
        Kind::FerryContinuous,
        Kind::FerryConnectProducer,
        Kind::Debezium,
    ] {
        let run = Run {
            runtime,
            broker,
            work_dir: &plan.work_dir,
            ferry: &ferry,
            sizes,
            kind,
        };
        let measured = run.measure()?;
        eprintln!(
            "  {}: snapshot {} ({} rows/s), streaming {} ({} changes/s; writers took {}), CPU {:.2} s \
             ({:.1} µs per change; walsender {:.2} s, broker {:.2} s), latency p50 {:.1} ms p99 {:.1} ms max {:.1} ms, peak RSS {}",
            measured.name,
            human_duration(measured.snapshot_seconds),
            human_count((sizes.snapshot_rows as f64 / measured.snapshot_seconds) as u64),
            human_duration(measured.streaming_seconds),
            human_count(
                ((sizes.inserts + sizes.updates) as f64 / measured.streaming_seconds) as u64
            ),
            human_duration(measured.writers_seconds),
            measured.streaming_cpu_seconds,
            measured.streaming_cpu_seconds * 1e6 / (sizes.inserts + sizes.updates) as f64,
            measured.walsender_cpu_seconds,
            measured.broker_cpu_seconds,
            measured.latency_p50_ms,
            measured.latency_p99_ms,
            measured.latency_max_ms,
            human_bytes(measured.peak_rss_bytes as f64)
        );
        contenders.push(measured);
    }
    Ok(Cdc {
        snapshot_rows: sizes.snapshot_rows,
        inserts: sizes.inserts,
        updates: sizes.updates,
        writers: sizes.writers,
        rows_per_transaction: sizes.rows_per_transaction,
        latency_rows: sizes.latency_rows,
        latency_rate: sizes.latency_rate,
        contenders,
    })
}

struct Run<'a> {
    runtime: &'a tokio::runtime::Runtime,
    broker: &'a KafkaBroker,
    work_dir: &'a Path,
    ferry: &'a Path,
    sizes: Sizes,
    kind: Kind,
}

impl Run<'_> {
    fn measure(&self) -> BenchResult<CdcContender> {
        let sizes = self.sizes;
        let tag = format!("{}_{}", self.kind.slug(), unique());
        let objects = PgObjects {
            table: format!("{PREFIX}{tag}"),
            slot: format!("{PREFIX}{tag}_slot"),
            publication: format!("{PREFIX}{tag}_pub"),
        };
        let started = Instant::now();
        objects.create_table(sizes.snapshot_rows)?;
        eprintln!(
            "  {}: table {} filled in {}",
            self.kind.name(),
            objects.table,
            human_duration(started.elapsed().as_secs_f64())
        );
        let bootstrap = self.broker.bootstrap_servers();
        let prefix = format!("ferry-bench-cdc-{}", tag.replace('_', "-"));
        let topic = format!("{prefix}.public.{}", objects.table);
        self.runtime
            .block_on(create_topic(&bootstrap, &topic, 1, &[]))?;
        let watch = TopicWatch::new(&bootstrap, &topic)?;
        let dir = RunDir::create(self.work_dir, &format!("cdc-{}", self.kind.slug()))?;
        let group = format!("ferry-bench-cdc-{}", tag.replace('_', "-"));
        let mut worker = match self.kind {
            Kind::Ferry | Kind::FerryContinuous | Kind::FerryConnectProducer => {
                let producer = if self.kind == Kind::FerryConnectProducer {
                    CONNECT_PRODUCER
                } else {
                    &[][..]
                };
                let flush_ms = if self.kind == Kind::FerryContinuous {
                    0
                } else {
                    FERRY_FLUSH_MS
                };
                Worker::Ferry(FerryWorker::start(
                    self.ferry,
                    &bootstrap,
                    &group,
                    &dir,
                    flush_ms,
                    producer,
                    &[],
                )?)
            }
            Kind::Debezium => {
                let mut options = ConnectOptions::new(&group);
                options.offset_flush_interval_ms = CONNECT_FLUSH_MS;
                options.jvm = Jvm::Shipped;
                Worker::Connect(ConnectWorker::start(self.broker, options).map_err(|e| {
                    crate::BenchError::from(format!("the Kafka Connect worker did not start: {e}"))
                })?)
            }
        };
        let measured = self.phases(&mut worker, &objects, &prefix, &watch);
        worker.kill();
        let measured = measured.map_err(|e| {
            crate::BenchError::from(format!(
                "{}: {e}; the worker's log ends:\n{}",
                self.kind.name(),
                worker.log_tail()
            ))
        });
        drop(worker);
        let removed = dir.remove();
        let dropped = objects.drop_all();
        let measured = measured?;
        removed?;
        dropped?;
        Ok(measured)
    }

    fn phases(
        &self,
        worker: &mut Worker,
        objects: &PgObjects,
        prefix: &str,
        watch: &TopicWatch,
    ) -> BenchResult<CdcContender> {
        let sizes = self.sizes;
        let pid = worker.pid()?;
        let rows = i64::try_from(sizes.snapshot_rows)?;
        let changes = i64::try_from(sizes.inserts + sizes.updates)?;
        // 1. The snapshot.
        let (requested, cpu_before) =
            worker.create_named(CONNECTOR, &connector_config(objects, prefix), || {
                cpu_seconds(pid)
            })?;
        let snapshot_first = wait_for(watch, worker, "the snapshot's first row", 1, || Ok(()))?;
        let snapshot_done = wait_for(watch, worker, "the snapshot's last row", rows, || Ok(()))?;
        let snapshot_cpu = cpu_seconds(pid)? - cpu_before;
        // 2. Streaming and caught up: one marker row (id 0: the table's ids start at 1).
        psql(&[&format!(
            "INSERT INTO public.{} VALUES (0, -1, 0, 0, 'marker', now())",
            objects.table
        )])?;
        wait_for(watch, worker, "the marker row", rows + 1, || Ok(()))?;
        // 3. The change stream. The walsender's and the broker's CPU too: on two cores they compete
        // with the worker, so they say what else bounds the rate.
        let walsender = psql(&[&format!(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{}'",
            objects.slot
        )])?
        .trim()
        .parse::<u32>()
        .ok();
        let others = || {
            let cpu = |pid: Option<u32>| pid.and_then(|p| cpu_seconds(p).ok()).unwrap_or(f64::NAN);
            (cpu(walsender), cpu(self.broker.pid()))
        };
        let others_before = others();
        let cpu_before = cpu_seconds(pid)?;
        let failed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let writers =
            self.runtime
                .spawn(write_stream(objects.table.clone(), sizes, failed.clone()));
        let streamed = wait_for(
            watch,
            worker,
            "the writers' last change",
            rows + 1 + changes,
            // A writer's error would otherwise leave the wait to its deadline.
            || match failed.lock().map(|f| f.clone()) {
                Ok(Some(e)) => Err(crate::BenchError::from(format!("a writer failed: {e}"))),
                _ => Ok(()),
            },
        )?;
        let streaming_cpu = cpu_seconds(pid)? - cpu_before;
        let others_after = others();
        let (first_commit, last_commit) = self
            .runtime
            .block_on(writers)
            .map_err(|e| crate::BenchError::from(format!("the writers' task: {e}")))??;
        // The stream's bytes: the records carry their schemas (JsonConverter, schemas.enable).
        let from = rows + 1 + changes;
        let record_bytes =
            mean_record_bytes(&self.broker.bootstrap_servers(), &watch.topic, from, 1000)?;
        // 4. Latency.
        let latencies = latency(
            self.runtime,
            &self.broker.bootstrap_servers(),
            &watch.topic,
            from,
            &objects.table,
            sizes,
        )?;
        let peak = peak_rss(pid)?;
        // 5. One record per row and change, no more.
        std::thread::sleep(SETTLE);
        let expected = from + i64::try_from(sizes.latency_rows)?;
        let held = watch.end()?;
        if held != expected {
            return Err(crate::BenchError::from(format!(
                "topic {} holds {held} records, expected {expected} (rows + marker + changes + latency \
                 rows)",
                watch.topic
            )));
        }
        Ok(CdcContender {
            name: self.kind.name().to_owned(),
            snapshot_seconds: snapshot_done.duration_since(requested).as_secs_f64(),
            snapshot_first_seconds: snapshot_first.duration_since(requested).as_secs_f64(),
            snapshot_cpu_seconds: snapshot_cpu,
            streaming_seconds: streamed.duration_since(first_commit).as_secs_f64(),
            writers_seconds: last_commit.duration_since(first_commit).as_secs_f64(),
            streaming_cpu_seconds: streaming_cpu,
            record_bytes,
            walsender_cpu_seconds: others_after.0 - others_before.0,
            broker_cpu_seconds: others_after.1 - others_before.1,
            latency_p50_ms: quantile(&latencies, 0.5),
            latency_p99_ms: quantile(&latencies, 0.99),
            latency_max_ms: latencies.last().copied().unwrap_or(f64::NAN),
            peak_rss_bytes: peak,
        })
    }
}

/// The connector's configuration, the same for both workers (Debezium's keys; Ferry answers to
/// Debezium's class name).
fn connector_config(objects: &PgObjects, prefix: &str) -> String {
    let json = "org.apache.kafka.connect.json.JsonConverter";
    serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": "5432",
        "database.user": "postgres",
        "database.password": "",
        "database.dbname": "test",
        "topic.prefix": prefix,
        "slot.name": objects.slot,
        "publication.name": objects.publication,
        "publication.autocreate.mode": "filtered",
        "table.include.list": format!("public.{}", objects.table),
        "snapshot.mode": "initial",
        "key.converter": json,
        "key.converter.schemas.enable": "true",
        "value.converter": json,
        "value.converter.schemas.enable": "true",
    })
    .to_string()
}

/// Polls the topic's end offset every [`POLL`] until it reaches `count`; `check` runs between polls
/// (an error stops the wait). Returns when the answer came.
fn wait_for(
    watch: &TopicWatch,
    worker: &mut Worker,
    what: &str,
    count: i64,
    check: impl Fn() -> BenchResult<()>,
) -> BenchResult<Instant> {
    let started = Instant::now();
    loop {
        let end = watch.end()?;
        if end >= count {
            return Ok(Instant::now());
        }
        worker.check_alive()?;
        check()?;
        if started.elapsed() > DEADLINE {
            return Err(crate::BenchError::from(format!(
                "{what} was not in {} within {DEADLINE:?} ({end} of {count} records)",
                watch.topic
            )));
        }
        std::thread::sleep(POLL);
    }
}

async fn connect() -> BenchResult<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(PG_CONNECT, tokio_postgres::NoTls)
        .await
        .map_err(|e| {
            crate::BenchError::from(format!("connecting to PostgreSQL ({PG_CONNECT}): {e}"))
        })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// `[start, end)` of part `i` of `total` split into `parts`.
fn share(total: u64, parts: u64, i: u64) -> (u64, u64) {
    (total * i / parts, total * (i + 1) / parts)
}

/// The change stream: every writer connects first, then all insert their share of new rows (ids after
/// the snapshot's) and update their share of the snapshot's rows, `rows_per_transaction` rows per
/// transaction. Returns the first and the last commit (when the statement returned). An error is
/// also put in `failed`, for the wait watching the topic.
async fn write_stream(
    table: String,
    sizes: Sizes,
    failed: std::sync::Arc<std::sync::Mutex<Option<String>>>,
) -> BenchResult<(Instant, Instant)> {
    let outcome = async {
        let mut clients = Vec::new();
        for _ in 0..sizes.writers {
            clients.push(connect().await?);
        }
        let mut tasks = Vec::new();
        for (w, client) in (0..sizes.writers).zip(clients) {
            let table = table.clone();
            tasks.push(tokio::spawn(async move {
                let tx = sizes.rows_per_transaction.max(1);
                let mut statements = Vec::new();
                let (from, to) = share(sizes.inserts, sizes.writers, w);
                let first_id = sizes.snapshot_rows + 1;
                let mut a = from;
                while a < to {
                    let b = (a + tx).min(to);
                    statements.push(format!(
                        "INSERT INTO public.{table} SELECT g, {w}, 0, (g % 100000) / 100.0, \
                         md5(g::text), now() FROM generate_series({}, {}) g",
                        first_id + a,
                        first_id + b - 1
                    ));
                    a = b;
                }
                let (from, to) = share(sizes.updates, sizes.writers, w);
                let mut a = from;
                while a < to {
                    let b = (a + tx).min(to);
                    statements.push(format!(
                        "UPDATE public.{table} SET n = n + 1, amount = amount + 1, payload = \
                         md5(payload) WHERE id BETWEEN {} AND {}",
                        a + 1,
                        b
                    ));
                    a = b;
                }
                let mut first = None;
                let mut last = None;
                for statement in &statements {
                    // One statement outside a transaction block: its own transaction.
                    client.batch_execute(statement).await.map_err(|e| {
                        crate::BenchError::from(format!("writer {w}: {statement}: {e}"))
                    })?;
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = Some(now);
                }
                Ok::<_, crate::BenchError>((first, last))
            }));
        }
        let (mut first, mut last) = (None::<Instant>, None::<Instant>);
        for task in tasks {
            let (f, l) = task
                .await
                .map_err(|e| crate::BenchError::from(format!("a writer's task: {e}")))??;
            first = match (first, f) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            last = last.max(l);
        }
        first
            .zip(last)
            .ok_or_else(|| crate::BenchError::from("the writers wrote nothing"))
    }
    .await;
    if let Err(e) = &outcome
        && let Ok(mut failed) = failed.lock()
    {
        *failed = Some(e.to_string());
    }
    outcome
}

/// Mean key + value bytes of the `count` records before offset `end` of `topic`.
fn mean_record_bytes(bootstrap: &str, topic: &str, end: i64, count: i64) -> BenchResult<f64> {
    let from = (end - count).max(0);
    let consumer = consumer_at(bootstrap, topic, from, "ferry-bench-cdc-sizes", &[])?;
    let (mut records, mut bytes) = (0i64, 0usize);
    let started = Instant::now();
    while from + records < end {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(crate::BenchError::from(format!(
                "reading {topic}: {records} of {} records within 60 s",
                end - from
            )));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                records += 1;
                bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
            }
            Some(Err(e)) => return Err(crate::BenchError::from(format!("reading {topic}: {e}"))),
            None => {}
        }
    }
    Ok(bytes as f64 / records.max(1) as f64)
}

/// A consumer of partition 0 of `topic` from offset `from`, with `settings` over the defaults.
fn consumer_at(
    bootstrap: &str,
    topic: &str,
    from: i64,
    group: &str,
    settings: &[(&str, &str)],
) -> BenchResult<BaseConsumer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    for (key, value) in settings {
        config.set(*key, *value);
    }
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| crate::BenchError::from(format!("consumer of {topic}: {e}")))?;
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(from))
        .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
    consumer
        .assign(&assignment)
        .map_err(|e| crate::BenchError::from(format!("assigning {topic}: {e}")))?;
    Ok(consumer)
}

/// The paced phase: `latency_rows` single-row inserts at `latency_rate`/s, each commit's return time
/// against its record's arrival at a consumer reading `topic` from offset `from`. Returns the
/// latencies in milliseconds, sorted.
fn latency(
    runtime: &tokio::runtime::Runtime,
    bootstrap: &str,
    topic: &str,
    from: i64,
    table: &str,
    sizes: Sizes,
) -> BenchResult<Vec<f64>> {
    let first_id = i64::try_from(sizes.snapshot_rows + sizes.inserts + 1)?;
    let count = usize::try_from(sizes.latency_rows)?;
    // Fetch responses as soon as a record is there (librdkafka's default waits up to 500 ms).
    let consumer = consumer_at(
        bootstrap,
        topic,
        from,
        "ferry-bench-cdc-latency",
        &[("fetch.wait.max.ms", "5")],
    )?;
    let reader = std::thread::spawn(move || -> BenchResult<HashMap<i64, Instant>> {
        let mut arrived = HashMap::with_capacity(count);
        let started = Instant::now();
        while arrived.len() < count {
            if started.elapsed() > DEADLINE {
                return Err(crate::BenchError::from(format!(
                    "latency: {} of {count} rows arrived within {DEADLINE:?}",
                    arrived.len()
                )));
            }
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let now = Instant::now();
                    let id = message
                        .key()
                        .and_then(|k| serde_json::from_slice::<serde_json::Value>(k).ok())
                        .and_then(|k| k["payload"]["id"].as_i64())
                        .ok_or_else(|| {
                            crate::BenchError::from(format!(
                                "latency: a record without an id in its key at offset {}",
                                message.offset()
                            ))
                        })?;
                    arrived.insert(id, now);
                }
                Some(Err(e)) => return Err(crate::BenchError::from(format!("latency: {e}"))),
                None => {}
            }
        }
        Ok(arrived)
    });
    let table = table.to_owned();
    let committed = runtime.block_on(async move {
        let client = connect().await?;
        let insert = client
            .prepare(&format!(
                "INSERT INTO public.{table} VALUES ($1, -2, 0, 0, 'latency', now())"
            ))
            .await
            .map_err(|e| crate::BenchError::from(format!("latency insert: {e}")))?;
        let gap = Duration::from_secs_f64(1.0 / sizes.latency_rate.max(1) as f64);
        let started = tokio::time::Instant::now();
        let mut committed = Vec::with_capacity(count);
        for i in 0..count {
            tokio::time::sleep_until(started + gap * u32::try_from(i)?).await;
            client
                .execute(&insert, &[&(first_id + i64::try_from(i)?)])
                .await
                .map_err(|e| crate::BenchError::from(format!("latency insert: {e}")))?;
            committed.push(Instant::now());
        }
        Ok::<_, crate::BenchError>(committed)
    })?;
    let arrived = reader
        .join()
        .map_err(|_| crate::BenchError::from("the latency reader panicked"))??;
    let mut latencies = Vec::with_capacity(count);
    for (i, commit) in committed.iter().enumerate() {
        let id = first_id + i64::try_from(i)?;
        let arrival = arrived
            .get(&id)
            .ok_or_else(|| crate::BenchError::from(format!("latency: row {id} never arrived")))?;
        // Signed: a record read before the client saw its commit return is a (tiny) negative.
        let ms = if *arrival >= *commit {
            arrival.duration_since(*commit).as_secs_f64() * 1e3
        } else {
            -(commit.duration_since(*arrival).as_secs_f64() * 1e3)
        };
        latencies.push(ms);
    }
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

/// `psql` as the tests connect (user postgres on 127.0.0.1, database test); each command on its own
/// (so VACUUM may be one). Returns the output.
fn psql(commands: &[&str]) -> BenchResult<String> {
    let mut cmd = Command::new("psql");
    cmd.args([
        "-X",
        "-Atq",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        "127.0.0.1",
        "-p",
        "5432",
        "-U",
        "postgres",
        "-d",
        "test",
    ]);
    for c in commands {
        cmd.arg("-c").arg(c);
    }
    let output = cmd
        .output()
        .map_err(|e| crate::BenchError::from(format!("cannot run psql: {e}")))?;
    if !output.status.success() {
        return Err(crate::BenchError::from(format!(
            "psql {commands:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What an interrupted earlier run left behind: inactive slots, publications and tables of the
/// section's prefix.
fn drop_leftovers() -> BenchResult<()> {
    let like = format!("{}%", PREFIX.replace('_', "\\_"));
    psql(&[
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name \
             LIKE '{like}' AND NOT active"
        ),
        &format!(
            "DO $$ DECLARE r record; BEGIN \
             FOR r IN SELECT pubname FROM pg_publication WHERE pubname LIKE '{like}' LOOP \
             EXECUTE format('DROP PUBLICATION %I', r.pubname); END LOOP; \
             FOR r IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE \
             '{like}' LOOP EXECUTE format('DROP TABLE public.%I', r.tablename); END LOOP; END $$"
        ),
    ])
    .map(drop)
}

/// The table, slot and publication of one contender's run; dropped on drop too.
struct PgObjects {
    table: String,
    slot: String,
    publication: String,
}

impl PgObjects {
    fn create_table(&self, rows: u64) -> BenchResult<()> {
        let t = &self.table;
        psql(&[
            &format!(
                "CREATE TABLE public.{t} (id bigint PRIMARY KEY, writer int NOT NULL, n int NOT NULL, \
                 amount numeric(12,2) NOT NULL, payload text NOT NULL, created timestamptz NOT NULL)"
            ),
            &format!(
                "INSERT INTO public.{t} SELECT g, (g % 4)::int, 0, (g % 100000) / 100.0, md5(g::text), \
                 now() FROM generate_series(1, {rows}) g"
            ),
            &format!("VACUUM ANALYZE public.{t}"),
        ])
        .map(drop)
    }

    /// Drops the slot (terminating its walsender if the killed worker's is still there), the
    /// publication and the table.
    fn drop_all(&self) -> BenchResult<()> {
        let slot = &self.slot;
        let started = Instant::now();
        loop {
            let outcome = psql(&[
                &format!(
                    "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE \
                     slot_name = '{slot}' AND active_pid IS NOT NULL"
                ),
                &format!(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE \
                     slot_name = '{slot}'"
                ),
            ]);
            match outcome {
                Ok(_) => break,
                // Active a moment longer (the backend is terminating).
                Err(_) if started.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        }
        psql(&[
            &format!("DROP PUBLICATION IF EXISTS {}", self.publication),
            &format!("DROP TABLE IF EXISTS public.{}", self.table),
        ])
        .map(drop)
    }
}

impl Drop for PgObjects {
    fn drop(&mut self) {
        // Idempotent: after a successful `drop_all` this finds nothing to drop.
        if let Err(e) = self.drop_all() {
            eprintln!("  cdc: cleaning up {}: {e}", self.table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_total_without_overlap() {
        let parts: Vec<_> = (0..4).map(|i| share(10, 4, i)).collect();
        assert_eq!(parts, [(0, 2), (2, 5), (5, 7), (7, 10)]);
    }
}
