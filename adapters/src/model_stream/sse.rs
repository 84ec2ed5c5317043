//! Server-Sent Events: an incremental `text/event-stream` parser that cuts a body
//! into events whatever the chunks it comes in (what the Anthropic adapter's
//! streamed answers arrive as).

/// One Server-Sent Event: its `event:` name (`message` when none) and its `data:`
/// lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field.
    pub event: String,
    /// The `data:` field(s).
    pub data: String,
}

/// An incremental `text/event-stream` parser (the WHATWG rules degrau needs): lines
/// end in `\n`, `\r\n` or `\r`; a blank line dispatches the event; `:` starts a
/// comment; `id` and `retry` and unknown fields are ignored; an event without data
/// is not dispatched; one space after the colon is dropped.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line not yet ended.
    pending: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` opening the next one ends nothing.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Feeds the next chunk of the body; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.pending.extend_from_slice(&rest[..end]);
            let line = std::mem::take(&mut self.pending);
            if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => rest = &rest[end + 2..],
                    Some(_) => rest = &rest[end + 1..],
                    None => {
                        self.after_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[end + 1..];
            }
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.pending.extend_from_slice(rest);
        events
    }

    fn line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            let has_data = std::mem::take(&mut self.has_data);
            return has_data.then(|| SseEvent {
                event: if event.is_empty() {
                    "message".to_owned()
                } else {
                    event
                },
                data,
            });
        }
        if line.first() == Some(&b':') {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        None
    }
}
