//! Bedrock's `InvokeModel` body for Claude, made a Messages API body the way
//! Bedrock reads it, before the Messages API's checks.

use serde_json::Value;

use crate::error::ApiError;

/// The `anthropic_version` Bedrock's Claude models take in the body.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The fields of an `InvokeModel` body for Claude: the Messages API's, with
/// `anthropic_version` (and `anthropic_beta`) instead of `model`, and neither
/// `stream` (a separate operation) nor the first-party-only `service_tier` and
/// `metadata`.
const BEDROCK_FIELDS: &[&str] = &[
    "anthropic_version",
    "anthropic_beta",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "stop_sequences",
    "temperature",
    "top_k",
    "top_p",
];

/// An `InvokeModel` body made a Messages API body, the way Bedrock reads it:
/// `anthropic_version` required and `bedrock-2023-05-31`, no field Bedrock does not
/// know (`model` among them: the path names it), then the model from the path put
/// in. The rest is checked by [`super::parse_value`] as for the Messages API. The errors
/// are Bedrock's `ValidationException` texts.
pub fn from_bedrock(body: &[u8], model: &str) -> Result<Value, ApiError> {
    let malformed = |detail: &str| {
        ApiError::invalid(format!(
            "Malformed input request: {detail}, please reformat your input and try again."
        ))
    };
    let value: Value =
        serde_json::from_slice(body).map_err(|_| malformed("#: expected a JSON object"))?;
    let Value::Object(mut object) = value else {
        return Err(malformed("#: expected type: JSONObject"));
    };
    if let Some(extra) = object
        .keys()
        .find(|key| !BEDROCK_FIELDS.contains(&key.as_str()))
    {
        return Err(malformed(&format!(
            "#: extraneous key [{extra}] is not permitted"
        )));
    }
    match object.remove("anthropic_version") {
        None => return Err(malformed("#: required key [anthropic_version] not found")),
        Some(Value::String(version)) if version == BEDROCK_ANTHROPIC_VERSION => {}
        Some(_) => {
            return Err(malformed(&format!(
                "#/anthropic_version: expected {BEDROCK_ANTHROPIC_VERSION}"
            )));
        }
    }
    object.remove("anthropic_beta");
    object.insert("model".to_owned(), Value::String(model.to_owned()));
    Ok(Value::Object(object))
}
