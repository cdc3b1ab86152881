//! Serving one listener: a bounded number of HTTP/1.1 connections, each closed when it is idle or
//! too slow to send its request head (`rest.read.timeout.ms`), so that neither slow nor idle clients
//! can use up the worker's file descriptors and make the API unreachable. On an `https://` listener
//! each connection first completes a TLS handshake (bounded by the same timeout).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::json_io::JsonErrorsIo;

/// How long to wait before accepting again after `accept` failed (e.g. out of file descriptors), so
/// that a persistent failure does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What a connection past the cap gets before it is closed.
const TOO_MANY: &str = "{\"error_code\":503,\"message\":\"Too many REST connections are open (rest.max.connections); \
retry when some have closed\"}";

/// The limits of [`serve`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// See `rest.read.timeout.ms`.
    pub(crate) read_timeout: Duration,
    /// See `rest.max.connections`.
    pub(crate) max_connections: usize,
}

/// Accepts connections on `listener` until `stopped` turns true, then lets the open ones finish
/// their requests (graceful shutdown) and returns once all are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    app: Router,
    limits: Limits,
    mut stopped: watch::Receiver<bool>,
) {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // One WARN when accepting starts failing or connections start being refused, one INFO when it
    // is over: a flood must not flood the log too.
    let mut accept_failing = false;
    let mut refused: u64 = 0;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                if !accept_failing {
                    accept_failing = true;
                    tracing::warn!(
                        "the REST listener http://{addr} cannot accept connections: {e}; retrying"
                    );
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        if accept_failing {
            accept_failing = false;
            tracing::info!("the REST listener http://{addr} accepts connections again");
        }
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            if refused == 0 {
                tracing::warn!(
                    "http://{addr}: {} REST connections are open (rest.max.connections); new ones are \
                     answered 503 and closed until some close",
                    limits.max_connections
                );
            }
            refused += 1;
            // A TLS client could not read a plain-text answer: it sees the connection closed.
            if tls.is_none() {
                refuse(stream);
            }
            continue;
        };
        if refused > 0 {
            tracing::info!("http://{addr}: accepting REST connections again ({refused} refused)");
            refused = 0;
        }
        let app = app.clone();
        let stopped = stopped.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            handshake_and_serve(stream, tls, app, limits.read_timeout, stopped, addr).await;
            drop(slot);
        });
    }
    // Every slot back means every connection closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// Serves an accepted connection, after its TLS handshake on an `https://` listener (a handshake
/// that fails or does not complete within `rest.read.timeout.ms` closes it).
async fn handshake_and_serve(
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    read_timeout: Duration,
    stopped: watch::Receiver<bool>,
    addr: SocketAddr,
) {
    match tls {
        None => connection(stream, app, read_timeout, stopped).await,
        Some(acceptor) => {
            let handshake = tokio::time::timeout(read_timeout, acceptor.accept(stream)).await;
            match handshake {
                Ok(Ok(stream)) => {
                    connection(stream, app, read_timeout, stopped).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!("a TLS handshake on https://{addr} failed: {e}")
                }
                Err(_) => tracing::debug!(
                    "a TLS handshake on https://{addr} did not complete within \
                     rest.read.timeout.ms"
                ),
            }
        }
    }
}

/// Answers `503` without waiting (the socket buffer of a new connection takes it) and closes.
fn refuse(stream: TcpStream) {
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{TOO_MANY}",
        TOO_MANY.len()
    );
    let _ = stream.try_write(response.as_bytes());
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    app: Router,
    read_timeout: Duration,
    mut stopped: watch::Receiver<bool>,
) {
    let io = TokioIo::new(JsonErrorsIo::new(stream));
    let service = TowerToHyperService::new(app);
    let mut builder = http1::Builder::new();
    // hyper restarts this timer whenever the connection waits for a request head, so it bounds idle
    // keep-alive connections as well as slow ones.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout);
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let finished = tokio::select! {
        result = connection.as_mut() => Some(result),
        _ = stopped.wait_for(|s| *s) => None,
    };
    let result = match finished {
        Some(result) => result,
        None => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("a REST connection ended: {e}");
    }
}
