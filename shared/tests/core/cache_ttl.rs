//! The cache TTL policy through the ask service: the gap record each round writes
//! on the head, and the lifetimes the stable prefix and the messages get in every
//! request of a round under `auto` and the fixed policies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use degrau::cache_ttl::{CacheTtlPolicy, GAP_RECORD_LEN};
use degrau::domain::Head;
use degrau::jobs::NoJobs;
use degrau::model::scripted::ScriptedModel;
use degrau::request::{CacheTtl, Lifetimes, ModelRequest};
use degrau::store::memory::MemoryStore;
use degrau::store::{Store, TenantStore};
use degrau::tenant::{Defaults, TenantConfig};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{START, ask_service, key, minute, test_clock};

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
    service: degrau::ask::AskService,
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
    assert_eq!(degrau::validate::validate_request(request), Ok(()));
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
    c.turn_after(0).await;
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
    for request in &requests[1..] {
        assert_eq!(lifetimes_of(request), Lifetimes::AllForAnHour);
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
    c.service.erase(&key()).await.unwrap();
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
