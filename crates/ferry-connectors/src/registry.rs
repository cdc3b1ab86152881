//! The class names of the built-in connectors.

use ferry_api::SourceConnector;

use crate::file::FileStreamSourceConnector;
use crate::sequence::SequenceSourceConnector;

/// Makes a connector instance.
pub type ConnectorFactory = fn() -> Box<dyn SourceConnector>;

fn file_stream_source() -> Box<dyn SourceConnector> {
    Box::new(FileStreamSourceConnector::new())
}

fn sequence_source() -> Box<dyn SourceConnector> {
    Box::new(SequenceSourceConnector::new())
}

/// The built-in connectors: the class names each answers to (`connector.class`), and its constructor.
///
/// `FileStreamSource` and `org.apache.kafka.connect.file.FileStreamSourceConnector` make a
/// [`FileStreamSourceConnector`]; `SequenceSource` makes a [`SequenceSourceConnector`].
pub fn builtin_connectors() -> Vec<(&'static [&'static str], ConnectorFactory)> {
    vec![
        (
            &[
                "FileStreamSource",
                "org.apache.kafka.connect.file.FileStreamSourceConnector",
            ],
            file_stream_source,
        ),
        (&["SequenceSource"], sequence_source),
    ]
}

/// The built-in connector with the class name `class` (exact match), if any.
pub fn builtin_connector(class: &str) -> Option<Box<dyn SourceConnector>> {
    builtin_connectors()
        .into_iter()
        .find(|(names, _)| names.contains(&class))
        .map(|(_, make)| make())
}
