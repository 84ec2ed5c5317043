//! What the Messages API accepts back of what it sends: one rule for text blocks,
//! shared by the answer's normalisation (before a round is stored or shown), the
//! requests built from stored messages (so an answer stored before this rule
//! existed is sent as the API accepts it), and the validator that checks every
//! request as the API does.
//!
//! The API answers blocks it refuses when they are sent back: an empty text block
//! beside a `tool_use` (`[{"type":"text","text":""}, {"type":"tool_use",…}]`),
//! and a final answer whose only text is whitespace. Measured against the real API
//! (2026-07, experientiallabs/experiential pull request #804; `docs/model-answers.md`
//! has the table): an empty text block is always refused ("text content blocks must
//! be non-empty"); a whitespace-only text block is refused only when its message
//! holds nothing but such blocks ("text content blocks must contain non-whitespace
//! text"), and accepted beside other text or a tool call; an assistant message may
//! be empty, a user message may not. Only what the API refuses is dropped: a
//! `"\n\n"` before a tool call is kept, as the model sent it.
//!
//! (`docs/DESIGN.md`: "Model answers as they come".)

use crate::domain::ContentBlock;

/// Why the API refuses a text block sent back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRefusal {
    /// `""`: "text content blocks must be non-empty".
    Empty,
    /// Only whitespace, in a message holding nothing else: "text content blocks
    /// must contain non-whitespace text".
    Whitespace,
}

impl TextRefusal {
    /// The API's text for it.
    pub fn api_text(self) -> &'static str {
        match self {
            TextRefusal::Empty => "text content blocks must be non-empty",
            TextRefusal::Whitespace => "text content blocks must contain non-whitespace text",
        }
    }
}

/// A text block that is empty or holds only whitespace.
fn blank(block: &ContentBlock) -> bool {
    matches!(block, ContentBlock::Text { text } if text.trim().is_empty())
}

/// Whether a message's blocks hold anything besides blank text blocks (a text with
/// something to read, a tool call or result, thinking). Thinking beside whitespace
/// text alone is unmeasured; it is counted as something else, as a tool call is.
fn has_substance<'a>(blocks: impl IntoIterator<Item = &'a ContentBlock>) -> bool {
    blocks.into_iter().any(|block| !blank(block))
}

/// The first text block of one message's `blocks` (after the API merged
/// consecutive messages of one role) that the API refuses, with its position and
/// why; `None` when it refuses none.
pub fn refused_text<'a, I>(blocks: I) -> Option<(usize, TextRefusal)>
where
    I: IntoIterator<Item = &'a ContentBlock>,
    I::IntoIter: Clone,
{
    let blocks = blocks.into_iter();
    let empty = blocks
        .clone()
        .position(|block| matches!(block, ContentBlock::Text { text } if text.is_empty()));
    if let Some(position) = empty {
        // An empty block is named first, wherever it is (as the stand-in's rules
        // do; which the API names first in a message of both is unmeasured).
        return Some((position, TextRefusal::Empty));
    }
    if has_substance(blocks.clone()) {
        return None;
    }
    blocks
        .enumerate()
        .find_map(|(position, block)| blank(block).then_some((position, TextRefusal::Whitespace)))
}

/// One message's `blocks` without the text blocks the API would refuse back:
/// every empty one, and the whitespace-only ones of a message holding nothing else
/// (which leaves it empty). Everything the API accepts stays as it came.
pub fn sendable(blocks: Vec<ContentBlock>) -> Vec<ContentBlock> {
    if refused_text(&blocks).is_none() {
        return blocks;
    }
    let substance = has_substance(&blocks);
    blocks
        .into_iter()
        .filter(|block| match block {
            ContentBlock::Text { text } if text.is_empty() => false,
            ContentBlock::Text { .. } if blank(block) => substance,
            _ => true,
        })
        .collect()
}

/// Whether an answer holds something to act on: a tool call, or text with
/// something to read. An answer without either (nothing, thinking alone, or text
/// that is only whitespace) is the empty answer, whatever its blocks.
pub fn readable(blocks: &[ContentBlock]) -> bool {
    blocks.iter().any(|block| match block {
        ContentBlock::ToolUse { .. } => true,
        ContentBlock::Text { text } => !text.trim().is_empty(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(t: &str) -> ContentBlock {
        ContentBlock::text(t)
    }

    fn call() -> ContentBlock {
        ContentBlock::ToolUse {
            id: "toolu_1".into(),
            name: "book_slot".into(),
            input: json!({}),
        }
    }

    fn thinking() -> ContentBlock {
        ContentBlock::Thinking {
            thinking: "hm".into(),
            signature: "sig".into(),
        }
    }

    #[test]
    fn each_measured_shape_is_refused_or_accepted_as_the_api_does() {
        use TextRefusal::{Empty, Whitespace};
        type Case = (Vec<ContentBlock>, Option<(usize, TextRefusal)>);
        let cases: Vec<Case> = vec![
            (vec![text(""), call()], Some((0, Empty))),
            (vec![text("\n\n"), call()], None),
            (vec![text("")], Some((0, Empty))),
            (vec![text(" ")], Some((0, Whitespace))),
            (vec![text(" "), text("ok")], None),
            (vec![], None),
            (vec![text("hi"), text(" ")], None),
            (vec![text(""), text("x")], Some((0, Empty))),
            (vec![call(), text("")], Some((1, Empty))),
            (vec![text(" "), text("\t")], Some((0, Whitespace))),
            (vec![text(" "), text("")], Some((1, Empty))),
            (vec![thinking(), text(" ")], None),
        ];
        for (blocks, refused) in cases {
            assert_eq!(refused_text(&blocks), refused, "{blocks:?}");
        }
    }

    #[test]
    fn only_what_the_api_refuses_is_dropped() {
        assert_eq!(sendable(vec![text(""), call()]), vec![call()]);
        assert_eq!(
            sendable(vec![text("\n\n"), call()]),
            vec![text("\n\n"), call()]
        );
        assert_eq!(sendable(vec![text(" ")]), Vec::<ContentBlock>::new());
        assert_eq!(
            sendable(vec![text(" "), text("")]),
            Vec::<ContentBlock>::new()
        );
        assert_eq!(
            sendable(vec![text(""), text(" "), text("ok")]),
            vec![text(" "), text("ok")]
        );
        assert_eq!(
            sendable(vec![thinking(), text("")]),
            vec![thinking()],
            "thinking is kept whole"
        );
        let untouched = vec![text("Hello"), call(), text("then this")];
        assert_eq!(sendable(untouched.clone()), untouched);
    }

    #[test]
    fn whatever_is_dropped_the_rest_is_accepted() {
        let shapes = [
            vec![text(""), text(" "), call(), text("")],
            vec![text(" "), text("\n")],
            vec![thinking(), text(""), text("  ")],
            vec![text(""), text("a")],
        ];
        for blocks in shapes {
            let kept = sendable(blocks.clone());
            assert_eq!(refused_text(&kept), None, "{blocks:?} → {kept:?}");
        }
    }

    #[test]
    fn an_answer_without_a_call_or_text_to_read_is_empty() {
        assert!(readable(&[text("\n\n"), call()]));
        assert!(readable(&[text("ok")]));
        assert!(!readable(&[text(" ")]));
        assert!(!readable(&[thinking(), text("\n")]));
        assert!(!readable(&[]));
    }
}
