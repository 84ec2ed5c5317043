//! A recording pass-through in front of the stand-in: both functions reach the
//! model through it (`ANTHROPIC_BASE_URL`), and it writes down, for every call, the
//! turn it belongs to, the status, the model, the `usage` the stand-in answered,
//! the tools the answer called, and whether the request held a watched string.
//!
//! It exists because the stand-in's `GET /stand-in/requests` returns the whole log,
//! bodies included, every time: reading it after each turn would be quadratic, and
//! a full-history run of 1,000 turns logs gigabytes. The tap sees exactly the bytes
//! the stand-in sees and answers, so its figures are the log's; the benchmark
//! still checks them against the stand-in's log once at the end of a run
//! ([`crate::strategies::run`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use degrau::usage::Usage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who made a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// The ask function answering the customer.
    Ask,
    /// The compactor (summary or fact extraction): `system[0]` starts with `degrau:`.
    Compactor,
}

/// One `POST /v1/messages` as it went through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// The turn (0-based) being played when the call arrived.
    pub turn: usize,
    /// Who made it.
    pub caller: Caller,
    /// `model` of the request.
    pub model: String,
    /// HTTP status the stand-in answered.
    pub status: u16,
    /// `usage` of the answer (`None` for a refused call).
    pub usage: Option<Usage>,
    /// Names of the tools the answer called.
    pub tools_called: Vec<String>,
    /// Whether the request's bytes held the watched string.
    pub held_watched: bool,
    /// Size of the request body, in bytes.
    pub request_bytes: usize,
}

#[derive(Default)]
struct TapState {
    upstream: Option<String>,
    turn: usize,
    watch: Option<String>,
    calls: Vec<Call>,
}

/// The running tap.
pub struct Tap {
    /// Its base URL (what `ANTHROPIC_BASE_URL` gets).
    pub url: String,
    state: Arc<Mutex<TapState>>,
    task: tokio::task::JoinHandle<()>,
}

type Shared = (Arc<Mutex<TapState>>, reqwest::Client);

fn lock(state: &Mutex<TapState>) -> std::sync::MutexGuard<'_, TapState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tap {
    /// Serves on an ephemeral loopback port; calls fail with 502 until
    /// [`Tap::set_upstream`] names the stand-in.
    pub async fn start() -> std::io::Result<Tap> {
        let state = Arc::new(Mutex::new(TapState::default()));
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .map_err(std::io::Error::other)?;
        let app = Router::new()
            .fallback(forward)
            .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state((state.clone(), client));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr: SocketAddr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Tap {
            url: format!("http://{addr}"),
            state,
            task,
        })
    }

    /// Where calls go: the stand-in's base URL.
    pub fn set_upstream(&self, url: &str) {
        lock(&self.state).upstream = Some(url.trim_end_matches('/').to_owned());
    }

    /// Calls from now on belong to `turn`; `watch` is the string to look for in
    /// their requests (none: nothing is looked for).
    pub fn begin_turn(&self, turn: usize, watch: Option<&str>) {
        let mut state = lock(&self.state);
        state.turn = turn;
        state.watch = watch.map(str::to_owned);
    }

    /// The calls so far, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.state).calls.clone()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The parts of a request body the tap reads; the rest is skipped unparsed.
#[derive(Deserialize)]
struct Lean {
    #[serde(default)]
    model: String,
    #[serde(default)]
    system: Option<SystemField>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SystemField {
    Text(String),
    Blocks(Vec<SystemBlock>),
}

#[derive(Deserialize)]
struct SystemBlock {
    #[serde(default)]
    text: String,
}

impl Lean {
    fn first_system_text(&self) -> &str {
        match &self.system {
            Some(SystemField::Text(text)) => text,
            Some(SystemField::Blocks(blocks)) => blocks.first().map_or("", |b| b.text.as_str()),
            None => "",
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// The record of one `POST /v1/messages`: who made it (the compactor's `system[0]`
/// starts with `degrau:`), its model, status and usage, the tools the answer
/// called, whether the request held the watched string.
fn call_of(
    turn: usize,
    watch: Option<String>,
    body: &[u8],
    status: StatusCode,
    bytes: &[u8],
) -> Call {
    let lean: Option<Lean> = serde_json::from_slice(body).ok();
    let response: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let usage = (status == StatusCode::OK)
        .then(|| serde_json::from_value::<Usage>(response["usage"].clone()).ok())
        .flatten();
    let tools_called = response["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["name"].as_str().map(str::to_owned))
        .collect();
    let caller = if lean
        .as_ref()
        .is_some_and(|l| l.first_system_text().starts_with("degrau:"))
    {
        Caller::Compactor
    } else {
        Caller::Ask
    };
    Call {
        turn,
        caller,
        model: lean.map(|l| l.model).unwrap_or_default(),
        status: status.as_u16(),
        usage,
        tools_called,
        held_watched: watch.is_some_and(|w| contains(body, w.as_bytes())),
        request_bytes: body.len(),
    }
}

/// Passes a request to the upstream and its answer back unchanged (hop-by-hop
/// headers aside), recording each `POST /v1/messages` as a [`Call`].
async fn forward(
    State((state, client)): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (upstream, turn, watch) = {
        let state = lock(&state);
        (state.upstream.clone(), state.turn, state.watch.clone())
    };
    let Some(upstream) = upstream else {
        return (StatusCode::BAD_GATEWAY, "tap: no upstream yet").into_response();
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = client.request(method.clone(), format!("{upstream}{path}"));
    for (name, value) in &headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection") {
            request = request.header(name, value);
        }
    }
    let sent = request.body(body.clone()).send().await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(error) => {
            return (StatusCode::BAD_GATEWAY, format!("tap: {error}")).into_response();
        }
    };
    let status = answer.status();
    let answer_headers = answer.headers().clone();
    let bytes = answer.bytes().await.unwrap_or_default();

    if method == Method::POST && uri.path() == "/v1/messages" {
        let call = call_of(turn, watch, &body, status, &bytes);
        lock(&state).calls.push(call);
    }

    let mut response = (status, bytes).into_response();
    for (name, value) in &answer_headers {
        if !matches!(
            name.as_str(),
            "content-length" | "transfer-encoding" | "connection"
        ) {
            response.headers_mut().insert(
                HeaderName::from(name),
                HeaderValue::from_bytes(value.as_bytes())
                    .unwrap_or_else(|_| HeaderValue::from_static("")),
            );
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_string_in_bytes() {
        assert!(contains(b"my code is ZX-1234.", b"ZX-1234"));
        assert!(!contains(b"my code is ZX-123", b"ZX-1234"));
        assert!(!contains(b"anything", b""));
    }

    #[test]
    fn reads_the_first_system_text_in_either_shape() {
        let blocks: Lean = serde_json::from_str(
            r#"{"model":"m","system":[{"type":"text","text":"degrau:summarize\nx"}],"messages":[]}"#,
        )
        .unwrap();
        assert!(blocks.first_system_text().starts_with("degrau:"));
        let text: Lean = serde_json::from_str(r#"{"model":"m","system":"hello"}"#).unwrap();
        assert_eq!(text.first_system_text(), "hello");
        let none: Lean = serde_json::from_str(r#"{"model":"m"}"#).unwrap();
        assert_eq!(none.first_system_text(), "");
    }
}
