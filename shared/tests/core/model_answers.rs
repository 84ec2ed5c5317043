//! Model answers as a real model sends them (issue 38): blocks the API refuses
//! when they are sent back, empty answers, and a request that breaks the rules
//! after a tool ran. A tool runs at most once per `tool_use` the model emitted; a
//! contact is never wedged by an answer's own blocks. Each case runs on the JSON
//! route and the streamed one, which must store the same.

use std::sync::Arc;

use async_trait::async_trait;
use degrau::converse::{AskError, AskResponse, Converse, RoundEvent, RoundEvents};
use degrau::domain::{ContentBlock, Role};
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::StopReason;
use degrau::model::scripted::{ScriptedModel, Step, response};
use degrau::plan::request::ToolDef;
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::tools::{CallContext, ToolDeclaration, ToolDispatch, ToolOutput, Tools};
use degrau::usage::Usage;
use serde_json::json;

use crate::helpers::{answered, ask_service, key, minute, test_clock};

/// The demo tools, counting every call by its `tool_use` id.
#[derive(Default)]
struct CountingTools {
    calls: std::sync::Mutex<Vec<String>>,
}

#[async_trait]
impl Tools for CountingTools {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        ToolDispatch::built_in_only().definitions(declared)
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &serde_json::Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        self.calls
            .lock()
            .unwrap()
            .push(context.tool_use_id.to_owned());
        ToolDispatch::built_in_only()
            .call(tool, input, context)
            .await
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    tools: Arc<CountingTools>,
    service: Converse,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let tools = Arc::new(CountingTools::default());
    let (_, clock) = test_clock();
    let service = ask_service(
        &store,
        model.clone(),
        tools.clone(),
        Arc::new(NoJobs),
        Defaults::default(),
        clock,
    );
    Harness {
        store,
        model,
        tools,
        service,
    }
}

/// The two routes of a round.
#[derive(Debug, Clone, Copy)]
enum Route {
    Json,
    Streamed,
}

const ROUTES: [Route; 2] = [Route::Json, Route::Streamed];

/// A listener that keeps nothing: the streamed route's store is what is checked.
struct Quiet;

impl RoundEvents for Quiet {
    fn event(&self, _: RoundEvent) {}
}

impl Harness {
    async fn ask(&self, route: Route, text: &str) -> Result<AskResponse, AskError> {
        let outcome = match route {
            Route::Json => self.service.ask(&key(), text, None, minute()).await,
            Route::Streamed => {
                self.service
                    .ask_streamed(&key(), text, None, minute(), &Quiet)
                    .await
            }
        };
        outcome.map(answered)
    }

    async fn stored(&self) -> Vec<(Role, Vec<ContentBlock>)> {
        self.store
            .transcript(&key(), SessionFilter::All, 200, None)
            .await
            .unwrap()
            .messages
            .into_iter()
            .map(|m| (m.role, m.content))
            .collect()
    }

    fn tool_calls(&self) -> Vec<String> {
        self.tools.calls.lock().unwrap().clone()
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

fn answer(content: Vec<ContentBlock>, stop: StopReason) -> Step {
    Ok(response(content, stop, usage()))
}

fn booking() -> ContentBlock {
    ContentBlock::tool_use(
        "toolu_book",
        "book_slot",
        json!({"day": "2026-12-04", "time": "10:30", "service": "haircut"}),
    )
}

#[tokio::test]
async fn an_empty_text_beside_a_tool_call_runs_the_tool_once_and_stores_what_the_api_takes_back() {
    for route in ROUTES {
        let h = harness();
        // The API's own answer; sent back as it came it is refused ("text content
        // blocks must be non-empty"), and `ask` re-ran the round, tool and all,
        // three times, then answered 409.
        h.model.push(answer(
            vec![ContentBlock::text(""), booking()],
            StopReason::ToolUse,
        ));
        h.model
            .push(ScriptedModel::text("Booked for 10:30.", usage()));
        let reply = h.ask(route, "book 10:30 on 2026-12-04").await.unwrap();
        assert_eq!(reply.reply.text, "Booked for 10:30.", "{route:?}");
        assert_eq!(
            h.tool_calls(),
            ["toolu_book"],
            "{route:?}: the tool ran once"
        );
        let stored = h.stored().await;
        assert_eq!(stored.len(), 4, "{route:?}: the round, once");
        assert_eq!(stored[1], (Role::Assistant, vec![booking()]), "{route:?}");
        h.model
            .push(ScriptedModel::text("You're welcome.", usage()));
        h.ask(route, "thanks").await.unwrap();
        assert_eq!(h.model.requests().len(), 3, "{route:?}: no call refused");
    }
}

#[tokio::test]
async fn newlines_before_a_tool_call_are_stored_as_the_model_sent_them() {
    for route in ROUTES {
        let h = harness();
        let asked = vec![ContentBlock::text("\n\n"), booking()];
        h.model.push(answer(asked.clone(), StopReason::ToolUse));
        h.model.push(ScriptedModel::text("Booked.", usage()));
        h.ask(route, "book 10:30 on 2026-12-04").await.unwrap();
        assert_eq!(h.tool_calls().len(), 1, "{route:?}");
        assert_eq!(h.stored().await[1], (Role::Assistant, asked), "{route:?}");
    }
}

#[tokio::test]
async fn an_answer_of_whitespace_is_asked_for_once_more_and_the_next_answer_stored() {
    for route in ROUTES {
        let h = harness();
        h.model.push(ScriptedModel::text(" ", usage()));
        h.model.push(ScriptedModel::text("Hello!", usage()));
        let reply = h.ask(route, "hi").await.unwrap();
        assert_eq!(reply.reply.text, "Hello!", "{route:?}");
        assert_eq!(
            h.model.requests()[0].messages,
            h.model.requests()[1].messages,
            "{route:?}: the same request again"
        );
        assert_eq!(h.stored().await.len(), 2, "{route:?}");
    }
}

#[tokio::test]
async fn two_empty_answers_are_the_empty_answer_and_store_nothing() {
    for route in ROUTES {
        for empty in [
            vec![ContentBlock::text(" ")],
            vec![],
            vec![ContentBlock::text(""), ContentBlock::text("\n")],
        ] {
            let h = harness();
            h.model.push(answer(empty.clone(), StopReason::EndTurn));
            h.model.push(answer(empty.clone(), StopReason::EndTurn));
            let error = h.ask(route, "hi").await.unwrap_err();
            assert!(
                matches!(error, AskError::EmptyAnswer),
                "{route:?} {empty:?}: {error:?}"
            );
            assert!(h.stored().await.is_empty(), "{route:?} {empty:?}");
            // The contact is not wedged: its next message is answered.
            h.model.push(ScriptedModel::text("Hello!", usage()));
            h.ask(route, "hi again").await.unwrap();
        }
    }
}

#[tokio::test]
async fn a_contact_wedged_by_an_answer_stored_before_normalisation_is_answered_again() {
    for route in ROUTES {
        let h = harness();
        h.model.push(ScriptedModel::text("Hello!", usage()));
        h.ask(route, "hi").await.unwrap();
        // What an earlier version stored: the model's whitespace answer, verbatim.
        h.store
            .replace_content(&key(), 1, 2, vec![ContentBlock::text(" ")]);
        h.model.push(ScriptedModel::text("Sure.", usage()));
        let reply = h.ask(route, "are you there?").await.unwrap();
        assert_eq!(reply.reply.text, "Sure.", "{route:?}");
        let sent = &h.model.requests()[1];
        assert_eq!(
            sent.messages.len(),
            1,
            "{route:?}: the two user turns as one"
        );
        let texts: Vec<&ContentBlock> = sent.messages[0].content.iter().map(|b| &b.block).collect();
        assert_eq!(
            texts,
            [
                &ContentBlock::text("hi"),
                &ContentBlock::text("are you there?")
            ],
            "{route:?}"
        );
    }
}

#[tokio::test]
async fn a_request_that_breaks_the_rules_after_a_tool_ran_stops_the_round_and_never_reruns_it() {
    for route in ROUTES {
        let h = harness();
        h.store
            .put_tenant_config(
                &key().tenant,
                &serde_json::from_value::<TenantConfig>(json!({"thinking_budget_tokens": 2048}))
                    .unwrap(),
            )
            .await
            .unwrap();
        // With thinking on, a tool loop's answer must lead with its thinking; one
        // that does not makes the next request one the API refuses.
        h.model.push(answer(vec![booking()], StopReason::ToolUse));
        let error = h.ask(route, "book 10:30 on 2026-12-04").await.unwrap_err();
        assert!(
            matches!(error, AskError::UnsendableRound(_)),
            "{route:?}: {error:?}"
        );
        assert_eq!(
            h.tool_calls(),
            ["toolu_book"],
            "{route:?}: the tool ran once"
        );
        assert_eq!(h.model.requests().len(), 1, "{route:?}: never sent");
        assert!(h.stored().await.is_empty(), "{route:?}");
    }
}

/// The scripted model, taking `seconds` of the test's clock (and of tokio's
/// paused one) for every answer.
struct SlowModel {
    inner: Arc<ScriptedModel>,
    clock: Arc<std::sync::atomic::AtomicI64>,
    seconds: u64,
}

#[async_trait]
impl degrau::model::Model for SlowModel {
    async fn create(
        &self,
        request: &degrau::plan::request::ModelRequest,
        deadline: degrau::deadline::Deadline,
    ) -> Result<degrau::model::ModelResponse, degrau::model::ModelError> {
        tokio::time::sleep(std::time::Duration::from_secs(self.seconds)).await;
        self.clock.fetch_add(
            i64::try_from(self.seconds).unwrap(),
            std::sync::atomic::Ordering::SeqCst,
        );
        self.inner.create(request, deadline).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_streamed_round_longer_than_the_lease_keeps_its_key_from_a_same_key_retry() {
    // Issue 38: the 120 s lease ended while its own streamed round (up to
    // STREAM_TIMEOUT_SECONDS) still ran; a retry with the key then ran the round,
    // and its tools, a second time.
    use degrau::domain::IdempotencyKey;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let store = Arc::new(MemoryStore::new());
    let scripted = Arc::new(ScriptedModel::default());
    let (clock, now) = test_clock();
    let slow = Arc::new(SlowModel {
        inner: scripted.clone(),
        clock: clock.clone(),
        seconds: 150,
    });
    let service = ask_service(
        &store,
        slow,
        Arc::new(ToolDispatch::built_in_only()),
        Arc::new(NoJobs),
        Defaults::default(),
        now,
    );
    scripted.push(ScriptedModel::text("Here you are.", usage()));
    let idem = IdempotencyKey::parse("retry-of-a-long-stream").unwrap();
    let budget = || degrau::deadline::Deadline::after(Duration::from_secs(300));
    let contact = key();
    let first = service.ask_streamed(&contact, "hi", Some(&idem), budget(), &Quiet);
    let retry = async {
        tokio::time::sleep(Duration::from_secs(130)).await;
        clock.fetch_add(130, Ordering::SeqCst);
        service.ask(&key(), "hi", Some(&idem), budget()).await
    };
    let (first, retry) = tokio::join!(first, retry);
    answered(first.unwrap());
    let error = retry.unwrap_err();
    assert!(matches!(&error, AskError::InProgress), "{error:?}");
    assert_eq!(scripted.requests().len(), 1, "the round ran once");
}

/// Quotas that count rounds at once and summary calls slowly.
struct SlowSummaryCount(degrau::quota::memory::MemoryQuotas);

#[async_trait]
impl degrau::quota::Quotas for SlowSummaryCount {
    async fn try_spend(
        &self,
        tenant: &degrau::domain::TenantId,
        kind: degrau::quota::QuotaKind,
        period: i64,
        limit: u32,
        expires_at: i64,
    ) -> Result<bool, degrau::store::StoreError> {
        if kind == degrau::quota::QuotaKind::SummaryCalls {
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        }
        self.0
            .try_spend(tenant, kind, period, limit, expires_at)
            .await
    }
}

/// A commit that takes a second, as a `TransactWriteItems` can.
struct SlowCommit;

#[async_trait]
impl degrau::testing::hooked::Hook for SlowCommit {
    async fn before(
        &self,
        call: degrau::testing::hooked::Call<'_>,
    ) -> Result<(), degrau::store::StoreError> {
        if let degrau::testing::hooked::Call::CommitRound(_) = call {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_slow_count_of_the_step_s_summary_call_defers_the_step_and_leaves_the_commit_its_time() {
    // Issue 38: the count before the commit ran to the ask's deadline, and the
    // commit then had none: 503 "may be stored", nothing stored, the key held.
    use degrau::testing::hooked::Hooked;
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(Hooked::new(memory.clone(), SlowCommit));
    let model = Arc::new(ScriptedModel::default());
    let (_, clock) = test_clock();
    let defaults = Defaults {
        compaction: degrau::plan::step_plan::CompactionPolicy {
            threshold_tokens: 1_000,
            ..degrau::plan::step_plan::CompactionPolicy::default()
        },
        ..Defaults::default()
    };
    let service = Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: store,
        model: model.clone(),
        tools: Arc::new(ToolDispatch::built_in_only()),
        jobs: Arc::new(NoJobs),
        quotas: Arc::new(SlowSummaryCount(degrau::quota::memory::MemoryQuotas::new())),
        defaults,
        clock,
    };
    model.push(ScriptedModel::text(
        "Noted.",
        Usage {
            input_tokens: 5_000,
            ..usage()
        },
    ));
    let deadline = degrau::deadline::Deadline::after(std::time::Duration::from_secs(25));
    let reply = answered(service.ask(&key(), "hi", None, deadline).await.unwrap());
    assert!(
        !reply.compaction_queued,
        "the step waits for the next round"
    );
    let stored = memory
        .transcript(&key(), SessionFilter::All, 10, None)
        .await
        .unwrap();
    assert_eq!(stored.messages.len(), 2);
}
