//! The error envelope's types, each with its one HTTP status.

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
