//! The backends built into the runtime: the offsets file (`offset.storage=file`, the default) and the
//! JSON-line sinks (`sink=stdout`, `sink=file:PATH`). Other backends register as plugins
//! ([`ferry_plugin::WorkerPlugins`]).

use std::any::Any;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use ferry_api::ConfigKey;
use ferry_offsets::{FileStore, OffsetBackingStore, StoreError};
use ferry_plugin::{
    ConfigError, ConverterSpec, DynSinkSpec, DynStoreSpec, OffsetStorePlugin, OpenMode, Properties,
    SharedSink, SinkError, SinkPlugin, SinkProvider,
};

use crate::OFFSET_STORAGE_FILE;
use crate::sink::file::FileSink;
use crate::sink::line::LineFormat;
use crate::sink::stdout::StdoutSink;

/// `offset.storage=file` (the default): Ferry's crash-safe offsets file, `offset.storage.file.filename`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStorePlugin;

impl OffsetStorePlugin for FileStorePlugin {
    fn name(&self) -> &'static str {
        "file"
    }

    fn description(&self) -> &'static str {
        "a file (offset.storage=file, the default)"
    }

    fn hint(&self) -> &'static str {
        "in a file with offset.storage.file.filename"
    }

    fn accepted(&self) -> &'static str {
        "file (default; offset.storage.file.filename)"
    }

    // `offset.storage.file.filename` is a runtime key: other stores warn that it has no effect.
    fn keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }

    fn parse(
        &self,
        props: &Properties,
        alternatives: &[&'static str],
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynStoreSpec>> {
        match props.get(OFFSET_STORAGE_FILE).map(str::trim) {
            None => {
                let others = if alternatives.is_empty() {
                    String::new()
                } else {
                    format!(" (or keep offsets {})", alternatives.join(", or "))
                };
                errors.push(ConfigError::Missing {
                    path: props.path().to_path_buf(),
                    key: OFFSET_STORAGE_FILE.to_owned(),
                    hint: format!(
                        "set it to the file where source offsets are stored, e.g. \
                         offset.storage.file.filename=/var/lib/ferry/connect.offsets{others}"
                    ),
                });
                None
            }
            Some("") => {
                errors.push(props.invalid(
                    OFFSET_STORAGE_FILE,
                    "must name a file, e.g. /var/lib/ferry/connect.offsets",
                ));
                None
            }
            Some(file) => Some(Arc::new(FileStoreSpec {
                path: PathBuf::from(file),
            })),
        }
    }
}

/// The settings of `offset.storage=file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStoreSpec {
    /// `offset.storage.file.filename`. A relative path is relative to the process's working
    /// directory, as in Kafka Connect.
    pub path: PathBuf,
}

impl fmt::Display for FileStoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file {}", self.path.display())
    }
}

#[async_trait]
impl DynStoreSpec for FileStoreSpec {
    fn plugin(&self) -> &'static str {
        "file"
    }

    /// Refused without being touched when damaged or locked; read-only opens create, truncate and
    /// lock nothing.
    async fn open(&self, mode: OpenMode) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
        let path = self.path.clone();
        let store = tokio::task::spawn_blocking(move || match mode {
            OpenMode::ReadWrite => FileStore::open(path),
            OpenMode::ReadOnly => FileStore::open_read_only(path),
        })
        .await
        .map_err(|e| {
            StoreError::backend(
                self.path.display().to_string(),
                "opening the offset store panicked",
                false,
            )
            .with_source(e)
        })??;
        Ok(Arc::new(store))
    }

    fn exclusive(&self) -> bool {
        true
    }

    fn atomic_batches(&self) -> bool {
        true
    }

    fn not_created_yet(&self) -> Option<String> {
        (!self.path.exists()).then(|| {
            format!(
                "file {} (it does not exist yet; the import would create it)",
                self.path.display()
            )
        })
    }

    fn default_connectors_file(&self) -> Option<PathBuf> {
        let mut name = OsString::from(self.path.as_os_str());
        name.push(".connectors.json");
        Some(PathBuf::from(name))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `sink=stdout`: JSON lines on standard output (the default without another default sink).
#[derive(Debug, Clone, Copy, Default)]
pub struct StdoutSinkPlugin;

impl SinkPlugin for StdoutSinkPlugin {
    fn name(&self) -> &'static str {
        "stdout"
    }

    fn accepts(&self, value: &str) -> bool {
        value == "stdout"
    }

    fn accepted(&self) -> &'static str {
        "stdout"
    }

    fn keys(&self) -> Vec<ConfigKey> {
        vec![sink_format_key()]
    }

    fn parse(
        &self,
        _value: Option<&str>,
        props: &Properties,
        _converters: (ConverterSpec, ConverterSpec),
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynSinkSpec>> {
        let format = sink_format(props, errors)?;
        Some(Arc::new(StdoutSinkSpec { format }))
    }
}

/// The `sink.format` key of the file and stdout sinks.
fn sink_format_key() -> ConfigKey {
    ConfigKey::optional(
        LineFormat::KEY,
        Some("json"),
        "what the file and stdout sinks write per record: json (the record with its source partition and offset) or value (the value alone, as Kafka Connect's FileStreamSink)",
    )
}

/// `sink.format` (default `json`); `None` when invalid (the error is recorded).
fn sink_format(props: &Properties, errors: &mut Vec<ConfigError>) -> Option<LineFormat> {
    match props.get(LineFormat::KEY) {
        None => Some(LineFormat::Json),
        Some(text) => {
            let format = LineFormat::parse(text);
            if format.is_none() {
                errors.push(props.invalid(
                    LineFormat::KEY,
                    "accepted values: json (default: the record with its source partition and offset), value (the value alone, as Kafka Connect's FileStreamSink writes it)",
                ));
            }
            format
        }
    }
}

/// The settings of `sink=stdout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdoutSinkSpec {
    /// What each record is written as (`sink.format`).
    pub format: LineFormat,
}

impl fmt::Display for StdoutSinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("stdout")?;
        if self.format != LineFormat::Json {
            write!(f, " ({} lines)", self.format.name())?;
        }
        Ok(())
    }
}

#[async_trait]
impl DynSinkSpec for StdoutSinkSpec {
    fn plugin(&self) -> &'static str {
        "stdout"
    }

    async fn start(&self) -> Result<Arc<dyn SinkProvider>, SinkError> {
        Ok(Arc::new(SharedSink(Arc::new(StdoutSink::new_with(
            self.format,
        )?))))
    }

    fn uses_converters(&self) -> bool {
        false
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `sink=file:PATH`: JSON lines appended to `PATH`, acknowledged once synced.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileSinkPlugin;

impl SinkPlugin for FileSinkPlugin {
    fn name(&self) -> &'static str {
        "file"
    }

    fn accepts(&self, value: &str) -> bool {
        value.starts_with("file:")
    }

    fn accepted(&self) -> &'static str {
        "file:PATH (e.g. file:/var/lib/ferry/records.jsonl)"
    }

    fn keys(&self) -> Vec<ConfigKey> {
        vec![sink_format_key()]
    }

    fn parse(
        &self,
        value: Option<&str>,
        props: &Properties,
        _converters: (ConverterSpec, ConverterSpec),
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynSinkSpec>> {
        let format = sink_format(props, errors)?;
        match value.and_then(|v| v.strip_prefix("file:")) {
            Some(path) if !path.is_empty() => Some(Arc::new(FileSinkSpec {
                path: PathBuf::from(path),
                format,
            })),
            _ => {
                errors.push(props.invalid(
                    crate::SINK,
                    "file: needs a path, e.g. sink=file:/var/lib/ferry/records.jsonl",
                ));
                None
            }
        }
    }
}

/// The settings of `sink=file:PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSinkSpec {
    /// The file. A relative path is relative to the process's working directory.
    pub path: PathBuf,
    /// What each record is written as (`sink.format`).
    pub format: LineFormat,
}

impl fmt::Display for FileSinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "file:{}", self.path.display())?;
        if self.format != LineFormat::Json {
            write!(f, " ({} lines)", self.format.name())?;
        }
        Ok(())
    }
}

#[async_trait]
impl DynSinkSpec for FileSinkSpec {
    fn plugin(&self) -> &'static str {
        "file"
    }

    async fn start(&self) -> Result<Arc<dyn SinkProvider>, SinkError> {
        Ok(Arc::new(SharedSink(Arc::new(
            FileSink::open_with(&self.path, self.format).await?,
        ))))
    }

    fn uses_converters(&self) -> bool {
        false
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
