//! Delivery state: what became of the agent's reply after the Graph API took it.
//! The worker keeps, for the first message of each reply it sends, a delivery record
//! in the contact's partition (`WA#OUT#{sent message id}`) naming the transcript
//! message it carries (session and sequence number); Meta's status callbacks
//! (`sent` → `delivered` → `read`, or `failed` with its error code) move it
//! forward only, since callbacks arrive out of order and at least once. `GET
//! .../messages` shows it on the reply; a failed one is counted and alarmed on
//! (`WhatsAppDeliveryFailureRateAlarm`).

use tracing::warn;

use super::WaMessageId;
pub use super::records::{DeliveryRecord, rank};
use super::store::{Outgoing, TurnRecord};
use super::worker::{FUNCTION, Worker};
use degrau::deadline::Deadline;
use degrau::metering::UsageCounts;
use degrau::metrics::{Event, Unit};
use degrau::store::ContactKey;

impl Worker {
    /// `ReplyLatency` of the tenant: from the turn's latest message received to
    /// its reply's first message out (the customer's wait, the debounce included).
    pub(super) fn reply_latency(&self, key: &ContactKey, turn: &TurnRecord) {
        let waited = (self.clock)().saturating_sub(turn.last_inbound_at).max(0);
        Event::new(FUNCTION)
            .dimension("Tenant", key.tenant.as_str())
            .rollup()
            .metric("ReplyLatency", waited as f64 * 1000.0, Unit::Milliseconds)
            .emit();
    }

    /// One message sent, in the tenant's usage.
    pub(super) async fn count_sent(&self, key: &ContactKey, deadline: Deadline) {
        let sent = UsageCounts {
            whatsapp_out: 1,
            ..UsageCounts::default()
        };
        self.ask.count_usage(&key.tenant, &sent, deadline).await;
    }

    /// Keeps the delivery record of a reply whose first message the Graph API
    /// took as `id`. Best effort: a record that cannot be written is logged, and
    /// the reply (already sent) is not sent again for it.
    pub(super) async fn keep_delivery(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
        id: Option<WaMessageId>,
    ) {
        let (
            Some(id),
            Outgoing::Text {
                reply_at: Some((session, seq)),
                ..
            },
        ) = (id, outgoing)
        else {
            return;
        };
        let record = DeliveryRecord {
            id,
            session: *session,
            seq: *seq,
            status: "accepted".into(),
            error_code: None,
            updated_at: (self.clock)(),
            expires_at: turn.expires_at,
        };
        if let Err(error) = self.store.record_delivery(key, &record).await {
            warn!(%error, "could not keep the reply's delivery record");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_only_move_forward_and_a_failure_is_final() {
        let order = ["accepted", "sent", "delivered", "read", "failed"];
        assert!(order.windows(2).all(|w| rank(w[0]) < rank(w[1])));
        assert_eq!(rank("deleted"), 0);
    }
}
