use serde_json::json;

use super::tokenize::StemmingTokenizer;
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
        written_by_person: false,
        transcribed: false,
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

/// A session's index from `lines`, the customer and the agent in turn.
fn indexed(session: u32, lines: &[&str]) -> index::SessionIndex {
    let messages: Vec<StoredMessage> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            text(i as u64 + 1, role, line)
        })
        .collect();
    index::index_session(session, &messages, &StemmingTokenizer::default()).0
}

fn best(indexes: &[index::SessionIndex], query: &str) -> Option<u32> {
    rank::rank(indexes, query, 1, &StemmingTokenizer::default())
        .first()
        .map(|found| found.session)
}

#[test]
fn portuguese_and_english_word_forms_meet() {
    let indexes = vec![
        indexed(1, &["queria cancelar a reserva de sábado", "cancelada"]),
        indexed(2, &["I booked a haircut with Carla", "booked, see you"]),
        indexed(
            3,
            &["reclamação: o barbeiro atrasou muito", "pedimos desculpas"],
        ),
    ];
    assert_eq!(best(&indexes, "cancelamento das reservas"), Some(1));
    assert_eq!(best(&indexes, "Sabado"), Some(1), "accents folded");
    assert_eq!(best(&indexes, "bookings haircuts"), Some(2));
    assert_eq!(best(&indexes, "reclamacao atraso"), Some(3));
    assert_eq!(best(&indexes, "futebol"), None, "no shared word, no result");
    let tokenizer = StemmingTokenizer::default();
    assert!(
        rank::rank(&indexes, "o de a the", 3, &tokenizer).is_empty(),
        "stop words only"
    );
}

#[test]
fn an_id_matches_whole_and_ties_go_to_the_newer_session() {
    let indexes = vec![
        indexed(1, &["corte", "marcado, BK-9F3A21C8"]),
        indexed(2, &["corte", "marcado, BK-9F3A21C7"]),
        indexed(3, &["corte", "marcado"]),
    ];
    assert_eq!(best(&indexes, "qual era o BK-9F3A21C7?"), Some(2));
    let tokenizer = StemmingTokenizer::default();
    let ties: Vec<u32> = rank::rank(&indexes, "corte", 3, &tokenizer)
        .iter()
        .map(|found| found.session)
        .collect();
    assert_eq!(ties, [3, 2, 1]);
    assert_eq!(
        rank::rank(&indexes, "corte", 3, &tokenizer),
        rank::rank(&indexes, "corte", 3, &tokenizer),
        "pure"
    );
}

#[test]
fn a_detail_in_the_middle_of_a_long_session_is_found_and_shown_with_its_neighbours() {
    // The old record kept 1,500 characters (start and end): this detail was lost.
    let mut lines: Vec<String> = (0..60)
        .map(|n| format!("mensagem {n} sobre horários e preços de corte e barba"))
        .collect();
    lines[31] = "a Carla disse que o secador quebrou e vai trocar".into();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let messages: Vec<StoredMessage> = refs
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            text(i as u64 + 1, role, line)
        })
        .collect();
    let tokenizer = StemmingTokenizer::default();
    let (index, text) = index::index_session(7, &messages, &tokenizer);
    let other = indexed(8, &["corte e barba", "marcado"]);
    assert_eq!(best(&[index, other], "secador quebrado"), Some(7));
    let terms = rank::query_terms("secador quebrado", &tokenizer);
    let shown = passages::passages(&text, &terms, &tokenizer);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(
        shown[0].lines,
        [
            "customer: mensagem 30 sobre horários e preços de corte e barba",
            "agent: a Carla disse que o secador quebrou e vai trocar",
            "customer: mensagem 32 sobre horários e preços de corte e barba",
        ]
    );
}

#[test]
fn the_search_summary_is_a_field_of_its_own_weighed_below_the_text() {
    let tokenizer = StemmingTokenizer::default();
    let summarised = index::with_summary(
        indexed(1, &["oi", "olá"]),
        "The customer moved the appointment to Friday.",
        &tokenizer,
    );
    let said = indexed(2, &["moved the appointment to friday", "done"]);
    assert_eq!(
        summarised.summary.as_deref(),
        Some("The customer moved the appointment to Friday.")
    );
    assert_eq!(
        best(std::slice::from_ref(&summarised), "appointment"),
        Some(1)
    );
    assert_eq!(
        best(&[summarised, said], "appointment"),
        Some(2),
        "said beats summarised"
    );
}

#[test]
fn an_index_is_bounded_and_its_terms_read_back() {
    // Three thousand distinct words of letters only (a word with two digits
    // would be a code, kept whole first).
    let letters = |n: usize| -> String {
        (0..3)
            .map(|k| char::from(b'a' + (n / 26usize.pow(k) % 26) as u8))
            .collect()
    };
    let words: Vec<String> = (0..3_000)
        .map(|n| format!("palavra{}", letters(n)))
        .collect();
    let mut line = words.join(" ");
    line.push_str(" BK-1A2B3C BK-1A2B3C corte corte corte");
    let index = indexed(1, &[&line]);
    assert_eq!(index.terms.len(), index::MAX_INDEX_TERMS);
    assert_eq!(
        index.terms.get("=bk-1a2b3c"),
        Some(&2),
        "ids are kept first"
    );
    let corte = StemmingTokenizer::default().terms("corte");
    assert!(!corte.is_empty());
    for stem in corte {
        assert_eq!(
            index.terms.get(&stem),
            Some(&3),
            "then the most frequent words"
        );
    }
    let encoded = index::encode_terms(&index.terms);
    assert_eq!(index::decode_terms(&encoded), Some(index.terms.clone()));
    assert_eq!(index::decode_terms("a:1 b"), None);
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
