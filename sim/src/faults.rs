//! The store as the services meet it in the simulation: the in-memory store with
//! DynamoDB's failures on top, while faults are on. A call may be refused before
//! it does anything (throttled: unavailable, nothing written), take seconds of the
//! paused clock (an SDK retrying a throttled request: nothing is written until the
//! wait ends, and a caller that gives up first writes nothing), or, for a write,
//! succeed and have its answer lost (unavailable, but written).
//!
//! It also records, for every round commit that landed, the paused clock's instant
//! it landed at, so the oracle can tell a client told "failed" about a round whose
//! commit had landed in time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use degrau::domain::{Fact, FactKey, Head, IdempotencyKey, Incarnation, TenantId};
use degrau::memory::MemoryStore;
use degrau::store::{
    AppliedStep, Claim, ClosedSession, ContactKey, Cursor, DueHead, FactWrite, RoundCommit,
    SessionFilter, Store, StoreError, SweepSettle, TranscriptPage, TurnState,
};
use degrau::tenant::TenantConfig;
use degrau::tenant::TenantStore;
use tokio::time::Instant;

/// The in-memory store behind the simulation's faults.
pub struct FaultyStore {
    inner: Arc<MemoryStore>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The chance that a call fails (0: faults are off).
    rate: f64,
    /// When each landed round's commit landed, by the round's token on the head.
    landed: HashMap<String, Instant>,
}

fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FaultyStore {
    /// Faults over `inner`, off.
    pub fn new(inner: Arc<MemoryStore>) -> Self {
        FaultyStore {
            inner,
            state: Mutex::new(State::default()),
        }
    }

    /// Faults on (`rate` of the calls fail, and some take seconds) or off (0).
    pub fn set_faults(&self, rate: f64) {
        lock(&self.state).rate = rate;
    }

    /// When the round with this token on its head landed, if it did.
    pub fn landed_at(&self, round_token: &str) -> Option<Instant> {
        lock(&self.state).landed.get(round_token).copied()
    }

    /// Before a call: refused, or slow, or neither.
    async fn before(&self) -> Result<(), StoreError> {
        let rate = lock(&self.state).rate;
        if rate <= 0.0 {
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
    fn after<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        let rate = lock(&self.state).rate;
        match result {
            Ok(_) if rate > 0.0 && fastrand::f64() < rate / 2.0 => Err(StoreError::Unavailable(
                "the answer was lost (simulated): the write was applied".into(),
            )),
            other => other,
        }
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        self.before().await?;
        self.inner.load_turn(key, now).await
    }

    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        self.before().await?;
        self.inner.load_memory(key, now).await
    }

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        self.before().await?;
        let result = self.inner.commit_round(commit).await;
        if result.is_ok()
            && let Some(token) = &commit.head.last_round
        {
            lock(&self.state)
                .landed
                .insert(token.clone(), Instant::now());
        }
        self.after(result)
    }

    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError> {
        self.before().await?;
        let result = self
            .inner
            .claim_request(key, idempotency, payload_hash, now, lease_seconds)
            .await;
        self.after(result)
    }

    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError> {
        self.before().await?;
        let result = self.inner.release_request(key, idempotency).await;
        self.after(result)
    }

    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError> {
        self.before().await?;
        self.inner.transcript(key, sessions, limit, before).await
    }

    async fn erase_contact(&self, key: &ContactKey) -> Result<usize, StoreError> {
        self.before().await?;
        let result = self.inner.erase_contact(key).await;
        self.after(result)
    }

    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self.inner.apply_step(key, step).await;
        self.after(result)
    }

    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError> {
        self.before().await?;
        self.inner.load_closed_session(key, session, now).await
    }

    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[FactKey],
    ) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self
            .inner
            .save_facts(key, incarnation, writes, removals)
            .await;
        self.after(result)
    }

    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError> {
        self.before().await?;
        self.inner.find_contact(tenant, incarnation).await
    }

    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError> {
        self.before().await?;
        let result = self.inner.ensure_incarnation(key, candidate).await;
        self.after(result)
    }

    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError> {
        self.before().await?;
        self.inner.due_heads(bucket, due_by, limit).await
    }

    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError> {
        self.before().await?;
        self.inner.load_head(key).await
    }

    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self.inner.settle_sweep(key, settle).await;
        self.after(result)
    }

    async fn defer_sweep(
        &self,
        key: &ContactKey,
        due: i64,
        next_due: i64,
    ) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self.inner.defer_sweep(key, due, next_due).await;
        self.after(result)
    }

    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self.inner.facts_done(key, incarnation, session).await;
        self.after(result)
    }

    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.before().await?;
        let result = self
            .inner
            .refresh_expiry(key, incarnation, session, seqs, expires_at)
            .await;
        self.after(result)
    }
}

#[async_trait]
impl TenantStore for FaultyStore {
    async fn tenant_config(&self, tenant: &TenantId) -> Result<Option<TenantConfig>, StoreError> {
        self.before().await?;
        self.inner.tenant_config(tenant).await
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        self.inner.put_tenant_config(tenant, config).await
    }
}
