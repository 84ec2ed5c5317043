//! A scripted model double for unit tests: answers from a queue, records every
//! request and the deadline it came with, and refuses what the real API refuses
//! (through [`crate::plan::validate`]). It answers at once, so deadlines never bind it.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Model, ModelError, ModelResponse, StopReason};
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, Role};
use crate::plan::request::ModelRequest;
use crate::plan::validate::validate_request;
use crate::usage::Usage;

/// One scripted step: an answer or an error.
pub type Step = Result<ModelResponse, ModelError>;

/// A model that plays a script.
#[derive(Debug, Default)]
pub struct ScriptedModel {
    script: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<ModelRequest>>,
    deadlines: Mutex<Vec<Deadline>>,
}

impl ScriptedModel {
    /// A model with these steps queued.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Self {
        ScriptedModel {
            script: Mutex::new(steps.into_iter().collect()),
            requests: Mutex::default(),
            deadlines: Mutex::default(),
        }
    }

    /// Queues more steps.
    pub fn push(&self, step: Step) {
        lock(&self.script).push_back(step);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// The deadline of every request received, in order.
    pub fn deadlines(&self) -> Vec<Deadline> {
        lock(&self.deadlines).clone()
    }

    /// A text answer with `end_turn`.
    pub fn text(text: &str, usage: Usage) -> Step {
        Ok(response(
            vec![ContentBlock::text(text)],
            StopReason::EndTurn,
            usage,
        ))
    }

    /// A `tool_use` answer calling `name` with `input` (id `toolu_{id}`).
    pub fn tool_call(id: &str, name: &str, input: serde_json::Value, usage: Usage) -> Step {
        Ok(response(
            vec![ContentBlock::tool_use(format!("toolu_{id}"), name, input)],
            StopReason::ToolUse,
            usage,
        ))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A response with these blocks.
pub fn response(
    content: Vec<ContentBlock>,
    stop_reason: StopReason,
    usage: Usage,
) -> ModelResponse {
    ModelResponse {
        id: "msg_scripted".into(),
        model: "scripted".into(),
        role: Role::Assistant,
        content,
        stop_reason: Some(stop_reason),
        usage,
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn create(
        &self,
        request: &ModelRequest,
        deadline: Deadline,
    ) -> Result<ModelResponse, ModelError> {
        lock(&self.requests).push(request.clone());
        lock(&self.deadlines).push(deadline);
        if let Err(violation) = validate_request(request) {
            return Err(ModelError::InvalidRequest {
                message: violation.message,
            });
        }
        lock(&self.script)
            .pop_front()
            .unwrap_or_else(|| Err(ModelError::Protocol("the script ran out".into())))
    }
}
