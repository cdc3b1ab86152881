//! The store and sink backends a worker knows, besides the runtime's built-ins.

use std::fmt;
use std::sync::Arc;

use crate::{OffsetStorePlugin, SinkPlugin};

/// Registered offset store and sink backends, in registration order (which is the order they are
/// listed in "accepted values" messages).
#[derive(Clone, Default)]
pub struct WorkerPlugins {
    stores: Vec<Arc<dyn OffsetStorePlugin>>,
    sinks: Vec<Arc<dyn SinkPlugin>>,
}

impl WorkerPlugins {
    /// No backends.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an offset store backend.
    pub fn add_store(&mut self, plugin: Arc<dyn OffsetStorePlugin>) {
        self.stores.push(plugin);
    }

    /// Registers a sink backend.
    pub fn add_sink(&mut self, plugin: Arc<dyn SinkPlugin>) {
        self.sinks.push(plugin);
    }

    /// The offset store backends.
    pub fn stores(&self) -> &[Arc<dyn OffsetStorePlugin>] {
        &self.stores
    }

    /// The sink backends.
    pub fn sinks(&self) -> &[Arc<dyn SinkPlugin>] {
        &self.sinks
    }
}

impl fmt::Debug for WorkerPlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerPlugins")
            .field(
                "stores",
                &self.stores.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .field(
                "sinks",
                &self.sinks.iter().map(|p| p.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}
