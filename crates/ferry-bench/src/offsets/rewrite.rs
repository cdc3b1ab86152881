//! The Kafka Connect standalone contender: the whole offset map lives in memory and every flush
//! rewrites all of it to a temp file, fsyncs it and renames it over the old file (Kafka Connect's
//! `FileOffsetBackingStore.save()`; it writes a Java-serialized `HashMap`, this writes length-prefixed
//! key/value pairs, which is cheaper to produce).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::BenchResult;

/// A map rewritten whole on every flush.
pub struct RewriteStore {
    path: PathBuf,
    map: HashMap<Vec<u8>, Vec<u8>>,
}

impl RewriteStore {
    /// An empty store that will write `path`.
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            map: HashMap::new(),
        }
    }

    /// Applies `entries` to the map and writes the whole map durably.
    pub fn flush(&mut self, entries: &[(Vec<u8>, Vec<u8>)]) -> BenchResult<()> {
        for (key, value) in entries {
            self.map.insert(key.clone(), value.clone());
        }
        let temp = self.path.with_extension("tmp");
        let failed = |e: std::io::Error| format!("rewriting {}: {e}", temp.display());
        let file = File::create(&temp).map_err(failed)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&(self.map.len() as u64).to_le_bytes())
            .map_err(failed)?;
        for (key, value) in &self.map {
            for bytes in [key, value] {
                out.write_all(&(bytes.len() as u32).to_le_bytes())
                    .map_err(failed)?;
                out.write_all(bytes).map_err(failed)?;
            }
        }
        let file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        file.sync_all().map_err(failed)?;
        fs::rename(&temp, &self.path).map_err(|e| {
            crate::BenchError::from(format!(
                "renaming {} over {}: {e}",
                temp.display(),
                self.path.display()
            ))
        })
    }

    /// Puts an entry in the map without writing (filling a store untimed).
    pub fn flush_later(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.map.insert(key, value);
    }

    /// Reads a file [`flush`](Self::flush) wrote back into a map (start-up).
    pub fn load(path: &Path) -> BenchResult<HashMap<Vec<u8>, Vec<u8>>> {
        let failed = |e: std::io::Error| format!("reading {}: {e}", path.display());
        let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(failed)?);
        let mut word = [0u8; 8];
        input.read_exact(&mut word).map_err(failed)?;
        let count = u64::from_le_bytes(word) as usize;
        let mut map = HashMap::with_capacity(count);
        let read_blob = |input: &mut BufReader<File>| -> BenchResult<Vec<u8>> {
            let mut len = [0u8; 4];
            input.read_exact(&mut len).map_err(failed)?;
            let mut blob = vec![0; u32::from_le_bytes(len) as usize];
            input.read_exact(&mut blob).map_err(failed)?;
            Ok(blob)
        };
        for _ in 0..count {
            let key = read_blob(&mut input)?;
            let value = read_blob(&mut input)?;
            map.insert(key, value);
        }
        Ok(map)
    }
}
