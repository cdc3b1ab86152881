//! Single Message Transforms and predicates: Kafka Connect's `Transformation` and `Predicate`.
//!
//! A connector's `transforms=a,b` names a chain applied in order to each record after `poll()` and
//! before the sink converts it; `transforms.a.type` is the class name a [`TransformationPlugin`]
//! answers to, and every other `transforms.a.<key>` is the transform's own configuration (handed to
//! [`Transformation::configure`] without the prefix). `transforms.a.predicate=p` applies `a` only to
//! records for which the predicate `predicates.p.type` holds (`transforms.a.negate=true`: does not
//! hold). A plugin may add its own transforms and predicates by registering plugins of these types.
//!
//! ```
//! use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceRecord};
//! use ferry_api::transform::{Transformation, TransformationPlugin};
//!
//! /// Upper-cases a schemaless string value.
//! struct Shout;
//! impl Transformation for Shout {
//!     fn config_keys(&self) -> Vec<ConfigKey> { Vec::new() }
//!     fn configure(&mut self, _: &Config) -> Result<(), Vec<ConfigIssue>> { Ok(()) }
//!     fn apply(&mut self, mut record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError> {
//!         if let Some(serde_json::Value::String(s)) = &mut record.value {
//!             *s = s.to_uppercase();
//!         }
//!         Ok(Some(record))
//!     }
//! }
//! let plugin = TransformationPlugin::new(["com.example.Shout"], || Box::new(Shout) as Box<dyn Transformation>);
//! let mut shout = plugin.make();
//! let record = SourceRecord::builder("t").value("hi".into()).build();
//! assert_eq!(shout.apply(record)?.and_then(|r| r.value), Some("HI".into()));
//! # Ok::<(), ConnectError>(())
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::connector::{Config, ConfigIssue, ConfigKey};
use crate::error::ConnectError;
use crate::record::SourceRecord;

/// One transform of a chain (Kafka Connect's `Transformation<SourceRecord>`). Each task has its own
/// instances, so a transform may keep state (caches) without locking.
pub trait Transformation: Send {
    /// The keys it understands, without the `transforms.<alias>.` prefix.
    fn config_keys(&self) -> Vec<ConfigKey>;

    /// Configures it from its own keys (prefix removed).
    ///
    /// # Errors
    /// One issue per bad key, named without the prefix.
    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>>;

    /// Transforms one record. `Ok(None)` drops it: it goes nowhere, and its source offset is
    /// still committed (as Kafka Connect commits a filtered record's offset).
    ///
    /// # Errors
    /// The record cannot be transformed; the connector's `errors.tolerance` decides what happens
    /// (`none`: the task fails; `all`: the record is skipped). A retriable error is retried for up
    /// to `errors.retry.timeout` first.
    fn apply(&mut self, record: SourceRecord) -> Result<Option<SourceRecord>, ConnectError>;
}

/// A condition on a record that decides whether a transform applies (Kafka Connect's
/// `Predicate<SourceRecord>`).
pub trait Predicate: Send {
    /// The keys it understands, without the `predicates.<alias>.` prefix.
    fn config_keys(&self) -> Vec<ConfigKey>;

    /// Configures it from its own keys (prefix removed).
    ///
    /// # Errors
    /// One issue per bad key, named without the prefix.
    fn configure(&mut self, config: &Config) -> Result<(), Vec<ConfigIssue>>;

    /// Whether the condition holds for `record`.
    fn test(&self, record: &SourceRecord) -> bool;
}

/// The class names a plugin answers to, and which one is listed.
#[derive(Clone)]
struct Names(Vec<Cow<'static, str>>);

impl Names {
    fn new<N: Into<Cow<'static, str>>>(names: impl IntoIterator<Item = N>) -> Self {
        Self(names.into_iter().map(Into::into).collect())
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(AsRef::as_ref)
    }

    fn class(&self) -> &str {
        self.iter()
            .find(|n| n.contains('.'))
            .or_else(|| self.iter().next())
            .unwrap_or("")
    }
}

macro_rules! plugin {
    ($(#[$doc:meta])* $name:ident, $trait:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            names: Names,
            make: Arc<dyn Fn() -> Box<dyn $trait> + Send + Sync>,
        }

        impl $name {
            /// A plugin answering to `names` (exact match); the first name containing a `.` (a
            /// Java class name) is the one listed, else the first.
            pub fn new<N: Into<Cow<'static, str>>>(
                names: impl IntoIterator<Item = N>,
                make: impl Fn() -> Box<dyn $trait> + Send + Sync + 'static,
            ) -> Self {
                Self {
                    names: Names::new(names),
                    make: Arc::new(make),
                }
            }

            /// Every name the plugin answers to, in the order given.
            pub fn names(&self) -> impl Iterator<Item = &str> {
                self.names.iter()
            }

            /// A new, unconfigured instance.
            pub fn make(&self) -> Box<dyn $trait> {
                (self.make)()
            }

            /// The class name listed by `GET /connector-plugins?connectorsOnly=false`.
            pub fn class(&self) -> &str {
                self.names.class()
            }

            /// Whether `class` is one of the plugin's names (exact, case-sensitive match).
            pub fn answers_to(&self, class: &str) -> bool {
                self.names().any(|n| n == class)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("names", &self.names.0)
                    .finish_non_exhaustive()
            }
        }
    };
}

plugin!(
    /// A transformation plugin: the `transforms.<alias>.type` names it answers to and how to make
    /// one. Kafka Connect's key and value variants (`InsertField$Key`, `InsertField$Value`) are two
    /// plugins.
    TransformationPlugin,
    Transformation
);

plugin!(
    /// A predicate plugin: the `predicates.<alias>.type` names it answers to and how to make one.
    PredicatePlugin,
    Predicate
);
