//! `ferry offsets doctor`: reads a store's raw history and reports partition-key mismatches (see
//! [`ferry_offsets::transfer::diagnose`]). Exit status 1 when it finds a likely mismatch, 0 otherwise.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use ferry_offsets::transfer;

use super::OffsetsError;
use crate::Ferry;

#[derive(Args)]
pub(crate) struct DoctorArgs {
    /// The worker properties file (names the offset store).
    #[arg(long)]
    worker: PathBuf,
}

pub(super) async fn run(ferry: &Ferry, args: &DoctorArgs) -> Result<ExitCode, OffsetsError> {
    let config = ferry.load_worker(&args.worker)?;
    let store = super::open_store_read_only(&config).await?;
    let history = store.history().await?;
    let live = store.entries().await?;
    let report = transfer::diagnose(&history, &live);
    let text = format!("offset store: {}\n{report}", store.describe());
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|source| OffsetsError::Stdout {
            what: "report",
            source,
        })?;
    Ok(if report.findings() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
