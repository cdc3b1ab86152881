//! Forwarding a write to the worker that must serve it (distributed mode), as Kafka Connect does:
//! every worker serves the API, but cluster writes are serialized by the leader and restarts are
//! served by the worker running the connector or task. A middleware on each write route asks the
//! herder ([`Herder::route_write`](ferry_herder::Herder::route_write)) and either lets the handler
//! run here or sends the request, as it came, to the worker named.
//!
//! - The forwarded request keeps its method, path, query, body, `Content-Type` and `Authorization`
//!   (the only header the API checks: a `rest.auth.token` bearer token or Basic credentials of
//!   `rest.basic.auth.credentials.file` pass as the client sent them, so every worker must accept
//!   the same credentials), and gets `forward=false` (Kafka Connect's
//!   parameter): the worker receiving it serves it or refuses it, never forwards it again. A request
//!   that already carries `forward=false` and would be forwarded is answered `409` here too, whatever
//!   the herder says, so two workers that disagree about the leader cannot bounce a request.
//! - The client gets the target's status, `Content-Type`, `Location`, `WWW-Authenticate` and body
//!   (at most [`MAX_FORWARDED_RESPONSE_BYTES`]).
//! - The body is not validated here: a body that is not JSON is refused (`400`) by the worker that
//!   serves the write, with the same message. Only the size limit (`413`) and authentication (`401`)
//!   apply before forwarding, as for every request.
//! - A target that cannot be reached (refused, no connection within [`CONNECT_TIMEOUT`], no whole
//!   answer within [`FORWARD_TIMEOUT`]) gets `503` with `IO Error trying to forward REST request to
//!   <url>: …` (Kafka Connect answers `500` with the same opening words; `503` says "retry", which is
//!   what the client should do while the cluster elects another leader or moves the task).
//! - One connection per forwarded request (writes are rare; no pool to bound). An `https://` target
//!   is reached with this worker's TLS client settings ([`ferry_runtime::config::RestTls`]: the truststore,
//!   or the listener's own chain, and the listener's certificate for `ssl.client.auth`), checking
//!   the target's host name against its certificate.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper::body::Body as _;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::AppState;
use super::error::{ApiError, MAX_BODY_BYTES, body_error};
use ferry_herder::{Route, WriteScope};
use ferry_runtime::TaskId;

/// The longest wait for a forwarded request's whole answer: Kafka Connect's REST request timeout
/// (90 s), so a write the leader takes long over (a connector's validation, a store write) is not
/// cut here before the leader itself gives up on it.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(90);

/// The longest wait for the connection to the target: a worker that is gone must not hold the
/// client for the whole [`FORWARD_TIMEOUT`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer of a forwarded request passed back (4 MiB: a connector's information repeats
/// its configuration of up to [`MAX_BODY_BYTES`], a restart's status carries stack traces); a
/// larger one is answered `502`.
pub const MAX_FORWARDED_RESPONSE_BYTES: usize = 4 * MAX_BODY_BYTES;

/// Kafka Connect's answer when a request that was forwarded once would be forwarded again.
const NOT_AGAIN: &str = "Cannot complete request because of a conflicting operation (e.g. worker rebalance): \
the request was already forwarded once (forward=false) and this worker would forward it again; retry shortly";

/// What a write route acts on; its path parameters make the [`WriteScope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// [`WriteScope::Cluster`].
    Cluster,
    /// [`WriteScope::Connector`] of the `{name}` parameter.
    Connector,
    /// [`WriteScope::Task`] of the `{name}` and `{task}` parameters.
    Task,
}

/// The middleware of every write route: serves the request here or forwards it.
pub(crate) async fn route(
    State((app, scope)): State<(AppState, Scope)>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    let params = Path::<Vec<(String, String)>>::from_request_parts(&mut parts, &())
        .await
        .map(|Path(params)| params)
        .unwrap_or_default();
    let param = |key: &str| {
        params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let forwarded = is_forwarded(parts.uri.query());
    let task_id;
    let write_scope = match (scope, param("name")) {
        (Scope::Connector, Some(name)) => WriteScope::Connector(name),
        (Scope::Task, Some(name)) => {
            // A task number that is not a number is an unknown path: the handler answers 404.
            let Some(task) = param("task").and_then(|t| t.parse().ok()) else {
                return next.run(Request::from_parts(parts, body)).await;
            };
            task_id = TaskId::new(name, task);
            WriteScope::Task(&task_id)
        }
        _ => WriteScope::Cluster,
    };
    let target = match app.herder.route_write(write_scope, forwarded).await {
        Err(e) => return ApiError::from(e).into_response(),
        Ok(Route::Local) => return next.run(Request::from_parts(parts, body)).await,
        Ok(Route::Forward(_)) if forwarded => {
            return ApiError::new(StatusCode::CONFLICT, NOT_AGAIN).into_response();
        }
        Ok(Route::Forward(target)) => target,
    };
    let method = parts.method.clone();
    let uri = parts.uri.clone();
    let headers = parts.headers.clone();
    let body = match Bytes::from_request(Request::from_parts(parts, body), &()).await {
        Ok(body) => body,
        Err(rejection) => return body_error(rejection).into_response(),
    };
    match forward(
        &target,
        app.tls_client.as_ref(),
        method,
        &uri,
        &headers,
        body,
    )
    .await
    {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// Whether the request says it was forwarded: `forward` given and not `true` (Java's
/// `Boolean.valueOf`, as Kafka Connect reads it).
fn is_forwarded(query: Option<&str>) -> bool {
    query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == "forward").then_some(value)
        })
        .next_back()
        .is_some_and(|value| !value.eq_ignore_ascii_case("true"))
}

/// `query` without its `forward` parameters, plus `forward=false`.
fn with_forward_false(query: Option<&str>) -> String {
    let mut out: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && pair.split('=').next() != Some("forward"))
        .collect();
    out.push("forward=false");
    out.join("&")
}

/// Where to forward: a REST base URL `http[s]://host:port[/prefix]`.
struct Target {
    https: bool,
    host: String,
    port: u16,
    authority: String,
    prefix: String,
}

impl Target {
    fn parse(base: &str) -> Result<Self, ApiError> {
        let invalid = |why: &str| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "Cannot forward the request to {base:?}: {why}; the worker advertises its REST URL from \
                     rest.advertised.host.name, rest.advertised.port and listeners — check them"
                ),
            )
        };
        let uri: Uri = base.parse().map_err(|_| invalid("it is not a URL"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(invalid("it is not an http:// or https:// URL")),
        };
        let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
            return Err(invalid("it names no host"));
        };
        Ok(Self {
            https,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            prefix: uri.path().trim_end_matches('/').to_owned(),
        })
    }
}

/// Why a forwarded request got no usable answer.
enum Failure {
    Io(String),
    TooLarge,
}

/// Sends the request to `base` and answers its response.
async fn forward(
    base: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let target = Target::parse(base)?;
    let path_and_query = format!(
        "{}{}?{}",
        target.prefix,
        uri.path(),
        with_forward_false(uri.query())
    );
    let scheme = if target.https { "https" } else { "http" };
    let url = format!("{scheme}://{}{path_and_query}", target.authority);
    tracing::debug!("forwarding {method} {} to {url}", uri.path());
    let mut request = axum::http::Request::builder()
        .method(method.clone())
        .uri(&path_and_query)
        .header(header::HOST, &target.authority)
        // One request per connection: the target closes it once it has answered.
        .header(header::CONNECTION, "close");
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION] {
        for value in headers.get_all(&name) {
            request = request.header(&name, value);
        }
    }
    let request = request.body(Body::from(body)).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Cannot forward the request to {url}: {e}"),
        )
    })?;
    let answer = match tokio::time::timeout(FORWARD_TIMEOUT, exchange(&target, tls, request)).await
    {
        Ok(answer) => answer,
        Err(_) => Err(Failure::Io(format!(
            "no whole answer within {} s",
            FORWARD_TIMEOUT.as_secs()
        ))),
    };
    match answer {
        Ok(response) => Ok(response),
        Err(Failure::TooLarge) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "The answer of {url} to the forwarded {method} request is larger than \
                 {MAX_FORWARDED_RESPONSE_BYTES} bytes; send the request to that worker directly"
            ),
        )),
        Err(Failure::Io(why)) => {
            tracing::warn!("cannot forward {method} {} to {url}: {why}", uri.path());
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "IO Error trying to forward REST request to {url}: {why}. That worker must serve this \
                     {method} request (the leader serializes connector changes; the worker running a \
                     connector or task restarts it), and it may be down or restarting: retry shortly, \
                     once the cluster has a leader again or has moved the work"
                ),
            ))
        }
    }
}

/// Aborts the spawned connection task when the exchange ends, however it ends (answered, failed,
/// timed out, or the client went away and the handler was dropped).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One request over one new connection; the answer's body is read whole (bounded).
async fn exchange(
    target: &Target,
    tls: Option<&Arc<rustls::ClientConfig>>,
    request: Request,
) -> Result<Response, Failure> {
    let connect = TcpStream::connect((target.host.as_str(), target.port));
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(Failure::Io(format!("cannot connect: {e}"))),
        Err(_) => {
            return Err(Failure::Io(format!(
                "no connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
    };
    if !target.https {
        return send(stream, request).await;
    }
    let Some(tls) = tls else {
        return Err(Failure::Io(
            "that worker serves HTTPS but this one has no TLS settings to reach it with; give this \
             worker the ssl.truststore.* keys (listeners.https.ssl.truststore.location) that trust the \
             other workers' certificates"
                .to_owned(),
        ));
    };
    let name = rustls::pki_types::ServerName::try_from(target.host.clone())
        .map_err(|e| Failure::Io(format!("{:?} is not a TLS server name: {e}", target.host)))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(tls));
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, stream)).await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            return Err(Failure::Io(format!(
                "TLS handshake failed: {e} (the truststore of this worker must trust that worker's \
                 certificate, issued for the host it advertises)"
            )));
        }
        Err(_) => {
            return Err(Failure::Io(format!(
                "no TLS handshake within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
    };
    send(stream, request).await
}

/// Sends `request` over a connected stream; the answer's body is read whole (bounded).
async fn send<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    request: Request,
) -> Result<Response, Failure> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Failure::Io(e.to_string()))?;
    let _connection = AbortOnDrop(tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("a forwarding connection ended: {e}");
        }
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| Failure::Io(e.to_string()))?;
    let (parts, mut incoming) = response.into_parts();
    // A declared length over the limit is refused before reading.
    if incoming
        .size_hint()
        .upper()
        .is_some_and(|n| n > MAX_FORWARDED_RESPONSE_BYTES as u64)
    {
        return Err(Failure::TooLarge);
    }
    let mut bytes = Vec::new();
    while let Some(frame) = poll_fn(|cx| Pin::new(&mut incoming).poll_frame(cx)).await {
        let frame = frame.map_err(|e| Failure::Io(format!("reading the answer: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_FORWARDED_RESPONSE_BYTES {
                return Err(Failure::TooLarge);
            }
            bytes.extend_from_slice(&data);
        }
    }
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = parts.status;
    for name in [
        header::CONTENT_TYPE,
        header::LOCATION,
        header::WWW_AUTHENTICATE,
    ] {
        if let Some(value) = parts.headers.get(&name) {
            response
                .headers_mut()
                .insert(name, HeaderValue::clone(value));
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_false_marks_a_forwarded_request_and_replaces_any_forward_parameter() {
        assert!(!is_forwarded(None));
        assert!(!is_forwarded(Some("includeTasks=true")));
        assert!(!is_forwarded(Some("forward=true")));
        assert!(!is_forwarded(Some("forward=TRUE")));
        assert!(is_forwarded(Some("forward=false")));
        assert!(is_forwarded(Some("a=1&forward=false")));
        assert!(is_forwarded(Some("forward=no")));
        assert!(!is_forwarded(Some("forwarded=false")));

        assert_eq!(with_forward_false(None), "forward=false");
        assert_eq!(
            with_forward_false(Some("includeTasks=true&forward=true&onlyFailed=false")),
            "includeTasks=true&onlyFailed=false&forward=false"
        );
    }

    #[test]
    fn targets_are_http_urls_with_a_host() {
        let target = Target::parse("http://[::1]:8084/").expect("valid");
        assert_eq!(
            (target.host.as_str(), target.port, target.authority.as_str()),
            ("::1", 8084, "[::1]:8084")
        );
        assert_eq!(target.prefix, "");
        assert_eq!(Target::parse("http://w1/api").expect("valid").port, 80);
        let secure = Target::parse("https://w1:8443").expect("valid");
        assert!(secure.https && secure.port == 8443);
        assert_eq!(Target::parse("https://w1").expect("valid").port, 443);
        for bad in ["ftp://w1:8083", "w1:8083", "not a url", "http:///x"] {
            let e = Target::parse(bad).err().expect(bad);
            assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR, "{bad}");
        }
    }
}
