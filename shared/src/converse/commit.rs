//! The commit path of every round, answered by degrau's model loop or recorded from
//! a client's own: the round prepared as one transaction ([`PreparedRound`]),
//! committed under the head's condition (a commit whose answer was lost is
//! recognised by the head's round token), its metrics, then the work after it:
//! the window's TTL beyond what the commit held, the closed session's facts and a
//! due step.

mod parts;

use tracing::{info, warn};

use super::round::{Origin, Round, RoundStats};
use super::turn::Turn;
use super::{AskError, AskResponse, Converse, IDEMPOTENCY_TTL_SECONDS, by};
use crate::deadline::Deadline;
use crate::domain::{Head, IdempotencyKey, Incarnation, PendingFacts};
use crate::metering::UsageCounts;
use crate::metrics::{Event, Unit};
use crate::model::StopReason;
use crate::plan::policy::fold_due;
use crate::plan::request::Lifetimes;
use crate::plan::sweep::{next_sweep_due, sweep_bucket};
use crate::store::{Claim, CompletedRequest, ContactKey, RoundCommit, StoreError, SweepSlot};
use crate::tenant::Settings;
use crate::usage::RoundUsage;
use parts::{archive, refresh_split, replay_body, response, stored_messages};

/// A round ready to commit, with what the steps after the commit need.
pub(super) struct PreparedRound {
    pub(super) commit: RoundCommit,
    pub(super) response: AskResponse,
    /// A random id written on the head, to recognise this round's commit when its
    /// answer was lost.
    pub(super) round_token: String,
    pub(super) incarnation: Incarnation,
    /// Window messages due a new TTL that the commit's transaction could not hold.
    pub(super) refresh_rest: Vec<u64>,
    pub(super) step_due: bool,
    pub(super) usage: RoundUsage,
    pub(super) stats: RoundStats,
    pub(super) origin: Origin,
}

/// Whether a commit whose answer was lost landed.
pub(super) enum Landed {
    Yes,
    No,
    Unknown,
}

/// How a commit went, when it did not fail.
pub(super) enum Committed {
    /// The round is stored.
    Stored,
    /// Another round landed first: nothing of this one is stored. What happens
    /// next is the route's policy (`ask` may answer again; a recorded round is a
    /// conflict).
    Lost,
}

/// What a round's commit gives its new head besides the turn's plan.
struct Fresh {
    /// The round's own token (how a lost commit's answer is recognised).
    round_token: String,
    /// The round's last sequence number.
    last_seq: u64,
    /// When the head expires.
    expires_at: i64,
    /// The round holds no message (a session closed on request).
    empty: bool,
}

impl PreparedRound {
    /// What the round adds to its tenant's usage: a round, its model and tool
    /// calls, its tokens under `model` (under `client` for a round a client ran
    /// with its own model).
    fn usage_counts(&self, model: &str) -> UsageCounts {
        let mut counts = UsageCounts {
            rounds: 1,
            model_calls: u64::from(self.usage.calls),
            tool_calls: self.stats.tool_calls,
            ..UsageCounts::default()
        };
        let model = match self.origin {
            Origin::Client => "client",
            _ => model,
        };
        // An estimate is no consumption: the round and its calls count, not tokens.
        if !self.stats.usage_estimated {
            counts.add_tokens(model, &self.usage.total);
        }
        counts
    }

    /// Logs the committed round and emits its metrics.
    fn record(&self) {
        let usage = &self.usage;
        info!(
            session = self.response.session,
            first_seq = self.response.round.first_seq,
            last_seq = self.response.round.last_seq,
            context_tokens = usage.context_tokens(),
            cache_read_ratio = usage.cache_read_ratio(),
            calls = usage.calls,
            cache_ttl = self.stats.lifetimes.as_str(),
            "round committed"
        );
        Event::new("ask")
            .count("RoundsCommitted", 1)
            .count("ContextTokens", usage.context_tokens())
            .metric("CacheReadRatio", usage.cache_read_ratio(), Unit::None)
            .count("InputTokens", usage.total.input_tokens)
            .count("CacheReadInputTokens", usage.total.cache_read_input_tokens)
            .count(
                "CacheCreationInputTokens",
                usage.total.cache_creation_input_tokens,
            )
            .count("OutputTokens", usage.total.output_tokens)
            .count("ModelCalls", u64::from(usage.calls))
            .count("ToolCalls", self.stats.tool_calls)
            .metric("ModelLatency", self.stats.model_ms, Unit::Milliseconds)
            .count("CompactionQueued", u64::from(self.step_due))
            .count(
                "RoundsRecorded",
                u64::from(matches!(self.origin, Origin::Client)),
            )
            .count(
                "RepliesTruncated",
                u64::from(self.stats.stop_reason == Some(StopReason::MaxTokens)),
            )
            .emit();
    }
}

impl Converse {
    /// The commit path of every round, answered by degrau's model loop or recorded
    /// from a client's own: prepare the commit, commit it in one transaction
    /// (recognising a commit whose answer was lost), record its metrics, then the
    /// work that follows a commit (the window's TTL beyond what the commit held, the
    /// closed session's facts, a due step), each only while the deadline allows: a
    /// client whose round is stored is answered in time. `None` when another round
    /// landed first: nothing was written.
    pub(super) async fn store_round(
        &self,
        key: &ContactKey,
        settings: &Settings,
        turn: &Turn,
        round: Round,
        idempotency: Option<(&IdempotencyKey, &str)>,
        deadline: Deadline,
    ) -> Result<Option<AskResponse>, AskError> {
        let step_allowed = self.step_allowed(key, settings, &round, deadline).await;
        let prepared =
            self.prepare_commit(key, settings, turn, round, idempotency, step_allowed)?;
        if let Committed::Lost = self.commit(key, &prepared, deadline).await? {
            return Ok(None);
        }
        prepared.record();
        self.count_usage(
            &key.tenant,
            &prepared.usage_counts(&settings.model),
            deadline,
        )
        .await;
        self.refresh_rest(key, &prepared, deadline).await;
        self.after_commit(key, settings, &prepared, &turn.plan, deadline)
            .await;
        Ok(Some(prepared.response))
    }

    /// The round as one transaction: its messages with dense sequence numbers, the
    /// new head (filed in the sweep index at its next due time), the idempotency
    /// record holding the response to replay, the closed session's archive, and
    /// the window messages whose TTL the round extends (as many as the transaction
    /// holds).
    pub(super) fn prepare_commit(
        &self,
        key: &ContactKey,
        settings: &Settings,
        turn: &Turn,
        round: Round,
        idempotency: Option<(&IdempotencyKey, &str)>,
        step_allowed: bool,
    ) -> Result<PreparedRound, AskError> {
        let (now, plan) = (turn.now, &turn.plan);
        let round_token = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
        // Messages, the archive of a session closed now and the head expire a
        // retention after the session could close (this round plus the idle
        // timeout), so an open session's messages never expire under it.
        let expires_at = now.saturating_add(settings.retention_after_activity_seconds());
        let messages = stored_messages(round.messages, round.transcribed, plan, now);
        // A round of no message is a session closed on request (`close.rs`): the
        // session it opens holds nothing to extract, for the sweep or the round
        // that closes it in turn.
        let empty = messages.is_empty();
        // Due (or cut at the hard cap), and a summary call of the tenant's quota
        // spent for it.
        let step_due = step_allowed;
        let response = response(plan, &messages, &round.usage, &round.stats, step_due);
        // What an idempotent retry replays: the route's own answer.
        let body = replay_body(round.origin, &response, round.stats.usage_estimated)?;
        let fresh = Fresh {
            round_token: round_token.clone(),
            last_seq: response.round.last_seq,
            expires_at,
            empty,
        };
        let ran = (&round.usage, &round.stats, round.origin);
        let (head, sweep) = self.next_head(key, settings, turn, ran, fresh);
        let incarnation = head.incarnation.clone().unwrap_or_else(Incarnation::random);
        let idempotency = idempotency.map(|(idem, hash)| CompletedRequest {
            key: idem.clone(),
            payload_hash: hash.to_owned(),
            response: body,
            expires_at: now + IDEMPOTENCY_TTL_SECONDS,
        });
        let archive = archive(turn, expires_at);
        let (refresh, refresh_rest) = refresh_split(
            turn,
            settings,
            messages.len() + usize::from(idempotency.is_some()) + usize::from(archive.is_some()),
        );
        let commit = RoundCommit {
            key: key.clone(),
            expected: turn.expected.clone(),
            head,
            sweep,
            messages,
            idempotency,
            archive,
            refresh,
            messages_expire_at: expires_at,
        };
        Ok(PreparedRound {
            commit,
            response,
            round_token,
            incarnation,
            refresh_rest,
            step_due,
            usage: round.usage,
            stats: round.stats,
            origin: round.origin,
        })
    }

    /// The head the round leaves, filed in the sweep index at its next due time
    /// ([`Converse::sweep_slot`]): the session's plan with the round's sequence
    /// number, activity and context size, its facts request pending, and its pause
    /// fold due once every cache entry of a stepped round of the model's is gone.
    fn next_head(
        &self,
        key: &ContactKey,
        settings: &Settings,
        turn: &Turn,
        (usage, stats, origin): (&RoundUsage, &RoundStats, Origin),
        fresh: Fresh,
    ) -> (Head, SweepSlot) {
        let (now, plan) = (turn.now, &turn.plan);
        // A new head's life starts here; a loaded one keeps its own (one from
        // before incarnations receives this one).
        let incarnation = turn
            .expected
            .as_ref()
            .and_then(|head| head.incarnation.clone())
            .unwrap_or_else(Incarnation::random);
        // Requesting a closed session's facts makes them pending until the
        // facts job is done; the sweep requests them again otherwise.
        let requested = plan.request_facts.map(|session| PendingFacts {
            session,
            since: now,
            attempts: 1,
        });
        let head = Head {
            session: plan.session,
            last_seq: fresh.last_seq,
            summarized_until: plan.summarized_until,
            summary: plan.summary.clone(),
            last_context_tokens: usage.context_tokens(),
            last_activity: now,
            steps: plan.steps,
            // Cleared by every round: a new session has had no extraction, and a
            // continued one has messages the requested one missed.
            facts_requested: fresh.empty.then_some(plan.session),
            last_round: Some(fresh.round_token),
            incarnation: Some(incarnation),
            facts_pending: requested,
            hard_cap_at: stats.hard_capped.then_some(plan.summarized_until),
            expires_at: Some(fresh.expires_at),
            recent_gaps: plan.gaps.clone(),
            cache_hour: stats.lifetimes != Lifetimes::FiveMinutes,
            client_round: origin == Origin::Client,
            // A new head's life begins now; a loaded one keeps its own.
            born_at: turn
                .expected
                .as_ref()
                .map_or(Some(now), |head| head.born_at),
        };
        // Due for a pause fold once every cache entry of its request is gone,
        // when the policy folds this head (a stepped round of degrau's own).
        let fold_due = fold_due(settings.context_policy, &settings.compaction, &head);
        let sweep = self.sweep_slot(key, settings, turn, requested, fold_due, fresh.empty);
        (head, sweep)
    }

    /// Where the round files its head in the sweep index: its bucket, and when it is
    /// next due (its session going idle unless `nothing_to_extract`, its pending
    /// extraction to check on, or its pause fold, `fold_due`, whichever comes
    /// first).
    pub(super) fn sweep_slot(
        &self,
        key: &ContactKey,
        settings: &Settings,
        turn: &Turn,
        requested: Option<PendingFacts>,
        fold_due: Option<i64>,
        nothing_to_extract: bool,
    ) -> SweepSlot {
        let pending = requested.or(turn.expected.as_ref().and_then(|head| head.facts_pending));
        let idle_minutes = settings.session_idle_minutes;
        let due =
            next_sweep_due(turn.now, idle_minutes, nothing_to_extract, pending).unwrap_or(turn.now);
        SweepSlot {
            bucket: sweep_bucket(key, self.defaults.sweep_buckets),
            due: fold_due.map_or(due, |fold| fold.min(due)),
        }
    }

    /// Commits the round by `deadline`: a commit whose answer was lost (an error,
    /// or no answer in time) but which landed counts as stored; a race lost is
    /// [`Committed::Lost`], for the route's policy (see the module documentation);
    /// a commit that may or may not have landed is [`AskError::Indeterminate`].
    pub(super) async fn commit(
        &self,
        key: &ContactKey,
        prepared: &PreparedRound,
        deadline: Deadline,
    ) -> Result<Committed, AskError> {
        let committed = match by(deadline, self.store.commit_round(&prepared.commit)).await {
            Ok(()) => return Ok(Committed::Stored),
            Err(error) => error,
        };
        match (self.landed(key, prepared, deadline).await, committed) {
            (Landed::Yes, _) => {
                // DynamoDB applied the transaction but its answer was lost (a
                // timeout, or an SDK retry whose condition then failed): stored,
                // exactly once.
                warn!("the commit's answer was lost, but the round is stored");
                Ok(Committed::Stored)
            }
            // A failed condition: another round landed first.
            (_, StoreError::Conflict(_)) => {
                Event::new("ask").count("RoundConflicts", 1).emit();
                Ok(Committed::Lost)
            }
            // A refusal the store gave in words: nothing was written, and
            // nothing will be.
            (
                Landed::No,
                other @ (StoreError::InvalidConfig(_)
                | StoreError::Corrupt(_)
                | StoreError::Other(_)),
            ) => Err(other.into()),
            // Unavailable (a throttle, a timeout, a dropped connection): DynamoDB
            // may still apply the transaction after the head was read as loaded,
            // so the round may be stored yet.
            (Landed::No | Landed::Unknown, error) => {
                warn!(%error, "the commit failed and whether it landed is not known");
                Event::new("ask").count("CommitsIndeterminate", 1).emit();
                Err(AskError::Indeterminate)
            }
        }
    }

    /// After a race lost, the answer of an earlier attempt of this very request,
    /// when that is what it lost to: a commit told "may be stored" that landed
    /// while the retry ran, after an erase had taken the key's claim (so the
    /// retry could claim it again). Running again would store the message twice.
    /// A key that cannot be read (the store failed, or the deadline came) leaves
    /// that open: the round may be stored, [`AskError::Indeterminate`], never
    /// "not stored".
    pub(super) async fn replay_of(
        &self,
        key: &ContactKey,
        idempotency: Option<(&IdempotencyKey, &str)>,
        deadline: Deadline,
    ) -> Result<Option<AskResponse>, AskError> {
        let Some((idem, hash)) = idempotency else {
            return Ok(None);
        };
        let lease = super::lease_seconds(deadline);
        let claim = self
            .store
            .claim_request(key, idem, hash, (self.clock)(), lease);
        match by(deadline, claim).await {
            Ok(Claim::Completed { response }) => Ok(serde_json::from_str(&response).ok()),
            Ok(_) => Ok(None),
            Err(error) => {
                warn!(%error, "a race lost, and whether to this request's earlier attempt is not known");
                Event::new("ask").count("CommitsIndeterminate", 1).emit();
                Err(AskError::Indeterminate)
            }
        }
    }

    /// Whether this round's commit landed: the head (read strongly, by the
    /// deadline) names its token, or is still as the round loaded it (it did not),
    /// or moved on otherwise (not known: another round may have followed it).
    pub(super) async fn landed(
        &self,
        key: &ContactKey,
        prepared: &PreparedRound,
        deadline: Deadline,
    ) -> Landed {
        match by(deadline, self.store.load_head(key)).await {
            Ok(Some(head)) if head.last_round.as_deref() == Some(&prepared.round_token) => {
                Landed::Yes
            }
            Ok(head)
                if as_loaded(
                    head.as_ref()
                        .filter(|head| !head.expired_at(prepared.commit.head.last_activity)),
                    prepared.commit.expected.as_ref(),
                ) =>
            {
                Landed::No
            }
            _ => Landed::Unknown,
        }
    }
}

/// Whether `head` (read after a failed commit; `None` when it is gone or past its
/// retention) is still as the round loaded it: the commit did not land.
fn as_loaded(head: Option<&Head>, expected: Option<&Head>) -> bool {
    match (head, expected) {
        (None, None) => true,
        (Some(head), Some(expected)) => {
            (
                head.session,
                head.last_seq,
                &head.incarnation,
                &head.last_round,
            ) == (
                expected.session,
                expected.last_seq,
                &expected.incarnation,
                &expected.last_round,
            )
        }
        _ => false,
    }
}
