//! The FileStreamSource task: resumes its files from one offsets read and tails them.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{
    ConnectError, OffsetStorageReaderExt, Schema, SourceRecord, SourceTask, SourceTaskContext,
    async_trait,
};

use super::config::{FileTaskConfig, TruncationPolicy};
use super::identity::{FileId, Identity};
use super::kafka_connect;
use super::tail::{Phase, TailedFile};
use super::{FileOffset, FilePartition};
use ferry_api::config::{invalid_config, offsets_read_error};

/// How long `poll` sleeps when no file has a new complete line.
pub(crate) const IDLE_SLEEP: Duration = Duration::from_millis(150);

/// Reads and tails a share of a FileStreamSource connector's files.
///
/// `start` reads the committed offsets of all its files in one `offsets()` call and checks each file
/// that exists against its position. `poll` returns up to `batch.size` complete lines, taken
/// round-robin from the files so that a busy file cannot starve the others; with nothing new it sleeps
/// briefly and returns an empty batch.
///
/// Cancel safety: `poll` does all its reading synchronously before its only `.await` (the idle sleep,
/// reached only with an empty batch), and lines read but not returned stay in the task; dropping a
/// pending `poll` loses nothing.
///
/// Blocking: the reads are ordinary blocking file reads on the calling thread, bounded per poll by
/// `batch.size` lines (read in 64 KiB chunks) — fine for local files; a slow network file system
/// stalls that runtime worker while a read lasts.
pub struct FileStreamSourceTask {
    running: Option<Running>,
}

struct Running {
    topic: String,
    batch_size: usize,
    policy: TruncationPolicy,
    files: Vec<TailedFile>,
    /// The file the next poll reads first.
    next: usize,
    /// An error met after some lines of the same poll were already taken: returned by the next poll,
    /// so those lines are not lost.
    deferred: Option<ConnectError>,
    /// `Schema.STRING_SCHEMA`, built once and shared by every record.
    schema: Arc<Schema>,
}

impl FileStreamSourceTask {
    /// A task; it reads nothing until started.
    pub fn new() -> Self {
        Self { running: None }
    }
}

impl Default for FileStreamSourceTask {
    fn default() -> Self {
        Self::new()
    }
}

impl Running {
    /// One synchronous round over the files. Never returns an error together with lost lines.
    ///
    /// Every record's value is the line as a string with Kafka Connect's `Schema.STRING_SCHEMA` (a
    /// required string), as Kafka Connect's FileStreamSourceTask declares it; keys are null without a
    /// schema.
    fn poll_now(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let mut out = self.poll_lines()?;
        for record in &mut out {
            record.value_schema = Some(self.schema.clone());
        }
        Ok(out)
    }

    fn poll_lines(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let mut out = Vec::new();
        let count = self.files.len();
        let first = self.next;
        self.next = if count == 0 { 0 } else { (first + 1) % count };
        for i in 0..count {
            if out.len() >= self.batch_size {
                break;
            }
            let file = &mut self.files[(first + i) % count];
            if let Err(e) = file.poll(self.batch_size, &self.topic, self.policy, &mut out) {
                if out.is_empty() {
                    return Err(e);
                }
                self.deferred = Some(e);
                break;
            }
        }
        Ok(out)
    }
}

/// The identity a committed offset recorded, when it has all of it (Kafka Connect's offsets have none).
fn identity_of(offset: &FileOffset) -> Option<Identity> {
    let (Some(dev), Some(ino), Some(fp), Some(fp_len)) =
        (offset.dev, offset.ino, offset.fp, offset.fp_len)
    else {
        return None;
    };
    Some(Identity {
        // The stored numbers are the bits of the unsigned ones.
        id: FileId {
            dev: dev as u64,
            ino: ino as u64,
        },
        fp: u32::try_from(fp).ok()?,
        fp_len: u64::try_from(fp_len).ok()?,
    })
}

#[async_trait]
impl SourceTask for FileStreamSourceTask {
    /// Its offsets are all it needs from a delivered record: no `commit_record`.
    fn wants_delivered_records(&self) -> bool {
        false
    }

    async fn start(&mut self, context: Arc<dyn SourceTaskContext>) -> Result<(), ConnectError> {
        let config = FileTaskConfig::parse(context.configs())
            .map_err(|issues| invalid_config("FileStreamSource task", "configuration", &issues))?;
        let partitions: Vec<FilePartition> = config
            .files
            .iter()
            .map(|f| FilePartition {
                filename: f.clone(),
            })
            .collect();
        let reader = context.offset_storage_reader();
        let offsets = reader
            .offsets_of::<FilePartition, FileOffset>(&partitions)
            .await
            .map_err(|e| {
                offsets_read_error(
                    format!(
                        "FileStreamSource: reading the committed offsets of {} file(s)",
                        partitions.len()
                    ),
                    e,
                )
            })?;
        let mut files = Vec::with_capacity(offsets.len());
        for (partition, offset) in offsets {
            let (position, identity) = match offset {
                None => (0, None),
                Some(offset) => {
                    let position = u64::try_from(offset.position).map_err(|_| {
                        ConnectError::fatal(format!(
                            "FileStreamSource: the committed offset of file {:?} has a negative position {}; \
                             reset it with `ferry offsets reset` (or set a valid one with `ferry offsets set`)",
                            partition.filename, offset.position
                        ))
                    })?;
                    match identity_of(&offset) {
                        Some(identity) => (position, Some(identity)),
                        // Written by Kafka Connect, which counts UTF-16 code units.
                        None => (
                            kafka_connect::byte_position(
                                std::path::Path::new(&partition.filename),
                                position,
                            ),
                            None,
                        ),
                    }
                }
            };
            tracing::debug!(file = %partition.filename, position, "FileStreamSource: resuming");
            let mut file = TailedFile::new(
                partition.filename,
                position,
                identity,
                config.max_line_bytes,
            )?;
            file.open_file(Phase::Start, config.policy)?;
            files.push(file);
        }
        self.running = Some(Running {
            topic: config.topic,
            batch_size: config.batch_size,
            policy: config.policy,
            files,
            next: 0,
            deferred: None,
            schema: Arc::new(Schema::string()),
        });
        Ok(())
    }

    async fn poll(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Some(running) = self.running.as_mut() else {
            return Err(ConnectError::fatal(
                "FileStreamSource: poll() called before start() or after stop()",
            ));
        };
        let records = running.poll_now()?;
        if records.is_empty() {
            tokio::time::sleep(IDLE_SLEEP).await;
        }
        Ok(records)
    }

    async fn stop(&mut self) -> Result<(), ConnectError> {
        self.running = None;
        Ok(())
    }
}
