//! The platform's bounds on a tenant's configuration ([`crate::platform::Policy`]):
//! [`check`] refuses a configuration outside them when a tenant writes it (`PUT
//! /v1/tenant/config`: 403 naming the bound, nothing stored), and [`clamp`] fits
//! the settings of a stored one into them when it is read (a bound lowered after
//! the configuration was stored), naming each bound it applied, so the
//! configuration's `GET` can say so. Never more than the policy, either way.
//!
//! | config field | bound |
//! |---|---|
//! | `quota.rounds_per_hour`, `quota.summary_calls_per_hour` | the policy's `rounds_per_hour`, `summary_calls_per_hour` (a tenant may lower its own; a suspension is the platform's alone) |
//! | `model` | one of the policy's `models` (clamped: the deployment's model, or the first allowed) |
//! | `thinking_budget_tokens` | `max_thinking_budget_tokens` (0: no thinking) |
//! | `compaction_threshold_tokens` | `max_compaction_threshold_tokens` |
//! | `transcript_retention_days`, `fact_retention_days` | `max_transcript_retention_days`, `max_fact_retention_days` (the idle timeout clamped to the retention with it) |
//! | webhook tools in `tools` | at most `max_webhook_tools` (clamped: the first ones kept) |

use super::{Settings, TenantConfig};
use crate::platform::Policy;
use crate::tools::ToolDeclaration;

/// A configuration outside the platform's policy: names the field, its value and
/// the bound (no personal data: a configuration holds none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Breach(pub String);

/// Refuses `config` when a value it sets is outside `policy`, naming the first
/// such field and its bound.
pub fn check(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    check_quota(config, policy)?;
    check_model(config, policy)?;
    check_thinking_and_threshold(config, policy)?;
    check_retention(config, policy)?;
    check_webhooks(config, policy)
}

/// The breach of a number over its bound.
fn over(field: &str, value: u64, bound: &str, max: u64) -> Breach {
    Breach(format!(
        "config: {field} ({value}) is over the platform's `{bound}` of {max} for this tenant"
    ))
}

/// The tenant's own quota: at most the policy's rounds and summary calls per hour.
fn check_quota(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    let Some(quota) = &config.quota else {
        return Ok(());
    };
    if let Some(value) = quota
        .rounds_per_hour
        .filter(|v| *v > policy.rounds_per_hour)
    {
        return Err(over(
            "quota.rounds_per_hour",
            value.into(),
            "rounds_per_hour",
            policy.rounds_per_hour.into(),
        ));
    }
    if let Some(value) = quota
        .summary_calls_per_hour
        .filter(|v| *v > policy.summary_calls_per_hour)
    {
        return Err(over(
            "quota.summary_calls_per_hour",
            value.into(),
            "summary_calls_per_hour",
            policy.summary_calls_per_hour.into(),
        ));
    }
    Ok(())
}

/// The model: one the policy allows.
fn check_model(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    if let Some(model) = config.model.as_deref().filter(|m| !policy.allows_model(m)) {
        let allowed = policy.models.as_deref().unwrap_or_default().join(", ");
        return Err(Breach(format!(
            "config: model `{model}` is not one of the platform's `models` for this tenant \
             ({allowed})"
        )));
    }
    Ok(())
}

/// The thinking budget and the compaction threshold: at most the policy's.
fn check_thinking_and_threshold(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    if let Some(budget) = config.thinking_budget_tokens.map(|b| b.tokens())
        && budget > policy.max_thinking_budget_tokens
    {
        return Err(over(
            "thinking_budget_tokens",
            budget.into(),
            "max_thinking_budget_tokens",
            policy.max_thinking_budget_tokens.into(),
        ));
    }
    if let Some(threshold) = config
        .compaction_threshold_tokens
        .filter(|t| *t > policy.max_compaction_threshold_tokens)
    {
        return Err(over(
            "compaction_threshold_tokens",
            threshold,
            "max_compaction_threshold_tokens",
            policy.max_compaction_threshold_tokens,
        ));
    }
    Ok(())
}

/// The transcript's and the facts' retention: at most the policy's days.
fn check_retention(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    for (field, days, bound, max) in [
        (
            "transcript_retention_days",
            config.transcript_retention_days,
            "max_transcript_retention_days",
            policy.max_transcript_retention_days,
        ),
        (
            "fact_retention_days",
            config.fact_retention_days,
            "max_fact_retention_days",
            policy.max_fact_retention_days,
        ),
    ] {
        if let Some(days) = days.filter(|d| *d > max) {
            return Err(over(field, days.into(), bound, max.into()));
        }
    }
    Ok(())
}

/// The webhook tools: at most the policy's number of them.
fn check_webhooks(config: &TenantConfig, policy: &Policy) -> Result<(), Breach> {
    let webhooks = config
        .tools
        .as_ref()
        .map_or(0, |tools| webhook_count(tools.as_slice()));
    if webhooks > policy.max_webhook_tools as usize {
        return Err(over(
            "tools (webhook tools)",
            webhooks as u64,
            "max_webhook_tools",
            policy.max_webhook_tools.into(),
        ));
    }
    Ok(())
}

fn webhook_count(tools: &[ToolDeclaration]) -> usize {
    tools
        .iter()
        .filter(|tool| matches!(tool, ToolDeclaration::Webhook(_)))
        .count()
}

/// Fits `settings` into their own policy, `default_model` being the deployment's
/// model; returns each bound applied, as `field value -> bound (name)`.
pub fn clamp(settings: &mut Settings, default_model: &str) -> Vec<String> {
    let policy = settings.policy.clone();
    let mut applied = Vec::new();
    let mut note = |field: &str, from: String, to: String, bound: &str| {
        applied.push(format!("{field} {from} -> {to} ({bound})"));
    };
    let quota = &mut settings.quota;
    if quota.rounds_per_hour > policy.rounds_per_hour {
        note(
            "quota.rounds_per_hour",
            quota.rounds_per_hour.to_string(),
            policy.rounds_per_hour.to_string(),
            "rounds_per_hour",
        );
        quota.rounds_per_hour = policy.rounds_per_hour;
    }
    if quota.summary_calls_per_hour > policy.summary_calls_per_hour {
        note(
            "quota.summary_calls_per_hour",
            quota.summary_calls_per_hour.to_string(),
            policy.summary_calls_per_hour.to_string(),
            "summary_calls_per_hour",
        );
        quota.summary_calls_per_hour = policy.summary_calls_per_hour;
    }
    if !policy.allows_model(&settings.model) {
        let fallback = match &policy.models {
            Some(models) if !policy.allows_model(default_model) => models
                .first()
                .cloned()
                .unwrap_or_else(|| default_model.to_owned()),
            _ => default_model.to_owned(),
        };
        note("model", settings.model.clone(), fallback.clone(), "models");
        settings.model = fallback;
    }
    if let Some(budget) = settings
        .thinking_budget_tokens
        .filter(|b| *b > policy.max_thinking_budget_tokens)
    {
        let to = Some(policy.max_thinking_budget_tokens)
            .filter(|max| *max >= crate::plan::validate::MIN_THINKING_BUDGET);
        let shown = to.map_or_else(|| "off".to_owned(), |to| to.to_string());
        note(
            "thinking_budget_tokens",
            budget.to_string(),
            shown,
            "max_thinking_budget_tokens",
        );
        settings.thinking_budget_tokens = to;
    }
    let threshold = &mut settings.compaction.threshold_tokens;
    if *threshold > policy.max_compaction_threshold_tokens {
        note(
            "compaction_threshold_tokens",
            threshold.to_string(),
            policy.max_compaction_threshold_tokens.to_string(),
            "max_compaction_threshold_tokens",
        );
        *threshold = policy.max_compaction_threshold_tokens;
    }
    clamp_retention(settings, &policy, &mut note);
    clamp_tools(settings, &policy, &mut note);
    applied
}

/// The retentions, and the idle timeout with the transcript's (a session may not
/// stay open longer than its messages are kept).
fn clamp_retention(
    settings: &mut Settings,
    policy: &Policy,
    note: &mut impl FnMut(&str, String, String, &str),
) {
    if settings.transcript_retention_days > policy.max_transcript_retention_days {
        note(
            "transcript_retention_days",
            settings.transcript_retention_days.to_string(),
            policy.max_transcript_retention_days.to_string(),
            "max_transcript_retention_days",
        );
        settings.transcript_retention_days = policy.max_transcript_retention_days;
        let most = u64::from(settings.transcript_retention_days) * 24 * 60;
        if settings.session_idle_minutes > most {
            note(
                "session_idle_minutes",
                settings.session_idle_minutes.to_string(),
                most.to_string(),
                "max_transcript_retention_days",
            );
            settings.session_idle_minutes = most;
        }
    }
    if settings.fact_retention_days > policy.max_fact_retention_days {
        note(
            "fact_retention_days",
            settings.fact_retention_days.to_string(),
            policy.max_fact_retention_days.to_string(),
            "max_fact_retention_days",
        );
        settings.fact_retention_days = policy.max_fact_retention_days;
    }
}

/// The first `max_webhook_tools` webhook tools, every built-in one.
fn clamp_tools(
    settings: &mut Settings,
    policy: &Policy,
    note: &mut impl FnMut(&str, String, String, &str),
) {
    let webhooks = webhook_count(&settings.tools);
    let max = policy.max_webhook_tools as usize;
    if webhooks <= max {
        return;
    }
    note(
        "tools (webhook tools)",
        webhooks.to_string(),
        max.to_string(),
        "max_webhook_tools",
    );
    let mut kept = 0;
    settings.tools.retain(|tool| match tool {
        ToolDeclaration::Webhook(_) => {
            kept += 1;
            kept <= max
        }
        ToolDeclaration::BuiltIn(_) => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::{Plan, TenantPolicy};
    use crate::tenant::Defaults;

    fn defaults() -> Defaults {
        Defaults {
            platform: Plan {
                models: Some(vec!["claude-sonnet-5".into()]),
                max_transcript_retention_days: 30,
                ..Plan::default()
            },
            quota: crate::quota::Limits {
                rounds_per_hour: 5,
                summary_calls_per_hour: 3,
            },
            transcript_retention_days: 30,
            ..Defaults::default()
        }
    }

    fn config(json: &str) -> TenantConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_config_inside_the_bounds_passes_and_each_one_outside_is_refused_naming_its_bound() {
        let policy = defaults().policy(None);
        check(
            &config(r#"{"quota": {"rounds_per_hour": 4}, "transcript_retention_days": 30}"#),
            &policy,
        )
        .unwrap();
        for (json, bound) in [
            (
                r#"{"quota": {"rounds_per_hour": 4294967295}}"#,
                "rounds_per_hour",
            ),
            (
                r#"{"quota": {"summary_calls_per_hour": 4}}"#,
                "summary_calls_per_hour",
            ),
            (r#"{"model": "claude-opus-5"}"#, "models"),
            (
                r#"{"transcript_retention_days": 31}"#,
                "max_transcript_retention_days",
            ),
            (
                r#"{"compaction_threshold_tokens": 200000}"#,
                "max_compaction_threshold_tokens",
            ),
        ] {
            let breach = check(&config(json), &policy).unwrap_err();
            assert!(breach.0.contains(bound), "{json}: {breach}");
        }
        let no_thinking = defaults().policy(Some(&TenantPolicy {
            max_thinking_budget_tokens: Some(0),
            max_webhook_tools: Some(0),
            ..TenantPolicy::default()
        }));
        let breach = check(&config(r#"{"thinking_budget_tokens": 1024}"#), &no_thinking);
        assert!(breach.unwrap_err().0.contains("max_thinking_budget_tokens"));
    }

    #[test]
    fn a_stored_config_over_a_lowered_bound_is_clamped_at_read_and_says_so() {
        let stored = config(
            r#"{"quota": {"rounds_per_hour": 100}, "model": "claude-opus-5",
                "transcript_retention_days": 90, "session_idle_minutes": 86400,
                "thinking_budget_tokens": 4096}"#,
        );
        let lowered = TenantPolicy {
            max_thinking_budget_tokens: Some(2048),
            max_transcript_retention_days: Some(7),
            ..TenantPolicy::default()
        };
        let settings = Settings::resolve_under(&defaults(), Some(&stored), Some(&lowered)).unwrap();
        assert_eq!(settings.quota.rounds_per_hour, 5);
        assert_eq!(settings.model, "claude-sonnet-5");
        assert_eq!(settings.transcript_retention_days, 7);
        assert_eq!(settings.session_idle_minutes, 7 * 24 * 60);
        assert_eq!(settings.thinking_budget_tokens, Some(2048));
        let said = settings.clamped.join("; ");
        for bound in [
            "rounds_per_hour",
            "models",
            "max_transcript_retention_days",
            "max_thinking_budget_tokens",
        ] {
            assert!(said.contains(bound), "{said}");
        }
        let fits = Settings::resolve_under(&defaults(), Some(&config("{}")), None).unwrap();
        assert!(fits.clamped.is_empty(), "{:?}", fits.clamped);
    }
}
