//! Tenant configuration: the defaults from the environment, overridden per tenant by
//! the `CONFIG` item, inside the platform's policy ([`crate::platform`]; the bounds
//! are checked and applied in [`bounds`]).
//!
//! (`docs/DESIGN.md`: "Retention", "The platform over its tenants".)

pub mod bounds;
pub mod section;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{FactKey, TenantId};
use crate::plan::cache_ttl::CacheTtlPolicy;
use crate::plan::step_plan::CompactionPolicy;
use crate::platform::{Plan, Policy, TenantPolicy};
use crate::store::StoreError;
use crate::tools::{ToolDeclaration, ToolDeclarations};

/// The tenant's `CONFIG` item; every field is optional and overrides a default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// The agent's instructions (`system[0]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Keys facts may be stored under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_fact_keys: Option<Vec<FactKey>>,
    /// The tools this tenant's agent may call, in order: built-in tools by name,
    /// and webhook tools (every built-in tool when absent; see
    /// [`crate::tools::declared`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolDeclarations>,
    /// Model id for answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Context size (tokens) that triggers a compaction step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction_threshold_tokens: Option<u64>,
    /// Messages a step keeps in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_keep_messages: Option<usize>,
    /// Tokens the request after a step holds at least: the instructions, the
    /// contact context and the kept window, estimated (0: by message count only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_keep_tokens: Option<u64>,
    /// How long the cache entries live: `5m`, `1h` or `auto` (see
    /// [`crate::plan::cache_ttl`]); any other value is refused when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<CacheTtlPolicy>,
    /// Minutes without messages after which a session closes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_idle_minutes: Option<u64>,
    /// Days transcripts and summaries are kept after their session could close
    /// (its last message plus the idle timeout); at least 1, and at least the idle
    /// timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_retention_days: Option<u32>,
    /// Days facts are kept after their last update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fact_retention_days: Option<u32>,
    /// Extended thinking's budget in tokens for answers (absent: no thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget_tokens: Option<ThinkingBudget>,
    /// The WhatsApp channel's settings: a section the core keeps and never reads
    /// (the crate `degrau-whatsapp` reads it; see [`section`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp: Option<section::ChannelSection>,
    /// Rounds and summary calls per hour (see [`crate::quota`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::quota::QuotaConfig>,
    /// Whether a new session's contact context carries a one-paragraph digest of
    /// the contact's last session (see [`crate::plan::recall::digest`]; absent: no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall_digest: Option<bool>,
    /// Whether a streamed round shows each tool call's input with its
    /// `tool_started` event (absent: no; the input may quote the contact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_tool_input: Option<bool>,
    /// Where the contacts' events go (`docs/events.md`, [`crate::events`]; absent:
    /// no events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_webhook: Option<crate::tools::declared::EventsWebhook>,
}

impl TenantConfig {
    /// The section of the channel named `channel` (`whatsapp`), if the config
    /// has one; a channel the config has no field for has none.
    pub fn channel_section(&self, channel: &str) -> Option<&section::ChannelSection> {
        match channel {
            "whatsapp" => self.whatsapp.as_ref(),
            _ => None,
        }
    }
}

use crate::plan::validate::MIN_THINKING_BUDGET;

pub use crate::platform::MAX_THINKING_BUDGET;

/// A tenant's thinking budget: [`MIN_THINKING_BUDGET`] to [`MAX_THINKING_BUDGET`]
/// tokens; a `CONFIG` item with another value is refused when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct ThinkingBudget(u32);

impl ThinkingBudget {
    /// The budget in tokens.
    pub fn tokens(self) -> u32 {
        self.0
    }
}

impl TryFrom<u32> for ThinkingBudget {
    type Error = String;

    fn try_from(tokens: u32) -> Result<Self, String> {
        if (MIN_THINKING_BUDGET..=MAX_THINKING_BUDGET).contains(&tokens) {
            Ok(ThinkingBudget(tokens))
        } else {
            Err(format!(
                "thinking_budget_tokens must be from {MIN_THINKING_BUDGET} to {MAX_THINKING_BUDGET}, got {tokens}"
            ))
        }
    }
}

impl From<ThinkingBudget> for u32 {
    fn from(budget: ThinkingBudget) -> u32 {
        budget.0
    }
}

pub use crate::plan::policy::ContextPolicy;

/// Service-wide defaults, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defaults {
    /// `MODEL`.
    pub model: String,
    /// `SUMMARY_MODEL`.
    pub summary_model: String,
    /// Instructions for tenants without their own.
    pub instructions: String,
    /// Fact keys for tenants without their own list.
    pub allowed_fact_keys: Vec<FactKey>,
    /// `COMPACTION_THRESHOLD_TOKENS`, `WINDOW_KEEP_MESSAGES` and the hard limit.
    pub compaction: CompactionPolicy,
    /// `SESSION_IDLE_MINUTES`.
    pub session_idle_minutes: u64,
    /// Transcript retention in days.
    pub transcript_retention_days: u32,
    /// Fact retention in days.
    pub fact_retention_days: u32,
    /// `max_tokens` of an answer.
    pub max_tokens: u32,
    /// `CONTEXT_POLICY` (benchmarks only; `stepped` in production).
    pub context_policy: ContextPolicy,
    /// `SWEEP_BUCKETS`: how many partitions of the sweep index heads spread over
    /// (see [`crate::plan::sweep::sweep_bucket`]).
    pub sweep_buckets: u8,
    /// Most due heads one sweep reads per bucket
    /// ([`crate::plan::sweep::SWEEP_LIMIT_PER_BUCKET`]; a simulation sets fewer).
    pub sweep_limit_per_bucket: usize,
    /// `CACHE_TTL`: how long the cache entries live.
    pub cache_ttl: CacheTtlPolicy,
    /// `QUOTA_ROUNDS_PER_HOUR` and `QUOTA_SUMMARY_CALLS_PER_HOUR`.
    pub quota: crate::quota::Limits,
    /// `PRICES`: what the usage route prices each model's tokens at.
    pub prices: crate::metering::PriceTable,
    /// The platform's plan for every tenant (models, bounds, fair share, the
    /// public numbers' limits); `quota` above holds its ceilings.
    pub platform: Plan,
}

impl Defaults {
    /// The policy in force for a tenant with the platform's `item` (none: the plan).
    pub fn policy(&self, item: Option<&TenantPolicy>) -> Policy {
        Policy::new(&self.platform, self.quota, &self.prices, item)
    }
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            model: "claude-sonnet-5".into(),
            summary_model: "claude-haiku-4-5".into(),
            instructions:
                "You are a helpful assistant for a small business. Answer briefly, in the \
                           customer's language, and use the tools to check availability before \
                           offering or booking a time."
                    .into(),
            allowed_fact_keys: [
                "name",
                "preferred_language",
                "preferred_time",
                "preferred_professional",
                "preferred_service",
            ]
            .iter()
            .filter_map(|k| FactKey::parse(k).ok())
            .collect(),
            compaction: CompactionPolicy::default(),
            session_idle_minutes: 24 * 60,
            transcript_retention_days: 90,
            fact_retention_days: 365,
            max_tokens: 1024,
            context_policy: ContextPolicy::Stepped,
            sweep_buckets: crate::plan::sweep::DEFAULT_SWEEP_BUCKETS,
            sweep_limit_per_bucket: crate::plan::sweep::SWEEP_LIMIT_PER_BUCKET,
            cache_ttl: CacheTtlPolicy::default(),
            quota: crate::quota::Limits::default(),
            prices: crate::metering::PriceTable::default(),
            platform: Plan::default(),
        }
    }
}

/// The settings in force for one tenant: defaults with the tenant's overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Model id for answers.
    pub model: String,
    /// `max_tokens` of an answer.
    pub max_tokens: u32,
    /// What a request carries of the conversation.
    pub context_policy: ContextPolicy,
    /// The agent's instructions.
    pub instructions: String,
    /// Allowed fact keys.
    pub allowed_fact_keys: Vec<FactKey>,
    /// The tools the model may call, in order (every built-in tool unless the
    /// tenant declared its own list).
    pub tools: Vec<ToolDeclaration>,
    /// Compaction thresholds.
    pub compaction: CompactionPolicy,
    /// Idle minutes before a session closes.
    pub session_idle_minutes: u64,
    /// Transcript retention in days.
    pub transcript_retention_days: u32,
    /// Fact retention in days.
    pub fact_retention_days: u32,
    /// Extended thinking's budget for answers, in tokens (`None`: off).
    pub thinking_budget_tokens: Option<u32>,
    /// How long the cache entries live.
    pub cache_ttl: CacheTtlPolicy,
    /// Rounds and summary calls per hour.
    pub quota: crate::quota::Limits,
    /// Whether the contact context carries the digest of the last session.
    pub recall_digest: bool,
    /// Whether a streamed round shows its tool calls' input.
    pub stream_tool_input: bool,
    /// The platform's policy in force for the tenant (suspension, fair share,
    /// the public numbers' limits, prices).
    pub policy: Policy,
    /// The bounds of the policy the tenant's stored config was clamped to, each
    /// named (empty when it fits).
    pub clamped: Vec<String>,
}

/// Settings that cannot be honoured: named, with the values at fault (no personal
/// data; a tenant's config holds none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid settings: {0}")]
pub struct InvalidSettings(pub String);

impl Settings {
    /// Defaults overridden by the tenant's config, if any, and checked: the idle
    /// timeout is at least a minute, and the transcript retention at least a day
    /// and at least the idle timeout. A retention shorter than a session could
    /// stay open would let messages expire under an open window; a retention of 0
    /// would expire every message at once.
    pub fn resolve(
        defaults: &Defaults,
        tenant: Option<&TenantConfig>,
    ) -> Result<Settings, InvalidSettings> {
        Self::resolve_under(defaults, tenant, None)
    }

    /// [`Settings::resolve`] inside the policy of the platform's `policy` item
    /// for the tenant (none: the deployment's plan): values over a bound are
    /// clamped to it ([`bounds::clamp`]) before the rules are checked.
    pub fn resolve_under(
        defaults: &Defaults,
        tenant: Option<&TenantConfig>,
        policy: Option<&TenantPolicy>,
    ) -> Result<Settings, InvalidSettings> {
        let mut settings = Self::merge(defaults, tenant, defaults.policy(policy));
        settings.clamped = bounds::clamp(&mut settings, &defaults.model);
        if settings.session_idle_minutes == 0 {
            return Err(InvalidSettings(
                "session_idle_minutes must be at least 1".into(),
            ));
        }
        let retention_minutes = u64::from(settings.transcript_retention_days) * 24 * 60;
        if settings.transcript_retention_days == 0
            || retention_minutes < settings.session_idle_minutes
        {
            return Err(InvalidSettings(format!(
                "transcript_retention_days ({}) must be at least 1 and at least the idle \
                 timeout (session_idle_minutes {}, {} days rounded up)",
                settings.transcript_retention_days,
                settings.session_idle_minutes,
                settings.session_idle_minutes.div_ceil(24 * 60)
            )));
        }
        Ok(settings)
    }

    /// Seconds from a session's last message to the end of its transcript's
    /// retention: the idle timeout (until the session can close) plus the
    /// retention. Messages and the head expire this long after their round.
    pub fn retention_after_activity_seconds(&self) -> i64 {
        let seconds = self
            .session_idle_minutes
            .saturating_mul(60)
            .saturating_add(u64::from(self.transcript_retention_days) * 86_400);
        i64::try_from(seconds).unwrap_or(i64::MAX)
    }

    fn merge(defaults: &Defaults, tenant: Option<&TenantConfig>, policy: Policy) -> Settings {
        let tenant = tenant.cloned().unwrap_or_default();
        let mut compaction = defaults.compaction;
        if let Some(threshold) = tenant.compaction_threshold_tokens {
            compaction.threshold_tokens = threshold;
        }
        if let Some(keep) = tenant.window_keep_messages {
            compaction.keep_messages = keep;
        }
        if let Some(keep) = tenant.window_keep_tokens {
            compaction.keep_tokens = keep;
        }
        Settings {
            model: tenant.model.unwrap_or_else(|| defaults.model.clone()),
            max_tokens: defaults.max_tokens,
            context_policy: defaults.context_policy,
            instructions: tenant
                .instructions
                .filter(|text| !text.trim().is_empty())
                .unwrap_or_else(|| defaults.instructions.clone()),
            allowed_fact_keys: tenant
                .allowed_fact_keys
                .unwrap_or_else(|| defaults.allowed_fact_keys.clone()),
            tools: tenant
                .tools
                .map_or_else(ToolDeclaration::all_built_in, ToolDeclarations::into_vec),
            compaction,
            session_idle_minutes: tenant
                .session_idle_minutes
                .unwrap_or(defaults.session_idle_minutes),
            transcript_retention_days: tenant
                .transcript_retention_days
                .unwrap_or(defaults.transcript_retention_days),
            fact_retention_days: tenant
                .fact_retention_days
                .unwrap_or(defaults.fact_retention_days),
            thinking_budget_tokens: tenant.thinking_budget_tokens.map(ThinkingBudget::tokens),
            cache_ttl: tenant.cache_ttl.unwrap_or(defaults.cache_ttl),
            quota: policy.quota().with(tenant.quota.as_ref()),
            recall_digest: tenant.recall_digest.unwrap_or(false),
            stream_tool_input: tenant.stream_tool_input.unwrap_or(false),
            policy,
            clamped: Vec::new(),
        }
    }
}

/// A tenant's `CONFIG` item as stored: its JSON text, and its version (1 for the
/// first write, one more for each; an item from before versions reads as 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConfig {
    /// The configuration's JSON.
    pub text: String,
    /// Its version: the ETag of `GET /v1/tenant/config` is `"v{version}"`.
    pub version: u64,
}

impl StoredConfig {
    /// The configuration it holds, or why it does not read (naming the field).
    pub fn read(&self) -> Result<TenantConfig, String> {
        let deserializer = &mut serde_json::Deserializer::from_str(&self.text);
        serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            let text = err.into_inner().to_string();
            // serde_json's position is of the stored text, not of use to a reader.
            let text = match text.rfind(" at line ") {
                Some(at) => text[..at].to_owned(),
                None => text,
            };
            match path.as_str() {
                "." | "" => text,
                _ => format!("{path}: {text}"),
            }
        })
    }
}

/// Tenant configuration, read by `ask` at each turn (a single `GetItem`).
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// The tenant's `CONFIG` item as stored, if one was written.
    async fn stored_config(&self, tenant: &TenantId) -> Result<Option<StoredConfig>, StoreError>;

    /// The tenant's config, if one was written; one that does not read is
    /// [`StoreError::InvalidConfig`].
    async fn tenant_config(&self, tenant: &TenantId) -> Result<Option<TenantConfig>, StoreError> {
        self.stored_config(tenant)
            .await?
            .map(|stored| stored.read().map_err(StoreError::InvalidConfig))
            .transpose()
    }

    /// Writes (replaces) the tenant's config item, whatever version is stored
    /// (provisioning, tests); the version still moves on.
    async fn put_tenant_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
    ) -> Result<(), StoreError>;

    /// Replaces the config only while the stored version is `expected` (0: none
    /// is stored). `Some(new version)` when written, `None` when another change
    /// landed first (nothing is written).
    async fn replace_config(
        &self,
        tenant: &TenantId,
        config: &TenantConfig,
        expected: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// The platform's policy item for the tenant, if one was written (see
    /// [`crate::platform::PolicyStore`], which writes it); one that does not read
    /// is [`StoreError::InvalidConfig`], naming it. A store without policies has
    /// none: the deployment's plan holds for every tenant.
    async fn tenant_policy(&self, _tenant: &TenantId) -> Result<Option<TenantPolicy>, StoreError> {
        Ok(None)
    }
}

/// A tenant's settings as stored: its `CONFIG` item and the platform's policy item
/// for it, each read (one that does not read is [`StoreError::InvalidConfig`]), and
/// resolved over `defaults` inside the policy ([`Settings::resolve_under`]).
pub async fn stored_settings(
    tenants: &dyn TenantStore,
    defaults: &Defaults,
    tenant: &TenantId,
) -> Result<Result<Settings, InvalidSettings>, StoreError> {
    let config = tenants.tenant_config(tenant).await?;
    let policy = tenants.tenant_policy(tenant).await?;
    Ok(Settings::resolve_under(
        defaults,
        config.as_ref(),
        policy.as_ref(),
    ))
}

#[cfg(test)]
mod tests;
