//! The store as the services meet it in the simulation: the in-memory store with
//! DynamoDB's latency and failures on top. Every call takes a few milliseconds of
//! the paused clock (so every call is a point where another operation runs
//! first, and the clock moves inside an event). While faults are on, a call may
//! be refused before it does anything (throttled: unavailable, nothing written),
//! take seconds (an SDK retrying a throttled request: nothing is written until
//! the wait ends, and a caller that gives up first writes nothing), or, for a
//! write, succeed and have its answer lost (unavailable, but written); and a
//! round's commit may time out at the caller and land later, after the caller
//! looked and was told it had not (DynamoDB applying a request whose connection
//! was already dropped).
//!
//! It is the in-memory store behind a [`Hook`]: only the faults are written here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use degrau::memory::MemoryStore;
use degrau::store::{RoundStore, StoreError};
use degrau::testing::hooked::{Call, Hook, Hooked};

use crate::counts::Counts;

/// The in-memory store behind the simulation's faults.
pub type FaultyStore = Hooked<MemoryStore, Faults>;

/// The store's latency and faults.
pub struct Faults {
    state: Mutex<State>,
    /// The store itself, for a write that lands late.
    memory: Arc<MemoryStore>,
    counts: Arc<Counts>,
}

#[derive(Default)]
struct State {
    /// The chance that a call fails (0: faults are off).
    rate: f64,
}

fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A store call's latency: mostly a few milliseconds, now and then most of a
/// second (a partition's hiccup).
fn latency() -> Duration {
    Duration::from_millis(match fastrand::u8(0..100) {
        0..=94 => fastrand::u64(1..25),
        _ => fastrand::u64(100..1_200),
    })
}

impl Faults {
    /// Faults of the store behind `memory`, counted in `counts`.
    pub fn new(memory: Arc<MemoryStore>, counts: Arc<Counts>) -> Self {
        Faults {
            state: Mutex::new(State::default()),
            memory,
            counts,
        }
    }

    /// Faults on (`rate` of the calls fail, and some take seconds) or off (0).
    pub fn set_faults(&self, rate: f64) {
        lock(&self.state).rate = rate;
    }
}

#[async_trait]
impl Hook for Faults {
    /// Before a call: its latency, and while faults are on refused, or slow, or
    /// (a commit) landing late. (Writing a tenant's configuration is the plan's
    /// setup, never refused.)
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        if matches!(call, Call::PutTenantConfig) {
            return Ok(());
        }
        tokio::time::sleep(latency()).await;
        let rate = lock(&self.state).rate;
        if rate <= 0.0 {
            return Ok(());
        }
        if fastrand::f64() < rate {
            Counts::bump(&self.counts.store_faults);
            return Err(StoreError::Unavailable("throttled (simulated)".into()));
        }
        if let Call::CommitRound(commit) = call
            && fastrand::f64() < rate / 2.0
        {
            // The caller's connection drops; the transaction is applied a moment
            // later, once the caller may have looked and found nothing.
            Counts::bump(&self.counts.late_writes);
            let (memory, commit) = (self.memory.clone(), commit.clone());
            let delay = Duration::from_millis(fastrand::u64(50..4_000));
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = memory.commit_round(&commit).await;
            });
            return Err(StoreError::Unavailable(
                "the connection dropped (simulated): the write may land later".into(),
            ));
        }
        if fastrand::f64() < rate {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(200..8_000))).await;
        }
        Ok(())
    }

    /// After a write that succeeded: its answer may be lost.
    fn written(&self, call: Call<'_>) -> Result<(), StoreError> {
        let rate = lock(&self.state).rate;
        if matches!(call, Call::PutTenantConfig) {
            return Ok(());
        }
        if rate > 0.0 && fastrand::f64() < rate / 2.0 {
            Counts::bump(&self.counts.store_faults);
            return Err(StoreError::Unavailable(
                "the answer was lost (simulated): the write was applied".into(),
            ));
        }
        Ok(())
    }
}
