//! Support for the PostgresSource process tests (`postgres_*.rs`): a blocking client of the test PostgreSQL
//! (127.0.0.1:5432, database `test`, user `postgres`), tables that drop themselves, the connector's
//! properties, and the sink lines it produces.

#![allow(dead_code)] // each test file uses a different part

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio_postgres::{Client, NoTls};

use crate::support::Workspace;

const LIBPQ: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";
/// The test database as a JDBC URL (the user is given separately).
pub const JDBC_URL: &str = "jdbc:postgresql://127.0.0.1:5432/test";

/// A blocking client of the test database.
pub struct Pg {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl Pg {
    pub fn connect() -> Pg {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the PostgreSQL client");
        let client = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(LIBPQ, NoTls)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot connect to the test PostgreSQL at 127.0.0.1:5432 ({e}); start it with \
                         `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`"
                    )
                });
            tokio::spawn(connection);
            client
        });
        Pg { runtime, client }
    }

    /// Runs SQL statements (`;`-separated), panicking on failure.
    pub fn execute(&self, sql: &str) {
        self.runtime
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    /// The first column of the first row, as an integer.
    pub fn scalar(&self, sql: &str) -> i64 {
        let row = self
            .runtime
            .block_on(self.client.query_one(sql, &[]))
            .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        row.get::<_, i64>(0)
    }

    /// Creates `public.<unique name>` with `columns`; dropped with the guard.
    pub fn table(&self, test: &str, columns: &str) -> PgTable {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "ferry_proc_{test}_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        self.execute(&format!("CREATE TABLE public.{name} ({columns})"));
        PgTable {
            name,
            pg: Pg::connect(),
        }
    }
}

/// A table dropped when the guard is dropped.
pub struct PgTable {
    pub name: String,
    pg: Pg,
}

impl Drop for PgTable {
    fn drop(&mut self) {
        // Bounded: a ferry killed a moment ago may still hold a lock until the server notices.
        let sql = format!(
            "SET lock_timeout = '20s'; DROP TABLE IF EXISTS public.{}",
            self.name
        );
        let _ = self.pg.runtime.block_on(self.pg.client.batch_execute(&sql));
    }
}

/// Writes `name.properties` for PostgresSource reading `table` in `mode`, plus `extra`.
pub fn connector(
    ws: &Workspace,
    name: &str,
    table: &str,
    mode: &str,
    extra: &[(&str, &str)],
) -> PathBuf {
    let mut entries = vec![
        ("name", name),
        ("connector.class", "PostgresSource"),
        ("connection.url", JDBC_URL),
        ("connection.user", "postgres"),
        ("mode", mode),
        ("table.whitelist", table),
        ("topic.prefix", "pg."),
        ("poll.interval.ms", "100"),
    ];
    // Later entries win in a properties file.
    entries.extend_from_slice(extra);
    ws.properties(&format!("{name}.properties"), &entries)
}

/// The integer column `column` of a sink line's value.
pub fn value_i64(line: &Value, column: &str) -> i64 {
    line["value"][column]
        .as_i64()
        .unwrap_or_else(|| panic!("no integer {column:?} in the value of {line}"))
}

/// The `incrementing` field of a sink line's offset.
pub fn offset_incrementing(line: &Value) -> i64 {
    line["source_offset"]["incrementing"]
        .as_i64()
        .unwrap_or_else(|| panic!("no incrementing offset in {line}"))
}

/// A TCP proxy in front of the test PostgreSQL, to make the database unreachable and bring it back
/// on the same port.
pub struct Proxy {
    pub port: u16,
    state: std::sync::Arc<ProxyState>,
    accept: Option<std::thread::JoinHandle<()>>,
}

struct ProxyState {
    running: std::sync::atomic::AtomicBool,
    streams: std::sync::Mutex<Vec<std::net::TcpStream>>,
}

impl Proxy {
    /// A proxy on a free port.
    pub fn start() -> Proxy {
        Self::listen(0)
    }

    /// A proxy on `port` (again), retrying while the port is still being released.
    pub fn start_on(port: u16) -> Proxy {
        Self::listen(port)
    }

    fn listen(port: u16) -> Proxy {
        let mut attempts = 0;
        let listener = loop {
            match std::net::TcpListener::bind(("127.0.0.1", port)) {
                Ok(l) => break l,
                Err(e) if attempts < 100 => {
                    attempts += 1;
                    let _ = e;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => panic!("bind the proxy to port {port}: {e}"),
            }
        };
        let port = listener.local_addr().expect("proxy address").port();
        let state = std::sync::Arc::new(ProxyState {
            running: std::sync::atomic::AtomicBool::new(true),
            streams: std::sync::Mutex::new(Vec::new()),
        });
        let shared = state.clone();
        let accept = std::thread::spawn(move || {
            for client in listener.incoming() {
                if !shared.running.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = std::net::TcpStream::connect("127.0.0.1:5432") else {
                    continue;
                };
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                if let Ok(mut streams) = shared.streams.lock() {
                    for s in [&client, &server] {
                        if let Ok(s) = s.try_clone() {
                            streams.push(s);
                        }
                    }
                }
                pipe(client, s2);
                pipe(server, c2);
            }
        });
        Proxy {
            port,
            state,
            accept: Some(accept),
        }
    }

    /// Closes the port and cuts every proxied connection: the database is unreachable.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.state.running.store(false, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag and drops the listener.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        if let Ok(mut streams) = self.state.streams.lock() {
            for s in streams.drain(..) {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Copies `from` to `to` on a thread until either side closes.
fn pipe(mut from: std::net::TcpStream, mut to: std::net::TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Both);
        let _ = from.shutdown(std::net::Shutdown::Both);
    });
}

/// A port nothing listens on (bound once, then released).
pub fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("address").port()
}

/// Drops the test's replication slot and publication (named like its table), even on failure.
pub struct SlotGuard {
    /// The slot's and the publication's name.
    pub name: String,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let pg = Pg::connect();
        for _ in 0..50 {
            let sql = format!(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                 WHERE slot_name = '{0}' AND active_pid IS NOT NULL; \
                 SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{0}'",
                self.name
            );
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pg.execute(&sql))).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pg.execute(&format!("DROP PUBLICATION IF EXISTS {}", self.name))
        }));
    }
}
