//! A small built-in scheduling demo: `list_free_slots` (a long result: a day's free
//! slots for three professionals) and `book_slot` (returns a confirmation id). It is
//! deterministic and stateless, so the local stack, the tests and the benchmarks can
//! run the whole tool path without any external system.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::ToolOutput;
use crate::plan::request::ToolDef;

const PROFESSIONALS: [&str; 3] = ["Ana", "Bruno", "Carla"];

/// The names of the built-in tools, in the order a tenant without a `tools` list
/// gets them.
pub const BUILT_IN_TOOLS: &[&str] = &["list_free_slots", "book_slot"];

/// The definition of the built-in tool `name`, if there is one.
pub fn definition(name: &str) -> Option<ToolDef> {
    match name {
        "list_free_slots" => Some(ToolDef {
            name: "list_free_slots".into(),
            description: "List the free 30-minute slots of one day, for every professional.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"day": {"type": "string", "description": "Day as YYYY-MM-DD"}},
                "required": ["day"]
            }),
        }),
        "book_slot" => Some(ToolDef {
            name: "book_slot".into(),
            description:
                "Book a free slot. Returns a confirmation id the customer can quote later.".into(),
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
        }),
        _ => None,
    }
}

/// Runs the built-in tool `name`; an unknown name or bad input is an error the
/// model reads. It answers at once, from memory.
pub fn run(name: &str, input: &Value) -> ToolOutput {
    match name {
        "list_free_slots" => list_free_slots(input),
        "book_slot" => book_slot(input),
        other => ToolOutput::error(format!("unknown tool `{other}`")),
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

    #[test]
    fn free_slots_are_a_long_deterministic_list() {
        let first = run("list_free_slots", &json!({"day": "2026-12-01"}));
        let again = run("list_free_slots", &json!({"day": "2026-12-01"}));
        assert!(!first.is_error);
        assert_eq!(first, again);
        let parsed: Value = serde_json::from_str(&first.content).unwrap();
        let slots = parsed["slots"].as_array().unwrap().len();
        assert!((30..60).contains(&slots), "{slots} slots");
        assert!(
            first.content.len() > 1500,
            "long enough to be worth pruning"
        );
        let other = run("list_free_slots", &json!({"day": "2026-12-02"}));
        assert_ne!(first.content, other.content);
    }

    #[test]
    fn booking_returns_a_stable_confirmation_id() {
        let input = json!({"day": "2026-12-01", "time": "10:30", "service": "haircut"});
        let booked = run("book_slot", &input);
        let parsed: Value = serde_json::from_str(&booked.content).unwrap();
        let id = parsed["confirmation_id"].as_str().unwrap();
        assert!(id.starts_with("BK-") && id.len() == 11, "{id}");
        assert_eq!(run("book_slot", &input), booked);
    }

    #[test]
    fn bad_input_and_unknown_tools_are_errors_the_model_can_read() {
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
            let out = run(name, &input);
            assert!(out.is_error, "{name} {input}");
        }
    }

    #[test]
    fn every_built_in_name_has_a_definition_of_that_name() {
        for name in BUILT_IN_TOOLS {
            assert_eq!(definition(name).unwrap().name, *name);
        }
        assert!(definition("cancel_everything").is_none());
    }
}
