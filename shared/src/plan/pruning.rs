//! Stable pruning of old tool results.
//!
//! Long tool outputs (a day's slot list) are worth keeping whole only while the
//! conversation is about them. At a compaction step, results older than the last N
//! user turns of the kept window are replaced by a short placeholder that keeps the
//! `tool_use_id` (the pair stays valid) and says what was left out. The rule is
//! positional, so a result once old stays old: decisions are persisted as the
//! message's pruned copy, computed from that copy, and never undone. Originals stay
//! stored for audit.
//!
//! (`docs/DESIGN.md`: invariant 5.)

use crate::domain::{ContentBlock, Role, StoredMessage};

/// Start of every placeholder; a result that starts with it is never pruned again.
pub const PLACEHOLDER_PREFIX: &str = "[tool result omitted";

/// The pruned copy decided for one message.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneDecision {
    /// Sequence number of the message (in the step's session).
    pub seq: u64,
    /// The blocks to send from now on in place of the original ones.
    pub pruned: Vec<ContentBlock>,
}

/// Which results of `window` (the messages kept after a step, oldest first) to prune:
/// those longer than `min_chars` characters, in messages before the `keep_turns`-th
/// last text-only user message. With fewer turns than that, nothing is pruned.
pub fn prune_plan(
    window: &[StoredMessage],
    keep_turns: usize,
    min_chars: usize,
) -> Vec<PruneDecision> {
    let turn_starts: Vec<usize> = window
        .iter()
        .enumerate()
        .filter(|(_, message)| message.is_user_text_only())
        .map(|(index, _)| index)
        .collect();
    let Some(&cutoff) = turn_starts
        .len()
        .checked_sub(keep_turns.max(1))
        .map(|i| &turn_starts[i])
    else {
        return Vec::new();
    };

    let mut decisions = Vec::new();
    for index in 0..cutoff {
        let message = &window[index];
        if message.role != Role::User {
            continue;
        }
        let previous = index.checked_sub(1).map(|i| &window[i]);
        let mut changed = false;
        let pruned: Vec<ContentBlock> = message
            .effective_content()
            .iter()
            .map(|block| match block {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } if content.chars().count() >= min_chars
                    && !content.starts_with(PLACEHOLDER_PREFIX) =>
                {
                    changed = true;
                    let name = previous.and_then(|p| tool_name(p, tool_use_id));
                    ContentBlock::ToolResult {
                        tool_use_id: tool_use_id.clone(),
                        content: placeholder(name, content),
                        is_error: *is_error,
                    }
                }
                other => other.clone(),
            })
            .collect();
        if changed {
            decisions.push(PruneDecision {
                seq: message.seq,
                pruned,
            });
        }
    }
    decisions
}

fn tool_name<'a>(message: &'a StoredMessage, tool_use_id: &str) -> Option<&'a str> {
    message.content.iter().find_map(|block| match block {
        ContentBlock::ToolUse { id, name, .. } if id == tool_use_id => Some(name.as_str()),
        _ => None,
    })
}

/// The text that replaces a pruned result: which tool, how many items, how long.
pub fn placeholder(tool: Option<&str>, content: &str) -> String {
    let chars = content.chars().count();
    let what = tool.map_or_else(|| "the tool".to_owned(), |name| format!("`{name}`"));
    let size = match count_items(content) {
        Some(1) => format!("1 item, {chars} characters"),
        Some(items) => format!("{items} items, {chars} characters"),
        None => format!("{chars} characters"),
    };
    format!(
        "{PLACEHOLDER_PREFIX} at a compaction step: {what} returned {size}. \
         Call the tool again if you need it.]"
    )
}

/// Items in a tool output: a JSON array's length, or the length of the first array
/// inside a JSON object (`{"slots": [...]}`), or the number of non-empty lines.
fn count_items(content: &str) -> Option<usize> {
    match serde_json::from_str::<serde_json::Value>(content) {
        Ok(serde_json::Value::Array(items)) => Some(items.len()),
        Ok(serde_json::Value::Object(fields)) => fields
            .values()
            .find_map(|value| value.as_array().map(Vec::len)),
        Ok(_) => None,
        Err(_) => match content
            .lines()
            .filter(|line| !line.trim().is_empty())
            .count()
        {
            0 | 1 => None,
            lines => Some(lines),
        },
    }
}

/// Applies decisions to the messages they name (a pruned copy is replaced only by a
/// copy computed from it, so earlier placeholders survive).
pub fn apply(messages: &mut [StoredMessage], decisions: &[PruneDecision]) {
    for decision in decisions {
        if let Some(message) = messages.iter_mut().find(|m| m.seq == decision.seq) {
            message.pruned = Some(decision.pruned.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::msg;
    use serde_json::json;

    fn slots(n: usize) -> String {
        let list: Vec<String> = (0..n)
            .map(|i| format!("2026-12-01T{:02}:00", 8 + i % 10))
            .collect();
        serde_json::to_string(&json!({ "slots": list })).unwrap()
    }

    /// Three user turns, each with one tool round returning `n` slots.
    fn window(n: usize) -> Vec<StoredMessage> {
        let mut out = Vec::new();
        let mut seq = 0;
        let mut next = || {
            seq += 1;
            seq
        };
        for turn in 0..3 {
            let id = format!("toolu_{turn}");
            out.push(msg(
                next(),
                Role::User,
                vec![ContentBlock::text(format!("turn {turn}"))],
            ));
            out.push(msg(
                next(),
                Role::Assistant,
                vec![ContentBlock::tool_use(
                    &id,
                    "list_free_slots",
                    json!({"day": turn}),
                )],
            ));
            out.push(msg(
                next(),
                Role::User,
                vec![ContentBlock::tool_result(&id, slots(n))],
            ));
            out.push(msg(
                next(),
                Role::Assistant,
                vec![ContentBlock::text("here you are")],
            ));
        }
        out
    }

    #[test]
    fn prunes_results_older_than_the_last_turns_and_keeps_the_tool_use_id() {
        let messages = window(40);
        let decisions = prune_plan(&messages, 2, 100);
        assert_eq!(decisions.len(), 1, "only the first turn's result is old");
        assert_eq!(decisions[0].seq, 3);
        let ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        } = &decisions[0].pruned[0]
        else {
            panic!("expected a tool result");
        };
        assert_eq!(tool_use_id, "toolu_0");
        assert!(content.starts_with(PLACEHOLDER_PREFIX));
        assert!(
            content.contains("`list_free_slots` returned 40 items"),
            "{content}"
        );
    }

    #[test]
    fn short_results_and_recent_turns_are_left_alone() {
        assert!(prune_plan(&window(1), 2, 100).is_empty());
        assert!(prune_plan(&window(40), 3, 100).is_empty());
        assert!(prune_plan(&window(40), 10, 100).is_empty());
        assert_eq!(prune_plan(&window(40), 1, 100).len(), 2);
    }

    #[test]
    fn once_pruned_stays_pruned_and_is_not_pruned_twice() {
        let mut messages = window(40);
        let first = prune_plan(&messages, 2, 100);
        apply(&mut messages, &first);
        assert_eq!(messages[2].pruned, Some(first[0].pruned.clone()));
        assert_eq!(
            messages[2].content[0],
            window(40)[2].content[0],
            "originals are kept"
        );
        // The next step, with a shorter keep, prunes more and never revisits the first.
        let second = prune_plan(&messages, 1, 100);
        assert_eq!(second.iter().map(|d| d.seq).collect::<Vec<_>>(), vec![7]);
        apply(&mut messages, &second);
        assert!(prune_plan(&messages, 1, 100).is_empty());
        assert!(messages[2].pruned.is_some());
    }

    #[test]
    fn placeholders_describe_what_was_left_out() {
        assert!(placeholder(None, "[1,2,3]").contains("the tool returned 3 items, 7 characters"));
        assert!(placeholder(Some("book"), "[1]").contains("1 item,"));
        assert!(placeholder(Some("t"), "a\nb\n\nc").contains("3 items"));
        assert!(placeholder(Some("t"), "plain text").contains("returned 10 characters"));
    }
}
