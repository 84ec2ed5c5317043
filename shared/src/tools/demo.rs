//! A small built-in scheduling demo: `list_free_slots` (a long result: a day's free
//! slots for three professionals) and `book_slot` (returns a confirmation id). It is
//! deterministic and stateless, so the local stack, the tests and the benchmarks can
//! run the whole tool path without any external system.

use async_trait::async_trait;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{ToolOutput, Tools};
use crate::deadline::Deadline;
use crate::request::ToolDef;

const PROFESSIONALS: [&str; 3] = ["Ana", "Bruno", "Carla"];

/// The demo tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoTools;

impl DemoTools {
    fn all() -> Vec<ToolDef> {
        vec![
            ToolDef {
                name: "list_free_slots".into(),
                description: "List the free 30-minute slots of one day, for every professional."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"day": {"type": "string", "description": "Day as YYYY-MM-DD"}},
                    "required": ["day"]
                }),
            },
            ToolDef {
                name: "book_slot".into(),
                description:
                    "Book a free slot. Returns a confirmation id the customer can quote later."
                        .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "day": {"type": "string", "description": "Day as YYYY-MM-DD"},
                        "time": {"type": "string", "description": "Start time as HH:MM"},
                        "service": {"type": "string"},
                        "professional": {"type": "string"}
                    },
                    "required": ["day", "time", "service"]
                }),
            },
        ]
    }
}

#[async_trait]
impl Tools for DemoTools {
    fn definitions(&self, enabled: Option<&[String]>) -> Vec<ToolDef> {
        Self::all()
            .into_iter()
            .filter(|tool| enabled.is_none_or(|names| names.contains(&tool.name)))
            .collect()
    }

    // The demo answers at once, from memory: no deadline can bind.
    async fn call(&self, name: &str, input: &Value, _deadline: Deadline) -> ToolOutput {
        match name {
            "list_free_slots" => list_free_slots(input),
            "book_slot" => book_slot(input),
            other => ToolOutput::error(format!("unknown tool `{other}`")),
        }
    }
}

fn digest(parts: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.finalize().into()
}

fn valid_day(day: &str) -> bool {
    let bytes = day.as_bytes();
    bytes.len() == 10
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && day
            .chars()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && matches!(day[5..7].parse::<u8>(), Ok(1..=12))
        && matches!(day[8..10].parse::<u8>(), Ok(1..=31))
}

fn valid_time(time: &str) -> bool {
    let bytes = time.as_bytes();
    bytes.len() == 5
        && bytes[2] == b':'
        && matches!(time[0..2].parse::<u8>(), Ok(0..=23))
        && matches!(time[3..5].parse::<u8>(), Ok(0..=59))
}

fn string_field<'a>(input: &'a Value, field: &str) -> Option<&'a str> {
    input.get(field).and_then(Value::as_str)
}

fn list_free_slots(input: &Value) -> ToolOutput {
    let Some(day) = string_field(input, "day").filter(|d| valid_day(d)) else {
        return ToolOutput::error("`day` is required, as YYYY-MM-DD");
    };
    let busy = digest(&[day]);
    let mut slots = Vec::new();
    for (p, professional) in PROFESSIONALS.iter().enumerate() {
        for half_hour in 0..20u8 {
            // About a quarter of the slots are taken, the same ones every time.
            if busy[(p * 20 + usize::from(half_hour)) % 32].is_multiple_of(4) {
                continue;
            }
            let minutes = 9 * 60 + u32::from(half_hour) * 30;
            slots.push(json!({
                "time": format!("{:02}:{:02}", minutes / 60, minutes % 60),
                "professional": professional,
                "minutes": 30,
            }));
        }
    }
    ToolOutput::ok(json!({"day": day, "slots": slots}).to_string())
}

fn book_slot(input: &Value) -> ToolOutput {
    let day = string_field(input, "day").filter(|d| valid_day(d));
    let time = string_field(input, "time").filter(|t| valid_time(t));
    let service = string_field(input, "service").filter(|s| !s.trim().is_empty());
    let (Some(day), Some(time), Some(service)) = (day, time, service) else {
        return ToolOutput::error("`day` (YYYY-MM-DD), `time` (HH:MM) and `service` are required");
    };
    let professional = string_field(input, "professional").unwrap_or(PROFESSIONALS[0]);
    let id = hex::encode_upper(&digest(&[day, time, service, professional])[..4]);
    ToolOutput::ok(
        json!({
            "status": "confirmed",
            "confirmation_id": format!("BK-{id}"),
            "day": day,
            "time": time,
            "service": service,
            "professional": professional,
        })
        .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute() -> Deadline {
        Deadline::after(std::time::Duration::from_secs(60))
    }

    #[tokio::test]
    async fn free_slots_are_a_long_deterministic_list() {
        let first = DemoTools
            .call("list_free_slots", &json!({"day": "2026-12-01"}), minute())
            .await;
        let again = DemoTools
            .call("list_free_slots", &json!({"day": "2026-12-01"}), minute())
            .await;
        assert!(!first.is_error);
        assert_eq!(first, again);
        let parsed: Value = serde_json::from_str(&first.content).unwrap();
        let slots = parsed["slots"].as_array().unwrap().len();
        assert!((30..60).contains(&slots), "{slots} slots");
        assert!(
            first.content.len() > 1500,
            "long enough to be worth pruning"
        );
        let other = DemoTools
            .call("list_free_slots", &json!({"day": "2026-12-02"}), minute())
            .await;
        assert_ne!(first.content, other.content);
    }

    #[tokio::test]
    async fn booking_returns_a_stable_confirmation_id() {
        let input = json!({"day": "2026-12-01", "time": "10:30", "service": "haircut"});
        let booked = DemoTools.call("book_slot", &input, minute()).await;
        let parsed: Value = serde_json::from_str(&booked.content).unwrap();
        let id = parsed["confirmation_id"].as_str().unwrap();
        assert!(id.starts_with("BK-") && id.len() == 11, "{id}");
        assert_eq!(DemoTools.call("book_slot", &input, minute()).await, booked);
    }

    #[tokio::test]
    async fn bad_input_and_unknown_tools_are_errors_the_model_can_read() {
        for (name, input) in [
            ("list_free_slots", json!({})),
            ("list_free_slots", json!({"day": "2026-13-01"})),
            (
                "book_slot",
                json!({"day": "2026-12-01", "time": "25:00", "service": "x"}),
            ),
            ("book_slot", json!({"day": "2026-12-01", "time": "10:00"})),
            ("cancel_everything", json!({})),
        ] {
            let out = DemoTools.call(name, &input, minute()).await;
            assert!(out.is_error, "{name} {input}");
        }
    }

    #[test]
    fn definitions_follow_the_tenants_list_in_a_stable_order() {
        let names = |tools: Vec<ToolDef>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(
            names(DemoTools.definitions(None)),
            ["list_free_slots", "book_slot"]
        );
        assert_eq!(
            names(DemoTools.definitions(Some(&["book_slot".into()]))),
            ["book_slot"]
        );
        assert!(DemoTools.definitions(Some(&[])).is_empty());
    }
}
