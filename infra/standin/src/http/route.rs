//! Which API a call came in through, and the error envelope each one answers with.

use axum::response::Response;
use serde_json::Value;

use crate::error::ApiError;

/// Which API a call came in through: the answer is the same, its envelope differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// `POST /v1/messages`, the Messages API.
    Messages,
    /// `POST /model/{modelId}/invoke`, Bedrock Runtime's `InvokeModel`: the model is
    /// the path's (decoded), the body has none; or, when `stream`,
    /// `…/invoke-with-response-stream` (`InvokeModelWithResponseStream`).
    Bedrock {
        /// The model id or inference profile from the path.
        model: String,
        /// The streaming operation.
        stream: bool,
    },
}

impl Route {
    /// Whether the call came in through Bedrock Runtime's routes.
    pub(super) fn is_bedrock(&self) -> bool {
        matches!(self, Route::Bedrock { .. })
    }

    /// `error` in the route's envelope: the API's JSON error, or Bedrock's
    /// `{"message"}` with `x-amzn-ErrorType`.
    pub(super) fn error_response(&self, error: ApiError, request_id: &str) -> Response {
        match self {
            Route::Messages => error.into_response(request_id),
            Route::Bedrock { .. } => error.into_bedrock_response(request_id),
        }
    }

    /// The body of [`Route::error_response`], for the log.
    pub(super) fn error_body(&self, error: &ApiError, request_id: &str) -> Value {
        match self {
            Route::Messages => error.envelope(request_id),
            Route::Bedrock { .. } => error.bedrock_body(),
        }
    }
}
