//! The `ferry` command line: `standalone`, `distributed` and `offsets …`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

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
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

/// How long the async runtime may take to wind down once the command has finished. Everything that
/// matters (final commits, the sink flush) is done by then; what may be left is a thread stuck in a
/// connector's blocking call, which nothing can interrupt and which must not keep the process alive.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

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
    let result = runtime.block_on(async {
        match cli.command {
            Command::Standalone { worker, connectors } => ferry
                .run_standalone(&worker, &connectors)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Distributed { worker } => crate::distributed::run(ferry, &worker)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Offsets { action } => offsets::run(ferry, action).await,
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
