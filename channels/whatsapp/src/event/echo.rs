//! Echoes of the business's own app. On a number in Meta's "coexistence" (the
//! Cloud API and the WhatsApp Business app on one number), what a person of the
//! business sends a customer from the app is posted to the webhook under the field
//! `smb_message_echoes`:
//!
//! ```json
//! {"field": "smb_message_echoes", "value": {
//!    "messaging_product": "whatsapp",
//!    "metadata": {"display_phone_number": "15550000000", "phone_number_id": "100000000000001"},
//!    "message_echoes": [{"from": "15550000000", "to": "15550000001", "id": "wamid.E1",
//!                        "timestamp": "1800000000", "type": "text", "text": {"body": "Oi, aqui é o João"}}]}}
//! ```
//!
//! `from` is the business's number, `to` the customer. Each echo becomes an
//! [`Inbound`] of the customer's conversation written by the business
//! ([`Inbound::by_business`]): it is recorded and queued like a customer's message,
//! in the same order, and the worker makes it part of the transcript as the
//! business's answer, written by a person, and hands the conversation to them
//! ([`crate::handoff`]). Its content is read as a customer's is (text, or a note
//! such as `[image] caption`).

use serde::Deserialize;
use serde_json::Value;

use super::super::{PhoneNumberId, WaId, WaMessageId};
use super::{Delivery, Inbound, read_body, seconds};

/// The webhook field that carries echoes.
pub const ECHO_FIELD: &str = "smb_message_echoes";

#[derive(Deserialize)]
struct EchoesValue {
    metadata: Metadata,
    #[serde(default)]
    message_echoes: Vec<Value>,
}

#[derive(Deserialize)]
struct Metadata {
    phone_number_id: String,
}

#[derive(Deserialize)]
struct RawEcho {
    to: String,
    id: String,
    #[serde(default)]
    timestamp: Option<Value>,
}

/// Reads one `smb_message_echoes` change into `delivery`; answers how many items it
/// held (for the delivery's limit).
pub(super) fn read_echoes(delivery: &mut Delivery, value: Value) -> usize {
    let Ok(value) = serde_json::from_value::<EchoesValue>(value) else {
        delivery.refused.push("malformed_change");
        return 0;
    };
    let items = value.message_echoes.len();
    let Ok(phone) = PhoneNumberId::parse(&value.metadata.phone_number_id) else {
        delivery.refused.push("bad_phone_number_id");
        return items;
    };
    for echo in value.message_echoes {
        read_echo(delivery, &phone, echo);
    }
    items
}

fn read_echo(delivery: &mut Delivery, phone: &PhoneNumberId, echo: Value) {
    let Ok(raw) = serde_json::from_value::<RawEcho>(echo.clone()) else {
        delivery.refused.push("malformed_echo");
        return;
    };
    let Some(body) = read_body(delivery, &echo) else {
        return;
    };
    match (WaId::parse(&raw.to), WaMessageId::parse(&raw.id)) {
        (Ok(customer), Ok(id)) => delivery.inbound.push(Inbound {
            phone_number_id: phone.clone(),
            from: customer,
            id,
            body,
            sent_at: raw.timestamp.as_ref().and_then(seconds),
            by_business: true,
        }),
        (Err(_), _) => delivery.refused.push("bad_recipient"),
        (_, Err(_)) => delivery.refused.push("bad_message_id"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{Body, parse_delivery};
    use super::*;

    fn echoes(list: Value) -> Vec<u8> {
        json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [
            {"field": "smb_message_echoes", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550000000", "phone_number_id": "100000000000001"},
                "message_echoes": list}}]}]})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn an_echo_is_the_business_writing_in_the_customers_conversation() {
        let parsed = parse_delivery(&echoes(json!([
            {"from": "15550000000", "to": "15550000001", "id": "wamid.E1",
             "timestamp": "1800000000", "type": "text", "text": {"body": "Oi, aqui é o João"}},
            {"from": "15550000000", "to": "15550000001", "id": "wamid.E2",
             "type": "image", "image": {"id": "9", "caption": "o corte"}},
            {"from": "15550000000", "to": "+1555", "id": "wamid.E3", "type": "text", "text": {"body": "x"}},
            {"from": "15550000000", "to": "15550000001", "id": "wamid.E4", "type": "reaction",
             "reaction": {"message_id": "wamid.A", "emoji": "+"}}
        ])))
        .unwrap();
        assert_eq!(parsed.inbound.len(), 2);
        let first = &parsed.inbound[0];
        assert!(first.by_business);
        assert_eq!(
            first.from.as_str(),
            "15550000001",
            "the customer's conversation"
        );
        assert_eq!(first.body, Body::Text("Oi, aqui é o João".into()));
        assert_eq!(first.sent_at, Some(1_800_000_000));
        assert_eq!(parsed.inbound[1].body.turn_text(), "[image] o corte");
        assert_eq!(parsed.refused, ["bad_recipient"]);
        assert_eq!(parsed.ignored, ["reaction"]);
    }

    #[test]
    fn echoes_count_toward_the_deliverys_item_limit() {
        use super::super::{DeliveryError, MAX_ITEMS_PER_DELIVERY};
        let many: Vec<Value> = (0..=MAX_ITEMS_PER_DELIVERY)
            .map(|i| json!({"to": "1", "id": format!("e{i}"), "type": "text", "text": {"body": "x"}}))
            .collect();
        assert_eq!(
            parse_delivery(&echoes(Value::Array(many))),
            Err(DeliveryError::TooLarge(MAX_ITEMS_PER_DELIVERY + 1))
        );
    }

    #[test]
    fn a_malformed_echo_change_is_refused_alone() {
        let body = json!({"object": "whatsapp_business_account", "entry": [{"changes": [
            {"field": "smb_message_echoes", "value": {"message_echoes": []}}]}]});
        let parsed = parse_delivery(body.to_string().as_bytes()).unwrap();
        assert_eq!(parsed.refused, ["malformed_change"]);
    }
}
