//! `ferry offsets list|get|set|reset`: work on the offset store directly, in Kafka Connect's
//! `{"offsets":[{"partition":…,"offset":…}]}` shape, on the worker's offset store (`offset.storage`:
//! the offsets file, whose lock refuses this while a worker runs, or the Kafka offsets topic or the
//! PostgreSQL offsets table, which cannot be locked: stop the connector first). `export`, `import` ([`transfer`]) and `doctor`
//! ([`doctor`]) move offsets between stores and check a store.
//!
//! The commands that only read (`list`, `get`, `export`, `doctor`) open a file store read-only
//! ([`open_store_read_only`]): they create, truncate and lock nothing, and work on a read-only file.

mod doctor;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use ferry_api::{ConnectMap, OffsetReadError, OffsetStorageReader};
use ferry_offsets::{
    CodecError, OffsetBackingStore, OffsetWrite, StoreError, StoreOffsetReader, decode_key,
    decode_value, encode_key, encode_value,
};
use ferry_plugin::OpenMode;
use ferry_runtime::config::WorkerConfig;

use crate::standalone::open_store;
use crate::{Ferry, RunError};

/// Why a `ferry offsets` command failed; nothing was written unless the message says otherwise.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OffsetsError {
    /// The worker file is refused.
    #[error(transparent)]
    Worker(#[from] RunError),
    /// The offset store cannot be opened, read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A committed offset cannot be read.
    #[error(transparent)]
    Read(#[from] OffsetReadError),
    /// A stored key cannot be decoded.
    #[error(transparent)]
    Key(#[from] CodecError),
    /// A stored offset cannot be decoded.
    #[error("the stored offset of a partition of {connector:?} cannot be decoded: {source}")]
    StoredOffset {
        /// The connector.
        connector: String,
        /// Why.
        source: CodecError,
    },
    /// `--partition` or `--offset` is not a JSON object.
    #[error(
        "--{what} {json} is not a valid {what}: {reason}. It must be a JSON object, e.g. {example}"
    )]
    BadArgument {
        /// `partition` or `offset`.
        what: &'static str,
        /// The argument.
        json: String,
        /// Why.
        reason: String,
        /// A valid one.
        example: &'static str,
    },
    /// Standard output cannot be written.
    #[error("writing the {what} to standard output failed: {source}")]
    Stdout {
        /// `document` or `report`.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The import's input cannot be read (`path` is `-` for standard input).
    #[error("{}: {source}", if path.as_os_str() == "-" { "reading standard input failed".to_owned() } else { format!("cannot read {}", path.display()) })]
    Input {
        /// The file, or `-`.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The import's document is refused.
    #[error("{name}: {source}\nnothing was written")]
    Document {
        /// The file.
        name: String,
        /// Why.
        source: ferry_offsets::transfer::ImportError,
    },
    /// Writing the import failed; `outcome` says what may have been written.
    #[error("importing {name} into {store} failed: {source}\n{outcome}")]
    Import {
        /// The file.
        name: String,
        /// The store.
        store: String,
        /// Why (boxed: the error type stays small on the success path).
        source: Box<StoreError>,
        /// What may have been written.
        outcome: &'static str,
    },
    /// The import was written but cannot be read back.
    #[error("the import was written, but reading it back failed: {0}")]
    ReadBack(Box<StoreError>),
    /// The import was written but reads back differently.
    #[error(
        "the import was written, but {count} read back differently (is another worker writing to \
         {store}?):\n{}",
        differences.join("\n")
    )]
    ReadBackDiffers {
        /// `N partition(s)`.
        count: String,
        /// The store.
        store: String,
        /// One line per partition.
        differences: Vec<String>,
    },
}

/// An empty `--connector`: no connector can have that name.
#[derive(Debug, thiserror::Error)]
#[error("the connector name must not be empty")]
pub(crate) struct EmptyConnectorName;

/// What to do with offsets.
#[derive(Subcommand)]
pub(crate) enum Action {
    /// List every committed offset of a connector.
    List(Target),
    /// Show the committed offset of one partition.
    Get {
        #[command(flatten)]
        target: Target,
        /// The partition as JSON, e.g. '{"filename":"/tmp/in.txt"}'.
        #[arg(long)]
        partition: String,
    },
    /// Set the offset of one partition.
    Set {
        #[command(flatten)]
        target: Target,
        /// The partition as JSON.
        #[arg(long)]
        partition: String,
        /// The offset as JSON, e.g. '{"position":0}'.
        #[arg(long)]
        offset: String,
    },
    /// Remove the offset of one partition, or of every partition of the connector.
    Reset {
        #[command(flatten)]
        target: Target,
        /// The partition as JSON; without it every partition of the connector is reset.
        #[arg(long)]
        partition: Option<String>,
    },
    /// Print every offset (or one connector's) as a versioned JSON document, for `import`.
    Export(transfer::ExportArgs),
    /// Write the offsets of an `export` document or of a Kafka Connect offsets-topic dump, all or
    /// nothing.
    Import(transfer::ImportArgs),
    /// Check the store for partition-key mismatches and undecodable records; exits 1 when it finds any.
    Doctor(doctor::DoctorArgs),
}

#[derive(Args)]
pub(crate) struct Target {
    /// The worker properties file (names the offset store).
    #[arg(long)]
    worker: PathBuf,
    /// The connector name.
    #[arg(long, value_parser = connector_name)]
    connector: String,
}

/// Refuses an empty connector name: no connector can have one, so offsets under it would never be
/// read.
pub(crate) fn connector_name(name: &str) -> Result<String, EmptyConnectorName> {
    if name.is_empty() {
        return Err(EmptyConnectorName);
    }
    Ok(name.to_owned())
}

/// Parses `--partition` or `--offset` (`what`), each a JSON object.
fn parse_map(what: &'static str, json: &str) -> Result<ConnectMap, OffsetsError> {
    decode_value(json.as_bytes()).map_err(|e| OffsetsError::BadArgument {
        what,
        json: json.to_owned(),
        reason: e.reason().to_string(),
        example: if what == "partition" {
            r#"'{"filename":"/tmp/in.txt"}'"#
        } else {
            r#"'{"position":0}'"#
        },
    })
}

/// Opens the worker's offset store for a command that only reads: a file store read-only (nothing on
/// disk changes; see `FileStore::open_read_only`), any other store as its plugin opens it to read.
pub(crate) async fn open_store_read_only(
    config: &WorkerConfig,
) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
    open_store(config, OpenMode::ReadOnly).await
}

fn entry(partition: Option<&ConnectMap>, offset: Option<&ConnectMap>) -> String {
    let json = |m: Option<&ConnectMap>| {
        m.map_or_else(
            || "null".to_owned(),
            |m| String::from_utf8_lossy(&encode_value(m)).into_owned(),
        )
    };
    format!(
        "{{\"partition\":{},\"offset\":{}}}",
        json(partition),
        json(offset)
    )
}

fn print_offsets(entries: &[String]) {
    println!("{{\"offsets\":[{}]}}", entries.join(","));
}

/// `list`: every committed offset of `connector`.
async fn list(store: &dyn OffsetBackingStore, connector: &str) -> Result<(), OffsetsError> {
    let stored = store.connector_offsets(connector).await?;
    let mut entries = Vec::with_capacity(stored.len());
    for (key, value) in stored {
        let key = decode_key(&key)?;
        let offset = decode_value(&value).map_err(|source| OffsetsError::StoredOffset {
            connector: connector.to_owned(),
            source,
        })?;
        entries.push(entry(key.partition.as_ref(), Some(&offset)));
    }
    print_offsets(&entries);
    Ok(())
}

/// `get`: the committed offset of one partition, as a task reads it.
async fn get(
    store: Arc<dyn OffsetBackingStore>,
    connector: String,
    partition: &str,
) -> Result<(), OffsetsError> {
    let partition = parse_map("partition", partition)?;
    let reader = StoreOffsetReader::new(connector, store);
    let offset = reader.offset(&partition).await?;
    print_offsets(
        &offset
            .map(|o| entry(Some(&partition), Some(&o)))
            .into_iter()
            .collect::<Vec<_>>(),
    );
    Ok(())
}

/// `set`: one partition's offset.
async fn set(
    store: &dyn OffsetBackingStore,
    connector: &str,
    partition: &str,
    offset: &str,
) -> Result<(), OffsetsError> {
    let partition = parse_map("partition", partition)?;
    let offset = parse_map("offset", offset)?;
    let write = OffsetWrite {
        key: encode_key(connector, Some(&partition)),
        value: Some(encode_value(&offset)),
    };
    store.set(&[write]).await?;
    print_offsets(&[entry(Some(&partition), Some(&offset))]);
    Ok(())
}

/// `reset`: one partition's offset, or every offset of the connector, removed (tombstones).
async fn reset(
    store: &dyn OffsetBackingStore,
    connector: &str,
    partition: Option<String>,
) -> Result<(), OffsetsError> {
    let keys: Vec<Vec<u8>> = match partition {
        Some(p) => vec![encode_key(connector, Some(&parse_map("partition", &p)?))],
        None => store
            .connector_offsets(connector)
            .await?
            .into_iter()
            .map(|(key, _)| key)
            .collect(),
    };
    let batch: Vec<OffsetWrite> = keys
        .into_iter()
        .map(|key| OffsetWrite { key, value: None })
        .collect();
    store.set(&batch).await?;
    eprintln!(
        "reset {} partition(s) of connector {connector:?}",
        batch.len()
    );
    print_offsets(&[]);
    Ok(())
}

/// Runs one `ferry offsets` command; the exit code is 0 unless `doctor` found a likely mismatch.
pub(crate) async fn run(ferry: &Ferry, action: Action) -> Result<ExitCode, OffsetsError> {
    let target = match &action {
        Action::Export(args) => return transfer::export(ferry, args).await,
        Action::Import(args) => return transfer::import(ferry, args).await,
        Action::Doctor(args) => return doctor::run(ferry, args).await,
        Action::List(t)
        | Action::Get { target: t, .. }
        | Action::Set { target: t, .. }
        | Action::Reset { target: t, .. } => t,
    };
    let config = ferry.load_worker(&target.worker)?;
    let store = if matches!(action, Action::List(_) | Action::Get { .. }) {
        open_store_read_only(&config).await?
    } else {
        open_store(&config, OpenMode::ReadWrite).await?
    };
    let connector = target.connector.clone();
    if !config.offset_storage.spec().exclusive()
        && matches!(action, Action::Set { .. } | Action::Reset { .. })
    {
        // A file store is locked while a worker uses it; a Kafka topic or a PostgreSQL table is not: a
        // running task would not see the change and its next commit would overwrite it.
        tracing::warn!(
            "offsets in {} can be changed while a worker runs connector {connector:?}; stop it first (Kafka \
             Connect requires the connector to be STOPPED), or its next commit overwrites this change",
            store.describe()
        );
    }
    match action {
        Action::Export(_) | Action::Import(_) | Action::Doctor(_) => {}
        Action::List(_) => list(store.as_ref(), &connector).await?,
        Action::Get { partition, .. } => get(store, connector, &partition).await?,
        Action::Set {
            partition, offset, ..
        } => set(store.as_ref(), &connector, &partition, &offset).await?,
        Action::Reset { partition, .. } => reset(store.as_ref(), &connector, partition).await?,
    }
    Ok(ExitCode::SUCCESS)
}
