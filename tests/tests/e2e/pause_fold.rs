//! The pause fold end to end: the real `ask` and `compactor` binaries on a clock
//! moved by `CLOCK_OFFSET_FILE`, the stand-in's cache on a manual clock moved by
//! the same gaps, the scheduled sweep's input, the jobs queue on moto and the
//! bridge. A contact silent past its entries' lifetime has its window folded
//! below the threshold, and the request that resumes writes the small context;
//! one whose one-hour entry still lives is left alone; one whose rhythm says it
//! comes back the next day keeps fewer messages than one back within the hour.

use degrau::plan::cache_ttl::CacheTtlPolicy;
use degrau::tenant::TenantConfig;
use degrau_tests::stack::{FullStack, is_compactor_call};
use serde_json::{Value, json};

use crate::helpers::{ClockOffset, stack_on_moved_clocks};

/// About 250 tokens: a dozen of them and their answers make a window of a few
/// thousand tokens, far below the threshold set here.
fn message(tenant: &str, turn: usize) -> String {
    format!(
        "({tenant}, message {turn}) About my booking on Friday: {}",
        "my sister and I both need a haircut, and mornings suit us best. ".repeat(14)
    )
}

fn config(tenant: &str, cache_ttl: CacheTtlPolicy) -> TenantConfig {
    TenantConfig {
        instructions: Some(format!("[{tenant}] You book haircuts. Answer briefly.")),
        // No step would come from the threshold in this conversation.
        compaction_threshold_tokens: Some(50_000),
        window_keep_messages: Some(4),
        cache_ttl: Some(cache_ttl),
        ..TenantConfig::default()
    }
}

async fn sweep(stack: &FullStack) -> Value {
    stack
        .compactor
        .invoke(json!({"sweep": true}))
        .await
        .expect("the sweep answered")
}

/// The answer-model calls the stand-in logged for `tenant`, oldest first.
fn calls_of(log: &[Value], tenant: &str) -> Vec<Value> {
    log.iter()
        .filter(|call| !is_compactor_call(call) && call["status"] == 200)
        .filter(|call| {
            call["body"]["system"][0]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with(&format!("[{tenant}]")))
        })
        .cloned()
        .collect()
}

fn usage(call: &Value, field: &str) -> u64 {
    call["response"]["usage"][field].as_u64().unwrap_or(0)
}

fn context(call: &Value) -> u64 {
    usage(call, "input_tokens")
        + usage(call, "cache_read_input_tokens")
        + usage(call, "cache_creation_input_tokens")
}

/// Moves both clocks `seconds` forward.
async fn pass(stack: &FullStack, offset: &ClockOffset, now: &mut u64, seconds: u64) {
    *now += seconds;
    offset.set(*now as i64);
    stack.standin.advance_clock(seconds).await;
}

#[tokio::test]
async fn a_pause_past_the_entries_folds_the_window_and_the_resume_writes_a_small_context() {
    let (stack, offset) = stack_on_moved_clocks("pause-fold").await;
    // `five`: five-minute entries; `hour`: every entry an hour.
    stack
        .configure("five", &config("five", CacheTtlPolicy::FiveMinutes))
        .await;
    stack
        .configure("hour", &config("hour", CacheTtlPolicy::OneHour))
        .await;
    let mut now = 0;
    for turn in 0..10 {
        pass(&stack, &offset, &mut now, 30).await;
        for tenant in ["five", "hour"] {
            let reply = stack.post(tenant, "ana", &message(tenant, turn)).await;
            assert_eq!(reply.status, 200, "{tenant}, turn {turn}: {}", reply.raw);
        }
    }
    stack.drain().await;
    for tenant in ["five", "hour"] {
        let memory = stack.memory(tenant, "ana").await;
        assert_eq!(memory["session"]["steps"], 0, "{tenant}: {memory}");
    }

    // Ten minutes of silence: the five-minute entries are gone, the hour's live.
    pass(&stack, &offset, &mut now, 10 * 60).await;
    let report = sweep(&stack).await;
    assert_eq!(report["folds"], 1, "{report}");
    let reports = stack.drain().await;
    assert_eq!(reports.iter().map(|r| r.failed).sum::<usize>(), 0);
    let folded = stack.memory("five", "ana").await;
    assert_eq!(folded["session"]["steps"], 1, "{folded}");
    assert!(
        folded["session"]["summary"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let alive = stack.memory("hour", "ana").await;
    assert_eq!(
        alive["session"]["steps"], 0,
        "an hour's entry still lives: {alive}"
    );
    // Folded once: the next sweep asks for nothing more.
    let again = sweep(&stack).await;
    assert_eq!(again["folds"], 0, "{again}");

    // The contact resumes: the request carries the folded context, far smaller
    // than the last one, and writes it (nothing was left to read).
    let earlier = calls_of(&stack.standin.requests().await, "five").len();
    let reply = stack.post("five", "ana", &message("five", 10)).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    let log = stack.standin.requests().await;
    let five = calls_of(&log, "five");
    // The last call before the pause, and the resuming round's first.
    let (before, resumed) = (&five[earlier - 1], &five[earlier]);
    assert_eq!(usage(resumed, "cache_read_input_tokens"), 0, "{resumed:#?}");
    assert!(
        context(resumed) * 2 < context(before),
        "resumed at {} tokens after {}",
        context(resumed),
        context(before)
    );
    let summaries = log.iter().filter(|call| is_compactor_call(call)).count();
    assert_eq!(summaries, 1, "one summary request: the fold's");

    // Past the hour (and a sweep period), the hour's entries are gone too.
    pass(&stack, &offset, &mut now, 55 * 60).await;
    let late = sweep(&stack).await;
    // The hour's head, and the resumed one (whose fold finds little to take off).
    assert!(late["folds"].as_u64().unwrap() >= 1, "{late}");
    stack.drain().await;
    let hour = stack.memory("hour", "ana").await;
    assert_eq!(hour["session"]["steps"], 1, "{hour}");
}

#[tokio::test]
async fn a_contact_back_the_next_day_is_folded_to_fewer_messages_than_one_back_within_the_hour() {
    let (stack, offset) = stack_on_moved_clocks("pause-fold-rhythm").await;
    // A step keeps 8 messages; the fold's keep is the default (4). By message
    // count only: these windows are counted in messages.
    let rhythm = |tenant: &str| TenantConfig {
        window_keep_messages: Some(8),
        window_keep_tokens: Some(0),
        ..config(tenant, CacheTtlPolicy::FiveMinutes)
    };
    stack.configure("night", &rhythm("night")).await;
    stack.configure("lunch", &rhythm("lunch")).await;
    // Every other gap a night (18 hours, within the day's idle timeout) for
    // one, a lunch break (20 minutes) for the other, who writes after the first
    // has finished (the clocks move for both).
    let mut now = 0;
    for (tenant, gap) in [("night", 18 * 3600), ("lunch", 20 * 60)] {
        for turn in 0..10 {
            let wait = if turn % 2 == 1 { gap } else { 30 };
            pass(&stack, &offset, &mut now, wait).await;
            let reply = stack.post(tenant, "ana", &message(tenant, turn)).await;
            assert_eq!(reply.status, 200, "{tenant}, turn {turn}: {}", reply.raw);
        }
    }
    stack.drain().await;
    // An hour and a minute of silence: every entry is gone, whichever lifetime.
    pass(&stack, &offset, &mut now, 61 * 60).await;
    let report = sweep(&stack).await;
    assert_eq!(report["folds"], 2, "{report}");
    let reports = stack.drain().await;
    assert_eq!(reports.iter().map(|r| r.failed).sum::<usize>(), 0);
    for (tenant, kept) in [("night", 4), ("lunch", 8)] {
        let memory = stack.memory(tenant, "ana").await;
        let session = &memory["session"];
        assert_eq!(session["steps"], 1, "{tenant}: {memory}");
        let window =
            session["last_seq"].as_u64().unwrap() - session["summarized_until"].as_u64().unwrap();
        assert_eq!(window, kept, "{tenant}: {memory}");
    }
}
