//! The platform over its tenants: the second authority. A tenant's `CONFIG`
//! (written with `tenant:admin`) says how its agent behaves; the platform's policy
//! says what the tenant may choose, and no tenant token can write it.
//!
//! * The **plan** ([`Plan`]) is the deployment's, from the environment (read once
//!   at init; the template's parameters): the models a tenant may choose, the
//!   bounds on thinking, the step threshold, retention and webhook tools, the fair
//!   share of each tenant ([`FairShare`]) and the limits of a public WhatsApp
//!   number ([`NumberLimits`]). The quota ceilings are the deployment's quotas
//!   (`QUOTA_ROUNDS_PER_HOUR`, `QUOTA_SUMMARY_CALLS_PER_HOUR`).
//! * A **tenant policy** ([`TenantPolicy`], the `POLICY` item beside the tenant's
//!   `CONFIG`) is the platform's own word about one tenant: a suspension, and any
//!   value of the plan set for this tenant alone (up or down: it is the tenant's
//!   plan, set by whoever runs the platform, through the `platform:admin` routes).
//! * The **policy in force** ([`Policy`]) is the plan with the tenant's policy over
//!   it. A tenant's `PUT /v1/tenant/config` outside it is refused naming the bound
//!   (`crate::tenant::bounds`); a stored configuration a bound lowered later no
//!   longer fits is clamped when read, and the configuration's `GET` says so.
//!
//! (`docs/DESIGN.md`: "The platform over its tenants".)

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::TenantId;
use crate::metering::PriceTable;
use crate::quota::Limits;
use crate::store::StoreError;

/// Largest thinking budget degrau accepts: with the answer's own 1,024 tokens, and
/// twice that for a retried tool call, an assistant message stays far below
/// DynamoDB's 400 KB item limit. A plan or a policy may set a smaller one.
pub const MAX_THINKING_BUDGET: u32 = 8_000;
/// `MAX_TRANSCRIPT_RETENTION_DAYS` when unset: a year.
pub const DEFAULT_MAX_TRANSCRIPT_RETENTION_DAYS: u32 = 365;
/// `MAX_FACT_RETENTION_DAYS` when unset: two years.
pub const DEFAULT_MAX_FACT_RETENTION_DAYS: u32 = 730;
/// `MAX_WEBHOOK_TOOLS` when unset.
pub const DEFAULT_MAX_WEBHOOK_TOOLS: u32 = 16;
/// The longest model id a policy names.
pub const MAX_MODEL_ID_CHARS: usize = 128;
/// Most models one policy allows.
pub const MAX_POLICY_MODELS: usize = 32;

/// A tenant's fair share of the deployment (`None`: no limit). Each limit refused
/// answers 429 `rate_limited` with `Retry-After`, and stores nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FairShare {
    /// Asks and streams of the tenant running at once (a lease each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Rounds (asked, streamed or recorded) the tenant may start per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_per_minute: Option<u32>,
    /// Seconds of tool calls one round may spend in all; a call past them is not
    /// made, and the model reads why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_seconds_per_round: Option<u32>,
    /// Turns one contact may start per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_turns_per_minute: Option<u32>,
}

/// The limits of a tenant's public WhatsApp numbers, apart from its API quota
/// (`None`: no limit). A message a limit refuses waits in the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumberLimits {
    /// Turns one business number may answer per hour (the number's budget; a
    /// WhatsApp turn spends it instead of the tenant's API rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_per_hour: Option<u32>,
    /// Turns one sender may start per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_turns_per_minute: Option<u32>,
    /// Senders the tenant has no conversation with whose first turn one number may
    /// answer per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_senders_per_hour: Option<u32>,
}

/// The deployment's plan for every tenant, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The answer models a tenant may choose (`ALLOWED_MODELS`); `None`: any (the
    /// core's default, for tests; a deployment always names them).
    pub models: Option<Vec<String>>,
    /// The largest thinking budget (`MAX_THINKING_BUDGET_TOKENS`; 0: no thinking).
    pub max_thinking_budget_tokens: u32,
    /// The largest step threshold (`MAX_COMPACTION_THRESHOLD_TOKENS`).
    pub max_compaction_threshold_tokens: u64,
    /// The longest transcript retention (`MAX_TRANSCRIPT_RETENTION_DAYS`).
    pub max_transcript_retention_days: u32,
    /// The longest fact retention (`MAX_FACT_RETENTION_DAYS`).
    pub max_fact_retention_days: u32,
    /// The most webhook tools a tenant declares (`MAX_WEBHOOK_TOOLS`).
    pub max_webhook_tools: u32,
    /// Each tenant's fair share (`TENANT_CONCURRENCY`, `TENANT_ROUNDS_PER_MINUTE`,
    /// `TOOL_SECONDS_PER_ROUND`, `CONTACT_TURNS_PER_MINUTE`).
    pub fair: FairShare,
    /// Each public number's limits (`WHATSAPP_TURNS_PER_HOUR`,
    /// `WHATSAPP_SENDER_TURNS_PER_MINUTE`, `WHATSAPP_NEW_SENDERS_PER_HOUR`).
    pub whatsapp: NumberLimits,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            models: None,
            max_thinking_budget_tokens: MAX_THINKING_BUDGET,
            max_compaction_threshold_tokens: crate::plan::step_plan::CompactionPolicy::default()
                .hard_limit_tokens,
            max_transcript_retention_days: DEFAULT_MAX_TRANSCRIPT_RETENTION_DAYS,
            max_fact_retention_days: DEFAULT_MAX_FACT_RETENTION_DAYS,
            max_webhook_tools: DEFAULT_MAX_WEBHOOK_TOOLS,
            fair: FairShare::default(),
            whatsapp: NumberLimits::default(),
        }
    }
}

/// A model's price in a tenant policy, USD per million tokens (cache writes and
/// reads priced from the input, as `PRICES` does).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPriceUsd {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
}

/// The platform's policy item of one tenant (`POLICY`): every field optional, each
/// replacing the plan's value for this tenant. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantPolicy {
    /// True: every round of the tenant is refused (403), whatever its config says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended: Option<bool>,
    /// The ceiling (and default) of the tenant's rounds per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds_per_hour: Option<u32>,
    /// The ceiling (and default) of the tenant's summary calls per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_calls_per_hour: Option<u32>,
    /// The answer models the tenant may choose, each with its price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<BTreeMap<String, ModelPriceUsd>>,
    /// The largest thinking budget (0: no thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_thinking_budget_tokens: Option<u32>,
    /// The largest step threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_compaction_threshold_tokens: Option<u64>,
    /// The longest transcript retention, days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_transcript_retention_days: Option<u32>,
    /// The longest fact retention, days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fact_retention_days: Option<u32>,
    /// The most webhook tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_webhook_tools: Option<u32>,
    /// The tenant's fair share; each field set replaces the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<FairShare>,
    /// Its public numbers' limits; each field set replaces the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whatsapp: Option<NumberLimits>,
}

impl TenantPolicy {
    /// The rules no field's type says: fair-share and number limits of at least
    /// 1, a thinking budget of 0 or within the API's bounds, retention of at least
    /// a day, model ids and prices that read. The reason names the field.
    pub fn check(&self) -> Result<(), String> {
        let positive = |name: &str, value: Option<u32>| match value {
            Some(0) => Err(format!(
                "{name} must be at least 1 (leave it out for no limit)"
            )),
            _ => Ok(()),
        };
        if let Some(fair) = &self.fair_share {
            positive("fair_share.concurrency", fair.concurrency)?;
            positive("fair_share.rounds_per_minute", fair.rounds_per_minute)?;
            positive(
                "fair_share.tool_seconds_per_round",
                fair.tool_seconds_per_round,
            )?;
            positive(
                "fair_share.contact_turns_per_minute",
                fair.contact_turns_per_minute,
            )?;
        }
        if let Some(number) = &self.whatsapp {
            positive("whatsapp.turns_per_hour", number.turns_per_hour)?;
            positive(
                "whatsapp.sender_turns_per_minute",
                number.sender_turns_per_minute,
            )?;
            positive("whatsapp.new_senders_per_hour", number.new_senders_per_hour)?;
        }
        if let Some(budget) = self.max_thinking_budget_tokens {
            let (min, max) = (
                crate::plan::validate::MIN_THINKING_BUDGET,
                MAX_THINKING_BUDGET,
            );
            if budget != 0 && !(min..=max).contains(&budget) {
                return Err(format!(
                    "max_thinking_budget_tokens must be 0 (no thinking) or from {min} to {max}"
                ));
            }
        }
        for (name, days) in [
            (
                "max_transcript_retention_days",
                self.max_transcript_retention_days,
            ),
            ("max_fact_retention_days", self.max_fact_retention_days),
        ] {
            positive(name, days)?;
        }
        if let Some(models) = &self.models {
            check_models(models)?;
        }
        Ok(())
    }
}

fn check_models(models: &BTreeMap<String, ModelPriceUsd>) -> Result<(), String> {
    if models.is_empty() || models.len() > MAX_POLICY_MODELS {
        return Err(format!(
            "models must name 1 to {MAX_POLICY_MODELS} models (leave it out for the plan's)"
        ));
    }
    for (model, price) in models {
        let id_ok = !model.is_empty()
            && model.chars().count() <= MAX_MODEL_ID_CHARS
            && model
                .chars()
                .all(|c| c.is_ascii_graphic() && c != ',' && c != '=');
        if !id_ok {
            return Err(format!(
                "models: a model id is 1-{MAX_MODEL_ID_CHARS} visible ASCII characters \
                 without `,` or `=`"
            ));
        }
        let usd_ok = |usd: f64| usd.is_finite() && (0.0..=1_000_000.0).contains(&usd);
        if !usd_ok(price.input) || !usd_ok(price.output) {
            return Err(format!(
                "models.{model}: a price is a number of USD per million tokens from 0 to 1,000,000"
            ));
        }
    }
    Ok(())
}

/// The policy in force for one tenant: the plan with its [`TenantPolicy`] over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Every round refused.
    pub suspended: bool,
    /// The ceiling (and default) of the rounds per hour.
    pub rounds_per_hour: u32,
    /// The ceiling (and default) of the summary calls per hour.
    pub summary_calls_per_hour: u32,
    /// The answer models the tenant may choose (`None`: any).
    pub models: Option<Vec<String>>,
    /// The largest thinking budget (0: none).
    pub max_thinking_budget_tokens: u32,
    /// The largest step threshold.
    pub max_compaction_threshold_tokens: u64,
    /// The longest transcript retention, days.
    pub max_transcript_retention_days: u32,
    /// The longest fact retention, days.
    pub max_fact_retention_days: u32,
    /// The most webhook tools.
    pub max_webhook_tools: u32,
    /// The tenant's fair share.
    pub fair_share: FairShare,
    /// Its public numbers' limits.
    pub whatsapp: NumberLimits,
    /// What the tenant's usage is priced at: the deployment's prices, and the
    /// tenant policy's own for its models.
    #[serde(skip)]
    pub prices: PriceTable,
}

impl Policy {
    /// The plan, with `quota` its ceilings and `prices` its prices, and the
    /// tenant's `item` over it.
    pub fn new(
        plan: &Plan,
        quota: Limits,
        prices: &PriceTable,
        item: Option<&TenantPolicy>,
    ) -> Policy {
        let item = item.cloned().unwrap_or_default();
        let mut prices = prices.clone();
        let models = match &item.models {
            Some(models) => {
                for (model, price) in models {
                    prices.set(model, price.input, price.output);
                }
                Some(models.keys().cloned().collect())
            }
            None => plan.models.clone(),
        };
        let fair = item.fair_share.unwrap_or_default();
        let number = item.whatsapp.unwrap_or_default();
        Policy {
            suspended: item.suspended.unwrap_or(false),
            rounds_per_hour: item.rounds_per_hour.unwrap_or(quota.rounds_per_hour),
            summary_calls_per_hour: item
                .summary_calls_per_hour
                .unwrap_or(quota.summary_calls_per_hour),
            models,
            max_thinking_budget_tokens: item
                .max_thinking_budget_tokens
                .unwrap_or(plan.max_thinking_budget_tokens),
            max_compaction_threshold_tokens: item
                .max_compaction_threshold_tokens
                .unwrap_or(plan.max_compaction_threshold_tokens),
            max_transcript_retention_days: item
                .max_transcript_retention_days
                .unwrap_or(plan.max_transcript_retention_days),
            max_fact_retention_days: item
                .max_fact_retention_days
                .unwrap_or(plan.max_fact_retention_days),
            max_webhook_tools: item.max_webhook_tools.unwrap_or(plan.max_webhook_tools),
            fair_share: FairShare {
                concurrency: fair.concurrency.or(plan.fair.concurrency),
                rounds_per_minute: fair.rounds_per_minute.or(plan.fair.rounds_per_minute),
                tool_seconds_per_round: fair
                    .tool_seconds_per_round
                    .or(plan.fair.tool_seconds_per_round),
                contact_turns_per_minute: fair
                    .contact_turns_per_minute
                    .or(plan.fair.contact_turns_per_minute),
            },
            whatsapp: NumberLimits {
                turns_per_hour: number.turns_per_hour.or(plan.whatsapp.turns_per_hour),
                sender_turns_per_minute: number
                    .sender_turns_per_minute
                    .or(plan.whatsapp.sender_turns_per_minute),
                new_senders_per_hour: number
                    .new_senders_per_hour
                    .or(plan.whatsapp.new_senders_per_hour),
            },
            prices,
        }
    }

    /// The quota ceilings.
    pub fn quota(&self) -> Limits {
        Limits {
            rounds_per_hour: self.rounds_per_hour,
            summary_calls_per_hour: self.summary_calls_per_hour,
        }
    }

    /// Whether the tenant may choose `model`.
    pub fn allows_model(&self, model: &str) -> bool {
        self.models
            .as_ref()
            .is_none_or(|models| models.iter().any(|allowed| allowed == model))
    }
}

/// A tenant's `POLICY` item as stored: its JSON and its version (1 for the first
/// write, one more for each), like the `CONFIG` item's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPolicy {
    /// The policy's JSON.
    pub text: String,
    /// Its version: the ETag of the platform's policy route is `"v{version}"`.
    pub version: u64,
}

impl StoredPolicy {
    /// The policy it holds, or why it does not read (naming the field).
    pub fn read(&self) -> Result<TenantPolicy, String> {
        let deserializer = &mut serde_json::Deserializer::from_str(&self.text);
        let policy: TenantPolicy =
            serde_path_to_error::deserialize(deserializer).map_err(|err| {
                let path = err.path().to_string();
                let text = err.into_inner().to_string();
                let text = match text.rfind(" at line ") {
                    Some(at) => text[..at].to_owned(),
                    None => text,
                };
                match path.as_str() {
                    "." | "" => text,
                    _ => format!("{path}: {text}"),
                }
            })?;
        policy.check()?;
        Ok(policy)
    }
}

/// A page of the platform's tenants, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantPage {
    /// The tenants, in id order.
    pub tenants: Vec<TenantId>,
    /// The last one listed, to list after, when more may follow.
    pub next: Option<TenantId>,
}

/// Most tenants one page lists.
pub const MAX_TENANT_PAGE: usize = 100;

/// The platform's storage: the tenants' policy items, and the list of tenants (a
/// tenant is listed once it has a config, a policy, or counted usage).
#[async_trait]
pub trait PolicyStore: Send + Sync {
    /// The tenant's `POLICY` item as stored, if one was written.
    async fn stored_policy(&self, tenant: &TenantId) -> Result<Option<StoredPolicy>, StoreError>;

    /// Replaces the policy only while the stored version is `expected` (0: none
    /// is stored): `Some(new version)`, or `None` when another change landed first
    /// (nothing written).
    async fn replace_policy(
        &self,
        tenant: &TenantId,
        policy: &TenantPolicy,
        expected: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// At most `limit` tenants after `after`, in id order.
    async fn tenants(
        &self,
        limit: usize,
        after: Option<&TenantId>,
    ) -> Result<TenantPage, StoreError>;
}

#[cfg(test)]
mod tests;
