use super::*;

const MINUTE: u32 = 60;
const HOUR: u32 = 3600;
const DAY_IDLE: u64 = 24 * 60;

/// The expected cost of folding minus not folding, in base input tokens of the
/// answer model, evaluated in floating point from the module documentation's
/// terms: negative when the fold pays.
fn fold_minus_keep(sizes: FoldSizes, p: f64) -> f64 {
    let k = SUMMARY_PRICE_RATIO.0 as f64 / SUMMARY_PRICE_RATIO.1 as f64;
    let w = if sizes.hour { 2.0 } else { 1.25 };
    let new_summary = sizes.summary.max(MIN_SUMMARY_TOKENS) as f64;
    // One more summary request; its folded messages only if no step follows.
    let request = SUMMARY_INSTRUCTION_TOKENS as f64 + sizes.summary as f64 + 5.0 * new_summary;
    let fold = k * request + (1.0 - p) * k * sizes.folded as f64;
    // The resume writes C without the fold, C' with it, if it comes.
    let resume_without = p * w * sizes.context as f64;
    let resume_with = p * w * sizes.after.min(sizes.context) as f64;
    fold + resume_with - resume_without
}

#[test]
fn the_integer_rule_is_the_expected_cost_of_folding_against_keeping() {
    for context in [1_500u64, 3_000, 5_000, 8_000, 20_000] {
        for after in [1_000u64, 2_000, 2_500, 4_000] {
            for summary in [0u64, 100, 400, 800] {
                for folded in [500u64, 2_000, 6_000] {
                    for chance in [(1u64, 2u64), (1, 10), (9, 10), (3, 4), (0, 1), (1, 1)] {
                        for hour in [false, true] {
                            let sizes = FoldSizes {
                                context,
                                after,
                                summary,
                                folded,
                                hour,
                            };
                            let p = chance.0 as f64 / chance.1 as f64;
                            let margin = fold_minus_keep(sizes, p);
                            if margin.abs() < 1e-6 {
                                continue;
                            }
                            assert_eq!(
                                fold_pays(sizes, chance),
                                margin < 0.0,
                                "{sizes:?}, p {p}: fold − keep = {margin}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_large_window_folds_a_small_one_does_not() {
    let even = (1, 2);
    // degrau's mean context on the benchmark, folded down to a kept window,
    // after five-minute entries, by a contact as likely to return as not.
    let typical = FoldSizes {
        context: 6_000,
        after: 3_000,
        summary: 500,
        folded: 3_500,
        hour: false,
    };
    // Saves ½ · 1.25 · 3,000 = 1,875; costs (500 + 500 + 2,500) / 3 + ½ · 3,500 / 3 ≈ 1,750.
    assert!(fold_pays(typical, even));
    // After an hour's entries the resume would write at 2×: more to save.
    let close = FoldSizes {
        after: 3_400,
        ..typical
    };
    assert!(!fold_pays(close, even));
    assert!(fold_pays(
        FoldSizes {
            hour: true,
            ..close
        },
        even
    ));
    // A window barely past what a step keeps: the summary request costs more.
    let small = FoldSizes {
        context: 3_000,
        after: 2_600,
        summary: 500,
        folded: 700,
        hour: true,
    };
    assert!(!fold_pays(small, (9, 10)));
    // Nothing to take off: never.
    let nothing = FoldSizes {
        after: 6_000,
        ..typical
    };
    assert!(!fold_pays(nothing, (1, 1)));
    // A contact unlikely to come back within the session.
    assert!(!fold_pays(typical, (1, 10)));
}

#[test]
fn the_chance_of_a_return_comes_from_the_gaps_as_long_as_the_silence() {
    // No gap as long: one half.
    assert_eq!(return_chance(&[30, 40], 600, DAY_IDLE), (1, 2));
    assert_eq!(return_chance(&[], 600, DAY_IDLE), (1, 2));
    // Three pauses and a next-day return, all within the day: 5 in 6.
    let gaps = [30, 20 * MINUTE, 40 * MINUTE, 18 * HOUR, 50 * MINUTE, 10];
    assert_eq!(return_chance(&gaps, 600, DAY_IDLE), (5, 6));
    // Past the pauses, only the next-day return is as long: 2 in 3.
    assert_eq!(return_chance(&gaps, 2 * 3600, DAY_IDLE), (2, 3));
    // Gaps past the idle timeout count as absences: a one-hour timeout.
    assert_eq!(return_chance(&gaps, 600, 60), (4, 6));
}

#[test]
fn the_fold_is_due_only_once_every_entry_is_gone_and_before_the_session_idles() {
    let at = 1_000_000;
    // Five-minute entries: due five minutes after the round.
    assert_eq!(
        fold_due_at(true, at, false, 6_000, 1_024),
        Some(at + i64::from(FIVE_MINUTES))
    );
    // A one-hour entry: due an hour after, so a ten-minute pause never folds.
    let hour = fold_due_at(true, at, true, 6_000, 1_024);
    assert_eq!(hour, Some(at + i64::from(ONE_HOUR)));
    assert!(!fold_window(hour, at, at + 10 * 60, DAY_IDLE));
    assert!(!fold_window(hour, at, at + 3_599, DAY_IDLE));
    assert!(fold_window(hour, at, at + 3_600, DAY_IDLE));
    // Off, or nothing past the keep: never due.
    assert_eq!(fold_due_at(false, at, false, 6_000, 1_024), None);
    assert_eq!(fold_due_at(true, at, false, 1_024, 1_024), None);
    assert!(!fold_window(None, at, at + 3_600, DAY_IDLE));
    // An idle session closes at the next message: no fold.
    let five = fold_due_at(true, at, false, 6_000, 1_024);
    assert!(fold_window(five, at, at + 300, 60));
    assert!(!fold_window(five, at, at + 3_600, 60));
}

#[test]
fn the_fold_keeps_less_for_a_contact_likely_away_past_the_hour() {
    let policy = CompactionPolicy {
        keep_messages: 12,
        fold_keep_messages: 4,
        ..CompactionPolicy::default()
    };
    let ten_minutes = 600;
    // Back the next day more often than within the hour: the fold's keep.
    let next_day = [30, 18 * HOUR, 20 * MINUTE, 15 * HOUR, 45, 20 * HOUR];
    assert_eq!(fold_keep(&next_day, ten_minutes, &policy), 4);
    // Pauses of a meeting or lunch, one next-day return: mid-thread, the
    // step's keep.
    let pauses = [30, 20 * MINUTE, 40 * MINUTE, 18 * HOUR, 50 * MINUTE, 10];
    assert_eq!(fold_keep(&pauses, ten_minutes, &policy), 12);
    // Only the gaps as long as the silence count: past the pauses, the
    // next-day return is the likely one.
    assert_eq!(fold_keep(&pauses, 2 * 3600, &policy), 4);
    // Half and half is not more than half: the step's keep.
    let even = [20 * MINUTE, 18 * HOUR];
    assert_eq!(fold_keep(&even, ten_minutes, &policy), 12);
    // An hour exactly counts as past it (no entry outlives it).
    assert_eq!(fold_keep(&[HOUR, 5], ten_minutes, &policy), 4);
    // Nothing recorded that long says nothing: the step's keep.
    assert_eq!(fold_keep(&[], ten_minutes, &policy), 12);
    assert_eq!(fold_keep(&[30, 45, 5], ten_minutes, &policy), 12);
    // The fold never keeps more than a step would.
    let wide = CompactionPolicy {
        fold_keep_messages: 20,
        ..policy
    };
    assert_eq!(fold_keep(&next_day, ten_minutes, &wide), 12);
}
