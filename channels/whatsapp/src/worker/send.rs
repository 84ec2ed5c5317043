//! The worker's sending: a turn's messages sent through the Graph API from the
//! first not sent yet, each marked on the turn; the template when the customer
//! service window has closed; the failures counted.

use tracing::{error, info, warn};

use super::{FUNCTION, Worker, WorkerError};
use crate::WaId;
use crate::outbound::{OutboundMessage, SendError};
use crate::settings::WhatsAppSettings;
use crate::store::{Outgoing, TurnRecord};
use degrau::deadline::Deadline;
use degrau::metrics::Event;
use degrau::store::ContactKey;

impl Worker {
    /// Sends the turn's messages from `sent` on, marking each on the turn.
    pub(super) async fn send(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        outgoing: &Outgoing,
        sent: usize,
        settings: &WhatsAppSettings,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        let Ok(to) = WaId::parse(key.contact.as_str()) else {
            warn!("the contact is not a WhatsApp id: nothing is sent");
            self.store.mark_sent(key, &turn.id, sent, true).await?;
            return Ok(());
        };
        let messages = messages_of(outgoing);
        let total = messages.len();
        for (index, message) in messages.into_iter().enumerate().skip(sent) {
            match self
                .sender
                .send(&turn.phone_number_id, &to, message, deadline)
                .await
            {
                Ok(id) => {
                    let metric = match message {
                        OutboundMessage::Text(_) => "RepliesSent",
                        OutboundMessage::Template(_) => "TemplatesSent",
                    };
                    Event::new(FUNCTION).count(metric, 1).emit();
                    self.count_sent(key, deadline).await;
                    self.store
                        .mark_sent(key, &turn.id, index + 1, index + 1 == total)
                        .await?;
                    if index == 0 {
                        self.reply_latency(key, turn);
                        self.keep_delivery(key, turn, outgoing, id).await;
                    }
                }
                Err(error) => {
                    let at = (&to, index);
                    return self
                        .not_sent(key, turn, at, error, settings, deadline)
                        .await;
                }
            }
        }
        if total == 0 || sent >= total {
            self.store.mark_sent(key, &turn.id, sent, true).await?;
        }
        Ok(())
    }

    async fn send_template(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        to: &WaId,
        template: &crate::settings::TemplateRef,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        match self
            .sender
            .send(
                &turn.phone_number_id,
                to,
                OutboundMessage::Template(template),
                deadline,
            )
            .await
        {
            Ok(_) => {
                Event::new(FUNCTION).count("TemplatesSent", 1).emit();
                self.count_sent(key, deadline).await;
                Ok(())
            }
            Err(SendError::Unavailable(error)) => {
                // The text is marked as never to go; the template is not retried.
                warn!(%error, "could not send the template");
                send_failed(None);
                Ok(())
            }
            Err(SendError::Rejected { status, code }) => {
                error!(status, code, "the Graph API refused the template");
                send_failed(code);
                let _ = key;
                Ok(())
            }
            Err(SendError::OutsideWindow) => {
                send_failed(Some(crate::outbound::OUTSIDE_WINDOW_CODE));
                Ok(())
            }
        }
    }

    /// What a message the Graph API did not take leaves (`at`: to whom, and its
    /// index in the turn): the template instead when Meta says the window closed,
    /// the turn settled when it refused the message, or an error for a later
    /// delivery when it was unavailable.
    async fn not_sent(
        &self,
        key: &ContactKey,
        turn: &TurnRecord,
        (to, index): (&WaId, usize),
        error: SendError,
        settings: &WhatsAppSettings,
        deadline: Deadline,
    ) -> Result<(), WorkerError> {
        match error {
            SendError::OutsideWindow => {
                // Meta's clock says the window closed (a late delivery): the
                // template instead, as when the worker finds it closed itself.
                warn!("the Graph API says the service window is closed");
                if let Outgoing::Template { template } = outside_window(settings) {
                    self.send_template(key, turn, to, &template, deadline)
                        .await?;
                }
                self.store.mark_sent(key, &turn.id, index, true).await?;
                Ok(())
            }
            SendError::Rejected { status, code } => {
                error!(status, code, "the Graph API refused the reply; not retried");
                send_failed(code);
                self.store.mark_sent(key, &turn.id, index, true).await?;
                Ok(())
            }
            error @ SendError::Unavailable(_) => {
                warn!(%error, sent = index, "could not send; the message comes back");
                Event::new(FUNCTION)
                    .dimension("Code", "unavailable")
                    .rollup()
                    .count("SendFailures", 1)
                    .emit();
                Err(WorkerError::Send(error))
            }
        }
    }
}

/// What goes out instead of a reply the window no longer allows: counted, and the
/// tenant's template, or nothing.
pub(super) fn outside_window(settings: &WhatsAppSettings) -> Outgoing {
    Event::new(FUNCTION).count("RepliesOutsideWindow", 1).emit();
    match &settings.template {
        Some(template) => Outgoing::Template {
            template: template.clone(),
        },
        None => Outgoing::Nothing {
            reason: "outside_window".into(),
        },
    }
}

/// The messages a turn's outgoing sends, in order (none for nothing, logged).
fn messages_of(outgoing: &Outgoing) -> Vec<OutboundMessage<'_>> {
    match outgoing {
        Outgoing::Text { parts, .. } => parts.iter().map(|p| OutboundMessage::Text(p)).collect(),
        Outgoing::Template { template } => vec![OutboundMessage::Template(template)],
        Outgoing::Nothing { reason } => {
            info!(reason = reason.as_str(), "the turn sends nothing");
            Vec::new()
        }
    }
}

fn send_failed(code: Option<i64>) {
    let code = code.map_or_else(|| "none".to_owned(), |code| code.to_string());
    Event::new(FUNCTION)
        .dimension("Code", code)
        .rollup()
        .count("SendFailures", 1)
        .emit();
}
