//! The tenant defaults from the environment: the models, the window, the cache and
//! the pause fold, the session, prices and quotas, then the platform's plan they must
//! fit (see [`degrau::tenant::Defaults`]). Read once at init with the rest of
//! [`super::Config`]; each group in turn, so the first bad variable is the one named.

use degrau::tenant::Defaults;

use super::{ConfigError, Vars, plan};

/// The tenant defaults the environment overrides; they must hold for a tenant
/// without a config of its own.
pub(super) fn defaults(vars: &Vars<'_>) -> Result<Defaults, ConfigError> {
    let mut defaults = Defaults::default();
    models_and_window(vars, &mut defaults)?;
    cache_and_fold(vars, &mut defaults)?;
    session_prices_and_quota(vars, &mut defaults)?;
    fit_the_plan(vars, &mut defaults)?;
    defaults.sweep_buckets = match vars.get("SWEEP_BUCKETS") {
        None => defaults.sweep_buckets,
        Some(text) => text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            ConfigError(format!(
                "SWEEP_BUCKETS must be a whole number from 1 to 255, got {text:?}"
            ))
        })?,
    };
    Ok(defaults)
}

/// `MODEL`, `SUMMARY_MODEL`, `COMPACTION_THRESHOLD_TOKENS`, `WINDOW_KEEP_MESSAGES`
/// and `WINDOW_KEEP_TOKENS`.
fn models_and_window(vars: &Vars<'_>, defaults: &mut Defaults) -> Result<(), ConfigError> {
    if let Some(model) = vars.get("MODEL") {
        defaults.model = model.to_owned();
    }
    if let Some(model) = vars.get("SUMMARY_MODEL") {
        defaults.summary_model = model.to_owned();
    }
    defaults.compaction.threshold_tokens = vars.number(
        "COMPACTION_THRESHOLD_TOKENS",
        defaults.compaction.threshold_tokens,
    )?;
    defaults.compaction.keep_messages =
        vars.number("WINDOW_KEEP_MESSAGES", defaults.compaction.keep_messages)?;
    defaults.compaction.keep_tokens =
        vars.number("WINDOW_KEEP_TOKENS", defaults.compaction.keep_tokens)?;
    Ok(())
}

/// `CACHE_TTL`, `PAUSE_FOLD` and `PAUSE_FOLD_KEEP_MESSAGES`.
fn cache_and_fold(vars: &Vars<'_>, defaults: &mut Defaults) -> Result<(), ConfigError> {
    if let Some(ttl) = vars.get("CACHE_TTL") {
        defaults.cache_ttl =
            degrau::plan::cache_ttl::CacheTtlPolicy::parse(ttl).ok_or_else(|| {
                ConfigError(format!(
                    "CACHE_TTL must be `5m`, `1h` or `auto`, got {ttl:?}"
                ))
            })?;
    }
    if let Some(fold) = vars.get("PAUSE_FOLD") {
        defaults.compaction.pause_fold = match fold {
            "on" => true,
            "off" => false,
            other => {
                return Err(ConfigError(format!(
                    "PAUSE_FOLD must be `on` or `off`, got {other:?}"
                )));
            }
        };
    }
    defaults.compaction.fold_keep_messages = match vars.get("PAUSE_FOLD_KEEP_MESSAGES") {
        None => defaults.compaction.fold_keep_messages,
        Some(text) => text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            ConfigError(format!(
                "PAUSE_FOLD_KEEP_MESSAGES must be a whole number of at least 1, got {text:?}"
            ))
        })?,
    };
    Ok(())
}

/// `SESSION_IDLE_MINUTES` (at least 1, checked after the others of this group),
/// `PRICES`, `QUOTA_ROUNDS_PER_HOUR`, `QUOTA_SUMMARY_CALLS_PER_HOUR` and
/// `CONTEXT_POLICY`.
fn session_prices_and_quota(vars: &Vars<'_>, defaults: &mut Defaults) -> Result<(), ConfigError> {
    defaults.session_idle_minutes =
        vars.number("SESSION_IDLE_MINUTES", defaults.session_idle_minutes)?;
    if let Some(prices) = vars.get("PRICES") {
        defaults.prices = degrau::metering::PriceTable::parse(prices)
            .map_err(|problem| ConfigError(format!("PRICES: {problem}")))?;
    }
    defaults.quota.rounds_per_hour =
        vars.number("QUOTA_ROUNDS_PER_HOUR", defaults.quota.rounds_per_hour)?;
    defaults.quota.summary_calls_per_hour = vars.number(
        "QUOTA_SUMMARY_CALLS_PER_HOUR",
        defaults.quota.summary_calls_per_hour,
    )?;
    if let Some(policy) = vars.get("CONTEXT_POLICY") {
        defaults.context_policy =
            degrau::tenant::ContextPolicy::parse(policy).ok_or_else(|| {
                ConfigError(format!(
                    "CONTEXT_POLICY must be `stepped`, `full` or `sliding`, got {policy:?}"
                ))
            })?;
    }
    if defaults.session_idle_minutes == 0 {
        return Err(ConfigError(
            "SESSION_IDLE_MINUTES must be at least 1".into(),
        ));
    }
    Ok(())
}

/// The platform's plan, the code's default retentions brought within its bounds, and
/// the check that the deployment's defaults fit it.
fn fit_the_plan(vars: &Vars<'_>, defaults: &mut Defaults) -> Result<(), ConfigError> {
    defaults.platform = plan::plan(vars, defaults)?;
    // The code's default retentions never exceed the plan's bounds.
    defaults.transcript_retention_days = defaults
        .transcript_retention_days
        .min(defaults.platform.max_transcript_retention_days);
    defaults.fact_retention_days = defaults
        .fact_retention_days
        .min(defaults.platform.max_fact_retention_days);
    let settings = degrau::tenant::Settings::resolve(defaults, None)
        .map_err(|err| ConfigError(format!("SESSION_IDLE_MINUTES: {err}")))?;
    if let Some(clamped) = settings.clamped.first() {
        return Err(ConfigError(format!(
            "the deployment's defaults must fit its own plan: {clamped}"
        )));
    }
    Ok(())
}
