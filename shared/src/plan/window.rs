//! Where a window of recent messages may start.
//!
//! A request may not open on a `tool_result` (its `tool_use` would be missing) nor on
//! an assistant message, so a window starts only at a user message made only of text.
//! Cutting there also keeps every tool round whole: a round's `tool_use`/`tool_result`
//! pairs all sit between two such user messages.
//!
//! A window may also have a hole: sequence numbers are dense when committed, but a
//! message can go before its session closes (DynamoDB's TTL, which deletes in any
//! order, after a refresh failed; a hand edit). What follows a hole may answer a
//! message that is gone, so [`after_last_gap`] starts the window at the first safe
//! start after the last hole, the only place known to be whole.
//!
//! (`docs/DESIGN.md`: invariant 3.)

use crate::domain::StoredMessage;

/// Index in `messages` where a window keeping about `keep` messages may start.
///
/// The naive cut keeps the last `keep` messages; the start then moves *forward* to the
/// first text-only user message at or after that cut, never back, so a window never
/// holds more than `keep` messages. When no such message follows the cut, the result
/// is `messages.len()`: an empty window, and the request holds only the new message.
pub fn safe_window_start(messages: &[StoredMessage], keep: usize) -> usize {
    let naive = messages.len().saturating_sub(keep);
    messages[naive..]
        .iter()
        .position(StoredMessage::is_user_text_only)
        .map_or(messages.len(), |offset| naive + offset)
}

/// Index in `messages` (a session's messages after `summarized_until` up to
/// `last_seq`, oldest first) where a window without holes may start: 0 when their
/// sequence numbers run from `summarized_until + 1` to `last_seq` without a gap;
/// else the first text-only user message after the last gap (`messages.len()`
/// when none follows it, or when the last messages themselves are gone: what is
/// left may end on a question whose answer is missing).
pub fn after_last_gap(messages: &[StoredMessage], summarized_until: u64, last_seq: u64) -> usize {
    let mut expected = summarized_until.saturating_add(1);
    let mut last_gap = None;
    for (index, message) in messages.iter().enumerate() {
        if message.seq != expected {
            last_gap = Some(index);
        }
        expected = message.seq.saturating_add(1);
    }
    if !messages.is_empty() && expected <= last_seq {
        return messages.len();
    }
    let Some(gap) = last_gap else {
        return 0;
    };
    messages[gap..]
        .iter()
        .position(StoredMessage::is_user_text_only)
        .map_or(messages.len(), |offset| gap + offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContentBlock, Role};
    use crate::testing::msg;
    use serde_json::json;

    /// user text, then assistant calls two tools in parallel, results, another tool,
    /// its result, final reply; then a plain exchange.
    fn conversation() -> Vec<StoredMessage> {
        use ContentBlock as B;
        vec![
            msg(1, Role::User, vec![B::text("any slot tomorrow?")]),
            msg(
                2,
                Role::Assistant,
                vec![
                    B::tool_use("a", "list_free_slots", json!({})),
                    B::tool_use("b", "list_free_slots", json!({})),
                ],
            ),
            msg(
                3,
                Role::User,
                vec![B::tool_result("a", "[]"), B::tool_result("b", "[]")],
            ),
            msg(
                4,
                Role::Assistant,
                vec![B::text("hm"), B::tool_use("c", "book", json!({}))],
            ),
            msg(5, Role::User, vec![B::tool_result("c", "ok")]),
            msg(6, Role::Assistant, vec![B::text("booked")]),
            msg(7, Role::User, vec![B::text("thanks")]),
            msg(8, Role::Assistant, vec![B::text("you're welcome")]),
        ]
    }

    #[test]
    fn keeps_everything_when_the_window_is_larger_than_the_history() {
        assert_eq!(safe_window_start(&conversation(), 100), 0);
    }

    #[test]
    fn moves_forward_past_tool_rounds_never_back() {
        let messages = conversation();
        // Naive cuts at 2..=6 land inside the tool round: the start moves to index 6.
        for keep in 2..=6 {
            assert_eq!(safe_window_start(&messages, keep), 6, "keep {keep}");
        }
        assert_eq!(safe_window_start(&messages, 7), 6);
        assert_eq!(safe_window_start(&messages, 8), 0);
    }

    #[test]
    fn an_empty_window_when_no_safe_start_follows_the_cut() {
        let messages = conversation();
        assert_eq!(safe_window_start(&messages, 1), messages.len());
        assert_eq!(safe_window_start(&messages, 0), messages.len());
        assert_eq!(safe_window_start(&[], 4), 0);
    }

    /// Whatever part of a life's rounds a read finds (any messages missing: TTL,
    /// a transaction half landed, another life's rounds under an old head's
    /// bounds), the window it keeps alternates its roles and ends with an
    /// answer: a request built on it never breaks the roles' rules
    /// (`BuildError::RolesMustAlternate`, `MustEndWithUser` are defence in depth;
    /// the simulator's `window-read-across-a-commit-answers-500` mutant is
    /// equivalent for this reason, `docs/reliability.md`).
    #[test]
    fn every_window_a_read_keeps_alternates_and_ends_with_an_answer() {
        let all = conversation();
        for present in 0u32..(1 << all.len()) {
            for summarized_until in (0..8).step_by(2) {
                for last_seq in (summarized_until + 2..=8).step_by(2) {
                    let read: Vec<StoredMessage> = all
                        .iter()
                        .enumerate()
                        .filter(|(i, m)| {
                            present & (1 << i) != 0 && m.seq > summarized_until && m.seq <= last_seq
                        })
                        .map(|(_, m)| m.clone())
                        .collect();
                    let kept = &read[after_last_gap(&read, summarized_until, last_seq)..];
                    let case = format!("present {present:08b}, {summarized_until}..={last_seq}");
                    assert!(
                        kept.windows(2).all(|pair| pair[0].role != pair[1].role),
                        "{case}"
                    );
                    if let (Some(first), Some(last)) = (kept.first(), kept.last()) {
                        assert_eq!(first.role, Role::User, "{case}");
                        assert_eq!(last.role, Role::Assistant, "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_window_without_holes_starts_at_its_first_message() {
        let messages = conversation();
        assert_eq!(after_last_gap(&messages, 0, 8), 0);
        assert_eq!(after_last_gap(&messages[6..], 6, 8), 0);
        assert_eq!(after_last_gap(&[], 4, 4), 0);
    }

    #[test]
    fn a_hole_moves_the_start_to_the_first_safe_start_after_the_last_one() {
        let messages = conversation();
        let without = |gone: &[u64]| -> Vec<StoredMessage> {
            messages
                .iter()
                .filter(|m| !gone.contains(&m.seq))
                .cloned()
                .collect()
        };
        // The tool call at 4 is gone: its result at 5 would be an orphan.
        let holed = without(&[4]);
        assert_eq!(holed[after_last_gap(&holed, 0, 8)].seq, 7);
        // The first message is gone (a hole right after `summarized_until`).
        let headless = without(&[1]);
        assert_eq!(headless[after_last_gap(&headless, 0, 8)].seq, 7);
        // Two holes: the last one counts.
        let twice = without(&[2, 7]);
        assert_eq!(
            after_last_gap(&twice, 0, 8),
            twice.len(),
            "no safe start after 7"
        );
        // A hole right before a safe start keeps it.
        let clean = without(&[6]);
        assert_eq!(clean[after_last_gap(&clean, 0, 8)].seq, 7);
        // The last answer is gone: what is left would end on its question.
        let tailless = without(&[8]);
        assert_eq!(after_last_gap(&tailless, 0, 8), tailless.len());
        assert_eq!(after_last_gap(&[], 0, 8), 0, "nothing left at all");
    }

    #[test]
    fn a_user_message_mixing_results_and_text_is_not_a_start() {
        use ContentBlock as B;
        let messages = vec![
            msg(1, Role::User, vec![B::text("hi")]),
            msg(2, Role::Assistant, vec![B::tool_use("a", "t", json!({}))]),
            msg(
                3,
                Role::User,
                vec![B::tool_result("a", "x"), B::text("also this")],
            ),
            msg(4, Role::Assistant, vec![B::text("done")]),
        ];
        assert_eq!(safe_window_start(&messages, 2), 4);
    }
}
