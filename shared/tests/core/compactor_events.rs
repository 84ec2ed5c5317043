//! The compactor's events out (`docs/events.md`): an extraction publishes
//! `fact.set` (`"by": "model"`) for each fact whose value it changed, and a closed
//! session's index job publishes `session.closed` with the search summary it
//! stored; a tenant without an events webhook publishes nothing.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use degrau::compaction::{Compactor, JobOutcome, RECORD_FACTS_TOOL, Wiring};
use degrau::domain::{Fact, FactKey, FactSource, Incarnation};
use degrau::events::{EventType, MemoryEvents};
use degrau::jobs::{Job, NoJobs};
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::store::RecordStore;
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::tools::declared::{EventsWebhook, Webhook};
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{START, ask_service, compactor, key, minute, test_clock};

const DAY: i64 = 24 * 3600;

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    events: Arc<MemoryEvents>,
    compactor: Compactor,
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

/// Session 1 (Maria, mornings) closed by a message a day later; the tenant
/// declares an events webhook when `webhook`.
async fn closed_session(webhook: bool) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let events = Arc::new(MemoryEvents::default());
    let (clock, now) = test_clock();
    if webhook {
        let receiver = Webhook {
            url: "https://crm.example.com/events".into(),
            secret_parameter: "/degrau/webhooks/barber/events".into(),
            timeout_ms: 5000,
        };
        let config = TenantConfig {
            events_webhook: Some(EventsWebhook::try_from(receiver).unwrap()),
            ..TenantConfig::default()
        };
        store
            .put_tenant_config(&key().tenant, &config)
            .await
            .unwrap();
    }
    let ask = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        now.clone(),
    );
    for text in ["Hi, I'm Maria.", "I prefer mornings."] {
        model.push(ScriptedModel::text("Noted.", usage()));
        ask.ask(&key(), text, None, minute()).await.unwrap();
    }
    let mornings = Fact::extracted(
        FactKey::parse("preferred_time").unwrap(),
        "mornings".into(),
        FactSource { session: 1, seq: 3 },
        START,
    );
    store.put_fact(&key(), mornings, None);
    clock.fetch_add(DAY + 1, Ordering::SeqCst);
    model.push(ScriptedModel::text("Welcome back.", usage()));
    ask.ask(&key(), "Hello again", None, minute())
        .await
        .unwrap();
    let plain = compactor(
        &store,
        model.clone(),
        Arc::new(NoJobs),
        Defaults::default(),
        now,
    );
    let compactor = Compactor::on(
        store.clone(),
        Wiring {
            events: events.clone(),
            ..plain.wiring
        },
    );
    Harness {
        store,
        model,
        events,
        compactor,
    }
}

async fn incarnation(h: &Harness) -> Incarnation {
    let (head, _) = h.store.load_memory(&key(), START + DAY + 1).await.unwrap();
    head.and_then(|head| head.incarnation).unwrap()
}

/// The extraction proposes a new name and the stored time again.
async fn extract(h: &Harness) -> JobOutcome {
    h.model.push(ScriptedModel::tool_call(
        "facts",
        RECORD_FACTS_TOOL,
        json!({"facts": [
            {"key": "name", "value": "Maria", "seq": 1},
            {"key": "preferred_time", "value": "mornings", "seq": 3}
        ]}),
        usage(),
    ));
    let job = Job::Facts {
        tenant: key().tenant,
        incarnation: incarnation(h).await,
        session: 1,
    };
    h.compactor.run(&job, minute()).await.unwrap()
}

async fn index(h: &Harness) -> JobOutcome {
    h.model.push(ScriptedModel::text(
        "Maria introduced herself; she prefers mornings.",
        usage(),
    ));
    let job = Job::Index {
        tenant: key().tenant,
        incarnation: incarnation(h).await,
        session: 1,
        summarise: true,
    };
    h.compactor.run(&job, minute()).await.unwrap()
}

#[tokio::test]
async fn an_extraction_publishes_each_changed_fact_by_the_model_and_no_unchanged_one() {
    let h = closed_session(true).await;
    assert!(matches!(extract(&h).await, JobOutcome::FactsStored { .. }));
    let published = h.events.published();
    let [(webhook, occurrence)] = published.as_slice() else {
        panic!("one event, the new name only: {published:?}")
    };
    assert_eq!(webhook.secret_parameter, "/degrau/webhooks/barber/events");
    assert_eq!(occurrence.kind, EventType::FactSet);
    assert_eq!(occurrence.contact, key().contact);
    assert_eq!(occurrence.at, START + DAY + 1, "when it was stored");
    assert_eq!(
        occurrence.data,
        json!({"key": "name", "value": "Maria", "by": "model"})
    );
}

#[tokio::test]
async fn a_closed_sessions_index_publishes_its_summary_once_stored() {
    let h = closed_session(true).await;
    assert!(matches!(
        index(&h).await,
        JobOutcome::Indexed {
            summarised: true,
            ..
        }
    ));
    let published = h.events.published();
    let [(_, occurrence)] = published.as_slice() else {
        panic!("one event: {published:?}")
    };
    assert_eq!(occurrence.kind, EventType::SessionClosed);
    assert_eq!(
        occurrence.data,
        json!({"session": 1, "summary": "Maria introduced herself; she prefers mornings."})
    );
}

#[tokio::test]
async fn a_tenant_without_an_events_webhook_publishes_nothing_from_the_compactor() {
    let h = closed_session(false).await;
    assert!(matches!(extract(&h).await, JobOutcome::FactsStored { .. }));
    assert!(matches!(index(&h).await, JobOutcome::Indexed { .. }));
    assert!(h.events.published().is_empty());
}
