//! A real crash test: a child process writes to a `FileStore` as fast as it can (compacting as it
//! goes) and is killed with SIGKILL at random moments; after each kill the parent reopens the file.
//!
//! Guarantee under test: every flush the child reported as done (its `set` returned `Ok` before it
//! printed `done <n>`) survives the kill; a batch is visible whole or not at all; the file always
//! reopens cleanly. Process death keeps the page cache, so this checks the protocol under process
//! crashes; power loss is covered by the torn-write cases in `file_store_corruption.rs`.
//!
//! The child is this test binary, re-run with `--exact child_entry --ignored` and the store path in
//! `FERRY_CRASH_CHILD_STORE`. Set `FERRY_CRASH_SEED` to replay a run's random delays.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferry_api::ConnectMap;
use ferry_offsets::{
    FileStore, FileStoreOptions, OffsetBackingStore, OffsetWrite, StoreError, decode_value,
    encode_key, encode_value,
};

const CHILD_ENV: &str = "FERRY_CRASH_CHILD_STORE";
/// Partitions with a plain offset; partition `PARTITIONS` carries padding of varying size.
const PARTITIONS: i64 = 6;
const ROUNDS: usize = 24;

fn options() -> FileStoreOptions {
    // Small thresholds: the child compacts every few dozen flushes, so kills land inside compactions.
    FileStoreOptions {
        compact_min_bytes: 16 << 10,
        compact_ratio: 1.5,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"))
}

fn key(p: i64) -> Vec<u8> {
    encode_key(
        "crash-src",
        Some(&ConnectMap::new().with("partition", p).unwrap_or_default()),
    )
}

/// Batch `n`: every partition gets position `n`; the padding partition's value size varies with `n`
/// so frames end at varying places within pages.
fn batch(n: i64) -> Vec<OffsetWrite> {
    let mut writes: Vec<OffsetWrite> = (0..PARTITIONS)
        .map(|p| {
            let offset = ConnectMap::new().with("position", n).unwrap_or_default();
            OffsetWrite {
                key: key(p),
                value: Some(encode_value(&offset)),
            }
        })
        .collect();
    let pad = "x".repeat(((n * 7919) % 6000) as usize);
    let offset = ConnectMap::new()
        .with("position", n)
        .and_then(|m| m.with("pad", pad))
        .unwrap_or_default();
    writes.push(OffsetWrite {
        key: key(PARTITIONS),
        value: Some(encode_value(&offset)),
    });
    writes
}

/// The position of every partition (padding included), `None` where absent.
fn positions(store: &FileStore, rt: &tokio::runtime::Runtime) -> Vec<Option<i64>> {
    let keys: Vec<Vec<u8>> = (0..=PARTITIONS).map(key).collect();
    let values = rt
        .block_on(store.get(&keys))
        .unwrap_or_else(|e| panic!("get: {e}"));
    values
        .into_iter()
        .map(|v| {
            v.map(|bytes| {
                let map = decode_value(&bytes).unwrap_or_else(|e| panic!("stored value: {e}"));
                map.get("position")
                    .and_then(ferry_api::Value::as_i64)
                    .unwrap_or(-1)
            })
        })
        .collect()
}

/// The number after `word` in a line of the child's output (libtest may prefix the first one).
fn parse(line: &str, word: &str) -> Option<i64> {
    let at = line.find(word)?;
    line[at + word.len()..].trim().parse().ok()
}

/// The child: write batches forever, announcing each completed flush.
#[test]
#[ignore = "the child process of killed_writer_never_loses_an_acknowledged_flush"]
fn child_entry() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store =
        FileStore::open_with(&path, options()).unwrap_or_else(|e| panic!("child open: {e}"));
    let rt = runtime();
    let start = positions(&store, &rt)[0].unwrap_or(0) + 1;
    let mut out = std::io::stdout().lock();
    let announce = |out: &mut std::io::StdoutLock<'_>, line: String| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .unwrap_or_else(|e| panic!("stdout: {e}"));
    };
    announce(&mut out, format!("\nstart {start}"));
    for n in start.. {
        rt.block_on(store.set(&batch(n)))
            .unwrap_or_else(|e| panic!("child set {n}: {e}"));
        announce(&mut out, format!("done {n}"));
    }
}

/// Runs `f` with a subscriber that records this thread's log lines.
fn with_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);
    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let logs = capture.0.lock().unwrap_or_else(|e| e.into_inner());
    (result, String::from_utf8_lossy(&logs).into_owned())
}

struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
}

fn seed() -> u64 {
    std::env::var("FERRY_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1
        })
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[test]
fn killed_writer_never_loses_an_acknowledged_flush() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let path = dir.path().join("offsets.ferry");
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current exe: {e}"));
    let seed = seed();
    eprintln!("crash test seed {seed} (FERRY_CRASH_SEED={seed} replays the delays)");
    let mut rng = XorShift(seed);
    let rt = runtime();
    let started = Instant::now();

    // What every partition held at the last verification (0: nothing yet).
    let mut verified = 0i64;
    let (mut kills, mut lock_checks, mut acknowledged) = (0usize, 0usize, 0i64);
    let (mut torn_tails, mut leftovers) = (0usize, 0usize);
    for round in 0..ROUNDS {
        let stderr_path: PathBuf = dir.path().join(format!("child-{round}.stderr"));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_entry",
                "--nocapture",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawning the child: {e}"));
        let stdout = child
            .stdout
            .take()
            .unwrap_or_else(|| panic!("child stdout is piped"));
        let (tx, rx) = mpsc::channel::<String>();
        let reader = thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });

        let mut lines = Vec::new();
        if round % 3 == 0 {
            // Wait until the child holds the store, then try to open it ourselves.
            loop {
                match rx.recv_timeout(Duration::from_secs(60)) {
                    Ok(line) => {
                        let done = parse(&line, "done ").is_some();
                        lines.push(line);
                        if done {
                            break;
                        }
                    }
                    Err(e) => panic!(
                        "round {round}: the child reported no flush ({e}); its stderr:\n{}",
                        read_lossy(&stderr_path)
                    ),
                }
            }
            match FileStore::open_with(&path, options()) {
                Err(StoreError::Locked { lock, .. }) => {
                    assert!(lock.to_string_lossy().ends_with(".lock"));
                    lock_checks += 1;
                }
                Err(e) => panic!("round {round}: expected Locked while the child writes, got {e}"),
                Ok(_) => panic!("round {round}: the store opened twice"),
            }
        }
        thread::sleep(Duration::from_millis(rng.below(150)));
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "round {round}: the child exited by itself ({status}); its stderr:\n{}",
                read_lossy(&stderr_path)
            );
        }
        child.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
        child
            .wait()
            .unwrap_or_else(|e| panic!("reaping the child: {e}"));
        kills += 1;
        let _ = reader.join();
        lines.extend(rx.try_iter());

        if let Some(start) = lines.iter().find_map(|l| parse(l, "start ")) {
            assert_eq!(
                start,
                verified + 1,
                "round {round}: the child resumed from what was verified"
            );
        }
        let last_done = lines.iter().filter_map(|l| parse(l, "done ")).max();
        let floor = last_done.unwrap_or(verified);
        let ceiling = floor + 1;
        acknowledged = acknowledged.max(floor);

        let (store, logs) = with_logs(|| FileStore::open_with(&path, options()));
        let store =
            store.unwrap_or_else(|e| panic!("round {round}: reopening after SIGKILL failed: {e}"));
        torn_tails += logs.matches("dropped a torn final write").count();
        leftovers += logs.matches("compact-tmp, left behind").count();
        let got = positions(&store, &rt);
        let first = got[0].unwrap_or(0);
        assert!(
            got.iter().all(|v| v.unwrap_or(0) == first),
            "round {round}: a batch is applied whole or not at all: {got:?}"
        );
        assert!(
            (floor..=ceiling).contains(&first),
            "round {round}: stored position {first}, but the child had acknowledged {floor} and \
             attempted at most {ceiling}"
        );
        assert!(
            !PathBuf::from(format!("{}.compact-tmp", path.display())).exists(),
            "round {round}: a leftover compaction file is removed on open"
        );
        verified = first;
        drop(store);
        if kills >= 20 && started.elapsed() > Duration::from_secs(25) {
            break;
        }
    }
    assert!(kills >= 20, "only {kills} kills");
    assert!(
        lock_checks >= 1,
        "the lock was checked while the child held the store"
    );

    // The child flushed far more than the file holds: compaction ran (and the file stayed small).
    let smallest_frame: u64 = batch(0)
        .iter()
        .map(|w| 8 + w.key.len() + w.value.as_ref().map_or(0, Vec::len))
        .sum::<usize>() as u64
        + 16;
    let appended = smallest_frame * acknowledged as u64;
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap();
    eprintln!(
        "{kills} kills, {acknowledged} flushes acknowledged, ≥ {appended} bytes appended, file {len} \
         bytes; reopens found {torn_tails} torn tails and {leftovers} interrupted compactions"
    );
    if appended > 4 * (16 << 10) {
        assert!(
            len < appended,
            "compaction kept the file below what was appended ({len} ≥ {appended})"
        );
    }
}
