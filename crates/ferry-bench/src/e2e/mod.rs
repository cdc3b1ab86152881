//! End to end: the data path through a real Ferry worker (task loop, delivery watcher, AckTracker,
//! committer, FileStore) side by side with the same data moved without Ferry.
//!
//! 1. [`sequence`]: SequenceSource → a discarding sink, offsets on (the worker) vs off (the same task
//!    and sink in a bare poll → send → await loop): what the offset machinery costs per record.
//! 2. [`file`]: FileStreamSource → file sink vs a plain buffered line copy with one fsync.
//! 3. [`kafka`]: FileStreamSource → Kafka vs a plain rdkafka producer sending the same lines.
//! 4. [`connect`]: the same input through FileStreamSource → Kafka with the worker as a process:
//!    `ferry distributed` vs Kafka Connect 4.4, on the same broker (and Kafka's ProducerPerformance).
//!
//! Contenders alternate run by run ([`rounds`]), so a change in the machine's load (the machine is
//! shared) hits both alike. Every file the cases write is under `plan.work_dir` and removed after its
//! run; the inputs are removed when the case is done.

pub(crate) mod connect;
mod discard;
pub(crate) mod file;
pub(crate) mod kafka;
pub(crate) mod lines;
mod rsyslog;
pub(crate) mod scale_out;
pub(crate) mod sequence;
mod worker;

pub(crate) use worker::RunDir;

use std::time::Duration;

use crate::measure::human_duration;
use crate::results::{Case, Work};
use crate::{BenchResult, Plan};

/// Timed runs per contender.
const RUNS: usize = 3;
/// Past this, a case stops after the round that took it (a long run is already a stable number).
const LONG_RUN: Duration = Duration::from_secs(60);

/// Runs the end-to-end cases; the Kafka cases only with a broker. The Kafka Connect comparison's
/// failure is not the run's: it goes to `skipped`, the other cases stay.
pub fn run(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
    broker: Option<&ferry_testkit::KafkaBroker>,
    skipped: &mut Vec<String>,
) -> BenchResult<Vec<Case>> {
    let mut cases = vec![
        sequence::case(runtime, &plan.work_dir, plan.overhead_records, RUNS)?,
        file::case(runtime, &plan.work_dir, plan.file_bytes, RUNS)?,
    ];
    if rsyslog::available() {
        cases.push(file::rsyslog_case(
            runtime,
            &plan.work_dir,
            plan.rsyslog_bytes,
            RUNS,
        )?);
    } else {
        eprintln!("  rsyslogd not found: the rsyslog case is not run (scripts/bench installs it)");
    }
    if let Some(broker) = broker {
        // One input for both Kafka cases.
        let bytes = plan.kafka_file_bytes;
        let input_path = plan.work_dir.join(format!("e2e-kafka-input-{bytes}.log"));
        let input = lines::write(&input_path, bytes)?;
        let kafka = kafka::case(
            runtime,
            &plan.work_dir,
            &broker.bootstrap_servers(),
            &input_path,
            input,
            RUNS,
        );
        let connect = kafka.is_ok().then(|| {
            eprintln!("  Kafka Connect 4.4 and Ferry as worker processes");
            connect::case(
                runtime,
                &plan.work_dir,
                broker,
                &input_path,
                input,
                plan.connect_runs,
                plan.connect_kills,
            )
        });
        std::fs::remove_file(&input_path).map_err(|e| {
            crate::BenchError::from(format!(
                "cannot remove the input {}: {e}",
                input_path.display()
            ))
        })?;
        cases.push(kafka?);
        match connect {
            Some(Ok(case)) => cases.push(case),
            Some(Err(e)) => {
                let why = format!("FileStreamSource → Kafka, Ferry vs Kafka Connect 4.4: {e}");
                eprintln!("  {why}");
                skipped.push(why);
            }
            None => {}
        }
    }
    Ok(cases)
}

/// The exactly-once comparison ([`connect::exactly_once_case`]) on the worker-process case's input
/// size.
pub fn exactly_once(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
    broker: &ferry_testkit::KafkaBroker,
) -> BenchResult<Case> {
    let bytes = plan.kafka_file_bytes;
    let input_path = plan.work_dir.join(format!("eos-input-{bytes}.log"));
    let input = lines::write(&input_path, bytes)?;
    let case = connect::exactly_once_case(
        runtime,
        &plan.work_dir,
        broker,
        &input_path,
        input,
        plan.connect_runs,
    );
    std::fs::remove_file(&input_path).map_err(|e| {
        crate::BenchError::from(format!(
            "cannot remove the input {}: {e}",
            input_path.display()
        ))
    })?;
    case
}

/// The distributed scale-out case ([`scale_out::case`]): `plan.sequence_records` records timed per
/// run.
pub fn scale_out(
    plan: &Plan,
    runtime: &tokio::runtime::Runtime,
    broker: &ferry_testkit::KafkaBroker,
) -> BenchResult<Case> {
    scale_out::case(
        runtime,
        &plan.work_dir,
        broker,
        plan.sequence_records,
        plan.connect_runs,
    )
}

/// One contender of a case as [`rounds`] runs it.
pub(crate) struct Runner<'a> {
    pub(crate) name: &'static str,
    /// The work of one run (the rate printed with each run).
    pub(crate) work: Work,
    /// One timed run; the argument is the round (from 1), for names of per-run files and topics.
    pub(crate) run: Box<dyn FnMut(usize) -> BenchResult<Duration> + 'a>,
}

/// Runs every contender once per round, in order, for `runs` rounds (fewer if a round has a run
/// longer than [`LONG_RUN`]), printing each run. Returns each contender's samples.
pub(crate) fn rounds(
    label: &str,
    runs: usize,
    contenders: &mut [Runner<'_>],
) -> BenchResult<Vec<Vec<Duration>>> {
    let mut samples = vec![Vec::with_capacity(runs); contenders.len()];
    for round in 1..=runs {
        let mut longest = Duration::ZERO;
        // Every other round the other way round: whoever runs first meets a colder broker, page
        // cache and allocator, so a fixed order favoured the contender that ran second.
        let mut order: Vec<_> = contenders.iter_mut().zip(&mut samples).collect();
        if round % 2 == 0 {
            order.reverse();
        }
        for (contender, out) in order {
            let took = (contender.run)(round)?;
            eprintln!(
                "  {label} run {round}/{runs}: {}: {} ({})",
                contender.name,
                human_duration(took.as_secs_f64()),
                rate(contender.work, took)
            );
            longest = longest.max(took);
            out.push(took);
        }
        if longest > LONG_RUN && round < runs {
            eprintln!(
                "  {label}: a run took over {}s; stopping after {round} round(s)",
                LONG_RUN.as_secs()
            );
            break;
        }
    }
    Ok(samples)
}

/// `123 456 records/s` or `88.2 MiB/s` (bytes when the work has bytes).
fn rate(work: Work, took: Duration) -> String {
    let secs = took.as_secs_f64();
    if work.bytes > 0 {
        format!("{:.1} MiB/s", work.bytes as f64 / secs / f64::from(1 << 20))
    } else {
        format!("{:.0} records/s", work.records as f64 / secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Contender;

    fn assert_sane(case: &Case, names: [&str; 2], work: Work) {
        let got: Vec<&str> = case.contenders.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(got, names, "{}", case.name);
        assert_eq!(case.reference, names[1]);
        for Contender {
            name,
            stats,
            work: w,
            ..
        } in &case.contenders
        {
            assert_eq!(stats.samples.len(), 1, "{name}");
            let w = w.unwrap_or_else(|| panic!("{name} has no work"));
            assert_eq!((w.records, w.bytes), (work.records, work.bytes), "{name}");
            let secs = stats.median();
            assert!(secs.is_finite() && secs > 0.0, "{name}: {secs}");
            assert!(w.records as f64 / secs > 0.0, "{name}");
        }
        assert!(case.time_ratio(names[0]).is_some_and(f64::is_finite));
    }

    /// Contenders take turns at running first, and each keeps its own samples in round order.
    #[test]
    fn rounds_alternate_which_contender_runs_first() {
        let calls = std::cell::RefCell::new(Vec::new());
        let work = Work {
            records: 1,
            bytes: 0,
        };
        let runner = |name: &'static str| Runner {
            name,
            work,
            run: Box::new({
                let calls = &calls;
                move |round| {
                    calls.borrow_mut().push((round, name));
                    let millis = if name == "a" { 1 } else { 2 };
                    Ok(Duration::from_millis(millis * round as u64))
                }
            }),
        };
        let mut contenders = [runner("a"), runner("b")];
        let samples = rounds("test", 3, &mut contenders).expect("rounds");
        assert_eq!(
            *calls.borrow(),
            vec![(1, "a"), (1, "b"), (2, "b"), (2, "a"), (3, "a"), (3, "b")]
        );
        let ms = |v: &[Duration]| v.iter().map(Duration::as_millis).collect::<Vec<_>>();
        assert_eq!(ms(&samples[0]), vec![1, 2, 3]);
        assert_eq!(ms(&samples[1]), vec![2, 4, 6]);
    }

    /// Cases 1 and 2 with tiny sizes and one run: they must still run, count right and time sanely.
    #[test]
    fn sequence_and_file_cases_run_and_count() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let dir = tempfile::tempdir().expect("temp dir");

        let case = sequence::case(&runtime, dir.path(), 4_000, 1).expect("sequence case");
        assert_sane(
            &case,
            [sequence::FERRY, sequence::PLAIN],
            Work {
                records: 4_000,
                bytes: 0,
            },
        );

        let case = file::case(&runtime, dir.path(), 256 << 10, 1).expect("file case");
        let ferry = case.contenders[0].work.expect("work");
        assert!(ferry.bytes > (256 << 10) - 200 && ferry.bytes <= 256 << 10);
        assert!(ferry.records > ferry.bytes / 152 && ferry.records < ferry.bytes / 100);
        assert_sane(&case, [file::FERRY, file::PLAIN], ferry);

        // rsyslog copies the same lines (where it is installed: scripts/bench installs it).
        if rsyslog::available() {
            let case =
                file::rsyslog_case(&runtime, dir.path(), 256 << 10, 1).expect("rsyslog case");
            let names: Vec<&str> = case.contenders.iter().map(|c| c.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    file::FERRY,
                    file::FERRY_JSON,
                    rsyslog::DEFAULT,
                    rsyslog::SYNC
                ]
            );
            assert_eq!(case.reference, rsyslog::DEFAULT);
            assert!(
                case.contenders
                    .iter()
                    .all(|c| c.stats.median().is_finite() && c.stats.median() > 0.0)
            );
        }

        // Everything a case wrote is gone.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("read the temp dir")
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
