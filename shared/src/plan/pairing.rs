//! The one tool-pairing rule, as the Messages API has it: every `tool_use` id
//! unique, every `tool_use` answered by a `tool_result` first in the next message,
//! every `tool_result` answering a `tool_use` of the message before, once. The
//! request validator ([`crate::plan::validate`]) and the recorded-round parser
//! (`ask/rounds.rs`) both check it here, each wording its own errors from the
//! [`Unpaired`] found.

use std::collections::{BTreeSet, HashSet};

use crate::domain::{ContentBlock, Role};

/// The first way a conversation's tool calls and results fail to pair. Indexes
/// count the messages given; positions count the blocks of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpaired<'a> {
    /// A `tool_use` id already used earlier in the conversation.
    DuplicateUse {
        /// The message holding the second use.
        index: usize,
        /// The id.
        id: &'a str,
    },
    /// A user message holds `tool_result`s but the message before holds no
    /// `tool_use` (or is not the assistant's).
    ResultsWithoutUses {
        /// The user message.
        index: usize,
        /// Its first `tool_result`'s position.
        position: usize,
        /// What that result answers.
        id: &'a str,
    },
    /// A `tool_result` answering no `tool_use` of the message before.
    Unexpected {
        /// The user message.
        index: usize,
        /// The result's position.
        position: usize,
        /// What it answers.
        id: &'a str,
    },
    /// A `tool_use` answered a second time in the same message.
    AnsweredTwice {
        /// The user message.
        index: usize,
        /// The second result's position.
        position: usize,
        /// The id.
        id: &'a str,
    },
    /// `tool_use` ids of an assistant message that the leading `tool_result`s of the
    /// next message do not answer (all of them when it is the last message).
    Unanswered {
        /// The assistant message.
        index: usize,
        /// The ids, in the order the message holds them.
        ids: Vec<&'a str>,
        /// No message follows.
        last: bool,
    },
}

/// Checks the tool pairing of `messages` (each a role and its blocks, in order):
/// the first [`Unpaired`] found, message by message, or `Ok`.
pub fn check_pairs<'a>(messages: &[(Role, Vec<&'a ContentBlock>)]) -> Result<(), Unpaired<'a>> {
    let mut seen = HashSet::new();
    for (index, (role, blocks)) in messages.iter().enumerate() {
        if let Some(id) = uses(blocks).find(|id| !seen.insert(*id)) {
            return Err(Unpaired::DuplicateUse { index, id });
        }
        if *role == Role::User {
            let previous: BTreeSet<&str> = match index.checked_sub(1).map(|i| &messages[i]) {
                Some((Role::Assistant, blocks)) => uses(blocks).collect(),
                _ => BTreeSet::new(),
            };
            let mut answered = BTreeSet::new();
            for (position, block) in blocks.iter().enumerate() {
                let ContentBlock::ToolResult { tool_use_id, .. } = block else {
                    continue;
                };
                let id = tool_use_id.as_str();
                if previous.is_empty() {
                    return Err(Unpaired::ResultsWithoutUses {
                        index,
                        position,
                        id,
                    });
                }
                if !previous.contains(id) {
                    return Err(Unpaired::Unexpected {
                        index,
                        position,
                        id,
                    });
                }
                if !answered.insert(id) {
                    return Err(Unpaired::AnsweredTwice {
                        index,
                        position,
                        id,
                    });
                }
            }
        }
        if *role == Role::Assistant {
            let next = messages.get(index + 1);
            // Results must come first in the next message: only the leading run of
            // tool_result blocks counts.
            let answered: BTreeSet<&str> = next
                .map(|(_, next)| {
                    next.iter()
                        .map_while(|block| match block {
                            ContentBlock::ToolResult { tool_use_id, .. } => {
                                Some(tool_use_id.as_str())
                            }
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            let ids: Vec<&str> = uses(blocks).filter(|id| !answered.contains(id)).collect();
            if !ids.is_empty() {
                return Err(Unpaired::Unanswered {
                    index,
                    ids,
                    last: next.is_none(),
                });
            }
        }
    }
    Ok(())
}

fn uses<'a>(blocks: &[&'a ContentBlock]) -> impl Iterator<Item = &'a str> {
    blocks.iter().filter_map(|block| match block {
        ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(messages: &[(Role, Vec<ContentBlock>)]) -> Result<(), Unpaired<'_>> {
        let pairs: Vec<(Role, Vec<&ContentBlock>)> = messages
            .iter()
            .map(|(role, blocks)| (*role, blocks.iter().collect()))
            .collect();
        check_pairs(&pairs)
    }

    fn call(id: &str) -> ContentBlock {
        ContentBlock::tool_use(id, "t", json!({}))
    }

    fn result(id: &str) -> ContentBlock {
        ContentBlock::tool_result(id, "ok")
    }

    #[test]
    fn each_way_of_failing_to_pair_is_found_where_it_is() {
        use Role::{Assistant, User};
        let text = || ContentBlock::text("hi");
        assert_eq!(
            check(&[
                (User, vec![text()]),
                (Assistant, vec![call("a"), call("b")]),
                (User, vec![result("b"), result("a")]),
                (Assistant, vec![text()]),
            ]),
            Ok(())
        );
        assert_eq!(
            check(&[
                (Assistant, vec![call("a")]),
                (User, vec![result("a")]),
                (Assistant, vec![call("a")]),
            ]),
            Err(Unpaired::DuplicateUse { index: 2, id: "a" })
        );
        assert_eq!(
            check(&[(Assistant, vec![text()]), (User, vec![text(), result("a")])]),
            Err(Unpaired::ResultsWithoutUses {
                index: 1,
                position: 1,
                id: "a"
            })
        );
        assert_eq!(
            check(&[
                (Assistant, vec![call("a")]),
                (User, vec![result("a"), result("z")])
            ]),
            Err(Unpaired::Unexpected {
                index: 1,
                position: 1,
                id: "z"
            })
        );
        assert_eq!(
            check(&[
                (Assistant, vec![call("a")]),
                (User, vec![result("a"), result("a")])
            ]),
            Err(Unpaired::AnsweredTwice {
                index: 1,
                position: 1,
                id: "a"
            })
        );
        // Only the leading results answer: one after text does not.
        assert_eq!(
            check(&[
                (Assistant, vec![call("a"), call("b")]),
                (User, vec![result("a"), text(), result("b")]),
            ]),
            Err(Unpaired::Unanswered {
                index: 0,
                ids: vec!["b"],
                last: false
            })
        );
        assert_eq!(
            check(&[(User, vec![text()]), (Assistant, vec![call("a")])]),
            Err(Unpaired::Unanswered {
                index: 1,
                ids: vec!["a"],
                last: true
            })
        );
    }
}
