//! Kafka Connect's newer and deprecated endpoints: `GET /health` (KIP-1017),
//! `PATCH /connectors/{name}/config` (KIP-477), `GET /connectors/{name}/tasks-config` (deprecated),
//! `GET /connector-plugins/{plugin}/config`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;

use super::AppState;
use super::error::{ApiError, json_response, kind, parse_json};
use ferry_herder::ConfigPatch;
use ferry_runtime::config::MAX_CONNECTOR_KEYS;

type Body = Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>;
type Answer = Result<axum::response::Response, ApiError>;

/// How long `GET /health` waits for the herder (Kafka Connect's fixed health-check timeout: 10 s,
/// shorter than other requests' 90 s so a stuck worker is seen quickly).
pub const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka Connect's `WorkerStatus`.
#[derive(Serialize)]
struct WorkerStatus {
    status: &'static str,
    message: String,
}

/// `GET /health` (KIP-1017): `200` healthy once started and the herder answers a no-op request
/// within [`HEALTH_CHECK_TIMEOUT`]; `503` "starting" before it has started; `500` "unhealthy" when a
/// started herder does not answer in time (or fails).
pub(crate) async fn health(State(app): State<AppState>) -> axum::response::Response {
    health_within(&app, HEALTH_CHECK_TIMEOUT).await
}

pub(crate) async fn health_within(app: &AppState, timeout: Duration) -> axum::response::Response {
    // Not started: answered at once (a start holds the herder's lock, the check would wait for it).
    let ready = app.herder.is_ready();
    let outcome = if ready {
        tokio::time::timeout(timeout, app.herder.health_check()).await
    } else {
        Ok(Ok(()))
    };
    let (status, body) = match outcome {
        _ if !ready => (
            StatusCode::SERVICE_UNAVAILABLE,
            WorkerStatus {
                status: "starting",
                message: "Worker is still starting up.".to_owned(),
            },
        ),
        Ok(Ok(())) => (
            StatusCode::OK,
            WorkerStatus {
                status: "healthy",
                message: "Worker has completed startup and is ready to handle requests.".to_owned(),
            },
        ),
        Ok(Err(e)) => unhealthy(&e.to_string()),
        Err(_) => unhealthy(&format!(
            "The herder did not answer a no-op request within {} ms: a request or a rebalance may be \
             stuck; see the worker's log.",
            timeout.as_millis()
        )),
    };
    json_response(status, &body)
}

fn unhealthy(details: &str) -> (StatusCode, WorkerStatus) {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        WorkerStatus {
            status: "unhealthy",
            message: format!(
                "Worker was unable to handle this request and may be unable to handle other requests. \
                 {details}"
            ),
        },
    )
}

/// `PATCH /connectors/{name}/config` (KIP-477): the body's keys merged into the configuration, a
/// `null` value removing its key; `200` with the connector's info.
pub(crate) async fn patch_config(
    State(app): State<AppState>,
    Path(name): Path<String>,
    body: Body,
) -> Answer {
    let patch = match parse_json(body)? {
        Some(value) => config_patch(value)?,
        None => {
            return Err(ApiError::bad_request(
                "Request body must be a JSON object of the keys to change (a null value removes the key)",
            ));
        }
    };
    let info = app.herder.patch_connector_config(&name, patch).await?;
    Ok(json_response(StatusCode::OK, &info))
}

/// A configuration patch: strings (numbers and booleans taken as their text), `null` to remove.
fn config_patch(value: Value) -> Result<ConfigPatch, ApiError> {
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request(format!(
            "The configuration patch must be a JSON object of strings (null removes a key), not {}",
            kind(&value)
        )));
    };
    if object.len() > MAX_CONNECTOR_KEYS {
        return Err(ApiError::bad_request(format!(
            "The configuration patch has {} keys; a connector configuration may have at most \
             {MAX_CONNECTOR_KEYS}",
            object.len()
        )));
    }
    object
        .into_iter()
        .map(|(key, value)| match value {
            Value::String(s) => Ok((key, Some(s))),
            Value::Number(n) => Ok((key, Some(n.to_string()))),
            Value::Bool(b) => Ok((key, Some(b.to_string()))),
            Value::Null => Ok((key, None)),
            other => Err(ApiError::bad_request(format!(
                "The configuration patch: the value of {key:?} must be a string or null, not {}",
                kind(&other)
            ))),
        })
        .collect()
}

/// `GET /connectors/{name}/tasks-config` (deprecated in Kafka Connect): `{"<name>-<n>": {…}}`.
pub(crate) async fn tasks_config(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    let tasks = app.herder.task_configs(&name).await?;
    let by_id: BTreeMap<String, ferry_api::Config> = tasks
        .into_iter()
        .map(|task| {
            (
                format!("{}-{}", task.id.connector, task.id.task),
                task.config,
            )
        })
        .collect();
    Ok(json_response(StatusCode::OK, &by_id))
}

/// `GET /connector-plugins/{plugin}/config`: the plugin's keys as Kafka Connect's `ConfigKeyInfo`s.
pub(crate) async fn plugin_config(
    State(app): State<AppState>,
    Path(plugin): Path<String>,
) -> Answer {
    Ok(json_response(
        StatusCode::OK,
        &app.herder.plugin_config(&plugin)?,
    ))
}
