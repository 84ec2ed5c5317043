//! Where a window of recent messages may start.
//!
//! A request may not open on a `tool_result` (its `tool_use` would be missing) nor on
//! an assistant message, so a window starts only at a user message made only of text.
//! Cutting there also keeps every tool round whole: a round's `tool_use`/`tool_result`
//! pairs all sit between two such user messages.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContentBlock, Role};
    use serde_json::json;

    fn msg(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
        StoredMessage {
            session: 1,
            seq,
            role,
            content,
            pruned: None,
            usage: None,
            created_at: 0,
        }
    }

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
