//! A message of a round as the round keeps it until its commit: what the round's
//! loop makes, what its events show, and what its commit stores.

use crate::domain::Message;
use crate::usage::Usage;

/// A message of a round, with the usage of the model call that produced it (for
/// assistant messages).
#[derive(Debug, Clone)]
pub(super) struct RoundMessage {
    pub(super) message: Message,
    pub(super) usage: Option<Usage>,
    /// A person of the business wrote it (an assistant message only).
    pub(super) by_person: bool,
}
