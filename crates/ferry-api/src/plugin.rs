//! The one connector factory: the class names a connector answers to and how to make one.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::connector::SourceConnector;

/// Makes a connector instance.
type Make = Arc<dyn Fn() -> Box<dyn SourceConnector> + Send + Sync>;

/// A connector plugin: the `connector.class` names it answers to (exact match) and how to make one.
///
/// ```
/// use ferry_api::{ConnectorPlugin, SourceConnector};
/// # use ferry_api::{Config, ConfigIssue, ConfigKey, ConnectError, SourceTask};
/// # struct Counter;
/// # impl SourceConnector for Counter {
/// #     fn config_keys(&self) -> Vec<ConfigKey> { Vec::new() }
/// #     fn validate(&self, _: &Config) -> Vec<ConfigIssue> { Vec::new() }
/// #     fn task_configs(&self, _: &Config, _: usize) -> Result<Vec<Config>, ConnectError> { Ok(Vec::new()) }
/// #     fn create_task(&self) -> Box<dyn SourceTask> { unreachable!("the example starts no task") }
/// # }
/// let plugin = ConnectorPlugin::new(["Counter", "com.example.Counter"], || {
///     Box::new(Counter) as Box<dyn SourceConnector>
/// });
/// assert_eq!(plugin.class(), "com.example.Counter");
/// assert!(plugin.answers_to("Counter") && !plugin.answers_to("counter"));
/// ```
#[derive(Clone)]
pub struct ConnectorPlugin {
    names: Vec<Cow<'static, str>>,
    make: Make,
}

impl ConnectorPlugin {
    /// A plugin answering to `names` (exact match); the first name containing a `.` (a Java class
    /// name) is the one listed, else the first.
    pub fn new<N: Into<Cow<'static, str>>>(
        names: impl IntoIterator<Item = N>,
        make: impl Fn() -> Box<dyn SourceConnector> + Send + Sync + 'static,
    ) -> Self {
        Self {
            names: names.into_iter().map(Into::into).collect(),
            make: Arc::new(make),
        }
    }

    /// Every name the plugin answers to, in the order given.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(AsRef::as_ref)
    }

    /// A new connector instance.
    pub fn make(&self) -> Box<dyn SourceConnector> {
        (self.make)()
    }

    /// The class name listed by `GET /connector-plugins`: the first name with a `.`, else the first.
    pub fn class(&self) -> &str {
        self.names()
            .find(|n| n.contains('.'))
            .or_else(|| self.names().next())
            .unwrap_or("")
    }

    /// Whether `class` is one of the plugin's names (exact, case-sensitive match).
    pub fn answers_to(&self, class: &str) -> bool {
        self.names().any(|n| n == class)
    }
}

impl fmt::Debug for ConnectorPlugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectorPlugin")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}
