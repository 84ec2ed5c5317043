//! The pause fold job against the in-memory store and the scripted model, on a
//! conversation driven through the ask service: it folds once every cache entry
//! of the last request is gone, and only then; it leaves alone a conversation
//! that resumed since the sweep asked, and one whose window a fold would barely
//! shrink; it keeps fewer messages for a contact whose rhythm says it will be
//! away past the hour; and it never folds a round a client recorded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use degrau::compaction::{Compactor, JobOutcome};
use degrau::converse::{RoundOutcome, RoundRequest};
use degrau::domain::Head;
use degrau::jobs::{Job, NoJobs};
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::step_plan::CompactionPolicy;
use degrau::store::RecordStore;
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{RecordingJobs, START, ask_service, compactor, key, minute, test_clock};

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<std::sync::atomic::AtomicI64>,
    ask: degrau::converse::Converse,
    compactor: Compactor,
}

fn defaults() -> Defaults {
    Defaults {
        compaction: CompactionPolicy {
            // No step from the threshold in these conversations.
            threshold_tokens: 50_000,
            keep_messages: 4,
            fold_keep_messages: 2,
            // By message count only: the windows here are counted in messages.
            keep_tokens: 0,
            ..CompactionPolicy::default()
        },
        ..Defaults::default()
    }
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let (clock, now) = test_clock();
    Harness {
        ask: ask_service(
            &store,
            model.clone(),
            Arc::new(ToolDispatch::built_in_only()),
            Arc::new(NoJobs),
            defaults(),
            now.clone(),
        ),
        compactor: compactor(
            &store,
            model.clone(),
            Arc::new(RecordingJobs::default()),
            defaults(),
            now,
        ),
        store,
        model,
        clock,
    }
}

/// `rounds` rounds 30 s apart, each a long message and a short answer, the
/// context growing by `per_round` tokens a round (as the model measures it).
async fn conversation(h: &Harness, rounds: u64, per_round: u64) {
    paced(h, rounds, per_round, |_| 30).await;
}

/// [`conversation`] with `gap(round)` seconds before each round.
async fn paced(h: &Harness, rounds: u64, per_round: u64, gap: impl Fn(u64) -> i64) {
    for round in 1..=rounds {
        h.clock.fetch_add(gap(round), Ordering::SeqCst);
        let usage = Usage {
            input_tokens: round * per_round,
            output_tokens: 20,
            ..Usage::default()
        };
        h.model.push(ScriptedModel::text("Noted.", usage));
        let text = format!(
            "(message {round}) {}",
            "My sister and I both need a haircut, and mornings suit us best. ".repeat(25)
        );
        h.ask.ask(&key(), &text, None, minute()).await.unwrap();
    }
}

async fn head(h: &Harness) -> Head {
    let now = h.clock.load(Ordering::SeqCst);
    h.store.load_memory(&key(), now).await.unwrap().0.unwrap()
}

/// The fold job the sweep would send for the head as it is.
async fn fold_job(h: &Harness) -> Job {
    let head = head(h).await;
    Job::Fold {
        tenant: key().tenant,
        incarnation: head.incarnation.unwrap(),
        session: head.session,
        summarized_until: head.summarized_until,
        last_seq: head.last_seq,
    }
}

fn skipped(outcome: &JobOutcome) -> Option<&'static str> {
    match outcome {
        JobOutcome::StepSkipped { reason } => Some(reason),
        _ => None,
    }
}

#[tokio::test]
async fn a_fold_waits_for_the_entries_to_go_then_folds_down_to_the_kept_window() {
    let h = harness();
    conversation(&h, 10, 600).await;
    let before = head(&h).await;
    assert!(!before.cache_hour, "short gaps: five-minute entries");
    assert_eq!(before.last_context_tokens, 6_000);
    let job = fold_job(&h).await;

    // Four minutes on, the entries still live: nothing, and no summary request.
    h.clock.fetch_add(4 * 60, Ordering::SeqCst);
    let early = h.compactor.run(&job, minute()).await.unwrap();
    assert_eq!(skipped(&early), Some("alive"));
    assert_eq!(h.model.requests().len(), 10, "no summary request");

    // Six minutes on, they are gone: the window folds down to four messages.
    h.clock.fetch_add(2 * 60, Ordering::SeqCst);
    h.model.push(ScriptedModel::text(
        "The customer and a sister want haircuts in the morning.",
        Usage::default(),
    ));
    let folded = h.compactor.run(&job, minute()).await.unwrap();
    assert!(
        matches!(folded, JobOutcome::StepApplied { .. }),
        "{folded:?}"
    );
    let after = head(&h).await;
    assert_eq!(after.last_seq - after.summarized_until, 4);
    assert_eq!(after.steps, 1);
    assert!(after.summary.is_some());
    // The same job again: stale.
    let again = h.compactor.run(&job, minute()).await.unwrap();
    assert_eq!(skipped(&again), Some("stale"));
    assert!(START < h.clock.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_conversation_that_resumed_or_would_barely_shrink_is_left_alone() {
    // The contact wrote again after the sweep asked: the fold is stale.
    let h = harness();
    conversation(&h, 10, 600).await;
    let job = fold_job(&h).await;
    h.clock.fetch_add(10 * 60, Ordering::SeqCst);
    conversation(&h, 1, 6_600).await;
    let resumed = h.compactor.run(&job, minute()).await.unwrap();
    assert_eq!(skipped(&resumed), Some("resumed"));

    // A window a fold would shrink by a few hundred tokens: the summary request
    // costs more than the resume would save.
    let small = harness();
    conversation(&small, 6, 250).await;
    let job = fold_job(&small).await;
    small.clock.fetch_add(10 * 60, Ordering::SeqCst);
    let outcome = small.compactor.run(&job, minute()).await.unwrap();
    assert_eq!(skipped(&outcome), Some("does_not_pay"));
    assert_eq!(head(&small).await.steps, 0);
}

#[tokio::test]
async fn a_contact_who_comes_back_the_next_day_keeps_less_than_one_who_pauses() {
    // Every other gap a night (18 hours, within the day's idle timeout), or
    // every other gap a meeting (20 minutes); the same sizes otherwise.
    let every_other = |gap: i64| move |round: u64| if round.is_multiple_of(2) { gap } else { 30 };
    let night = harness();
    paced(&night, 10, 600, every_other(18 * 3600)).await;
    let meeting = harness();
    paced(&meeting, 10, 600, every_other(20 * 60)).await;
    for (h, kept) in [(&night, 2), (&meeting, 4)] {
        let job = fold_job(h).await;
        // An hour and a minute on: every entry is gone, whichever lifetime.
        h.clock.fetch_add(61 * 60, Ordering::SeqCst);
        h.model.push(ScriptedModel::text(
            "The customer and a sister want haircuts in the morning.",
            Usage::default(),
        ));
        let outcome = h.compactor.run(&job, minute()).await.unwrap();
        assert!(
            matches!(outcome, JobOutcome::StepApplied { .. }),
            "{outcome:?}"
        );
        let after = head(h).await;
        assert_eq!(after.last_seq - after.summarized_until, kept, "{after:?}");
    }
}

/// The scripted model, holding each summary request until the test lets it go.
struct GatedSummaries {
    inner: Arc<ScriptedModel>,
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl degrau::model::Model for GatedSummaries {
    async fn create(
        &self,
        request: &degrau::plan::request::ModelRequest,
        deadline: degrau::deadline::Deadline,
    ) -> Result<degrau::model::ModelResponse, degrau::model::ModelError> {
        let summary = request.system.first().is_some_and(|system| {
            system
                .text
                .starts_with(degrau::compaction::SUMMARY_INSTRUCTIONS)
        });
        if summary {
            self.started.notify_one();
            self.release.notified().await;
        }
        self.inner.create(request, deadline).await
    }
}

#[tokio::test]
async fn a_fold_whose_summary_was_written_while_the_contact_came_back_lands_nothing() {
    // Issue 38: the fold checked for a round only before its summary call; one
    // that landed during the call was folded over, its freshly cached context
    // written again by the next request.
    let h = harness();
    conversation(&h, 10, 600).await;
    let job = fold_job(&h).await;
    h.clock.fetch_add(10 * 60, Ordering::SeqCst);
    let gated = Arc::new(GatedSummaries {
        inner: h.model.clone(),
        started: tokio::sync::Notify::new(),
        release: tokio::sync::Notify::new(),
    });
    let clock = h.clock.clone();
    let now: degrau::plan::session::Clock = Arc::new(move || clock.load(Ordering::SeqCst));
    let folding = compactor(
        &h.store,
        gated.clone(),
        Arc::new(RecordingJobs::default()),
        defaults(),
        now,
    );
    // The contact's round answers first, then the held summary.
    h.model.push(ScriptedModel::text(
        "Welcome back.",
        Usage {
            input_tokens: 6_600,
            output_tokens: 20,
            ..Usage::default()
        },
    ));
    h.model.push(ScriptedModel::text(
        "The customer wants a haircut.",
        Usage::default(),
    ));
    let resume = async {
        gated.started.notified().await;
        h.ask
            .ask(&key(), "I'm back: is Friday free?", None, minute())
            .await
            .unwrap();
        gated.release.notify_one();
    };
    let (outcome, ()) = tokio::join!(folding.run(&job, minute()), resume);
    assert_eq!(skipped(&outcome.unwrap()), Some("lost_race"));
    let after = head(&h).await;
    assert_eq!(
        (after.summarized_until, after.steps),
        (0, 0),
        "nothing folded"
    );
    assert_eq!(after.last_seq, 22, "the round that came back is stored");
}

#[tokio::test]
async fn a_round_a_client_recorded_is_never_folded() {
    // degrau's own rounds, then one the client's loop ran and recorded: the
    // request's cache entries are the client's, and degrau does not know them.
    let h = harness();
    conversation(&h, 10, 600).await;
    let view = h.ask.context(&key(), minute()).await.unwrap();
    let request = RoundRequest::parse(&json!({
        "head": view.head,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "And on Friday?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Friday works."}]},
        ],
        "usage": {"input_tokens": 6_600, "output_tokens": 20},
    }))
    .unwrap();
    let outcome = h
        .ask
        .record_round(&key(), &request, None, minute())
        .await
        .unwrap();
    assert!(matches!(outcome, RoundOutcome::Recorded(_)));
    let recorded = head(&h).await;
    assert!(recorded.client_round);
    assert_eq!(recorded.last_context_tokens, 6_600);
    let job = fold_job(&h).await;

    // Past every entry degrau would have written, a fold would pay: none runs.
    h.clock.fetch_add(6 * 60, Ordering::SeqCst);
    h.model.push(ScriptedModel::text(
        "The customer and a sister want haircuts in the morning.",
        Usage::default(),
    ));
    let skipped_fold = h.compactor.run(&job, minute()).await.unwrap();
    assert_eq!(skipped(&skipped_fold), Some("recorded"), "{skipped_fold:?}");
    assert_eq!(h.model.requests().len(), 10, "no summary request");
    assert_eq!(head(&h).await, recorded);

    // degrau's next round of its own makes the head foldable again.
    paced(&h, 1, 7_000, |_| 30).await;
    assert!(!head(&h).await.client_round);
}
