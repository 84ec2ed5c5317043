//! Floods and quotas end to end: the tenants' quotas counted in DynamoDB (moto) by
//! the real adapter, the real `ask` binary answering 429 with `Retry-After` once a
//! tenant's hour is spent, a recorded round whose usage its request cannot have
//! held refused, and the template's throttling and reserved concurrency.

use std::sync::Arc;

use degrau::domain::TenantId;
use degrau::quota::{QuotaConfig, QuotaKind, Quotas};
use degrau::tenant::TenantConfig;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_tests::moto;
use degrau_tests::serial::one_at_a_time;
use degrau_tests::stack::FullStack;
use serde_json::{Value, json};

use crate::helpers::assert_error;
use crate::helpers::template;

#[tokio::test]
async fn the_dynamodb_quota_counts_to_its_limit_under_concurrent_spenders_and_no_further() {
    let client = moto::dynamodb_client().await;
    let table = moto::fresh_table(&client).await;
    // moto's conditional writes race under concurrency where DynamoDB's do not: the
    // adapter reaches it one request at a time, so the test checks the adapter's
    // condition, not moto (see `degrau_tests::serial`).
    let serial = one_at_a_time(&moto::endpoint()).await;
    let serial_client = aws_sdk_dynamodb::Client::new(&moto::sdk_config_at(serial.url()).await);
    let store = Arc::new(DynamoStore::new(serial_client, table));
    let tenant = TenantId::parse("flooder").unwrap();
    let period = 1_800_000_000 / 3600 * 3600;
    // Twelve spenders at once: the conditional increment decides.
    let spenders: Vec<_> = (0..12)
        .map(|_| {
            let (store, tenant) = (store.clone(), tenant.clone());
            tokio::spawn(async move {
                store
                    .try_spend(&tenant, QuotaKind::Rounds, period, 5, period + 7200)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut counted = 0;
    for spender in spenders {
        counted += usize::from(spender.await.unwrap());
    }
    assert_eq!(counted, 5, "exactly the limit counted");
    // Another kind, another hour and another tenant count apart.
    for (tenant, kind, period) in [
        (tenant.clone(), QuotaKind::SummaryCalls, period),
        (tenant.clone(), QuotaKind::Rounds, period + 3600),
        (
            TenantId::parse("neighbour").unwrap(),
            QuotaKind::Rounds,
            period,
        ),
    ] {
        assert!(
            store
                .try_spend(&tenant, kind, period, 5, period + 7200)
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn past_its_hours_rounds_a_tenant_gets_429_with_retry_after_from_the_real_binary() {
    let stack = FullStack::start(&[]).await;
    let config = TenantConfig {
        quota: Some(QuotaConfig {
            rounds_per_hour: Some(1),
            summary_calls_per_hour: None,
        }),
        ..TenantConfig::default()
    };
    stack.configure("capped", &config).await;
    let first = stack.post("capped", "ana", "hello").await;
    assert_eq!(first.status, 200, "{}", first.raw);
    let stored = stack.stored_messages("capped", "ana").await.len();
    let second = stack.post("capped", "ana", "hello again").await;
    assert_error(&second, 429, "rate_limited");
    let retry_after: u64 = second.headers["retry-after"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3600).contains(&retry_after), "{retry_after}");
    assert!(
        second.raw.contains("rounds for this hour are spent"),
        "{}",
        second.raw
    );
    assert_eq!(stack.stored_messages("capped", "ana").await.len(), stored);
    // A tenant without a quota of its own has the deployment's.
    let other = stack.post("uncapped", "ana", "hello").await;
    assert_eq!(other.status, 200, "{}", other.raw);
}

#[tokio::test]
async fn past_its_rounds_per_minute_or_a_contacts_turns_a_round_gets_429_and_stores_nothing() {
    let stack = FullStack::start_with(&degrau_tests::stack::StackOptions {
        env: vec![
            ("TENANT_ROUNDS_PER_MINUTE".into(), "3".into()),
            ("CONTACT_TURNS_PER_MINUTE".into(), "2".into()),
            ("TENANT_CONCURRENCY".into(), "4".into()),
        ],
        ..Default::default()
    })
    .await;
    for text in ["one", "two"] {
        assert_eq!(stack.post("shop", "ana", text).await.status, 200);
    }
    let stored = stack.stored_messages("shop", "ana").await.len();
    let turns = stack.post("shop", "ana", "three").await;
    assert_error(&turns, 429, "rate_limited");
    assert!(
        turns.raw.contains("turns of this contact a minute"),
        "{}",
        turns.raw
    );
    let retry_after: u64 = turns.headers["retry-after"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(stack.stored_messages("shop", "ana").await.len(), stored);
    // The refused turn counted as the tenant's third round of the minute.
    let tenant = stack.post("shop", "bia", "hello").await;
    assert_error(&tenant, 429, "rate_limited");
    assert!(
        tenant.raw.contains("rounds of this tenant a minute"),
        "{}",
        tenant.raw
    );
    // Another tenant is not held by these.
    assert_eq!(stack.post("florist", "ana", "hello").await.status, 200);
}

#[tokio::test]
async fn a_recorded_round_reporting_an_impossible_context_is_refused_by_the_real_binary() {
    let stack = FullStack::start(&[]).await;
    let context = stack
        .call("GET", "/v1/contacts/ana/context", "own", None)
        .await;
    let body = |input: u64| {
        json!({
            "head": context.body["head"],
            "messages": [
                {"role": "user", "content": "Any free slot on Friday?"},
                {"role": "assistant", "content": "Friday at 10:30."}
            ],
            "usage": {"input_tokens": input, "output_tokens": 8}
        })
        .to_string()
    };
    let reply = stack
        .call(
            "POST",
            "/v1/contacts/ana/rounds",
            "own",
            Some(&body(5_000_000)),
        )
        .await;
    assert_error(&reply, 400, "invalid_request");
    assert!(
        reply
            .raw
            .contains("more than the last request can have held"),
        "{}",
        reply.raw
    );
    assert!(stack.stored_messages("own", "ana").await.is_empty());
    let reply = stack
        .call("POST", "/v1/contacts/ana/rounds", "own", Some(&body(1_200)))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
}

fn number(value: &Value) -> u64 {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// A parameter's default, as a number.
fn default_number(template: &Value, parameter: &str) -> u64 {
    number(&template["Parameters"][parameter]["Default"])
}

#[test]
fn every_route_is_throttled_the_webhook_to_what_its_signature_check_refuses_and_every_function_has_its_own_concurrency()
 {
    let template = template();
    let api = &template["Resources"]["HttpApi"]["Properties"];
    let default = &api["DefaultRouteSettings"];
    assert_eq!(
        default["ThrottlingRateLimit"],
        json!({"Ref": "ApiThrottleRate"})
    );
    assert_eq!(
        default["ThrottlingBurstLimit"],
        json!({"Ref": "ApiThrottleBurst"})
    );
    let webhook = &api["RouteSettings"]["POST /whatsapp/webhook"];
    assert_eq!(
        webhook["ThrottlingRateLimit"],
        json!({"Ref": "WebhookThrottleRate"})
    );
    assert_eq!(
        webhook["ThrottlingBurstLimit"],
        json!({"Ref": "WebhookThrottleBurst"})
    );
    // The webhook's throttle is sized to what its reserved instances refuse (an
    // unsigned post is one HMAC, no I/O: an instance refuses well over
    // `REFUSALS_PER_INSTANCE` a second), so a flood up to it is refused by the
    // signature check, not by throttling Meta's deliveries among it.
    const REFUSALS_PER_INSTANCE: u64 = 100;
    let refusing = default_number(&template, "WhatsAppWebhookReservedConcurrency");
    let rate = default_number(&template, "WebhookThrottleRate");
    assert!(
        rate <= refusing * REFUSALS_PER_INSTANCE,
        "{rate} over {refusing} instances"
    );
    assert!(
        rate > default_number(&template, "ApiThrottleRate"),
        "a flood of the open route meets the signature check first"
    );
    assert!(default_number(&template, "WebhookThrottleBurst") <= rate);
    // A turn held by a limit waits in the queue: the worker knows the queue and
    // its receive limit, and may hide and resend its messages.
    let worker = &template["Resources"]["WhatsAppWorkerFunction"]["Properties"];
    let variables = &worker["Environment"]["Variables"];
    assert_eq!(
        variables["WHATSAPP_QUEUE_URL"],
        json!({"Ref": "WhatsAppQueue"})
    );
    let redrive = &template["Resources"]["WhatsAppQueue"]["Properties"]["RedrivePolicy"];
    assert_eq!(
        number(&variables["WHATSAPP_MAX_RECEIVES"]),
        number(&redrive["maxReceiveCount"])
    );
    assert!(
        worker["Policies"]
            .to_string()
            .contains("sqs:ChangeMessageVisibility")
    );

    let mut reserved = 0;
    for (name, resource) in template["Resources"].as_object().unwrap() {
        if resource["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let setting = &resource["Properties"]["ReservedConcurrentExecutions"]["Fn::If"];
        let parameter = setting[2]["Ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} has no reserved concurrency of its own"));
        assert_eq!(
            setting[1],
            json!({"Ref": "AWS::NoValue"}),
            "{name}: 0 reserves none"
        );
        let condition = setting[0].as_str().unwrap();
        assert_eq!(
            template["Conditions"][condition],
            json!({"Fn::Equals": [{"Ref": parameter}, 0]}),
            "{name}"
        );
        let value = default_number(&template, parameter);
        assert!(value > 0, "{name}: a default that reserves");
        reserved += value;
    }
    // An account's default limit is 1,000, of which 100 must stay unreserved.
    assert!(reserved <= 900, "{reserved} reserved by default");
    assert!(
        default_number(&template, "WhatsAppWebhookReservedConcurrency")
            < default_number(&template, "AskReservedConcurrency"),
        "a webhook flood is held to less than ask has"
    );

    // The deployment's quotas reach every function, from parameters whose defaults
    // are the code's.
    let globals = &template["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        globals["QUOTA_ROUNDS_PER_HOUR"],
        json!({"Ref": "QuotaRoundsPerHour"})
    );
    assert_eq!(
        globals["QUOTA_SUMMARY_CALLS_PER_HOUR"],
        json!({"Ref": "QuotaSummaryCallsPerHour"})
    );
    let limits = degrau::quota::Limits::default();
    assert_eq!(
        default_number(&template, "QuotaRoundsPerHour"),
        u64::from(limits.rounds_per_hour)
    );
    assert_eq!(
        default_number(&template, "QuotaSummaryCallsPerHour"),
        u64::from(limits.summary_calls_per_hour)
    );
}
