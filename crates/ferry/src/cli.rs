//! The `ferry` command line: `standalone`, `distributed` and `offsets …`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ferry_rest::{LogFilterReload, LogLevelError, LogLevels};

use crate::{Ferry, offsets};

/// Ferry: Kafka Connect–style source connectors that resume exactly where they left off.
#[derive(Parser)]
#[command(name = "ferry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run connectors in one process with Kafka Connect's REST API (Kafka Connect's
    /// connect-standalone).
    Standalone {
        /// The worker properties file.
        worker: PathBuf,
        /// Connector properties files (none: connectors are created over the REST API).
        connectors: Vec<PathBuf>,
    },
    /// Run a distributed worker (Kafka Connect's connect-distributed): workers sharing a `group.id`
    /// share connectors and tasks through Kafka.
    Distributed {
        /// The distributed worker properties file.
        worker: PathBuf,
    },
    /// Inspect or edit committed offsets in the worker's offset store (refused while a worker runs).
    Offsets {
        #[command(subcommand)]
        action: offsets::Action,
    },
    /// Move connectors between Kafka Connect and Ferry over their REST APIs (KIP-875, KIP-980),
    /// or check which connectors of a Kafka Connect cluster Ferry runs unchanged.
    Migrate {
        #[command(subcommand)]
        action: crate::migrate::Action,
    },
    /// Write the book's generated reference pages (configuration keys, REST routes).
    Docs {
        #[command(subcommand)]
        action: DocsAction,
    },
}

#[derive(Subcommand)]
enum DocsAction {
    /// Write (or, with --check, compare) the generated reference under the book's Reference.
    Reference {
        /// The directory of the generated pages.
        #[arg(long, default_value = "docs/src/reference/generated")]
        out: PathBuf,
        /// Write nothing; exit 1 when a page in OUT differs from what would be written.
        #[arg(long)]
        check: bool,
    },
}

/// The process's log levels, changed over `PUT /admin/loggers/{name}` (set by `init_logging`).
static LOG_LEVELS: std::sync::OnceLock<Arc<LogLevels>> = std::sync::OnceLock::new();

/// The process's log levels, for the REST server's `/admin/loggers`.
pub(crate) fn log_levels() -> Option<Arc<LogLevels>> {
    LOG_LEVELS.get().cloned()
}

type FilterHandle =
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>;

/// Applies the levels of `/admin/loggers` through the subscriber's reload layer.
struct ReloadFilter(FilterHandle);

impl LogFilterReload for ReloadFilter {
    fn reload(&self, directives: &str) -> Result<(), LogLevelError> {
        let filter = tracing_subscriber::EnvFilter::try_new(directives).map_err(|e| {
            LogLevelError::InvalidFilter {
                directives: directives.to_owned(),
                source: Box::new(e),
            }
        })?;
        self.0.reload(filter).map_err(|e| LogLevelError::Reload {
            source: Box::new(e),
        })
    }
}

fn init_logging() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // What RUST_LOG says if it is a valid filter, else `info` (as before).
    let initial = std::env::var(tracing_subscriber::EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|v| tracing_subscriber::EnvFilter::try_new(v).is_ok())
        .unwrap_or_else(|| "info".to_owned());
    let filter = tracing_subscriber::EnvFilter::new(&initial);
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    tracing_subscriber::registry().with(filter).with(fmt).init();
    let _ = LOG_LEVELS.set(Arc::new(LogLevels::new(&initial, ReloadFilter(handle))));
}

/// How long the async runtime may take to wind down once the command has finished. Everything that
/// matters (final commits, the sink flush) is done by then; what may be left is a thread stuck in a
/// connector's blocking call, which nothing can interrupt and which must not keep the process alive.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// `ferry docs reference`: writes the generated pages, or with `check` lists the stale ones.
fn docs_reference(
    ferry: &Ferry,
    out: &std::path::Path,
    check: bool,
) -> Result<ExitCode, crate::docs::DocsError> {
    let pages = crate::docs::reference_pages(ferry)?;
    if !check {
        crate::docs::write_pages(out, &pages)?;
        eprintln!("ferry: wrote {} pages to {}", pages.len(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let stale = crate::docs::stale_pages(out, &pages);
    if stale.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "ferry: the generated reference in {} is stale ({}); run `{}`",
        out.display(),
        stale.join("; "),
        crate::docs::REGENERATE
    );
    Ok(ExitCode::FAILURE)
}

/// Runs the command line with `ferry`'s registrations.
pub(crate) fn run(ferry: &Ferry) -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ferry: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Every command's error is printed the same way, whatever its type.
    let result: Result<ExitCode, Box<dyn std::error::Error>> = runtime.block_on(async {
        match cli.command {
            Command::Standalone { worker, connectors } => ferry
                .run_standalone(&worker, &connectors)
                .await
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into),
            Command::Distributed { worker } => crate::distributed::run(ferry, &worker)
                .await
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into),
            Command::Offsets { action } => offsets::run(ferry, action).await.map_err(Into::into),
            // Blocking HTTP, a request at a time: off the runtime's threads.
            Command::Migrate { action } => {
                let ferry = ferry.clone();
                tokio::task::spawn_blocking(move || crate::migrate::run(&ferry, action))
                    .await
                    .map_err(|e| format!("ferry migrate stopped: {e}"))?
                    .map_err(Into::into)
            }
            Command::Docs {
                action: DocsAction::Reference { out, check },
            } => docs_reference(ferry, &out, check).map_err(Into::into),
        }
    });
    // Dropping the runtime would wait for every blocking thread, forever for a stuck one.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("ferry: {message}");
            ExitCode::from(2)
        }
    }
}
