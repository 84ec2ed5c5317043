"""The API's shapes and the clients' retry policy, generated from
``docs/openapi.json`` by ``clients/python/scripts/generate_schema.py``. Do not edit:
change the document and run the script (``tests/test_schema.py`` fails while this
file is stale)."""

# ruff: noqa
from __future__ import annotations

from typing import Any, Literal, TypedDict

JSON = dict[str, Any]



class Error(TypedDict):
    """The error envelope. Nothing is written on an error."""

    error: JSON


class _CacheControlRequired(TypedDict):
    type: Literal["ephemeral"]


class CacheControl(_CacheControlRequired, total=False):
    """A prompt-caching breakpoint. In a round's messages it is accepted and dropped:
    degrau places breakpoints itself.
    """

    ttl: Literal["5m", "1h"]


class _TextBlockRequired(TypedDict):
    type: Literal["text"]
    text: str


class TextBlock(_TextBlockRequired, total=False):
    """``TextBlock``."""

    cache_control: CacheControl


class _ToolUseBlockRequired(TypedDict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: JSON


class ToolUseBlock(_ToolUseBlockRequired, total=False):
    """``ToolUseBlock``."""

    cache_control: CacheControl


class _ToolResultBlockRequired(TypedDict):
    type: Literal["tool_result"]
    tool_use_id: str
    #: The tool's output as text (degrau stores results as text).
    content: str


class ToolResultBlock(_ToolResultBlockRequired, total=False):
    """``ToolResultBlock``."""

    is_error: bool
    cache_control: CacheControl


class _ThinkingBlockRequired(TypedDict):
    type: Literal["thinking"]
    thinking: str
    signature: str


class ThinkingBlock(_ThinkingBlockRequired, total=False):
    """``ThinkingBlock``."""

    cache_control: CacheControl


class _RedactedThinkingBlockRequired(TypedDict):
    type: Literal["redacted_thinking"]
    data: str


class RedactedThinkingBlock(_RedactedThinkingBlockRequired, total=False):
    """``RedactedThinkingBlock``."""

    cache_control: CacheControl


#: A ``oneOf`` (TextBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock,
#: RedactedThinkingBlock): read by its ``type``.
ContentBlock = JSON


class Message(TypedDict):
    """A message in the Messages API shape."""

    role: Literal["user", "assistant"]
    content: list[JSON]


class RoundMessage(TypedDict):
    """A message of a round; `content` may be a string (one text block)."""

    role: Literal["user", "assistant"]
    content: str | list[JSON]


class _SystemBlockRequired(TypedDict):
    type: Literal["text"]
    text: str


class SystemBlock(_SystemBlockRequired, total=False):
    """``SystemBlock``."""

    cache_control: CacheControl


class RoundSpan(TypedDict):
    """Sequence numbers of the round's first and last messages."""

    first_seq: int
    last_seq: int


class UsageSummary(TypedDict):
    """Usage of the round; `context_tokens` is the last model call's `input_tokens +
    cache_read_input_tokens + cache_creation_input_tokens`.
    """

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    output_tokens: int
    context_tokens: int


class AskRequest(TypedDict):
    """``AskRequest``."""

    text: str


class AskResponse(TypedDict):
    """``AskResponse``."""

    session: int
    reply: JSON
    round: RoundSpan
    usage: UsageSummary
    compaction_queued: bool


class TranscriptPage(TypedDict):
    """Oldest first within a page."""

    messages: list[TranscriptMessage]
    #: Pass as `before` for the previous (older) page; null on the oldest.
    next_before: str | None


class MemoryView(TypedDict):
    """``MemoryView``."""

    session: Session
    facts: list[Fact]


class _ContextViewRequired(TypedDict):
    #: The session the next round belongs to.
    session: int
    #: An opaque token naming the stored state this context was read from; send it back
    #: with the round.
    head: str
    #: True when the next round opens a new session (a contact never seen, or a session
    #: gone idle): the context then holds the facts, no summary and no window.
    opens_session: bool
    #: system[0]: the tenant's instructions; system[1]: the fenced <contact_context>
    #: block (facts, and the summary while the session is open); each with a
    #: breakpoint.
    system: list[SystemBlock]
    #: The window as the model should see it (pruned where a step pruned it). The last
    #: block of the window's last user message carries the breakpoint degrau puts at
    #: the previous request's end; put `cache_control` on the last block of the message
    #: you append.
    messages: list[Message]
    #: The breakpoint for the last block of the message you append: the lifetime the
    #: tenant's cache_ttl policy chose for the messages (with `ttl: 1h` when the
    #: conversation's pauses make an hour cheaper).
    cache_control: CacheControl


class ContextView(_ContextViewRequired, total=False):
    """What the contact's next model request should carry. Append the user's message,
    add your tools, call the model, then commit the round with POST .../rounds.
    """

    #: Who has the contact's WhatsApp conversation: null for the agent; while a person
    #: has it (see GET .../handoff), a client's own loop should not answer.
    handoff: None | Handoff


class _RoundBodyRequired(TypedDict):
    #: The `head` of the context the round was run on.
    head: str
    #: The round: a user message of text only (at most 8,000 characters), then
    #: alternately an assistant message and a user message of the `tool_result`s
    #: answering every `tool_use` of it (first in the message, each id once), and last
    #: an assistant message with text and no `tool_use`. Tool results at most 16,000
    #: characters each and 64,000 a message (refused, not cut).
    messages: list[RoundMessage]


class RoundBody(_RoundBodyRequired, total=False):
    """A round the client ran itself. At most 256 KiB."""

    #: The last model call's `usage` as the Messages API returned it. Absent, `null`,
    #: or with no context (`input_tokens`, `cache_read_input_tokens` and
    #: `cache_creation_input_tokens` all 0: a framework that dropped it), degrau
    #: estimates the context from what it holds and says so (`usage_estimated`).
    usage: ApiUsage | None


class RecordedRound(TypedDict):
    """``RecordedRound``."""

    session: int
    round: RoundSpan
    usage: UsageSummary
    compaction_queued: bool
    #: True when the round's usage reported no context: `usage` is then degrau's
    #: estimate of the last request's context (the system blocks and the window it
    #: served, and the round's messages before the answer, each block's JSON at 4
    #: characters a token, as the offline stand-in counts; it cannot see the client's
    #: own tools), which decides the step; it is not counted as tokens in the tenant's
    #: usage.
    usage_estimated: bool


class Erased(TypedDict):
    """``Erased``."""

    erased: Literal[True]
    items: int


class Session(TypedDict):
    """The contact's current (or last) session."""

    #: The session's number, from 1 (0 before the first round).
    number: int
    open: bool
    #: The summary of the messages folded out of the window so far (null before the
    #: first step, and once the session closed).
    summary: str | None
    #: The last message the summary covers.
    summarized_until: int
    last_seq: int
    last_context_tokens: int
    steps: int
    #: Unix seconds of the last round.
    last_activity: int


class _FactRequired(TypedDict):
    key: str
    value: str
    #: The session and message the fact was read from.
    source: JSON
    #: Unix seconds of the extraction that set it.
    updated_at: int


class Fact(_FactRequired, total=False):
    """A fact about the contact, extracted from a closed session under the tenant's
    fact policy.
    """

    #: The operator who set the value, when one did (its history: `GET .../facts`).
    operator: str


class TranscriptMessage(TypedDict):
    """A stored message: its session and sequence number, and when it was stored (Unix
    seconds).
    """

    session: int
    seq: int
    role: Literal["user", "assistant"]
    content: list[JSON]
    created_at: int
    #: Whether a step replaced this message's tool results by placeholders in what the
    #: model is sent (`content` is always the original).
    pruned: bool
    #: An assistant message's model call usage; null on user messages (and on a round
    #: recorded without it).
    usage: None | MessageUsage
    #: True for the business's message a person wrote (the owner answering from the
    #: WhatsApp Business app), not the model; sent to the model as any assistant
    #: message.
    written_by_person: bool
    #: True for the customer's message transcribed from a WhatsApp voice note
    #: (speech-to-text on); the audio itself is never stored.
    transcribed: bool
    #: A WhatsApp reply's delivery state, from Meta's status callbacks; null on every
    #: other message.
    delivery: None | DeliveryState


#: A ``oneOf`` (see the document): read by its ``type``.
RoundContentBlock = JSON


class _ApiUsageRequired(TypedDict):
    input_tokens: int
    output_tokens: int


class ApiUsage(_ApiUsageRequired, total=False):
    """The last model call's `usage` exactly as the Messages API returns it: its
    context drives compaction. Fields degrau does not use (`service_tier`,
    `server_tool_use`, ...) are read past.
    """

    cache_read_input_tokens: int | None
    cache_creation_input_tokens: int | None
    #: The cache writes by entry lifetime; when given, the two add up to
    #: `cache_creation_input_tokens`.
    cache_creation: JSON | None


#: A ``oneOf`` (see the document): read by its ``type``.
SetBy = JSON


class FactRevision(TypedDict):
    """An earlier value of a fact."""

    value: str
    set_by: JSON
    #: Unix seconds it was set.
    updated_at: int
    #: Unix seconds it was replaced.
    replaced_at: int


class OperatorFact(TypedDict):
    """A fact with its provenance and its earlier values (at most 5, none older than
    the fact retention).
    """

    key: str
    value: str
    set_by: JSON
    #: Unix seconds it was set.
    updated_at: int
    #: Unix seconds it expires (fact retention after its last change).
    expires_at: int | None
    #: Earlier values, newest first.
    history: list[FactRevision]


class FactList(TypedDict):
    """``FactList``."""

    facts: list[OperatorFact]


class FactBody(TypedDict):
    """``FactBody``."""

    #: One line, within the fact policy (length, no CPF/CNPJ, card number or health
    #: term).
    value: str


class FactDeleted(TypedDict):
    """``FactDeleted``."""

    deleted: Literal[True]
    key: str


class ContactSummary(TypedDict):
    """``ContactSummary``."""

    contact: str
    #: The current (or last) session's number.
    session: int
    #: Unix seconds of the last round.
    last_activity: int
    #: Messages stored in the current session.
    messages: int
    #: Facts stored.
    facts: int


class ContactPage(TypedDict):
    """``ContactPage``."""

    #: Most recently active first.
    contacts: list[ContactSummary]
    #: Pass as `cursor` for the next page; null on the last.
    next_cursor: str | None


class TenantConfigView(TypedDict):
    """``TenantConfigView``."""

    #: The stored configuration as stored (null when none is: every setting is the
    #: deployment's default). Its schema: `TenantConfig`
    #: (`docs/tenant-config.schema.json`).
    config: None | JSON
    #: Send it back in `If-Match` to change this version (also the `ETag` header).
    etag: str
    #: Whether the stored configuration reads; when not, every request of the tenant
    #: answers `tenant_config_invalid`.
    valid: bool
    #: Why it does not read (the entry and the field), when it does not.
    problem: str | None
    #: Each bound of the platform's policy the stored configuration was clamped to when
    #: read (`field value -> bound (name)`): a bound lowered after it was stored. Empty
    #: when it fits.
    clamped: list[str]
    policy: TenantBounds


class ModelTokens(TypedDict):
    """Tokens one model read and wrote, by kind, and their cost at the deployment's
    price table (null when the table has no price for the model).
    """

    model: str
    input: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    output: int
    cost_usd: float | None


class UsageDay(TypedDict):
    """One UTC day of a tenant's consumption (days without any are left out)."""

    day: str
    rounds: int
    #: Answer calls (a tool round is several).
    model_calls: int
    tool_calls: int
    summary_calls: int
    facts_calls: int
    whatsapp_in: int
    whatsapp_out: int
    #: WhatsApp turns a limit of the tenant's numbers (its budget, a sender's rate, new
    #: senders per hour) held back in the queue, each time: they are answered once the
    #: limit allows.
    whatsapp_held: int
    tokens: list[ModelTokens]
    #: The sum of the models' costs; null when a model has no price.
    cost_usd: float | None


#: ``Usage``.
Usage = TypedDict("Usage", {"from": "str", "to": "str", "days": "list[UsageDay]"})


class TenantConfig(TypedDict, total=False):
    """A tenant's CONFIG item, as PUT /v1/tenant/config takes it: every field optional,
    each overriding the deployment's default, inside the platform's policy for the
    tenant (a value outside a bound is refused with 403 naming it: `quota`, `model`,
    `thinking_budget_tokens`, `compaction_threshold_tokens`, the retentions, the
    number of webhook tools; GET /v1/tenant/config shows the bounds as `policy`).
    Tested against the parser (functions/ask/tests/config_schema.rs): the fields
    listed here are exactly the fields it reads, and every example reads. The parser
    also checks what a schema cannot say (a retention at least the idle timeout;
    unique tool names; each webhook tool's input_schema a valid JSON Schema).
    """

    #: The agent's instructions (system[0]); blank falls back to the default.
    instructions: str
    #: The keys facts may be stored under.
    allowed_fact_keys: list[str]
    #: The tools the agent may call, in order: a built-in tool's name, or a webhook
    #: tool. Every built-in when absent.
    tools: list[Literal["list_free_slots", "book_slot", "recall"] | JSON]
    #: Model id for answers: one of the platform's `models` for the tenant.
    model: str
    #: Context size that triggers a step.
    compaction_threshold_tokens: int
    #: Messages a step keeps.
    window_keep_messages: int
    #: Tokens the request after a step holds at least (0: by message count only).
    window_keep_tokens: int
    cache_ttl: Literal["5m", "1h", "auto"]
    #: Minutes without messages after which a session closes.
    session_idle_minutes: int
    #: Days transcripts are kept after their session could close; at least the idle
    #: timeout.
    transcript_retention_days: int
    #: Days facts are kept after their last change.
    fact_retention_days: int
    thinking_budget_tokens: int
    whatsapp: JSON
    #: Rounds and summary calls per hour, each at most the platform's ceiling for the
    #: tenant (its default); 0 allows none. A tenant may lower its own; only the
    #: platform suspends or raises it.
    quota: JSON
    #: Whether a new session's contact context carries a one-paragraph digest of the
    #: contact's last session (absent: no).
    recall_digest: bool
    #: Whether a streamed round's tool_started events carry the call's input (absent:
    #: no; the input may quote the contact).
    stream_tool_input: bool
    #: Where the contacts' events go (docs/events.md): a webhook tool's receiving end,
    #: under the same rules; the secret_parameter must lie under WEBHOOK_SECRETS_PATH
    #: and the tenant's id. Absent: no events.
    events_webhook: JSON


class MessageUsage(TypedDict):
    """The usage of the model call that wrote an assistant message, as the API reported
    it.
    """

    input_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    output_tokens: int


class SessionRecords(TypedDict):
    """``SessionRecords``."""

    sessions: list[SessionRecord]


class _SessionRecordRequired(TypedDict):
    #: The session's number.
    session: int
    #: The messages after the summary as `customer:`/`agent:` lines, cut to 1,500
    #: characters (start and end kept).
    excerpt: str
    #: Booking numbers, codes and dates found in the session, first seen first.
    ids: list[str]
    #: How many messages the session had.
    messages: int
    #: When its last round was, seconds since the Unix epoch.
    ended_at: int


class SessionRecord(_SessionRecordRequired, total=False):
    """A closed session: its record (from its archive), and with `q` its score, search
    summary and the passages that matched.
    """

    #: The summary the session's last compaction step left (absent when no step ran).
    summary: str
    #: Its BM25 score for `q` (only with `q`).
    score: float
    #: The index card the summary model wrote of the session for finding it again (with
    #: `q`, once written).
    search_summary: str
    #: The lines that matched `q`, each with the line before and after it, dated (with
    #: `q`).
    passages: list[Passage]


class StreamDelta(TypedDict):
    """`delta`: answer text as the model writes it."""

    #: The new text, appended to what the same call showed.
    text: str
    #: Which model call of the round wrote it (0 first; the call after a tool round is
    #: 1).
    call: int


class _StreamToolStartedRequired(TypedDict):
    id: str
    name: str


class StreamToolStarted(_StreamToolStartedRequired, total=False):
    """`tool_started`: a tool call is about to run."""

    #: The call's input, only when the tenant's config has `stream_tool_input: true`.
    input: JSON


class StreamToolFinished(TypedDict):
    """`tool_finished`: the tool call ran."""

    id: str
    name: str
    is_error: bool


class StreamRestart(TypedDict):
    """`restart`: everything the stream showed so far is void; the round's events start
    over (a commit race re-answered, an answer asked for again).
    """

    reason: str


class StreamError(TypedDict):
    """`error`: the round failed after the stream began; nothing was stored. `status`
    and `error` are what the JSON route would have answered.
    """

    status: int
    error: JSON


#: A ``oneOf`` (StreamDelta, StreamToolStarted, StreamToolFinished, StreamRestart,
#: AskResponse, StreamError): read by its ``type``.
StreamEvent = JSON


class SessionClosed(TypedDict):
    """The answer to closing the contact's session."""

    #: The session the contact's next round belongs to.
    session: int
    #: The session closed now; `null` when none held a message (a contact never seen,
    #: or a session a close just opened): nothing changed.
    closed_session: int | None


class Passage(TypedDict):
    """A stretch of a session around a line that matched."""

    #: The day the matching line was written (YYYY-MM-DD, UTC).
    date: str
    #: `customer: …`, `agent: …` or `tool: …` lines, in order.
    lines: list[str]


class TenantBounds(TypedDict):
    """The platform's policy a tenant's configuration lives in: a `PUT` outside it is
    403 naming the bound; a stored configuration a bound lowered later no longer
    fits is clamped when read (`clamped`).
    """

    #: True: every round of the tenant is refused (403).
    suspended: bool
    #: The ceiling (and default) of `quota.rounds_per_hour`.
    rounds_per_hour: int
    #: The ceiling (and default) of `quota.summary_calls_per_hour`.
    summary_calls_per_hour: int
    #: The answer models the tenant may choose (null: any).
    models: list[str] | None
    #: The largest `thinking_budget_tokens` (0: no thinking).
    max_thinking_budget_tokens: int
    max_compaction_threshold_tokens: int
    max_transcript_retention_days: int
    max_fact_retention_days: int
    max_webhook_tools: int


class FairShare(TypedDict, total=False):
    """A tenant's fair share; each limit refused answers 429 `rate_limited` with
    `Retry-After` and stores nothing. Absent: no limit.
    """

    #: Asks and streams of the tenant running at once.
    concurrency: int
    #: Rounds (asked, streamed or recorded) the tenant may start per minute.
    rounds_per_minute: int
    #: Seconds of tool calls one round may spend in all; a call past them is not made,
    #: and the model reads why.
    tool_seconds_per_round: int
    #: Turns one contact may start per minute.
    contact_turns_per_minute: int


class NumberLimits(TypedDict, total=False):
    """The limits of the tenant's public WhatsApp numbers, apart from its API quota. A
    turn a limit refuses waits in the queue. Absent: no limit.
    """

    #: Turns one number may answer per hour (spent instead of the tenant's API rounds).
    turns_per_hour: int
    #: Turns one sender may start per minute.
    sender_turns_per_minute: int
    #: Senders the tenant has no conversation with whose first turn one number may
    #: answer per hour.
    new_senders_per_hour: int


class ModelPrice(TypedDict):
    """USD per million tokens (cache writes at 1.25x and 2x input, reads at 0.1x)."""

    input: float
    output: float


class TenantPolicy(TypedDict, total=False):
    """The platform's policy item of one tenant (`POLICY`): every field optional, each
    replacing the deployment's plan for this tenant (up or down). Unknown fields are
    refused.
    """

    #: True: every round of the tenant is refused (403), whatever its configuration
    #: says.
    suspended: bool
    #: The ceiling (and default) of the tenant's rounds per hour.
    rounds_per_hour: int
    summary_calls_per_hour: int
    #: The answer models the tenant may choose, each with its price (so its usage is
    #: never priced null).
    models: dict[str, ModelPrice]
    #: 0 (no thinking) or 1,024-8,000.
    max_thinking_budget_tokens: int
    max_compaction_threshold_tokens: int
    max_transcript_retention_days: int
    max_fact_retention_days: int
    max_webhook_tools: int
    fair_share: FairShare
    whatsapp: NumberLimits


class PolicyInForce(TypedDict):
    """The policy in force: the deployment's plan with the tenant's policy over it."""

    #: True: every round of the tenant is refused (403).
    suspended: bool
    #: The ceiling (and default) of `quota.rounds_per_hour`.
    rounds_per_hour: int
    #: The ceiling (and default) of `quota.summary_calls_per_hour`.
    summary_calls_per_hour: int
    #: The answer models the tenant may choose (null: any).
    models: list[str] | None
    #: The largest `thinking_budget_tokens` (0: no thinking).
    max_thinking_budget_tokens: int
    max_compaction_threshold_tokens: int
    max_transcript_retention_days: int
    max_fact_retention_days: int
    max_webhook_tools: int
    fair_share: FairShare
    whatsapp: NumberLimits


class PolicyView(TypedDict):
    """``PolicyView``."""

    tenant: str
    #: The stored policy item as stored (null: the tenant runs on the deployment's
    #: plan). Its schema: `TenantPolicy`.
    policy: None | JSON
    #: Send it back in `If-Match` to change this version (also the `ETag` header).
    etag: str
    #: Whether the stored policy reads; when not, every round of the tenant answers
    #: `tenant_config_invalid`.
    valid: bool
    problem: str | None
    in_force: PolicyInForce


class UsageTotals(TypedDict):
    """A tenant's usage over the days asked, added up."""

    rounds: int
    model_calls: int
    #: Summary and fact calls.
    summary_calls: int
    whatsapp_in: int
    whatsapp_out: int
    whatsapp_held: int
    #: At the tenant's prices; null when a model used has none.
    cost_usd: float | None


class TenantSummary(TypedDict):
    """``TenantSummary``."""

    tenant: str
    suspended: bool
    #: 0: the tenant runs on the deployment's plan.
    policy_version: int
    usage: UsageTotals


#: ``TenantList``.
TenantList = TypedDict("TenantList", {"from": "str", "to": "str", "tenants": "list[TenantSummary]", "next_cursor": "str | None"})


class HandoffRequest(TypedDict, total=False):
    """An empty body, or this object."""

    #: How long the person has the conversation.
    hours: int


#: Who has the contact's conversation.
HandoffState = TypedDict("HandoffState", {"contact": "str", "with": 'Literal["agent", "person"]', "handoff": "None | Handoff"})


class Handoff(TypedDict):
    """A person has the contact's WhatsApp conversation: the agent answers nothing
    until `until`.
    """

    #: `business_app`: the owner answered from the WhatsApp Business app; `operator`:
    #: `POST .../handoff`.
    by: Literal["business_app", "operator"]
    since: int
    #: When the agent answers again (Unix seconds).
    until: int


class DeliveryState(TypedDict):
    """Where a WhatsApp reply stands."""

    #: `accepted`: the Graph API took it; then as Meta reports it, forward only
    #: (`failed` is final).
    status: Literal["accepted", "sent", "delivered", "read", "failed"]
    #: The Graph API's error code of a failure.
    error_code: int | None
    updated_at: int


#: Every error type of the envelope (``components.schemas.Error``).
ERROR_TYPES: tuple[str, ...] = (
    "invalid_request",
    "unauthenticated",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "precondition_failed",
    "too_large",
    "unsupported_media_type",
    "idempotency_mismatch",
    "precondition_required",
    "rate_limited",
    "internal_error",
    "tenant_config_invalid",
    "model_error",
    "model_refused",
    "unavailable",
    "model_timeout",
)

#: ``x-degrau-retry``: how the clients try a call again (see its description in
#: the document).
RETRY_POLICY: JSON = {
    "max_retries": 3,
    "deadline_seconds": 60,
    "initial_backoff_seconds": 0.5,
    "max_backoff_seconds": 8,
    "jitter": "equal",
    "connection_errors": True,
    "error_types": {
        "invalid_request": False,
        "unauthenticated": False,
        "forbidden": False,
        "not_found": False,
        "method_not_allowed": False,
        "conflict": False,
        "precondition_failed": False,
        "too_large": False,
        "unsupported_media_type": False,
        "idempotency_mismatch": False,
        "precondition_required": False,
        "rate_limited": True,
        "internal_error": True,
        "tenant_config_invalid": False,
        "model_error": False,
        "model_refused": False,
        "unavailable": True,
        "model_timeout": True,
    },
    "statuses_without_envelope": [429, 500, 502, 503, 504],
}
