//! The simulation's clock: the plan's jumps and the paused runtime's own time.

use std::sync::atomic::{AtomicI64, Ordering};

/// When every simulation starts (seconds since the epoch, in 2027).
pub const START: i64 = 1_800_000_000;

/// The simulation's clock: the plan's jumps ([`SimClock::advance`]) plus the
/// paused runtime's own time, so every latency a store, model or queue call
/// sleeps moves it too, inside an event (a lease or an idle boundary can run out
/// between a round's read and its commit).
pub struct SimClock {
    jumped: AtomicI64,
    base: tokio::time::Instant,
}

impl SimClock {
    /// A clock at [`START`], from the runtime's now.
    pub fn new() -> Self {
        SimClock {
            jumped: AtomicI64::new(START),
            base: tokio::time::Instant::now(),
        }
    }

    /// Now, in seconds since the epoch.
    pub fn now(&self) -> i64 {
        self.jumped.load(Ordering::SeqCst) + self.base.elapsed().as_secs() as i64
    }

    /// Jumps `seconds` on (time between events, which nobody waits through).
    pub fn advance(&self, seconds: i64) {
        self.jumped.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Default for SimClock {
    fn default() -> Self {
        SimClock::new()
    }
}
