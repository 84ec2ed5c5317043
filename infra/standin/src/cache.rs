//! The prompt-caching simulation, following the documented behaviour (see
//! `NOTES-ANTHROPIC.md`):
//!
//! - a write happens only at a breakpoint, keyed by the hash of the whole prefix up
//!   to it;
//! - a read looks back from each breakpoint over at most 20 positions (the
//!   breakpoint itself and the 19 before it) for a prefix already written, and the
//!   longest hit over all breakpoints wins;
//! - the last breakpoint, and any earlier breakpoint past the read point, write;
//!   creation counts the tokens from the end of the read prefix to the last
//!   breakpoint, and `input_tokens` what follows the last breakpoint;
//! - a prefix under the minimum cacheable size is neither written nor read, and no
//!   error is raised;
//! - an entry lives five minutes from its last use (write or read).
//!
//! Time is milliseconds of the stand-in's own clock, which tests can advance.

use std::collections::HashMap;

use degrau::usage::Usage;

use crate::prompt::{PrefixHash, Prompt};

/// How far back a read looks from each breakpoint, the breakpoint included.
pub const LOOKBACK: usize = 20;

/// Lifetime of an entry after its last use: five minutes.
pub const TTL_MS: u64 = 5 * 60 * 1000;

/// Written prefixes and when they expire.
#[derive(Debug, Default, Clone)]
pub struct Cache {
    entries: HashMap<PrefixHash, u64>,
}

impl Cache {
    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of live entries at `now_ms`.
    pub fn live_entries(&self, now_ms: u64) -> usize {
        self.entries.values().filter(|&&e| e > now_ms).count()
    }

    /// Accounts one request at `now_ms`: reads and refreshes what it finds, writes
    /// its breakpoints, and returns the input side of `usage` (`output_tokens` 0).
    /// The three input fields always add up to the prompt's tokens.
    pub fn account(&mut self, prompt: &Prompt, now_ms: u64, min_tokens: u64) -> Usage {
        self.entries.retain(|_, expiry| *expiry > now_ms);
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
        let breakpoints: Vec<usize> = positions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.breakpoint)
            .map(|(i, _)| i)
            .collect();
        let cacheable = |i: usize| cumulative[i] >= min_tokens;

        let Some(&last) = breakpoints.last() else {
            return Usage {
                input_tokens: total,
                ..Usage::default()
            };
        };
        if !cacheable(last) {
            // Every earlier prefix is shorter still: nothing to read or write.
            return Usage {
                input_tokens: total,
                ..Usage::default()
            };
        }

        let read_end = breakpoints
            .iter()
            .filter_map(|&b| {
                (b.saturating_sub(LOOKBACK - 1)..=b)
                    .rev()
                    .find(|&j| cacheable(j) && self.entries.contains_key(&positions[j].prefix_hash))
            })
            .max();
        let read = read_end.map_or(0, |r| cumulative[r]);
        if let Some(r) = read_end {
            self.entries
                .insert(positions[r].prefix_hash, now_ms + TTL_MS);
        }
        for &b in &breakpoints {
            if read_end.is_none_or(|r| b > r) && cacheable(b) {
                self.entries
                    .insert(positions[b].prefix_hash, now_ms + TTL_MS);
            }
        }
        Usage {
            input_tokens: total - cumulative[last],
            cache_creation_input_tokens: cumulative[last] - read,
            cache_read_input_tokens: read,
            output_tokens: 0,
            cache_creation: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Position;

    /// A prompt from (tokens, breakpoint) pairs; position hashes are just their
    /// index, as if every request shared one growing prefix.
    fn prompt(spec: &[(u64, bool)]) -> Prompt {
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

    fn usage(input: u64, creation: u64, read: u64) -> Usage {
        Usage {
            input_tokens: input,
            cache_creation_input_tokens: creation,
            cache_read_input_tokens: read,
            output_tokens: 0,
            cache_creation: None,
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
    fn no_breakpoint_means_all_input() {
        let mut cache = Cache::default();
        let p = prompt(&[(5000, false), (5, false)]);
        assert_eq!(cache.account(&p, 0, 1024), usage(5005, 0, 0));
    }
}
