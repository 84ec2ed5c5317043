//! The limits of a public WhatsApp number, applied by the worker before it takes a
//! turn ([`degrau::fairshare::whatsapp_turn`]): the sender's turns per minute, the
//! number's new senders per hour and turns per hour, apart from the tenant's API
//! rounds. A turn they refuse is not taken: its records stay pending, the refusal
//! is counted (the metric `MessagesHeld` and the day's `whatsapp_held` of the
//! tenant's usage, which `GET /v1/usage` shows the business), and its queue message
//! waits until the limit may allow it ([`WorkerError::Held`], [`super::inbox::Hold`]).

use tracing::warn;

use super::PhoneNumberId;
use super::worker::{FUNCTION, Worker, WorkerError};
use degrau::deadline::Deadline;
use degrau::metering::UsageCounts;
use degrau::metrics::Event;
use degrau::store::{ContactKey, StoreError};

impl Worker {
    /// The public number's limits for a turn of `key` on `phone` (see
    /// [`degrau::fairshare::whatsapp_turn`]): a turn they refuse is not taken; the
    /// refusal is counted (`MessagesHeld`, and the day's `whatsapp_held` of the
    /// tenant's usage) and the message waits ([`WorkerError::Held`]).
    pub(super) async fn admit_turn(
        &self,
        key: &ContactKey,
        phone: &PhoneNumberId,
        messages: usize,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        let tenants = self.ask.tenants.as_ref();
        let settings = degrau::tenant::stored_settings(tenants, &self.ask.defaults, &key.tenant)
            .await?
            .map_err(|error| WorkerError::Store(StoreError::InvalidConfig(error.0)))?;
        let now = (self.clock)();
        // A sender the tenant has a live conversation with is no new one.
        let known = self
            .ask
            .store
            .load_head(key)
            .await?
            .is_some_and(|head| !head.expired_at(now));
        let limits = &settings.policy.whatsapp;
        let quotas = self.ask.quotas.as_ref();
        let checked =
            degrau::fairshare::whatsapp_turn(quotas, key, phone.as_str(), limits, known, now)
                .await?;
        let Err(throttle) = checked else {
            return Ok(());
        };
        warn!(
            limit = throttle.limit,
            what = throttle.what.as_str(),
            retry_after = throttle.retry_after,
            "a limit of the number holds the turn back; its messages wait in the queue"
        );
        Event::new(FUNCTION)
            .dimension("Limit", throttle.what.as_str())
            .rollup()
            .count("MessagesHeld", messages as u64)
            .emit();
        let held = UsageCounts {
            whatsapp_held: messages as u64,
            ..UsageCounts::default()
        };
        self.ask.count_usage(&key.tenant, &held, deadline).await;
        Err(WorkerError::Held(throttle))
    }
}
