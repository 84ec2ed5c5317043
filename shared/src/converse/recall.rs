//! The `recall` tool during a round: the contact's sessions (and the one the round
//! is closing, from the turn's read, though its index is written only after the
//! round's commit) searched by [`crate::records::search`], and the hits laid out as
//! the tool's output ([`crate::tools::recall`]).

use serde_json::Value;

use super::turn::Turn;
use super::{Converse, by};
use crate::deadline::Deadline;
use crate::metrics::Event;
use crate::plan::recall::TOOL_RESULTS;
use crate::records::search;
use crate::store::ContactKey;
use crate::tools::{ToolOutput, recall};

impl Converse {
    /// The `recall` tool's call during a round: the contact's sessions and the one
    /// the round is closing, ranked for the input's query. A store that fails or
    /// does not answer in time is an error the model reads.
    pub(super) async fn run_recall(
        &self,
        key: &ContactKey,
        turn: &Turn,
        input: &Value,
        deadline: Deadline,
    ) -> ToolOutput {
        let born = crate::records::born_of(turn.expected.as_ref(), turn.now);
        let output = match recall::query_of(input) {
            Err(problem) => ToolOutput::error(problem),
            Ok(query) => match by(
                deadline,
                search(
                    self.recall.as_ref(),
                    key,
                    query,
                    TOOL_RESULTS,
                    turn.closing_index.as_ref(),
                    (turn.now, born),
                ),
            )
            .await
            {
                Ok(hits) => recall::output(&hits, turn.plan.session > 1),
                Err(error) => {
                    tracing::warn!(%error, "recall could not read the sessions");
                    ToolOutput::error("earlier sessions cannot be searched right now")
                }
            },
        };
        Event::new("ask")
            .dimension("Tool", crate::plan::recall::TOOL_NAME)
            .count("ToolCalls", 1)
            .count("ToolErrors", u64::from(output.is_error))
            .emit();
        output
    }
}
