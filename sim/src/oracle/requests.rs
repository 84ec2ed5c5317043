//! No message is forgotten, on every request the model was sent: a round's request
//! carries, in its window or its system blocks (the summary), every message of its
//! session that a client was told stored before the round began, but for the
//! oldest of its window, which the hard cap or the retry after "prompt is too
//! long" may leave out while a step is late. A message missing from a request
//! that carries a newer one of the same session is a hole: a message forgotten
//! while the conversation goes on (the quiescence check sees only the context
//! read once jobs have flowed).

use crate::model::{Carried, token_contact};

use super::{ContactLog, Told, Violation};

/// The invariant's name (the liveness check at quiescence shares it).
pub const FORGOTTEN: &str = "no message is forgotten";

/// Checks `carried` against what the clients of its round's contact were told
/// before the round began.
pub(super) fn check(contacts: &[ContactLog], carried: &Carried) -> Result<(), Violation> {
    let Some(log) = token_contact(&carried.round).and_then(|contact| contacts.get(contact)) else {
        return Ok(());
    };
    let Some(round) = log.sent.get(&carried.round) else {
        return Ok(());
    };
    let Told::Stored { session, .. } = round.told else {
        // Which session its request read is known only from where it landed.
        return Ok(());
    };
    // Every round of this session told stored in an earlier event, live then.
    let before: Vec<(&String, u64)> = log
        .sent
        .iter()
        .filter_map(|(token, sent)| match sent.told {
            Told::Stored {
                session: s,
                first_seq,
                ..
            } if s == session
                && sent.told_in.is_some_and(|event| event < round.issued_in)
                && sent.expires.is_none_or(|at| at > round.began)
                && sent.life_ends.is_none_or(|at| at > round.began) =>
            {
                Some((token, first_seq))
            }
            _ => None,
        })
        .collect();
    let oldest_sent = before
        .iter()
        .filter(|(token, _)| carried.window.contains(*token))
        .map(|(_, seq)| *seq)
        .min();
    let Some(oldest_sent) = oldest_sent else {
        return Ok(());
    };
    match before
        .iter()
        .find(|(token, seq)| *seq > oldest_sent && !carried.holds(token))
    {
        Some((token, seq)) => Err(Violation::new(
            FORGOTTEN,
            format!(
                "a request of the round of {} left out {token} (session {session}, seq {seq}) \
                 yet carried seq {oldest_sent} of the same session",
                carried.round
            ),
        )),
        None => Ok(()),
    }
}
