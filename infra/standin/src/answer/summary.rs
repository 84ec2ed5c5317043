//! The answer to a summary request: who said what, in a few quoted words, and
//! every identifier the conversation holds, kept whole.

use super::{MARKER, clip};

/// Longest conversation summary.
pub const MAX_SUMMARY_CHARS: usize = 2_000;

/// Words split on whitespace and JSON/quote punctuation, trimmed of other
/// punctuation at both ends (but a leading `+`).
pub(super) fn tokens(text: &str) -> Vec<String> {
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
