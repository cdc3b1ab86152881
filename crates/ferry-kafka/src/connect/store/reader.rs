//! Reading an internal topic to its end: Kafka Connect's `KafkaBasedLog.readToEnd`. Blocking
//! (librdkafka's consumer API is synchronous): the stores call it from a blocking thread.
//!
//! "The end" is every partition's end offset fetched when the read starts. A partition is read when
//! the consumer's position reaches it; a partition whose last records were removed by compaction
//! reports its end without moving the position, so its end-of-partition event counts too — checked
//! first, because it may be stale ([`crate::end_events`], as in the offset store's reader).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::ConnectStoreError;
use crate::client::{StoreConsumer, is_retriable};
use crate::end_events::{EOF_GRACE, EndEvents, first_behind};

/// A consumer assigned every partition of the topic from its beginning, and how far it has read.
pub(crate) struct TopicReader {
    consumer: StoreConsumer,
    /// Answers ListOffsets on its own connections (on the consumer's, it would wait behind a fetch).
    offsets_client: Arc<StoreConsumer>,
    topic: String,
    store: String,
    timeout: Duration,
    /// Per partition: every offset below has been read.
    next: Vec<i64>,
}

impl TopicReader {
    /// Assigns every partition of `topic` from its beginning. Reads nothing.
    pub(crate) fn new(
        consumer: StoreConsumer,
        offsets_client: Arc<StoreConsumer>,
        topic: &str,
        partitions: i32,
        store: &str,
        timeout: Duration,
    ) -> Result<Self, ConnectStoreError> {
        let mut assignment = TopicPartitionList::with_capacity(partitions.max(0) as usize);
        for partition in 0..partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .map_err(|e| kafka(store, "assigning the topic's partitions", &e))?;
        }
        consumer
            .assign(&assignment)
            .map_err(|e| kafka(store, "assigning the topic's partitions", &e))?;
        let mut reader = Self {
            consumer,
            offsets_client,
            topic: topic.to_owned(),
            store: store.to_owned(),
            timeout,
            next: vec![0; usize::try_from(partitions).unwrap_or(0)],
        };
        reader.next =
            reader.list_offsets(Offset::Beginning, "fetching the topic's start offsets")?;
        Ok(reader)
    }

    fn list_offsets(&self, which: Offset, what: &str) -> Result<Vec<i64>, ConnectStoreError> {
        // A topic just created has no leader for a moment (NotLeaderForPartition), and a broker may
        // be electing one: retriable errors are retried until the store's timeout, as Kafka Connect's
        // TopicAdmin.retryEndOffsets does, rather than failing the open.
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(50);
        loop {
            match self.list_offsets_once(which, what) {
                Err(e) if e.retriable && Instant::now() + backoff < deadline => {
                    tracing::debug!(store = %self.store, error = %e, "{what}: retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    fn list_offsets_once(&self, which: Offset, what: &str) -> Result<Vec<i64>, ConnectStoreError> {
        let mut request = TopicPartitionList::with_capacity(self.next.len());
        for partition in 0..self.next.len() as i32 {
            request
                .add_partition_offset(&self.topic, partition, which)
                .map_err(|e| kafka(&self.store, what, &e))?;
        }
        let answer = self
            .offsets_client
            .offsets_for_times(request, self.timeout)
            .map_err(|e| kafka(&self.store, what, &e))?;
        let mut offsets = vec![0; self.next.len()];
        for element in answer.elements() {
            element.error().map_err(|e| kafka(&self.store, what, &e))?;
            let slot = usize::try_from(element.partition())
                .ok()
                .and_then(|p| offsets.get_mut(p));
            match (slot, element.offset()) {
                (Some(slot), Offset::Offset(offset)) => *slot = offset,
                (_, other) => {
                    return Err(ConnectStoreError::new(
                        &self.store,
                        format!(
                            "{what}: the broker answered {other:?} for partition {}",
                            element.partition()
                        ),
                        true,
                    ));
                }
            }
        }
        Ok(offsets)
    }

    /// Reads every partition up to its end offset as of now, handing each record (key, value; a
    /// `None` value is a tombstone, then its offset) to `apply` in partition order. Records without a key are skipped.
    /// Returns the number of records read.
    pub(crate) fn read_to_end(
        &mut self,
        mut apply: impl FnMut(&str, Option<&[u8]>, i64),
    ) -> Result<u64, ConnectStoreError> {
        let ends = self.list_offsets(Offset::End, "fetching the topic's end offsets")?;
        let mut events = EndEvents::new(ends.len(), EOF_GRACE);
        let mut records = 0u64;
        let mut last_progress = Instant::now();
        let mut last_error: Option<KafkaError> = None;
        while let Some(lagging) = self.first_behind(&ends, &mut events)? {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let partition = usize::try_from(message.partition()).unwrap_or(usize::MAX);
                    if let Some(next) = self.next.get_mut(partition) {
                        *next = (*next).max(message.offset() + 1);
                        events.record(partition);
                    }
                    match message.key().map(std::str::from_utf8) {
                        Some(Ok(key)) => apply(key, message.payload(), message.offset()),
                        _ => tracing::warn!(
                            topic = %self.topic,
                            offset = message.offset(),
                            "skipping a record without a UTF-8 key (Kafka Connect would skip it too)"
                        ),
                    }
                    records += 1;
                    last_progress = Instant::now();
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
            if last_progress.elapsed() > self.timeout {
                let p = lagging as usize;
                let cause = last_error.map_or_else(
                    || "no client error reported".to_owned(),
                    |e| format!("last client error: {e}"),
                );
                return Err(ConnectStoreError::new(
                    &self.store,
                    format!(
                        "reading the topic to its end made no progress for {:?}: partition {lagging} is at \
                         offset {} of {} ({cause}). Check that the brokers are reachable and that this worker \
                         may read the topic",
                        self.timeout, self.next[p], ends[p]
                    ),
                    true,
                ));
            }
        }
        Ok(records)
    }

    /// The first partition not yet read up to `ends` ([`crate::end_events::first_behind`]): a
    /// partition whose end-of-partition event stood unfollowed for [`EOF_GRACE`] is sought back to
    /// its position, so that only a fresh event counts.
    fn first_behind(
        &mut self,
        ends: &[i64],
        events: &mut EndEvents,
    ) -> Result<Option<i32>, ConnectStoreError> {
        let (consumer, topic, store, timeout) =
            (&self.consumer, &self.topic, &self.store, self.timeout);
        first_behind(&mut self.next, ends, events, |partition, next| {
            consumer
                .seek(topic, partition, Offset::Offset(next), timeout)
                .map_err(|e| {
                    kafka(
                        store,
                        &format!("seeking partition {partition} of the topic to offset {next}"),
                        &e,
                    )
                })
        })
    }

    /// Moves `next` up to the consumer's positions (which pass transaction markers).
    fn sync_positions(&mut self) -> Result<bool, ConnectStoreError> {
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
}

/// A failed client call: what failed and whether a retry may succeed.
pub(crate) fn kafka(store: &str, what: &str, error: &KafkaError) -> ConnectStoreError {
    let retriable = is_retriable(error);
    let hint = if retriable {
        "this is usually temporary (brokers unreachable or electing a leader); check that the brokers in \
         bootstrap.servers are running and reachable"
    } else {
        "this will not resolve by retrying; check the topic, the client settings and the broker's ACLs"
    };
    ConnectStoreError::new(store, format!("{what} failed: {error}; {hint}"), retriable)
}
