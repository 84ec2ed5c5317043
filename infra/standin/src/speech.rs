//! A stand-in for speech-to-text, for the WhatsApp worker's voice notes
//! (`SPEECH_TO_TEXT=standin`, `SPEECH_TO_TEXT_URL` pointed here):
//!
//! | endpoint | does |
//! |---|---|
//! | `POST /stand-in/speech/transcribe` | the body is the audio, `Content-Type` its type; answers `{"transcript", "language_code"}`, or `{"error": "unsupported" \| "failed"}` with 422 |
//!
//! Deterministic, as the tests need: the transcript is what the audio *says*, the
//! UTF-8 text after the last `say:` in its bytes (degrau's test helper
//! `fake_voice_note` writes an Ogg Opus stream holding it). `say:!fail` fails,
//! `say:!unsupported` is unsupported; audio that is not Ogg (no `OggS` at the
//! start) is unsupported, and Ogg that says nothing fails. The language is the
//! first of the `X-Language-Options` header (`pt-BR` without one).

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

/// The speech routes.
pub fn router() -> Router {
    Router::new().route("/stand-in/speech/transcribe", post(transcribe))
}

/// What `audio` says: its transcript, or the error's kind.
pub fn hear(audio: &[u8]) -> Result<String, &'static str> {
    if !audio.starts_with(b"OggS") {
        return Err("unsupported");
    }
    let at = audio
        .windows(4)
        .rposition(|w| w == b"say:")
        .ok_or("failed")?;
    let said = std::str::from_utf8(&audio[at + 4..]).map_err(|_| "failed")?;
    match said {
        "!fail" => Err("failed"),
        "!unsupported" => Err("unsupported"),
        text => Ok(text.to_owned()),
    }
}

async fn transcribe(headers: HeaderMap, body: Bytes) -> Response {
    let language = headers
        .get("x-language-options")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or("pt-BR")
        .to_owned();
    match hear(&body) {
        Ok(transcript) => {
            axum::Json(json!({"transcript": transcript, "language_code": language})).into_response()
        }
        Err(kind) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(json!({"error": kind})),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transcript_is_what_the_audio_says() {
        assert_eq!(
            hear(b"OggS\0..say:oi, tudo bem?"),
            Ok("oi, tudo bem?".into())
        );
        assert_eq!(hear(b"OggS say:a say:b"), Ok("b".into()), "the last");
        assert_eq!(hear(b"OggS say:!fail"), Err("failed"));
        assert_eq!(hear(b"OggS say:!unsupported"), Err("unsupported"));
        assert_eq!(hear(b"OggS nothing said"), Err("failed"));
        assert_eq!(hear(b"ID3 say:mp3"), Err("unsupported"));
    }
}
