//! The test controls under `/stand-in/` (the table in [`super`]'s docs): each
//! reads its JSON body, refuses a bad one with a 400 naming what is wrong, and
//! answers what it set.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::StandIn;
use crate::control::{Fault, QuirkControl, ScriptedAnswer};
use crate::error::ApiError;

pub(super) async fn push_faults(State(standin): State<StandIn>, body: Bytes) -> Response {
    let faults: Vec<Fault> = match control_body(&standin, &body) {
        Ok(faults) => faults,
        Err(response) => return *response,
    };
    if let Some((index, problem)) = faults
        .iter()
        .enumerate()
        .find_map(|(i, f)| f.problem().map(|p| (i, p)))
    {
        return control_error(&standin, format!("{index}: {problem}"));
    }
    let queued = standin.push_faults(faults);
    axum::Json(json!({"queued": queued})).into_response()
}

pub(super) async fn push_script(State(standin): State<StandIn>, body: Bytes) -> Response {
    let answers: Vec<ScriptedAnswer> = match control_body(&standin, &body) {
        Ok(answers) => answers,
        Err(response) => return *response,
    };
    let queued = standin.push_script(answers);
    axum::Json(json!({"queued": queued})).into_response()
}

pub(super) async fn push_quirks(State(standin): State<StandIn>, body: Bytes) -> Response {
    let control: QuirkControl = match control_body(&standin, &body) {
        Ok(control) => control,
        Err(response) => return *response,
    };
    let quirks = match control.quirks() {
        Ok(quirks) => quirks,
        Err(problem) => return control_error(&standin, problem),
    };
    let queued = standin.push_quirks(quirks);
    if let Some(random) = control.random {
        standin.set_random_quirks(random);
    }
    let random = standin.random_quirks();
    axum::Json(json!({"queued": queued, "random": random})).into_response()
}

pub(super) async fn requests(State(standin): State<StandIn>) -> Response {
    axum::Json(standin.requests()).into_response()
}

pub(super) async fn reset(State(standin): State<StandIn>) -> Response {
    standin.reset();
    axum::Json(json!({"reset": true})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StreamPace {
    delta_ms: u64,
}

pub(super) async fn stream_pace(State(standin): State<StandIn>, body: Bytes) -> Response {
    let pace: StreamPace = match control_body(&standin, &body) {
        Ok(pace) => pace,
        Err(response) => return *response,
    };
    standin.set_delta_ms(pace.delta_ms);
    axum::Json(json!({"delta_ms": pace.delta_ms})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockAdvance {
    advance_seconds: u64,
}

pub(super) async fn clock(State(standin): State<StandIn>, body: Bytes) -> Response {
    let advance: ClockAdvance = match control_body(&standin, &body) {
        Ok(advance) => advance,
        Err(response) => return *response,
    };
    let now_ms = standin.advance_clock(advance.advance_seconds);
    axum::Json(json!({"now_ms": now_ms})).into_response()
}

pub(super) async fn health() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

fn control_body<T: DeserializeOwned>(standin: &StandIn, body: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(body).map_err(|e| Box::new(control_error(standin, e.to_string())))
}

fn control_error(standin: &StandIn, message: String) -> Response {
    let request_id = standin.next_request_id();
    ApiError::invalid(message).into_response(&request_id)
}
