//! What the core's integration tests share: a fixed start time and a clock the test
//! moves, the test contact, a deadline no test reaches, a queue that records its
//! jobs, and the services wired to the in-memory store and the scripted model.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use degrau::compaction::{Compactor, Wiring};
use degrau::converse::{AskOutcome, AskResponse, Converse};
use degrau::domain::{ContactId, TenantId};
use degrau::jobs::{EnqueueError, Job, Jobs};
use degrau::memory::MemoryStore;
use degrau::model::Model;
use degrau::plan::session::Clock;
use degrau::store::ContactKey;
use degrau::tenant::Defaults;

// The clock, the deadline and the service on the in-memory store are the core's
// test support (`degrau::testing`), which the channels' tests share.
pub use degrau::testing::{START, converse_on as ask_service, minute, test_clock};

/// A fact of session 1, message 1.
pub fn fact(key: &str, value: String) -> degrau::domain::Fact {
    degrau::domain::Fact {
        key: degrau::domain::FactKey::parse(key).unwrap(),
        value,
        source: degrau::domain::FactSource { session: 1, seq: 1 },
        updated_at: 0,
        operator: None,
        history: Vec::new(),
    }
}

/// The contact of the tests with one contact.
pub fn key() -> ContactKey {
    contact_key("barber", "+5511900000000")
}

/// A contact of a tenant.
pub fn contact_key(tenant: &str, contact: &str) -> ContactKey {
    ContactKey {
        tenant: TenantId::parse(tenant).unwrap(),
        contact: ContactId::parse(contact).unwrap(),
    }
}

/// The response of an answered ask (panics on a replay).
pub fn answered(outcome: AskOutcome) -> AskResponse {
    match outcome {
        AskOutcome::Answered(response) => response,
        AskOutcome::Replayed(body) => panic!("unexpected replay {body}"),
    }
}

/// The records service beside `service`, on the in-memory store.
pub fn records_of<S>(service: &Converse, store: &Arc<S>) -> degrau::records::Records
where
    S: degrau::store::RecordStore
        + degrau::store::RecallStore
        + degrau::tenant::TenantStore
        + 'static,
{
    degrau::records::Records::on(
        store.clone(),
        service.defaults.clone(),
        service.clock.clone(),
    )
}

/// The operator routes' service beside `service`, on the in-memory store.
pub fn operate_of<S>(service: &Converse, store: &Arc<S>) -> degrau::operate::Operate
where
    S: degrau::store::Store + degrau::tenant::TenantStore + 'static,
{
    degrau::operate::Operate::on(
        store.clone(),
        service.defaults.clone(),
        service.clock.clone(),
    )
}

/// The compactor on the in-memory store (also its tenant store).
pub fn compactor(
    store: &Arc<MemoryStore>,
    model: Arc<dyn Model>,
    jobs: Arc<dyn Jobs>,
    defaults: Defaults,
    clock: Clock,
) -> Compactor {
    Compactor::on(
        store.clone(),
        Wiring {
            tenants: store.clone(),
            model,
            defaults,
            clock,
            jobs,
            events: Arc::new(degrau::events::NoEvents),
        },
    )
}

/// A queue that records every job, or refuses them all while `fail` is set.
#[derive(Default)]
pub struct RecordingJobs {
    pub jobs: Mutex<Vec<Job>>,
    pub fail: AtomicBool,
}

#[async_trait]
impl Jobs for RecordingJobs {
    async fn enqueue(&self, job: &Job) -> Result<bool, EnqueueError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(EnqueueError("the queue is down".into()));
        }
        self.jobs.lock().unwrap().push(job.clone());
        Ok(true)
    }
}
