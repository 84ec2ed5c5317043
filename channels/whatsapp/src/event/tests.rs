//! The payload's reading, checked on Meta's documented shapes.

use super::*;
use serde_json::json;

fn delivery(value: Value) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [
        {"field": "messages", "value": value}]}]})
}

fn messages(list: Value) -> Value {
    delivery(json!({
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550000000", "phone_number_id": "100000000000001"},
        "contacts": [{"profile": {"name": "Test"}, "wa_id": "15550000001"}],
        "messages": list
    }))
}

fn parse(value: Value) -> Delivery {
    parse_delivery(value.to_string().as_bytes()).unwrap()
}

#[test]
fn text_and_media_become_turn_text_and_reactions_nothing() {
    let parsed = parse(messages(json!([
        {"from": "15550000001", "id": "wamid.A", "timestamp": "1", "type": "text", "text": {"body": "oi"}},
        {"from": "15550000001", "id": "wamid.B", "type": "audio", "audio": {"id": "9", "mime_type": "audio/ogg"}},
        {"from": "15550000001", "id": "wamid.C", "type": "image", "image": {"id": "9", "caption": "meu cabelo"}},
        {"from": "15550000001", "id": "wamid.D", "type": "location", "location": {"latitude": 1.5, "longitude": 2.5}},
        {"from": "15550000001", "id": "wamid.E", "type": "reaction", "reaction": {"message_id": "x", "emoji": "+"}},
        {"from": "15550000001", "id": "wamid.F", "type": "interactive", "interactive": {"type": "button_reply", "button_reply": {"id": "b", "title": "Sim"}}},
        {"from": "15550000001", "id": "wamid.G", "type": "holographic"}
    ])));
    let texts: Vec<String> = parsed.inbound.iter().map(|m| m.body.turn_text()).collect();
    assert_eq!(
        texts,
        [
            "oi",
            "[audio]",
            "[image] meu cabelo",
            "[location]",
            "Sim",
            "[unsupported]"
        ]
    );
    assert!(
        !texts.iter().any(|t| t.contains("1.5")),
        "no coordinates kept"
    );
    assert_eq!(parsed.ignored, ["reaction"]);
    assert!(parsed.inbound[1].body.is_bare_note());
    assert!(
        matches!(&parsed.inbound[1].body, Body::Audio(a) if a.media_id.as_str() == "9" && a.mime == "audio/ogg")
    );
    assert!(!parsed.inbound[2].body.is_bare_note());
    assert_eq!(
        parsed.inbound[0].phone_number_id.as_str(),
        "100000000000001"
    );
    assert_eq!(
        parsed.inbound[0].sent_at,
        Some(1),
        "Meta's string timestamp"
    );
    assert_eq!(parsed.inbound[1].sent_at, None, "none given");
}

#[test]
fn a_timestamp_is_read_as_a_string_or_a_number_and_anything_else_is_none() {
    let parsed = parse(messages(json!([
        {"from": "1", "id": "m1", "timestamp": "1800000000", "type": "text", "text": {"body": "a"}},
        {"from": "1", "id": "m2", "timestamp": 1800000001, "type": "text", "text": {"body": "b"}},
        {"from": "1", "id": "m3", "timestamp": "soon", "type": "text", "text": {"body": "c"}}
    ])));
    let sent: Vec<Option<i64>> = parsed.inbound.iter().map(|m| m.sent_at).collect();
    assert_eq!(sent, [Some(1_800_000_000), Some(1_800_000_001), None]);
}

#[test]
fn statuses_are_read_without_the_recipient() {
    let parsed = parse(delivery(json!({
        "metadata": {"phone_number_id": "100000000000001"},
        "statuses": [
            {"id": "wamid.X", "status": "delivered", "recipient_id": "15550000001"},
            {"id": "wamid.Y", "status": "failed", "recipient_id": "15550000001",
             "errors": [{"code": 131047, "title": "Re-engagement message"}]}
        ]
    })));
    assert_eq!(parsed.statuses.len(), 2);
    assert_eq!(parsed.statuses[1].status, "failed");
    assert_eq!(parsed.statuses[1].error_codes, [131047]);
    assert_eq!(
        parsed.statuses[1].id.as_ref().map(WaMessageId::as_str),
        Some("wamid.Y")
    );
    assert_eq!(
        parsed.statuses[1].recipient.as_ref().map(WaId::as_str),
        Some("15550000001")
    );
    assert!(!format!("{:?}", parsed.statuses[1]).contains("1555"));
    assert!(parsed.inbound.is_empty());
}

#[test]
fn a_bad_message_is_refused_alone_and_a_bad_body_whole() {
    let parsed = parse(messages(json!([
        {"from": "+1555", "id": "wamid.A", "type": "text", "text": {"body": "x"}},
        {"from": "15550000001", "id": "wamid#A", "type": "text", "text": {"body": "x"}},
        {"from": "15550000001", "id": "wamid.B", "type": "text", "text": {"body": "ok"}}
    ])));
    assert_eq!(parsed.refused, ["bad_sender", "bad_message_id"]);
    assert_eq!(parsed.inbound.len(), 1);
    for body in [
        b"not json".to_vec(),
        br#"{"object": "page", "entry": []}"#.to_vec(),
    ] {
        assert!(matches!(
            parse_delivery(&body),
            Err(DeliveryError::Malformed(_))
        ));
    }
    let many: Vec<Value> = (0..=MAX_ITEMS_PER_DELIVERY)
        .map(|i| json!({"from": "1", "id": format!("m{i}"), "type": "text", "text": {"body": "x"}}))
        .collect();
    assert_eq!(
        parse_delivery(messages(Value::Array(many)).to_string().as_bytes()),
        Err(DeliveryError::TooLarge(MAX_ITEMS_PER_DELIVERY + 1))
    );
    let other = parse(
        json!({"object": "whatsapp_business_account", "entry": [{"changes": [
        {"field": "message_template_status_update", "value": {}}]}]}),
    );
    assert_eq!(other.ignored, ["field:message_template_status_update"]);
}

#[test]
fn a_text_past_the_limit_is_cut_and_an_empty_one_is_a_note() {
    let long = "a".repeat(MAX_INBOUND_CHARS + 10);
    let parsed = parse(messages(json!([
        {"from": "1", "id": "m1", "type": "text", "text": {"body": long}},
        {"from": "1", "id": "m2", "type": "text", "text": {"body": "  "}}
    ])));
    assert_eq!(
        parsed.inbound[0].body.turn_text().chars().count(),
        MAX_INBOUND_CHARS
    );
    assert_eq!(parsed.inbound[1].body.turn_text(), "[empty]");
}
