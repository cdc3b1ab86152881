//! The stream loop without a server: a scripted [`ReplicationStream`] and a fixed catalog.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ferry_api::Value;
use tokio::sync::{mpsc, watch};

use super::{Item, Pump, Start, run};
use crate::catalog::ColumnSource;
use crate::config::CdcConfig;
use crate::error::CdcError;
use crate::stream::{ReplicationStream, WalEvent};
use crate::types::Column;

struct Scripted {
    events: VecDeque<WalEvent>,
    /// Events the server sends after a pause, once `events` ran out.
    later: Option<(Duration, VecDeque<WalEvent>)>,
    acked: Arc<Mutex<Vec<u64>>>,
}

#[async_trait]
impl ReplicationStream for Scripted {
    async fn recv(&mut self) -> Result<Option<WalEvent>, CdcError> {
        if self.events.is_empty()
            && let Some((pause, events)) = self.later.take()
        {
            tokio::time::sleep(pause).await;
            self.events = events;
        }
        match self.events.pop_front() {
            Some(event) => Ok(Some(event)),
            // An idle server: nothing more, ever.
            None => std::future::pending().await,
        }
    }

    fn acknowledge(&self, lsn: u64) {
        if let Ok(mut acked) = self.acked.lock() {
            acked.push(lsn);
        }
    }

    async fn close(&mut self) {}
}

struct Catalog;

#[async_trait]
impl ColumnSource for Catalog {
    async fn columns(&self, _schema: &str, _table: &str) -> Result<Vec<Column>, CdcError> {
        Ok(vec![
            Column {
                name: "id".into(),
                type_oid: 23,
                typmod: -1,
                nullable: false,
                primary_key: true,
                enum_labels: None,
                default_expr: None,
            },
            Column {
                name: "v".into(),
                type_oid: 25,
                typmod: -1,
                nullable: true,
                primary_key: false,
                enum_labels: None,
                default_expr: None,
            },
        ])
    }
}

fn relation() -> Vec<u8> {
    let mut m = vec![b'R'];
    m.extend(1_u32.to_be_bytes());
    m.extend(b"public\0t\0");
    m.push(b'd');
    m.extend(2_i16.to_be_bytes());
    for (key, name, oid) in [(1_u8, "id", 23_u32), (0, "v", 25)] {
        m.push(key);
        m.extend(name.as_bytes());
        m.push(0);
        m.extend(oid.to_be_bytes());
        m.extend((-1_i32).to_be_bytes());
    }
    m
}

fn insert(id: i32) -> Vec<u8> {
    let mut m = vec![b'I'];
    m.extend(1_u32.to_be_bytes());
    m.push(b'N');
    m.extend(2_i16.to_be_bytes());
    let id = id.to_string();
    m.push(b't');
    m.extend((id.len() as i32).to_be_bytes());
    m.extend(id.as_bytes());
    m.push(b'n');
    m
}

/// BEGIN xid 7, the relation, inserts 1 and 2, COMMIT ending at 300.
fn transaction() -> VecDeque<WalEvent> {
    VecDeque::from([
        WalEvent::Begin {
            xid: 7,
            commit_time_us: 1_000,
            final_lsn: 250,
        },
        WalEvent::Data {
            lsn: 200,
            data: relation(),
        },
        WalEvent::Data {
            lsn: 210,
            data: insert(1),
        },
        WalEvent::Data {
            lsn: 220,
            data: insert(2),
        },
        WalEvent::Commit {
            end_lsn: 300,
            commit_time_us: 1_000,
        },
    ])
}

fn config() -> Arc<CdcConfig> {
    let config: ferry_api::Config = [
        ("topic.prefix", "srv"),
        ("database.hostname", "db"),
        ("database.user", "u"),
        ("database.dbname", "d"),
        ("database.sslmode", "disable"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    match CdcConfig::parse(&config) {
        Ok(config) => Arc::new(config),
        Err(issues) => panic!("{issues:?}"),
    }
}

struct Running {
    records: mpsc::Receiver<Item>,
    acks: watch::Sender<u64>,
    acked: Arc<Mutex<Vec<u64>>>,
    _stop: watch::Sender<bool>,
}

fn start(events: VecDeque<WalEvent>, partial: Option<crate::offset::Partial>) -> Running {
    start_with_later(events, None, partial)
}

fn start_with_later(
    events: VecDeque<WalEvent>,
    later: Option<(Duration, VecDeque<WalEvent>)>,
    partial: Option<crate::offset::Partial>,
) -> Running {
    let (out, records) = mpsc::channel(16);
    let (acks, acks_rx) = watch::channel(0);
    let (stop, stop_rx) = watch::channel(false);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let stream = Box::new(Scripted {
        events,
        later,
        acked: acked.clone(),
    });
    let pump = Pump {
        config: config(),
        db: None,
        catalog: Arc::new(Catalog),
        out,
        acks: acks_rx,
        stop: stop_rx,
    };
    tokio::spawn(run(
        pump,
        Start::Stream {
            stream,
            lsn_commit: 100,
            from_offset: true,
            partial,
        },
    ));
    Running {
        records,
        acks,
        acked,
        _stop: stop,
    }
}

async fn next(running: &mut Running) -> Item {
    match tokio::time::timeout(Duration::from_secs(5), running.records.recv()).await {
        Ok(Some(item)) => item,
        other => panic!("no record: {other:?}"),
    }
}

fn long(record: &ferry_api::SourceRecord, key: &str) -> Option<i64> {
    record
        .source_offset
        .as_ref()
        .and_then(|o| o.get(key))
        .and_then(Value::as_i64)
}

#[tokio::test]
async fn the_last_record_of_a_transaction_carries_the_offset_after_its_commit() {
    let mut running = start(transaction(), None);
    let Ok(first) = next(&mut running).await else {
        panic!("first")
    };
    let Ok(second) = next(&mut running).await else {
        panic!("second")
    };
    // Inside the transaction: resume from the previous commit, skipping one change.
    assert_eq!(
        (
            long(&first, "lsn"),
            long(&first, "lsn_commit"),
            long(&first, "ferry_tx_events")
        ),
        (Some(210), Some(100), Some(1))
    );
    // The last: the transaction is complete.
    assert_eq!(
        (
            long(&second, "lsn"),
            long(&second, "lsn_commit"),
            long(&second, "lsn_proc")
        ),
        (Some(220), Some(300), Some(300))
    );
    assert_eq!(long(&second, "ferry_tx_events"), None);
    assert_eq!(long(&second, "txId"), Some(7));
    // Debezium resumes after a COMMIT only when the offset says COMMIT (else it skips the next
    // transaction's first change).
    assert_eq!(
        second
            .source_offset
            .as_ref()
            .and_then(|o| o.get("messageType"))
            .and_then(Value::as_str),
        Some("COMMIT")
    );
}

/// A Debezium offset inside transaction 7 after its change at LSN 210: a transaction that arrives
/// before 7 committed before it (Debezium emitted it whole) and is skipped; inside 7 only the
/// change after 210 is emitted.
#[tokio::test]
async fn a_debezium_offset_skips_earlier_transactions_and_its_changes_up_to_its_lsn() {
    let mut events = VecDeque::from([
        WalEvent::Begin {
            xid: 6,
            commit_time_us: 900,
            final_lsn: 190,
        },
        WalEvent::Data {
            lsn: 150,
            data: relation(),
        },
        WalEvent::Data {
            lsn: 160,
            data: insert(9),
        },
        WalEvent::Commit {
            end_lsn: 195,
            commit_time_us: 900,
        },
    ]);
    events.extend(transaction());
    let mut running = start(
        events,
        Some(crate::offset::Partial::UpTo {
            xid: 7,
            lsn_proc: 210,
        }),
    );
    let Ok(only) = next(&mut running).await else {
        panic!("record")
    };
    assert_eq!(
        only.value.as_ref().map(|v| v["after"]["id"].clone()),
        Some(serde_json::json!(2))
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(200), running.records.recv())
            .await
            .is_err(),
        "nothing more"
    );
}

#[tokio::test]
async fn a_resumed_transaction_skips_exactly_the_changes_already_emitted() {
    let mut running = start(
        transaction(),
        Some(crate::offset::Partial::Events {
            xid: 7,
            processed: 1,
        }),
    );
    let Ok(only) = next(&mut running).await else {
        panic!("record")
    };
    assert_eq!(
        only.value.as_ref().map(|v| v["after"]["id"].clone()),
        Some(serde_json::json!(2))
    );
    assert_eq!(long(&only, "lsn_commit"), Some(300));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), running.records.recv())
            .await
            .is_err(),
        "nothing more"
    );
}

#[tokio::test]
async fn a_resume_that_meets_another_transaction_fails_loudly() {
    let mut running = start(
        transaction(),
        Some(crate::offset::Partial::Events {
            xid: 8,
            processed: 1,
        }),
    );
    let Err(error) = next(&mut running).await else {
        panic!("an error")
    };
    assert!(matches!(error, CdcError::Unsafe(_)), "{error}");
    assert!(error.to_string().contains("transaction 8"), "{error}");
}

#[tokio::test]
async fn acknowledgements_reach_the_stream_as_they_are_committed() {
    let mut running = start(transaction(), None);
    let _ = next(&mut running).await;
    let _ = next(&mut running).await;
    let _ = running.acks.send(300);
    for _ in 0..50 {
        if running
            .acked
            .lock()
            .map(|a| a.contains(&300))
            .unwrap_or(false)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("300 was never acknowledged");
}

#[test]
fn snapshot_markers_follow_debeziums_precedence() {
    use super::marker;
    // (first row of the first table, first in table, last in table, last overall)
    assert_eq!(marker(true, true, true, true), "last", "a single row");
    assert_eq!(
        marker(true, true, true, false),
        "first",
        "first table, one row, more tables"
    );
    assert_eq!(marker(false, true, true, false), "last_in_data_collection");
    assert_eq!(
        marker(false, true, false, false),
        "first_in_data_collection"
    );
    assert_eq!(marker(false, false, false, false), "true");
}

/// Keepalives reporting new positions arrive many times a second on a busy server; each
/// checkpoint is an offset commit, so at most one a second is sent — at the first position, then
/// the latest one once the second has passed — and none inside a transaction.
#[tokio::test]
async fn idle_checkpoints_are_sent_at_most_once_a_second() {
    let burst = |from: u64| -> VecDeque<WalEvent> {
        (0..20)
            .map(|i| WalEvent::KeepAlive {
                wal_end: from + i * 10,
            })
            .collect()
    };
    let mut first = burst(400);
    // Inside a transaction, a keepalive sends nothing.
    first.push_back(WalEvent::Begin {
        xid: 8,
        commit_time_us: 2_000,
        final_lsn: 900,
    });
    first.push_back(WalEvent::KeepAlive { wal_end: 950 });
    first.push_back(WalEvent::Commit {
        end_lsn: 960,
        commit_time_us: 2_000,
    });
    let started = std::time::Instant::now();
    let mut running = start_with_later(
        first,
        Some((Duration::from_millis(2500), burst(1_000))),
        None,
    );
    let Ok(checkpoint) = next(&mut running).await else {
        panic!("a checkpoint")
    };
    assert!(checkpoint.offset_only);
    assert_eq!(long(&checkpoint, "lsn_commit"), Some(400));
    // The rest of the burst and the transaction: nothing within the second. (The later burst comes
    // 2.5 s after the first, so a slow test thread does not see it inside this window.)
    let quiet = tokio::time::timeout(Duration::from_millis(700), running.records.recv()).await;
    assert!(
        quiet.is_err(),
        "a second checkpoint within a second: {quiet:?}"
    );
    let Ok(second) = next(&mut running).await else {
        panic!("a second checkpoint")
    };
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(second.offset_only);
    assert_eq!(long(&second, "lsn_commit"), Some(1_000));
}
