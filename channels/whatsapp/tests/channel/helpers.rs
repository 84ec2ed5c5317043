//! What the channel's tests share: a fixed start time and a clock the test moves,
//! a deadline no test reaches, and the ask service wired to the in-memory store
//! (the core's `degrau::testing`), and the operator routes' service beside it.

use std::sync::Arc;

use degrau::converse::Converse;
use degrau::memory::MemoryStore;

// The clock, the deadline and the service on the in-memory store are the core's
// test support, shared with its own tests.
pub use degrau::testing::{START, converse_on as ask_service, minute, test_clock};

/// The operator routes' service beside `service`, on the in-memory store.
pub fn operate_of(service: &Converse, store: &Arc<MemoryStore>) -> degrau::operate::Operate {
    degrau::operate::Operate::on(
        store.clone(),
        service.defaults.clone(),
        service.clock.clone(),
    )
}
