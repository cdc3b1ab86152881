//! The background writer shared by the file and stdout sinks.
//!
//! `send` formats the record's line on the caller's task and appends it to a bounded queue
//! (backpressure: `send` waits while the queue holds [`QUEUE_CAPACITY`] entries). One dedicated OS
//! thread takes everything queued — up to [`MAX_BATCH_RECORDS`] records or [`MAX_BATCH_BYTES`] bytes
//! — and writes it with one [`Target::write_batch`]. Blocking I/O therefore never runs on the tokio
//! runtime.
//!
//! Group commit: a target that must be synced (the file sink) hands out a [`Syncer`], and a second
//! thread makes the written batches durable while the writer thread writes the next ones. Each sync
//! covers every batch written before it started, so one `fdatasync` answers as many batches as were
//! written during the previous one; records are answered only after the sync that covers them, in
//! queue order. A target without a syncer (stdout) is answered once written and flushed.
//!
//! The queue keeps the lines in one byte buffer, not one allocation per line: the writer thread takes
//! the buffer whole, so it never frees memory the senders allocated (with the system allocator, frees
//! across threads contend for the senders' arena lock, which cost more than the formatting).
//!
//! After a failed write or sync the writer is poisoned: what reached the target is unknown, so that
//! batch and every later record fail with a non-retriable error that repeats the first failure. The
//! target is closed before the poison is visible (the file sink's file closed and unlocked), so the
//! sink can open a new writer.
//!
//! Linger: woken for a few records, the writer thread waits up to [`LINGER`] for
//! [`LINGER_RECORDS`] of them before it writes (a flush marker or a close ends the wait at once). A
//! task sends one record at a time, and a writer faster than it woke (a futex call on the sending
//! thread) and wrote once per record; Kafka's producer waits `linger.ms` for the same reason.
//!
//! `flush` queues a marker behind everything sent so far and waits until the batches before it are
//! answered. When the [`Writer`] is dropped the threads drain the queue (writing, syncing and
//! answering what is left) and exit.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, mpsc};
use std::thread;
use std::time::Duration;

use ferry_api::{RecordMetadata, SourceRecord};
use tokio::sync::{Notify, oneshot};

use super::line::{LineFormat, append_record_line};
use super::{
    BatchDelivery, BatchSent, Delivery, PendingBatch, PendingDelivery, SinkError, SinkErrorKind,
};

/// Most records written (and synced) as one batch.
pub(crate) const MAX_BATCH_RECORDS: usize = 4096;
/// A batch stops growing once it holds this many bytes.
pub(crate) const MAX_BATCH_BYTES: usize = 4 << 20;
/// Records (and flush markers) that may wait in the queue before `send` waits.
const QUEUE_CAPACITY: usize = 2 * MAX_BATCH_RECORDS;
/// The writer thread, woken for fewer queued records than this, waits for more (see [`LINGER`]).
const LINGER_RECORDS: usize = 512;
/// Longest the writer thread waits for [`LINGER_RECORDS`] records before writing what it has: the
/// latency a lone record gains.
pub(crate) const LINGER: Duration = Duration::from_millis(1);
/// Written batches that may wait for a sync before the writer thread waits: bounds how far writing
/// runs ahead of durability.
const SYNC_QUEUE: usize = 16;

/// Where the writer thread puts bytes.
pub(crate) trait Target: Send + 'static {
    /// Writes one batch of whole lines. With a [`Target::syncer`] the bytes need not be durable yet;
    /// without one this is as durable as the target gets.
    fn write_batch(&mut self, batch: &[u8]) -> Result<(), TargetError>;

    /// A second handle that makes every byte written so far durable, used by the sync thread while
    /// the next batch is written; `None` when the target has nothing to sync.
    ///
    /// # Errors
    /// The handle cannot be made (the sink does not start).
    fn syncer(&self) -> io::Result<Option<Box<dyn Syncer>>> {
        Ok(None)
    }
}

/// Makes what a [`Target`] wrote durable (the file sink: `fdatasync`).
pub(crate) trait Syncer: Send + 'static {
    /// Makes every byte written before this call durable.
    fn sync(&mut self) -> Result<(), TargetError>;
}

/// A failed [`Target::write_batch`].
#[derive(Debug)]
pub(crate) struct TargetError {
    /// What failed (`write`, `fdatasync`, `flush`).
    pub(crate) op: &'static str,
    /// The OS error.
    pub(crate) source: io::Error,
}

/// One queued entry; a record's line is the next `len` bytes of [`Queue::bytes`].
enum Entry {
    Record {
        len: usize,
        topic: String,
        reply: oneshot::Sender<Delivery>,
    },
    /// Records queued together ([`Writer::try_send_batch`]): one reply for all of them.
    Batch {
        records: usize,
        len: usize,
        reply: oneshot::Sender<BatchDelivery>,
    },
    Flush(oneshot::Sender<()>),
}

impl Entry {
    /// How many records the entry holds.
    fn records(&self) -> usize {
        match self {
            Self::Record { .. } => 1,
            Self::Batch { records, .. } => *records,
            Self::Flush(_) => 0,
        }
    }
}

/// What the senders and the writer thread share, under [`Shared::queue`].
#[derive(Default)]
struct Queue {
    /// The lines of the queued records, in queue order.
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
    /// Records and flush markers among `entries` (a batch entry counts its records): what
    /// [`QUEUE_CAPACITY`] bounds.
    queued: usize,
    /// The [`Writer`] was dropped: drain and exit.
    closed: bool,
    /// The thread has exited (or died): nothing more will be written.
    gone: bool,
    /// What the writer thread is doing: whether a sender must wake it.
    writer: WriterState,
    /// Flush markers among `entries`.
    flush_markers: usize,
}

/// What the writer thread is doing, for a sender deciding whether to wake it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum WriterState {
    /// Writing, or about to look at the queue: it takes what is queued without a wake-up.
    #[default]
    Busy,
    /// Waiting for the first entry.
    Idle,
    /// Waiting up to its linger for [`LINGER_RECORDS`] entries or a flush marker.
    Lingering,
}

struct Shared {
    /// `describe()` of the sink, the `sink` of every error.
    sink: String,
    /// The first failure; once set, nothing more is written.
    poison: OnceLock<String>,
    queue: Mutex<Queue>,
    /// The target, written by the writer thread; taken (closed) after a failure by whichever thread
    /// saw it.
    target: Mutex<Option<Box<dyn Target>>>,
    /// Wakes the writer thread: entries were queued, or the writer was closed.
    work: Condvar,
    /// Wakes senders waiting for room, or for the thread's end.
    room: Notify,
    /// See [`LINGER`].
    linger: Duration,
    /// Batches handed to the sync thread (tests wait for it).
    #[cfg(test)]
    handed: std::sync::atomic::AtomicUsize,
}

impl Shared {
    fn error(&self, kind: SinkErrorKind, message: impl Into<String>) -> SinkError {
        SinkError::new(self.sink.as_str(), kind, message)
    }

    fn poisoned(&self) -> Option<SinkError> {
        self.poison.get().map(|first| {
            self.error(
                SinkErrorKind::Fatal,
                format!("the sink stopped accepting records after an earlier failure: {first}"),
            )
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Every critical section leaves the queue consistent (pushes and whole takes).
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn handed_over(&self) -> usize {
        self.handed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn target(&self) -> MutexGuard<'_, Option<Box<dyn Target>>> {
        // A write either completed or failed and emptied the slot: the slot is always consistent.
        self.target.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stopped(&self) -> SinkError {
        self.poisoned().unwrap_or_else(|| {
            self.error(
                SinkErrorKind::Closed,
                "the writer thread has stopped; no more records can be written",
            )
        })
    }

    /// Wakes the writer thread for what was just queued, unless it is busy or lingers for more.
    fn wake_writer(&self, queue: &mut Queue, flush: bool) {
        let wake = match queue.writer {
            WriterState::Busy => false,
            WriterState::Idle => true,
            WriterState::Lingering => queue.queued >= LINGER_RECORDS || flush,
        };
        if wake {
            queue.writer = WriterState::Busy;
            self.work.notify_one();
        }
    }

    /// Queues an entry once there is room; `line` appends its line to the queue's bytes and the
    /// entry is told how long it was. Cancel-safe: nothing is queued until it returns.
    async fn enqueue(
        &self,
        line: impl FnOnce(&mut Vec<u8>),
        entry: impl FnOnce(usize) -> Entry,
    ) -> Result<(), SinkError> {
        let mut parts = Some((line, entry));
        loop {
            // Gets every `notify_waiters` from its creation on, polled or not: registering it per
            // record (`enable`) showed in the profile, and it is awaited only on a full queue.
            let room = self.room.notified();
            {
                let mut queue = self.queue();
                if queue.gone {
                    return Err(self.stopped());
                }
                if queue.queued < QUEUE_CAPACITY
                    && let Some((line, entry)) = parts.take()
                {
                    // Formatted straight into the queue: no buffer per record, no copy.
                    let start = queue.bytes.len();
                    line(&mut queue.bytes);
                    let len = queue.bytes.len() - start;
                    let entry = entry(len);
                    let flush = matches!(entry, Entry::Flush(_));
                    queue.flush_markers += usize::from(flush);
                    queue.queued += entry.records().max(1);
                    queue.entries.push_back(entry);
                    self.wake_writer(&mut queue, flush);
                    return Ok(());
                }
            }
            room.await;
        }
    }
}

/// The sending side of a background writer. Dropping it lets the thread drain and exit.
pub(crate) struct Writer {
    shared: Arc<Shared>,
    /// What each record is written as.
    format: LineFormat,
    /// Closed (dropped) by the thread when it exits.
    exited: Option<oneshot::Receiver<()>>,
}

impl Writer {
    /// Starts the writer thread. `position` is the byte position of the first line written, for
    /// targets whose records have a position (the file sink); `None` leaves offsets unset.
    pub(crate) fn spawn(
        sink: String,
        thread_name: &str,
        target: impl Target,
        position: Option<u64>,
    ) -> Result<Self, SinkError> {
        Self::spawn_lingering(sink, thread_name, target, position, LINGER)
    }

    /// [`Writer::spawn`] with another linger (tests).
    pub(crate) fn spawn_lingering(
        sink: String,
        thread_name: &str,
        target: impl Target,
        position: Option<u64>,
        linger: Duration,
    ) -> Result<Self, SinkError> {
        let syncer = target.syncer().map_err(|e| {
            SinkError::new(
                sink.as_str(),
                SinkErrorKind::Fatal,
                format!("cannot open a second handle to sync the output: {e}"),
            )
        })?;
        let shared = Arc::new(Shared {
            sink,
            poison: OnceLock::new(),
            queue: Mutex::default(),
            target: Mutex::new(Some(Box::new(target))),
            work: Condvar::new(),
            room: Notify::new(),
            linger,
            #[cfg(test)]
            handed: std::sync::atomic::AtomicUsize::new(0),
        });
        let (exit_tx, exited) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                // Marks the queue gone however the thread ends, so no sender waits for it forever.
                let gone = Gone(&thread_shared);
                run(&thread_shared, position, syncer);
                // The target is closed before `close` returns (the file unlocked for a reopen).
                drop(gone);
                drop(exit_tx);
            })
            .map_err(|e| {
                shared.error(
                    SinkErrorKind::Fatal,
                    format!("cannot start the writer thread: {e}"),
                )
            })?;
        Ok(Self {
            shared,
            format: LineFormat::Json,
            exited: Some(exited),
        })
    }

    /// The same writer, writing each record as `format`.
    pub(crate) fn with_format(mut self, format: LineFormat) -> Self {
        self.format = format;
        self
    }

    /// Whether a failed write poisoned the writer (its target is then closed).
    pub(crate) fn is_poisoned(&self) -> bool {
        self.shared.poison.get().is_some()
    }

    /// Queues `record`; see [`super::RecordSink::send`].
    pub(crate) async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        if let Some(e) = self.shared.poisoned() {
            return Err(e);
        }
        let (reply, delivered) = oneshot::channel();
        let format = self.format;
        self.shared
            .enqueue(
                |bytes| append_record_line(bytes, record, format),
                |len| Entry::Record {
                    len,
                    topic: record.topic.clone(),
                    reply,
                },
            )
            .await?;
        let shared = Arc::clone(&self.shared);
        Ok(PendingDelivery::new(async move {
            delivered.await.unwrap_or_else(|_| {
                Err(shared.error(
                    SinkErrorKind::Closed,
                    "the writer thread stopped before writing the record",
                ))
            })
        }))
    }

    /// Queues as many of `records` as there is room for now, as one entry; see
    /// [`super::RecordSink::try_send_batch`].
    pub(crate) fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        if records.is_empty() || self.shared.poison.get().is_some() {
            return BatchSent::none();
        }
        let (reply, delivered) = oneshot::channel();
        let accepted = {
            let mut queue = self.shared.queue();
            let room = QUEUE_CAPACITY.saturating_sub(queue.queued);
            if queue.gone || room == 0 {
                return BatchSent::none();
            }
            let accepted = records.len().min(room);
            let start = queue.bytes.len();
            for record in &records[..accepted] {
                append_record_line(&mut queue.bytes, record, self.format);
            }
            let len = queue.bytes.len() - start;
            queue.queued += accepted;
            queue.entries.push_back(Entry::Batch {
                records: accepted,
                len,
                reply,
            });
            self.shared.wake_writer(&mut queue, false);
            accepted
        };
        let shared = Arc::clone(&self.shared);
        BatchSent::accepted(
            accepted,
            PendingBatch::new(async move {
                delivered.await.unwrap_or_else(|_| {
                    BatchDelivery::all_failed(
                        accepted,
                        &shared.error(
                            SinkErrorKind::Closed,
                            "the writer thread stopped before writing the records",
                        ),
                    )
                })
            }),
        )
    }

    /// Waits up to `timeout` until every record queued before this call is resolved.
    ///
    /// # Errors
    /// The timeout passed (retriable), or the writer is poisoned or stopped (not retriable).
    pub(crate) async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        let (reply, reached) = oneshot::channel();
        let wait = async {
            self.shared.enqueue(|_| {}, |_| Entry::Flush(reply)).await?;
            reached.await.map_err(|_| self.shared.stopped())
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(())) => self.shared.poisoned().map_or(Ok(()), Err),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(self.shared.error(
                SinkErrorKind::Retriable,
                format!(
                    "flush did not complete within {timeout:?}: records are still being written"
                ),
            )),
        }
    }

    /// Stops accepting records, waits until the thread has written everything queued and exited.
    ///
    /// # Errors
    /// The writer was poisoned: some records were not written.
    pub(crate) async fn close(mut self) -> Result<(), SinkError> {
        let exited = self.exited.take();
        let shared = Arc::clone(&self.shared);
        drop(self);
        if let Some(exited) = exited {
            // The thread drops its end when it exits; the error is that drop, not a failure.
            let _ = exited.await;
        }
        shared.poisoned().map_or(Ok(()), Err)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.shared.queue().closed = true;
        self.shared.work.notify_one();
    }
}

/// Set when the writer thread ends, normally or by a panic: queued records are failed (their replies
/// dropped) and waiting senders are told.
struct Gone<'a>(&'a Shared);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        // The file is closed (and unlocked) by the time the thread's end is seen.
        close_target(self.0);
        let entries = {
            let mut queue = self.0.queue();
            queue.gone = true;
            queue.bytes.clear();
            queue.queued = 0;
            queue.flush_markers = 0;
            std::mem::take(&mut queue.entries)
        };
        drop(entries);
        self.0.room.notify_waiters();
    }
}

/// One record of the batch being written, or records queued together: where to reply, and what
/// to reply with.
enum Pending {
    Record {
        topic: String,
        /// Byte position of the line's start within the batch.
        start: u64,
        reply: oneshot::Sender<Delivery>,
    },
    Batch {
        records: usize,
        reply: oneshot::Sender<BatchDelivery>,
    },
}

/// Takes the next batch from the queue into `batch`, `pending` and `flushes`, waiting for one.
/// Returns `false` once the writer is closed and the queue empty.
fn take_batch(
    shared: &Shared,
    batch: &mut Vec<u8>,
    pending: &mut Vec<Pending>,
    flushes: &mut Vec<oneshot::Sender<()>>,
    taken: &mut VecDeque<Entry>,
) -> bool {
    let mut queue = shared.queue();
    let mut lingered = false;
    loop {
        if queue.entries.is_empty() {
            if queue.closed {
                return false;
            }
            queue.writer = WriterState::Idle;
            queue = shared.work.wait(queue).unwrap_or_else(|p| p.into_inner());
            continue;
        }
        let urgent = queue.closed || queue.queued >= LINGER_RECORDS || queue.flush_markers > 0;
        if urgent || lingered {
            break;
        }
        // A few records: wait a moment for more (see [`LINGER`]).
        lingered = true;
        queue.writer = WriterState::Lingering;
        queue = shared
            .work
            .wait_timeout(queue, shared.linger)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    queue.writer = WriterState::Busy;
    if queue.flush_markers == 0
        && queue.queued <= MAX_BATCH_RECORDS
        && queue.bytes.len() <= MAX_BATCH_BYTES
    {
        // Everything queued is one batch (the usual case): taken whole by swapping, so the lock the
        // senders wait for is held for no work per record (they contended for it in the profile).
        std::mem::swap(taken, &mut queue.entries);
        std::mem::swap(batch, &mut queue.bytes);
        queue.queued = 0;
        drop(queue);
        shared.room.notify_waiters();
        let mut start = 0;
        for entry in taken.drain(..) {
            if let Some(len) = take_entry(entry, start, pending, flushes) {
                start += len as u64;
            }
        }
        return true;
    }
    let (mut taken_bytes, mut taken_records) = (0, 0);
    while let Some(entry) = queue.entries.pop_front() {
        queue.queued -= entry.records().max(1);
        taken_records += entry.records();
        match take_entry(entry, taken_bytes as u64, pending, flushes) {
            Some(len) => taken_bytes += len,
            None => {
                // Everything queued before the marker is in the batch: write it, then answer.
                queue.flush_markers -= 1;
                break;
            }
        }
        if taken_records >= MAX_BATCH_RECORDS || taken_bytes >= MAX_BATCH_BYTES {
            break;
        }
    }
    if taken_bytes == queue.bytes.len() {
        // Everything: swap buffers, so neither side allocates or copies.
        std::mem::swap(batch, &mut queue.bytes);
    } else {
        batch.extend_from_slice(&queue.bytes[..taken_bytes]);
        queue.bytes.drain(..taken_bytes);
    }
    drop(queue);
    shared.room.notify_waiters();
    true
}

/// Moves a taken entry's reply to `pending` (records, whose lines start at `start` in the batch) or
/// `flushes`; returns the length of its lines, `None` for a flush marker.
fn take_entry(
    entry: Entry,
    start: u64,
    pending: &mut Vec<Pending>,
    flushes: &mut Vec<oneshot::Sender<()>>,
) -> Option<usize> {
    match entry {
        Entry::Record { len, topic, reply } => {
            pending.push(Pending::Record {
                topic,
                start,
                reply,
            });
            Some(len)
        }
        Entry::Batch {
            records,
            len,
            reply,
        } => {
            pending.push(Pending::Batch { records, reply });
            Some(len)
        }
        Entry::Flush(reply) => {
            flushes.push(reply);
            None
        }
    }
}

/// A batch the writer thread wrote (or failed to write), waiting to be made durable and answered.
struct Written {
    /// Each record's reply and its metadata.
    records: Vec<(oneshot::Sender<Delivery>, RecordMetadata)>,
    /// Each batch entry's reply and its number of records.
    batches: Vec<(oneshot::Sender<BatchDelivery>, usize)>,
    /// Flush markers queued behind the batch.
    flushes: Vec<oneshot::Sender<()>>,
    /// Why the batch was not written: the text the sink is poisoned with.
    failed: Option<String>,
}

impl Written {
    /// Answers every record and flush marker of the batch.
    fn resolve(self, outcome: &Result<(), SinkError>) {
        for (reply, metadata) in self.records {
            // The receiver may have been dropped: nobody waits for this delivery any more.
            let _ = reply.send(outcome.clone().map(|()| metadata));
        }
        for (reply, records) in self.batches {
            let _ = reply.send(match outcome {
                Ok(()) => BatchDelivery::delivered(),
                Err(e) => BatchDelivery::all_failed(records, e),
            });
        }
        for reply in self.flushes {
            let _ = reply.send(());
        }
    }
}

/// The writer thread: batch, write, hand over to be synced; until the [`Writer`] is dropped and the
/// queue is empty. With a [`Syncer`] the next batch is written while the sync thread makes the
/// previous ones durable (group commit); without one each batch is answered once written.
fn run(shared: &Arc<Shared>, mut position: Option<u64>, syncer: Option<Box<dyn Syncer>>) {
    let mut sync_stage = None;
    if let Some(syncer) = syncer {
        let (to_sync, written) = mpsc::sync_channel(SYNC_QUEUE);
        let thread_shared = Arc::clone(shared);
        match thread::Builder::new()
            .name("ferry-sink-sync".to_owned())
            .spawn(move || sync_loop(syncer, &written, &thread_shared))
        {
            Ok(handle) => sync_stage = Some((to_sync, handle)),
            Err(e) => {
                close_target(shared);
                shared
                    .poison
                    .get_or_init(|| format!("cannot start the sink's sync thread: {e}"));
                return;
            }
        }
    }
    let mut batch: Vec<u8> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    let mut taken = VecDeque::new();
    while take_batch(shared, &mut batch, &mut pending, &mut flushes, &mut taken) {
        let failed = write(shared, &batch).err().map(|e| e.to_string());
        let mut records = Vec::with_capacity(pending.len());
        let mut batches = Vec::new();
        for taken in pending.drain(..) {
            match taken {
                Pending::Record {
                    topic,
                    start,
                    reply,
                } => {
                    let metadata = RecordMetadata {
                        topic,
                        partition: None,
                        offset: position.and_then(|base| i64::try_from(base + start).ok()),
                    };
                    records.push((reply, metadata));
                }
                Pending::Batch { records: n, reply } => batches.push((reply, n)),
            }
        }
        if failed.is_none() {
            position = position.map(|p| p + batch.len() as u64);
        }
        batch.clear();
        let written = Written {
            records,
            batches,
            flushes: std::mem::take(&mut flushes),
            failed,
        };
        match &sync_stage {
            // A failed send gives the batch back: the sync thread died, nothing can be made durable.
            Some((to_sync, _)) => {
                if let Err(mpsc::SendError(written)) = to_sync.send(written) {
                    written.resolve(&Err(shared.stopped()));
                }
                #[cfg(test)]
                shared
                    .handed
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            None => {
                let outcome = match written.failed.as_ref() {
                    None => Ok(()),
                    Some(first) => Err(poison(shared, first)),
                };
                written.resolve(&outcome);
            }
        }
    }
    if let Some((to_sync, handle)) = sync_stage {
        // The sync thread answers what it holds, then sees the channel closed and exits.
        drop(to_sync);
        let _ = handle.join();
    }
}

/// The sync thread: one [`Syncer::sync`] for every batch written since the last one, then their
/// answers, in order. A failed write or sync closes the target before the poison becomes visible, so
/// whoever sees the poison and reopens the file finds it closed (and its lock released).
fn sync_loop(syncer: Box<dyn Syncer>, written: &mpsc::Receiver<Written>, shared: &Shared) {
    let mut syncer = Some(syncer);
    let mut group = Vec::new();
    while let Ok(first) = written.recv() {
        group.push(first);
        group.extend(written.try_iter());
        let outcome = match group.iter().find_map(|w| w.failed.clone()) {
            Some(first) => Err(first),
            None => match syncer.as_mut() {
                Some(syncer) => syncer.sync().map_err(|e| failure_text(&e)),
                None => Err(shared.poison.get().cloned().unwrap_or_else(|| {
                    "the sink's file was closed after an earlier failure".to_owned()
                })),
            },
        };
        let outcome = outcome.map_err(|first| {
            // Both handles on the file go before the poison is set.
            syncer = None;
            close_target(shared);
            poison(shared, &first)
        });
        for batch in group.drain(..) {
            batch.resolve(&outcome);
        }
    }
}

/// Drops the target (closing the sink's file); the writer thread writes nothing after it.
fn close_target(shared: &Shared) {
    let target = shared.target().take();
    drop(target);
}

/// Sets the poison (the first failure wins) and returns the error every later record gets.
fn poison(shared: &Shared, first: &str) -> SinkError {
    let text = shared.poison.get_or_init(|| first.to_owned()).clone();
    shared.error(SinkErrorKind::Fatal, text)
}

fn failure_text(TargetError { op, source }: &TargetError) -> String {
    format!(
        "{op} failed: {source}; which of the last records reached it is unknown, so this sink \
         accepts no more records until it is reopened (restart the task; none of the failed \
         records was acknowledged)"
    )
}

/// Why a batch was not written. Its text is what the caller poisons the sink with, once no handle
/// on the target is left.
#[derive(Debug, thiserror::Error)]
enum WriteFailure {
    /// The sink is poisoned already: the text of its first failure, which every later batch
    /// reports as it is.
    #[error("{0}")]
    Poisoned(String),
    /// An earlier failure closed the target.
    #[error("the sink's file was closed after an earlier failure")]
    Closed,
    /// This write failed.
    #[error("{}", failure_text(.0))]
    Target(TargetError),
}

/// Writes one batch. A failed write closes the target here.
fn write(shared: &Shared, batch: &[u8]) -> Result<(), WriteFailure> {
    if batch.is_empty() {
        return Ok(());
    }
    if let Some(first) = shared.poison.get() {
        return Err(WriteFailure::Poisoned(first.clone()));
    }
    let mut target = shared.target();
    let Some(writing) = target.as_mut() else {
        return Err(WriteFailure::Closed);
    };
    writing.write_batch(batch).map_err(|e| {
        // Nothing more is written to it.
        *target = None;
        WriteFailure::Target(e)
    })
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
