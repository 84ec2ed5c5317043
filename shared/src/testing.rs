//! Test support: messages as the store keeps them, for the crate's own unit tests
//! and, behind the `test-util` feature, other crates' tests (one copy of each
//! helper, not one per test module).

pub mod hooked;

use crate::domain::{ContentBlock, Message, Role, StoredMessage};

/// A stored message of session 1 with no pruned copy, usage or time.
pub fn msg(seq: u64, role: Role, content: Vec<ContentBlock>) -> StoredMessage {
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

/// `message` stored at `seq` of session 1 (see [`msg`]).
pub fn stored(seq: u64, message: Message) -> StoredMessage {
    msg(seq, message.role, message.content)
}

/// `messages` stored one after another from `first_seq` (see [`msg`]).
pub fn stored_from(
    first_seq: u64,
    messages: impl IntoIterator<Item = Message>,
) -> Vec<StoredMessage> {
    messages
        .into_iter()
        .zip(first_seq..)
        .map(|(message, seq)| stored(seq, message))
        .collect()
}
