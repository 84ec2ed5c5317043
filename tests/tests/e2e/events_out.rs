//! Events out end to end: the real `ask` binary publishes a tenant's events to an
//! SQS FIFO queue on moto, the real `events-out` binary delivers them (the bridge
//! playing the event source mapping) to a receiver here, which refuses its first
//! call with a 500. Each event arrives once (deduped by its id), signed (checked
//! with the test's own HMAC-SHA256), in order per contact, in the shape the
//! OpenAPI document's `x-degrau-events` gives; a tenant without an events webhook
//! publishes nothing.

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use degrau_bridge::QueueConfig;
use degrau_tests::lambda::LocalLambda;
use degrau_tests::moto;
use degrau_tests::stack::{FullStack, LocalInvoke, StackOptions, drain, jobs_queues};
use degrau_tests::{HttpReply, unique};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::tool_server::{put_parameter, put_secret};
use crate::whatsapp::hmac_sha256;

const SCOPES: &str = "memory:read memory:write";
const SIGNING_SECRET: &str = "whsec_events_e2e";

/// What the receiver was sent: each request's headers and raw body, and the
/// status it answered.
type Received = Arc<Mutex<Vec<(HeaderMap, String, u16)>>>;

/// A receiver on loopback answering 500 to its first request and 200 after.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let seen = received.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let seen = seen.clone();
        async move {
            let mut seen = seen.lock().unwrap();
            let status = if seen.is_empty() { 500 } else { 200 };
            seen.push((headers, body, status));
            StatusCode::from_u16(status).unwrap()
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// The pseudonym by the test's own HMAC: the tenant's key from the deployment's
/// secret, then the receiver (its secret's parameter) and the contact.
fn pseudonym(deployment: &str, tenant: &str, receiver: &str, contact: &str) -> String {
    let key = hmac_sha256(
        deployment.as_bytes(),
        format!("degrau pseudonym v1\n{tenant}").as_bytes(),
    );
    let mut hex = hex::encode(hmac_sha256(
        &key,
        format!("{receiver}\n{contact}").as_bytes(),
    ));
    hex.truncate(32);
    hex
}

/// Whether `header` (`t=..,v1=..`) signs `body` under `secret`.
fn signed(header: &str, body: &str, secret: &str) -> bool {
    let Some((t, v1)) = header
        .strip_prefix("t=")
        .and_then(|rest| rest.split_once(",v1="))
    else {
        return false;
    };
    let expected = hmac_sha256(secret.as_bytes(), format!("{t}.{body}").as_bytes());
    hex::encode(expected) == v1
}

async fn call(
    stack: &FullStack,
    method: &str,
    path: &str,
    tenant: &str,
    body: Option<Value>,
) -> HttpReply {
    let body = body.map(|b| b.to_string());
    let headers = [("x-scopes", SCOPES), ("x-operator", "ops-1")];
    let reply = stack
        .call_with(method, path, "", tenant, &headers, body.as_deref())
        .await;
    assert_eq!(reply.status, 200, "{method} {path}: {}", reply.raw);
    reply
}

/// A stack whose `ask` publishes to its own events queue (a DLQ after 3
/// receives), with its own pseudonym secret; and the `events-out` function and
/// its queue's bridge settings.
async fn stack_with_events() -> (FullStack, LocalLambda, QueueConfig, String, String) {
    let sqs = aws_sdk_sqs::Client::new(&moto::sdk_config().await);
    let (events_url, dlq_url) = jobs_queues(&sqs, 3).await;
    let key_name = format!("/degrau-test/{}/pseudonym-key", moto::unique_name("key"));
    let deployment = moto::unique_name("pseudonym-secret");
    put_parameter(&key_name, &deployment).await;
    let stack = FullStack::start_with(&StackOptions {
        env: vec![
            ("PSEUDONYM_KEY_PARAMETER".to_owned(), key_name),
            ("EVENTS_QUEUE_URL".to_owned(), events_url.clone()),
        ],
        ..StackOptions::default()
    })
    .await;
    let events_out = stack.start_function("events-out", &[]).await;
    let mut queue = QueueConfig::discover(&stack.sqs, &events_url)
        .await
        .unwrap();
    queue.wait_time_seconds = 0;
    queue.retry_visibility_seconds = Some(0);
    (stack, events_out, queue, dlq_url, deployment)
}

#[tokio::test]
async fn each_event_is_delivered_once_signed_in_order_per_contact_and_retried_after_a_500() {
    let (stack, events_out, queue, dlq_url, deployment) = stack_with_events().await;
    let (url, received) = receiver().await;
    let tenant = unique("shop");
    let parameter = put_secret(&tenant, SIGNING_SECRET).await;
    let config = json!({"events_webhook": {"url": url, "secret_parameter": parameter}});
    stack
        .configure(&tenant, &serde_json::from_value(config).unwrap())
        .await;
    // A tenant without an events webhook, doing the same.
    let plain = unique("plain");

    for who in [&tenant, &plain] {
        for contact in ["ana", "bia"] {
            assert_eq!(stack.post(who, contact, "Oi").await.status, 200);
        }
        let fact = "/v1/contacts/ana/facts/name";
        call(&stack, "PUT", fact, who, Some(json!({"value": "Ana"}))).await;
        call(
            &stack,
            "PUT",
            "/v1/contacts/bia/facts/name",
            who,
            Some(json!({"value": "Bia"})),
        )
        .await;
        call(
            &stack,
            "PUT",
            fact,
            who,
            Some(json!({"value": "Ana Maria"})),
        )
        .await;
        call(&stack, "POST", "/v1/contacts/ana/handoff", who, None).await;
        call(&stack, "POST", "/v1/contacts/ana/handback", who, None).await;
        // A handback with no handoff in force ends nothing.
        call(&stack, "POST", "/v1/contacts/ana/handback", who, None).await;
        call(&stack, "DELETE", fact, who, None).await;
        call(&stack, "DELETE", "/v1/contacts/ana", who, None).await;
    }

    drain(&stack.sqs, &queue, &LocalInvoke(&events_out)).await;

    let received = received.lock().unwrap().clone();
    let document: Value = serde_json::from_str(ask::handler::OPENAPI).unwrap();
    let schemas = &document["x-degrau-events"]["events"];
    let mut taken: Vec<Value> = Vec::new();
    let mut refused = Vec::new();
    for (headers, body, status) in &received {
        let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
        assert!(
            signed(&header("degrau-signature"), body, SIGNING_SECRET),
            "every delivery is signed: {body}"
        );
        assert!(header("user-agent").ends_with("(events)"));
        let event: Value = serde_json::from_str(body).unwrap();
        assert_eq!(header("idempotency-key"), event["id"].as_str().unwrap());
        let schema = &schemas[event["type"].as_str().unwrap()];
        assert!(
            jsonschema::is_valid(schema, &event),
            "{event} fits {schema}"
        );
        assert_eq!(
            event["tenant"],
            tenant.as_str(),
            "the plain tenant sent nothing"
        );
        if *status == 500 {
            refused.push(event);
        } else if !taken.iter().any(|t| t["id"] == event["id"]) {
            taken.push(event);
        }
    }
    assert_eq!(refused.len(), 1, "only the first call was refused");
    assert!(
        taken.iter().any(|t| t["id"] == refused[0]["id"]),
        "the refused event was retried and taken"
    );
    let accepted = received.iter().filter(|r| r.2 == 200).count();
    assert_eq!(accepted, taken.len(), "each event was taken once");

    // In order per contact, named by the pseudonym only.
    let of = |contact: &str| -> Vec<(String, Value)> {
        let pseudonym = pseudonym(&deployment, &tenant, &parameter, contact);
        taken
            .iter()
            .filter(|e| e["contact"] == pseudonym.as_str())
            .map(|e| (e["type"].as_str().unwrap().to_owned(), e["data"].clone()))
            .collect()
    };
    let types = |events: &[(String, Value)]| -> Vec<String> {
        events.iter().map(|(t, _)| t.clone()).collect()
    };
    let ana = of("ana");
    assert_eq!(
        types(&ana),
        [
            "fact.set",
            "fact.set",
            "handoff.started",
            "handoff.ended",
            "fact.deleted",
            "contact.erased"
        ]
    );
    assert_eq!(ana[0].1["value"], "Ana");
    assert_eq!(ana[1].1["value"], "Ana Maria");
    assert_eq!(types(&of("bia")), ["fact.set"]);
    assert_eq!(taken.len(), 7, "every event belongs to ana or bia");
    for event in &taken {
        assert!(!event.to_string().contains("\"ana\""), "{event}");
    }
    let dead = stack
        .sqs
        .receive_message()
        .queue_url(&dlq_url)
        .send()
        .await
        .unwrap();
    assert!(dead.messages().is_empty(), "nothing was dead-lettered");
}
