//! The request builder: turns the tenant's setup, the contact's memory and the window
//! into a Messages API request laid out for prompt caching.
//!
//! Layout (prefix order tools → system → messages; 4 breakpoints at most):
//!
//! | part | content | breakpoint |
//! |---|---|---|
//! | tools | the tenant's tool definitions | — |
//! | `system[0]` | the tenant's instructions | yes, with the prefix's lifetime |
//! | `system[1]` | the fenced `<contact_context>` block | yes, with the prefix's lifetime |
//! | messages | window + this round | end of the previous request's last message, and the last block: the messages' lifetime |
//!
//! The lifetimes are the ones the tenant's cache TTL policy chose for this
//! request ([`RequestParts::lifetimes`], see [`crate::plan::cache_ttl`]): `"ttl": "1h"`
//! on a breakpoint that lives an hour, no `ttl` (five minutes) otherwise. A
//! [`Lifetimes`] never puts a five-minute breakpoint before a one-hour one, as the
//! API requires. The tools carry no breakpoint of their own: `system[0]`'s covers
//! them (the prefix order is tools → system → messages).
//!
//! Every request appends exactly two messages to the one before it (an assistant
//! reply and a user message: the next turn, or the tool results of the loop), so the
//! previous request's last message is always the third from the end. Marking it lets
//! the cache find the previous write even when a turn adds more than 20 blocks.
//! Same inputs give byte-identical JSON: serde writes fields in declaration order and
//! facts are sorted by key.
//!
//! With extended thinking on (a tenant setting), the request carries `thinking` and
//! the assistant turns carry their `thinking`/`redacted_thinking` blocks exactly as
//! stored. Breakpoints fall on user messages only, so never on a thinking block.
//!
//! (`docs/DESIGN.md`: "Request layout".)

use serde::{Deserialize, Serialize};

use crate::domain::{ContentBlock, Fact, Message, Role, StoredMessage};
pub use crate::plan::cache_ttl::{CacheTtl, Lifetimes, RequestSizes};
use crate::plan::sendable::sendable;

mod contact_context;
mod wire;

pub use contact_context::{
    FENCE_CLOSE, FENCE_OPEN, neutralize, render_contact_context, render_contact_context_with,
};
pub use wire::{
    CacheControl, CacheKind, ModelRequest, RequestBlock, RequestMessage, SystemBlock, Thinking,
    ToolDef,
};

/// Most breakpoints the API accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Everything a request is built from.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    /// Model id.
    pub model: &'a str,
    /// Output token budget, the thinking budget included.
    pub max_tokens: u32,
    /// Extended thinking's budget, in tokens; `None` leaves thinking off.
    pub thinking: Option<u32>,
    /// The tenant's tools.
    pub tools: &'a [ToolDef],
    /// The tenant's instructions (`system[0]`).
    pub instructions: &'a str,
    /// The contact's facts, shown in every session.
    pub facts: &'a [Fact],
    /// The session's summary; `None` in a new session.
    pub summary: Option<&'a str>,
    /// The digest of the contact's last session (the tenant's `recall_digest`).
    pub last_session: Option<&'a str>,
    /// The stored window, oldest first (pruned copies are sent in place of originals).
    pub window: &'a [StoredMessage],
    /// This round so far: the user's message, then any tool calls and their results.
    pub round: &'a [Message],
    /// Lifetimes of the stable prefix's breakpoints (`system[0]`, `system[1]`) and of
    /// the messages'.
    pub lifetimes: Lifetimes,
}

/// A request that cannot be built: a bug in the caller, never the user's fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The tenant's instructions are empty; the API refuses empty text blocks.
    #[error("the tenant's instructions are empty")]
    EmptyInstructions,
    /// The round holds no message.
    #[error("a request needs at least the user's message")]
    EmptyRound,
    /// The API would merge two messages of one role: the stored window is broken.
    #[error("messages {index} and {} have the same role", index + 1)]
    RolesMustAlternate {
        /// Index (in the request) of the first of the two messages.
        index: usize,
    },
    /// Current models refuse a final assistant message (prefill).
    #[error("the conversation must end with a user message")]
    MustEndWithUser,
}

/// Builds the request for one model call of a round.
pub fn build_request(parts: &RequestParts<'_>) -> Result<ModelRequest, BuildError> {
    if parts.instructions.trim().is_empty() {
        return Err(BuildError::EmptyInstructions);
    }
    if parts.round.is_empty() {
        return Err(BuildError::EmptyRound);
    }
    // Without tools the API refuses a request that holds tool blocks; a window can
    // hold some all the same (a round a client's own loop recorded), so they are
    // sent as the text they stand for.
    let tools_defined = !parts.tools.is_empty();
    let window = parts.window.iter().map(|m| match tools_defined {
        true => (m.role, m.effective_content().to_vec()),
        false => (m.role, tool_blocks_as_text(m.effective_content())),
    });
    let round = parts.round.iter().map(|m| (m.role, m.content.clone()));
    let mut messages = sendable_messages(window.chain(round));
    check_alternation(&messages)?;
    if messages.last().map(|m| m.role) != Some(Role::User) {
        return Err(BuildError::MustEndWithUser);
    }

    let len = messages.len();
    for index in breakpoints_of(len) {
        mark_last_block(&mut messages[index], parts.lifetimes.messages());
    }

    Ok(ModelRequest {
        model: parts.model.to_owned(),
        max_tokens: parts.max_tokens,
        thinking: parts
            .thinking
            .map(|budget_tokens| Thinking::Enabled { budget_tokens }),
        tools: parts.tools.to_vec(),
        tool_choice: None,
        system: system_blocks(
            parts.instructions,
            parts.facts,
            parts.summary,
            parts.last_session,
            parts.lifetimes.prefix(),
        ),
        messages,
    })
}

/// Roles alternate: the index of the first message with its predecessor's role is
/// an error.
fn check_alternation(messages: &[RequestMessage]) -> Result<(), BuildError> {
    match messages
        .windows(2)
        .position(|pair| pair[0].role == pair[1].role)
    {
        Some(index) => Err(BuildError::RolesMustAlternate { index }),
        None => Ok(()),
    }
}

/// The indices of the messages whose last block carries a breakpoint, in a request
/// of `len` messages: the previous request's last message (third from the end) and
/// the last one.
fn breakpoints_of(len: usize) -> impl Iterator<Item = usize> {
    [len.checked_sub(3), len.checked_sub(1)]
        .into_iter()
        .flatten()
}

fn mark_last_block(message: &mut RequestMessage, ttl: CacheTtl) {
    if let Some(block) = message.content.last_mut() {
        block.cache_control = Some(CacheControl::with_ttl(ttl));
    }
}

/// What a contact's next request carries before its new user message, for a client
/// that calls the model itself (`GET /v1/contacts/{contact}/context`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelContext {
    /// `system[0]` (the tenant's instructions) and `system[1]` (the fenced contact
    /// context), each with its breakpoint.
    pub system: Vec<SystemBlock>,
    /// The window as the model should see it (pruned copies in place of the
    /// originals), with the breakpoint [`build_request`] will put on the previous
    /// request's last message once the client appends its user message.
    pub messages: Vec<RequestMessage>,
    /// The breakpoint for the last block of the client's user message: the
    /// messages' lifetime the cache TTL policy chose.
    pub cache_control: CacheControl,
}

/// Everything a [`ModelContext`] is built from: a request's parts without the model
/// settings, the tools and the round, which the client brings.
#[derive(Debug, Clone, Copy)]
pub struct ContextParts<'a> {
    /// The tenant's instructions (`system[0]`).
    pub instructions: &'a str,
    /// The contact's facts.
    pub facts: &'a [Fact],
    /// The session's summary; `None` in a new session.
    pub summary: Option<&'a str>,
    /// The digest of the contact's last session (the tenant's `recall_digest`).
    pub last_session: Option<&'a str>,
    /// The stored window, oldest first, as the request would send it (cut where
    /// `ask` cuts it).
    pub window: &'a [StoredMessage],
    /// The lifetimes the cache TTL policy chose.
    pub lifetimes: Lifetimes,
}

/// The context of the next request: what [`build_request`] would send before the
/// round, breakpoints placed as it places them for a request of the window plus one
/// user message. The client appends its user message, marks that message's last
/// block, and adds its tools.
pub fn build_context(parts: &ContextParts<'_>) -> Result<ModelContext, BuildError> {
    if parts.instructions.trim().is_empty() {
        return Err(BuildError::EmptyInstructions);
    }
    let mut messages = sendable_messages(
        parts
            .window
            .iter()
            .map(|m| (m.role, m.effective_content().to_vec())),
    );
    check_alternation(&messages)?;
    // The request will be these messages and the client's user message.
    let len = messages.len();
    for index in breakpoints_of(len + 1).filter(|index| *index < len) {
        mark_last_block(&mut messages[index], parts.lifetimes.messages());
    }
    Ok(ModelContext {
        system: system_blocks(
            parts.instructions,
            parts.facts,
            parts.summary,
            parts.last_session,
            parts.lifetimes.prefix(),
        ),
        messages,
        cache_control: CacheControl::with_ttl(parts.lifetimes.messages()),
    })
}

/// Estimated tokens of a JSON value: its characters over
/// [`crate::plan::step_plan::KEEP_CHARS_PER_TOKEN`] (the stand-in's count too).
fn json_tokens<T: Serialize + ?Sized>(value: &T) -> u64 {
    let chars = serde_json::to_string(value).map_or(0, |json| json.len() as u64);
    chars.div_ceil(crate::plan::step_plan::KEEP_CHARS_PER_TOKEN)
}

/// The sizes the cache TTL policy weighs ([`crate::plan::cache_ttl`]) of a request
/// with `tools`, `system` and `messages`, the last `new` of them written since
/// the previous request.
fn sizes_of(
    tools: &[ToolDef],
    system: &[SystemBlock],
    messages: &[RequestMessage],
    new: usize,
) -> RequestSizes {
    let prefix = json_tokens(tools) + json_tokens(system);
    let tokens: Vec<u64> = messages.iter().map(json_tokens).collect();
    let fresh = tokens.len().saturating_sub(new);
    RequestSizes {
        prefix,
        context: prefix + tokens.iter().sum::<u64>(),
        new: tokens[fresh..].iter().sum(),
    }
}

/// Gives every breakpoint of `system` and `messages` its lifetime under
/// `lifetimes`.
fn mark_lifetimes(
    system: &mut [SystemBlock],
    messages: &mut [RequestMessage],
    lifetimes: Lifetimes,
) {
    let prefix = CacheControl::with_ttl(lifetimes.prefix());
    let rest = CacheControl::with_ttl(lifetimes.messages());
    for block in system.iter_mut().filter(|b| b.cache_control.is_some()) {
        block.cache_control = Some(prefix);
    }
    let blocks = messages.iter_mut().flat_map(|m| m.content.iter_mut());
    for block in blocks.filter(|b| b.cache_control.is_some()) {
        block.cache_control = Some(rest);
    }
}

impl ModelRequest {
    /// Its sizes as the cache TTL policy weighs them: the stable prefix (tools and
    /// system blocks), the whole request, and its last two messages (what follows
    /// the previous request's last message, see the module documentation).
    pub fn sizes(&self) -> RequestSizes {
        sizes_of(&self.tools, &self.system, &self.messages, 2)
    }

    /// Gives its breakpoints the lifetimes the cache TTL policy chose.
    pub fn set_lifetimes(&mut self, lifetimes: Lifetimes) {
        mark_lifetimes(&mut self.system, &mut self.messages, lifetimes);
    }
}

impl ModelContext {
    /// Its sizes as the cache TTL policy weighs them, for a client whose tools
    /// are not known here: the system blocks, them and the window, and the
    /// window's last message (the previous reply; the client's message is not
    /// known either).
    pub fn sizes(&self) -> RequestSizes {
        sizes_of(&[], &self.system, &self.messages, 1)
    }

    /// Gives its breakpoints, and the one it names for the client's message,
    /// the lifetimes the cache TTL policy chose.
    pub fn set_lifetimes(&mut self, lifetimes: Lifetimes) {
        mark_lifetimes(&mut self.system, &mut self.messages, lifetimes);
        self.cache_control = CacheControl::with_ttl(lifetimes.messages());
    }
}

fn system_blocks(
    instructions: &str,
    facts: &[Fact],
    summary: Option<&str>,
    last_session: Option<&str>,
    ttl: CacheTtl,
) -> Vec<SystemBlock> {
    vec![
        system_block(instructions.to_owned(), ttl),
        system_block(
            render_contact_context_with(facts, summary, last_session),
            ttl,
        ),
    ]
}

fn system_block(text: String, ttl: CacheTtl) -> SystemBlock {
    SystemBlock {
        kind: "text".to_owned(),
        text,
        cache_control: Some(CacheControl::with_ttl(ttl)),
    }
}

/// A message's tool calls and results as text, for a request without tools: `[the
/// agent called {name} {input}]` and `[the tool returned: {content}]` (`returned an
/// error:` for one that failed). The same blocks always read the same, so the
/// cached prefix stays byte-stable.
fn tool_blocks_as_text(content: &[ContentBlock]) -> Vec<ContentBlock> {
    content
        .iter()
        .map(|block| match block {
            ContentBlock::ToolUse { name, input, .. } => {
                ContentBlock::text(format!("[the agent called {name} {input}]"))
            }
            ContentBlock::ToolResult {
                content, is_error, ..
            } => {
                let verb = if *is_error {
                    "returned an error:"
                } else {
                    "returned:"
                };
                ContentBlock::text(format!("[the tool {verb} {content}]"))
            }
            other => other.clone(),
        })
        .collect()
}

/// Messages as the API accepts them back ([`crate::plan::sendable`]): each without the
/// text blocks it would refuse. A message left with nothing (an answer stored
/// before answers were normalised, whose only text was whitespace) is left out,
/// and the two messages around it, of one role, are sent as one, as the API would
/// merge them: the contact it once wedged is answered again. Two messages of one
/// role with nothing left out between them stay apart, for
/// [`check_alternation`] to see a window read while a round landed.
fn sendable_messages(
    messages: impl Iterator<Item = (Role, Vec<ContentBlock>)>,
) -> Vec<RequestMessage> {
    let mut sent: Vec<RequestMessage> = Vec::new();
    let mut left_out = false;
    for (role, content) in messages {
        let content = sendable(content);
        if content.is_empty() {
            left_out = true;
            continue;
        }
        let blocks = content.into_iter().map(|block| RequestBlock {
            block,
            cache_control: None,
        });
        match sent.last_mut() {
            Some(last) if left_out && last.role == role => last.content.extend(blocks),
            _ => sent.push(RequestMessage {
                role,
                content: blocks.collect(),
            }),
        }
        left_out = false;
    }
    sent
}

#[cfg(test)]
mod tests;
