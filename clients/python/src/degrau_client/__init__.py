"""A client for degrau, conversation memory for LLM chat agents.

Agents that run their own loop read :meth:`DegrauClient.context`, call the model
with it, and commit the whole round with :meth:`DegrauClient.commit_round`.
``degrau_client.langchain`` holds a LangChain chat message history backed by it.
"""

from .client import (
    Context,
    DegrauClient,
    Message,
    RecordedRound,
    RoundSpan,
    Usage,
    usage_from,
)
from .errors import (
    ERROR_CLASSES,
    Conflict,
    DegrauError,
    IdempotencyMismatch,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    ModelError,
    ModelRefused,
    ModelTimeout,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
    error_from_response,
)

__all__ = [
    "ERROR_CLASSES",
    "Conflict",
    "Context",
    "DegrauClient",
    "DegrauError",
    "IdempotencyMismatch",
    "InternalError",
    "InvalidRequest",
    "Message",
    "MethodNotAllowed",
    "ModelError",
    "ModelRefused",
    "ModelTimeout",
    "NotFound",
    "RateLimited",
    "RecordedRound",
    "RoundSpan",
    "TooLarge",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "Usage",
    "error_from_response",
    "usage_from",
]
