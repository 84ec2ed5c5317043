//! Each quirk of the corpus on each route, as the wire shows it: the Messages
//! API's JSON and Server-Sent Events, Bedrock's `InvokeModel` body and its
//! `InvokeModelWithResponseStream` frames read by the AWS SDK's own decoder. The
//! same quirk gives the same blocks on all four; a stream-only quirk leaves a
//! whole answer alone and stays queued.

use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::ResponseStream;
use aws_sdk_bedrockruntime::types::error::ResponseStreamError;
use degrau_standin::quirks::{Quirk, refusal_details};
use serde_json::{Value, json};

use crate::helpers::{TestStandIn, demo_tools, start};

/// A question the stand-in answers with text then a `list_free_slots` call.
pub const TOOL_QUESTION: &str = "any free slots on 2026-12-03?";

/// A request as degrau sends it, with the demo tools; thinking on when asked.
pub fn request(text: &str, thinking: bool) -> Value {
    let mut body = json!({
        "model": "claude-sonnet-5",
        "max_tokens": 2048,
        "tools": serde_json::to_value(demo_tools()).expect("tools serialise"),
        "system": [{"type": "text", "text": "You schedule haircuts."}],
        "messages": [{"role": "user", "content": text}],
    });
    if thinking {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    }
    body
}

/// What one quirk looked like on the four routes.
struct Routes {
    /// The Messages API's body.
    json: Value,
    /// The Messages API's events.
    sse: Vec<Value>,
    /// Bedrock's `InvokeModel` body.
    invoke: Value,
    /// The Messages API events in Bedrock's chunks, and the exception that ended
    /// the stream, if one did.
    frames: Vec<Value>,
    exception: Option<ResponseStreamError>,
    /// The quirks logged for each call, in route order.
    logged: Vec<Value>,
}

async fn queue(standin: &TestStandIn, quirk: Quirk) {
    let reply = standin
        .control("/stand-in/quirks", &json!({"next": [quirk]}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

fn bedrock_client(standin: &TestStandIn) -> aws_sdk_bedrockruntime::Client {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(standin.running.url())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "secret", None, None, "test"))
        .build();
    aws_sdk_bedrockruntime::Client::from_conf(config)
}

fn bedrock_body(body: &Value) -> Blob {
    let mut body = body.clone();
    let object = body.as_object_mut().expect("an object");
    object.remove("model");
    object.insert("anthropic_version".into(), json!("bedrock-2023-05-31"));
    Blob::new(body.to_string())
}

/// The `data:` of every Server-Sent Event of a body.
pub fn sse_events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON data"))
        .collect()
}

async fn sse(standin: &TestStandIn, body: &Value) -> Vec<Value> {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let response = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("stand-in answers");
    assert_eq!(response.status(), 200);
    sse_events(&response.text().await.expect("a body"))
}

async fn invoke(client: &aws_sdk_bedrockruntime::Client, body: &Value) -> Value {
    let output = client
        .invoke_model()
        .model_id("claude-sonnet-5")
        .content_type("application/json")
        .body(bedrock_body(body))
        .send()
        .await
        .expect("an answer");
    serde_json::from_slice(output.body().as_ref()).expect("JSON")
}

async fn frames(
    client: &aws_sdk_bedrockruntime::Client,
    body: &Value,
) -> (Vec<Value>, Option<ResponseStreamError>) {
    let mut output = client
        .invoke_model_with_response_stream()
        .model_id("claude-sonnet-5")
        .content_type("application/json")
        .body(bedrock_body(body))
        .send()
        .await
        .expect("a stream");
    let mut events = Vec::new();
    loop {
        match output.body.recv().await {
            Ok(Some(ResponseStream::Chunk(part))) => {
                let bytes = part.bytes.expect("a chunk's bytes");
                events.push(serde_json::from_slice(bytes.as_ref()).expect("an event"));
            }
            Ok(Some(other)) => panic!("an unexpected frame: {other:?}"),
            Ok(None) => return (events, None),
            Err(error) => return (events, Some(error.into_service_error())),
        }
    }
}

/// `quirk` queued before each of the four calls of `body` (on a reset stand-in,
/// so each sees the same cache), and what each got.
async fn on_every_route(quirk: Quirk, body: &Value) -> Routes {
    let standin = start().await;
    let client = bedrock_client(&standin);
    let reset = || standin.running.standin().reset();
    queue(&standin, quirk).await;
    let json = standin.messages(body).await.body;
    let mut logged = vec![standin.logged().await[0]["quirks"].clone()];
    reset();
    queue(&standin, quirk).await;
    let sse = sse(&standin, body).await;
    logged.push(standin.logged().await[0]["quirks"].clone());
    reset();
    queue(&standin, quirk).await;
    let invoke = invoke(&client, body).await;
    logged.push(standin.logged().await[0]["quirks"].clone());
    reset();
    queue(&standin, quirk).await;
    let (frames, exception) = frames(&client, body).await;
    logged.push(standin.logged().await[0]["quirks"].clone());
    Routes {
        json,
        sse,
        invoke,
        frames,
        exception,
        logged,
    }
}

/// A body or event list without what differs between two calls (ids) and two
/// routes (the model: Bedrock's is the path's).
fn comparable(mut value: Value) -> Value {
    let strip = |message: &mut Value| {
        if let Some(object) = message.as_object_mut() {
            object.remove("id");
            object.remove("model");
        }
    };
    if value.is_array() {
        strip(&mut value[0]["message"]);
    } else {
        strip(&mut value);
    }
    value
}

impl Routes {
    /// The four routes agree, and the quirk was logged on each (`streamed_only`:
    /// on the two streams only).
    fn agree(&self, quirk: Quirk) {
        assert_eq!(
            comparable(self.json.clone()),
            comparable(self.invoke.clone())
        );
        let streamed = comparable(Value::from(self.sse.clone()));
        let error = self.sse.last().filter(|e| e["type"] == "error");
        let mut frames = self.frames.clone();
        frames.extend(error.cloned());
        assert_eq!(streamed, comparable(Value::from(frames)));
        let whole = if quirk.streamed_only() {
            json!([])
        } else {
            json!([quirk])
        };
        let streamed = json!([quirk]);
        assert_eq!(
            self.logged,
            [whole.clone(), streamed.clone(), whole, streamed]
        );
    }

    fn content(&self) -> &Value {
        &self.json["content"]
    }

    /// The events of block `index` after its start.
    fn deltas(&self, index: usize) -> Vec<&Value> {
        self.sse
            .iter()
            .filter(|e| e["type"] == "content_block_delta" && e["index"] == index)
            .map(|e| &e["delta"])
            .collect()
    }

    fn start(&self, index: usize) -> &Value {
        let start = self
            .sse
            .iter()
            .find(|e| e["type"] == "content_block_start" && e["index"] == index);
        &start.expect("the block starts")["content_block"]
    }

    fn message_delta(&self) -> &Value {
        let delta = self.sse.iter().find(|e| e["type"] == "message_delta");
        delta.expect("a message_delta")
    }

    /// The text a block's deltas spell.
    fn streamed_text(&self, index: usize) -> String {
        self.deltas(index)
            .iter()
            .filter_map(|d| d["text"].as_str().or(d["partial_json"].as_str()))
            .collect()
    }
}

#[tokio::test]
async fn an_empty_text_block_comes_before_the_tool_call() {
    let quirk = Quirk::EmptyTextBeforeToolUse;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    assert_eq!(routes.content()[0], json!({"type": "text", "text": ""}));
    assert_eq!(routes.content()[1]["type"], "tool_use");
    assert_eq!(routes.json["stop_reason"], "tool_use");
    // Streamed: the block starts and stops, with no delta.
    assert_eq!(routes.start(0), &json!({"type": "text", "text": ""}));
    assert!(routes.deltas(0).is_empty());
}

#[tokio::test]
async fn two_newlines_come_before_the_tool_call() {
    let quirk = Quirk::NewlinesBeforeToolUse;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    assert_eq!(routes.content()[0], json!({"type": "text", "text": "\n\n"}));
    assert_eq!(
        routes.deltas(0),
        [&json!({"type": "text_delta", "text": "\n\n"})]
    );
}

#[tokio::test]
async fn a_final_answer_is_a_single_space() {
    let quirk = Quirk::WhitespaceFinalText;
    let routes = on_every_route(quirk, &request("hello", false)).await;
    routes.agree(quirk);
    assert_eq!(routes.content(), &json!([{"type": "text", "text": " "}]));
    assert_eq!(routes.json["stop_reason"], "end_turn");
    assert_eq!(routes.streamed_text(0), " ");
}

#[tokio::test]
async fn text_follows_the_tool_call_and_the_stop_is_still_tool_use() {
    let quirk = Quirk::TextAfterToolUse;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    let kinds: Vec<&Value> = routes
        .content()
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["type"])
        .collect();
    assert_eq!(kinds, ["text", "tool_use", "text"]);
    assert_eq!(routes.json["stop_reason"], "tool_use");
    assert_eq!(
        routes.streamed_text(2),
        routes.content()[2]["text"].as_str().unwrap()
    );
}

#[tokio::test]
async fn an_empty_input_streams_as_an_empty_partial_json() {
    let quirk = Quirk::ToolUseEmptyInput;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    assert_eq!(routes.content()[1]["input"], json!({}));
    assert_eq!(routes.start(1)["input"], json!({}));
    assert_eq!(
        routes.deltas(1),
        [&json!({"type": "input_json_delta", "partial_json": ""})]
    );
    // The bytes on the wire (the stand-in writes a JSON object's keys sorted).
    let standin = start().await;
    queue(&standin, quirk).await;
    let mut body = request(TOOL_QUESTION, false);
    body["stream"] = json!(true);
    let text = standin
        .client
        .post(standin.url("/v1/messages"))
        .header("x-api-key", "test-key")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .expect("stand-in answers")
        .text()
        .await
        .expect("a body");
    let start = "\"input\":{},\"name\":\"list_free_slots\",\"type\":\"tool_use\"},\
        \"index\":1,\"type\":\"content_block_start\"}\n\n";
    let empty = "event: content_block_delta\ndata: {\"delta\":{\"partial_json\":\"\",\
        \"type\":\"input_json_delta\"},\"index\":1,\"type\":\"content_block_delta\"}\n\n\
        event: content_block_stop\ndata: {\"index\":1,\"type\":\"content_block_stop\"}\n\n";
    assert!(text.contains(start), "{text}");
    assert!(text.contains(empty), "{text}");
}

#[tokio::test]
async fn a_max_tokens_stop_cuts_the_tool_input_mid_json_once() {
    let quirk = Quirk::MaxTokensInToolInput;
    let body = request(TOOL_QUESTION, false);
    let routes = on_every_route(quirk, &body).await;
    routes.agree(quirk);
    // `{"day":"2026-12-03"}` cut after ten characters: no field is whole.
    assert_eq!(routes.content()[1]["input"], json!({}));
    assert_eq!(routes.json["stop_reason"], "max_tokens");
    assert_eq!(routes.json["usage"]["output_tokens"], 2048);
    assert_eq!(routes.streamed_text(1), r#"{"day":"20"#);
    assert_eq!(routes.message_delta()["delta"]["stop_reason"], "max_tokens");
    // Applied once: the same call again gets the whole answer.
    let standin = start().await;
    queue(&standin, quirk).await;
    assert_eq!(
        standin.messages(&body).await.body["stop_reason"],
        "max_tokens"
    );
    let again = standin.messages(&body).await.body;
    assert_eq!(again["stop_reason"], "tool_use");
    assert_eq!(again["content"][1]["input"], json!({"day": "2026-12-03"}));
}

#[tokio::test]
async fn a_max_tokens_stop_cuts_a_text_half_way() {
    let quirk = Quirk::MaxTokensInText;
    let routes = on_every_route(quirk, &request("hello", false)).await;
    routes.agree(quirk);
    let text = routes.content()[0]["text"].as_str().unwrap();
    assert!(text.starts_with("[offline stand-in] You said"), "{text}");
    assert_eq!(routes.content().as_array().unwrap().len(), 1);
    assert_eq!(routes.json["stop_reason"], "max_tokens");
    assert_eq!(routes.streamed_text(0), text);
}

#[tokio::test]
async fn a_refusal_comes_after_some_text_was_shown() {
    let quirk = Quirk::RefusalAfterText;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    assert_eq!(
        routes.content(),
        &json!([{"type": "text", "text": "[offline stand-i"}])
    );
    assert_eq!(routes.json["stop_reason"], "refusal");
    let details = refusal_details();
    assert_eq!(
        details,
        json!({"type": "refusal", "category": null, "explanation": null})
    );
    assert_eq!(routes.json["stop_details"], details);
    assert_eq!(routes.streamed_text(0), "[offline stand-i");
    assert_eq!(routes.message_delta()["delta"]["stop_details"], details);
}

#[tokio::test]
async fn thinking_comes_signed_and_redacted() {
    let quirk = Quirk::ThinkingBlocks;
    let routes = on_every_route(quirk, &request("hello", true)).await;
    routes.agree(quirk);
    let kinds: Vec<&Value> = routes
        .content()
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["type"])
        .collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "text"]);
    let signature = routes.deltas(0).last().map(|d| d["signature"].clone());
    assert_eq!(signature.as_ref(), Some(&routes.content()[0]["signature"]));
    assert_eq!(routes.start(1), &routes.content()[1], "whole in its start");
}

#[tokio::test]
async fn every_text_block_carries_null_citations() {
    let quirk = Quirk::NullCitations;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    assert_eq!(
        routes.content()[0],
        json!({"type": "text", "text": "[offline stand-in] Let me check.", "citations": null})
    );
    assert_eq!(
        routes.start(0),
        &json!({"type": "text", "text": "", "citations": null})
    );
    assert!(routes.content()[1].get("citations").is_none());
}

#[tokio::test]
async fn unknown_fields_come_on_the_message_its_usage_its_blocks_and_the_events() {
    let quirk = Quirk::UnknownFields;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    let body = &routes.json;
    assert_eq!(
        (&body["container"], &body["stop_details"]),
        (&Value::Null, &Value::Null)
    );
    assert!(body.as_object().unwrap().contains_key("container"));
    assert_eq!(body["usage"]["service_tier"], "standard");
    assert_eq!(body["usage"]["server_tool_use"]["web_search_requests"], 0);
    assert_eq!(body["content"][1]["caller"], json!({"type": "direct"}));
    assert_eq!(routes.start(1)["caller"], json!({"type": "direct"}));
    assert_eq!(
        routes.sse[0]["message"]["usage"]["service_tier"],
        "standard"
    );
    let usage = &routes.message_delta()["usage"];
    assert_eq!(usage["input_tokens"], body["usage"]["input_tokens"]);
    assert_eq!(usage["cache_creation"], body["usage"]["cache_creation"]);
}

#[tokio::test]
async fn pings_come_between_content_events_of_a_stream_only() {
    let quirk = Quirk::PingMidStream;
    let routes = on_every_route(quirk, &request(TOOL_QUESTION, false)).await;
    routes.agree(quirk);
    let pings = routes.sse.iter().filter(|e| e["type"] == "ping").count();
    assert!(pings > 2, "{pings} pings");
    for (position, event) in routes.sse.iter().enumerate().skip(3) {
        if event["type"] == "ping" {
            let around = [&routes.sse[position - 1], &routes.sse[position + 1]];
            assert!(
                around
                    .iter()
                    .all(|e| e["type"].as_str().unwrap().starts_with("content_block_"))
            );
        }
    }
}

#[tokio::test]
async fn an_overload_error_ends_a_stream_after_its_first_delta() {
    let quirk = Quirk::ErrorEventMidStream;
    let routes = on_every_route(quirk, &request("hello", false)).await;
    routes.agree(quirk);
    let kinds: Vec<&Value> = routes.sse.iter().map(|e| &e["type"]).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(
        routes.sse[4]["error"],
        json!({"type": "overloaded_error", "message": "Overloaded"})
    );
    // Bedrock ends the stream with its exception for a 529.
    assert!(
        matches!(
            routes.exception,
            Some(ResponseStreamError::ServiceUnavailableException(_))
        ),
        "{:?}",
        routes.exception
    );
    assert_eq!(routes.json["stop_reason"], "end_turn");
}
