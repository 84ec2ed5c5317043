//! The webhooks' signing secrets: SSM SecureStrings, read decrypted once per
//! instance and parameter and kept for the life of the process. A failed read is
//! not kept (the next call tries again); the secret never reaches a log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

/// Where signing secrets come from.
#[async_trait]
pub trait SigningSecrets: Send + Sync {
    /// The secret held by the parameter `name`, or why it cannot be had (naming
    /// the parameter, never the secret).
    async fn secret(&self, name: &str) -> Result<Arc<[u8]>, String>;
}

/// Secrets from SSM Parameter Store, cached.
pub struct SsmSecrets {
    client: aws_sdk_ssm::Client,
    cache: Mutex<HashMap<String, Arc<[u8]>>>,
}

impl SsmSecrets {
    /// Reads through `client`.
    pub fn new(client: aws_sdk_ssm::Client) -> Self {
        SsmSecrets {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, name: &str) -> Option<Arc<[u8]>> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(name)
            .cloned()
    }
}

#[async_trait]
impl SigningSecrets for SsmSecrets {
    async fn secret(&self, name: &str) -> Result<Arc<[u8]>, String> {
        if let Some(secret) = self.cached(name) {
            return Ok(secret);
        }
        let output = self
            .client
            .get_parameter()
            .name(name)
            .with_decryption(true)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "could not read the SSM parameter {name:?}: {}",
                    aws_sdk_ssm::error::DisplayErrorContext(e)
                )
            })?;
        let value = output
            .parameter()
            .and_then(|p| p.value())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the SSM parameter {name:?} is empty"))?;
        let secret: Arc<[u8]> = Arc::from(value.as_bytes());
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.to_owned(), secret.clone());
        Ok(secret)
    }
}

/// Fixed secrets (tests, and local tools without SSM).
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
