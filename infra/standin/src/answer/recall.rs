//! The stand-in's side of degrau's `recall` tool: when a request defines `recall`
//! and the customer's text points back in time ("last time", "da última vez"), the
//! stand-in calls it with the text as its query; a `recall` result is read back as
//! the sessions and ids it found. Scripted, as the rest of the stand-in: the
//! retrieval itself is degrau's.

use serde_json::{Value, json};

/// The tool's name, as degrau declares it.
pub const RECALL: &str = "recall";

/// Words that make the stand-in call `recall` (whole words, any case).
pub const RECALL_WORDS: &[&str] = &[
    "remember", "earlier", "last", "previous", "lembra", "lembrar", "última", "ultima", "passada",
    "passado", "anterior",
];

/// The `recall` call a text asks for, if any.
pub(super) fn recall_call(text: &str) -> Option<Value> {
    let lower = text.to_lowercase();
    let asks = lower
        .split(|c: char| !c.is_alphanumeric())
        .any(|word| RECALL_WORDS.contains(&word));
    asks.then(|| json!({"query": text}))
}

/// "recall found session 1 (2026-03-14: BK-9F3A21C7)", or that it found none.
pub(super) fn describe(content: &str) -> Option<String> {
    let value: Value = serde_json::from_str(content).ok()?;
    let sessions = value.get("sessions")?.as_array()?;
    if sessions.is_empty() {
        return Some(format!("{RECALL} found no earlier session"));
    }
    let found: Vec<String> = sessions
        .iter()
        .map(|session| {
            let ids: Vec<&str> = session["ids"]
                .as_array()
                .map(|ids| ids.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!(
                "session {} ({}: {})",
                session["session"],
                session["date"].as_str().unwrap_or("?"),
                ids.join(", ")
            )
        })
        .collect();
    Some(format!("{RECALL} found {}", found.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_pointing_back_calls_recall_and_its_result_reads_back() {
        assert_eq!(
            recall_call("O mesmo da última vez?"),
            Some(json!({"query": "O mesmo da última vez?"}))
        );
        assert!(recall_call("Do you remember my booking?").is_some());
        assert_eq!(recall_call("bom dia"), None);
        let result =
            r#"{"sessions":[{"session":1,"date":"2026-03-14","ids":["BK-1","2026-03-20"]}]}"#;
        assert_eq!(
            describe(result).unwrap(),
            "recall found session 1 (2026-03-14: BK-1, 2026-03-20)"
        );
        assert_eq!(
            describe(r#"{"sessions":[],"note":"x"}"#).unwrap(),
            "recall found no earlier session"
        );
        assert_eq!(describe("not json"), None);
    }
}
