//! KIP-558 active topics: `GET /connectors/{name}/topics` and `PUT /connectors/{name}/topics/reset`
//! (Kafka Connect's `ConnectorsResource`). As there, neither checks that the connector exists: an
//! unknown one has no active topics, and resetting them does nothing.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::{ApiError, json_response};

/// `{"topics":[…]}` (Kafka Connect's `ActiveTopicsInfo`; the connector is the enclosing key).
#[derive(serde::Serialize)]
struct ActiveTopicsInfo {
    topics: Vec<String>,
}

fn disabled() -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "Topic tracking is disabled.")
}

/// `GET /connectors/{name}/topics` → `200 {"<name>":{"topics":[…]}}`; `403` with
/// `topic.tracking.enable=false`.
pub(crate) async fn active_topics(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let Some((store, tracking)) = app.herder.active_topics() else {
        return Err(disabled());
    };
    if !tracking.enable {
        return Err(disabled());
    }
    let topics = store.topics(&name).into_iter().map(|t| t.topic).collect();
    let body = BTreeMap::from([(name, ActiveTopicsInfo { topics })]);
    Ok(json_response(StatusCode::OK, &body))
}

/// `PUT /connectors/{name}/topics/reset` → `202`; `403` with `topic.tracking.enable=false` or
/// `topic.tracking.allow.reset=false`.
pub(crate) async fn reset_active_topics(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let Some((store, tracking)) = app.herder.active_topics() else {
        return Err(disabled());
    };
    if !tracking.enable {
        return Err(disabled());
    }
    if !tracking.allow_reset {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "Topic tracking reset is disabled.",
        ));
    }
    for topic in store.topics(&name) {
        store.delete_topic(&name, &topic.topic);
    }
    Ok(StatusCode::ACCEPTED.into_response())
}
