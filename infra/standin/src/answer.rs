//! The stand-in's answers: deterministic heuristics, no model. Every text reply
//! starts with [`MARKER`] so nobody mistakes it for Claude — except the answer to a
//! fact-extraction request, which must be bare JSON for its parser.
//!
//! In order of precedence (a forced `tool_choice` comes first, see [`answer`]):
//! 1. `system[0]` holds `degrau:summarize` → a third-person summary of the
//!    conversation handed in the last user message, every identifier kept;
//! 2. `system[0]` holds `degrau:extract-facts` → `{"facts": []}`;
//! 3. the last user turn holds `tool_result` blocks → a short summary of them;
//! 4. "what did I say first?" → the first user text the request shows (proof that
//!    the conversation was rebuilt from storage);
//! 5. the demo tools are defined and the text asks about availability or a
//!    booking → `tool_use` (two dates → two parallel calls);
//! 6. otherwise an echo, with what degrau remembers from `system[1]`.

use std::collections::HashMap;

use degrau::domain::{ContentBlock, Role};
use degrau::model::StopReason;
use degrau::request::ModelRequest;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::parse::ToolChoice;
use crate::thinking::{redacted_data, thinking_block};

/// Opening of every text reply.
pub const MARKER: &str = "[offline stand-in]";
/// Marker in `system[0]` of a summary request.
pub const SUMMARIZE_MARKER: &str = "degrau:summarize";
/// Marker in `system[0]` of a fact-extraction request.
pub const EXTRACT_FACTS_MARKER: &str = "degrau:extract-facts";
/// The demo tool that lists free slots.
pub const LIST_FREE_SLOTS: &str = "list_free_slots";
/// The demo tool that books a slot.
pub const BOOK_SLOT: &str = "book_slot";
/// The day asked about when the text names none.
pub const DEFAULT_DAY: &str = "2026-12-01";
/// Longest summary of tool results.
pub const MAX_RESULTS_REPLY_CHARS: usize = 300;
/// Longest conversation summary.
pub const MAX_SUMMARY_CHARS: usize = 2_000;

/// Words that make the stand-in list free slots (whole words, any case). The
/// benchmark's scripted conversations are checked against these and
/// [`BOOKING_WORDS`] (see [`asks_for_tools`]).
pub const AVAILABILITY_WORDS: &[&str] = &[
    "slot",
    "slots",
    "free",
    "available",
    "availability",
    "horário",
    "horários",
    "horario",
    "horarios",
    "vaga",
    "vagas",
    "disponível",
    "disponíveis",
    "disponivel",
    "disponiveis",
    "agenda",
];
/// Words that make the stand-in book a slot (with a time) or list slots.
pub const BOOKING_WORDS: &[&str] = &[
    "book", "booking", "marcar", "marque", "agendar", "agende", "reservar", "reserve", "reserva",
];
const FIRST_MESSAGE_QUESTIONS: &[&str] = &[
    "what did i say first",
    "what was my first message",
    "o que eu disse primeiro",
    "qual foi minha primeira mensagem",
];

/// What the stand-in answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The reply's blocks.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
}

impl Answer {
    fn text(text: String) -> Self {
        Answer {
            content: vec![ContentBlock::text(text)],
            stop_reason: StopReason::EndTurn,
        }
    }
}

/// Answers a validated request. `id_seed` makes the invented `tool_use` ids
/// deterministic per request yet distinct across the turns of a conversation.
///
/// A forced `tool_choice` (`any`, or `tool` with a name) gets only `tool_use`
/// blocks, like the real API: `{"facts": []}` as the input of a fact-extraction
/// call, `{"summary": …}` for a summary, the demo heuristics' input when they
/// apply, else `{}`.
///
/// With `thinking` enabled the answer starts with a signed `thinking` block, and an
/// answer that calls tools carries a sealed `redacted_thinking` block after it, so a
/// tool loop sends both kinds back ([`crate::thinking`]).
pub fn answer(request: &ModelRequest, choice: &ToolChoice, id_seed: &str) -> Answer {
    let mut answer = plain_answer(request, choice, id_seed);
    if request.thinking.and_then(|t| t.budget()).is_some() {
        let mut thoughts = vec![thinking_block(format!(
            "{MARKER} thinking about: «{}»",
            clip(&last_user_text(request), 80)
        ))];
        if answer.stop_reason == StopReason::ToolUse {
            thoughts.push(ContentBlock::RedactedThinking {
                data: redacted_data(id_seed),
            });
        }
        answer.content.splice(0..0, thoughts);
    }
    answer
}

/// The text of the last user turn (tool results aside).
fn last_user_text(request: &ModelRequest) -> String {
    last_user_turn(request)
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The heuristic answer: a forced tool, a summary, a fact extraction, a tool loop's
/// closing summary, a first-message quote, the demo tools, or an echo, in that order
/// of precedence. Long because the precedence is the point: it reads top to bottom.
fn plain_answer(request: &ModelRequest, choice: &ToolChoice, id_seed: &str) -> Answer {
    let system0 = request.system.first().map_or("", |b| b.text.as_str());
    let last_turn = last_user_turn(request);
    let text = last_turn
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");

    let demo_tools = [LIST_FREE_SLOTS, BOOK_SLOT]
        .iter()
        .all(|name| request.tools.iter().any(|t| t.name == *name));
    let demo_calls = if demo_tools {
        demo_tool_calls(&text)
    } else {
        None
    };
    let forced = match choice {
        ToolChoice::Tool(name) => Some(name.as_str()),
        ToolChoice::Any => Some(
            demo_calls
                .as_ref()
                .and_then(|calls| calls.first())
                .map(|(name, _)| *name)
                .or_else(|| request.tools.first().map(|t| t.name.as_str()))
                .unwrap_or_default(),
        ),
        ToolChoice::Auto | ToolChoice::None => None,
    };
    if let Some(name) = forced {
        let input = if system0.contains(EXTRACT_FACTS_MARKER) {
            json!({"facts": []})
        } else if system0.contains(SUMMARIZE_MARKER) {
            json!({"summary": summarize_conversation(&text)})
        } else {
            demo_calls
                .into_iter()
                .flatten()
                .find(|(called, _)| *called == name)
                .map_or_else(|| json!({}), |(_, input)| input)
        };
        return Answer {
            content: vec![ContentBlock::tool_use(tool_use_id(id_seed, 0), name, input)],
            stop_reason: StopReason::ToolUse,
        };
    }
    if system0.contains(SUMMARIZE_MARKER) {
        return Answer::text(summarize_conversation(&text));
    }
    if system0.contains(EXTRACT_FACTS_MARKER) {
        return Answer::text(r#"{"facts": []}"#.to_owned());
    }
    if last_turn
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
    {
        return Answer::text(summarize_results(request, &last_turn));
    }
    let lower = text.to_lowercase();
    if FIRST_MESSAGE_QUESTIONS.iter().any(|q| lower.contains(q)) {
        let first = first_user_text(request).unwrap_or("");
        return Answer::text(format!(
            "{MARKER} The first thing you said was: «{}». {}",
            clip(first, 200),
            seen_and_remembered(request)
        ));
    }
    if *choice != ToolChoice::None
        && let Some(calls) = demo_calls
    {
        let mut content = vec![ContentBlock::text(format!("{MARKER} Let me check."))];
        for (index, (name, input)) in calls.into_iter().enumerate() {
            content.push(ContentBlock::tool_use(
                tool_use_id(id_seed, index),
                name,
                input,
            ));
        }
        return Answer {
            content,
            stop_reason: StopReason::ToolUse,
        };
    }
    Answer::text(format!(
        "{MARKER} You said: «{}». {}",
        clip(&text, 120),
        seen_and_remembered(request)
    ))
}

/// `toolu_standin_` and 16 hex digits of a hash of the request and the call's place:
/// deterministic, and unique across a conversation because each request extends
/// the one before (a counter would restart with the process and clash with ids
/// already stored).
fn tool_use_id(seed: &str, index: usize) -> String {
    let digest = Sha256::digest(format!("{seed}:{index}").as_bytes());
    format!("toolu_standin_{}", &hex::encode(digest)[..16])
}

/// The blocks of the trailing user messages (the API merges them into one).
fn last_user_turn(request: &ModelRequest) -> Vec<&ContentBlock> {
    let start = request
        .messages
        .iter()
        .rposition(|m| m.role != Role::User)
        .map_or(0, |i| i + 1);
    request.messages[start..]
        .iter()
        .flat_map(|m| m.content.iter().map(|b| &b.block))
        .collect()
}

fn first_user_text(request: &ModelRequest) -> Option<&str> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .find_map(|b| match &b.block {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
}

/// "I can see N earlier messages[, and what degrau remembers: «…»]."
fn seen_and_remembered(request: &ModelRequest) -> String {
    let earlier = request.messages.len().saturating_sub(1);
    let plural = if earlier == 1 { "" } else { "s" };
    let mut out = format!("I can see {earlier} earlier message{plural}");
    if let Some(memory) = request.system.get(1).and_then(|b| remembered(&b.text)) {
        out.push_str(&format!(
            ", and what degrau remembers: «{}»",
            clip(&memory, 200)
        ));
    }
    out.push('.');
    out
}

/// The facts and summary inside the `<contact_context>` block, when there are any
/// (the placeholders for "nothing" do not count).
fn remembered(context: &str) -> Option<String> {
    let facts: Vec<&str> = between(context, "<facts>", "</facts>")
        .map(|inner| {
            inner
                .lines()
                .filter_map(|l| l.trim().strip_prefix("- "))
                .collect()
        })
        .unwrap_or_default();
    let summary = between(context, "<summary>", "</summary>")
        .map(str::trim)
        .filter(|s| !is_placeholder(s));
    let mut parts = Vec::new();
    if !facts.is_empty() {
        parts.push(format!("facts: {}", facts.join("; ")));
    }
    if let Some(summary) = summary {
        parts.push(format!("summary: {summary}"));
    }
    (!parts.is_empty()).then(|| parts.join(" — "))
}

/// Empty, or degrau's "(nothing …)" text in parentheses.
fn is_placeholder(text: &str) -> bool {
    text.is_empty() || (text.starts_with('(') && text.ends_with(')'))
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some(&text[start..end])
}

/// The first `max` characters, with "…" when something was cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// "[offline stand-in] list_free_slots returned 37 items; book_slot confirmed
/// booking BK-1234."
fn summarize_results(request: &ModelRequest, turn: &[&ContentBlock]) -> String {
    let names: HashMap<&str, &str> = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match &b.block {
            ContentBlock::ToolUse { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let parts: Vec<String> = turn
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let name = names.get(tool_use_id.as_str()).copied().unwrap_or("a tool");
                Some(describe_result(name, content, *is_error))
            }
            _ => None,
        })
        .collect();
    clip(
        &format!("{MARKER} {}.", parts.join("; ")),
        MAX_RESULTS_REPLY_CHARS,
    )
}

fn describe_result(name: &str, content: &str, is_error: bool) -> String {
    if is_error {
        return format!("{name} failed: «{}»", clip(content, 60));
    }
    let parsed: Option<Value> = serde_json::from_str(content).ok();
    if let Some(id) = parsed
        .as_ref()
        .and_then(confirmation_in_json)
        .or_else(|| booking_reference(content))
    {
        return format!("{name} confirmed booking {id}");
    }
    match parsed {
        Some(Value::Array(items)) => format!("{name} returned {} items", items.len()),
        Some(Value::Object(fields)) => {
            if let Some(Value::String(error)) = fields.get("error") {
                format!("{name} reported an error: «{}»", clip(error, 60))
            } else if let Some(items) = fields.values().find_map(Value::as_array) {
                format!("{name} returned {} items", items.len())
            } else {
                format!("{name} returned {} fields", fields.len())
            }
        }
        Some(Value::String(text)) => format!("{name} returned «{}»", clip(&text, 60)),
        _ => format!("{name} returned «{}»", clip(content, 60)),
    }
}

/// A confirmation id in a JSON result: a field named like one, or a `BK-…` value.
fn confirmation_in_json(value: &Value) -> Option<String> {
    let Value::Object(fields) = value else {
        return None;
    };
    for (key, field) in fields {
        let key = key.to_lowercase();
        if (key.contains("confirmation") || key == "booking_id")
            && let Some(id) = field.as_str()
        {
            return Some(id.to_owned());
        }
        if let Some(text) = field.as_str()
            && text.starts_with("BK-")
        {
            return Some(text.to_owned());
        }
        if field.is_object()
            && let Some(id) = confirmation_in_json(field)
        {
            return Some(id);
        }
    }
    None
}

fn booking_reference(text: &str) -> Option<String> {
    tokens(text).into_iter().find(|t| t.starts_with("BK-"))
}

/// The words of a text, lowercase: its runs of letters and digits.
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// True when `words` holds one of `list`.
fn has(words: &[String], list: &[&str]) -> bool {
    words.iter().any(|w| list.contains(&w.as_str()))
}

/// True when the stand-in answers `text` (with the demo tools defined) by calling
/// a tool: it holds an availability or a booking word.
pub fn asks_for_tools(text: &str) -> bool {
    let words = words(text);
    has(&words, AVAILABILITY_WORDS) || has(&words, BOOKING_WORDS)
}

/// The demo tool calls a text asks for, if any.
fn demo_tool_calls(text: &str) -> Option<Vec<(&'static str, Value)>> {
    let words = words(text);
    let booking = has(&words, BOOKING_WORDS);
    let availability = has(&words, AVAILABILITY_WORDS);
    let days = find_dates(text);
    let first_day = days.first().map_or(DEFAULT_DAY, String::as_str).to_owned();
    if booking && let Some(time) = find_time(text) {
        return Some(vec![(
            BOOK_SLOT,
            json!({"day": first_day, "time": time, "service": "haircut"}),
        )]);
    }
    if availability || booking {
        let days = if days.is_empty() {
            vec![first_day]
        } else {
            days
        };
        return Some(
            days.into_iter()
                .take(4)
                .map(|day| (LIST_FREE_SLOTS, json!({"day": day})))
                .collect(),
        );
    }
    None
}

fn is_digit_at(bytes: &[u8], index: usize) -> bool {
    bytes.get(index).is_some_and(u8::is_ascii_digit)
}

fn two_digits(bytes: &[u8], index: usize) -> Option<u32> {
    (is_digit_at(bytes, index) && is_digit_at(bytes, index + 1))
        .then(|| u32::from(bytes[index] - b'0') * 10 + u32::from(bytes[index + 1] - b'0'))
}

/// Distinct `YYYY-MM-DD` dates, in order of appearance.
pub fn find_dates(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut days: Vec<String> = Vec::new();
    for start in 0..bytes.len() {
        let shape = (0..10).all(|k| match k {
            4 | 7 => bytes.get(start + k) == Some(&b'-'),
            _ => is_digit_at(bytes, start + k),
        });
        let bounded =
            (start == 0 || !is_digit_at(bytes, start - 1)) && !is_digit_at(bytes, start + 10);
        if !(shape && bounded) {
            continue;
        }
        let month = two_digits(bytes, start + 5).unwrap_or(0);
        let day = two_digits(bytes, start + 8).unwrap_or(0);
        // The ten bytes are ASCII, so these are character boundaries.
        let date = &text[start..start + 10];
        if (1..=12).contains(&month) && (1..=31).contains(&day) && !days.iter().any(|d| d == date) {
            days.push(date.to_owned());
        }
    }
    days
}

/// The first `H:MM` or `HH:MM` time, as `HH:MM`.
pub fn find_time(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    for (colon, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b':') {
        let Some(minute) = two_digits(bytes, colon + 1) else {
            continue;
        };
        if is_digit_at(bytes, colon + 3) || minute > 59 {
            continue;
        }
        let hour = match colon {
            c if c >= 2 && two_digits(bytes, c - 2).is_some() => {
                if c >= 3 && is_digit_at(bytes, c - 3) {
                    continue;
                }
                two_digits(bytes, c - 2)
            }
            c if c >= 1 && is_digit_at(bytes, c - 1) => Some(u32::from(bytes[c - 1] - b'0')),
            _ => None,
        };
        if let Some(hour) = hour.filter(|h| *h < 24) {
            return Some(format!("{hour:02}:{minute:02}"));
        }
    }
    None
}

/// Words split on whitespace and JSON/quote punctuation, trimmed of other
/// punctuation at both ends (but a leading `+`).
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || "\"'`,;{}[]()«»<>=|".contains(c))
        // A leading `+` stays: it belongs to a phone number.
        .map(|t| {
            t.trim_start_matches(|c: char| !c.is_alphanumeric() && c != '+')
                .trim_end_matches(|c: char| !c.is_alphanumeric())
        })
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Tokens that look like identifiers (a digit inside, or `BK-…`), distinct, in order.
pub fn identifiers(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in tokens(text) {
        let looks_like_id =
            token.chars().any(|c| c.is_ascii_digit()) || token.to_uppercase().starts_with("BK-");
        if looks_like_id && !out.contains(&token) {
            out.push(token);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    Earlier,
    Customer,
    Agent,
    Tool,
}

/// A speaker label opening a line (`user:`, `[assistant]`, `- customer:` …).
fn speaker_label(line: &str) -> Option<(Speaker, &str)> {
    let trimmed = line
        .trim_start()
        .trim_start_matches(['-', '*', ' ', '[', '(']);
    let end = trimmed.find([':', ']', ')'])?;
    let label = trimmed[..end]
        .trim()
        .to_lowercase()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '#' || c == '.')
        .trim()
        .to_owned();
    let speaker = match label.as_str() {
        "user" | "customer" | "contact" | "cliente" | "human" => Speaker::Customer,
        "assistant" | "agent" | "model" | "bot" | "atendente" => Speaker::Agent,
        "tool" | "tool_use" | "tool_result" | "tool call" | "tool result" | "tool_call" => {
            Speaker::Tool
        }
        _ => return None,
    };
    let rest = trimmed[end + 1..].trim_start_matches([':', ']', ')', ' ']);
    Some((speaker, rest))
}

/// "[offline stand-in] The customer said: …; the agent said: …. Identifiers: …."
/// The identifiers are kept whole (unless they alone pass the limit): the quoted
/// text gives way first.
pub fn summarize_conversation(text: &str) -> String {
    let clean = text.replace(MARKER, "");
    let mut turns: Vec<(Speaker, String)> = Vec::new();
    for line in clean.lines() {
        match speaker_label(line) {
            Some((speaker, rest)) => turns.push((speaker, rest.to_owned())),
            None => match turns.last_mut() {
                Some((_, said)) => {
                    said.push(' ');
                    said.push_str(line.trim());
                }
                None => turns.push((Speaker::Earlier, line.trim().to_owned())),
            },
        }
    }
    let quoted = |who: Speaker, words: usize| -> Vec<String> {
        turns
            .iter()
            .filter(|(speaker, said)| *speaker == who && !said.trim().is_empty())
            .map(|(_, said)| format!("«{}»", first_words(said, words)))
            .collect()
    };
    let ids = identifiers(&clean);
    let ids_part = if ids.is_empty() {
        String::new()
    } else {
        format!(" Identifiers: {}.", ids.join(", "))
    };
    let fixed = MARKER.chars().count() + 1 + ids_part.chars().count();
    let budget = MAX_SUMMARY_CHARS.saturating_sub(fixed).max(120);
    // Each speaker gets its share, so a talkative customer cannot crowd out
    // what the agent said.
    let share = |parts: Vec<String>, fifths: usize| {
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            clip(&parts.join(" / "), (budget - 60) * fifths / 5)
        }
    };
    let earlier = quoted(Speaker::Earlier, 40);
    let mut body = String::new();
    if !earlier.is_empty() {
        body.push_str(&format!("Earlier: {}. ", share(earlier, 1)));
    }
    body.push_str(&format!(
        "The customer said: {}; the agent said: {}.",
        share(quoted(Speaker::Customer, 20), 2),
        share(quoted(Speaker::Agent, 20), 2)
    ));
    let summary = format!("{MARKER} {}{ids_part}", clip(&body, budget));
    clip(&summary, MAX_SUMMARY_CHARS)
}

fn first_words(text: &str, count: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = words[..words.len().min(count)].join(" ");
    if words.len() > count {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::{Message, StoredMessage};
    use degrau::request::{RequestParts, ToolDef, build_request};
    use degrau::testing::stored;

    fn demo_tools() -> Vec<ToolDef> {
        [LIST_FREE_SLOTS, BOOK_SLOT]
            .iter()
            .map(|name| ToolDef {
                name: (*name).into(),
                description: "demo".into(),
                input_schema: json!({"type": "object"}),
            })
            .collect()
    }

    fn request_with(
        tools: &[ToolDef],
        summary: Option<&str>,
        window: &[StoredMessage],
        round: &[Message],
    ) -> ModelRequest {
        build_request(&RequestParts {
            model: "claude-sonnet-5",
            max_tokens: 1024,
            thinking: None,
            tools,
            instructions: "You schedule haircuts.",
            facts: &[],
            summary,
            window,
            round,
            lifetimes: degrau::request::Lifetimes::FiveMinutes,
        })
        .unwrap()
    }

    fn reply(request: &ModelRequest) -> Answer {
        answer(request, &ToolChoice::Auto, "seed")
    }

    fn text_of(answer: &Answer) -> String {
        match &answer.content[0] {
            ContentBlock::Text { text } => text.clone(),
            other => panic!("expected text, got {other:?}"),
        }
    }

    #[test]
    fn asks_for_free_slots_on_the_day_named() {
        let tools = demo_tools();
        let req = request_with(
            &tools,
            None,
            &[],
            &[Message::user_text("Any free slots on 2026-12-04?")],
        );
        let answer = reply(&req);
        assert_eq!(answer.stop_reason, StopReason::ToolUse);
        assert_eq!(
            answer.content[0],
            ContentBlock::text("[offline stand-in] Let me check.")
        );
        let ContentBlock::ToolUse { id, name, input } = &answer.content[1] else {
            panic!("expected a tool_use");
        };
        assert!(id.starts_with("toolu_standin_"));
        assert_eq!(name, LIST_FREE_SLOTS);
        assert_eq!(input, &json!({"day": "2026-12-04"}));
    }

    #[test]
    fn books_when_asked_with_a_time_and_defaults_the_day() {
        let tools = demo_tools();
        let req = request_with(
            &tools,
            None,
            &[],
            &[Message::user_text("Quero marcar às 9:30, por favor")],
        );
        let answer = reply(&req);
        let ContentBlock::ToolUse { name, input, .. } = &answer.content[1] else {
            panic!("expected a tool_use");
        };
        assert_eq!(name, BOOK_SLOT);
        assert_eq!(
            input,
            &json!({"day": DEFAULT_DAY, "time": "09:30", "service": "haircut"})
        );
    }

    #[test]
    fn without_the_demo_tools_or_with_tool_choice_none_it_only_talks() {
        let req = request_with(&[], None, &[], &[Message::user_text("free slots?")]);
        assert_eq!(reply(&req).stop_reason, StopReason::EndTurn);
        let tools = demo_tools();
        let req = request_with(&tools, None, &[], &[Message::user_text("free slots?")]);
        assert_eq!(
            answer(&req, &ToolChoice::None, "s").stop_reason,
            StopReason::EndTurn
        );
    }

    #[test]
    fn summarises_tool_results_briefly() {
        let tools = demo_tools();
        let window = [stored(1, Message::user_text("slots?"))];
        let slots: Vec<String> = (0..37).map(|i| format!("{:02}:00", i % 24)).collect();
        let round = [
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::tool_use("a", LIST_FREE_SLOTS, json!({})),
                    ContentBlock::tool_use("b", BOOK_SLOT, json!({})),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::tool_result(
                        "a",
                        json!({"day": "2026-12-01", "free": slots}).to_string(),
                    ),
                    ContentBlock::tool_result(
                        "b",
                        json!({"status": "booked", "confirmation_id": "BK-4821"}).to_string(),
                    ),
                ],
            },
        ];
        let text = text_of(&reply(&request_with(&tools, None, &window, &round)));
        assert_eq!(
            text,
            "[offline stand-in] list_free_slots returned 37 items; book_slot confirmed booking BK-4821."
        );
        let long = describe_result("x", &"y".repeat(5000), false);
        assert!(long.chars().count() < 100);
    }

    #[test]
    fn echoes_with_the_earlier_messages_and_the_memory() {
        let window = [
            stored(1, Message::user_text("Oi, sou a Ana")),
            stored(2, Message::assistant_text("Olá Ana")),
        ];
        let req = request_with(
            &[],
            Some("Ana prefers mornings."),
            &window,
            &[Message::user_text("tudo bem?")],
        );
        assert_eq!(
            text_of(&reply(&req)),
            "[offline stand-in] You said: «tudo bem?». I can see 2 earlier messages, and what degrau remembers: «summary: Ana prefers mornings.»."
        );
        let first = request_with(&[], None, &[], &[Message::user_text("hello")]);
        assert_eq!(
            text_of(&reply(&first)),
            "[offline stand-in] You said: «hello». I can see 0 earlier messages."
        );
    }

    #[test]
    fn quotes_the_first_user_message_when_asked() {
        let window = [
            stored(1, Message::user_text("My dog is called Rex")),
            stored(2, Message::assistant_text("Nice")),
        ];
        let req = request_with(
            &[],
            None,
            &window,
            &[Message::user_text("O que eu disse primeiro?")],
        );
        assert!(text_of(&reply(&req)).starts_with(
            "[offline stand-in] The first thing you said was: «My dog is called Rex»."
        ));
    }

    #[test]
    fn tool_ids_are_deterministic_per_request_and_differ_across_requests() {
        assert_eq!(tool_use_id("a", 0), tool_use_id("a", 0));
        assert_ne!(tool_use_id("a", 0), tool_use_id("a", 1));
        assert_ne!(tool_use_id("a", 0), tool_use_id("b", 0));
    }

    #[test]
    fn finds_dates_and_times_without_regexes() {
        assert_eq!(
            find_dates(
                "on 2026-12-04 or 2026-12-05, not 2026-13-01 nor 12026-12-01 nor 2026-12-04"
            ),
            vec!["2026-12-04", "2026-12-05"]
        );
        assert_eq!(find_time("at 14:30."), Some("14:30".into()));
        assert_eq!(find_time("at 9:05"), Some("09:05".into()));
        assert_eq!(find_time("ratio 1:2 then 25:00 then 123:45"), None);
        assert_eq!(find_time("no time"), None);
    }

    #[test]
    fn a_summary_keeps_every_identifier_and_stays_short() {
        let mut transcript = String::from(
            "user: I want a haircut on 2026-12-04 at 10:30\n\
             assistant: [offline stand-in] Booked, your code is BK-4821.\n\
             tool: {\"confirmation_id\":\"BK-4821\",\"phone\":\"+5511999990000\"}\n",
        );
        for i in 0..200 {
            transcript.push_str(&format!(
                "user: filler sentence number {i} with many words to make it long\n"
            ));
        }
        let summary = summarize_conversation(&transcript);
        assert!(summary.starts_with("[offline stand-in] The customer said: «I want a haircut"));
        assert!(summary.contains("the agent said: «Booked, your code is BK-4821.»"));
        assert!(summary.chars().count() <= MAX_SUMMARY_CHARS);
        for id in ["2026-12-04", "10:30", "BK-4821", "+5511999990000", "199"] {
            assert!(summary.contains(id), "{id} kept");
        }
        assert_eq!(summary.matches(MARKER).count(), 1);
    }

    #[test]
    fn a_forced_tool_gets_only_a_tool_use() {
        let mut tools = demo_tools();
        tools.push(ToolDef {
            name: "record_facts".into(),
            description: "facts".into(),
            input_schema: json!({"type": "object"}),
        });
        let mut req = request_with(&tools, None, &[], &[Message::user_text("user: hi")]);
        req.system[0].text = "degrau:extract-facts".into();
        let forced = answer(&req, &ToolChoice::Tool("record_facts".into()), "s");
        assert_eq!(forced.stop_reason, StopReason::ToolUse);
        assert_eq!(forced.content.len(), 1);
        let ContentBlock::ToolUse { name, input, .. } = &forced.content[0] else {
            panic!("expected a tool_use");
        };
        assert_eq!(
            (name.as_str(), input),
            ("record_facts", &json!({"facts": []}))
        );

        let req = request_with(
            &tools,
            None,
            &[],
            &[Message::user_text("free on 2026-12-09?")],
        );
        let any = answer(&req, &ToolChoice::Any, "s");
        let ContentBlock::ToolUse { name, input, .. } = &any.content[0] else {
            panic!("expected a tool_use");
        };
        assert_eq!(
            (name.as_str(), input),
            (LIST_FREE_SLOTS, &json!({"day": "2026-12-09"}))
        );
    }

    #[test]
    fn summary_and_fact_requests_get_their_own_answers() {
        let mut req = request_with(&[], None, &[], &[Message::user_text("user: hi BK-1")]);
        req.system[0].text = "degrau:summarize the conversation".into();
        let text = text_of(&reply(&req));
        assert!(text.starts_with("[offline stand-in] The customer said: «hi BK-1»"));
        assert!(text.ends_with("Identifiers: BK-1."));
        req.system[0].text = "degrau:extract-facts".into();
        assert_eq!(text_of(&reply(&req)), r#"{"facts": []}"#);
    }
}
