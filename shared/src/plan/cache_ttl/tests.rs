//! Tests of the cache TTL policy: the `auto` rule against the expected cost of
//! each lifetime, and the gap record.

use super::*;

const SECOND: u32 = 1;
const MINUTE: u32 = 60;
const HOUR: u32 = 3600;

/// The rule for a part written once (the stable prefix: nothing new per
/// request).
fn prefix_hour(gaps: &[u32]) -> bool {
    hour_pays(gaps, 2_000, 0)
}

#[test]
fn an_hour_pays_for_the_prefix_only_when_the_gaps_say_it_is_cheaper() {
    // No history: a new contact gets five minutes.
    assert!(!prefix_hour(&[]));
    // A conversation without pauses.
    assert!(!prefix_hour(&[5 * SECOND, 30 * SECOND, 2 * MINUTE]));
    // One pause of a quarter hour among short gaps: an hour is cheaper.
    assert!(prefix_hour(&[10 * SECOND, 15 * MINUTE, 40 * SECOND]));
    // Exactly at the limits: an entry is gone at its lifetime.
    assert!(prefix_hour(&[FIVE_MINUTES]));
    assert!(!prefix_hour(&[FIVE_MINUTES - 1]));
    // Gaps past an hour each cost a 2× write under an hour's entry as well.
    assert!(!prefix_hour(&[20 * HOUR]));
    assert!(!prefix_hour(&[20 * HOUR, 20 * HOUR]));
    // 23 n5 against 38 n60: one pause under an hour beside a next-day return
    // is enough (23·2 = 46 > 38), two next-day returns need two.
    assert!(prefix_hour(&[20 * HOUR, 30 * MINUTE]));
    assert!(
        !prefix_hour(&[20 * HOUR, 20 * HOUR, 30 * MINUTE]),
        "23·3 = 69 < 76 = 38·2"
    );
    assert!(
        prefix_hour(&[20 * HOUR, 20 * HOUR, 30 * MINUTE, 10 * MINUTE]),
        "23·4 = 92 > 76"
    );
}

/// The expected cost per request, in base-input tokens, of a part of `total`
/// tokens with `new` written by each request, over `gaps`, under entries of
/// `life` seconds written at `write`× (the module documentation's formula,
/// evaluated gap by gap).
fn cost(gaps: &[u32], total: f64, new: f64, write: f64, life: u32) -> f64 {
    gaps.iter()
        .map(|&g| {
            if g >= life {
                write * total
            } else {
                0.1 * (total - new) + write * new
            }
        })
        .sum()
}

#[test]
fn the_rule_matches_the_expected_cost_of_each_lifetime_over_any_record() {
    // The integer rule against the cost it stands for, on every record of up
    // to four gaps drawn from short, pause and next-day gaps, and parts from
    // written once to mostly new.
    let kinds = [10 * SECOND, 20 * MINUTE, 20 * HOUR];
    for (total, new) in [(2_000u64, 0u64), (5_000, 250), (3_000, 600), (1_500, 1_000)] {
        for len in 1..=4u32 {
            for code in 0..3u32.pow(len) {
                let gaps: Vec<u32> = (0..len)
                    .map(|i| kinds[(code / 3u32.pow(i) % 3) as usize])
                    .collect();
                let (t, d) = (total as f64, new as f64);
                let five = cost(&gaps, t, d, 1.25, FIVE_MINUTES);
                let hour = cost(&gaps, t, d, 2.0, ONE_HOUR);
                assert_eq!(
                    hour_pays(&gaps, total, new),
                    hour < five - 1e-9,
                    "{gaps:?}, {total} tokens, {new} new: 5m {five}, 1h {hour}"
                );
            }
        }
    }
}

#[test]
fn what_a_request_writes_anew_each_time_weighs_against_the_hour() {
    let pauses = [10 * SECOND, 20 * MINUTE, 30 * SECOND, 40 * SECOND];
    // One pause in four: an hour pays for a context mostly read again...
    assert!(hour_pays(&pauses, 5_000, 250));
    // ...but not when most of each request is new anyway.
    assert!(!hour_pays(&pauses, 1_500, 1_000));
    // Nothing old: nothing to keep.
    assert!(!hour_pays(&pauses, 500, 500));
    assert!(!hour_pays(&pauses, 500, 900), "a new part past the total");
}

const PAUSES: [u32; 3] = [20 * MINUTE, 30 * MINUTE, 15 * SECOND];

fn sizes(prefix: u64, context: u64, new: u64) -> RequestSizes {
    RequestSizes {
        prefix,
        context,
        new,
    }
}

#[test]
fn fixed_policies_ignore_the_gaps_and_the_sizes() {
    let big = sizes(2_000, 9_000, 200);
    assert_eq!(
        CacheTtlPolicy::FiveMinutes.lifetimes(&PAUSES, big),
        Lifetimes::FiveMinutes
    );
    assert_eq!(
        CacheTtlPolicy::OneHour.lifetimes(&[], sizes(10, 20, 20)),
        Lifetimes::AllForAnHour
    );
}

#[test]
fn auto_takes_the_hour_for_all_the_prefix_alone_or_nothing() {
    let auto = |gaps: &[u32], s| CacheTtlPolicy::Auto.lifetimes(gaps, s);
    // A context the pauses would make the model read again: all for an hour.
    assert_eq!(
        auto(&PAUSES, sizes(300, 6_000, 200)),
        Lifetimes::AllForAnHour
    );
    // No pause: five minutes whatever the size.
    let brisk = [5 * SECOND, 40 * SECOND, 2 * MINUTE];
    assert_eq!(
        auto(&brisk, sizes(3_000, 9_000, 200)),
        Lifetimes::FiveMinutes
    );
    // A round that is mostly new (a long tool result, say) does not earn the
    // hour for the messages, but a long prefix still does.
    assert_eq!(
        auto(
            &[20 * MINUTE, 15 * SECOND, 20 * SECOND],
            sizes(1_500, 3_000, 2_400)
        ),
        Lifetimes::PrefixForAnHour
    );
    assert_eq!(
        auto(
            &[20 * MINUTE, 15 * SECOND, 20 * SECOND],
            sizes(900, 3_000, 2_400)
        ),
        Lifetimes::FiveMinutes
    );
}

#[test]
fn behind_a_prefix_held_an_hour_the_messages_part_alone_weighs_their_hour() {
    // A 3,000-token prefix and a 200-token window, 150 of it new each time.
    let gaps = [30 * SECOND, 20 * MINUTE, 40 * SECOND];
    let issue = sizes(3_000, 3_200, 150);
    // The prefix is an hour's under both choices; the window costs 635
    // under five minutes, 915 under an hour.
    let five = cost(&gaps, 200.0, 150.0, 1.25, FIVE_MINUTES);
    let hour = cost(&gaps, 200.0, 150.0, 2.0, ONE_HOUR);
    assert!((five - 635.0).abs() < 1e-9 && (hour - 915.0).abs() < 1e-9);
    assert!(
        hour_pays(&gaps, issue.context, issue.new),
        "the whole request would take the hour"
    );
    let auto = |s| CacheTtlPolicy::Auto.lifetimes(&gaps, s);
    assert_eq!(auto(issue), Lifetimes::PrefixForAnHour);
    // A window mostly read again earns its hour on its own.
    assert_eq!(auto(sizes(3_000, 3_200, 40)), Lifetimes::AllForAnHour);
}

#[test]
fn auto_keeps_five_minutes_for_a_part_too_short_to_cache() {
    let auto = |s| CacheTtlPolicy::Auto.lifetimes(&PAUSES, s);
    let short = MIN_CACHEABLE_TOKENS - 1;
    assert_eq!(auto(sizes(short, short, 0)), Lifetimes::FiveMinutes);
    assert_eq!(
        auto(sizes(200, MIN_CACHEABLE_TOKENS, 50)),
        Lifetimes::AllForAnHour
    );
    // The prefix alone is judged at its own size.
    assert_eq!(
        auto(sizes(
            MIN_CACHEABLE_TOKENS,
            4 * MIN_CACHEABLE_TOKENS,
            3 * MIN_CACHEABLE_TOKENS
        )),
        Lifetimes::PrefixForAnHour
    );
}

#[test]
fn one_hour_entries_always_come_before_five_minute_ones() {
    for lifetimes in [
        Lifetimes::FiveMinutes,
        Lifetimes::PrefixForAnHour,
        Lifetimes::AllForAnHour,
    ] {
        assert!(
            !(lifetimes.prefix() == CacheTtl::FiveMinutes
                && lifetimes.messages() == CacheTtl::OneHour),
            "{lifetimes:?}"
        );
    }
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
