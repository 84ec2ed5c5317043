//! A closed session's fact extraction: read what a step kept of the session, ask the
//! summary model for facts through the forced `record_facts` tool, and keep only
//! what passes the tenant's policy and cites a message shown.

use std::collections::BTreeMap;

use serde_json::Value;
use tracing::info;

use super::facts_request::{Proposal, facts_request, read_proposal};
use super::{CompactorError, FactsJob, JobOutcome};
use crate::deadline::Deadline;
use crate::domain::{Fact, FactKey, FactSource, Head, Incarnation};
use crate::events::occurrences::{changed_facts, fact_set};
use crate::events::publish;
use crate::model::StopReason;
use crate::plan::facts::FactPolicy;
use crate::plan::facts::reconcile::reconcile;
use crate::store::{
    ClosedSession, ContactKey, FactExpectation, FactRemoval, FactWrite, load_whole_turn,
};
use crate::tenant::Settings;

impl FactsJob {
    /// A closed session's fact extraction: read what a step kept of it, ask the
    /// summary model for facts through the forced `record_facts` tool, keep only
    /// what passes the tenant's policy and cites a message shown, and store them
    /// (with the removals asked for) while the head still has the job's incarnation.
    pub(super) async fn facts(
        &self,
        key: &ContactKey,
        settings: &Settings,
        incarnation: &Incarnation,
        session: u32,
        deadline: Deadline,
    ) -> Result<JobOutcome, CompactorError> {
        let now = (self.common.wiring.clock)();
        let (head, existing) = self.memory.load_memory(key, now).await?;
        let Some(head) = head.filter(|head| head.incarnation.as_ref() == Some(incarnation)) else {
            return Ok(JobOutcome::FactsSkipped { reason: "erased" });
        };
        // Every outcome but `erased` and a failure settles the request: it no
        // longer waits for the sweep to request it again.
        let done = |reason| async move {
            self.facts.facts_done(key, incarnation, session).await?;
            Ok(JobOutcome::FactsSkipped { reason })
        };
        if settings.allowed_fact_keys.is_empty() {
            return done("no_allowed_keys").await;
        }
        let closed = self.closed_session(key, &head, session, now).await?;
        // A fact must cite a message the model was shown; the record alone has no
        // sequence numbers to cite.
        if closed.messages.is_empty() {
            return done("nothing_to_read").await;
        }

        let proposal = self
            .propose(key, settings, (&existing, &closed), deadline)
            .await?;

        let (writes, removals, refused) =
            fact_changes(settings, &existing, proposal, (&closed, session), now);
        let (stored, removed) = (writes.len(), removals.len());
        if !self
            .store_facts(key, (incarnation, session), &existing, (&writes, &removals))
            .await?
        {
            return Ok(JobOutcome::FactsSkipped { reason: "erased" });
        }
        info!(
            stored,
            refused,
            removed,
            keys = ?writes.iter().map(|w| w.fact.key.as_str()).collect::<Vec<_>>(),
            "facts extracted"
        );
        Ok(JobOutcome::FactsStored {
            stored,
            refused,
            removed,
        })
    }

    /// The summary model's proposal for the closed session: the request, the call
    /// (counted in the tenant's usage), and its `record_facts` input read. An answer
    /// cut at `max_tokens` is unreadable: acting on it could drop facts it did not
    /// get to.
    async fn propose(
        &self,
        key: &ContactKey,
        settings: &Settings,
        (existing, closed): (&[Fact], &ClosedSession),
        deadline: Deadline,
    ) -> Result<Proposal, CompactorError> {
        let request = facts_request(
            &self.common.wiring.defaults.summary_model,
            &settings.allowed_fact_keys,
            existing,
            closed.summary.as_deref(),
            &closed.messages,
        );
        let response = self.common.wiring.model.create(&request, deadline).await?;
        self.common
            .count_call(&key.tenant, &request.model, &response.usage, |c| {
                c.facts_calls = 1
            })
            .await;
        if response.stop_reason == Some(StopReason::MaxTokens) {
            return Err(CompactorError::UnreadableFacts(
                "the answer was cut at max_tokens",
            ));
        }
        read_proposal(&response)
    }

    /// Stores the writes and removals (when there are any) while the head still has
    /// the job's incarnation, publishes each changed fact, and settles the request.
    /// `Ok(false)`: the contact was erased, nothing written.
    async fn store_facts(
        &self,
        key: &ContactKey,
        (incarnation, session): (&Incarnation, u32),
        existing: &[Fact],
        (writes, removals): (&[FactWrite], &[FactRemoval]),
    ) -> Result<bool, CompactorError> {
        let changes = !writes.is_empty() || !removals.is_empty();
        if changes
            && !self
                .facts
                .save_facts(key, incarnation, writes, removals)
                .await?
        {
            return Ok(false);
        }
        for fact in changed_facts(existing, writes.iter().map(|write| &write.fact)) {
            let occurrence = fact_set(key, fact);
            publish(
                self.common.wiring.tenants.as_ref(),
                self.common.wiring.events.as_ref(),
                occurrence,
            )
            .await;
        }
        self.facts.facts_done(key, incarnation, session).await?;
        Ok(true)
    }

    /// What a step kept of a closed session: for one the sweep closed, still the
    /// head's, the head's summary and the messages after `summarized_until`; for one
    /// the next message closed, its archive and the messages after it.
    pub(super) async fn closed_session(
        &self,
        key: &ContactKey,
        head: &Head,
        session: u32,
        now: i64,
    ) -> Result<ClosedSession, CompactorError> {
        if head.session == session {
            let state = load_whole_turn(self.turns.as_ref(), key, now).await?;
            // A round may have opened the next session since the head was read:
            // then the window read is that session's, and this one is archived.
            if let Some(still) = state
                .head
                .filter(|still| still.session == session && still.incarnation == head.incarnation)
            {
                return Ok(ClosedSession {
                    summary: still.summary,
                    messages: state.window,
                });
            }
        }
        let mut closed = self.facts.load_closed_session(key, session, now).await?;
        // Messages of an earlier life under the same session number (its head
        // expired before them) are not this session's.
        closed
            .messages
            .retain(|message| head.of_this_life(message.created_at));
        Ok(closed)
    }
}

/// What the job writes and removes: the proposals that pass the tenant's policy and
/// cite a message shown, reconciled with the existing facts (an operator's
/// correction outranks what was said before it), each write and removal expecting
/// the fact as read; and how many proposals were refused.
fn fact_changes(
    settings: &Settings,
    existing: &[Fact],
    proposal: Proposal,
    (closed, session): (&ClosedSession, u32),
    now: i64,
) -> (Vec<FactWrite>, Vec<FactRemoval>, usize) {
    let last_seq = closed.messages.last().map_or(0, |m| m.seq);
    let policy = FactPolicy::new(settings.allowed_fact_keys.iter().cloned());
    let (chosen, refused) = choose_facts(&policy, proposal.facts, last_seq);
    let removals = removals(&policy, proposal.remove, existing, &chosen);
    let retention = i64::from(settings.fact_retention_days) * 86_400;
    // When each cited message was written: an operator's correction outranks
    // what was said before it.
    let said_at = |seq: u64| {
        closed
            .messages
            .iter()
            .find(|m| m.seq == seq)
            .map_or(0, |m| m.created_at)
    };
    let proposed = proposed_facts(chosen, session, now)
        .into_iter()
        .map(|fact| {
            let at = said_at(fact.source.seq);
            (fact, at)
        })
        .collect();
    let reconciled = reconcile(
        existing,
        proposed,
        removals,
        said_at(last_seq),
        now,
        now - retention,
    );
    if reconciled.kept_for_operator > 0 {
        info!(
            kept = reconciled.kept_for_operator,
            "proposals older than an operator's value left out"
        );
    }
    // Each removal expects the fact as read, as each write does: an operator's
    // correction landing meanwhile makes the job conflict and run again.
    let removals: Vec<FactRemoval> = reconciled
        .removals
        .into_iter()
        .filter_map(|removed| existing.iter().find(|fact| fact.key == removed))
        .map(FactRemoval::of)
        .collect();
    let writes: Vec<FactWrite> = reconciled
        .writes
        .into_iter()
        .map(|write| FactWrite {
            fact: write.fact,
            expires_at: now + retention,
            expect: match write.replaces {
                Some(at) => FactExpectation::UpdatedAt(at),
                None => FactExpectation::Absent,
            },
        })
        .collect();
    (writes, removals, refused)
}

/// The proposals that pass the policy and cite a message up to `last_seq`, one per
/// key (the best-supported, latest one wins), and how many were refused. Refusals
/// are logged by code and key, never with their value.
fn choose_facts(
    policy: &FactPolicy,
    proposals: Vec<Value>,
    last_seq: u64,
) -> (BTreeMap<FactKey, (String, u64)>, usize) {
    let mut refused = 0;
    let mut chosen: BTreeMap<FactKey, (String, u64)> = BTreeMap::new();
    for candidate in proposals {
        match validate(policy, candidate, last_seq) {
            Ok((key, value, seq)) => {
                // One write per key: the best-supported (latest) proposal wins.
                if let Some((_, previous)) = chosen.get(&key)
                    && *previous > seq
                {
                    refused += 1;
                    info!(code = "duplicate_key", key = %key, "fact refused");
                    continue;
                }
                if chosen.insert(key.clone(), (value, seq)).is_some() {
                    refused += 1;
                    info!(code = "duplicate_key", key = %key, "fact refused");
                }
            }
            Err((code, key)) => {
                refused += 1;
                match key {
                    Some(key) => info!(code, key = %key, "fact refused"),
                    None => info!(code, "fact refused"),
                }
            }
        }
    }
    (chosen, refused)
}

/// The existing facts to remove: keys the model withdrew that the tenant allows,
/// that exist, and that this job does not write anew (a key written is replaced,
/// not removed; keys outside the tenant's list are never touched).
fn removals(
    policy: &FactPolicy,
    names: Vec<String>,
    existing: &[Fact],
    chosen: &BTreeMap<FactKey, (String, u64)>,
) -> Vec<FactKey> {
    let mut removals: Vec<FactKey> = Vec::new();
    for name in names {
        let Ok(fact_key) = FactKey::parse(&name) else {
            continue;
        };
        let known = existing.iter().any(|fact| fact.key == fact_key);
        if known
            && policy.allowed_keys.contains(&fact_key)
            && !chosen.contains_key(&fact_key)
            && !removals.contains(&fact_key)
        {
            removals.push(fact_key);
        }
    }
    removals
}

/// The chosen facts, each citing its message of `session`.
fn proposed_facts(chosen: BTreeMap<FactKey, (String, u64)>, session: u32, now: i64) -> Vec<Fact> {
    chosen
        .into_iter()
        .map(|(key, (value, seq))| Fact::extracted(key, value, FactSource { session, seq }, now))
        .collect()
}

/// A proposed fact as (key, trimmed value, seq), or the refusal code and, when it
/// is a valid key, the key (never the value).
fn validate(
    policy: &FactPolicy,
    candidate: Value,
    last_seq: u64,
) -> Result<(FactKey, String, u64), (&'static str, Option<FactKey>)> {
    let (Some(key), Some(value)) = (
        candidate.get("key").and_then(Value::as_str),
        candidate.get("value").and_then(Value::as_str),
    ) else {
        return Err(("malformed", None));
    };
    let key = FactKey::parse(key).map_err(|_| ("invalid_key", None))?;
    let value = value.trim();
    if let Err(refusal) = policy.check(&key, value) {
        return Err((refusal.code(), Some(key)));
    }
    match candidate.get("seq").and_then(Value::as_u64) {
        Some(seq) if (1..=last_seq).contains(&seq) => Ok((key, value.to_owned(), seq)),
        _ => Err(("unsupported_source", Some(key))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::facts_request::{RECORD_FACTS_TOOL, record_facts_tool};
    use super::*;
    use crate::domain::ContentBlock;
    use crate::model::StopReason;
    use crate::model::scripted::response;
    use crate::usage::Usage;
    use serde_json::json;

    #[test]
    fn the_facts_schema_limits_keys_to_the_allowed_ones() {
        let allowed = [
            FactKey::parse("name").unwrap(),
            FactKey::parse("preferred_time").unwrap(),
        ];
        let tool = record_facts_tool(&allowed);
        assert_eq!(
            tool.input_schema["properties"]["facts"]["items"]["properties"]["key"]["enum"],
            json!(["name", "preferred_time"])
        );
        assert_eq!(
            tool.input_schema["properties"]["remove"]["items"]["enum"],
            json!(["name", "preferred_time"])
        );
        assert_eq!(tool.input_schema["additionalProperties"], json!(false));
    }

    #[test]
    fn a_proposal_is_read_from_the_tool_call_or_from_json_text() {
        let call = response(
            vec![ContentBlock::tool_use(
                "t",
                RECORD_FACTS_TOOL,
                json!({"facts": [{"key": "name", "value": "Ana", "seq": 1}], "remove": ["zone"]}),
            )],
            StopReason::ToolUse,
            Usage::default(),
        );
        let proposal = read_proposal(&call).unwrap();
        assert_eq!(
            (proposal.facts.len(), proposal.remove),
            (1, vec!["zone".to_owned()])
        );

        let fenced = response(
            vec![ContentBlock::text(
                "```json\n{\"facts\": [{\"key\": \"name\", \"value\": \"Ana\", \"seq\": 1}]}\n```",
            )],
            StopReason::EndTurn,
            Usage::default(),
        );
        assert_eq!(read_proposal(&fenced).unwrap().facts.len(), 1);

        for bad in ["no facts here", "{\"facts\": 3}", "{not json}"] {
            let answer = response(
                vec![ContentBlock::text(bad)],
                StopReason::EndTurn,
                Usage::default(),
            );
            let error = read_proposal(&answer).unwrap_err();
            assert!(matches!(error, CompactorError::UnreadableFacts(_)), "{bad}");
            assert!(!error.to_string().contains(bad), "never quotes the answer");
        }
    }

    #[test]
    fn validation_refuses_by_code_and_never_returns_the_value() {
        let policy = FactPolicy::new([FactKey::parse("name").unwrap()]);
        let check = |candidate| validate(&policy, candidate, 4);
        assert_eq!(
            check(json!({"key": "name", "value": " Ana ", "seq": 4})).unwrap(),
            (FactKey::parse("name").unwrap(), "Ana".to_owned(), 4)
        );
        let refusals = [
            (
                json!({"key": "name", "value": "Ana", "seq": 5}),
                "unsupported_source",
            ),
            (
                json!({"key": "name", "value": "Ana", "seq": 0}),
                "unsupported_source",
            ),
            (
                json!({"key": "name", "value": "Ana", "seq": -1}),
                "unsupported_source",
            ),
            (json!({"key": "name", "value": "Ana"}), "unsupported_source"),
            (json!({"key": "name", "seq": 1}), "malformed"),
            (
                json!({"key": "Not A Key", "value": "x", "seq": 1}),
                "invalid_key",
            ),
            (
                json!({"key": "zone", "value": "south", "seq": 1}),
                "key_not_allowed",
            ),
            (
                json!({"key": "name", "value": "529.982.247-25", "seq": 1}),
                "cpf",
            ),
        ];
        for (candidate, code) in refusals {
            assert_eq!(check(candidate.clone()).unwrap_err().0, code, "{candidate}");
        }
    }
}
