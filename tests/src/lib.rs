//! Helpers shared by the integration tests: moto clients and fresh tables, the
//! offline model stand-in as a process, the Lambda Runtime API that runs the real
//! function binaries, and API Gateway HTTP API (v2) events. The tests themselves are
//! one binary, `tests/e2e/` (its `main.rs` lists them). (`docs/DESIGN.md` names the
//! tests that hold each invariant.)
//!
//! # Layout
//!
//! * This file: [`StandIn`] (the stand-in as a process), [`api_event`] and
//!   [`HttpReply`].
//! * [`openapi`]: every answer of `ask` checked against `docs/openapi.json`.
//! * [`moto`]: SDK clients for moto, fresh tables and queues with degrau's schema.
//! * [`lambda`]: a local Lambda Runtime API that runs the real `ask` and
//!   `compactor` binaries, kills and restarts them.
//! * [`serial`]: a forwarder that passes DynamoDB calls to moto one at a time
//!   (moto's transactions are not safe under concurrency).
//! * [`stack`]: the whole local stack ([`stack::FullStack`]) and the pieces any
//!   stack needs, which the benchmarks use too.
//! * [`soak`]: the soak run (its binary is `src/bin/soak.rs`).

pub mod lambda;
pub mod moto;
pub mod openapi;
pub mod serial;
pub mod soak;
pub mod stack;
pub mod streamed;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// The offline model stand-in, running as its own process on an ephemeral port.
pub struct StandIn {
    child: Child,
    /// Its base URL (`ANTHROPIC_BASE_URL`).
    pub url: String,
    http: reqwest::Client,
}

impl StandIn {
    /// Starts `degrau-standin --port 0` and waits for its "listening on" line.
    pub fn start() -> StandIn {
        Self::start_with(&[])
    }

    /// Like [`StandIn::start`] with extra arguments (`--context-limit N`, ...).
    pub fn start_with(args: &[&str]) -> StandIn {
        let mut child = Command::new(lambda::binary("degrau-standin"))
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the stand-in");
        let stdout = child.stdout.take().expect("stand-in stdout");
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        while !line.contains("listening on") {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                panic!("the stand-in exited before listening");
            }
        }
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("a URL in the stand-in's first line")
            .trim_end_matches('/')
            .to_owned();
        // Keep draining stdout so the stand-in never blocks on a full pipe.
        std::thread::spawn(move || for _ in reader.lines() {});
        StandIn {
            child,
            url,
            http: reqwest::Client::new(),
        }
    }

    async fn control(&self, path: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}/stand-in/{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("stand-in control call");
        response.json().await.unwrap_or(Value::Null)
    }

    /// Moves the cache clock of a stand-in started with `--clock manual` by
    /// `seconds` (time passing between two messages).
    pub async fn advance_clock(&self, seconds: u64) {
        let answer = self
            .control("clock", serde_json::json!({ "advance_seconds": seconds }))
            .await;
        assert!(
            answer.get("now_ms").is_some(),
            "the clock did not move: {answer}"
        );
    }

    /// Queues faults for the next model calls (see the stand-in's README section).
    pub async fn faults(&self, faults: Value) {
        self.control("faults", faults).await;
    }

    /// Sets the pause between the events of a streamed answer (`delta_ms`).
    pub async fn pace(&self, delta_ms: u64) {
        self.control("stream", json!({ "delta_ms": delta_ms }))
            .await;
    }

    /// Queues scripted answers for the next model calls.
    pub async fn script(&self, answers: Value) {
        self.control("script", answers).await;
    }

    /// Queues quirks of a real model's answers (`{"next": [...]}`) or sets the
    /// random mode (`{"random": {"seed", "per_mille"}}`); see the stand-in's
    /// `quirks` module. Panics when the stand-in refuses the body.
    pub async fn quirks(&self, body: Value) {
        let answer = self.control("quirks", body).await;
        assert!(answer.get("queued").is_some(), "quirks refused: {answer}");
    }

    /// Every request the stand-in received, in order, with usage and status.
    pub async fn requests(&self) -> Vec<Value> {
        let response = self
            .http
            .get(format!("{}/stand-in/requests", self.url))
            .send()
            .await
            .expect("stand-in requests");
        match response.json::<Value>().await.expect("requests JSON") {
            Value::Array(items) => items,
            other => other["requests"].as_array().cloned().unwrap_or_default(),
        }
    }

    /// Clears faults, script, request log and cache.
    pub async fn reset(&self) {
        self.control("reset", json!({})).await;
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An API Gateway HTTP API (payload v2) event, as the JWT authorizer would pass it
/// when `claims` is given.
pub fn api_event(
    method: &str,
    path: &str,
    query: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    claims: Option<Value>,
) -> Value {
    let headers: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), Value::String((*v).to_owned())))
        .collect();
    let query_parameters: serde_json::Map<String, Value> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
        .collect();
    let mut context = json!({
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": "localhost",
        "domainPrefix": "localhost",
        "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "degrau-tests"},
        "requestId": "test",
        "routeKey": "$default",
        "stage": "$default",
        "time": "30/Nov/2026:00:00:00 +0000",
        "timeEpoch": 0
    });
    if let Some(claims) = claims {
        context["authorizer"] = json!({"jwt": {"claims": claims, "scopes": null}});
    }
    let mut event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": false
    });
    if !query_parameters.is_empty() {
        event["queryStringParameters"] = Value::Object(query_parameters);
    }
    if let Some(body) = body {
        event["body"] = Value::String(body.to_owned());
    }
    event
}

/// An HTTP response from the function: status and parsed JSON body.
#[derive(Debug, Clone)]
pub struct HttpReply {
    /// Status code.
    pub status: u16,
    /// Response headers (lower-case names).
    pub headers: serde_json::Map<String, Value>,
    /// The body parsed as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// The raw body text.
    pub raw: String,
}

impl HttpReply {
    /// Reads a Lambda proxy response.
    pub fn from_lambda(response: &Value) -> HttpReply {
        let raw = response["body"].as_str().unwrap_or_default().to_owned();
        HttpReply {
            status: response["statusCode"].as_u64().map_or(0, |s| s as u16),
            headers: response["headers"].as_object().cloned().unwrap_or_default(),
            body: serde_json::from_str(&raw).unwrap_or(Value::Null),
            raw,
        }
    }

    /// Reads `ask`'s answer to the API Gateway `event`, after checking it against
    /// `docs/openapi.json` ([`openapi::check`]): a test that receives an answer the
    /// document does not describe fails there.
    pub fn from_api(event: &Value, response: &Value) -> HttpReply {
        let reply = HttpReply::from_lambda(response);
        let method = event["requestContext"]["http"]["method"]
            .as_str()
            .unwrap_or_default();
        let path = event["rawPath"].as_str().unwrap_or_default();
        openapi::check(method, path, reply.status, &reply.raw);
        reply
    }

    /// The error envelope's type, if this is an error.
    pub fn error_type(&self) -> Option<&str> {
        self.body["error"]["type"].as_str()
    }
}

/// A function's environment: `base` and the `extra` pairs after it.
pub fn with_env(base: &[(String, String)], extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = base.to_vec();
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

/// A unique suffix for names in one test run.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:016x}", fastrand::u64(..))
}
