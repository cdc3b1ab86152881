//! `sink=stdout`: records printed as JSON lines, acknowledged once written and flushed.

use std::io::{self, Write};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::SourceRecord;

use super::line::LineFormat;
use super::writer::{Target, TargetError, Writer};
use super::{BatchSent, PendingDelivery, RecordSink, SinkError};

/// Writes records to standard output as JSON lines (see [`super::line`]), the same lines as
/// [`super::file::FileSink`].
///
/// A delivery resolves `Ok` once its batch was written to stdout (locked for the whole batch, so lines
/// of other writers never land inside it) and flushed; nothing is synced, and the metadata carries no
/// offset. If stdout is closed (the reader of a pipe exited) the sink fails like a file sink whose disk
/// failed: every later record is refused.
///
/// Thread-safe: `send` may be called from many tasks; output order is the order the sends were accepted.
pub struct StdoutSink {
    writer: Writer,
    name: String,
}

impl std::fmt::Debug for StdoutSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdoutSink")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StdoutSink {
    /// A sink writing to the process's standard output.
    ///
    /// # Errors
    /// The writer thread cannot be started.
    pub fn new() -> Result<StdoutSink, SinkError> {
        Self::new_with(LineFormat::Json)
    }

    /// [`new`](Self::new), writing each record as `format` (`sink.format`).
    ///
    /// # Errors
    /// The writer thread cannot be started.
    pub fn new_with(format: LineFormat) -> Result<StdoutSink, SinkError> {
        let name = "stdout".to_owned();
        let writer = Writer::spawn(name.clone(), "ferry-stdout-sink", Output::Stdout, None)?
            .with_format(format);
        Ok(StdoutSink { writer, name })
    }

    /// A sink writing the same lines to any writer (flushed after every batch), e.g. a buffer in tests
    /// or a pipe when embedding Ferry. `name` appears in errors and [`RecordSink::describe`].
    ///
    /// # Errors
    /// The writer thread cannot be started.
    pub fn with_writer(
        name: impl Into<String>,
        out: impl Write + Send + 'static,
    ) -> Result<StdoutSink, SinkError> {
        let name = name.into();
        let writer = Writer::spawn(
            name.clone(),
            "ferry-stdout-sink",
            Output::Writer(Box::new(out)),
            None,
        )?;
        Ok(StdoutSink { writer, name })
    }

    /// Stops accepting records, waits until everything sent is written and the writer thread exited.
    ///
    /// # Errors
    /// An earlier write failed: some records were not acknowledged.
    pub async fn close(self) -> Result<(), SinkError> {
        self.writer.close().await
    }
}

#[async_trait]
impl RecordSink for StdoutSink {
    fn describe(&self) -> String {
        self.name.clone()
    }

    async fn send(&self, record: &SourceRecord) -> Result<PendingDelivery, SinkError> {
        self.writer.send(record).await
    }

    fn try_send_batch(&self, records: &[SourceRecord]) -> BatchSent {
        self.writer.try_send_batch(records)
    }

    async fn flush(&self, timeout: Duration) -> Result<(), SinkError> {
        self.writer.flush(timeout).await
    }
}

enum Output {
    Stdout,
    Writer(Box<dyn Write + Send>),
}

impl Target for Output {
    fn write_batch(&mut self, batch: &[u8]) -> Result<(), TargetError> {
        match self {
            Output::Stdout => write_flush(&mut io::stdout().lock(), batch),
            Output::Writer(out) => write_flush(out, batch),
        }
    }
}

fn write_flush(out: &mut impl Write, batch: &[u8]) -> Result<(), TargetError> {
    out.write_all(batch).map_err(|source| TargetError {
        op: "write",
        source,
    })?;
    out.flush().map_err(|source| TargetError {
        op: "flush",
        source,
    })
}
