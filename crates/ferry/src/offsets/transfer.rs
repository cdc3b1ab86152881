//! `ferry offsets export` and `ferry offsets import`: offsets out of one store and into another (file,
//! Kafka or PostgreSQL, whichever the worker file names), byte-exact. The document and the dump format are
//! [`ferry_offsets::transfer`]'s.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use clap::{Args, ValueEnum};
use ferry_offsets::transfer::{self, InputFormat, Origins};
use ferry_offsets::{BatchWritten, OffsetBackingStore, StoreError, WriteBatch};
use ferry_plugin::OpenMode;

use super::OffsetsError;
use crate::Ferry;
use crate::standalone::open_store;

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The worker properties file (names the offset store).
    #[arg(long)]
    worker: PathBuf,
    /// Export only this connector's offsets.
    #[arg(long, value_parser = super::connector_name)]
    connector: Option<String>,
}

#[derive(Args)]
pub(crate) struct ImportArgs {
    /// The worker properties file (names the offset store written to).
    #[arg(long)]
    worker: PathBuf,
    /// An `export` document, or a Kafka Connect offsets topic printed as key<TAB>value lines
    /// (kafka-console-consumer --property print.key=true); `-` reads standard input.
    file: PathBuf,
    /// The input's format (detected by default: a JSON object is a Ferry document).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Check the input and tell what would be written, without writing.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// `ferry offsets export`'s JSON document.
    Ferry,
    /// key<TAB>value lines of a Kafka Connect offsets topic.
    KafkaConnectDump,
}

impl From<FormatArg> for InputFormat {
    fn from(format: FormatArg) -> Self {
        match format {
            FormatArg::Ferry => InputFormat::Ferry,
            FormatArg::KafkaConnectDump => InputFormat::KafkaConnectDump,
        }
    }
}

pub(super) async fn export(ferry: &Ferry, args: &ExportArgs) -> Result<ExitCode, OffsetsError> {
    let config = ferry.load_worker(&args.worker)?;
    let store = super::open_store_read_only(&config).await?;
    // Streamed: the offsets are visited in place, in export order, and each entry is written as it
    // comes, so a million offsets cost the store's own memory and a write buffer.
    let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
    let mut writer = transfer::ExportWriter::new(
        out,
        &store.describe(),
        &transfer::rfc3339_utc(SystemTime::now()),
    );
    store
        .visit_sorted(args.connector.as_deref(), &mut |key, value| {
            writer.entry(key, value)
        })
        .await?;
    let (_, document) = writer.finish().map_err(|source| OffsetsError::Stdout {
        what: "document",
        source,
    })?;
    for skipped in &document.skipped {
        tracing::warn!(
            "not exported: the record with key {} cannot be decoded ({}); `ferry offsets doctor` \
             lists such records",
            skipped.key,
            skipped.reason
        );
    }
    eprintln!(
        "exported {} of {} from {}{}",
        plural(document.offsets, "offset", "offsets"),
        plural(document.connectors, "connector", "connectors"),
        store.describe(),
        match document.skipped.len() {
            0 => String::new(),
            n => format!(
                " ({} skipped)",
                plural(n, "undecodable record", "undecodable records")
            ),
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn import(ferry: &Ferry, args: &ImportArgs) -> Result<ExitCode, OffsetsError> {
    let config = ferry.load_worker(&args.worker)?;
    let name = args.file.display().to_string();
    // The whole input is checked before the store is even opened: nothing is written on any error.
    let input = read_input(&args.file)?;
    // The plan keeps a dump's bytes where they are in the input: the input is not copied.
    let plan = transfer::parse_import_owned(input, args.format.map(InputFormat::from)).map_err(
        |source| OffsetsError::Document {
            name: name.clone(),
            source,
        },
    )?;
    let summary = plan.summary();
    let superseded = match plan.superseded {
        0 => String::new(),
        n => format!(
            "; {} replaced by later lines of the same partition",
            plural(n, "earlier line was", "earlier lines were")
        ),
    };
    if args.dry_run {
        // A dry run writes nothing, so it opens the store read-only, and a missing store file stays
        // missing.
        let target = match config.offset_storage.spec().not_created_yet() {
            Some(target) => target,
            None => super::open_store_read_only(&config).await?.describe(),
        };
        eprintln!(
            "dry run: {name} ({}) is valid; importing it into {target} would write \
             {summary}{superseded}",
            plan.format,
        );
        return Ok(ExitCode::SUCCESS);
    }
    let store = open_store(&config, OpenMode::ReadWrite).await?;
    let kafka = !config.offset_storage.spec().atomic_batches();
    if kafka {
        eprintln!(
            "note: {} is a Kafka topic: the {} records are sent as one batch, but a batch is not \
             atomic across records. If the import fails part-way some records may be written; run it \
             again (an import writes the same bytes each time). Stop the connectors first: a running \
             task's next commit overwrites imported offsets.",
            store.describe(),
            plan.len()
        );
    }
    let format = plan.format;
    // The compact batch is moved to the store, which may free it before indexing what it wrote.
    let (batch, origins) = plan.into_batch();
    let written = store.set_batch(batch).await.map_err(|e| {
        let outcome = match e {
            _ if kafka => "some records of the batch may have been written; run the import again",
            // Poisoned by this batch: it was made durable, but reading it back failed.
            StoreError::Poisoned { .. } => {
                "the batch may have been written; check with `ferry offsets get` (the next open \
                 checks the store file)"
            }
            _ => "nothing was written",
        };
        OffsetsError::Import {
            name: name.clone(),
            store: store.describe(),
            source: Box::new(e),
            outcome,
        }
    })?;
    match written {
        // The store read its own write back (the file store: the frame, checksum compared).
        BatchWritten::ReadBack => {}
        BatchWritten::Returned(batch) => verify(store.as_ref(), &batch, &origins).await?,
    }
    eprintln!(
        "imported {name} ({format}) into {}: {summary} written{superseded}",
        store.describe()
    );
    Ok(ExitCode::SUCCESS)
}

/// Reads the input file, or standard input for `-`.
fn read_input(path: &Path) -> Result<Vec<u8>, OffsetsError> {
    let failed = |source| OffsetsError::Input {
        path: path.to_path_buf(),
        source,
    };
    if path == Path::new("-") {
        let mut input = Vec::new();
        std::io::stdin().read_to_end(&mut input).map_err(failed)?;
        return Ok(input);
    }
    std::fs::read(path).map_err(failed)
}

/// Reads every imported partition back: each must hold exactly the bytes written (a tombstone: no
/// offset). A difference means another writer changed the store meanwhile.
async fn verify(
    store: &dyn OffsetBackingStore,
    batch: &WriteBatch,
    origins: &Origins,
) -> Result<(), OffsetsError> {
    // In chunks, so reading back a million offsets holds one chunk's copies at a time.
    const CHUNK: usize = 4096;
    let mut differ = Vec::new();
    for start in (0..batch.len()).step_by(CHUNK) {
        let end = (start + CHUNK).min(batch.len());
        let keys: Vec<Vec<u8>> = (start..end).map(|i| batch.get(i).0.to_vec()).collect();
        let read = store
            .get(&keys)
            .await
            .map_err(|e| OffsetsError::ReadBack(Box::new(e)))?;
        for (i, got) in (start..end).zip(&read) {
            let (key, value) = batch.get(i);
            let origin = origins.get(i);
            if value != got.as_deref() {
                differ.push(format!(
                    "  {} ({origin}): wrote {}, read back {}",
                    String::from_utf8_lossy(key),
                    text(value),
                    text(got.as_deref())
                ));
            }
        }
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(OffsetsError::ReadBackDiffers {
        count: plural(differ.len(), "partition", "partitions"),
        store: store.describe(),
        differences: differ,
    })
}

fn text(value: Option<&[u8]>) -> String {
    value.map_or_else(
        || "no offset".to_owned(),
        |v| String::from_utf8_lossy(v).into_owned(),
    )
}

pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
