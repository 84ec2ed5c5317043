//! The cache TTL policy through the ask service: the gap record each round writes
//! on the head, and the lifetime the stable prefix gets in every request of a
//! round under `auto` and the fixed policies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use degrau::cache_ttl::{CacheTtlPolicy, GAP_RECORD_LEN};
use degrau::domain::Head;
use degrau::jobs::NoJobs;
use degrau::model::scripted::ScriptedModel;
use degrau::request::{CacheTtl, ModelRequest};
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
    /// lifetimes its request gave the system blocks, and the head after it.
    async fn turn_after(&self, gap: i64) -> (CacheTtl, Head) {
        self.clock.fetch_add(gap, Ordering::SeqCst);
        self.model.push(ScriptedModel::text("ok", usage()));
        self.service
            .ask(&key(), "hello", None, minute())
            .await
            .unwrap();
        let request = self.model.requests().pop().unwrap();
        let (system, messages) = lifetimes(&request);
        assert_eq!(system.len(), 2);
        assert_eq!(system[0], system[1], "both system blocks alike");
        assert!(
            messages.iter().all(|&ttl| ttl == CacheTtl::FiveMinutes),
            "message breakpoints stay five minutes"
        );
        let now = self.clock.load(Ordering::SeqCst);
        let head = self.store.load_turn(&key(), now).await.unwrap().head;
        (system[0], head.unwrap())
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
async fn auto_gives_the_stable_prefix_an_hour_once_the_conversation_pauses() {
    let c = Conversation::new(Defaults {
        cache_ttl: CacheTtlPolicy::Auto,
        ..Defaults::default()
    });
    // A new contact: no gap yet, five minutes.
    let (ttl, head) = c.turn_after(0).await;
    assert_eq!(ttl, CacheTtl::FiveMinutes);
    assert!(head.recent_gaps.is_empty());
    // Quick replies: still five minutes.
    let (ttl, head) = c.turn_after(40).await;
    assert_eq!((ttl, head.recent_gaps), (CacheTtl::FiveMinutes, vec![40]));
    // A pause of twenty minutes: an hour's entry would have lived through it.
    let (ttl, head) = c.turn_after(20 * MINUTE).await;
    assert_eq!(ttl, CacheTtl::OneHour);
    assert_eq!(head.recent_gaps, [40, 1200]);
    let (ttl, _) = c.turn_after(10).await;
    assert_eq!(ttl, CacheTtl::OneHour, "one pause in three gaps is enough");
    // The same rhythm with a prefix too short to cache: five minutes.
    let short = Conversation::with_instructions(Defaults::default(), "Be brief.".into());
    short.turn_after(0).await;
    short.turn_after(40).await;
    let (ttl, head) = short.turn_after(20 * MINUTE).await;
    assert_eq!(ttl, CacheTtl::FiveMinutes);
    assert_eq!(head.recent_gaps, [40, 1200]);
    // Next-day returns only: an hour does not help and costs more.
    let c = Conversation::new(Defaults::default());
    c.turn_after(0).await;
    let (ttl, head) = c.turn_after(20 * HOUR).await;
    assert_eq!(ttl, CacheTtl::FiveMinutes);
    assert_eq!(head.recent_gaps, [20 * 3600]);
}

#[tokio::test]
async fn every_request_of_a_round_gives_the_prefix_the_same_lifetime() {
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
        let (system, messages) = lifetimes(request);
        assert_eq!(system, [CacheTtl::OneHour, CacheTtl::OneHour]);
        assert!(messages.iter().all(|&ttl| ttl == CacheTtl::FiveMinutes));
        assert_eq!(degrau::validate::validate_request(request), Ok(()));
    }
}

#[tokio::test]
async fn fixed_policies_hold_whatever_the_gaps_and_a_tenant_overrides_the_default() {
    let c = Conversation::new(Defaults {
        cache_ttl: CacheTtlPolicy::OneHour,
        ..Defaults::default()
    });
    assert_eq!(c.turn_after(0).await.0, CacheTtl::OneHour);
    assert_eq!(c.turn_after(5).await.0, CacheTtl::OneHour);
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
    assert_eq!(ttl, CacheTtl::FiveMinutes);
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
    assert_eq!(ttl, CacheTtl::FiveMinutes);
    assert!(START < c.clock.load(Ordering::SeqCst));
}
