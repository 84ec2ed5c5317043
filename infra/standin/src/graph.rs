//! A stand-in for the WhatsApp Cloud API's send endpoint of Meta's Graph API, so the
//! WhatsApp worker runs offline (`GRAPH_API_BASE_URL` pointed here):
//!
//! | endpoint | does |
//! |---|---|
//! | `POST /{version}/{phone-number-id}/messages` | checks the bearer token and the body (a `text` or `template` message), records it, answers the message id in the Graph API's shape |
//! | `POST /{version}/{phone-number-id}/messages` with `"status": "read"` | a read mark (`message_id`, and `typing_indicator: {"type": "text"}` when given): recorded, answered `{"success": true}` |
//! | `GET /stand-in/graph/sent` | what was sent, oldest first ([`SentMessage`]) |
//! | `GET /stand-in/graph/reads` | the read marks, oldest first ([`ReadMark`]); `seq` orders them with the sends |
//! | `POST /stand-in/graph/faults` | queue faults for the next sends (a JSON array of [`GraphFault`]); answers `{"queued": n}` |
//! | `POST /stand-in/graph/reset` | forget what was sent and the queued faults |
//!
//! The media of voice notes (`GET /{version}/{media-id}` and its download) are
//! [`crate::graph_media`]'s.
//!
//! A refused send answers the Graph API's error envelope (`{"error": {"message",
//! "type", "code", "fbtrace_id"}}`) and is not recorded. Faults come before any
//! check, one per send, in order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Longest text body the real API takes, in characters.
pub const MAX_TEXT_CHARS: usize = 4_096;

/// One injected fault, taken by the next send.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFault {
    /// The HTTP status to answer (400–599).
    pub status: u16,
    /// `error.code` (e.g. 131047, the closed customer service window; 130429, the
    /// throughput limit); defaults to 131000 ("something went wrong").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// A `Retry-After` header, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

/// One accepted read mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadMark {
    /// Its place among the sends and read marks, from 1.
    pub seq: u64,
    /// The business number.
    pub phone_number_id: String,
    /// The customer's message marked read.
    pub message_id: String,
    /// True when the typing indicator was asked for.
    pub typing: bool,
}

/// One accepted send.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SentMessage {
    /// Its place among the sends and read marks, from 1.
    pub seq: u64,
    /// The id answered (`wamid.standin.N`).
    pub id: String,
    /// The version in the path (`v23.0`).
    pub version: String,
    /// The business number it went out from.
    pub phone_number_id: String,
    /// The recipient (`to`).
    pub to: String,
    /// `text` or `template`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text's body, or the template's name.
    pub content: String,
    /// The request body as received.
    pub body: Value,
}

#[derive(Debug, Default)]
struct Inner {
    faults: VecDeque<GraphFault>,
    sent: Vec<SentMessage>,
    reads: Vec<ReadMark>,
    next_id: u64,
}

/// The Graph API stand-in's state (cheap to clone; clones share it).
#[derive(Debug, Clone, Default)]
pub struct Graph {
    inner: Arc<Mutex<Inner>>,
}

impl Graph {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// What was sent, oldest first.
    pub fn sent(&self) -> Vec<SentMessage> {
        self.with(|inner| inner.sent.clone())
    }

    /// The read marks, oldest first.
    pub fn reads(&self) -> Vec<ReadMark> {
        self.with(|inner| inner.reads.clone())
    }

    /// Queues faults; answers how many are queued.
    pub fn push_faults(&self, faults: impl IntoIterator<Item = GraphFault>) -> usize {
        self.with(|inner| {
            inner.faults.extend(faults);
            inner.faults.len()
        })
    }

    /// Forgets what was sent and the queued faults.
    pub fn reset(&self) {
        self.with(|inner| *inner = Inner::default());
    }
}

/// The Graph API's routes and their controls.
pub fn router(graph: Graph) -> Router {
    Router::new()
        .route("/{version}/{phone}/messages", post(send))
        .route("/stand-in/graph/sent", get(sent))
        .route("/stand-in/graph/reads", get(reads))
        .route("/stand-in/graph/faults", post(faults))
        .route("/stand-in/graph/reset", post(reset))
        .with_state(graph)
}

pub(crate) fn graph_error(status: u16, code: i64, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {
        "message": message,
        "type": if code == 190 { "OAuthException" } else { "GraphMethodException" },
        "code": code,
        "fbtrace_id": "standin",
    }});
    (status, axum::Json(body)).into_response()
}

fn invalid(message: &str) -> Response {
    graph_error(400, 100, &format!("(#100) Invalid parameter: {message}"))
}

pub(crate) fn digits(text: &str, max: usize) -> bool {
    !text.is_empty() && text.len() <= max && text.bytes().all(|b| b.is_ascii_digit())
}

pub(crate) fn version_ok(version: &str) -> bool {
    version
        .strip_prefix('v')
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(major, minor)| digits(major, 3) && digits(minor, 3))
}

/// The message's kind and content, or why it is refused.
fn read_message(body: &Value) -> Result<(String, String, String), String> {
    if body["messaging_product"] != "whatsapp" {
        return Err("messaging_product must be \"whatsapp\"".into());
    }
    let to = body["to"].as_str().unwrap_or_default();
    if !digits(to, 20) {
        return Err("to must be the recipient's WhatsApp id (digits)".into());
    }
    let kind = body["type"].as_str().unwrap_or("text");
    let content = match kind {
        "text" => {
            let text = body["text"]["body"].as_str().unwrap_or_default();
            if text.trim().is_empty() {
                return Err("text.body is required".into());
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(format!("text.body is over {MAX_TEXT_CHARS} characters"));
            }
            text.to_owned()
        }
        "template" => {
            let name = body["template"]["name"].as_str().unwrap_or_default();
            let language = body["template"]["language"]["code"]
                .as_str()
                .unwrap_or_default();
            if name.is_empty() || language.is_empty() {
                return Err("template.name and template.language.code are required".into());
            }
            name.to_owned()
        }
        other => return Err(format!("type {other:?} is not supported by the stand-in")),
    };
    Ok((to.to_owned(), kind.to_owned(), content))
}

async fn send(
    State(graph): State<Graph>,
    Path((version, phone)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(fault) = graph.with(|inner| inner.faults.pop_front()) {
        let code = fault.code.unwrap_or(131_000);
        let mut response = graph_error(fault.status, code, "injected by the stand-in");
        if let Some(seconds) = fault.retry_after
            && let Ok(value) = seconds.to_string().parse()
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    if !version_ok(&version) || !digits(&phone, 20) {
        return graph_error(
            400,
            100,
            "Unsupported post request: unknown version or phone number id",
        );
    }
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if token.trim().is_empty() {
        return graph_error(401, 190, "An access token is required");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return invalid("the body is not JSON");
    };
    if body["status"] == "read" {
        return mark_read(&graph, phone, &body);
    }
    let (to, kind, content) = match read_message(&body) {
        Ok(read) => read,
        Err(message) => return invalid(&message),
    };
    let id = graph.with(|inner| {
        inner.next_id += 1;
        let id = format!("wamid.standin.{}", inner.next_id);
        inner.sent.push(SentMessage {
            seq: inner.next_id,
            id: id.clone(),
            version,
            phone_number_id: phone,
            to: to.clone(),
            kind,
            content,
            body,
        });
        id
    });
    axum::Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": id}],
    }))
    .into_response()
}

/// Records a read mark, or refuses it as the API would.
fn mark_read(graph: &Graph, phone: String, body: &Value) -> Response {
    if body["messaging_product"] != "whatsapp" {
        return invalid("messaging_product must be \"whatsapp\"");
    }
    let Some(message_id) = body["message_id"].as_str().filter(|id| !id.is_empty()) else {
        return invalid("message_id is required");
    };
    let typing = match &body["typing_indicator"] {
        Value::Null => false,
        indicator if indicator["type"] == "text" => true,
        _ => return invalid("typing_indicator.type must be \"text\""),
    };
    graph.with(|inner| {
        inner.next_id += 1;
        let seq = inner.next_id;
        inner.reads.push(ReadMark {
            seq,
            phone_number_id: phone,
            message_id: message_id.to_owned(),
            typing,
        });
    });
    axum::Json(json!({"success": true})).into_response()
}

async fn reads(State(graph): State<Graph>) -> Response {
    axum::Json(graph.reads()).into_response()
}

async fn sent(State(graph): State<Graph>) -> Response {
    axum::Json(graph.sent()).into_response()
}

async fn faults(State(graph): State<Graph>, body: Bytes) -> Response {
    let faults: Vec<GraphFault> = match serde_json::from_slice(&body) {
        Ok(faults) => faults,
        Err(error) => return invalid(&format!("faults: {error}")),
    };
    if let Some(bad) = faults.iter().find(|f| !(400..=599).contains(&f.status)) {
        return invalid(&format!(
            "a fault's status must be 400–599, got {}",
            bad.status
        ));
    }
    axum::Json(json!({"queued": graph.push_faults(faults)})).into_response()
}

async fn reset(State(graph): State<Graph>) -> Response {
    graph.reset();
    axum::Json(json!({})).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn messages_are_read_or_refused_clearly() {
        let text = json!({"messaging_product": "whatsapp", "to": "15550000001",
                          "type": "text", "text": {"body": "Olá"}});
        assert_eq!(
            read_message(&text).unwrap(),
            ("15550000001".into(), "text".into(), "Olá".into())
        );
        let template = json!({"messaging_product": "whatsapp", "to": "15550000001",
            "type": "template", "template": {"name": "follow_up", "language": {"code": "pt_BR"}}});
        assert_eq!(read_message(&template).unwrap().2, "follow_up");
        for bad in [
            json!({"to": "15550000001", "type": "text", "text": {"body": "x"}}),
            json!({"messaging_product": "whatsapp", "to": "+1 555", "type": "text", "text": {"body": "x"}}),
            json!({"messaging_product": "whatsapp", "to": "1", "type": "text", "text": {"body": " "}}),
            json!({"messaging_product": "whatsapp", "to": "1", "type": "text",
                   "text": {"body": "x".repeat(MAX_TEXT_CHARS + 1)}}),
            json!({"messaging_product": "whatsapp", "to": "1", "type": "template", "template": {}}),
            json!({"messaging_product": "whatsapp", "to": "1", "type": "image"}),
        ] {
            assert!(read_message(&bad).is_err(), "{bad}");
        }
        assert!(version_ok("v23.0") && !version_ok("23.0") && !version_ok("v23"));
    }

    #[test]
    fn a_read_mark_is_recorded_in_order_with_the_sends_or_refused_clearly() {
        let graph = Graph::default();
        let mark = json!({"messaging_product": "whatsapp", "status": "read",
                          "message_id": "wamid.IN1", "typing_indicator": {"type": "text"}});
        assert_eq!(
            mark_read(&graph, "1".into(), &mark).status(),
            StatusCode::OK
        );
        assert_eq!(
            graph.reads(),
            [ReadMark {
                seq: 1,
                phone_number_id: "1".into(),
                message_id: "wamid.IN1".into(),
                typing: true
            }]
        );
        for bad in [
            json!({"status": "read", "message_id": "wamid.IN1"}),
            json!({"messaging_product": "whatsapp", "status": "read"}),
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": "m",
                   "typing_indicator": {"type": "audio"}}),
        ] {
            assert_eq!(
                mark_read(&graph, "1".into(), &bad).status(),
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
        assert_eq!(graph.reads().len(), 1);
    }
}
