//! Reading a compacted internal topic to its end, again and again: Kafka Connect's `KafkaBasedLog`.
//! The one reader of the offset store ([`crate::store`]) and of the config and status stores
//! ([`crate::connect`]). What a store does with each record is its own ([`RecordVisitor`]), and so
//! are its errors ([`LogError`]).
//!
//! Blocking (librdkafka's consumer API is synchronous): the stores call it from a blocking thread.
//!
//! "The end" is every partition's end offset fetched when the read starts (for a `read_committed`
//! consumer, its last stable offset). A partition is read when the consumer's position — which
//! librdkafka moves past transaction markers too — reaches it. Compaction can leave a partition with
//! no record below its end offset (its last records were superseded, or were tombstones past
//! `delete.retention.ms`); librdkafka then reports the end of the partition without moving the
//! position, so its end-of-partition event counts too — checked first, because it may be stale
//! ([`crate::end_events`]).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::client::StoreConsumer;
use crate::end_events::{EOF_GRACE, EndEvents, first_behind};

/// A store's error, as a [`TopicLog`] reports its failures: each store keeps its own error type and
/// wording at its boundary.
pub(crate) trait LogError: std::fmt::Display + Sized {
    /// How the store's messages name its topic ("offsets topic": "fetching the offsets topic's end
    /// offsets").
    const TOPIC: &'static str;

    /// A failed client call: `what` failed, the client's error, and whether a retry may succeed.
    fn kafka(store: &str, what: &str, error: &KafkaError) -> Self;

    /// Any other failure of the store named `store`.
    fn backend(store: &str, message: String, retriable: bool) -> Self;

    /// Whether the same call may succeed later.
    fn is_retriable(&self) -> bool;

    /// A read made no progress for `timeout`; `cause` is the client's last error, if any.
    fn stalled(store: &str, progress: &Progress, timeout: Duration, cause: &str) -> Self;
}

/// What a store does with the records of a read, in each partition's order: the seam between the
/// shared read and a store's own state.
pub(crate) trait RecordVisitor {
    /// One record (any key, any value; a `None` payload is a tombstone).
    fn record(&mut self, message: &BorrowedMessage<'_>);

    /// Called after every poll of a read, for a long read's progress lines.
    fn progress(&mut self, _progress: &Progress) {}
}

impl<F: FnMut(&BorrowedMessage<'_>)> RecordVisitor for F {
    fn record(&mut self, message: &BorrowedMessage<'_>) {
        self(message);
    }
}

/// How far a read has come.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    /// Records read so far.
    pub(crate) records: u64,
    /// About how many records the read covers (offsets between the positions and the ends; compaction
    /// and transaction markers make it fewer).
    pub(crate) expected: i64,
    /// When the read started.
    pub(crate) started: Instant,
    /// The first partition not read to its end yet…
    pub(crate) lagging: i32,
    /// …every offset of it below this one read…
    pub(crate) position: i64,
    /// …out of this end offset.
    pub(crate) end: i64,
}

/// What a read did, for the stores' log lines.
pub(crate) struct ReadSummary {
    /// Records read.
    pub(crate) records: u64,
    /// How long it took.
    pub(crate) elapsed: Duration,
}

/// Where a new [`TopicLog`]'s consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AssignFrom {
    /// `Offset::Beginning`: the consumer resolves each partition's start itself.
    Beginning,
    /// The start offsets just listed: a fresh consumer resolving `Offset::Beginning` itself takes
    /// about half a second before its first fetch.
    ListedStart,
}

/// A consumer assigned every partition of a topic (no group, no commits), and how far it has read.
/// `E` is the error of the store that reads it.
pub(crate) struct TopicLog<E> {
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
    error: PhantomData<fn() -> E>,
}

impl<E: LogError> TopicLog<E> {
    /// Assigns every partition of `topic` from its beginning. Reads nothing.
    pub(crate) fn new(
        consumer: StoreConsumer,
        offsets_client: Arc<StoreConsumer>,
        topic: &str,
        partitions: i32,
        store: &str,
        timeout: Duration,
        from: AssignFrom,
    ) -> Result<Self, E> {
        let mut log = Self {
            consumer,
            offsets_client,
            topic: topic.to_owned(),
            store: store.to_owned(),
            timeout,
            next: vec![0; usize::try_from(partitions).unwrap_or(0)],
            error: PhantomData,
        };
        // The reading consumer learns the topic's partition leaders before it is assigned them: an
        // assigned partition of a topic its metadata cache does not hold waits for librdkafka's
        // one-second topic scan before its first fetch: 0.94–0.97 s in 4 of 9 opens of the benchmark's
        // offsets topic, none in 3 since.
        let what = format!("looking the {} up", E::TOPIC);
        log.consumer
            .fetch_metadata(Some(topic), timeout)
            .map_err(|e| E::kafka(&log.store, &what, &e))?;
        // Nothing below a partition's log start offset is left to read.
        let starts = format!("fetching the {}'s start offsets", E::TOPIC);
        match from {
            AssignFrom::Beginning => {
                log.assign((0..partitions).map(|p| (p, Offset::Beginning)))?;
                log.next = log.list_offsets(Offset::Beginning, &starts)?;
            }
            AssignFrom::ListedStart => {
                log.next = log.list_offsets(Offset::Beginning, &starts)?;
                log.assign(
                    (0..partitions)
                        .zip(&log.next)
                        .map(|(p, start)| (p, Offset::Offset(*start))),
                )?;
            }
        }
        Ok(log)
    }

    fn assign(&self, starts: impl ExactSizeIterator<Item = (i32, Offset)>) -> Result<(), E> {
        let what = format!("assigning the {}'s partitions", E::TOPIC);
        let mut assignment = TopicPartitionList::with_capacity(starts.len());
        for (partition, start) in starts {
            assignment
                .add_partition_offset(&self.topic, partition, start)
                .map_err(|e| E::kafka(&self.store, &what, &e))?;
        }
        self.consumer
            .assign(&assignment)
            .map_err(|e| E::kafka(&self.store, &what, &e))
    }

    /// The topic read.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// How the store names itself in logs and errors.
    pub(crate) fn store(&self) -> &str {
        &self.store
    }

    /// How long a broker call or a read may make no progress.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The client that answers ListOffsets requests (shared, so a second log needs no new one).
    pub(crate) fn offsets_client(&self) -> Arc<StoreConsumer> {
        self.offsets_client.clone()
    }

    /// Every partition's end offset as of now, as the log's consumer can read it.
    pub(crate) fn end_offsets(&self) -> Result<Vec<i64>, E> {
        let what = format!("fetching the {}'s end offsets", E::TOPIC);
        self.list_offsets(Offset::End, &what)
    }

    /// One offset per partition from the broker (ListOffsets): `Offset::End` asks for the end offsets,
    /// `Offset::Beginning` for the start offsets.
    fn list_offsets(&self, which: Offset, what: &str) -> Result<Vec<i64>, E> {
        self.list_offsets_with(&self.offsets_client, which, what)
    }

    /// [`list_offsets`](Self::list_offsets) asked of `client` (whose `isolation.level` decides
    /// whether `Offset::End` means the high watermark or the last stable offset).
    pub(crate) fn list_offsets_with(
        &self,
        client: &StoreConsumer,
        which: Offset,
        what: &str,
    ) -> Result<Vec<i64>, E> {
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
    ) -> Result<Vec<i64>, E> {
        let mut request = TopicPartitionList::with_capacity(self.next.len());
        for partition in 0..self.next.len() as i32 {
            request
                .add_partition_offset(&self.topic, partition, which)
                .map_err(|e| E::kafka(&self.store, what, &e))?;
        }
        let answer = client
            .offsets_for_times(request, self.timeout)
            .map_err(|e| E::kafka(&self.store, what, &e))?;
        let mut offsets = vec![0; self.next.len()];
        for element in answer.elements() {
            element
                .error()
                .map_err(|e| E::kafka(&self.store, what, &e))?;
            let slot = usize::try_from(element.partition())
                .ok()
                .and_then(|p| offsets.get_mut(p))
                .ok_or_else(|| {
                    E::backend(
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
                    return Err(E::backend(
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

    /// Reads every partition up to `ends` (offsets the log's consumer can reach), handing each record
    /// to `visitor`. `started` is when the read began (before its ends were listed).
    pub(crate) fn read_to(
        &mut self,
        ends: &[i64],
        started: Instant,
        visitor: &mut impl RecordVisitor,
    ) -> Result<ReadSummary, E> {
        let expected: i64 = ends
            .iter()
            .zip(&self.next)
            .map(|(end, next)| (end - next).max(0))
            .sum();
        let mut events = EndEvents::new(ends.len(), EOF_GRACE);
        let mut records = 0u64;
        let mut last_progress = Instant::now();
        let mut last_error: Option<KafkaError> = None;
        // Which partition is still behind is checked when the one found behind reaches its end,
        // every CHECK_EVERY records while records stream in (reading a few records past the end is
        // harmless: they are real records, in order), and after every other event. Not only every
        // CHECK_EVERY records: a partition other workers keep committing to streams without a break
        // (no end-of-partition event), and the read would wait for that many new records.
        const CHECK_EVERY: u64 = 1024;
        let mut behind = self.first_behind(ends, &mut events)?;
        while let Some(lagging) = behind {
            let mut check = true;
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let reached_end = take_record(
                        &mut self.next,
                        &message,
                        lagging,
                        ends,
                        &mut events,
                        visitor,
                    );
                    records += 1;
                    if records == 1 {
                        tracing::debug!(topic = %self.topic, "first record after {:.1?} (end offsets {ends:?})", started.elapsed());
                    }
                    last_progress = Instant::now();
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
            let p = usize::try_from(lagging).unwrap_or(usize::MAX);
            let progress = Progress {
                records,
                expected,
                started,
                lagging,
                position: self.next.get(p).copied().unwrap_or_default(),
                end: ends.get(p).copied().unwrap_or_default(),
            };
            visitor.progress(&progress);
            if last_progress.elapsed() > self.timeout {
                let cause = last_error.map_or_else(
                    || "no client error reported".to_owned(),
                    |e| format!("last client error: {e}"),
                );
                return Err(E::stalled(&self.store, &progress, self.timeout, &cause));
            }
            if check {
                behind = self.first_behind(ends, &mut events)?;
            }
        }
        Ok(ReadSummary {
            records,
            elapsed: started.elapsed(),
        })
    }

    /// The first partition not yet read up to `ends` ([`crate::end_events::first_behind`]): a
    /// partition whose end-of-partition event stood unfollowed for [`EOF_GRACE`] is sought back to
    /// its position, so that only a fresh event counts.
    fn first_behind(&mut self, ends: &[i64], events: &mut EndEvents) -> Result<Option<i32>, E> {
        let (consumer, topic, store, timeout) =
            (&self.consumer, &self.topic, &self.store, self.timeout);
        first_behind(&mut self.next, ends, events, |partition, next| {
            consumer
                .seek(topic, partition, Offset::Offset(next), timeout)
                .map_err(|e| {
                    E::kafka(
                        store,
                        &format!(
                            "seeking partition {partition} of the {} to offset {next}",
                            E::TOPIC
                        ),
                        &e,
                    )
                })
        })
    }

    /// Moves `next` up to the consumer's positions (which pass transaction markers). Returns whether
    /// any partition moved.
    fn sync_positions(&mut self) -> Result<bool, E> {
        let positions = self
            .consumer
            .position()
            .map_err(|e| E::kafka(&self.store, "reading the consumer's positions", &e))?;
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
}

/// Moves `next` past `message`, marks its partition's end event stale and hands it to `visitor`;
/// returns whether it brought the `lagging` partition to its end in `ends`.
fn take_record(
    next: &mut [i64],
    message: &BorrowedMessage<'_>,
    lagging: i32,
    ends: &[i64],
    events: &mut EndEvents,
    visitor: &mut impl RecordVisitor,
) -> bool {
    let partition = usize::try_from(message.partition()).ok();
    if let Some(p) = partition {
        if let Some(next) = next.get_mut(p) {
            *next = (*next).max(message.offset() + 1);
        }
        // A record after an unchecked end event: that event was stale.
        events.record(p);
    }
    visitor.record(message);
    partition.is_some_and(|p| {
        i32::try_from(p) == Ok(lagging) && next.get(p).zip(ends.get(p)).is_some_and(|(n, e)| n >= e)
    })
}
