//! What is done to a request before it is routed: a trailing slash is dropped (Jersey, under Kafka
//! Connect, matches `/connectors/x/` as `/connectors/x`; clients such as kafka-connect-api rely on it),
//! and a body that is not JSON is refused with `415`, as Jersey refuses it for Kafka Connect's
//! `@Consumes(application/json)` resources.

use axum::extract::Request;
use axum::http::{HeaderMap, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Drops the trailing slashes of a path other than `/`, keeping the query.
pub(crate) async fn trim_trailing_slash(mut request: Request) -> Request {
    let path = request.uri().path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
        let path_and_query = match request.uri().query() {
            Some(query) => format!("{trimmed}?{query}"),
            None => trimmed.to_owned(),
        };
        let mut parts = request.uri().clone().into_parts();
        if let Ok(pq) = path_and_query.parse() {
            parts.path_and_query = Some(pq);
            if let Ok(uri) = Uri::from_parts(parts) {
                *request.uri_mut() = uri;
            }
        }
    }
    request
}

/// Holds every request but `GET /health` until the herder has started (the REST API listens while
/// the worker starts, so that `/health` can answer `503` "starting", as Kafka Connect's does).
pub(crate) async fn after_the_start(
    axum::extract::State(app): axum::extract::State<super::AppState>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() != "/health" {
        app.herder.wait_ready().await;
    }
    next.run(request).await
}

/// Refuses a request body whose `Content-Type` is not JSON (`415`, Jersey's message). A body without
/// a `Content-Type` is read as JSON (Jersey matches such a request to a JSON resource too); note that
/// `curl -d` sends `application/x-www-form-urlencoded`, refused here as by Kafka Connect.
pub(crate) async fn json_bodies_only(request: Request, next: Next) -> Response {
    if has_body(request.headers())
        && let Some(content_type) = request.headers().get(header::CONTENT_TYPE)
        && !is_json(content_type.as_bytes())
    {
        return ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "HTTP 415 Unsupported Media Type",
        )
        .into_response();
    }
    next.run(request).await
}

fn has_body(headers: &HeaderMap) -> bool {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

/// `application/json`, with any parameters (`; charset=utf-8`), in any case.
fn is_json(content_type: &[u8]) -> bool {
    let essence = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    essence.eq_ignore_ascii_case(b"application/json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_with_parameters_is_json_and_other_types_are_not() {
        assert!(is_json(b"application/json"));
        assert!(is_json(b"Application/JSON; charset=UTF-8"));
        assert!(!is_json(b"text/plain"));
        assert!(!is_json(b"application/x-www-form-urlencoded"));
        assert!(!is_json(b"application/jsonx"));
    }
}
