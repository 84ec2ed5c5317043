//! A store wrapper for tests: every call passes a [`Hook`] on its way to the
//! wrapped store, which may refuse it, delay it, or lose a write's answer. Tests
//! that fail one kind of call (the sweep index, say) and the simulator's faults
//! write only what differs, instead of every port method again.

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::{Fact, Head, IdempotencyKey, Incarnation, TenantId};
use crate::store::{
    AppliedStep, Claim, ClosedSession, ContactKey, Cursor, DueHead, FactWrite, JobStore,
    RecordStore, RoundCommit, RoundStore, SessionFilter, Store, StoreError, SweepSettle,
    SweepStore, TranscriptPage, TurnState,
};
use crate::tenant::{TenantConfig, TenantStore};

/// One call to the store, as a [`Hook`] sees it: the port method, with what a
/// hook may need to decide.
#[derive(Debug, Clone, Copy)]
pub enum Call<'a> {
    /// [`RoundStore::load_turn`].
    LoadTurn,
    /// [`RoundStore::load_head`].
    LoadHead,
    /// [`RoundStore::claim_request`].
    ClaimRequest,
    /// [`RoundStore::release_request`].
    ReleaseRequest,
    /// [`RoundStore::commit_round`], with the round.
    CommitRound(&'a RoundCommit),
    /// [`RoundStore::refresh_expiry`].
    RefreshExpiry,
    /// [`JobStore::find_contact`].
    FindContact,
    /// [`JobStore::apply_step`].
    ApplyStep,
    /// [`JobStore::load_closed_session`].
    LoadClosedSession,
    /// [`JobStore::save_facts`].
    SaveFacts,
    /// [`JobStore::facts_done`].
    FactsDone,
    /// [`SweepStore::due_heads`], with the bucket read.
    DueHeads {
        /// The bucket of the sweep index.
        bucket: u8,
    },
    /// [`SweepStore::ensure_incarnation`].
    EnsureIncarnation,
    /// [`SweepStore::settle_sweep`].
    SettleSweep,
    /// [`SweepStore::defer_sweep`].
    DeferSweep,
    /// [`RecordStore::load_memory`].
    LoadMemory,
    /// [`RecordStore::transcript`].
    Transcript,
    /// [`RecordStore::session_records`].
    SessionRecords,
    /// [`RecordStore::erase_contact`].
    EraseContact,
    /// [`crate::store::RecallStore::session_messages`].
    SessionMessages,
    /// [`crate::store::RecallStore::save_session_index`].
    SaveSessionIndex,
    /// [`crate::store::RecallStore::session_indexes`].
    SessionIndexes,
    /// [`crate::store::RecallStore::found_sessions`].
    FoundSessions,
    /// [`TenantStore::tenant_config`].
    TenantConfig,
    /// [`TenantStore::put_tenant_config`].
    PutTenantConfig,
}

/// What a [`Hooked`] store does around each call.
#[async_trait]
pub trait Hook: Send + Sync {
    /// Before `call` reaches the store: an error refuses it, and nothing is
    /// written. (Waiting here delays the call.)
    async fn before(&self, call: Call<'_>) -> Result<(), StoreError> {
        let _ = call;
        Ok(())
    }

    /// After a write reached the store and succeeded: an error replaces its
    /// answer, and the write stands (an answer lost on the way back).
    fn written(&self, call: Call<'_>) -> Result<(), StoreError> {
        let _ = call;
        Ok(())
    }
}

/// `inner`, every call through `hook`.
pub struct Hooked<S: ?Sized, H> {
    /// The store the calls reach.
    pub inner: Arc<S>,
    /// What happens around them.
    pub hook: H,
}

impl<S: ?Sized, H: Hook> Hooked<S, H> {
    /// `inner` behind `hook`.
    pub fn new(inner: Arc<S>, hook: H) -> Self {
        Hooked { inner, hook }
    }

    fn written<T>(&self, call: Call<'_>, result: Result<T, StoreError>) -> Result<T, StoreError> {
        let value = result?;
        self.hook.written(call)?;
        Ok(value)
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> RoundStore for Hooked<S, H> {
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError> {
        self.hook.before(Call::LoadTurn).await?;
        self.inner.load_turn(key, now).await
    }

    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError> {
        self.hook.before(Call::LoadHead).await?;
        self.inner.load_head(key).await
    }

    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError> {
        self.hook.before(Call::ClaimRequest).await?;
        let result = self
            .inner
            .claim_request(key, idempotency, payload_hash, now, lease_seconds)
            .await;
        self.written(Call::ClaimRequest, result)
    }

    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError> {
        self.hook.before(Call::ReleaseRequest).await?;
        let result = self.inner.release_request(key, idempotency).await;
        self.written(Call::ReleaseRequest, result)
    }

    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError> {
        self.hook.before(Call::CommitRound(commit)).await?;
        let result = self.inner.commit_round(commit).await;
        self.written(Call::CommitRound(commit), result)
    }

    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::RefreshExpiry).await?;
        let result = self
            .inner
            .refresh_expiry(key, incarnation, session, seqs, expires_at)
            .await;
        self.written(Call::RefreshExpiry, result)
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> JobStore for Hooked<S, H> {
    async fn find_contact(
        &self,
        tenant: &TenantId,
        incarnation: &Incarnation,
    ) -> Result<Option<ContactKey>, StoreError> {
        self.hook.before(Call::FindContact).await?;
        self.inner.find_contact(tenant, incarnation).await
    }

    async fn apply_step(&self, key: &ContactKey, step: &AppliedStep) -> Result<bool, StoreError> {
        self.hook.before(Call::ApplyStep).await?;
        let result = self.inner.apply_step(key, step).await;
        self.written(Call::ApplyStep, result)
    }

    async fn load_closed_session(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, StoreError> {
        self.hook.before(Call::LoadClosedSession).await?;
        self.inner.load_closed_session(key, session, now).await
    }

    async fn save_facts(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        writes: &[FactWrite],
        removals: &[crate::store::FactRemoval],
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::SaveFacts).await?;
        let result = self
            .inner
            .save_facts(key, incarnation, writes, removals)
            .await;
        self.written(Call::SaveFacts, result)
    }

    async fn facts_done(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::FactsDone).await?;
        let result = self.inner.facts_done(key, incarnation, session).await;
        self.written(Call::FactsDone, result)
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> SweepStore for Hooked<S, H> {
    async fn due_heads(
        &self,
        bucket: u8,
        due_by: i64,
        limit: usize,
    ) -> Result<Vec<DueHead>, StoreError> {
        self.hook.before(Call::DueHeads { bucket }).await?;
        self.inner.due_heads(bucket, due_by, limit).await
    }

    async fn ensure_incarnation(
        &self,
        key: &ContactKey,
        candidate: &Incarnation,
    ) -> Result<Option<Incarnation>, StoreError> {
        self.hook.before(Call::EnsureIncarnation).await?;
        let result = self.inner.ensure_incarnation(key, candidate).await;
        self.written(Call::EnsureIncarnation, result)
    }

    async fn settle_sweep(
        &self,
        key: &ContactKey,
        settle: &SweepSettle,
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::SettleSweep).await?;
        let result = self.inner.settle_sweep(key, settle).await;
        self.written(Call::SettleSweep, result)
    }

    async fn defer_sweep(
        &self,
        key: &ContactKey,
        due: i64,
        next_due: i64,
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::DeferSweep).await?;
        let result = self.inner.defer_sweep(key, due, next_due).await;
        self.written(Call::DeferSweep, result)
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> RecordStore for Hooked<S, H> {
    async fn load_memory(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<Head>, Vec<Fact>), StoreError> {
        self.hook.before(Call::LoadMemory).await?;
        self.inner.load_memory(key, now).await
    }

    async fn transcript(
        &self,
        key: &ContactKey,
        sessions: SessionFilter,
        limit: usize,
        before: Option<Cursor>,
    ) -> Result<TranscriptPage, StoreError> {
        self.hook.before(Call::Transcript).await?;
        self.inner.transcript(key, sessions, limit, before).await
    }

    async fn session_records(
        &self,
        key: &ContactKey,
        limit: usize,
        now: i64,
    ) -> Result<Vec<crate::plan::recall::SessionRecord>, StoreError> {
        self.hook.before(Call::SessionRecords).await?;
        self.inner.session_records(key, limit, now).await
    }

    async fn erase_contact(&self, key: &ContactKey, now: i64) -> Result<usize, StoreError> {
        self.hook.before(Call::EraseContact).await?;
        let result = self.inner.erase_contact(key, now).await;
        self.written(Call::EraseContact, result)
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> TenantStore for Hooked<S, H> {
    async fn stored_config(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::tenant::StoredConfig>, StoreError> {
        self.hook.before(Call::TenantConfig).await?;
        self.inner.stored_config(tenant).await
    }

    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError> {
        self.hook.before(Call::PutTenantConfig).await?;
        let result = self.inner.put_tenant_config(tenant, config).await;
        self.written(Call::PutTenantConfig, result)
    }

    async fn replace_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        expected: u64,
    ) -> Result<Option<u64>, StoreError> {
        self.hook.before(Call::PutTenantConfig).await?;
        let result = self.inner.replace_config(tenant, config, expected).await;
        self.written(Call::PutTenantConfig, result)
    }

    async fn tenant_policy(
        &self,
        tenant: &TenantId,
    ) -> Result<Option<crate::platform::TenantPolicy>, StoreError> {
        // Unhooked: a fault here would move a simulation's seeded faults along.
        self.inner.tenant_policy(tenant).await
    }
}

/// The operator routes' reads and the usage counts pass through unhooked: no
/// invariant of a conversation rests on them.
#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> crate::store::OperatorStore for Hooked<S, H> {
    async fn contacts(
        &self,
        tenant: &TenantId,
        limit: usize,
        after: Option<&crate::store::ContactCursor>,
        now: i64,
    ) -> Result<crate::store::ContactPage, StoreError> {
        self.inner.contacts(tenant, limit, after, now).await
    }

    async fn fact_records(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<(Option<crate::domain::Head>, Vec<crate::store::FactRecord>), StoreError> {
        self.inner.fact_records(key, now).await
    }

    async fn save_facts_headless(
        &self,
        key: &ContactKey,
        anchor: &crate::domain::Fact,
        writes: &[crate::store::FactWrite],
        removals: &[crate::store::FactRemoval],
    ) -> Result<bool, StoreError> {
        self.inner
            .save_facts_headless(key, anchor, writes, removals)
            .await
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> crate::store::UsageStore for Hooked<S, H> {
    async fn add_usage(
        &self,
        tenant: &TenantId,
        day: i64,
        counts: &crate::metering::UsageCounts,
    ) -> Result<(), StoreError> {
        self.inner.add_usage(tenant, day, counts).await
    }

    async fn usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> Result<Vec<(i64, crate::metering::UsageCounts)>, StoreError> {
        self.inner.usage(tenant, from, to).await
    }
}

#[async_trait]
impl<S: Store + TenantStore + ?Sized, H: Hook> crate::store::RecallStore for Hooked<S, H> {
    async fn session_messages(
        &self,
        key: &ContactKey,
        session: u32,
        now: i64,
    ) -> Result<(Vec<crate::domain::StoredMessage>, Option<i64>), StoreError> {
        self.hook.before(Call::SessionMessages).await?;
        self.inner.session_messages(key, session, now).await
    }

    async fn save_session_index(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        index: &crate::plan::recall::index::SessionIndex,
        text: Option<&crate::plan::recall::index::SessionText>,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.hook.before(Call::SaveSessionIndex).await?;
        let result = self
            .inner
            .save_session_index(key, incarnation, index, text, expires_at)
            .await;
        self.written(Call::SaveSessionIndex, result)
    }

    async fn session_indexes(
        &self,
        key: &ContactKey,
        now: i64,
    ) -> Result<Vec<crate::plan::recall::index::SessionIndex>, StoreError> {
        self.hook.before(Call::SessionIndexes).await?;
        self.inner.session_indexes(key, now).await
    }

    async fn found_sessions(
        &self,
        key: &ContactKey,
        sessions: &[u32],
        now: i64,
    ) -> Result<Vec<crate::store::FoundSession>, StoreError> {
        self.hook.before(Call::FoundSessions).await?;
        self.inner.found_sessions(key, sessions, now).await
    }
}
