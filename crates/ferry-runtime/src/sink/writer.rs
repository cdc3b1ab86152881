//! The background writer shared by the file and stdout sinks.
//!
//! `send` formats the record's JSON line on the caller's task and appends it to a bounded queue
//! (backpressure: `send` waits while the queue holds [`QUEUE_CAPACITY`] entries). One dedicated OS
//! thread takes everything queued — up to [`MAX_BATCH_RECORDS`] records or [`MAX_BATCH_BYTES`] bytes
//! — writes it with one [`Target::write_batch`] (file: `write_all` + `fdatasync`; stdout: `write_all` +
//! `flush`) and only then resolves each record's delivery, in queue order. Blocking I/O therefore never
//! runs on the tokio runtime.
//!
//! The queue keeps the lines in one byte buffer, not one allocation per line: the writer thread takes
//! the buffer whole, so it never frees memory the senders allocated (with the system allocator, frees
//! across threads contend for the senders' arena lock, which cost more than the formatting).
//!
//! After a failed batch the writer is poisoned: what reached the target is unknown, so that batch and
//! every later record fail with a non-retriable error that repeats the first failure. The target is
//! dropped at once (the file sink's file closed and unlocked), so the sink can open a new writer.
//!
//! `flush` queues a marker behind everything sent so far and waits for the thread to reach it. When
//! the [`Writer`] is dropped the thread drains the queue (writing and resolving what is left) and
//! exits.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::Duration;

use ferry_api::{RecordMetadata, SourceRecord};
use tokio::sync::{Notify, oneshot};

use super::line::{LineFormat, record_line};
use super::{Delivery, PendingDelivery, SinkError, SinkErrorKind};

/// Most records written (and synced) as one batch.
pub(crate) const MAX_BATCH_RECORDS: usize = 4096;
/// A batch stops growing once it holds this many bytes.
pub(crate) const MAX_BATCH_BYTES: usize = 4 << 20;
/// Records (and flush markers) that may wait in the queue before `send` waits.
const QUEUE_CAPACITY: usize = 2 * MAX_BATCH_RECORDS;

/// Where the writer thread puts bytes.
pub(crate) trait Target: Send + 'static {
    /// Writes one batch of whole lines and makes it as durable as the target promises.
    fn write_batch(&mut self, batch: &[u8]) -> Result<(), TargetError>;
}

/// A failed [`Target::write_batch`].
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
    Flush(oneshot::Sender<()>),
}

/// What the senders and the writer thread share, under [`Shared::queue`].
#[derive(Default)]
struct Queue {
    /// The lines of the queued records, in queue order.
    bytes: Vec<u8>,
    entries: VecDeque<Entry>,
    /// The [`Writer`] was dropped: drain and exit.
    closed: bool,
    /// The thread has exited (or died): nothing more will be written.
    gone: bool,
}

struct Shared {
    /// `describe()` of the sink, the `sink` of every error.
    sink: String,
    /// The first failure; once set, nothing more is written.
    poison: OnceLock<String>,
    queue: Mutex<Queue>,
    /// Wakes the writer thread: entries were queued, or the writer was closed.
    work: Condvar,
    /// Wakes senders waiting for room, or for the thread's end.
    room: Notify,
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

    fn stopped(&self) -> SinkError {
        self.poisoned().unwrap_or_else(|| {
            self.error(
                SinkErrorKind::Closed,
                "the writer thread has stopped; no more records can be written",
            )
        })
    }

    /// Queues an entry (and its line) once there is room. Cancel-safe: nothing is queued until it
    /// returns.
    async fn enqueue(&self, line: &[u8], entry: Entry) -> Result<(), SinkError> {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut queue = self.queue();
                if queue.gone {
                    return Err(self.stopped());
                }
                if queue.entries.len() < QUEUE_CAPACITY {
                    queue.bytes.extend_from_slice(line);
                    queue.entries.push_back(entry);
                    if queue.entries.len() == 1 {
                        self.work.notify_one();
                    }
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
        let shared = Arc::new(Shared {
            sink,
            poison: OnceLock::new(),
            queue: Mutex::default(),
            work: Condvar::new(),
            room: Notify::new(),
        });
        let (exit_tx, exited) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                // Marks the queue gone however the thread ends, so no sender waits for it forever.
                let _gone = Gone(&thread_shared);
                run(target, &thread_shared, position);
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
        let line = record_line(record, self.format);
        let (reply, delivered) = oneshot::channel();
        let entry = Entry::Record {
            len: line.len(),
            topic: record.topic.clone(),
            reply,
        };
        self.shared.enqueue(&line, entry).await?;
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

    /// Waits up to `timeout` until every record queued before this call is resolved.
    ///
    /// # Errors
    /// The timeout passed (retriable), or the writer is poisoned or stopped (not retriable).
    pub(crate) async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        let (reply, reached) = oneshot::channel();
        let wait = async {
            self.shared.enqueue(&[], Entry::Flush(reply)).await?;
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
        let entries = {
            let mut queue = self.0.queue();
            queue.gone = true;
            queue.bytes.clear();
            std::mem::take(&mut queue.entries)
        };
        drop(entries);
        self.0.room.notify_waiters();
    }
}

/// One record of the batch being written: where to reply, and what to reply with.
struct Pending {
    topic: String,
    /// Byte position of the line's start within the batch.
    start: u64,
    reply: oneshot::Sender<Delivery>,
}

/// Takes the next batch from the queue into `batch`, `pending` and `flushes`, waiting for one.
/// Returns `false` once the writer is closed and the queue empty.
fn take_batch(
    shared: &Shared,
    batch: &mut Vec<u8>,
    pending: &mut Vec<Pending>,
    flushes: &mut Vec<oneshot::Sender<()>>,
) -> bool {
    let mut queue = shared.queue();
    while queue.entries.is_empty() {
        if queue.closed {
            return false;
        }
        queue = shared.work.wait(queue).unwrap_or_else(|p| p.into_inner());
    }
    let mut taken_bytes = 0;
    while let Some(entry) = queue.entries.pop_front() {
        match entry {
            Entry::Record { len, topic, reply } => {
                pending.push(Pending {
                    topic,
                    start: taken_bytes as u64,
                    reply,
                });
                taken_bytes += len;
            }
            Entry::Flush(reply) => {
                // Everything queued before the marker is in the batch: write it, then answer.
                flushes.push(reply);
                break;
            }
        }
        if pending.len() >= MAX_BATCH_RECORDS || taken_bytes >= MAX_BATCH_BYTES {
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

/// The writer thread: batch, write, resolve; until the [`Writer`] is dropped and the queue is empty.
fn run(target: impl Target, shared: &Shared, mut position: Option<u64>) {
    let mut target = Some(target);
    let mut batch: Vec<u8> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    while take_batch(shared, &mut batch, &mut pending, &mut flushes) {
        let outcome = write(&mut target, &batch, shared);
        for record in pending.drain(..) {
            let delivery = match &outcome {
                Ok(()) => Ok(RecordMetadata {
                    topic: record.topic,
                    partition: None,
                    offset: position.and_then(|base| i64::try_from(base + record.start).ok()),
                }),
                Err(e) => Err(e.clone()),
            };
            // The receiver may have been dropped: nobody waits for this delivery any more.
            let _ = record.reply.send(delivery);
        }
        if outcome.is_ok() {
            position = position.map(|p| p + batch.len() as u64);
        }
        batch.clear();
        for reply in flushes.drain(..) {
            let _ = reply.send(());
        }
    }
}

fn write<T: Target>(
    target: &mut Option<T>,
    batch: &[u8],
    shared: &Shared,
) -> Result<(), SinkError> {
    if batch.is_empty() {
        return Ok(());
    }
    if let Some(e) = shared.poisoned() {
        return Err(e);
    }
    let Some(writing) = target.as_mut() else {
        return Err(shared.stopped());
    };
    match writing.write_batch(batch) {
        Ok(()) => Ok(()),
        Err(TargetError { op, source }) => {
            // Nothing more is written to it: close it before the poison is visible, so that whoever
            // sees the poison and reopens the sink finds the file closed (and its lock released).
            *target = None;
            let first = format!(
                "{op} failed: {source}; which of the last records reached it is unknown, so this sink \
                 accepts no more records until it is reopened (restart the task; none of the failed \
                 records was acknowledged)"
            );
            // Returned to every waiting delivery; the caller decides how loudly to report it.
            Err(shared.error(
                SinkErrorKind::Fatal,
                shared.poison.get_or_init(|| first).clone(),
            ))
        }
    }
}
