//! What a run's world did to the code, counted by kind of fault: the world, its
//! store, its model and the operations bump them; `simulate` prints them.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a run's world did to the code, by kind of fault (`simulate` prints
/// them).
#[derive(Debug, Default)]
pub struct Counts {
    /// Operations abandoned at an await, their process gone.
    pub crashes: AtomicU64,
    /// Writes that landed after their caller was told they failed.
    pub late_writes: AtomicU64,
    /// Store calls refused or whose answer was lost.
    pub store_faults: AtomicU64,
    /// Model answers from the quirks corpus (empty or whitespace text beside a
    /// tool call, and the like).
    pub quirks: AtomicU64,
    /// Live changes of a tenant's configuration.
    pub config_changes: AtomicU64,
}

impl Counts {
    /// One more of `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now, in the order of the fields.
    pub fn read(&self) -> [u64; 5] {
        [
            &self.crashes,
            &self.late_writes,
            &self.store_faults,
            &self.quirks,
            &self.config_changes,
        ]
        .map(|counter| counter.load(Ordering::Relaxed))
    }
}
