"""A client for degrau, conversation memory for LLM chat agents.

Agents that run their own loop read :meth:`DegrauClient.context`, call the model
with it, and commit the whole round with :meth:`DegrauClient.commit_round`.
:meth:`DegrauClient.stream_message` runs a round in degrau and yields its answer
as the model writes it (typed events: :class:`TextDelta`, :class:`ToolStarted`,
:class:`ToolFinished`, :class:`Restart`, :class:`Done`).
:class:`AsyncDegrauClient` is the same on asyncio (or trio). Operators list the
tenant's contacts, read and correct their facts, change the tenant configuration
and read its usage through the same clients (the ``Operate`` routes, which need
a scope: the token's, or ``scopes=`` on the local stack).
``degrau_client.langchain`` holds a LangChain chat message history backed by it
(the ``langchain`` extra; importing ``degrau_client`` does not need it).
"""

from importlib.metadata import PackageNotFoundError, version

from .aio import AsyncDegrauClient
from .client import DegrauClient
from .errors import (
    ERROR_CLASSES,
    ERROR_TYPES,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    Conflict,
    DegrauError,
    Forbidden,
    IdempotencyMismatch,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    ModelError,
    ModelRefused,
    ModelTimeout,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    RateLimited,
    TenantConfigInvalid,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
    error_from_body,
    error_from_response,
    retry_after_seconds,
)
from .models import (
    CacheCreation,
    ContactPage,
    ContactSummary,
    Context,
    FactDeleted,
    FactRevision,
    Message,
    ModelTokens,
    OperatorFact,
    Passage,
    RecordedRound,
    RoundSpan,
    SessionClosed,
    SessionRecord,
    SessionRecords,
    SetBy,
    TenantConfigView,
    Usage,
    UsageDay,
    UsageReport,
    message_from,
    usage_from,
)
from .signature import SignatureError, verify_signature
from .streaming import (
    Done,
    Restart,
    StreamEvent,
    StreamInterrupted,
    TextDelta,
    ToolFinished,
    ToolStarted,
)

try:
    # The one version is pyproject.toml's, as the installed package's metadata has it.
    __version__ = version("degrau-client")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "ERROR_CLASSES",
    "ERROR_TYPES",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncDegrauClient",
    "CacheCreation",
    "Conflict",
    "ContactPage",
    "ContactSummary",
    "Context",
    "DegrauClient",
    "DegrauError",
    "Done",
    "FactDeleted",
    "FactRevision",
    "Forbidden",
    "IdempotencyMismatch",
    "InternalError",
    "InvalidRequest",
    "Message",
    "MethodNotAllowed",
    "ModelError",
    "ModelRefused",
    "ModelTimeout",
    "ModelTokens",
    "NotFound",
    "OperatorFact",
    "Passage",
    "PreconditionFailed",
    "PreconditionRequired",
    "RateLimited",
    "RecordedRound",
    "Restart",
    "RoundSpan",
    "SessionClosed",
    "SessionRecord",
    "SessionRecords",
    "SetBy",
    "SignatureError",
    "StreamEvent",
    "StreamInterrupted",
    "TenantConfigInvalid",
    "TenantConfigView",
    "TextDelta",
    "TooLarge",
    "ToolFinished",
    "ToolStarted",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "Usage",
    "UsageDay",
    "UsageReport",
    "__version__",
    "error_from_body",
    "error_from_response",
    "message_from",
    "retry_after_seconds",
    "usage_from",
    "verify_signature",
]
