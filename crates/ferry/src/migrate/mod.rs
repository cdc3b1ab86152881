//! `ferry migrate`: move connectors between Kafka Connect and Ferry over their REST APIs.
//!
//! - `check --from URL` lists every connector of a cluster and says whether Ferry runs it unchanged,
//!   checking each configuration with this program's own connectors, transformations, converters
//!   and sink, without a Ferry worker and without changing anything.
//! - `connector NAME --from URL --to URL` moves one connector: validated on the target first
//!   (nothing is touched if it would refuse), stopped on the source (KIP-875), created STOPPED on the
//!   target (KIP-980) with the same configuration (config provider placeholders as they are, never
//!   resolved), given the source's offsets (or found to share them), resumed, and watched until its
//!   first commit. Both ends speak Kafka Connect's REST API, so the same steps move a connector from
//!   Kafka Connect to Ferry and back. A failure after the stop rolls everything back (see
//!   [`connector`]).

mod check;
mod client;
mod connector;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::Ferry;
pub(crate) use client::Endpoint;

/// `ferry migrate …`.
#[derive(Subcommand)]
pub(crate) enum Action {
    /// List every connector of a Kafka Connect cluster and say whether Ferry can run it unchanged,
    /// and if not, which keys or classes stop it (read-only).
    Check {
        /// The cluster's REST URL (any of its workers), e.g. http://localhost:8083.
        #[arg(long)]
        from: String,
        /// Print JSON (one object per connector) instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        from_auth: FromAuth,
    },
    /// Move one connector from one cluster to another with no record lost or repeated: from Kafka
    /// Connect to Ferry, or back.
    Connector {
        /// The connector's name (it keeps it: its offsets are keyed by it).
        name: String,
        /// The REST URL of the cluster running it now.
        #[arg(long)]
        from: String,
        /// The REST URL of the cluster to run it on.
        #[arg(long)]
        to: String,
        /// Delete the connector on the source once the target committed (else it stays STOPPED
        /// there).
        #[arg(long)]
        delete_source: bool,
        /// Check both ends and print the plan; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// How long each wait may take (the source's stop, the target's start), in seconds.
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// How long to wait for the target's first commit of new offsets, in seconds (an idle
        /// source commits nothing new: the move then ends without it, and says so).
        #[arg(long, default_value_t = 60)]
        commit_timeout: u64,
        #[command(flatten)]
        from_auth: FromAuth,
        #[command(flatten)]
        to_auth: ToAuth,
    },
}

/// How to authenticate to the source cluster.
#[derive(Args, Debug, Default)]
pub(crate) struct FromAuth {
    /// A file holding a bearer token for the source.
    #[arg(long)]
    from_token_file: Option<PathBuf>,
    /// A file holding `user:password` for the source's Basic authentication.
    #[arg(long)]
    from_basic_auth_file: Option<PathBuf>,
    /// PEM CA certificates to trust for an https:// source.
    #[arg(long)]
    from_cacert: Option<PathBuf>,
}

/// How to authenticate to the target cluster.
#[derive(Args, Debug, Default)]
pub(crate) struct ToAuth {
    /// A file holding a bearer token for the target.
    #[arg(long)]
    to_token_file: Option<PathBuf>,
    /// A file holding `user:password` for the target's Basic authentication.
    #[arg(long)]
    to_basic_auth_file: Option<PathBuf>,
    /// PEM CA certificates to trust for an https:// target.
    #[arg(long)]
    to_cacert: Option<PathBuf>,
}

/// Why a migrate command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MigrateError {
    /// A command-line value or a file it names is unusable.
    #[error("{0}")]
    Usage(String),
    /// A request got no answer.
    #[error("{request}: no answer ({reason}); check the URL, that the worker runs, and TLS")]
    Unreachable {
        /// Method and URL.
        request: String,
        /// What the client saw.
        reason: String,
    },
    /// A request was answered with an unexpected status.
    #[error("{request} answered {status}: {message}")]
    Refused {
        /// Method and URL.
        request: String,
        /// The status.
        status: u16,
        /// Kafka Connect's error message, or the body.
        message: String,
    },
    /// A state was not reached in time.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    /// The move cannot be made (before anything was changed) or failed (after the rollback).
    #[error("{0}")]
    Move(String),
}

/// Runs `action`; the exit code says how it went (check: 0; a move: 0 done, 1 refused or rolled
/// back).
pub(crate) fn run(ferry: &Ferry, action: Action) -> Result<ExitCode, MigrateError> {
    match action {
        Action::Check {
            from,
            json,
            from_auth,
        } => {
            let source = client::Rest::new(&from_auth.endpoint(from))?;
            let verdicts = check::check(ferry, &source)?;
            let mut out = std::io::stdout().lock();
            let written = if json {
                check::write_json(&mut out, &verdicts)
            } else {
                check::write_table(&mut out, &verdicts)
            };
            written.map_err(|e| MigrateError::Usage(format!("writing the report: {e}")))?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Connector {
            name,
            from,
            to,
            delete_source,
            dry_run,
            timeout,
            commit_timeout,
            from_auth,
            to_auth,
        } => {
            let source = client::Rest::new(&from_auth.endpoint(from))?;
            let target = client::Rest::new(&to_auth.endpoint(to))?;
            let options = connector::Options {
                delete_source,
                dry_run,
                timeout: Duration::from_secs(timeout),
                commit_timeout: Duration::from_secs(commit_timeout),
            };
            let mut out = std::io::stdout().lock();
            match connector::Move::new(&name, &source, &target, options, &mut out).run() {
                Ok(()) => Ok(ExitCode::SUCCESS),
                // Refused before any change, or rolled back: said, and exit 1 (2 is for usage and
                // unreachable ends before the move began).
                Err(MigrateError::Move(message)) => {
                    eprintln!("ferry migrate: {message}");
                    Ok(ExitCode::FAILURE)
                }
                Err(other) => Err(other),
            }
        }
    }
}

impl FromAuth {
    fn endpoint(self, url: String) -> Endpoint {
        Endpoint {
            url,
            token_file: self.from_token_file,
            basic_auth_file: self.from_basic_auth_file,
            cacert: self.from_cacert,
        }
    }
}

impl ToAuth {
    fn endpoint(self, url: String) -> Endpoint {
        Endpoint {
            url,
            token_file: self.to_token_file,
            basic_auth_file: self.to_basic_auth_file,
            cacert: self.to_cacert,
        }
    }
}
