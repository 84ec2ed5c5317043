//! Recall over a contact's earlier sessions, without a vector database.
//!
//! When the next message closes a session, the round that opens the new one keeps
//! a short [`SessionRecord`] of the closed one in the session's archive (the store's
//! `SessionArchive`): the summary a step left (when one ran), an excerpt of the
//! messages after it made by code ([`record_of`]), the ids worth finding again
//! (booking numbers, dates: [`extract_ids`]), the number of messages and when it
//! ended. No model call makes it: the record is ready in the same transaction that
//! opens the new session, and a session too short to have stepped still has its
//! words.
//!
//! **Bounds.** A record holds at most [`MAX_EXCERPT_CHARS`] of excerpt and
//! [`MAX_IDS`] ids of [`MAX_ID_CHARS`] each, beside the step's summary (itself
//! bounded by the step's `max_tokens`). A contact keeps at most [`MAX_RECORDS`]:
//! the round that archives session `s` deletes the archive of session
//! `s - MAX_RECORDS` in the same transaction (the oldest is dropped, not merged),
//! so a read of a contact's records is one query of at most [`MAX_RECORDS`] items.
//! Records expire with the transcript and go with the contact's erasure.
//!
//! **Ranking** ([`rank`]): BM25 (the `bm25` crate's scorer) over each record's
//! summary, excerpt and ids, with this module's tokenizer: lower case, a few stop
//! words out, each word stemmed by the Snowball stemmers for Portuguese and for
//! English (`rust-stemmers`; both stems are indexed, so either language's word
//! forms meet), accents folded after stemming. Ties go to the newer session.
//!
//! (`docs/DESIGN.md`: "Recall over earlier sessions".)

use std::collections::BTreeSet;

use bm25::{Document, SearchEngineBuilder, Tokenizer};
use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use crate::domain::{ContentBlock, Role, StoredMessage};

/// Most records a contact keeps: archiving session `s` drops session
/// `s - MAX_RECORDS`'s.
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
/// Records the `recall` tool returns.
pub const TOOL_RESULTS: usize = 3;
/// Longest digest of the last session, in characters.
pub const MAX_DIGEST_CHARS: usize = 600;
/// The built-in tool's name.
pub const TOOL_NAME: &str = "recall";

/// What degrau keeps of a closed session to find it again.
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
fn is_date(token: &str) -> bool {
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
fn is_code(token: &str) -> bool {
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    let digits = token.chars().filter(char::is_ascii_digit).count();
    letters >= 2 && digits >= 2
}

/// Words too common to rank by, in Portuguese and English.
const STOP_WORDS: &[&str] = &[
    "a", "o", "as", "os", "um", "uma", "de", "do", "da", "dos", "das", "e", "em", "no", "na",
    "nos", "nas", "que", "se", "por", "para", "com", "eu", "me", "meu", "minha", "voce", "você",
    "foi", "é", "the", "an", "and", "or", "of", "to", "in", "on", "at", "for", "is", "was", "it",
    "i", "my", "you", "your", "with", "that", "this", "be",
];

/// The ranking's tokenizer: words (letters and digits) in lower case, stop words
/// out, each replaced by its Portuguese and its English stem (one when they agree),
/// accents folded.
pub struct StemmingTokenizer {
    portuguese: Stemmer,
    english: Stemmer,
}

impl Default for StemmingTokenizer {
    fn default() -> Self {
        StemmingTokenizer {
            portuguese: Stemmer::create(Algorithm::Portuguese),
            english: Stemmer::create(Algorithm::English),
        }
    }
}

impl Tokenizer for StemmingTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in input_text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            if STOP_WORDS.contains(&word.as_str()) {
                continue;
            }
            let portuguese = fold(&self.portuguese.stem(&word));
            let english = fold(&self.english.stem(&word));
            if english != portuguese {
                out.push(english);
            }
            out.push(portuguese);
        }
        out
    }
}

/// `text` without its accents (NFD, combining marks dropped).
fn fold(text: &str) -> String {
    text.nfd().filter(|c| !is_combining_mark(*c)).collect()
}

/// The text a record is ranked by.
fn indexed_text(record: &SessionRecord) -> String {
    let mut text = String::new();
    if let Some(summary) = &record.summary {
        text.push_str(summary);
        text.push('\n');
    }
    text.push_str(&record.excerpt);
    text.push('\n');
    text.push_str(&record.ids.join(" "));
    text
}

/// A record and how well it matched a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<'a> {
    /// The record.
    pub record: &'a SessionRecord,
    /// Its BM25 score (above 0: it shares at least one word with the query).
    pub score: f32,
}

/// The at most `limit` records that best match `query`, best first (ties: the newer
/// session first); only records sharing a word with the query. Pure: the same
/// records and query always rank the same.
pub fn rank<'a>(records: &'a [SessionRecord], query: &str, limit: usize) -> Vec<Ranked<'a>> {
    if records.is_empty() || limit == 0 {
        return Vec::new();
    }
    let documents: Vec<Document<usize>> = records
        .iter()
        .enumerate()
        .map(|(index, record)| Document::new(index, indexed_text(record)))
        .collect();
    let engine =
        SearchEngineBuilder::<usize, u32, StemmingTokenizer>::with_tokenizer_and_documents(
            StemmingTokenizer::default(),
            documents,
        )
        .build();
    let mut ranked: Vec<Ranked<'a>> = engine
        .search(query, None)
        .into_iter()
        .filter(|result| result.score > 0.0)
        .filter_map(|result| {
            records.get(result.document.id).map(|record| Ranked {
                record,
                score: result.score,
            })
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.record.session.cmp(&a.record.session))
    });
    ranked.truncate(limit);
    ranked
}

/// Merges the records read from the store with the session a round is closing
/// right now (not stored until its commit), newest first, each session once.
pub fn with_closing(
    mut stored: Vec<SessionRecord>,
    closing: Option<&SessionRecord>,
) -> Vec<SessionRecord> {
    if let Some(closing) = closing
        && !stored.iter().any(|r| r.session == closing.session)
    {
        stored.push(closing.clone());
    }
    let mut seen = BTreeSet::new();
    stored.retain(|record| seen.insert(record.session));
    stored.sort_by_key(|record| std::cmp::Reverse(record.session));
    stored.truncate(MAX_RECORDS as usize);
    stored
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
