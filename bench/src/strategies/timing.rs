//! Timing profiles: how long the customer takes before each message. Between two
//! turns the benchmark moves the stand-in's cache clock by the drawn gap
//! (`POST /stand-in/clock`, the stand-in started with `--clock manual`), so a week
//! of pauses plays in minutes and nothing sleeps.
//!
//! - **no pauses**: every gap is 0, the benchmark's runs before timing profiles
//!   existed (a live chat whose cache never expires);
//! - **messaging**: each gap drawn, seeded, from [`MESSAGING`]: a burst (the
//!   customer adds a line within seconds), a reply within minutes (some past the
//!   five-minute cache), a pause of 10 to 60 minutes (lunch, a meeting), or a
//!   next-day return;
//! - **every N s**: the same gap before every turn (`--gap-seconds`).
//!
//! Next-day returns are drawn between 14 and 22 hours: the evening's customer
//! writes again the next morning or afternoon, within degrau's default session
//! idle timeout (`SESSION_IDLE_MINUTES`, 24 hours). The functions' session clock
//! is their own system clock, which the benchmark does not move: every session
//! stays open for all three strategies, as it would in a deployment with the
//! default timeout. A longer gap would have closed degrau's session (the next
//! message then starts from the facts alone, a small context), so keeping it open
//! is the conservative choice for degrau.

use fastrand::Rng;
use serde::Serialize;

/// What kind of gap a draw gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapKind {
    /// Another line within seconds.
    Burst,
    /// An answer within minutes.
    Reply,
    /// 10 to 60 minutes away.
    Pause,
    /// Back the next day.
    NextDay,
}

/// One kind of gap: its share of the draws and its range, drawn uniformly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GapShare {
    /// The kind.
    pub kind: GapKind,
    /// Percent of the gaps.
    pub percent: u32,
    /// Shortest gap, seconds.
    pub min_seconds: u64,
    /// Longest gap, seconds.
    pub max_seconds: u64,
}

/// The messaging profile's distribution; the shares add up to 100.
pub const MESSAGING: [GapShare; 4] = [
    GapShare {
        kind: GapKind::Burst,
        percent: 55,
        min_seconds: 5,
        max_seconds: 60,
    },
    GapShare {
        kind: GapKind::Reply,
        percent: 25,
        min_seconds: 60,
        max_seconds: 8 * 60,
    },
    GapShare {
        kind: GapKind::Pause,
        percent: 15,
        min_seconds: 10 * 60,
        max_seconds: 60 * 60,
    },
    GapShare {
        kind: GapKind::NextDay,
        percent: 5,
        min_seconds: 14 * 3600,
        max_seconds: 22 * 3600,
    },
];

/// The next-day profile's distribution: customers who often answer the next
/// day (a clinic's patients checking their calendar, a shop's customers after
/// work). The same kinds and ranges as [`MESSAGING`], with next-day returns six
/// times as common; the shares add up to 100.
pub const NEXT_DAY: [GapShare; 4] = [
    GapShare {
        percent: 35,
        ..MESSAGING[0]
    },
    GapShare {
        percent: 20,
        ..MESSAGING[1]
    },
    GapShare {
        percent: 15,
        ..MESSAGING[2]
    },
    GapShare {
        percent: 30,
        ..MESSAGING[3]
    },
];

/// A timing profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "name")]
pub enum Profile {
    /// Every gap 0.
    NoPauses,
    /// Gaps drawn from [`MESSAGING`].
    Messaging,
    /// Gaps drawn from [`NEXT_DAY`].
    NextDay,
    /// The same gap before every turn.
    Every {
        /// The gap, seconds.
        seconds: u64,
    },
}

impl Profile {
    /// Parses `none`, `messaging` or `every:N` (N seconds).
    pub fn parse(text: &str) -> Option<Profile> {
        match text {
            "none" | "no-pauses" => Some(Profile::NoPauses),
            "messaging" => Some(Profile::Messaging),
            "next-day" => Some(Profile::NextDay),
            other => other
                .strip_prefix("every:")
                .and_then(|n| n.parse().ok())
                .map(|seconds| Profile::Every { seconds }),
        }
    }

    /// A short name for files and the command line.
    pub fn slug(self) -> String {
        match self {
            Profile::NoPauses => "no-pauses".into(),
            Profile::Messaging => "messaging".into(),
            Profile::NextDay => "next-day".into(),
            Profile::Every { seconds } => format!("every-{seconds}s"),
        }
    }

    /// A label for tables.
    pub fn label(self) -> String {
        match self {
            Profile::NoPauses => "no pauses".into(),
            Profile::Messaging => "messaging".into(),
            Profile::NextDay => "next-day".into(),
            Profile::Every { seconds } => format!("every {seconds} s"),
        }
    }

    /// What it draws from, in words (for the results).
    pub fn describe(self) -> String {
        match self {
            Profile::NoPauses => "no time between turns: the cache never expires".into(),
            Profile::Every { seconds } => format!("{seconds} s before every turn"),
            Profile::Messaging | Profile::NextDay => {
                let parts: Vec<String> = self
                    .shares()
                    .iter()
                    .map(|s| {
                        format!(
                            "{} % {} ({}–{})",
                            s.percent,
                            match s.kind {
                                GapKind::Burst => "bursts",
                                GapKind::Reply => "replies",
                                GapKind::Pause => "pauses",
                                GapKind::NextDay => "next-day returns",
                            },
                            duration(s.min_seconds),
                            duration(s.max_seconds)
                        )
                    })
                    .collect();
                format!(
                    "each gap drawn uniformly within its kind, seeded: {}",
                    parts.join(", ")
                )
            }
        }
    }

    /// The distribution a drawn profile draws from (none for the others).
    pub fn shares(self) -> &'static [GapShare] {
        match self {
            Profile::Messaging => &MESSAGING,
            Profile::NextDay => &NEXT_DAY,
            Profile::NoPauses | Profile::Every { .. } => &[],
        }
    }

    /// The gap before each of `turns` turns (the first is 0), seeded.
    pub fn gaps(self, turns: usize, seed: u64) -> Vec<Gap> {
        let mut rng = Rng::with_seed(seed ^ TIMING_SEED);
        let none = |seconds| Gap {
            seconds,
            kind: None,
        };
        (0..turns)
            .map(|turn| match self {
                _ if turn == 0 => none(0),
                Profile::NoPauses => none(0),
                Profile::Every { seconds } => none(seconds),
                Profile::Messaging | Profile::NextDay => draw(&mut rng, self.shares()),
            })
            .collect()
    }
}

/// Mixed into the conversation's seed, so the gaps do not follow the texts' draws.
const TIMING_SEED: u64 = 0x7469_6d69_6e67; // "timing"

/// The time before one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gap {
    /// Seconds since the previous turn.
    pub seconds: u64,
    /// The kind drawn (none outside the messaging profile).
    pub kind: Option<GapKind>,
}

fn draw(rng: &mut Rng, shares: &[GapShare]) -> Gap {
    let mut pick = rng.u32(0..100);
    for share in shares {
        if pick < share.percent {
            return Gap {
                seconds: rng.u64(share.min_seconds..=share.max_seconds),
                kind: Some(share.kind),
            };
        }
        pick -= share.percent;
    }
    // The shares add up to 100 (a test holds it), so this is never reached.
    Gap {
        seconds: 0,
        kind: None,
    }
}

/// `45 s`, `8 min`, `14 h`.
pub fn duration(seconds: u64) -> String {
    if seconds >= 3600 && seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// How a run's gaps fell: counts per kind, total simulated time, and how many
/// gaps passed five minutes and one hour (each one expires every entry of that
/// lifetime).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GapSummary {
    /// Bursts drawn.
    pub bursts: usize,
    /// Replies drawn.
    pub replies: usize,
    /// Pauses drawn.
    pub pauses: usize,
    /// Next-day returns drawn.
    pub next_day: usize,
    /// Gaps longer than five minutes.
    pub over_5_minutes: usize,
    /// Gaps longer than an hour.
    pub over_1_hour: usize,
    /// Simulated time from the first turn to the last, seconds.
    pub total_seconds: u64,
}

impl GapSummary {
    /// Summarises `gaps`.
    pub fn of(gaps: &[Gap]) -> GapSummary {
        let count = |kind: GapKind| gaps.iter().filter(|g| g.kind == Some(kind)).count();
        GapSummary {
            bursts: count(GapKind::Burst),
            replies: count(GapKind::Reply),
            pauses: count(GapKind::Pause),
            next_day: count(GapKind::NextDay),
            over_5_minutes: gaps.iter().filter(|g| g.seconds > 300).count(),
            over_1_hour: gaps.iter().filter(|g| g.seconds > 3600).count(),
            total_seconds: gaps.iter().map(|g| g.seconds).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_one_hundred_and_the_ranges_are_ordered() {
        assert_eq!(MESSAGING.iter().map(|s| s.percent).sum::<u32>(), 100);
        assert_eq!(NEXT_DAY.iter().map(|s| s.percent).sum::<u32>(), 100);
        assert!(NEXT_DAY.iter().all(|s| s.max_seconds < 24 * 3600));
        let next_day = GapSummary::of(&Profile::NextDay.gaps(10_001, 3)[1..]);
        assert!((2_800..3_200).contains(&next_day.next_day), "{next_day:?}");
        assert_eq!(Profile::parse("next-day"), Some(Profile::NextDay));
        assert!(MESSAGING.iter().all(|s| s.min_seconds <= s.max_seconds));
        // Next-day returns stay within degrau's default idle timeout (24 h): the
        // sessions the benchmark keeps open would stay open in a deployment too.
        assert!(MESSAGING.iter().all(|s| s.max_seconds < 24 * 3600));
    }

    #[test]
    fn the_same_seed_gives_the_same_gaps_and_another_seed_others() {
        let a = Profile::Messaging.gaps(200, 2026);
        assert_eq!(a, Profile::Messaging.gaps(200, 2026));
        assert_ne!(a, Profile::Messaging.gaps(200, 2027));
        assert_eq!(a[0].seconds, 0);
        // A longer conversation starts with the same gaps.
        assert_eq!(&Profile::Messaging.gaps(1000, 2026)[..200], &a[..]);
    }

    #[test]
    fn the_stated_shares_hold_over_many_draws() {
        let gaps = Profile::Messaging.gaps(100_001, 7);
        let summary = GapSummary::of(&gaps[1..]);
        let drawn = 100_000.0;
        for (count, share) in [
            (summary.bursts, &MESSAGING[0]),
            (summary.replies, &MESSAGING[1]),
            (summary.pauses, &MESSAGING[2]),
            (summary.next_day, &MESSAGING[3]),
        ] {
            let observed = count as f64 / drawn * 100.0;
            assert!(
                (observed - f64::from(share.percent)).abs() < 1.0,
                "{:?}: {observed:.2} % drawn, {} % stated",
                share.kind,
                share.percent
            );
        }
        for gap in &gaps[1..] {
            let share = MESSAGING
                .iter()
                .find(|s| Some(s.kind) == gap.kind)
                .expect("a kind");
            assert!((share.min_seconds..=share.max_seconds).contains(&gap.seconds));
        }
    }

    #[test]
    fn no_pauses_and_fixed_gaps() {
        assert!(
            Profile::NoPauses
                .gaps(50, 1)
                .iter()
                .all(|g| g.seconds == 0 && g.kind.is_none())
        );
        let every = Profile::Every { seconds: 600 }.gaps(3, 1);
        assert_eq!(
            every.iter().map(|g| g.seconds).collect::<Vec<_>>(),
            [0, 600, 600]
        );
        assert_eq!(
            Profile::parse("every:600"),
            Some(Profile::Every { seconds: 600 })
        );
        assert_eq!(Profile::parse("none"), Some(Profile::NoPauses));
        assert_eq!(Profile::parse("messaging"), Some(Profile::Messaging));
        assert_eq!(Profile::parse("often"), None);
    }

    #[test]
    fn a_summary_counts_kinds_and_long_gaps() {
        let gaps = [
            Gap {
                seconds: 0,
                kind: None,
            },
            Gap {
                seconds: 400,
                kind: Some(GapKind::Reply),
            },
            Gap {
                seconds: 50_000,
                kind: Some(GapKind::NextDay),
            },
        ];
        let summary = GapSummary::of(&gaps);
        assert_eq!(
            (summary.replies, summary.next_day, summary.bursts),
            (1, 1, 0)
        );
        assert_eq!((summary.over_5_minutes, summary.over_1_hour), (2, 1));
        assert_eq!(summary.total_seconds, 50_400);
        assert_eq!(duration(14 * 3600), "14 h");
        assert_eq!(duration(480), "8 min");
        assert_eq!(duration(5), "5 s");
    }
}
