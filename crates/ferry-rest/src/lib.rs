//! # ferry-rest
//!
//! Kafka Connect's REST API for `ferry standalone` and `ferry distributed`: its paths, JSON shapes,
//! status codes and error bodies (`{"error_code":…,"message":…}`), served by axum over a [`Herder`].
//!
//! Owns: the HTTP listeners (TLS, authentication, limits), the routes and their handlers, forwarding
//! to another worker, `/admin/loggers`. May use: `ferry-runtime` (the herder it serves, the REST
//! configuration, the metrics it exposes) and `ferry-api`; never a backend — it sees stores and sinks
//! only through the herder (`ferry-plugin/tests/layering.rs` keeps it so).
//!
//! - `listeners` (default `http://127.0.0.1:8083`) are bound by [`RestServer::bind`], which logs
//!   `REST API listening on http://HOST:PORT` for each (port 0 picks a free port).
//! - With `rest.auth.token` and/or `rest.basic.auth.credentials.file`, every request without
//!   `Authorization: Bearer <token>` or `Authorization: Basic <user:password>` (either is accepted
//!   when both are configured) gets `401` ([`auth`]).
//! - `https://` listeners serve TLS (rustls) with the PEM keystore of the `ssl.*` keys.
//! - Request bodies over 1 MiB get `413`; malformed JSON gets `400` naming the problem; any other
//!   non-JSON error (an unknown path, a wrong method, a panic, a request hyper cannot parse) is
//!   answered in the same JSON shape.
//! - A connection that sends no complete request head within `rest.read.timeout.ms` (of opening or
//!   of its last answer), or whose body stalls that long, is closed; past `rest.max.connections`
//!   open connections a new one is answered `503` and closed ([`serve`]).
//! - Writes are served where the herder says ([`Herder::route_write`]): here, or forwarded to the
//!   worker that must serve them (distributed mode: the leader, or the owner of a connector or task),
//!   whose answer is passed back ([`forward`]).

mod auth;
mod endpoints;
mod error;
mod forward;
mod handlers;
mod json_io;
mod loggers;
mod requests;
mod serve;
mod topics;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

pub use endpoints::HEALTH_CHECK_TIMEOUT;
pub use error::{ApiError, MAX_BODY_BYTES};
use ferry_herder::Herder;
use ferry_runtime::config::{Listener, RestConfig};
pub use forward::{CONNECT_TIMEOUT, FORWARD_TIMEOUT, MAX_FORWARDED_RESPONSE_BYTES};
pub use loggers::{
    ClusterLogLevels, LogFilterReload, LogLevelError, LogLevels, LoggerLevel, MAX_LOGGERS,
    ROOT_LOGGER,
};

/// A REST listener of `listeners` that could not be bound: the start is refused before anything
/// else is created.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// An `https://` listener without the TLS settings to serve it.
    #[error(
        "cannot listen on {listener} (listeners): no TLS settings; set ssl.keystore.type=PEM and \
         ssl.keystore.location (or the listeners.https.ssl.* forms)"
    )]
    NoTls {
        /// The listener, as configured.
        listener: String,
    },
    /// The operating system refused the address (in use, unknown host, not permitted).
    #[error("cannot listen on {listener} (listeners): {source}")]
    Io {
        /// The listener, as configured.
        listener: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}

/// What every handler gets.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) herder: Arc<dyn Herder>,
    /// The TLS client settings for forwarding to `https://` workers (from this worker's `ssl.*`).
    pub(crate) tls_client: Option<Arc<rustls::ClientConfig>>,
    /// `/admin/loggers` (none: answered 404).
    pub(crate) log_levels: Option<Arc<LogLevels>>,
}

/// Bound REST listeners, not yet serving.
pub struct RestServer {
    listeners: Vec<(TcpListener, SocketAddr, bool)>,
    auth: auth::Auth,
    tls: Option<ferry_runtime::config::RestTls>,
    limits: serve::Limits,
    log_levels: Option<Arc<LogLevels>>,
}

impl RestServer {
    /// Serves `/admin/loggers` with `levels`.
    #[must_use]
    pub fn with_log_levels(mut self, levels: Arc<LogLevels>) -> Self {
        self.log_levels = Some(levels);
        self
    }

    /// Binds every listener of `config` and logs `REST API listening on http://HOST:PORT` for each.
    ///
    /// # Errors
    /// A listener cannot be bound (address in use, unknown host); the message names it.
    pub async fn bind(config: &RestConfig) -> Result<Self, BindError> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for listener in &config.listeners {
            if listener.https && config.tls.is_none() {
                return Err(BindError::NoTls {
                    listener: listener.to_string(),
                });
            }
            let io = |source| BindError::Io {
                listener: listener.to_string(),
                source,
            };
            let bound = TcpListener::bind((listener.host.as_str(), listener.port))
                .await
                .map_err(io)?;
            let addr = bound.local_addr().map_err(io)?;
            tracing::info!("REST API listening on {}", url(addr, listener.https));
            listeners.push((bound, addr, listener.https));
        }
        if let Some(tls) = &config.tls {
            tracing::info!("REST API TLS: {}", tls.description);
        }
        if let Some(users) = &config.basic_auth {
            tracing::info!(
                "REST API Basic authentication: users read from {} (read at start, not reloaded)",
                users.file().display()
            );
        }
        if !config.authenticates() {
            let open = config.listeners.iter().filter(|l| !is_loopback(l)).count();
            if open > 0 {
                tracing::warn!(
                    "the REST API listens beyond loopback without rest.auth.token or \
                     rest.basic.auth.credentials.file: anyone who can reach it can change connectors and \
                     offsets"
                );
            }
        }
        Ok(Self {
            listeners,
            auth: auth::Auth::new(config),
            tls: config.tls.clone(),
            limits: serve::Limits {
                read_timeout: config.read_timeout,
                max_connections: config.max_connections,
            },
            log_levels: None,
        })
    }

    /// The bound addresses, in `listeners` order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().map(|(_, addr, _)| *addr).collect()
    }

    /// Kafka Connect's worker id: `host:port` of the first listener.
    pub fn worker_id(&self) -> String {
        self.listeners
            .first()
            .map(|(_, addr, _)| addr.to_string())
            .unwrap_or_default()
    }

    /// Serves the API until `shutdown` completes; requests in progress then finish.
    pub fn serve(
        self,
        herder: Arc<dyn Herder>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        let state = AppState {
            herder,
            tls_client: self.tls.as_ref().map(|t| t.client.clone()),
            log_levels: self.log_levels,
        };
        let app = router(state, self.auth, self.limits.read_timeout);
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut servers = Vec::new();
        for (listener, addr, https) in self.listeners {
            let stopped = stop.subscribe();
            let app = app.clone();
            let limits = self.limits;
            let tls = https
                .then(|| self.tls.as_ref().map(|t| t.server.clone()))
                .flatten();
            servers.push(tokio::spawn(serve::serve(
                listener, addr, tls, app, limits, stopped,
            )));
        }
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
            for server in servers {
                let _ = server.await;
            }
        })
    }
}

fn url(addr: SocketAddr, https: bool) -> String {
    format!("{}://{addr}", if https { "https" } else { "http" })
}

fn is_loopback(listener: &Listener) -> bool {
    listener.host == "localhost"
        || listener
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn router(state: AppState, auth: auth::Auth, read_timeout: std::time::Duration) -> Router {
    use forward::Scope;
    use handlers as h;
    // Each write goes through `forward::route` first: served here or by the worker the herder names.
    let write =
        |scope: Scope| middleware::from_fn_with_state((state.clone(), scope), forward::route);
    let connectors = get(h::list).merge(post(h::create).route_layer(write(Scope::Cluster)));
    let plugins = get(h::plugins);
    let inner = Router::new()
        .route("/", get(h::root))
        .route("/connectors", connectors.clone())
        .route("/connectors/", connectors)
        .route(
            "/connectors/{name}",
            get(h::info).merge(delete(h::delete).route_layer(write(Scope::Cluster))),
        )
        .route(
            "/connectors/{name}/config",
            get(h::config).merge(
                put(h::put_config)
                    .patch(endpoints::patch_config)
                    .route_layer(write(Scope::Cluster)),
            ),
        )
        .route(
            "/connectors/{name}/tasks-config",
            get(endpoints::tasks_config),
        )
        .route("/health", get(endpoints::health))
        .route(
            "/connector-plugins/{plugin}/config",
            get(endpoints::plugin_config),
        )
        .route("/connectors/{name}/status", get(h::status))
        .route("/connectors/{name}/tasks", get(h::tasks))
        .route("/connectors/{name}/topics", get(topics::active_topics))
        .route(
            "/connectors/{name}/topics/reset",
            put(topics::reset_active_topics),
        )
        .route(
            "/connectors/{name}/tasks/{task}/status",
            get(h::task_status),
        )
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            post(h::restart_task).route_layer(write(Scope::Task)),
        )
        .route(
            "/connectors/{name}/restart",
            post(h::restart).route_layer(write(Scope::Connector)),
        )
        .route(
            "/connectors/{name}/pause",
            put(h::pause).route_layer(write(Scope::Cluster)),
        )
        .route(
            "/connectors/{name}/resume",
            put(h::resume).route_layer(write(Scope::Cluster)),
        )
        .route(
            "/connectors/{name}/stop",
            put(h::stop).route_layer(write(Scope::Cluster)),
        )
        .route(
            "/connectors/{name}/offsets",
            get(h::offsets).merge(
                patch(h::alter_offsets)
                    .delete(h::reset_offsets)
                    .route_layer(write(Scope::Cluster)),
            ),
        )
        .route("/connector-plugins", plugins.clone())
        .route("/connector-plugins/", plugins)
        .route(
            "/connector-plugins/{plugin}/config/validate",
            put(h::validate),
        )
        .route("/metrics", get(h::metrics))
        .route("/admin/loggers", get(loggers::list))
        .route(
            "/admin/loggers/{name}",
            get(loggers::get).merge(put(loggers::set)),
        )
        .route_layer(middleware::from_fn(requests::json_bodies_only))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            requests::after_the_start,
        ))
        .fallback(h::no_such_path)
        .method_not_allowed_fallback(h::method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(RequestBodyTimeoutLayer::new(read_timeout))
        .layer(middleware::from_fn_with_state(
            Arc::new(auth),
            auth::authenticate,
        ))
        .layer(middleware::from_fn(json_errors))
        .layer(CatchPanicLayer::custom(panicked));
    // Outside the inner router, so the path is trimmed before it is routed.
    Router::new()
        .fallback_service(inner)
        .layer(middleware::map_request(requests::trim_trailing_slash))
}

/// Turns error responses that are not JSON (axum's and tower-http's rejections: a body over the limit,
/// a malformed query) into Kafka Connect's error body.
async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 * 1024).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).into_owned(),
        _ => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        format!("Request body is larger than the limit of {MAX_BODY_BYTES} bytes")
    } else {
        text
    };
    ApiError::new(status, message).into_response()
}

fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let detail = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    tracing::error!("a REST request handler panicked: {detail}");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Internal error while handling the request: {detail}"),
    )
    .into_response()
}
