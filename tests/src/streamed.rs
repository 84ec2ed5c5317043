//! Reading the streaming route's answer as a client does: Lambda's HTTP
//! integration response (a JSON prelude with the status and headers, eight zero
//! bytes, then the body, piece by piece), and the body's Server-Sent Events, each
//! with the time its last piece arrived.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lambda::Pieces;

/// One event: its name, its data, and when it arrived.
#[derive(Debug, Clone)]
pub struct Event {
    /// The event's name (`delta`, `done`, ...).
    pub name: String,
    /// Its data, parsed.
    pub data: Value,
    /// When its last byte reached the Runtime API.
    pub at: Instant,
}

/// A streamed answer, read so far.
#[derive(Debug, Clone)]
pub struct StreamedReply {
    /// The prelude's status.
    pub status: u16,
    /// The prelude's headers (names as sent).
    pub headers: serde_json::Map<String, Value>,
    /// The events, in order.
    pub events: Vec<Event>,
    /// The body as received.
    pub raw: String,
    /// Whether the answer ended (the function closed it).
    pub ended: bool,
}

impl StreamedReply {
    /// The events' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.events.iter().map(|e| e.name.as_str()).collect()
    }

    /// The text the round's last model call wrote (the reply), joined from its
    /// `delta` events since the last `restart`.
    pub fn text(&self) -> String {
        let start = self
            .events
            .iter()
            .rposition(|e| e.name == "restart")
            .map_or(0, |at| at + 1);
        let deltas: Vec<&Event> = self.events[start..]
            .iter()
            .filter(|e| e.name == "delta")
            .collect();
        let last = deltas.iter().filter_map(|e| e.data["call"].as_u64()).max();
        deltas
            .iter()
            .filter(|e| e.data["call"].as_u64() == last)
            .filter_map(|e| e.data["text"].as_str())
            .collect()
    }

    /// The last event, `done` or `error`.
    pub fn end(&self) -> Option<&Event> {
        self.events
            .last()
            .filter(|e| e.name == "done" || e.name == "error")
    }

    /// A header's value, by name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_str())
    }

    /// The JSON body of an answer that is not a stream (a JSON error).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).unwrap_or(Value::Null)
    }
}

/// The events of an SSE body: `(name, data)` pairs, comments and incomplete
/// events left out.
pub fn parse_events(body: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for block in body.split("\n\n") {
        let (mut name, mut data) = (None, String::new());
        for line in block.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = Some(value.trim().to_owned());
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
        if let (Some(name), Ok(data)) = (name, serde_json::from_str(&data)) {
            events.push((name, data));
        }
    }
    events
}

/// Reads `pieces` until the answer ends, `stop` says to stop at an event, or
/// `patience` passes without a piece.
pub async fn read(
    pieces: &mut Pieces,
    patience: Duration,
    stop: impl Fn(&Event) -> bool,
) -> StreamedReply {
    let mut bytes = Vec::new();
    let mut prelude: Option<(u16, serde_json::Map<String, Value>)> = None;
    let mut body_start = 0;
    let mut events = Vec::new();
    let mut ended = false;
    loop {
        let Some((at, piece)) = pieces.next(patience).await else {
            ended = true;
            break;
        };
        bytes.extend_from_slice(&piece);
        if prelude.is_none()
            && let Some(split) = bytes.windows(8).position(|w| w == [0u8; 8])
        {
            let head: Value = serde_json::from_slice(&bytes[..split]).unwrap_or(Value::Null);
            prelude = Some((
                head["statusCode"].as_u64().unwrap_or(0) as u16,
                head["headers"].as_object().cloned().unwrap_or_default(),
            ));
            body_start = split + 8;
        }
        if prelude.is_none() {
            continue;
        }
        let body = String::from_utf8_lossy(&bytes[body_start..]).into_owned();
        let complete = body.rfind("\n\n").map_or("", |end| &body[..end + 2]);
        let parsed = parse_events(complete);
        for (name, data) in parsed.into_iter().skip(events.len()) {
            events.push(Event { name, data, at });
        }
        if events.last().is_some_and(&stop) {
            break;
        }
    }
    let (status, headers) = prelude.unwrap_or_default();
    StreamedReply {
        status,
        headers,
        events,
        raw: String::from_utf8_lossy(bytes.get(body_start..).unwrap_or_default()).into_owned(),
        ended,
    }
}
