//! The operator routes' service ([`Operate`]): the tenant's contacts, a contact's facts with
//! their provenance (read, set or corrected, deleted), the tenant's configuration
//! (read, and replaced only from the version it was read at), and its usage per day.
//!
//! An operator's value goes through the same [`FactPolicy`](crate::plan::facts::FactPolicy) as the model's, and
//! is stored with the contact's last message as its position, so that the next
//! extraction does not undo it (`crate::plan::facts::reconcile`).
//!
//! (`docs/DESIGN.md`: "Operating the memory".)

use std::sync::Arc;

use serde::Serialize;

mod facts;
pub mod platform;

use crate::channel::ChannelChecks;
use crate::domain::TenantId;
use crate::metering::PriceTable;
use crate::metering::{MAX_USAGE_DAYS, UsageCounts, format_day};
use crate::metrics::Event;
use crate::plan::session::Clock;
use crate::platform::{Policy, TenantPolicy};
use crate::service::{AskError, read_config, unusable};
use crate::store::{
    ContactCursor, ContactPage, JobStore, MAX_CONTACT_PAGE, OperatorStore, UsageStore,
};
use crate::tenant::{
    Defaults, Settings, StoredConfig, TenantConfig, TenantStore, bounds, stored_settings,
};

/// The operator routes' service and the ports it calls.
#[derive(Clone)]
pub struct Operate {
    /// The tenant's contacts and a contact's facts.
    pub store: Arc<dyn OperatorStore>,
    /// A live head's conditioned fact writes (the facts job's own, so an
    /// operator's value lands only on the head it was read from).
    pub facts: Arc<dyn JobStore>,
    /// The tenant's usage counts, read per day.
    pub usage: Arc<dyn UsageStore>,
    /// Tenant configuration and the platform's policy item.
    pub tenants: Arc<dyn TenantStore>,
    /// Service-wide defaults.
    pub defaults: Defaults,
    /// The clock.
    pub clock: Clock,
    /// The channels' checks of their sections of a config (none: kept unchecked).
    pub channels: ChannelChecks,
}

/// Contacts listed when no `limit` is asked for.
pub const DEFAULT_CONTACT_PAGE: usize = 20;

/// The tenant's stored configuration, its version, whether it is usable, and the
/// platform's bounds it lives in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigState {
    /// The item as stored, when there is one.
    pub stored: Option<StoredConfig>,
    /// Why it cannot be used (it does not read, or breaks a rule), when it cannot.
    pub problem: Option<String>,
    /// The bounds of the platform's policy the stored configuration was clamped
    /// to when read (a bound lowered after it was stored), each named.
    pub clamped: Vec<String>,
    /// The platform's policy in force for the tenant (what a change must fit).
    pub policy: Policy,
}

impl ConfigState {
    /// The version a change must name (0: none stored).
    pub fn version(&self) -> u64 {
        self.stored.as_ref().map_or(0, |stored| stored.version)
    }
}

/// One model's tokens of a day, priced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelTokensView {
    /// The model id (`client` for rounds a client recorded).
    pub model: String,
    /// Uncached input.
    pub input: u64,
    /// Five-minute cache writes.
    pub cache_write_5m: u64,
    /// One-hour cache writes.
    pub cache_write_1h: u64,
    /// Cache reads.
    pub cache_read: u64,
    /// Output.
    pub output: u64,
    /// At the deployment's prices; `None` when it has none for the model.
    pub cost_usd: Option<f64>,
}

/// A day of a tenant's usage, as `GET /v1/usage` answers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageDayView {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// Rounds committed.
    pub rounds: u64,
    /// Answer calls.
    pub model_calls: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Summary calls.
    pub summary_calls: u64,
    /// Fact extraction calls.
    pub facts_calls: u64,
    /// WhatsApp messages in.
    pub whatsapp_in: u64,
    /// WhatsApp messages out.
    pub whatsapp_out: u64,
    /// WhatsApp turns a limit of the number held back in the queue.
    pub whatsapp_held: u64,
    /// Tokens by model.
    pub tokens: Vec<ModelTokensView>,
    /// The sum of the models' costs; `None` when one has no price.
    pub cost_usd: Option<f64>,
}

impl Operate {
    /// The service on one store holding every port it calls (the DynamoDB
    /// adapter's, or the in-memory one).
    pub fn on<S: OperatorStore + JobStore + UsageStore + TenantStore + 'static>(
        store: Arc<S>,
        defaults: Defaults,
        clock: Clock,
    ) -> Operate {
        Operate {
            store: store.clone(),
            facts: store.clone(),
            usage: store.clone(),
            tenants: store,
            defaults,
            clock,
            channels: ChannelChecks::default(),
        }
    }

    /// The service checking the channels' sections of a config with `channels`
    /// (on a change, and on the stored config's state).
    #[must_use]
    pub fn checking(self, channels: ChannelChecks) -> Operate {
        Operate { channels, ..self }
    }

    /// A page of the tenant's contacts, most recently active first.
    pub async fn contacts(
        &self,
        tenant: &TenantId,
        limit: Option<usize>,
        after: Option<&ContactCursor>,
    ) -> Result<ContactPage, AskError> {
        let limit = limit.unwrap_or(DEFAULT_CONTACT_PAGE);
        if !(1..=MAX_CONTACT_PAGE).contains(&limit) {
            return Err(AskError::InvalidRequest(format!(
                "`limit` must be from 1 to {MAX_CONTACT_PAGE}"
            )));
        }
        let now = (self.clock)();
        Ok(self.store.contacts(tenant, limit, after, now).await?)
    }

    /// The tenant's stored configuration and whether it is usable, inside the
    /// platform's policy for it.
    pub async fn config_state(&self, tenant: &TenantId) -> Result<ConfigState, AskError> {
        let stored = self.tenants.stored_config(tenant).await?;
        let item = read_config(self.tenants.tenant_policy(tenant).await)?;
        Ok(self.state_of(stored, item.as_ref()))
    }

    /// The state of `stored` under the platform's `item` for the tenant.
    fn state_of(&self, stored: Option<StoredConfig>, item: Option<&TenantPolicy>) -> ConfigState {
        let read = |stored: &StoredConfig| {
            let config = stored.read()?;
            self.channels.check(&config).map(|()| config)
        };
        let (problem, clamped) = match stored.as_ref().map(read).transpose() {
            Err(reason) => (Some(reason), Vec::new()),
            Ok(config) => match Settings::resolve_under(&self.defaults, config.as_ref(), item) {
                Ok(settings) => (None, settings.clamped),
                Err(error) => (Some(error.0), Vec::new()),
            },
        };
        ConfigState {
            stored,
            problem,
            clamped,
            policy: self.defaults.policy(item),
        }
    }

    /// Replaces the tenant's configuration with `text` (a JSON object), checked in
    /// full first (every field, the channels' sections with their registered
    /// checks, the platform's bounds, then the settings it makes),
    /// only while the stored version is `expected`. Answers the state it stored,
    /// with its own new version (never another writer's, landed since).
    pub async fn replace_config(
        &self,
        tenant: &TenantId,
        text: &str,
        expected: u64,
    ) -> Result<ConfigState, AskError> {
        let candidate = StoredConfig {
            text: text.to_owned(),
            version: 0,
        };
        let config: TenantConfig = candidate
            .read()
            .and_then(|config| self.channels.check(&config).map(|()| config))
            .map_err(|reason| AskError::InvalidRequest(format!("config: {reason}")))?;
        let item = read_config(self.tenants.tenant_policy(tenant).await)?;
        bounds::check(&config, &self.defaults.policy(item.as_ref())).map_err(|breach| {
            Event::new("ask").count("ConfigOutsidePolicy", 1).emit();
            AskError::Forbidden(breach.0)
        })?;
        Settings::resolve_under(&self.defaults, Some(&config), item.as_ref())
            .map_err(|error| AskError::InvalidRequest(format!("config: {}", error.0)))?;
        match self
            .tenants
            .replace_config(tenant, &config, expected)
            .await?
        {
            Some(version) => {
                let text = serde_json::to_string(&config)
                    .map_err(|error| AskError::Internal(error.to_string()))?;
                let stored = StoredConfig { text, version };
                Ok(self.state_of(Some(stored), item.as_ref()))
            }
            None => Err(AskError::PreconditionFailed(format!(
                "the configuration is no longer version {expected}: another change landed \
                 first; read it again and reapply"
            ))),
        }
    }

    /// The tenant's usage from day `from` to day `to` (inclusive), priced.
    pub async fn usage(
        &self,
        tenant: &TenantId,
        from: i64,
        to: i64,
    ) -> Result<Vec<UsageDayView>, AskError> {
        if to < from || to - from >= MAX_USAGE_DAYS {
            return Err(AskError::InvalidRequest(format!(
                "`from` must be on or before `to`, and the range at most {MAX_USAGE_DAYS} days"
            )));
        }
        let days = self.usage.usage(tenant, from, to).await?;
        let item = read_config(self.tenants.tenant_policy(tenant).await)?;
        let prices = self.defaults.policy(item.as_ref()).prices;
        Ok(days
            .into_iter()
            .map(|(day, counts)| priced(&prices, day, counts))
            .collect())
    }

    /// The settings an operator's change is checked against.
    async fn operator_settings(&self, tenant: &TenantId) -> Result<Settings, AskError> {
        let stored = stored_settings(self.tenants.as_ref(), &self.defaults, tenant);
        read_config(stored.await)?.map_err(unusable)
    }
}

/// A day of usage priced at `prices` (`None` for a model without a price).
pub fn priced(prices: &PriceTable, day: i64, counts: UsageCounts) -> UsageDayView {
    let tokens: Vec<ModelTokensView> = counts
        .tokens
        .iter()
        .map(|(model, tokens)| ModelTokensView {
            model: model.clone(),
            input: tokens.input,
            cache_write_5m: tokens.cache_write_5m,
            cache_write_1h: tokens.cache_write_1h,
            cache_read: tokens.cache_read,
            output: tokens.output,
            cost_usd: prices.cost(model, tokens),
        })
        .collect();
    let cost_usd = tokens.iter().map(|t| t.cost_usd).sum::<Option<f64>>();
    UsageDayView {
        day: format_day(day),
        rounds: counts.rounds,
        model_calls: counts.model_calls,
        tool_calls: counts.tool_calls,
        summary_calls: counts.summary_calls,
        facts_calls: counts.facts_calls,
        whatsapp_in: counts.whatsapp_in,
        whatsapp_out: counts.whatsapp_out,
        whatsapp_held: counts.whatsapp_held,
        tokens,
        cost_usd,
    }
}
