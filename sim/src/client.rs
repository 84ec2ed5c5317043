//! What a simulated client does and what it is told: one `POST .../messages` (and,
//! with an `Idempotency-Key`, its one retry), one recorded round (`GET .../context`
//! then `POST .../rounds`), and the [`Told`] each comes to.
//!
//! Every other message of a contact (an odd `n` in its token) goes through the
//! streaming route instead (`Converse::ask_streamed`): what it is told is the
//! same, and what the stream showed is checked against what it stored.

use std::sync::Mutex;

use degrau::converse::{
    AskError, AskOutcome, AskResponse, RecordedRound, RoundEvent, RoundEvents, RoundOutcome,
    RoundRequest, shown_reply,
};
use degrau::deadline::Deadline;
use degrau::domain::IdempotencyKey;
use degrau::store::StoreError;
use serde_json::json;

use crate::model::{estimate_json, filler};
use crate::oracle::{Told, Violation};
use crate::world::World;
use crate::{ASK_BUDGET, GATEWAY_TIMEOUT};

/// What an error tells the client, held to its word as the handlers word it
/// (`functions/ask/src/handler.rs`): a storage error answers "nothing was
/// stored" (503 busy, 409 conflict), so it is [`Told::Failed`], and a race lost
/// ([`Told::Lost`]) says so even for a retry whose first attempt's outcome was not
/// known; only [`AskError::Indeterminate`] says the round may be stored, and
/// [`AskError::InProgress`] that an earlier attempt's may yet be. A 500 is never an
/// answer (but for a tenant whose configuration was broken by hand), and neither
/// is [`AskError::UnsendableRound`]: a request degrau built after the model
/// answered that the API would refuse is degrau's own defect (and a tool may
/// have run for a round the client is then told failed).
pub(crate) fn told_of(world: &World, contact: usize, error: AskError) -> Result<Told, Violation> {
    match error {
        AskError::Store(error @ (StoreError::Unavailable(_) | StoreError::Conflict(_))) => {
            Ok(Told::Failed(format!("nothing was stored: {error}")))
        }
        AskError::Store(error) if !world.unusable(contact) => Err(Violation::new(
            "no request answers 500",
            format!("contact {contact}: storage error: {error}"),
        )),
        AskError::Indeterminate => Ok(Told::Unknown("the commit's outcome is not known".into())),
        AskError::InProgress => Ok(Told::Unknown("an earlier attempt is in progress".into())),
        AskError::UnsendableRound(why) => Err(Violation::new(
            "a round stays sendable to its end",
            format!("contact {contact}: a request after the model's answer: {why}"),
        )),
        AskError::Internal(why) | AskError::TenantConfig(why) if !world.unusable(contact) => {
            Err(Violation::new(
                "no request answers 500",
                format!("contact {contact}: internal error: {why}"),
            ))
        }
        // Held to its word even after a first attempt whose outcome was not
        // known: a race lost is only met after the request's key was claimed,
        // and the claim answers with the stored reply when an attempt stored one.
        lost @ AskError::Conflict(_) => Ok(Told::Lost(lost.to_string())),
        other => Ok(Told::Failed(other.to_string())),
    }
}

/// One `POST .../messages` and, with an `Idempotency-Key`, its one retry.
pub(crate) async fn ask(
    world: &World,
    contact: usize,
    token: &str,
    text: &str,
    idempotent: bool,
) -> Result<Told, Violation> {
    let key =
        idempotent.then(|| IdempotencyKey::parse(&format!("key-{token}")).expect("a valid key"));
    let streamed = streams(token);
    let first = ask_once(world, contact, text, key.as_ref(), streamed).await?;
    if key.is_none() || matches!(first, Told::Stored { .. }) {
        return Ok(first);
    }
    world.model.new_attempt(token);
    let retry = ask_once(world, contact, text, key.as_ref(), streamed).await?;
    Ok(Told::after_retry(first, retry))
}

/// Whether the message of `token` (`tok{contact}x{n}`) goes through the streaming
/// route: when its `n` is odd.
fn streams(token: &str) -> bool {
    token
        .rsplit('x')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n % 2 == 1)
}

/// What a stream showed, in order.
#[derive(Default)]
struct Shown(Mutex<Vec<RoundEvent>>);

impl RoundEvents for Shown {
    fn event(&self, event: RoundEvent) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }
}

impl Shown {
    /// The reply the stream showed ([`shown_reply`]).
    fn reply(&self) -> String {
        shown_reply(
            &self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

async fn ask_once(
    world: &World,
    contact: usize,
    text: &str,
    key: Option<&IdempotencyKey>,
    streamed: bool,
) -> Result<Told, Violation> {
    let deadline = Deadline::after(ASK_BUDGET);
    let shown = Shown::default();
    let key_of = &world.contacts[contact];
    let answer = if streamed {
        let round = world.ask.ask_streamed(key_of, text, key, deadline, &shown);
        tokio::time::timeout(GATEWAY_TIMEOUT, round).await
    } else {
        tokio::time::timeout(GATEWAY_TIMEOUT, world.ask.ask(key_of, text, key, deadline)).await
    };
    match answer {
        Err(_) => Ok(Told::TimedOut),
        Ok(Ok(AskOutcome::Answered(response))) => {
            if streamed && shown.reply() != response.reply.text {
                return Err(Violation::new(
                    "a stream shows the reply it stored",
                    format!(
                        "contact {contact}: the stream showed {:?}, the round stored {:?}",
                        shown.reply(),
                        response.reply.text
                    ),
                ));
            }
            Ok(stored(&response))
        }
        Ok(Ok(AskOutcome::Replayed(body))) => {
            let response: AskResponse =
                serde_json::from_str(&body).expect("a replay is the stored response");
            Ok(stored(&response))
        }
        Ok(Err(error)) => told_of(world, contact, error),
    }
}

fn stored(response: &AskResponse) -> Told {
    Told::Stored {
        session: response.session,
        first_seq: response.round.first_seq,
        last_seq: response.round.last_seq,
    }
}

/// A round the client ran itself: the context, then the round with a usage its
/// model could have measured (the context and the round, in estimated tokens).
/// Its model's answers are recorded as they came, now and then with a quirk of
/// what the Messages API sends ([`as_it_came`]).
pub(crate) async fn record(
    world: &World,
    contact: usize,
    token: &str,
    text: &str,
    tool: bool,
) -> Result<Told, Violation> {
    let key = &world.contacts[contact];
    let context = match world.ask.context(key, Deadline::after(ASK_BUDGET)).await {
        Ok(context) => context,
        Err(error) => return told_of(world, contact, error),
    };
    let mut messages = vec![json!({"role": "user", "content": text})];
    if tool {
        let id = format!("toolu_rec_{token}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": as_it_came(AnswerPart::BesideACall)},
            {"type": "tool_use", "id": id, "name": "lookup", "input": {}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": "found it"}
        ]}));
    }
    messages.push(json!({"role": "assistant", "content": [
        {"type": "text", "text": as_it_came(AnswerPart::Final)}
    ]}));
    let input = estimate_json(&json!({"context": &context.context, "messages": &messages}));
    let body = json!({
        "head": context.head,
        "messages": messages,
        "usage": {"input_tokens": input, "output_tokens": 20},
    });
    let request = match RoundRequest::parse(&body) {
        Ok(request) => request,
        Err(error) => return Ok(Told::Failed(error.to_string())),
    };
    match world
        .ask
        .record_round(key, &request, None, Deadline::after(ASK_BUDGET))
        .await
    {
        Ok(RoundOutcome::Recorded(round)) => Ok(recorded(&round)),
        Ok(RoundOutcome::Replayed(body)) => {
            let round: RecordedRound =
                serde_json::from_str(&body).expect("a replay is the stored response");
            Ok(recorded(&round))
        }
        Err(error) => told_of(world, contact, error),
    }
}

/// Where a text of a recorded answer stands.
enum AnswerPart {
    /// Before the answer's tool call.
    BesideACall,
    /// The answer's only block, its last.
    Final,
}

/// A text of the client's model's answer as the Messages API sent it: mostly
/// words, and now and then what real answers hold (`degrau_standin::quirks`): an
/// empty or `"\n\n"` text before a tool call, a final text that is a single
/// space. A client records them as they came; degrau stores them as the API
/// accepts them back.
fn as_it_came(part: AnswerPart) -> String {
    match (part, fastrand::u8(0..20)) {
        (AnswerPart::BesideACall, 0) => String::new(),
        (AnswerPart::BesideACall, 1) => "\n\n".into(),
        (AnswerPart::BesideACall, _) => "Let me look.".into(),
        (AnswerPart::Final, 0) => " ".into(),
        (AnswerPart::Final, _) => format!("done {}", filler(40)),
    }
}

fn recorded(round: &RecordedRound) -> Told {
    Told::Stored {
        session: round.session,
        first_seq: round.round.first_seq,
        last_seq: round.round.last_seq,
    }
}
