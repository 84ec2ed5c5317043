//! How long the stable prefix of a request stays in the prompt cache: the tenant's
//! `cache_ttl` policy (`5m`, `1h` or `auto`), and the record of a conversation's
//! recent gaps that `auto` decides from.
//!
//! The stable prefix is what changes only at a step or with the tenant's config:
//! the tools, the instructions (system[0]) and the contact context (system[1]).
//! Its breakpoints get the lifetime the policy chooses; the message breakpoints
//! always stay five-minute ones, so the API's rule that one-hour entries come
//! before five-minute ones holds by construction (see [`crate::request`]).
//!
//! **The `auto` rule.** Prices relative to a base input token: a five-minute write
//! 1.25×, a one-hour write 2×, a read 0.1× (`NOTES-ANTHROPIC.md`). Each entry lives
//! its lifetime again from every hit. So for a prefix of `S` tokens, each gap
//! between two rounds costs, with `p5` the chance that a gap lasts five minutes or
//! more and `p60` that it lasts an hour or more:
//!
//! - a five-minute entry: a read (0.1 `S`) after a shorter gap, a new write (1.25
//!   `S`) after a longer one: `(0.1 + 1.15 p5) S`;
//! - a one-hour entry: a read after a gap under an hour, a new write (2 `S`) after
//!   one longer: `(0.1 + 1.9 p60) S`.
//!
//! The one-hour entry is cheaper when `1.9 p60 < 1.15 p5`, that is `38 n60 < 23 n5`
//! over the recorded gaps ([`GAP_RECORD_LEN`] at most, this round's included):
//! one-hour entries pay when at least about one long gap in five falls between
//! five minutes and an hour. What the rule leaves out, on purpose: the messages'
//! own entries (five-minute ones under either choice, so the same cost either
//! way); and a step, which writes the contact context anew under either choice,
//! at 0.75 of its size more with one hour, once a step against a saving at every
//! gap. A new contact (no gap recorded) gets five minutes: its first write is
//! cheaper, and a conversation that ends in one burst never pays for an hour.
//!
//! **A prefix too short to cache.** A prefix under the model's minimum cacheable
//! length ([`MIN_CACHEABLE_TOKENS`], 1,024 for Sonnet models) is never written,
//! so its one-hour entry never exists to be read, while a one-hour breakpoint
//! still bills what follows the last read at the one-hour price. `auto` takes an
//! hour only for a stable prefix estimated at that length or more (the caller's
//! estimate: characters over four, see [`crate::compaction::text_tokens`]).
//!
//! (`docs/DESIGN.md`: "Request layout".)

use std::fmt;

use serde::{Deserialize, Serialize};

/// The lifetime of a cache entry, as the API's `cache_control.ttl` spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheTtl {
    /// `"5m"`: the default of a breakpoint without `ttl`; a write costs 1.25×.
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// `"1h"`: a write costs 2×.
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }
}

/// The tenant's `cache_ttl` (`CACHE_TTL` in the environment): how long the
/// stable prefix's entries live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CacheTtlPolicy {
    /// Always five minutes (`5m`).
    FiveMinutes,
    /// Always one hour (`1h`).
    OneHour,
    /// Chosen per request from the conversation's recent gaps (`auto`; see the
    /// module documentation).
    #[default]
    Auto,
}

impl CacheTtlPolicy {
    /// Parses `5m`, `1h` or `auto`.
    pub fn parse(text: &str) -> Option<CacheTtlPolicy> {
        match text {
            "5m" => Some(CacheTtlPolicy::FiveMinutes),
            "1h" => Some(CacheTtlPolicy::OneHour),
            "auto" => Some(CacheTtlPolicy::Auto),
            _ => None,
        }
    }

    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtlPolicy::FiveMinutes => "5m",
            CacheTtlPolicy::OneHour => "1h",
            CacheTtlPolicy::Auto => "auto",
        }
    }

    /// The lifetime of the stable prefix's entries for a request whose
    /// conversation recorded `gaps` (seconds, this round's included) and whose
    /// stable prefix is estimated at `prefix_tokens`.
    pub fn prefix_ttl(self, gaps: &[u32], prefix_tokens: u64) -> CacheTtl {
        match self {
            CacheTtlPolicy::FiveMinutes => CacheTtl::FiveMinutes,
            CacheTtlPolicy::OneHour => CacheTtl::OneHour,
            CacheTtlPolicy::Auto if prefix_tokens < MIN_CACHEABLE_TOKENS => CacheTtl::FiveMinutes,
            CacheTtlPolicy::Auto => auto_ttl(gaps),
        }
    }
}

impl fmt::Display for CacheTtlPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for CacheTtlPolicy {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        CacheTtlPolicy::parse(&text)
            .ok_or_else(|| format!("cache_ttl must be `5m`, `1h` or `auto`, got {text:?}"))
    }
}

impl From<CacheTtlPolicy> for String {
    fn from(policy: CacheTtlPolicy) -> String {
        policy.as_str().to_owned()
    }
}

/// Most gaps a head records: enough to tell a conversation that pauses from one
/// that does not, few enough to follow a change of rhythm within a day.
pub const GAP_RECORD_LEN: usize = 8;

/// The shortest prefix the API caches for Sonnet models, in tokens: a shorter
/// stable prefix never gets an entry, so `auto` gives it none of an hour.
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// Seconds after which a five-minute entry is gone.
pub const FIVE_MINUTES: u32 = 5 * 60;
/// Seconds after which a one-hour entry is gone.
pub const ONE_HOUR: u32 = 60 * 60;

/// The `auto` rule (see the module documentation): one hour when
/// `38 n60 < 23 n5` over `gaps`, five minutes otherwise (and with no gap).
pub fn auto_ttl(gaps: &[u32]) -> CacheTtl {
    let past = |limit: u32| gaps.iter().filter(|&&gap| gap >= limit).count();
    let (n5, n60) = (past(FIVE_MINUTES), past(ONE_HOUR));
    if 38 * n60 < 23 * n5 {
        CacheTtl::OneHour
    } else {
        CacheTtl::FiveMinutes
    }
}

/// The record after a round that came `gap_seconds` after the previous one: the
/// newest [`GAP_RECORD_LEN`] gaps, oldest first, each saturating at `u32::MAX`
/// seconds (a clock that went back counts as no gap).
pub fn record_gap(previous: &[u32], gap_seconds: i64) -> Vec<u32> {
    let gap = u32::try_from(gap_seconds.max(0)).unwrap_or(u32::MAX);
    let keep = previous.len().min(GAP_RECORD_LEN - 1);
    let mut gaps = previous[previous.len() - keep..].to_vec();
    gaps.push(gap);
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u32 = 1;
    const MINUTE: u32 = 60;
    const HOUR: u32 = 3600;

    #[test]
    fn auto_takes_an_hour_only_when_the_gaps_say_it_is_cheaper() {
        // No history: a new contact gets five minutes.
        assert_eq!(auto_ttl(&[]), CacheTtl::FiveMinutes);
        // A conversation without pauses.
        assert_eq!(
            auto_ttl(&[5 * SECOND, 30 * SECOND, 2 * MINUTE]),
            CacheTtl::FiveMinutes
        );
        // One pause of a quarter hour among short gaps: an hour is cheaper.
        assert_eq!(
            auto_ttl(&[10 * SECOND, 15 * MINUTE, 40 * SECOND]),
            CacheTtl::OneHour
        );
        // Exactly at the limits: an entry is gone at its lifetime.
        assert_eq!(auto_ttl(&[FIVE_MINUTES]), CacheTtl::OneHour);
        assert_eq!(auto_ttl(&[FIVE_MINUTES - 1]), CacheTtl::FiveMinutes);
        // Gaps past an hour each cost a 2× write under an hour's entry as well.
        assert_eq!(auto_ttl(&[20 * HOUR]), CacheTtl::FiveMinutes);
        assert_eq!(auto_ttl(&[20 * HOUR, 20 * HOUR]), CacheTtl::FiveMinutes);
        // 23 n5 against 38 n60: one pause under an hour beside a next-day return
        // is enough (23·2 = 46 > 38), two next-day returns need two.
        assert_eq!(auto_ttl(&[20 * HOUR, 30 * MINUTE]), CacheTtl::OneHour);
        assert_eq!(
            auto_ttl(&[20 * HOUR, 20 * HOUR, 30 * MINUTE]),
            CacheTtl::FiveMinutes,
            "23·3 = 69 < 76 = 38·2"
        );
        assert_eq!(
            auto_ttl(&[20 * HOUR, 20 * HOUR, 30 * MINUTE, 10 * MINUTE]),
            CacheTtl::OneHour,
            "23·4 = 92 > 76"
        );
    }

    #[test]
    fn the_rule_matches_the_expected_cost_of_each_entry_over_any_record() {
        // The integer rule against the cost it stands for, on every record of up
        // to four gaps drawn from short, pause and next-day gaps.
        let kinds = [10 * SECOND, 20 * MINUTE, 20 * HOUR];
        let cost = |gaps: &[u32], write: f64, life: u32| -> f64 {
            gaps.iter()
                .map(|&g| if g >= life { write } else { 0.1 })
                .sum()
        };
        for len in 1..=4u32 {
            for code in 0..3u32.pow(len) {
                let gaps: Vec<u32> = (0..len)
                    .map(|i| kinds[(code / 3u32.pow(i) % 3) as usize])
                    .collect();
                let five = cost(&gaps, 1.25, FIVE_MINUTES);
                let hour = cost(&gaps, 2.0, ONE_HOUR);
                let expected = if hour < five - 1e-9 {
                    CacheTtl::OneHour
                } else {
                    CacheTtl::FiveMinutes
                };
                assert_eq!(auto_ttl(&gaps), expected, "{gaps:?}: 5m {five}, 1h {hour}");
            }
        }
    }

    #[test]
    fn fixed_policies_ignore_the_gaps() {
        let pauses = [20 * MINUTE, 30 * MINUTE];
        let long = MIN_CACHEABLE_TOKENS;
        assert_eq!(
            CacheTtlPolicy::FiveMinutes.prefix_ttl(&pauses, long),
            CacheTtl::FiveMinutes
        );
        assert_eq!(
            CacheTtlPolicy::OneHour.prefix_ttl(&[], 10),
            CacheTtl::OneHour
        );
        assert_eq!(
            CacheTtlPolicy::Auto.prefix_ttl(&pauses, long),
            CacheTtl::OneHour
        );
    }

    #[test]
    fn auto_keeps_five_minutes_for_a_prefix_too_short_to_cache() {
        let pauses = [20 * MINUTE, 30 * MINUTE];
        assert_eq!(
            CacheTtlPolicy::Auto.prefix_ttl(&pauses, MIN_CACHEABLE_TOKENS - 1),
            CacheTtl::FiveMinutes
        );
        assert_eq!(
            CacheTtlPolicy::Auto.prefix_ttl(&pauses, MIN_CACHEABLE_TOKENS),
            CacheTtl::OneHour
        );
    }

    #[test]
    fn the_record_keeps_the_newest_gaps_and_saturates() {
        assert_eq!(record_gap(&[], 12), vec![12]);
        assert_eq!(record_gap(&[1, 2], 3), vec![1, 2, 3]);
        let full: Vec<u32> = (1..=GAP_RECORD_LEN as u32).collect();
        let next = record_gap(&full, 99);
        assert_eq!(next.len(), GAP_RECORD_LEN);
        assert_eq!(next.first(), Some(&2));
        assert_eq!(next.last(), Some(&99));
        assert_eq!(record_gap(&[], -5), vec![0], "a clock that went back");
        assert_eq!(record_gap(&[], i64::MAX), vec![u32::MAX]);
        // A record longer than the bound (written by another version) is cut.
        let long: Vec<u32> = (0..20).collect();
        assert_eq!(record_gap(&long, 7).len(), GAP_RECORD_LEN);
    }

    #[test]
    fn policies_parse_their_spelling_and_refuse_anything_else() {
        for policy in [
            CacheTtlPolicy::FiveMinutes,
            CacheTtlPolicy::OneHour,
            CacheTtlPolicy::Auto,
        ] {
            assert_eq!(CacheTtlPolicy::parse(policy.as_str()), Some(policy));
            let json = serde_json::to_string(&policy).unwrap();
            assert_eq!(
                serde_json::from_str::<CacheTtlPolicy>(&json).unwrap(),
                policy
            );
        }
        for bad in ["", "1H", "5min", "60m", "auto "] {
            assert_eq!(CacheTtlPolicy::parse(bad), None, "{bad:?}");
        }
        let error = serde_json::from_str::<CacheTtlPolicy>(r#""10m""#).unwrap_err();
        assert!(error.to_string().contains("cache_ttl must be"), "{error}");
        assert_eq!(
            serde_json::to_string(&CacheTtl::OneHour).unwrap(),
            r#""1h""#
        );
    }
}
