//! `Ferry::builder()`: offset stores and sinks are registered, not built in. A store registered by a
//! program is chosen by `offset.storage`, reads its own keys, and appears in the messages that list
//! what is accepted; without registrations only the runtime's built-ins are known.

use std::any::Any;
use std::sync::Arc;

use ferry::Ferry;
use ferry_api::ConfigKey;
use ferry_offsets::{MemoryStore, OffsetBackingStore, StoreError};
use ferry_plugin::{ConfigError, DynStoreSpec, OffsetStorePlugin, OpenMode, Properties};
use ferry_runtime::config::ConfigErrors;

/// `offset.storage=memory`, with one required key of its own.
struct MemoryStorePlugin;

impl OffsetStorePlugin for MemoryStorePlugin {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn description(&self) -> &'static str {
        "memory (offset.storage=memory)"
    }
    fn hint(&self) -> &'static str {
        "in memory with offset.storage=memory and memory.label"
    }
    fn accepted(&self) -> &'static str {
        "memory (memory.label)"
    }
    fn keys(&self) -> Vec<ConfigKey> {
        vec![ConfigKey::required("memory.label", "a label")]
    }
    fn parse(
        &self,
        props: &Properties,
        _alternatives: &[&'static str],
        errors: &mut Vec<ConfigError>,
    ) -> Option<Arc<dyn DynStoreSpec>> {
        match props.get("memory.label") {
            Some(label) => Some(Arc::new(MemorySpec(label.to_owned()))),
            None => {
                errors.push(props.invalid("offset.storage", "needs memory.label"));
                None
            }
        }
    }
}

#[derive(Debug)]
struct MemorySpec(String);

impl std::fmt::Display for MemorySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "memory {}", self.0)
    }
}

#[async_trait::async_trait]
impl DynStoreSpec for MemorySpec {
    fn plugin(&self) -> &'static str {
        "memory"
    }
    async fn open(&self, _mode: OpenMode) -> Result<Arc<dyn OffsetBackingStore>, StoreError> {
        Ok(Arc::new(MemoryStore::new()))
    }
    fn exclusive(&self) -> bool {
        false
    }
    fn atomic_batches(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    Properties::from_pairs("worker.properties", pairs.iter().copied())
}

fn refused(ferry: &Ferry, pairs: &[(&str, &str)]) -> ConfigErrors {
    match ferry.parse_worker(&props(pairs)) {
        Ok(config) => panic!("config should be refused: {config:?}"),
        Err(errors) => errors,
    }
}

#[test]
fn a_registered_store_is_chosen_by_name_and_reads_its_own_keys() {
    let ferry = Ferry::builder().offset_store(MemoryStorePlugin);
    let config = ferry
        .parse_worker(&props(&[
            ("offset.storage", "memory"),
            ("memory.label", "test"),
        ]))
        .unwrap_or_else(|e| panic!("refused:\n{e}"));
    assert_eq!(config.offset_storage.to_string(), "memory test");
    assert_eq!(
        config
            .offset_storage
            .downcast_ref::<MemorySpec>()
            .map(|s| s.0.as_str()),
        Some("test")
    );
    assert_eq!(config.offset_storage_file(), None);
    assert_eq!(config.sink.to_string(), "stdout");

    // Its key under another store is refused, naming where offsets are stored.
    let errors = refused(
        &ferry,
        &[
            ("offset.storage.file.filename", "/tmp/o"),
            ("memory.label", "x"),
        ],
    );
    assert!(
        errors.to_string().contains(
            "is a setting of offset.storage=memory, but offsets are stored in a file \
             (offset.storage=file, the default)"
        ),
        "{errors}"
    );
    // The missing offsets file offers it, and an unknown store lists it.
    let errors = refused(&ferry, &[]);
    assert!(
        errors
            .to_string()
            .contains("(or keep offsets in memory with offset.storage=memory and memory.label)"),
        "{errors}"
    );
    let errors = refused(&ferry, &[("offset.storage", "kafka")]);
    assert!(
        errors.to_string().contains(
            "accepted values: file (default; offset.storage.file.filename), memory (memory.label)"
        ),
        "{errors}"
    );
}

#[test]
fn without_registrations_only_the_built_ins_are_known() {
    let ferry = Ferry::builder();
    let errors = refused(
        &ferry,
        &[
            ("offset.storage.file.filename", "/tmp/o"),
            ("bootstrap.servers", "k:9092"),
            ("sink", "kafka"),
        ],
    );
    let text = errors.to_string();
    assert!(text.contains("unknown key \"bootstrap.servers\""), "{text}");
    assert!(
        text.contains(
            "accepted values: stdout, or file:PATH (e.g. file:/var/lib/ferry/records.jsonl)"
        ),
        "{text}"
    );
}
