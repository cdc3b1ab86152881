//! The background writer shared by the file and stdout sinks.
//!
//! `send` formats the record's JSON line on the caller's task and queues it on a bounded channel
//! (backpressure: `send` waits while the queue is full). One dedicated OS thread takes everything
//! queued — up to [`MAX_BATCH_RECORDS`] records or [`MAX_BATCH_BYTES`] bytes — writes it with one
//! [`Target::write_batch`] (file: `write_all` + `fdatasync`; stdout: `write_all` + `flush`) and only
//! then resolves each record's delivery, in queue order. Blocking I/O therefore never runs on the tokio
//! runtime.
//!
//! After a failed batch the writer is poisoned: what reached the target is unknown, so that batch and
//! every later record fail with a non-retriable error that repeats the first failure.
//!
//! `flush` queues a marker behind everything sent so far and waits for the thread to reach it. When
//! the last [`Writer`] handle is dropped the thread drains the queue (writing and resolving what is
//! left) and exits.

use std::io;
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

use ferry_api::{RecordMetadata, SourceRecord};
use tokio::sync::{mpsc, oneshot};

use super::line::record_json_line;
use super::{Delivery, PendingDelivery, SinkError};

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

enum Message {
    Record {
        line: Vec<u8>,
        topic: String,
        reply: oneshot::Sender<Delivery>,
    },
    Flush(oneshot::Sender<()>),
}

struct Shared {
    /// `describe()` of the sink, the `sink` of every error.
    sink: String,
    /// The first failure; once set, nothing more is written.
    poison: OnceLock<String>,
}

impl Shared {
    fn error(&self, message: impl Into<String>) -> SinkError {
        SinkError {
            sink: self.sink.clone(),
            message: message.into(),
            retriable: false,
        }
    }

    fn poisoned(&self) -> Option<SinkError> {
        self.poison.get().map(|first| {
            self.error(format!(
                "the sink stopped accepting records after an earlier failure: {first}"
            ))
        })
    }
}

/// The sending side of a background writer. Dropping it lets the thread drain and exit.
pub(crate) struct Writer {
    queue: mpsc::Sender<Message>,
    shared: Arc<Shared>,
    /// Closed (dropped) by the thread when it exits.
    exited: oneshot::Receiver<()>,
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
        });
        let (queue, rx) = mpsc::channel(QUEUE_CAPACITY);
        let (exit_tx, exited) = oneshot::channel();
        let thread_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name(thread_name.to_owned())
            .spawn(move || {
                run(target, rx, &thread_shared, position);
                drop(exit_tx);
            })
            .map_err(|e| shared.error(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            queue,
            shared,
            exited,
        })
    }

    /// Queues `record`; see [`super::RecordSink::send`].
    pub(crate) async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        if let Some(e) = self.shared.poisoned() {
            return Err(e);
        }
        let line = record_json_line(record);
        let (reply, delivered) = oneshot::channel();
        let message = Message::Record {
            line,
            topic: record.topic.clone(),
            reply,
        };
        if self.queue.send(message).await.is_err() {
            return Err(self.stopped());
        }
        let shared = Arc::clone(&self.shared);
        Ok(PendingDelivery::new(async move {
            delivered.await.unwrap_or_else(|_| {
                Err(shared.error("the writer thread stopped before writing the record"))
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
            self.queue
                .send(Message::Flush(reply))
                .await
                .map_err(|_| self.stopped())?;
            reached.await.map_err(|_| self.stopped())
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(())) => self.shared.poisoned().map_or(Ok(()), Err),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SinkError {
                sink: self.shared.sink.clone(),
                message: format!(
                    "flush did not complete within {timeout:?}: records are still being written"
                ),
                retriable: true,
            }),
        }
    }

    /// Stops accepting records, waits until the thread has written everything queued and exited.
    ///
    /// # Errors
    /// The writer was poisoned: some records were not written.
    pub(crate) async fn close(self) -> Result<(), SinkError> {
        let Self {
            queue,
            shared,
            exited,
        } = self;
        drop(queue);
        // The thread drops its end when it exits; the error is that drop, not a failure.
        let _ = exited.await;
        shared.poisoned().map_or(Ok(()), Err)
    }

    fn stopped(&self) -> SinkError {
        self.shared.poisoned().unwrap_or_else(|| {
            self.shared
                .error("the writer thread has stopped; no more records can be written")
        })
    }
}

/// One record of the batch being written: where to reply, and what to reply with.
struct Pending {
    topic: String,
    /// Byte position of the line's start within the batch.
    start: u64,
    reply: oneshot::Sender<Delivery>,
}

/// The writer thread: batch, write, resolve; until every [`Writer`] is dropped and the queue is empty.
fn run(
    mut target: impl Target,
    mut rx: mpsc::Receiver<Message>,
    shared: &Shared,
    mut position: Option<u64>,
) {
    let mut batch: Vec<u8> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut flushes: Vec<oneshot::Sender<()>> = Vec::new();
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Record { line, topic, reply } => {
                    pending.push(Pending {
                        topic,
                        start: batch.len() as u64,
                        reply,
                    });
                    batch.extend_from_slice(&line);
                }
                Message::Flush(reply) => {
                    // Everything queued before the marker is in `batch`: write it, then answer.
                    flushes.push(reply);
                    break;
                }
            }
            if pending.len() < MAX_BATCH_RECORDS && batch.len() < MAX_BATCH_BYTES {
                next = rx.try_recv().ok();
            }
        }
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

fn write(target: &mut impl Target, batch: &[u8], shared: &Shared) -> Result<(), SinkError> {
    if batch.is_empty() {
        return Ok(());
    }
    if let Some(e) = shared.poisoned() {
        return Err(e);
    }
    match target.write_batch(batch) {
        Ok(()) => Ok(()),
        Err(TargetError { op, source }) => {
            let first = format!(
                "{op} failed: {source}; which of the last records reached it is unknown, so this sink \
                 accepts no more records (restart to reopen it; none of the failed records was acknowledged)"
            );
            // Returned to every waiting delivery; the caller decides how loudly to report it.
            Err(shared.error(shared.poison.get_or_init(|| first).clone()))
        }
    }
}
