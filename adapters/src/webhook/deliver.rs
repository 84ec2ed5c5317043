//! The events webhook's delivery: one event, one signed `POST`, by the webhook
//! tools' rules (the same scheme and address checks, the same secret path, the
//! same `Degrau-Signature`), for the `events-out` function (`docs/events.md`).
//!
//! **The call.** `POST url` with the event as the body (`{"id", "type", "tenant",
//! "contact", "at", "data"}`) and the headers `Content-Type: application/json`,
//! `User-Agent: degrau/<version> (events)`, `Idempotency-Key: <id>` and
//! `Degrau-Signature: t=..,v1=..`, signed afresh on each attempt.
//!
//! **The answer.** A 2xx is delivered; anything else (a status, a timeout, a
//! refused address, a secret that cannot be read) is a failure, and one attempt
//! only: the queue retries, by leaving the message for its next receive, and
//! dead-letters it after its `maxReceiveCount`.

use std::fmt;
use std::time::Duration;

use degrau::deadline::Deadline;
use degrau::domain::TenantId;
use degrau::events::Delivery;

use super::{CallError, MIN_ATTEMPT, WebhookCaller};

/// The `User-Agent` of every delivery.
pub const EVENTS_USER_AGENT: &str = concat!("degrau/", env!("CARGO_PKG_VERSION"), " (events)");

/// Why an event was not delivered: its kind (`refused`, `secret`, `timeout`,
/// `connection`, `too_large`, `status`) and the receiver's status, if any. Never
/// the body, the secret or the contact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFailure {
    /// The kind of failure.
    pub kind: &'static str,
    /// The receiver's status, for `status`.
    pub status: Option<u16>,
}

impl fmt::Display for DeliveryFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "{} {status}", self.kind),
            None => f.write_str(self.kind),
        }
    }
}

impl From<CallError> for DeliveryFailure {
    fn from(error: CallError) -> Self {
        DeliveryFailure {
            kind: error.kind(),
            status: error.status(),
        }
    }
}

impl WebhookCaller {
    /// Delivers `delivery`'s event to its webhook by `deadline` (and the webhook's
    /// `timeout_ms`): one attempt, `Ok` on a 2xx.
    pub async fn deliver(
        &self,
        delivery: &Delivery,
        deadline: Deadline,
    ) -> Result<(), DeliveryFailure> {
        let webhook = &delivery.webhook;
        let deadline = deadline.earlier(Deadline::after(Duration::from_millis(webhook.timeout_ms)));
        let url = self.target(&webhook.url)?;
        let tenant = TenantId::parse(&delivery.event.tenant)
            .map_err(|_| CallError::Refused("the event's tenant is not an id".into()))?;
        let prefix = self.names.tenant_prefix(tenant.as_str());
        if !webhook.secret_parameter.starts_with(&prefix) {
            return Err(CallError::Refused(format!(
                "its secret_parameter must lie under {prefix}"
            ))
            .into());
        }
        let secret = self
            .read(
                "events",
                &webhook.secret_parameter,
                deadline,
                CallError::Secret,
            )
            .await?;
        let body = serde_json::to_vec(&delivery.event)
            .map_err(|_| CallError::Refused("the event does not encode".into()))?;
        let left = deadline.remaining();
        if left < MIN_ATTEMPT {
            return Err(CallError::Timeout.into());
        }
        self.attempt(
            &url,
            &secret,
            &body,
            &delivery.event.id,
            left,
            EVENTS_USER_AGENT,
        )
        .await?;
        Ok(())
    }
}
