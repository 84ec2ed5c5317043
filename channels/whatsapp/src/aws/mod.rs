//! The WhatsApp channel's adapters: the inbound queue ([`inbox`], SQS FIFO), the
//! Graph API client ([`graph`]), the channel's configuration from the environment
//! ([`WebhookConfig`], [`WorkerConfig`]) and the two constructors the functions'
//! `main.rs` call ([`WebhookDependencies::from_env`], [`WorkerDependencies::from_env`]).
//! The records live in the adapters' DynamoDB table ([`dynamodb`]: the
//! `WhatsAppStore` port on `DynamoStore`).
//!
//! The three secrets (the app secret, the verify token, the access token) are each a
//! [`SecretSource`]: an SSM SecureString named by a `…_PARAMETER` variable (what the
//! template sets), or the variable itself for local runs, read once per instance.

pub mod dynamodb;
pub mod graph;
pub mod inbox;
pub mod media;
pub mod speech;

use std::collections::HashMap;
use std::sync::Arc;

use crate::keyed::ChannelKeys;
use crate::voice::{SpeechToText, Voice};
use crate::worker::{DEFAULT_DEBOUNCE_SECONDS, MAX_DEBOUNCE_SECONDS};
use degrau::events::{EventsOut, NoEvents};

use degrau_adapters::config::ConfigError;
use degrau_adapters::dynamodb::DynamoStore;
use degrau_adapters::events::SqsEvents;
use degrau_adapters::ssm::SecretSource;
use degrau_adapters::webhook::SecretNames;
use degrau_adapters::webhook::address::AddressPolicy;
use degrau_adapters::webhook::secrets::StaticSecrets;

fn get<'a>(vars: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// `NAME` (the value) or `NAME_PARAMETER` (an SSM parameter's name); one is required.
fn secret_source(
    vars: &HashMap<String, String>,
    name: &str,
    what: &str,
) -> Result<SecretSource, ConfigError> {
    SecretSource::from_vars(vars, name).ok_or_else(|| {
        ConfigError(format!(
            "neither {name} nor {name}_PARAMETER is set ({what})"
        ))
    })
}

/// What the webhook reads from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// `TABLE_NAME`.
    pub table_name: String,
    /// `WHATSAPP_QUEUE_URL`: the worker's FIFO queue.
    pub queue_url: String,
    /// `WHATSAPP_APP_SECRET` or `WHATSAPP_APP_SECRET_PARAMETER`.
    pub app_secret: SecretSource,
    /// `WHATSAPP_VERIFY_TOKEN` or `WHATSAPP_VERIFY_TOKEN_PARAMETER`.
    pub verify_token: SecretSource,
    /// `PSEUDONYM_KEY` or `PSEUDONYM_KEY_PARAMETER` (`/degrau/pseudonym-key` when
    /// neither is set, as `ask`'s): the deployment's pseudonym secret, which keys
    /// the queue's group and de-duplication ids and the records' tombstones.
    pub pseudonym_key: SecretSource,
    /// `EVENTS_QUEUE_URL`: the events queue (a failed reply's `delivery.failed`);
    /// unset: nothing is published.
    pub events_queue_url: Option<String>,
}

impl WebhookConfig {
    /// Reads a map of variables (the environment, or a test's).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let required = |name: &str, what: &str| {
            get(vars, name)
                .map(str::to_owned)
                .ok_or_else(|| ConfigError(format!("{name} is not set ({what})")))
        };
        Ok(WebhookConfig {
            table_name: required("TABLE_NAME", "the DynamoDB table")?,
            queue_url: required("WHATSAPP_QUEUE_URL", "the worker's FIFO queue")?,
            app_secret: secret_source(
                vars,
                "WHATSAPP_APP_SECRET",
                "the Meta app secret that signs deliveries",
            )?,
            verify_token: secret_source(
                vars,
                "WHATSAPP_VERIFY_TOKEN",
                "the verify token of the webhook's handshake",
            )?,
            pseudonym_key: SecretSource::from_vars(vars, "PSEUDONYM_KEY").unwrap_or_else(|| {
                SecretSource::SsmParameter(
                    degrau_adapters::webhook::DEFAULT_PSEUDONYM_KEY_PARAMETER.to_owned(),
                )
            }),
            events_queue_url: get(vars, "EVENTS_QUEUE_URL").map(str::to_owned),
        })
    }
}

/// What the worker reads from the environment, beside the `ask` configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// `GRAPH_API_BASE_URL` (no trailing slash).
    pub graph_base_url: String,
    /// `GRAPH_API_VERSION` (`v23.0`).
    pub graph_version: String,
    /// `WHATSAPP_ACCESS_TOKEN` or `WHATSAPP_ACCESS_TOKEN_PARAMETER`.
    pub access_token: SecretSource,
    /// `WHATSAPP_DEBOUNCE_SECONDS` (0 to 30, default 3).
    pub debounce_seconds: u64,
    /// `WHATSAPP_QUEUE_URL`: the inbound queue, where a held message waits (unset:
    /// a held message waits the queue's visibility timeout).
    pub queue_url: Option<String>,
    /// `WHATSAPP_MAX_RECEIVES`: the queue's `maxReceiveCount` (5 by default, as in
    /// the template): a message held on its last receive is sent again fresh.
    pub max_receives: u32,
    /// `SPEECH_TO_TEXT` (and `SPEECH_TO_TEXT_URL`): who transcribes voice notes.
    pub speech: SpeechConfig,
}

/// `SPEECH_TO_TEXT`: who transcribes voice notes ([`speech`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeechConfig {
    /// `off` (the default): voice notes stay `[audio]` notes.
    Off,
    /// `transcribe`: Amazon Transcribe's streaming API.
    Transcribe,
    /// `standin`: the stand-in at `SPEECH_TO_TEXT_URL`.
    Standin(String),
}

impl SpeechConfig {
    fn from_map(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        match get(vars, "SPEECH_TO_TEXT").unwrap_or("off") {
            "off" => Ok(SpeechConfig::Off),
            "transcribe" => Ok(SpeechConfig::Transcribe),
            "standin" => get(vars, "SPEECH_TO_TEXT_URL")
                .map(|url| SpeechConfig::Standin(url.to_owned()))
                .ok_or_else(|| {
                    ConfigError("SPEECH_TO_TEXT=standin needs SPEECH_TO_TEXT_URL".into())
                }),
            other => Err(ConfigError(format!(
                "SPEECH_TO_TEXT must be off, transcribe or standin, got {other:?}"
            ))),
        }
    }
}

impl WorkerConfig {
    /// Reads a map of variables (the environment, or a test's).
    pub fn from_map(vars: &HashMap<String, String>) -> Result<Self, ConfigError> {
        let version = get(vars, "GRAPH_API_VERSION").unwrap_or(graph::DEFAULT_VERSION);
        let version_ok = version
            .strip_prefix('v')
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(major, minor)| {
                !major.is_empty()
                    && !minor.is_empty()
                    && major
                        .chars()
                        .chain(minor.chars())
                        .all(|c| c.is_ascii_digit())
            });
        if !version_ok {
            return Err(ConfigError(format!(
                "GRAPH_API_VERSION must look like v23.0, got {version:?}"
            )));
        }
        let debounce_seconds = match get(vars, "WHATSAPP_DEBOUNCE_SECONDS") {
            None => DEFAULT_DEBOUNCE_SECONDS,
            Some(text) => text
                .parse()
                .ok()
                .filter(|s| *s <= MAX_DEBOUNCE_SECONDS)
                .ok_or_else(|| {
                    ConfigError(format!(
                        "WHATSAPP_DEBOUNCE_SECONDS must be a whole number from 0 to \
                         {MAX_DEBOUNCE_SECONDS}, got {text:?}"
                    ))
                })?,
        };
        Ok(WorkerConfig {
            graph_base_url: get(vars, "GRAPH_API_BASE_URL")
                .unwrap_or(graph::DEFAULT_BASE_URL)
                .trim_end_matches('/')
                .to_owned(),
            graph_version: version.to_owned(),
            access_token: secret_source(
                vars,
                "WHATSAPP_ACCESS_TOKEN",
                "the system user's token that sends replies",
            )?,
            debounce_seconds,
            queue_url: get(vars, "WHATSAPP_QUEUE_URL").map(str::to_owned),
            speech: SpeechConfig::from_map(vars)?,
            max_receives: match get(vars, "WHATSAPP_MAX_RECEIVES") {
                None => DEFAULT_MAX_RECEIVES,
                Some(text) => text.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    ConfigError(format!(
                        "WHATSAPP_MAX_RECEIVES must be a whole number of at least 1, got {text:?}"
                    ))
                })?,
            },
        })
    }
}

/// `WHATSAPP_MAX_RECEIVES` when unset: the template's `maxReceiveCount`.
pub const DEFAULT_MAX_RECEIVES: u32 = 5;

/// Everything the webhook needs, built once at init.
pub struct WebhookDependencies {
    /// Bindings and records.
    pub store: Arc<DynamoStore>,
    /// The worker's queue.
    pub inbox: Arc<inbox::SqsInbox>,
    /// The app secret (signatures).
    pub app_secret: String,
    /// The verify token (the handshake).
    pub verify_token: String,
    /// The channel's keyed names, from the pseudonym secret.
    pub keys: Arc<ChannelKeys>,
    /// The events queue ([`NoEvents`] without `EVENTS_QUEUE_URL`).
    pub events: Arc<dyn EventsOut>,
}

impl WebhookDependencies {
    /// Reads the environment and builds the webhook's clients; reads its two
    /// secrets (from SSM when named so). It needs no model and no API key.
    pub async fn from_env() -> Result<Self, ConfigError> {
        let config = WebhookConfig::from_map(&std::env::vars().collect())?;
        let sdk = degrau_adapters::wiring::sdk_config().await;
        let ssm = aws_sdk_ssm::Client::new(&sdk);
        let secret = config
            .pseudonym_key
            .read("PSEUDONYM_KEY", &ssm)
            .await
            .map_err(ConfigError)?;
        let keys = Arc::new(ChannelKeys::derive(secret.as_bytes()));
        let events = webhook_events(&sdk, config.events_queue_url, secret);
        Ok(WebhookDependencies {
            events,
            store: Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                config.table_name,
            )),
            inbox: Arc::new(inbox::SqsInbox::new(
                aws_sdk_sqs::Client::new(&sdk),
                config.queue_url,
                keys.clone(),
            )),
            keys,
            app_secret: config
                .app_secret
                .read("WHATSAPP_APP_SECRET", &ssm)
                .await
                .map_err(ConfigError)?,
            verify_token: config
                .verify_token
                .read("WHATSAPP_VERIFY_TOKEN", &ssm)
                .await
                .map_err(ConfigError)?,
        })
    }
}

/// The webhook's events adapter: pseudonyms from the pseudonym secret it already
/// read at init (the one `ask` reads from `PSEUDONYM_KEY_PARAMETER`), so that a
/// failed reply names the contact as the API's events do, with no read of SSM
/// per event and no role for the signing secrets (`events-out` signs).
fn webhook_events(
    sdk: &aws_config::SdkConfig,
    queue_url: Option<String>,
    pseudonym_secret: String,
) -> Arc<dyn EventsOut> {
    let Some(url) = queue_url else {
        return Arc::new(NoEvents);
    };
    let names = SecretNames::default();
    let held = HashMap::from([(names.pseudonym_key.clone(), pseudonym_secret)]);
    Arc::new(SqsEvents::new(
        aws_sdk_sqs::Client::new(sdk),
        url,
        Arc::new(StaticSecrets(held)),
        names,
    ))
}

/// What the worker needs beside the ask service's dependencies.
pub struct WorkerDependencies {
    /// Its configuration.
    pub config: WorkerConfig,
    /// The Graph API client, with the access token read once.
    pub sender: Arc<graph::GraphSender>,
    /// Where a held message waits.
    pub hold: Arc<dyn crate::inbox::Hold>,
    /// Voice notes' media and transcription; `None` with `SPEECH_TO_TEXT=off`.
    pub voice: Option<Voice>,
}

impl WorkerDependencies {
    /// Reads the environment and builds the Graph API client (the token from SSM
    /// when named so); the media's URLs may reach what `policy` allows.
    pub async fn from_env(policy: AddressPolicy) -> Result<Self, ConfigError> {
        let config = WorkerConfig::from_map(&std::env::vars().collect())?;
        let sdk = degrau_adapters::wiring::sdk_config().await;
        let token = config
            .access_token
            .read("WHATSAPP_ACCESS_TOKEN", &aws_sdk_ssm::Client::new(&sdk))
            .await
            .map_err(ConfigError)?;
        let (base, version) = (&config.graph_base_url, &config.graph_version);
        let speech: Option<Arc<dyn SpeechToText>> = match &config.speech {
            SpeechConfig::Off => None,
            SpeechConfig::Transcribe => Some(Arc::new(speech::TranscribeSpeech::new(&sdk))),
            SpeechConfig::Standin(url) => Some(Arc::new(
                speech::StandinSpeech::new(url).map_err(ConfigError)?,
            )),
        };
        let voice = match speech {
            Some(speech) => Some(Voice {
                media: Arc::new(
                    media::GraphMedia::new(base, version, &token, policy).map_err(ConfigError)?,
                ),
                speech,
            }),
            None => None,
        };
        let sender = graph::GraphSender::new(base, version, token).map_err(ConfigError)?;
        let hold: Arc<dyn crate::inbox::Hold> = match &config.queue_url {
            Some(url) => Arc::new(inbox::SqsHold::new(aws_sdk_sqs::Client::new(&sdk), url)),
            None => Arc::new(inbox::NoHold),
        };
        Ok(WorkerDependencies {
            config,
            sender: Arc::new(sender),
            hold,
            voice,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_webhook_reads_its_table_queue_and_secrets() {
        let config = WebhookConfig::from_map(&vars(&[
            ("TABLE_NAME", "t"),
            ("WHATSAPP_QUEUE_URL", "http://q"),
            (
                "WHATSAPP_APP_SECRET_PARAMETER",
                "/degrau/whatsapp-app-secret",
            ),
            ("WHATSAPP_VERIFY_TOKEN", "verify-me"),
        ]))
        .unwrap();
        assert_eq!(
            config.app_secret,
            SecretSource::SsmParameter("/degrau/whatsapp-app-secret".into())
        );
        assert!(!format!("{config:?}").contains("verify-me"));
        for missing in ["TABLE_NAME", "WHATSAPP_QUEUE_URL", "WHATSAPP_APP_SECRET"] {
            let mut all = vars(&[
                ("TABLE_NAME", "t"),
                ("WHATSAPP_QUEUE_URL", "http://q"),
                ("WHATSAPP_APP_SECRET", "s"),
                ("WHATSAPP_VERIFY_TOKEN", "v"),
            ]);
            all.remove(missing);
            let error = WebhookConfig::from_map(&all).unwrap_err();
            assert!(error.to_string().contains(missing), "{error}");
        }
    }

    #[test]
    fn the_worker_reads_the_graph_api_and_the_debounce_within_limits() {
        let base = [("WHATSAPP_ACCESS_TOKEN", "tok")];
        let config = WorkerConfig::from_map(&vars(&base)).unwrap();
        assert_eq!(config.graph_base_url, graph::DEFAULT_BASE_URL);
        assert_eq!(config.graph_version, graph::DEFAULT_VERSION);
        assert_eq!(config.debounce_seconds, DEFAULT_DEBOUNCE_SECONDS);
        let config = WorkerConfig::from_map(&vars(&[
            ("WHATSAPP_ACCESS_TOKEN", "tok"),
            ("GRAPH_API_BASE_URL", "http://127.0.0.1:4020/"),
            ("GRAPH_API_VERSION", "v21.0"),
            ("WHATSAPP_DEBOUNCE_SECONDS", "0"),
        ]))
        .unwrap();
        assert_eq!(config.graph_base_url, "http://127.0.0.1:4020");
        assert_eq!(config.debounce_seconds, 0);
        for (name, value) in [
            ("WHATSAPP_DEBOUNCE_SECONDS", "31"),
            ("WHATSAPP_DEBOUNCE_SECONDS", "soon"),
            ("GRAPH_API_VERSION", "23"),
            ("GRAPH_API_VERSION", "v23."),
        ] {
            let mut all = vars(&base);
            all.insert(name.into(), value.into());
            let error = WorkerConfig::from_map(&all).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
        assert_eq!(config.speech, SpeechConfig::Off);
        for (value, url, speech) in [
            ("transcribe", None, Some(SpeechConfig::Transcribe)),
            (
                "standin",
                Some("http://127.0.0.1:4010"),
                Some(SpeechConfig::Standin("http://127.0.0.1:4010".into())),
            ),
            ("standin", None, None),
            ("whisper", None, None),
        ] {
            let mut all = vars(&base);
            all.insert("SPEECH_TO_TEXT".into(), value.into());
            if let Some(url) = url {
                all.insert("SPEECH_TO_TEXT_URL".into(), url.into());
            }
            let read = WorkerConfig::from_map(&all).map(|c| c.speech);
            assert_eq!(read.as_ref().ok(), speech.as_ref(), "{value}");
            if let Err(error) = read {
                assert!(error.to_string().contains("SPEECH_TO_TEXT"), "{error}");
            }
        }
        let error = WorkerConfig::from_map(&HashMap::new()).unwrap_err();
        assert!(error.to_string().contains("WHATSAPP_ACCESS_TOKEN"));
    }
}
