//! What recall keeps of a closed session to find it by, made from the session's
//! whole text (every message, not an excerpt): the counts of its terms
//! ([`SessionIndex`], one small item a session that every recall reads), and its
//! lines ([`SessionText`], read only for the sessions a recall returns, to show
//! the passages that matched). The compactor writes both when a session closes
//! (with its fact extraction), and a search summary of the session, written by the
//! summary model for finding things again, beside the counts as a field of its own.
//!
//! **Bounds.** A session's counts keep at most [`MAX_INDEX_TERMS`] terms (every id
//! and date, then the most frequent words); its text at most [`MAX_TEXT_CHARS`]
//! characters, each line at most [`MAX_TEXT_LINE_CHARS`] (tool output at most
//! [`MAX_TOOL_OUTPUT_CHARS`]). Both expire with the session's messages and go with
//! the contact's erasure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tokenize::{EXACT, StemmingTokenizer};
use super::{MAX_IDS, extract_ids};
use crate::domain::{ContentBlock, Role, StoredMessage};

/// Most distinct terms a session's counts keep.
pub const MAX_INDEX_TERMS: usize = 2_000;
/// Most characters of a session's text kept for passages.
pub const MAX_TEXT_CHARS: usize = 60_000;
/// Most characters of one line of a session's text.
pub const MAX_TEXT_LINE_CHARS: usize = 600;
/// Most characters of one tool output in a session's text and counts.
pub const MAX_TOOL_OUTPUT_CHARS: usize = 300;
/// Most characters of a search summary kept.
pub const MAX_SEARCH_SUMMARY_CHARS: usize = 2_000;

/// The counts of a session's terms, and what a recall shows of it besides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionIndex {
    /// The session's number.
    pub session: u32,
    /// When its last message was written, seconds since the Unix epoch.
    pub ended_at: i64,
    /// How many messages it had.
    pub messages: u64,
    /// Each term of its whole text and how often it occurs.
    pub terms: BTreeMap<String, u32>,
    /// How many terms its whole text has (its length for the ranking).
    pub length: u32,
    /// Ids and dates found in it, first seen first (at most [`MAX_IDS`]).
    pub ids: Vec<String>,
    /// The search summary the compactor's model wrote of it, once written.
    pub summary: Option<String>,
    /// The summary's terms and counts.
    pub summary_terms: BTreeMap<String, u32>,
    /// How many terms the summary has.
    pub summary_length: u32,
}

/// Who wrote a line of a session's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// The contact.
    Customer,
    /// The business's agent.
    Agent,
    /// A tool the agent called (its input or output).
    Tool,
}

/// One line of a session's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextLine {
    /// The message it comes from.
    pub seq: u64,
    /// Who wrote it.
    pub speaker: Speaker,
    /// When, seconds since the Unix epoch.
    pub at: i64,
    /// What was written, on one line.
    pub text: String,
}

/// A session's text, line by line, for the passages a recall shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionText {
    /// The session's number.
    pub session: u32,
    /// Its lines, in order (at most [`MAX_TEXT_CHARS`] in all).
    pub lines: Vec<TextLine>,
}

/// The lines of a session's messages, whole: the contact's and the agent's text,
/// each tool call with its input, each tool's output (cut to
/// [`MAX_TOOL_OUTPUT_CHARS`]; failures left out).
pub fn lines_of(messages: &[StoredMessage]) -> Vec<TextLine> {
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    let mut lines = Vec::new();
    for message in messages {
        let line = |speaker, text: String| TextLine {
            seq: message.seq,
            speaker,
            at: message.created_at,
            text: crate::text::one_line(text.trim()),
        };
        for block in &message.content {
            match block {
                ContentBlock::Text { text } if !text.trim().is_empty() => {
                    let speaker = match message.role {
                        Role::User => Speaker::Customer,
                        Role::Assistant => Speaker::Agent,
                    };
                    lines.push(line(speaker, text.clone()));
                }
                ContentBlock::ToolUse { id, name, input } => {
                    names.insert(id, name);
                    lines.push(line(Speaker::Tool, format!("{name} {input}")));
                }
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error: false,
                } => {
                    let name = names.get(tool_use_id.as_str()).copied().unwrap_or("tool");
                    let output = cut(content, MAX_TOOL_OUTPUT_CHARS);
                    lines.push(line(Speaker::Tool, format!("{name} returned {output}")));
                }
                _ => {}
            }
        }
    }
    lines
}

/// The index and the text of a closed session from its messages (oldest first),
/// without a search summary yet.
pub fn index_session(
    session: u32,
    messages: &[StoredMessage],
    tokenizer: &StemmingTokenizer,
) -> (SessionIndex, SessionText) {
    let lines = lines_of(messages);
    let mut terms: BTreeMap<String, u32> = BTreeMap::new();
    let mut ids = Vec::new();
    for line in &lines {
        for term in tokenizer.terms(&line.text) {
            *terms.entry(term).or_default() += 1;
        }
        if ids.len() < MAX_IDS {
            extract_ids(&line.text, &mut ids);
        }
    }
    let length = terms.values().sum();
    let index = SessionIndex {
        session,
        ended_at: messages.last().map_or(0, |m| m.created_at),
        messages: messages.len() as u64,
        terms: bounded(terms),
        length,
        ids,
        ..SessionIndex::default()
    };
    let shown = lines
        .into_iter()
        .map(|line| TextLine {
            text: cut(&line.text, MAX_TEXT_LINE_CHARS),
            ..line
        })
        .collect();
    (
        index,
        SessionText {
            session,
            lines: within(shown, MAX_TEXT_CHARS),
        },
    )
}

/// `index` with its search summary (cut to [`MAX_SEARCH_SUMMARY_CHARS`]) and the
/// summary's terms.
pub fn with_summary(
    index: SessionIndex,
    summary: &str,
    tokenizer: &StemmingTokenizer,
) -> SessionIndex {
    let summary = cut(summary.trim(), MAX_SEARCH_SUMMARY_CHARS);
    let mut terms: BTreeMap<String, u32> = BTreeMap::new();
    for term in tokenizer.terms(&summary) {
        *terms.entry(term).or_default() += 1;
    }
    SessionIndex {
        summary_length: terms.values().sum(),
        summary_terms: bounded(terms),
        summary: (!summary.is_empty()).then_some(summary),
        ..index
    }
}

/// At most [`MAX_INDEX_TERMS`] terms: every exact one (ids and dates), then the
/// most frequent words, ties by the term's order.
fn bounded(terms: BTreeMap<String, u32>) -> BTreeMap<String, u32> {
    if terms.len() <= MAX_INDEX_TERMS {
        return terms;
    }
    let mut ranked: Vec<(String, u32)> = terms.into_iter().collect();
    ranked.sort_by(|(a, x), (b, y)| {
        b.starts_with(EXACT)
            .cmp(&a.starts_with(EXACT))
            .then(y.cmp(x))
            .then(a.cmp(b))
    });
    ranked.truncate(MAX_INDEX_TERMS);
    ranked.into_iter().collect()
}

/// The first lines of `lines` that fit `max` characters in all.
fn within(lines: Vec<TextLine>, max: usize) -> Vec<TextLine> {
    let mut left = max;
    lines
        .into_iter()
        .take_while(|line| {
            let chars = line.text.chars().count();
            let fits = chars <= left;
            left = left.saturating_sub(chars);
            fits
        })
        .collect()
}

/// `text` cut to `max` characters, its end marked.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

/// A term count map as one string, `term:count` separated by spaces (terms hold
/// no space and no colon): what an index item stores.
pub fn encode_terms(terms: &BTreeMap<String, u32>) -> String {
    let mut out = String::new();
    for (term, count) in terms {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(term);
        out.push(':');
        out.push_str(&count.to_string());
    }
    out
}

/// [`encode_terms`]'s string read back; `None` when it is not one.
pub fn decode_terms(text: &str) -> Option<BTreeMap<String, u32>> {
    text.split(' ')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (term, count) = pair.rsplit_once(':')?;
            Some((term.to_owned(), count.parse().ok()?))
        })
        .collect()
}
