//! How an extraction's proposals meet the stored facts, operators' corrections
//! among them.
//!
//! An operator's value (`PUT /v1/contacts/{c}/facts/{key}`) is recorded with the
//! time it was set (and, for the record, the contact's last message then). The
//! next extraction reads the session's messages, some of them older than the
//! correction: replacing the operator's value from one of those would undo the
//! correction silently. So an extraction replaces or removes an operator's value
//! only on the strength of a message written after the correction (the customer
//! said something new since), and never writes the value the operator already set.
//! Time, not the message's position, decides: positions start again at session 1
//! when a contact's memory expired and its facts (kept longer) did not, and a rule
//! by position would hold a correction against what the customer said in their
//! next life. A message written in the same second as the correction does not
//! outrank it. The simulator checks the rule under generated orders (`sim/`, "an
//! operator's correction stands"). Every replaced value goes to the fact's history
//! ([`Fact::succeeded_by`]).
//!
//! Each write carries the `updated_at` of the fact it replaces (`None`: the key was
//! absent), and the store applies it only if that is still so: a correction landing
//! between the extraction's read and its write makes the write conflict, and the job
//! runs again on what is stored then.
//!
//! (`docs/DESIGN.md`: "Operating the memory".)

use crate::domain::{Fact, FactKey};

/// A fact to write over the one read (`replaces`: its `updated_at`, or `None` for a
/// key that had none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The fact as it will be stored, history included.
    pub fact: Fact,
    /// The `updated_at` of the stored fact it replaces.
    pub replaces: Option<i64>,
}

/// What an extraction writes and removes, and how many proposals an operator's
/// value outranked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciled {
    /// The writes.
    pub writes: Vec<Replacement>,
    /// The keys to remove.
    pub removals: Vec<FactKey>,
    /// Proposals (writes or removals) left out because an operator set the value
    /// after the message they rest on.
    pub kept_for_operator: usize,
}

/// Reconciles an extraction with `existing` facts: `proposed` are the checked
/// writes, each citing its message, with the time that message was written;
/// `removals` the keys withdrawn, `read_until` the time of the last message the
/// extraction read. Revisions replaced before `oldest_kept` leave the history.
pub fn reconcile(
    existing: &[Fact],
    proposed: Vec<(Fact, i64)>,
    removals: Vec<FactKey>,
    read_until: i64,
    now: i64,
    oldest_kept: i64,
) -> Reconciled {
    let stored = |key: &FactKey| existing.iter().find(|fact| &fact.key == key);
    let mut reconciled = Reconciled::default();
    for (fact, said_at) in proposed {
        match stored(&fact.key) {
            Some(old)
                if old.operator.is_some()
                    && (said_at <= old.updated_at || fact.value == old.value) =>
            {
                reconciled.kept_for_operator += 1;
            }
            Some(old) => reconciled.writes.push(Replacement {
                replaces: Some(old.updated_at),
                fact: old.succeeded_by(fact, now, oldest_kept),
            }),
            None => reconciled.writes.push(Replacement {
                fact,
                replaces: None,
            }),
        }
    }
    for key in removals {
        match stored(&key) {
            Some(old) if old.operator.is_some() && read_until <= old.updated_at => {
                reconciled.kept_for_operator += 1;
            }
            _ => reconciled.removals.push(key),
        }
    }
    reconciled
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::FactSource;

    fn key(name: &str) -> FactKey {
        FactKey::parse(name).unwrap()
    }

    fn at(session: u32, seq: u64) -> FactSource {
        FactSource { session, seq }
    }

    fn extracted(name: &str, value: &str, source: FactSource, now: i64) -> Fact {
        Fact::extracted(key(name), value.into(), source, now)
    }

    /// Set by an operator at time 500, the contact's last message then (2, 10).
    fn by_operator(value: &str) -> Fact {
        Fact {
            operator: Some("ops-1".into()),
            ..extracted("name", value, at(2, 10), 500)
        }
    }

    #[test]
    fn an_operators_value_outranks_proposals_from_messages_written_before_it() {
        let existing = [by_operator("Rita")];
        let before = (extracted("name", "Rira", at(2, 9), 900), 400);
        let same_second = (extracted("name", "Rira", at(2, 11), 900), 500);
        for proposal in [before, same_second] {
            let r = reconcile(&existing, vec![proposal], vec![], 500, 900, 0);
            assert_eq!((r.writes.len(), r.kept_for_operator), (0, 1));
        }
        // Nor may it be withdrawn on the strength of messages the operator saw.
        let r = reconcile(&existing, vec![], vec![key("name")], 500, 900, 0);
        assert_eq!((r.removals.len(), r.kept_for_operator), (0, 1));
    }

    #[test]
    fn a_later_message_replaces_an_operators_value_and_the_history_keeps_it() {
        let existing = [by_operator("Rita")];
        // Written after the correction, whatever its position: a contact whose
        // memory expired starts again at session 1.
        let later = (extracted("name", "Rita Souza", at(1, 1), 900), 800);
        let r = reconcile(&existing, vec![later], vec![], 800, 900, 0);
        assert_eq!(r.kept_for_operator, 0);
        let [write] = r.writes.as_slice() else {
            panic!("one write: {r:?}")
        };
        assert_eq!(write.replaces, Some(500));
        assert_eq!(write.fact.value, "Rita Souza");
        assert_eq!(write.fact.operator, None);
        assert_eq!(write.fact.history.len(), 1);
        let revision = &write.fact.history[0];
        assert_eq!(
            (
                revision.value.as_str(),
                revision.operator.as_deref(),
                revision.replaced_at
            ),
            ("Rita", Some("ops-1"), 900)
        );
        // A withdrawal read after the correction removes it.
        let r = reconcile(&existing, vec![], vec![key("name")], 501, 900, 0);
        assert_eq!(r.removals, vec![key("name")]);
    }

    #[test]
    fn the_operators_own_value_is_not_written_again() {
        let existing = [by_operator("Rita")];
        let confirmed = (extracted("name", "Rita", at(3, 1), 900), 800);
        let r = reconcile(&existing, vec![confirmed], vec![], 800, 900, 0);
        assert!(r.writes.is_empty());
    }

    #[test]
    fn model_facts_are_replaced_as_before_and_new_keys_must_still_be_absent() {
        let existing = [extracted("name", "Ana", at(1, 3), 100)];
        let proposed = vec![
            (extracted("name", "Ana Lima", at(2, 4), 900), 50),
            (extracted("city", "Recife", at(2, 5), 900), 50),
        ];
        let r = reconcile(&existing, proposed, vec![], 60, 900, 0);
        let replaces: Vec<_> = r
            .writes
            .iter()
            .map(|w| (w.fact.key.as_str(), w.replaces))
            .collect();
        assert_eq!(replaces, vec![("name", Some(100)), ("city", None)]);
    }

    #[test]
    fn the_history_is_newest_first_bounded_and_within_the_retention() {
        let mut fact = extracted("name", "v0", at(1, 1), 0);
        for n in 1..=8 {
            let next = extracted("name", &format!("v{n}"), at(1, n), n as i64 * 100);
            fact = fact.succeeded_by(next, n as i64 * 100, 0);
        }
        let values: Vec<&str> = fact.history.iter().map(|r| r.value.as_str()).collect();
        assert_eq!(values, vec!["v7", "v6", "v5", "v4", "v3"]);
        // Revisions replaced before the retention's start leave.
        let next = extracted("name", "v9", at(1, 9), 900);
        let fact = fact.succeeded_by(next, 900, 650);
        let values: Vec<&str> = fact.history.iter().map(|r| r.value.as_str()).collect();
        assert_eq!(values, vec!["v8", "v7", "v6"]);
        // The same value again keeps the history as it was.
        let again = extracted("name", "v9", at(2, 1), 950);
        assert_eq!(fact.succeeded_by(again, 950, 650).history, fact.history);
    }
}
