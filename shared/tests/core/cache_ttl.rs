//! The cache TTL policy through the ask service: the gap record each round writes
//! on the head, and the lifetimes the stable prefix and the messages get in every
//! request of a round under `auto` and the fixed policies, each the cheapest by
//! its expected cost; and the token-sized keep of a compaction step, which keeps
//! the request after the step long enough to cache.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use degrau::domain::{ContentBlock, Head, Role, StoredMessage};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::cache_ttl::{
    CacheTtlPolicy, FIVE_MINUTES, GAP_RECORD_LEN, MIN_CACHEABLE_TOKENS, ONE_HOUR, RequestSizes,
};
use degrau::plan::pruning::{PruneDecision, apply};
use degrau::plan::request::{CacheTtl, Lifetimes, ModelRequest};
use degrau::plan::step_plan::{CompactionPolicy, plan_step, window_tokens};
use degrau::store::RoundStore;
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::testing::msg;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{START, ask_service, key, minute, records_of, test_clock};

const MINUTE: i64 = 60;
/// 115 characters: 40 of them are 1,150 tokens at four characters a token.
const LONG_INSTRUCTIONS: &str = "Answer briefly and book only what the customer confirmed; \
check the free slots first and give the confirmation id. ";
const HOUR: i64 = 3600;

/// The lifetimes of a request's system breakpoints and of its message ones.
fn lifetimes(request: &ModelRequest) -> (Vec<CacheTtl>, Vec<CacheTtl>) {
    let system = request
        .system
        .iter()
        .filter_map(|b| b.cache_control.map(|c| c.lifetime()))
        .collect();
    let messages = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| b.cache_control.map(|c| c.lifetime()))
        .collect();
    (system, messages)
}

struct Conversation {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<std::sync::atomic::AtomicI64>,
    service: degrau::converse::Converse,
}

impl Conversation {
    /// A conversation whose tenant's instructions alone make the stable prefix
    /// long enough to cache (`auto` gives a shorter one five minutes).
    fn new(defaults: Defaults) -> Self {
        Self::with_instructions(defaults, LONG_INSTRUCTIONS.repeat(40))
    }

    fn with_instructions(defaults: Defaults, instructions: String) -> Self {
        let defaults = Defaults {
            instructions,
            ..defaults
        };
        let store = Arc::new(MemoryStore::new());
        let model = Arc::new(ScriptedModel::default());
        let (clock, now) = test_clock();
        let service = ask_service(
            &store,
            model.clone(),
            Arc::new(ToolDispatch::built_in_only()),
            Arc::new(NoJobs),
            defaults,
            now,
        );
        Conversation {
            store,
            model,
            clock,
            service,
        }
    }

    /// A turn `gap` seconds after the previous one, answered at once; returns the
    /// lifetimes its request gave its breakpoints, and the head after it.
    async fn turn_after(&self, gap: i64) -> (Lifetimes, Head) {
        self.say_after(gap, "hello", "ok").await
    }

    /// [`Conversation::turn_after`] with the user's `text` and the model's `reply`.
    async fn say_after(&self, gap: i64, text: &str, reply: &str) -> (Lifetimes, Head) {
        self.clock.fetch_add(gap, Ordering::SeqCst);
        self.model.push(ScriptedModel::text(reply, usage()));
        self.service
            .ask(&key(), text, None, minute())
            .await
            .unwrap();
        let request = self.model.requests().pop().unwrap();
        let now = self.clock.load(Ordering::SeqCst);
        let head = self.store.load_turn(&key(), now).await.unwrap().head;
        (lifetimes_of(&request), head.unwrap())
    }
}

/// The request's lifetimes, checked to be one of the three a request may have:
/// both system blocks alike, every message breakpoint alike, never five minutes
/// before an hour.
fn lifetimes_of(request: &ModelRequest) -> Lifetimes {
    let (system, messages) = lifetimes(request);
    assert_eq!(system.len(), 2);
    assert_eq!(system[0], system[1], "both system blocks alike");
    assert!(
        messages.iter().all(|&ttl| ttl == messages[0]),
        "message breakpoints alike: {messages:?}"
    );
    assert_eq!(degrau::plan::validate::validate_request(request), Ok(()));
    match (system[0], messages[0]) {
        (CacheTtl::FiveMinutes, CacheTtl::FiveMinutes) => Lifetimes::FiveMinutes,
        (CacheTtl::OneHour, CacheTtl::FiveMinutes) => Lifetimes::PrefixForAnHour,
        (CacheTtl::OneHour, CacheTtl::OneHour) => Lifetimes::AllForAnHour,
        other => panic!("five minutes before an hour: {other:?}"),
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 500,
        output_tokens: 5,
        ..Usage::default()
    }
}

#[tokio::test]
async fn auto_gives_everything_an_hour_once_the_conversation_pauses() {
    let c = Conversation::new(Defaults {
        cache_ttl: CacheTtlPolicy::Auto,
        ..Defaults::default()
    });
    // A new contact: no gap yet, five minutes.
    let (ttl, head) = c.turn_after(0).await;
    assert_eq!(ttl, Lifetimes::FiveMinutes);
    assert!(head.recent_gaps.is_empty());
    // Quick replies: still five minutes.
    let (ttl, head) = c.turn_after(40).await;
    assert_eq!((ttl, head.recent_gaps), (Lifetimes::FiveMinutes, vec![40]));
    // A pause of twenty minutes: an hour's entries would have lived through it.
    let (ttl, head) = c.turn_after(20 * MINUTE).await;
    assert_eq!(ttl, Lifetimes::AllForAnHour);
    assert_eq!(head.recent_gaps, [40, 1200]);
    let (ttl, _) = c.turn_after(10).await;
    assert_eq!(
        ttl,
        Lifetimes::AllForAnHour,
        "one pause in three gaps is enough"
    );
    // A message much longer than what is cached before it: the messages are
    // mostly new, an hour does not pay for them; the long prefix still earns it.
    let long = "I need to move every booking of the family. ".repeat(175);
    let (ttl, _) = c.say_after(30, &long, "ok").await;
    assert_eq!(ttl, Lifetimes::PrefixForAnHour);
    // Next-day returns only: an hour does not help and costs more.
    let c = Conversation::new(Defaults::default());
    c.turn_after(0).await;
    let (ttl, head) = c.turn_after(20 * HOUR).await;
    assert_eq!(ttl, Lifetimes::FiveMinutes);
    assert_eq!(head.recent_gaps, [20 * 3600]);
}

#[tokio::test]
async fn a_short_prefix_gets_the_hour_once_the_window_is_long_enough_to_cache() {
    // The same rhythm with instructions far too short to cache alone.
    let c = Conversation::with_instructions(Defaults::default(), "Be brief.".into());
    c.turn_after(0).await;
    c.turn_after(40).await;
    let (ttl, head) = c.turn_after(20 * MINUTE).await;
    assert_eq!(ttl, Lifetimes::FiveMinutes, "a request under 1,024 tokens");
    assert_eq!(head.recent_gaps, [40, 1200]);
    // Replies that fill the window past the minimum: the whole request earns
    // the hour, the prefix alone never would.
    let reply = "Friday at nine is free, and so are ten and eleven. ".repeat(30);
    for _ in 0..3 {
        c.say_after(20, "and Saturday?", &reply).await;
    }
    let (ttl, _) = c.turn_after(15 * MINUTE).await;
    assert_eq!(ttl, Lifetimes::AllForAnHour);
}

#[tokio::test]
async fn every_request_of_a_round_gets_the_same_lifetimes() {
    let c = Conversation::new(Defaults::default());
    // A window the pause would make the model read again, long beside the day's
    // slot list the tool loop adds: the messages earn the hour on their own in
    // every request of the round, not only the prefix.
    let reply = "Friday at nine is free, and so are ten and eleven. ".repeat(80);
    c.say_after(0, "and Friday?", &reply).await;
    c.say_after(20, "and Saturday?", &reply).await;
    c.turn_after(20).await;
    c.clock.fetch_add(15 * MINUTE, Ordering::SeqCst);
    c.model.push(ScriptedModel::tool_call(
        "1",
        "list_free_slots",
        json!({"day": "2026-12-01"}),
        usage(),
    ));
    c.model.push(ScriptedModel::text("Here they are.", usage()));
    c.service
        .ask(&key(), "slots?", None, minute())
        .await
        .unwrap();
    let requests = c.model.requests();
    assert_eq!(
        requests.len(),
        5,
        "three rounds, then a call and its answer"
    );
    let gaps = [20, 20, 15 * 60];
    for request in &requests[3..] {
        let sizes = request.sizes();
        let costs = ALL_LIFETIMES.map(|l| expected_cost(l, &gaps, sizes));
        assert_eq!(lifetimes_of(request), Lifetimes::AllForAnHour, "{sizes:?}");
        assert_eq!(
            expected_cost(Lifetimes::AllForAnHour, &gaps, sizes),
            cheapest(&gaps, sizes),
            "{sizes:?}: 5m, 1h-prefix, 1h cost {costs:?}"
        );
    }
}

#[tokio::test]
async fn fixed_policies_hold_whatever_the_gaps_and_a_tenant_overrides_the_default() {
    let c = Conversation::new(Defaults {
        cache_ttl: CacheTtlPolicy::OneHour,
        ..Defaults::default()
    });
    assert_eq!(c.turn_after(0).await.0, Lifetimes::AllForAnHour);
    assert_eq!(c.turn_after(5).await.0, Lifetimes::AllForAnHour);
    c.store
        .put_tenant_config(
            &key().tenant,
            &TenantConfig {
                cache_ttl: Some(CacheTtlPolicy::FiveMinutes),
                ..TenantConfig::default()
            },
        )
        .await
        .unwrap();
    let (ttl, head) = c.turn_after(20 * MINUTE).await;
    assert_eq!(ttl, Lifetimes::FiveMinutes);
    assert_eq!(head.recent_gaps, [5, 1200], "the record is kept either way");
}

#[tokio::test]
async fn the_gap_record_is_bounded_outlives_a_session_and_goes_with_an_erase() {
    let c = Conversation::new(Defaults::default());
    c.turn_after(0).await;
    for gap in 1..=12 {
        c.turn_after(gap).await;
    }
    let now = c.clock.load(Ordering::SeqCst);
    let head = c.store.load_turn(&key(), now).await.unwrap().head.unwrap();
    assert_eq!(head.recent_gaps.len(), GAP_RECORD_LEN);
    assert_eq!(head.recent_gaps.last(), Some(&12));
    // A day and a half later (past the default idle timeout): a new session,
    // the same contact's rhythm.
    let (_, head) = c.turn_after(36 * HOUR).await;
    assert_eq!(head.session, 2);
    assert_eq!(head.recent_gaps.len(), GAP_RECORD_LEN);
    assert_eq!(head.recent_gaps.last(), Some(&(36 * 3600)));
    assert_eq!(head.recent_gaps[GAP_RECORD_LEN - 2], 12);
    // An erased contact starts over.
    records_of(&c.service, &c.store)
        .erase(&key())
        .await
        .unwrap();
    let (ttl, head) = c.turn_after(20 * MINUTE).await;
    assert!(head.recent_gaps.is_empty());
    assert_eq!(ttl, Lifetimes::FiveMinutes);
    assert!(START < c.clock.load(Ordering::SeqCst));
}

#[tokio::test]
async fn the_context_for_a_clients_own_loop_names_the_lifetimes_ask_would_choose() {
    let c = Conversation::new(Defaults::default());
    c.turn_after(0).await;
    c.turn_after(40).await;
    let five = c.service.context(&key(), minute()).await.unwrap();
    assert_eq!(five.context.cache_control.lifetime(), CacheTtl::FiveMinutes);
    c.turn_after(20 * MINUTE).await;
    // The next request comes after the recorded gaps [40, 1200]: an hour for all.
    let view = c.service.context(&key(), minute()).await.unwrap();
    let json = serde_json::to_value(&view).unwrap();
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(json["cache_control"], hour);
    assert_eq!(json["system"][0]["cache_control"], hour);
    assert_eq!(json["system"][1]["cache_control"], hour);
    let marked: Vec<&serde_json::Value> = json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter_map(|b| b.get("cache_control"))
        .collect();
    assert_eq!(marked, [&hour], "the previous request's end");
}

/// The price of a cache write under `ttl`, in base input tokens a token.
fn write_price(ttl: CacheTtl) -> f64 {
    match ttl {
        CacheTtl::FiveMinutes => 1.25,
        CacheTtl::OneHour => 2.0,
    }
}

/// Seconds an entry of `ttl` outlives its last hit.
fn life(ttl: CacheTtl) -> u32 {
    match ttl {
        CacheTtl::FiveMinutes => FIVE_MINUTES,
        CacheTtl::OneHour => ONE_HOUR,
    }
}

/// What requests of `sizes` cost, in base input tokens, one after each of `gaps`
/// under `lifetimes`, by the pricing `degrau::plan::cache_ttl` uses (a read 0.1×, a
/// five-minute write 1.25×, a one-hour write 2×): the stable prefix's entry holds
/// the prefix, which is read while the entry lives and written anew once it is
/// gone; the messages' entry holds the rest, whose `new` tokens are written by
/// every request and the rest read while the entry lives. Both parts are taken to
/// be long enough to cache.
fn expected_cost(lifetimes: Lifetimes, gaps: &[u32], sizes: RequestSizes) -> f64 {
    let part = |ttl: CacheTtl, gap: u32, total: u64, new: u64| {
        let (total, new, write) = (total as f64, new as f64, write_price(ttl));
        if gap < life(ttl) {
            0.1 * (total - new) + write * new
        } else {
            write * total
        }
    };
    let messages = sizes.context - sizes.prefix;
    gaps.iter()
        .map(|&gap| {
            part(lifetimes.prefix(), gap, sizes.prefix, 0)
                + part(lifetimes.messages(), gap, messages, sizes.new)
        })
        .sum()
}

const ALL_LIFETIMES: [Lifetimes; 3] = [
    Lifetimes::FiveMinutes,
    Lifetimes::PrefixForAnHour,
    Lifetimes::AllForAnHour,
];

/// The cheapest expected cost of any lifetimes for `sizes` over `gaps`.
fn cheapest(gaps: &[u32], sizes: RequestSizes) -> f64 {
    ALL_LIFETIMES
        .iter()
        .map(|&lifetimes| expected_cost(lifetimes, gaps, sizes))
        .fold(f64::INFINITY, f64::min)
}

#[test]
fn with_the_prefix_held_an_hour_only_the_messages_part_weighs_the_rest() {
    // The case: a 3,000-token prefix, a 200-token window of which the
    // last two messages, 150 tokens, are new in each request, and gaps of 30 s,
    // 20 min and 40 s.
    let gaps = [30, 20 * 60, 40];
    let sizes = RequestSizes {
        prefix: 3_000,
        context: 3_200,
        new: 150,
    };
    let cost = |lifetimes| expected_cost(lifetimes, &gaps, sizes);
    // All five minutes: the prefix read, written after the pause, read (300 +
    // 3,750 + 300); the window 5 + 187.5 read and written, 250 written, again
    // 192.5.
    assert!((cost(Lifetimes::FiveMinutes) - 4_985.0).abs() < 1e-9);
    // The prefix an hour: it is read after every gap (900), the window as above.
    assert!((cost(Lifetimes::PrefixForAnHour) - 1_535.0).abs() < 1e-9);
    // All an hour: the prefix 900, the window 5 + 300 after every gap (915):
    // 18 % more than the prefix alone.
    assert!((cost(Lifetimes::AllForAnHour) - 1_815.0).abs() < 1e-9);
    assert_eq!(
        CacheTtlPolicy::Auto.lifetimes(&gaps, sizes),
        Lifetimes::PrefixForAnHour,
        "1,535 (prefix an hour) against 1,815 (all an hour)"
    );
}

#[test]
fn auto_chooses_the_cheapest_expected_cost_for_any_record_of_cacheable_parts() {
    // Every record of up to four gaps drawn from short, pause and next-day gaps,
    // and requests from a window mostly read again to one mostly new.
    let kinds = [10, 20 * 60, 20 * 3600];
    let requests = [
        (3_000, 3_200, 150),
        (3_000, 3_200, 40),
        (1_500, 9_000, 200),
        (1_200, 4_000, 2_500),
        (2_000, 2_600, 300),
        (5_000, 5_050, 50),
    ];
    for (prefix, context, new) in requests {
        let sizes = RequestSizes {
            prefix,
            context,
            new,
        };
        for len in 1..=4u32 {
            for code in 0..3u32.pow(len) {
                let gaps: Vec<u32> = (0..len)
                    .map(|i| kinds[(code / 3u32.pow(i) % 3) as usize])
                    .collect();
                let chosen = CacheTtlPolicy::Auto.lifetimes(&gaps, sizes);
                let costs = ALL_LIFETIMES.map(|l| expected_cost(l, &gaps, sizes));
                assert!(
                    expected_cost(chosen, &gaps, sizes) <= cheapest(&gaps, sizes) + 1e-9,
                    "{gaps:?}, {sizes:?}: chose {chosen:?}; 5m, 1h-prefix, 1h cost {costs:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_round_whose_window_is_mostly_new_keeps_the_messages_five_minutes_behind_a_long_prefix() {
    // About 3,000 tokens of instructions, and the rhythm: 30 s, 20 min,
    // then a long message 40 s later.
    let c = Conversation::with_instructions(Defaults::default(), LONG_INSTRUCTIONS.repeat(105));
    c.turn_after(0).await;
    c.turn_after(30).await;
    c.turn_after(20 * MINUTE).await;
    let long = "Move the booking of Friday to Saturday morning, please. ".repeat(8);
    let (ttl, head) = c.say_after(40, &long, "ok").await;
    assert_eq!(head.recent_gaps, [30, 1200, 40]);
    let sizes = c.model.requests().pop().unwrap().sizes();
    assert!(sizes.prefix >= MIN_CACHEABLE_TOKENS, "{sizes:?}");
    let cost = |lifetimes| expected_cost(lifetimes, &head.recent_gaps, sizes);
    let (prefix, all) = (
        cost(Lifetimes::PrefixForAnHour),
        cost(Lifetimes::AllForAnHour),
    );
    assert!(prefix < all, "{sizes:?}: 1h-prefix {prefix}, 1h {all}");
    assert!(prefix < cost(Lifetimes::FiveMinutes), "{sizes:?}");
    assert_eq!(
        ttl,
        Lifetimes::PrefixForAnHour,
        "{sizes:?}: 1h-prefix {prefix} against 1h {all}"
    );
}

/// `turns` user turns of four messages each from seq 1: a question, a call to
/// `list_free_slots`, its result (a day's 60 slots, about 290 tokens at four
/// characters a token) and a short answer.
fn slot_turns(turns: usize) -> Vec<StoredMessage> {
    let slots: Vec<String> = (0..60)
        .map(|i| format!("2026-12-01T{:02}:{:02}", 8 + i / 6, i % 6 * 10))
        .collect();
    let result = serde_json::to_string(&slots).unwrap();
    let mut seq = 0;
    let mut next = |role, block| {
        seq += 1;
        msg(seq, role, vec![block])
    };
    (0..turns)
        .flat_map(|turn| {
            let id = format!("toolu_{turn}");
            [
                next(Role::User, ContentBlock::text(format!("day {turn}?"))),
                next(
                    Role::Assistant,
                    ContentBlock::tool_use(&id, "list_free_slots", json!({"day": "2026-12-01"})),
                ),
                next(Role::User, ContentBlock::tool_result(&id, result.clone())),
                next(Role::Assistant, ContentBlock::text("Free all morning.")),
            ]
        })
        .collect()
}

/// What the request after a step holds ahead of the next message, as it will be
/// sent: `prefix_tokens`, and the `kept` messages with the step's pruned copies
/// in place of the results it prunes.
fn held_after(prefix_tokens: u64, kept: &[StoredMessage], prune: &[PruneDecision]) -> u64 {
    let mut sent = kept.to_vec();
    apply(&mut sent, prune);
    prefix_tokens + window_tokens(&sent).iter().sum::<u64>()
}

#[test]
fn a_step_keeps_enough_for_the_request_after_it_to_stay_cacheable_once_it_pruned() {
    // The default policy: twelve messages and 1,024 tokens kept at least, results
    // older than the last two turns pruned. Behind 200 tokens of instructions and
    // contact context, three turns hold 1,024 tokens before the step prunes;
    // after it, the oldest kept result is a placeholder of about 30 tokens.
    let policy = CompactionPolicy::default();
    let messages = slot_turns(12);
    let prefix_tokens = 200;
    let plan = plan_step(&Head::default(), &messages, 8_000, prefix_tokens, &policy).unwrap();
    let kept = &messages[plan.fold_count..];
    assert!(kept[0].is_user_text_only());
    assert!(!plan.prune.is_empty(), "the step prunes old results");
    // Under 1,024 tokens nothing of the request is cached: every request after
    // the step pays each of its tokens at 1× instead of reading them at 0.1×.
    let held = held_after(prefix_tokens, kept, &plan.prune);
    assert!(
        held >= MIN_CACHEABLE_TOKENS,
        "the request after the step holds {held} tokens as sent, under the \
         {MIN_CACHEABLE_TOKENS}-token cacheable minimum ({} messages kept)",
        kept.len()
    );
    // And no more than it takes: a turn fewer would fall under it.
    let shorter = &kept[4..];
    assert!(shorter[0].is_user_text_only());
    let prune: Vec<PruneDecision> = plan
        .prune
        .iter()
        .filter(|d| d.seq >= shorter[0].seq)
        .cloned()
        .collect();
    assert!(held_after(prefix_tokens, shorter, &prune) < MIN_CACHEABLE_TOKENS);
}
