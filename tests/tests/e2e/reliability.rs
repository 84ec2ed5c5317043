//! Reliability and security, tried the way a bad day and an attacker would: model
//! faults, DynamoDB faults through a fault-injecting proxy, function processes
//! killed mid-round or mid-step, SQS delivering jobs twice, late or out of order,
//! tenant isolation and erasure, personal data in logs, and a bounded soak.
//!
//! Every test ends in a documented outcome — a reply, or a clear error with nothing
//! written, or a retried job — and checks storage with raw DynamoDB reads: never a
//! half-written round, a lost round or a corrupted summary.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::Fault as ProxyFault;
use degrau_bridge::{Invoke, poll_once};
use degrau_tests::moto;
use degrau_tests::soak::{SoakConfig, soak};
use degrau_tests::stack::{
    FullStack, RawItem, RawMessage, StackOptions, attr_n, attr_s, is_compactor_call, model_calls,
};
use serde_json::{Value, json};

use crate::helpers::{
    self, BOOKING_INSTRUCTIONS, assert_error, env, round_of, stack_behind_proxy, turn,
    until_the_faults_are_taken,
};

const TENANT: &str = "rely";
/// The dummy key the stack gives both functions.
const API_KEY: &str = "offline-test-key";

/// A stack whose model calls time out after one second.
async fn stack_with_short_model_timeout() -> FullStack {
    FullStack::start_with(&StackOptions {
        env: env(&[("MODEL_TIMEOUT_SECONDS", "1")]),
        ..StackOptions::default()
    })
    .await
}

fn compacting(threshold: u64, keep: usize) -> TenantConfig {
    // Steps keep `keep` messages: the token-sized keep (the request after a step
    // kept cacheable, sized as sent after the step's pruning) would keep the whole
    // of these short conversations, whose tool results pruning shrinks.
    TenantConfig {
        instructions: Some(BOOKING_INSTRUCTIONS.into()),
        window_keep_tokens: Some(0),
        ..helpers::compacting(&["name", "preferred_time", "note"], threshold, keep)
    }
}

/// Checks the transcript of one session: dense from 1, made of whole rounds (each
/// starts with a user text message and ends with an assistant message without a
/// `tool_use`; every `tool_use` is answered in the next message), and returns the
/// rounds' user texts in order.
fn whole_rounds(messages: &[RawMessage]) -> Vec<String> {
    let mut texts = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        assert_eq!(message.seq, i as u64 + 1, "dense: {messages:?}");
        let expects_user = i == 0 || messages[i - 1].role == "assistant";
        assert_eq!(
            message.role,
            if expects_user { "user" } else { "assistant" },
            "roles alternate: {messages:?}"
        );
        let blocks = message.content.as_array().unwrap();
        let tool_uses: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        if !tool_uses.is_empty() {
            let next = messages
                .get(i + 1)
                .unwrap_or_else(|| panic!("a tool_use ends the transcript: {messages:?}"));
            for id in tool_uses {
                assert!(
                    next.content
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|b| b["type"] == "tool_result" && b["tool_use_id"] == id),
                    "tool_use {id} has its result next"
                );
            }
        }
        if message.is_user_text() {
            assert!(
                i == 0 || messages[i - 1].role == "assistant",
                "a round starts after a final answer"
            );
            texts.push(message.text());
        }
    }
    if let Some(last) = messages.last() {
        assert_eq!(last.role, "assistant", "the last round is whole");
    }
    texts
}

// ---------------------------------------------------------------------------------
// 1. Model faults
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_model_429_with_retry_after_is_waited_out_and_the_round_is_stored_once() {
    let stack = stack_with_short_model_timeout().await;
    stack
        .standin
        .faults(json!([{"status": 429, "retry_after": 1}]))
        .await;
    let reply = stack.post(TENANT, "ana", "hello after a rate limit").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(round_of(&reply), (1, 2));
    let calls = model_calls(&stack.standin.requests().await).len();
    assert_eq!(calls, 2, "one refused call, one answered");
    let messages = stack.stored_messages(TENANT, "ana").await;
    assert_eq!(whole_rounds(&messages), ["hello after a rate limit"]);
}

#[tokio::test]
async fn three_model_429s_end_in_429_rate_limited_with_retry_after_and_write_nothing() {
    let stack = stack_with_short_model_timeout().await;
    assert_eq!(stack.post(TENANT, "ana", "a first round").await.status, 200);
    let before = stack.contact_items(TENANT, "ana").await;
    let limited = json!({"status": 429, "retry_after_ms": 10});
    stack
        .standin
        .faults(json!([limited, limited, limited]))
        .await;
    let reply = stack.post(TENANT, "ana", "still limited?").await;
    assert_error(&reply, 429, "rate_limited");
    assert!(reply.headers.contains_key("retry-after"), "{reply:?}");
    assert_eq!(stack.contact_items(TENANT, "ana").await, before);
}

#[tokio::test]
async fn two_model_529s_or_500s_are_retried_and_the_round_is_stored_once() {
    let stack = stack_with_short_model_timeout().await;
    for (contact, status) in [("bia", 529), ("caio", 500)] {
        stack
            .standin
            .faults(json!([{"status": status}, {"status": status}]))
            .await;
        let text = format!("hello through two {status}s");
        let reply = stack.post(TENANT, contact, &text).await;
        assert_eq!(reply.status, 200, "{status}: {}", reply.raw);
        assert_eq!(round_of(&reply), (1, 2));
        let messages = stack.stored_messages(TENANT, contact).await;
        assert_eq!(whole_rounds(&messages), [text]);
    }
}

#[tokio::test]
async fn three_model_529s_or_500s_end_in_502_model_error_and_write_nothing() {
    let stack = stack_with_short_model_timeout().await;
    for (contact, status) in [("dora", 529), ("eva", 500)] {
        assert_eq!(
            stack.post(TENANT, contact, "a first round").await.status,
            200
        );
        let before = stack.contact_items(TENANT, contact).await;
        let fault = json!({"status": status});
        stack.standin.faults(json!([fault, fault, fault])).await;
        let reply = stack.post(TENANT, contact, "a second round").await;
        assert_error(&reply, 502, "model_error");
        assert_eq!(
            stack.contact_items(TENANT, contact).await,
            before,
            "{status}"
        );
        // The fault passed: the same message is answered and stored once.
        let again = stack.post(TENANT, contact, "a second round").await;
        assert_eq!((again.status, round_of(&again)), (200, (3, 4)));
        let messages = stack.stored_messages(TENANT, contact).await;
        assert_eq!(whole_rounds(&messages), ["a first round", "a second round"]);
    }
}

#[tokio::test]
async fn a_model_that_hangs_past_the_timeout_three_times_ends_in_504_and_writes_nothing() {
    let stack = stack_with_short_model_timeout().await;
    assert_eq!(
        stack.post(TENANT, "fred", "a first round").await.status,
        200
    );
    let before = stack.contact_items(TENANT, "fred").await;
    let hang = json!({"hang_ms": 2_500});
    stack.standin.faults(json!([hang, hang, hang])).await;
    let reply = stack.post(TENANT, "fred", "are you there?").await;
    assert_error(&reply, 504, "model_timeout");
    assert_eq!(stack.contact_items(TENANT, "fred").await, before);
}

#[tokio::test]
async fn a_connection_dropped_mid_response_is_retried_and_the_round_is_stored_once() {
    let stack = stack_with_short_model_timeout().await;
    stack.standin.faults(json!([{"drop": true}])).await;
    let reply = stack.post(TENANT, "gil", "hello over a bad line").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let log = stack.standin.requests().await;
    let calls = model_calls(&log);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["dropped"], true, "the first answer was cut");
    let messages = stack.stored_messages(TENANT, "gil").await;
    assert_eq!(whole_rounds(&messages), ["hello over a bad line"]);
    assert_eq!(
        messages[1].content, reply.body["reply"]["content"],
        "the stored answer is the one replied"
    );
}

#[tokio::test]
async fn a_tool_round_whose_second_model_call_fails_writes_nothing_of_the_round() {
    let stack = stack_with_short_model_timeout().await;
    assert_eq!(
        stack.post(TENANT, "hana", "a first round").await.status,
        200
    );
    let before = stack.contact_items(TENANT, "hana").await;
    // The first call asks for the tool (answered); the three attempts of the call
    // that reads its result fail.
    stack
        .standin
        .faults(json!([{"hang_ms": 1}, {"status": 529}, {"status": 529}, {"status": 529}]))
        .await;
    let reply = stack
        .post(TENANT, "hana", "any free slots on 2026-12-03?")
        .await;
    assert_error(&reply, 502, "model_error");
    let log = stack.standin.requests().await;
    assert!(
        model_calls(&log)
            .iter()
            .any(|c| c["response"]["stop_reason"] == "tool_use"),
        "the tool ran before the failure"
    );
    assert_eq!(stack.contact_items(TENANT, "hana").await, before);
}

// ---------------------------------------------------------------------------------
// 2. DynamoDB faults, through the fault-injecting proxy in front of moto
// ---------------------------------------------------------------------------------

fn proxy_faults(faults: Value) -> Vec<ProxyFault> {
    serde_json::from_value(faults).unwrap()
}

/// The storage faults tried: throttling and a 500 on the window Query (the one
/// reading messages, `#M#` in its key range) and on the commit.
fn storage_faults() -> Vec<(&'static str, Value)> {
    vec![
        (
            "throttled window query",
            json!({"service": "dynamodb", "operation": "Query", "body_contains": "#M#",
                   "status": 400, "type": "ProvisionedThroughputExceededException"}),
        ),
        (
            "500 on the window query",
            json!({"service": "dynamodb", "operation": "Query", "body_contains": "#M#",
                   "status": 500, "type": "InternalServerError"}),
        ),
        (
            "throttled commit",
            json!({"service": "dynamodb", "operation": "TransactWriteItems",
                   "status": 400, "type": "ProvisionedThroughputExceededException"}),
        ),
        (
            "500 on the commit",
            json!({"service": "dynamodb", "operation": "TransactWriteItems",
                   "status": 500, "type": "InternalServerError"}),
        ),
    ]
}

#[tokio::test]
async fn one_storage_fault_on_the_window_query_or_the_commit_is_retried_and_the_round_is_stored_once()
 {
    let (stack, proxy) = stack_behind_proxy(1).await;
    for (i, (name, fault)) in storage_faults().into_iter().enumerate() {
        let contact = format!("once-{i}");
        assert_eq!(
            stack.post(TENANT, &contact, "a first round").await.status,
            200
        );
        let mark = proxy.mark();
        proxy.faults(proxy_faults(json!([fault]))).unwrap();
        let reply = stack.post(TENANT, &contact, "a second round").await;
        assert_eq!(
            (reply.status, round_of(&reply)),
            (200, (3, 4)),
            "{name}: {}",
            reply.raw
        );
        assert!(
            proxy.pending_faults().is_empty(),
            "{name}: the fault was hit"
        );
        let faulted = proxy
            .log_since(mark)
            .into_iter()
            .filter(|call| call.fault.is_some())
            .count();
        assert_eq!(faulted, 1, "{name}");
        let messages = stack.stored_messages(TENANT, &contact).await;
        assert_eq!(
            whole_rounds(&messages),
            ["a first round", "a second round"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn storage_faults_that_outlast_the_sdk_retries_end_in_503_with_retry_after_and_write_nothing()
{
    let (stack, proxy) = stack_behind_proxy(1).await;
    for (i, (name, mut fault)) in storage_faults().into_iter().enumerate() {
        let contact = format!("thrice-{i}");
        assert_eq!(
            stack.post(TENANT, &contact, "a first round").await.status,
            200
        );
        let before = stack.contact_items(TENANT, &contact).await;
        fault["times"] = json!(3);
        proxy.faults(proxy_faults(json!([fault]))).unwrap();
        // With an Idempotency-Key, so the claim's release is checked too.
        let key = [("idempotency-key", "retry-me")];
        let body = json!({"text": "a second round"}).to_string();
        let path = format!("/v1/contacts/{contact}/messages");
        let reply = stack
            .call_with("POST", &path, "", TENANT, &key, Some(&body))
            .await;
        assert_error(&reply, 503, "unavailable");
        assert!(
            reply.headers.contains_key("retry-after"),
            "{name}: {reply:?}"
        );
        assert!(proxy.pending_faults().is_empty(), "{name}: three attempts");
        let after = stack.contact_items(TENANT, &contact).await;
        let key = if name.contains("commit") {
            // A failed commit may still land (DynamoDB may apply a transaction
            // whose caller was told it failed): the round's own items are not
            // written, but the key stays claimed to its lease, and a retry with it
            // meanwhile is told the request is in progress (docs/reliability.md).
            let (claims, rest): (Vec<RawItem>, Vec<RawItem>) = after
                .into_iter()
                .partition(|item| attr_s(item, "sk").starts_with("REQ#"));
            assert_eq!(rest, before, "{name}: nothing of the round written");
            assert_eq!(claims.len(), 1, "{name}: {claims:?}");
            assert_eq!(attr_s(&claims[0], "status"), "in_progress", "{name}");
            let held = stack
                .call_with("POST", &path, "", TENANT, &key, Some(&body))
                .await;
            assert_error(&held, 409, "conflict");
            [("idempotency-key", "retry-me-again")]
        } else {
            assert_eq!(after, before, "{name}: nothing written, the key released");
            key
        };
        let again = stack
            .call_with("POST", &path, "", TENANT, &key, Some(&body))
            .await;
        assert_eq!(
            (again.status, round_of(&again)),
            (200, (3, 4)),
            "{name}: {}",
            again.raw
        );
        assert!(
            !again.headers.contains_key("idempotent-replayed"),
            "{name}: answered, not replayed"
        );
        let messages = stack.stored_messages(TENANT, &contact).await;
        assert_eq!(
            whole_rounds(&messages),
            ["a first round", "a second round"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_throttled_read_of_memory_or_transcript_is_503_and_a_throttled_erase_can_be_repeated() {
    let (stack, proxy) = stack_behind_proxy(1).await;
    assert_eq!(stack.post(TENANT, "olga", "hello").await.status, 200);
    let before = stack.contact_items(TENANT, "olga").await;
    let throttled = |operation: &str| {
        json!({"service": "dynamodb", "operation": operation, "status": 400,
               "type": "ProvisionedThroughputExceededException", "times": 3})
    };
    proxy
        .faults(proxy_faults(json!([throttled("Query")])))
        .unwrap();
    let memory = stack
        .call("GET", "/v1/contacts/olga/memory", TENANT, None)
        .await;
    assert_error(&memory, 503, "unavailable");
    proxy
        .faults(proxy_faults(json!([throttled("Query")])))
        .unwrap();
    let transcript = stack
        .call("GET", "/v1/contacts/olga/messages", TENANT, None)
        .await;
    assert_error(&transcript, 503, "unavailable");
    assert_eq!(stack.contact_items(TENANT, "olga").await, before);

    proxy
        .faults(proxy_faults(json!([throttled("BatchWriteItem")])))
        .unwrap();
    let erased = stack
        .call("DELETE", "/v1/contacts/olga", TENANT, None)
        .await;
    assert_error(&erased, 503, "unavailable");
    let again = stack
        .call("DELETE", "/v1/contacts/olga", TENANT, None)
        .await;
    assert_eq!(again.status, 200, "{}", again.raw);
    assert!(stack.contact_items(TENANT, "olga").await.is_empty());
}

#[tokio::test]
async fn a_commit_that_landed_but_whose_answers_were_lost_is_not_denied() {
    let (stack, proxy) = stack_behind_proxy(1).await;
    assert_eq!(
        stack.post(TENANT, "paula", "a first round").await.status,
        200
    );
    // The first attempt lands and its answer is cut; the SDK's two retries are
    // throttled. (With one lost answer only, real DynamoDB answers the retry from
    // its ClientRequestToken; moto does not keep tokens.)
    proxy
        .faults(proxy_faults(json!([
            {"service": "dynamodb", "operation": "TransactWriteItems", "drop": "after"},
            {"service": "dynamodb", "operation": "TransactWriteItems", "status": 400,
             "type": "ProvisionedThroughputExceededException", "times": 2}
        ])))
        .unwrap();
    let reply = stack.post(TENANT, "paula", "a second round").await;
    let texts = whole_rounds(&stack.stored_messages(TENANT, "paula").await);
    assert_eq!(
        texts,
        ["a first round", "a second round"],
        "the round landed once"
    );
    // Documented: an error means nothing was written. Here the round was written,
    // so the answer must be that round, not "nothing was stored, retry".
    assert_eq!(
        (reply.status, round_of(&reply)),
        (200, (3, 4)),
        "{}",
        reply.raw
    );
}

#[tokio::test]
async fn an_ask_killed_while_its_commit_is_in_flight_leaves_the_whole_round_or_nothing() {
    let (mut stack, proxy) = stack_behind_proxy(1).await;
    assert_eq!(
        stack.post(TENANT, "rita", "a first round").await.status,
        200
    );
    let before = stack.contact_items(TENANT, "rita").await;
    proxy
        .faults(proxy_faults(json!([{"service": "dynamodb",
            "operation": "TransactWriteItems", "delay_ms": 1_500}])))
        .unwrap();
    let mark = proxy.mark();
    tokio::select! {
        reply = stack.post(TENANT, "rita", "the round in flight") => {
            panic!("the round finished before the kill: {}", reply.raw)
        }
        () = async {
            while !proxy.pending_faults().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    stack.ask.kill();
    // Let the delayed call finish (or be dropped with its connection).
    for _ in 0..300 {
        if proxy
            .log_since(mark)
            .iter()
            .any(|c| c.operation == "TransactWriteItems")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let messages = stack.stored_messages(TENANT, "rita").await;
    let texts = whole_rounds(&messages);
    let landed = texts.len() == 2;
    eprintln!(
        "the commit in flight {} after the kill",
        if landed { "landed" } else { "did not land" }
    );
    if landed {
        assert_eq!(texts, ["a first round", "the round in flight"]);
    } else {
        assert_eq!(stack.contact_items(TENANT, "rita").await, before);
    }
    stack.ask.spawn().await;
    let next = stack.post(TENANT, "rita", "and then").await;
    assert_eq!(next.status, 200, "{}", next.raw);
    whole_rounds(&stack.stored_messages(TENANT, "rita").await);
}

#[tokio::test]
async fn a_round_committed_while_an_erase_runs_is_erased_too_or_leaves_the_contact_usable() {
    let (stack, proxy) = stack_behind_proxy(2).await;
    assert_eq!(
        stack.post(TENANT, "sara", "a first round").await.status,
        200
    );
    proxy
        .faults(proxy_faults(json!([{"service": "dynamodb",
            "operation": "BatchWriteItem", "delay_ms": 2_000}])))
        .unwrap();
    let (erased, during) = tokio::join!(
        stack.call("DELETE", "/v1/contacts/sara", TENANT, None),
        async {
            while !proxy.pending_faults().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            stack.post(TENANT, "sara", "a round during the erase").await
        }
    );
    assert_eq!(erased.status, 200, "{}", erased.raw);
    eprintln!("during the erase: {} {}", during.status, during.raw);
    let left: Vec<String> = stack
        .contact_items(TENANT, "sara")
        .await
        .iter()
        .map(|i| attr_s(i, "sk"))
        .collect();
    eprintln!("left after the erase: {left:?}");
    // Whatever the order, the contact must stay usable: three more rounds answer.
    for i in 0..3 {
        let reply = stack
            .post(TENANT, "sara", &format!("after the erase {i}"))
            .await;
        assert_eq!(
            reply.status, 200,
            "round {i} after the erase: {}",
            reply.raw
        );
    }
    let messages = stack.stored_messages(TENANT, "sara").await;
    whole_rounds(&messages);
    assert!(
        left.is_empty() || left.iter().any(|sk| sk == "HEAD"),
        "messages without a head survived the erase: {left:?}"
    );
}

// ---------------------------------------------------------------------------------
// 3. The function process killed between the model's answer and the commit
// ---------------------------------------------------------------------------------

/// Posts `text` (with `headers`) and kills the ask instance once the model call
/// that takes the queued hang is in flight; the client never gets an answer.
async fn post_and_kill_mid_round(
    stack: &mut FullStack,
    contact: &str,
    text: &str,
    headers: &[(&str, &str)],
) {
    stack.standin.faults(json!([{"hang_ms": 20_000}])).await;
    let body = json!({ "text": text }).to_string();
    let path = format!("/v1/contacts/{contact}/messages");
    tokio::select! {
        reply = stack.call_with("POST", &path, "", TENANT, headers, Some(&body)) => {
            panic!("the round finished before the kill: {}", reply.raw)
        }
        () = until_the_faults_are_taken(stack) => {}
    }
    stack.ask.kill();
}

#[tokio::test]
async fn an_ask_killed_while_the_model_answers_writes_nothing_and_the_same_message_then_answers() {
    let mut stack = FullStack::start(&[]).await;
    assert_eq!(
        stack.post(TENANT, "ines", "a first round").await.status,
        200
    );
    let before = stack.contact_items(TENANT, "ines").await;
    post_and_kill_mid_round(&mut stack, "ines", "the round that dies", &[]).await;
    assert_eq!(
        stack.contact_items(TENANT, "ines").await,
        before,
        "a killed round leaves nothing"
    );

    stack.ask.spawn().await;
    let again = stack.post(TENANT, "ines", "the round that dies").await;
    assert_eq!(
        (again.status, round_of(&again)),
        (200, (3, 4)),
        "{}",
        again.raw
    );
    let messages = stack.stored_messages(TENANT, "ines").await;
    assert_eq!(
        whole_rounds(&messages),
        ["a first round", "the round that dies"]
    );
}

#[tokio::test]
async fn an_idempotent_ask_killed_mid_round_keeps_its_key_in_progress_until_the_lease_ends() {
    let mut stack = FullStack::start(&[]).await;
    let key = [("idempotency-key", "order-42")];
    post_and_kill_mid_round(&mut stack, "joao", "remember that I prefer fridays", &key).await;
    stack.ask.spawn().await;

    // The retry during the lease (120 s) is refused: the dead attempt holds the key.
    let body = json!({"text": "remember that I prefer fridays"}).to_string();
    let path = "/v1/contacts/joao/messages";
    let retry = stack
        .call_with("POST", path, "", TENANT, &key, Some(&body))
        .await;
    assert_error(&retry, 409, "conflict");
    let items = stack.contact_items(TENANT, "joao").await;
    assert_eq!(
        items.iter().map(|i| attr_s(i, "sk")).collect::<Vec<_>>(),
        ["REQ#order-42"],
        "only the claim: no head, no message"
    );
    let claim = &items[0];
    assert_eq!(attr_s(claim, "status"), "in_progress");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let lease_until = attr_n(claim, "lease_until");
    assert!(
        lease_until > now && lease_until <= now + 121,
        "a lease of 120 s: {lease_until} vs {now}"
    );

    // Another key is independent of the stuck one.
    let other = stack
        .call_with(
            "POST",
            path,
            "",
            TENANT,
            &[("idempotency-key", "order-43")],
            Some(&json!({"text": "and a trim on monday"}).to_string()),
        )
        .await;
    assert_eq!(
        (other.status, round_of(&other)),
        (200, (1, 2)),
        "{}",
        other.raw
    );

    // Time passes (the lease is moved back rather than waited for): the same key
    // with the same body is claimed again and answered once.
    stack
        .dynamodb
        .update_item()
        .table_name(&stack.table)
        .key("pk", AttributeValue::S(format!("T#{TENANT}#C#joao")))
        .key("sk", AttributeValue::S("REQ#order-42".into()))
        .update_expression("SET lease_until = :past")
        .expression_attribute_values(":past", AttributeValue::N((now - 1).to_string()))
        .send()
        .await
        .unwrap();
    let after_lease = stack
        .call_with("POST", path, "", TENANT, &key, Some(&body))
        .await;
    assert_eq!(
        (after_lease.status, round_of(&after_lease)),
        (200, (3, 4)),
        "{}",
        after_lease.raw
    );
    let replay = stack
        .call_with("POST", path, "", TENANT, &key, Some(&body))
        .await;
    assert_eq!(replay.raw, after_lease.raw, "then replayed byte for byte");
    let messages = stack.stored_messages(TENANT, "joao").await;
    assert_eq!(
        whole_rounds(&messages),
        ["and a trim on monday", "remember that I prefer fridays"]
    );
}

// ---------------------------------------------------------------------------------
// 4. SQS: duplicates, late and out-of-order jobs; a compactor crash mid-step
// ---------------------------------------------------------------------------------

/// A step job's body for the head whose incarnation is `life`.
fn step_job(life: &str, session: u32, summarized_until: u64) -> String {
    json!({"kind": "step", "tenant": TENANT, "incarnation": life, "session": session,
           "summarized_until": summarized_until})
    .to_string()
}

/// Lines of the compactor's output that report an applied step.
fn steps_logged(stack: &FullStack) -> usize {
    stack
        .compactor
        .output()
        .iter()
        .filter(|l| l.contains("compaction step applied"))
        .count()
}

/// The summary state of a head is consistent with its transcript: it folds up to a
/// safe start (the next message is a user text message), within the transcript,
/// and holds a summary exactly when a step ran.
fn assert_consistent_summary(head: &RawItem, messages: &[RawMessage]) {
    let until = attr_n(head, "summarized_until");
    let steps = attr_n(head, "steps");
    assert!(until <= attr_n(head, "last_seq"));
    assert_eq!(attr_n(head, "last_seq"), messages.len() as u64);
    if steps == 0 {
        assert_eq!(until, 0);
    } else {
        assert!(
            !attr_s(head, "summary").is_empty(),
            "a step leaves a summary"
        );
        assert!(until > 0);
    }
    if let Some(next) = messages.get(until as usize) {
        assert!(next.is_user_text(), "the window starts at a user text");
    }
}

async fn poll_until_steps(stack: &FullStack, contact: &str, steps: u64) {
    for _ in 0..5 {
        stack.drain().await;
        if stack.memory(TENANT, contact).await["session"]["steps"] == steps {
            return;
        }
    }
}

#[tokio::test]
async fn step_jobs_delivered_twice_late_or_out_of_order_each_apply_at_most_once() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    for i in 0..6 {
        assert_eq!(stack.post(TENANT, "kim", &turn(i)).await.status, 200);
    }
    let kim = stack.incarnation(TENANT, "kim").await;
    // Out of order: a job for a step not seen yet comes first; then the real one,
    // twice (a redelivery with another deduplication id).
    stack
        .send_job(&step_job(&kim, 1, 999), "g-kim", "future")
        .await;
    stack
        .send_job(&step_job(&kim, 1, 0), "g-kim", "copy-a")
        .await;
    stack
        .send_job(&step_job(&kim, 1, 0), "g-kim", "copy-b")
        .await;
    stack.drain().await;
    let first = stack.memory(TENANT, "kim").await;
    assert_eq!(first["session"]["steps"], 1, "{first}");
    let seen = first["session"]["summarized_until"].as_u64().unwrap();
    assert!(seen > 0);

    // A newer step lands, then the old jobs arrive late, with one for a session that
    // does not exist.
    for i in 6..12 {
        assert_eq!(stack.post(TENANT, "kim", &turn(i)).await.status, 200);
    }
    stack
        .send_job(&step_job(&kim, 1, seen), "g-kim", "second")
        .await;
    poll_until_steps(&stack, "kim", 2).await;
    let second = stack.memory(TENANT, "kim").await;
    assert_eq!(second["session"]["steps"], 2, "{second}");
    stack
        .send_job(&step_job(&kim, 1, 0), "g-kim", "late-0")
        .await;
    stack
        .send_job(&step_job(&kim, 1, seen), "g-kim", "late-1")
        .await;
    stack
        .send_job(&step_job(&kim, 7, 0), "g-kim", "other-session")
        .await;
    stack.drain().await;
    assert_eq!(
        stack.memory(TENANT, "kim").await,
        second,
        "late jobs change nothing"
    );

    let messages = stack.stored_messages(TENANT, "kim").await;
    let texts = whole_rounds(&messages);
    assert_eq!(
        texts,
        (0..12).map(turn).collect::<Vec<_>>(),
        "no message lost"
    );
    let head = stack.raw_head(TENANT, "kim").await.unwrap();
    assert_consistent_summary(&head, &messages);
    assert_eq!(
        steps_logged(&stack) as u64,
        attr_n(&head, "steps"),
        "`steps` counts each applied step once"
    );
}

/// The bridge's invoke, with the compactor process killed (SIGKILL) while its
/// summary call hangs at the stand-in: the invocation fails the way Lambda reports
/// a crashed runtime.
struct CrashingInvoke<'a> {
    stack: &'a FullStack,
}

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name; `Z` is a zombie.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

#[async_trait::async_trait]
impl Invoke for CrashingInvoke<'_> {
    async fn invoke(&self, event: Value) -> Result<Value, String> {
        tokio::select! {
            answer = self.stack.compactor.invoke(event) => {
                Err(format!("the compactor finished before the crash: {answer:?}"))
            }
            () = async {
                until_the_faults_are_taken(self.stack).await;
                let pids = self.stack.compactor.pids();
                for pid in &pids {
                    let status = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .unwrap();
                    assert!(status.success());
                }
                while !pids.iter().all(|pid| process_gone(*pid)) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            } => Err("Runtime.ExitError".to_owned()),
        }
    }
}

#[tokio::test]
async fn a_compactor_killed_mid_step_deletes_nothing_and_the_redelivered_job_applies_once() {
    let mut stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, "lia", &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step was requested");
    let before = stack.contact_items(TENANT, "lia").await;

    stack.standin.faults(json!([{"hang_ms": 20_000}])).await;
    let report = poll_once(&stack.sqs, &stack.queue, &CrashingInvoke { stack: &stack })
        .await
        .unwrap();
    assert!(report.received >= 1);
    assert_eq!(
        report.invoke_error.as_deref(),
        Some("Runtime.ExitError"),
        "{report:?}"
    );
    assert_eq!(
        (report.deleted, report.failed),
        (0, report.received),
        "nothing deleted"
    );
    assert_eq!(
        stack.contact_items(TENANT, "lia").await,
        before,
        "a crashed step writes nothing"
    );

    stack.compactor.spawn().await;
    stack.drain().await;
    let memory = stack.memory(TENANT, "lia").await;
    assert_eq!(memory["session"]["steps"], 1, "{memory}");
    let messages = stack.stored_messages(TENANT, "lia").await;
    assert_eq!(
        whole_rounds(&messages),
        (0..8).map(turn).collect::<Vec<_>>()
    );
    let head = stack.raw_head(TENANT, "lia").await.unwrap();
    assert_consistent_summary(&head, &messages);
    assert_eq!(steps_logged(&stack), 1, "applied once, after the crash");
    let dead = stack
        .sqs
        .receive_message()
        .queue_url(&stack.dlq_url)
        .send()
        .await
        .unwrap();
    assert!(
        dead.messages().is_empty(),
        "the job was retried, not dead-lettered"
    );
}

#[tokio::test]
async fn a_step_whose_commit_answer_was_lost_is_applied_and_counted_once() {
    let (stack, proxy) = stack_behind_proxy(1).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    for i in 0..8 {
        assert_eq!(stack.post(TENANT, "tito", &turn(i)).await.status, 200);
    }
    // The step's transaction lands and its answer is cut: the SDK's retry then
    // fails the step's condition (moto keeps no ClientRequestToken), which the
    // compactor reads as "another step landed" and skips.
    proxy
        .faults(proxy_faults(json!([{"service": "dynamodb",
            "operation": "TransactWriteItems", "drop": "after"}])))
        .unwrap();
    let reports = stack.drain().await;
    assert!(
        proxy.pending_faults().is_empty(),
        "the step's commit was hit"
    );
    assert!(
        reports.iter().all(|r| r.invoke_error.is_none()),
        "{reports:?}"
    );
    let memory = stack.memory(TENANT, "tito").await;
    assert_eq!(memory["session"]["steps"], 1, "{memory}");
    let messages = stack.stored_messages(TENANT, "tito").await;
    assert_eq!(
        whole_rounds(&messages),
        (0..8).map(turn).collect::<Vec<_>>()
    );
    assert_consistent_summary(&stack.raw_head(TENANT, "tito").await.unwrap(), &messages);
}

#[tokio::test]
async fn a_step_job_that_cannot_be_enqueued_is_requested_again_by_the_next_round() {
    let proxy = degrau_awsproxy::spawn(moto::endpoint()).await;
    let stack = FullStack::start_with(&StackOptions {
        env: vec![("AWS_ENDPOINT_URL_SQS".to_owned(), proxy.url().to_owned())],
        ..StackOptions::default()
    })
    .await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let mut i = 0;
    // Every SendMessage fails (three attempts each) until the first step is due.
    let failing = json!({"service": "sqs", "operation": "SendMessage", "status": 500,
                         "type": "InternalError", "times": 3});
    proxy.faults(proxy_faults(json!([failing]))).unwrap();
    loop {
        let reply = stack.post(TENANT, "ugo", &turn(i)).await;
        assert_eq!(
            reply.status, 200,
            "the round is stored anyway: {}",
            reply.raw
        );
        i += 1;
        if reply.body["compaction_queued"] == true {
            break;
        }
        assert!(i < 12, "a step came due");
    }
    assert!(proxy.pending_faults().is_empty(), "the enqueue failed");
    assert!(stack.drain().await.is_empty(), "no job reached the queue");
    assert_eq!(stack.memory(TENANT, "ugo").await["session"]["steps"], 0);

    let next = stack.post(TENANT, "ugo", &turn(i)).await;
    assert_eq!(next.body["compaction_queued"], true, "{}", next.raw);
    poll_until_steps(&stack, "ugo", 1).await;
    let memory = stack.memory(TENANT, "ugo").await;
    assert_eq!(memory["session"]["steps"], 1, "{memory}");
    let messages = stack.stored_messages(TENANT, "ugo").await;
    assert_eq!(
        whole_rounds(&messages),
        (0..=i).map(turn).collect::<Vec<_>>()
    );
}

// ---------------------------------------------------------------------------------
// 5. Isolation and erasure
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn tenant_b_reaches_nothing_of_tenant_a_through_any_route() {
    let stack = FullStack::start(&[]).await;
    let (a, b, contact) = ("tenant-a", "tenant-b", "+5511900001111");
    let secret = "the vault code is QZ-7781";
    let key = [("idempotency-key", "shared-key")];
    let body = json!({ "text": secret }).to_string();
    let path = format!("/v1/contacts/{contact}/messages");
    let first = stack
        .call_with("POST", &path, "", a, &key, Some(&body))
        .await;
    assert_eq!(first.status, 200, "{}", first.raw);
    assert_eq!(
        stack.post(a, contact, "and a second round").await.status,
        200
    );
    let a_items = stack.contact_items(a, contact).await;

    let mut answers = Vec::new();
    for query in [
        "session=all",
        "session=current",
        "session=1",
        "session=1&before=1.4",
        "",
    ] {
        answers.push((
            "GET messages",
            query,
            stack.call_with("GET", &path, query, b, &[], None).await,
        ));
    }
    let memory_path = format!("/v1/contacts/{contact}/memory");
    answers.push((
        "GET memory",
        "",
        stack.call_with("GET", &memory_path, "", b, &[], None).await,
    ));
    for (route, query, reply) in &answers {
        assert!(
            !reply.raw.contains("QZ-7781"),
            "{route}?{query} leaked: {}",
            reply.raw
        );
        let empty =
            reply.status == 200 && reply.body["messages"].as_array().is_some_and(Vec::is_empty);
        assert!(
            reply.status == 404 || empty,
            "{route}?{query}: {} {}",
            reply.status,
            reply.raw
        );
    }
    let erased = stack
        .call_with(
            "DELETE",
            &format!("/v1/contacts/{contact}"),
            "",
            b,
            &[],
            None,
        )
        .await;
    assert_eq!(
        (erased.status, erased.body["items"].as_u64()),
        (200, Some(0))
    );

    // B's POST with A's contact id and A's idempotency key is B's own first round.
    let own = stack
        .call_with("POST", &path, "", b, &key, Some(&body))
        .await;
    assert_eq!((own.status, round_of(&own)), (200, (1, 2)), "{}", own.raw);
    assert!(
        !own.headers.contains_key("idempotent-replayed"),
        "not A's replay"
    );
    let b_items = stack.contact_items(b, contact).await;
    assert_eq!(
        b_items.iter().map(|i| attr_s(i, "sk")).collect::<Vec<_>>(),
        [
            "HEAD",
            "REQ#shared-key",
            "S#000001#M#00000001",
            "S#000001#M#00000002"
        ],
        "B's own records, under B's partition"
    );
    let log = stack.standin.requests().await;
    let last = model_calls(&log).into_iter().last().unwrap();
    assert!(
        !last["body"]["system"].to_string().contains("QZ-7781"),
        "nothing of A in B's context"
    );
    assert_eq!(
        last["body"]["messages"].as_array().unwrap().len(),
        1,
        "B's history is empty"
    );

    // Keys cannot be forged from the outside: the tenant or contact cannot hold `#`.
    for (tenant, contact) in [
        ("tenant-a#C#+5511900001111", "x"),
        ("tenant-a", "%2B5511900001111%23HEAD"),
        ("tenant-a%23C%23x", "y"),
    ] {
        let reply = stack.post(tenant, contact, "forged").await;
        assert!(
            matches!(reply.status, 400 | 401),
            "{tenant}/{contact}: {}",
            reply.raw
        );
    }
    assert_eq!(
        stack.contact_items(a, contact).await,
        a_items,
        "A unchanged"
    );
}

#[tokio::test]
async fn erasing_a_contact_leaves_its_neighbours_whole() {
    let stack = FullStack::start(&[]).await;
    for contact in ["ana", "ana.b", "an", "ana-"] {
        assert_eq!(stack.post(TENANT, contact, "hello").await.status, 200);
    }
    let erased = stack.call("DELETE", "/v1/contacts/ana", TENANT, None).await;
    assert_eq!(erased.status, 200);
    assert!(stack.contact_items(TENANT, "ana").await.is_empty());
    for contact in ["ana.b", "an", "ana-"] {
        assert_eq!(
            stack.stored_messages(TENANT, contact).await.len(),
            2,
            "{contact}"
        );
    }
}

#[tokio::test]
async fn a_delete_with_a_step_job_queued_leaves_no_item_and_the_job_writes_nothing_back() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511988887777";
    // Session 1: rounds, one idempotent; a step (summary); then the session closes.
    let key = [("idempotency-key", "first")];
    let path = format!("/v1/contacts/{contact}/messages");
    let body = json!({"text": "Hi, I'm Zulmira and I like mornings"}).to_string();
    assert_eq!(
        stack
            .call_with("POST", &path, "", TENANT, &key, Some(&body))
            .await
            .status,
        200
    );
    for i in 0..6 {
        assert_eq!(stack.post(TENANT, contact, &turn(i)).await.status, 200);
    }
    stack.drain().await;
    assert!(
        stack.memory(TENANT, contact).await["session"]["steps"]
            .as_u64()
            .unwrap()
            >= 1
    );
    stack.age_contact(TENANT, contact, 2 * 86_400).await;
    // Session 2 opens (archive of session 1's summary); facts of session 1 are saved.
    assert_eq!(stack.post(TENANT, contact, "hello again").await.status, 200);
    stack
        .standin
        .script(
            json!([{"content": [{"type": "tool_use", "id": "toolu_f", "name": "record_facts",
            "input": {"facts": [{"key": "name", "value": "Zulmira", "seq": 1}]}}]}]),
        )
        .await;
    stack.drain().await;
    let kinds: Vec<String> = stack
        .contact_items(TENANT, contact)
        .await
        .iter()
        .map(|i| attr_s(i, "sk").chars().take(4).collect())
        .collect();
    for prefix in ["FACT", "HEAD", "REQ#", "S#00", "SUM#"] {
        assert!(kinds.iter().any(|k| k == prefix), "{prefix} in {kinds:?}");
    }

    // More rounds until a step is queued, and DELETE before the queue drains.
    let mut queued = false;
    for i in 0..10 {
        let reply = stack.post(TENANT, contact, &turn(i)).await;
        assert_eq!(reply.status, 200);
        queued |= reply.body["compaction_queued"] == true;
        if queued {
            break;
        }
    }
    assert!(queued, "a step is in the queue");
    let life = stack.incarnation(TENANT, contact).await;
    let erased = stack
        .call("DELETE", &format!("/v1/contacts/{contact}"), TENANT, None)
        .await;
    assert_eq!(erased.status, 200, "{}", erased.raw);
    assert!(stack.contact_items(TENANT, contact).await.is_empty());

    // The queued step runs, and later jobs for the contact come: nothing comes back.
    stack.drain().await;
    stack
        .send_job(&step_job(&life, 2, 0), "g-late", "late-step")
        .await;
    stack
        .send_job(
            &json!({"kind": "facts", "tenant": TENANT, "incarnation": life, "session": 1})
                .to_string(),
            "g-late",
            "late-facts",
        )
        .await;
    stack.drain().await;
    assert!(
        stack.contact_items(TENANT, contact).await.is_empty(),
        "{:?}",
        stack.contact_items(TENANT, contact).await
    );
    let memory = stack
        .call(
            "GET",
            &format!("/v1/contacts/{contact}/memory"),
            TENANT,
            None,
        )
        .await;
    assert_eq!(memory.status, 404);
}

#[tokio::test]
async fn a_delete_while_the_compactor_is_summarising_leaves_no_item() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "mid-step";
    for i in 0..8 {
        assert_eq!(stack.post(TENANT, contact, &turn(i)).await.status, 200);
    }
    stack.standin.faults(json!([{"hang_ms": 1_500}])).await;
    let path = format!("/v1/contacts/{contact}");
    let (_, erased) = tokio::join!(stack.drain(), async {
        until_the_faults_are_taken(&stack).await;
        stack.call("DELETE", &path, TENANT, None).await
    });
    assert_eq!(erased.status, 200);
    assert!(
        stack.contact_items(TENANT, contact).await.is_empty(),
        "{:?}",
        stack.contact_items(TENANT, contact).await
    );
    let log = stack.standin.requests().await;
    assert!(
        model_calls(&log).iter().any(|c| is_compactor_call(c)),
        "a step ran"
    );
}

// ---------------------------------------------------------------------------------
// 6. Personal data in logs and metrics
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn no_log_or_metric_line_carries_message_text_a_phone_number_a_cpf_a_card_or_the_key() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511987654321";
    let private = [
        "Meu CPF é 529.982.247-25 e o cartão 4111 1111 1111 1111, senha QWX-PRIVATE",
        "Me chamo Zulmira Quaresma e prefiro manhãs",
        "any free slots on 2026-12-03 for Zulmira?",
        "please book 10:30 on 2026-12-03, Zulmira",
    ];
    let mut replies = Vec::new();
    for text in private {
        let reply = stack.post(TENANT, contact, text).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        replies.push(reply.body["reply"]["text"].as_str().unwrap().to_owned());
    }
    for i in 0..5 {
        assert_eq!(stack.post(TENANT, contact, &turn(i)).await.status, 200);
    }
    stack.drain().await;
    let memory = stack.memory(TENANT, contact).await;
    assert!(
        memory["session"]["steps"].as_u64().unwrap() >= 1,
        "{memory}"
    );
    let summary = memory["session"]["summary"].as_str().unwrap().to_owned();
    stack.age_contact(TENANT, contact, 2 * 86_400).await;
    assert_eq!(stack.post(TENANT, contact, "oi de novo").await.status, 200);
    stack
        .standin
        .script(
            json!([{"content": [{"type": "tool_use", "id": "toolu_f", "name": "record_facts",
            "input": {"facts": [
                {"key": "name", "value": "Zulmira Quaresma", "seq": 1},
                {"key": "note", "value": "CPF 529.982.247-25", "seq": 1}
            ]}}]}]),
        )
        .await;
    stack.drain().await;
    let facts = stack.memory(TENANT, contact).await["facts"].clone();
    assert_eq!(facts[0]["value"], "Zulmira Quaresma", "{facts}");

    // The last lines can follow the response: wait for the compactor's facts line.
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = [stack.ask.output(), stack.compactor.output()].concat();
        if lines.iter().any(|l| l.contains("facts extracted")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        lines.iter().any(|l| l.contains("RoundsCommitted")),
        "metrics were printed"
    );
    assert!(lines.iter().any(|l| l.contains("compaction step applied")));
    let mut forbidden: Vec<String> = [
        "5511987654321",
        "987654321",
        "529.982.247-25",
        "52998224725",
        "4111 1111 1111 1111",
        "4111111111111111",
        "QWX-PRIVATE",
        "Zulmira",
        "Quaresma",
        "manhãs",
        API_KEY,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    forbidden.extend(private.iter().map(|t| (*t).to_owned()));
    forbidden.extend(replies);
    forbidden.extend(
        summary
            .split(". ")
            .filter(|s| s.len() > 20)
            .map(str::to_owned),
    );
    for line in &lines {
        for word in &forbidden {
            assert!(!line.contains(word.as_str()), "{word:?} leaked in: {line}");
        }
    }
}

// ---------------------------------------------------------------------------------
// 7. A bounded soak
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_small_soak_acknowledges_only_stored_rounds_and_loses_none() {
    let report = soak(SoakConfig {
        contacts: 4,
        burst: 3,
        max_requests: Some(60),
        duration: None,
        ask_instances: 3,
        ..SoakConfig::default()
    })
    .await;
    eprintln!("{report}");
    assert!(report.violations.is_empty(), "{report}");
    assert!(report.requests >= 60);
    assert!(
        report.by_status.get(&200).copied().unwrap_or(0) > 0,
        "{report}"
    );
    assert!(report.rounds_stored > 0);
}
