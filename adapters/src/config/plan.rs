//! The platform's plan from the environment: the models a tenant may choose, the
//! bounds of its configuration, its fair share and its public numbers' limits
//! (see [`degrau::platform`]). Read once at init with the rest of [`super::Config`].

use degrau::tenant::Defaults;

use super::{ConfigError, Vars};

/// The platform's plan (see [`degrau::platform::Plan`]): the allowed models (each
/// priced in `PRICES` when listed; the deployment's `MODEL` alone when unset), the
/// bounds a tenant's configuration lives in, each tenant's fair share and each
/// public number's limits (unset or 0: no limit).
pub(super) fn plan(
    vars: &Vars<'_>,
    defaults: &Defaults,
) -> Result<degrau::platform::Plan, ConfigError> {
    use degrau::platform::{FairShare, NumberLimits, Plan};
    let base = Plan::default();
    let models = allowed_models(vars, defaults)?;
    let limit = |name: &str| -> Result<Option<u32>, ConfigError> {
        Ok(Some(vars.number::<u32>(name, 0)?).filter(|n| *n > 0))
    };
    let thinking = thinking_budget(vars, base.max_thinking_budget_tokens)?;
    let days = |name: &str, default: u32| -> Result<u32, ConfigError> {
        match vars.number(name, default)? {
            0 => Err(ConfigError(format!("{name} must be at least 1"))),
            days => Ok(days),
        }
    };
    Ok(Plan {
        models: Some(models),
        max_thinking_budget_tokens: thinking,
        max_compaction_threshold_tokens: vars.number(
            "MAX_COMPACTION_THRESHOLD_TOKENS",
            base.max_compaction_threshold_tokens,
        )?,
        max_transcript_retention_days: days(
            "MAX_TRANSCRIPT_RETENTION_DAYS",
            base.max_transcript_retention_days,
        )?,
        max_fact_retention_days: days("MAX_FACT_RETENTION_DAYS", base.max_fact_retention_days)?,
        max_webhook_tools: vars.number("MAX_WEBHOOK_TOOLS", base.max_webhook_tools)?,
        fair: FairShare {
            concurrency: limit("TENANT_CONCURRENCY")?,
            rounds_per_minute: limit("TENANT_ROUNDS_PER_MINUTE")?,
            tool_seconds_per_round: limit("TOOL_SECONDS_PER_ROUND")?,
            contact_turns_per_minute: limit("CONTACT_TURNS_PER_MINUTE")?,
        },
        whatsapp: NumberLimits {
            turns_per_hour: limit("WHATSAPP_TURNS_PER_HOUR")?,
            sender_turns_per_minute: limit("WHATSAPP_SENDER_TURNS_PER_MINUTE")?,
            new_senders_per_hour: limit("WHATSAPP_NEW_SENDERS_PER_HOUR")?,
        },
    })
}

/// `ALLOWED_MODELS`: the deployment's `MODEL` alone when unset; else each one
/// priced in `PRICES`, `MODEL` among them.
fn allowed_models(vars: &Vars<'_>, defaults: &Defaults) -> Result<Vec<String>, ConfigError> {
    Ok(match vars.get("ALLOWED_MODELS") {
        None => vec![defaults.model.clone()],
        Some(list) => {
            let models: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            if let Some(unpriced) = models.iter().find(|m| !defaults.prices.has(m)) {
                return Err(ConfigError(format!(
                    "ALLOWED_MODELS: `{unpriced}` has no price in PRICES (every model a                      tenant may choose is priced, so its usage never costs null)"
                )));
            }
            if !models.contains(&defaults.model) {
                return Err(ConfigError(format!(
                    "ALLOWED_MODELS must hold MODEL (`{}`), every tenant's default",
                    defaults.model
                )));
            }
            models
        }
    })
}

/// `MAX_THINKING_BUDGET_TOKENS`: 0 (no thinking) or within the core's bounds.
fn thinking_budget(vars: &Vars<'_>, default: u32) -> Result<u32, ConfigError> {
    let thinking = vars.number("MAX_THINKING_BUDGET_TOKENS", default)?;
    let (min, max) = (
        degrau::plan::validate::MIN_THINKING_BUDGET,
        degrau::tenant::MAX_THINKING_BUDGET,
    );
    if thinking != 0 && !(min..=max).contains(&thinking) {
        return Err(ConfigError(format!(
            "MAX_THINKING_BUDGET_TOKENS must be 0 (no thinking) or from {min} to {max}"
        )));
    }
    Ok(thinking)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::Config;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_platform_plan_is_read_priced_and_checked_against_the_defaults() {
        let base = [("TABLE_NAME", "t"), ("ANTHROPIC_API_KEY", "k")];
        let with = |extra: &[(&str, &str)]| {
            let mut all = vars(&base);
            all.extend(vars(extra));
            Config::from_map(&all)
        };
        let config = with(&[
            ("PRICES", "claude-sonnet-5=3/15,claude-haiku-4-5=1/5"),
            ("ALLOWED_MODELS", "claude-sonnet-5, claude-haiku-4-5"),
            ("MAX_THINKING_BUDGET_TOKENS", "0"),
            ("MAX_TRANSCRIPT_RETENTION_DAYS", "30"),
            ("TENANT_CONCURRENCY", "10"),
            ("TOOL_SECONDS_PER_ROUND", "0"),
            ("WHATSAPP_NEW_SENDERS_PER_HOUR", "60"),
            ("SCOPE_PLATFORM_ADMIN", "ops:platform"),
        ])
        .unwrap();
        let plan = &config.defaults.platform;
        assert_eq!(
            plan.models.as_deref(),
            Some(&["claude-sonnet-5".to_owned(), "claude-haiku-4-5".to_owned()][..])
        );
        assert_eq!(plan.max_thinking_budget_tokens, 0);
        assert_eq!(
            config.defaults.transcript_retention_days, 30,
            "fits the plan"
        );
        assert_eq!(plan.fair.concurrency, Some(10));
        assert_eq!(plan.fair.tool_seconds_per_round, None, "0 is no limit");
        assert_eq!(plan.whatsapp.new_senders_per_hour, Some(60));
        assert_eq!(config.scopes.platform_admin, "ops:platform");
        for (extra, named) in [
            (vec![("ALLOWED_MODELS", "claude-sonnet-5")], "PRICES"),
            (
                vec![
                    ("PRICES", "claude-haiku-4-5=1/5"),
                    ("ALLOWED_MODELS", "claude-haiku-4-5"),
                ],
                "ALLOWED_MODELS must hold MODEL",
            ),
            (
                vec![("MAX_THINKING_BUDGET_TOKENS", "100")],
                "MAX_THINKING_BUDGET_TOKENS",
            ),
            (
                vec![("MAX_FACT_RETENTION_DAYS", "0")],
                "MAX_FACT_RETENTION_DAYS",
            ),
            (
                vec![("MAX_COMPACTION_THRESHOLD_TOKENS", "1000")],
                "compaction_threshold_tokens",
            ),
            (vec![("TENANT_CONCURRENCY", "many")], "TENANT_CONCURRENCY"),
        ] {
            let err = with(&extra).unwrap_err().to_string();
            assert!(err.contains(named), "{extra:?}: {err}");
        }
    }
}
