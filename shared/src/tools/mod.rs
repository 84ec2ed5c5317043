//! The `Tools` port: what the model may call during a round, and the built-in
//! scheduling demo that lets the whole path (with long tool results) run locally.

pub mod demo;

use async_trait::async_trait;

use crate::deadline::Deadline;
use crate::request::ToolDef;

/// Largest tool result kept, in characters.
pub const MAX_TOOL_RESULT_CHARS: usize = 16_000;

/// Largest sum of the results sent in one user message, in characters. Each message
/// is one DynamoDB item and items are refused over 400 KB; at 4 bytes per character
/// at worst, this keeps a message item under 260 KB. Results past the budget are
/// cut to fit (see [`cap_to`]).
pub const MAX_RESULTS_CHARS_PER_MESSAGE: usize = 64_000;

/// What a tool returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result text (JSON for the demo tools).
    pub content: String,
    /// True when the call failed (unknown tool, bad input); the model sees the text.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result, truncated to [`MAX_TOOL_RESULT_CHARS`].
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: cap(content.into()),
            is_error: false,
        }
    }

    /// A failed call, with a message for the model.
    pub fn error(message: impl Into<String>) -> Self {
        ToolOutput {
            content: cap(message.into()),
            is_error: true,
        }
    }
}

/// Truncates a result to [`MAX_TOOL_RESULT_CHARS`], saying so at the end.
pub fn cap(content: String) -> String {
    cap_to(content, MAX_TOOL_RESULT_CHARS)
}

/// Truncates a result to `max` characters, saying so at the end.
pub fn cap_to(content: String, max: usize) -> String {
    let chars = content.chars().count();
    if chars <= max {
        return content;
    }
    let note = format!("\n[truncated by degrau: {chars} characters, {max} kept]");
    let keep = max.saturating_sub(note.chars().count());
    let mut out: String = content.chars().take(keep).collect();
    out.push_str(&note);
    out
}

/// The tools of a tenant.
#[async_trait]
pub trait Tools: Send + Sync {
    /// Definitions sent to the model, in a stable order (they head the cached prefix).
    fn definitions(&self, enabled: Option<&[String]>) -> Vec<ToolDef>;

    /// Runs one call within `deadline`. Never fails: an error (a timeout included)
    /// is a result the model reads.
    async fn call(&self, name: &str, input: &serde_json::Value, deadline: Deadline) -> ToolOutput;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_to_the_cap_and_say_so() {
        let out = ToolOutput::ok("x".repeat(MAX_TOOL_RESULT_CHARS + 10));
        assert_eq!(out.content.chars().count(), MAX_TOOL_RESULT_CHARS);
        assert!(out.content.ends_with("16010 characters, 16000 kept]"));
        assert_eq!(ToolOutput::ok("short").content, "short");
        assert_eq!(cap_to("é".repeat(100), 60).chars().count(), 60);
    }
}
