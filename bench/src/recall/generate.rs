//! Long conversations of returning customers, generated from a seed: many sessions
//! a contact, weeks apart, each a few dozen exchanges of everyday scheduling talk
//! (slots, prices, services, professionals: words every session shares), and in
//! some of them one detail worth finding months later, placed anywhere in the
//! session. A question about a detail is worded as a customer would word it later:
//! the same things in other forms, never its id, and for one kind only synonyms.

use degrau::domain::{ContentBlock, Role, StoredMessage};
use serde_json::json;

/// Seconds in a day.
pub const DAY: i64 = 86_400;
/// 2026-01-01, when the first contact's first session may start.
pub const START: i64 = 1_767_225_600;

const BARBERS: &[&str] = &["Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio"];
const SERVICES_PT: &[&str] = &["corte", "barba", "sobrancelha", "hidratação", "coloração"];
const SERVICES_EN: &[&str] = &["haircut", "beard trim", "eyebrows", "treatment", "coloring"];

/// A kind of detail: how it is said in a session, and how it is asked about
/// later, in Portuguese and in English; `{x}` is the detail's own word.
pub struct DetailKind {
    /// Its name in the report.
    pub name: &'static str,
    /// (said, asked) in Portuguese.
    pub pt: (&'static str, &'static str),
    /// (said, asked) in English.
    pub en: (&'static str, &'static str),
    /// The words that tell one detail of the kind from another (Portuguese,
    /// English), one drawn a detail.
    pub words: (&'static [&'static str], &'static [&'static str]),
}

/// The kinds of detail planted, each asked about in other words.
pub const KINDS: &[DetailKind] = &[
    DetailKind {
        name: "a forgotten item",
        pt: (
            "acho que esqueci meu {x} aí na cadeira de espera",
            "alguém encontrou o {x} que eu deixei na barbearia?",
        ),
        en: (
            "I think I left my {x} on the waiting chair",
            "did anyone find the {x} I forgot at the shop?",
        ),
        words: (
            &[
                "guarda-chuva",
                "óculos",
                "casaco",
                "carregador",
                "boné",
                "cachecol",
            ],
            &["umbrella", "glasses", "jacket", "charger", "cap", "scarf"],
        ),
    },
    DetailKind {
        name: "a product that irritated",
        pt: (
            "o xampu de {x} que vocês usaram me deu coceira no couro cabeludo",
            "aquele xampu com {x} que me irritou, vocês ainda usam?",
        ),
        en: (
            "the {x} shampoo you used made my scalp itch",
            "that {x} shampoo that irritated me, do you still use it?",
        ),
        words: (
            &["menta", "eucalipto", "coco", "alecrim", "camomila"],
            &["mint", "eucalyptus", "coconut", "rosemary", "chamomile"],
        ),
    },
    DetailKind {
        name: "a family event",
        pt: (
            "preciso estar bem arrumado para o {x} da minha irmã no sábado",
            "quero repetir o visual que fiz para o {x} da minha irmã",
        ),
        en: (
            "I need to look sharp for my sister's {x} on Saturday",
            "I want the same look I had for my sister's {x}",
        ),
        words: (
            &[
                "casamento",
                "formatura",
                "aniversário",
                "batizado",
                "noivado",
            ],
            &[
                "wedding",
                "graduation",
                "birthday",
                "christening",
                "engagement",
            ],
        ),
    },
    DetailKind {
        name: "a price quoted",
        pt: (
            "vocês me passaram {x} reais pela barba com toalha quente",
            "qual era mesmo o valor da barba com toalha quente que me disseram?",
        ),
        en: (
            "you quoted me {x} for the beard with the hot towel",
            "what was the price you told me for the hot towel beard?",
        ),
        words: (
            &["45", "55", "60", "70", "85"],
            &["45", "55", "60", "70", "85"],
        ),
    },
    DetailKind {
        name: "reworded (synonyms only)",
        pt: (
            "meu carro quebrou no caminho, por isso faltei",
            "lembra daquela vez que o veículo pifou e eu não pude ir?",
        ),
        en: (
            "my car broke down on the way, that's why I missed it",
            "remember when my vehicle failed and I couldn't come?",
        ),
        words: (&[""], &[""]),
    },
];

/// A contact's conversations and the questions asked about them.
pub struct Contact {
    /// Each session's messages, oldest session first.
    pub sessions: Vec<Vec<StoredMessage>>,
    /// (kind, the question, the session it is about: 1 is the first).
    pub questions: Vec<(usize, String, u32)>,
}

/// How a run shapes its contacts.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Sessions a contact, drawn from this range.
    pub sessions: (usize, usize),
    /// Exchanges a session, drawn from this range.
    pub turns: (usize, usize),
}

fn pick<'a>(rng: &mut fastrand::Rng, items: &[&'a str]) -> &'a str {
    items[rng.usize(..items.len())]
}

/// One exchange of everyday talk, (customer, agent).
fn filler(rng: &mut fastrand::Rng, portuguese: bool) -> (String, String) {
    let barber = pick(rng, BARBERS);
    let day = format!("{:02}/{:02}", rng.u32(1..=28), rng.u32(1..=12));
    let time = format!("{:02}:{}", rng.u32(9..=18), ["00", "30"][rng.usize(..2)]);
    let price = 30 + 5 * rng.u32(0..12);
    if portuguese {
        let service = pick(rng, SERVICES_PT);
        match rng.u8(..6) {
            0 => (
                format!("tem horário para {service} dia {day}?"),
                format!("Tenho {time} com {barber} no dia {day}."),
            ),
            1 => (
                format!("quanto está o {service}?"),
                format!("O {service} sai por {price} reais."),
            ),
            2 => (
                format!("o {barber} atende de manhã?"),
                format!("Sim, o {barber} atende a partir das 9h."),
            ),
            3 => (
                "beleza, obrigado".into(),
                "Por nada! Qualquer coisa é só chamar.".into(),
            ),
            4 => (
                format!("pode ser às {time} então"),
                format!("Combinado, {time} com {barber}."),
            ),
            _ => (
                format!("vocês fazem {service} e barba juntos?"),
                "Fazemos sim, é só marcar os dois.".into(),
            ),
        }
    } else {
        let service = pick(rng, SERVICES_EN);
        match rng.u8(..6) {
            0 => (
                format!("any slot for a {service} on {day}?"),
                format!("There's {time} with {barber} on {day}."),
            ),
            1 => (
                format!("how much is the {service}?"),
                format!("The {service} is {price}."),
            ),
            2 => (
                format!("does {barber} work mornings?"),
                format!("Yes, {barber} starts at 9."),
            ),
            3 => (
                "great, thanks".into(),
                "You're welcome! Message us anytime.".into(),
            ),
            4 => (
                format!("{time} works then"),
                format!("Done, {time} with {barber}."),
            ),
            _ => (
                format!("can you do a {service} and a beard together?"),
                "Sure, just book both.".into(),
            ),
        }
    }
}

fn message(
    session: u32,
    seq: u64,
    role: Role,
    content: Vec<ContentBlock>,
    at: i64,
) -> StoredMessage {
    StoredMessage {
        session,
        seq,
        role,
        content,
        pruned: None,
        usage: None,
        created_at: at,
        written_by_person: false,
        transcribed: false,
    }
}

/// A session of `turns` exchanges starting at `at`, the detail's sentence (if any)
/// said by the customer at exchange `place`; now and then a booking through the
/// tools, with its id.
fn session(
    rng: &mut fastrand::Rng,
    number: u32,
    portuguese: bool,
    turns: usize,
    detail: Option<(usize, String)>,
    at: i64,
) -> Vec<StoredMessage> {
    let mut messages = Vec::with_capacity(turns * 2 + 2);
    let mut seq = 0;
    let mut push = |messages: &mut Vec<StoredMessage>, role, content, minute: i64| {
        seq += 1;
        messages.push(message(number, seq, role, content, at + minute * 60));
    };
    for turn in 0..turns {
        let minute = turn as i64;
        let (customer, agent) = match &detail {
            Some((place, said)) if *place == turn => {
                let answer = if portuguese {
                    "Anotado, vou verificar e te aviso."
                } else {
                    "Noted, I'll check and let you know."
                };
                (said.clone(), answer.to_owned())
            }
            _ => filler(rng, portuguese),
        };
        push(
            &mut messages,
            Role::User,
            vec![ContentBlock::text(customer)],
            minute,
        );
        if rng.u8(..8) == 0 {
            let id = format!("BK-{:08X}", rng.u32(..));
            let call = format!("toolu_{number}_{turn}");
            push(
                &mut messages,
                Role::Assistant,
                vec![ContentBlock::ToolUse {
                    id: call.clone(),
                    name: "book_slot".into(),
                    input: json!({"day": "2026-05-10", "time": "10:00", "service": "haircut"}),
                }],
                minute,
            );
            push(
                &mut messages,
                Role::User,
                vec![ContentBlock::tool_result(
                    call,
                    json!({"status": "confirmed", "confirmation_id": id}).to_string(),
                )],
                minute,
            );
        }
        push(
            &mut messages,
            Role::Assistant,
            vec![ContentBlock::text(agent)],
            minute,
        );
    }
    messages
}

/// A contact of `shape`: its sessions 7 to 28 days apart, details planted in
/// about a third of them, and one question for each of up to four details, half
/// of them (when the contact has more than 20 sessions) about a session older
/// than its 20 newest.
pub fn contact(rng: &mut fastrand::Rng, shape: Shape) -> Contact {
    let portuguese = rng.bool();
    let count = rng.usize(shape.sessions.0..=shape.sessions.1);
    let mut at = START + rng.i64(0..30) * DAY;
    let mut sessions = Vec::with_capacity(count);
    let mut planted: Vec<(usize, usize, &str)> = Vec::new(); // (session index, kind, word)
    for index in 0..count {
        let turns = rng.usize(shape.turns.0..=shape.turns.1);
        let detail = (rng.u8(..3) == 0).then(|| {
            let kind = rng.usize(..KINDS.len());
            let words = if portuguese {
                KINDS[kind].words.0
            } else {
                KINDS[kind].words.1
            };
            let word = pick(rng, words);
            planted.push((index, kind, word));
            let said = if portuguese {
                KINDS[kind].pt.0
            } else {
                KINDS[kind].en.0
            };
            (rng.usize(..turns), said.replace("{x}", word))
        });
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        sessions.push(session(rng, number, portuguese, turns, detail, at));
        at += rng.i64(7..=28) * DAY;
    }
    let questions = questions(rng, portuguese, count, &planted);
    Contact {
        sessions,
        questions,
    }
}

/// The questions of a contact of `count` sessions about its `planted` details
/// (session index, kind, word): up to two about sessions older than its 20
/// newest and two about newer ones, each about a detail no other session
/// planted alike; as (kind, question, session number).
fn questions(
    rng: &mut fastrand::Rng,
    portuguese: bool,
    count: usize,
    planted: &[(usize, usize, &str)],
) -> Vec<(usize, String, u32)> {
    // A detail is asked about only when no other session planted one the question
    // cannot tell from it: the same kind and word, or the same kind when the
    // question does not name the word (a price asked for).
    let named = |kind: usize| {
        let asked = if portuguese {
            KINDS[kind].pt.1
        } else {
            KINDS[kind].en.1
        };
        asked.contains("{x}")
    };
    let unique: Vec<&(usize, usize, &str)> = planted
        .iter()
        .filter(|(i, k, w)| {
            !planted
                .iter()
                .any(|(j, l, v)| j != i && l == k && (v == w || !named(*k)))
        })
        .collect();
    let (old, new): (Vec<_>, Vec<_>) = unique
        .into_iter()
        .partition(|(index, _, _)| count > 20 && *index < count - 20);
    let mut chosen: Vec<&(usize, usize, &str)> = Vec::new();
    for (olds, news) in [(&old, &new), (&old, &new)] {
        if let Some(item) = olds.get(rng.usize(..olds.len().max(1))) {
            chosen.push(item);
        }
        if let Some(item) = news.get(rng.usize(..news.len().max(1))) {
            chosen.push(item);
        }
    }
    chosen.sort();
    chosen.dedup();
    chosen
        .into_iter()
        .map(|&(index, kind, word)| {
            let asked = if portuguese {
                KINDS[kind].pt.1
            } else {
                KINDS[kind].en.1
            };
            (
                kind,
                asked.replace("{x}", word),
                u32::try_from(index + 1).unwrap_or(u32::MAX),
            )
        })
        .collect()
}
