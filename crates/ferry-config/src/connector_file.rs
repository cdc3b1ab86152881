//! A connector file given on the command line, read as Kafka Connect's standalone reads it: JSON
//! (`{"name": …, "config": {…}}` or a flat map of values) or a properties file.

use std::path::Path;

use serde_json::{Map, Value};

use ferry_plugin::{ConfigError, Properties};

/// Reads a connector file into [`Properties`].
///
/// Kafka Connect (`ConnectStandalone.parseConnectorConfigurationFile`) decides by content, not by
/// extension: it tries JSON first and falls back to properties. Here a file whose first non-blank
/// character is `{` is JSON (no useful properties key starts with `{`, and a JSON syntax error with
/// its line and column helps more than a properties file with a key `{`); anything else is a
/// properties file ([`Properties::parse`]).
///
/// JSON shapes, as in Kafka Connect:
/// - a flat map: every value a string; numbers and booleans become their text (Jackson's coercion
///   into `Map<String, String>`); `name` is required there by the connector config itself;
/// - `{"name": …, "config": {…}}`: `name` is copied into `config`; a `config.name` that differs is
///   an error. `initial_state` other than `RUNNING` is refused (Ferry starts command-line connectors
///   running); other top-level keys are ignored, as Kafka Connect ignores them.
///
/// # Errors
/// [`ConfigError::Io`] if the file cannot be read, [`ConfigError::Parse`] naming the file (and the
/// line and column for a JSON syntax error) for malformed JSON, a `null`, object or array value, or
/// disagreeing names.
pub fn load_connector_file(path: impl AsRef<Path>) -> Result<Properties, ConfigError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse_json(path, text),
        _ => Properties::parse(path, &bytes),
    }
}

fn parse_json(path: &Path, text: &[u8]) -> Result<Properties, ConfigError> {
    let parse_error = |line: Option<usize>, message: String| ConfigError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let root: Map<String, Value> = serde_json::from_slice(text).map_err(|e| {
        // serde_json's message ends with "at line L column C"; the line goes in `path:line`.
        parse_error(
            Some(e.line()).filter(|&l| l > 0),
            format!(
                "not a valid JSON connector file (column {}): {}; write {{\"name\": \"…\", \"config\": {{…}}}} \
                 or a flat map of string values",
                e.column(),
                strip_position(&e.to_string())
            ),
        )
    })?;
    match root.get("config") {
        Some(Value::Object(config)) => {
            let mut pairs = flat_pairs(path, config, "config.")?;
            let outer = match root.get("name") {
                None => None,
                Some(Value::String(name)) => Some(name.clone()),
                Some(_) => {
                    return Err(parse_error(
                        None,
                        "\"name\" must be a string (the connector's name)".to_string(),
                    ));
                }
            };
            if let Some(state) = root.get("initial_state")
                && state.as_str() != Some("RUNNING")
            {
                return Err(parse_error(
                    None,
                    format!(
                        "\"initial_state\": {state} is not supported for a connector file; Ferry starts it \
                         RUNNING (remove the key, or create the connector over REST and pause or stop it)"
                    ),
                ));
            }
            for key in root.keys() {
                if !matches!(key.as_str(), "name" | "config" | "initial_state") {
                    tracing::warn!(file = %path.display(), key = %key, "{}: top-level key {key:?} is ignored (as Kafka Connect ignores it)", path.display());
                }
            }
            let inner = pairs.iter().find(|(k, _)| k == "name").map(|(_, v)| v);
            match (outer, inner) {
                (Some(outer), Some(inner)) if &outer != inner => {
                    return Err(parse_error(
                        None,
                        format!(
                            "\"name\" is {outer:?} but \"config\".\"name\" is {inner:?}; they must agree (or \
                             leave one out)"
                        ),
                    ));
                }
                (Some(outer), None) => pairs.insert(0, ("name".to_string(), outer)),
                _ => {}
            }
            Ok(Properties::from_pairs(path, pairs))
        }
        Some(_) if !root.contains_key("connector.class") => Err(parse_error(
            None,
            "\"config\" must be an object of connector configuration keys".to_string(),
        )),
        _ => Ok(Properties::from_pairs(path, flat_pairs(path, &root, "")?)),
    }
}

/// The keys and values of a flat JSON map; numbers and booleans as their text.
fn flat_pairs(
    path: &Path,
    map: &Map<String, Value>,
    prefix: &str,
) -> Result<Vec<(String, String)>, ConfigError> {
    map.iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    let kind = match other {
                        Value::Null => "null",
                        Value::Array(_) => "an array",
                        _ => "an object",
                    };
                    return Err(ConfigError::Parse {
                        path: path.to_path_buf(),
                        line: None,
                        message: format!(
                            "the value of {prefix}{key:?} is {kind}; a connector configuration value must be a \
                             string (numbers and booleans are read as their text)"
                        ),
                    });
                }
            };
            Ok((key.clone(), text))
        })
        .collect()
}

/// serde_json's message without its trailing " at line L column C" (the caller shows the position).
fn strip_position(message: &str) -> &str {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Properties, ConfigError> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("ferry-connector-file-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("conn.json");
        std::fs::write(&file, text).unwrap();
        let result = load_connector_file(&file);
        std::fs::remove_dir_all(&dir).unwrap();
        result
    }

    #[test]
    fn flat_map_numbers_and_booleans_become_text() {
        let p = load(r#"{"name": "a", "tasks.max": 2, "x.enable": true, "topic": "t"}"#).unwrap();
        assert_eq!(p.get("name"), Some("a"));
        assert_eq!(p.get("tasks.max"), Some("2"));
        assert_eq!(p.get("x.enable"), Some("true"));
        assert_eq!(p.get("topic"), Some("t"));
    }

    #[test]
    fn request_shape_copies_the_name_into_the_config() {
        let p = load(r#"{"name": "a", "config": {"topic": "t", "tasks.max": 1}}"#).unwrap();
        assert_eq!(p.get("name"), Some("a"));
        assert_eq!(p.get("tasks.max"), Some("1"));
        let p = load(r#"{"name": "a", "config": {"name": "a", "topic": "t"}}"#).unwrap();
        assert_eq!(p.get("name"), Some("a"));
    }

    #[test]
    fn disagreeing_names_are_refused() {
        let e = load(r#"{"name": "a", "config": {"name": "b"}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("conn.json") && e.contains("\"a\"") && e.contains("\"b\""),
            "{e}"
        );
    }

    #[test]
    fn null_object_and_array_values_are_refused_with_the_key() {
        for (text, key) in [
            (r#"{"name": "a", "topic": null}"#, "\"topic\""),
            (
                r#"{"name": "a", "config": {"topic": [1]}}"#,
                "config.\"topic\"",
            ),
            (
                r#"{"name": "a", "topic": {"x": 1}, "connector.class": "C"}"#,
                "\"topic\"",
            ),
        ] {
            let e = load(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let e = load("{\n  \"name\": \"a\",\n  \"topic\": \n}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("conn.json:4") && e.contains("column 1"), "{e}");
    }

    #[test]
    fn other_text_is_a_properties_file() {
        let p = load("# a comment\nname=a\ntopic: t\n").unwrap();
        assert_eq!(p.get("topic"), Some("t"));
        assert_eq!(p.line_of("name"), Some(2));
    }

    #[test]
    fn initial_state_other_than_running_is_refused() {
        let e = load(r#"{"name": "a", "config": {}, "initial_state": "PAUSED"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("initial_state"), "{e}");
        load(r#"{"name": "a", "config": {}, "initial_state": "RUNNING"}"#).unwrap();
    }
}
