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
//!
//! This file draws the conversation's shape (its episodes); `script/turn.rs`
//! holds what it is made of, `script/phrases.rs` the texts.

mod phrases;
mod turn;

use fastrand::Rng;

use phrases::{
    availability, booking, change_of_mind, date, farewell, greeting, later_date, long_message,
    plant, preference, question, recall, small_talk, time,
};

pub use turn::{Conversation, Lang, Turn, TurnKind};

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
