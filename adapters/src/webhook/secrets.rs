//! The webhooks' signing secrets (and the deployment's pseudonym secret): SSM
//! SecureStrings, read decrypted once per instance and parameter and kept for
//! [`SECRET_CACHE_TTL`], so a rotated secret signs on a warm instance for at most
//! that long. A failed read is not kept (the next call tries again); the secret
//! never reaches a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

/// How long a secret read from SSM is kept: a rotation reaches every warm instance
/// within it, and an instance reads each parameter at most once in it.
pub const SECRET_CACHE_TTL: Duration = Duration::from_secs(300);

/// Where signing secrets come from.
#[async_trait]
pub trait SigningSecrets: Send + Sync {
    /// The secret held by the parameter `name`, or why it cannot be had (naming
    /// the parameter, never the secret).
    async fn secret(&self, name: &str) -> Result<Arc<[u8]>, String>;
}

/// A secret as read, and when.
type Cached = (Arc<[u8]>, Instant);

/// Secrets from SSM Parameter Store, cached for a while.
pub struct SsmSecrets {
    client: aws_sdk_ssm::Client,
    ttl: Duration,
    cache: Mutex<HashMap<String, Cached>>,
}

impl SsmSecrets {
    /// Reads through `client`, keeping each secret [`SECRET_CACHE_TTL`].
    pub fn new(client: aws_sdk_ssm::Client) -> Self {
        Self::with_ttl(client, SECRET_CACHE_TTL)
    }

    /// Reads through `client`, keeping each secret `ttl`.
    pub fn with_ttl(client: aws_sdk_ssm::Client, ttl: Duration) -> Self {
        SsmSecrets {
            client,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, name: &str) -> Option<Arc<[u8]>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .filter(|(_, read_at)| read_at.elapsed() < self.ttl)
            .map(|(secret, _)| secret.clone())
    }
}

#[async_trait]
impl SigningSecrets for SsmSecrets {
    async fn secret(&self, name: &str) -> Result<Arc<[u8]>, String> {
        if let Some(secret) = self.cached(name) {
            return Ok(secret);
        }
        let value = crate::ssm::read_parameter(&self.client, name).await?;
        let secret: Arc<[u8]> = Arc::from(value.as_bytes());
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.to_owned(), (secret.clone(), Instant::now()));
        Ok(secret)
    }
}

/// Fixed secrets (tests, local tools without SSM, and the WhatsApp webhook's
/// events adapter, which names contacts with the pseudonym secret it read at init).
#[derive(Debug, Clone, Default)]
pub struct StaticSecrets(pub HashMap<String, String>);

#[async_trait]
impl SigningSecrets for StaticSecrets {
    async fn secret(&self, name: &str) -> Result<Arc<[u8]>, String> {
        self.0
            .get(name)
            .map(|s| Arc::from(s.as_bytes()))
            .ok_or_else(|| format!("no secret named {name:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake SSM endpoint (the JSON protocol): `GetParameter` of `/known` answers
    /// "s3cret" after `failures` failures; anything else is not found.
    async fn fake_ssm(failures: usize) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<Value>>>) {
        use axum::http::StatusCode;
        let calls = Arc::new(AtomicUsize::new(0));
        let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let (counted, recorded) = (calls.clone(), bodies.clone());
        let app = axum::Router::new().fallback(move |body: String| {
            let (counted, recorded) = (counted.clone(), recorded.clone());
            async move {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let body: Value = serde_json::from_str(&body).unwrap_or_default();
                recorded.lock().unwrap().push(body.clone());
                let (status, answer) = if n < failures {
                    (
                        StatusCode::BAD_REQUEST,
                        r#"{"__type":"InternalServerError","message":"try later"}"#.to_owned(),
                    )
                } else if body["Name"] == "/known" {
                    (
                        StatusCode::OK,
                        r#"{"Parameter":{"Name":"/known","Type":"SecureString","Value":"s3cret","Version":1}}"#
                            .to_owned(),
                    )
                } else if body["Name"] == "/rotated" {
                    // A new version at every read: what a rotation looks like.
                    (
                        StatusCode::OK,
                        format!(
                            r#"{{"Parameter":{{"Name":"/rotated","Type":"SecureString","Value":"v{n}","Version":{n}}}}}"#
                        ),
                    )
                } else {
                    (
                        StatusCode::BAD_REQUEST,
                        r#"{"__type":"ParameterNotFound","message":"no such parameter"}"#.to_owned(),
                    )
                };
                (status, [("content-type", "application/x-amz-json-1.1")], answer)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, calls, bodies)
    }

    fn client(endpoint: &str) -> aws_sdk_ssm::Client {
        use aws_sdk_ssm::config::{Credentials, Region, retry::RetryConfig};
        let config = aws_sdk_ssm::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .retry_config(RetryConfig::disabled())
            .build();
        aws_sdk_ssm::Client::from_conf(config)
    }

    #[tokio::test]
    async fn a_secret_is_read_decrypted_once_and_a_failed_read_is_not_kept() {
        let (url, calls, bodies) = fake_ssm(1).await;
        let secrets = SsmSecrets::new(client(&url));
        let failed = secrets.secret("/known").await.unwrap_err();
        assert!(failed.contains("\"/known\""), "{failed}");
        assert!(!failed.contains("s3cret"));
        for _ in 0..3 {
            assert_eq!(&*secrets.secret("/known").await.unwrap(), b"s3cret");
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "one failure, then one read"
        );
        assert_eq!(bodies.lock().unwrap()[1]["WithDecryption"], true);
        let missing = secrets.secret("/absent").await.unwrap_err();
        assert!(missing.contains("\"/absent\""), "{missing}");
    }

    #[tokio::test]
    async fn a_rotated_secret_is_read_again_once_its_cache_lifetime_passed() {
        assert_eq!(SECRET_CACHE_TTL, Duration::from_secs(300));
        let (url, calls, _) = fake_ssm(0).await;
        let secrets = SsmSecrets::with_ttl(client(&url), Duration::from_millis(200));
        let first = secrets.secret("/rotated").await.unwrap();
        assert_eq!(&*secrets.secret("/rotated").await.unwrap(), &*first, "kept");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(250)).await;
        let second = secrets.secret("/rotated").await.unwrap();
        assert_ne!(&*second, &*first, "the rotated value, read again");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
