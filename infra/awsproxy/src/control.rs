//! The control endpoints under `/proxy/`: the call log and its totals, the reset,
//! and the fault queue (listed, queued, dropped).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::{Fault, Proxy, Summary};

fn since(uri: &Uri) -> u64 {
    uri.query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "since")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) async fn log_route(State(proxy): State<Proxy>, uri: Uri) -> Response {
    axum::Json(proxy.log_since(since(&uri))).into_response()
}

pub(crate) async fn summary_route(State(proxy): State<Proxy>, uri: Uri) -> Response {
    axum::Json(Summary::of(&proxy.log_since(since(&uri)))).into_response()
}

pub(crate) async fn reset_route(State(proxy): State<Proxy>) -> Response {
    proxy.reset();
    axum::Json(json!({})).into_response()
}

pub(crate) async fn pending_route(State(proxy): State<Proxy>) -> Response {
    axum::Json(proxy.pending_faults()).into_response()
}

pub(crate) async fn clear_route(State(proxy): State<Proxy>) -> Response {
    proxy.clear_faults();
    axum::Json(json!({})).into_response()
}

pub(crate) async fn faults_route(State(proxy): State<Proxy>, body: Bytes) -> Response {
    let faults: Vec<Fault> = match serde_json::from_slice(&body) {
        Ok(faults) => faults,
        Err(err) => {
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": format!("a JSON list of faults: {err}")})),
            )
                .into_response();
        }
    };
    match proxy.faults(faults) {
        Ok(queued) => axum::Json(json!({
            "queued": queued,
            "pending": proxy.pending_faults().len(),
        }))
        .into_response(),
        Err(problem) => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "error": problem })),
        )
            .into_response(),
    }
}
