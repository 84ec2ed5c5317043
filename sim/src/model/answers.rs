//! What the simulated model answers and how: a summary that keeps every token, a
//! fact proposal, a stream's pieces, an answer read through the stand-in's wire types
//! (for its quirks), and the stand-in's judgement of a request.

use std::collections::BTreeSet;

use degrau::domain::{ContentBlock, Role};
use degrau::model::{ModelDelta, ModelResponse, StopReason, deltas_of};
use degrau::plan::request::ModelRequest;
use degrau::usage::Usage;
use serde_json::json;

use super::request::{estimate, tokens, user_text};

/// An answer's pieces as a stream hands them over: each text in two halves.
pub(super) fn pieces(answer: &ModelResponse) -> Vec<ModelDelta> {
    deltas_of(answer)
        .into_iter()
        .flat_map(|delta| match delta {
            ModelDelta::Text { index, text } => {
                let half = text
                    .char_indices()
                    .map(|(at, _)| at)
                    .nth(text.chars().count() / 2)
                    .unwrap_or(text.len());
                let (first, second) = text.split_at(half);
                [first, second]
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .map(|part| ModelDelta::Text {
                        index,
                        text: part.to_owned(),
                    })
                    .collect::<Vec<_>>()
            }
            other => vec![other],
        })
        .collect()
}

/// A summary that keeps every token of the previous record and the new messages.
pub(super) fn summary(request: &ModelRequest) -> ModelResponse {
    let kept: BTreeSet<String> = tokens(&user_text(request)).into_iter().collect();
    let text = format!("record: {}", kept.into_iter().collect::<Vec<_>>().join(" "));
    let output = text.len() as u64 / 4;
    response(
        vec![ContentBlock::text(text)],
        StopReason::EndTurn,
        Usage {
            input_tokens: estimate(request),
            output_tokens: output,
            ..Usage::default()
        },
    )
}

/// The customer messages a fact extraction shows (`[seq N] user: …` lines that
/// carry a token): each one's sequence number and token, in order.
pub(super) fn shown(request: &ModelRequest) -> Vec<(u64, String)> {
    user_text(request)
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("[seq ")?;
            let (seq, said) = rest.split_once("] user: ")?;
            let token = tokens(said).into_iter().next()?;
            Some((seq.parse().ok()?, token))
        })
        .collect()
}

/// A `record_facts` call naming the first customer message with a token: its
/// token as the `name` fact, citing its sequence number.
pub(super) fn facts(request: &ModelRequest) -> ModelResponse {
    let proposal = shown(request)
        .into_iter()
        .next()
        .map(|(seq, token)| json!({"key": "name", "value": token, "seq": seq}));
    let facts: Vec<_> = proposal.into_iter().collect();
    response(
        vec![ContentBlock::tool_use(
            "toolu_facts",
            "record_facts",
            json!({"facts": facts}),
        )],
        StopReason::ToolUse,
        Usage {
            input_tokens: estimate(request),
            output_tokens: 20,
            ..Usage::default()
        },
    )
}

pub(super) fn response(
    content: Vec<ContentBlock>,
    stop: StopReason,
    usage: Usage,
) -> ModelResponse {
    ModelResponse {
        id: "msg_sim".into(),
        model: "sim".into(),
        role: Role::Assistant,
        content,
        stop_reason: Some(stop),
        usage,
    }
}

/// Words of lowercase letters, about `chars` long.
pub fn filler(chars: usize) -> String {
    const WORDS: &[&str] = &[
        "corte", "barba", "amanha", "horario", "cliente", "agenda", "sexta", "manha", "tarde",
        "obrigado", "pode", "sim", "nao", "talvez", "depois",
    ];
    let mut out = String::with_capacity(chars + 10);
    while out.len() < chars {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(WORDS[fastrand::usize(..WORDS.len())]);
    }
    out
}

/// The answer as the stand-in's wire types hold it.
pub(super) fn to_wire(answer: &ModelResponse) -> Option<degrau_standin::answer::Answer> {
    let content = serde_json::from_value(serde_json::to_value(&answer.content).ok()?).ok()?;
    let stop_reason =
        serde_json::from_value(serde_json::to_value(answer.stop_reason.as_ref()?).ok()?).ok()?;
    Some(degrau_standin::answer::Answer {
        content,
        stop_reason,
    })
}

/// `answer` with the blocks and stop reason of `wire`.
pub(super) fn from_wire(
    wire: degrau_standin::answer::Answer,
    mut answer: ModelResponse,
) -> Option<ModelResponse> {
    answer.content = serde_json::from_value(serde_json::to_value(&wire.content).ok()?).ok()?;
    answer.stop_reason =
        Some(serde_json::from_value(serde_json::to_value(wire.stop_reason).ok()?).ok()?);
    Some(answer)
}

/// The request as the Messages API reads it, by the stand-in's own rules: the
/// 400 it would answer, if any.
pub(super) fn judge(request: &ModelRequest) -> Result<(), String> {
    let body = serde_json::to_value(request).map_err(|e| e.to_string())?;
    degrau_standin::parse::parse_value(&body)
        .map(|_| ())
        .map_err(|error| error.message)
}
