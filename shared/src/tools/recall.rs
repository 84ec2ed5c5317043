//! The built-in `recall` tool: the model searches the contact's earlier sessions
//! (their records, [`crate::plan::recall`]). A tenant turns it on by declaring `"recall"`
//! in its `tools`; a tenant without a `tools` list does not get it. The `ask`
//! service runs it (it reads the contact's records through the store); this module
//! holds what the model sees of it and how its result reads.

use serde_json::{Value, json};

use super::ToolOutput;
use crate::plan::recall::{SessionHit, TOOL_NAME, check_query, date_of};
use crate::plan::request::ToolDef;

/// What the model sees of the tool.
pub fn definition() -> ToolDef {
    ToolDef {
        name: TOOL_NAME.into(),
        description: "Search this customer's earlier conversations (closed sessions) for what \
                      was said, booked or promised: booking numbers, dates, professionals, \
                      complaints. Returns up to 3 earlier sessions with their dates and the \
                      passages that matched, best match first."
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

/// The query of a call's input, or the error the model reads.
pub fn query_of(input: &Value) -> Result<&str, String> {
    match input.get("query").and_then(Value::as_str).map(check_query) {
        Some(Ok(query)) => Ok(query),
        Some(Err(problem)) => Err(format!("`query`: {problem}")),
        None => Err("`query` (a string) is required".into()),
    }
}

/// The tool's answer: the sessions found, best first, each dated with its
/// passages; or a note that nothing was found (`had_sessions`: whether the
/// contact has earlier sessions at all).
pub fn output(found: &[SessionHit], had_sessions: bool) -> ToolOutput {
    if found.is_empty() {
        let note = match had_sessions {
            false => "this customer has no earlier session on record",
            true => "no earlier session mentions these words; try other words",
        };
        return ToolOutput::ok(json!({"sessions": [], "note": note}).to_string());
    }
    let sessions: Vec<Value> = found.iter().map(result).collect();
    ToolOutput::ok(json!({ "sessions": sessions }).to_string())
}

fn result(found: &SessionHit) -> Value {
    let record = &found.record;
    let mut value = json!({
        "session": record.session,
        "date": date_of(record.ended_at),
        "messages": record.messages,
        "ids": record.ids,
        "passages": found.passages,
    });
    if let Some(summary) = found.search_summary.as_ref().or(record.summary.as_ref()) {
        value["summary"] = json!(summary);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::recall::SessionRecord;
    use crate::plan::recall::passages::Passage;

    fn hit(session: u32, summary: Option<&str>) -> SessionHit {
        SessionHit {
            record: SessionRecord {
                session,
                ids: vec!["BK-77AA11".into()],
                messages: 6,
                ended_at: 1_773_446_400,
                ..SessionRecord::default()
            },
            score: Some(2.0),
            search_summary: summary.map(str::to_owned),
            passages: vec![Passage {
                date: "2026-03-14".into(),
                lines: vec!["customer: corte com o Bruno".into()],
            }],
        }
    }

    #[test]
    fn the_sessions_found_come_back_dated_with_their_passages() {
        let out = output(&[hit(2, Some("Booked BK-77AA11 with Bruno."))], true);
        assert!(!out.is_error);
        let value: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(value["sessions"][0]["session"], 2);
        assert_eq!(value["sessions"][0]["date"], "2026-03-14");
        assert_eq!(value["sessions"][0]["ids"][0], "BK-77AA11");
        assert_eq!(
            value["sessions"][0]["summary"],
            "Booked BK-77AA11 with Bruno."
        );
        assert_eq!(
            value["sessions"][0]["passages"][0]["lines"][0],
            "customer: corte com o Bruno"
        );
    }

    #[test]
    fn a_bad_query_is_an_error_the_model_reads_and_no_match_says_so() {
        assert!(query_of(&json!({})).is_err());
        assert!(query_of(&json!({"query": 7})).is_err());
        assert!(query_of(&json!({"query": " "})).is_err());
        assert_eq!(query_of(&json!({"query": "corte"})), Ok("corte"));
        let none = output(&[], true);
        assert!(!none.is_error && none.content.contains("no earlier session mentions"));
        let empty = output(&[], false);
        assert!(empty.content.contains("no earlier session on record"));
        assert_eq!(definition().name, "recall");
    }
}
