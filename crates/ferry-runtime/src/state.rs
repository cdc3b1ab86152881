//! What a connector or task is asked to be, and how a task is named: shared by the herder, the worker
//! and the config stores (one enum, so what the connectors file stores is what the worker obeys).
//! Defined in `ferry-plugin` (the stores' contracts live there, for backend crates); re-exported here.

pub use ferry_plugin::{TargetState, TaskId};
