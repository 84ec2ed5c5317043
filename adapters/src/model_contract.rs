//! The `Model` port's contract: one set of cases, written once as generic functions
//! over a [`Wire`] and run against both adapters by [`model_contract!`]
//! (`anthropic::tests::contract::…` and `bedrock::tests::contract::…` hold the same
//! names). Each adapter's tests say only how its service speaks: a [`Canned`] answer
//! for an answer or a [`Fault`], and the adapter on a given server. What one adapter
//! alone does (Anthropic's headers and `retry-after`, Bedrock's signature and its
//! other exceptions) stays in its own tests.
//!
//! Also here, shared by both: the scripted server ([`serve`]) and a server that
//! never answers ([`serve_hung`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, Role};
use degrau::model::{Model, ModelError, ModelResponse, StopReason};
use degrau::plan::request::{ModelRequest, RequestBlock, RequestMessage};
use degrau::usage::Usage;

use crate::retry::RetryPolicy;

// ---- the scripted server ---------------------------------------------------------

/// An answer of the scripted server, in the wire's own format.
#[derive(Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

impl Canned {
    /// The same answer with one more header.
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// What the scripted server received.
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Answers the n-th request with the n-th answer (the last one repeats).
pub struct Script {
    answers: Vec<Canned>,
    pub seen: Mutex<Vec<Seen>>,
}

impl Script {
    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

async fn answer(
    State(script): State<Arc<Script>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let index = {
        let mut seen = script.seen.lock().unwrap();
        seen.push(Seen {
            path: uri.path().to_owned(),
            headers,
            body: body.to_vec(),
        });
        seen.len() - 1
    };
    let canned = &script.answers[index.min(script.answers.len() - 1)];
    let mut headers = HeaderMap::new();
    headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in &canned.headers {
        headers.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    let status = axum::http::StatusCode::from_u16(canned.status).unwrap();
    (status, headers, canned.body.clone()).into_response()
}

/// Starts the scripted server on loopback; returns its base URL.
pub async fn serve(answers: Vec<Canned>) -> (String, Arc<Script>) {
    let script = Arc::new(Script {
        answers,
        seen: Mutex::new(Vec::new()),
    });
    let router = axum::Router::new()
        .fallback(answer)
        .with_state(Arc::clone(&script));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, script)
}

/// Starts a server that accepts connections and never answers; returns its base
/// URL and the count of connections accepted.
pub async fn serve_hung() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (url, accepted)
}

// ---- what each adapter supplies --------------------------------------------------

/// A failure every Claude service can answer with, each in its own format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Too many requests (Anthropic's 429, Bedrock's `ThrottlingException`).
    Throttled,
    /// The service failed (a 500: `api_error`, `InternalServerException`).
    ServerError,
    /// The request is refused, with the service's text (a 400).
    InvalidRequest,
    /// The caller may not call (Anthropic's 401, Bedrock's `AccessDeniedException`).
    Denied,
}

/// A Claude service's wire format and its adapter.
pub trait Wire {
    /// The adapter.
    type M: Model;
    /// A credential the adapter holds that no error may show.
    const CREDENTIAL: &'static str;
    /// A 200 carrying `body`, which is a Messages API response or meant to look
    /// like one.
    fn answer(body: Value) -> Canned;
    /// The `fault`, with `message` as the service's text.
    fn fault(fault: Fault, message: &str) -> Canned;
    /// The adapter calling the server at `url`, retrying by `policy`.
    fn model(url: &str, policy: RetryPolicy) -> Self::M;
}

// ---- the cases -----------------------------------------------------------------

/// Retries at once, so that every case runs in milliseconds.
fn fast() -> RetryPolicy {
    RetryPolicy {
        request_timeout: Duration::from_secs(5),
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..RetryPolicy::default()
    }
}

/// A deadline no case reaches unless it says so.
pub fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

/// A one-message request.
pub fn request() -> ModelRequest {
    ModelRequest {
        model: "claude-sonnet-5".to_owned(),
        max_tokens: 256,
        thinking: None,
        tools: Vec::new(),
        tool_choice: None,
        system: Vec::new(),
        messages: vec![RequestMessage {
            role: Role::User,
            content: vec![RequestBlock {
                block: ContentBlock::text("A slot on Friday?"),
                cache_control: None,
            }],
        }],
    }
}

/// A Messages API response of `content`, stopped for `stop_reason`, its usage with
/// cache writes and reads.
fn response_body(content: Value, stop_reason: &str) -> Value {
    json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000,
                  "cache_read_input_tokens": 500, "output_tokens": 40}
    })
}

fn text_answer<W: Wire>(stop_reason: &str) -> Canned {
    W::answer(response_body(
        json!([{"type": "text", "text": "Friday at ten."}]),
        stop_reason,
    ))
}

/// Calls the adapter on a server scripted with `answers`; the outcome and the
/// number of requests the server saw.
async fn call<W: Wire>(answers: Vec<Canned>) -> (Result<ModelResponse, ModelError>, usize) {
    let (url, script) = serve(answers).await;
    let outcome = W::model(&url, fast()).create(&request(), minute()).await;
    (outcome, script.requests())
}

pub async fn a_text_answer_is_read_with_its_usage_and_cache_reads_and_writes<W: Wire>() {
    let (outcome, requests) = call::<W>(vec![text_answer::<W>("end_turn")]).await;
    assert_eq!(
        outcome.unwrap(),
        ModelResponse {
            id: "msg_01".into(),
            model: "claude-sonnet-5".into(),
            role: Role::Assistant,
            content: vec![ContentBlock::text("Friday at ten.")],
            stop_reason: Some(StopReason::EndTurn),
            usage: Usage {
                input_tokens: 12,
                cache_creation_input_tokens: 3000,
                cache_read_input_tokens: 500,
                output_tokens: 40,
                cache_creation: None,
            },
        }
    );
    assert_eq!(requests, 1);
}

pub async fn a_tool_use_answer_is_read_with_its_blocks<W: Wire>() {
    let body = response_body(
        json!([
            {"type": "text", "text": "Let me check Friday."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_free_slots",
             "input": {"day": "fri"}}
        ]),
        "tool_use",
    );
    let (outcome, _) = call::<W>(vec![W::answer(body)]).await;
    let response = outcome.unwrap();
    assert_eq!(
        response.content,
        vec![
            ContentBlock::text("Let me check Friday."),
            ContentBlock::tool_use("toolu_1", "list_free_slots", json!({"day": "fri"})),
        ]
    );
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
}

pub async fn refusals_max_tokens_and_unknown_stop_reasons_are_answers<W: Wire>() {
    for (wire, expected) in [
        ("refusal", StopReason::Refusal),
        ("max_tokens", StopReason::MaxTokens),
        ("pause_turn", StopReason::PauseTurn),
        ("a_reason_from_the_future", StopReason::Other),
    ] {
        let (outcome, _) = call::<W>(vec![text_answer::<W>(wire)]).await;
        assert_eq!(outcome.unwrap().stop_reason, Some(expected), "{wire}");
    }
}

pub async fn a_throttled_call_that_persists_is_rate_limited_after_every_attempt<W: Wire>() {
    let (outcome, requests) = call::<W>(vec![W::fault(Fault::Throttled, "slow down")]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::RateLimited { retry_after: None }
    );
    assert_eq!(requests, 3, "the first attempt and two retries");
}

pub async fn a_server_error_that_persists_is_unavailable_after_every_attempt<W: Wire>() {
    let (outcome, requests) = call::<W>(vec![W::fault(Fault::ServerError, "Internal")]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::Unavailable { status: 500 }
    );
    assert_eq!(requests, 3);
}

pub async fn a_throttle_then_a_server_error_then_an_answer_succeeds_on_the_retries<W: Wire>() {
    let (outcome, requests) = call::<W>(vec![
        W::fault(Fault::Throttled, "slow down"),
        W::fault(Fault::ServerError, "Internal"),
        text_answer::<W>("end_turn"),
    ])
    .await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(
        requests, 3,
        "retried by the loop, not by a client of its own"
    );
}

pub async fn an_invalid_request_keeps_the_services_text_and_is_not_retried<W: Wire>() {
    let text = "messages.1: `tool_use` ids were found without `tool_result` blocks \
                immediately after: toolu_1.";
    let (outcome, requests) = call::<W>(vec![W::fault(Fault::InvalidRequest, text)]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::InvalidRequest {
            message: text.to_owned()
        }
    );
    assert_eq!(requests, 1);
}

pub async fn a_prompt_that_is_too_long_is_reported_as_such_and_not_retried<W: Wire>() {
    let text = "prompt is too long: 210000 tokens > 200000 maximum";
    let (outcome, requests) = call::<W>(vec![W::fault(Fault::InvalidRequest, text)]).await;
    assert_eq!(
        outcome.unwrap_err(),
        ModelError::PromptTooLong {
            message: text.to_owned()
        }
    );
    assert_eq!(requests, 1);
}

pub async fn denied_access_is_an_authentication_error_and_is_not_retried<W: Wire>() {
    let (outcome, requests) = call::<W>(vec![W::fault(Fault::Denied, "not authorized")]).await;
    let error = outcome.unwrap_err();
    assert!(
        matches!(error, ModelError::Authentication { .. }),
        "{error:?}"
    );
    assert_eq!(requests, 1);
}

pub async fn a_2xx_that_is_not_a_messages_response_is_a_protocol_error_without_retry<W: Wire>() {
    let body = json!({"id": "msg_01", "content": "secret words"});
    let (outcome, requests) = call::<W>(vec![W::answer(body)]).await;
    let error = outcome.unwrap_err();
    let ModelError::Protocol(text) = error else {
        panic!("expected a protocol error, got {error:?}");
    };
    assert!(!text.contains("secret words"), "{text}");
    assert_eq!(requests, 1);
}

pub async fn a_server_that_never_answers_times_out_after_the_retries<W: Wire>() {
    let (url, accepted) = serve_hung().await;
    let policy = RetryPolicy {
        request_timeout: Duration::from_millis(200),
        ..fast()
    };
    let error = W::model(&url, policy)
        .create(&request(), minute())
        .await
        .unwrap_err();
    assert_eq!(error, ModelError::Timeout);
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

// The time budget: the deadline bounds every attempt, retry and wait. The outer
// `tokio::time::timeout` guards against a case hanging for minutes; it asserts
// nothing about time.

pub async fn a_hung_model_gets_one_attempt_cut_at_the_deadline_and_no_retry<W: Wire>() {
    let (url, accepted) = serve_hung().await;
    let policy = RetryPolicy {
        request_timeout: Duration::from_secs(60),
        ..fast()
    };
    let call = W::model(&url, policy);
    let deadline = Deadline::after(Duration::from_millis(1_500));
    let outcome = tokio::time::timeout(Duration::from_secs(20), call.create(&request(), deadline))
        .await
        .expect("the model call ran past its deadline");
    assert_eq!(outcome.unwrap_err(), ModelError::Timeout);
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "no retry once the time is up"
    );
}

pub async fn no_attempt_starts_with_less_than_the_floor_left<W: Wire>() {
    let (url, script) = serve(vec![text_answer::<W>("end_turn")]).await;
    let deadline = Deadline::after(Duration::from_millis(100));
    let error = W::model(&url, fast())
        .create(&request(), deadline)
        .await
        .unwrap_err();
    assert_eq!(error, ModelError::Timeout);
    assert_eq!(
        script.requests(),
        0,
        "an attempt that could not finish was not made"
    );
}

pub async fn a_refused_connection_is_a_connection_error_naming_no_credential<W: Wire>() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let error = W::model(&url, fast())
        .create(&request(), minute())
        .await
        .unwrap_err();
    let ModelError::Connection(text) = error else {
        panic!("expected a connection error, got {error:?}");
    };
    assert!(!text.contains(W::CREDENTIAL), "{text}");
}

mod stream;

pub use stream::{
    a_hung_stream_gets_one_attempt_cut_at_the_deadline,
    a_stream_refused_before_it_begins_is_retried_as_a_call_is,
    a_stream_refused_for_good_is_not_retried,
    a_stream_to_a_refused_connection_is_a_connection_error,
};

/// Every case above (and the streamed ones of [`stream`]) as a `#[tokio::test]` on
/// the [`Wire`] given.
macro_rules! model_contract {
    ($wire:ty) => {
        $crate::model_contract::model_contract!(@each $wire;
            a_text_answer_is_read_with_its_usage_and_cache_reads_and_writes,
            a_tool_use_answer_is_read_with_its_blocks,
            refusals_max_tokens_and_unknown_stop_reasons_are_answers,
            a_throttled_call_that_persists_is_rate_limited_after_every_attempt,
            a_server_error_that_persists_is_unavailable_after_every_attempt,
            a_throttle_then_a_server_error_then_an_answer_succeeds_on_the_retries,
            an_invalid_request_keeps_the_services_text_and_is_not_retried,
            a_prompt_that_is_too_long_is_reported_as_such_and_not_retried,
            denied_access_is_an_authentication_error_and_is_not_retried,
            a_2xx_that_is_not_a_messages_response_is_a_protocol_error_without_retry,
            a_server_that_never_answers_times_out_after_the_retries,
            a_hung_model_gets_one_attempt_cut_at_the_deadline_and_no_retry,
            no_attempt_starts_with_less_than_the_floor_left,
            a_refused_connection_is_a_connection_error_naming_no_credential,
            a_stream_refused_before_it_begins_is_retried_as_a_call_is,
            a_stream_refused_for_good_is_not_retried,
            a_hung_stream_gets_one_attempt_cut_at_the_deadline,
            a_stream_to_a_refused_connection_is_a_connection_error,
        );
    };
    (@each $wire:ty; $($case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::model_contract::$case::<$wire>().await;
            }
        )+
    };
}
pub(crate) use model_contract;
