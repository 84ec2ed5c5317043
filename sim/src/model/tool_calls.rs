//! The tool invariant's bookkeeping ([`TOOL_ONCE`]): the `tool_use` blocks each
//! round's attempt emitted, the calls that ran, and a round asked again without a
//! call that already ran.

use std::collections::HashSet;

use degrau::domain::ContentBlock;
use degrau::model::ModelResponse;
use degrau::plan::request::ModelRequest;

use super::request::{Kind, kind, round_token};
use super::{SimModel, State, TOOL_ONCE, lock};

impl SimModel {
    /// A tool ran the call `id` (the simulation's tools say so before running
    /// it): a violation when that call ran before, or when no answer emitted it.
    pub fn tool_ran(&self, id: &str) {
        let mut state = lock(&self.state);
        if !state.ran.insert(id.to_owned()) {
            state
                .violations
                .push((TOOL_ONCE, format!("the tool call {id} ran twice")));
            return;
        }
        match state.emitted.get(id).cloned() {
            Some(round) => state.ran_in.entry(round).or_default().push(id.to_owned()),
            None => state.violations.push((
                TOOL_ONCE,
                format!("a tool ran for the call {id}, which no answer of the model held"),
            )),
        }
    }

    /// A round's request: the state (locked), the round (its message's token) and
    /// the round's current attempt; `None` for any other request.
    fn round_attempt(
        &self,
        request: &ModelRequest,
    ) -> Option<(std::sync::MutexGuard<'_, State>, String, u32)> {
        if kind(request) != Kind::Round {
            return None;
        }
        let token = round_token(request)?;
        let state = lock(&self.state);
        let attempt = state.attempts.get(&token).copied().unwrap_or(0);
        Some((state, token, attempt))
    }

    /// A violation when `request` is a round's and leaves out a tool call that
    /// already ran in the same attempt: the round was run again after a tool ran
    /// (the tool then runs again for a call the model makes anew).
    pub(super) fn check_tools_kept(&self, request: &ModelRequest) {
        let Some((mut state, token, attempt)) = self.round_attempt(request) else {
            return;
        };
        let Some(ran) = state.ran_in.get(&(token.clone(), attempt)) else {
            return;
        };
        let sent: HashSet<&str> = request
            .messages
            .iter()
            .flat_map(|message| message.content.iter())
            .filter_map(|block| match &block.block {
                ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        if let Some(forgotten) = ran.iter().find(|id| !sent.contains(id.as_str())).cloned() {
            state.violations.push((
                TOOL_ONCE,
                format!(
                    "the round of {token} asked the model again without the call {forgotten}, \
                     which had already run: the round was run again after a tool ran"
                ),
            ));
        }
    }

    /// Records the `tool_use` blocks of a round's answer, with its round and
    /// attempt.
    pub(super) fn record_calls(&self, request: &ModelRequest, answer: &ModelResponse) {
        let Some((mut state, token, attempt)) = self.round_attempt(request) else {
            return;
        };
        for block in &answer.content {
            if let ContentBlock::ToolUse { id, .. } = block {
                state.emitted.insert(id.clone(), (token.clone(), attempt));
            }
        }
    }
}
