//! What a round needs: the turn's bounded read, the idempotency claim, the whole
//! round's conditional commit, the strong head read that tells whether a commit
//! landed, and the refresh of the window's TTL.

use async_trait::async_trait;

use super::{ContactKey, StoreError};
use crate::domain::{Fact, Head, IdempotencyKey, Incarnation, StoredMessage};

/// What `ask` needs for a round (and the compactor's jobs for their bounded read).
#[async_trait]
pub trait RoundStore: Send + Sync {
    /// The head, the facts and the window of the head's session (bounded by the
    /// head's `last_seq`): what a turn needs. A head past its `expires_at` reads
    /// as none, as DynamoDB's TTL will make it: the next round writes over it.
    async fn load_turn(&self, key: &ContactKey, now: i64) -> Result<TurnState, StoreError>;

    /// The head as stored (strongly consistent, expired or not): what the sweep
    /// decides on.
    async fn load_head(&self, key: &ContactKey) -> Result<Option<Head>, StoreError>;

    /// Claims an idempotency key for one attempt (a lease of `lease_seconds`).
    async fn claim_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
        payload_hash: &str,
        now: i64,
        lease_seconds: i64,
    ) -> Result<Claim, StoreError>;

    /// Releases a claimed key after a failed attempt, so the client may retry.
    async fn release_request(
        &self,
        key: &ContactKey,
        idempotency: &IdempotencyKey,
    ) -> Result<(), StoreError>;

    /// Commits a whole round atomically (its TTL refresh included), or returns
    /// [`StoreError::Conflict`] and writes nothing.
    async fn commit_round(&self, commit: &RoundCommit) -> Result<(), StoreError>;

    /// Sets the TTL of messages `seqs` of `session` to `expires_at`, in one
    /// transaction with at most [`MAX_REFRESH_PER_ROUND`] of them, while the head
    /// still has `incarnation` and each message exists. `Ok(false)` when not:
    /// nothing is written.
    async fn refresh_expiry(
        &self,
        key: &ContactKey,
        incarnation: &Incarnation,
        session: u32,
        seqs: &[u64],
        expires_at: i64,
    ) -> Result<bool, StoreError>;
}

/// Where a round puts its head in the sweep index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSlot {
    /// The bucket, [`crate::plan::sweep::sweep_bucket`] of the contact.
    pub bucket: u8,
    /// When the head is due (`sweep_sk`), seconds since the epoch.
    pub due: i64,
}

/// What `ask` reads before a turn: bounded by the window, never by the history.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnState {
    /// The head, or `None` for a contact never seen.
    pub head: Option<Head>,
    /// The contact's facts (expired ones filtered out).
    pub facts: Vec<Fact>,
    /// The head session's messages after `summarized_until` and up to the head's
    /// `last_seq`, oldest first, from the first safe start after the last hole when
    /// one went missing (see [`crate::plan::window::after_last_gap`]); messages past
    /// their TTL count as gone.
    pub window: Vec<StoredMessage>,
    /// The TTL of each window message, in the same order (`None`: it has none).
    pub window_expires_at: Vec<Option<i64>>,
}

/// A round to commit in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundCommit {
    /// Whose round.
    pub key: ContactKey,
    /// The head as loaded (`None` for a new contact): the commit succeeds only if
    /// the stored head still has this session, `last_seq` and incarnation (or
    /// still has none, or one past its TTL, when the loaded one was none). Every
    /// item the round writes may replace one past its TTL (`expires_at` at or
    /// before the head's `last_activity`, the round's time): DynamoDB deletes
    /// expired items in any order and days late, and a contact whose memory
    /// expired starts again from session 1 over what is left of it.
    pub expected: Option<Head>,
    /// The new head. Only the fields `ask` owns are written (session, last_seq,
    /// last context tokens, last activity, `expires_at`, the recent gaps as given,
    /// `facts_requested` and `hard_cap_at` as given — set when `Some`, removed
    /// when `None` —,
    /// `facts_pending` when `Some` (a round that requests an extraction; `None`
    /// leaves it), and, when the session changes, the reset of summary,
    /// summarized_until and steps), so a compaction step applied meanwhile is
    /// kept. It also writes `incarnation` (a new head's, or the one an older head
    /// without it receives; `ask` keeps a loaded head's).
    pub head: Head,
    /// Where the round puts the head in the sweep index.
    pub sweep: SweepSlot,
    /// The round's messages, with dense sequence numbers following `expected`.
    pub messages: Vec<StoredMessage>,
    /// The idempotency record to mark completed, with the response to replay.
    pub idempotency: Option<CompletedRequest>,
    /// When this round opens a new session: the closed session's summary, kept as
    /// its own item (`SUM#{session:06}`) for the facts job and the transcript view.
    pub archive: Option<SessionArchive>,
    /// Window messages of the head's session whose TTL the commit sets to
    /// `messages_expire_at` (each must still exist, or the commit conflicts), so an
    /// open session's window never expires under it; at most what the transaction
    /// holds besides the rest ([`MAX_ROUND_ITEMS`]).
    pub refresh: Vec<u64>,
    /// When the round's messages expire (TTL attribute `expires_at`, seconds since
    /// the epoch): when the session could close at the earliest (now plus the idle
    /// timeout) plus the tenant's transcript retention.
    pub messages_expire_at: i64,
}

impl RoundCommit {
    /// Before when a message the round's keys still name counts as stale: the
    /// round's time less its own life (`messages_expire_at` less the round's time,
    /// the idle timeout plus the retention). Such a message would have expired had
    /// it been written under the tenant's settings now: it outlives its head only
    /// because a retention or an idle timeout was lowered since, and is of an
    /// earlier life no read shows (see [`Head::born_at`]). The round replaces it,
    /// as one past its TTL, instead of conflicting on it until its old expiry.
    /// Never a live message of the head's own life: a round writes sequence
    /// numbers past the head's only, and under unchanged settings a message older
    /// than the round's own life has expired (a window message a round refreshed
    /// is at or below the head's `last_seq`). A message written before the
    /// head's life began ([`Head::born_at`]) is of an earlier life too, whatever
    /// the settings are now: a retention lowered and then raised again must not
    /// leave the new life conflicting on it (the simulator's live config changes
    /// wedged a contact so for a day and a half).
    pub fn stale_before(&self) -> Option<i64> {
        let now = self.head.last_activity;
        let life = self.messages_expire_at.checked_sub(now)?;
        let by_settings = (life > 0).then(|| now.saturating_sub(life));
        match (by_settings, self.head.born_at) {
            (Some(at), Some(born)) => Some(at.max(born)),
            (at, born) => at.or(born),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContactId, TenantId};

    fn commit(now: i64, life: i64, born_at: Option<i64>) -> RoundCommit {
        RoundCommit {
            key: ContactKey {
                tenant: TenantId::parse("shop").unwrap(),
                contact: ContactId::parse("ana").unwrap(),
            },
            expected: None,
            head: Head {
                last_activity: now,
                born_at,
                ..Head::default()
            },
            sweep: SweepSlot {
                bucket: 0,
                due: now,
            },
            messages: Vec::new(),
            idempotency: None,
            archive: None,
            refresh: Vec::new(),
            messages_expire_at: now + life,
        }
    }

    #[test]
    fn a_message_from_before_the_heads_life_is_stale_whatever_the_retention_now() {
        // Three days of retention now; the life began a day ago: a message of
        // a day and a half ago is of the earlier life.
        let now = 1_000_000;
        assert_eq!(
            commit(now, 3 * 86_400, Some(now - 86_400)).stale_before(),
            Some(now - 86_400)
        );
        // Without a dated life, by the settings alone.
        assert_eq!(
            commit(now, 3 * 86_400, None).stale_before(),
            Some(now - 3 * 86_400)
        );
        // A life older than the settings' reach: the settings decide.
        assert_eq!(
            commit(now, 3_600, Some(now - 86_400)).stale_before(),
            Some(now - 3_600)
        );
    }
}

/// A closed session's summary, archived when the next session opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionArchive {
    /// The closed session.
    pub session: u32,
    /// Its summary when it closed, if any step ran.
    pub summary: Option<String>,
    /// Its `summarized_until` when it closed.
    pub summarized_until: u64,
    /// Its last sequence number.
    pub last_seq: u64,
    /// TTL: now plus the tenant's transcript retention.
    pub expires_at: i64,
    /// The record's excerpt of the messages after the summary
    /// ([`crate::plan::recall::SessionRecord::excerpt`]).
    pub excerpt: String,
    /// The ids found in the session ([`crate::plan::recall::SessionRecord::ids`]).
    pub ids: Vec<String>,
    /// When the session's last round was, seconds since the epoch.
    pub ended_at: i64,
}

impl SessionArchive {
    /// The archive of a closed session from its record, expiring at `expires_at`.
    pub fn from_record(
        record: &crate::plan::recall::SessionRecord,
        summarized_until: u64,
        expires_at: i64,
    ) -> SessionArchive {
        SessionArchive {
            session: record.session,
            summary: record.summary.clone(),
            summarized_until,
            last_seq: record.messages,
            expires_at,
            excerpt: record.excerpt.clone(),
            ids: record.ids.clone(),
            ended_at: record.ended_at,
        }
    }

    /// What recall reads of it.
    pub fn record(&self) -> crate::plan::recall::SessionRecord {
        crate::plan::recall::SessionRecord {
            session: self.session,
            summary: self.summary.clone(),
            excerpt: self.excerpt.clone(),
            ids: self.ids.clone(),
            messages: self.last_seq,
            ended_at: self.ended_at,
        }
    }
}

/// Most messages one round refreshes the TTL of apart from its commit: one
/// transaction holds at most 100 actions, one of which checks the head. The next
/// rounds refresh the rest.
pub const MAX_REFRESH_PER_ROUND: usize = 99;

/// Most items a round's commit writes in its one transaction (DynamoDB's limit):
/// the head, the messages, the idempotency record, the archive and the window
/// messages whose TTL it extends ([`RoundCommit::refresh`]).
pub const MAX_ROUND_ITEMS: usize = 100;

/// Reads of a turn whose window falls short of its head before it is taken as it
/// is (see [`load_whole_turn`]).
pub const TURN_READS: u32 = 3;

/// [`RoundStore::load_turn`], read again while its window falls short of the head it was
/// read with (at most [`TURN_READS`] reads, a short wait between them): the head
/// and the window are two reads, and DynamoDB's Query is not a transactional read,
/// so a round landing between them can leave the head counting messages the window
/// does not show yet. A live head's last message expires with it, so one that
/// stays missing is a hole ([`crate::plan::window::after_last_gap`] then decides), never
/// the TTL.
pub async fn load_whole_turn(
    store: &dyn RoundStore,
    key: &ContactKey,
    now: i64,
) -> Result<TurnState, StoreError> {
    let mut state = store.load_turn(key, now).await?;
    for read in 1..TURN_READS {
        if !state.window_short(now) {
            break;
        }
        tracing::warn!(
            read,
            "the window read fell short of its head: reading again"
        );
        crate::metrics::Event::new("store")
            .count("ShortWindowReads", 1)
            .emit();
        tokio::time::sleep(std::time::Duration::from_millis(25 * u64::from(read))).await;
        state = store.load_turn(key, now).await?;
    }
    Ok(state)
}

impl TurnState {
    /// Whether the window ends before the live head's `last_seq` (a session with
    /// messages after `summarized_until`).
    pub fn window_short(&self, now: i64) -> bool {
        match &self.head {
            Some(head) if !head.expired_at(now) && head.last_seq > head.summarized_until => {
                self.window.last().map(|message| message.seq) != Some(head.last_seq)
            }
            _ => false,
        }
    }
}

/// A completed idempotent request: the key and the response to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedRequest {
    /// The client's key.
    pub key: IdempotencyKey,
    /// Hash of the request payload, to tell a retry from a different request.
    pub payload_hash: String,
    /// The JSON response body to replay.
    pub response: String,
    /// When the record expires (TTL), seconds since the Unix epoch.
    pub expires_at: i64,
}

/// The outcome of claiming an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key was free (or its record expired, or its holder's lease ran out): the
    /// caller runs the request and completes or releases the key.
    Started,
    /// The request already completed: here is its response.
    Completed {
        /// The stored JSON response body.
        response: String,
    },
    /// Another attempt holds the key now.
    InProgress,
    /// The key was used with another payload.
    Mismatch,
}
