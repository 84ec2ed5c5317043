//! The storage lifecycle end to end: erasure racing queued jobs, retention that
//! never breaks an open window, the compactor's bounded work, the sweep, and
//! transient DynamoDB conflicts. The real `ask` and `compactor` binaries run on
//! moto and the stand-in; time passing is simulated by moving stored times back
//! (moto never deletes TTL-expired items: the tests delete what DynamoDB's TTL
//! would).

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::tenant::TenantConfig;
use degrau_awsproxy::Fault as ProxyFault;
use degrau_tests::stack::{
    FullStack, RawItem, StackOptions, attr_n, attr_s, is_compactor_call, message_texts, model_calls,
};
use serde_json::{Value, json};

use crate::helpers::{self, round_of, stack_behind_proxy, turn, until_the_faults_are_taken};

const TENANT: &str = "life";
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

fn compacting(threshold: u64, keep: usize) -> TenantConfig {
    helpers::compacting(&["name", "preferred_time"], threshold, keep)
}

/// DynamoDB's answer to a transaction that lost to another one in flight on the
/// same item: cancelled, with a `TransactionConflict` reason.
fn transaction_conflict(body_contains: Option<&str>) -> Vec<ProxyFault> {
    let mut fault = json!({"service": "dynamodb", "operation": "TransactWriteItems",
        "status": 400, "type": "TransactionCanceledException",
        "message": "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]"});
    if let Some(needle) = body_contains {
        fault["body_contains"] = Value::String(needle.to_owned());
    }
    serde_json::from_value(json!([fault])).unwrap()
}

// ---------------------------------------------------------------------------------
// Transient transaction conflicts
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_commit_cancelled_by_a_transaction_conflict_is_retried_and_the_round_is_stored_once() {
    let (stack, proxy) = stack_behind_proxy(1).await;
    assert_eq!(
        stack.post(TENANT, "rita", "a first round").await.status,
        200
    );
    proxy.faults(transaction_conflict(None)).unwrap();
    let reply = stack.post(TENANT, "rita", "a second round").await;
    assert_eq!(
        (reply.status, round_of(&reply)),
        (200, (3, 4)),
        "{}",
        reply.raw
    );
    assert!(proxy.pending_faults().is_empty(), "the conflict was hit");
    let texts: Vec<String> = stack
        .stored_messages(TENANT, "rita")
        .await
        .iter()
        .filter(|m| m.is_user_text())
        .map(|m| m.text())
        .collect();
    assert_eq!(texts, ["a first round", "a second round"]);
}

#[tokio::test]
async fn a_step_cancelled_by_a_transaction_conflict_is_retried_within_the_same_delivery() {
    let (stack, proxy) = stack_behind_proxy(1).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, "saulo", &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step was requested");
    // Only the step's transaction holds the `:seen` condition value.
    proxy.faults(transaction_conflict(Some(":seen"))).unwrap();
    let reports = stack.drain().await;
    assert!(proxy.pending_faults().is_empty(), "the conflict was hit");
    assert!(
        reports
            .iter()
            .all(|r| r.failed == 0 && r.invoke_error.is_none()),
        "no delivery failed: {reports:?}"
    );
    let memory = stack.memory(TENANT, "saulo").await;
    assert!(
        memory["session"]["steps"].as_u64().unwrap() >= 1,
        "{memory}"
    );
}

/// Every text a contact's items hold (messages, summaries, facts), raw.
async fn stored_texts(stack: &FullStack, contact: &str) -> String {
    stack
        .contact_items(TENANT, contact)
        .await
        .iter()
        .map(|item| format!("{item:?}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The bodies of every message waiting in a queue (received, so held invisible
/// for the queue's visibility timeout: call it last).
async fn queue_bodies(stack: &FullStack, url: &str) -> Vec<String> {
    let mut bodies = Vec::new();
    for _ in 0..5 {
        let received = stack
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        if received.messages().is_empty() {
            break;
        }
        bodies.extend(
            received
                .messages()
                .iter()
                .filter_map(|m| m.body().map(str::to_owned)),
        );
    }
    bodies
}

// ---------------------------------------------------------------------------------
// Erasure racing a late job
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_step_job_in_flight_across_an_erase_and_a_new_message_writes_nothing_back() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511977776666";
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, contact, &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step was requested");

    // The step's summary call hangs; meanwhile the contact is erased and writes
    // again as a new conversation. Then the summary comes back.
    stack.standin.faults(json!([{"hang_ms": 5_000}])).await;
    let path = format!("/v1/contacts/{contact}");
    let (_, fresh) = tokio::join!(stack.drain(), async {
        until_the_faults_are_taken(&stack).await;
        let erased = stack.call("DELETE", &path, TENANT, None).await;
        assert_eq!(erased.status, 200, "{}", erased.raw);
        for i in 0..3 {
            let reply = stack.post(TENANT, contact, &format!("hello {i}")).await;
            assert_eq!(reply.status, 200, "{}", reply.raw);
        }
        stack.memory(TENANT, contact).await
    });
    let log = stack.standin.requests().await;
    assert!(
        model_calls(&log).iter().any(|c| is_compactor_call(c)),
        "the step reached the model"
    );

    let memory = stack.memory(TENANT, contact).await;
    assert_eq!(memory, fresh, "the new conversation is intact");
    assert_eq!(
        (
            &memory["session"]["summary"],
            &memory["session"]["summarized_until"],
            &memory["session"]["steps"]
        ),
        (&Value::Null, &json!(0), &json!(0)),
        "{memory}"
    );
    let texts = stored_texts(&stack, contact).await;
    assert!(
        !texts.contains("turn 00"),
        "the erased conversation came back"
    );
    let messages = stack.stored_messages(TENANT, contact).await;
    assert_eq!(messages.len(), 6, "{messages:?}");
}

#[tokio::test]
async fn no_job_in_the_queue_or_the_dead_letter_queue_names_the_contact() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_500, 4)).await;
    let contact = "+5511966665555";
    assert_eq!(
        stack.post(TENANT, contact, "Hi, I'm Tereza").await.status,
        200
    );
    stack.age_contact(TENANT, contact, 2 * 86_400).await;
    // A new session: its facts job for session 1 fails every time (an answer the
    // compactor cannot read) and ends in the dead-letter queue.
    assert_eq!(stack.post(TENANT, contact, "hello again").await.status, 200);
    // (One more unreadable answer is session 1's search summary: see
    // `a_facts_job_that_ended_in_the_dead_letter_queue_is_requested_again_later`.)
    let unreadable = json!({"content": [{"type": "text", "text": "no idea"}]});
    stack
        .standin
        .script(json!([unreadable, unreadable, unreadable, unreadable]))
        .await;
    stack.drain().await;
    // A step job waits in the queue.
    let mut queued = false;
    for i in 0..8 {
        let reply = stack.post(TENANT, contact, &turn(i)).await;
        queued |= reply.body["compaction_queued"] == true;
    }
    assert!(queued, "a step is in the queue");
    let erased = stack
        .call("DELETE", &format!("/v1/contacts/{contact}"), TENANT, None)
        .await;
    assert_eq!(erased.status, 200);

    let waiting = queue_bodies(&stack, &stack.queue.queue_url).await;
    let dead = queue_bodies(&stack, &stack.dlq_url).await;
    assert!(
        !waiting.is_empty() && !dead.is_empty(),
        "{waiting:?} {dead:?}"
    );
    for body in waiting.iter().chain(&dead) {
        assert!(
            !body.contains("5511966665555"),
            "a job names the contact: {body}"
        );
        let job: Value = serde_json::from_str(body).unwrap();
        assert_eq!(job["tenant"], TENANT, "{body}");
    }
}

// ---------------------------------------------------------------------------------
// Time passing, and DynamoDB's TTL
// ---------------------------------------------------------------------------------

/// Every time a contact's items hold (seconds since the epoch).
const TIME_ATTRIBUTES: &[&str] = &[
    "last_activity",
    "sweep_sk",
    "expires_at",
    "created_at",
    "updated_at",
    "lease_until",
    "facts_pending_since",
];

/// Moves every stored time of the contact back by `seconds`: to the functions,
/// which read the real clock, as if that much time had passed since.
async fn time_passes(stack: &FullStack, contact: &str, seconds: i64) {
    for item in stack.contact_items(TENANT, contact).await {
        let present: Vec<&str> = TIME_ATTRIBUTES
            .iter()
            .copied()
            .filter(|name| matches!(item.get(*name), Some(AttributeValue::N(_))))
            .collect();
        if present.is_empty() {
            continue;
        }
        let set: Vec<String> = present.iter().map(|n| format!("{n} = {n} - :s")).collect();
        stack
            .dynamodb
            .update_item()
            .table_name(&stack.table)
            .key("pk", item["pk"].clone())
            .key("sk", item["sk"].clone())
            .update_expression(format!("SET {}", set.join(", ")))
            .expression_attribute_values(":s", AttributeValue::N(seconds.to_string()))
            .send()
            .await
            .unwrap();
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Deletes one item, raw.
async fn delete_item(stack: &FullStack, item: &RawItem) {
    stack
        .dynamodb
        .delete_item()
        .table_name(&stack.table)
        .key("pk", item["pk"].clone())
        .key("sk", item["sk"].clone())
        .send()
        .await
        .unwrap();
}

/// What DynamoDB's TTL may do at any moment, in any order: delete one expired
/// item. Here the contact's first expired message; true when there was one.
async fn ttl_deletes_the_first_expired_message(stack: &FullStack, contact: &str) -> bool {
    let items = stack.contact_items(TENANT, contact).await;
    let expired = items.iter().find(|item| {
        attr_s(item, "sk").starts_with("S#")
            && item.contains_key("expires_at")
            && attr_n(item, "expires_at") as i64 <= now()
    });
    match expired {
        Some(item) => {
            delete_item(stack, item).await;
            true
        }
        None => false,
    }
}

fn retaining(days: u32, idle_minutes: u64) -> TenantConfig {
    TenantConfig {
        transcript_retention_days: Some(days),
        session_idle_minutes: Some(idle_minutes),
        ..compacting(1_000_000, 12)
    }
}

// ---------------------------------------------------------------------------------
// Retention
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn messages_and_the_head_expire_counted_from_when_the_session_can_close() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &retaining(2, 60)).await;
    assert_eq!(stack.post(TENANT, "vera", "hello").await.status, 200);
    let after_close = (HOUR + 2 * DAY) as u64;
    let items = stack.contact_items(TENANT, "vera").await;
    let messages: Vec<&RawItem> = items
        .iter()
        .filter(|item| attr_s(item, "sk").starts_with("S#"))
        .collect();
    assert_eq!(messages.len(), 2);
    for message in messages {
        assert_eq!(
            attr_n(message, "expires_at"),
            attr_n(message, "created_at") + after_close,
            "{message:?}"
        );
    }
    let head = stack.raw_head(TENANT, "vera").await.unwrap();
    assert_eq!(
        attr_n(&head, "expires_at"),
        attr_n(&head, "last_activity") + after_close,
        "{head:?}"
    );
}

#[tokio::test]
async fn an_open_session_keeps_its_window_while_its_retention_passes() {
    let stack = FullStack::start(&[]).await;
    // One day of retention, and a session that stays open for days: the contact
    // writes every 20 hours, under the 24-hour idle timeout.
    stack.configure(TENANT, &retaining(1, 24 * 60)).await;
    let first = stack
        .post(TENANT, "wilma", "any free slots on 2026-12-01?")
        .await;
    assert_eq!(first.status, 200, "{}", first.raw);
    assert!(round_of(&first).1 >= 4, "a tool round: {}", first.raw);
    for i in 0..3 {
        time_passes(&stack, "wilma", 20 * HOUR).await;
        ttl_deletes_the_first_expired_message(&stack, "wilma").await;
        let reply = stack
            .post(TENANT, "wilma", &format!("still there? {i}"))
            .await;
        assert_eq!(reply.status, 200, "after {}h: {}", 20 * (i + 1), reply.raw);
        assert_eq!(reply.body["session"], 1, "the session stayed open");
    }
    let messages = stack.stored_messages(TENANT, "wilma").await;
    assert_eq!(messages[0].text(), "any free slots on 2026-12-01?");
    assert_eq!(
        messages.len() as u64,
        round_of(&first).1 + 6,
        "none expired"
    );
}

#[tokio::test]
async fn a_hole_in_the_window_is_skipped_to_the_first_safe_start_after_it() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_000_000, 12)).await;
    for i in 0..3 {
        let reply = stack.post(TENANT, "xana", &turn(i)).await;
        assert_eq!(reply.status, 200, "{}", reply.raw);
    }
    let messages = stack.stored_messages(TENANT, "xana").await;
    // The booking round's tool call goes (TTL, a bug, a hand edit): its result
    // would be an orphan.
    let booking = messages.iter().position(|m| m.text() == turn(1)).unwrap();
    assert_eq!(messages[booking + 1].role, "assistant");
    let items = stack.contact_items(TENANT, "xana").await;
    let sk = format!("S#000001#M#{:08}", messages[booking + 1].seq);
    let tool_call = items.iter().find(|item| attr_s(item, "sk") == sk).unwrap();
    delete_item(&stack, tool_call).await;

    let reply = stack.post(TENANT, "xana", "and now?").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let log = stack.standin.requests().await;
    let last = model_calls(&log)
        .into_iter()
        .rev()
        .find(|c| !is_compactor_call(c))
        .unwrap();
    let sent = message_texts(last);
    assert_eq!(
        sent.first().map(String::as_str),
        Some(turn(2).as_str()),
        "{sent:?}"
    );
    assert_eq!(last["body"]["messages"][0]["role"], "user");
}

#[tokio::test]
async fn a_head_past_its_retention_is_gone_for_the_memory_view_and_the_next_message_starts_over() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &retaining(1, 60)).await;
    assert_eq!(stack.post(TENANT, "yara", "hello").await.status, 200);
    time_passes(&stack, "yara", HOUR + DAY + 60).await;
    let memory = stack
        .call("GET", "/v1/contacts/yara/memory", TENANT, None)
        .await;
    assert_eq!(memory.status, 404, "{}", memory.raw);
    let reply = stack.post(TENANT, "yara", "hello again").await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let memory = stack.memory(TENANT, "yara").await;
    assert_eq!(memory["session"]["open"], true, "{memory}");
    assert_eq!(memory["session"]["summary"], Value::Null, "{memory}");
}

#[tokio::test]
async fn a_transcript_retention_of_zero_or_shorter_than_the_idle_timeout_is_refused() {
    let stack = FullStack::start(&[]).await;
    for (tenant, config) in [
        ("zero", retaining(0, 60)),
        ("short", retaining(1, 2 * 24 * 60)),
    ] {
        stack.configure(tenant, &config).await;
        let reply = stack.post(tenant, "zeca", "hello").await;
        // Its own error type, naming the field (a bare internal_error before).
        assert_eq!(
            (reply.status, reply.error_type()),
            (500, Some("tenant_config_invalid")),
            "{tenant}: {}",
            reply.raw
        );
        assert!(
            reply.raw.contains("transcript_retention_days"),
            "{}",
            reply.raw
        );
        assert!(
            stack.contact_items(tenant, "zeca").await.is_empty(),
            "{tenant}"
        );
    }
}

// ---------------------------------------------------------------------------------
// Facts that end in the dead-letter queue, and the sweep
// ---------------------------------------------------------------------------------

async fn sweep(stack: &FullStack) -> Value {
    stack
        .compactor
        .invoke(json!({"sweep": true}))
        .await
        .expect("the sweep answered")
}

#[tokio::test]
async fn a_facts_job_that_ended_in_the_dead_letter_queue_is_requested_again_later() {
    let stack = FullStack::start(&[]).await;
    stack.configure(TENANT, &compacting(1_000_000, 12)).await;
    let contact = "tereza";
    assert_eq!(
        stack.post(TENANT, contact, "Hi, I'm Tereza").await.status,
        200
    );
    time_passes(&stack, contact, 2 * DAY).await;
    assert_eq!(stack.post(TENANT, contact, "hello again").await.status, 200);
    // Session 1's extraction fails every time (an answer it cannot read); one more
    // such answer is session 1's search summary (the index job, in a message
    // group of its own, runs before or after, and a text is a summary).
    let unreadable = json!({"content": [{"type": "text", "text": "no idea"}]});
    stack
        .standin
        .script(json!([unreadable, unreadable, unreadable, unreadable]))
        .await;
    stack.drain().await;
    let dead = queue_bodies(&stack, &stack.dlq_url).await;
    assert_eq!(dead.len(), 1, "the job is dead-lettered: {dead:?}");
    assert_eq!(stack.memory(TENANT, contact).await["facts"], json!([]));

    // Hours later (the session still open), the sweep requests it again.
    time_passes(&stack, contact, 7 * HOUR).await;
    let report = sweep(&stack).await;
    assert_eq!(report["enqueued"], 1, "{report}");
    let proposal = json!({"facts": [{"key": "name", "value": "Tereza", "seq": 1}]});
    stack
        .standin
        .script(json!([{"content": [{"type": "tool_use", "id": "toolu_f", "name": "record_facts", "input": proposal}]}]))
        .await;
    stack.drain().await;
    let memory = stack.memory(TENANT, contact).await;
    assert_eq!(memory["facts"][0]["value"], "Tereza", "{memory}");
    assert_eq!(
        memory["facts"][0]["source"],
        json!({"session": 1, "seq": 1})
    );
    // Done: the next sweeps do not request it again.
    time_passes(&stack, contact, 7 * HOUR).await;
    assert_eq!(sweep(&stack).await["enqueued"], 0);
}

#[tokio::test]
async fn the_number_of_sweep_buckets_is_a_deployment_setting() {
    let stack = FullStack::start_with(&StackOptions {
        env: vec![("SWEEP_BUCKETS".to_owned(), "1".to_owned())],
        ..StackOptions::default()
    })
    .await;
    let contacts = ["ana", "bia", "caio", "dani"];
    for contact in contacts {
        assert_eq!(stack.post(TENANT, contact, "hello").await.status, 200);
        let head = stack.raw_head(TENANT, contact).await.unwrap();
        assert_eq!(attr_s(&head, "sweep_pk"), "OPEN#0", "{contact}: {head:?}");
    }
    for contact in contacts {
        time_passes(&stack, contact, 2 * DAY).await;
    }
    let report = sweep(&stack).await;
    assert_eq!(
        (report["found"].clone(), report["enqueued"].clone()),
        (json!(4), json!(4)),
        "{report}"
    );
}
