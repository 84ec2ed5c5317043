//! Each tenant's fair share in the ask service, against the in-memory store and
//! quotas: a lease per running ask (refused past the tenant's concurrency, given
//! back when the round ends), rounds per minute and a contact's turns per minute
//! (429 with `Retry-After`, nothing stored), and a round's tool time (a slow tool
//! cut at what is left, the next call not made).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use degrau::converse::{AskError, Converse};
use degrau::fairshare::Limited;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::request::ToolDef;
use degrau::platform::{FairShare, Plan};
use degrau::quota::Quotas;
use degrau::quota::memory::MemoryQuotas;
use degrau::tenant::Defaults;
use degrau::tools::{CallContext, ToolDeclaration, ToolDispatch, ToolOutput, Tools};
use degrau::usage::Usage;
use serde_json::{Value, json};

use crate::helpers::{START, ask_service, contact_key, key, minute, test_clock};

fn defaults(fair: FairShare) -> Defaults {
    Defaults {
        platform: Plan {
            fair,
            ..Plan::default()
        },
        ..Defaults::default()
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    quotas: Arc<MemoryQuotas>,
    service: Converse,
}

fn harness(fair: FairShare, tools: Arc<dyn Tools>) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let quotas = Arc::new(MemoryQuotas::new());
    let (clock, now) = test_clock();
    clock.store(START, Ordering::SeqCst);
    let mut service = ask_service(
        &store,
        model.clone(),
        tools,
        Arc::new(NoJobs),
        defaults(fair),
        now,
    );
    service.quotas = quotas.clone();
    Harness {
        store,
        model,
        quotas,
        service,
    }
}

fn built_in() -> Arc<dyn Tools> {
    Arc::new(ToolDispatch::built_in_only())
}

#[tokio::test]
async fn an_ask_past_the_tenants_concurrency_gets_429_stores_nothing_and_a_finished_one_gives_its_lease_back()
 {
    let fair = FairShare {
        concurrency: Some(1),
        ..FairShare::default()
    };
    let h = harness(fair, built_in());
    // Another ask of the tenant is running.
    let tenant = key().tenant;
    assert!(
        h.quotas
            .acquire_lease(&tenant, "running", 1, START, START + 30)
            .await
            .unwrap()
    );
    let error = h
        .service
        .ask(&key(), "oi", None, minute())
        .await
        .unwrap_err();
    let AskError::Throttled(throttle) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        (throttle.what, throttle.limit, throttle.retry_after),
        (Limited::Concurrency, 1, 1)
    );
    assert_eq!(h.store.item_count(&key()), 0, "nothing stored");
    assert!(h.model.requests().is_empty());
    // Another tenant is not held by it.
    h.model.push(ScriptedModel::text("Olá", usage()));
    let florist = contact_key("florist", "ana");
    assert!(h.service.ask(&florist, "oi", None, minute()).await.is_ok());
    // The running ask ends; the next one runs and gives its own lease back.
    h.quotas.release_lease(&tenant, "running").await.unwrap();
    h.model.push(ScriptedModel::text("Olá", usage()));
    assert!(h.service.ask(&key(), "oi", None, minute()).await.is_ok());
    assert_eq!(h.quotas.leases_held(&tenant, START), 0);
    // A failed ask gives it back too.
    let failed = h.service.ask(&key(), "and now?", None, minute()).await;
    assert!(failed.is_err(), "no scripted answer");
    assert_eq!(h.quotas.leases_held(&tenant, START), 0);
}

#[tokio::test]
async fn rounds_per_minute_and_a_contacts_turns_answer_429_with_the_minutes_rest_and_store_nothing()
{
    let fair = FairShare {
        rounds_per_minute: Some(3),
        contact_turns_per_minute: Some(2),
        ..FairShare::default()
    };
    let h = harness(fair, built_in());
    for text in ["one", "two"] {
        h.model.push(ScriptedModel::text("ok", usage()));
        h.service.ask(&key(), text, None, minute()).await.unwrap();
    }
    let items = h.store.item_count(&key());
    let error = h
        .service
        .ask(&key(), "three", None, minute())
        .await
        .unwrap_err();
    let AskError::Throttled(throttle) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(throttle.what, Limited::ContactTurns);
    assert_eq!(throttle.retry_after, 60 - (START % 60) as u64);
    assert!(error.to_string().contains("retry in"), "{error}");
    assert_eq!(h.store.item_count(&key()), items, "nothing stored");
    let other = contact_key(key().tenant.as_str(), "bia");
    let error = h
        .service
        .ask(&other, "hi", None, minute())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, AskError::Throttled(t) if t.what == Limited::TenantRounds),
        "{error:?}"
    );
    assert_eq!(h.model.requests().len(), 2);
}

/// The built-in tools, every call of which takes `delay` (or until its deadline).
struct SlowTools {
    inner: ToolDispatch,
    delay: Duration,
}

#[async_trait]
impl Tools for SlowTools {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        self.inner.definitions(declared)
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        match context.deadline.run(tokio::time::sleep(self.delay)).await {
            Some(()) => self.inner.call(tool, input, context).await,
            None => ToolOutput::error("the tool timed out"),
        }
    }
}

#[tokio::test]
async fn a_rounds_tool_calls_share_its_tool_time_and_a_call_past_it_is_not_made() {
    let fair = FairShare {
        tool_seconds_per_round: Some(1),
        ..FairShare::default()
    };
    let slow = Arc::new(SlowTools {
        inner: ToolDispatch::built_in_only(),
        delay: Duration::from_secs(3),
    });
    let h = harness(fair, slow);
    let slots = json!({"day": "2026-12-04"});
    h.model.push(ScriptedModel::tool_call(
        "t1",
        "list_free_slots",
        slots.clone(),
        usage(),
    ));
    h.model.push(ScriptedModel::tool_call(
        "t2",
        "list_free_slots",
        slots,
        usage(),
    ));
    h.model
        .push(ScriptedModel::text("Sem horários por agora.", usage()));
    let started = Instant::now();
    h.service
        .ask(&key(), "horários amanhã?", None, minute())
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "cut at the round's second: {took:?}"
    );
    let last = h.model.requests().pop().unwrap();
    // The tool results as the model was sent them.
    let sent = serde_json::to_value(&last.messages).unwrap().to_string();
    let results: Vec<&str> = ["the tool timed out", "not run: this round's time"]
        .into_iter()
        .filter(|needle| sent.contains(needle))
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(
        results,
        ["the tool timed out", "not run: this round's time"],
        "{sent}"
    );
}
