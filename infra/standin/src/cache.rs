//! The prompt-caching simulation, following the documented behaviour (see
//! `NOTES-ANTHROPIC.md`):
//!
//! - a write happens only at a breakpoint, keyed by the hash of the whole prefix up
//!   to it, with the breakpoint's lifetime (`ttl`: five minutes unless `"1h"`);
//! - a read looks back from each breakpoint over at most 20 positions (the
//!   breakpoint itself and the 19 before it) for a prefix already written, and the
//!   longest hit over all breakpoints wins;
//! - every entry a breakpoint's look-back finds is used: it lives its own lifetime
//!   again from now (a five-minute entry found by a one-hour breakpoint stays a
//!   five-minute entry);
//! - the breakpoints past the read point write; creation counts the tokens from the
//!   end of the read prefix to the last breakpoint, and `input_tokens` what follows
//!   it;
//! - creation is split the way the API bills mixed lifetimes: with A the read
//!   prefix, B the prefix up to the last one-hour breakpoint past A (A when there is
//!   none) and C the prefix up to the last breakpoint, B − A tokens are one-hour
//!   writes and C − B five-minute ones (`usage.cache_creation`);
//! - a prefix under the minimum cacheable size is neither written nor read, and no
//!   error is raised.
//!
//! Time is milliseconds of the stand-in's own clock, which tests and benchmarks
//! move (`POST /stand-in/clock`); nothing here waits.

use std::collections::HashMap;

use crate::prompt::{Position, PrefixHash, Prompt, Ttl};
use crate::wire::{CacheCreation, Usage};

/// How far back a read looks from each breakpoint, the breakpoint included.
pub const LOOKBACK: usize = 20;

/// Lifetime of a five-minute entry after its last use.
pub const TTL_MS: u64 = 5 * 60 * 1000;

/// One written prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// When it expires, unless used again before.
    expires_ms: u64,
    /// Its lifetime, renewed by each use.
    ttl: Ttl,
}

/// Written prefixes and when they expire.
#[derive(Debug, Default, Clone)]
pub struct Cache {
    entries: HashMap<PrefixHash, Entry>,
}

impl Cache {
    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of live entries at `now_ms`.
    pub fn live_entries(&self, now_ms: u64) -> usize {
        self.entries
            .values()
            .filter(|e| e.expires_ms > now_ms)
            .count()
    }

    /// Accounts one request at `now_ms`: reads and refreshes what it finds, writes
    /// its breakpoints, and returns the input side of `usage` (`output_tokens` 0),
    /// with the creation split (as the API reports it). The three input
    /// fields always add up to the prompt's tokens.
    pub fn account(&mut self, prompt: &Prompt, now_ms: u64, min_tokens: u64) -> Usage {
        self.entries.retain(|_, entry| entry.expires_ms > now_ms);
        let positions = prompt.positions();
        let total = prompt.total_tokens();
        // cumulative[i] = tokens of positions 0..=i.
        let cumulative: Vec<u64> = positions
            .iter()
            .scan(0u64, |sum, p| {
                *sum += p.tokens;
                Some(*sum)
            })
            .collect();
        let breakpoints: Vec<(usize, Ttl)> = positions
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.breakpoint.map(|ttl| (i, ttl)))
            .collect();
        let cacheable = |i: usize| cumulative[i] >= min_tokens;
        let uncached = Usage {
            input_tokens: total,
            ..Usage::default()
        };

        let Some(&(last, _)) = breakpoints.last() else {
            return uncached;
        };
        if !cacheable(last) {
            // Every earlier prefix is shorter still: nothing to read or write.
            return uncached;
        }

        let read_end = self.read(positions, &breakpoints, &cacheable, now_ms);
        let written: Vec<(usize, Ttl)> = breakpoints
            .iter()
            .copied()
            .filter(|&(b, _)| read_end.is_none_or(|r| b > r))
            .collect();
        self.write(positions, &written, &cacheable, now_ms);
        let read = read_end.map_or(0, |r| cumulative[r]);
        let one_hour_end = written
            .iter()
            .filter(|&&(_, ttl)| ttl == Ttl::OneHour)
            .map(|&(b, _)| cumulative[b])
            .max()
            .unwrap_or(read);
        Usage {
            input_tokens: total - cumulative[last],
            cache_creation_input_tokens: cumulative[last] - read,
            cache_read_input_tokens: read,
            output_tokens: 0,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: cumulative[last] - one_hour_end,
                ephemeral_1h_input_tokens: one_hour_end - read,
            },
        }
    }

    /// Looks back from each breakpoint for the latest cacheable prefix already
    /// written, renews every entry found, and returns where the longest read ends.
    fn read(
        &mut self,
        positions: &[Position],
        breakpoints: &[(usize, Ttl)],
        cacheable: &dyn Fn(usize) -> bool,
        now_ms: u64,
    ) -> Option<usize> {
        let hits: Vec<usize> = breakpoints
            .iter()
            .filter_map(|&(b, _)| {
                (b.saturating_sub(LOOKBACK - 1)..=b)
                    .rev()
                    .find(|&j| cacheable(j) && self.entries.contains_key(&positions[j].prefix_hash))
            })
            .collect();
        for &hit in &hits {
            if let Some(entry) = self.entries.get_mut(&positions[hit].prefix_hash) {
                entry.expires_ms = now_ms + entry.ttl.ms();
            }
        }
        hits.iter().copied().max()
    }

    /// Writes each cacheable breakpoint of `written` with its lifetime.
    fn write(
        &mut self,
        positions: &[Position],
        written: &[(usize, Ttl)],
        cacheable: &dyn Fn(usize) -> bool,
        now_ms: u64,
    ) {
        for &(b, ttl) in written.iter().filter(|&&(b, _)| cacheable(b)) {
            self.entries.insert(
                positions[b].prefix_hash,
                Entry {
                    expires_ms: now_ms + ttl.ms(),
                    ttl,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Option<Ttl> = Some(Ttl::OneHour);
    const M: Option<Ttl> = Some(Ttl::FiveMinutes);
    const MINUTE: u64 = 60_000;

    /// A prompt from (tokens, breakpoint) pairs, every breakpoint a five-minute
    /// one; position hashes are just their index, as if every request shared one
    /// growing prefix.
    fn prompt(spec: &[(u64, bool)]) -> Prompt {
        let spec: Vec<(u64, Option<Ttl>)> = spec
            .iter()
            .map(|&(tokens, marked)| (tokens, marked.then_some(Ttl::FiveMinutes)))
            .collect();
        prompt_ttl(&spec)
    }

    /// A prompt from (tokens, breakpoint lifetime) pairs.
    fn prompt_ttl(spec: &[(u64, Option<Ttl>)]) -> Prompt {
        let positions: Vec<Position> = spec
            .iter()
            .enumerate()
            .map(|(i, &(tokens, breakpoint))| {
                let mut prefix_hash = [0u8; 32];
                prefix_hash[..8].copy_from_slice(&(i as u64).to_le_bytes());
                Position {
                    tokens,
                    prefix_hash,
                    breakpoint,
                }
            })
            .collect();
        Prompt::from_positions(positions)
    }

    /// Usage whose writes are all five-minute ones.
    fn usage(input: u64, creation: u64, read: u64) -> Usage {
        split(input, creation, 0, read)
    }

    /// Usage with five-minute and one-hour writes.
    fn split(input: u64, five_minutes: u64, one_hour: u64, read: u64) -> Usage {
        Usage {
            input_tokens: input,
            cache_creation_input_tokens: five_minutes + one_hour,
            cache_read_input_tokens: read,
            output_tokens: 0,
            cache_creation: CacheCreation {
                ephemeral_5m_input_tokens: five_minutes,
                ephemeral_1h_input_tokens: one_hour,
            },
        }
    }

    #[test]
    fn writes_then_reads_the_same_prefix() {
        let mut cache = Cache::default();
        let p = prompt(&[(600, true), (600, false), (100, true), (7, false)]);
        assert_eq!(cache.account(&p, 0, 1024), usage(7, 1300, 0));
        assert_eq!(cache.account(&p, 1, 1024), usage(7, 0, 1300));
    }

    #[test]
    fn the_next_turn_reads_the_old_prefix_and_writes_only_the_new_part() {
        let mut cache = Cache::default();
        let first = prompt(&[(1100, true), (50, true)]);
        cache.account(&first, 0, 1024);
        let next = prompt(&[(1100, true), (50, true), (30, false), (20, true)]);
        assert_eq!(cache.account(&next, 10, 1024), usage(0, 50, 1150));
    }

    #[test]
    fn a_short_prefix_is_never_cached() {
        let mut cache = Cache::default();
        let p = prompt(&[(500, true), (500, true), (3, false)]);
        assert_eq!(cache.account(&p, 0, 1024), usage(1003, 0, 0));
        assert_eq!(cache.account(&p, 1, 1024), usage(1003, 0, 0));
        assert_eq!(cache.live_entries(1), 0);
    }

    #[test]
    fn entries_expire_five_minutes_after_their_last_use() {
        let mut cache = Cache::default();
        let p = prompt(&[(2000, true)]);
        cache.account(&p, 0, 1024);
        assert_eq!(cache.account(&p, TTL_MS - 1, 1024), usage(0, 0, 2000));
        // The read refreshed it.
        assert_eq!(cache.account(&p, 2 * TTL_MS - 2, 1024), usage(0, 0, 2000));
        assert_eq!(cache.account(&p, 4 * TTL_MS, 1024), usage(0, 2000, 0));
    }

    #[test]
    fn a_read_looks_back_twenty_positions_at_most() {
        let mut cache = Cache::default();
        let mut spec = vec![(1100, true)];
        cache.account(&prompt(&spec), 0, 1024);
        // 19 more positions: the old write is the 20th looking back. A hit.
        spec[0].1 = false;
        spec.extend(std::iter::repeat_n((1, false), 18));
        spec.push((1, true));
        assert_eq!(cache.account(&prompt(&spec), 1, 1024), usage(0, 19, 1100));

        let mut cache = Cache::default();
        cache.account(&prompt(&[(1100, true)]), 0, 1024);
        let mut far = vec![(1100, false)];
        far.extend(std::iter::repeat_n((1, false), 19));
        far.push((1, true));
        assert_eq!(cache.account(&prompt(&far), 1, 1024), usage(0, 1120, 0));
        // An earlier breakpoint marking the old end rescues it.
        let mut cache = Cache::default();
        cache.account(&prompt(&[(1100, true)]), 0, 1024);
        far[0].1 = true;
        assert_eq!(cache.account(&prompt(&far), 1, 1024), usage(0, 20, 1100));
    }

    #[test]
    fn one_hour_entries_outlive_five_minute_ones() {
        let mut cache = Cache::default();
        // A stable prefix marked for an hour, then the conversation for five minutes.
        let p = prompt_ttl(&[(2000, H), (500, M), (9, None)]);
        assert_eq!(cache.account(&p, 0, 1024), split(9, 500, 2000, 0));
        // Six minutes later only the one-hour entry is left.
        assert_eq!(cache.account(&p, 6 * MINUTE, 1024), split(9, 500, 0, 2000));
        // 61 minutes without a request: both are gone.
        assert_eq!(cache.account(&p, 67 * MINUTE, 1024), split(9, 500, 2000, 0));
        assert_eq!(cache.live_entries(67 * MINUTE), 2);
    }

    #[test]
    fn a_hit_renews_an_entry_for_its_own_lifetime() {
        let mut cache = Cache::default();
        let hour = prompt_ttl(&[(2000, H)]);
        cache.account(&hour, 0, 1024);
        // Used at 50 minutes, it lives until 110.
        assert_eq!(
            cache.account(&hour, 50 * MINUTE, 1024),
            split(0, 0, 0, 2000)
        );
        assert_eq!(
            cache.account(&hour, 109 * MINUTE, 1024),
            split(0, 0, 0, 2000)
        );
        assert_eq!(cache.live_entries(168 * MINUTE), 1);
        assert_eq!(cache.live_entries(169 * MINUTE + 1), 0);

        // A five-minute entry found by a one-hour breakpoint stays a five-minute one.
        let mut cache = Cache::default();
        cache.account(&prompt_ttl(&[(2000, M)]), 0, 1024);
        assert_eq!(cache.account(&hour, 4 * MINUTE, 1024), split(0, 0, 0, 2000));
        assert_eq!(cache.live_entries(9 * MINUTE - 1), 1);
        assert_eq!(cache.live_entries(9 * MINUTE), 0);
        assert_eq!(
            cache.account(&hour, 10 * MINUTE, 1024),
            split(0, 0, 2000, 0)
        );
    }

    #[test]
    fn every_entry_a_breakpoint_finds_is_renewed() {
        let mut cache = Cache::default();
        let first = prompt_ttl(&[(1500, H), (300, M)]);
        cache.account(&first, 0, 1024);
        // The next request reads the longer prefix; its look-back from the first
        // breakpoint finds the one-hour entry too, which is renewed as well.
        let next = prompt_ttl(&[(1500, H), (300, None), (40, M)]);
        assert_eq!(
            cache.account(&next, 4 * MINUTE, 1024),
            split(0, 40, 0, 1800)
        );
        // Written at 0, it would have gone at 60 minutes; renewed at 4, it is there
        // at 63.
        assert_eq!(
            cache.account(&prompt_ttl(&[(1500, H), (1, M)]), 63 * MINUTE, 1024),
            split(0, 1, 0, 1500)
        );
    }

    #[test]
    fn mixed_lifetimes_are_billed_from_the_read_to_the_last_one_hour_breakpoint_and_on() {
        let mut cache = Cache::default();
        // A = 0, B = 1,400 (the second one-hour breakpoint), C = 1,650.
        let p = prompt_ttl(&[(1100, H), (300, H), (200, M), (50, M), (5, None)]);
        assert_eq!(cache.account(&p, 0, 1024), split(5, 250, 1400, 0));
        // The same request again reads it all.
        assert_eq!(cache.account(&p, MINUTE, 1024), split(5, 0, 0, 1650));
        // Past five minutes: A = 1,400 (the one-hour entry), no one-hour breakpoint
        // after it, so B = A and the rest are five-minute writes.
        assert_eq!(cache.account(&p, 7 * MINUTE, 1024), split(5, 250, 0, 1400));
        let usage = cache.account(&p, 8 * MINUTE, 1024);
        assert_eq!(usage.context_tokens(), 1655);
        let split_sum = usage.cache_creation;
        assert_eq!(
            split_sum.ephemeral_5m_input_tokens + split_sum.ephemeral_1h_input_tokens,
            usage.cache_creation_input_tokens
        );
    }

    #[test]
    fn no_breakpoint_means_all_input() {
        let mut cache = Cache::default();
        let p = prompt(&[(5000, false), (5, false)]);
        assert_eq!(cache.account(&p, 0, 1024), usage(5005, 0, 0));
    }
}
