//! `ferry`: run source connectors standalone; inspect and edit their offsets.

use std::process::ExitCode;

/// Records are allocated on the task and freed on the sink's threads in batches, which glibc's malloc
/// handles badly; mimalloc roughly doubles the data path's throughput (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The built-in connectors (those of `ferry-connectors` and PostgresSource), the Kafka offset store
/// and sink, and the PostgreSQL offset store.
fn main() -> ExitCode {
    ferry::Ferry::standard().run_cli()
}
