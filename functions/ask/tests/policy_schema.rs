//! The OpenAPI document's `TenantPolicy` describes the policy item the parser
//! reads, and cannot drift from it: at every level (the policy, `fair_share`,
//! `whatsapp`, a model's price) its properties are exactly the fields the parser
//! accepts (serde names them all when it refuses an unknown one), its example
//! reads, and values the schema refuses the parser refuses too.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeSet;

use degrau::platform::StoredPolicy;
use serde_json::{Value, json};

const OPENAPI: &str = include_str!("../../../docs/openapi.json");

fn openapi() -> Value {
    serde_json::from_str(OPENAPI).unwrap()
}

fn read(policy: &Value) -> Result<(), String> {
    StoredPolicy {
        text: policy.to_string(),
        version: 1,
    }
    .read()
    .map(|_| ())
}

/// The fields the parser accepts where `probe` puts an unknown one.
fn parser_fields(probe: Value) -> BTreeSet<String> {
    let refusal = read(&probe).unwrap_err();
    let expected = refusal
        .split_once("expected one of ")
        .or_else(|| refusal.split_once("expected "))
        .unwrap_or_else(|| panic!("{refusal}"))
        .1;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn schema_fields(schema: &Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn at_every_level_the_policy_schema_lists_exactly_the_fields_the_parser_reads() {
    let doc = openapi();
    let schemas = &doc["components"]["schemas"];
    let probe = json!({"__probe__": 1});
    for (name, probe, described) in [
        ("the policy", probe.clone(), &schemas["TenantPolicy"]),
        (
            "fair_share",
            json!({"fair_share": probe}),
            &schemas["FairShare"],
        ),
        (
            "whatsapp",
            json!({"whatsapp": probe}),
            &schemas["NumberLimits"],
        ),
        (
            "a model's price",
            json!({"models": {"m": {"input": 1, "output": 2, "__probe__": 1}}}),
            &schemas["ModelPrice"],
        ),
    ] {
        assert_eq!(
            schema_fields(described),
            parser_fields(probe),
            "{name}: the schema's properties and the parser's fields"
        );
        assert_eq!(described["additionalProperties"], false, "{name} is closed");
    }
}

#[test]
fn the_example_reads_and_what_the_schema_refuses_the_parser_refuses() {
    let doc = openapi();
    let mut schema = doc["components"]["schemas"]["TenantPolicy"].clone();
    // The references resolve inside the document.
    schema["components"] = doc["components"].clone();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let example = &doc["paths"]["/v1/platform/tenants/{tenant}/policy"]["put"]["requestBody"]["content"]
        ["application/json"]["examples"]["policy"]["value"];
    assert!(validator.is_valid(example), "{example}");
    read(example).unwrap();
    for bad in [
        json!({"suspended": "yes"}),
        json!({"fair_share": {"concurrency": 0}}),
        json!({"whatsapp": {"new_senders_per_hour": 0}}),
        json!({"max_thinking_budget_tokens": 9000}),
        json!({"models": {}}),
        json!({"models": {"m": {"input": -1, "output": 1}}}),
        json!({"plan": "gold"}),
    ] {
        assert!(!validator.is_valid(&bad), "the schema refuses {bad}");
        assert!(read(&bad).is_err(), "the parser refuses {bad}");
    }
}
