//! The built-in `recall` tool: the model searches the contact's earlier sessions
//! (their records, [`crate::recall`]). A tenant turns it on by declaring `"recall"`
//! in its `tools`; a tenant without a `tools` list does not get it. The `ask`
//! service runs it (it reads the contact's records through the store); this module
//! holds what the model sees of it and how its result reads.

use serde_json::{Value, json};

use super::ToolOutput;
use crate::recall::{Ranked, SessionRecord, TOOL_NAME, TOOL_RESULTS, check_query, date_of, rank};
use crate::request::ToolDef;

/// What the model sees of the tool.
pub fn definition() -> ToolDef {
    ToolDef {
        name: TOOL_NAME.into(),
        description: "Search this customer's earlier conversations (closed sessions) for what \
                      was said, booked or promised: booking numbers, dates, professionals, \
                      complaints. Returns up to 3 earlier sessions with their dates, best \
                      match first."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Words to look for, in the customer's language: a booking number, a name, what happened"
                }
            },
            "required": ["query"]
        }),
    }
}

/// The tool's answer to `input` over the contact's `records`: the best
/// [`TOOL_RESULTS`] matches with their dates, or an error the model reads for a
/// bad query.
pub fn run(input: &Value, records: &[SessionRecord]) -> ToolOutput {
    let query = match input.get("query").and_then(Value::as_str).map(check_query) {
        Some(Ok(query)) => query,
        Some(Err(problem)) => return ToolOutput::error(format!("`query`: {problem}")),
        None => return ToolOutput::error("`query` (a string) is required"),
    };
    let found = rank(records, query, TOOL_RESULTS);
    if found.is_empty() {
        let note = match records.len() {
            0 => "this customer has no earlier session on record",
            _ => "no earlier session mentions these words; try other words",
        };
        return ToolOutput::ok(json!({"sessions": [], "note": note}).to_string());
    }
    let sessions: Vec<Value> = found.iter().map(result).collect();
    ToolOutput::ok(json!({ "sessions": sessions }).to_string())
}

fn result(found: &Ranked<'_>) -> Value {
    let record = found.record;
    let mut value = json!({
        "session": record.session,
        "date": date_of(record.ended_at),
        "messages": record.messages,
        "excerpt": record.excerpt,
        "ids": record.ids,
    });
    if let Some(summary) = &record.summary {
        value["summary"] = json!(summary);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<SessionRecord> {
        vec![
            SessionRecord {
                session: 2,
                excerpt: "customer: corte com o Bruno".into(),
                ids: vec!["BK-77AA11".into()],
                messages: 6,
                ended_at: 1_773_446_400,
                ..SessionRecord::default()
            },
            SessionRecord {
                session: 1,
                summary: Some("The customer asked about prices.".into()),
                messages: 2,
                ..SessionRecord::default()
            },
        ]
    }

    #[test]
    fn the_best_sessions_come_back_with_their_dates() {
        let out = run(&json!({"query": "BK-77AA11"}), &records());
        assert!(!out.is_error);
        let value: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(value["sessions"][0]["session"], 2);
        assert_eq!(value["sessions"][0]["date"], "2026-03-14");
        assert_eq!(value["sessions"][0]["ids"][0], "BK-77AA11");
        assert_eq!(value["sessions"].as_array().unwrap().len(), 1);
        let prices: Value =
            serde_json::from_str(&run(&json!({"query": "price"}), &records()).content).unwrap();
        assert_eq!(
            prices["sessions"][0]["summary"],
            "The customer asked about prices."
        );
    }

    #[test]
    fn a_bad_query_is_an_error_the_model_reads_and_no_match_says_so() {
        assert!(run(&json!({}), &records()).is_error);
        assert!(run(&json!({"query": 7}), &records()).is_error);
        assert!(run(&json!({"query": " "}), &records()).is_error);
        let none = run(&json!({"query": "futebol"}), &records());
        assert!(!none.is_error && none.content.contains("no earlier session mentions"));
        let empty = run(&json!({"query": "corte"}), &[]);
        assert!(empty.content.contains("no earlier session on record"));
        assert_eq!(definition().name, "recall");
    }
}
