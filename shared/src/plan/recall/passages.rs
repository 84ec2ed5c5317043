//! The passages a recall shows of a session it found: the lines that share the
//! most terms with the query, each with the line before and after it, dated, so
//! the agent reads what was said where it was said (not the start and end of an
//! excerpt).

use std::collections::BTreeSet;

use serde::Serialize;

use super::date_of;
use super::index::{SessionText, Speaker, TextLine};
use super::tokenize::{EXACT, StemmingTokenizer};

/// Most passages shown of one session.
pub const MAX_PASSAGES: usize = 2;
/// Most characters of one passage.
pub const MAX_PASSAGE_CHARS: usize = 900;

/// A stretch of a session around a line that matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Passage {
    /// The day the matching line was written (`YYYY-MM-DD`, UTC).
    pub date: String,
    /// The lines, `customer: …`, `agent: …` or `tool: …`, in order.
    pub lines: Vec<String>,
}

/// How well a line matches: its distinct query terms, an id or date counting
/// twice.
fn weight(line: &TextLine, terms: &BTreeSet<String>, tokenizer: &StemmingTokenizer) -> usize {
    let found: BTreeSet<String> = tokenizer
        .terms(&line.text)
        .into_iter()
        .filter(|term| terms.contains(term))
        .collect();
    found
        .iter()
        .map(|term| if term.starts_with(EXACT) { 2 } else { 1 })
        .sum()
}

fn shown(line: &TextLine) -> String {
    let who = match line.speaker {
        Speaker::Customer => "customer",
        Speaker::Agent => "agent",
        Speaker::Tool => "tool",
    };
    format!("{who}: {}", line.text)
}

/// The best [`MAX_PASSAGES`] passages of `text` for the query's `terms`, in the
/// session's order; none when no line shares a term with the query.
pub fn passages(
    text: &SessionText,
    terms: &BTreeSet<String>,
    tokenizer: &StemmingTokenizer,
) -> Vec<Passage> {
    let weights: Vec<usize> = text
        .lines
        .iter()
        .map(|line| weight(line, terms, tokenizer))
        .collect();
    let mut best: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0).collect();
    best.sort_by(|&a, &b| weights[b].cmp(&weights[a]).then(a.cmp(&b)));
    let mut centres: Vec<usize> = Vec::new();
    for i in best {
        // A line beside a chosen one is already shown with it.
        if centres.iter().all(|&c| c.abs_diff(i) > 2) {
            centres.push(i);
        }
        if centres.len() == MAX_PASSAGES {
            break;
        }
    }
    centres.sort_unstable();
    centres
        .into_iter()
        .map(|centre| passage(&text.lines, centre))
        .collect()
}

/// The line at `centre` with the line before and the line after it, each while
/// the passage stays within [`MAX_PASSAGE_CHARS`] (the matching line always).
fn passage(lines: &[TextLine], centre: usize) -> Passage {
    let middle = shown(&lines[centre]);
    let mut left = MAX_PASSAGE_CHARS.saturating_sub(middle.chars().count());
    let mut fits = |line: Option<&TextLine>| {
        let line = shown(line?);
        let chars = line.chars().count();
        (chars <= left).then(|| {
            left -= chars;
            line
        })
    };
    let before = centre.checked_sub(1).and_then(|i| fits(lines.get(i)));
    let after = fits(lines.get(centre + 1));
    Passage {
        date: date_of(lines[centre].at),
        lines: before.into_iter().chain([middle]).chain(after).collect(),
    }
}
