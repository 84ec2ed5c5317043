//! The platform over its tenants: a tenant's configuration lives inside the
//! platform's policy (a `PUT` outside a bound is refused naming it, and nothing
//! changes; a stored one over a bound lowered later is clamped when read), the
//! platform's suspension holds whatever the tenant writes, the config `PUT`
//! answers its own version, and the platform's service lists tenants with their
//! usage and replaces a policy only from the version read.

use std::sync::Arc;

use degrau::converse::{AskError, Converse};
use degrau::domain::TenantId;
use degrau::jobs::NoJobs;
use degrau::memory::MemoryStore;
use degrau::metering::{DAY, PriceTable};
use degrau::model::scripted::ScriptedModel;
use degrau::operate::platform::PlatformAdmin;
use degrau::plan::session::Clock;
use degrau::platform::{Plan, PolicyStore};
use degrau::quota::Limits;
use degrau::tenant::{Defaults, TenantStore};
use degrau::tools::ToolDispatch;
use degrau::usage::Usage;

use crate::helpers::{START, ask_service, key, minute, operate_of, test_clock};

/// The deployment of the issue: five rounds an hour, one priced model.
fn defaults() -> Defaults {
    Defaults {
        quota: Limits {
            rounds_per_hour: 5,
            summary_calls_per_hour: 5,
        },
        prices: PriceTable::parse("claude-sonnet-5=3/15").unwrap(),
        platform: Plan {
            models: Some(vec!["claude-sonnet-5".into()]),
            max_transcript_retention_days: 30,
            ..Plan::default()
        },
        transcript_retention_days: 30,
        ..Defaults::default()
    }
}

struct Harness {
    store: Arc<MemoryStore>,
    model: Arc<ScriptedModel>,
    ask: Converse,
    platform: PlatformAdmin,
}

fn harness() -> Harness {
    let store = Arc::new(MemoryStore::new());
    let model = Arc::new(ScriptedModel::default());
    let (_, now): (_, Clock) = test_clock();
    Harness {
        ask: ask_service(
            &store,
            model.clone(),
            Arc::new(ToolDispatch::built_in_only()),
            Arc::new(NoJobs),
            defaults(),
            now.clone(),
        ),
        platform: PlatformAdmin::on(store.clone(), defaults(), now),
        store,
        model,
    }
}

fn usage() -> Usage {
    Usage {
        input_tokens: 100,
        output_tokens: 10,
        ..Usage::default()
    }
}

#[tokio::test]
async fn a_tenant_admin_cannot_lift_the_platforms_limits_and_nothing_changes() {
    let h = harness();
    let tenant = key().tenant;
    let state = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"quota": {"rounds_per_hour": 4}}"#, 0)
        .await
        .unwrap();
    assert_eq!(state.version(), 1, "inside the bounds: stored as today");
    for (config, bound) in [
        (
            r#"{"quota": {"rounds_per_hour": 4294967295}}"#,
            "rounds_per_hour",
        ),
        (r#"{"model": "claude-opus-5"}"#, "models"),
        (
            r#"{"transcript_retention_days": 400}"#,
            "max_transcript_retention_days",
        ),
    ] {
        let error = operate_of(&h.ask, &h.store)
            .replace_config(&tenant, config, 1)
            .await
            .unwrap_err();
        let AskError::Forbidden(message) = &error else {
            panic!("{config}: {error:?}");
        };
        assert!(message.contains(bound), "{message}");
    }
    let stored = h.store.stored_config(&tenant).await.unwrap().unwrap();
    assert_eq!(stored.version, 1, "CONFIG unchanged");
    assert!(
        stored.text.contains("\"rounds_per_hour\":4"),
        "{}",
        stored.text
    );
}

#[tokio::test]
async fn a_suspension_holds_whatever_the_tenant_writes_and_the_platform_lifts_it() {
    let h = harness();
    let tenant = key().tenant;
    let suspended = r#"{"suspended": true}"#;
    h.platform
        .replace_policy(&tenant, suspended, 0)
        .await
        .unwrap();
    operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"quota": {"rounds_per_hour": 5}}"#, 0)
        .await
        .unwrap();
    let error = h
        .ask
        .ask(&key(), "hello", None, minute())
        .await
        .unwrap_err();
    assert!(matches!(error, AskError::Suspended), "{error:?}");
    assert_eq!(h.store.item_count(&key()), 0, "nothing stored");
    assert!(h.model.requests().is_empty(), "no model call");
    // Only the platform lifts it, from the version it read.
    let stale = h
        .platform
        .replace_policy(&tenant, "{}", 0)
        .await
        .unwrap_err();
    assert!(
        matches!(stale, AskError::PreconditionFailed(_)),
        "{stale:?}"
    );
    let lifted = h.platform.replace_policy(&tenant, "{}", 1).await.unwrap();
    assert_eq!(lifted.version(), 2);
    h.model.push(ScriptedModel::text("Olá!", usage()));
    assert!(h.ask.ask(&key(), "hello", None, minute()).await.is_ok());
}

#[tokio::test]
async fn the_platforms_policy_raises_a_tenants_ceiling_and_a_lowered_one_clamps_the_stored_config()
{
    let h = harness();
    let tenant = key().tenant;
    let raised = r#"{"rounds_per_hour": 100, "models": {"claude-opus-5": {"input": 15, "output": 75}},
                     "max_transcript_retention_days": 90}"#;
    h.platform.replace_policy(&tenant, raised, 0).await.unwrap();
    let config = r#"{"quota": {"rounds_per_hour": 50}, "model": "claude-opus-5",
                     "transcript_retention_days": 60}"#;
    let state = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, config, 0)
        .await
        .unwrap();
    assert!(state.clamped.is_empty(), "{:?}", state.clamped);
    // The platform lowers the bounds: the stored config is clamped when read, and
    // its state says so.
    let lowered = r#"{"rounds_per_hour": 10, "max_transcript_retention_days": 7}"#;
    h.platform
        .replace_policy(&tenant, lowered, 1)
        .await
        .unwrap();
    let state = operate_of(&h.ask, &h.store)
        .config_state(&tenant)
        .await
        .unwrap();
    assert_eq!(state.problem, None);
    let said = state.clamped.join("; ");
    for bound in ["rounds_per_hour", "models", "max_transcript_retention_days"] {
        assert!(said.contains(bound), "{said}");
    }
    assert_eq!(state.policy.rounds_per_hour, 10);
}

#[tokio::test]
async fn a_config_put_answers_its_own_version() {
    let h = harness();
    let tenant = key().tenant;
    let first = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"session_idle_minutes": 60}"#, 0)
        .await
        .unwrap();
    assert_eq!(first.version(), 1);
    assert!(first.stored.unwrap().text.contains("60"));
    let second = operate_of(&h.ask, &h.store)
        .replace_config(&tenant, r#"{"session_idle_minutes": 90}"#, 1)
        .await
        .unwrap();
    assert_eq!(second.version(), 2);
    assert!(second.stored.unwrap().text.contains("90"));
}

#[tokio::test]
async fn the_platform_lists_its_tenants_with_their_usage_priced_for_every_allowed_model() {
    let h = harness();
    let tenant = key().tenant;
    let other = TenantId::parse("florist").unwrap();
    h.platform
        .replace_policy(&other, r#"{"suspended": true}"#, 0)
        .await
        .unwrap();
    h.model.push(ScriptedModel::text("Olá!", usage()));
    h.ask.ask(&key(), "hello", None, minute()).await.unwrap();
    let today = START.div_euclid(DAY);
    let (tenants, next) = h
        .platform
        .tenants(None, None, Some((today, today)))
        .await
        .unwrap();
    assert_eq!(next, None);
    let names: Vec<&str> = tenants.iter().map(|t| t.tenant.as_str()).collect();
    let mut expected = vec![tenant.as_str(), "florist"];
    expected.sort();
    assert_eq!(names, expected, "by id");
    let barber = tenants
        .iter()
        .find(|t| t.tenant == tenant.as_str())
        .unwrap();
    assert_eq!(barber.usage.rounds, 1);
    assert!(
        barber.usage.cost_usd.is_some(),
        "the allowed model is priced"
    );
    assert!(tenants.iter().any(|t| t.tenant == "florist" && t.suspended));
    let (page, next) = h.platform.tenants(Some(1), None, None).await.unwrap();
    assert_eq!(page.len(), 1);
    let (rest, _) = h
        .platform
        .tenants(Some(1), next.as_ref(), None)
        .await
        .unwrap();
    assert_ne!(page[0].tenant, rest[0].tenant);
    let usage = operate_of(&h.ask, &h.store)
        .usage(&tenant, today, today)
        .await
        .unwrap();
    assert!(usage[0].cost_usd.is_some());
    // A policy is read back as written.
    assert!(h.store.stored_policy(&other).await.unwrap().is_some());
}
