//! A JSON path as the API's messages start (`messages.2.content.0`), with the
//! checks that name it (required and unknown fields, types, `cache_control`), and
//! the reading of an optional field.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::wire::Ttl;

/// A JSON path, as the API's messages start (`messages.2.content.0`), and the
/// checks that name it.
#[derive(Debug, Clone)]
pub(super) struct Path(String);

impl Path {
    pub(super) fn root() -> Self {
        Path(String::new())
    }

    pub(super) fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    pub(super) fn index(&self, index: usize) -> Self {
        self.field(&index.to_string())
    }

    pub(super) fn invalid(&self, problem: &str) -> ApiError {
        ApiError::invalid(format!("{}: {problem}", self.0))
    }

    /// Refuses an absent field.
    pub(super) fn required(
        &self,
        object: &Map<String, Value>,
        field: &str,
    ) -> Result<(), ApiError> {
        if object.contains_key(field) {
            Ok(())
        } else {
            Err(self.field(field).invalid("Field required"))
        }
    }

    /// Refuses a field the API does not know (the first, in key order).
    pub(super) fn only(&self, object: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
        match object.keys().find(|key| !known.contains(&key.as_str())) {
            Some(extra) => Err(self.field(extra).invalid("Extra inputs are not permitted")),
            None => Ok(()),
        }
    }

    /// `value` as an object holding every `required` field and nothing outside
    /// `required` and `optional`.
    pub(super) fn fields<'a>(
        &self,
        value: &'a Value,
        required: &[&str],
        optional: &[&str],
    ) -> Result<&'a Map<String, Value>, ApiError> {
        let object = self.object(value)?;
        for field in required {
            self.required(object, field)?;
        }
        let known: Vec<&str> = required.iter().chain(optional).copied().collect();
        self.only(object, &known)?;
        Ok(object)
    }

    pub(super) fn object<'a>(&self, value: &'a Value) -> Result<&'a Map<String, Value>, ApiError> {
        value
            .as_object()
            .ok_or_else(|| self.invalid("Input should be a valid dictionary"))
    }

    pub(super) fn array<'a>(&self, value: &'a Value) -> Result<&'a Vec<Value>, ApiError> {
        value
            .as_array()
            .ok_or_else(|| self.invalid("Input should be a valid list"))
    }

    pub(super) fn string<'a>(&self, value: &'a Value) -> Result<&'a str, ApiError> {
        value
            .as_str()
            .ok_or_else(|| self.invalid("Input should be a valid string"))
    }

    pub(super) fn integer(&self, value: &Value) -> Result<u64, ApiError> {
        if value.as_i64().is_some_and(|n| n < 0) {
            return Err(self.invalid("Input should be greater than or equal to 0"));
        }
        value
            .as_u64()
            .ok_or_else(|| self.invalid("Input should be a valid integer"))
    }

    pub(super) fn boolean(&self, value: &Value) -> Result<bool, ApiError> {
        value
            .as_bool()
            .ok_or_else(|| self.invalid("Input should be a valid boolean"))
    }

    /// A block's `cache_control`, by its lifetime: `{"type": "ephemeral", "ttl"?}`
    /// with `ttl` `"5m"` (the default) or `"1h"`.
    pub(super) fn cache_control(
        &self,
        object: &Map<String, Value>,
    ) -> Result<Option<Ttl>, ApiError> {
        let Some(value) = object.get("cache_control").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let at = self.field("cache_control");
        let control = at.fields(value, &["type"], &["ttl"])?;
        if control["type"].as_str() != Some("ephemeral") {
            return Err(at.field("type").invalid("Input should be 'ephemeral'"));
        }
        match control.get("ttl") {
            None | Some(Value::Null) => Ok(Some(Ttl::FiveMinutes)),
            Some(ttl) => ttl
                .as_str()
                .and_then(Ttl::parse)
                .map(Some)
                .ok_or_else(|| at.field("ttl").invalid("Input should be '5m' or '1h'")),
        }
    }
}

/// A field that may be absent (or null), read by `read` when present.
pub(super) fn optional<T>(
    object: &Map<String, Value>,
    field: &str,
    read: impl FnOnce(&Value) -> Result<T, ApiError>,
) -> Result<Option<T>, ApiError> {
    object
        .get(field)
        .filter(|v| !v.is_null())
        .map(read)
        .transpose()
}
