//! Reading a request as the simulated model does: what it is for (a round's, or a
//! summary's, a fact extraction's or a recall summary's, by the marker its system
//! prompt opens with), whose round it is (the tokens its user text carries) and its
//! size.

use degrau::domain::{ContentBlock, Role};
use degrau::plan::request::ModelRequest;

/// A contact's token for its `n`th message.
pub fn token(contact: usize, n: u64) -> String {
    format!("tok{contact}x{n}")
}

/// Every token in `text`, in order.
pub fn tokens(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find("tok") {
        let start = at + offset;
        let mut end = start + 3;
        let digits = |from: usize| {
            let mut to = from;
            while to < bytes.len() && bytes[to].is_ascii_digit() {
                to += 1;
            }
            to
        };
        let contact_end = digits(end);
        if contact_end > end && bytes.get(contact_end) == Some(&b'x') {
            let n_end = digits(contact_end + 1);
            if n_end > contact_end + 1 {
                end = n_end;
                found.push(text[start..end].to_owned());
            }
        }
        at = end.max(start + 3);
    }
    found
}

/// The contact a token belongs to.
pub fn token_contact(token: &str) -> Option<usize> {
    token.strip_prefix("tok")?.split('x').next()?.parse().ok()
}

/// The marker the first line of a summary request's system prompt carries.
const SUMMARY_MARKER: &str = "degrau:summarize";
/// The marker of a fact-extraction request.
const FACTS_MARKER: &str = "degrau:extract-facts";

/// The marker of a closed session's summary for recall.
const SEARCH_MARKER: &str = "degrau:search-summary";

/// What a request is for, by the marker its system prompt's first block opens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A round's (no marker): the only kind that answers a customer.
    Round,
    /// A compaction step's summary (`degrau:summarize`).
    Summary,
    /// A fact extraction (`degrau:extract-facts`).
    Facts,
    /// A closed session's summary for recall (`degrau:search-summary`).
    Search,
}

impl Kind {
    /// The compactor's own calls (a summary, a fact extraction): no window is
    /// tracked for them and their answers come without a quirk.
    pub(super) fn compacting(self) -> bool {
        matches!(self, Kind::Summary | Kind::Facts)
    }
}

/// What `request` is for.
pub(super) fn kind(request: &ModelRequest) -> Kind {
    let system = request
        .system
        .first()
        .map_or("", |block| block.text.as_str());
    if system.starts_with(SUMMARY_MARKER) {
        Kind::Summary
    } else if system.starts_with(FACTS_MARKER) {
        Kind::Facts
    } else if system.starts_with(SEARCH_MARKER) {
        Kind::Search
    } else {
        Kind::Round
    }
}

/// A request's size in tokens as the simulated API counts it: its JSON's
/// characters over four.
pub fn estimate(request: &ModelRequest) -> u64 {
    serde_json::to_string(request).map_or(0, |json| json.len() as u64 / 4)
}

/// A JSON value's size in tokens, as [`estimate`] counts.
pub fn estimate_json(value: &serde_json::Value) -> u64 {
    value.to_string().len() as u64 / 4
}

/// The token of the round's own message: the request's newest user text that
/// carries one.
pub(super) fn round_token(request: &ModelRequest) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .filter(|message| message.role == Role::User)
        .flat_map(|message| message.content.iter())
        .find_map(|block| match &block.block {
            ContentBlock::Text { text } => tokens(text).first().cloned(),
            _ => None,
        })
}

/// The request's user text, joined.
pub(super) fn user_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .flat_map(|message| message.content.iter())
        .filter_map(|block| match &block.block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_found_wherever_they_stand() {
        assert_eq!(
            tokens("tok3x17 said tok12x1, and tokx9 tok4x is not one; stok5x2"),
            ["tok3x17", "tok12x1", "tok5x2"]
        );
        assert_eq!(token_contact("tok12x1"), Some(12));
        assert_eq!(token(4, 9), "tok4x9");
    }
}
