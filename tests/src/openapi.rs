//! The API keeps the promise its OpenAPI document makes: every answer the tests
//! receive from `ask` is checked against `docs/openapi.json` (the document the
//! function serves), errors included.
//!
//! [`check`] finds the operation by method and path template, the response by
//! status, and validates the body against that response's schema with an
//! independent JSON Schema validator (`jsonschema`, draft 2020-12: the dialect of
//! OpenAPI 3.1). A status the operation does not list, a body where the document
//! promises none, or a body its schema refuses fails the test that received it,
//! naming the operation, the status and where the body strays. A path or method
//! the document does not have (a test probing an unknown route) must be answered
//! with the error envelope (`Error`) and a 4xx.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

/// The document, parsed once.
fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        serde_json::from_str(ask::handler::OPENAPI).expect("docs/openapi.json is JSON")
    })
}

/// A validator for `schema`, whose `$ref`s point into the document's
/// `components`; compiled once per distinct schema.
fn validator(schema: &Value) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> = OnceLock::new();
    let key = schema.to_string();
    let mut cache = CACHE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(key)
        .or_insert_with(|| {
            let root = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "components": document()["components"],
                "allOf": [schema],
            });
            Arc::new(
                jsonschema::draft202012::new(&root).unwrap_or_else(|e| {
                    panic!("docs/openapi.json: a schema does not compile: {e}")
                }),
            )
        })
        .clone()
}

/// Whether the concrete `path` fits the document's `template` (`{name}` matches
/// one non-empty segment).
fn fits(template: &str, path: &str) -> bool {
    let (template, path): (Vec<&str>, Vec<&str>) =
        (template.split('/').collect(), path.split('/').collect());
    template.len() == path.len()
        && template.iter().zip(&path).all(|(t, p)| {
            if t.starts_with('{') && t.ends_with('}') {
                !p.is_empty()
            } else {
                t == p
            }
        })
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve(value: &Value) -> &Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(pointer) => document()
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("docs/openapi.json: dangling $ref {pointer}")),
        None => value,
    }
}

/// Every way `body` strays from `schema`, one line each (empty when it fits).
pub fn strays(schema: &Value, body: &Value) -> Vec<String> {
    validator(schema)
        .iter_errors(body)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect()
}

/// Checks one answer of `ask` to the request `method path` against the document;
/// panics (failing the test) when the document does not describe it.
pub fn check(method: &str, path: &str, status: u16, raw_body: &str) {
    let doc = document();
    let template = doc["paths"]
        .as_object()
        .expect("docs/openapi.json has paths")
        .keys()
        .find(|template| fits(template, path));
    let operation =
        template.and_then(|t| doc["paths"][t].get(method.to_ascii_lowercase().as_str()));
    let (name, schema) = match operation {
        Some(operation) => {
            let name = operation["operationId"].as_str().unwrap_or("?").to_owned();
            let Some(response) = operation["responses"].get(status.to_string().as_str()) else {
                panic!(
                    "docs/openapi.json: {name} ({method} {path}) answered {status}, a status \
                     the operation does not list; body: {raw_body}"
                );
            };
            if resolve(response)
                .pointer("/content/text~1event-stream")
                .is_some()
            {
                check_events(&name, raw_body);
                return;
            }
            if resolve(response).pointer("/content/text~1html").is_some() {
                // A page (the inspector): HTML the document does not describe further.
                assert!(
                    raw_body.trim_start().starts_with("<!doctype html>"),
                    "docs/openapi.json: {name} promises an HTML page: {raw_body}"
                );
                return;
            }
            let schema = resolve(response)
                .pointer("/content/application~1json/schema")
                .cloned();
            (name, schema)
        }
        None => {
            assert!(
                (400..500).contains(&status),
                "{method} {path} is not in docs/openapi.json, yet it was answered {status}"
            );
            (
                format!("{method} {path} (no such operation)"),
                Some(json!({"$ref": "#/components/schemas/Error"})),
            )
        }
    };
    let Some(schema) = schema else {
        assert!(
            raw_body.is_empty(),
            "docs/openapi.json: {name} answered {status} with a body where the document \
             promises none: {raw_body}"
        );
        return;
    };
    let body: Value = serde_json::from_str(raw_body).unwrap_or_else(|e| {
        panic!("{name} answered {status} with a body that is not JSON ({e}): {raw_body}")
    });
    let strays = strays(&schema, &body);
    assert!(
        strays.is_empty(),
        "docs/openapi.json: {name}'s {status} answer does not fit its schema:\n  {}\nbody: \
         {raw_body}",
        strays.join("\n  ")
    );
}

/// The schema each event of the streaming route carries as its data, by name
/// (`StreamEvent`'s description in the document).
fn event_schema(name: &str) -> Option<Value> {
    let component = match name {
        "delta" => "StreamDelta",
        "tool_started" => "StreamToolStarted",
        "tool_finished" => "StreamToolFinished",
        "restart" => "StreamRestart",
        "done" => "AskResponse",
        "error" => "StreamError",
        _ => return None,
    };
    Some(json!({"$ref": format!("#/components/schemas/{component}")}))
}

/// Server-Sent Events as the streaming route writes them: each event's data
/// fits its schema, comment lines aside, and the stream ends with exactly one
/// `done` or `error`.
fn check_events(name: &str, raw_body: &str) {
    let events = crate::streamed::parse_events(raw_body);
    for (event, data) in &events {
        let schema = event_schema(event)
            .unwrap_or_else(|| panic!("{name} sent an event the document does not name: {event}"));
        let strays = strays(&schema, data);
        assert!(
            strays.is_empty(),
            "docs/openapi.json: {name}'s `{event}` event does not fit its schema:\n  {}\ndata: {data}",
            strays.join("\n  ")
        );
    }
    let ends: Vec<&str> = events
        .iter()
        .map(|(event, _)| event.as_str())
        .filter(|event| ["done", "error"].contains(event))
        .collect();
    assert!(
        ends.len() == 1 && events.last().is_some_and(|(event, _)| event == ends[0]),
        "{name}'s stream must end with one `done` or `error`: {raw_body}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_the_document_describes_passes_and_one_it_does_not_fails() {
        check(
            "GET",
            "/v1/contacts/c-1/memory",
            404,
            r#"{"error": {"type": "not_found", "message": "no such contact"}}"#,
        );
        let wrong = std::panic::catch_unwind(|| {
            check(
                "GET",
                "/v1/contacts/c-1/memory",
                404,
                r#"{"error": {"kind": "not_found"}}"#,
            );
        });
        assert!(wrong.is_err(), "an error without its type must fail");
        let unlisted = std::panic::catch_unwind(|| {
            check("GET", "/v1/contacts/c-1/memory", 418, "");
        });
        assert!(
            unlisted.is_err(),
            "a status the operation does not list must fail"
        );
    }

    /// Every example of the document (request bodies, answers, errors) fits the
    /// schema it illustrates, so the document cannot show a shape it refuses.
    #[test]
    fn every_example_fits_its_schema() {
        let mut media = Vec::new();
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                if method == "parameters" {
                    continue;
                }
                let name = format!("{method} {path}");
                if let Some(body) = operation.pointer("/requestBody/content/application~1json") {
                    media.push((format!("{name} request"), body.clone()));
                }
                for (status, response) in operation["responses"].as_object().unwrap() {
                    if let Some(body) = resolve(response).pointer("/content/application~1json") {
                        media.push((format!("{name} {status}"), body.clone()));
                    }
                }
            }
        }
        let mut checked = 0;
        for (name, body) in &media {
            for (example, value) in body["examples"].as_object().into_iter().flatten() {
                let strays = strays(&body["schema"], &value["value"]);
                assert!(strays.is_empty(), "{name}: example {example}: {strays:?}");
                checked += 1;
            }
        }
        let operations = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().keys())
            .filter(|key| *key != "parameters")
            .count();
        assert!(
            checked >= operations,
            "{checked} examples for {operations} operations"
        );
    }

    #[test]
    fn templates_match_one_segment_per_parameter() {
        assert!(fits(
            "/v1/contacts/{contact}/memory",
            "/v1/contacts/a%2Fb/memory"
        ));
        assert!(!fits(
            "/v1/contacts/{contact}/memory",
            "/v1/contacts//memory"
        ));
        assert!(!fits("/v1/contacts/{contact}", "/v1/contacts/a/memory"));
    }
}
