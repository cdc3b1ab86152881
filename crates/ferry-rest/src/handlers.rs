//! The endpoints: Kafka Connect's paths, status codes and JSON shapes.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use serde_json::value::{RawValue, to_raw_value};

use super::AppState;
use super::error::{ApiError, json_response, kind, parse_json, string_map};
use ferry_herder::entities::{PluginInfo, ServerInfo};
use ferry_herder::{OffsetInput, TargetState};
use ferry_runtime::TaskId;
use ferry_runtime::config::{ConverterSpec, NAME};

type Params = Query<Vec<(String, String)>>;
type Body = Result<Bytes, BytesRejection>;
type Answer = Result<Response, ApiError>;

fn ok<T: serde::Serialize>(value: &T) -> Answer {
    Ok(json_response(StatusCode::OK, value))
}

fn empty(status: StatusCode) -> Answer {
    Ok(status.into_response())
}

/// Whether a query parameter is `true` (Java's `Boolean.valueOf`: anything else is false).
fn flag(params: &[(String, String)], name: &str) -> Option<bool> {
    params
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.eq_ignore_ascii_case("true"))
}

/// `GET /`.
pub(crate) async fn root(State(app): State<AppState>) -> Answer {
    ok(&ServerInfo {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: option_env!("FERRY_GIT_COMMIT")
            .unwrap_or("unknown")
            .to_owned(),
        kafka_cluster_id: app.herder.kafka_cluster_id().await,
    })
}

/// `GET /connectors`, with `?expand=status` and/or `?expand=info`.
pub(crate) async fn list(State(app): State<AppState>, Query(params): Params) -> Answer {
    let names = app.herder.connectors().await;
    let expand: Vec<&str> = params
        .iter()
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v.as_str())
        .collect();
    if params.iter().all(|(k, _)| k != "expand") {
        return ok(&names);
    }
    let mut out = BTreeMap::new();
    for name in names {
        let mut expansions: BTreeMap<String, Box<RawValue>> = BTreeMap::new();
        for expansion in &expand {
            // A connector deleted meanwhile is left out, as Kafka Connect does.
            let value = match *expansion {
                "status" => app
                    .herder
                    .connector_status(&name)
                    .await
                    .ok()
                    .and_then(|s| to_raw_value(&s).ok()),
                "info" => app
                    .herder
                    .connector_info(&name)
                    .await
                    .ok()
                    .and_then(|s| to_raw_value(&s).ok()),
                other => {
                    tracing::info!("ignoring unknown expansion type {other}");
                    continue;
                }
            };
            if let Some(value) = value {
                expansions.insert((*expansion).to_owned(), value);
            }
        }
        out.insert(name, expansions);
    }
    ok(&out)
}

/// `POST /connectors`: `{"name":…,"config":{…},"initial_state":…}` → `201` with a `Location`.
pub(crate) async fn create(State(app): State<AppState>, body: Body) -> Answer {
    let Some(Value::Object(mut request)) = parse_json(body)? else {
        return Err(ApiError::bad_request(
            "Request body must be a JSON object {\"name\":…,\"config\":{…}}",
        ));
    };
    let name = match request.remove("name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(name)) => java_trim(&name).to_owned(),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "\"name\" must be a string, not {}",
                kind(&other)
            )));
        }
    };
    let config = match request.remove("config") {
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request(
                "\"config\" must be provided: the connector's configuration as a JSON object of strings",
            ));
        }
        Some(config) => string_map("config", config)?,
    };
    let initial = match request.remove("initial_state") {
        None | Some(Value::Null) => TargetState::Running,
        Some(state) => serde_json::from_value(state.clone()).map_err(|_| {
            ApiError::bad_request(format!(
                "\"initial_state\" must be RUNNING, PAUSED or STOPPED, not {state}"
            ))
        })?,
    };
    let config = with_name(&name, config)?;
    let info = app.herder.create_connector(&name, config, initial).await?;
    let mut response = json_response(StatusCode::CREATED, &info);
    set_location(&mut response, &name);
    Ok(response)
}

/// Java's `String.trim()`, as Kafka Connect trims a POSTed name: only characters up to U+0020 (a
/// no-break space U+00A0 is kept, and the name is then refused for its surrounding whitespace rather
/// than silently changed).
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// Kafka Connect's check: a `name` in the configuration must equal the connector's name; else it is
/// added.
fn with_name(name: &str, mut config: ferry_api::Config) -> Result<ferry_api::Config, ApiError> {
    match config.get(NAME) {
        Some(included) if included != name => Err(ApiError::bad_request(format!(
            "Connector name configuration ({included}) doesn't match connector name in the URL ({name})"
        ))),
        Some(_) => Ok(config),
        None => {
            config.insert(NAME.to_owned(), name.to_owned());
            Ok(config)
        }
    }
}

fn set_location(response: &mut Response, name: &str) {
    let location = format!("/connectors/{}", encode_segment(name));
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
}

/// Percent-encodes a path segment (everything but unreserved characters).
fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `GET /connectors/{name}`.
pub(crate) async fn info(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.connector_info(&name).await?)
}

/// `GET /connectors/{name}/config`.
pub(crate) async fn config(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.connector_config(&name).await?)
}

/// `PUT /connectors/{name}/config`: `201` with a `Location` when created, else `200`.
pub(crate) async fn put_config(
    State(app): State<AppState>,
    Path(name): Path<String>,
    body: Body,
) -> Answer {
    let config = match parse_json(body)? {
        Some(value) => string_map("The connector configuration", value)?,
        None => {
            return Err(ApiError::bad_request(
                "Request body must be the connector's configuration as a JSON object of strings",
            ));
        }
    };
    let config = with_name(&name, config)?;
    let (created, info) = app.herder.put_connector_config(&name, config).await?;
    if created {
        let mut response = json_response(StatusCode::CREATED, &info);
        set_location(&mut response, &name);
        Ok(response)
    } else {
        ok(&info)
    }
}

/// `GET /connectors/{name}/status`.
pub(crate) async fn status(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.connector_status(&name).await?)
}

/// `GET /connectors/{name}/tasks`.
pub(crate) async fn tasks(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.task_configs(&name).await?)
}

/// A task number from the path; anything else is an unknown path, as in Kafka Connect.
fn task_number(text: &str) -> Result<usize, ApiError> {
    text.parse().map_err(|_| ApiError::no_such_path())
}

/// `GET /connectors/{name}/tasks/{task}/status`.
pub(crate) async fn task_status(
    State(app): State<AppState>,
    Path((name, task)): Path<(String, String)>,
) -> Answer {
    ok(&app
        .herder
        .task_status(&TaskId::new(name, task_number(&task)?))
        .await?)
}

/// `POST /connectors/{name}/tasks/{task}/restart` → `204`.
pub(crate) async fn restart_task(
    State(app): State<AppState>,
    Path((name, task)): Path<(String, String)>,
) -> Answer {
    app.herder
        .restart_task(&TaskId::new(name, task_number(&task)?))
        .await?;
    empty(StatusCode::NO_CONTENT)
}

/// `POST /connectors/{name}/restart[?includeTasks=…&onlyFailed=…]`: `204` for the connector alone,
/// else `202` with the status, restarting parts marked `RESTARTING`.
pub(crate) async fn restart(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(params): Params,
) -> Answer {
    let include_tasks = flag(&params, "includeTasks").unwrap_or(false);
    let only_failed = flag(&params, "onlyFailed").unwrap_or(false);
    if !include_tasks && !only_failed {
        app.herder.restart_connector(&name).await?;
        return empty(StatusCode::NO_CONTENT);
    }
    let state = app
        .herder
        .restart_connector_and_tasks(&name, include_tasks, only_failed)
        .await?;
    Ok(json_response(StatusCode::ACCEPTED, &state))
}

/// `PUT /connectors/{name}/pause` → `202`.
pub(crate) async fn pause(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    app.herder
        .set_target_state(&name, TargetState::Paused)
        .await?;
    empty(StatusCode::ACCEPTED)
}

/// `PUT /connectors/{name}/resume` → `202`.
pub(crate) async fn resume(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    app.herder
        .set_target_state(&name, TargetState::Running)
        .await?;
    empty(StatusCode::ACCEPTED)
}

/// `PUT /connectors/{name}/stop` → `204`.
pub(crate) async fn stop(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    app.herder
        .set_target_state(&name, TargetState::Stopped)
        .await?;
    empty(StatusCode::NO_CONTENT)
}

/// `DELETE /connectors/{name}` → `204`.
pub(crate) async fn delete(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    app.herder.delete_connector(&name).await?;
    empty(StatusCode::NO_CONTENT)
}

/// `GET /connectors/{name}/offsets`.
pub(crate) async fn offsets(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.connector_offsets(&name).await?)
}

/// `PATCH /connectors/{name}/offsets` with `{"offsets":[{"partition":{…},"offset":{…}|null}]}`.
pub(crate) async fn alter_offsets(
    State(app): State<AppState>,
    Path(name): Path<String>,
    body: Body,
) -> Answer {
    let missing = || {
        ApiError::bad_request(
            "Partitions / offsets need to be provided for an alter offsets request",
        )
    };
    let entries = match parse_json(body)? {
        None => return Err(missing()),
        Some(Value::Object(mut request)) => match request.remove("offsets") {
            None | Some(Value::Null) => return Err(missing()),
            Some(Value::Array(entries)) if entries.is_empty() => return Err(missing()),
            Some(Value::Array(entries)) => entries,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "\"offsets\" must be an array of {{\"partition\":…,\"offset\":…}}, not {}",
                    kind(&other)
                )));
            }
        },
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Request body must be a JSON object {{\"offsets\":[…]}}, not {}",
                kind(&other)
            )));
        }
    };
    let entries = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| match entry {
            Value::Object(mut entry) => Ok(OffsetInput {
                partition: entry.remove("partition").unwrap_or(Value::Null),
                offset: entry.remove("offset").unwrap_or(Value::Null),
            }),
            other => Err(ApiError::bad_request(format!(
                "offsets[{i}] must be an object {{\"partition\":…,\"offset\":…}}, not {}",
                kind(&other)
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    ok(&app.herder.alter_offsets(&name, entries).await?)
}

/// `DELETE /connectors/{name}/offsets`.
pub(crate) async fn reset_offsets(State(app): State<AppState>, Path(name): Path<String>) -> Answer {
    ok(&app.herder.reset_offsets(&name).await?)
}

/// `GET /connector-plugins[?connectorsOnly=false]`.
pub(crate) async fn plugins(State(app): State<AppState>, Query(params): Params) -> Answer {
    let mut plugins = app.herder.plugins();
    if !flag(&params, "connectorsOnly").unwrap_or(true) {
        let version = env!("CARGO_PKG_VERSION").to_owned();
        for spec in [
            ConverterSpec::default(),
            ConverterSpec::String,
            ConverterSpec::ByteArray,
        ] {
            plugins.push(PluginInfo {
                class: spec.class_name().to_owned(),
                kind: "converter",
                version: version.clone(),
            });
        }
        plugins.push(PluginInfo {
            class: "org.apache.kafka.connect.storage.SimpleHeaderConverter".to_owned(),
            kind: "header_converter",
            version,
        });
        plugins.extend(app.herder.transform_plugins());
    }
    ok(&plugins)
}

/// `PUT /connector-plugins/{plugin}/config/validate`.
pub(crate) async fn validate(
    State(app): State<AppState>,
    Path(plugin): Path<String>,
    body: Body,
) -> Answer {
    let config = match parse_json(body)? {
        Some(value) => string_map("The connector configuration", value)?,
        None => {
            return Err(ApiError::bad_request(
                "Request body must be the connector's configuration as a JSON object of strings",
            ));
        }
    };
    ok(&app.herder.validate(&plugin, config).await?)
}

/// `GET /metrics`: the worker's metrics in the Prometheus text format.
pub(crate) async fn metrics(State(app): State<AppState>) -> Response {
    let text = app.herder.metrics().render();
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(ferry_runtime::metrics::CONTENT_TYPE),
    );
    response
}

/// Any other path.
pub(crate) async fn no_such_path() -> ApiError {
    ApiError::no_such_path()
}

/// A known path with another method.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "HTTP 405 Method Not Allowed",
    )
}
