//! Voice notes through the webhook and the worker with speech-to-text on (the
//! media and transcription doubles): the transcript answers as text and is stored
//! marked `transcribed`; audio that cannot be heard gets the tenant's voice reply
//! with no model call and nothing stored; a Graph API down brings the message back.

use std::sync::Arc;

use degrau::domain::{Role, TenantId};
use degrau::store::{RecordStore, SessionFilter};
use degrau::tenant::{TenantConfig, TenantStore};
use degrau_whatsapp::WaMessageId;
use degrau_whatsapp::store::{RecordState, WhatsAppStore};
use degrau_whatsapp::testing::{MapMedia, SayingSpeech, Sent, fake_voice_note};
use degrau_whatsapp::voice::{
    DEFAULT_VOICE_REPLY, MAX_VOICE_BYTES, MAX_VOICE_SECONDS, Media, MediaError, Voice,
};
use degrau_whatsapp::worker::WorkerError;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::START;
use crate::whatsapp::{CUSTOMER, Channel, answers, channel, customer, text};

fn voice_note(id: &str, media: &str) -> Value {
    json!({"from": CUSTOMER, "id": id, "timestamp": "1800000000", "type": "audio",
           "audio": {"id": media, "mime_type": "audio/ogg; codecs=opus", "voice": true}})
}

fn ogg(bytes: Vec<u8>) -> Media {
    Media {
        sha256: Some(hex::encode(Sha256::digest(&bytes))),
        bytes,
        mime: "audio/ogg; codecs=opus".into(),
    }
}

/// The channel with speech-to-text on, and its doubles.
async fn listening() -> (Channel, Arc<MapMedia>, Arc<SayingSpeech>) {
    let (mut channel, _) = channel().await;
    let (media, speech) = (
        Arc::new(MapMedia::default()),
        Arc::new(SayingSpeech::default()),
    );
    channel.worker.voice = Some(Voice {
        media: media.clone(),
        speech: speech.clone(),
    });
    (channel, media, speech)
}

/// The conversation's stored user messages: text and `transcribed`.
async fn stored(channel: &Channel) -> Vec<(String, bool)> {
    let page = channel
        .store
        .transcript(&customer(), SessionFilter::All, 200, None)
        .await
        .unwrap();
    page.messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.to_message().text(), m.transcribed))
        .collect()
}

#[tokio::test]
async fn a_voice_note_is_transcribed_answered_as_text_and_stored_marked_transcribed() {
    let (channel, media, speech) = listening().await;
    media.put(
        "7001",
        Ok(ogg(fake_voice_note("quero marcar amanhã às 10h", 6))),
    );
    answers(&channel.model, &["Marcado: amanhã às 10h."]);
    channel.deliver(&[voice_note("m1", "7001")]).await;
    channel.work().await;
    assert_eq!(speech.calls(), 1);
    assert_eq!(
        stored(&channel).await,
        [("quero marcar amanhã às 10h".to_owned(), true)]
    );
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Marcado: amanhã às 10h.".into())]
    );
    // The model read the transcript, not the note.
    let request = &channel.model.requests()[0];
    let last = serde_json::to_string(request.messages.last().unwrap()).unwrap();
    assert!(last.contains("quero marcar amanhã às 10h"), "{last}");
    assert!(!last.contains("[audio]"), "{last}");
    // The record keeps the note and the media id, never the bytes or the text.
    let record = channel
        .store
        .inbound(&customer(), &WaMessageId::parse("m1").unwrap(), START)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.message.text, "[audio]");
    assert!(matches!(record.state, RecordState::Handled(_)));
}

#[tokio::test]
async fn text_and_a_voice_note_in_one_burst_make_one_transcribed_turn() {
    let (channel, media, _) = listening().await;
    media.put("7002", Ok(ogg(fake_voice_note("pode ser às 15h?", 3))));
    answers(&channel.model, &["Pode sim."]);
    channel
        .deliver(&[text("m1", "oi"), voice_note("m2", "7002")])
        .await;
    channel.work().await;
    assert_eq!(
        stored(&channel).await,
        [("oi\npode ser às 15h?".to_owned(), true)]
    );
    assert_eq!(channel.model_calls(), 1);
}

#[tokio::test]
async fn audio_that_cannot_be_heard_gets_the_voice_reply_and_nothing_is_stored() {
    let long = fake_voice_note("um áudio longo", MAX_VOICE_SECONDS + 1);
    let mut large = fake_voice_note("grande", 5);
    large.resize(usize::try_from(MAX_VOICE_BYTES).unwrap() + 1, 0);
    let mut mismatch = ogg(fake_voice_note("trocado", 5));
    mismatch.sha256 = Some("00".repeat(32));
    let mut mp3 = ogg(fake_voice_note("mp3", 5));
    mp3.mime = "audio/mpeg".into();
    let cases: Vec<(&str, Result<Media, MediaError>, usize)> = vec![
        ("too long", Ok(ogg(long)), 0),
        ("too large", Ok(ogg(large)), 0),
        ("checksum mismatch", Ok(mismatch), 0),
        ("unsupported type", Ok(mp3), 0),
        (
            "not ogg opus",
            Ok(ogg(b"ID3\x04not an ogg stream".to_vec())),
            0,
        ),
        (
            "transcription failed",
            Ok(ogg(fake_voice_note("!fail", 5))),
            1,
        ),
        (
            "unsupported by the service",
            Ok(ogg(fake_voice_note("!unsupported", 5))),
            1,
        ),
        ("heard nothing", Ok(ogg(fake_voice_note("   ", 5))), 1),
        ("media gone", Err(MediaError::Refused("HTTP 404".into())), 0),
    ];
    for (case, answer, transcriptions) in cases {
        let (channel, media, speech) = listening().await;
        media.put("7003", answer);
        channel.deliver(&[voice_note("m1", "7003")]).await;
        let results = channel.work().await;
        assert!(results.iter().all(Result::is_ok), "{case}: {results:?}");
        assert_eq!(
            speech.calls(),
            transcriptions,
            "{case}: paid only for audio that passed"
        );
        assert_eq!(channel.model_calls(), 0, "{case}: no model call");
        assert!(stored(&channel).await.is_empty(), "{case}: nothing stored");
        assert_eq!(
            channel.sender.sent(),
            [Sent::Text(DEFAULT_VOICE_REPLY.into())],
            "{case}"
        );
    }
}

#[tokio::test]
async fn the_tenants_voice_reply_goes_instead_of_the_default() {
    let (channel, media, _) = listening().await;
    let config: TenantConfig = serde_json::from_value(
        json!({"whatsapp": {"voice_reply": "Não entendi o áudio; pode digitar?"}}),
    )
    .unwrap();
    let tenant = TenantId::parse("barber").unwrap();
    channel
        .store
        .put_tenant_config(&tenant, &config)
        .await
        .unwrap();
    media.put("7004", Ok(ogg(fake_voice_note("!fail", 5))));
    channel.deliver(&[voice_note("m1", "7004")]).await;
    channel.work().await;
    assert_eq!(
        channel.sender.sent(),
        [Sent::Text("Não entendi o áudio; pode digitar?".into())]
    );
}

#[tokio::test]
async fn a_graph_api_down_brings_the_message_back_and_it_is_heard_later() {
    let (channel, media, speech) = listening().await;
    media.put("7005", Err(MediaError::Unavailable("HTTP 503".into())));
    channel.deliver(&[voice_note("m1", "7005")]).await;
    let queued = channel.inbox.queued()[0].clone();
    let first = channel
        .worker
        .handle(&queued, crate::helpers::minute())
        .await;
    assert!(matches!(first, Err(WorkerError::Send(_))), "{first:?}");
    let pending = channel.store.unhandled(&customer(), START).await.unwrap();
    assert_eq!(pending[0].state, RecordState::Pending, "nothing taken");
    assert_eq!(speech.calls(), 0);
    media.put("7005", Ok(ogg(fake_voice_note("agora sim", 2))));
    answers(&channel.model, &["Ótimo."]);
    channel.work().await;
    assert_eq!(stored(&channel).await, [("agora sim".to_owned(), true)]);
    assert_eq!(media.fetches(), 2);
}
