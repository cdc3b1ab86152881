//! Scaling curves, one run per point (the curves' shape is the result, not each point's spread):
//! throughput against tasks (SequenceSource over 8 partitions; FileStreamSource with one file per
//! task, all into one file sink) and against partitions (SequenceSource, one task); start-up time and
//! peak RSS against stored offsets (FileStore and the HashMap floor, each load in a fresh probe
//! process).

use crate::e2e::{file, sequence};
use crate::memory::run_probe;
use crate::offsets::fixture;
use crate::results::{Curve, Series, Unit};
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
        for (i, (what, path)) in [("file-store", &ferry), ("hashmap", &rewrite)]
            .into_iter()
            .enumerate()
        {
            // Warm the page cache untimed, then take the best of a few. The largest size gets one
            // run and no warm-up (its files were just written, so they are in the page cache).
            let runs = if size >= 5_000_000 { 1 } else { 3 };
            if runs > 1 {
                run_probe(what, path)?;
            }
            let mut best = None::<crate::memory::Probe>;
            for _ in 0..runs {
                let probe = run_probe(what, path)?;
                if best.as_ref().is_none_or(|b| probe.took < b.took) {
                    best = Some(probe);
                }
            }
            if let Some(probe) = best {
                eprintln!(
                    "  {size} offsets, {what}: {:.1?}, peak RSS {}",
                    probe.took,
                    crate::measure::human_bytes(probe.peak as f64)
                );
                time[i].push((size as f64, probe.took.as_secs_f64()));
                rss[i].push((size as f64, probe.peak as f64));
            }
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
