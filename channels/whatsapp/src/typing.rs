//! Read marks and the typing indicator: the customer sees their message read and
//! "typing…" while the agent works on it. When the worker takes a turn to the
//! model it marks the turn's latest message read with the typing indicator (one
//! mark covers the earlier messages of the chat too), before the ask; WhatsApp
//! dismisses the indicator at the business's next message or after 25 seconds, so
//! a round that runs longer marks again every [`TYPING_REFRESH`] until the answer
//! is in. A tenant turns it off with `whatsapp.read_receipts: false`; a turn the
//! agent does not answer (the conversation handed to a person) is never marked.
//!
//! A mark is a courtesy: one that fails is logged and counted
//! (`ReadMarkFailures`) and the turn goes on, and no refresh follows it.

use std::sync::Arc;
use std::time::Duration;

use tracing::{Instrument, warn};

use super::outbound::Sender;
use super::store::TurnRecord;
use super::worker::{FUNCTION, Worker};
use super::{PhoneNumberId, WaMessageId};
use crate::settings::WhatsAppSettings;
use degrau::deadline::Deadline;
use degrau::metrics::Event;

/// How often the indicator is shown again while a round runs: within WhatsApp's
/// 25 seconds, with room for the mark's own round trip.
pub const TYPING_REFRESH: Duration = Duration::from_secs(20);

/// Time a refresh needs to be worth sending.
const MARK_BUDGET: Duration = Duration::from_secs(2);

/// The indicator being kept up; dropping it stops the refreshes.
#[derive(Debug)]
pub struct Typing(Option<tokio::task::JoinHandle<()>>);

impl Typing {
    /// Nothing shown (read receipts off, or the mark failed).
    pub fn none() -> Typing {
        Typing(None)
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        if let Some(refresher) = self.0.take() {
            refresher.abort();
        }
    }
}

/// Marks `message` read with the typing indicator now, and keeps the indicator up
/// every [`TYPING_REFRESH`] until the returned [`Typing`] is dropped or `deadline`
/// nears.
pub async fn start(
    sender: Arc<dyn Sender>,
    from: PhoneNumberId,
    message: WaMessageId,
    deadline: Deadline,
) -> Typing {
    if !mark(sender.as_ref(), &from, &message, deadline).await {
        return Typing::none();
    }
    let refresh = async move {
        loop {
            tokio::time::sleep(TYPING_REFRESH).await;
            if !deadline.allows(MARK_BUDGET)
                || !mark(sender.as_ref(), &from, &message, deadline).await
            {
                break;
            }
        }
    };
    Typing(Some(tokio::spawn(
        refresh.instrument(tracing::Span::current()),
    )))
}

impl Worker {
    /// Marks the turn's latest message read with the typing indicator, kept up
    /// while the round runs, unless the tenant turned read receipts off.
    pub(super) async fn start_typing(
        &self,
        turn: &TurnRecord,
        settings: &WhatsAppSettings,
        deadline: Deadline,
    ) -> Typing {
        match turn.messages.last() {
            Some(latest) if settings.marks_read() => {
                start(
                    self.sender.clone(),
                    turn.phone_number_id.clone(),
                    latest.clone(),
                    deadline,
                )
                .await
            }
            _ => Typing::none(),
        }
    }
}

/// One mark; false (logged and counted) when it failed.
async fn mark(
    sender: &dyn Sender,
    from: &PhoneNumberId,
    message: &WaMessageId,
    deadline: Deadline,
) -> bool {
    match sender.mark_read(from, message, deadline).await {
        Ok(()) => true,
        Err(error) => {
            warn!(%error, "could not mark the message read; the turn goes on");
            Event::new(FUNCTION).count("ReadMarkFailures", 1).emit();
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ScriptedSender;

    fn ids() -> (PhoneNumberId, WaMessageId) {
        (
            PhoneNumberId::parse("100000000000001").unwrap(),
            WaMessageId::parse("wamid.IN1").unwrap(),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn the_indicator_is_shown_again_while_the_round_runs_and_stops_when_dropped() {
        let sender = Arc::new(ScriptedSender::default());
        let (from, message) = ids();
        let deadline = Deadline::after(Duration::from_secs(120));
        let typing = start(sender.clone(), from, message, deadline).await;
        assert_eq!(sender.reads().len(), 1, "marked before the round");
        tokio::time::sleep(TYPING_REFRESH * 2 + Duration::from_secs(1)).await;
        assert_eq!(sender.reads().len(), 3, "shown again every 20 s");
        drop(typing);
        tokio::time::sleep(TYPING_REFRESH * 3).await;
        assert_eq!(sender.reads().len(), 3, "nothing after the answer");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_mark_is_no_error_and_no_refresh_follows() {
        let sender = Arc::new(ScriptedSender::default());
        sender.fail_reads(1);
        let (from, message) = ids();
        let deadline = Deadline::after(Duration::from_secs(120));
        let _typing = start(sender.clone(), from, message, deadline).await;
        tokio::time::sleep(TYPING_REFRESH * 2).await;
        assert!(sender.reads().is_empty());
    }
}
