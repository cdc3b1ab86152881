//! The task's database connection, and errors that name the server and the cause.

use std::sync::{Arc, Mutex};

use ferry_api::ConnectError;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use super::url::ConnectionSpec;

/// What a task tells the user to do after a database failure.
pub(crate) const RESTART_HINT: &str = "the task has FAILED: once the database is reachable \
     (and the settings are right), restart the connector or its task (REST: POST \
     /connectors/<name>/restart?includeTasks=true) or restart ferry; it resumes from its committed offsets";

/// Whether a failed call may succeed on a new connection: the connection was lost or could not be
/// made (network, server restarting, too many connections), or the transaction hit a serialization
/// failure or deadlock. Anything else (a missing table, a permission, bad SQL, a wrong password) is
/// permanent.
pub(crate) fn is_transient(e: &tokio_postgres::Error) -> bool {
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") // connection_exception
                || matches!(
                    code,
                    // admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections,
                    // serialization_failure, deadlock_detected
                    "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
                )
        }
        // I/O errors, timeouts, a closed connection.
        None => true,
    }
}

/// The error that ends the task after `attempts` tries that all failed with the transient `e`.
pub(crate) fn give_up(e: &ConnectError, attempts: u32) -> ConnectError {
    ConnectError::fatal(format!(
        "{e} (failed {attempts} attempt{} in a row: connection.attempts={attempts}); {RESTART_HINT}",
        if attempts == 1 { "" } else { "s" }
    ))
}

/// A connected client; its connection runs on a background task until the client is dropped.
pub(crate) struct Db {
    pub(crate) client: Client,
    /// `PostgreSQL at host:port/db as user u`, for messages.
    pub(crate) describe: String,
    connection: AbortOnDrop,
    /// Why the connection ended, once it has.
    closed: Arc<Mutex<Option<String>>>,
}

/// The connection's background task, aborted when dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long closing a connection may wait for the server to see it closed.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl Db {
    /// Closes the connection and waits (briefly) until it is closed, so the server has rolled back
    /// an open read and released its locks when this returns.
    pub(crate) async fn close(self) {
        let Db {
            client,
            mut connection,
            ..
        } = self;
        drop(client);
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut connection.0).await;
    }
}

/// Connects, failing with a message that names the server, the user and the cause.
pub(crate) async fn connect(spec: &ConnectionSpec) -> Result<Db, ConnectError> {
    let describe = spec.to_string();
    let (client, connection) = crate::tls::connect(&spec.config, &spec.tls, error_text)
        .await
        .map_err(|failure| {
            let message = format!(
                "PostgresSource: cannot connect to {describe} ({}): {}",
                spec.tls.describe(),
                failure.message
            );
            let transient = !failure.permanent && failure.error.as_ref().is_some_and(is_transient);
            if transient {
                ConnectError::retriable(message)
            } else {
                ConnectError::fatal(format!("{message}; {RESTART_HINT}"))
            }
        })?;
    let closed = Arc::new(Mutex::new(None));
    let slot = closed.clone();
    let name = describe.clone();
    let connection = tokio::spawn(async move {
        let reason = match connection.await {
            Ok(()) => "the server closed the connection".to_owned(),
            Err(e) => error_text(&e),
        };
        tracing::debug!("PostgresSource: connection to {name} ended: {reason}");
        if let Ok(mut slot) = slot.lock() {
            *slot = Some(reason);
        }
    });
    Ok(Db {
        client,
        describe,
        connection: AbortOnDrop(connection),
        closed,
    })
}

impl Db {
    /// The error of a failed database call (`what` was being done): retriable when a new connection
    /// may succeed ([`is_transient`]), fatal otherwise.
    pub(crate) fn error(&self, what: &str, e: &tokio_postgres::Error) -> ConnectError {
        let lost = e.is_closed()
            || self.client.is_closed()
            || e.as_db_error().is_some_and(|db| {
                // admin_shutdown, crash_shutdown, cannot_connect_now
                matches!(db.code().code(), "57P01" | "57P02" | "57P03")
            });
        if lost || is_transient(e) {
            let cause = self
                .closed
                .lock()
                .ok()
                .and_then(|slot| slot.clone())
                .unwrap_or_else(|| error_text(e));
            let message = if lost {
                format!(
                    "PostgresSource: lost the connection to {} while {what}: {cause}",
                    self.describe
                )
            } else {
                format!(
                    "PostgresSource: {what} failed on {}: {cause}",
                    self.describe
                )
            };
            ConnectError::retriable(message)
        } else {
            ConnectError::fatal(format!(
                "PostgresSource: {what} failed on {}: {}",
                self.describe,
                error_text(e)
            ))
        }
    }
}

/// An error with its causes (`error connecting to server: Connection refused (os error 111)`), and for
/// a database error its SQLSTATE, detail and hint.
pub(crate) fn error_text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; detail: {detail}"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
