//! A reply's text cut into the parts WhatsApp takes: a text message holds at most
//! [`super::MAX_OUTBOUND_CHARS`] characters, so the worker sends a longer reply as
//! several, each cut where a reader would pause.

/// Splits a reply into parts of at most `max` characters, at a line break or a
/// space in the second half of a part when there is one.
pub fn split_reply(text: &str, max: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > max {
        let limit = rest
            .char_indices()
            .nth(max)
            .map_or(rest.len(), |(at, _)| at);
        let head = &rest[..limit];
        let half = rest.char_indices().nth(max / 2).map_or(0, |(at, _)| at);
        let cut = head
            .rfind('\n')
            .filter(|at| *at >= half)
            .or_else(|| head.rfind(' ').filter(|at| *at >= half))
            .unwrap_or(limit);
        parts.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    if !rest.is_empty() {
        parts.push(rest.to_owned());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reply_is_split_at_spaces_within_the_limit() {
        assert_eq!(split_reply("oi", 10), ["oi"]);
        let parts = split_reply("aaaa bbbb cccc dddd", 10);
        assert_eq!(parts, ["aaaa bbbb", "cccc dddd"]);
        let solid = "x".repeat(25);
        let parts = split_reply(&solid, 10);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.chars().count() <= 10));
        assert_eq!(parts.concat(), solid);
        assert!(split_reply("  ", 10).is_empty());
    }
}
