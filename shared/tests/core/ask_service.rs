//! The ask service against the in-memory store and the strict scripted model:
//! whole rounds, the tool loop, sessions, idempotency and the concurrency policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use degrau::converse::{
    AskError, AskOutcome, AskResponse, Converse, MAX_TEXT_CHARS, MAX_TOOL_ITERATIONS,
};
use degrau::deadline::Deadline;
use degrau::domain::{ContentBlock, IdempotencyKey, Role};
use degrau::jobs::NoJobs;
use degrau::memory::{ItemRef, MemoryStore};
use degrau::model::scripted::ScriptedModel;
use degrau::model::{Model, ModelError, ModelResponse};
use degrau::plan::request::ModelRequest;
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::Defaults;
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{START, answered, ask_service, key, minute, test_clock};

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<AtomicI64>,
    service: Converse,
}

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 10,
        ..Usage::default()
    }
}

fn harness_with(model: Arc<dyn Model>, scripted: Arc<ScriptedModel>) -> Harness {
    let store = Arc::new(MemoryStore::new());
    let (clock, now) = test_clock();
    let service = ask_service(
        &store,
        model,
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        now,
    );
    Harness {
        store,
        model: scripted,
        clock,
        service,
    }
}

fn harness() -> Harness {
    let model = Arc::new(ScriptedModel::default());
    harness_with(model.clone(), model)
}

async fn stored(h: &Harness) -> Vec<(u32, u64, Role)> {
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    page.messages
        .iter()
        .map(|m| (m.session, m.seq, m.role))
        .collect()
}

fn texts(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match &b.block {
            ContentBlock::Text { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_round_is_stored_whole_and_the_next_turn_sees_it() {
    let h = harness();
    h.model
        .push(ScriptedModel::text("Hello! How can I help?", usage(100)));
    let first = answered(h.service.ask(&key(), "Hi", None, minute()).await.unwrap());
    assert_eq!(first.session, 1);
    assert_eq!((first.round.first_seq, first.round.last_seq), (1, 2));
    assert_eq!(first.reply.text, "Hello! How can I help?");
    assert_eq!(first.usage.context_tokens, 100);

    h.model.push(ScriptedModel::text("Sure.", usage(150)));
    let second = answered(
        h.service
            .ask(&key(), "Book me in", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!((second.round.first_seq, second.round.last_seq), (3, 4));
    assert_eq!(
        stored(&h).await,
        vec![
            (1, 1, Role::User),
            (1, 2, Role::Assistant),
            (1, 3, Role::User),
            (1, 4, Role::Assistant)
        ]
    );
    let requests = h.model.requests();
    assert_eq!(
        texts(&requests[1]),
        ["Hi", "Hello! How can I help?", "Book me in"]
    );
    let head = h.store.load_memory(&key(), START).await.unwrap().0.unwrap();
    assert_eq!((head.last_seq, head.last_context_tokens), (4, 150));
}

#[tokio::test]
async fn the_tool_loop_sends_results_first_and_stores_every_message() {
    let h = harness();
    h.model.push(ScriptedModel::tool_call(
        "1",
        "list_free_slots",
        json!({"day": "2026-12-01"}),
        usage(200),
    ));
    h.model.push(ScriptedModel::tool_call(
        "2",
        "book_slot",
        json!({"day": "2026-12-01", "time": "10:00", "service": "cut"}),
        usage(900),
    ));
    h.model.push(ScriptedModel::text("Booked!", usage(1000)));
    let response = answered(
        h.service
            .ask(&key(), "Book 10:00 tomorrow", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!((response.round.first_seq, response.round.last_seq), (1, 6));
    assert_eq!(
        response.usage.input_tokens, 2100,
        "usage sums the round's calls"
    );
    assert_eq!(
        response.usage.context_tokens, 1000,
        "context is the last call's"
    );

    let requests = h.model.requests();
    assert_eq!(requests.len(), 3);
    let results = &requests[1].messages.last().unwrap().content;
    assert!(
        matches!(&results[0].block, ContentBlock::ToolResult { tool_use_id, content, .. }
        if tool_use_id == "toolu_1" && content.contains("\"slots\""))
    );
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 50, None)
        .await
        .unwrap();
    let booked = page.messages[4].content[0].clone();
    assert!(matches!(booked, ContentBlock::ToolResult { content, .. } if content.contains("BK-")));
    assert!(page.messages[1].usage.is_some() && page.messages[0].usage.is_none());
}

#[tokio::test]
async fn a_tool_loop_that_never_ends_is_an_error_and_writes_nothing() {
    let h = harness();
    for i in 0..=MAX_TOOL_ITERATIONS {
        h.model.push(ScriptedModel::tool_call(
            &i.to_string(),
            "list_free_slots",
            json!({"day": "2026-12-01"}),
            usage(10),
        ));
    }
    let error = h
        .service
        .ask(&key(), "loop", None, minute())
        .await
        .unwrap_err();
    assert!(matches!(error, AskError::ToolLoop), "{error:?}");
    assert_eq!(h.model.requests().len(), MAX_TOOL_ITERATIONS + 1);
    assert!(stored(&h).await.is_empty());
    assert_eq!(h.store.item_count(&key()), 0);
}

#[tokio::test]
async fn a_failed_model_call_writes_nothing() {
    let h = harness();
    h.model.push(Err(ModelError::Unavailable { status: 529 }));
    let error = h
        .service
        .ask(&key(), "hi", None, minute())
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        AskError::Model(ModelError::Unavailable { status: 529 })
    ));
    assert_eq!(h.store.item_count(&key()), 0);
}

#[tokio::test]
async fn bad_text_is_refused_before_anything_happens() {
    let h = harness();
    for text in ["", "   \n"] {
        assert!(matches!(
            h.service.ask(&key(), text, None, minute()).await,
            Err(AskError::InvalidRequest(_))
        ));
    }
    let long = "a".repeat(MAX_TEXT_CHARS + 1);
    assert!(matches!(
        h.service.ask(&key(), &long, None, minute()).await,
        Err(AskError::TooLarge(_))
    ));
    assert!(
        h.service
            .ask(&key(), &"é".repeat(MAX_TEXT_CHARS), None, minute())
            .await
            .is_err(),
        "script is empty"
    );
    assert!(
        h.model.requests().len() == 1,
        "only the text at the limit reached the model"
    );
    assert_eq!(h.store.item_count(&key()), 0);
}

#[tokio::test]
async fn an_idempotent_retry_replays_without_calling_the_model() {
    let h = harness();
    let idem = IdempotencyKey::parse("req-1").unwrap();
    h.model.push(ScriptedModel::text("Done", usage(10)));
    let first = answered(
        h.service
            .ask(&key(), "hi", Some(&idem), minute())
            .await
            .unwrap(),
    );
    let AskOutcome::Replayed(body) = h
        .service
        .ask(&key(), "hi", Some(&idem), minute())
        .await
        .unwrap()
    else {
        panic!("expected a replay");
    };
    assert_eq!(serde_json::from_str::<AskResponse>(&body).unwrap(), first);
    assert_eq!(h.model.requests().len(), 1);
    assert!(matches!(
        h.service.ask(&key(), "other", Some(&idem), minute()).await,
        Err(AskError::IdempotencyMismatch)
    ));
    assert_eq!(stored(&h).await.len(), 2);
}

#[tokio::test]
async fn a_failed_idempotent_request_can_be_retried_with_the_same_key() {
    let h = harness();
    let idem = IdempotencyKey::parse("req-2").unwrap();
    h.model.push(Err(ModelError::Timeout));
    assert!(matches!(
        h.service.ask(&key(), "hi", Some(&idem), minute()).await,
        Err(AskError::Model(ModelError::Timeout))
    ));
    h.model.push(ScriptedModel::text("Now it works", usage(10)));
    let response = answered(
        h.service
            .ask(&key(), "hi", Some(&idem), minute())
            .await
            .unwrap(),
    );
    assert_eq!(response.reply.text, "Now it works");
}

#[tokio::test]
async fn an_idle_session_closes_and_the_next_starts_with_facts_and_no_summary() {
    let h = harness();
    h.model.push(ScriptedModel::text("one", usage(10)));
    h.service
        .ask(&key(), "first session", None, minute())
        .await
        .unwrap();
    h.store
        .set_summarized_until(&key(), 0, Some("The customer likes Fridays.".into()));
    h.clock.fetch_add(24 * 3600, Ordering::SeqCst);
    h.model.push(ScriptedModel::text("two", usage(10)));
    let response = answered(
        h.service
            .ask(&key(), "new day", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!(response.session, 2);
    assert_eq!((response.round.first_seq, response.round.last_seq), (1, 2));
    let request = h.model.requests().pop().unwrap();
    assert_eq!(
        texts(&request),
        ["new day"],
        "the old session's window is not sent"
    );
    assert!(
        !request.system[1].text.contains("Fridays"),
        "no summary in a new session"
    );
    let head = h.store.load_memory(&key(), START).await.unwrap().0.unwrap();
    assert_eq!(
        (
            head.session,
            head.summary,
            head.summarized_until,
            head.steps
        ),
        (2, None, 0, 0)
    );
    assert_eq!(
        stored(&h).await.len(),
        4,
        "the old session's transcript is kept"
    );
}

#[tokio::test]
async fn summarized_messages_are_never_sent_again() {
    let h = harness();
    for i in 0..3 {
        h.model
            .push(ScriptedModel::text(&format!("reply {i}"), usage(10)));
        h.service
            .ask(&key(), &format!("question {i}"), None, minute())
            .await
            .unwrap();
    }
    h.store
        .set_summarized_until(&key(), 4, Some("The customer asked two questions.".into()));
    h.model.push(ScriptedModel::text("ok", usage(10)));
    h.service
        .ask(&key(), "question 3", None, minute())
        .await
        .unwrap();
    let request = h.model.requests().pop().unwrap();
    assert_eq!(texts(&request), ["question 2", "reply 2", "question 3"]);
    assert!(
        request.system[1]
            .text
            .contains("The customer asked two questions.")
    );
}

#[tokio::test]
async fn prompt_too_long_cuts_the_window_once_and_retries() {
    let h = harness();
    for i in 0..10 {
        h.model
            .push(ScriptedModel::text(&format!("reply {i}"), usage(10)));
        h.service
            .ask(&key(), &format!("question {i}"), None, minute())
            .await
            .unwrap();
    }
    h.model.push(Err(ModelError::PromptTooLong {
        message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
    }));
    h.model.push(ScriptedModel::text("short now", usage(10)));
    let response = answered(
        h.service
            .ask(&key(), "again", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!(response.reply.text, "short now");
    let requests = h.model.requests();
    let (long, cut) = (&requests[10], &requests[11]);
    assert_eq!(long.messages.len(), 21);
    assert!(cut.messages.len() <= Defaults::default().compaction.keep_messages + 1);
    assert_eq!(cut.messages[0].role, Role::User);
    let head = h.store.load_memory(&key(), START).await.unwrap().0.unwrap();
    assert_eq!(
        head.summarized_until, 0,
        "the cut does not move summarized_until"
    );

    h.model.push(Err(ModelError::PromptTooLong {
        message: "prompt is too long".into(),
    }));
    h.model.push(Err(ModelError::PromptTooLong {
        message: "prompt is too long".into(),
    }));
    assert!(matches!(
        h.service.ask(&key(), "and again", None, minute()).await,
        Err(AskError::Model(ModelError::PromptTooLong { .. }))
    ));
}

/// A model that holds the first `hold` calls until all of them arrived, so two asks
/// both load the same head before either commits.
struct RendezvousModel {
    inner: Arc<ScriptedModel>,
    barrier: tokio::sync::Barrier,
    calls: AtomicI64,
    hold: i64,
}

#[async_trait]
impl Model for RendezvousModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.hold {
            self.barrier.wait().await;
        }
        self.inner.create(request, deadline).await
    }
}

fn racing_harness() -> Harness {
    let scripted = Arc::new(ScriptedModel::default());
    let model = Arc::new(RendezvousModel {
        inner: scripted.clone(),
        barrier: tokio::sync::Barrier::new(2),
        calls: AtomicI64::new(0),
        hold: 2,
    });
    harness_with(model, scripted)
}

#[tokio::test]
async fn the_loser_of_a_race_without_tools_answers_again_on_the_fresh_history() {
    let h = racing_harness();
    for text in ["a", "b", "c"] {
        h.model.push(ScriptedModel::text(text, usage(10)));
    }
    let k = key();
    let (one, two) = tokio::join!(
        h.service.ask(&k, "first", None, minute()),
        h.service.ask(&k, "second", None, minute())
    );
    let (one, two) = (answered(one.unwrap()), answered(two.unwrap()));
    let mut spans = [
        (one.round.first_seq, one.round.last_seq),
        (two.round.first_seq, two.round.last_seq),
    ];
    spans.sort();
    assert_eq!(spans, [(1, 2), (3, 4)]);
    assert_eq!(
        h.model.requests().len(),
        3,
        "the loser called the model again"
    );
    let last = h.model.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 3, "the retry saw the winner's round");
    assert_eq!(stored(&h).await.len(), 4);
}

#[tokio::test]
async fn the_loser_of_a_race_after_a_tool_ran_gets_a_conflict_and_writes_nothing() {
    let h = racing_harness();
    // Whichever call comes first gets the tool call; both then finish with text.
    h.model.push(ScriptedModel::tool_call(
        "1",
        "book_slot",
        json!({"day": "2026-12-01", "time": "10:00", "service": "cut"}),
        usage(10),
    ));
    h.model.push(ScriptedModel::text("plain", usage(10)));
    h.model.push(ScriptedModel::text("booked", usage(10)));
    h.model.push(ScriptedModel::text("retried", usage(10)));
    let k = key();
    let (one, two) = tokio::join!(
        h.service.ask(&k, "book", None, minute()),
        h.service.ask(&k, "hello", None, minute())
    );
    let outcomes = [one, two];
    let conflicts = outcomes
        .iter()
        .filter(|o| matches!(o, Err(AskError::Conflict(_))))
        .count();
    let answers = outcomes.iter().filter(|o| o.is_ok()).count();
    let messages = stored(&h).await.len();
    // Either the plain round won (then the tool round lost: 409) or the tool round
    // won (then the plain round retried once and answered on the fresh history).
    assert!(
        (conflicts == 1 && answers == 1 && messages == 2) || (conflicts == 0 && answers == 2),
        "conflicts {conflicts}, answers {answers}, messages {messages}"
    );
    let seqs: Vec<u64> = h
        .store
        .transcript(&key(), SessionFilter::All, 50, None)
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "dense");
}

#[tokio::test]
async fn the_benchmark_policies_switch_only_what_the_request_carries() {
    use degrau::tenant::ContextPolicy;
    for policy in [ContextPolicy::SlidingWindow, ContextPolicy::FullHistory] {
        let mut h = harness();
        h.service.defaults.context_policy = policy;
        h.service.defaults.compaction.keep_messages = 4;
        h.service.defaults.compaction.threshold_tokens = 1;
        for i in 0..6 {
            h.model
                .push(ScriptedModel::text(&format!("reply {i}"), usage(10)));
            let response = answered(
                h.service
                    .ask(&key(), &format!("question {i}"), None, minute())
                    .await
                    .unwrap(),
            );
            assert!(!response.compaction_queued, "{policy:?} never steps");
        }
        let last = h.model.requests().pop().unwrap();
        match policy {
            ContextPolicy::SlidingWindow => assert_eq!(
                texts(&last),
                [
                    "question 3",
                    "reply 3",
                    "question 4",
                    "reply 4",
                    "question 5"
                ]
            ),
            _ => assert_eq!(last.messages.len(), 11, "the whole session"),
        }
    }
}

#[tokio::test]
async fn the_hard_cap_stays_on_until_a_step_moves_summarized_until() {
    let h = harness();
    let keep = Defaults::default().compaction.keep_messages;
    let hard_limit = Defaults::default().compaction.hard_limit_tokens;
    for i in 0..10 {
        h.model
            .push(ScriptedModel::text(&format!("reply {i}"), usage(100)));
        h.service
            .ask(&key(), &format!("question {i}"), None, minute())
            .await
            .unwrap();
    }
    // The step is late: this round measured the hard limit.
    h.model.push(ScriptedModel::text("big", usage(hard_limit)));
    h.service
        .ask(&key(), "question 10", None, minute())
        .await
        .unwrap();
    // So the next one is cut, and measures far less...
    h.model
        .push(ScriptedModel::text("cut", usage(hard_limit / 10)));
    h.service
        .ask(&key(), "question 11", None, minute())
        .await
        .unwrap();
    assert_eq!(h.model.requests().pop().unwrap().messages.len(), keep + 1);
    // ...which does not switch the cap off while the step has not landed.
    h.model
        .push(ScriptedModel::text("still cut", usage(hard_limit / 10)));
    h.service
        .ask(&key(), "question 12", None, minute())
        .await
        .unwrap();
    assert_eq!(
        h.model.requests().pop().unwrap().messages.len(),
        keep + 1,
        "the window stays cut"
    );

    // The step lands: the window starts after it, whole again.
    h.store
        .set_summarized_until(&key(), 20, Some("The customer asked ten questions.".into()));
    h.model.push(ScriptedModel::text("fine", usage(2000)));
    h.service
        .ask(&key(), "question 13", None, minute())
        .await
        .unwrap();
    assert_eq!(
        h.model.requests().pop().unwrap().messages.len(),
        7,
        "messages 21-26 and the new one"
    );
}

/// TTL deletes expired items in any order and days late: when it takes the head
/// first, the messages it has not reached yet still hold their keys.
#[tokio::test]
async fn a_contact_whose_head_ttl_deleted_before_its_messages_starts_over_at_once() {
    let h = harness();
    for text in ["Hi", "Book me in"] {
        h.model.push(ScriptedModel::text("Sure.", usage(100)));
        answered(h.service.ask(&key(), text, None, minute()).await.unwrap());
    }
    // Past the retention (90 days by default): every item has expired.
    let later = START + 91 * 24 * 3600;
    h.clock.store(later, Ordering::SeqCst);
    let expired = h.store.expired_items(later);
    assert_eq!(expired.len(), 5, "the head and four messages: {expired:?}");
    h.store.ttl_delete(&key(), &ItemRef::Head);
    assert_eq!(stored(&h).await.len(), 4, "the messages wait for TTL");

    h.model
        .push(ScriptedModel::text("Welcome back.", usage(50)));
    let back = answered(
        h.service
            .ask(&key(), "Hello again", None, minute())
            .await
            .unwrap(),
    );
    assert_eq!(back.session, 1, "a new conversation: the old one is gone");
    assert_eq!((back.round.first_seq, back.round.last_seq), (1, 2));
    assert_eq!(
        texts(&h.model.requests()[2]),
        ["Hello again"],
        "none of the expired conversation is sent"
    );
    // The expired messages the round did not write over are still TTL's to delete.
    let left: Vec<ItemRef> = h
        .store
        .expired_items(later)
        .into_iter()
        .map(|(_, item)| item)
        .collect();
    assert_eq!(
        left,
        [
            ItemRef::Message { session: 1, seq: 3 },
            ItemRef::Message { session: 1, seq: 4 }
        ]
    );
    for item in left {
        h.store.ttl_delete(&key(), &item);
    }
    h.model.push(ScriptedModel::text("Again.", usage(50)));
    let next = answered(h.service.ask(&key(), "More", None, minute()).await.unwrap());
    assert_eq!((next.round.first_seq, next.round.last_seq), (3, 4));
    assert_eq!(
        texts(&h.model.requests()[3]),
        ["Hello again", "Welcome back.", "More"]
    );
}

/// A queue whose sends never answer (an SQS endpoint that hangs).
struct HangingJobs;

#[async_trait]
impl degrau::jobs::Jobs for HangingJobs {
    async fn enqueue(&self, _job: &degrau::jobs::Job) -> Result<bool, degrau::jobs::EnqueueError> {
        std::future::pending().await
    }
}

/// Nothing after the commit runs past the request's deadline: a step due with a
/// queue that hangs still answers the stored round within the deadline (the step
/// is asked for again by the next round). Unbounded, the ask waited on the send
/// for ever, the round stored and the client told nothing.
#[tokio::test(start_paused = true)]
async fn a_hanging_queue_after_the_commit_cannot_hold_the_answer_past_the_deadline() {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let (_clock, now) = test_clock();
    let mut defaults = Defaults::default();
    defaults.compaction.threshold_tokens = 1;
    let service = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(HangingJobs),
        defaults,
        now,
    );
    model.push(ScriptedModel::text("Booked.", usage(500)));
    let budget = std::time::Duration::from_secs(25);
    let asked = tokio::time::timeout(
        budget * 2,
        service.ask(&key(), "Book me", None, Deadline::after(budget)),
    )
    .await
    .expect("answered by the deadline");
    let response = answered(asked.unwrap());
    assert!(response.compaction_queued, "the step was due");
    let (head, _) = store.load_memory(&key(), START).await.unwrap();
    assert_eq!(head.unwrap().last_seq, 2, "the round is stored");
}
