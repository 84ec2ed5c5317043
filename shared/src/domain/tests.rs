use super::*;
use serde_json::json;

#[test]
fn blocks_serialise_exactly_as_the_messages_api_expects() {
    let message = Message {
        role: Role::Assistant,
        content: vec![
            ContentBlock::text("Let me check."),
            ContentBlock::tool_use("toolu_1", "list_free_slots", json!({"day": "2026-12-01"})),
        ],
    };
    assert_eq!(
        serde_json::to_value(&message).unwrap(),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "list_free_slots", "input": {"day": "2026-12-01"}}
        ]})
    );
    let results = Message {
        role: Role::User,
        content: vec![
            ContentBlock::tool_result("toolu_1", "[]"),
            ContentBlock::ToolResult {
                tool_use_id: "toolu_2".into(),
                content: "no such day".into(),
                is_error: true,
            },
        ],
    };
    assert_eq!(
        serde_json::to_value(&results).unwrap(),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such day", "is_error": true}
        ]})
    );
    let back: Message = serde_json::from_value(serde_json::to_value(&results).unwrap()).unwrap();
    assert_eq!(back, results);
    let thinking = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Check Friday first.", "signature": "EqQBCkgIARABGAIiQ"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "Let me check."}
    ]});
    let parsed: Message = serde_json::from_value(thinking.clone()).unwrap();
    assert_eq!(
        parsed.content[0],
        ContentBlock::Thinking {
            thinking: "Check Friday first.".into(),
            signature: "EqQBCkgIARABGAIiQ".into()
        }
    );
    assert!(parsed.content[1].is_thinking() && !parsed.content[2].is_thinking());
    assert_eq!(
        serde_json::to_value(&parsed).unwrap(),
        thinking,
        "unchanged"
    );
    assert_eq!(parsed.text(), "Let me check.");
}

#[test]
fn only_text_only_user_messages_can_start_a_window() {
    assert!(Message::user_text("hi").is_user_text_only());
    assert!(!Message::assistant_text("hi").is_user_text_only());
    let results = Message {
        role: Role::User,
        content: vec![
            ContentBlock::tool_result("t", "x"),
            ContentBlock::text("and"),
        ],
    };
    assert!(!results.is_user_text_only());
    let empty = Message {
        role: Role::User,
        content: vec![],
    };
    assert!(!empty.is_user_text_only());
}

#[test]
fn stored_messages_send_their_pruned_copy() {
    let mut stored = StoredMessage {
        session: 1,
        seq: 3,
        role: Role::User,
        content: vec![ContentBlock::tool_result("t", "long output")],
        pruned: None,
        usage: None,
        created_at: 0,
        written_by_person: false,
        transcribed: false,
    };
    assert_eq!(stored.to_message().content, stored.content);
    stored.pruned = Some(vec![ContentBlock::tool_result("t", "[omitted]")]);
    assert_eq!(stored.to_message().content, stored.pruned.clone().unwrap());
}

#[test]
fn contact_ids_accept_phones_emails_and_crm_ids() {
    for ok in [
        "+5511999990000",
        "ana@example.com",
        "crm:42",
        "a",
        &"x".repeat(128),
    ] {
        assert_eq!(ContactId::parse(ok).unwrap().as_str(), ok);
    }
}

#[test]
fn contact_ids_refuse_empty_long_and_key_separators() {
    assert!(
        ContactId::parse("")
            .unwrap_err()
            .to_string()
            .contains("must not be empty")
    );
    assert!(
        ContactId::parse(&"x".repeat(129))
            .unwrap_err()
            .to_string()
            .contains("at most 128")
    );
    for bad in ["a#b", "a/b", "a b", "ação", "a\u{0}b", "T#x#C#y"] {
        let err = ContactId::parse(bad).unwrap_err();
        assert_eq!(err.what, "contact id", "{bad}");
    }
}

#[test]
fn tenant_ids_cannot_forge_a_key_prefix() {
    assert!(TenantId::parse("acme-clinic_1.br").is_ok());
    assert!(TenantId::parse("acme#C#bob").is_err());
    assert!(TenantId::parse("").is_err());
    assert!(TenantId::parse(&"t".repeat(65)).is_err());
}

#[test]
fn idempotency_keys_are_visible_ascii() {
    assert!(IdempotencyKey::parse("7f9c2ba4-e88f-11ed-a05b-0242ac120003").is_ok());
    assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
    assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
    assert!(IdempotencyKey::parse("with space").is_err());
    assert!(IdempotencyKey::parse("ünïcode").is_err());
    assert!(IdempotencyKey::parse("").is_err());
}

#[test]
fn fact_keys_are_snake_case_starting_with_a_letter() {
    assert!(FactKey::parse("preferred_time").is_ok());
    assert!(FactKey::parse("pet2_name").is_ok());
    let err = FactKey::parse("2pets").unwrap_err();
    assert!(err.to_string().contains("start with a lowercase letter"));
    assert!(FactKey::parse("Preferred").is_err());
    assert!(FactKey::parse("a-b").is_err());
    assert!(FactKey::parse(&"k".repeat(65)).is_err());
}

#[test]
fn identifiers_deserialise_through_validation() {
    let ok: FactKey = serde_json::from_value(json!("language")).unwrap();
    assert_eq!(ok.as_str(), "language");
    assert!(serde_json::from_value::<FactKey>(json!("Not A Key")).is_err());
    assert!(serde_json::from_value::<ContactId>(json!("a#b")).is_err());
}

#[test]
fn head_round_trips_through_json() {
    let head = Head {
        session: 2,
        last_seq: 10,
        summarized_until: 4,
        summary: Some("The customer booked.".into()),
        last_context_tokens: 1200,
        last_activity: 1_700_000_000,
        steps: 1,
        facts_requested: Some(2),
        last_round: None,
        incarnation: Some(Incarnation::random()),
        facts_pending: Some(PendingFacts {
            session: 1,
            since: 1_700_000_000,
            attempts: 2,
        }),
        hard_cap_at: Some(4),
        expires_at: Some(1_800_000_000),
        recent_gaps: vec![30, 900, 72_000],
        cache_hour: true,
        client_round: true,
        born_at: Some(1_600_000_000),
    };
    let back: Head = serde_json::from_str(&serde_json::to_string(&head).unwrap()).unwrap();
    assert_eq!(back, head);
}

#[test]
fn incarnations_are_random_lowercase_hex() {
    let one = Incarnation::random();
    assert_eq!(one.as_str().len(), 32);
    assert_eq!(Incarnation::parse(one.as_str()).unwrap(), one);
    assert_ne!(one, Incarnation::random());
    for bad in ["", "ABC", "0x1f", "a#b", &"a".repeat(65)] {
        assert!(Incarnation::parse(bad).is_err(), "{bad}");
    }
}
