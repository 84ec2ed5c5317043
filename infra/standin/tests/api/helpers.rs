//! Spawning a stand-in per test and building requests the way degrau does.

use degrau::domain::{Message, StoredMessage};
use degrau::plan::request::{RequestParts, ToolDef, build_request};
use degrau_standin::parse::parse_request;
use degrau_standin::prompt::Prompt;
use degrau_standin::{Config, Running, StandIn, spawn};
use serde_json::{Value, json};

/// A stand-in of its own and a client.
pub struct TestStandIn {
    pub running: Running,
    pub client: reqwest::Client,
}

pub async fn start() -> TestStandIn {
    start_with(Config::default()).await
}

pub async fn start_with(config: Config) -> TestStandIn {
    let running = spawn(StandIn::new(config)).await.expect("stand-in starts");
    TestStandIn {
        running,
        client: reqwest::Client::new(),
    }
}

/// Status, headers and JSON body of an answer.
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl TestStandIn {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.running.url())
    }

    /// `POST /v1/messages` with the headers degrau's client sends.
    pub async fn messages(&self, body: &Value) -> Reply {
        let response = self
            .client
            .post(self.url("/v1/messages"))
            .header("x-api-key", "test-key")
            .header("anthropic-version", "2023-06-01")
            .json(body)
            .send()
            .await
            .expect("stand-in answers");
        reply(response).await
    }

    /// `POST` to a control endpoint.
    pub async fn control(&self, path: &str, body: &Value) -> Reply {
        let response = self
            .client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .expect("stand-in answers");
        reply(response).await
    }

    pub async fn logged(&self) -> Vec<Value> {
        let response = self
            .client
            .get(self.url("/stand-in/requests"))
            .send()
            .await
            .expect("stand-in answers");
        let body: Value = response.json().await.expect("json log");
        body.as_array().expect("a list").clone()
    }
}

pub async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.json().await.expect("a JSON body");
    Reply {
        status,
        headers,
        body,
    }
}

/// The text of the first text block of an answer.
pub fn first_text(body: &Value) -> String {
    body["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|b| b["type"] == "text"))
        .and_then(|b| b["text"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub fn demo_tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "list_free_slots".into(),
            description: "Lists the free slots of a day".into(),
            input_schema: json!({"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}),
        },
        ToolDef {
            name: "book_slot".into(),
            description: "Books a slot".into(),
            input_schema: json!({"type": "object", "properties": {
                "day": {"type": "string"}, "time": {"type": "string"}, "service": {"type": "string"}}}),
        },
    ]
}

/// Instructions long enough (about 1,500 tokens) for the prefix to be cacheable.
pub fn long_instructions() -> String {
    "You schedule haircuts for a barber shop; be brief and kind. ".repeat(100)
}

/// A window stored from sequence number 1.
pub fn stored(window: &[Message]) -> Vec<StoredMessage> {
    degrau::testing::stored_from(1, window.iter().cloned())
}

/// The request degrau builds for a window and a round.
pub fn degrau_request(
    instructions: &str,
    tools: &[ToolDef],
    summary: Option<&str>,
    window: &[Message],
    round: &[Message],
) -> Value {
    let window = stored(window);
    let request = build_request(&RequestParts {
        model: "claude-sonnet-5",
        max_tokens: 1024,
        thinking: None,
        tools,
        instructions,
        facts: &[],
        summary,
        last_session: None,
        window: &window,
        round,
        lifetimes: degrau::plan::request::Lifetimes::FiveMinutes,
    })
    .expect("a valid request");
    serde_json::to_value(&request).expect("serialises")
}

/// The prompt's tokens as the stand-in counts them.
pub fn prompt_tokens(body: &Value) -> u64 {
    let parsed = parse_request(body.to_string().as_bytes()).expect("valid");
    Prompt::flatten(&parsed.request, &parsed.prelude).total_tokens()
}

/// A minimal valid body with the given messages.
pub fn body_with(messages: Value) -> Value {
    json!({
        "model": "claude-sonnet-5",
        "max_tokens": 256,
        "tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "be brief"}],
        "messages": messages,
    })
}
