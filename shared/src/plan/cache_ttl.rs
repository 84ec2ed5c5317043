//! How long a request's cache entries live: the tenant's `cache_ttl` policy
//! (`5m`, `1h` or `auto`), and the record of a conversation's recent gaps that
//! `auto` decides from.
//!
//! A request has two kinds of breakpoints: the stable prefix's (`system[0]` and
//! `system[1]`, after the tools: what changes only at a step or with the tenant's
//! config) and the messages' (the previous request's end and the last block). The
//! API wants one-hour entries before five-minute ones, so a request's lifetimes
//! are one of three [`Lifetimes`]: all five minutes, the stable prefix for an hour
//! and the messages for five minutes, or all for an hour. `5m` is the first,
//! `1h` the last, `auto` chooses per request.
//!
//! **The `auto` rule.** Prices relative to a base input token: a five-minute write
//! 1.25×, a one-hour write 2×, a read 0.1× (`NOTES-ANTHROPIC.md`). Each entry lives
//! its lifetime again from every hit. Take a part of the request of `C` tokens
//! (the stable prefix, or the messages part: what follows it) of which `d` are
//! new since the previous request (written even when the cache is warm; `r = d /
//! C`), and let `p5` be the chance that the gap before the next request lasts
//! five minutes or more and `p60` an hour or more. Each request then costs, in
//! units of `C`:
//!
//! - five-minute entries: `(1 - p5) (0.1 (1 - r) + 1.25 r) + 1.25 p5` (a read and
//!   the new part written after a shorter gap, everything written after a longer
//!   one);
//! - one-hour entries: `(1 - p60) (0.1 (1 - r) + 2 r) + 2 p60`.
//!
//! The hour is cheaper when `(1 - r) (1.15 p5 - 1.9 p60) > 0.75 r`, that is, over
//! the `n` recorded gaps ([`GAP_RECORD_LEN`] at most, this round's included),
//! `(C - d) (23 n5 - 38 n60) > 15 d n` ([`hour_pays`]). For the stable prefix
//! (`d` = 0) that is `38 n60 < 23 n5`: an hour pays when at least about one gap
//! in five falls between five minutes and an hour. For the messages part `d` is
//! the last two messages (the previous reply and the new user message), small
//! beside a window that pauses would make the model read again; an hour then
//! pays at nearly the same rhythm. `auto` gives the prefix an hour when it earns
//! it, and the messages an hour too when the messages part earns it on its own:
//! the prefix's entry lives an hour under either choice, so only what follows it
//! tells them apart (weighing the whole request would count the prefix's reads
//! for the messages and give an hour to a window mostly new: behind a
//! 3,000-token prefix, a 200-token window of which 150 are new costs 18 % more
//! all for an hour than with the prefix alone, after gaps of 30 s, 20 min and
//! 40 s). A prefix too short to cache (below) has no entry of its own: the
//! messages' entry then holds the whole request, which is the part weighed for
//! all an hour against five minutes. What the rule leaves out, on purpose: a
//! step, which writes the contact context and the window anew under either
//! choice (at 0.75 of their size more with an hour, once a step against a saving
//! at every pause); and the tool
//! loop's own calls within a round, which write their few new tokens at the
//! round's price. A new contact (no gap recorded) gets five minutes: its first
//! write is cheaper, and a conversation that ends in one burst never pays for an
//! hour.
//!
//! **A part too short to cache.** A prefix under the model's minimum cacheable
//! length ([`MIN_CACHEABLE_TOKENS`], 1,024 for Sonnet models) is never written,
//! so its one-hour entry never exists to be read, while a one-hour breakpoint
//! still bills what follows the last read at the one-hour price. `auto` takes an
//! hour only for a part estimated at that length or more (the caller's estimate:
//! characters over four, see [`crate::plan::request::RequestSizes`]).
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

/// The tenant's `cache_ttl` (`CACHE_TTL` in the environment): how long a
/// request's cache entries live.
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

    /// The lifetimes of a request's entries, for a conversation that recorded
    /// `gaps` (seconds, this round's included) and a request of `sizes`.
    pub fn lifetimes(self, gaps: &[u32], sizes: RequestSizes) -> Lifetimes {
        match self {
            CacheTtlPolicy::FiveMinutes => Lifetimes::FiveMinutes,
            CacheTtlPolicy::OneHour => Lifetimes::AllForAnHour,
            CacheTtlPolicy::Auto => auto_lifetimes(gaps, sizes),
        }
    }
}

/// The `auto` rule's lifetimes (see the module documentation) for a request of
/// `sizes` after `gaps`: the prefix an hour when it is long enough to cache and
/// the gaps make the hour cheaper for it; the messages an hour too when the hour
/// is cheaper for what their entry holds beyond an entry that lives an hour
/// anyway (the messages part behind a prefix held an hour, else the whole
/// request), and the whole request is long enough to cache.
fn auto_lifetimes(gaps: &[u32], sizes: RequestSizes) -> Lifetimes {
    let prefix = sizes.prefix >= MIN_CACHEABLE_TOKENS && hour_pays(gaps, sizes.prefix, 0);
    let weighed = if prefix {
        sizes.messages()
    } else {
        sizes.context
    };
    let messages = sizes.context >= MIN_CACHEABLE_TOKENS && hour_pays(gaps, weighed, sizes.new);
    match (prefix, messages) {
        (_, true) => Lifetimes::AllForAnHour,
        (true, false) => Lifetimes::PrefixForAnHour,
        (false, false) => Lifetimes::FiveMinutes,
    }
}

/// A request's size as the `auto` rule weighs it, in estimated tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestSizes {
    /// The stable prefix: the tools and both system blocks.
    pub prefix: u64,
    /// The whole request.
    pub context: u64,
    /// What follows the previous request's last message: what the request writes
    /// even when the cache is warm.
    pub new: u64,
}

impl RequestSizes {
    /// The messages part: what follows the stable prefix, and what the messages'
    /// entry holds beyond the prefix's.
    pub fn messages(&self) -> u64 {
        self.context.saturating_sub(self.prefix)
    }
}

/// The lifetimes of one request's breakpoints, in the orders the API accepts
/// (one-hour entries before five-minute ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Lifetimes {
    /// Every breakpoint five minutes (no `ttl`).
    #[default]
    FiveMinutes,
    /// The stable prefix's breakpoints an hour, the messages' five minutes.
    PrefixForAnHour,
    /// Every breakpoint an hour.
    AllForAnHour,
}

impl Lifetimes {
    /// The lifetime of the stable prefix's breakpoints.
    pub fn prefix(self) -> CacheTtl {
        match self {
            Lifetimes::FiveMinutes => CacheTtl::FiveMinutes,
            Lifetimes::PrefixForAnHour | Lifetimes::AllForAnHour => CacheTtl::OneHour,
        }
    }

    /// The lifetime of the messages' breakpoints.
    pub fn messages(self) -> CacheTtl {
        match self {
            Lifetimes::FiveMinutes | Lifetimes::PrefixForAnHour => CacheTtl::FiveMinutes,
            Lifetimes::AllForAnHour => CacheTtl::OneHour,
        }
    }

    /// How logs spell it: `5m`, `1h-prefix` or `1h`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifetimes::FiveMinutes => "5m",
            Lifetimes::PrefixForAnHour => "1h-prefix",
            Lifetimes::AllForAnHour => "1h",
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
/// part never gets an entry, so `auto` gives it none of an hour.
pub const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// Seconds after which a five-minute entry is gone.
pub const FIVE_MINUTES: u32 = 5 * 60;
/// Seconds after which a one-hour entry is gone.
pub const ONE_HOUR: u32 = 60 * 60;

/// The `auto` rule (see the module documentation): whether one-hour entries are
/// cheaper than five-minute ones for a part of `total` tokens of which `new` are
/// written by every request, over `gaps`: `(total - new) (23 n5 - 38 n60) > 15
/// new n`. No gap recorded: no.
pub fn hour_pays(gaps: &[u32], total: u64, new: u64) -> bool {
    let past = |limit: u32| gaps.iter().filter(|&&gap| gap >= limit).count() as i128;
    let (n, n5, n60) = (gaps.len() as i128, past(FIVE_MINUTES), past(ONE_HOUR));
    let old = i128::from(total.saturating_sub(new));
    n > 0 && old * (23 * n5 - 38 * n60) > 15 * i128::from(new) * n
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
mod tests;
