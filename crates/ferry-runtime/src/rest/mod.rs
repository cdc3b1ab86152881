//! The REST API of `ferry standalone`: Kafka Connect's paths, JSON shapes, status codes and error
//! bodies (`{"error_code":…,"message":…}`), served by axum over a [`Herder`].
//!
//! - `listeners` (default `http://127.0.0.1:8083`) are bound by [`RestServer::bind`], which logs
//!   `REST API listening on http://HOST:PORT` for each (port 0 picks a free port).
//! - With `rest.auth.token`, every request without `Authorization: Bearer <token>` gets `401`.
//! - Request bodies over 1 MiB get `413`; malformed JSON gets `400` naming the problem; any other
//!   non-JSON error (an unknown path, a wrong method, a panic, a request hyper cannot parse) is
//!   answered in the same JSON shape.
//! - A connection that sends no complete request head within `rest.read.timeout.ms` (of opening or
//!   of its last answer), or whose body stalls that long, is closed; past `rest.max.connections`
//!   open connections a new one is answered `503` and closed ([`serve`]).
//! - Writes are served where the herder says ([`Herder::route_write`]): here, or forwarded to the
//!   worker that must serve them (distributed mode: the leader, or the owner of a connector or task),
//!   whose answer is passed back ([`forward`]).

mod endpoints;
mod error;
mod forward;
mod handlers;
mod json_io;
mod requests;
mod serve;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::config::{Listener, RestConfig, Secret};
use crate::herder::Herder;
pub use endpoints::HEALTH_CHECK_TIMEOUT;
pub use error::{ApiError, MAX_BODY_BYTES};
pub use forward::{CONNECT_TIMEOUT, FORWARD_TIMEOUT, MAX_FORWARDED_RESPONSE_BYTES};

/// What every handler gets.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) herder: Arc<dyn Herder>,
}

/// Bound REST listeners, not yet serving.
pub struct RestServer {
    listeners: Vec<(TcpListener, SocketAddr)>,
    token: Option<Secret>,
    limits: serve::Limits,
}

impl RestServer {
    /// Binds every listener of `config` and logs `REST API listening on http://HOST:PORT` for each.
    ///
    /// # Errors
    /// A listener cannot be bound (address in use, unknown host); the message names it.
    pub async fn bind(config: &RestConfig) -> Result<Self, String> {
        let mut listeners = Vec::with_capacity(config.listeners.len());
        for listener in &config.listeners {
            let bound = TcpListener::bind((listener.host.as_str(), listener.port))
                .await
                .map_err(|e| format!("cannot listen on {listener} (listeners): {e}"))?;
            let addr = bound
                .local_addr()
                .map_err(|e| format!("cannot listen on {listener} (listeners): {e}"))?;
            tracing::info!("REST API listening on {}", url(addr));
            listeners.push((bound, addr));
        }
        if config.auth_token.is_none() {
            let open = config.listeners.iter().filter(|l| !is_loopback(l)).count();
            if open > 0 {
                tracing::warn!(
                    "the REST API listens beyond loopback without rest.auth.token: anyone who can reach it can \
                     change connectors and offsets"
                );
            }
        }
        Ok(Self {
            listeners,
            token: config.auth_token.clone(),
            limits: serve::Limits {
                read_timeout: config.read_timeout,
                max_connections: config.max_connections,
            },
        })
    }

    /// The bound addresses, in `listeners` order.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().map(|(_, addr)| *addr).collect()
    }

    /// Kafka Connect's worker id: `host:port` of the first listener.
    pub fn worker_id(&self) -> String {
        self.listeners
            .first()
            .map(|(_, addr)| addr.to_string())
            .unwrap_or_default()
    }

    /// Serves the API until `shutdown` completes; requests in progress then finish.
    pub fn serve(
        self,
        herder: Arc<dyn Herder>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> JoinHandle<()> {
        let app = router(AppState { herder }, self.token, self.limits.read_timeout);
        let (stop, _) = tokio::sync::watch::channel(false);
        let mut servers = Vec::new();
        for (listener, addr) in self.listeners {
            let stopped = stop.subscribe();
            let app = app.clone();
            let limits = self.limits;
            servers.push(tokio::spawn(serve::serve(
                listener, addr, app, limits, stopped,
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

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

fn is_loopback(listener: &Listener) -> bool {
    listener.host == "localhost"
        || listener
            .host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn router(state: AppState, token: Option<Secret>, read_timeout: std::time::Duration) -> Router {
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
        .route_layer(middleware::from_fn(requests::json_bodies_only))
        .fallback(h::no_such_path)
        .method_not_allowed_fallback(h::method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(RequestBodyTimeoutLayer::new(read_timeout))
        .layer(middleware::from_fn_with_state(
            Arc::new(token),
            authenticate,
        ))
        .layer(middleware::from_fn(json_errors))
        .layer(CatchPanicLayer::custom(panicked));
    // Outside the inner router, so the path is trimmed before it is routed.
    Router::new()
        .fallback_service(inner)
        .layer(middleware::map_request(requests::trim_trailing_slash))
}

/// With `rest.auth.token`, refuses requests without `Authorization: Bearer <token>`.
async fn authenticate(
    State(token): State<Arc<Option<Secret>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token.as_ref() else {
        return next.run(request).await;
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, credentials)| credentials.trim());
    if presented.is_some_and(|p| constant_time_eq(p.as_bytes(), token.expose().as_bytes())) {
        return next.run(request).await;
    }
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "User cannot access the resource.").into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Compares without an early exit, so the time taken does not tell how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, &x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
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
