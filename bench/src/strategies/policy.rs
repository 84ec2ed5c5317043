//! The context policies a benchmark compares: what a request carries of the
//! conversation (`CONTEXT_POLICY`) and, for degrau, how long its cache entries
//! live (`CACHE_TTL`) and whether the pause fold runs (`PAUSE_FOLD`).

use serde::{Deserialize, Serialize};

/// What a request carries of the conversation (`CONTEXT_POLICY`), and, for
/// degrau, how long its cache entries live (`CACHE_TTL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    /// Every message of the session, every turn (five-minute entries).
    #[serde(rename = "full")]
    Full,
    /// The last `keep` messages, cut at a safe start, every turn (five-minute
    /// entries).
    #[serde(rename = "sliding")]
    Sliding,
    /// degrau: summary plus the window since the last step, every entry five
    /// minutes (`CACHE_TTL=5m`).
    #[serde(rename = "stepped")]
    Stepped,
    /// degrau with every breakpoint cached for an hour (`CACHE_TTL=1h`).
    #[serde(rename = "stepped-1h")]
    SteppedHour,
    /// degrau choosing the lifetimes per request from the gaps and the
    /// request's sizes (`CACHE_TTL=auto`), without the pause fold
    /// (`PAUSE_FOLD=off`): the policy before issue 28.
    #[serde(rename = "stepped-auto")]
    SteppedAuto,
    /// degrau under `CACHE_TTL=auto` with the pause fold (`PAUSE_FOLD=on`,
    /// the default): a pause past the cache entries' lifetime folds the window
    /// when the expected cost says so (`shared/src/pause_fold.rs`).
    #[serde(rename = "stepped-fold")]
    SteppedFold,
    /// degrau with the pause fold and every entry five minutes
    /// (`CACHE_TTL=5m`, `PAUSE_FOLD=on`): what `auto`'s one-hour entries cost
    /// or save beside the fold. Not in the default set.
    #[serde(rename = "stepped-5m-fold")]
    SteppedFiveFold,
}

impl Policy {
    /// All seven, in table order.
    pub const ALL: [Policy; 7] = [
        Policy::Full,
        Policy::Sliding,
        Policy::Stepped,
        Policy::SteppedHour,
        Policy::SteppedAuto,
        Policy::SteppedFold,
        Policy::SteppedFiveFold,
    ];

    /// What `--policies` runs when not given: all but `stepped-5m-fold`.
    pub const DEFAULT: [Policy; 6] = [
        Policy::Full,
        Policy::Sliding,
        Policy::Stepped,
        Policy::SteppedHour,
        Policy::SteppedAuto,
        Policy::SteppedFold,
    ];

    /// The `CONTEXT_POLICY` value.
    pub fn env_value(self) -> &'static str {
        match self {
            Policy::Full => "full",
            Policy::Sliding => "sliding",
            Policy::Stepped
            | Policy::SteppedHour
            | Policy::SteppedAuto
            | Policy::SteppedFold
            | Policy::SteppedFiveFold => "stepped",
        }
    }

    /// The `CACHE_TTL` value: full history and the sliding window are measured as
    /// a client that never asks for a `ttl` would send them.
    pub fn cache_ttl(self) -> &'static str {
        match self {
            Policy::Full | Policy::Sliding | Policy::Stepped | Policy::SteppedFiveFold => "5m",
            Policy::SteppedHour => "1h",
            Policy::SteppedAuto | Policy::SteppedFold => "auto",
        }
    }

    /// The `PAUSE_FOLD` value: on for the policies with the fold only.
    pub fn pause_fold(self) -> &'static str {
        match self {
            Policy::SteppedFold | Policy::SteppedFiveFold => "on",
            _ => "off",
        }
    }

    /// The name `--policies` takes.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Full => "full",
            Policy::Sliding => "sliding",
            Policy::Stepped => "stepped",
            Policy::SteppedHour => "stepped-1h",
            Policy::SteppedAuto => "stepped-auto",
            Policy::SteppedFold => "stepped-fold",
            Policy::SteppedFiveFold => "stepped-5m-fold",
        }
    }

    /// Whether this is degrau's steps (under any cache lifetime).
    pub fn is_stepped(self) -> bool {
        matches!(
            self,
            Policy::Stepped
                | Policy::SteppedHour
                | Policy::SteppedAuto
                | Policy::SteppedFold
                | Policy::SteppedFiveFold
        )
    }

    /// A label for tables and plots.
    pub fn label(self) -> &'static str {
        match self {
            Policy::Full => "full history",
            Policy::Sliding => "sliding window",
            Policy::Stepped => "degrau (5m)",
            Policy::SteppedHour => "degrau (1h)",
            Policy::SteppedAuto => "degrau (auto)",
            Policy::SteppedFold => "degrau (auto + fold)",
            Policy::SteppedFiveFold => "degrau (5m + fold)",
        }
    }

    /// Parses `full`, `sliding`, `stepped`, `stepped-1h`, `stepped-auto` or
    /// `stepped-fold`.
    pub fn parse(text: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraus_three_runs_differ_only_in_their_cache_ttl() {
        for policy in Policy::ALL {
            assert_eq!(Policy::parse(policy.name()), Some(policy));
            assert_eq!(
                serde_json::to_value(policy).unwrap(),
                serde_json::json!(policy.name())
            );
            degrau::plan::cache_ttl::CacheTtlPolicy::parse(policy.cache_ttl()).unwrap();
        }
        let stepped: Vec<(&str, &str)> = Policy::ALL
            .into_iter()
            .filter(|p| p.is_stepped())
            .map(|p| (p.env_value(), p.cache_ttl()))
            .collect();
        assert_eq!(
            stepped,
            [
                ("stepped", "5m"),
                ("stepped", "1h"),
                ("stepped", "auto"),
                ("stepped", "auto"),
                ("stepped", "5m")
            ]
        );
        let folds: Vec<Policy> = Policy::ALL
            .into_iter()
            .filter(|p| p.pause_fold() == "on")
            .collect();
        assert_eq!(folds, [Policy::SteppedFold, Policy::SteppedFiveFold]);
        assert!(!Policy::DEFAULT.contains(&Policy::SteppedFiveFold));
        assert_eq!(Policy::Full.cache_ttl(), "5m");
        assert_eq!(Policy::Sliding.cache_ttl(), "5m");
        assert_eq!(Policy::parse("stepped-2h"), None);
    }
}
