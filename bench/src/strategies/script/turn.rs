//! What a scripted conversation is made of: its turns, each with its kind and
//! language.

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
    /// The other language.
    pub(super) fn other(self) -> Lang {
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
