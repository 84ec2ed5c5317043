//! Streamed replies end to end: the `ask-stream` binary under the test Runtime API,
//! answering with Lambda's response streaming, its model calls streamed from the
//! stand-in. The answer is read piece by piece as it reaches the Runtime API, the
//! way API Gateway's REST API (or a function URL) passes it to the client, and
//! every answer is held to `docs/openapi.json` (each event's data to its schema).

use std::time::Duration;

use degrau_tests::lambda::LocalLambda;
use degrau_tests::stack::FullStack;
use degrau_tests::streamed::{Event, StreamedReply, read};
use degrau_tests::{api_event, openapi, unique};
use serde_json::{Value, json};

use crate::helpers::BOOKING_INSTRUCTIONS;

const PATIENCE: Duration = Duration::from_secs(60);

fn path(contact: &str) -> String {
    format!("/v1/contacts/{contact}/messages/stream")
}

/// The HTTP API (payload v2) event of a streamed message, under `AUTH_MODE=dev`.
pub(crate) fn event(tenant: &str, contact: &str, body: &str, headers: &[(&str, &str)]) -> Value {
    let mut all = vec![
        ("content-type", "application/json"),
        ("x-tenant-id", tenant),
    ];
    all.extend_from_slice(headers);
    api_event("POST", &path(contact), "", &all, Some(body), None)
}

pub(crate) fn message(text: &str) -> String {
    json!({ "text": text }).to_string()
}

/// Sends `event` to the streaming function and reads its answer until the end
/// (or `stop`); a whole answer is checked against the OpenAPI document.
async fn stream_until(
    function: &LocalLambda,
    event: Value,
    stop: impl Fn(&Event) -> bool,
) -> StreamedReply {
    let mut pieces = function.invoke_streaming(event.clone());
    let reply = read(&mut pieces, PATIENCE, stop).await;
    if reply.ended || reply.end().is_some() {
        let path = event["rawPath"].as_str().unwrap_or_default();
        openapi::check("POST", path, reply.status, &reply.raw);
    }
    reply
}

pub(crate) async fn stream(function: &LocalLambda, event: Value) -> StreamedReply {
    stream_until(function, event, |_| false).await
}

/// A stack and its streaming function.
async fn streaming_stack() -> (FullStack, LocalLambda) {
    let stack = FullStack::start(&[]).await;
    let function = stack.start_function("ask-stream", &[]).await;
    (stack, function)
}

#[tokio::test]
async fn deltas_arrive_before_the_round_ends_and_done_is_what_the_json_route_answers() {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream");
    stack.standin.pace(20).await;
    let reply = stream(
        &function,
        event(&tenant, "c-1", &message("Hello, what do you do?"), &[]),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    let names = reply.names();
    assert_eq!(names.last(), Some(&"done"), "{names:?}");
    let deltas: Vec<&Event> = reply.events.iter().filter(|e| e.name == "delta").collect();
    assert!(deltas.len() >= 2, "the text came in pieces: {names:?}");
    let done = reply.end().unwrap();
    assert!(
        deltas[0].at < done.at,
        "the first delta reached the client before the round ended"
    );
    assert_eq!(reply.text(), done.data["reply"]["text"].as_str().unwrap());
    let log = stack.standin.requests().await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["streamed"], json!(true), "the model call streamed");

    // The same first message through the JSON route, from a cache as cold.
    stack.standin.reset().await;
    let json_reply = stack.post(&tenant, "c-2", "Hello, what do you do?").await;
    assert_eq!(json_reply.status, 200, "{}", json_reply.raw);
    assert_eq!(
        done.data, json_reply.body,
        "done carries the JSON route's body"
    );
}

#[tokio::test]
async fn a_tool_round_streams_across_both_model_calls() {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream-tools");
    stack
        .configure(
            &tenant,
            &degrau::tenant::TenantConfig {
                instructions: Some(BOOKING_INSTRUCTIONS.into()),
                ..Default::default()
            },
        )
        .await;
    let reply = stream(
        &function,
        event(
            &tenant,
            "c-1",
            &message("turn 000: any free slots on 2026-12-01?"),
            &[],
        ),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let names = reply.names();
    let started = names.iter().position(|n| *n == "tool_started");
    let finished = names.iter().position(|n| *n == "tool_finished");
    let (Some(started), Some(finished)) = (started, finished) else {
        panic!("a tool call was shown: {names:?}");
    };
    assert!(started < finished);
    assert!(
        reply.events[started].data.get("input").is_none(),
        "no input unless the tenant allows it"
    );
    let last_call = reply.events[finished + 1..]
        .iter()
        .filter(|e| e.name == "delta")
        .filter_map(|e| e.data["call"].as_u64())
        .max();
    assert!(
        last_call >= Some(1),
        "the answer after the tool round streamed as the second call: {names:?}"
    );
    let done = reply.end().unwrap();
    assert_eq!(done.name, "done");
    assert_eq!(reply.text(), done.data["reply"]["text"].as_str().unwrap());
    let calls = stack.standin.requests().await;
    assert_eq!(calls.len(), 2, "two model calls");
    assert!(calls.iter().all(|c| c["streamed"] == json!(true)));
}

#[tokio::test]
async fn a_fault_before_the_first_delta_is_retried_and_one_after_it_ends_the_stream_with_nothing_stored()
 {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream-faults");

    // An overload before the stream, and one after `message_start` only: both come
    // before any delta, so the adapter retries them.
    stack
        .standin
        .faults(json!([{"status": 529}, {"stream_error_after": 1}]))
        .await;
    let retried = stream(&function, event(&tenant, "c-1", &message("Hi"), &[])).await;
    assert_eq!(retried.status, 200, "{}", retried.raw);
    assert_eq!(retried.end().map(|e| e.name.as_str()), Some("done"));
    assert_eq!(stack.standin.requests().await.len(), 3, "two retries");
    assert!(
        !retried.names().contains(&"restart"),
        "nothing was shown before the retries"
    );

    // An overload after the first delta: never retried; the stream ends with the
    // error the JSON route would answer, and nothing is stored.
    stack.standin.reset().await;
    stack
        .standin
        .faults(json!([{"stream_error_after": 5}]))
        .await;
    let cut = stream(&function, event(&tenant, "c-2", &message("Hi there"), &[])).await;
    assert_eq!(cut.status, 200, "{}", cut.raw);
    assert!(cut.names().contains(&"delta"), "{:?}", cut.names());
    let end = cut.end().expect("the stream ended with an event");
    assert_eq!(end.name, "error");
    assert_eq!(end.data["status"], json!(502));
    assert_eq!(end.data["error"]["type"], json!("model_error"));
    assert_eq!(stack.standin.requests().await.len(), 1, "not retried");
    let memory = stack.memory(&tenant, "c-2").await;
    assert!(
        memory["error"]["type"] == json!("not_found"),
        "nothing was stored: {memory}"
    );

    // A connection dropped after the first delta: the same.
    stack.standin.reset().await;
    stack
        .standin
        .faults(json!([{"stream_drop_after": 5}]))
        .await;
    let dropped = stream(&function, event(&tenant, "c-3", &message("Hello"), &[])).await;
    let end = dropped.end().expect("the stream ended with an event");
    assert_eq!(end.name, "error", "{}", dropped.raw);
    assert_eq!(end.data["error"]["type"], json!("model_error"));
    let memory = stack.memory(&tenant, "c-3").await;
    assert_eq!(memory["error"]["type"], json!("not_found"), "{memory}");
}

#[tokio::test]
async fn a_client_that_goes_away_mid_stream_leaves_the_round_stored_and_its_key_replays_it() {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream-gone");
    stack.standin.pace(40).await;
    let key = unique("idem");
    let headers = [("idempotency-key", key.as_str())];
    let first = stream_until(
        &function,
        event(&tenant, "c-1", &message("Tell me about you"), &headers),
        |e| e.name == "delta",
    )
    .await;
    assert_eq!(
        first.names(),
        ["delta"],
        "stopped reading at the first delta"
    );

    // The reader is gone; the round goes on and is stored.
    let mut stored = Value::Null;
    for _ in 0..600 {
        stored = stack.memory(&tenant, "c-1").await;
        if stored["session"]["last_seq"] == json!(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stored["session"]["last_seq"], json!(2), "{stored}");

    let replay = stream(
        &function,
        event(&tenant, "c-1", &message("Tell me about you"), &headers),
    )
    .await;
    assert_eq!(replay.status, 200, "{}", replay.raw);
    assert_eq!(replay.names(), ["done"], "a replay is `done` alone");
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.end().unwrap().data["round"]["last_seq"], json!(2));
    // The key is the contact's, whichever route: the JSON route replays the
    // streamed round as the body its `done` carried.
    let json_replay = stack
        .call_with(
            "POST",
            "/v1/contacts/c-1/messages",
            "",
            &tenant,
            &headers,
            Some(&message("Tell me about you")),
        )
        .await;
    assert_eq!(json_replay.status, 200, "{}", json_replay.raw);
    assert_eq!(json_replay.body, replay.end().unwrap().data);
    assert_eq!(
        json_replay.headers["idempotent-replayed"],
        json!("true"),
        "{:?}",
        json_replay.headers
    );
    assert_eq!(
        stack.standin.requests().await.len(),
        1,
        "the replays called no model"
    );

    // And the other way: a JSON round's key sent to the stream is `done` alone.
    let other = unique("idem");
    let other_headers = [("idempotency-key", other.as_str())];
    let answered = stack
        .call_with(
            "POST",
            "/v1/contacts/c-2/messages",
            "",
            &tenant,
            &other_headers,
            Some(&message("Hello")),
        )
        .await;
    assert_eq!(answered.status, 200, "{}", answered.raw);
    let streamed = stream(
        &function,
        event(&tenant, "c-2", &message("Hello"), &other_headers),
    )
    .await;
    assert_eq!(streamed.names(), ["done"], "{}", streamed.raw);
    assert_eq!(streamed.end().unwrap().data, answered.body);
    assert_eq!(stack.standin.requests().await.len(), 2);
}

#[tokio::test]
async fn bad_input_on_the_streaming_route_is_the_json_routes_4xx_and_changes_nothing() {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream-bad");
    let too_long = "x".repeat(degrau::converse::MAX_TEXT_CHARS + 1);
    let cases: Vec<(Value, u16, &str)> = vec![
        (
            event(&tenant, "c-1", &message("   "), &[]),
            400,
            "invalid_request",
        ),
        (
            event(&tenant, "c-1", "{\"txt\": \"hi\"}", &[]),
            400,
            "invalid_request",
        ),
        (
            event(&tenant, "c-1", &message(&too_long), &[]),
            413,
            "too_large",
        ),
        (
            event(
                &tenant,
                "c-1",
                &message("hi"),
                &[("idempotency-key", "bad key")],
            ),
            400,
            "invalid_request",
        ),
        (
            api_event(
                "POST",
                &path("c-1"),
                "",
                &[("content-type", "text/plain"), ("x-tenant-id", &tenant)],
                Some("hi"),
                None,
            ),
            415,
            "unsupported_media_type",
        ),
        (
            api_event(
                "POST",
                &path("c-1"),
                "",
                &[("content-type", "application/json")],
                Some(&message("hi")),
                None,
            ),
            401,
            "unauthenticated",
        ),
        (
            api_event(
                "GET",
                &path("c-1"),
                "",
                &[("x-tenant-id", &tenant)],
                None,
                None,
            ),
            405,
            "method_not_allowed",
        ),
        (
            event(&tenant, "bad%zzcontact", &message("hi"), &[]),
            400,
            "invalid_request",
        ),
    ];
    for (event, status, kind) in cases {
        let reply = stream(&function, event.clone()).await;
        assert_eq!(
            (reply.status, reply.json()["error"]["type"].as_str()),
            (status, Some(kind)),
            "{}: {}",
            event["body"],
            reply.raw
        );
        assert_eq!(reply.header("content-type"), Some("application/json"));
    }
    assert!(stack.standin.requests().await.is_empty(), "no model call");
    let memory = stack.memory(&tenant, "c-1").await;
    assert_eq!(
        memory["error"]["type"],
        json!("not_found"),
        "nothing stored"
    );
}

#[tokio::test]
async fn the_rest_apis_event_and_the_http_apis_json_function_answer_the_same_events() {
    let (stack, function) = streaming_stack().await;
    let tenant = unique("stream-rest");
    // The REST API's proxy event (`events/ask-stream-message.json`), under
    // AUTH_MODE=dev with the tenant in its header.
    let mut rest: Value =
        serde_json::from_str(include_str!("../../../events/ask-stream-message.json")).unwrap();
    rest["headers"]["X-Tenant-Id"] = json!(tenant);
    rest["multiValueHeaders"]["X-Tenant-Id"] = json!([tenant]);
    rest["headers"]["Idempotency-Key"] = json!(unique("rest"));
    rest["multiValueHeaders"]["Idempotency-Key"] = rest["headers"]["Idempotency-Key"].clone();
    let mut pieces = function.invoke_streaming(rest);
    let streamed = read(&mut pieces, PATIENCE, |_| false).await;
    assert_eq!(streamed.status, 200, "{}", streamed.raw);
    openapi::check(
        "POST",
        "/v1/contacts/demo-contact/messages/stream",
        200,
        &streamed.raw,
    );
    assert_eq!(streamed.end().unwrap().name, "done");

    // The HTTP API's `ask` answers the route too: the same events, in one piece.
    let json_function = stack
        .call_with(
            "POST",
            &path("c-9"),
            "",
            &tenant,
            &[],
            Some(&message("Oi! Tem horário amanhã às 10h?")),
        )
        .await;
    assert_eq!(json_function.status, 200, "{}", json_function.raw);
    let events = degrau_tests::streamed::parse_events(&json_function.raw);
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("done"));
    let in_one_piece = StreamedReply {
        status: json_function.status,
        headers: json_function.headers.clone(),
        events: events
            .into_iter()
            .map(|(name, data)| Event {
                name,
                data,
                at: std::time::Instant::now(),
            })
            .collect(),
        raw: json_function.raw.clone(),
        ended: true,
    };
    let done = &in_one_piece.end().unwrap().data;
    assert_eq!(in_one_piece.text(), done["reply"]["text"].as_str().unwrap());
    assert_eq!(
        done["reply"],
        streamed.end().unwrap().data["reply"],
        "the same question, the same answer through either function"
    );
}
