//! Error responses in Kafka Connect's shape, `{"error_code":…,"message":…}`, and request bodies.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use ferry_herder::HerderError;
use ferry_runtime::config::MAX_CONNECTOR_KEYS;

/// The largest request body accepted (1 MiB); larger ones get `413`.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// An error answered as `{"error_code":…,"message":…}` with the same HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The message.
    pub message: String,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error_code: u16,
    message: &'a str,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// `400 Bad Request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// Jersey's answer for an unknown path: `404` with `HTTP 404 Not Found`.
    pub fn no_such_path() -> Self {
        Self::new(StatusCode::NOT_FOUND, "HTTP 404 Not Found")
    }
}

impl From<HerderError> for ApiError {
    fn from(e: HerderError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, e.to_string())
    }
}

/// The longest error message answered (256 KiB: every error of a configuration of 1000 keys of
/// ordinary length fits); a longer one (hundreds of very long unknown keys) is cut, saying how much
/// was left out, so an error body stays bounded whatever the request.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 256 * 1024;

/// `message`, cut at a character boundary to at most [`MAX_ERROR_MESSAGE_BYTES`] plus a note.
fn bounded(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= MAX_ERROR_MESSAGE_BYTES {
        return message.into();
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… (the message was cut here: {} more bytes; the validate endpoint lists every problem)",
        &message[..end],
        message.len() - end
    )
    .into()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = bounded(&self.message);
        let body = ErrorBody {
            error_code: self.status.as_u16(),
            message: &message,
        };
        json_response(self.status, &body)
    }
}

/// `value` as a JSON response with `status`.
pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let mut response = (status, bytes).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => {
            let message = format!("cannot encode the response: {e}");
            let fallback = format!(
                "{{\"error_code\":500,\"message\":{}}}",
                serde_json::Value::String(message)
            );
            let mut response = (StatusCode::INTERNAL_SERVER_ERROR, fallback).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
    }
}

/// The request body as JSON: `413` when it is over [`MAX_BODY_BYTES`], `400` naming the problem
/// (with its line and column) when it is not JSON; `None` when the body is empty.
pub fn parse_json(
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<serde_json::Value>, ApiError> {
    let bytes = body.map_err(body_error)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("Request body is not valid JSON: {e}")))
}

/// Why a request body could not be read: `413` over [`MAX_BODY_BYTES`], else the rejection's own
/// status (a stalled body: `408`).
pub fn body_error(rejection: BytesRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            status,
            format!("Request body is larger than the limit of {MAX_BODY_BYTES} bytes"),
        )
    } else {
        ApiError::new(
            status,
            format!("Cannot read the request body: {}", rejection.body_text()),
        )
    }
}

/// A JSON object of strings, as Kafka Connect reads a connector configuration: numbers and booleans are
/// taken as their text, `null` and nested values are refused.
/// More than [`MAX_CONNECTOR_KEYS`] keys are refused before anything else is done with them.
pub fn string_map(what: &str, value: serde_json::Value) -> Result<ferry_api::Config, ApiError> {
    let serde_json::Value::Object(object) = value else {
        return Err(ApiError::bad_request(format!(
            "{what} must be a JSON object of strings, not {}",
            kind(&value)
        )));
    };
    if object.len() > MAX_CONNECTOR_KEYS {
        return Err(ApiError::bad_request(format!(
            "{what} has {} keys; a connector configuration may have at most {MAX_CONNECTOR_KEYS} (this \
             limit keeps an oversized request from stalling the worker)",
            object.len()
        )));
    }
    object
        .into_iter()
        .map(|(key, value)| match value {
            serde_json::Value::String(s) => Ok((key, s)),
            serde_json::Value::Number(n) => Ok((key, n.to_string())),
            serde_json::Value::Bool(b) => Ok((key, b.to_string())),
            serde_json::Value::Null => Err(ApiError::bad_request(format!(
                "Null value can not be supplied as the configuration value (key {key:?})"
            ))),
            other => Err(ApiError::bad_request(format!(
                "{what}: the value of {key:?} must be a string, not {}",
                kind(&other)
            ))),
        })
        .collect()
}

/// A JSON value's kind, for messages.
pub fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(MAX_ERROR_MESSAGE_BYTES);
        let cut = bounded(&long);
        assert!(cut.len() < MAX_ERROR_MESSAGE_BYTES + 100, "{}", cut.len());
        assert!(cut.contains(&format!("cut here: {MAX_ERROR_MESSAGE_BYTES} more bytes;")));
    }
}
