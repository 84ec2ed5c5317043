//! The words recall ranks by: lower case, a few Portuguese and English stop words
//! out, each word replaced by its Snowball stem in Portuguese and in English
//! (`rust-stemmers`; both kept when they differ, so "reservas" meets "reserva" and
//! "bookings" meets "booked"), accents folded after stemming; and each id or date
//! ([`super::extract_ids`]'s shapes: `BK-1A2B3C`, `2026-03-14`, `14/03`) also as one
//! exact term, so a booking number is found whole and not by its parts alone.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::{is_code, is_date};

/// The prefix of an exact term (an id or a date, whole): no stem starts with it.
pub const EXACT: &str = "=";

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

impl StemmingTokenizer {
    /// The terms of `text`, in order: each word's stems, and each id or date whole
    /// (prefixed [`EXACT`]).
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for token in text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '/' | '_'))) {
            let token = token.trim_matches(|c: char| matches!(c, '-' | '/' | '_'));
            if (4..=super::MAX_ID_CHARS).contains(&token.chars().count())
                && (is_date(token) || is_code(token))
            {
                out.push(format!("{EXACT}{}", token.to_lowercase()));
            }
            self.words(token, &mut out);
        }
        out
    }

    /// The stems of the words (letters and digits) of `text`.
    fn words(&self, text: &str, out: &mut Vec<String>) {
        for word in text
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
    }
}

impl bm25::Tokenizer for StemmingTokenizer {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        self.terms(input_text)
    }
}

/// `text` without its accents (NFD, combining marks dropped).
pub fn fold(text: &str) -> String {
    text.nfd().filter(|c| !is_combining_mark(*c)).collect()
}
