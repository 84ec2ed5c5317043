use serde_json::json;

use super::*;
use crate::domain::ContentBlock;

fn message(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
    StoredMessage {
        session: 1,
        seq,
        role,
        content,
        pruned: None,
        usage: None,
        created_at: 0,
    }
}

fn text(seq: u64, role: Role, text: &str) -> StoredMessage {
    message(seq, role, vec![ContentBlock::text(text)])
}

fn record(session: u32, excerpt: &str) -> SessionRecord {
    SessionRecord {
        session,
        excerpt: excerpt.into(),
        messages: 4,
        ended_at: 1_780_000_000 + i64::from(session) * 86_400 * 21,
        ..SessionRecord::default()
    }
}

#[test]
fn a_record_keeps_the_words_the_ids_and_not_the_tool_noise() {
    let tail = vec![
        text(5, Role::User, "Quero marcar um corte com o Bruno dia 14/03"),
        message(
            6,
            Role::Assistant,
            vec![ContentBlock::ToolUse {
                id: "t1".into(),
                name: "book_slot".into(),
                input: json!({"day": "2026-03-14", "time": "10:00", "service": "corte"}),
            }],
        ),
        message(
            7,
            Role::User,
            vec![ContentBlock::ToolResult {
                tool_use_id: "t1".into(),
                content: r#"{"status":"confirmed","confirmation_id":"BK-9F3A21C7","time":"10:00"}"#
                    .into(),
                is_error: false,
            }],
        ),
        text(
            8,
            Role::Assistant,
            "Marcado! Seu código é BK-9F3A21C7. Total R$ 50, tel 11987654321.",
        ),
    ];
    let record = record_of(3, Some("  "), &tail, 8, 1_780_000_000);
    assert_eq!(record.summary, None, "a blank summary is none");
    assert_eq!(record.ids, ["14/03", "2026-03-14", "BK-9F3A21C7"]);
    assert_eq!(
        record.excerpt,
        "customer: Quero marcar um corte com o Bruno dia 14/03\n\
         agent: Marcado! Seu código é BK-9F3A21C7. Total R$ 50, tel 11987654321."
    );
    assert_eq!(
        (record.session, record.messages, record.ended_at),
        (3, 8, 1_780_000_000)
    );
}

#[test]
fn a_record_is_bounded_whatever_the_session_held() {
    let long: Vec<StoredMessage> = (1..=200)
        .map(|seq| {
            let role = if seq % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            text(
                seq,
                role,
                &format!("pedido PED{seq:04} {}", "palavra ".repeat(80)),
            )
        })
        .collect();
    let record = record_of(1, Some("resumo"), &long, 200, 0);
    assert!(record.excerpt.chars().count() <= MAX_EXCERPT_CHARS);
    assert!(record.excerpt.starts_with("customer: pedido PED0001"));
    assert!(record.excerpt.ends_with('…'), "the last line is kept, cut");
    assert!(record.excerpt.contains("agent: pedido PED0200"));
    assert_eq!(record.ids.len(), MAX_IDS);
    assert_eq!(record.ids[0], "PED0001");
    let mut ids = Vec::new();
    extract_ids(&format!("X{}1", "a".repeat(60)), &mut ids);
    extract_ids("12345678901 4111111111111111 10:30 R$50,00 2026", &mut ids);
    assert!(ids.is_empty(), "{ids:?}");
}

#[test]
fn portuguese_and_english_word_forms_meet() {
    let records = vec![
        record(
            1,
            "customer: queria cancelar a reserva de sábado\nagent: cancelada",
        ),
        record(
            2,
            "customer: I booked a haircut with Carla\nagent: booked, see you",
        ),
        record(
            3,
            "customer: reclamação: o barbeiro atrasou muito\nagent: pedimos desculpas",
        ),
    ];
    let best = |query: &str| rank(&records, query, 1).first().map(|r| r.record.session);
    assert_eq!(best("cancelamento das reservas"), Some(1));
    assert_eq!(best("Sabado"), Some(1), "accents folded");
    assert_eq!(best("bookings haircuts"), Some(2));
    assert_eq!(best("reclamacao atraso"), Some(3));
    assert_eq!(best("futebol"), None, "no shared word, no result");
    assert!(
        rank(&records, "o de a the", 3).is_empty(),
        "stop words only"
    );
}

#[test]
fn ids_rank_their_session_first_and_ties_go_to_the_newer() {
    let mut with_id = record(2, "customer: corte\nagent: marcado");
    with_id.ids = vec!["BK-9F3A21C7".into()];
    let records = vec![
        record(1, "customer: corte\nagent: marcado"),
        with_id,
        record(3, "customer: corte\nagent: marcado"),
    ];
    let ranked = rank(&records, "qual era o BK-9F3A21C7?", 3);
    assert_eq!(ranked[0].record.session, 2);
    let ties: Vec<u32> = rank(&records, "corte", 3)
        .iter()
        .map(|r| r.record.session)
        .collect();
    assert_eq!(ties[0], 3, "{ties:?}");
    assert_eq!(rank(&records, "corte", 2).len(), 2);
    assert_eq!(
        rank(&records, "corte", 3),
        rank(&records, "corte", 3),
        "pure"
    );
}

#[test]
fn the_closing_session_joins_the_stored_records_once_newest_first() {
    let stored: Vec<SessionRecord> = (1..=MAX_RECORDS).rev().map(|s| record(s, "x")).collect();
    let closing = record(MAX_RECORDS + 1, "y");
    let merged = with_closing(stored.clone(), Some(&closing));
    assert_eq!(merged.len(), MAX_RECORDS as usize);
    assert_eq!(merged[0].session, MAX_RECORDS + 1);
    assert_eq!(merged.last().map(|r| r.session), Some(2));
    assert_eq!(with_closing(stored.clone(), Some(&stored[0])), stored);
}

#[test]
fn the_digest_is_one_stable_bounded_paragraph() {
    let mut last = record(4, "customer: corte com o Bruno\nagent: marcado");
    last.ids = vec!["BK-1".into(), "2026-03-14".into()];
    last.ended_at = 1_773_446_400; // 2026-03-14
    let text = digest(&last);
    assert_eq!(
        text,
        "Session 4 ended 2026-03-14 after 4 messages. customer: corte com o Bruno / agent: \
         marcado Ids: BK-1, 2026-03-14."
    );
    assert_eq!(digest(&last), text);
    last.summary = Some("x".repeat(2_000));
    assert_eq!(digest(&last).chars().count(), MAX_DIGEST_CHARS);
    assert!(!digest(&last).contains('\n'));
}

#[test]
fn dates_are_utc_days() {
    assert_eq!(date_of(0), "1970-01-01");
    assert_eq!(date_of(951_782_400), "2000-02-29");
    assert_eq!(date_of(1_773_446_399), "2026-03-13");
    assert_eq!(date_of(-1), "1969-12-31");
}

#[test]
fn queries_are_checked() {
    assert!(check_query("corte").is_ok());
    assert!(check_query("  ").unwrap_err().contains("non-whitespace"));
    let long = "é".repeat(MAX_QUERY_CHARS + 1);
    assert!(check_query(&long).unwrap_err().contains("501 characters"));
    assert!(check_query(&"é".repeat(MAX_QUERY_CHARS)).is_ok());
}

#[test]
fn an_excerpt_is_cut_between_words_so_no_id_is_kept_in_part() {
    // Ids near both cuts: a cut inside `BK4X10` would keep `BK4X1`, another id.
    let words: Vec<String> = (0..600).map(|n| format!("BK4X{n}")).collect();
    let text = words.join(" ");
    for cut in [super::cut_middle(&text, 1_500), super::cut_end(&text, 700)] {
        assert!(cut.chars().count() <= 1_500, "{}", cut.len());
        for word in cut.split(|c: char| c.is_whitespace() || c == '…') {
            assert!(
                word.is_empty() || words.contains(&word.to_owned()),
                "`{word}` is a cut word"
            );
        }
    }
}
