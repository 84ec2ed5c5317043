//! What the channel's tests share: a fixed start time and a clock the test moves,
//! a deadline no test reaches, and the ask service wired to the in-memory store.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use degrau::converse::Converse;
use degrau::deadline::Deadline;
use degrau::jobs::Jobs;
use degrau::memory::MemoryStore;
use degrau::model::Model;
use degrau::plan::session::Clock;
use degrau::tenant::Defaults;
use degrau::tools::Tools;

/// The time every test starts at (seconds since the epoch, in 2027).
pub const START: i64 = 1_800_000_000;

/// A deadline no test here reaches.
pub fn minute() -> Deadline {
    Deadline::after(std::time::Duration::from_secs(60))
}

/// A clock at [`START`] that the test moves, and the service clock reading it.
pub fn test_clock() -> (Arc<AtomicI64>, Clock) {
    let clock = Arc::new(AtomicI64::new(START));
    let now = clock.clone();
    (clock, Arc::new(move || now.load(Ordering::SeqCst)))
}

/// The ask service on the in-memory store (also its tenant store).
pub fn ask_service(
    store: &Arc<MemoryStore>,
    model: Arc<dyn Model>,
    tools: Arc<dyn Tools>,
    jobs: Arc<dyn Jobs>,
    defaults: Defaults,
    clock: Clock,
) -> Converse {
    Converse {
        store: store.clone(),
        records: store.clone(),
        recall: store.clone(),
        usage: store.clone(),
        tenants: store.clone(),
        model,
        tools,
        jobs,
        quotas: Arc::new(degrau::quota::memory::MemoryQuotas::new()),
        defaults,
        clock,
    }
}

/// The operator routes' service beside `service`, on the in-memory store.
pub fn operate_of(service: &Converse, store: &Arc<MemoryStore>) -> degrau::operate::Operate {
    degrau::operate::Operate::on(
        store.clone(),
        service.defaults.clone(),
        service.clock.clone(),
    )
}
