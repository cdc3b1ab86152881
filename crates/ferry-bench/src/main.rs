//! `ferry-bench`: Ferry's offset machinery and data path measured side by side with the hardware floor
//! and with what a user would otherwise pick, in one run; writes `docs/benchmarks.md`, the flush plot
//! and the raw results as JSON. Run it through `scripts/bench` (release build, broker started here).

mod cdc;
mod crash;
mod e2e;
mod kafka;
mod machine;
mod measure;
mod memory;
mod offsets;
mod plot;
mod report;
mod results;
mod scaling;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, Subcommand};

use crate::results::Results;

/// What failed in the bench, as a sentence, with the error that caused it when there is one: the
/// bench is a program that prints its error and exits, so one boxed error type serves every section.
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

/// A bench step's result.
pub type BenchResult<T> = Result<T, BenchError>;

/// The sections of the suite, in run order.
pub const SECTIONS: [&str; 10] = [
    "flush",
    "startup",
    "lookup",
    "e2e",
    "eos",
    "scale-out",
    "memory",
    "crash",
    "scaling",
    "cdc",
];

#[derive(Parser)]
#[command(
    name = "ferry-bench",
    about = "Ferry side by side with the fdatasync floor, SQLite, a Kafka Connect-style full rewrite, plain rdkafka and a plain copy"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Shrink every size (a smoke run: its numbers are not results and the report says so).
    #[arg(long)]
    quick: bool,
    /// Run only these sections (comma-separated: flush, startup, lookup, e2e, eos, scale-out, memory, crash,
    /// scaling, cdc); their results replace those sections in an existing results file (--json), the
    /// other sections' are kept, and the report is rendered from the whole.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Where to write the report.
    #[arg(long, default_value = "docs/benchmarks.md")]
    out: PathBuf,
    /// Where to write the flush plot (PNG); the report links it by file name.
    #[arg(long, default_value = "docs/benchmarks-flush.png")]
    plot: PathBuf,
    /// Where to write the raw results (JSON).
    #[arg(long, default_value = "docs/benchmarks.json")]
    json: PathBuf,
    /// Directory for the stores and files the benches write (default: the system's temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Skip the Kafka cases (no broker is started).
    #[arg(long)]
    no_kafka: bool,
    /// The cdc section's table rows (its snapshot), instead of the plan's.
    #[arg(long)]
    cdc_snapshot_rows: Option<u64>,
    /// The cdc section's inserted rows, instead of the plan's.
    #[arg(long)]
    cdc_inserts: Option<u64>,
    /// The cdc section's updated rows (at most the table's rows), instead of the plan's.
    #[arg(long)]
    cdc_updates: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Re-render the report and plot from a results JSON file, without measuring.
    Render {
        /// The results file a run wrote.
        #[arg(default_value = "docs/benchmarks.json")]
        json: PathBuf,
        /// Where to write the report.
        #[arg(long, default_value = "docs/benchmarks.md")]
        out: PathBuf,
        /// Where to write the plot.
        #[arg(long, default_value = "docs/benchmarks-flush.png")]
        plot: PathBuf,
    },
    /// Internal: load a store in a fresh process and print its peak RSS (used by the memory section).
    #[command(hide = true)]
    RssProbe {
        /// What to load: `file-store`, `hashmap`, `sqlite`, `read-file` or `baseline`.
        what: String,
        /// The file store (or, for `hashmap`, the file store whose entries to copy).
        path: PathBuf,
    },
    /// Internal: write the load fixture of `size` offsets (a compacted FileStore and a Kafka Connect
    /// standalone-style file) under `dir`, for timing or profiling the probes by hand.
    #[command(hide = true)]
    LoadFixture {
        /// Where to write `s/offsets.ferry` and `s/offsets.rewrite`.
        dir: PathBuf,
        /// Offsets to store.
        size: usize,
    },
}

/// Sizes and counts of one run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// A smoke run with shrunk sizes.
    pub quick: bool,
    /// Stored partitions of the flush cases.
    pub store_sizes: Vec<usize>,
    /// Changed partitions per flush.
    pub changed: Vec<usize>,
    /// Offsets loaded in the start-up, lookup and memory cases.
    pub load_size: usize,
    /// Partitions looked up with one `offsets()` call.
    pub lookup_count: usize,
    /// SequenceSource records per end-to-end run (scaling and scale-out).
    pub sequence_records: u64,
    /// SequenceSource records per run of the offset-overhead case: enough that the committer's
    /// 100 ms tick, which ends a Ferry run, is a small part of it.
    pub overhead_records: u64,
    /// Size of the FileStreamSource input for file → file.
    pub file_bytes: u64,
    /// Size of the FileStreamSource input for file → Kafka (also Ferry vs Kafka Connect's).
    pub kafka_file_bytes: u64,
    /// Timed rounds of the Ferry vs Kafka Connect worker processes.
    pub connect_runs: usize,
    /// SIGKILLs of each worker in the Ferry vs Kafka Connect case.
    pub connect_kills: usize,
    /// Size of the input Ferry and rsyslog tail.
    pub rsyslog_bytes: u64,
    /// Size of the input `ferry standalone` is SIGKILLed on.
    pub crash_bytes: u64,
    /// SIGKILLs per commit mode.
    pub kills: usize,
    /// Total input of the FileStreamSource tasks curve (split over the files).
    pub scaling_file_bytes: u64,
    /// Stored offsets of the start-up and RSS curves.
    pub offset_counts: Vec<usize>,
    /// Sizes of the PostgreSQL CDC comparison.
    pub cdc: cdc::Sizes,
    /// About how long each contender of a flush case is timed.
    pub flush_budget: std::time::Duration,
    /// Where the benches write.
    pub work_dir: PathBuf,
    sections: BTreeSet<String>,
    /// Whether the Kafka cases run.
    pub kafka: bool,
}

impl Plan {
    fn new(args: &RunArgs, work_dir: PathBuf) -> BenchResult<Self> {
        for section in &args.only {
            if !SECTIONS.contains(&section.as_str()) {
                return Err(crate::BenchError::from(format!(
                    "--only {section:?}: no such section (sections: {})",
                    SECTIONS.join(", ")
                )));
            }
        }
        let sections = if args.only.is_empty() {
            SECTIONS.iter().map(|s| (*s).to_owned()).collect()
        } else {
            args.only.iter().cloned().collect()
        };
        let mut plan = if args.quick {
            Self {
                quick: true,
                store_sizes: vec![1_000, 10_000],
                changed: vec![1, 100, 1_000],
                load_size: 20_000,
                lookup_count: 1_000,
                sequence_records: 40_000,
                overhead_records: 40_000,
                file_bytes: 4 << 20,
                kafka_file_bytes: 1 << 20,
                connect_runs: 1,
                connect_kills: 1,
                rsyslog_bytes: 2 << 20,
                crash_bytes: 2 << 20,
                kills: 3,
                scaling_file_bytes: 4 << 20,
                offset_counts: vec![2_000, 20_000],
                cdc: cdc::Sizes {
                    snapshot_rows: 20_000,
                    inserts: 20_000,
                    updates: 5_000,
                    writers: 4,
                    rows_per_transaction: 500,
                    latency_rows: 400,
                    latency_rate: 200,
                },
                flush_budget: std::time::Duration::from_millis(100),
                work_dir,
                sections,
                kafka: !args.no_kafka,
            }
        } else {
            Self {
                quick: false,
                store_sizes: vec![1_000, 100_000, 1_000_000],
                changed: vec![1, 100, 10_000],
                load_size: 1_000_000,
                lookup_count: 10_000,
                sequence_records: 2_000_000,
                // A run of 2M records took about 0.4 s, which the tick rounded up by up to a
                // quarter: the row swung between 17 % and 34 % from run to run.
                overhead_records: 20_000_000,
                file_bytes: 1 << 30,
                kafka_file_bytes: 64 << 20,
                connect_runs: 3,
                connect_kills: 3,
                rsyslog_bytes: 64 << 20,
                crash_bytes: 256 << 20,
                kills: 5,
                scaling_file_bytes: 256 << 20,
                offset_counts: vec![100_000, 1_000_000, 10_000_000],
                // The 1M inserts and 200k updates would keep the section (three runs, the
                // slowest at ~7k changes/s on two cores) far past its ~6 minutes: a quarter of them.
                cdc: cdc::Sizes {
                    snapshot_rows: 250_000,
                    inserts: 250_000,
                    updates: 50_000,
                    writers: 4,
                    rows_per_transaction: 500,
                    latency_rows: 3_000,
                    latency_rate: 200,
                },
                flush_budget: std::time::Duration::from_secs(2),
                work_dir,
                sections,
                kafka: !args.no_kafka,
            }
        };
        let cdc = &mut plan.cdc;
        cdc.snapshot_rows = args.cdc_snapshot_rows.unwrap_or(cdc.snapshot_rows);
        cdc.inserts = args.cdc_inserts.unwrap_or(cdc.inserts);
        cdc.updates = args.cdc_updates.unwrap_or(cdc.updates);
        Ok(plan)
    }

    /// Whether `section` runs.
    pub fn runs(&self, section: &str) -> bool {
        self.sections.contains(section)
    }
}

/// The allocator the `ferry` binary ships with, so both sides of every comparison run on what users get.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Some(Command::Render { json, out, plot }) => render_from(&json, &out, &plot),
        Some(Command::RssProbe { what, path }) => memory::probe(&what, &path),
        Some(Command::LoadFixture { dir, size }) => load_fixture(&dir, size),
        None => run(&cli.run),
    };
    if let Err(e) = outcome {
        eprintln!("ferry-bench: {e}");
        std::process::exit(1);
    }
}

fn load_fixture(dir: &Path, size: usize) -> BenchResult<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| crate::BenchError::from(format!("tokio runtime: {e}")))?;
    let (ferry, rewrite) = offsets::fixture::ferry_and_rewrite(&dir.join("s"), size, &runtime)?;
    println!("{}\n{}", ferry.display(), rewrite.display());
    Ok(())
}

fn run(args: &RunArgs) -> BenchResult<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let temp = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| {
                crate::BenchError::from(format!(
                    "cannot create the work dir {}: {e}",
                    dir.display()
                ))
            })?;
            tempfile::tempdir_in(dir)
        }
        None => tempfile::tempdir(),
    }
    .map_err(|e| crate::BenchError::from(format!("cannot create a temp work dir: {e}")))?;
    let plan = Plan::new(args, temp.path().to_owned())?;
    let started = Instant::now();
    let machine = machine::describe(&plan.work_dir);
    eprintln!(
        "ferry-bench{}: {} ({} CPUs), work dir {} on {}",
        if plan.quick { " --quick" } else { "" },
        machine.cpu,
        machine.cpus,
        plan.work_dir.display(),
        machine.disk
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| crate::BenchError::from(format!("tokio runtime: {e}")))?;

    let mut results = Results::empty(machine, plan.quick);
    // One broker for every Kafka case, Apache Kafka as shipped (its stock JVM flags); dropping it
    // stops it.
    let broker = if plan.kafka
        && (plan.runs("startup")
            || plan.runs("e2e")
            || plan.runs("eos")
            || plan.runs("scale-out")
            || plan.runs("cdc"))
    {
        match ferry_testkit::KafkaBroker::start_jvm(&[], ferry_testkit::Jvm::Shipped) {
            Ok(broker) => Some(broker),
            Err(e) => {
                let why = format!("Kafka cases not run: the Kafka broker did not start ({e})");
                eprintln!("{why}");
                results.skipped.push(why);
                None
            }
        }
    } else {
        if !plan.kafka {
            results
                .skipped
                .push("Kafka cases not run (--no-kafka)".to_owned());
        }
        None
    };
    let bootstrap = broker.as_ref().map(|b| b.bootstrap_servers());

    if plan.runs("flush") {
        eprintln!("\n== flush ==");
        results.flush = offsets::flush::run(&plan, &runtime)?;
    }
    if plan.runs("startup") {
        eprintln!("\n== start-up ==");
        results
            .startup
            .extend(offsets::startup::run(&plan, &runtime)?);
        if let Some(bootstrap) = &bootstrap {
            results
                .startup
                .push(runtime.block_on(kafka::startup(&plan, bootstrap))?);
        }
    }
    if plan.runs("lookup") {
        eprintln!("\n== lookup ==");
        results.lookup = offsets::lookup::run(&plan, &runtime)?;
    }
    if plan.runs("e2e") {
        eprintln!("\n== end to end ==");
        results.end_to_end = e2e::run(&plan, &runtime, broker.as_ref(), &mut results.skipped)?;
    }
    if plan.runs("eos") {
        eprintln!("\n== exactly once vs at least once ==");
        match broker.as_ref() {
            Some(broker) => match e2e::exactly_once(&plan, &runtime, broker) {
                Ok(case) => results.exactly_once.push(case),
                Err(e) => {
                    let why = format!("exactly once vs at least once: {e}");
                    eprintln!("  {why}");
                    results.skipped.push(why);
                }
            },
            None => results
                .skipped
                .push("exactly once vs at least once: no Kafka broker".to_owned()),
        }
    }
    if plan.runs("scale-out") {
        eprintln!("\n== distributed scale-out: 1 worker against 3 ==");
        match broker.as_ref() {
            Some(broker) => match e2e::scale_out(&plan, &runtime, broker) {
                Ok(case) => results.scale_out.push(case),
                Err(e) => {
                    let why = format!("distributed scale-out: {e}");
                    eprintln!("  {why}");
                    results.skipped.push(why);
                }
            },
            None => results
                .skipped
                .push("distributed scale-out: no Kafka broker".to_owned()),
        }
    }
    if plan.runs("memory") {
        eprintln!("\n== memory ==");
        results.memory = memory::run(&plan, &runtime)?;
    }
    if plan.runs("crash") {
        eprintln!("\n== duplicates after SIGKILL ==");
        let started = Instant::now();
        match crash::run(&plan) {
            Ok(crash) => results.crash = crash,
            Err(e) => {
                eprintln!("{e}");
                results.skipped.push(e.to_string());
            }
        }
        eprintln!("  crash section: {:.0?}", started.elapsed());
    }
    if plan.runs("scaling") {
        eprintln!("\n== scaling ==");
        let started = Instant::now();
        results.scaling = scaling::run(&plan, &runtime)?;
        eprintln!("  scaling section: {:.0?}", started.elapsed());
    }
    if plan.runs("cdc") {
        eprintln!("\n== PostgreSQL CDC: Ferry vs Debezium 3.6 ==");
        let started = Instant::now();
        match broker.as_ref() {
            Some(broker) => match cdc::run(&plan, &runtime, broker) {
                Ok(cdc) => results.cdc = Some(cdc),
                Err(e) => {
                    let why = format!("PostgreSQL CDC, Ferry vs Debezium 3.6: {e}");
                    eprintln!("  {why}");
                    results.skipped.push(why);
                }
            },
            None => results
                .skipped
                .push("PostgreSQL CDC, Ferry vs Debezium 3.6: no Kafka broker".to_owned()),
        }
        eprintln!("  cdc section: {:.0?}", started.elapsed());
    }
    drop(broker);
    results.wall_seconds = started.elapsed().as_secs_f64();
    let results = if args.only.is_empty() {
        results
    } else {
        merge_into_existing(&args.json, results, &plan)?
    };
    write_outputs(&results, &args.out, &args.plot, &args.json)?;
    eprintln!(
        "\nferry-bench: done in {:.0?}; wrote {}, {} and {}",
        started.elapsed(),
        args.out.display(),
        args.plot.display(),
        args.json.display()
    );
    Ok(())
}

/// `--only`: the sections that ran replace theirs in the results file already at `json`, whose other
/// sections stay (with its machine and run line; the merge is noted in `merged`). A missing file, or
/// one of the other kind (`--quick` against a full run), is replaced by this run's results.
fn merge_into_existing(json: &Path, run: Results, plan: &Plan) -> BenchResult<Results> {
    let Ok(text) = std::fs::read_to_string(json) else {
        return Ok(run);
    };
    let mut old: Results = match serde_json::from_str(&text) {
        Ok(old) => old,
        Err(e) => {
            eprintln!(
                "ferry-bench: {} is not a results file of this ferry-bench ({e}); writing this run's \
                 sections alone",
                json.display()
            );
            return Ok(run);
        }
    };
    if old.quick != run.quick {
        eprintln!(
            "ferry-bench: {} is {} run; writing this run's sections alone",
            json.display(),
            if old.quick { "a --quick" } else { "a full" }
        );
        return Ok(run);
    }
    let mut ran = Vec::new();
    for section in SECTIONS.iter().filter(|s| plan.runs(s)) {
        ran.push(*section);
        match *section {
            "flush" => old.flush = run.flush.clone(),
            "startup" => old.startup = run.startup.clone(),
            "lookup" => old.lookup = run.lookup.clone(),
            "e2e" => old.end_to_end = run.end_to_end.clone(),
            "eos" => old.exactly_once = run.exactly_once.clone(),
            "scale-out" => old.scale_out = run.scale_out.clone(),
            "memory" => old.memory = run.memory.clone(),
            "crash" => old.crash = run.crash.clone(),
            "scaling" => old.scaling = run.scaling.clone(),
            "cdc" => old.cdc = run.cdc.clone(),
            _ => {}
        }
    }
    let m = &run.machine;
    // A later run on another machine says so: its numbers are not comparable with the others'.
    let elsewhere = if (m.cpu.as_str(), m.cpus) == (old.machine.cpu.as_str(), old.machine.cpus) {
        String::new()
    } else {
        format!(" on another machine ({}, {} logical CPUs)", m.cpu, m.cpus)
    };
    old.merged.push(format!(
        "{} measured again with `--only` on commit {}{elsewhere}, started {}, load average {}, took {:.0} s",
        ran.join(", "),
        m.commit,
        m.started_at,
        m.load_at_start,
        run.wall_seconds
    ));
    old.skipped.extend(run.skipped);
    Ok(old)
}

fn write_outputs(results: &Results, out: &Path, plot: &Path, json: &Path) -> BenchResult<()> {
    if let Some(parent) = json.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| {
            crate::BenchError::from(format!("cannot create {}: {e}", parent.display()))
        })?;
    }
    let text = serde_json::to_string_pretty(results)
        .map_err(|e| crate::BenchError::from(format!("results JSON: {e}")))?;
    std::fs::write(json, text + "\n")
        .map_err(|e| crate::BenchError::from(format!("cannot write {}: {e}", json.display())))?;
    write_report(results, out, plot)
}

/// The report and the plot of `results` (the JSON is not touched).
fn write_report(results: &Results, out: &Path, plot: &Path) -> BenchResult<()> {
    for path in [out, plot] {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                crate::BenchError::from(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
    }
    plot::flush_latency(results, plot)?;
    let plot_name = plot
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The other plots sit next to the flush plot: `benchmarks-flush.png` → `benchmarks-<id>.png`.
    let stem = plot
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.strip_suffix("-flush").unwrap_or(&stem).to_owned();
    let mut curves = results.scaling.clone();
    curves.extend(plot::flush_by_changed(results));
    let mut curve_names = Vec::new();
    for curve in &curves {
        let name = format!("{stem}-{}.png", curve.id);
        plot::curve(curve, &plot.with_file_name(&name))?;
        curve_names.push((curve.clone(), name));
    }
    if let Some(panels) = plot::connect_bars(results) {
        let name = format!("{stem}-connect.png");
        plot::bars(
            "FileStreamSource → Apache Kafka: Ferry against Kafka Connect 4.4",
            &panels,
            &plot.with_file_name(&name),
        )?;
    }
    std::fs::write(out, report::render(results, &plot_name, &curve_names))
        .map_err(|e| crate::BenchError::from(format!("cannot write {}: {e}", out.display())))?;
    Ok(())
}

fn render_from(json: &Path, out: &Path, plot: &Path) -> BenchResult<()> {
    let text = std::fs::read_to_string(json)
        .map_err(|e| crate::BenchError::from(format!("cannot read {}: {e}", json.display())))?;
    let results: Results = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a results file of this ferry-bench: {e}",
            json.display()
        )
    })?;
    write_report(&results, out, plot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(quick: bool, commit: &str) -> Results {
        Results {
            wall_seconds: 1.0,
            ..Results::empty(results::Machine::for_tests(commit), quick)
        }
    }

    fn args(only: &[&str], quick: bool) -> RunArgs {
        Cli::parse_from(
            ["ferry-bench"]
                .into_iter()
                .chain(quick.then_some("--quick"))
                .chain(only.iter().flat_map(|s| ["--only", s])),
        )
        .run
    }

    /// `--only cdc` keeps the other sections of the results file and its run line; the section that
    /// ran replaces its own.
    #[test]
    fn only_merges_the_sections_it_ran_into_the_existing_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let json = dir.path().join("benchmarks.json");
        let mut full = results(false, "old");
        full.crash.push(results::Crash {
            flush_interval_ms: 0,
            strict_bound: false,
            input_lines: 10,
            batch_size: 2,
            duplicates_per_kill: vec![1],
            lost: 0,
            seconds: 1.0,
            clean_run_seconds: Vec::new(),
            input_bytes: 0,
        });
        std::fs::write(&json, serde_json::to_string(&full).expect("json")).expect("write");
        let plan = Plan::new(&args(&["cdc"], false), dir.path().to_owned()).expect("plan");
        let mut run = results(false, "new");
        run.cdc = Some(results::Cdc {
            snapshot_rows: 1,
            inserts: 2,
            updates: 1,
            writers: 1,
            rows_per_transaction: 1,
            latency_rows: 1,
            latency_rate: 1,
            contenders: Vec::new(),
        });
        let merged = merge_into_existing(&json, run, &plan).expect("merge");
        assert_eq!(merged.machine.commit, "old");
        assert_eq!(merged.crash.len(), 1, "the other sections stay");
        assert_eq!(merged.cdc.as_ref().map(|c| c.inserts), Some(2));
        assert_eq!(merged.merged.len(), 1);
        assert!(merged.merged[0].contains("new"), "{:?}", merged.merged);

        // A --quick run is not merged into a full run's file.
        let plan = Plan::new(&args(&["cdc"], true), dir.path().to_owned()).expect("plan");
        let alone = merge_into_existing(&json, results(true, "quick"), &plan).expect("merge");
        assert!(alone.crash.is_empty() && alone.merged.is_empty());
    }
}
