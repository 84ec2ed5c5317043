//! The ask function end to end: the real `ask` binary as Lambda runs it, DynamoDB on
//! moto, and the offline stand-in as a strict model double over HTTP.

use aws_sdk_dynamodb::types::AttributeValue;
use degrau_tests::lambda::{LocalLambda, binary};
use degrau_tests::stack::{function_env, message_event};
use degrau_tests::{HttpReply, StandIn, api_event, moto, unique};
use serde_json::{Value, json};

use crate::helpers;

struct Stack {
    lambda: LocalLambda,
    /// Serialises the function's DynamoDB calls: moto's transactions are not safe
    /// under concurrency (DynamoDB's are).
    _serial: degrau_tests::serial::OneAtATime,
    standin: StandIn,
    dynamodb: aws_sdk_dynamodb::Client,
    table: String,
}

async fn stack_with(instances: usize, extra: &[(&str, &str)]) -> Stack {
    let dynamodb = moto::dynamodb_client().await;
    let table = moto::fresh_table(&dynamodb).await;
    let standin = StandIn::start();
    let serial = degrau_tests::serial::one_at_a_time(&moto::endpoint()).await;
    let mut env = function_env(&table, None, &moto::endpoint(), &standin.url);
    env.extend(helpers::env(&[("AWS_ENDPOINT_URL_DYNAMODB", serial.url())]));
    env.extend(helpers::env(extra));
    let lambda = LocalLambda::start_instances(binary("ask"), env, instances).await;
    Stack {
        lambda,
        _serial: serial,
        standin,
        dynamodb,
        table,
    }
}

async fn stack() -> Stack {
    stack_with(1, &[]).await
}

impl Stack {
    async fn call(
        &self,
        method: &str,
        path: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> HttpReply {
        self.invoke(api_event(method, path, query, headers, body, None))
            .await
    }

    async fn invoke(&self, event: Value) -> HttpReply {
        let response = self
            .lambda
            .invoke(event.clone())
            .await
            .expect("the function answered");
        HttpReply::from_api(&event, &response)
    }

    async fn post(&self, tenant: &str, contact: &str, text: &str) -> HttpReply {
        self.invoke(message_event(tenant, contact, text)).await
    }

    /// Every item in the table, as (pk, sk).
    async fn items(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(&self.table)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for item in page.items() {
                let text = |name: &str| {
                    item.get(name)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                out.push((text("pk"), text("sk")));
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        out.sort();
        out
    }

    /// The message items of a contact, as (session, seq, role).
    async fn messages(&self, tenant: &str, contact: &str) -> Vec<(u64, u64, String)> {
        let page = self
            .dynamodb
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :s)")
            .expression_attribute_values(
                ":pk",
                AttributeValue::S(format!("T#{tenant}#C#{contact}")),
            )
            .expression_attribute_values(":s", AttributeValue::S("S#".into()))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        page.items()
            .iter()
            .map(|item| {
                let number = |name: &str| {
                    item.get(name)
                        .and_then(|v| v.as_n().ok())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0)
                };
                let role = item
                    .get("role")
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default();
                (number("session"), number("seq"), role)
            })
            .collect()
    }
}

fn request_texts(request: &Value) -> String {
    request.to_string()
}

#[tokio::test]
async fn the_rebuilt_conversation_continues_where_it_stopped() {
    let mut stack = stack().await;
    let first = stack
        .post("acme", "ana", "My name is Ana and my code is ZX-4471")
        .await;
    assert_eq!(first.status, 200, "{}", first.raw);
    assert!(
        first.body["reply"]["text"]
            .as_str()
            .unwrap()
            .starts_with("[offline stand-in]")
    );
    let first_reply = first.body["reply"]["text"].as_str().unwrap().to_owned();

    // A new process: nothing survives but what DynamoDB holds.
    stack.lambda.spawn().await;
    let second = stack.post("acme", "ana", "What did I say first?").await;
    assert_eq!(second.status, 200, "{}", second.raw);
    assert_eq!(second.body["round"], json!({"first_seq": 3, "last_seq": 4}));
    assert!(
        second.body["reply"]["text"]
            .as_str()
            .unwrap()
            .contains("ZX-4471"),
        "{}",
        second.raw
    );

    let requests = stack.standin.requests().await;
    let last = request_texts(requests.last().unwrap());
    assert!(last.contains("My name is Ana and my code is ZX-4471"));
    assert!(last.contains(&first_reply.replace('"', "\\\"")));
    assert!(last.contains("What did I say first?"));
    assert_eq!(stack.messages("acme", "ana").await.len(), 4);
}

#[tokio::test]
async fn a_tool_round_with_a_long_result_is_stored_whole() {
    let stack = stack().await;
    let reply = stack
        .post("acme", "bob", "Any free slots on 2026-12-03?")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.body["round"], json!({"first_seq": 1, "last_seq": 4}));
    let roles: Vec<String> = stack
        .messages("acme", "bob")
        .await
        .into_iter()
        .map(|m| m.2)
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    let transcript = stack
        .call(
            "GET",
            "/v1/contacts/bob/messages",
            "",
            &[("x-tenant-id", "acme")],
            None,
        )
        .await;
    let result = &transcript.body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert!(result["content"].as_str().unwrap().len() > 1500);
}

#[tokio::test]
async fn concurrent_asks_on_one_contact_never_lose_duplicate_or_interleave_a_round() {
    let stack = stack_with(2, &[]).await;
    let mut answered = 0;
    let mut conflicts = 0;
    for round in 0..8 {
        let (first, second) = (
            format!("first message {round}"),
            format!("second message {round}"),
        );
        let (a, b) = tokio::join!(
            stack.post("acme", "carla", &first),
            stack.post("acme", "carla", &second)
        );
        for reply in [a, b] {
            match reply.status {
                200 => answered += 1,
                409 => {
                    assert_eq!(reply.error_type(), Some("conflict"));
                    conflicts += 1;
                }
                other => panic!("unexpected {other}: {}", reply.raw),
            }
        }
    }
    assert_eq!(answered + conflicts, 16);
    eprintln!(
        "answered {answered}, conflicts {conflicts}, model calls {}",
        stack.standin.requests().await.len()
    );
    let messages = stack.messages("acme", "carla").await;
    assert_eq!(
        messages.len(),
        answered * 2,
        "every 200 is one stored round, nothing else"
    );
    for (i, (session, seq, role)) in messages.iter().enumerate() {
        assert_eq!((*session, *seq), (1, i as u64 + 1), "dense and ordered");
        assert_eq!(
            role,
            if i % 2 == 0 { "user" } else { "assistant" },
            "rounds never interleave"
        );
    }
}

#[tokio::test]
async fn an_idempotent_retry_returns_the_stored_response_without_calling_the_model() {
    let stack = stack().await;
    let headers = [
        ("content-type", "application/json"),
        ("x-tenant-id", "acme"),
        ("idempotency-key", "retry-1"),
    ];
    let body = json!({"text": "Book me"}).to_string();
    let first = stack
        .call(
            "POST",
            "/v1/contacts/dora/messages",
            "",
            &headers,
            Some(&body),
        )
        .await;
    let calls = stack.standin.requests().await.len();
    let again = stack
        .call(
            "POST",
            "/v1/contacts/dora/messages",
            "",
            &headers,
            Some(&body),
        )
        .await;
    assert_eq!((first.status, again.status), (200, 200));
    assert_eq!(first.raw, again.raw);
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .and_then(Value::as_str),
        Some("true")
    );
    assert_eq!(
        stack.standin.requests().await.len(),
        calls,
        "the replay called no model"
    );
    let other = json!({"text": "Something else"}).to_string();
    let mismatch = stack
        .call(
            "POST",
            "/v1/contacts/dora/messages",
            "",
            &headers,
            Some(&other),
        )
        .await;
    assert_eq!(
        (mismatch.status, mismatch.error_type()),
        (422, Some("idempotency_mismatch"))
    );
    let stored = first.body["round"]["last_seq"].as_u64().unwrap() as usize;
    assert_eq!(stack.messages("acme", "dora").await.len(), stored);
}

#[tokio::test]
async fn a_model_529_is_retried_and_the_round_succeeds() {
    let stack = stack().await;
    stack.standin.faults(json!([{"status": 529}])).await;
    let reply = stack.post("acme", "eva", "hello").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(stack.messages("acme", "eva").await.len(), 2);
}

#[tokio::test]
async fn a_model_400_or_a_timeout_is_a_clear_error_and_writes_nothing() {
    let stack = stack_with(1, &[("MODEL_TIMEOUT_SECONDS", "1")]).await;
    stack
        .standin
        .faults(json!([{"status": 400, "type": "invalid_request_error", "message": "messages.0: something the API disliked"}]))
        .await;
    let reply = stack.post("acme", "fred", "hello").await;
    assert_eq!(
        (reply.status, reply.error_type()),
        (502, Some("model_error")),
        "{}",
        reply.raw
    );
    assert!(
        !reply.raw.contains("disliked"),
        "API texts stay in the logs"
    );

    stack
        .standin
        .faults(json!([{"hang_ms": 3000}, {"hang_ms": 3000}, {"hang_ms": 3000}]))
        .await;
    let reply = stack.post("acme", "fred", "hello again").await;
    assert_eq!(
        (reply.status, reply.error_type()),
        (504, Some("model_timeout")),
        "{}",
        reply.raw
    );
    // Nothing of the conversation; each attempt spent one of the tenant's rounds
    // (a model call was made), which is the one count kept.
    let items = stack.items().await;
    assert_eq!(
        items
            .iter()
            .filter(|(pk, sk)| !(pk == "T#acme" && sk.starts_with("QUOTA#rounds#")))
            .count(),
        0,
        "nothing written: {items:?}"
    );
}

#[tokio::test]
async fn bad_input_gets_the_documented_4xx_and_leaves_storage_unchanged() {
    let stack = stack().await;
    assert_eq!(
        stack.post("acme", "gil", "a first message").await.status,
        200
    );
    let before = stack.items().await;
    let json_headers = [
        ("content-type", "application/json"),
        ("x-tenant-id", "acme"),
    ];
    let too_long = json!({"text": "x".repeat(8_001)}).to_string();
    type Case<'a> = (
        &'a str,
        &'a str,
        Vec<(&'a str, &'a str)>,
        Option<&'a str>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "POST",
            "/v1/contacts/gil/messages",
            json_headers.to_vec(),
            Some("{\"text\": "),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/contacts/gil/messages",
            json_headers.to_vec(),
            Some("{\"text\": \"\"}"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/contacts/gil/messages",
            json_headers.to_vec(),
            Some(&too_long),
            413,
            "too_large",
        ),
        (
            "POST",
            "/v1/contacts/g%20il/messages",
            json_headers.to_vec(),
            Some("{\"text\": \"hi\"}"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/contacts/gil/messages",
            vec![("content-type", "application/json")],
            Some("{\"text\": \"hi\"}"),
            401,
            "unauthenticated",
        ),
        (
            "GET",
            "/v1/nothing/here",
            json_headers.to_vec(),
            None,
            404,
            "not_found",
        ),
        (
            "GET",
            "/v1/contacts/gil/messages",
            json_headers.to_vec(),
            None,
            0,
            "",
        ),
    ];
    for (method, path, headers, body, status, kind) in cases {
        let reply = stack.call(method, path, "", &headers, body).await;
        if status == 0 {
            assert_eq!(reply.status, 200);
            continue;
        }
        assert_eq!(
            (reply.status, reply.error_type()),
            (status, Some(kind)),
            "{method} {path}: {}",
            reply.raw
        );
    }
    let reply = stack
        .call(
            "GET",
            "/v1/contacts/gil/messages",
            "limit=0",
            &json_headers,
            None,
        )
        .await;
    assert_eq!(
        (reply.status, reply.error_type()),
        (400, Some("invalid_request"))
    );
    assert_eq!(stack.items().await, before);
}

#[tokio::test]
async fn tenant_b_cannot_see_or_erase_tenant_a_and_delete_leaves_nothing() {
    let stack = stack().await;
    assert_eq!(
        stack.post("tenant-a", "hana", "secret plans").await.status,
        200
    );
    let seen = stack
        .call(
            "GET",
            "/v1/contacts/hana/messages",
            "",
            &[("x-tenant-id", "tenant-b")],
            None,
        )
        .await;
    assert_eq!(seen.status, 404);
    let memory = stack
        .call(
            "GET",
            "/v1/contacts/hana/memory",
            "",
            &[("x-tenant-id", "tenant-b")],
            None,
        )
        .await;
    assert_eq!(memory.status, 404);
    let erased = stack
        .call(
            "DELETE",
            "/v1/contacts/hana",
            "",
            &[("x-tenant-id", "tenant-b")],
            None,
        )
        .await;
    assert_eq!(
        (erased.status, erased.body["items"].as_u64()),
        (200, Some(0))
    );
    assert_eq!(stack.messages("tenant-a", "hana").await.len(), 2);

    let erased = stack
        .call(
            "DELETE",
            "/v1/contacts/hana",
            "",
            &[("x-tenant-id", "tenant-a")],
            None,
        )
        .await;
    assert_eq!(erased.status, 200);
    assert!(erased.body["items"].as_u64().unwrap() >= 3);
    assert!(
        stack
            .items()
            .await
            .iter()
            .all(|(pk, _)| !pk.contains("#C#hana")),
        "{:?}",
        stack.items().await
    );
    let again = stack
        .call(
            "DELETE",
            "/v1/contacts/hana",
            "",
            &[("x-tenant-id", "tenant-a")],
            None,
        )
        .await;
    assert_eq!((again.status, again.body["items"].as_u64()), (200, Some(0)));
}

#[tokio::test]
async fn the_memory_view_shows_the_session_and_unique_names_do_not_collide() {
    let stack = stack().await;
    let contact = unique("c");
    assert_eq!(stack.post("acme", &contact, "hi").await.status, 200);
    let memory = stack
        .call(
            "GET",
            &format!("/v1/contacts/{contact}/memory"),
            "",
            &[("x-tenant-id", "acme")],
            None,
        )
        .await;
    assert_eq!(memory.status, 200);
    assert_eq!(memory.body["session"]["number"], 1);
    assert_eq!(memory.body["session"]["last_seq"], 2);
    assert!(
        memory.body["session"]["last_context_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(memory.body["facts"], json!([]));
}

/// The `ColdStart` EMF lines the function printed, once at least `expected` are
/// there (its output is read as it comes) and a moment has passed for any more.
async fn cold_starts(lambda: &LocalLambda, expected: usize) -> usize {
    let count = || {
        lambda
            .output()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|event| event["ColdStart"] == json!(1.0) && event["Function"] == "ask")
            .count()
    };
    for _ in 0..100 {
        if count() >= expected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    count()
}

#[tokio::test]
async fn an_instance_counts_its_first_invocation_as_a_cold_start_and_no_other() {
    let mut stack = stack().await;
    // A contact with no conversation: the function's own 404, an invocation all the same.
    let memory = async |stack: &Stack| {
        let reply = stack
            .call(
                "GET",
                "/v1/contacts/ana/memory",
                "",
                &[("x-tenant-id", "acme")],
                None,
            )
            .await;
        assert_eq!(reply.error_type(), Some("not_found"), "{}", reply.raw);
    };
    for _ in 0..3 {
        memory(&stack).await;
    }
    assert_eq!(cold_starts(&stack.lambda, 1).await, 1);
    // A new instance (a new process) is a cold start of its own.
    stack.lambda.spawn().await;
    memory(&stack).await;
    memory(&stack).await;
    assert_eq!(cold_starts(&stack.lambda, 2).await, 2);
}

#[tokio::test]
async fn one_round_prints_emf_metrics_and_no_message_text_or_contact() {
    let stack = stack().await;
    let reply = stack
        .post("acme", "+5511987654321", "my secret plan is ZQX-SECRET")
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    // The runtime posts the response before the process flushes every line: wait a little.
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = stack.lambda.output();
        if lines.iter().any(|l| l.contains("RoundsCommitted")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let event: Value = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("RoundsCommitted").is_some())
        .expect("an EMF line for the round");
    let directive = &event["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(directive["Namespace"], "degrau");
    assert_eq!(directive["Dimensions"], json!([["Function"]]));
    assert_eq!(event["Function"], "ask");
    let units: std::collections::HashMap<String, String> = directive["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["Name"].as_str().unwrap().to_owned(),
                m["Unit"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    for (name, unit) in [
        ("RoundsCommitted", "Count"),
        ("ContextTokens", "Count"),
        ("CacheReadRatio", "None"),
        ("InputTokens", "Count"),
        ("CacheReadInputTokens", "Count"),
        ("CacheCreationInputTokens", "Count"),
        ("OutputTokens", "Count"),
        ("ModelCalls", "Count"),
        ("ToolCalls", "Count"),
        ("ModelLatency", "Milliseconds"),
        ("CompactionQueued", "Count"),
    ] {
        assert_eq!(units.get(name).map(String::as_str), Some(unit), "{name}");
        assert!(event[name].is_number(), "{name} has a value");
    }
    assert_eq!(
        event["ContextTokens"].as_f64(),
        reply.body["usage"]["context_tokens"].as_f64()
    );
    for line in &lines {
        assert!(!line.contains("ZQX-SECRET"), "message text leaked: {line}");
        assert!(!line.contains("5511987654321"), "contact leaked: {line}");
        assert!(!line.contains("offline-test-key"), "key leaked: {line}");
    }
}
