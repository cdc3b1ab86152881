//! Scaling curves, one run per point (the curves' shape is the result, not each point's spread):
//! throughput against tasks (SequenceSource over 8 partitions; FileStreamSource with one file per
//! task, all into one file sink) and against partitions (SequenceSource, one task); start-up time and
//! peak RSS against stored offsets (FileStore and the HashMap floor, each load in a fresh probe
//! process, timed like the start-up case: median of [`LOAD_RUNS`](crate::memory::LOAD_RUNS)).

use crate::e2e::{file, sequence};
use crate::measure::human_duration;
use crate::memory::{Load, time_loads};
use crate::offsets::fixture;
use crate::results::{Curve, Series, Stats, Unit};
use crate::{BenchResult, Plan};

pub const TASKS: [usize; 4] = [1, 2, 4, 8];
pub const PARTITIONS: [u64; 4] = [1, 4, 16, 64];

/// Every curve.
pub fn run(plan: &Plan, runtime: &tokio::runtime::Runtime) -> BenchResult<Vec<Curve>> {
    let mut seq = Vec::new();
    let mut files = Vec::new();
    for tasks in TASKS {
        let (records, secs) =
            sequence::scaling_point(runtime, &plan.work_dir, plan.sequence_records, 8, tasks)?;
        eprintln!(
            "  SequenceSource, 8 partitions, {tasks} tasks: {:.0} records/s",
            records as f64 / secs
        );
        seq.push((tasks as f64, records as f64 / secs));
        let (lines, secs) =
            file::tasks_point(runtime, &plan.work_dir, plan.scaling_file_bytes, tasks)?;
        eprintln!(
            "  FileStreamSource, {tasks} files/tasks: {:.0} lines/s",
            lines as f64 / secs
        );
        files.push((tasks as f64, lines as f64 / secs));
    }
    let mut parts = Vec::new();
    for partitions in PARTITIONS {
        let (records, secs) = sequence::scaling_point(
            runtime,
            &plan.work_dir,
            plan.sequence_records,
            partitions,
            1,
        )?;
        eprintln!(
            "  SequenceSource, 1 task, {partitions} partitions: {:.0} records/s",
            records as f64 / secs
        );
        parts.push((partitions as f64, records as f64 / secs));
    }
    let (startup, rss) = offsets(plan, runtime)?;
    Ok(vec![
        Curve {
            id: "tasks".to_owned(),
            title: "throughput against tasks (offsets on, FileStore)".to_owned(),
            x_label: "tasks".to_owned(),
            unit: Unit::PerSecond,
            log_x: false,
            log_y: false,
            series: vec![
                Series {
                    name: "SequenceSource (8 partitions) → discard".to_owned(),
                    points: seq,
                },
                Series {
                    name: "FileStreamSource, one file per task → file (value)".to_owned(),
                    points: files,
                },
            ],
        },
        Curve {
            id: "partitions".to_owned(),
            title: "throughput against partitions (one task)".to_owned(),
            x_label: "source partitions".to_owned(),
            unit: Unit::PerSecond,
            log_x: true,
            log_y: false,
            series: vec![Series {
                name: "SequenceSource → discard".to_owned(),
                points: parts,
            }],
        },
        Curve {
            id: "offsets-startup".to_owned(),
            title: "load time against stored offsets (fresh process)".to_owned(),
            x_label: "stored offsets".to_owned(),
            unit: Unit::Seconds,
            log_x: true,
            log_y: true,
            series: startup,
        },
        Curve {
            id: "offsets-rss".to_owned(),
            title: "peak RSS against stored offsets".to_owned(),
            x_label: "stored offsets".to_owned(),
            unit: Unit::Bytes,
            log_x: true,
            log_y: false,
            series: rss,
        },
    ])
}

const FERRY: &str = "Ferry FileStore open";
const HASHMAP: &str = "HashMap<bytes, bytes> load (floor)";

/// Start-up and peak RSS series for every size in `plan.offset_counts`.
fn offsets(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
) -> BenchResult<(Vec<Series>, Vec<Series>)> {
    let mut time = [Vec::new(), Vec::new()];
    let mut rss = [Vec::new(), Vec::new()];
    for &size in &plan.offset_counts {
        let dir = crate::e2e::RunDir::create(&plan.work_dir, &format!("scale-offsets-{size}"))?;
        let (ferry, rewrite) = fixture::ferry_and_rewrite(&dir.join("s"), size, runtime)?;
        let expected = size as u64;
        let loads = [
            Load {
                name: FERRY,
                kind: "file-store",
                path: &ferry,
                expected,
            },
            Load {
                name: HASHMAP,
                kind: "hashmap",
                path: &rewrite,
                expected,
            },
        ];
        // The same runs and page-cache state as the start-up case, so its 1M row and this curve's 1M
        // point measure the same thing.
        for (i, (load, measured)) in loads.iter().zip(time_loads(&loads)?).enumerate() {
            let stats = Stats::from_durations(&measured.took);
            eprintln!(
                "  {size} offsets, {}: median {} (runs {} to {}), peak RSS {}",
                load.kind,
                human_duration(stats.median()),
                human_duration(stats.min()),
                human_duration(stats.max()),
                crate::measure::human_bytes(measured.peak as f64)
            );
            time[i].push((size as f64, stats.median()));
            rss[i].push((size as f64, measured.peak as f64));
        }
        dir.remove()?;
    }
    let named = |[a, b]: [Vec<(f64, f64)>; 2]| {
        vec![
            Series {
                name: FERRY.to_owned(),
                points: a,
            },
            Series {
                name: HASHMAP.to_owned(),
                points: b,
            },
        ]
    };
    Ok((named(time), named(rss)))
}
