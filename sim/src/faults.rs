//! The store as the services meet it in the simulation: the in-memory store with
//! DynamoDB's failures on top, while faults are on. A call may be refused before
//! it does anything (throttled: unavailable, nothing written), take seconds of the
//! paused clock (an SDK retrying a throttled request: nothing is written until the
//! wait ends, and a caller that gives up first writes nothing), or, for a write,
//! succeed and have its answer lost (unavailable, but written).
//!
//! It is the in-memory store behind a [`Hook`]: only the faults are written here.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use degrau::memory::MemoryStore;
use degrau::store::StoreError;
use degrau::testing::hooked::{Call, Hook, Hooked};

/// The in-memory store behind the simulation's faults.
pub type FaultyStore = Hooked<MemoryStore, Faults>;

/// The store's faults.
#[derive(Default)]
pub struct Faults {
    state: Mutex<State>,
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

impl Faults {
    /// Faults on (`rate` of the calls fail, and some take seconds) or off (0).
    pub fn set_faults(&self, rate: f64) {
        lock(&self.state).rate = rate;
    }
}

#[async_trait]
impl Hook for Faults {
    /// Before a call: refused, or slow, or neither. (Writing a tenant's
    /// configuration is the plan's setup, never refused.)
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        let rate = lock(&self.state).rate;
        if rate <= 0.0 || matches!(call, Call::PutTenantConfig) {
            return Ok(());
        }
        if fastrand::f64() < rate {
            return Err(StoreError::Unavailable("throttled (simulated)".into()));
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
            return Err(StoreError::Unavailable(
                "the answer was lost (simulated): the write was applied".into(),
            ));
        }
        Ok(())
    }
}
