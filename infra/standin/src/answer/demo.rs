//! The scheduling demo's heuristics: which of its tools a text asks for, and with
//! what input (the days and the time it names), without a model or regexes.

use serde_json::{Value, json};

/// The demo tool that lists free slots.
pub const LIST_FREE_SLOTS: &str = "list_free_slots";
/// The demo tool that books a slot.
pub const BOOK_SLOT: &str = "book_slot";
/// The day asked about when the text names none.
pub const DEFAULT_DAY: &str = "2026-12-01";
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
pub(super) fn demo_tool_calls(text: &str) -> Option<Vec<(&'static str, Value)>> {
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
