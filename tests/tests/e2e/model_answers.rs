//! A real model's answers end to end (issue 38): every quirk of the stand-in's
//! corpus (`degrau_standin::quirks`), one at a time, through the real `ask` and
//! `ask-stream` binaries on moto, the tenant's booking tools behind the example
//! tool server, which counts every call it receives. For each: the documented
//! outcome (200, or the documented error with nothing stored), the round stored
//! once, the webhook called exactly once per `tool_use` the model emitted (none
//! for a call the output limit cut), and the contact's next message answered.
//! The whole module runs again under Bedrock (`./dev.sh test`'s second pass).

use std::collections::BTreeMap;

use degrau::tenant::{TenantConfig, ThinkingBudget};
use degrau_tests::lambda::LocalLambda;
use degrau_tests::stack::FullStack;
use degrau_tests::unique;
use serde_json::{Value, json};

use crate::streaming::{event, message, stream};
use crate::tool_server::{ToolServer, put_secret, webhook_tools};
use crate::webhooks::stack_with_pseudonym_key;

/// What a quirk's round must end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// 200, the round stored.
    Stored,
    /// 502 `model_refused`, nothing stored.
    Refused,
    /// 502 `model_error` (on a stream: its `error` event), nothing stored.
    Failed,
}

/// Every quirk of the corpus, with the outcome degrau documents for it
/// (`docs/model-answers.md`), whether it needs thinking on, and whether only a
/// stream can carry it.
const CASES: [(&str, Outcome, bool, bool); 13] = [
    ("empty_text_before_tool_use", Outcome::Stored, false, false),
    ("newlines_before_tool_use", Outcome::Stored, false, false),
    ("whitespace_final_text", Outcome::Stored, false, false),
    ("text_after_tool_use", Outcome::Stored, false, false),
    ("tool_use_empty_input", Outcome::Stored, false, false),
    ("max_tokens_in_tool_input", Outcome::Stored, false, false),
    ("max_tokens_in_text", Outcome::Stored, false, false),
    ("refusal_after_text", Outcome::Refused, false, false),
    ("thinking_blocks", Outcome::Stored, true, false),
    ("null_citations", Outcome::Stored, false, false),
    ("unknown_fields", Outcome::Stored, false, false),
    ("ping_mid_stream", Outcome::Stored, false, true),
    ("error_event_mid_stream", Outcome::Failed, false, true),
];

const SECRET: &str = "whsec_model_answers";

/// How a round is sent.
#[derive(Debug, Clone, Copy)]
enum Route {
    Json,
    Streamed,
}

/// The stack, its streaming function and the tool server the tenants' tools call.
struct World {
    stack: FullStack,
    streamed: LocalLambda,
    tools: ToolServer,
}

/// A round's end as the client saw it: the status and error type (a stream's
/// `error` event counts as its status), and the reply's text.
struct Seen {
    status: u64,
    error: Option<String>,
    text: String,
}

impl World {
    async fn start() -> World {
        let tools = ToolServer::start(SECRET);
        let (stack, _) = stack_with_pseudonym_key().await;
        let streamed = stack.start_function("ask-stream", &[]).await;
        World {
            stack,
            streamed,
            tools,
        }
    }

    /// A tenant of its own, its booking tools behind the tool server.
    async fn tenant(&self, name: &str, thinking: bool) -> String {
        let tenant = unique(name);
        let parameter = put_secret(&tenant, SECRET).await;
        let config = TenantConfig {
            thinking_budget_tokens: thinking
                .then(|| serde_json::from_value::<ThinkingBudget>(json!(2048)).unwrap()),
            ..webhook_tools(&format!("{}/", self.tools.url), &parameter, 5_000)
        };
        self.stack.configure(&tenant, &config).await;
        tenant
    }

    async fn send(&self, route: Route, tenant: &str, contact: &str, text: &str) -> Seen {
        match route {
            Route::Json => {
                let reply = self.stack.post(tenant, contact, text).await;
                Seen {
                    status: u64::from(reply.status),
                    error: reply.error_type().map(str::to_owned),
                    text: reply.body["reply"]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                }
            }
            Route::Streamed => {
                let reply =
                    stream(&self.streamed, event(tenant, contact, &message(text), &[])).await;
                let end = reply.end().expect("the stream ended with an event");
                match end.name.as_str() {
                    "done" => Seen {
                        status: 200,
                        error: None,
                        text: end.data["reply"]["text"].as_str().unwrap_or("").to_owned(),
                    },
                    _ => Seen {
                        status: end.data["status"].as_u64().unwrap_or(0),
                        error: end.data["error"]["type"].as_str().map(str::to_owned),
                        text: String::new(),
                    },
                }
            }
        }
    }
}

/// The `tool_use` ids of the model's answers in the stand-in's log that the
/// core may run: every one but those of an answer cut at `max_tokens`.
fn runnable_tool_uses(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter(|call| call["status"] == json!(200))
        .filter(|call| call["response"]["stop_reason"] != json!("max_tokens"))
        .flat_map(|call| {
            call["response"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|block| block["type"] == "tool_use")
        .filter_map(|block| block["id"].as_str().map(str::to_owned))
        .collect()
}

/// The quirks the stand-in applied, over its log.
fn applied(log: &[Value]) -> Vec<String> {
    log.iter()
        .flat_map(|call| call["quirks"].as_array().cloned().unwrap_or_default())
        .filter_map(|quirk| quirk.as_str().map(str::to_owned))
        .collect()
}

/// One quirk on one route: the round, then the contact's next message.
async fn play(world: &World, route: Route, case: (&str, Outcome, bool, bool), day: usize) {
    let (quirk, outcome, thinking, _) = case;
    let at = format!("{quirk} on {route:?}");
    let tenant = world.tenant("quirk", thinking).await;
    world.stack.standin.reset().await;
    world.stack.standin.quirks(json!({"next": [quirk]})).await;
    let calls_before = world.tools.calls().await.len();
    let seen = world
        .send(
            route,
            &tenant,
            "ana",
            &format!("please book 10:30 on 2026-12-{day:02}"),
        )
        .await;
    let log = world.stack.standin.requests().await;
    assert_eq!(applied(&log), [quirk], "{at}: the model sent the quirk");
    let stored = world.stack.stored_messages(&tenant, "ana").await;
    match outcome {
        Outcome::Stored => {
            assert_eq!((seen.status, seen.error.as_deref()), (200, None), "{at}");
            assert!(!seen.text.trim().is_empty(), "{at}: an answer to read");
            assert_eq!(stored.len(), 4, "{at}: the round stored once: {stored:?}");
        }
        Outcome::Refused | Outcome::Failed => {
            let kind = if outcome == Outcome::Refused {
                "model_refused"
            } else {
                "model_error"
            };
            assert_eq!(
                (seen.status, seen.error.as_deref()),
                (502, Some(kind)),
                "{at}"
            );
            assert!(stored.is_empty(), "{at}: nothing stored: {stored:?}");
        }
    }
    // The webhook: exactly once per tool call the model emitted and the core may run.
    let calls: Vec<Value> = world.tools.calls().await.split_off(calls_before);
    let mut per_call: BTreeMap<String, usize> = BTreeMap::new();
    for call in &calls {
        *per_call
            .entry(call["tool_use_id"].as_str().unwrap_or("").to_owned())
            .or_default() += 1;
    }
    let emitted = runnable_tool_uses(&log);
    let expected: BTreeMap<String, usize> = match outcome {
        Outcome::Stored => emitted.into_iter().map(|id| (id, 1)).collect(),
        _ => BTreeMap::new(),
    };
    assert_eq!(per_call, expected, "{at}: webhook calls by tool_use id");
    // The contact is not wedged.
    let next = world
        .send(route, &tenant, "ana", "thanks, that works")
        .await;
    assert_eq!(
        (next.status, next.error),
        (200, None),
        "{at}: the next message"
    );
    let after = world.stack.stored_messages(&tenant, "ana").await;
    assert_eq!(after.len(), stored.len() + 2, "{at}");
}

#[tokio::test]
async fn every_quirk_of_a_real_answer_ends_as_documented_on_the_json_route() {
    let world = World::start().await;
    for (day, case) in CASES.into_iter().enumerate() {
        if !case.3 {
            play(&world, Route::Json, case, day + 1).await;
        }
    }
}

#[tokio::test]
async fn every_quirk_of_a_real_answer_ends_as_documented_on_the_streamed_route() {
    let world = World::start().await;
    for (day, case) in CASES.into_iter().enumerate() {
        play(&world, Route::Streamed, case, day + 1).await;
    }
}
