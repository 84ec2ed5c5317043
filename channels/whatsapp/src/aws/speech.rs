//! The adapters of the [`SpeechToText`] port, picked by `SPEECH_TO_TEXT`:
//!
//! * `transcribe`: [`TranscribeSpeech`], Amazon Transcribe's streaming API
//!   (`StartStreamTranscription`, Ogg Opus, the language identified among
//!   Portuguese and English). Streaming, not a batch job: a batch job reads its
//!   audio from an S3 object, and a voice note is never stored. Streaming keeps
//!   nothing either: the audio goes out in chunks over the request and only the
//!   final (not partial) results come back.
//! * `standin`: [`StandinSpeech`], `POST {SPEECH_TO_TEXT_URL}/stand-in/speech/transcribe`
//!   (the local stack's stand-in, `infra/standin/src/speech.rs`): the same port
//!   over plain HTTP, for the local stack and the end-to-end tests.
//! * `off` (the default): voice notes stay `[audio]` notes.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::voice::{Audio, SpeechError, SpeechToText, Transcript};
use async_trait::async_trait;
use aws_sdk_transcribestreaming::primitives::Blob;
use aws_sdk_transcribestreaming::types::error::AudioStreamError;
use aws_sdk_transcribestreaming::types::{
    AudioEvent, AudioStream, MediaEncoding, TranscriptResultStream,
};
use degrau::deadline::Deadline;
use serde::Deserialize;

/// The bytes of one audio event: Transcribe takes chunks of up to 32 KB (about a
/// second of a voice note's Opus).
const CHUNK_BYTES: usize = 8 * 1024;

/// Amazon Transcribe's streaming API.
#[derive(Debug, Clone)]
pub struct TranscribeSpeech {
    client: aws_sdk_transcribestreaming::Client,
}

impl TranscribeSpeech {
    /// A client from the function's SDK configuration (its operation timeout
    /// lifted: the worker's deadline bounds a transcription instead).
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        let config = aws_sdk_transcribestreaming::config::Builder::from(sdk)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(degrau_adapters::wiring::CONNECT_TIMEOUT)
                    .build(),
            )
            .build();
        TranscribeSpeech {
            client: aws_sdk_transcribestreaming::Client::from_conf(config),
        }
    }
}

/// The audio as a stream of audio events (the SDK sends it as it is polled).
struct Chunks(std::vec::IntoIter<Vec<u8>>);

impl futures_core::Stream for Chunks {
    type Item = Result<AudioStream, AudioStreamError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.next().map(|chunk| {
            let event = AudioEvent::builder().audio_chunk(Blob::new(chunk)).build();
            Ok(AudioStream::AudioEvent(event))
        }))
    }
}

/// Transcribe's sample rate for an Opus stream's input rate: 8–48 kHz, 48 kHz
/// (Opus's own) when the header names none in range.
pub fn sample_rate(input_rate: u32) -> i32 {
    match i32::try_from(input_rate) {
        Ok(rate) if (8_000..=48_000).contains(&rate) => rate,
        _ => 48_000,
    }
}

#[async_trait]
impl SpeechToText for TranscribeSpeech {
    async fn transcribe(
        &self,
        audio: Audio<'_>,
        deadline: Deadline,
    ) -> Result<Transcript, SpeechError> {
        let chunks: Vec<Vec<u8>> = audio
            .bytes
            .chunks(CHUNK_BYTES)
            .map(<[u8]>::to_vec)
            .collect();
        let call = async {
            let mut output = self
                .client
                .start_stream_transcription()
                .media_encoding(MediaEncoding::OggOpus)
                .media_sample_rate_hertz(sample_rate(audio.sample_rate))
                .identify_language(true)
                .language_options(audio.languages.join(","))
                .audio_stream(Chunks(chunks.into_iter()).into())
                .send()
                .await
                .map_err(|err| failed(&err))?;
            let (mut text, mut language) = (Vec::new(), None);
            while let Some(event) = output
                .transcript_result_stream
                .recv()
                .await
                .map_err(|err| failed(&err))?
            {
                let TranscriptResultStream::TranscriptEvent(event) = event else {
                    continue;
                };
                let results = event.transcript.map(|t| t.results.unwrap_or_default());
                for result in results.unwrap_or_default() {
                    if result.is_partial {
                        continue;
                    }
                    language = language.or(result.language_code.map(|c| c.as_str().to_owned()));
                    let best = result.alternatives.unwrap_or_default().into_iter().next();
                    text.extend(best.and_then(|a| a.transcript));
                }
            }
            Ok(Transcript {
                text: text.join(" "),
                language,
            })
        };
        match tokio::time::timeout(deadline.remaining(), call).await {
            Ok(result) => result,
            Err(_) => Err(SpeechError::Failed("out of time".into())),
        }
    }
}

/// A Transcribe error as the port's: its kind only (the message may quote input).
fn failed<E: std::error::Error>(err: &E) -> SpeechError {
    let text = err.to_string();
    if text.contains("BadRequest") && text.to_ascii_lowercase().contains("encoding") {
        SpeechError::Unsupported
    } else {
        SpeechError::Failed(format!(
            "Amazon Transcribe: {}",
            text.chars().take(120).collect::<String>()
        ))
    }
}

/// The stand-in's transcription route, over HTTP.
#[derive(Debug, Clone)]
pub struct StandinSpeech {
    http: reqwest::Client,
    url: String,
}

#[derive(Deserialize)]
struct StandinAnswer {
    #[serde(default)]
    transcript: Option<String>,
    #[serde(default)]
    language_code: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

impl StandinSpeech {
    /// The stand-in at `base_url`.
    pub fn new(base_url: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .map_err(|err| format!("the speech stand-in's HTTP client: {err}"))?;
        Ok(StandinSpeech {
            http,
            url: format!(
                "{}/stand-in/speech/transcribe",
                base_url.trim_end_matches('/')
            ),
        })
    }
}

#[async_trait]
impl SpeechToText for StandinSpeech {
    async fn transcribe(
        &self,
        audio: Audio<'_>,
        deadline: Deadline,
    ) -> Result<Transcript, SpeechError> {
        let response = self
            .http
            .post(&self.url)
            .header("content-type", audio.mime)
            .header("x-language-options", audio.languages.join(","))
            .body(audio.bytes.to_vec())
            .timeout(deadline.remaining())
            .send()
            .await
            .map_err(|_| SpeechError::Failed("the speech stand-in did not answer".into()))?;
        let answer: StandinAnswer = response
            .json()
            .await
            .map_err(|_| SpeechError::Failed("the speech stand-in's answer did not read".into()))?;
        match (answer.transcript, answer.error.as_deref()) {
            (Some(text), None) => Ok(Transcript {
                text,
                language: answer.language_code,
            }),
            (_, Some("too_long")) => Err(SpeechError::TooLong),
            (_, Some("unsupported")) => Err(SpeechError::Unsupported),
            (_, error) => Err(SpeechError::Failed(format!(
                "the speech stand-in: {}",
                error.unwrap_or("no transcript")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offline, Transcribe cannot answer: a service that does not answer is a
    /// failed transcription (the voice reply), within the deadline, never a hang.
    /// (moto has no streaming Transcribe; the request's shape is the SDK's.)
    #[tokio::test]
    async fn transcribe_unreachable_is_a_failed_transcription_by_the_deadline() {
        use aws_sdk_transcribestreaming::config::{Credentials, Region};
        let config = aws_sdk_transcribestreaming::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("a", "b", None, None, "test"))
            .endpoint_url("http://127.0.0.1:9")
            .build();
        let speech = TranscribeSpeech {
            client: aws_sdk_transcribestreaming::Client::from_conf(config),
        };
        let bytes = degrau_ogg();
        let audio = Audio {
            bytes: &bytes,
            mime: "audio/ogg",
            seconds: 1,
            sample_rate: 16_000,
            languages: &crate::voice::LANGUAGES,
        };
        let started = std::time::Instant::now();
        let heard = speech
            .transcribe(audio, Deadline::after(Duration::from_secs(5)))
            .await;
        assert!(matches!(heard, Err(SpeechError::Failed(_))), "{heard:?}");
        assert!(started.elapsed() < Duration::from_secs(6));
    }

    fn degrau_ogg() -> Vec<u8> {
        b"OggS not really audio".to_vec()
    }

    #[test]
    fn the_sample_rate_is_the_headers_within_transcribes_range() {
        assert_eq!(sample_rate(16_000), 16_000);
        assert_eq!(sample_rate(48_000), 48_000);
        assert_eq!(sample_rate(0), 48_000);
        assert_eq!(sample_rate(96_000), 48_000);
    }

    #[tokio::test]
    async fn the_audio_goes_out_as_chunks_of_at_most_8_kib() {
        let bytes = vec![7u8; CHUNK_BYTES * 2 + 5];
        let chunks: Vec<Vec<u8>> = bytes.chunks(CHUNK_BYTES).map(<[u8]>::to_vec).collect();
        let mut stream = Chunks(chunks.into_iter());
        let mut sizes = Vec::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        while let Poll::Ready(Some(Ok(AudioStream::AudioEvent(event)))) =
            futures_core::Stream::poll_next(Pin::new(&mut stream), &mut cx)
        {
            sizes.push(event.audio_chunk.map_or(0, |b| b.into_inner().len()));
        }
        assert_eq!(sizes, [CHUNK_BYTES, CHUNK_BYTES, 5]);
    }
}
