//! The SQS FIFO adapter of the [`EventsOut`] port: events to a tenant's events
//! webhook, queued for the `events-out` function (`docs/events.md`).
//!
//! The contact leaves the function as its pseudonym only: the one webhook tools
//! get ([`contact_pseudonym`], the receiver named by its secret's parameter), so
//! a receiver that is also a tool's sees one customer under one name. The queue
//! body is a [`Delivery`] (the receiver and the event); its message group is a
//! hash of the tenant and the pseudonym, so one contact's events arrive in order
//! and one at a time, and an event that keeps failing holds back that contact's
//! later events only; the deduplication id is the event's id, so a change
//! published twice within SQS's five minutes is queued once.

use std::sync::Arc;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use degrau::events::{Delivery, EventsOut, Occurrence, PublishError};
use degrau::tools::Webhook;

use crate::webhook::SecretNames;
use crate::webhook::secrets::SigningSecrets;
use crate::webhook::signature::{contact_pseudonym, tenant_pseudonym_key};

/// Sends events to an SQS FIFO queue.
pub struct SqsEvents {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    secrets: Arc<dyn SigningSecrets>,
    names: SecretNames,
}

impl SqsEvents {
    /// An adapter sending to `queue_url` (`EVENTS_QUEUE_URL`), pseudonymizing with
    /// the deployment's pseudonym secret named in `names`.
    pub fn new(
        client: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
        secrets: Arc<dyn SigningSecrets>,
        names: SecretNames,
    ) -> Self {
        SqsEvents {
            client,
            queue_url: queue_url.into(),
            secrets,
            names,
        }
    }
}

/// The queue message of `occurrence` for `webhook` under the deployment's
/// pseudonym secret: its body, message group and deduplication id.
pub fn message(
    deployment_secret: &[u8],
    webhook: &Webhook,
    occurrence: &Occurrence,
) -> (Delivery, String, String) {
    let tenant = occurrence.tenant.as_str();
    let pseudonym = contact_pseudonym(
        &tenant_pseudonym_key(deployment_secret, tenant),
        &webhook.secret_parameter,
        occurrence.contact.as_str(),
    );
    let group = events_group_id(tenant, &pseudonym);
    let event = occurrence.event(pseudonym);
    let dedup = event.id.clone();
    let delivery = Delivery {
        webhook: webhook.clone(),
        event,
    };
    (delivery, group, dedup)
}

/// The message group of one contact's events: hex SHA-256 of
/// `T#{tenant}#P#{pseudonym}` (64 characters).
pub fn events_group_id(tenant: &str, pseudonym: &str) -> String {
    hex::encode(Sha256::digest(
        format!("T#{tenant}#P#{pseudonym}").as_bytes(),
    ))
}

#[async_trait]
impl EventsOut for SqsEvents {
    async fn publish(
        &self,
        webhook: &Webhook,
        occurrence: &Occurrence,
    ) -> Result<(), PublishError> {
        let deployment = self
            .secrets
            .secret(&self.names.pseudonym_key)
            .await
            .map_err(PublishError)?;
        let (delivery, group, dedup) = message(&deployment, webhook, occurrence);
        let body = serde_json::to_string(&delivery).map_err(|e| PublishError(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(group)
            .message_deduplication_id(dedup)
            .send()
            .await
            .map_err(|e| PublishError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use degrau::domain::{ContactId, TenantId};
    use degrau::events::EventType;
    use serde_json::json;

    fn webhook(parameter: &str) -> Webhook {
        Webhook {
            url: "https://hooks.example.com/e".into(),
            secret_parameter: parameter.into(),
            timeout_ms: 5000,
        }
    }

    fn occurrence(contact: &str, at: i64) -> Occurrence {
        Occurrence {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse(contact).unwrap(),
            kind: EventType::HandoffEnded,
            at,
            data: json!({}),
        }
    }

    #[test]
    fn one_group_per_contact_the_pseudonym_for_the_receiver_and_the_id_to_dedupe() {
        let receiver = webhook("/degrau/webhooks/barber/events");
        let (first, group, dedup) = message(b"deployment", &receiver, &occurrence("+5511999", 1));
        let (second, same_group, _) = message(b"deployment", &receiver, &occurrence("+5511999", 2));
        let (_, other_group, _) = message(b"deployment", &receiver, &occurrence("+5511888", 1));
        assert_eq!(group, same_group, "one contact, one group: in order");
        assert_ne!(group, other_group);
        assert_eq!(group.len(), 64);
        assert_eq!(dedup, first.event.id);
        assert_ne!(first.event.id, second.event.id);
        let expected = contact_pseudonym(
            &tenant_pseudonym_key(b"deployment", "barber"),
            "/degrau/webhooks/barber/events",
            "+5511999",
        );
        assert_eq!(
            first.event.contact, expected,
            "the webhook tools' pseudonym"
        );
        let body = serde_json::to_string(&first).unwrap();
        assert!(!body.contains("5511999"), "{body}");
        assert!(!group.contains("5511999"));
        let (other_receiver, _, _) = message(
            b"deployment",
            &webhook("/degrau/webhooks/barber/crm"),
            &occurrence("+5511999", 1),
        );
        assert_ne!(other_receiver.event.contact, first.event.contact);
    }
}
