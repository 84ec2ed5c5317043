//! Scripted conversations: a seeded, reproducible generator of the messages a
//! customer sends a barber shop's scheduling agent, in Portuguese and English.
//!
//! A conversation opens with a greeting, plants an identifier on turn 2 ("my order
//! code is ZX-1234"), then runs *episodes* — asking for free slots on one or two
//! dates, booking a time, changing their mind, stating a preference worth
//! remembering, asking a question, thanking, telling a longer story — and ends by
//! asking for the identifier again (second-to-last turn) and saying goodbye.
//!
//! The texts are written against the offline stand-in's heuristics
//! (`infra/standin/src/answer/`): a turn meant to run a tool holds one of its
//! availability or booking words (and, for a booking, an `HH:MM` time and a
//! `YYYY-MM-DD` date, the new date first); every other turn avoids all of those
//! words, so that only the turns that should call a tool do. [`Turn::expects_tool`]
//! says which is which, and the benchmark checks it against what the model did.
//!
//! The same `(turns, seed)` always gives the same conversation, on any machine
//! (`fastrand::Rng::with_seed`).

use fastrand::Rng;
use serde::Serialize;

/// Language of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Brazilian Portuguese.
    Pt,
    /// English.
    En,
}

impl Lang {
    fn other(self) -> Lang {
        match self {
            Lang::Pt => Lang::En,
            Lang::En => Lang::Pt,
        }
    }
}

/// What a turn is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    /// Hello.
    Greeting,
    /// Gives the identifier a late turn asks for.
    PlantIdentifier,
    /// Asks for free slots on one or more dates (`list_free_slots`, a long result each).
    Availability,
    /// Books a time on a date (`book_slot`, a `BK-…` confirmation).
    Booking,
    /// Moves a booking to another date and time (`book_slot` again).
    ChangeOfMind,
    /// A personal preference worth remembering.
    Preference,
    /// A question the agent answers without tools.
    Question,
    /// Thanks, ok, emojis.
    SmallTalk,
    /// A long message (a story, a complaint) with no request for a tool.
    LongMessage,
    /// Asks for the identifier planted on turn 2.
    Recall,
    /// Goodbye.
    Farewell,
}

impl TurnKind {
    /// Whether the stand-in should answer this turn with a tool call.
    pub fn expects_tool(self) -> bool {
        matches!(
            self,
            TurnKind::Availability | TurnKind::Booking | TurnKind::ChangeOfMind
        )
    }
}

/// One message from the customer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Turn {
    /// What the customer writes.
    pub text: String,
    /// What it is for.
    pub kind: TurnKind,
    /// Its language.
    pub lang: Lang,
}

impl Turn {
    /// Whether the stand-in should answer this turn with a tool call.
    pub fn expects_tool(&self) -> bool {
        self.kind.expects_tool()
    }
}

/// A whole scripted conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conversation {
    /// The seed it came from.
    pub seed: u64,
    /// The customer's messages, in order.
    pub turns: Vec<Turn>,
    /// The identifier planted early (`ZX-` and four digits).
    pub identifier: String,
    /// Index (0-based) of the turn that plants it.
    pub plant_turn: usize,
    /// Index (0-based) of the turn that asks for it.
    pub recall_turn: usize,
}

/// The shortest conversation: greeting, identifier, one episode turn, recall, goodbye.
pub const MIN_TURNS: usize = 5;

/// Generates a conversation of `turns` messages (at least [`MIN_TURNS`]) from `seed`.
pub fn conversation(turns: usize, seed: u64) -> Conversation {
    let turns = turns.max(MIN_TURNS);
    // Each length gets its own conversation (and perhaps its own main language).
    let mut rng = Rng::with_seed(seed ^ (turns as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let primary = if rng.u8(0..10) < 6 {
        Lang::Pt
    } else {
        Lang::En
    };
    let identifier = format!("ZX-{:04}", rng.u16(1000..10000));
    let mut script = Script {
        rng,
        primary,
        out: Vec::with_capacity(turns),
        last_booking: None,
    };
    let text = greeting(&mut script.rng, primary);
    script.push(TurnKind::Greeting, primary, text);
    let text = plant(&mut script.rng, primary, &identifier);
    script.push(TurnKind::PlantIdentifier, primary, text);
    let middle_end = turns - 2;
    while script.out.len() < middle_end {
        script.episode(middle_end);
    }
    let recall_turn = script.out.len();
    let text = recall(&mut script.rng, primary);
    script.push(TurnKind::Recall, primary, text);
    let text = farewell(&mut script.rng, primary);
    script.push(TurnKind::Farewell, primary, text);
    Conversation {
        seed,
        turns: script.out,
        identifier,
        plant_turn: 1,
        recall_turn,
    }
}

struct Script {
    rng: Rng,
    primary: Lang,
    out: Vec<Turn>,
    /// (date, time) of the last booking, while it may still be moved.
    last_booking: Option<(String, String)>,
}

impl Script {
    fn push(&mut self, kind: TurnKind, lang: Lang, text: String) {
        self.out.push(Turn { text, kind, lang });
    }

    fn room(&self, end: usize) -> usize {
        end - self.out.len()
    }

    /// One episode of 1–3 turns, never past `end`.
    fn episode(&mut self, end: usize) {
        let lang = if self.rng.u8(0..10) < 9 {
            self.primary
        } else {
            self.primary.other()
        };
        let roll = self.rng.u8(0..100);
        match roll {
            0..=34 => {
                // Slots on one or two dates, then perhaps a booking, then perhaps thanks.
                let first = date(&mut self.rng);
                let dates = if self.rng.u8(0..4) == 0 {
                    vec![first.clone(), later_date(&mut self.rng, &first)]
                } else {
                    vec![first]
                };
                let text = availability(&mut self.rng, lang, &dates);
                self.push(TurnKind::Availability, lang, text);
                if self.room(end) > 0 && self.rng.u8(0..10) < 6 {
                    let day = self.rng.choice(&dates).cloned().unwrap_or_default();
                    let time = time(&mut self.rng);
                    let text = booking(&mut self.rng, lang, &day, &time);
                    self.push(TurnKind::Booking, lang, text);
                    self.last_booking = Some((day, time));
                    if self.room(end) > 0 && self.rng.bool() {
                        let text = small_talk(&mut self.rng, lang);
                        self.push(TurnKind::SmallTalk, lang, text);
                    }
                }
            }
            35..=44 => {
                // A booking that stands may be moved once; otherwise a new booking.
                if let Some((old_day, _)) = self.last_booking.take() {
                    let day = later_date(&mut self.rng, &old_day);
                    let time = time(&mut self.rng);
                    let text = change_of_mind(&mut self.rng, lang, &day, &time, &old_day);
                    self.push(TurnKind::ChangeOfMind, lang, text);
                } else {
                    let day = date(&mut self.rng);
                    let time = time(&mut self.rng);
                    let text = booking(&mut self.rng, lang, &day, &time);
                    self.push(TurnKind::Booking, lang, text);
                    self.last_booking = Some((day, time));
                }
            }
            45..=56 => {
                let text = preference(&mut self.rng, lang);
                self.push(TurnKind::Preference, lang, text);
            }
            57..=76 => {
                let text = question(&mut self.rng, lang);
                self.push(TurnKind::Question, lang, text);
            }
            77..=91 => {
                let text = small_talk(&mut self.rng, lang);
                self.push(TurnKind::SmallTalk, lang, text);
            }
            _ => {
                let text = long_message(&mut self.rng, lang);
                self.push(TurnKind::LongMessage, lang, text);
            }
        }
    }
}

/// A date from 2026-12-01 to 2027-01-31.
fn date(rng: &mut Rng) -> String {
    let day = rng.u8(1..=62);
    if day <= 31 {
        format!("2026-12-{day:02}")
    } else {
        format!("2027-01-{:02}", day - 31)
    }
}

/// A date after `after` (or another one when `after` is the last).
fn later_date(rng: &mut Rng, after: &str) -> String {
    for _ in 0..16 {
        let candidate = date(rng);
        if candidate.as_str() > after {
            return candidate;
        }
    }
    if after == "2026-12-01" {
        "2026-12-02".to_owned()
    } else {
        "2026-12-01".to_owned()
    }
}

/// A half-hour time the demo tool offers: 09:00 to 18:30.
fn time(rng: &mut Rng) -> String {
    let slot = u32::from(rng.u8(0..20));
    let minutes = 9 * 60 + slot * 30;
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}

fn pick<'a>(rng: &mut Rng, options: &[&'a str]) -> &'a str {
    rng.choice(options.iter().copied()).unwrap_or_default()
}

const NAMES: &[&str] = &[
    "Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio", "Gabi", "Hugo",
];

fn greeting(rng: &mut Rng, lang: Lang) -> String {
    let name = pick(rng, NAMES);
    let text = match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Oi, boa tarde! Aqui é {name}, tudo bem?",
                "Olá! Sou {name}, cliente de vocês faz tempo.",
                "Bom dia! {name} falando, queria cortar o cabelo essa semana.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Hi there! This is {name}, how are you?",
                "Hello! I'm {name}, I've been coming to your shop for a while.",
                "Good morning, {name} here. I need a haircut soon.",
            ],
        ),
    };
    text.replace("{name}", name)
}

fn plant(rng: &mut Rng, lang: Lang, identifier: &str) -> String {
    let text = match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Ah, antes que eu esqueça: meu código de pedido é {id}, daquele kit de pomada que comprei com vocês.",
                "Só pra constar, meu código de pedido é {id} (o kit de barba da loja online).",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Before I forget: my order code is {id}, from the pomade kit I bought from you.",
                "Just so you have it, my order code is {id} (the beard kit from the online shop).",
            ],
        ),
    };
    text.replace("{id}", identifier)
}

fn availability(rng: &mut Rng, lang: Lang, dates: &[String]) -> String {
    match (lang, dates) {
        (Lang::Pt, [day]) => pick(
            rng,
            &[
                "Quais horários vocês têm livres em {d1}?",
                "Tem vaga em {d1}? De preferência depois do almoço.",
                "Queria ver a agenda de {d1}, por favor.",
                "Tem horário disponível em {d1}?",
            ],
        )
        .replace("{d1}", day),
        (Lang::Pt, [first, second, ..]) => pick(
            rng,
            &[
                "Quais horários livres vocês têm em {d1} ou em {d2}?",
                "Tem vaga em {d1}? Se não tiver, pode ser em {d2}.",
            ],
        )
        .replace("{d1}", first)
        .replace("{d2}", second),
        (Lang::En, [day]) => pick(
            rng,
            &[
                "Do you have any free slots on {d1}?",
                "What's your availability on {d1}? Afternoon would be best.",
                "Is anything available on {d1}?",
                "Could you check the free times on {d1} for me?",
            ],
        )
        .replace("{d1}", day),
        (Lang::En, [first, second, ..]) => pick(
            rng,
            &[
                "Any free slots on {d1} or {d2}?",
                "What's available on {d1}? Otherwise {d2} works too.",
            ],
        )
        .replace("{d1}", first)
        .replace("{d2}", second),
        (_, []) => String::new(),
    }
}

fn booking(rng: &mut Rng, lang: Lang, day: &str, time: &str) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Pode marcar às {t} em {d} pra mim?",
                "Fechado, quero agendar {d} às {t}.",
                "Então reserva {d} às {t}, por favor.",
                "Marque pra mim {d}, {t}. Corte e barba.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Please book {d} at {t} for me.",
                "Great, book me in at {t} on {d}.",
                "Let's do {d} at {t}, can you book it?",
                "I'd like to book {t} on {d}, haircut and beard.",
            ],
        ),
    }
    .replace("{d}", day)
    .replace("{t}", time)
}

fn change_of_mind(rng: &mut Rng, lang: Lang, day: &str, time: &str, old_day: &str) -> String {
    // The new date comes first: the stand-in books the first date it finds.
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Mudança de planos: pode marcar {d} às {t} no lugar de {old}?",
                "Desculpa, não vou conseguir ir. Reserve {d} às {t} em vez de {old}, por favor.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Change of plans: can you book {d} at {t} instead of {old}?",
                "Sorry, something came up. Please book {d} at {t} instead, not {old}.",
            ],
        ),
    }
    .replace("{d}", day)
    .replace("{t}", time)
    .replace("{old}", old_day)
}

fn preference(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Prefiro ser atendido pelo Marcos, ele já conhece meu cabelo.",
                "Sempre gosto de ir de manhã cedo, antes do trabalho.",
                "Meu corte é sempre degradê baixo com tesoura em cima.",
                "Pode me chamar de Beto, é como todo mundo me chama.",
                "Prefiro que me avisem pelo WhatsApp, não por e-mail.",
                "Sou alérgico a alguns produtos com perfume forte, então prefiro sem.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "I'd rather have Marcos cut my hair, he knows what I like.",
                "Mornings suit me best, before work.",
                "I always get a low fade with scissors on top.",
                "Please call me Rob, everyone does.",
                "I prefer reminders by text message rather than e-mail.",
                "I'd rather skip strongly scented products if you don't mind.",
            ],
        ),
    }
    .to_owned()
}

fn question(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Vocês aceitam Pix ou só cartão?",
                "Quanto custa corte e barba juntos?",
                "Quanto tempo leva a barba completa?",
                "Tem estacionamento perto da barbearia?",
                "Vocês vendem aquela pomada modeladora que usaram em mim?",
                "Se eu atrasar uns dez minutos, ainda dá pra ser atendido?",
                "Vocês fazem pezinho sem precisar cortar tudo?",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Do you take cards or only cash?",
                "How much is a haircut plus beard trim?",
                "How long does a full beard service take?",
                "Is there parking near the shop?",
                "Do you sell the styling pomade you used on me last time?",
                "If I'm ten minutes late, will you still see me?",
                "Do you do neck line-ups without a full cut?",
            ],
        ),
    }
    .to_owned()
}

fn small_talk(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Valeu!",
                "Perfeito, obrigado!",
                "Show, combinado.",
                "Beleza 👍",
                "Obrigado pela ajuda, de verdade.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Thanks!",
                "Perfect, thank you.",
                "Great, sounds good.",
                "Cool 👍",
                "Thanks a lot for the help.",
            ],
        ),
    }
    .to_owned()
}

/// Sentences a long message is made of: three to five, in the pool's order.
const LONG_PT: &[&str] = &[
    "Olha, da última vez o corte ficou um pouco mais curto do que eu pedi dos lados.",
    "Não é reclamação grave, mas eu tinha falado que queria disfarçar só até a metade e acabou subindo bastante.",
    "Dessa vez queria que o barbeiro perguntasse antes de passar a máquina, e mostrasse no espelho como está ficando.",
    "Semana que vem é o casamento do meu irmão e eu vou ser padrinho, então queria caprichar no cabelo e na barba.",
    "O terno é azul-marinho e a cerimônia é de tarde, ao ar livre.",
    "Vocês acham que vale fazer a barba no mesmo dia ou é melhor um dia antes pra pele não ficar irritada?",
    "Da última vez ficou um pouco vermelho no pescoço depois da navalha.",
    "Meu filho de oito anos também quer cortar, ele tem um pouco de medo da máquina.",
    "Estou deixando a barba crescer há dois meses e queria só dar forma, sem tirar o comprimento.",
    "No mais sempre fui muito bem atendido, o café é ótimo e o ambiente é tranquilo.",
    "Um amigo me indicou vocês e falou muito bem do atendimento.",
    "Trabalho perto daí, então o que for mais fácil pra vocês funciona pra mim.",
];

/// English sentences of a long message.
const LONG_EN: &[&str] = &[
    "So last time the sides came out a bit shorter than I asked.",
    "Not a big complaint, but I had said I wanted the fade to stop halfway up and it went quite high.",
    "This time I'd like the barber to check with me before using the clippers, and show me in the mirror as it goes.",
    "My brother's wedding is next week and I'm the best man, so I want to look sharp.",
    "The suit is navy and the ceremony is in the afternoon, outdoors.",
    "Should I get the shave on the day itself or the day before so my skin isn't irritated?",
    "Last time my neck got a bit red after the straight razor.",
    "My eight-year-old son wants a cut too, he's a little scared of the clippers.",
    "I've been growing my beard for two months and only want it shaped, not shortened.",
    "Otherwise I've always been treated really well, the coffee is great and the place is relaxed.",
    "A friend recommended you and spoke very highly of the service.",
    "I work nearby, so whatever is easiest for you works for me.",
];

fn long_message(rng: &mut Rng, lang: Lang) -> String {
    let pool = match lang {
        Lang::Pt => LONG_PT,
        Lang::En => LONG_EN,
    };
    let count = rng.usize(3..=5);
    let mut picked: Vec<usize> = Vec::with_capacity(count);
    while picked.len() < count {
        let index = rng.usize(0..pool.len());
        if !picked.contains(&index) {
            picked.push(index);
        }
    }
    picked.sort_unstable();
    picked
        .iter()
        .map(|&i| pool[i])
        .collect::<Vec<_>>()
        .join(" ")
}

fn recall(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(
            rng,
            &[
                "Desculpa, qual era mesmo o meu código de pedido? Preciso dele pra nota fiscal.",
                "Me lembra o meu código de pedido? Perdi o e-mail da loja.",
            ],
        ),
        Lang::En => pick(
            rng,
            &[
                "Sorry, what was my order code again? I need it for the invoice.",
                "Can you remind me of my order code? I lost the shop's e-mail.",
            ],
        ),
    }
    .to_owned()
}

fn farewell(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::Pt => pick(rng, &["Obrigado, até mais!", "Valeu, tchau!"]),
        Lang::En => pick(rng, &["Thanks, see you!", "Cheers, bye!"]),
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the stand-in answers `text` with a tool call: its own rule.
    fn triggers(text: &str) -> bool {
        degrau_standin::answer::asks_for_tools(text)
    }

    #[test]
    fn the_same_seed_gives_the_same_conversation_and_another_seed_another() {
        assert_eq!(conversation(200, 7), conversation(200, 7));
        assert_ne!(conversation(200, 7).turns, conversation(200, 8).turns);
    }

    #[test]
    fn lengths_identifier_and_recall_are_where_they_should_be() {
        for n in [5, 20, 200, 1000] {
            let c = conversation(n, 42);
            assert_eq!(c.turns.len(), n);
            assert_eq!(c.turns[c.plant_turn].kind, TurnKind::PlantIdentifier);
            assert!(c.turns[c.plant_turn].text.contains(&c.identifier));
            assert_eq!(c.recall_turn, n - 2);
            assert_eq!(c.turns[c.recall_turn].kind, TurnKind::Recall);
            let mentions = c
                .turns
                .iter()
                .filter(|t| t.text.contains(&c.identifier))
                .count();
            assert_eq!(mentions, 1, "only the plant turn names the identifier");
            assert!(c.identifier.starts_with("ZX-") && c.identifier.len() == 7);
        }
    }

    #[test]
    fn only_tool_turns_hold_the_stand_ins_trigger_words() {
        let c = conversation(1000, 3);
        for (i, turn) in c.turns.iter().enumerate() {
            assert_eq!(
                triggers(&turn.text),
                turn.expects_tool(),
                "turn {i} ({:?}): {}",
                turn.kind,
                turn.text
            );
            if matches!(turn.kind, TurnKind::Booking | TurnKind::ChangeOfMind) {
                assert!(turn.text.contains(':'), "a time in {}", turn.text);
            }
        }
    }

    #[test]
    fn a_long_conversation_has_every_kind_and_both_languages() {
        let c = conversation(1000, 1);
        for kind in [
            TurnKind::Availability,
            TurnKind::Booking,
            TurnKind::ChangeOfMind,
            TurnKind::Preference,
            TurnKind::Question,
            TurnKind::SmallTalk,
            TurnKind::LongMessage,
        ] {
            assert!(c.turns.iter().any(|t| t.kind == kind), "{kind:?}");
        }
        assert!(c.turns.iter().any(|t| t.lang == Lang::Pt));
        assert!(c.turns.iter().any(|t| t.lang == Lang::En));
        let tools = c.turns.iter().filter(|t| t.expects_tool()).count();
        assert!((300..700).contains(&tools), "{tools} tool turns");
    }
}
