//! Each tenant's quotas of rounds and summary calls per hour, and a recorded
//! round's usage held against what its request can have held: against the
//! in-memory store, the in-memory quotas and the strict scripted model.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use degrau::converse::{
    AskError, AskOutcome, CLIENT_ALLOWANCE_TOKENS, Converse, RoundOutcome, RoundRequest,
};
use degrau::domain::{IdempotencyKey, TenantId};
use degrau::jobs::Job;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::quota::memory::MemoryQuotas;
use degrau::quota::{QuotaConfig, QuotaKind, period_of};
use degrau::store::{ContactKey, RoundStore};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::{Value, json};

use crate::helpers::{RecordingJobs, START, ask_service, contact_key, key, minute, test_clock};

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    jobs: Arc<RecordingJobs>,
    quotas: Arc<MemoryQuotas>,
    clock: Arc<AtomicI64>,
    service: Converse,
}

/// The barber tenant with `quota` in its config.
async fn harness(quota: QuotaConfig) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let jobs = Arc::new(RecordingJobs::default());
    let quotas = Arc::new(MemoryQuotas::new());
    let (clock, now) = test_clock();
    let mut service = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::built_in_only()),
        jobs.clone(),
        Defaults::default(),
        now,
    );
    service.quotas = quotas.clone();
    let config = TenantConfig {
        quota: Some(quota),
        ..TenantConfig::default()
    };
    store
        .put_tenant_config(&key().tenant, &config)
        .await
        .unwrap();
    Harness {
        store,
        model,
        jobs,
        quotas,
        clock,
        service,
    }
}

fn usage(input_tokens: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens: 10,
        ..Usage::default()
    }
}

async fn ask(h: &Harness, contact: &ContactKey, text: &str) -> Result<AskOutcome, AskError> {
    h.service.ask(contact, text, None, minute()).await
}

fn rounds_of(per_hour: u32) -> QuotaConfig {
    QuotaConfig {
        rounds_per_hour: Some(per_hour),
        summary_calls_per_hour: None,
    }
}

#[tokio::test]
async fn a_tenant_past_its_hours_rounds_gets_429_with_the_hours_rest_and_nothing_is_stored() {
    let h = harness(rounds_of(2)).await;
    // Twenty minutes into an hour.
    let now = period_of(START) + 1_200;
    h.clock.store(now, Ordering::SeqCst);
    for text in ["one", "two"] {
        h.model.push(ScriptedModel::text("ok", usage(100)));
        assert!(ask(&h, &key(), text).await.is_ok());
    }
    let items = h.store.item_count(&key());
    let error = ask(&h, &key(), "three").await.unwrap_err();
    let AskError::QuotaExceeded(exhausted) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(
        (exhausted.kind, exhausted.limit, exhausted.retry_after),
        (QuotaKind::Rounds, 2, 2_400)
    );
    assert!(error.to_string().contains("rounds"), "{error}");
    assert_eq!(h.store.item_count(&key()), items, "nothing stored");
    assert_eq!(h.model.requests().len(), 2, "no model call for the third");

    // Another tenant is not held by the barber's quota.
    let other = contact_key("florist", "+5511900000001");
    h.model.push(ScriptedModel::text("ok", usage(100)));
    assert!(ask(&h, &other, "hello").await.is_ok());

    // The next hour allows rounds again.
    h.clock.store(period_of(now) + 3_600, Ordering::SeqCst);
    h.model.push(ScriptedModel::text("ok", usage(100)));
    assert!(ask(&h, &key(), "three, again").await.is_ok());
}

#[tokio::test]
async fn an_idempotent_replay_spends_no_round() {
    let h = harness(rounds_of(1)).await;
    let idem = IdempotencyKey::parse("k-1").unwrap();
    h.model.push(ScriptedModel::text("ok", usage(100)));
    for _ in 0..3 {
        let outcome = h
            .service
            .ask(&key(), "hi", Some(&idem), minute())
            .await
            .unwrap();
        assert!(matches!(
            outcome,
            AskOutcome::Answered(_) | AskOutcome::Replayed(_)
        ));
    }
    let period = period_of(START);
    assert_eq!(h.quotas.used(&key().tenant, QuotaKind::Rounds, period), 1);
}

#[tokio::test]
async fn a_tenant_with_a_quota_of_zero_is_suspended() {
    let h = harness(rounds_of(0)).await;
    let error = ask(&h, &key(), "hi").await.unwrap_err();
    assert!(matches!(error, AskError::QuotaExceeded(_)), "{error:?}");
    assert_eq!(h.store.item_count(&key()), 0);
    assert!(h.model.requests().is_empty());
}

/// A recorded round's body on the contact's current head.
async fn round_body(h: &Harness, question: &str, context_tokens: u64) -> Value {
    let head = h.service.context(&key(), minute()).await.unwrap().head;
    json!({
        "head": head,
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": "Done."}
        ],
        "usage": {"input_tokens": context_tokens, "output_tokens": 5}
    })
}

async fn record(h: &Harness, body: &Value) -> Result<RoundOutcome, AskError> {
    let request = RoundRequest::parse(body)?;
    h.service
        .record_round(&key(), &request, None, minute())
        .await
}

#[tokio::test]
async fn recorded_rounds_spend_the_same_quota_and_are_refused_past_it() {
    let h = harness(rounds_of(1)).await;
    assert!(record(&h, &round_body(&h, "first", 50).await).await.is_ok());
    let items = h.store.item_count(&key());
    let error = record(&h, &round_body(&h, "second", 50).await)
        .await
        .unwrap_err();
    assert!(matches!(error, AskError::QuotaExceeded(_)), "{error:?}");
    assert_eq!(h.store.item_count(&key()), items, "nothing stored");
}

#[tokio::test]
async fn past_the_hours_summary_calls_a_due_step_is_deferred_and_the_round_still_stored() {
    let h = harness(QuotaConfig {
        rounds_per_hour: None,
        summary_calls_per_hour: Some(1),
    })
    .await;
    // Every round's context passes the default threshold (8,000 tokens).
    for (round, queued) in [(1, true), (2, false), (3, false)] {
        h.model.push(ScriptedModel::text("ok", usage(9_000)));
        let AskOutcome::Answered(response) =
            ask(&h, &key(), &format!("round {round}")).await.unwrap()
        else {
            panic!("a replay");
        };
        assert_eq!(response.compaction_queued, queued, "round {round}");
    }
    let steps = |h: &Harness| {
        h.jobs
            .jobs
            .lock()
            .unwrap()
            .iter()
            .filter(|j| matches!(j, Job::Step { .. }))
            .count()
    };
    assert_eq!(steps(&h), 1, "one step requested in the hour");
    assert_eq!(
        h.store.load_head(&key()).await.unwrap().unwrap().last_seq,
        6
    );
    h.clock.store(period_of(START) + 3_600, Ordering::SeqCst);
    h.model.push(ScriptedModel::text("ok", usage(9_000)));
    ask(&h, &key(), "next hour").await.unwrap();
    assert_eq!(steps(&h), 2, "the next hour requests it again");
}

#[tokio::test]
async fn a_recorded_round_reporting_more_context_than_its_request_can_hold_is_refused() {
    let h = harness(QuotaConfig::default()).await;
    // What the first round's request held: degrau's system blocks, the question.
    let body = round_body(&h, "Any free slot on Friday?", 0).await;
    let request = RoundRequest::parse(&body).unwrap();
    let served = serde_json::to_string(&h.service.context(&key(), minute()).await.unwrap().context)
        .unwrap()
        .len() as u64;
    let question = serde_json::to_string(&request.messages[..1]).unwrap().len() as u64;
    let most = served + question + CLIENT_ALLOWANCE_TOKENS;
    for reported in [most + 1, 10_000_000] {
        let mut body = body.clone();
        body["usage"]["input_tokens"] = json!(reported);
        let error = record(&h, &body).await.unwrap_err();
        let AskError::InvalidRequest(message) = &error else {
            panic!("{error:?}");
        };
        assert!(
            message.contains(&format!("at most {most}")),
            "{reported}: {message}"
        );
        assert_eq!(h.store.item_count(&key()), 0, "nothing stored");
    }
    // Spread over the three input fields, the same figure is refused too.
    let mut spread = body.clone();
    spread["usage"] = json!({"input_tokens": 10, "cache_read_input_tokens": most,
                             "cache_creation_input_tokens": 0, "output_tokens": 5});
    assert!(matches!(
        record(&h, &spread).await,
        Err(AskError::InvalidRequest(_))
    ));
    // What a request can have held is accepted, up to the last token.
    let mut body = body;
    body["usage"]["input_tokens"] = json!(most);
    assert!(record(&h, &body).await.is_ok());
    assert_eq!(
        h.quotas.used(
            &TenantId::parse("barber").unwrap(),
            QuotaKind::Rounds,
            period_of(START)
        ),
        1,
        "only the accepted round spent one"
    );
}
