//! Every copy-paste block of the README and the book, and every relative link, checked so they cannot
//! rot.
//!
//! Blocks are found with pulldown-cmark; `{{#include path}}` lines (mdBook's) are replaced by the file
//! they name. By the block's info string:
//!
//! - `properties`: parsed with Ferry's own parsers. A block with `connector.class` is a connector and
//!   must pass the full check `ferry standalone` makes at start (with a Kafka sink, so the Kafka
//!   connector keys count); any other block is a worker snippet that the standalone or the
//!   distributed worker parser must accept, missing required keys aside (snippets show only the keys
//!   they are about).
//!   `properties paths`: the same, except that the files it names (certificates) need not exist.
//! - `json`: a connector (`{"name","config"}` or flat), checked as above.
//! - `sh` (no tag): runs here. Each line is either a `ferry standalone …` run (`cargo run … -p ferry --`
//!   becomes the test's `ferry` binary), run fully in a temporary copy of the example's directory
//!   until every input line reached the sink, or a `./scripts/…` command, which must exist and be
//!   executable (it is not run: `./scripts/test` is the suite itself).
//! - `sh kafka`, `sh postgres`, `sh rest`, `sh synopsis`: need a broker, a database, a running worker,
//!   or hold placeholders. Checked, not run: every `ferry …` subcommand exists (`--help` answers), every
//!   `examples/…` path exists, every `--data @file` body is a valid connector. Their paths run fully in
//!   the Kafka, PostgreSQL and REST process tests (`distributed.rs`, `postgres_kafka_example.rs`,
//!   `rest_api.rs`, …), which this test does not repeat.
//! - `rust` blocks (Contributing) are API sketches, and blocks without a language are diagrams or
//!   output: not examples.
//!
//! Any other info string fails, so a new kind of block gets a check before it is published.

mod support;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use ferry::Ferry;
use ferry_runtime::config::{ConfigError, ConnectorConfig, Properties, load_connector_file};
use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("the repository root cannot be found: {e}"))
}

/// The README and every page of the book (the generated reference included: its links count too).
fn markdown_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A fenced block: where it is, its info string, and its text with includes resolved.
struct Block {
    at: String,
    info: String,
    text: String,
}

/// mdBook's `{{#include path}}` (whole file), relative to the page.
fn resolve_includes(page: &Path, text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        match line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|l| l.strip_suffix("}}"))
        {
            Some(target) => {
                let path = page.parent().unwrap_or(Path::new(".")).join(target.trim());
                out.push_str(&read(&path));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

fn blocks(page: &Path) -> Vec<Block> {
    let source = read(page);
    let mut found = Vec::new();
    let mut current: Option<(String, usize, String)> = None;
    for (event, range) in Parser::new(&source).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                current = Some((info.to_string(), range.start, String::new()));
            }
            Event::Text(text) => {
                if let Some((_, _, body)) = current.as_mut() {
                    body.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((info, start, body)) = current.take() {
                    let line = source[..start].lines().count() + 1;
                    found.push(Block {
                        at: format!("{}:{line}", relative(page)),
                        info: info.trim().to_owned(),
                        text: resolve_includes(page, &body),
                    });
                }
            }
            _ => {}
        }
    }
    found
}

/// Checks a connector configuration as `ferry standalone` checks a connector file at start, with a
/// Kafka sink (whose connector keys, `topic.creation.*` and `producer.override.*`, then count).
fn check_connector(ferry: &Ferry, props: &Properties) -> Result<(), String> {
    let worker = Properties::from_pairs(
        "<kafka worker>",
        [
            ("bootstrap.servers", "localhost:9092"),
            ("offset.storage", "kafka"),
            ("offset.storage.topic", "connect-offsets"),
        ],
    );
    let worker = ferry
        .parse_worker(&worker)
        .map_err(|e| format!("the test's Kafka worker is refused: {e}"))?;
    ConnectorConfig::from_properties_with(
        props,
        |class| ferry.resolve_connector(class),
        ferry.transform_registry(),
        Some(worker.sink.spec().as_ref()),
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// What is wrong with a worker snippet for both worker kinds: `Ok` when the standalone or the
/// distributed parser finds nothing wrong but missing required keys (snippets show only the keys
/// they are about), else the problems the standalone parser found.
fn worker_snippet_problems(
    ferry: &Ferry,
    props: &Properties,
    paths: bool,
) -> Result<(), Vec<String>> {
    let problems = |errors: Vec<ConfigError>| -> Vec<String> {
        errors
            .into_iter()
            .filter(|e| !matches!(e, ConfigError::Missing { .. }))
            .map(|e| e.to_string())
            // `properties paths`: the files named are the reader's (certificates), not in the tree.
            .filter(|e| !(paths && e.contains("No such file or directory")))
            .collect()
    };
    let standalone = ferry
        .parse_worker(props)
        .map_or_else(|e| problems(e.0), |_| Vec::new());
    let distributed = ferry::DistributedConfig::from_properties(props)
        .map_or_else(|e| problems(e.0), |_| Vec::new());
    if standalone.is_empty() || distributed.is_empty() {
        Ok(())
    } else {
        Err(standalone)
    }
}

fn check_properties(ferry: &Ferry, block: &Block, paths: bool) -> Result<(), String> {
    let props = Properties::parse(&block.at, block.text.as_bytes()).map_err(|e| e.to_string())?;
    if props.get("connector.class").is_some() {
        return check_connector(ferry, &props);
    }
    worker_snippet_problems(ferry, &props, paths).map_err(|problems| {
        format!(
            "neither worker accepts it (missing keys aside): {}",
            problems.join("; ")
        )
    })
}

fn check_json(ferry: &Ferry, at: &str, text: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let file = dir.path().join("connector.json");
    std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let props = load_connector_file(&file).map_err(|e| format!("{at}: {e}"))?;
    check_connector(ferry, &props)
}

/// The words of a shell line, quotes removed (enough for the documented commands).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The shell lines of a block: continuations joined, comments and blank lines left out.
fn shell_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let full = std::mem::take(&mut pending);
        let code = match full.find(" #") {
            Some(i) => full[..i].to_owned(),
            None => full,
        };
        if !code.trim().is_empty() && !code.trim_start().starts_with('#') {
            lines.push(code.trim().to_owned());
        }
    }
    lines
}

/// The `ferry` arguments of a command (`ferry …`, `target/release/ferry …`, `cargo run … -p ferry -- …`).
fn ferry_args(command: &[String]) -> Option<Vec<String>> {
    let first = command.first()?;
    if first == "ferry" || first.ends_with("/ferry") {
        return Some(command[1..].to_vec());
    }
    if first == "cargo" && command.get(1).is_some_and(|w| w == "run") {
        let sep = command.iter().position(|w| w == "--")?;
        return Some(command[sep + 1..].to_vec());
    }
    None
}

/// The commands of a line (`a && b; c | d` → each), words split.
fn commands(line: &str) -> Vec<Vec<String>> {
    line.split("&&")
        .flat_map(|p| p.split(';'))
        .flat_map(|p| p.split('|'))
        .map(words)
        .filter(|w| !w.is_empty())
        .collect()
}

/// `ferry <subcommand …> --help` must answer: the subcommand exists.
fn check_subcommand(args: &[String]) -> Result<(), String> {
    let sub: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .take_while(|w| !w.starts_with('-') && !w.contains('/') && !w.contains('.'))
        .take(2)
        .collect();
    let out = std::process::Command::new(support::FERRY)
        .args(&sub)
        .arg("--help")
        .output()
        .map_err(|e| format!("cannot run ferry: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ferry {} --help` fails: the documented subcommand does not exist ({})",
            sub.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Static checks of a shell command: the `ferry` subcommand, the example paths and request bodies.
fn check_command(ferry: &Ferry, at: &str, command: &[String]) -> Result<(), String> {
    let root = repo_root();
    if let Some(args) = ferry_args(command) {
        check_subcommand(&args)?;
    }
    for (i, word) in command.iter().enumerate() {
        let path = word.strip_prefix('@').unwrap_or(word);
        // `worker-$n.properties` in a loop: a shell variable, not a path to check.
        if path.contains('$') {
            continue;
        }
        if path.starts_with("examples/")
            || path.starts_with("scripts/")
            || path.starts_with("./scripts/")
        {
            if !root.join(path).exists() {
                return Err(format!("{path} does not exist"));
            }
            if word.starts_with('@') && path.ends_with(".json") {
                check_json(ferry, at, &read(&root.join(path)))?;
            }
        }
        if i == 0 && (path.starts_with("scripts/") || path.starts_with("./scripts/")) {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(root.join(path))
                .map_err(|e| format!("{path}: {e}"))?
                .permissions()
                .mode();
            if mode & 0o111 == 0 {
                return Err(format!("{path} is not executable"));
            }
        }
    }
    Ok(())
}

/// Runs `ferry standalone WORKER CONNECTOR…` as documented, in a copy of the example's directories,
/// until every line of the connector's input file reached the worker's file sink.
fn run_standalone(args: &[String]) -> Result<(), String> {
    let root = repo_root();
    let ws = support::Workspace::new();
    // The files named, and their directories' other files and subdirectories (the sink's `data/`),
    // as a fresh clone has them: outputs of earlier runs are left out.
    for file in &args[1..] {
        let dir = Path::new(file).parent().unwrap_or(Path::new("."));
        let entries =
            std::fs::read_dir(root.join(dir)).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let rel = dir.join(&name);
            if entry.path().is_dir() {
                std::fs::create_dir_all(ws.file(&rel.to_string_lossy()))
                    .map_err(|e| format!("{}: {e}", rel.display()))?;
            } else {
                ws.write(&rel.to_string_lossy(), read(&entry.path()));
            }
        }
    }
    let worker = Properties::load(ws.file(&args[1])).map_err(|e| e.to_string())?;
    let sink = worker
        .get("sink")
        .and_then(|s| s.strip_prefix("file:"))
        .ok_or("the runnable example's worker has no `sink=file:PATH` to check")?
        .to_owned();
    let mut lines = 0;
    for connector in &args[2..] {
        let props = Properties::load(ws.file(connector)).map_err(|e| e.to_string())?;
        if let Some(input) = props.get("file") {
            lines += read(&ws.file(input)).lines().count();
        }
    }
    if lines == 0 {
        return Err("the runnable example reads no input line".to_owned());
    }
    let paths: Vec<PathBuf> = args[2..].iter().map(PathBuf::from).collect();
    let connectors: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let mut process = support::Ferry::standalone(&ws, "docs", Path::new(&args[1]), &connectors);
    let mut tail = support::SinkTail::new(&ws.file(&sink));
    tail.wait_for(&mut process, lines);
    process.terminate_cleanly();
    eprintln!(
        "ran `ferry {}`: {lines} input lines reached {sink}",
        args.join(" ")
    );
    Ok(())
}

fn check_runnable(
    ferry: &Ferry,
    block: &Block,
    ran: &mut BTreeSet<Vec<String>>,
) -> Result<(), String> {
    for line in shell_lines(&block.text) {
        for command in commands(&line) {
            check_command(ferry, &block.at, &command)?;
            match ferry_args(&command) {
                Some(args) if args.first().is_some_and(|a| a == "standalone") => {
                    // The same command in the README and the Guide runs once.
                    if ran.insert(args.clone()) {
                        run_standalone(&args)?;
                    }
                }
                Some(_) => {
                    return Err(format!(
                        "`{line}` cannot run without a worker or a broker: tag the block (sh kafka, sh rest, …)"
                    ));
                }
                None if command[0].starts_with("./scripts/")
                    || command[0].starts_with("scripts/") => {}
                None => {
                    return Err(format!(
                        "`{line}` is not a command this test runs: tag the block (sh kafka, sh postgres, sh rest, sh synopsis)"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_example_block_parses_or_runs() {
    let ferry = Ferry::standard();
    let mut failures = Vec::new();
    let mut ran = BTreeSet::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for page in markdown_files() {
        for block in blocks(&page) {
            let mut info = block.info.split_whitespace();
            let lang = info.next().unwrap_or("");
            let tags: Vec<&str> = info.collect();
            let result = match (lang, tags.as_slice()) {
                ("", _) | ("text", _) | ("rust", _) | ("console", _) => continue,
                ("properties", []) => check_properties(&ferry, &block, false),
                ("properties", ["paths"]) => check_properties(&ferry, &block, true),
                ("json", []) => check_json(&ferry, &block.at, &block.text),
                ("sh", []) => check_runnable(&ferry, &block, &mut ran),
                ("sh", ["kafka" | "postgres" | "rest" | "synopsis"]) => shell_lines(&block.text)
                    .iter()
                    .flat_map(|l| commands(l))
                    .try_for_each(|c| check_command(&ferry, &block.at, &c)),
                _ => Err(format!(
                    "unknown info string {:?}: use properties [paths], json, sh, or sh kafka|postgres|rest|synopsis",
                    block.info
                )),
            };
            *counts.entry(block.info.clone()).or_default() += 1;
            if let Err(e) = result {
                failures.push(format!("{} ({}): {e}", block.at, block.info));
            }
        }
    }
    assert!(
        ran.iter()
            .any(|a| a.first().is_some_and(|s| s == "standalone")),
        "the README's first command was not run; blocks seen: {counts:?}"
    );
    assert!(
        failures.is_empty(),
        "examples that do not hold:\n{}",
        failures.join("\n")
    );
}

/// mdBook's heading ids: lower case, alphanumerics, `-` and `_` kept, spaces to `-`, the rest dropped;
/// a repeated id gets `-1`, `-2`, … (as GitHub's, so README anchors follow the same rule).
fn heading_ids(page: &Path) -> BTreeSet<String> {
    let source = read(page);
    let mut ids = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(&source) {
        match event {
            Event::Start(Tag::Heading { .. }) => {
                heading = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let id: String = h
                        .trim()
                        .to_lowercase()
                        .chars()
                        .filter_map(|c| match c {
                            ' ' => Some('-'),
                            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                            _ => None,
                        })
                        .collect();
                    let n = seen.entry(id.clone()).or_default();
                    ids.insert(if *n == 0 {
                        id.clone()
                    } else {
                        format!("{id}-{n}")
                    });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    ids
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo_root();
    let mut failures = Vec::new();
    // The old design notes' page maps its sections to the book: its links count too.
    let pages = markdown_files()
        .into_iter()
        .chain([root.join("docs/design.md")]);
    for page in pages {
        let source = read(&page);
        for event in Parser::new(&source) {
            let dest = match event {
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => dest_url,
                _ => continue,
            };
            if dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match dest.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (&*dest, None),
            };
            let target = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap_or(&root).join(path)
            };
            if !target.exists() {
                failures.push(format!(
                    "{}: {dest}: {} does not exist",
                    relative(&page),
                    target.display()
                ));
                continue;
            }
            if let Some(anchor) = anchor
                && target.extension().is_some_and(|e| e == "md")
                && !heading_ids(&target).contains(anchor)
            {
                failures.push(format!(
                    "{}: {dest}: no heading of {} has the id {anchor:?}",
                    relative(&page),
                    relative(&target)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "broken links:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let src = repo_root().join("docs/src");
    let summary = read(&src.join("SUMMARY.md"));
    let listed: BTreeSet<String> = Parser::new(&summary)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect();
    let missing: Vec<String> = markdown_files()
        .iter()
        .filter_map(|p| p.strip_prefix(&src).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p != "SUMMARY.md" && !listed.contains(p))
        .collect();
    assert!(
        missing.is_empty(),
        "pages of docs/src not in SUMMARY.md (mdBook would not build them): {missing:?}"
    );
}

/// The code spans of the first column of every table whose first header is `key` (or `parameter`).
fn key_column(page: &Path) -> Vec<String> {
    let source = read(page);
    let mut keys = Vec::new();
    let (mut in_head, mut key_table, mut cell, mut header) = (false, false, 0usize, String::new());
    for event in Parser::new_ext(&source, pulldown_cmark::Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Table(_)) => key_table = false,
            Event::Start(Tag::TableHead) => {
                in_head = true;
                cell = 0;
                header.clear();
            }
            Event::End(TagEnd::TableHead) => {
                in_head = false;
                key_table = header.trim() == "key";
            }
            Event::Start(Tag::TableRow) => cell = 0,
            Event::End(TagEnd::TableCell) => cell += 1,
            Event::Text(t) if in_head && cell == 0 => header.push_str(&t),
            Event::Code(c) if !in_head && key_table && cell == 0 => keys.push(c.to_string()),
            _ => {}
        }
    }
    keys
}

/// A documented key exists: it is in the generated reference (every key the code defines), or
/// under one of its prefixes (`producer.*`); `<name>` placeholders stand for any name.
fn key_exists(key: &str, known: &BTreeSet<String>) -> bool {
    let matches = |k: &str| {
        known.contains(k)
            || known
                .iter()
                .filter_map(|p| p.strip_suffix('*'))
                .any(|prefix| k.starts_with(prefix))
    };
    match key.find('<') {
        Some(at) => {
            let prefix = &key[..at];
            known
                .iter()
                .any(|k| k.starts_with(prefix) || prefix.strip_suffix('.') == Some(k))
        }
        None => matches(key) || matches(key.trim_end_matches(".*")),
    }
}

#[test]
fn every_key_in_a_key_table_exists() {
    let ferry = Ferry::standard();
    let pages = ferry::docs::reference_pages(&ferry)
        .unwrap_or_else(|e| panic!("the reference cannot be generated: {e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("no temporary directory: {e}"));
    ferry::docs::write_pages(dir.path(), &pages).unwrap_or_else(|e| panic!("{e}"));
    let known: BTreeSet<String> = pages
        .iter()
        .flat_map(|p| key_column(&dir.path().join(&p.file)))
        .collect();
    assert!(known.contains("offset.flush.interval.ms") && known.contains("tasks.max"));
    let mut failures = Vec::new();
    let root = repo_root();
    let generated = root.join("docs/src/reference/generated");
    for page in markdown_files()
        .iter()
        .filter(|p| !p.starts_with(&generated))
    {
        for key in key_column(page) {
            // Values and examples in a key column (`key=value`, sentences) are not keys.
            if key.contains(['=', ' ', '(']) {
                continue;
            }
            if !key_exists(&key, &known) {
                failures.push(format!("{}: {key}", relative(page)));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "keys documented in a key table that the code does not define (renamed or removed? fix the page, \
         or define the key):\n{}",
        failures.join("\n")
    );
}
