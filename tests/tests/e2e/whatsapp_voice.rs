//! Voice notes through the real `whatsapp-webhook` and `whatsapp-worker` on moto,
//! with `SPEECH_TO_TEXT=standin`: the Graph double serves the audio (located by
//! its media id, downloaded with the token) and the stand-in transcribes it. The
//! transcript answers as text and is the stored message, marked `transcribed`;
//! nothing of the audio is in the table; audio that cannot be heard gets the voice
//! reply and nothing is stored.

use aws_sdk_dynamodb::types::AttributeValue;
use degrau_tests::{HttpReply, api_event};
use degrau_whatsapp::testing::fake_voice_note;
use degrau_whatsapp::voice::DEFAULT_VOICE_REPLY;
use serde_json::{Value, json};

use crate::whatsapp::{Channel, PHONE, STANDIN_URL, TENANT, last_user_text};

/// The worker with speech-to-text on, at the stand-in.
async fn listening() -> Channel {
    Channel::start_with(&[
        ("SPEECH_TO_TEXT", "standin"),
        ("SPEECH_TO_TEXT_URL", STANDIN_URL),
    ])
    .await
}

/// Puts `bytes` in the Graph double's media; answers its media id.
async fn upload(channel: &Channel, bytes: Vec<u8>) -> String {
    let uploaded: Value = reqwest::Client::new()
        .post(format!("{}/stand-in/graph/media", channel.standin.url))
        .header("content-type", "audio/ogg; codecs=opus")
        .body(bytes)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    uploaded["id"].as_str().unwrap().to_owned()
}

/// A delivery of one voice note, as Meta posts it.
fn voice_delivery(from: &str, id: &str, media: &str) -> String {
    json!({"object": "whatsapp_business_account", "entry": [{"id": "0", "changes": [{
        "field": "messages",
        "value": {"messaging_product": "whatsapp",
                  "metadata": {"display_phone_number": "15550009999", "phone_number_id": PHONE},
                  "contacts": [{"profile": {"name": "Ana"}, "wa_id": from}],
                  "messages": [{"from": from, "id": id, "timestamp": "1800000000",
                                "type": "audio",
                                "audio": {"id": media, "mime_type": "audio/ogg; codecs=opus",
                                          "voice": true}}]}}]}]})
    .to_string()
}

/// The contact's stored messages as `GET .../messages` answers them.
async fn messages(channel: &Channel, contact: &str) -> Vec<Value> {
    let event = api_event(
        "GET",
        &format!("/v1/contacts/{contact}/messages"),
        "session=all",
        &[("x-tenant-id", TENANT)],
        None,
        None,
    );
    let reply = HttpReply::from_api(&event, &channel.ask.invoke(event.clone()).await.unwrap());
    assert_eq!(reply.status, 200, "{}", reply.raw);
    reply.body["messages"].as_array().unwrap().clone()
}

/// Every attribute of every item of the table, as text (binary ones hex).
async fn table_text(channel: &Channel) -> Vec<String> {
    fn text(value: &AttributeValue) -> String {
        match value {
            AttributeValue::S(s) | AttributeValue::N(s) => s.clone(),
            AttributeValue::B(b) => hex::encode(b.as_ref()),
            AttributeValue::M(map) => map.values().map(text).collect::<Vec<_>>().join(" "),
            AttributeValue::L(list) => list.iter().map(text).collect::<Vec<_>>().join(" "),
            AttributeValue::Ss(set) => set.join(" "),
            other => format!("{other:?}"),
        }
    }
    let scan = channel
        .dynamodb
        .scan()
        .table_name(&channel.table)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    scan.items()
        .iter()
        .flat_map(|item| item.values().map(text))
        .collect()
}

#[tokio::test]
async fn a_voice_note_transcribed_by_the_stand_in_answers_as_text_and_no_audio_is_stored() {
    let channel = listening().await;
    let contact = "5511900000071";
    let said = "oi, tudo bem? obrigada pelo atendimento de ontem";
    let audio = fake_voice_note(said, 6);
    let media = upload(&channel, audio.clone()).await;
    let body = voice_delivery(contact, "wamid.V1", &media);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;

    // The model was asked the transcript, and its answer went out as text.
    let requests = channel.standin.requests().await;
    assert!(!requests.is_empty());
    assert_eq!(last_user_text(&requests[0]), said);
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["type"], "text");
    assert_eq!(sent[0]["to"], contact);

    // The stored message is the transcript, marked transcribed.
    let stored = messages(&channel, contact).await;
    assert!(stored.len() >= 2, "{stored:?}");
    assert_eq!(stored[0]["role"], "user");
    assert_eq!(stored[0]["content"][0]["text"], said);
    assert_eq!(stored[0]["transcribed"], true);
    assert!(
        stored[1..].iter().all(|m| m["transcribed"] == false),
        "only the customer's"
    );

    // Nothing of the audio is in the table: no binary attribute, no byte run of it.
    let table = table_text(&channel).await;
    let hex_audio = hex::encode(&audio);
    let head = &hex_audio[..64];
    for attribute in &table {
        assert!(
            !attribute.contains("OggS"),
            "an attribute holds Ogg: {attribute}"
        );
        assert!(!attribute.contains("OpusHead"), "{attribute}");
        assert!(
            !attribute.contains(head),
            "an attribute holds the audio's bytes"
        );
        assert!(!attribute.contains(&format!("say:{said}")), "{attribute}");
    }
    assert!(
        table.iter().any(|a| a.contains(&media)),
        "the record keeps the media id (and nothing else of the audio)"
    );
}

#[tokio::test]
async fn a_voice_note_that_cannot_be_transcribed_gets_the_voice_reply_and_nothing_is_stored() {
    let channel = listening().await;
    let contact = "5511900000072";
    let media = upload(&channel, fake_voice_note("!fail", 4)).await;
    let body = voice_delivery(contact, "wamid.V2", &media);
    assert_eq!(channel.deliver(&body).await.status, 200);
    channel.work().await;
    assert!(channel.standin.requests().await.is_empty(), "no model call");
    let sent = channel.sent().await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["content"], DEFAULT_VOICE_REPLY);
    assert!(
        messages(&channel, contact).await.is_empty(),
        "nothing stored"
    );
}
