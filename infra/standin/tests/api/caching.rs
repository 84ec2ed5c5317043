//! Prompt-caching accounting: writes at breakpoints, reads looking back 20 blocks,
//! the minimum size, the five-minute and one-hour lifetimes on the stand-in's
//! clock, the creation split, and usage that always adds up.

use degrau::domain::{ContentBlock, Message, Role};
use degrau_standin::{Clock, Config};
use serde_json::{Value, json};

use crate::helpers::{
    TestStandIn, degrau_request, demo_tools, long_instructions, prompt_tokens, start, start_with,
};

fn usage(body: &Value) -> (u64, u64, u64) {
    let u = &body["usage"];
    let field = |name: &str| u[name].as_u64().unwrap_or_else(|| panic!("{name} in {u}"));
    (
        field("input_tokens"),
        field("cache_creation_input_tokens"),
        field("cache_read_input_tokens"),
    )
}

fn first_turn() -> Value {
    degrau_request(
        &long_instructions(),
        &demo_tools(),
        None,
        &[],
        &[Message::user_text("Hello, I'd like a haircut.")],
    )
}

fn second_turn() -> Value {
    degrau_request(
        &long_instructions(),
        &demo_tools(),
        None,
        &[
            Message::user_text("Hello, I'd like a haircut."),
            Message::assistant_text("[offline stand-in] Sure, which day?"),
        ],
        &[Message::user_text("Next Friday, please.")],
    )
}

async fn send(standin: &TestStandIn, body: &Value) -> Value {
    let reply = standin.messages(body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

#[tokio::test]
async fn a_first_request_writes_the_cache_and_the_same_request_reads_it() {
    let standin = start().await;
    let body = first_turn();
    let total = prompt_tokens(&body);
    assert!(total > 1024);

    let (input, creation, read) = usage(&send(&standin, &body).await);
    assert!(creation > 1024, "creation {creation}");
    assert_eq!(read, 0);
    assert_eq!(input + creation + read, total);

    let (input, creation, read) = usage(&send(&standin, &body).await);
    assert!(read > 0);
    assert_eq!(creation, 0);
    assert_eq!(input + creation + read, total);
}

#[tokio::test]
async fn the_next_turn_reads_the_old_prefix_and_writes_only_the_new_part() {
    let standin = start().await;
    let first = first_turn();
    send(&standin, &first).await;
    let second = second_turn();
    let (input, creation, read) = usage(&send(&standin, &second).await);
    assert_eq!(
        read,
        prompt_tokens(&first),
        "the whole previous prompt is read"
    );
    assert_eq!(creation, prompt_tokens(&second) - prompt_tokens(&first));
    assert_eq!(input, 0, "degrau marks the last block");
}

#[tokio::test]
async fn a_prefix_below_the_minimum_is_not_cached() {
    let standin = start().await;
    let body = degrau_request("Be brief.", &[], None, &[], &[Message::user_text("hi")]);
    for _ in 0..2 {
        let (input, creation, read) = usage(&send(&standin, &body).await);
        assert_eq!((creation, read), (0, 0));
        assert_eq!(input, prompt_tokens(&body));
    }
    assert_eq!(standin.running.standin().cache_entries(), 0);
}

#[tokio::test]
async fn the_minimum_is_configurable() {
    let standin = start_with(Config::default().with_min_cacheable_tokens(10)).await;
    let body = degrau_request(
        "Be brief, always.",
        &[],
        None,
        &[],
        &[Message::user_text("hi")],
    );
    let (_, creation, _) = usage(&send(&standin, &body).await);
    assert!(creation > 0);
}

#[tokio::test]
async fn after_six_minutes_the_cache_misses() {
    let standin = start().await;
    let body = first_turn();
    send(&standin, &body).await;
    let clock = standin
        .control("/stand-in/clock", &json!({"advance_seconds": 360}))
        .await;
    assert_eq!(clock.status, 200);
    assert!(clock.body["now_ms"].as_u64().unwrap() >= 360_000);
    let (_, creation, read) = usage(&send(&standin, &body).await);
    assert_eq!(read, 0);
    assert_eq!(creation, prompt_tokens(&body));
}

#[tokio::test]
async fn a_read_within_five_minutes_keeps_the_entry_alive() {
    let standin = start().await;
    let body = first_turn();
    send(&standin, &body).await;
    standin
        .control("/stand-in/clock", &json!({"advance_seconds": 240}))
        .await;
    let (_, _, read) = usage(&send(&standin, &body).await);
    assert!(read > 0);
    standin
        .control("/stand-in/clock", &json!({"advance_seconds": 240}))
        .await;
    let (_, creation, read) = usage(&send(&standin, &body).await);
    assert!(read > 0, "refreshed by the read four minutes ago");
    assert_eq!(creation, 0);
}

/// A round that adds 24 blocks: degrau's breakpoint on the previous request's
/// last message is what lets the read find the old prefix.
#[tokio::test]
async fn more_than_twenty_new_blocks_hit_only_thanks_to_the_old_end_breakpoint() {
    let window = [
        Message::user_text("Hello, I'd like a haircut."),
        Message::assistant_text("[offline stand-in] Sure, which day?"),
    ];
    let asked = Message::user_text("Check every day of December, please.");
    let before = degrau_request(
        &long_instructions(),
        &demo_tools(),
        None,
        &window,
        std::slice::from_ref(&asked),
    );
    let calls = Message {
        role: Role::Assistant,
        content: (0..12)
            .map(|i| {
                ContentBlock::tool_use(
                    format!("t{i}"),
                    "list_free_slots",
                    json!({"day": format!("2026-12-{:02}", i + 1)}),
                )
            })
            .collect(),
    };
    let results = Message {
        role: Role::User,
        content: (0..12)
            .map(|i| ContentBlock::tool_result(format!("t{i}"), "[\"09:00\", \"10:00\"]"))
            .collect(),
    };
    let after = degrau_request(
        &long_instructions(),
        &demo_tools(),
        None,
        &window,
        &[asked, calls, results],
    );

    let standin = start().await;
    send(&standin, &before).await;
    let (_, _, read) = usage(&send(&standin, &after).await);
    assert_eq!(read, prompt_tokens(&before));

    // Without the mark on the old end, only the system prefix is found.
    let mut unmarked = after.clone();
    unmarked["messages"][2]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    let standin = start().await;
    send(&standin, &before).await;
    let (input, creation, read) = usage(&send(&standin, &unmarked).await);
    assert!(read > 0 && read < prompt_tokens(&before), "read {read}");
    assert_eq!(input + creation + read, prompt_tokens(&unmarked));
}

#[tokio::test]
async fn the_three_input_fields_always_add_up_to_the_prompt() {
    let standin = start().await;
    let bodies = [
        first_turn(),
        first_turn(),
        second_turn(),
        degrau_request("Be brief.", &[], None, &[], &[Message::user_text("hi")]),
        second_turn(),
    ];
    for body in &bodies {
        send(&standin, body).await;
    }
    standin
        .control("/stand-in/clock", &json!({"advance_seconds": 600}))
        .await;
    send(&standin, &bodies[2]).await;
    let log = standin.logged().await;
    assert_eq!(log.len(), bodies.len() + 1);
    for call in &log {
        let u = &call["usage"];
        let sum = u["input_tokens"].as_u64().unwrap()
            + u["cache_creation_input_tokens"].as_u64().unwrap()
            + u["cache_read_input_tokens"].as_u64().unwrap();
        assert_eq!(sum, prompt_tokens(&call["body"]));
        assert!(u["output_tokens"].as_u64().unwrap() > 0);
    }
}

/// `usage.cache_creation`: (five-minute, one-hour) writes.
fn split(body: &Value) -> (u64, u64) {
    let c = &body["usage"]["cache_creation"];
    let field = |name: &str| c[name].as_u64().unwrap_or_else(|| panic!("{name} in {c}"));
    (
        field("ephemeral_5m_input_tokens"),
        field("ephemeral_1h_input_tokens"),
    )
}

/// degrau's request with its two system breakpoints marked for an hour.
fn with_stable_prefix_for_an_hour(mut body: Value) -> Value {
    for block in body["system"].as_array_mut().expect("system blocks") {
        block["cache_control"]["ttl"] = json!("1h");
    }
    body
}

async fn advance(standin: &TestStandIn, seconds: u64) -> u64 {
    let clock = standin
        .control("/stand-in/clock", &json!({"advance_seconds": seconds}))
        .await;
    assert_eq!(clock.status, 200, "{}", clock.body);
    clock.body["now_ms"].as_u64().expect("now_ms")
}

#[tokio::test]
async fn usage_splits_creation_into_five_minute_and_one_hour_writes() {
    let standin = start().await;
    let plain = first_turn();
    let body = send(&standin, &plain).await;
    let (_, creation, _) = usage(&body);
    assert_eq!(split(&body), (creation, 0), "no ttl: five-minute writes");
    // Nothing written: the split is still there, in zeros, as the API reports it.
    assert_eq!(split(&send(&standin, &plain).await), (0, 0));

    let standin = start().await;
    let body = send(&standin, &with_stable_prefix_for_an_hour(first_turn())).await;
    let (_, creation, _) = usage(&body);
    let (five, hour) = split(&body);
    assert!(five > 0 && hour > 1024, "{five} {hour}");
    assert_eq!(five + hour, creation);
}

#[tokio::test]
async fn a_one_hour_prefix_outlives_a_pause_that_expires_the_five_minute_part() {
    let standin = start_with(Config::default().with_clock(Clock::Manual)).await;
    let body = with_stable_prefix_for_an_hour(first_turn());
    let (_, hour) = split(&send(&standin, &body).await);

    // Twenty minutes later: the stable prefix is read, the conversation written again.
    advance(&standin, 20 * 60).await;
    let answer = send(&standin, &body).await;
    let (_, creation, read) = usage(&answer);
    assert_eq!(read, hour);
    assert_eq!(split(&answer), (creation, 0));

    // That read renewed it for another hour: 59 minutes on, it is still there.
    advance(&standin, 59 * 60).await;
    let (_, _, read) = usage(&send(&standin, &body).await);
    assert_eq!(read, hour);

    // After 61 minutes without a request everything is gone.
    advance(&standin, 61 * 60).await;
    let answer = send(&standin, &body).await;
    let (_, creation, read) = usage(&answer);
    assert_eq!(read, 0);
    assert_eq!(creation, prompt_tokens(&body));
    assert_eq!(split(&answer).1, hour);
}

#[tokio::test]
async fn a_one_hour_breakpoint_after_a_five_minute_one_is_refused_with_the_api_text() {
    let standin = start().await;
    let mut body = first_turn();
    body["system"][1]["cache_control"]["ttl"] = json!("1h");
    let reply = standin.messages(&body).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["type"], "invalid_request_error");
    assert_eq!(
        reply.body["error"]["message"],
        "system.1.cache_control.ttl: a ttl='1h' cache_control block must not come after a \
         ttl='5m' cache_control block. Note that blocks are processed in the following order: \
         `tools`, `system`, `messages`."
    );
    // Nothing was cached by the refused request.
    assert_eq!(standin.running.standin().cache_entries(), 0);
}

#[tokio::test]
async fn a_manual_clock_moves_only_by_the_advances() {
    let standin = start_with(Config::default().with_clock(Clock::Manual)).await;
    assert_eq!(advance(&standin, 0).await, 0);
    send(&standin, &first_turn()).await;
    assert_eq!(advance(&standin, 299).await, 299_000);
    let (_, creation, _) = usage(&send(&standin, &first_turn()).await);
    assert_eq!(creation, 0, "four minutes 59 seconds: still cached");
    assert_eq!(advance(&standin, 300).await, 599_000);
    let (_, _, read) = usage(&send(&standin, &first_turn()).await);
    assert_eq!(read, 0, "five minutes after its last use it is gone");
}
