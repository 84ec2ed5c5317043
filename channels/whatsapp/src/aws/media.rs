//! The Graph API adapter of the voice notes' [`MediaSource`]: `GET
//! {GRAPH_API_BASE_URL}/{version}/{media-id}` with the access token answers the
//! media's short-lived `url` (on a Meta CDN host), its `mime_type`, `sha256` and
//! `file_size`; `GET <url>` with the same token answers the bytes.
//!
//! **Limits before and while reading**: a declared `file_size` over the limit is
//! refused before the download, and the download stops as soon as it passes the
//! limit (a missing or false `file_size` cannot make the worker read more).
//!
//! **The webhooks' address rules** ([`degrau_adapters::webhook::address`]): the `url` comes
//! from an answer, so both requests go through the checking resolver (only public
//! addresses; loopback too with `AUTH_MODE=dev`, where the Graph double listens),
//! without redirects or a proxy, and a deployed worker takes only an `https` URL.
//! The token, the URL and the bytes are never logged.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::voice::{Media, MediaError, MediaId, MediaSource};
use async_trait::async_trait;
use degrau::deadline::Deadline;
use serde::Deserialize;

use degrau_adapters::webhook::address::AddressPolicy;
use degrau_adapters::webhook::resolver::{CheckedResolver, Lookup, SystemLookup};

/// Longest one request may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Most attempts at the media's URL lookup (a 429, a 5xx, no answer).
const MAX_ATTEMPTS: u32 = 3;

/// The Graph API's media client.
#[derive(Clone)]
pub struct GraphMedia {
    http: reqwest::Client,
    base_url: String,
    version: String,
    token: String,
    policy: AddressPolicy,
}

impl std::fmt::Debug for GraphMedia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphMedia")
            .field("base_url", &self.base_url)
            .field("token", &"<redacted>")
            .finish()
    }
}

#[derive(Deserialize)]
struct MediaUrl {
    url: String,
    #[serde(default)]
    mime_type: String,
    #[serde(default)]
    sha256: Option<String>,
    #[serde(default)]
    file_size: Option<u64>,
}

impl GraphMedia {
    /// A client of the Graph API at `base_url`, `version`, with the access `token`,
    /// reaching only the addresses `policy` allows.
    pub fn new(
        base_url: &str,
        version: &str,
        token: &str,
        policy: AddressPolicy,
    ) -> Result<Self, String> {
        Self::with_lookup(base_url, version, token, policy, Arc::new(SystemLookup))
    }

    /// [`GraphMedia::new`] resolving hosts with `lookup` (tests use a stub).
    pub fn with_lookup(
        base_url: &str,
        version: &str,
        token: &str,
        policy: AddressPolicy,
        lookup: Arc<dyn Lookup>,
    ) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .dns_resolver(CheckedResolver::new(policy, lookup))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(Duration::from_secs(3))
            .build()
            .map_err(|err| format!("the Graph API's media client: {err}"))?;
        Ok(GraphMedia {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            version: version.to_owned(),
            token: token.to_owned(),
            policy,
        })
    }

    /// The media's URL and what Meta declares of it, retrying what may pass.
    async fn locate(&self, id: &MediaId, deadline: Deadline) -> Result<MediaUrl, MediaError> {
        let url = format!("{}/{}/{}", self.base_url, self.version, id.as_str());
        let mut last = String::from("no attempt fit the deadline");
        for attempt in 1..=MAX_ATTEMPTS {
            if !deadline.allows(Duration::from_millis(500)) {
                break;
            }
            let sent = self
                .http
                .get(&url)
                .bearer_auth(&self.token)
                .timeout(ATTEMPT_TIMEOUT.min(deadline.remaining()))
                .send()
                .await;
            match sent {
                Ok(response) if response.status().is_success() => {
                    return response
                        .json()
                        .await
                        .map_err(|_| MediaError::Refused("the media lookup did not read".into()));
                }
                Ok(response) if passes(response.status().as_u16()) => {
                    last = format!("HTTP {}", response.status().as_u16());
                }
                Ok(response) => {
                    return Err(MediaError::Refused(format!(
                        "the media lookup answered HTTP {}",
                        response.status().as_u16()
                    )));
                }
                Err(err) if is_refused_address(&err) => {
                    return Err(MediaError::Refused("the address rules refuse it".into()));
                }
                Err(_) => last = "no answer".into(),
            }
            let wait = Duration::from_millis(200 << attempt);
            if !deadline.allows(wait + ATTEMPT_TIMEOUT.min(Duration::from_secs(1))) {
                break;
            }
            tokio::time::sleep(wait).await;
        }
        Err(MediaError::Unavailable(last))
    }

    /// The bytes at `url`, stopping past `max_bytes`.
    async fn download(
        &self,
        url: &str,
        max_bytes: u64,
        deadline: Deadline,
    ) -> Result<Vec<u8>, MediaError> {
        let parsed = url::Url::parse(url)
            .map_err(|_| MediaError::Refused("the media URL does not read".into()))?;
        let https = parsed.scheme() == "https";
        let loopback_http =
            self.policy == AddressPolicy::PublicAndLoopback && parsed.scheme() == "http";
        if !https && !loopback_http {
            return Err(MediaError::Refused("the media URL is not https".into()));
        }
        // An address in the URL is never looked up: the resolver cannot check it.
        let literal = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if literal.is_some_and(|ip| !self.policy.allows(ip)) {
            return Err(MediaError::Refused("the address rules refuse it".into()));
        }
        let sent = self
            .http
            .get(parsed)
            .bearer_auth(&self.token)
            .timeout(ATTEMPT_TIMEOUT.min(deadline.remaining()))
            .send()
            .await;
        let mut response = match sent {
            Ok(response) if response.status().is_success() => response,
            Ok(response) if passes(response.status().as_u16()) => {
                return Err(MediaError::Unavailable(format!(
                    "the media answered HTTP {}",
                    response.status().as_u16()
                )));
            }
            Ok(response) => {
                return Err(MediaError::Refused(format!(
                    "the media answered HTTP {}",
                    response.status().as_u16()
                )));
            }
            Err(err) if is_refused_address(&err) => {
                return Err(MediaError::Refused("the address rules refuse it".into()));
            }
            Err(_) => return Err(MediaError::Unavailable("no answer from the media".into())),
        };
        if response.content_length().is_some_and(|len| len > max_bytes) {
            return Err(MediaError::TooLarge);
        }
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    bytes.extend_from_slice(&chunk);
                    if bytes.len() as u64 > max_bytes {
                        return Err(MediaError::TooLarge);
                    }
                }
                Ok(None) => return Ok(bytes),
                Err(_) => return Err(MediaError::Unavailable("the media download broke".into())),
            }
        }
    }
}

/// A status a later attempt may get past.
fn passes(status: u16) -> bool {
    status == 429 || status >= 500
}

/// True when the checking resolver refused every address of the host.
fn is_refused_address(err: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = source {
        if error
            .downcast_ref::<degrau_adapters::webhook::resolver::RefusedAddress>()
            .is_some()
        {
            return true;
        }
        source = error.source();
    }
    false
}

#[async_trait]
impl MediaSource for GraphMedia {
    async fn fetch(
        &self,
        id: &MediaId,
        max_bytes: u64,
        deadline: Deadline,
    ) -> Result<Media, MediaError> {
        let located = self.locate(id, deadline).await?;
        if located.file_size.is_some_and(|size| size > max_bytes) {
            return Err(MediaError::TooLarge);
        }
        let bytes = self.download(&located.url, max_bytes, deadline).await?;
        Ok(Media {
            bytes,
            mime: located.mime_type,
            sha256: located.sha256,
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::extract::Path;
    use axum::http::HeaderMap;
    use axum::routing::get;
    use serde_json::json;

    use super::*;
    /// A lookup from a fixed table: no test asks a real DNS server (as the
    /// adapters' own resolver tests do).
    struct StubLookup(std::collections::HashMap<String, Vec<IpAddr>>);

    impl StubLookup {
        fn of(entries: &[(&str, &[&str])]) -> Arc<StubLookup> {
            Arc::new(StubLookup(
                entries
                    .iter()
                    .map(|(host, ips)| {
                        let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
                        ((*host).to_owned(), ips)
                    })
                    .collect(),
            ))
        }
    }

    impl Lookup for StubLookup {
        fn lookup(
            &self,
            host: String,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>
        {
            let found = self.0.get(&host).cloned().unwrap_or_default();
            Box::pin(async move { Ok(found) })
        }
    }

    /// A Graph API serving one media (`bytes`, declared `file_size`), its URL on
    /// the same server (or `cdn`).
    async fn fake_graph(bytes: Vec<u8>, file_size: usize, cdn: Option<&str>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let url = cdn.map_or(format!("{base}/cdn/1"), str::to_owned);
        let served = bytes.clone();
        let app = axum::Router::new()
            .route(
                "/v23.0/{id}",
                get(move |Path(id): Path<String>, headers: HeaderMap| {
                    let url = url.clone();
                    async move {
                        assert_eq!(headers["authorization"], "Bearer tok");
                        axum::Json(json!({"url": url, "mime_type": "audio/ogg",
                            "sha256": "00", "file_size": file_size, "id": id}))
                    }
                }),
            )
            .route("/cdn/1", get(move || async move { served.clone() }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    }

    fn media(base: &str, policy: AddressPolicy) -> GraphMedia {
        let lookup = StubLookup::of(&[("cdn.example", &["10.0.0.7"] as &[&str])]);
        GraphMedia::with_lookup(base, "v23.0", "tok", policy, lookup).unwrap()
    }

    fn minute() -> Deadline {
        Deadline::after(Duration::from_secs(60))
    }

    fn id() -> MediaId {
        MediaId::parse("1234").unwrap()
    }

    #[tokio::test]
    async fn the_media_is_located_then_downloaded_with_the_token() {
        let base = fake_graph(b"OggS...".to_vec(), 7, None).await;
        let fetched = media(&base, AddressPolicy::PublicAndLoopback)
            .fetch(&id(), 100, minute())
            .await
            .unwrap();
        assert_eq!(fetched.bytes, b"OggS...");
        assert_eq!(fetched.mime, "audio/ogg");
        assert_eq!(fetched.sha256.as_deref(), Some("00"));
    }

    #[tokio::test]
    async fn a_declared_size_or_a_body_over_the_limit_is_too_large() {
        let base = fake_graph(vec![0; 50], 500, None).await;
        let graph = media(&base, AddressPolicy::PublicAndLoopback);
        assert_eq!(
            graph.fetch(&id(), 100, minute()).await,
            Err(MediaError::TooLarge)
        );
        let lying = fake_graph(vec![0; 500], 5, None).await;
        let graph = media(&lying, AddressPolicy::PublicAndLoopback);
        assert_eq!(
            graph.fetch(&id(), 100, minute()).await,
            Err(MediaError::TooLarge)
        );
    }

    #[tokio::test]
    async fn a_url_the_address_rules_refuse_is_never_fetched() {
        // A private address behind a public-looking name, and plain http deployed.
        let base = fake_graph(vec![1], 1, Some("https://cdn.example/a")).await;
        let graph = media(&base, AddressPolicy::PublicAndLoopback);
        assert!(matches!(
            graph.fetch(&id(), 100, minute()).await,
            Err(MediaError::Refused(_))
        ));
        // Deployed: plain http, and an address in the URL that is not public.
        for url in [
            "http://cdn.example/a",
            "https://127.0.0.1/a",
            "https://169.254.169.254/a",
        ] {
            let base = fake_graph(vec![1], 1, Some(url)).await;
            let deployed = media(&base, AddressPolicy::PublicOnly);
            assert!(
                matches!(
                    deployed.fetch(&id(), 100, minute()).await,
                    Err(MediaError::Refused(_))
                ),
                "{url}"
            );
        }
    }
}
