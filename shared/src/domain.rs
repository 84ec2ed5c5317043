//! Domain types: what a conversation is made of, as degrau stores it and as the
//! Anthropic Messages API expects it, plus the validated identifiers that reach
//! storage keys.
//!
//! (`docs/DESIGN.md`: "Key layout" for how ids reach keys.)

use serde::{Deserialize, Serialize};

use crate::usage::Usage;

mod fact;
mod ids;

pub use fact::{Fact, FactRevision, FactSource, MAX_FACT_HISTORY};
pub use ids::{ContactId, FactKey, IdempotencyKey, Incarnation, InvalidId, TenantId, check_id};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person talking to the agent (and the tool results sent on their turn).
    User,
    /// The model.
    Assistant,
}

/// One content block, serialised exactly as the Messages API expects it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text; the API refuses empty or whitespace-only text blocks.
        text: String,
    },
    /// A tool call made by the assistant.
    ToolUse {
        /// Unique id the result must quote.
        id: String,
        /// Tool name, `^[a-zA-Z0-9_-]{1,64}$`.
        name: String,
        /// Arguments, a JSON object.
        input: serde_json::Value,
    },
    /// The result of a tool call, sent in the user message right after it.
    ToolResult {
        /// The `id` of the `tool_use` this answers.
        tool_use_id: String,
        /// The tool's output, as text.
        content: String,
        /// Whether the tool failed; omitted from JSON when false.
        #[serde(default, skip_serializing_if = "is_false")]
        is_error: bool,
    },
    /// The model's extended thinking (assistant, when the tenant turned it on). Stored
    /// and sent back exactly as received: the API checks the signature, and a tool
    /// loop's assistant turn must start with its thinking.
    Thinking {
        /// The thinking text (a summary of it, on current models).
        thinking: String,
        /// The API's signature over the block.
        signature: String,
    },
    /// Thinking the API encrypted; sent back unchanged like [`ContentBlock::Thinking`].
    RedactedThinking {
        /// The encrypted thinking.
        data: String,
    },
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A successful tool result.
    pub fn tool_result(tool_use_id: impl Into<String>, content: impl Into<String>) -> Self {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error: false,
        }
    }

    /// True for `thinking` and `redacted_thinking` blocks.
    pub fn is_thinking(&self) -> bool {
        matches!(
            self,
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
        )
    }

    /// A tool call.
    pub fn tool_use(
        id: impl Into<String>,
        name: impl Into<String>,
        input: serde_json::Value,
    ) -> Self {
        ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }
}

/// A message in the Messages API shape: a role and its blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Blocks, never empty in a valid request.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// True for a user message made only of (at least one) text block: the only
    /// place a window may start, since it answers no `tool_use`.
    pub fn is_user_text_only(&self) -> bool {
        self.role == Role::User
            && !self.content.is_empty()
            && self
                .content
                .iter()
                .all(|block| matches!(block, ContentBlock::Text { .. }))
    }

    /// Ids of the `tool_use` blocks in this message, in order.
    pub fn tool_use_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
    }

    /// Ids quoted by the `tool_result` blocks in this message, in order.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
            _ => None,
        })
    }

    /// The concatenated text blocks (what a person reads of a reply).
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// A message as stored: its place in the conversation, its original blocks, and the
/// pruned copy that replaces them in requests once a step decided so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// Session number, from 1.
    pub session: u32,
    /// Dense sequence number within the session, from 1, assigned at commit.
    pub seq: u64,
    /// Author.
    pub role: Role,
    /// The blocks as they were sent or received; kept for audit.
    pub content: Vec<ContentBlock>,
    /// The blocks with old tool results replaced by placeholders, set at a step and
    /// never undone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned: Option<Vec<ContentBlock>>,
    /// Usage of the model call that produced this message (assistant only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Commit time, seconds since the Unix epoch (informational: order is `seq`).
    #[serde(default)]
    pub created_at: i64,
    /// True for the business's message a person wrote (the owner answering from the
    /// WhatsApp Business app, or through `POST .../handoff`'s back office), not the
    /// model: shown as such, sent to the model as any assistant message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub written_by_person: bool,
    /// True for the customer's message transcribed from a WhatsApp voice note
    /// (the audio itself is never stored).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub transcribed: bool,
}

impl StoredMessage {
    /// The blocks a request carries: the pruned copy when there is one.
    pub fn effective_content(&self) -> &[ContentBlock] {
        self.pruned.as_deref().unwrap_or(&self.content)
    }

    /// The message as the model will see it.
    pub fn to_message(&self) -> Message {
        Message {
            role: self.role,
            content: self.effective_content().to_vec(),
        }
    }

    /// See [`Message::is_user_text_only`]; pruning never changes the answer.
    pub fn is_user_text_only(&self) -> bool {
        self.role == Role::User
            && !self.content.is_empty()
            && self
                .content
                .iter()
                .all(|block| matches!(block, ContentBlock::Text { .. }))
    }
}

/// The per-contact head: where the conversation stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// Current session number; 0 before the first message.
    pub session: u32,
    /// Sequence number of the last committed message of the session; 0 when empty.
    pub last_seq: u64,
    /// Messages with `seq <= summarized_until` are folded into `summary` and are
    /// never sent again.
    pub summarized_until: u64,
    /// The incremental summary of the folded messages of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Context size of the last request of the last round, as the model measured it.
    pub last_context_tokens: u64,
    /// Time of the last committed round, seconds since the Unix epoch.
    pub last_activity: i64,
    /// Compaction steps applied in this session.
    #[serde(default)]
    pub steps: u32,
    /// The session whose fact extraction the scheduled sweep already requested
    /// (set by [`crate::store::SweepStore::settle_sweep`]), so the next message, closing
    /// that session, does not request it a second time. Every round writes it
    /// back as `None`: a round means the session has messages no extraction saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts_requested: Option<u32>,
    /// The closed session whose fact extraction was requested and has not been
    /// done yet: set by the round or the sweep that requests it, cleared by the
    /// facts job when it is done. The sweep requests it again while it stays
    /// pending (a job lost, or left in the dead-letter queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts_pending: Option<PendingFacts>,
    /// The `summarized_until` at which the hard cap last cut a round's window: the
    /// next rounds keep cutting while `summarized_until` still has this value
    /// (until a step lands), whatever context the cut rounds measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard_cap_at: Option<u64>,
    /// When the head expires (TTL, seconds since the epoch): its last activity
    /// plus the idle timeout plus the transcript retention, written by every
    /// round. Past it the contact's memory is gone (DynamoDB deletes the head
    /// eventually; reads treat it as gone at once). `None` on heads written
    /// before heads expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Token of the last committed round: lets `ask` recognise its own commit when
    /// the answer to it was lost (a timeout after DynamoDB applied it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_round: Option<String>,
    /// Which life of the contact this head belongs to: a random id set when the
    /// head is created and kept until it is erased, so an erased contact who writes
    /// again gets a new one. Every job carries it and every job write is
    /// conditioned on it. `None` only on a head written before incarnations
    /// existed; its next round gives it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Incarnation>,
    /// The gaps between the contact's last rounds, in seconds, oldest first (at
    /// most [`crate::plan::cache_ttl::GAP_RECORD_LEN`]), the last one the gap before the
    /// last round: the rhythm the `auto` cache TTL reads. Written by every round
    /// and kept across sessions; empty before a contact's second round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_gaps: Vec<u32>,
    /// Whether a breakpoint of the last round's request asked for a one-hour
    /// entry (else every entry lived five minutes): when the pause fold may run
    /// ([`crate::plan::pause_fold::entries_gone_at`]). Written by every round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_hour: bool,
    /// Whether the last round was a client's, recorded (`POST .../rounds`): its
    /// cache entries are the client's, so no pause fold is due
    /// ([`crate::plan::policy::fold_barred`]). Written by every round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_round: bool,
    /// When this life of the contact began: the round that created the head
    /// (seconds since the epoch). An item of the contact's partition written before
    /// it (a message, an archive) belongs to an earlier life whose head expired
    /// first (its retention was lowered since): no read of this life shows it, and
    /// this life's writes replace it. `None` on heads from before lives were dated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born_at: Option<i64>,
}

/// A requested fact extraction not done yet (see [`Head::facts_pending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingFacts {
    /// The closed session.
    pub session: u32,
    /// When it was last requested, seconds since the epoch.
    pub since: i64,
    /// How many times it was requested.
    pub attempts: u32,
}

impl Head {
    /// Whether the head's retention ran out at `now` (see [`Head::expires_at`]).
    pub fn expired_at(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|expires| expires <= now)
    }

    /// Whether an item written at `at` belongs to this life (see [`Head::born_at`]).
    pub fn of_this_life(&self, at: i64) -> bool {
        self.born_at.is_none_or(|born| at >= born)
    }
}

#[cfg(test)]
mod tests;

/// One contact of one tenant: the partition every item about the contact lives in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContactKey {
    /// The tenant, from the verified JWT claim.
    pub tenant: TenantId,
    /// The contact, from the URL.
    pub contact: ContactId,
}

/// A change to [`Head::facts_pending`](crate::domain::Head::facts_pending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingChange {
    /// Left as it is.
    Keep,
    /// Set (a request made now).
    Set(PendingFacts),
    /// Removed (given up on).
    Clear,
}
