//! The file config store: the connectors file, which keeps connectors created or changed over REST in
//! standalone mode so they survive a restart (`<offsets file>.connectors.json`, or
//! `ferry.connectors.file`). Task configurations are kept in memory only (the herder has the
//! connector make them again at start, as Kafka Connect standalone does: it does not keep them across
//! restarts either), so the file's format is what it always was.
//!
//! Format (versioned JSON):
//!
//! ```json
//! {"version":1,"connectors":{"my-source":{"config":{"connector.class":"FileStreamSource",…},"state":"RUNNING"}}}
//! ```
//!
//! Writes are atomic and durable: a temporary file in the same directory is written and fsynced, then
//! renamed over the file, then the directory is fsynced. A file that cannot be read or parsed is an
//! error naming it, and Ferry never overwrites it (it refuses to start instead).

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ferry_api::Config;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::config::{Change, apply};
use super::{ConfigBackingStore, ConfigSnapshot, ConfigStoreError, ConnectorEntry};
use crate::state::TargetState;

const VERSION: u32 = 1;

/// The connectors file could not be read or written. Ferry never overwrites a file it could not
/// read; a failed write leaves the previous content in place.
#[derive(Debug, thiserror::Error)]
pub enum ConnectorsFileError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read the connectors file: {source}", path.display())]
    Read {
        /// The connectors file.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
    /// The file is not JSON of this format.
    #[error(
        "{}: the connectors file (connectors created over REST) is not valid: {source}; fix or move \
         it (Ferry does not overwrite it)",
        path.display()
    )]
    Invalid {
        /// The connectors file.
        path: PathBuf,
        /// Where the JSON is wrong.
        source: serde_json::Error,
    },
    /// The file was written by a Ferry with another format version.
    #[error(
        "{}: connectors file version {found} is not supported (this Ferry reads version {VERSION})",
        path.display()
    )]
    Version {
        /// The connectors file.
        path: PathBuf,
        /// The version the file declares.
        found: u32,
    },
    /// A connector's key and the `name` in its configuration differ.
    #[error(
        "{}: connector {name:?} has \"name\" {named:?} in its configuration; they must be equal",
        path.display()
    )]
    NameMismatch {
        /// The connectors file.
        path: PathBuf,
        /// The connector's key in the file.
        name: String,
        /// The `name` its configuration holds, if any.
        named: Option<String>,
    },
    /// The connectors could not be encoded (not expected: they are strings).
    #[error("cannot encode the connectors file: {0}")]
    Encode(serde_json::Error),
    /// The new content could not be written (atomically: the old content is still there).
    #[error("{}: cannot write the connectors file: {source}", path.display())]
    Write {
        /// The connectors file.
        path: PathBuf,
        /// What the operating system said.
        source: io::Error,
    },
}

/// One connector as kept in the file.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredConnector {
    /// Its configuration.
    pub config: Config,
    /// Its target state.
    pub state: TargetState,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    #[serde(deserialize_with = "unique_names")]
    connectors: BTreeMap<String, StoredConnector>,
}

/// The connectors by name, refusing a name given twice (JSON allows it, and a map would silently
/// keep the last one: a hand-edited file would lose a connector without a word).
fn unique_names<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, StoredConnector>, D::Error> {
    struct Connectors;
    impl<'de> Visitor<'de> for Connectors {
        type Value = BTreeMap<String, StoredConnector>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of connectors by name")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut connectors: BTreeMap<String, StoredConnector> = BTreeMap::new();
            while let Some((name, connector)) = map.next_entry::<String, StoredConnector>()? {
                if let Some(first) = connectors.get(&name) {
                    return Err(A::Error::custom(format!(
                        "connector {name:?} is defined twice (first {} with {} keys, then {} with {} \
                         keys; keep one of them), the second time",
                        state_name(first.state),
                        first.config.len(),
                        state_name(connector.state),
                        connector.config.len()
                    )));
                }
                connectors.insert(name, connector);
            }
            Ok(connectors)
        }
    }
    deserializer.deserialize_map(Connectors)
}

fn state_name(state: TargetState) -> &'static str {
    match state {
        TargetState::Running => "RUNNING",
        TargetState::Paused => "PAUSED",
        TargetState::Stopped => "STOPPED",
    }
}

// The configuration may hold secrets: Debug shows its keys only.
impl fmt::Debug for StoredConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredConnector")
            .field("config_keys", &self.config.keys().collect::<Vec<_>>())
            .field("state", &self.state)
            .finish()
    }
}

/// A [`ConfigBackingStore`] in the connectors file. Every change is written (atomically and durably)
/// before it is taken in, so a failed write changes nothing.
#[derive(Debug)]
pub struct FileConfigStore {
    file: ConnectorsFile,
    /// What the file holds, plus the task configurations (memory only); writes are serialized.
    snapshot: tokio::sync::Mutex<ConfigSnapshot>,
}

impl FileConfigStore {
    /// The store in the file at `path`, read now (a missing file is an empty store).
    ///
    /// # Errors
    /// The file cannot be read, is not valid JSON of this format, or has an unknown version; the
    /// message names the file. Ferry never overwrites such a file.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, ConnectorsFileError> {
        let file = ConnectorsFile { path: path.into() };
        let connectors = file
            .load()?
            .into_iter()
            .map(|(name, stored)| {
                let entry = ConnectorEntry {
                    config: stored.config,
                    target: stored.state,
                    tasks: None,
                };
                (name, entry)
            })
            .collect();
        Ok(Self {
            file,
            snapshot: tokio::sync::Mutex::new(ConfigSnapshot {
                version: 0,
                connectors,
            }),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    async fn change(&self, change: Change<'_>) -> Result<(), ConfigStoreError> {
        let mut snapshot = self.snapshot.lock().await;
        let mut next = snapshot.clone();
        if !apply(&mut next, change)? {
            return Ok(());
        }
        let (before, after) = (stored(&snapshot), stored(&next));
        if before != after {
            let file = self.file.clone();
            tokio::task::spawn_blocking(move || file.save(&after))
                .await
                .map_err(|e| {
                    ConfigStoreError::new(format!("writing the connectors file panicked: {e}"))
                })?
                .map_err(|e| ConfigStoreError::new(e.to_string()))?;
        }
        *snapshot = next;
        Ok(())
    }
}

/// What the file keeps of a snapshot.
fn stored(snapshot: &ConfigSnapshot) -> BTreeMap<String, StoredConnector> {
    snapshot
        .connectors
        .iter()
        .map(|(name, entry)| {
            let stored = StoredConnector {
                config: entry.config.clone(),
                state: entry.target,
            };
            (name.clone(), stored)
        })
        .collect()
}

#[async_trait]
impl ConfigBackingStore for FileConfigStore {
    fn describe(&self) -> String {
        self.file.path.display().to_string()
    }

    async fn snapshot(&self) -> Result<ConfigSnapshot, ConfigStoreError> {
        Ok(self.snapshot.lock().await.clone())
    }

    async fn put_connector_config(
        &self,
        name: &str,
        config: &Config,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.change(Change::Connector(name, config, target)).await
    }

    async fn remove_connector_config(&self, name: &str) -> Result<(), ConfigStoreError> {
        self.change(Change::Remove(name)).await
    }

    async fn put_target_state(
        &self,
        name: &str,
        target: TargetState,
    ) -> Result<(), ConfigStoreError> {
        self.change(Change::Target(name, target)).await
    }

    async fn put_task_configs(&self, name: &str, tasks: &[Config]) -> Result<(), ConfigStoreError> {
        self.change(Change::Tasks(name, tasks)).await
    }
}

/// The connectors file itself: load and save the whole map.
#[derive(Debug, Clone)]
struct ConnectorsFile {
    path: PathBuf,
}

impl ConnectorsFile {
    #[cfg(test)]
    fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.path
    }

    /// The connectors kept in the file; none if it does not exist.
    ///
    /// # Errors
    /// The file cannot be read, is not valid JSON of this format, or has an unknown version; the
    /// message names the file.
    fn load(&self) -> Result<BTreeMap<String, StoredConnector>, ConnectorsFileError> {
        let path = || self.path.clone();
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(source) => {
                return Err(ConnectorsFileError::Read {
                    path: path(),
                    source,
                });
            }
        };
        let document: Document =
            serde_json::from_slice(&bytes).map_err(|source| ConnectorsFileError::Invalid {
                path: path(),
                source,
            })?;
        if document.version != VERSION {
            return Err(ConnectorsFileError::Version {
                path: path(),
                found: document.version,
            });
        }
        for (name, connector) in &document.connectors {
            let named = connector.config.get(crate::config::NAME);
            if named != Some(name) {
                return Err(ConnectorsFileError::NameMismatch {
                    path: path(),
                    name: name.clone(),
                    named: named.cloned(),
                });
            }
        }
        Ok(document.connectors)
    }

    /// Replaces the file's content with `connectors`, atomically and durably.
    ///
    /// # Errors
    /// Any I/O error, naming the file; the previous content is then still in place.
    fn save(
        &self,
        connectors: &BTreeMap<String, StoredConnector>,
    ) -> Result<(), ConnectorsFileError> {
        let document = Document {
            version: VERSION,
            connectors: connectors.clone(),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&document).map_err(ConnectorsFileError::Encode)?;
        bytes.push(b'\n');
        write_atomically(&self.path, &bytes).map_err(|source| ConnectorsFileError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// Temp file in the same directory, write, fsync, rename over `path`, fsync the directory.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut temp_name = name.to_os_string();
    temp_name.push(format!(".tmp-{}", std::process::id()));
    let temp = dir.join(temp_name);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_and_refuses_a_damaged_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = ConnectorsFile::new(dir.path().join("c.json"));
        assert!(file.load().expect("missing is empty").is_empty());
        let mut connectors = BTreeMap::new();
        connectors.insert(
            "a".to_owned(),
            StoredConnector {
                config: Config::from([("name".to_owned(), "a".to_owned())]),
                state: TargetState::Paused,
            },
        );
        file.save(&connectors).expect("save");
        assert_eq!(file.load().expect("load"), connectors);
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, ["c.json"], "no temporary file is left behind");

        fs::write(file.path(), b"{\"version\":1,\"connectors\":").expect("damage");
        let error = file.load().expect_err("damaged").to_string();
        assert!(
            error.contains("c.json") && error.contains("not valid"),
            "{error}"
        );
        fs::write(file.path(), b"{\"version\":9,\"connectors\":{}}").expect("write");
        assert!(file.load().is_err_and(|e| matches!(
            e,
            ConnectorsFileError::Version { found: 9, .. }
        ) && e.to_string().contains("version 9")));
        let renamed =
            br#"{"version":1,"connectors":{"a":{"config":{"name":"b"},"state":"RUNNING"}}}"#;
        fs::write(file.path(), renamed).expect("write");
        assert!(
            file.load()
                .is_err_and(|e| matches!(e, ConnectorsFileError::NameMismatch { .. })
                    && e.to_string().contains("must be equal"))
        );
    }
}
