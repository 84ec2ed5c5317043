//! What a round's client is told when its commit fails: "nothing was stored" only
//! when nothing was, or can be. A transaction whose connection dropped may still be
//! applied by DynamoDB after the round looked at the head and found it as loaded
//! (the simulator's late writes found a round told 503 "nothing was stored" and
//! then stored, `sim/regressions/a-commit-that-lands-late-was-told-nothing-stored.json`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use degrau::converse::{AskError, AskOutcome};
use degrau::domain::IdempotencyKey;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::store::{RecordStore, RoundStore, StoreError};
use degrau::tenant::Defaults;
use degrau::testing::hooked::{Call, Hook, Hooked};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;

use crate::helpers::{key, minute, records_of, test_clock};

/// Drops the first commit's connection: the caller gets an error at once, and
/// the transaction is applied a moment later.
struct DroppedOnce {
    memory: Arc<MemoryStore>,
    dropped: AtomicBool,
}

#[async_trait]
impl Hook for DroppedOnce {
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        if let Call::CommitRound(commit) = call
            && !self.dropped.swap(true, Ordering::SeqCst)
        {
            let (memory, commit) = (self.memory.clone(), commit.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                memory.commit_round(&commit).await.unwrap();
            });
            return Err(StoreError::Unavailable("connection dropped".into()));
        }
        Ok(())
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 10,
        output_tokens: 10,
        ..Usage::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_commit_whose_connection_dropped_is_never_told_nothing_was_stored() {
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(Hooked::new(
        memory.clone(),
        DroppedOnce {
            memory: memory.clone(),
            dropped: AtomicBool::new(false),
        },
    ));
    let model = Arc::new(ScriptedModel::default());
    model.push(ScriptedModel::text("hello", usage()));
    model.push(ScriptedModel::text("hello again", usage()));
    let (_clock, now) = test_clock();
    let service = degrau::converse::Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: memory.clone(),
        model,
        tools: Arc::new(ToolDispatch::built_in_only()),
        jobs: Arc::new(NoJobs),
        quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
        defaults: Defaults::default(),
        clock: now,
    };
    let idem = IdempotencyKey::parse("key-1").unwrap();
    let error = service
        .ask(&key(), "hi", Some(&idem), minute())
        .await
        .unwrap_err();
    assert!(
        matches!(error, AskError::Indeterminate),
        "the round may be stored, so it is not told nothing was: {error:?}"
    );
    // The transaction lands after the answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(memory.item_count(&key()) > 0, "the late commit landed");
    // The same request again gets the stored round, never a second one.
    let again = service
        .ask(&key(), "hi", Some(&idem), minute())
        .await
        .unwrap();
    assert!(
        matches!(again, AskOutcome::Replayed(_)),
        "the retry replays the round that landed: {again:?}"
    );
}

/// Holds the first commit back (its caller told the connection dropped) and
/// lands it just before the next commit: the earlier attempt's transaction
/// applied while a retry of the same request runs. What the store answered the
/// late landing is kept in `landed`.
struct LandsBeforeTheNext {
    memory: Arc<MemoryStore>,
    held: std::sync::Mutex<Option<Option<degrau::store::RoundCommit>>>,
    landed: Arc<std::sync::Mutex<Option<Result<(), StoreError>>>>,
}

#[async_trait]
impl Hook for LandsBeforeTheNext {
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        let Call::CommitRound(commit) = call else {
            return Ok(());
        };
        let held = {
            let mut held = self.held.lock().unwrap();
            match held.take() {
                None => {
                    *held = Some(Some(commit.clone()));
                    return Err(StoreError::Unavailable("connection dropped".into()));
                }
                Some(first) => {
                    *held = Some(None);
                    first
                }
            }
        };
        if let Some(first) = held {
            let landed = self.memory.commit_round(&first).await;
            *self.landed.lock().unwrap() = Some(landed);
        }
        Ok(())
    }
}

/// The first attempt's transaction lands late, after an erase that took its
/// claim: it began before the erase, so it is refused and brings nothing of the
/// erased contact back (the simulator's seed 2485 stored it into the contact's
/// next life); the retry, begun after the erase, stores the message once.
#[tokio::test(start_paused = true)]
async fn an_attempt_landing_after_an_erase_is_refused_and_its_retry_stores_the_message_once() {
    let memory = Arc::new(MemoryStore::new());
    let landed = Arc::new(std::sync::Mutex::new(None));
    let hook = LandsBeforeTheNext {
        memory: memory.clone(),
        held: std::sync::Mutex::new(None),
        landed: landed.clone(),
    };
    let store = Arc::new(Hooked::new(memory.clone(), hook));
    let model = Arc::new(ScriptedModel::default());
    for answer in ["first", "second", "third"] {
        model.push(ScriptedModel::text(answer, usage()));
    }
    let (clock, now) = test_clock();
    let service = degrau::converse::Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: memory.clone(),
        model,
        tools: Arc::new(ToolDispatch::built_in_only()),
        jobs: Arc::new(NoJobs),
        quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
        defaults: Defaults::default(),
        clock: now,
    };
    let idem = IdempotencyKey::parse("key-1").unwrap();
    let first = service.ask(&key(), "hi", Some(&idem), minute()).await;
    assert!(matches!(first, Err(AskError::Indeterminate)), "{first:?}");
    // An erase after the failure takes its claim with everything else; the
    // retry comes a second later.
    records_of(&service, &store).erase(&key()).await.unwrap();
    clock.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let again = service
        .ask(&key(), "hi", Some(&idem), minute())
        .await
        .unwrap();
    let landed = landed.lock().unwrap().take();
    assert!(
        matches!(landed, Some(Err(StoreError::Conflict(_)))),
        "the late first attempt is refused: {landed:?}"
    );
    let page = memory
        .transcript(&key(), degrau::store::SessionFilter::All, 50, None)
        .await
        .unwrap();
    assert_eq!(
        page.messages.len(),
        2,
        "the message is stored once, by the retry: {again:?}"
    );
    assert!(
        matches!(&again, AskOutcome::Answered(response) if response.reply.text == "second"),
        "{again:?}"
    );
}
