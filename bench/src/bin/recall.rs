//! `recall`: recall over earlier sessions, measured. Generated contacts (seeded)
//! each have several sessions weeks apart, each planting details (a booking id, a
//! barber and a service, a complaint, a question), in Portuguese or English; then a
//! new session asks about one of them in other word forms.
//!
//! ```text
//! recall [--contacts N] [--seed N] [--out DIR]
//! ```
//!
//! Side by side in one run:
//! - **recall@k**: how often the session the question is about is among the first
//!   k records the `recall` tool returns (k = 1, 3), by the kind of question; and how
//!   often the digest of the last session (the `recall_digest` setting) names it;
//! - **tokens** of the new session's requests, without recall, with the tool and
//!   with the digest, as degrau builds them (`build_request`, the stand-in's count:
//!   four characters a token). The model's side is scripted: without recall the
//!   agent must ask the customer to say it again (one more round); with the tool it
//!   calls `recall` once (two requests); with the digest it answers at once;
//! - **DynamoDB bytes read per recall**: the contact's archive items (at most
//!   `recall::MAX_RECORDS`) as the adapter writes them, sized by DynamoDB's rules,
//!   and the read units of the one strongly consistent query.
//!
//! Records are made by the core's own `record_of` from the sessions' messages,
//! bounded as the store bounds them, and ranked by the core's `rank`: the retrieval
//! figures are real. No stack is needed: the whole run is in-process, and the same
//! seed prints the same figures. Prints the table and writes `results/recall.md`.

use std::fmt::Write as _;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use degrau::domain::{ContactId, ContentBlock, Message, Role, StoredMessage, TenantId};
use degrau::recall::{MAX_RECORDS, SessionRecord, TOOL_RESULTS, digest, rank, record_of};
use degrau::request::{Lifetimes, RequestParts, ToolDef, build_request};
use degrau::store::{ContactKey, SessionArchive};
use degrau::tools::{demo, recall as recall_tool};
use degrau_awsproxy::size::{item_size, read_units};
use serde_json::{Value, json};

const USAGE: &str = "usage: recall [--contacts N] [--seed N] [--out DIR]";
const DAY: i64 = 86_400;
const START: i64 = 1_767_225_600; // 2026-01-01
const INSTRUCTIONS: &str = "You are the booking assistant of a barber shop. Be brief and \
                            friendly; book, move and cancel appointments with the tools.";

const BARBERS: &[&str] = &["Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio"];
/// (Portuguese, English) services: the planted word, and the form the question uses.
const SERVICES: &[(&str, &str, &str, &str)] = &[
    ("corte", "cortes", "haircut", "haircuts"),
    ("barba", "barbas", "beard trim", "beard trims"),
    ("coloração", "colorir", "coloring", "colour"),
    ("sobrancelha", "sobrancelhas", "eyebrows", "eyebrow"),
    ("hidratação", "hidratar", "treatment", "treatments"),
];
/// (Portuguese planted, Portuguese asked, English planted, English asked).
const COMPLAINTS: &[(&str, &str, &str, &str)] = &[
    (
        "o barbeiro atrasou quarenta minutos",
        "aquele atraso",
        "the barber was forty minutes late",
        "being so late",
    ),
    (
        "cobraram o preço errado no cartão",
        "a cobrança errada",
        "I was charged the wrong price",
        "the wrong charge",
    ),
    (
        "o corte ficou torto do lado esquerdo",
        "o corte torto",
        "the cut came out crooked on the left",
        "my crooked cut",
    ),
    (
        "esperei muito e ninguém me atendeu",
        "quando ninguém atendeu",
        "I waited a long time and nobody served me",
        "the waiting",
    ),
];
const QUESTIONS: &[(&str, &str)] = &[
    ("Vocês abrem no domingo?", "Are you open on Sundays?"),
    (
        "Quanto custa o pacote mensal?",
        "How much is the monthly plan?",
    ),
    ("Tem estacionamento perto?", "Is there parking nearby?"),
    ("Aceitam pix?", "Do you take card payments?"),
];

/// What a session planted.
#[derive(Debug, Clone)]
enum Planted {
    Booking {
        id: String,
        barber: usize,
        service: usize,
    },
    Complaint(usize),
    Question,
}

/// The kinds of question a new session asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    BookingId,
    BarberAndService,
    Complaint,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::BookingId, Kind::BarberAndService, Kind::Complaint];

    fn name(self) -> &'static str {
        match self {
            Kind::BookingId => "a booking id",
            Kind::BarberAndService => "the same barber and service",
            Kind::Complaint => "a complaint",
        }
    }
}

struct Session {
    messages: Vec<StoredMessage>,
    planted: Planted,
    ended_at: i64,
}

struct Contact {
    portuguese: bool,
    sessions: Vec<Session>,
}

fn text_message(seq: u64, role: Role, text: &str, at: i64) -> StoredMessage {
    StoredMessage {
        session: 0,
        seq,
        role,
        content: vec![ContentBlock::text(text)],
        pruned: None,
        usage: None,
        created_at: at,
    }
}

fn small_talk(rng: &mut fastrand::Rng, portuguese: bool) -> (&'static str, &'static str) {
    let pt = [
        ("Bom dia!", "Bom dia! Como posso ajudar?"),
        ("Obrigado!", "Por nada, até logo!"),
        (
            "Tudo certo então.",
            "Combinado, qualquer coisa é só chamar.",
        ),
    ];
    let en = [
        ("Good morning!", "Good morning! How can I help?"),
        ("Thanks!", "You're welcome, see you!"),
        ("All good then.", "Great, just message us anytime."),
    ];
    let pick = rng.usize(..pt.len());
    if portuguese { pt[pick] } else { en[pick] }
}

/// One session's messages for what it plants, with small talk around it.
fn session(
    rng: &mut fastrand::Rng,
    portuguese: bool,
    planted: &Planted,
    at: i64,
) -> Vec<StoredMessage> {
    let mut messages = Vec::new();
    let mut seq = 0;
    let mut push = |messages: &mut Vec<StoredMessage>, role, content: Vec<ContentBlock>| {
        seq += 1;
        messages.push(StoredMessage {
            content,
            ..text_message(seq, role, "", at)
        });
    };
    let (hello, welcome) = small_talk(rng, portuguese);
    push(&mut messages, Role::User, vec![ContentBlock::text(hello)]);
    push(
        &mut messages,
        Role::Assistant,
        vec![ContentBlock::text(welcome)],
    );
    match planted {
        Planted::Booking {
            id,
            barber,
            service,
        } => {
            let (pt, _, en, _) = SERVICES[*service];
            let barber = BARBERS[*barber];
            let day = format!("2026-{:02}-{:02}", rng.u32(1..=12), rng.u32(1..=28));
            let time = format!("{:02}:{}", rng.u32(9..=18), ["00", "30"][rng.usize(..2)]);
            let ask = match portuguese {
                true => format!("Quero marcar {pt} com {barber} no dia {day} às {time}"),
                false => format!("I'd like to book a {en} with {barber} on {day} at {time}"),
            };
            push(&mut messages, Role::User, vec![ContentBlock::text(ask)]);
            let tool_use = "toolu_bench_1".to_owned();
            push(
                &mut messages,
                Role::Assistant,
                vec![ContentBlock::ToolUse {
                    id: tool_use.clone(),
                    name: "book_slot".into(),
                    input: json!({"day": day, "time": time, "service": if portuguese { pt } else { en }, "professional": barber}),
                }],
            );
            push(
                &mut messages,
                Role::User,
                vec![ContentBlock::ToolResult {
                    tool_use_id: tool_use,
                    content: json!({"status": "confirmed", "confirmation_id": id, "day": day, "time": time, "professional": barber}).to_string(),
                    is_error: false,
                }],
            );
            let done = match portuguese {
                true => format!("Pronto! {pt} com {barber} em {day} às {time}, código {id}."),
                false => format!("Done! {en} with {barber} on {day} at {time}, booking {id}."),
            };
            push(
                &mut messages,
                Role::Assistant,
                vec![ContentBlock::text(done)],
            );
        }
        Planted::Complaint(which) => {
            let (pt, _, en, _) = COMPLAINTS[*which];
            let (say, answer) = match portuguese {
                true => (
                    format!("Quero reclamar: {pt}."),
                    "Sinto muito! Vou registrar e o gerente vai entrar em contato.".to_owned(),
                ),
                false => (
                    format!("I want to complain: {en}."),
                    "I'm so sorry! I've logged it and the manager will get back to you.".to_owned(),
                ),
            };
            push(&mut messages, Role::User, vec![ContentBlock::text(say)]);
            push(
                &mut messages,
                Role::Assistant,
                vec![ContentBlock::text(answer)],
            );
        }
        Planted::Question => {
            let (pt, en) = QUESTIONS[rng.usize(..QUESTIONS.len())];
            let (say, answer) = match portuguese {
                true => (pt, "Sim! Qualquer dúvida é só perguntar."),
                false => (en, "Yes! Ask me anything else anytime."),
            };
            push(&mut messages, Role::User, vec![ContentBlock::text(say)]);
            push(
                &mut messages,
                Role::Assistant,
                vec![ContentBlock::text(answer)],
            );
        }
    }
    // Small talk, sometimes long: excerpts then get cut to their bound.
    for _ in 0..rng.usize(0..=8) {
        let (a, b) = small_talk(rng, portuguese);
        push(&mut messages, Role::User, vec![ContentBlock::text(a)]);
        push(&mut messages, Role::Assistant, vec![ContentBlock::text(b)]);
    }
    messages
}

fn booking_id(rng: &mut fastrand::Rng) -> String {
    format!("BK-{:08X}", rng.u32(..))
}

fn contact(rng: &mut fastrand::Rng) -> Contact {
    let portuguese = rng.bool();
    let count = rng.usize(4..=16);
    let mut at = START + rng.i64(0..30) * DAY;
    let mut complaints: Vec<usize> = (0..COMPLAINTS.len()).collect();
    rng.shuffle(&mut complaints);
    let mut sessions = Vec::with_capacity(count);
    for _ in 0..count {
        let planted = match rng.u8(..10) {
            0..=4 => Planted::Booking {
                id: booking_id(rng),
                barber: rng.usize(..BARBERS.len()),
                service: rng.usize(..SERVICES.len()),
            },
            5..=6 if !complaints.is_empty() => Planted::Complaint(complaints.pop().unwrap_or(0)),
            _ => Planted::Question,
        };
        let messages = session(rng, portuguese, &planted, at);
        sessions.push(Session {
            messages,
            planted,
            ended_at: at,
        });
        at += rng.i64(14..=42) * DAY;
    }
    Contact {
        portuguese,
        sessions,
    }
}

/// The question of the new session and the index of the session it is about, for
/// `kind`, when the contact planted one.
fn question(rng: &mut fastrand::Rng, contact: &Contact, kind: Kind) -> Option<(String, usize)> {
    let pt = contact.portuguese;
    let candidates: Vec<usize> = (0..contact.sessions.len())
        .filter(|&i| {
            matches!(
                (&contact.sessions[i].planted, kind),
                (
                    Planted::Booking { .. },
                    Kind::BookingId | Kind::BarberAndService
                ) | (Planted::Complaint(_), Kind::Complaint)
            )
        })
        .collect();
    let target = *candidates.get(rng.usize(..candidates.len().max(1)))?;
    match (&contact.sessions[target].planted, kind) {
        (Planted::Booking { id, .. }, Kind::BookingId) => Some((
            match pt {
                true => format!("Oi, posso remarcar o agendamento {id}?"),
                false => format!("Hi, can I move booking {id}?"),
            },
            target,
        )),
        (
            Planted::Booking {
                barber, service, ..
            },
            Kind::BarberAndService,
        ) => {
            // The newest session with the same barber and service is the one meant.
            let target = (0..contact.sessions.len())
                .rev()
                .find(|&i| matches!(&contact.sessions[i].planted, Planted::Booking { barber: b, service: s, .. } if b == barber && s == service))
                .unwrap_or(target);
            let (_, pt_asked, _, en_asked) = SERVICES[*service];
            let barber = BARBERS[*barber];
            Some((
                match pt {
                    true => format!(
                        "Queria de novo aqueles {pt_asked} com {barber}, como da última vez"
                    ),
                    false => format!("Same {en_asked} with {barber} as last time, please"),
                },
                target,
            ))
        }
        (Planted::Complaint(which), Kind::Complaint) => {
            let (_, pt_asked, _, en_asked) = COMPLAINTS[*which];
            Some((
                match pt {
                    true => format!("O gerente nunca respondeu sobre {pt_asked}"),
                    false => format!("The manager never answered about {en_asked}"),
                },
                target,
            ))
        }
        _ => None,
    }
}

/// Estimated tokens of a request (the stand-in's count).
fn tokens(tools: &[ToolDef], last_session: Option<&str>, messages: &[Message]) -> u64 {
    let request = build_request(&RequestParts {
        model: "claude-sonnet-4-5",
        max_tokens: 1024,
        thinking: None,
        tools,
        instructions: INSTRUCTIONS,
        facts: &[],
        summary: None,
        last_session,
        window: &[],
        round: messages,
        lifetimes: Lifetimes::FiveMinutes,
    })
    .expect("a request builds");
    request.sizes().context
}

/// An `AttributeValue` as DynamoDB JSON, for the size rules.
fn wire(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::L(items) => json!({"L": items.iter().map(wire).collect::<Vec<_>>()}),
        AttributeValue::M(map) => {
            json!({"M": map.iter().map(|(k, v)| (k.clone(), wire(v))).collect::<serde_json::Map<_, _>>()})
        }
        other => panic!("an archive holds no {other:?}"),
    }
}

#[derive(Default)]
struct Tally {
    asked: usize,
    at_1: usize,
    at_k: usize,
    digest: usize,
}

fn percent(part: usize, whole: usize) -> String {
    format!("{:.1} %", 100.0 * part as f64 / whole.max(1) as f64)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut contacts, mut seed, mut out) = (300usize, 2026u64, None::<PathBuf>);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--contacts" => contacts = value().parse().expect("--contacts N"),
            "--seed" => seed = value().parse().expect("--seed N"),
            "--out" => out = Some(PathBuf::from(value())),
            other => panic!("unknown option {other}\n{USAGE}"),
        }
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let demo_tools: Vec<ToolDef> = demo::BUILT_IN_TOOLS
        .iter()
        .filter_map(|name| demo::definition(name))
        .collect();
    let mut with_recall = demo_tools.clone();
    with_recall.push(recall_tool::definition());

    let mut tallies: Vec<(Kind, Tally)> =
        Kind::ALL.iter().map(|k| (*k, Tally::default())).collect();
    let (mut sessions_total, mut records_total) = (0usize, 0usize);
    let (mut tokens_without, mut tokens_tool, mut tokens_digest) = (0u64, 0u64, 0u64);
    let (mut bytes_read, mut units_read, mut recalls) = (0u64, 0f64, 0usize);
    let (mut record_bytes_max, mut excerpt_chars_max) = (0u64, 0usize);
    for index in 0..contacts {
        let contact = contact(&mut rng);
        let key = ContactKey {
            tenant: TenantId::parse("bench").expect("tenant"),
            contact: ContactId::parse(&format!("c{index}")).expect("contact"),
        };
        sessions_total += contact.sessions.len();
        // The records as the store keeps them: the newest MAX_RECORDS, newest first.
        let mut records: Vec<SessionRecord> = contact
            .sessions
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let number = u32::try_from(i + 1).expect("few sessions");
                record_of(
                    number,
                    None,
                    &s.messages,
                    s.messages.len() as u64,
                    s.ended_at,
                )
            })
            .collect();
        records.reverse();
        records.truncate(MAX_RECORDS as usize);
        records_total += records.len();
        // What one recall reads: the contact's archive items.
        let read: u64 = records
            .iter()
            .map(|record| {
                excerpt_chars_max = excerpt_chars_max.max(record.excerpt.chars().count());
                let archive = SessionArchive::from_record(record, 0, START + 400 * DAY);
                let item = degrau_adapters::dynamodb::archive_item(&key, &archive).expect("item");
                let size = item_size(&Value::Object(
                    item.iter().map(|(k, v)| (k.clone(), wire(v))).collect(),
                ));
                record_bytes_max = record_bytes_max.max(size);
                size
            })
            .sum();
        let last_digest = records.first().map(digest);
        for (kind, tally) in &mut tallies {
            let Some((asked, target)) = question(&mut rng, &contact, *kind) else {
                continue;
            };
            let target = u32::try_from(target + 1).expect("few sessions");
            tally.asked += 1;
            let found = rank(&records, &asked, TOOL_RESULTS);
            let sessions: Vec<u32> = found.iter().map(|r| r.record.session).collect();
            tally.at_1 += usize::from(sessions.first() == Some(&target));
            tally.at_k += usize::from(sessions.contains(&target));
            tally.digest += usize::from(records.first().map(|r| r.session) == Some(target));
            recalls += 1;
            bytes_read += read;
            units_read += read_units(read, true);

            // Without recall: the agent asks the customer to say it again.
            let first = Message::user_text(asked.clone());
            let again = if contact.portuguese {
                "Desculpe, não tenho esse histórico aqui. Pode me dizer o barbeiro, o serviço e a data?"
            } else {
                "Sorry, I don't have that history here. Which barber, service and date was it?"
            };
            let restated = if contact.portuguese {
                "Era com o mesmo barbeiro de sempre, acho que no mês passado, não lembro o código."
            } else {
                "It was the usual barber, last month I think, I don't have the code."
            };
            tokens_without += tokens(&demo_tools, None, std::slice::from_ref(&first))
                + tokens(
                    &demo_tools,
                    None,
                    &[
                        first.clone(),
                        Message::assistant_text(again),
                        Message::user_text(restated),
                    ],
                );
            // With the tool: one call, its result read, then the answer.
            let output = recall_tool::run(&json!({"query": asked}), &records);
            let call = Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: "toolu_recall".into(),
                    name: "recall".into(),
                    input: json!({"query": asked}),
                }],
            };
            let result = Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: "toolu_recall".into(),
                    content: output.content,
                    is_error: output.is_error,
                }],
            };
            tokens_tool += tokens(&with_recall, None, std::slice::from_ref(&first))
                + tokens(&with_recall, None, &[first.clone(), call, result]);
            // With the digest: the last session's paragraph in the contact context.
            tokens_digest += tokens(&demo_tools, last_digest.as_deref(), &[first]);
        }
    }

    let mut table = String::new();
    let _ = writeln!(
        table,
        "| question about | asked | recall@1 | recall@{TOOL_RESULTS} (tool) | digest of the last session names it |"
    );
    let _ = writeln!(table, "|---|---:|---:|---:|---:|");
    let mut all = Tally::default();
    for (kind, tally) in &tallies {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} |",
            kind.name(),
            tally.asked,
            percent(tally.at_1, tally.asked),
            percent(tally.at_k, tally.asked),
            percent(tally.digest, tally.asked)
        );
        all.asked += tally.asked;
        all.at_1 += tally.at_1;
        all.at_k += tally.at_k;
        all.digest += tally.digest;
    }
    let _ = writeln!(
        table,
        "| **all** | {} | {} | {} | {} |",
        all.asked,
        percent(all.at_1, all.asked),
        percent(all.at_k, all.asked),
        percent(all.digest, all.asked)
    );
    let per = |total: u64| total as f64 / recalls.max(1) as f64;
    let mut costs = String::new();
    let _ = writeln!(
        costs,
        "| new session's requests | tokens per question (mean) | requests |"
    );
    let _ = writeln!(costs, "|---|---:|---:|");
    let _ = writeln!(
        costs,
        "| without recall (the agent asks again) | {:.0} | 2 |",
        per(tokens_without)
    );
    let _ = writeln!(
        costs,
        "| with the `recall` tool | {:.0} | 2 |",
        per(tokens_tool)
    );
    let _ = writeln!(
        costs,
        "| with the digest (`recall_digest`) | {:.0} | 1 |",
        per(tokens_digest)
    );
    let mut reads = String::new();
    let _ = writeln!(reads, "| DynamoDB, per recall | mean | largest record |");
    let _ = writeln!(reads, "|---|---:|---:|");
    let _ = writeln!(
        reads,
        "| bytes read (archive items, {:.1} records a contact) | {:.0} | {} |",
        records_total as f64 / contacts.max(1) as f64,
        per(bytes_read),
        record_bytes_max
    );
    let _ = writeln!(
        reads,
        "| read units (one strongly consistent query) | {:.2} | |",
        units_read / recalls.max(1) as f64
    );
    let header = format!(
        "{contacts} contacts, {sessions_total} sessions (4 to 16 a contact, 2 to 6 weeks apart), \
         {recalls} questions; seed {seed}; longest excerpt {excerpt_chars_max} characters."
    );
    println!("{header}\n\n{table}\n{costs}\n{reads}");
    let markdown = format!(
        "# Recall over earlier sessions\n\n`cargo run -q -p degrau-bench --bin recall -- --contacts \
         {contacts} --seed {seed}`\n\n{header}\n\nRetrieval is degrau's own: records made by \
         `recall::record_of` from each session's messages, ranked by `recall::rank` (BM25, \
         Portuguese and English stems). The model's side is scripted: without recall the agent \
         asks the customer to say it again (a second request, and the customer rarely has the \
         booking id); with the tool it calls `recall` once; with the digest it reads the last \
         session's paragraph in the contact context. Tokens are the stand-in's count (four \
         characters a token) of the requests degrau builds, tools and instructions included.\n\n\
         {table}\n{costs}\n{reads}"
    );
    let dir = out.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results"));
    std::fs::create_dir_all(&dir).expect("results directory");
    std::fs::write(dir.join("recall.md"), markdown).expect("write results/recall.md");
}
