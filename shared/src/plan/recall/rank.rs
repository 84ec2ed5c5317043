//! The ranking of a contact's sessions for a query: Okapi BM25 over each
//! session's whole text (its counts, [`super::index::SessionIndex`]), plus the same over
//! its search summary as a field of its own, weighted [`SUMMARY_WEIGHT`]; ids and
//! dates match whole as exact terms; ties go to the newer session. Pure: the same
//! indexes and query always rank the same.

use std::collections::{BTreeMap, BTreeSet};

use super::index::SessionIndex;
use super::tokenize::StemmingTokenizer;

/// BM25's term frequency saturation.
pub const K1: f64 = 1.2;
/// BM25's length normalisation.
pub const B: f64 = 0.75;
/// How much the search summary's match counts beside the whole text's: low, so
/// that it breaks near ties and finds a session by words only its summary holds
/// (a synonym a model wrote), and never outranks what was said. Chosen by the
/// recall benchmark's sweep (`results/recall.md`): with the offline stand-in's
/// summaries, 0.5 lost 2.5 points of recall@1 to plain BM25, 0.2 lost 0.6, 0.1
/// none.
pub const SUMMARY_WEIGHT: f64 = 0.1;

/// A session and how well it matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The session's number.
    pub session: u32,
    /// Its score (above 0: it shares a term with the query).
    pub score: f64,
}

/// One field of every session: its counts and lengths, and the corpus's
/// statistics over them.
struct Field<'a> {
    counts: Vec<(&'a BTreeMap<String, u32>, u32)>,
    average: f64,
}

impl<'a> Field<'a> {
    fn new(counts: Vec<(&'a BTreeMap<String, u32>, u32)>) -> Self {
        let total: u64 = counts.iter().map(|(_, length)| u64::from(*length)).sum();
        let average = (total as f64 / counts.len().max(1) as f64).max(1.0);
        Field { counts, average }
    }

    /// Each session's BM25 for the query's `terms`.
    fn scores(&self, terms: &BTreeSet<String>) -> Vec<f64> {
        let n = self.counts.len() as f64;
        let mut scores = vec![0.0; self.counts.len()];
        for term in terms {
            let df = self
                .counts
                .iter()
                .filter(|(counts, _)| counts.contains_key(term))
                .count() as f64;
            if df == 0.0 {
                continue;
            }
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for (score, (counts, length)) in scores.iter_mut().zip(&self.counts) {
                let Some(&tf) = counts.get(term) else {
                    continue;
                };
                let tf = f64::from(tf);
                let norm = K1 * (1.0 - B + B * f64::from(*length) / self.average);
                *score += idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        scores
    }
}

/// The query's distinct terms, by the index's own tokenizer.
pub fn query_terms(query: &str, tokenizer: &StemmingTokenizer) -> BTreeSet<String> {
    tokenizer.terms(query).into_iter().collect()
}

/// The at most `limit` sessions of `indexes` that best match `query`, best
/// first; only those sharing a term with it.
pub fn rank(
    indexes: &[SessionIndex],
    query: &str,
    limit: usize,
    tokenizer: &StemmingTokenizer,
) -> Vec<Scored> {
    rank_weighted(indexes, query, limit, tokenizer, SUMMARY_WEIGHT)
}

/// [`rank`] with the search summary's match weighted `summary_weight` (the
/// benchmark's sweep; [`SUMMARY_WEIGHT`] is the one chosen).
pub fn rank_weighted(
    indexes: &[SessionIndex],
    query: &str,
    limit: usize,
    tokenizer: &StemmingTokenizer,
    summary_weight: f64,
) -> Vec<Scored> {
    let terms = query_terms(query, tokenizer);
    if indexes.is_empty() || limit == 0 || terms.is_empty() {
        return Vec::new();
    }
    let body = Field::new(indexes.iter().map(|i| (&i.terms, i.length)).collect());
    let summary = Field::new(
        indexes
            .iter()
            .map(|i| (&i.summary_terms, i.summary_length))
            .collect(),
    );
    let mut scored: Vec<Scored> = body
        .scores(&terms)
        .into_iter()
        .zip(summary.scores(&terms))
        .zip(indexes)
        .map(|((body, summary), index)| Scored {
            session: index.session,
            score: body + summary_weight * summary,
        })
        .filter(|scored| scored.score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.session.cmp(&a.session)));
    scored.truncate(limit);
    scored
}
