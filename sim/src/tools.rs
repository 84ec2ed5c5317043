//! The simulation's tools: the built-in ones (`degrau::tools::ToolDispatch`),
//! each call told to the model first ([`SimModel::tool_ran`]), which holds the
//! invariant that a tool runs once per `tool_use` it emitted and that a round
//! never runs again without a call it already ran (as the booking tool of a
//! shop would book twice).

use std::sync::Arc;

use async_trait::async_trait;
use degrau::plan::request::ToolDef;
use degrau::tools::{CallContext, ToolDeclaration, ToolDispatch, ToolOutput, Tools};
use serde_json::Value;

use crate::model::SimModel;

/// The built-in tools, every call counted as a side effect.
pub struct SimTools {
    inner: ToolDispatch,
    model: Arc<SimModel>,
}

impl SimTools {
    /// The built-in tools, their calls told to `model`.
    pub fn new(model: Arc<SimModel>) -> Self {
        SimTools {
            inner: ToolDispatch::built_in_only(),
            model,
        }
    }
}

#[async_trait]
impl Tools for SimTools {
    fn definitions(&self, declared: &[ToolDeclaration]) -> Vec<ToolDef> {
        self.inner.definitions(declared)
    }

    async fn call(
        &self,
        tool: &ToolDeclaration,
        input: &Value,
        context: &CallContext<'_>,
    ) -> ToolOutput {
        self.model.tool_ran(context.tool_use_id);
        self.inner.call(tool, input, context).await
    }
}
