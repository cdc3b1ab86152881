//! The offset store's log: the offsets topic read into an [`OffsetTable`] through the shared
//! [`TopicLog`] — the whole topic at start, then to the current end before every read.
//!
//! What is the offset store's own: decoding each record into the table (and, for an export, keeping
//! it raw), progress lines during a long read, and waiting for transactions open when a read starts
//! to end before reading past the last stable offset
//! ([`OffsetLog::read_past_open_transactions`]): the consumer reads committed data only, so "the
//! end" of a read is each partition's last stable offset.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_offsets::{LogOrder, OffsetTable, StoreError, StoredRecord};
use rdkafka::Message;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::topic_partition_list::Offset;

use crate::client::{StoreConsumer, backend, kafka};
use crate::topic_log::{AssignFrom, LogError, Progress, ReadSummary, RecordVisitor, TopicLog};

/// A progress line at least this often during a long read…
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
/// …or after this many records.
const PROGRESS_RECORDS: u64 = 100_000;

/// The offsets topic's reader and the offsets it has read so far.
pub(crate) struct OffsetLog {
    log: TopicLog<StoreError>,
    table: OffsetTable,
    /// Records read since the store was opened (shared with the store, readable without the lock).
    records: Arc<AtomicU64>,
    /// Every record read, raw, when recording ([`OffsetLog::record_history`]).
    history: Option<Vec<RawRecord>>,
}

/// One record as read from the topic, for [`OffsetLog::into_history`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawRecord {
    /// The Kafka partition (lane).
    pub(crate) partition: i32,
    /// The record timestamp (ms).
    pub(crate) timestamp: i64,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

/// How the offsets topic's reads fail: [`StoreError`]s, naming "the offsets topic", a stalled read
/// saying how far it got.
impl LogError for StoreError {
    const TOPIC: &'static str = "offsets topic";

    fn kafka(store: &str, what: &str, error: &KafkaError) -> Self {
        kafka(store, what, error)
    }

    fn backend(store: &str, message: String, retriable: bool) -> Self {
        backend(store, message, retriable)
    }

    fn is_retriable(&self) -> bool {
        StoreError::is_retriable(self)
    }

    fn stalled(store: &str, progress: &Progress, timeout: Duration, cause: &str) -> Self {
        let Progress {
            records,
            expected,
            lagging,
            position,
            end,
            ..
        } = progress;
        backend(
            store,
            format!(
                "reading the offsets topic to its end made no progress for {timeout:?}: partition {lagging} is \
                 at offset {position} of {end} after {records} of ~{expected} records ({cause}). Check that the \
                 brokers are reachable and that this worker may read the topic; the read will be retried"
            ),
            true,
        )
    }
}

impl OffsetLog {
    /// Assigns every partition of `topic` from its beginning (no group, no commits). Reads nothing.
    pub(crate) fn new(
        consumer: StoreConsumer,
        offsets_client: Arc<StoreConsumer>,
        topic: &str,
        partitions: i32,
        store: &str,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            log: TopicLog::new(
                consumer,
                offsets_client,
                topic,
                partitions,
                store,
                timeout,
                AssignFrom::ListedStart,
            )?,
            table: OffsetTable::default(),
            records: Arc::new(AtomicU64::new(0)),
            history: None,
        })
    }

    /// Keeps every record read from now on, raw, for [`into_history`](Self::into_history).
    pub(crate) fn record_history(mut self) -> Self {
        self.history = Some(Vec::new());
        self
    }

    /// The records kept by [`record_history`](Self::record_history), in store order
    /// ([`merge_lanes`]).
    pub(crate) fn into_history(self) -> Vec<StoredRecord> {
        merge_lanes(self.history.unwrap_or_default())
    }

    /// The client that answers ListOffsets requests (shared, so a second log needs no new one).
    pub(crate) fn offsets_client(&self) -> Arc<StoreConsumer> {
        self.log.offsets_client()
    }

    /// The offsets read so far.
    pub(crate) fn table(&self) -> &OffsetTable {
        &self.table
    }

    /// The count of records read since the store was opened, shared.
    pub(crate) fn records(&self) -> Arc<AtomicU64> {
        self.records.clone()
    }

    /// Reads every partition up to its end offset as of now. Returns what was read.
    pub(crate) fn read_to_end(&mut self) -> Result<ReadSummary, StoreError> {
        let started = Instant::now();
        let ends = self.log.end_offsets()?;
        self.read_to(&ends, started)
    }

    /// Reads every partition up to its high watermark as of now — past every record written so far,
    /// committed or not — once no transaction open at that point is left: a task's start needs this.
    ///
    /// A `read_committed` reader sees a partition only up to its last stable offset, the first
    /// offset of its oldest open transaction. Another task's transaction left open on the partition
    /// (its worker was killed inside it; the coordinator aborts it when that task's next instance
    /// fences it, or at the transaction timeout) hides every commit written after it began — a
    /// restarting task's own last commits among them, and it would resume from an older position.
    /// So this waits until every partition's last stable offset reaches the high watermark listed
    /// first (`watermarks` is a `read_uncommitted` client), then reads to those last stable offsets:
    /// what Kafka Connect's `KafkaBasedLog` does, reading to the high watermark with a
    /// `read_committed` consumer.
    ///
    /// # Errors
    /// Retriable when a transaction stays open past the store's timeout: an older offset is never
    /// answered instead.
    pub(crate) fn read_past_open_transactions(
        &mut self,
        watermarks: &StoreConsumer,
    ) -> Result<ReadSummary, StoreError> {
        let started = Instant::now();
        let floor = self.log.list_offsets_with(
            watermarks,
            Offset::End,
            "fetching the offsets topic's high watermarks",
        )?;
        let deadline = started + self.log.timeout();
        let mut last_report = started;
        loop {
            let ends = self.log.end_offsets()?;
            let held = ends
                .iter()
                .zip(&floor)
                .position(|(stable, high)| stable < high);
            let Some(p) = held else {
                return self.read_to(&ends, started);
            };
            let (stable, high) = (ends[p], floor[p]);
            if Instant::now() >= deadline {
                return Err(backend(
                    self.log.store(),
                    format!(
                        "an open transaction holds partition {p} of the offsets topic at its last stable \
                         offset {stable}, below its high watermark {high}, for over {:?}: the offsets \
                         written after it began cannot be read yet. It ends when the task that opened it \
                         starts again or at that producer's transaction.timeout.ms; the read will be \
                         retried. If it never ends, the broker lost track of it (a hanging transaction, \
                         seen after a broker restart): `kafka-transactions.sh --bootstrap-server <brokers> \
                         describe-producers --topic {topic} --partition {p}` shows it, and `kafka-transactions.sh \
                         --bootstrap-server <brokers> abort --topic {topic} --partition {p} --start-offset {stable}` \
                         ends it (the offsets it held are then lost: the records they covered may come \
                         again)",
                        self.log.timeout(),
                        topic = self.log.topic()
                    ),
                    true,
                ));
            }
            if last_report.elapsed() >= PROGRESS_INTERVAL {
                tracing::info!(
                    topic = %self.log.topic(),
                    "waiting for an open transaction on partition {p} of the offsets topic to end (last \
                     stable offset {stable}, high watermark {high}, {:.0?} so far)",
                    started.elapsed()
                );
                last_report = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads every partition up to `ends` (offsets a `read_committed` reader can reach) into the table.
    fn read_to(&mut self, ends: &[i64], started: Instant) -> Result<ReadSummary, StoreError> {
        let mut records = OffsetRecords {
            table: &mut self.table,
            history: self.history.as_mut(),
            topic: self.log.topic().to_owned(),
            last_report: Instant::now(),
            reported_records: 0,
        };
        let read = self.log.read_to(ends, started, &mut records)?;
        self.records.fetch_add(read.records, Ordering::Relaxed);
        Ok(read)
    }
}

/// One read's records applied to the table: a null value is a tombstone, a null key is skipped.
struct OffsetRecords<'a> {
    table: &'a mut OffsetTable,
    history: Option<&'a mut Vec<RawRecord>>,
    topic: String,
    /// When the last progress line was logged, and the records read by then.
    last_report: Instant,
    reported_records: u64,
}

impl RecordVisitor for OffsetRecords<'_> {
    fn record(&mut self, message: &BorrowedMessage<'_>) {
        match message.key() {
            None => tracing::warn!(
                topic = message.topic(),
                partition = message.partition(),
                offset = message.offset(),
                "skipping a record with a null key in the offsets topic (not an offset record)"
            ),
            Some(key) => {
                let order = message.timestamp().to_millis().unwrap_or(i64::MIN);
                if let Some(history) = self.history.as_deref_mut() {
                    history.push(RawRecord {
                        partition: message.partition(),
                        timestamp: order,
                        key: key.to_vec(),
                        value: message.payload().map(<[u8]>::to_vec),
                    });
                }
                self.table.apply_at(
                    key,
                    message.payload(),
                    LogOrder {
                        lane: message.partition(),
                        order,
                    },
                );
            }
        }
    }

    fn progress(&mut self, progress: &Progress) {
        let Progress {
            records,
            expected,
            started,
            lagging,
            position,
            end,
        } = *progress;
        if records - self.reported_records >= PROGRESS_RECORDS
            || self.last_report.elapsed() >= PROGRESS_INTERVAL
        {
            tracing::info!(
                topic = %self.topic,
                "read {records} of ~{expected} offset records from topic {} ({:.0?} so far; partition {lagging} \
                 at offset {position} of {end})",
                self.topic,
                started.elapsed(),
            );
            (self.last_report, self.reported_records) = (Instant::now(), records);
        }
    }
}

/// Orders the records of several lanes (Kafka partitions) as the store applies them: each lane in its
/// own (offset) order, and across lanes by timestamp, the lower partition first on equal timestamps.
/// `records` holds each lane's records in lane order.
pub(crate) fn merge_lanes(records: Vec<RawRecord>) -> Vec<StoredRecord> {
    let mut lanes: std::collections::BTreeMap<i32, std::collections::VecDeque<RawRecord>> =
        std::collections::BTreeMap::new();
    let total = records.len();
    for record in records {
        lanes.entry(record.partition).or_default().push_back(record);
    }
    let mut merged = Vec::with_capacity(total);
    loop {
        let next = lanes
            .iter()
            .filter_map(|(lane, queue)| queue.front().map(|r| (r.timestamp, *lane)))
            .min();
        let Some(record) = next.and_then(|(_, lane)| lanes.get_mut(&lane)?.pop_front()) else {
            break;
        };
        merged.push((record.key, record.value));
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(partition: i32, timestamp: i64, key: &str, value: Option<&str>) -> RawRecord {
        RawRecord {
            partition,
            timestamp,
            key: key.as_bytes().to_vec(),
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn lanes_merge_by_timestamp_and_keep_their_own_order() {
        let merged = merge_lanes(vec![
            raw(3, 100, "a", Some("1")),
            raw(3, 50, "b", Some("2")), // a clock behind: stays after "a" in its lane
            raw(1, 60, "c", None),
            raw(1, 200, "d", Some("4")),
            raw(0, 100, "e", Some("5")),
        ]);
        let keys: Vec<&[u8]> = merged.iter().map(|(k, _)| &k[..]).collect();
        assert_eq!(keys, [&b"c"[..], b"e", b"a", b"b", b"d"]);
        assert_eq!(merged[0].1, None, "tombstones are kept");
    }
}
