//! Events out end to end: the real `ask` binary publishes a tenant's events to an
//! SQS FIFO queue on moto, the real `events-out` binary delivers them (the bridge
//! playing the event source mapping) to a receiver here, which refuses its first
//! call with a 500. Each event arrives once (deduped by its id), signed (checked
//! with the test's own HMAC-SHA256), in order per contact, in the shape the
//! OpenAPI document's `x-degrau-events` gives; a tenant without an events webhook
//! publishes nothing. The same for the compactor's events (an extracted fact, a
//! closed session's summary) and the WhatsApp functions' (a failed reply, the
//! owner's handoff and hand-back).

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use degrau_bridge::QueueConfig;
use degrau_tests::lambda::{LocalLambda, binary};
use degrau_tests::moto;
use degrau_tests::stack::{
    FullStack, LocalInvoke, StackOptions, drain, jobs_queues, put_tenant_config,
};
use degrau_tests::{HttpReply, unique};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::tool_server::{put_parameter, put_secret};
use crate::whatsapp::{Channel, PHONE, PSEUDONYM_SECRET, TENANT, delivery, hmac_sha256};
use crate::whatsapp_handoff::{echoes, statuses};

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

    let taken = taken(&received, &tenant);
    // In order per contact, named by the pseudonym only.
    let of = |contact: &str| {
        of(
            &taken,
            &pseudonym(&deployment, &tenant, &parameter, contact),
        )
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
    nothing_dead(&stack.sqs, &dlq_url).await;
}

/// The events `received` (each checked: signed, its `Idempotency-Key` its id, its
/// body fitting its type's schema, all `tenant`'s), each once, in the order
/// taken; exactly one call (the first) was refused, and its event taken later.
fn taken(received: &Received, tenant: &str) -> Vec<Value> {
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
        assert_eq!(event["tenant"], tenant, "no other tenant sent anything");
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
    taken
}

/// The (type, data) of the events `taken` naming `pseudonym`, in order.
fn of(taken: &[Value], pseudonym: &str) -> Vec<(String, Value)> {
    taken
        .iter()
        .filter(|e| e["contact"] == pseudonym)
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e["data"].clone()))
        .collect()
}

fn types(events: &[(String, Value)]) -> Vec<String> {
    events.iter().map(|(t, _)| t.clone()).collect()
}

async fn nothing_dead(sqs: &aws_sdk_sqs::Client, dlq_url: &str) {
    let dead = sqs
        .receive_message()
        .queue_url(dlq_url)
        .send()
        .await
        .unwrap();
    assert!(dead.messages().is_empty(), "nothing was dead-lettered");
}

#[tokio::test]
async fn the_compactor_publishes_an_extracted_fact_and_a_closed_sessions_summary() {
    let (stack, events_out, queue, dlq_url, deployment) = stack_with_events().await;
    let (url, received) = receiver().await;
    let tenant = unique("shop");
    let parameter = put_secret(&tenant, SIGNING_SECRET).await;
    let config = json!({
        "events_webhook": {"url": url, "secret_parameter": parameter},
        "allowed_fact_keys": ["name"],
        "session_idle_minutes": 60,
    });
    stack
        .configure(&tenant, &serde_json::from_value(config).unwrap())
        .await;
    let reply = stack.post(&tenant, "elis", "Hi, I'm Elis").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);

    // The sweep closes the silent session and the extraction finds her name.
    stack.age_indexed_contact(&tenant, "elis", 2 * 86_400).await;
    let swept = stack
        .compactor
        .invoke(json!({"sweep": true}))
        .await
        .unwrap();
    assert_eq!(swept["enqueued"], 1, "{swept}");
    let proposal = json!({"facts": [{"key": "name", "value": "Elis", "seq": 1}]});
    stack
        .standin
        .script(json!([{"content": [{"type": "tool_use", "id": "toolu_events", "name": "record_facts", "input": proposal}]}]))
        .await;
    stack.drain().await;
    // She writes again: session 1 is archived and indexed, its summary written.
    let reply = stack.post(&tenant, "elis", "Hello again").await;
    assert_eq!(reply.body["session"], 2, "{}", reply.raw);
    stack.drain().await;

    drain(&stack.sqs, &queue, &LocalInvoke(&events_out)).await;
    let taken = taken(&received, &tenant);
    let elis = of(&taken, &pseudonym(&deployment, &tenant, &parameter, "elis"));
    assert_eq!(types(&elis), ["fact.set", "session.closed"], "{taken:?}");
    assert_eq!(
        elis[0].1,
        json!({"key": "name", "value": "Elis", "by": "model"})
    );
    assert_eq!(elis[1].1["session"], 1);
    let summary = elis[1].1["summary"].as_str().unwrap();
    assert!(!summary.is_empty(), "the search summary stored for recall");
    assert_eq!(taken.len(), 2);
    nothing_dead(&stack.sqs, &dlq_url).await;
}

#[tokio::test]
async fn the_whatsapp_functions_publish_a_failed_reply_and_the_owners_handoff() {
    let sqs = aws_sdk_sqs::Client::new(&moto::sdk_config().await);
    let (events_url, dlq_url) = jobs_queues(&sqs, 3).await;
    // The worker reads the deployment's pseudonym secret from SSM, the webhook
    // (in these tests) from its variable: the same secret.
    let key_name = format!("/degrau-test/{}/pseudonym-key", moto::unique_name("key"));
    put_parameter(&key_name, PSEUDONYM_SECRET).await;
    let channel = Channel::start_full(
        &[
            ("EVENTS_QUEUE_URL", &events_url),
            ("PSEUDONYM_KEY_PARAMETER", &key_name),
        ],
        &[],
    )
    .await;
    let (url, received) = receiver().await;
    let parameter = put_secret(TENANT, SIGNING_SECRET).await;
    let config = json!({
        "events_webhook": {"url": url, "secret_parameter": parameter},
        "whatsapp": {"handback_keyword": "voltar"},
    });
    put_tenant_config(
        &channel.dynamodb,
        &channel.table,
        TENANT,
        &serde_json::from_value(config).unwrap(),
    )
    .await;
    let customer = "5511900000077";

    // The reply fails at Meta.
    channel
        .deliver(&delivery(PHONE, customer, &[("wamid.V1", "oi")]))
        .await;
    channel.work().await;
    let sent = channel.sent().await;
    let id = sent[0]["id"].as_str().unwrap().to_owned();
    let failed = statuses(customer, &[(&id, "failed", Some(131_026))]);
    channel.deliver(&failed).await;
    // Meta delivers the callback again: nothing moves, nothing more is published.
    channel.deliver(&failed).await;
    // The owner answers from the app, then hands back with the word.
    for (echo, text) in [("wamid.E1", "Oi, aqui é a Rita"), ("wamid.E2", "voltar")] {
        channel.deliver(&echoes(customer, &[(echo, text)])).await;
        channel.work().await;
    }

    let events_out = LocalLambda::start(binary("events-out"), channel.env.clone()).await;
    let mut queue = QueueConfig::discover(&sqs, &events_url).await.unwrap();
    queue.wait_time_seconds = 0;
    queue.retry_visibility_seconds = Some(0);
    drain(&sqs, &queue, &LocalInvoke(&events_out)).await;
    let taken = taken(&received, TENANT);
    let events = of(
        &taken,
        &pseudonym(PSEUDONYM_SECRET, TENANT, &parameter, customer),
    );
    assert_eq!(
        types(&events),
        ["delivery.failed", "handoff.started", "handoff.ended"],
        "{taken:?}"
    );
    let transcript_reply = json!({"error_code": 131_026, "session": 1, "seq": 2});
    assert_eq!(events[0].1, transcript_reply);
    assert_eq!(events[1].1["by"], "business_app");
    assert_eq!(taken.len(), 3);
    nothing_dead(&sqs, &dlq_url).await;
}
