//! A person's answer in the transcript: what a person of the business wrote to the
//! customer (the owner's echoes on WhatsApp) stored as one round through the same
//! commit as a client's own round (`POST .../rounds`), its assistant message marked
//! `written_by_person`, so the model's next answer sees it and does not contradict
//! it. No model runs; its context is estimated, as for a round sent without usage.

use super::context::HeadToken;
use super::rounds::RoundRequest;
use super::{AskError, Converse};
use crate::deadline::Deadline;
use crate::domain::IdempotencyKey;
use crate::store::ContactKey;

/// What stands for the customer's message in a round the business opened.
pub const BUSINESS_WROTE_FIRST: &str = "[the business wrote first]";

impl Converse {
    /// Stores `customer`'s text (none: the business wrote first) and the person's
    /// `answer` as one round, once under `idempotency` (a retry replays it).
    pub async fn record_person_answer(
        &self,
        key: &ContactKey,
        customer: Option<&str>,
        answer: &str,
        idempotency: &IdempotencyKey,
        deadline: Deadline,
    ) -> Result<(), AskError> {
        let settings = self.settings(&key.tenant, deadline).await?;
        let turn = self.load_turn(key, &settings, deadline).await?;
        let request = RoundRequest::by_person(
            HeadToken::of(&turn),
            customer.unwrap_or(BUSINESS_WROTE_FIRST),
            answer,
        );
        self.record_round(key, &request, Some(idempotency), deadline)
            .await
            .map(|_| ())
    }
}
