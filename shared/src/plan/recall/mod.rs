//! Recall over a contact's earlier sessions, without a vector database: every
//! closed session within retention is findable by any word said in it.
//!
//! Two things are kept of a closed session:
//!
//! - **its index** ([`index`]): the counts of the terms of its whole text (every
//!   message, tool calls and outputs included), its ids and dates, and a search
//!   summary the summary model writes for finding it again; and **its text**, line
//!   by line, for the passages a recall shows ([`passages`]). The compactor makes
//!   both when the next message closes the session (an `index` job), and they
//!   expire with the session's messages;
//! - **its record** ([`SessionRecord`], in the session's archive): the summary its
//!   last step left, an excerpt of the messages after it ([`record_of`]) and its
//!   ids, made by code in the round that opens the next session, for the digest of
//!   the last session ([`digest`]) and the list of sessions.
//!
//! **Ranking** ([`rank`]): Okapi BM25 over each session's whole text, plus the same
//! over its search summary as a field of its own, with this module's tokenizer
//! ([`tokenize`]: Portuguese and English stems, accents folded, ids and dates
//! whole); ties go to the newer session. A recall reads every index of the contact
//! in one query and the text of the sessions it returns in one batch read.
//!
//! (`docs/DESIGN.md`: "Recall over earlier sessions".)

pub mod index;
pub mod passages;
pub mod rank;
pub mod tokenize;

use serde::{Deserialize, Serialize};

use crate::domain::{ContentBlock, Role, StoredMessage};

/// Most records the list of sessions returns in one answer (a contact keeps one
/// for every session within retention).
pub const MAX_RECORDS: u32 = 20;
/// Longest excerpt of a session's messages kept in its record, in characters.
pub const MAX_EXCERPT_CHARS: usize = 1_500;
/// Longest line of one message in an excerpt, in characters.
pub const MAX_LINE_CHARS: usize = 300;
/// Most ids a record keeps.
pub const MAX_IDS: usize = 12;
/// Longest id kept, in characters.
pub const MAX_ID_CHARS: usize = 40;
/// Longest query, in characters (the tool's and the route's).
pub const MAX_QUERY_CHARS: usize = 500;
/// Sessions the `recall` tool returns.
pub const TOOL_RESULTS: usize = 3;
/// Longest digest of the last session, in characters.
pub const MAX_DIGEST_CHARS: usize = 600;
/// The built-in tool's name.
pub const TOOL_NAME: &str = "recall";

/// What the archive of a closed session keeps for the digest and the list of
/// sessions (recall itself ranks the session's [`index::SessionIndex`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// The session's number.
    pub session: u32,
    /// The summary the session's last step left, if a step ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The messages after the summary, as `customer:`/`agent:` lines, cut to
    /// [`MAX_EXCERPT_CHARS`] (its start and its end kept).
    #[serde(default)]
    pub excerpt: String,
    /// Booking numbers, order ids and dates found in the session, first seen first.
    #[serde(default)]
    pub ids: Vec<String>,
    /// How many messages the session had.
    pub messages: u64,
    /// When its last round was, seconds since the Unix epoch.
    pub ended_at: i64,
}

/// The record of a closed session from what a turn read of it: its summary and the
/// messages after it (`tail`, oldest first).
pub fn record_of(
    session: u32,
    summary: Option<&str>,
    tail: &[StoredMessage],
    messages: u64,
    ended_at: i64,
) -> SessionRecord {
    let summary = summary
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let lines: Vec<String> = tail.iter().filter_map(line_of).collect();
    let mut ids = Vec::new();
    if let Some(summary) = &summary {
        extract_ids(summary, &mut ids);
    }
    for message in tail {
        for block in &message.content {
            match block {
                ContentBlock::Text { text } => extract_ids(text, &mut ids),
                ContentBlock::ToolUse { input, .. } => extract_ids(&input.to_string(), &mut ids),
                ContentBlock::ToolResult {
                    content, is_error, ..
                } if !is_error => extract_ids(content, &mut ids),
                _ => {}
            }
        }
    }
    SessionRecord {
        session,
        summary,
        excerpt: cut_middle(&lines.join("\n"), MAX_EXCERPT_CHARS),
        ids,
        messages,
        ended_at,
    }
}

/// A message's text as one excerpt line (`None` for tool results and thinking).
fn line_of(message: &StoredMessage) -> Option<String> {
    let text: Vec<&str> = message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text } => Some(text.trim()),
            _ => None,
        })
        .filter(|text| !text.is_empty())
        .collect();
    if text.is_empty() {
        return None;
    }
    let who = match message.role {
        Role::User => "customer",
        Role::Assistant => "agent",
    };
    let line = crate::text::one_line(&text.join(" "));
    Some(format!("{who}: {}", cut_end(&line, MAX_LINE_CHARS)))
}

/// `text` cut to `max` characters, its end marked; the cut falls between words.
fn cut_end(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    format!("{}…", head_words(text, max.saturating_sub(1)))
}

/// `text` cut to `max` characters keeping its start and its end: what the customer
/// came for and how it ended. The cuts fall between words, so no word (an id, a
/// code) is kept in part.
fn cut_middle(text: &str, max: usize) -> String {
    let chars = text.chars().count();
    if chars <= max {
        return text.to_owned();
    }
    let marker = "\n…\n";
    let half = (max - marker.chars().count()) / 2;
    format!(
        "{}{marker}{}",
        head_words(text, half),
        tail_words(text, half)
    )
}

fn in_word(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '-' | '/' | '_')
}

/// Longest part of a word a cut backs off: a longer word is no id, and is cut.
const MAX_BACK_OFF: usize = 40;

/// At most the first `n` characters of `text`, ending where a word ends (a word
/// longer than [`MAX_BACK_OFF`] is cut).
fn head_words(text: &str, n: usize) -> &str {
    let cut = text.char_indices().nth(n).map_or(text.len(), |(at, _)| at);
    let (head, rest) = text.split_at(cut);
    let splits_a_word = rest.starts_with(in_word) && head.ends_with(in_word);
    match head.rfind(|c: char| !in_word(c)) {
        Some(at) if splits_a_word && head[at..].chars().count() <= MAX_BACK_OFF => &head[..at],
        _ => head,
    }
}

/// At most the last `n` characters of `text`, starting where a word starts.
fn tail_words(text: &str, n: usize) -> &str {
    let chars = text.chars().count();
    let cut = text
        .char_indices()
        .nth(chars.saturating_sub(n))
        .map_or(text.len(), |(at, _)| at);
    let (before, tail) = text.split_at(cut);
    let splits_a_word = before.ends_with(in_word) && tail.starts_with(in_word);
    match tail.find(|c: char| !in_word(c)) {
        Some(at) if splits_a_word && tail[..at].chars().count() <= MAX_BACK_OFF => &tail[at..],
        _ => tail,
    }
}

/// Adds to `ids` (up to [`MAX_IDS`], no repeats) the tokens of `text` worth
/// finding again: dates (`2026-03-14`, `14/03`, `14/03/2026`) and codes that mix
/// letters and digits (`BK-1A2B3C`, `PED123`). Plain numbers (prices, phone
/// numbers, documents) and times are left out: too common to find anything by, and
/// a phone number or a document is not what a record should index.
pub fn extract_ids(text: &str, ids: &mut Vec<String>) {
    let tokens = text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '/' | '_')));
    for token in tokens {
        if ids.len() >= MAX_IDS {
            return;
        }
        let token = token.trim_matches(|c: char| matches!(c, '-' | '/' | '_'));
        let chars = token.chars().count();
        if !(4..=MAX_ID_CHARS).contains(&chars) || !(is_date(token) || is_code(token)) {
            continue;
        }
        if !ids.iter().any(|seen| seen == token) {
            ids.push(token.to_owned());
        }
    }
}

/// `2026-03-14`, `14/03` or `14/03/2026`.
pub(crate) fn is_date(token: &str) -> bool {
    let digits_in = |part: &str, lens: &[usize]| {
        lens.contains(&part.len()) && part.chars().all(|c| c.is_ascii_digit())
    };
    let iso: Vec<&str> = token.split('-').collect();
    if iso.len() == 3
        && digits_in(iso[0], &[4])
        && digits_in(iso[1], &[2])
        && digits_in(iso[2], &[2])
    {
        return true;
    }
    let slashed: Vec<&str> = token.split('/').collect();
    matches!(slashed.len(), 2 | 3)
        && digits_in(slashed[0], &[1, 2])
        && digits_in(slashed[1], &[1, 2])
        && slashed.get(2).is_none_or(|year| digits_in(year, &[2, 4]))
}

/// Letters and digits together, at least two of each kind: `BK-1A2B3C`.
pub(crate) fn is_code(token: &str) -> bool {
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    let digits = token.chars().filter(char::is_ascii_digit).count();
    letters >= 2 && digits >= 2
}

/// One session a search found, or one of the list of sessions: its record, and
/// with a query its score, search summary and passages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionHit {
    /// The session's record (its archive's; from its index when the archive is
    /// gone).
    #[serde(flatten)]
    pub record: SessionRecord,
    /// Its BM25 score for the query (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// The search summary the summary model wrote of the session (with a query,
    /// once written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_summary: Option<String>,
    /// The passages that matched the query, dated (with a query).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passages: Vec<passages::Passage>,
}

/// The one-paragraph digest of a session (the tenant's `recall_digest`): when it
/// ended, how long it was, its summary or the start of its excerpt, its ids; at
/// most [`MAX_DIGEST_CHARS`]. The same record always gives the same paragraph, so
/// every request of the new session carries the same contact context.
pub fn digest(record: &SessionRecord) -> String {
    let body = record
        .summary
        .clone()
        .unwrap_or_else(|| record.excerpt.replace('\n', " / "));
    let mut text = format!(
        "Session {} ended {} after {} messages. {}",
        record.session,
        date_of(record.ended_at),
        record.messages,
        crate::text::one_line(&body)
    );
    if !record.ids.is_empty() {
        text.push_str(&format!(" Ids: {}.", record.ids.join(", ")));
    }
    cut_end(&text, MAX_DIGEST_CHARS)
}

/// A Unix time's UTC date, `YYYY-MM-DD` (Howard Hinnant's `civil_from_days`).
pub fn date_of(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A query checked: non-blank and at most [`MAX_QUERY_CHARS`].
pub fn check_query(query: &str) -> Result<&str, String> {
    if query.trim().is_empty() {
        return Err("the query must contain non-whitespace characters".into());
    }
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(format!(
            "the query has {chars} characters; the limit is {MAX_QUERY_CHARS}"
        ));
    }
    Ok(query)
}

#[cfg(test)]
mod tests;
