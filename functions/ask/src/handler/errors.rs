//! The error envelope's types, each with its one HTTP status; the HTTP error a
//! route answers ([`HttpError`]); and the one place a service error becomes one
//! ([`from_service`]).

use degrau::converse::AskError;
use degrau::model::ModelError;
use degrau::store::StoreError;
use tracing::{error, warn};

/// The type of an error envelope, each with its one status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// 400: the request is malformed or breaks a rule.
    InvalidRequest,
    /// 401: no tenant.
    Unauthenticated,
    /// 403: the token lacks the route's scope.
    Forbidden,
    /// 404: no such route, or nothing known about the contact.
    NotFound,
    /// 405: the route does not answer this method.
    MethodNotAllowed,
    /// 409: a race lost, a stale head, or an idempotency key in progress.
    Conflict,
    /// 412: `If-Match` names a version no longer stored.
    PreconditionFailed,
    /// 413: over a documented limit.
    TooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 422: an idempotency key used with another body.
    IdempotencyMismatch,
    /// 428: a change that needs `If-Match` came without it.
    PreconditionRequired,
    /// 429: the model is rate limiting, or the tenant's quota for the hour is spent.
    RateLimited,
    /// 500: a bug.
    InternalError,
    /// 500: the tenant's stored configuration does not read or cannot be honoured.
    TenantConfigInvalid,
    /// 502: the model failed.
    ModelError,
    /// 502: the model declined to answer.
    ModelRefused,
    /// 503: storage is throttled.
    Unavailable,
    /// 504: the model did not answer in time.
    ModelTimeout,
}

impl ErrorType {
    /// Every type, in status order.
    pub const ALL: [ErrorType; 18] = [
        ErrorType::InvalidRequest,
        ErrorType::Unauthenticated,
        ErrorType::Forbidden,
        ErrorType::NotFound,
        ErrorType::MethodNotAllowed,
        ErrorType::Conflict,
        ErrorType::PreconditionFailed,
        ErrorType::TooLarge,
        ErrorType::UnsupportedMediaType,
        ErrorType::IdempotencyMismatch,
        ErrorType::PreconditionRequired,
        ErrorType::RateLimited,
        ErrorType::InternalError,
        ErrorType::TenantConfigInvalid,
        ErrorType::ModelError,
        ErrorType::ModelRefused,
        ErrorType::Unavailable,
        ErrorType::ModelTimeout,
    ];

    /// The `type` of the envelope.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::InvalidRequest => "invalid_request",
            ErrorType::Unauthenticated => "unauthenticated",
            ErrorType::Forbidden => "forbidden",
            ErrorType::PreconditionFailed => "precondition_failed",
            ErrorType::PreconditionRequired => "precondition_required",
            ErrorType::TenantConfigInvalid => "tenant_config_invalid",
            ErrorType::NotFound => "not_found",
            ErrorType::MethodNotAllowed => "method_not_allowed",
            ErrorType::Conflict => "conflict",
            ErrorType::TooLarge => "too_large",
            ErrorType::UnsupportedMediaType => "unsupported_media_type",
            ErrorType::IdempotencyMismatch => "idempotency_mismatch",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::InternalError => "internal_error",
            ErrorType::ModelError => "model_error",
            ErrorType::ModelRefused => "model_refused",
            ErrorType::Unavailable => "unavailable",
            ErrorType::ModelTimeout => "model_timeout",
        }
    }

    /// The HTTP status.
    pub fn status(self) -> u16 {
        match self {
            ErrorType::InvalidRequest => 400,
            ErrorType::Unauthenticated => 401,
            ErrorType::Forbidden => 403,
            ErrorType::PreconditionFailed => 412,
            ErrorType::PreconditionRequired => 428,
            ErrorType::NotFound => 404,
            ErrorType::MethodNotAllowed => 405,
            ErrorType::Conflict => 409,
            ErrorType::TooLarge => 413,
            ErrorType::UnsupportedMediaType => 415,
            ErrorType::IdempotencyMismatch => 422,
            ErrorType::RateLimited => 429,
            ErrorType::InternalError | ErrorType::TenantConfigInvalid => 500,
            ErrorType::ModelError | ErrorType::ModelRefused => 502,
            ErrorType::Unavailable => 503,
            ErrorType::ModelTimeout => 504,
        }
    }
}

/// An HTTP error: status, type and message, rendered as the error envelope.
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: u16,
    pub(crate) kind: &'static str,
    pub(crate) message: String,
    pub(crate) retry_after: Option<u64>,
}

impl HttpError {
    pub(crate) fn new(kind: ErrorType, message: impl Into<String>) -> Self {
        HttpError {
            status: kind.status(),
            kind: kind.as_str(),
            message: message.into(),
            retry_after: None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorType::InvalidRequest, message)
    }
}

/// The status and envelope type a service error is answered with (what the OpenAPI
/// test enumerates).
pub fn service_error_type(error: AskError) -> (u16, &'static str) {
    let error = from_service(error);
    (error.status, error.kind)
}

/// The one place a service error becomes an HTTP status.
pub(crate) fn from_service(error: AskError) -> HttpError {
    match error {
        AskError::InvalidRequest(message) => HttpError::invalid(message),
        AskError::TooLarge(message) => HttpError::new(ErrorType::TooLarge, message),
        AskError::NotFound(message) => HttpError::new(ErrorType::NotFound, message),
        AskError::Conflict(message) => HttpError::new(ErrorType::Conflict, message),
        error @ AskError::InProgress => HttpError::new(ErrorType::Conflict, error.to_string()),
        AskError::Forbidden(message) => HttpError::new(ErrorType::Forbidden, message),
        error @ AskError::Suspended => HttpError::new(ErrorType::Forbidden, error.to_string()),
        AskError::PreconditionFailed(message) => {
            HttpError::new(ErrorType::PreconditionFailed, message)
        }
        error @ AskError::TenantConfig(_) => {
            HttpError::new(ErrorType::TenantConfigInvalid, error.to_string())
        }
        error @ AskError::BrokenWindow(_) => {
            warn!(%error, "window read broken");
            HttpError::new(
                ErrorType::Conflict,
                "the conversation was being written while it was read; nothing was stored, send \
                 it again",
            )
        }
        error @ AskError::Indeterminate => {
            warn!("commit outcome not known");
            HttpError {
                retry_after: Some(1),
                ..HttpError::new(ErrorType::Unavailable, error.to_string())
            }
        }
        error @ AskError::IdempotencyMismatch => {
            HttpError::new(ErrorType::IdempotencyMismatch, error.to_string())
        }
        AskError::Throttled(throttle) => HttpError {
            retry_after: Some(throttle.retry_after),
            ..HttpError::new(ErrorType::RateLimited, throttle.to_string())
        },
        error @ AskError::QuotaExceeded(exhausted) => HttpError {
            retry_after: Some(exhausted.retry_after),
            ..HttpError::new(ErrorType::RateLimited, error.to_string())
        },
        error @ AskError::Refused => HttpError::new(ErrorType::ModelRefused, error.to_string()),
        error @ (AskError::ToolLoop
        | AskError::EmptyAnswer
        | AskError::UnsendableRound(_)
        | AskError::TruncatedToolCall
        | AskError::UnexpectedStop(_)) => HttpError::new(ErrorType::ModelError, error.to_string()),
        AskError::Model(error) => from_model(error),
        AskError::Store(error) => from_store(error),
        error @ AskError::Internal(_) => {
            error!(%error, "internal error");
            HttpError::new(
                ErrorType::InternalError,
                "internal error; nothing was stored",
            )
        }
    }
}

/// A model error's status: the model's rate limit (429 with its `Retry-After`), its
/// timeout (504), anything else 502 `model_error`.
fn from_model(error: ModelError) -> HttpError {
    match error {
        ModelError::RateLimited { retry_after } => HttpError {
            retry_after: Some(retry_after.unwrap_or(10)),
            ..HttpError::new(
                ErrorType::RateLimited,
                "the model is rate limiting; nothing was stored, retry later",
            )
        },
        ModelError::Timeout => HttpError::new(
            ErrorType::ModelTimeout,
            "the model did not answer in time; nothing was stored",
        ),
        error => {
            warn!(%error, "model error");
            let message = match error {
                ModelError::Unavailable { .. } | ModelError::Connection(_) => {
                    "the model is unavailable; nothing was stored, retry later"
                }
                ModelError::PromptTooLong { .. } => {
                    "the conversation is too long for the model; nothing was stored"
                }
                _ => "the model call failed; nothing was stored",
            };
            HttpError::new(ErrorType::ModelError, message)
        }
    }
}

/// A storage error's status: the tenant's configuration that does not read (the
/// tenant's error), storage busy (503 with `Retry-After`), a race lost (409), and
/// anything else 500.
fn from_store(error: StoreError) -> HttpError {
    match error {
        StoreError::InvalidConfig(reason) => HttpError::new(
            ErrorType::TenantConfigInvalid,
            format!("the tenant's configuration is not usable: {reason}"),
        ),
        StoreError::Unavailable(detail) => {
            warn!(%detail, "storage unavailable");
            HttpError {
                retry_after: Some(1),
                ..HttpError::new(
                    ErrorType::Unavailable,
                    "storage is busy; nothing was stored, retry shortly",
                )
            }
        }
        StoreError::Conflict(_) => HttpError::new(
            ErrorType::Conflict,
            "another request for this contact changed it at the same time; retry",
        ),
        error => {
            error!(%error, "internal error");
            HttpError::new(
                ErrorType::InternalError,
                "internal error; nothing was stored",
            )
        }
    }
}
