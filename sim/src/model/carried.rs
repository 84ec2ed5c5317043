//! What each round's request carried, kept for the oracle: the tokens of its
//! messages (the window) and of its system blocks (the summary, the facts, the
//! last session's summary), so "no message is forgotten" is checked on every
//! request the model was sent, not only on the context read at quiescence.

use std::collections::BTreeSet;

use degrau::plan::request::ModelRequest;

use super::request::{Kind, kind, round_token, tokens};
use super::{SimModel, lock};

/// A round's request as the model received it.
#[derive(Debug, Clone)]
pub struct Carried {
    /// The round's own message's token.
    pub round: String,
    /// The tokens in its messages: the window sent.
    pub window: BTreeSet<String>,
    /// The tokens in its system blocks: the summary and the facts.
    pub system: BTreeSet<String>,
}

impl Carried {
    /// Whether the request carried `token` anywhere.
    pub fn holds(&self, token: &str) -> bool {
        self.window.contains(token) || self.system.contains(token)
    }
}

impl SimModel {
    /// Keeps what a round's request carried (not a compaction's or a recall
    /// summary's: they carry what their job read).
    pub(super) fn keep_carried(&self, request: &ModelRequest) {
        if kind(request) != Kind::Round {
            return;
        }
        let Some(round) = round_token(request) else {
            return;
        };
        let window = serde_json::to_string(&request.messages).unwrap_or_default();
        let system = serde_json::to_string(&request.system).unwrap_or_default();
        let carried = Carried {
            round,
            window: tokens(&window).into_iter().collect(),
            system: tokens(&system).into_iter().collect(),
        };
        lock(&self.state).carried.push(carried);
    }

    /// What the rounds' requests carried since the last call, taken.
    pub fn take_carried(&self) -> Vec<Carried> {
        std::mem::take(&mut lock(&self.state).carried)
    }
}
