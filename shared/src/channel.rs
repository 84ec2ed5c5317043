//! The channel port: what a messaging channel (WhatsApp today, in the crate
//! `degrau-whatsapp`; the next one a crate beside it) gives a turn and what it
//! takes back. A channel reads its own events, makes a burst of a contact's
//! messages one [`ChannelTurn`], and asks the conversation service through
//! [`Conversation`] (the core's [`Converse`] service); a reply a person of the business wrote instead is a
//! [`PersonAnswer`]. The round logic (the window, the model, the commit) stays in
//! [`crate::converse`]; this module only names the exchange.
//!
//! A channel's tenant settings are its section of the tenant's `CONFIG` item
//! (`"whatsapp": {...}`), a [`ChannelSection`] the core keeps and never reads: the
//! channel reads it typed ([`ChannelSection::read`]), and the function that writes
//! the config (`ask`) registers the channel's [`ChannelSettingsCheck`], so a bad
//! section is refused on a write as any bad field is. (The type lives in
//! [`crate::tenant::section`], beside the config that holds it.)

use std::sync::Arc;

use async_trait::async_trait;

use crate::converse::{AskError, AskOutcome, Converse};
use crate::deadline::Deadline;
use crate::domain::IdempotencyKey;
use crate::store::ContactKey;
use crate::tenant::TenantConfig;

pub use crate::tenant::section::ChannelSection;

/// What a channel gives a turn: the contact, the text the turn is made of, the
/// key that makes a retried delivery replay the stored answer, and the time
/// left. The channel has spent its own budget for the turn (a number's turns),
/// so the tenant's API rounds for the hour are not spent.
#[derive(Debug, Clone, Copy)]
pub struct ChannelTurn<'a> {
    /// The contact the turn is from (a channel's own id made a contact id).
    pub key: &'a ContactKey,
    /// The turn's text: the contact's messages joined.
    pub text: &'a str,
    /// The turn's idempotency key: one per turn, the same on every retry.
    pub idempotency: &'a IdempotencyKey,
    /// When the answer must be back.
    pub deadline: Deadline,
    /// The text is a voice note's transcript (stored marked so).
    pub transcribed: bool,
}

/// What a person of the business answered in the channel (not the model): stored
/// as one round, so the model's next answer sees it.
#[derive(Debug, Clone, Copy)]
pub struct PersonAnswer<'a> {
    /// The contact the answer went to.
    pub key: &'a ContactKey,
    /// The contact's text the person answered (`None`: the business wrote first).
    pub customer: Option<&'a str>,
    /// What the person wrote.
    pub answer: &'a str,
    /// One per answer, the same on every retry.
    pub idempotency: &'a IdempotencyKey,
    /// When the round must be stored.
    pub deadline: Deadline,
}

/// The conversation service as a channel sees it. What a turn takes back is an
/// [`AskOutcome`]: the answer, or the stored one's body when the turn was
/// answered already (a retried delivery); an [`AskError`] otherwise.
#[async_trait]
pub trait Conversation: Send + Sync {
    /// Answers the turn and stores the round.
    async fn answer(&self, turn: ChannelTurn<'_>) -> Result<AskOutcome, AskError>;

    /// Stores a person's answer as one round (once under its key).
    async fn record(&self, answer: PersonAnswer<'_>) -> Result<(), AskError>;
}

#[async_trait]
impl Conversation for Converse {
    async fn answer(&self, turn: ChannelTurn<'_>) -> Result<AskOutcome, AskError> {
        let ChannelTurn {
            key,
            text,
            idempotency,
            deadline,
            transcribed,
        } = turn;
        self.ask_for_channel(key, text, Some(idempotency), deadline, transcribed)
            .await
    }

    async fn record(&self, answer: PersonAnswer<'_>) -> Result<(), AskError> {
        let PersonAnswer {
            key,
            customer,
            answer,
            idempotency,
            deadline,
        } = answer;
        self.record_person_answer(key, customer, answer, idempotency, deadline)
            .await
    }
}

/// How a channel checks its section of a tenant's config before it is stored.
pub trait ChannelSettingsCheck: Send + Sync {
    /// The section's name in the config (`whatsapp`).
    fn channel(&self) -> &'static str;

    /// Why the section cannot be the channel's settings, naming the field by its
    /// path in the config; `Ok` when it can.
    fn check(&self, section: &ChannelSection) -> Result<(), String>;
}

/// The channels' checks a function registers (none: every section is kept
/// unchecked).
#[derive(Clone, Default)]
pub struct ChannelChecks(Vec<Arc<dyn ChannelSettingsCheck>>);

impl ChannelChecks {
    /// These checks and `check`.
    #[must_use]
    pub fn with(mut self, check: Arc<dyn ChannelSettingsCheck>) -> ChannelChecks {
        self.0.push(check);
        self
    }

    /// Why a section of `config` cannot be its channel's settings: the first
    /// refusal of a registered check, in the order they were registered.
    pub fn check(&self, config: &TenantConfig) -> Result<(), String> {
        for check in &self.0 {
            if let Some(section) = config.channel_section(check.channel()) {
                check.check(section)?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for ChannelChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|check| check.channel()).collect();
        f.debug_tuple("ChannelChecks").field(&names).finish()
    }
}
