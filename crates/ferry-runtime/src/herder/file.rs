//! The connectors file: connectors created or changed over REST in standalone mode, so they survive a
//! restart (`<offsets file>.connectors.json`, or `ferry.connectors.file`).
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

use ferry_api::Config;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::TargetState;

const VERSION: u32 = 1;

/// One connector as kept in the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The connectors file.
#[derive(Debug, Clone)]
pub struct ConnectorsFile {
    path: PathBuf,
}

impl ConnectorsFile {
    /// The file at `path` (read or written only when asked).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connectors kept in the file; none if it does not exist.
    ///
    /// # Errors
    /// The file cannot be read, is not valid JSON of this format, or has an unknown version; the
    /// message names the file.
    pub fn load(&self) -> Result<BTreeMap<String, StoredConnector>, String> {
        let bytes = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => {
                return Err(format!(
                    "{}: cannot read the connectors file: {e}",
                    self.path.display()
                ));
            }
        };
        let document: Document = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{}: the connectors file (connectors created over REST) is not valid: {e}; fix or move \
                 it (Ferry does not overwrite it)",
                self.path.display()
            )
        })?;
        if document.version != VERSION {
            return Err(format!(
                "{}: connectors file version {} is not supported (this Ferry reads version {VERSION})",
                self.path.display(),
                document.version
            ));
        }
        for (name, connector) in &document.connectors {
            let named = connector.config.get(crate::config::NAME);
            if named != Some(name) {
                return Err(format!(
                    "{}: connector {name:?} has \"name\" {named:?} in its configuration; they must be equal",
                    self.path.display()
                ));
            }
        }
        Ok(document.connectors)
    }

    /// Replaces the file's content with `connectors`, atomically and durably.
    ///
    /// # Errors
    /// Any I/O error, naming the file; the previous content is then still in place.
    pub fn save(&self, connectors: &BTreeMap<String, StoredConnector>) -> Result<(), String> {
        let document = Document {
            version: VERSION,
            connectors: connectors.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&document)
            .map_err(|e| format!("cannot encode the connectors file: {e}"))?;
        bytes.push(b'\n');
        write_atomically(&self.path, &bytes).map_err(|e| {
            format!(
                "{}: cannot write the connectors file: {e}",
                self.path.display()
            )
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
        let error = file.load().expect_err("damaged");
        assert!(
            error.contains("c.json") && error.contains("not valid"),
            "{error}"
        );
        fs::write(file.path(), b"{\"version\":9,\"connectors\":{}}").expect("write");
        assert!(file.load().is_err_and(|e| e.contains("version 9")));
        let renamed =
            br#"{"version":1,"connectors":{"a":{"config":{"name":"b"},"state":"RUNNING"}}}"#;
        fs::write(file.path(), renamed).expect("write");
        assert!(file.load().is_err_and(|e| e.contains("must be equal")));
    }
}
