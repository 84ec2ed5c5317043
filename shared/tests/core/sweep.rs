//! The session sweep against the in-memory store, the ask service and a recording
//! jobs queue: an idle session's facts are requested once, by the sweep or by the
//! next message, never by both; tenants' own timeouts are honoured; failures leave
//! the session for the next sweep.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;
use degrau::compaction::{Compactor, CompactorError, SweepReport, Wiring};
use degrau::converse::Converse;
use degrau::deadline::Deadline;
use degrau::domain::{Incarnation, TenantId};
use degrau::jobs::{Job, NoJobs};
use degrau::memory::MemoryStore;
use degrau::model::scripted::ScriptedModel;
use degrau::plan::sweep::{DEFAULT_SWEEP_BUCKETS, FACTS_RETRY_SECONDS};
use degrau::store::{
    ContactKey, JobStore, PendingChange, RecordStore, StoreError, SweepSettle, SweepStore,
};
use degrau::tenant::{Defaults, TenantConfig, TenantStore};
use degrau::testing::hooked::{Call, Hook, Hooked};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;

use crate::helpers::{
    RecordingJobs, START, ask_service, compactor, contact_key as key, records_of, test_clock,
};

const MINUTE: i64 = 60;
/// The default idle timeout of these tests (`Defaults::session_idle_minutes`).
const IDLE: i64 = 24 * 60 * MINUTE;

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    clock: Arc<AtomicI64>,
    /// What the ask service enqueued (the next message closing a session).
    ask_jobs: Arc<RecordingJobs>,
    /// What the sweep enqueued.
    sweep_jobs: RecordingJobs,
    ask: Converse,
    compactor: Compactor,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let (clock, now) = test_clock();
    let ask_jobs = Arc::new(RecordingJobs::default());
    Harness {
        ask: ask_service(
            &store,
            model.clone(),
            Arc::new(ToolDispatch::built_in_only()),
            ask_jobs.clone(),
            Defaults::default(),
            now.clone(),
        ),
        compactor: compactor(
            &store,
            model.clone(),
            Arc::new(NoJobs),
            Defaults::default(),
            now,
        ),
        store,
        model,
        clock,
        ask_jobs,
        sweep_jobs: RecordingJobs::default(),
    }
}

/// The contact's sweep bucket at the default bucket count.
fn bucket_of(key: &ContactKey) -> u8 {
    degrau::plan::sweep::sweep_bucket(key, DEFAULT_SWEEP_BUCKETS)
}

impl Harness {
    fn at(&self, seconds_after_start: i64) -> i64 {
        let now = START + seconds_after_start;
        self.clock.store(now, Ordering::SeqCst);
        now
    }

    /// One round from `key`, answered with plain text.
    async fn say(&self, key: &ContactKey, text: &str) -> u32 {
        self.model.push(ScriptedModel::text("ok", Usage::default()));
        match self
            .ask
            .ask(
                key,
                text,
                None,
                Deadline::after(std::time::Duration::from_secs(60)),
            )
            .await
            .unwrap()
        {
            degrau::converse::AskOutcome::Answered(response) => response.session,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    async fn sweep(&self, now: i64) -> SweepReport {
        self.compactor.sweep(&self.sweep_jobs, now).await.unwrap()
    }

    /// The facts jobs `jobs` recorded, as (contact, session): each job's
    /// incarnation resolved the way the compactor does (it names no contact).
    async fn facts(&self, jobs: &RecordingJobs) -> Vec<(ContactKey, u32)> {
        let recorded: Vec<Job> = jobs.jobs.lock().unwrap().clone();
        let mut found = Vec::new();
        for job in recorded.iter().filter(|job| job.kind() == "facts") {
            let key = self
                .store
                .find_contact(job.tenant(), job.incarnation())
                .await
                .unwrap()
                .expect("a job names a head that exists");
            found.push((key, job.session()));
        }
        found
    }

    /// Runs every facts job `jobs` recorded through the compactor, each finding
    /// nothing to record: the extractions are done.
    async fn extract_all(&self, jobs: &RecordingJobs) {
        let recorded: Vec<Job> = jobs.jobs.lock().unwrap().clone();
        for job in recorded.iter().filter(|job| job.kind() == "facts") {
            self.model.push(ScriptedModel::tool_call(
                "facts",
                degrau::compaction::RECORD_FACTS_TOOL,
                serde_json::json!({"facts": []}),
                Usage::default(),
            ));
            self.compactor
                .run(job, Deadline::after(std::time::Duration::from_secs(60)))
                .await
                .unwrap();
        }
    }

    async fn facts_requested(&self, key: &ContactKey) -> Option<u32> {
        let (head, _) = self.store.load_memory(key, START).await.unwrap();
        head.unwrap().facts_requested
    }
}

fn report(found: usize, enqueued: usize, skipped: usize, failed: usize) -> SweepReport {
    SweepReport {
        found,
        enqueued,
        skipped,
        failed,
        buckets_failed: 0,
        folds: 0,
    }
}

#[tokio::test]
async fn an_idle_session_is_swept_once_when_its_timeout_has_passed() {
    let h = harness();
    let ana = key("barber", "ana");
    h.say(&ana, "hi").await;

    assert_eq!(
        h.sweep(h.at(IDLE - 1)).await,
        report(0, 0, 0, 0),
        "not idle yet"
    );
    assert_eq!(h.sweep(h.at(IDLE)).await, report(1, 1, 0, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(ana.clone(), 1)]);
    assert_eq!(h.facts_requested(&ana).await, Some(1));
    assert_eq!(
        h.store.sweep_entry(&ana),
        Some((bucket_of(&ana), START + IDLE + FACTS_RETRY_SECONDS)),
        "due again if the extraction is still pending then"
    );
    h.extract_all(&h.sweep_jobs).await;

    assert_eq!(
        h.sweep(h.at(3 * IDLE)).await,
        report(1, 0, 1, 0),
        "the extraction is done: nothing left to do"
    );
    assert_eq!(h.store.sweep_entry(&ana), None, "out of the index");
    assert_eq!(
        h.sweep(h.at(4 * IDLE)).await,
        report(0, 0, 0, 0),
        "a swept session is not swept again"
    );
    assert_eq!(h.facts(&h.sweep_jobs).await.len(), 1);
    assert!(h.facts(&h.ask_jobs).await.is_empty());
}

#[tokio::test]
async fn a_head_is_due_by_its_tenants_own_timeout_even_one_changed_after_its_round() {
    let h = harness();
    let patient = TenantConfig {
        session_idle_minutes: Some(3 * 24 * 60),
        ..TenantConfig::default()
    };
    let clinic = TenantId::parse("clinic").unwrap();
    let bia = key("clinic", "bia");
    let caio = key("barber", "caio");
    h.say(&bia, "hi").await;
    h.say(&caio, "hi").await;
    // The clinic lengthens its timeout after bia's round (filed by the old one).
    h.store.put_tenant_config(&clinic, &patient).await.unwrap();
    assert_eq!(
        h.store.sweep_entry(&bia),
        Some((bucket_of(&bia), START + IDLE))
    );

    assert_eq!(h.sweep(h.at(IDLE)).await, report(2, 1, 1, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(caio, 1)]);
    assert_eq!(h.facts_requested(&bia).await, None);
    assert_eq!(
        h.store.sweep_entry(&bia),
        Some((bucket_of(&bia), START + 3 * IDLE)),
        "moved to when it is idle by the new timeout"
    );
    h.extract_all(&h.sweep_jobs).await;

    // Only caio's done extraction is due before that; bia at its time.
    assert_eq!(h.sweep(h.at(3 * IDLE - 1)).await, report(1, 0, 1, 0));
    assert_eq!(h.sweep(h.at(3 * IDLE)).await, report(1, 1, 0, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await.last(), Some(&(bia, 1)));
    // A head of the patient tenant is filed under its own timeout from the start.
    let dora = key("clinic", "dora");
    h.say(&dora, "hi").await;
    assert_eq!(
        h.store.sweep_entry(&dora),
        Some((bucket_of(&dora), START + 3 * IDLE + 3 * IDLE))
    );
}

#[tokio::test]
async fn a_swept_session_whose_contact_writes_again_opens_a_new_one_without_a_second_facts_job() {
    let h = harness();
    let ana = key("barber", "ana");
    h.say(&ana, "hi").await;
    h.sweep(h.at(IDLE)).await;
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(ana.clone(), 1)]);

    h.at(IDLE + 10 * MINUTE);
    assert_eq!(h.say(&ana, "hello again").await, 2, "a new session");
    assert!(
        h.facts(&h.ask_jobs).await.is_empty(),
        "the sweep already requested session 1's facts"
    );
    assert_eq!(
        h.facts_requested(&ana).await,
        None,
        "the new session does not carry the old value"
    );
    assert_eq!(
        h.store.sweep_entry(&ana),
        Some((bucket_of(&ana), START + IDLE + FACTS_RETRY_SECONDS)),
        "due when session 1's pending extraction is, before session 2 goes idle"
    );

    // Session 2 closes by the next message (not swept): that one requests it.
    h.at(2 * IDLE + 10 * MINUTE);
    assert_eq!(h.say(&ana, "me again").await, 3);
    assert_eq!(h.facts(&h.ask_jobs).await, vec![(ana.clone(), 2)]);

    // And session 3, left idle, is swept.
    assert_eq!(
        h.sweep(h.at(3 * IDLE + 10 * MINUTE)).await,
        report(1, 1, 0, 0)
    );
    assert_eq!(
        h.facts(&h.sweep_jobs).await,
        vec![(ana.clone(), 1), (ana, 3)]
    );
}

#[tokio::test]
async fn an_erased_contact_is_not_swept() {
    let h = harness();
    let ana = key("barber", "ana");
    let bruno = key("barber", "bruno");
    h.say(&ana, "hi").await;
    h.say(&bruno, "hi").await;
    records_of(&h.ask, &h.store).erase(&ana).await.unwrap();

    assert_eq!(h.sweep(h.at(IDLE)).await, report(1, 1, 0, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(bruno, 1)]);
    assert_eq!(h.store.item_count(&ana), 0, "marking wrote nothing back");
    let settle = SweepSettle {
        incarnation: Incarnation::random(),
        last_activity: START,
        due: START + IDLE,
        pending_since: None,
        facts_requested: Some(1),
        pending: PendingChange::Keep,
        next_due: None,
    };
    assert!(!h.store.settle_sweep(&ana, &settle).await.unwrap());
    assert_eq!(h.store.item_count(&ana), 0);
}

#[tokio::test]
async fn a_failed_enqueue_leaves_the_session_for_the_next_sweep() {
    let h = harness();
    let ana = key("barber", "ana");
    h.say(&ana, "hi").await;
    h.sweep_jobs.fail.store(true, Ordering::SeqCst);
    assert_eq!(h.sweep(h.at(IDLE)).await, report(1, 0, 0, 1));
    assert_eq!(h.facts_requested(&ana).await, None, "not marked");

    h.sweep_jobs.fail.store(false, Ordering::SeqCst);
    assert_eq!(h.sweep(h.at(IDLE + 15 * MINUTE)).await, report(1, 1, 0, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(ana, 1)]);
}

/// Fails the sweep index reads of the buckets it holds.
struct FlakyIndex(Vec<u8>);

#[async_trait]
impl Hook for FlakyIndex {
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        match call {
            Call::DueHeads { bucket } if self.0.contains(&bucket) => {
                Err(StoreError::Unavailable("throttled".into()))
            }
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn a_failed_bucket_read_holds_up_only_that_bucket_and_all_failing_is_an_error() {
    let h = harness();
    let ana = key("barber", "ana");
    let bruno = (0..)
        .map(|i| key("barber", &format!("bruno{i}")))
        .find(|k| bucket_of(k) != bucket_of(&ana))
        .unwrap();
    h.say(&ana, "hi").await;
    h.say(&bruno, "hi").await;
    let compactor = |failing: Vec<u8>| {
        let store = Arc::new(Hooked::new(h.store.clone(), FlakyIndex(failing)));
        Compactor::on(store, h.compactor.wiring.clone())
    };
    let now = h.at(IDLE);

    let partial = compactor(vec![bucket_of(&ana)])
        .sweep(&h.sweep_jobs, now)
        .await
        .unwrap();
    assert_eq!(
        partial,
        SweepReport {
            buckets_failed: 1,
            ..report(1, 1, 0, 0)
        }
    );
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(bruno, 1)]);
    assert!(
        h.store.sweep_entry(&ana).is_some(),
        "left for the next sweep"
    );

    let error = compactor((0..DEFAULT_SWEEP_BUCKETS).collect())
        .sweep(&h.sweep_jobs, now)
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        CompactorError::Store(StoreError::Unavailable(_))
    ));
    assert_eq!(h.sweep(now).await, report(1, 1, 0, 0), "the next sweep");
    assert_eq!(h.facts(&h.sweep_jobs).await.last(), Some(&(ana, 1)));
}

#[tokio::test]
async fn each_bucket_is_read_up_to_its_limit_per_run_oldest_first() {
    use degrau::plan::sweep::SWEEP_LIMIT_PER_BUCKET;
    let h = harness();
    // More idle contacts in one bucket than a run takes, one minute apart.
    let bucket = bucket_of(&key("barber", "c0"));
    let crowd: Vec<ContactKey> = (0..)
        .map(|i| key("barber", &format!("c{i}")))
        .filter(|k| bucket_of(k) == bucket)
        .take(SWEEP_LIMIT_PER_BUCKET + 3)
        .collect();
    for (i, contact) in crowd.iter().enumerate() {
        h.at(i as i64 * MINUTE);
        h.say(contact, "hi").await;
    }
    let now = h.at(IDLE + crowd.len() as i64 * MINUTE);
    assert_eq!(
        h.sweep(now).await,
        report(SWEEP_LIMIT_PER_BUCKET, SWEEP_LIMIT_PER_BUCKET, 0, 0)
    );
    let swept: Vec<ContactKey> = h
        .facts(&h.sweep_jobs)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(swept, crowd[..SWEEP_LIMIT_PER_BUCKET], "the oldest first");
    assert_eq!(h.sweep(now).await, report(3, 3, 0, 0), "the rest next run");
    assert!(bucket < DEFAULT_SWEEP_BUCKETS);
}

#[tokio::test]
async fn a_head_from_before_incarnations_is_given_one_and_swept_with_it() {
    let h = harness();
    let ana = key("barber", "ana");
    h.say(&ana, "hi").await;
    h.store.forget_incarnation(&ana);
    assert_eq!(h.sweep(h.at(IDLE)).await, report(1, 1, 0, 0));
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(ana.clone(), 1)]);
    assert_eq!(h.facts_requested(&ana).await, Some(1));
}

#[tokio::test]
async fn facts_of_a_swept_session_read_its_summary_and_only_the_messages_after_it() {
    let h = harness();
    let ana = key("barber", "ana");
    for text in ["I'm Ana", "mornings suit me", "book Tuesday"] {
        h.say(&ana, text).await;
    }
    h.store
        .set_summarized_until(&ana, 4, Some("The customer, Ana, prefers mornings.".into()));
    assert_eq!(h.sweep(h.at(IDLE)).await, report(1, 1, 0, 0));
    let job = h.sweep_jobs.jobs.lock().unwrap().last().cloned().unwrap();
    h.model.push(ScriptedModel::tool_call(
        "facts",
        degrau::compaction::RECORD_FACTS_TOOL,
        serde_json::json!({"facts": []}),
        Usage::default(),
    ));
    h.compactor
        .run(&job, Deadline::after(std::time::Duration::from_secs(60)))
        .await
        .unwrap();

    let request = h.model.requests().pop().unwrap();
    let text = match &request.messages[0].content[0].block {
        degrau::domain::ContentBlock::Text { text } => text.clone(),
        other => panic!("expected text, got {other:?}"),
    };
    assert!(
        text.contains("<session_record>\nThe customer, Ana, prefers mornings.\n</session_record>"),
        "{text}"
    );
    assert!(
        !text.contains("[seq 1]") && !text.contains("[seq 4]"),
        "{text}"
    );
    assert!(text.contains("[seq 5] user: book Tuesday"), "{text}");
}

#[tokio::test]
async fn heads_not_yet_idle_by_their_tenants_longer_timeout_never_hold_up_the_idle_ones() {
    use degrau::plan::sweep::SWEEP_LIMIT_PER_BUCKET;
    let h = harness();
    let patient = TenantConfig {
        session_idle_minutes: Some(3 * 24 * 60),
        ..TenantConfig::default()
    };
    h.store
        .put_tenant_config(&TenantId::parse("clinic").unwrap(), &patient)
        .await
        .unwrap();
    // More heads of the patient tenant than a run reads, all in one bucket and
    // older than the one contact of the other tenant that is really idle.
    let bucket = bucket_of(&key("barber", "late"));
    let patients: Vec<ContactKey> = (0..)
        .map(|i| key("clinic", &format!("p{i}")))
        .filter(|k| bucket_of(k) == bucket)
        .take(SWEEP_LIMIT_PER_BUCKET + 1)
        .collect();
    for (i, contact) in patients.iter().enumerate() {
        h.at(i as i64);
        h.say(contact, "hi").await;
    }
    let late = key("barber", "late");
    h.at(10 * MINUTE);
    h.say(&late, "hi").await;

    let report = h.sweep(h.at(10 * MINUTE + IDLE)).await;
    assert_eq!(report.enqueued, 1, "{report:?}");
    assert_eq!(h.facts(&h.sweep_jobs).await, vec![(late, 1)]);
}

#[tokio::test]
async fn heads_that_keep_failing_move_behind_the_others_instead_of_starving_them() {
    const LIMIT: usize = 2;
    let h = harness();
    let compactor = Compactor::on(
        h.store.clone(),
        Wiring {
            defaults: Defaults {
                sweep_limit_per_bucket: LIMIT,
                ..Defaults::default()
            },
            ..h.compactor.wiring.clone()
        },
    );
    // The oldest heads of a bucket belong to a tenant whose settings cannot be
    // honoured (a sweep can never request their facts); younger heads behind them.
    let bucket = bucket_of(&key("broken", "b0"));
    let in_bucket = |tenant: &'static str| {
        (0..)
            .map(move |i| key(tenant, &format!("{tenant}{i}")))
            .filter(move |k| bucket_of(k) == bucket)
    };
    let broken: Vec<ContactKey> = in_bucket("broken").take(LIMIT).collect();
    let waiting: Vec<ContactKey> = in_bucket("barber").take(2).collect();
    for (i, contact) in broken.iter().chain(&waiting).enumerate() {
        h.at(i as i64 * MINUTE);
        h.say(contact, "hi").await;
    }
    let unusable = TenantConfig {
        transcript_retention_days: Some(0),
        ..TenantConfig::default()
    };
    h.store
        .put_tenant_config(&TenantId::parse("broken").unwrap(), &unusable)
        .await
        .unwrap();

    let now = h.at(IDLE + 10 * MINUTE);
    let first = compactor.sweep(&h.sweep_jobs, now).await.unwrap();
    assert_eq!(first.enqueued, 0, "the oldest heads fill the run and fail");
    // The next run (the schedule's next minute) reads the heads behind them.
    let second = compactor
        .sweep(&h.sweep_jobs, h.at(IDLE + 11 * MINUTE))
        .await
        .unwrap();
    assert_eq!(second.enqueued, waiting.len(), "{second:?}");
    let swept: Vec<ContactKey> = h
        .facts(&h.sweep_jobs)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(swept, waiting);
}
