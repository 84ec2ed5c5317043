//! Memory for an agent that runs its own loop: the context a client's next request
//! should carry, and rounds the client ran itself committed through `ask`'s commit
//! path, against the in-memory store and the strict scripted model.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use degrau::converse::{
    AskError, ContextView, Converse, MAX_ROUND_MESSAGES, RecordedRound, RoundOutcome, RoundRequest,
};
use degrau::domain::{IdempotencyKey, Message, Role};
use degrau::jobs::Job;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::request::{ModelRequest, RequestMessage};
use degrau::plan::validate::validate_request;
use degrau::store::{RecordStore, RoundStore, SessionFilter};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::{MAX_RESULTS_CHARS_PER_MESSAGE, MAX_TOOL_RESULT_CHARS, ToolDispatch};
use degrau::usage::Usage;
use serde_json::{Value, json};

use crate::helpers::{RecordingJobs, answered, ask_service, key, minute, records_of, test_clock};

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    jobs: Arc<RecordingJobs>,
    clock: Arc<AtomicI64>,
    service: Converse,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let jobs = Arc::new(RecordingJobs::default());
    let (clock, now) = test_clock();
    let service = ask_service(
        &store,
        model.clone(),
        Arc::new(ToolDispatch::built_in_only()),
        jobs.clone(),
        Defaults::default(),
        now,
    );
    Harness {
        store,
        model,
        jobs,
        clock,
        service,
    }
}

fn usage(input: u64) -> Value {
    json!({"input_tokens": input, "output_tokens": 12, "cache_read_input_tokens": null})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}]})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}]})
}

fn calls(ids: &[&str]) -> Value {
    let mut content = vec![json!({"type": "text", "text": "Let me check."})];
    content.extend(ids.iter().map(|id| {
        json!({"type": "tool_use", "id": id, "name": "list_free_slots", "input": {"day": "2026-12-04"}})
    }));
    json!({"role": "assistant", "content": content})
}

fn results(ids: &[&str]) -> Value {
    let content: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": "[\"09:00\"]"}))
        .collect();
    json!({"role": "user", "content": content})
}

fn tool_round(question: &str, id: &str) -> Vec<Value> {
    vec![
        user(question),
        calls(&[id]),
        results(&[id]),
        assistant("09:00 is free."),
    ]
}

fn body(head: &str, messages: Vec<Value>, usage: Value) -> Value {
    json!({"head": head, "messages": messages, "usage": usage})
}

async fn context(h: &Harness) -> ContextView {
    h.service.context(&key(), minute()).await.unwrap()
}

async fn record(h: &Harness, body: &Value) -> Result<RecordedRound, AskError> {
    let request = RoundRequest::parse(body)?;
    match h
        .service
        .record_round(&key(), &request, None, minute())
        .await?
    {
        RoundOutcome::Recorded(round) => Ok(round),
        RoundOutcome::Replayed(body) => panic!("unexpected replay {body}"),
    }
}

/// Every stored message and the head, to show that nothing changed.
async fn snapshot(h: &Harness) -> String {
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    let head = h.store.load_head(&key()).await.unwrap();
    format!(
        "{:?} {:?} {}",
        page.messages,
        head,
        h.store.item_count(&key())
    )
}

fn texts(messages: &[RequestMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|m| serde_json::to_string(&m.content).unwrap())
        .collect()
}

#[tokio::test]
async fn a_new_contact_gets_a_new_sessions_context_and_its_first_recorded_round_creates_it() {
    let h = harness();
    let view = context(&h).await;
    assert_eq!(
        (view.session, view.head.as_str(), view.opens_session),
        (1, "h1.-.0.0.1", true)
    );
    assert!(view.context.messages.is_empty());
    assert_eq!(view.context.system.len(), 2);
    assert!(
        view.context
            .system
            .iter()
            .all(|b| b.cache_control.is_some())
    );
    assert_eq!(
        h.store.item_count(&key()),
        0,
        "reading the context writes nothing"
    );

    let round = record(
        &h,
        &body(
            &view.head,
            tool_round("Free on Friday?", "toolu_a"),
            usage(900),
        ),
    )
    .await
    .unwrap();
    assert_eq!(round.session, 1);
    assert_eq!((round.round.first_seq, round.round.last_seq), (1, 4));
    assert_eq!(round.usage.context_tokens, 900);
    assert!(!round.compaction_queued);
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    let roles: Vec<Role> = page.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    assert_eq!(page.messages[3].usage.unwrap().input_tokens, 900);
    assert!(
        page.messages[1].usage.is_none(),
        "only the last call's usage is known"
    );
    let head = h.store.load_head(&key()).await.unwrap().unwrap();
    assert_eq!((head.last_seq, head.last_context_tokens), (4, 900));
    assert!(head.incarnation.is_some());

    let next = context(&h).await;
    assert!(!next.opens_session);
    assert_eq!(next.head, format!("h1.{}.1.4.0", head.incarnation.unwrap()));
    assert_eq!(next.context.messages.len(), 4);
}

#[tokio::test]
async fn the_context_is_what_ask_sends_before_its_round_and_asks_see_recorded_rounds() {
    let h = harness();
    h.model.push(ScriptedModel::text(
        "Hello!",
        Usage {
            input_tokens: 100,
            ..Usage::default()
        },
    ));
    answered(h.service.ask(&key(), "Hi", None, minute()).await.unwrap());
    let view = context(&h).await;
    record(
        &h,
        &body(
            &view.head,
            tool_round("Free on Friday?", "toolu_b"),
            usage(300),
        ),
    )
    .await
    .unwrap();

    let view = context(&h).await;
    h.model
        .push(ScriptedModel::text("Booked.", Usage::default()));
    answered(
        h.service
            .ask(&key(), "Book 09:00", None, minute())
            .await
            .unwrap(),
    );
    let sent: ModelRequest = h.model.requests().pop().unwrap();
    assert_eq!(view.context.system, sent.system);
    let (last, before) = sent.messages.split_last().unwrap();
    assert_eq!(texts(&view.context.messages), texts(before));
    assert_eq!(view.context.messages, before);
    assert_eq!(last.role, Role::User);
    assert!(
        serde_json::to_string(&sent.messages[1])
            .unwrap()
            .contains("Hello!"),
        "the recorded round follows the asked one"
    );
    assert!(serde_json::to_string(&sent).unwrap().contains("toolu_b"));
    // system: 2, the previous request's end: 1; the client adds its message's.
    let marks = view
        .context
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| b.cache_control.is_some())
        .count();
    assert_eq!(marks, 1);
}

/// A round passed on as the Messages API and its SDKs hand it over: the full usage
/// object (its 5m/1h split, `service_tier`, `server_tool_use`), text blocks with
/// `citations`, a `tool_use` with `caller`, `null` fields an SDK's dump writes, a
/// tool result as a list of text blocks. Stored as degrau keeps each block; the
/// split read.
#[tokio::test]
async fn a_round_as_the_api_returns_it_is_stored_with_what_degrau_keeps() {
    let h = harness();
    let view = context(&h).await;
    let api_usage = json!({
        "input_tokens": 40, "output_tokens": 12,
        "cache_creation_input_tokens": 900, "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 900},
        "server_tool_use": null, "service_tier": "standard", "inference_geo": "global"
    });
    let request = RoundRequest::parse(&body(
        &view.head,
        vec![
            user("Free on Friday?"),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Let me check.", "citations": null},
                {"type": "tool_use", "id": "toolu_f", "name": "list_free_slots",
                 "input": {"day": "2026-12-04"}, "caller": {"type": "direct"}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_f",
                "content": [{"type": "text", "text": "09:00"}, {"type": "text", "text": "10:00"}],
                "is_error": null}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "09:00 or 10:00.",
                "citations": [{"type": "char_location", "cited_text": "09:00", "document_index": 0,
                    "document_title": null, "start_char_index": 0, "end_char_index": 5}]}]}),
        ],
        api_usage,
    ))
    .unwrap();
    assert_eq!(
        request.usage.cache_creation_split(),
        degrau::usage::CacheCreation {
            ephemeral_5m_input_tokens: 0,
            ephemeral_1h_input_tokens: 900
        }
    );
    let round = match h
        .service
        .record_round(&key(), &request, None, minute())
        .await
        .unwrap()
    {
        RoundOutcome::Recorded(round) => round,
        RoundOutcome::Replayed(body) => panic!("unexpected replay {body}"),
    };
    assert_eq!(round.usage.context_tokens, 940);
    let page = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    let stored: Vec<Value> = page
        .messages
        .iter()
        .map(|m| serde_json::to_value(&m.content).unwrap())
        .collect();
    assert_eq!(
        stored[1..],
        [
            json!([{"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_f", "name": "list_free_slots", "input": {"day": "2026-12-04"}}]),
            json!([{"type": "tool_result", "tool_use_id": "toolu_f", "content": "09:00\n\n10:00"}]),
            json!([{"type": "text", "text": "09:00 or 10:00."}]),
        ]
    );
}

#[tokio::test]
async fn a_round_holding_blocks_the_api_refuses_back_is_stored_as_the_api_takes_it_back() {
    // Issue 38: a client records what Claude sent, an empty text beside the tool
    // call included; degrau stores what can be sent again, and the next request
    // built from it is one the API accepts.
    let h = harness();
    let view = context(&h).await;
    let round = body(
        &view.head,
        vec![
            user("Free on Friday?"),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": ""},
                {"type": "tool_use", "id": "toolu_e", "name": "list_free_slots",
                 "input": {"day": "2026-12-04"}}]}),
            results(&["toolu_e"]),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "\n\n"}, {"type": "text", "text": "09:00 is free."}]}),
        ],
        usage(60),
    );
    record(&h, &round).await.unwrap();
    let stored: Vec<Value> = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| serde_json::to_value(&m.content).unwrap())
        .collect();
    assert_eq!(
        stored[1],
        json!([{"type": "tool_use", "id": "toolu_e", "name": "list_free_slots",
            "input": {"day": "2026-12-04"}}])
    );
    assert_eq!(
        stored[3],
        json!([{"type": "text", "text": "\n\n"}, {"type": "text", "text": "09:00 is free."}]),
        "whitespace beside text is accepted back, and kept"
    );
    h.model
        .push(ScriptedModel::text("Booked.", Usage::default()));
    answered(
        h.service
            .ask(&key(), "book 09:00", None, minute())
            .await
            .unwrap(),
    );

    // An answer that ends the round with only whitespace is no answer.
    let view = context(&h).await;
    let blank = body(
        &view.head,
        vec![user("and Saturday?"), assistant(" ")],
        usage(80),
    );
    let error = record(&h, &blank).await.unwrap_err();
    assert!(
        matches!(&error, AskError::InvalidRequest(text)
            if text.starts_with("messages.1.content: holds no text")),
        "{error:?}"
    );
}

#[tokio::test]
async fn bad_rounds_get_clear_errors_and_change_nothing() {
    let h = harness();
    let view = context(&h).await;
    record(
        &h,
        &body(&view.head, tool_round("hi", "toolu_seen"), usage(10)),
    )
    .await
    .unwrap();
    let head = context(&h).await.head;
    let before = snapshot(&h).await;
    let many: Vec<Value> = std::iter::once(user("slots?"))
        .chain((0..MAX_ROUND_MESSAGES / 2).flat_map(|i| {
            let id = format!("toolu_{i}");
            [calls(&[&id]), results(&[&id])]
        }))
        .chain(std::iter::once(assistant("done")))
        .collect();
    let big_result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x",
        "content": "x".repeat(MAX_TOOL_RESULT_CHARS + 1)}]});
    let ids = ["toolu_1", "toolu_2", "toolu_3", "toolu_4", "toolu_5"];
    let share = MAX_RESULTS_CHARS_PER_MESSAGE / (ids.len() - 1);
    let big_message = json!({"role": "user", "content": ids.iter().map(|id| json!(
        {"type": "tool_result", "tool_use_id": id, "content": "y".repeat(share.min(MAX_TOOL_RESULT_CHARS))})).collect::<Vec<_>>()});
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            // No usage is allowed (degrau estimates it); no message is not.
            json!({"head": head, "messages": []}),
            "invalid",
            "`messages` is empty",
        ),
        (
            json!({"head": head, "messages": [], "usage": usage(1), "x": 1}),
            "invalid",
            "unknown field `x`",
        ),
        (
            body("nonsense", tool_round("hi", "toolu_n"), usage(1)),
            "invalid",
            "`head` must be",
        ),
        (
            body(&head, vec![], usage(1)),
            "invalid",
            "`messages` is empty",
        ),
        (
            body(&head, vec![user("a"), user("b"), assistant("c")], usage(1)),
            "invalid",
            "messages.1: two user messages in a row",
        ),
        (
            body(&head, vec![assistant("a")], usage(1)),
            "invalid",
            "messages.0: a round starts",
        ),
        (
            body(&head, vec![user("a")], usage(1)),
            "invalid",
            "messages.0: a round ends with the assistant",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    assistant("b"),
                    results(&["toolu_z"]),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "`tool_result` answers toolu_z, which no `tool_use` of messages.1 holds",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    calls(&["toolu_q", "toolu_r"]),
                    results(&["toolu_q"]),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_r",
        ),
        (
            body(&head, vec![user("a"), calls(&["toolu_q"])], usage(1)),
            "invalid",
            "the round ends with `tool_use` ids that have no `tool_result`: toolu_q",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    calls(&["toolu_q"]),
                    results(&["toolu_q"]),
                    user("b"),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "two user messages in a row",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    calls(&["toolu_q"]),
                    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_q", "content": "1"}, {"type": "text", "text": "and?"}]}),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "holds only the `tool_result` blocks",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    calls(&["toolu_q", "toolu_q"]),
                    results(&["toolu_q"]),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "`tool_use` id toolu_q is used twice",
        ),
        (
            body(
                &head,
                vec![
                    json!({"role": "user", "content": [{"type": "image", "source": {}}]}),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "messages.0.content.0.type: degrau stores",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    calls(&["toolu_q"]),
                    json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_q", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "send `content` as a string or a list of `text` blocks",
        ),
        (
            body(
                &head,
                tool_round("a", "toolu_u"),
                json!({"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 30,
                    "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 10}}),
            ),
            "invalid",
            "usage.cache_creation adds up to 20 tokens but usage.cache_creation_input_tokens is 30",
        ),
        (
            body(
                &head,
                tool_round("a", "toolu_u"),
                json!({"input_tokens": 1, "output_tokens": 1,
                    "cache_creation": {"ephemeral_5m_input_tokens": 10_000_001_u64}}),
            ),
            "invalid",
            "usage.cache_creation.ephemeral_5m_input_tokens is 10000001",
        ),
        (
            body(&head, vec![user("  "), assistant("c")], usage(1)),
            "invalid",
            "non-whitespace",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]}),
                ],
                usage(1),
            ),
            "invalid",
            "holds no text",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    json!({"role": "assistant", "content": [{"type": "tool_use", "id": "bad id", "name": "t", "input": {}}]}),
                ],
                usage(1),
            ),
            "invalid",
            ".id: a `tool_use` id",
        ),
        (
            body(
                &head,
                vec![
                    user("a"),
                    json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_i", "name": "t", "input": []}]}),
                    results(&["toolu_i"]),
                    assistant("c"),
                ],
                usage(1),
            ),
            "invalid",
            "input is a JSON object",
        ),
        (
            body(
                &head,
                vec![json!({"role": "system", "content": "x"}), assistant("c")],
                usage(1),
            ),
            "invalid",
            "messages.0.role",
        ),
        (
            body(
                &head,
                tool_round("a", "toolu_u"),
                json!({"input_tokens": -1, "output_tokens": 1}),
            ),
            "invalid",
            "the body must be a JSON object",
        ),
        (
            body(
                &head,
                tool_round("a", "toolu_u"),
                json!({"input_tokens": 1.5, "output_tokens": 1}),
            ),
            "invalid",
            "the body must be a JSON object",
        ),
        (
            body(
                &head,
                tool_round("a", "toolu_u"),
                json!({"input_tokens": 10_000_001_u64, "output_tokens": 1}),
            ),
            "invalid",
            "usage.input_tokens is 10000001",
        ),
        (
            body(
                &head,
                vec![user(&"x".repeat(8_001)), assistant("c")],
                usage(1),
            ),
            "too_large",
            "the limit is 8000",
        ),
        (body(&head, many, usage(1)), "too_large", "the limit is 18"),
        (
            body(
                &head,
                vec![user("a"), calls(&["toolu_x"]), big_result, assistant("c")],
                usage(1),
            ),
            "too_large",
            "the limit is 16000",
        ),
        (
            body(
                &head,
                vec![user("a"), calls(&ids), big_message, assistant("c")],
                usage(1),
            ),
            "too_large",
            "the limit is 64000 a message",
        ),
        (
            body(&head, tool_round("again", "toolu_seen"), usage(1)),
            "invalid",
            "`tool_use` id toolu_seen is already in this session's window",
        ),
    ];
    for (bad, kind, text) in cases {
        let error = record(&h, &bad).await.unwrap_err();
        let (got, message) = match &error {
            AskError::InvalidRequest(m) => ("invalid", m),
            AskError::TooLarge(m) => ("too_large", m),
            other => panic!("{bad}: {other:?}"),
        };
        assert_eq!(got, kind, "{message}");
        assert!(message.contains(text), "{message} should say {text}");
    }
    assert_eq!(snapshot(&h).await, before);
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn a_stale_head_is_a_conflict_that_names_why_and_changes_nothing() {
    let h = harness();
    let first = context(&h).await;
    record(
        &h,
        &body(&first.head, vec![user("hi"), assistant("hello")], usage(10)),
    )
    .await
    .unwrap();
    // Another round landed since `first` was read.
    let before = snapshot(&h).await;
    let error = record(
        &h,
        &body(&first.head, vec![user("again"), assistant("ok")], usage(10)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, AskError::Conflict(m) if m.contains("another round")),
        "{error}"
    );
    assert_eq!(snapshot(&h).await, before);

    // The session went idle: the round read as continuing it would open a new one.
    let read = context(&h).await;
    h.clock.fetch_add(25 * 3600, Ordering::SeqCst);
    let error = record(
        &h,
        &body(&read.head, vec![user("later"), assistant("ok")], usage(10)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, AskError::Conflict(m) if m.contains("went idle")),
        "{error}"
    );
    assert_eq!(snapshot(&h).await, before);

    // Erased, and started again by someone else.
    let read = context(&h).await;
    records_of(&h.service, &h.store)
        .erase(&key())
        .await
        .unwrap();
    // A second later (a new life begins after the erase; see
    // `commit_outcome::an_attempt_landing_after_an_erase_is_refused…`).
    h.clock.fetch_add(1, Ordering::SeqCst);
    let fresh = context(&h).await;
    record(
        &h,
        &body(
            &fresh.head,
            vec![user("new life"), assistant("hi")],
            usage(10),
        ),
    )
    .await
    .unwrap();
    let error = record(
        &h,
        &body(
            &read.head,
            vec![user("old life"), assistant("ok")],
            usage(10),
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, AskError::Conflict(m) if m.contains("erased")),
        "{error}"
    );
}

#[tokio::test]
async fn a_step_between_the_context_and_the_commit_does_not_make_the_head_stale() {
    let h = harness();
    let view = context(&h).await;
    record(
        &h,
        &body(&view.head, tool_round("slots?", "toolu_1"), usage(10)),
    )
    .await
    .unwrap();
    let view = context(&h).await;
    h.store
        .set_summarized_until(&key(), 2, Some("The customer asked for slots.".into()));
    let round = record(
        &h,
        &body(
            &view.head,
            vec![user("thanks"), assistant("bye")],
            usage(10),
        ),
    )
    .await
    .unwrap();
    assert_eq!((round.round.first_seq, round.round.last_seq), (5, 6));
    let head = h.store.load_head(&key()).await.unwrap().unwrap();
    assert_eq!(
        (head.summarized_until, head.summary.as_deref(), head.steps),
        (2, Some("The customer asked for slots."), 1),
        "the step is kept"
    );
}

#[tokio::test]
async fn recorded_rounds_request_steps_open_sessions_and_request_facts_like_asked_ones() {
    let h = harness();
    h.store
        .put_tenant_config(
            &key().tenant,
            &TenantConfig {
                compaction_threshold_tokens: Some(500),
                ..TenantConfig::default()
            },
        )
        .await
        .unwrap();
    let view = context(&h).await;
    let round = record(
        &h,
        &body(&view.head, tool_round("slots?", "toolu_1"), usage(600)),
    )
    .await
    .unwrap();
    assert!(round.compaction_queued);
    assert!(matches!(
        h.jobs.jobs.lock().unwrap().as_slice(),
        [Job::Step {
            session: 1,
            summarized_until: 0,
            ..
        }]
    ));

    h.clock.fetch_add(25 * 3600, Ordering::SeqCst);
    let view = context(&h).await;
    assert!(view.opens_session);
    assert_eq!(view.session, 2);
    assert!(view.context.messages.is_empty());
    let round = record(
        &h,
        &body(
            &view.head,
            vec![user("back"), assistant("welcome")],
            usage(50),
        ),
    )
    .await
    .unwrap();
    assert_eq!((round.session, round.round.first_seq), (2, 1));
    let jobs = h.jobs.jobs.lock().unwrap().clone();
    assert!(
        matches!(
            jobs.as_slice(),
            [
                ..,
                Job::Facts { session: 1, .. },
                Job::Index { session: 1, .. }
            ]
        ),
        "the closed session's facts and index requested: {jobs:?}"
    );
    assert!(
        h.store.archive(&key(), 1).is_some(),
        "the closed session is archived"
    );
}

#[tokio::test]
async fn recorded_rounds_are_idempotent_and_a_failed_attempt_frees_its_key() {
    let h = harness();
    let idem = IdempotencyKey::parse("round-1").unwrap();
    let view = context(&h).await;
    let good = RoundRequest::parse(&body(
        &view.head,
        tool_round("slots?", "toolu_1"),
        usage(10),
    ))
    .unwrap();
    let RoundOutcome::Recorded(first) = h
        .service
        .record_round(&key(), &good, Some(&idem), minute())
        .await
        .unwrap()
    else {
        panic!("the first attempt records");
    };
    // The retry carries a head that is stale by now: the replay comes first.
    let replay = h
        .service
        .record_round(&key(), &good, Some(&idem), minute())
        .await
        .unwrap();
    assert_eq!(
        replay,
        RoundOutcome::Replayed(serde_json::to_string(&first).unwrap())
    );
    let other = RoundRequest::parse(&body(
        &view.head,
        vec![user("x"), assistant("y")],
        usage(10),
    ))
    .unwrap();
    assert!(matches!(
        h.service
            .record_round(&key(), &other, Some(&idem), minute())
            .await,
        Err(AskError::IdempotencyMismatch)
    ));
    // A stale attempt under a new key fails and frees the key for the fixed body.
    let key2 = IdempotencyKey::parse("round-2").unwrap();
    assert!(matches!(
        h.service
            .record_round(&key(), &other, Some(&key2), minute())
            .await,
        Err(AskError::Conflict(_))
    ));
    let fresh = context(&h).await;
    let fixed = RoundRequest::parse(&body(
        &fresh.head,
        vec![user("x"), assistant("y")],
        usage(10),
    ))
    .unwrap();
    assert!(matches!(
        h.service
            .record_round(&key(), &fixed, Some(&key2), minute())
            .await,
        Ok(RoundOutcome::Recorded(_))
    ));
}

#[tokio::test]
async fn every_accepted_round_makes_a_next_request_the_api_accepts() {
    // The shapes accepted, appended to the window with the next user message, pass
    // the Messages API's own rules (the core's copy of them).
    let h = harness();
    let rounds: Vec<Vec<Value>> = vec![
        vec![user("hi"), assistant("hello")],
        tool_round("slots?", "toolu_1"),
        vec![
            json!({"role": "user", "content": "plain string content"}),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "Checking both days."},
                {"type": "tool_use", "id": "toolu_2", "name": "list_free_slots", "input": {"day": "2026-12-04"}},
                {"type": "tool_use", "id": "toolu_3", "name": "list_free_slots", "input": {"day": "2026-12-05"}, "cache_control": {"type": "ephemeral"}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_3", "content": "[]", "is_error": true},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "[\"10:00\"]"}]}),
            json!({"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "10:00 on the 4th."}]}),
        ],
    ];
    for round in rounds {
        let view = context(&h).await;
        record(&h, &body(&view.head, round, usage(10)))
            .await
            .unwrap();
    }
    h.model.push(ScriptedModel::text("ok", Usage::default()));
    answered(
        h.service
            .ask(&key(), "and now?", None, minute())
            .await
            .unwrap(),
    );
    let sent = h.model.requests().pop().unwrap();
    assert_eq!(validate_request(&sent), Ok(()));
    assert_eq!(sent.messages.len(), 2 + 4 + 4 + 1);
    let stored: Vec<Message> = h
        .store
        .transcript(&key(), SessionFilter::All, 200, None)
        .await
        .unwrap()
        .messages
        .iter()
        .map(|m| m.to_message())
        .collect();
    assert_eq!(stored[6].text(), "plain string content");
}

#[tokio::test]
async fn a_recorded_tool_round_of_a_tenant_without_tools_reaches_the_next_ask_as_text() {
    // A tenant with no tools of degrau's own, whose client's loop runs its own.
    let h = harness();
    let config: TenantConfig = serde_json::from_value(json!({"tools": []})).unwrap();
    h.store
        .put_tenant_config(&key().tenant, &config)
        .await
        .unwrap();
    let view = context(&h).await;
    record(
        &h,
        &body(
            &view.head,
            tool_round("Free on Friday?", "toolu_own"),
            usage(300),
        ),
    )
    .await
    .unwrap();
    // The strict model refuses a request with tool blocks and no tools, as the API
    // does: before, every later ask was a 502 until a step folded the round.
    h.model
        .push(ScriptedModel::text("Booked.", Usage::default()));
    answered(
        h.service
            .ask(&key(), "Book 09:00", None, minute())
            .await
            .unwrap(),
    );
    let sent = h.model.requests().pop().unwrap();
    assert!(sent.tools.is_empty());
    validate_request(&sent).unwrap();
    let json = serde_json::to_string(&sent.messages).unwrap();
    assert!(
        !json.contains("tool_use") && !json.contains("tool_result"),
        "{json}"
    );
    assert!(json.contains("[the agent called list_free_slots {\\\"day\\\":\\\"2026-12-04\\\"}]"));
    assert!(json.contains("[the tool returned: [\\\"09:00\\\"]]"));
    // The context a client's own loop reads keeps the blocks: it brings its tools.
    let view = context(&h).await;
    assert!(
        serde_json::to_string(&view.context)
            .unwrap()
            .contains("toolu_own")
    );
}
