//! Memory for an agent that runs its own loop, the write side: a round the client
//! ran itself (its model calls, its tools), committed through the commit path of
//! `ask` ([`Converse::record_round`], `POST /v1/contacts/{contact}/rounds`): the
//! same transaction, head update, session opening and archive, facts request for a
//! closed session, step when the usage's context passes the threshold, sweep slot,
//! TTLs, idempotency and lost-answer check.
//!
//! A round is refused, with nothing written, unless it has the shape of a round
//! `ask` itself stores ([`RoundRequest::parse`]): a user message of text only first;
//! roles alternating; every `tool_use` answered by its `tool_result`s, first in the
//! next message, and every `tool_result` answering one; an assistant message with
//! no unanswered `tool_use` last; the block types degrau stores; the user's text and
//! the tool results within the limits `ask` keeps (refused, not cut: the client sent
//! them); at most [`MAX_ROUND_MESSAGES`]; and the last model call's usage. At the
//! commit its head token must still name the stored state
//! ([`super::HeadToken::stale_against`]) and its `tool_use` ids must be new to the
//! session's window (the API refuses a request that repeats one), and its usage's
//! context must be one the last request can have held ([`super::plausible`]). A
//! usage that reports no context (or none at all) is estimated from what degrau
//! holds ([`super::estimate`]), and the answer says so (`usage_estimated`).
//! A round that passes spends one of the tenant's rounds ([`crate::quota`]).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::admit::RoundBudget;
use super::round::{Round, first_cut};
use super::{
    AskError, AskResponse, Converse, HeadToken, MAX_TOOL_ITERATIONS, RoundSpan, UsageSummary,
    payload_hash, validate_text,
};
use crate::deadline::Deadline;
use crate::domain::{ContentBlock, IdempotencyKey, Message, Role, StoredMessage};
use crate::plan::pairing::{self, Unpaired};
use crate::plan::sendable::{refused_text, sendable};
use crate::store::ContactKey;
use crate::tools::{MAX_RESULTS_CHARS_PER_MESSAGE, MAX_TOOL_RESULT_CHARS};
use crate::usage::{CacheCreation, Usage};

/// Most messages in a recorded round: as many as `ask` can store, the user's
/// message and the answer with [`MAX_TOOL_ITERATIONS`] tool calls and results
/// between them.
pub const MAX_ROUND_MESSAGES: usize = 2 + 2 * MAX_TOOL_ITERATIONS;

/// Largest value of any usage field: far above any model's context window, low
/// enough that sums never overflow.
pub const MAX_USAGE_TOKENS: u64 = 10_000_000;

/// A round as the client sends it, checked: the head token, the messages, the last
/// model call's usage, and the hash an idempotent retry is recognised by.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundRequest {
    /// The state the client read the context from.
    pub head: HeadToken,
    /// The round: the user's message first, the final answer last.
    pub messages: Vec<Message>,
    /// The last model call's usage: its context drives compaction as in `ask`.
    /// All zeros when the body had none.
    pub usage: Usage,
    /// True when a person of the business wrote its answer (a WhatsApp handoff
    /// turn, or `POST .../handoff`), not a model: its assistant messages are
    /// stored marked so.
    pub written_by_person: bool,
    hash: String,
}

impl RoundRequest {
    /// A round a person of the business answered: the customer's text, then the
    /// person's, against `head`. Its hash names only the texts, so a retry after the
    /// round landed (the head moved) replays it instead of refusing it.
    pub(super) fn by_person(head: HeadToken, customer: &str, answer: &str) -> RoundRequest {
        RoundRequest {
            head,
            messages: vec![
                Message::user_text(customer),
                Message::assistant_text(answer),
            ],
            usage: Usage::default(),
            written_by_person: true,
            hash: payload_hash(&format!("person {customer}\n{answer}")),
        }
    }
}

/// The answer to a recorded round (and the body an idempotent retry replays).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedRound {
    /// The session the round was stored in.
    pub session: u32,
    /// Sequence numbers of its first and last messages.
    pub round: RoundSpan,
    /// The usage sent, with `context_tokens` computed from it.
    pub usage: UsageSummary,
    /// True when the round's context passed the threshold and a step was requested.
    pub compaction_queued: bool,
    /// True when the usage reported no context and `usage` is degrau's estimate
    /// (`ask/estimate.rs`).
    pub usage_estimated: bool,
}

impl RecordedRound {
    /// The answer to a recorded round committed as `response`, its usage
    /// `estimated` or not.
    pub(super) fn of(response: &AskResponse, estimated: bool) -> Self {
        RecordedRound {
            session: response.session,
            round: response.round,
            usage: response.usage,
            compaction_queued: response.compaction_queued,
            usage_estimated: estimated,
        }
    }
}

/// The outcome of recording a round.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundOutcome {
    /// The round was stored.
    Recorded(RecordedRound),
    /// An idempotent retry: the stored response, byte for byte.
    Replayed(String),
}

/// The body's top level.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    head: String,
    messages: Vec<Value>,
    /// Absent or `null`: the client has none (its context is then estimated).
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// `usage` as the Messages API returns it: the four counts (the two cache counts
/// optional, `null` meaning 0) and `cache_creation`'s split by entry lifetime when
/// present. Whatever else the API reports (`service_tier`, `server_tool_use`, and
/// what it adds next) is read past, not refused: a client passes the usage object
/// on as it got it.
#[derive(Deserialize)]
struct WireUsage {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation: Option<WireCacheCreation>,
}

/// `usage.cache_creation`: the cache writes by the lifetime of the entries written.
#[derive(Deserialize)]
struct WireCacheCreation {
    #[serde(default)]
    ephemeral_5m_input_tokens: Option<u64>,
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
}

fn invalid(message: impl Into<String>) -> AskError {
    AskError::InvalidRequest(message.into())
}

impl RoundRequest {
    /// Reads and checks a round's JSON body (see the module documentation); each
    /// refusal names the message and block at fault, messages counted from 0 as in
    /// the Messages API's own errors.
    pub fn parse(body: &Value) -> Result<RoundRequest, AskError> {
        let wire: Body = serde_json::from_value(body.clone()).map_err(|e| {
            invalid(format!(
                "the body must be a JSON object {{\"head\", \"messages\", \"usage\"}}: {e}"
            ))
        })?;
        let head = HeadToken::parse(&wire.head)?;
        if wire.messages.is_empty() {
            return Err(invalid(
                "`messages` is empty: a round holds at least the user's message and the answer",
            ));
        }
        if wire.messages.len() > MAX_ROUND_MESSAGES {
            return Err(AskError::TooLarge(format!(
                "the round has {} messages; the limit is {MAX_ROUND_MESSAGES} (the user's \
                 message, {MAX_TOOL_ITERATIONS} tool calls and results, the answer)",
                wire.messages.len()
            )));
        }
        let messages = wire
            .messages
            .iter()
            .enumerate()
            .map(|(index, value)| parse_message(index, value))
            .map(|message| message.map(sendable_answer))
            .collect::<Result<Vec<Message>, AskError>>()?;
        check_round(&messages)?;
        Ok(RoundRequest {
            head,
            messages,
            usage: wire.usage.as_ref().map_or(Ok(Usage::default()), usage)?,
            written_by_person: false,
            hash: payload_hash(&format!("rounds {body}")),
        })
    }
}

fn usage(wire: &WireUsage) -> Result<Usage, AskError> {
    let cache_creation = wire.cache_creation.as_ref().map(|split| CacheCreation {
        ephemeral_5m_input_tokens: split.ephemeral_5m_input_tokens.unwrap_or(0),
        ephemeral_1h_input_tokens: split.ephemeral_1h_input_tokens.unwrap_or(0),
    });
    let usage = Usage {
        input_tokens: wire.input_tokens,
        output_tokens: wire.output_tokens,
        cache_read_input_tokens: wire.cache_read_input_tokens.unwrap_or(0),
        cache_creation_input_tokens: wire.cache_creation_input_tokens.unwrap_or(0),
        cache_creation,
    };
    let split = cache_creation.unwrap_or_default();
    let fields = [
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("cache_read_input_tokens", usage.cache_read_input_tokens),
        (
            "cache_creation_input_tokens",
            usage.cache_creation_input_tokens,
        ),
        (
            "cache_creation.ephemeral_5m_input_tokens",
            split.ephemeral_5m_input_tokens,
        ),
        (
            "cache_creation.ephemeral_1h_input_tokens",
            split.ephemeral_1h_input_tokens,
        ),
    ];
    if let Some((name, value)) = fields.iter().find(|(_, v)| *v > MAX_USAGE_TOKENS) {
        return Err(invalid(format!(
            "usage.{name} is {value}; a usage count is at most {MAX_USAGE_TOKENS}"
        )));
    }
    // The split is of the writes the total counts: the API never reports one
    // that does not add up, so a usage that does was not the API's.
    if let Some(split) = cache_creation {
        let sum = split.ephemeral_5m_input_tokens + split.ephemeral_1h_input_tokens;
        if sum != usage.cache_creation_input_tokens {
            return Err(invalid(format!(
                "usage.cache_creation adds up to {sum} tokens but \
                 usage.cache_creation_input_tokens is {}; the split is of those writes",
                usage.cache_creation_input_tokens
            )));
        }
    }
    Ok(usage)
}

/// Reads message `index`: `{"role", "content"}`, the content a string (one text
/// block) or a list of blocks.
fn parse_message(index: usize, value: &Value) -> Result<Message, AskError> {
    let at = format!("messages.{index}");
    let Value::Object(fields) = value else {
        return Err(invalid(format!(
            "{at}: a message is an object {{\"role\", \"content\"}}"
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|k| !["role", "content"].contains(&k.as_str()))
    {
        return Err(invalid(format!(
            "{at}: unknown field `{unknown}`; a message has `role` and `content`"
        )));
    }
    let role = match fields.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        _ => {
            return Err(invalid(format!(
                "{at}.role: must be \"user\" or \"assistant\""
            )));
        }
    };
    let content = match fields.get("content") {
        Some(Value::String(text)) => vec![ContentBlock::text(text.clone())],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(position, block)| parse_block(&format!("{at}.content.{position}"), block))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(invalid(format!(
                "{at}.content: must be a string or a list of content blocks"
            )));
        }
    };
    if content.is_empty() {
        return Err(invalid(format!("{at}.content: a message needs a block")));
    }
    Ok(Message { role, content })
}

/// A model answer of the round as the API accepts it back ([`crate::plan::sendable`]):
/// a client records what the model sent (an empty text block beside a tool call,
/// say), and degrau stores what can be sent again, as it does for its own rounds.
fn sendable_answer(message: Message) -> Message {
    match message.role {
        Role::Assistant => Message {
            role: Role::Assistant,
            content: sendable(message.content),
        },
        Role::User => message,
    }
}

/// The fields degrau stores of each block type besides `type`.
fn block_fields(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "text" => &["text"],
        "tool_use" => &["id", "name", "input"],
        "tool_result" => &["tool_use_id", "content", "is_error"],
        "thinking" => &["thinking", "signature"],
        "redacted_thinking" => &["data"],
        _ => return None,
    })
}

/// Reads one block of a type degrau stores, as the Messages API and its SDKs
/// write it: the fields degrau stores are kept, the others read past (a text
/// block's `citations`, a `tool_use`'s `caller`, `cache_control`: degrau places
/// its breakpoints itself). A `null` field counts as absent, as an SDK's dump of a
/// block writes the fields it did not get. A `tool_result`'s `content` given as a
/// list of text blocks is stored as their text, one block a paragraph.
fn parse_block(at: &str, value: &Value) -> Result<ContentBlock, AskError> {
    let Value::Object(fields) = value else {
        return Err(invalid(format!("{at}: a content block is an object")));
    };
    let kind = fields.get("type").and_then(Value::as_str).unwrap_or("");
    let stored = block_fields(kind).ok_or_else(|| {
        invalid(format!(
            "{at}.type: degrau stores `text`, `tool_use`, `tool_result`, `thinking` and \
             `redacted_thinking` blocks, not {}",
            if kind.is_empty() {
                "a block without a type".to_owned()
            } else {
                format!("`{kind}`")
            }
        ))
    })?;
    let mut kept: Map<String, Value> = fields
        .iter()
        .filter(|(name, field)| {
            (name.as_str() == "type" || stored.contains(&name.as_str())) && !field.is_null()
        })
        .map(|(name, field)| (name.clone(), field.clone()))
        .collect();
    if kind == "tool_result" {
        let text = tool_result_text(at, kept.get("content"))?;
        kept.insert("content".to_owned(), Value::String(text));
    }
    serde_json::from_value(Value::Object(kept)).map_err(|e| invalid(format!("{at}: {e}")))
}

/// A `tool_result`'s output as the text degrau stores: the string, or the text of
/// a list of text blocks joined by blank lines. Anything else (an image, a
/// document) is refused: degrau stores tool results as text.
fn tool_result_text(at: &str, content: Option<&Value>) -> Result<String, AskError> {
    let refused = || {
        invalid(format!(
            "{at}.content: degrau stores a tool result as text: send `content` as a string \
             or a list of `text` blocks"
        ))
    };
    match content {
        None => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|block| match (block.get("type"), block.get("text")) {
                (Some(Value::String(kind)), Some(Value::String(text))) if kind == "text" => {
                    Ok(text.as_str())
                }
                _ => Err(refused()),
            })
            .collect::<Result<Vec<&str>, _>>()
            .map(|texts| texts.join("\n\n")),
        Some(_) => Err(refused()),
    }
}

/// The rules of a round's shape, in the order a reader checks them: the first
/// message, alternation, what each message may hold, the pairing of tool calls and
/// results, the end, and the limits `ask` keeps.
fn check_round(messages: &[Message]) -> Result<(), AskError> {
    let first = &messages[0];
    if !first.is_user_text_only() {
        return Err(invalid(
            "messages.0: a round starts with the contact's message: a user message of text \
             blocks only",
        ));
    }
    if let Some(index) = (1..messages.len()).find(|&i| messages[i].role == messages[i - 1].role) {
        let role = match messages[index].role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        return Err(invalid(format!(
            "messages.{index}: two {role} messages in a row; roles must alternate (user, \
             assistant, user, ...)"
        )));
    }
    for (index, message) in messages.iter().enumerate() {
        check_blocks(index, message)?;
    }
    check_pairs(messages)?;
    let last = messages.len() - 1;
    if messages[last].role != Role::Assistant {
        return Err(invalid(format!(
            "messages.{last}: a round ends with the assistant's answer"
        )));
    }
    if !messages[last]
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::Text { text } if !text.trim().is_empty()))
    {
        return Err(invalid(format!(
            "messages.{last}: the answer that ends the round holds no text"
        )));
    }
    validate_text(&first.text())?;
    check_results_size(messages)
}

/// What each message may hold: the first only text, later user messages only tool
/// results, assistant messages text, tool calls and thinking; text as the API
/// accepts it (never empty; whitespace only beside something else); tool names and
/// ids as the API writes them; tool inputs JSON objects.
fn check_blocks(index: usize, message: &Message) -> Result<(), AskError> {
    if message.content.is_empty() {
        return Err(invalid(format!(
            "messages.{index}.content: holds no text and no block the API accepts back (an \
             empty or whitespace-only answer)"
        )));
    }
    if let Some((position, refusal)) = refused_text(&message.content) {
        return Err(invalid(format!(
            "messages.{index}.content.{position}.text: {}",
            refusal.api_text()
        )));
    }
    for (position, block) in message.content.iter().enumerate() {
        let at = format!("messages.{index}.content.{position}");
        match (message.role, block) {
            (Role::User, ContentBlock::Text { .. }) if index == 0 => {}
            (Role::User, ContentBlock::ToolResult { .. }) if index > 0 => {}
            (Role::User, _) if index > 0 => {
                return Err(invalid(format!(
                    "{at}: a user message after the first holds only the `tool_result` blocks \
                     answering the previous message's `tool_use`"
                )));
            }
            (Role::Assistant, ContentBlock::ToolResult { .. }) => {
                return Err(invalid(format!(
                    "{at}: `tool_result` blocks belong in user messages"
                )));
            }
            (Role::Assistant, ContentBlock::ToolUse { id, name, input }) => {
                if !is_api_name(id, usize::MAX) {
                    return Err(invalid(format!(
                        "{at}.id: a `tool_use` id is made of letters, digits, `_` and `-`"
                    )));
                }
                if !is_api_name(name, 64) {
                    return Err(invalid(format!(
                        "{at}.name: a tool name is 1 to 64 letters, digits, `_` and `-`"
                    )));
                }
                if !input.is_object() {
                    return Err(invalid(format!(
                        "{at}.input: a tool's input is a JSON object"
                    )));
                }
            }
            (Role::Assistant, _) => {}
            (Role::User, _) => {
                return Err(invalid(format!(
                    "{at}: the round's first message is the contact's text only"
                )));
            }
        }
    }
    Ok(())
}

fn is_api_name(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.chars().count() <= max
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Every `tool_use` answered by exactly one `tool_result` in the next message, and
/// every `tool_result` answering one of the previous message; ids unique
/// ([`crate::plan::pairing`], worded for a recorded round).
fn check_pairs(messages: &[Message]) -> Result<(), AskError> {
    let pairs: Vec<(Role, Vec<&ContentBlock>)> = messages
        .iter()
        .map(|message| (message.role, message.content.iter().collect()))
        .collect();
    let Err(unpaired) = pairing::check_pairs(&pairs) else {
        return Ok(());
    };
    Err(invalid(match unpaired {
        Unpaired::DuplicateUse { index, id } => {
            format!("messages.{index}: `tool_use` id {id} is used twice; ids must be unique")
        }
        Unpaired::ResultsWithoutUses {
            index,
            position,
            id,
        }
        | Unpaired::Unexpected {
            index,
            position,
            id,
        } => format!(
            "messages.{index}.content.{position}: `tool_result` answers {id}, which no \
             `tool_use` of messages.{} holds",
            index.saturating_sub(1)
        ),
        Unpaired::AnsweredTwice {
            index,
            position,
            id,
        } => format!("messages.{index}.content.{position}: {id} is answered twice"),
        Unpaired::Unanswered {
            index,
            ids,
            last: true,
        } => format!(
            "messages.{index}: the round ends with `tool_use` ids that have no \
             `tool_result`: {}; run the tools and send their results, then the answer",
            ids.join(", ")
        ),
        Unpaired::Unanswered {
            index,
            ids,
            last: false,
        } => format!(
            "messages.{index}: `tool_use` ids were found without `tool_result` blocks \
             immediately after: {}",
            ids.join(", ")
        ),
    }))
}

/// Tool results within the caps `ask` keeps ([`MAX_TOOL_RESULT_CHARS`] each,
/// [`MAX_RESULTS_CHARS_PER_MESSAGE`] a message): refused, not cut, since the model
/// already read them whole.
fn check_results_size(messages: &[Message]) -> Result<(), AskError> {
    for (index, message) in messages.iter().enumerate() {
        let mut total = 0;
        for (position, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolResult { content, .. } = block {
                let chars = content.chars().count();
                if chars > MAX_TOOL_RESULT_CHARS {
                    return Err(AskError::TooLarge(format!(
                        "messages.{index}.content.{position}: the tool result has {chars} \
                         characters; the limit is {MAX_TOOL_RESULT_CHARS}"
                    )));
                }
                total += chars;
            }
        }
        if total > MAX_RESULTS_CHARS_PER_MESSAGE {
            return Err(AskError::TooLarge(format!(
                "messages.{index}: its tool results have {total} characters in all; the limit \
                 is {MAX_RESULTS_CHARS_PER_MESSAGE} a message"
            )));
        }
    }
    Ok(())
}

/// A `tool_use` id of the round that the session's window already holds: the next
/// request would repeat it, and the API refuses that.
fn reused_tool_id(window: &[StoredMessage], round: &[Message]) -> Option<String> {
    let stored: HashSet<&str> = window
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    round
        .iter()
        .flat_map(Message::tool_use_ids)
        .find(|id| stored.contains(id))
        .map(str::to_owned)
}

impl Converse {
    /// Commits a round the client ran itself by `deadline`, idempotently with
    /// `idempotency` (the same key and body replays the stored answer; another body
    /// is [`AskError::IdempotencyMismatch`]). Nothing is written on any error but
    /// [`AskError::Indeterminate`].
    pub async fn record_round(
        &self,
        key: &ContactKey,
        request: &RoundRequest,
        idempotency: Option<&IdempotencyKey>,
        deadline: Deadline,
    ) -> Result<RoundOutcome, AskError> {
        if let Some(idem) = idempotency
            && let Some(response) = self.claim(key, idem, &request.hash, deadline).await?
        {
            return Ok(RoundOutcome::Replayed(response));
        }
        let result = self
            .record(
                key,
                request,
                idempotency.map(|idem| (idem, request.hash.as_str())),
                deadline,
            )
            .await;
        self.release_failed(key, idempotency, &result, deadline)
            .await;
        result.map(RoundOutcome::Recorded)
    }

    /// Loads the turn as `ask` does, checks the head token and the window's tool
    /// ids against it, and stores the round through the shared commit path. A round
    /// that lands between this read and the commit is a conflict too: the client's
    /// model saw a window without it.
    async fn record(
        &self,
        key: &ContactKey,
        request: &RoundRequest,
        idempotency: Option<(&IdempotencyKey, &str)>,
        deadline: Deadline,
    ) -> Result<RecordedRound, AskError> {
        let settings = self.settings(&key.tenant, deadline).await?;
        let turn = self.load_turn(key, &settings, deadline).await?;
        if let Some(why) = request.head.stale_against(&HeadToken::of(&turn)) {
            return Err(AskError::Conflict(why));
        }
        if let Some(id) = reused_tool_id(&turn.plan.window, &request.messages) {
            return Err(invalid(format!(
                "`tool_use` id {id} is already in this session's window; ids must be unique"
            )));
        }
        let estimated = request.usage.context_tokens() == 0;
        let usage = match estimated {
            true => super::estimate::estimated_usage(&settings, &turn, request)?,
            false => {
                super::plausible::check_usage(&settings, &turn, request)?;
                request.usage
            }
        };
        // A recorded round ran its model elsewhere: no lease to hold.
        let admitted = self
            .admit(key, &settings, (RoundBudget::Api, false), deadline)
            .await?;
        self.give_back(admitted, deadline).await;
        let hard_capped = first_cut(&settings, &turn).hard_capped;
        let mut round = Round::recorded(request.messages.clone(), usage, estimated, hard_capped);
        if request.written_by_person {
            round = round.by_person();
        }
        match self
            .store_round(key, &settings, &turn, round, idempotency, deadline)
            .await?
        {
            Some(response) => Ok(RecordedRound::of(&response, estimated)),
            None => Err(AskError::Conflict(
                "another round for this contact landed while this one was being stored; \
                 nothing was stored; read the context again and run the round on it"
                    .into(),
            )),
        }
    }
}
