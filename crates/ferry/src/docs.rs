//! `ferry docs reference`: the book's generated reference pages (`docs/src/reference/generated/`).
//!
//! Every page is made from the definitions the worker itself uses, so it cannot drift from the code:
//! connector, transformation and predicate keys as `GET /connector-plugins/{plugin}/config` serves
//! them (a standalone herder answers, as over REST); the worker keys the worker parsers accept, with
//! the definitions of the offset stores and sinks that read them; the converter classes and settings
//! from the converter module's own table; the REST routes from the router's source.
//! `crates/ferry/tests/docs_reference.rs` fails when the checked-in pages differ from these.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use ferry_api::ConfigKey;
use ferry_herder::entities::ConfigKeyInfo;
use ferry_herder::{Herder, StandaloneHerder};
use ferry_plugin::{ConfigError, ConfigErrors, Properties};
use ferry_runtime::stores::MemoryConfigStore;
use ferry_runtime::{Worker, WorkerSettings};

use crate::Ferry;

/// The command that writes the pages, for messages and the pages' headers.
pub const REGENERATE: &str =
    "cargo run -p ferry -- docs reference --out docs/src/reference/generated";

/// The router's source: the REST route table is read from it (axum cannot list its routes).
const ROUTER_SOURCE: &str = include_str!("../../ferry-rest/src/lib.rs");
/// The file defining the Kafka sink's connector key constants (`pub const NAME: &str = "key";`),
/// whose doc comments describe the keys.
const CONNECTOR_KEY_SOURCE: &str = include_str!("../../ferry-kafka/src/connector_keys.rs");
/// The converter module, whose module documentation is the converter reference.
const CONVERTER_SOURCE: &str = include_str!("../../ferry-plugin/src/converter_config.rs");

/// Why the reference cannot be generated or written. Most say the generator no longer matches the
/// code it reads, and what to update.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocsError {
    /// The output directory cannot be created.
    #[error("cannot create the directory {}: {source}", dir.display())]
    CreateDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A page cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The page's file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A worker parser accepted the generator's probe key, so its accepted keys cannot be listed.
    #[error("the worker parser accepted the unknown key {0}")]
    ProbeAccepted(&'static str),
    /// A worker parser no longer lists its accepted keys with the first unknown key.
    #[error(
        "the worker parser did not list its accepted keys with the unknown key {0}; update \
         crates/ferry/src/docs.rs to the parser's new message"
    )]
    ProbeUnlisted(&'static str),
    /// A worker accepts a key no definition describes.
    #[error(
        "the worker accepts {0}, but no definition describes it: add it to the worker's key table \
         (COMMON_WORKER_KEYS, STANDALONE_KEYS, REST_KEYS, DISTRIBUTED_KEYS) or the keys() of the \
         store or sink that reads it"
    )]
    Undefined(String),
    /// The generator's Kafka worker file is refused.
    #[error("the reference generator's Kafka worker is refused: {0}")]
    KafkaWorker(ConfigErrors),
    /// A listed plugin's definitions cannot be read.
    #[error("the definitions of the listed plugin {class} cannot be read: {source}")]
    Plugin {
        /// The plugin's class.
        class: String,
        /// Why.
        source: ferry_herder::HerderError,
    },
    /// The REST router's source is not what the route reader expects.
    #[error("{0} in the REST router: update crates/ferry/src/docs.rs")]
    Router(&'static str),
    /// A route's method router is a name the reader cannot follow.
    #[error("the route {path} uses {name}, which is not a `let` of fn router")]
    RouteBinding {
        /// The route.
        path: String,
        /// The name.
        name: String,
    },
}

/// One generated page: its file name (relative to the output directory) and its Markdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The file name, e.g. `connectors.md`.
    pub file: String,
    /// The page's Markdown.
    pub text: String,
}

/// Every generated page, for the connectors, stores and sinks `ferry` registers.
///
/// # Errors
/// A definition cannot be read (a plugin listed without definitions, a worker parser that no longer
/// lists its keys): what failed, so the generator can be fixed.
pub fn reference_pages(ferry: &Ferry) -> Result<Vec<Page>, DocsError> {
    let herder = herder(ferry);
    Ok(vec![
        Page {
            file: "index.md".to_owned(),
            text: index_page(),
        },
        Page {
            file: "worker.md".to_owned(),
            text: worker_page(ferry)?,
        },
        Page {
            file: "connectors.md".to_owned(),
            text: connectors_page(ferry, &herder)?,
        },
        Page {
            file: "transforms.md".to_owned(),
            text: transforms_page(&herder)?,
        },
        Page {
            file: "converters.md".to_owned(),
            text: converters_page(),
        },
        Page {
            file: "rest.md".to_owned(),
            text: rest_page()?,
        },
    ])
}

/// Writes the pages into `out` (created if missing).
///
/// # Errors
/// A page cannot be written: the path and the OS error.
pub fn write_pages(out: &Path, pages: &[Page]) -> Result<(), DocsError> {
    std::fs::create_dir_all(out).map_err(|source| DocsError::CreateDir {
        dir: out.to_path_buf(),
        source,
    })?;
    for page in pages {
        let path = out.join(&page.file);
        std::fs::write(&path, &page.text).map_err(|source| DocsError::Write { path, source })?;
    }
    Ok(())
}

/// The pages in `dir` that differ from `pages` (missing, changed, or a stale extra `.md` file).
pub fn stale_pages(dir: &Path, pages: &[Page]) -> Vec<String> {
    let mut stale = Vec::new();
    for page in pages {
        match std::fs::read_to_string(dir.join(&page.file)) {
            Ok(text) if text == page.text => {}
            Ok(_) => stale.push(format!("{} differs", page.file)),
            Err(e) => stale.push(format!("{} cannot be read ({e})", page.file)),
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") && !pages.iter().any(|p| p.file == name) {
                stale.push(format!("{name} is not generated any more"));
            }
        }
    }
    stale.sort();
    stale
}

/// A standalone herder over memory stores: it answers the plugin questions exactly as the REST API
/// of `ferry standalone` does, without a listener, a file or a sink.
fn herder(ferry: &Ferry) -> StandaloneHerder {
    let store = Arc::new(ferry_offsets::MemoryStore::new());
    let worker = Worker::new(WorkerSettings::default(), store.clone(), Arc::new(NoSink));
    StandaloneHerder::new(
        worker,
        store,
        ferry.connector_plugins().to_vec(),
        "docs",
        Arc::new(MemoryConfigStore::new()),
    )
    .with_transforms(ferry.transform_registry().clone())
}

/// The herder's worker sink; nothing runs, so nothing is sent.
struct NoSink;

#[async_trait::async_trait]
impl ferry_plugin::sink::RecordSink for NoSink {
    fn describe(&self) -> String {
        "nothing (reference generator)".to_owned()
    }

    async fn send(
        &self,
        _record: &ferry_api::SourceRecord,
    ) -> Result<ferry_plugin::sink::PendingDelivery, ferry_plugin::sink::SinkError> {
        Err(ferry_plugin::sink::SinkError::new(
            "reference generator",
            ferry_plugin::sink::SinkErrorKind::Fatal,
            "the reference generator's herder runs no task",
        ))
    }

    async fn flush(
        &self,
        _timeout: std::time::Duration,
    ) -> Result<(), ferry_plugin::sink::SinkError> {
        Ok(())
    }
}

fn header(title: &str, source: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated by `{REGENERATE}` from {source}. Do not edit: \
         crates/ferry/tests/docs_reference.rs fails when this page is stale. -->\n\n"
    )
}

fn index_page() -> String {
    let mut s = header(
        "Generated configuration reference",
        "the code's definitions",
    );
    s.push_str(
        "Every page here is written by `ferry docs reference` from the definitions the worker itself \
         uses, and checked by a test, so a key listed here exists and a key that exists is listed.\n\n\
         - [Worker keys](worker.md): the keys `ferry standalone` and `ferry distributed` accept, and \
         the definitions of the offset stores and sinks.\n\
         - [Connector keys](connectors.md): every connector's keys, as \
         `GET /connector-plugins/{plugin}/config` lists them, and the keys every connector takes.\n\
         - [Transforms and predicates](transforms.md): every transformation's and predicate's keys.\n\
         - [Converters](converters.md): the converter classes and their settings.\n\
         - [REST routes](rest.md): every route of the REST API.\n\n\
         What each worker key means in context: [the worker and connector tables](../worker.md).\n\n",
    );
    let _ = writeln!(s, "Regenerate with `{REGENERATE}`.");
    s
}

/// Escapes text for a Markdown table cell: no line breaks, `|` escaped, and `<`/`>` outside code
/// spans written as entities (mdBook would take `<name>` for an HTML tag and drop it).
fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '|' => out.push_str("\\|"),
            '\n' | '\r' => out.push(' '),
            '<' if !in_code => out.push_str("&lt;"),
            '>' if !in_code => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    out
}

fn code(text: &str) -> String {
    if text.is_empty() {
        "`\"\"`".to_owned()
    } else if text.contains('`') {
        format!("`` {} ``", text.replace('|', "\\|"))
    } else {
        format!("`{}`", text.replace('|', "\\|"))
    }
}

/// A table of REST definitions (Kafka Connect's `ConfigKeyInfo`).
fn definitions_table(s: &mut String, keys: &[ConfigKeyInfo]) {
    s.push_str("| key | type | default | importance | description |\n|---|---|---|---|---|\n");
    for k in keys {
        let default = match (&k.default_value, k.required) {
            (_, true) => "required".to_owned(),
            (Some(d), false) => code(d),
            (None, false) => "—".to_owned(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            code(&k.name),
            k.kind,
            default,
            k.importance,
            cell(&k.documentation)
        );
    }
    s.push('\n');
}

/// A table of plugin definitions (`ConfigKey`: the stores' and sinks' keys).
fn config_key_table(s: &mut String, keys: &[ConfigKey]) {
    s.push_str("| key | type | default | importance | description |\n|---|---|---|---|---|\n");
    for k in keys {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {}{} |",
            code(k.name),
            k.config_type().name(),
            default_cell(k),
            k.config_importance().name(),
            cell(k.doc),
            secret_note(k)
        );
    }
    s.push('\n');
}

/// The keys a worker parser lists as accepted: it lists them with the first unknown key, so a
/// properties file holding only a key no parser knows makes it say them all.
fn accepted_keys(
    parse: impl FnOnce(&Properties) -> Result<(), Vec<ConfigError>>,
) -> Result<Vec<String>, DocsError> {
    const PROBE: &str = "zz.ferry.docs.reference.probe.zz";
    let props = Properties::from_pairs("<reference generator>", [(PROBE, "1")]);
    let errors = match parse(&props) {
        Ok(()) => {
            return Err(DocsError::ProbeAccepted(PROBE));
        }
        Err(errors) => errors,
    };
    for error in errors {
        if let ConfigError::UnknownKey { key, hint, .. } = error
            && key == PROBE
            && let Some(list) = hint.strip_prefix("accepted keys: ")
        {
            let mut keys: Vec<String> = list.split(", ").map(str::to_owned).collect();
            keys.sort();
            keys.dedup();
            return Ok(keys);
        }
    }
    Err(DocsError::ProbeUnlisted(PROBE))
}

/// Every `pub const NAME: &str = "key";` of `source` that has a doc comment: the key and its doc.
fn const_keys(source: &str) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let mut doc: Vec<&str> = Vec::new();
    for line in source.lines() {
        let line = line.trim();
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
            continue;
        }
        let key = line
            .strip_prefix("pub ")
            .or_else(|| line.strip_prefix("pub(crate) "))
            .or_else(|| line.strip_prefix("pub(super) "))
            .and_then(|l| l.strip_prefix("const "))
            .and_then(|l| l.split_once(": &str = \""))
            .and_then(|(_, value)| value.strip_suffix("\";"));
        if let Some(key) = key
            && !doc.is_empty()
        {
            keys.push((key.to_owned(), doc.join(" ")));
        }
        doc.clear();
    }
    keys
}

/// The connector keys the Kafka sink reads (`topic.creation.*`, `producer.override.*`, …): the key
/// constants of `ferry-kafka/src/connector_keys.rs` that the Kafka sink says it handles.
fn kafka_sink_connector_keys(ferry: &Ferry) -> Result<Vec<(String, String)>, DocsError> {
    let worker = Properties::from_pairs(
        "<reference generator>",
        [
            ("bootstrap.servers", "localhost:9092"),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", "connect-offsets"),
        ],
    );
    let worker = ferry
        .parse_worker(&worker)
        .map_err(DocsError::KafkaWorker)?;
    let spec = worker.sink.spec();
    Ok(const_keys(CONNECTOR_KEY_SOURCE)
        .into_iter()
        // `topic.creation.enable` is the worker's switch, though it starts like a connector key.
        .filter(|(_, doc)| !doc.starts_with("Worker key"))
        .filter_map(|(key, doc)| {
            // A prefix (`topic.creation.`) is handled when a key under it is.
            let (shown, probe) = match key.strip_suffix('.') {
                Some(_) => (format!("{key}*"), format!("{key}x")),
                None => (key.clone(), key),
            };
            spec.handles_connector_key(&probe).then_some((shown, doc))
        })
        .collect())
}

/// The accepted keys with their definitions; a prefix (`producer.*`) points at the worker tables.
///
/// # Errors
/// An accepted key that no definition describes: the generator names it, so it gets one.
fn key_table(s: &mut String, keys: &[String], definitions: &[ConfigKey]) -> Result<(), DocsError> {
    s.push_str("| key | type | default | importance | description |\n|---|---|---|---|---|\n");
    for k in keys {
        if k.ends_with('*') {
            let _ = writeln!(
                s,
                "| {} | | | | every key with this prefix: see [the worker tables](../worker.md) |",
                code(k)
            );
            continue;
        }
        let Some(key) = definitions.iter().find(|d| d.name == k) else {
            return Err(DocsError::Undefined(k.clone()));
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {}{} |",
            code(k),
            key.config_type().name(),
            default_cell(key),
            key.config_importance().name(),
            cell(key.doc),
            secret_note(key)
        );
    }
    s.push('\n');
    Ok(())
}

/// A key's default for a table: `required`, the default in code, or a dash.
fn default_cell(key: &ConfigKey) -> String {
    match (key.default, key.required) {
        (_, true) => "required".to_owned(),
        (Some(d), false) => code(d),
        (None, false) => "—".to_owned(),
    }
}

/// " (secret: never shown)" for a key whose value is never shown.
fn secret_note(key: &ConfigKey) -> &'static str {
    match key.secrecy() {
        ferry_api::Secrecy::Public => "",
        _ => " (secret: never shown)",
    }
}

fn worker_page(ferry: &Ferry) -> Result<String, DocsError> {
    let mut s = header(
        "Worker keys",
        "the worker key definitions, the worker parsers' accepted keys and the offset store and sink \
         definitions",
    );
    s.push_str(
        "What each key means, with its default: [the worker tables](../worker.md) and \
         [Distributed workers](../../guide/distributed.md). A key that is not listed here is refused \
         at start, naming the file and line.\n\n## `ferry standalone`\n\n",
    );
    let plugins = ferry.worker_plugins();
    let builtin_store: Arc<dyn ferry_plugin::OffsetStorePlugin> =
        Arc::new(ferry_runtime::FileStorePlugin);
    let builtin_sinks: [Arc<dyn ferry_plugin::SinkPlugin>; 2] = [
        Arc::new(ferry_runtime::StdoutSinkPlugin),
        Arc::new(ferry_runtime::FileSinkPlugin),
    ];
    // The worker's own tables first: a key a plugin also lists (`bootstrap.servers`) is described as
    // the worker reads it.
    let definitions: Vec<ConfigKey> = [
        ferry_runtime::config::COMMON_WORKER_KEYS,
        ferry_runtime::config::STANDALONE_KEYS,
        ferry_runtime::config::REST_KEYS,
        crate::distributed::DISTRIBUTED_KEYS,
    ]
    .into_iter()
    .flatten()
    .cloned()
    .chain(
        std::iter::once(&builtin_store)
            .chain(plugins.stores())
            .flat_map(|p| p.keys()),
    )
    .chain(
        plugins
            .sinks()
            .iter()
            .chain(&builtin_sinks)
            .flat_map(|p| p.keys()),
    )
    .collect();
    let standalone = accepted_keys(|props| {
        ferry
            .parse_worker(props)
            .map(|_| ())
            .map_err(|errors| errors.0)
    })?;
    key_table(&mut s, &standalone, &definitions)?;
    s.push_str("## `ferry distributed`\n\n");
    let distributed = accepted_keys(|props| {
        crate::DistributedConfig::from_properties(props)
            .map(|_| ())
            .map_err(|errors| errors.0)
    })?;
    key_table(&mut s, &distributed, &definitions)?;
    s.push_str("## Offset stores (`offset.storage`)\n\n");
    for store in std::iter::once(&builtin_store).chain(plugins.stores()) {
        let _ = writeln!(s, "### `offset.storage={}`\n", store.name());
        config_key_table(&mut s, &store.keys());
        prefixes_line(&mut s, store.prefixes());
    }
    s.push_str("## Sinks (`sink`)\n\n");
    for sink in plugins.sinks().iter().chain(&builtin_sinks) {
        let _ = writeln!(s, "### `sink={}`\n", sink.name());
        let keys = sink.keys();
        if keys.is_empty() {
            s.push_str("No keys of its own.\n\n");
        } else {
            config_key_table(&mut s, &keys);
        }
        prefixes_line(&mut s, sink.prefixes());
    }
    Ok(s)
}

/// "Also every key starting with …" for a plugin's key prefixes, if it has any.
fn prefixes_line(s: &mut String, prefixes: &[&str]) {
    if prefixes.is_empty() {
        return;
    }
    let prefixes: Vec<String> = prefixes.iter().map(|p| code(&format!("{p}*"))).collect();
    let _ = writeln!(s, "Also every key starting with {}.\n", prefixes.join(", "));
}

fn plugin_keys(herder: &StandaloneHerder, class: &str) -> Result<Vec<ConfigKeyInfo>, DocsError> {
    herder
        .plugin_config(class)
        .map_err(|source| DocsError::Plugin {
            class: class.to_owned(),
            source,
        })
}

fn connectors_page(ferry: &Ferry, herder: &StandaloneHerder) -> Result<String, DocsError> {
    let mut s = header(
        "Connector keys",
        "the definitions `GET /connector-plugins/{plugin}/config` serves",
    );
    s.push_str(
        "Each connector's own keys, then the keys every connector takes (Kafka Connect's groups). \
         How the Kafka keys work: [Into Kafka](../../guide/kafka.md) and \
         [Delivery guarantees](../../concepts/delivery.md).\n\n",
    );
    let mut common: Option<Vec<ConfigKeyInfo>> = None;
    for plugin in Herder::plugins(herder) {
        let keys = plugin_keys(herder, &plugin.class)?;
        let (own, framework): (Vec<_>, Vec<_>) = keys.into_iter().partition(|k| k.group.is_none());
        let _ = writeln!(s, "## `{}` (version {})\n", plugin.class, plugin.version);
        if own.is_empty() {
            s.push_str("No keys of its own.\n\n");
        } else {
            definitions_table(&mut s, &own);
        }
        common.get_or_insert(framework);
    }
    s.push_str(
        "## Keys the Kafka sink reads\n\nWith `sink=kafka` (a worker with `bootstrap.servers`), a connector \
         may also set these (from `ferry-kafka/src/connector_keys.rs`):\n\n\
         | key | description |\n|---|---|\n",
    );
    for (key, doc) in kafka_sink_connector_keys(ferry)? {
        let _ = writeln!(s, "| {} | {} |", code(&key), cell(&doc));
    }
    s.push('\n');
    if let Some(common) = common {
        s.push_str("## Every connector\n\n");
        let mut groups: Vec<&'static str> = Vec::new();
        for k in &common {
            if let Some(g) = k.group
                && !groups.contains(&g)
            {
                groups.push(g);
            }
        }
        for group in groups {
            let _ = writeln!(s, "### {group}\n");
            let keys: Vec<ConfigKeyInfo> = common
                .iter()
                .filter(|k| k.group == Some(group))
                .cloned()
                .collect();
            definitions_table(&mut s, &keys);
        }
    }
    Ok(s)
}

fn transforms_page(herder: &StandaloneHerder) -> Result<String, DocsError> {
    let mut s = header(
        "Transforms and predicates",
        "the definitions `GET /connector-plugins/{plugin}/config` serves",
    );
    s.push_str(
        "Set as `transforms.<alias>.<key>` and `predicates.<alias>.<key>`; how they chain: \
         [Transforms and predicates](../../guide/transforms.md).\n\n",
    );
    let plugins = herder.transform_plugins();
    for (kind, title) in [
        ("transformation", "Transformations"),
        ("predicate", "Predicates"),
    ] {
        let _ = writeln!(s, "## {title}\n");
        for plugin in plugins.iter().filter(|p| p.kind == kind) {
            let _ = writeln!(s, "### `{}`\n", plugin.class);
            let keys = plugin_keys(herder, &plugin.class)?;
            if keys.is_empty() {
                s.push_str("No keys of its own.\n\n");
            } else {
                definitions_table(&mut s, &keys);
            }
        }
    }
    Ok(s)
}

fn converters_page() -> String {
    let mut s = header(
        "Converters",
        "the converter module's documentation (`ferry-plugin`)",
    );
    s.push_str(
        "Worker keys `key.converter`, `value.converter`, `header.converter`, with settings as \
         `<role>.converter.<setting>`; a connector may set its own.\n\n",
    );
    for line in CONVERTER_SOURCE.lines() {
        let Some(text) = line.strip_prefix("//!") else {
            break;
        };
        s.push_str(text.strip_prefix(' ').unwrap_or(text));
        s.push('\n');
    }
    s
}

/// One route of the router: its path, and each method with its handler.
#[derive(Debug, PartialEq, Eq)]
struct Route {
    path: String,
    methods: Vec<(String, String)>,
}

/// The routes of `fn router` in the REST module's source: `.route("<path>", <method router>)`, where
/// a method router is built from `get(h)`, `post(h)`, `.patch(h)`, … or is a `let` of the function.
fn routes(source: &str) -> Result<Vec<Route>, DocsError> {
    let start = source
        .find("fn router(")
        .ok_or(DocsError::Router("the REST module has no `fn router(`"))?;
    let body = &source[start..];
    let end = body.find("\n}\n").unwrap_or(body.len());
    let body = &body[..end];
    let mut routes = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let args = balanced(rest).ok_or(DocsError::Router("an unbalanced `.route(`"))?;
        let Some(path) = args
            .trim_start()
            .strip_prefix('"')
            .and_then(|p| p.split('"').next())
        else {
            continue; // a `route_layer(` or another call, not a path
        };
        let router = args.split_once(',').map(|(_, r)| r.trim()).unwrap_or("");
        let expr = match router.split(['.', '(']).next() {
            Some(name) if !name.is_empty() && !is_method(name) => let_binding(body, name)
                .ok_or_else(|| DocsError::RouteBinding {
                    path: path.to_owned(),
                    name: name.to_owned(),
                })?,
            _ => router.to_owned(),
        };
        routes.push(Route {
            path: path.to_owned(),
            methods: methods(&expr),
        });
    }
    if routes.is_empty() {
        return Err(DocsError::Router("no route found"));
    }
    Ok(routes)
}

fn is_method(name: &str) -> bool {
    matches!(name, "get" | "post" | "put" | "patch" | "delete")
}

/// The text up to the parenthesis closing the one just opened.
fn balanced(text: &str) -> Option<&str> {
    let mut depth = 1usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[..i]);
                }
            }
            _ => {}
        }
    }
    None
}

fn let_binding(body: &str, name: &str) -> Option<String> {
    let at = body.find(&format!("let {name} = "))?;
    let expr = &body[at + format!("let {name} = ").len()..];
    Some(expr[..expr.find(';')?].to_owned())
}

/// `get(h::list).merge(post(h::create)…)` → `[("GET", "h::list"), ("POST", "h::create")]`.
fn methods(expr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let bytes = expr.as_bytes();
    for method in ["get", "post", "put", "patch", "delete"] {
        let needle = format!("{method}(");
        let mut from = 0;
        while let Some(i) = expr[from..].find(&needle) {
            let at = from + i;
            from = at + needle.len();
            // A whole word: not `forward::put(` or `reset_put(`.
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':')
            {
                continue;
            }
            if let Some(handler) = balanced(&expr[from..]) {
                found.push((at, method.to_uppercase(), handler.trim().to_owned()));
            }
        }
    }
    found.sort();
    found.into_iter().map(|(_, m, h)| (m, h)).collect()
}

fn rest_page() -> Result<String, DocsError> {
    let mut s = header(
        "REST routes",
        "the router in `crates/ferry-rest/src/lib.rs`",
    );
    s.push_str(
        "Every route `ferry standalone` and `ferry distributed` serve (each also answers with a trailing \
         slash). What each answers: [The REST API](../../guide/rest.md).\n\n\
         | method | path | handler |\n|---|---|---|\n",
    );
    for route in routes(ROUTER_SOURCE)? {
        for (method, handler) in &route.methods {
            let _ = writeln!(
                s,
                "| {method} | {} | {} |",
                code(&route.path),
                code(handler)
            );
        }
    }
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_are_read_from_a_method_router() {
        assert_eq!(
            methods("get(h::info).merge(delete(h::delete).route_layer(write(Scope::Cluster)))"),
            vec![
                ("GET".to_owned(), "h::info".to_owned()),
                ("DELETE".to_owned(), "h::delete".to_owned())
            ]
        );
        assert_eq!(
            methods("put(h::put_config).patch(endpoints::patch_config)"),
            vec![
                ("PUT".to_owned(), "h::put_config".to_owned()),
                ("PATCH".to_owned(), "endpoints::patch_config".to_owned())
            ]
        );
    }

    #[test]
    fn the_router_source_has_routes() {
        let routes = routes(ROUTER_SOURCE).unwrap_or_else(|e| panic!("{e}"));
        assert!(routes.iter().any(|r| r.path == "/connectors/{name}/offsets"
            && r.methods.iter().any(|(m, _)| m == "PATCH")));
    }

    #[test]
    fn cells_escape_html_outside_code() {
        assert_eq!(cell("a <b> `<c>` | d"), "a &lt;b&gt; `<c>` \\| d");
    }

    #[test]
    fn an_accepted_worker_key_without_a_definition_fails_the_generator() {
        let definitions = [ConfigKey::optional("sink", None, "where records go")];
        let mut page = String::new();
        let keys = ["sink".to_owned(), "producer.*".to_owned()];
        key_table(&mut page, &keys, &definitions).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            page.contains("| `sink` | STRING | — | MEDIUM | where records go |"),
            "{page}"
        );
        assert!(page.contains("| `producer.*` |"), "{page}");

        let keys = ["sink".to_owned(), "sink.colour".to_owned()];
        let error = key_table(&mut String::new(), &keys, &definitions)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("the worker accepts sink.colour, but no definition describes it"),
            "{error}"
        );
    }
}
