//! Reading the offsets topic into memory: the whole topic at start, then to the current end before
//! every read.
//!
//! Blocking (librdkafka's consumer API is synchronous): the store calls this from a blocking thread.
//!
//! "The end" is the end offset of every partition fetched at the start of a read: its last stable
//! offset, because the consumer reads committed data only. Every read after the store's open first
//! waits until the last stable offsets reach the high watermarks, so that no transaction open when
//! the read starts hides commits written after it ([`OffsetLog::read_past_open_transactions`]).
//! A partition is read when the consumer's position — which librdkafka moves past transaction
//! markers too — reaches it.
//! Compaction can leave a partition with no record below its end offset (its last records were
//! superseded or were tombstones past `delete.retention.ms`); librdkafka then reports the end of the
//! partition without moving the position, so its end-of-partition event counts too — checked first,
//! because it may be stale ([`crate::end_events`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ferry_offsets::{LogOrder, OffsetTable, StoreError, StoredRecord};
use rdkafka::Message;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::client::{StoreConsumer, backend, kafka};
use crate::end_events::{EOF_GRACE, EndEvents, first_behind};

/// A progress line at least this often during a long read…
const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
/// …or after this many records.
const PROGRESS_RECORDS: u64 = 100_000;

/// The consumer, positioned somewhere in the topic, and the offsets it has read so far.
pub(crate) struct OffsetLog {
    consumer: StoreConsumer,
    /// Asks for start and end offsets (ListOffsets) over its own connections: a broker answers the
    /// requests of one connection in order, so on the consumer's connection the question would wait
    /// behind its pending fetch (up to `fetch.wait.max.ms`) on every read.
    offsets_client: Arc<StoreConsumer>,
    topic: String,
    store: String,
    timeout: Duration,
    /// Per partition: every offset below has been read.
    next: Vec<i64>,
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

/// What a read did, for the store's log lines.
pub(crate) struct ReadSummary {
    /// Records read.
    pub(crate) records: u64,
    /// How long it took.
    pub(crate) elapsed: Duration,
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
        let mut log = Self {
            consumer,
            offsets_client,
            topic: topic.to_owned(),
            store: store.to_owned(),
            timeout,
            next: vec![0; usize::try_from(partitions).unwrap_or(0)],
            table: OffsetTable::default(),
            records: Arc::new(AtomicU64::new(0)),
            history: None,
        };
        // Where each partition starts: nothing below the log start offset is left to read.
        log.next = log.list_offsets(
            Offset::Beginning,
            "fetching the offsets topic's start offsets",
        )?;
        // Assign those exact offsets: with `Offset::Beginning` the fresh consumer first resolves the
        // logical offset itself, which costs about half a second before the first fetch.
        let mut assignment = TopicPartitionList::with_capacity(log.next.len());
        for (partition, start) in (0..partitions).zip(&log.next) {
            assignment
                .add_partition_offset(topic, partition, Offset::Offset(*start))
                .map_err(|e| kafka(store, "assigning the offsets topic's partitions", &e))?;
        }
        log.consumer
            .assign(&assignment)
            .map_err(|e| kafka(store, "assigning the offsets topic's partitions", &e))?;
        Ok(log)
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
        self.offsets_client.clone()
    }

    /// The offsets read so far.
    pub(crate) fn table(&self) -> &OffsetTable {
        &self.table
    }

    /// The count of records read since the store was opened, shared.
    pub(crate) fn records(&self) -> Arc<AtomicU64> {
        self.records.clone()
    }

    /// One offset per partition from the broker (ListOffsets): `Offset::End` asks for the end offsets,
    /// `Offset::Beginning` for the start offsets.
    fn list_offsets(&self, which: Offset, what: &str) -> Result<Vec<i64>, StoreError> {
        self.list_offsets_with(&self.offsets_client, which, what)
    }

    /// [`list_offsets`](Self::list_offsets) asked of `client` (whose `isolation.level` decides
    /// whether `Offset::End` means the high watermark or the last stable offset).
    fn list_offsets_with(
        &self,
        client: &StoreConsumer,
        which: Offset,
        what: &str,
    ) -> Result<Vec<i64>, StoreError> {
        // A topic just created has no leader for a moment (NotLeaderForPartition), and a broker may
        // be electing one: retriable errors are retried until the store's timeout, as Kafka Connect's
        // TopicAdmin.retryEndOffsets does, rather than failing the open.
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.list_offsets_once(client, which, what) {
                Err(e) if e.is_retriable() && Instant::now() + backoff < deadline => {
                    tracing::debug!(store = %self.store, error = %e, "{what}: retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    fn list_offsets_once(
        &self,
        client: &StoreConsumer,
        which: Offset,
        what: &str,
    ) -> Result<Vec<i64>, StoreError> {
        let mut request = TopicPartitionList::with_capacity(self.next.len());
        for partition in 0..self.next.len() as i32 {
            request
                .add_partition_offset(&self.topic, partition, which)
                .map_err(|e| kafka(&self.store, what, &e))?;
        }
        let answer = client
            .offsets_for_times(request, self.timeout)
            .map_err(|e| kafka(&self.store, what, &e))?;
        let mut offsets = vec![0; self.next.len()];
        for element in answer.elements() {
            element.error().map_err(|e| kafka(&self.store, what, &e))?;
            let slot = usize::try_from(element.partition())
                .ok()
                .and_then(|p| offsets.get_mut(p))
                .ok_or_else(|| {
                    backend(
                        &self.store,
                        format!(
                            "{what}: the broker answered for unknown partition {}",
                            element.partition()
                        ),
                        true,
                    )
                })?;
            *slot = match element.offset() {
                Offset::Offset(offset) => offset,
                other => {
                    return Err(backend(
                        &self.store,
                        format!(
                            "{what}: the broker answered {other:?} for partition {}",
                            element.partition()
                        ),
                        true,
                    ));
                }
            };
        }
        Ok(offsets)
    }

    /// Reads every partition up to its end offset as of now. Returns what was read.
    pub(crate) fn read_to_end(&mut self) -> Result<ReadSummary, StoreError> {
        let started = Instant::now();
        let ends = self.list_offsets(Offset::End, "fetching the offsets topic's end offsets")?;
        self.read_to(ends, started)
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
        let floor = self.list_offsets_with(
            watermarks,
            Offset::End,
            "fetching the offsets topic's high watermarks",
        )?;
        let deadline = started + self.timeout;
        let mut last_report = started;
        loop {
            let ends =
                self.list_offsets(Offset::End, "fetching the offsets topic's end offsets")?;
            let held = ends
                .iter()
                .zip(&floor)
                .position(|(stable, high)| stable < high);
            let Some(p) = held else {
                return self.read_to(ends, started);
            };
            let (stable, high) = (ends[p], floor[p]);
            if Instant::now() >= deadline {
                return Err(backend(
                    &self.store,
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
                        self.timeout,
                        topic = self.topic
                    ),
                    true,
                ));
            }
            if last_report.elapsed() >= PROGRESS_INTERVAL {
                tracing::info!(
                    topic = %self.topic,
                    "waiting for an open transaction on partition {p} of the offsets topic to end (last \
                     stable offset {stable}, high watermark {high}, {:.0?} so far)",
                    started.elapsed()
                );
                last_report = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Reads every partition up to `ends` (offsets a `read_committed` reader can reach).
    fn read_to(&mut self, ends: Vec<i64>, started: Instant) -> Result<ReadSummary, StoreError> {
        let expected: i64 = ends
            .iter()
            .zip(&self.next)
            .map(|(end, next)| (end - next).max(0))
            .sum();
        let mut events = EndEvents::new(ends.len(), EOF_GRACE);
        let mut records = 0u64;
        let mut last_progress = Instant::now();
        let (mut last_report, mut reported_records) = (Instant::now(), 0u64);
        let mut last_error: Option<KafkaError> = None;
        // Which partition is still behind is checked when the one found behind reaches its end,
        // every CHECK_EVERY records while records stream in (reading a few records past the end is
        // harmless: they are real records, in order), and after every other event. Not only every
        // CHECK_EVERY records: a partition other workers keep committing to streams without a break
        // (no end-of-partition event), and the read would wait for that many new records.
        const CHECK_EVERY: u64 = 1024;
        let mut behind = self.first_behind(&ends, &mut events)?;
        while let Some(lagging) = behind {
            let mut check = true;
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    // A record after an unchecked end event: that event was stale.
                    let partition = Self::apply(
                        &mut self.table,
                        &mut self.next,
                        self.history.as_mut(),
                        &message,
                    );
                    if let Some(p) = partition {
                        events.record(p);
                    }
                    records += 1;
                    if records == 1 {
                        tracing::debug!(topic = %self.topic, "first record after {:.1?} (end offsets {ends:?})", started.elapsed());
                    }
                    last_progress = Instant::now();
                    let reached_end = partition.is_some_and(|p| {
                        i32::try_from(p) == Ok(lagging)
                            && self
                                .next
                                .get(p)
                                .zip(ends.get(p))
                                .is_some_and(|(n, e)| n >= e)
                    });
                    check = reached_end || records.is_multiple_of(CHECK_EVERY);
                }
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    if let Ok(p) = usize::try_from(partition) {
                        events.end_event(p, Instant::now());
                    }
                }
                Some(Err(error)) => last_error = Some(error),
                None => {
                    if self.sync_positions()? {
                        last_progress = Instant::now();
                    }
                }
            }
            if records - reported_records >= PROGRESS_RECORDS
                || last_report.elapsed() >= PROGRESS_INTERVAL
            {
                let p = lagging as usize;
                tracing::info!(
                    topic = %self.topic,
                    "read {records} of ~{expected} offset records from topic {} ({:.0?} so far; partition {lagging} \
                     at offset {} of {})",
                    self.topic,
                    started.elapsed(),
                    self.next.get(p).copied().unwrap_or_default(),
                    ends.get(p).copied().unwrap_or_default()
                );
                (last_report, reported_records) = (Instant::now(), records);
            }
            if last_progress.elapsed() > self.timeout {
                let p = lagging as usize;
                let cause = last_error.map_or_else(
                    || "no client error reported".to_owned(),
                    |e| format!("last client error: {e}"),
                );
                return Err(backend(
                    &self.store,
                    format!(
                        "reading the offsets topic to its end made no progress for {:?}: partition {lagging} is \
                         at offset {} of {} after {records} of ~{expected} records ({cause}). Check that the \
                         brokers are reachable and that this worker may read the topic; the read will be retried",
                        self.timeout, self.next[p], ends[p]
                    ),
                    true,
                ));
            }
            if check {
                behind = self.first_behind(&ends, &mut events)?;
            }
        }
        self.records.fetch_add(records, Ordering::Relaxed);
        Ok(ReadSummary {
            records,
            elapsed: started.elapsed(),
        })
    }

    /// The first partition not yet read up to `ends` ([`crate::end_events::first_behind`]): a
    /// partition whose end-of-partition event stood unfollowed for [`EOF_GRACE`] is sought back to
    /// its position, so that only a fresh event counts.
    fn first_behind(
        &mut self,
        ends: &[i64],
        events: &mut EndEvents,
    ) -> Result<Option<i32>, StoreError> {
        let (consumer, topic, store, timeout) =
            (&self.consumer, &self.topic, &self.store, self.timeout);
        first_behind(&mut self.next, ends, events, |partition, next| {
            consumer
                .seek(topic, partition, Offset::Offset(next), timeout)
                .map_err(|e| {
                    kafka(
                        store,
                        &format!(
                            "seeking partition {partition} of the offsets topic to offset {next}"
                        ),
                        &e,
                    )
                })
        })
    }

    /// Moves `next` up to the consumer's positions (which pass transaction markers). Returns whether
    /// any partition moved.
    fn sync_positions(&mut self) -> Result<bool, StoreError> {
        let positions = self
            .consumer
            .position()
            .map_err(|e| kafka(&self.store, "reading the consumer's positions", &e))?;
        let mut moved = false;
        for element in positions.elements() {
            if let (Offset::Offset(position), Some(next)) = (
                element.offset(),
                usize::try_from(element.partition())
                    .ok()
                    .and_then(|p| self.next.get_mut(p)),
            ) && position > *next
            {
                *next = position;
                moved = true;
            }
        }
        Ok(moved)
    }

    /// Applies one record: a null value is a tombstone, a null key is skipped. Returns its partition.
    fn apply(
        table: &mut OffsetTable,
        next: &mut [i64],
        history: Option<&mut Vec<RawRecord>>,
        message: &BorrowedMessage<'_>,
    ) -> Option<usize> {
        let partition = usize::try_from(message.partition()).ok()?;
        if let Some(next) = next.get_mut(partition) {
            *next = (*next).max(message.offset() + 1);
        }
        match message.key() {
            None => tracing::warn!(
                topic = message.topic(),
                partition = message.partition(),
                offset = message.offset(),
                "skipping a record with a null key in the offsets topic (not an offset record)"
            ),
            Some(key) => {
                let order = message.timestamp().to_millis().unwrap_or(i64::MIN);
                if let Some(history) = history {
                    history.push(RawRecord {
                        partition: message.partition(),
                        timestamp: order,
                        key: key.to_vec(),
                        value: message.payload().map(<[u8]>::to_vec),
                    });
                }
                table.apply_at(
                    key,
                    message.payload(),
                    LogOrder {
                        lane: message.partition(),
                        order,
                    },
                );
            }
        }
        Some(partition)
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
