//! `docs/tenant-config.schema.json` describes the `CONFIG` the parser reads, and
//! cannot drift from it: at every level (the config, `whatsapp`, its `template`,
//! `quota`, a webhook tool, its `webhook`) the schema's properties are exactly the
//! fields the parser accepts (serde names them all when it refuses an unknown one);
//! every example in the schema reads and validates; values the schema refuses the
//! parser refuses too; and the OpenAPI document's `TenantConfig` is this schema.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeSet;

use degrau::tenant::StoredConfig;
use serde_json::{Value, json};

const SCHEMA: &str = include_str!("../../../docs/tenant-config.schema.json");
const OPENAPI: &str = include_str!("../../../docs/openapi.json");

fn schema() -> Value {
    serde_json::from_str(SCHEMA).unwrap()
}

/// The config read as a write reads it: the core's fields, then the channels'
/// sections with the checks the function registers.
fn read(config: &Value) -> Result<(), String> {
    let config = StoredConfig {
        text: config.to_string(),
        version: 1,
    }
    .read()?;
    ask::handler::channel_checks().check(&config)
}

/// The fields the parser accepts where `probe` puts an unknown one, from its
/// refusal ("unknown field `__probe__`, expected one of `a`, `b`").
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
fn at_every_level_the_schema_lists_exactly_the_fields_the_parser_reads() {
    let schema = schema();
    let probe = json!({"__probe__": 1});
    let webhook_tool = &schema["properties"]["tools"]["items"]["oneOf"][1];
    let tool = |webhook: Value| json!({"tools": [{"name": "t", "description": "d", "input_schema": {"type": "object"}, "webhook": webhook}]});
    for (name, probe, described) in [
        ("the config", probe.clone(), &schema),
        (
            "whatsapp",
            json!({"whatsapp": probe}),
            &schema["properties"]["whatsapp"],
        ),
        (
            "whatsapp.template",
            json!({"whatsapp": {"template": probe}}),
            &schema["properties"]["whatsapp"]["properties"]["template"],
        ),
        (
            "quota",
            json!({"quota": probe}),
            &schema["properties"]["quota"],
        ),
        ("a webhook tool", json!({"tools": [probe]}), webhook_tool),
        (
            "its webhook",
            tool(probe.clone()),
            &webhook_tool["properties"]["webhook"],
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
fn every_example_reads_and_validates_and_what_the_schema_refuses_the_parser_refuses() {
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let examples = schema["examples"].as_array().unwrap();
    assert!(examples.len() >= 2);
    for example in examples {
        assert!(validator.is_valid(example), "{example}");
        read(example).unwrap_or_else(|e| panic!("{example}: {e}"));
    }
    for bad in [
        json!({"cache_ttl": "2h"}),
        json!({"thinking_budget_tokens": 100}),
        json!({"thinking_budget_tokens": 9000}),
        json!({"allowed_fact_keys": ["Bad Key"]}),
        json!({"tools": ["no_such_tool"]}),
        json!({"whatsapp": {"template": {"name": "Bad", "language": "pt_BR"}}}),
        json!({"whatsapp": {"media_reply": ""}}),
        json!({"session_idle_minutes": "soon"}),
        json!({"quota": {"rounds_per_hour": -1}}),
        json!({"colour": "red"}),
    ] {
        assert!(!validator.is_valid(&bad), "the schema refuses {bad}");
        assert!(read(&bad).is_err(), "the parser refuses {bad}");
    }
}

#[test]
fn the_openapi_documents_tenant_config_is_this_schema() {
    let mut file = schema();
    for key in ["$schema", "$id", "examples"] {
        file.as_object_mut().unwrap().remove(key);
    }
    let openapi: Value = serde_json::from_str(OPENAPI).unwrap();
    assert_eq!(openapi["components"]["schemas"]["TenantConfig"], file);
}
