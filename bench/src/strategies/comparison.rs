//! One conversation's comparison under one timing profile: its runs and their
//! figures, as the note, the plots and the JSON read them.

use super::report::Metrics;
use super::run::StrategyRun;
use super::script::Conversation;
use super::timing::{self, Profile};

/// One conversation's comparison under one timing profile, as written to the
/// results.
pub struct Comparison<'a> {
    /// The conversation.
    pub conversation: &'a Conversation,
    /// The timing profile its runs were played with.
    pub profile: Profile,
    /// Its runs.
    pub runs: &'a [StrategyRun],
    /// Their figures.
    pub metrics: Vec<Metrics>,
}

impl Comparison<'_> {
    /// The gaps its runs were played with.
    pub fn gaps(&self) -> Vec<timing::Gap> {
        self.profile
            .gaps(self.conversation.turns.len(), self.conversation.seed)
    }
}

/// The profile whose comparisons the context plots are drawn from: the first.
pub fn context_profile(comparisons: &[Comparison<'_>]) -> Profile {
    comparisons.first().map_or(Profile::NoPauses, |c| c.profile)
}
