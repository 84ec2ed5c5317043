//! The voice notes' doubles through degrau's own adapters: the Graph API double's
//! media (located, then downloaded with the token, its sha256 the bytes') and the
//! speech stand-in's route, deterministic from what the fake audio says.

use std::time::Duration;

use degrau::deadline::Deadline;
use degrau_adapters::webhook::address::AddressPolicy;
use degrau_whatsapp::aws::media::GraphMedia;
use degrau_whatsapp::aws::speech::StandinSpeech;
use degrau_whatsapp::testing::fake_voice_note;
use degrau_whatsapp::voice::{
    Audio, LANGUAGES, MediaError, MediaId, MediaSource, SpeechError, SpeechToText,
};
use sha2::{Digest, Sha256};

use crate::helpers::start;

fn minute() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn audio(bytes: &[u8]) -> Audio<'_> {
    Audio {
        bytes,
        mime: "audio/ogg; codecs=opus",
        seconds: 5,
        sample_rate: 16_000,
        languages: &LANGUAGES,
    }
}

#[tokio::test]
async fn an_uploaded_media_is_located_and_downloaded_as_the_graph_api_serves_it() {
    let standin = start().await;
    let note = fake_voice_note("bom dia", 4);
    let uploaded: serde_json::Value = standin
        .client
        .post(standin.url("/stand-in/graph/media"))
        .header("content-type", "audio/ogg; codecs=opus")
        .body(note.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = MediaId::parse(uploaded["id"].as_str().unwrap()).unwrap();
    let graph = GraphMedia::new(
        standin.running.url(),
        "v23.0",
        "local-token",
        AddressPolicy::PublicAndLoopback,
    )
    .unwrap();
    let media = graph.fetch(&id, 1 << 20, minute()).await.unwrap();
    assert_eq!(media.bytes, note);
    assert_eq!(media.mime, "audio/ogg; codecs=opus");
    assert_eq!(media.sha256, Some(hex::encode(Sha256::digest(&note))));
    assert_eq!(
        graph.fetch(&id, 10, minute()).await,
        Err(MediaError::TooLarge),
        "the declared size is held against the limit"
    );
    let unknown = MediaId::parse("42").unwrap();
    assert!(matches!(
        graph.fetch(&unknown, 1 << 20, minute()).await,
        Err(MediaError::Refused(_))
    ));
    let downloads: serde_json::Value = standin
        .client
        .get(standin.url("/stand-in/graph/media-downloads"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        downloads["downloads"], 1,
        "the too-large one was never downloaded"
    );
}

#[tokio::test]
async fn the_speech_route_hears_what_the_fake_audio_says() {
    let standin = start().await;
    let speech = StandinSpeech::new(standin.running.url()).unwrap();
    let note = fake_voice_note("quero cortar o cabelo", 3);
    let heard = speech.transcribe(audio(&note), minute()).await.unwrap();
    assert_eq!(heard.text, "quero cortar o cabelo");
    assert_eq!(heard.language.as_deref(), Some("pt-BR"));
    let failing = fake_voice_note("!fail", 3);
    assert!(matches!(
        speech.transcribe(audio(&failing), minute()).await,
        Err(SpeechError::Failed(_))
    ));
    assert_eq!(
        speech.transcribe(audio(b"ID3 not ogg"), minute()).await,
        Err(SpeechError::Unsupported)
    );
}
