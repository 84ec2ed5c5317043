//! Tests of the policy in force: a tenant policy over the plan, and how a
//! `POLICY` item reads.

use super::*;

#[test]
fn a_tenant_policy_replaces_each_value_of_the_plan_it_sets_and_keeps_the_others() {
    let plan = Plan {
        models: Some(vec!["m-default".into()]),
        fair: FairShare {
            concurrency: Some(10),
            rounds_per_minute: Some(300),
            ..FairShare::default()
        },
        ..Plan::default()
    };
    let prices = PriceTable::parse("m-default=3/15").unwrap();
    let quota = Limits::default();
    let plain = Policy::new(&plan, quota, &prices, None);
    assert_eq!(plain.quota(), quota);
    assert!(plain.allows_model("m-default") && !plain.allows_model("m-big"));
    assert!(!plain.suspended);
    let item: TenantPolicy = serde_json::from_str(
        r#"{"suspended": true, "rounds_per_hour": 5, "fair_share": {"concurrency": 2},
            "models": {"m-big": {"input": 15, "output": 75}}}"#,
    )
    .unwrap();
    item.check().unwrap();
    let policy = Policy::new(&plan, quota, &prices, Some(&item));
    assert!(policy.suspended);
    assert_eq!(policy.rounds_per_hour, 5);
    assert_eq!(policy.summary_calls_per_hour, quota.summary_calls_per_hour);
    assert_eq!(policy.fair_share.concurrency, Some(2));
    assert_eq!(policy.fair_share.rounds_per_minute, Some(300));
    assert!(policy.allows_model("m-big") && !policy.allows_model("m-default"));
    let tokens = crate::metering::TokenCounts {
        output: 1_000_000,
        ..Default::default()
    };
    assert_eq!(policy.prices.cost("m-big", &tokens), Some(75.0));
}

#[test]
fn a_policy_that_breaks_a_rule_does_not_read_and_says_which_field() {
    for (text, field) in [
        (
            r#"{"fair_share": {"concurrency": 0}}"#,
            "fair_share.concurrency",
        ),
        (
            r#"{"whatsapp": {"turns_per_hour": 0}}"#,
            "whatsapp.turns_per_hour",
        ),
        (
            r#"{"max_thinking_budget_tokens": 10}"#,
            "max_thinking_budget_tokens",
        ),
        (
            r#"{"max_transcript_retention_days": 0}"#,
            "max_transcript_retention_days",
        ),
        (r#"{"models": {}}"#, "models"),
        (
            r#"{"models": {"m": {"input": -1, "output": 1}}}"#,
            "models.m",
        ),
        (r#"{"models": {"m": {"input": 1}}}"#, "models.m"),
        (r#"{"suspend": true}"#, "suspend"),
    ] {
        let stored = StoredPolicy {
            text: text.into(),
            version: 1,
        };
        let reason = stored.read().unwrap_err();
        assert!(reason.contains(field), "{text}: {reason}");
    }
}
