//! The class names of the built-in connectors.

use ferry_api::{ConnectorPlugin, SourceConnector};

use crate::file::FileStreamSourceConnector;
use crate::sequence::SequenceSourceConnector;

/// The built-in connectors: the class names each answers to (`connector.class`), and its constructor.
///
/// `FileStreamSource` and `org.apache.kafka.connect.file.FileStreamSourceConnector` make a
/// [`FileStreamSourceConnector`]; `SequenceSource` makes a [`SequenceSourceConnector`].
pub fn builtin_connectors() -> Vec<ConnectorPlugin> {
    vec![
        ConnectorPlugin::new(
            [
                "FileStreamSource",
                "org.apache.kafka.connect.file.FileStreamSourceConnector",
            ],
            || Box::new(FileStreamSourceConnector::new()) as Box<dyn SourceConnector>,
        ),
        ConnectorPlugin::new(["SequenceSource"], || {
            Box::new(SequenceSourceConnector::new()) as Box<dyn SourceConnector>
        }),
    ]
}

/// The built-in connector with the class name `class` (exact match), if any.
pub fn builtin_connector(class: &str) -> Option<Box<dyn SourceConnector>> {
    builtin_connectors()
        .into_iter()
        .find(|p| p.answers_to(class))
        .map(|p| p.make())
}
