//! Errors in the Messages API's shape: `{"type":"error","error":{"type","message"},
//! "request_id"}` with a `request-id` header; or, on Bedrock's route, in Bedrock
//! Runtime's shape: `{"message"}` with the exception's name in `x-amzn-ErrorType`.
//! The HTTP status and headers of every error are chosen in exactly one place per
//! shape, [`ApiError::into_response`] and [`ApiError::into_bedrock_response`].

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// An error answer of the stand-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status (529 included).
    pub status: u16,
    /// `error.type`, e.g. `invalid_request_error`.
    pub kind: String,
    /// `error.message`.
    pub message: String,
    /// `retry-after` header, in seconds.
    pub retry_after: Option<u64>,
    /// `retry-after-ms` header (read by the official SDKs before `retry-after`).
    pub retry_after_ms: Option<u64>,
    /// `x-should-retry` header.
    pub should_retry: Option<bool>,
    /// `error.details.error_code` (e.g. `enforced_spend_limit_reached`).
    pub error_code: Option<String>,
}

/// The API's error type for a status.
pub fn kind_for_status(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        s if s >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

impl ApiError {
    /// An error of the given status, its type the API's usual one.
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind: kind_for_status(status).to_owned(),
            message: message.into(),
            retry_after: None,
            retry_after_ms: None,
            should_retry: None,
            error_code: None,
        }
    }

    /// 400 `invalid_request_error`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    /// The `error` object of the envelope.
    pub fn error_object(&self) -> Value {
        let mut error = json!({"type": self.kind, "message": self.message});
        if let Some(code) = &self.error_code {
            error["details"] = json!({"error_code": code});
        }
        error
    }

    /// The whole envelope.
    pub fn envelope(&self, request_id: &str) -> Value {
        json!({"type": "error", "error": self.error_object(), "request_id": request_id})
    }

    /// The HTTP answer: status, envelope and headers.
    pub fn into_response(self, request_id: &str) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(self.envelope(request_id))).into_response();
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(request_id) {
            headers.insert("request-id", value);
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(ms) = self.retry_after_ms {
            headers.insert("retry-after-ms", HeaderValue::from(ms));
        }
        if let Some(retry) = self.should_retry {
            headers.insert(
                "x-should-retry",
                HeaderValue::from_static(if retry { "true" } else { "false" }),
            );
        }
        response
    }
}

/// Bedrock Runtime's exception for an error of the Messages API's shape, and the
/// status Bedrock answers it with. A `kind` that already is an exception's name
/// (an injected fault's `type`, e.g. `ModelNotReadyException`) is kept, with the
/// status the fault gave.
pub fn bedrock_exception(status: u16, kind: &str) -> (u16, String) {
    if kind.ends_with("Exception") {
        return (status, kind.to_owned());
    }
    let (status, name) = match status {
        400 | 413 | 422 => (400, "ValidationException"),
        401 => (403, "UnrecognizedClientException"),
        403 => (403, "AccessDeniedException"),
        404 => (404, "ResourceNotFoundException"),
        408 | 504 => (408, "ModelTimeoutException"),
        429 => (429, "ThrottlingException"),
        503 | 529 => (503, "ServiceUnavailableException"),
        s if s >= 500 => (500, "InternalServerException"),
        _ => (400, "ValidationException"),
    };
    (status, name.to_owned())
}

impl ApiError {
    /// The body Bedrock Runtime answers: `{"message"}`.
    pub fn bedrock_body(&self) -> Value {
        json!({"message": self.message})
    }

    /// The HTTP answer in Bedrock Runtime's shape: the mapped status, `{"message"}`,
    /// `x-amzn-ErrorType` (with the service's suffix, as AWS sends it; the SDKs read
    /// the part before the colon) and `x-amzn-RequestId`. Bedrock has no
    /// `retry-after`; the other retry headers are not sent either.
    pub fn into_bedrock_response(self, request_id: &str) -> Response {
        let (status, exception) = bedrock_exception(self.status, &self.kind);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, axum::Json(self.bedrock_body())).into_response();
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&format!(
            "{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        )) {
            headers.insert("x-amzn-errortype", value);
        }
        if let Ok(value) = HeaderValue::from_str(request_id) {
            headers.insert("x-amzn-requestid", value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_has_the_api_shape() {
        let mut error = ApiError::new(429, "slow down");
        error.error_code = Some("enforced_spend_limit_reached".into());
        assert_eq!(
            error.envelope("req_standin_3"),
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down",
                "details": {"error_code": "enforced_spend_limit_reached"}}, "request_id": "req_standin_3"})
        );
        assert_eq!(kind_for_status(529), "overloaded_error");
        assert_eq!(kind_for_status(502), "api_error");
        assert_eq!(kind_for_status(401), "authentication_error");
    }

    #[test]
    fn the_response_carries_status_and_retry_headers() {
        let mut error = ApiError::new(529, "Overloaded");
        error.retry_after = Some(2);
        error.retry_after_ms = Some(1500);
        error.should_retry = Some(false);
        let response = error.into_response("req_standin_1");
        assert_eq!(response.status().as_u16(), 529);
        assert_eq!(response.headers()["request-id"], "req_standin_1");
        assert_eq!(response.headers()["retry-after"], "2");
        assert_eq!(response.headers()["retry-after-ms"], "1500");
        assert_eq!(response.headers()["x-should-retry"], "false");
    }

    #[test]
    fn bedrock_errors_carry_the_exception_name_and_a_bare_message() {
        assert_eq!(
            bedrock_exception(429, "rate_limit_error"),
            (429, "ThrottlingException".to_owned())
        );
        assert_eq!(
            bedrock_exception(529, "overloaded_error"),
            (503, "ServiceUnavailableException".to_owned())
        );
        assert_eq!(
            bedrock_exception(504, "timeout_error"),
            (408, "ModelTimeoutException".to_owned())
        );
        assert_eq!(
            bedrock_exception(429, "ModelNotReadyException"),
            (429, "ModelNotReadyException".to_owned())
        );
        let response = ApiError::invalid("prompt is too long: 9 tokens > 8 maximum")
            .into_bedrock_response("req_standin_2");
        assert_eq!(response.status().as_u16(), 400);
        assert!(
            response.headers()["x-amzn-errortype"]
                .to_str()
                .unwrap()
                .starts_with("ValidationException:")
        );
        assert_eq!(response.headers()["x-amzn-requestid"], "req_standin_2");
        assert!(response.headers().get("request-id").is_none());
    }
}
