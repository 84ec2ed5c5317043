//! The `events-out` function's configuration: only what a delivery needs.

use std::collections::HashMap;

use super::{AuthConfig, ConfigError, Vars, auth, webhook_secrets};
use crate::webhook::SecretNames;

/// What the `events-out` function reads: the outbound address policy (loopback
/// too with `AUTH_MODE=dev`, refused on Lambda like everywhere) and where the
/// signing secrets lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryConfig {
    /// `AUTH_MODE`.
    pub auth: AuthConfig,
    /// `WEBHOOK_SECRETS_PATH` and `PSEUDONYM_KEY_PARAMETER`.
    pub webhook_secrets: SecretNames,
}

impl DeliveryConfig {
    /// Reads the environment.
    pub fn from_env() -> Result<DeliveryConfig, ConfigError> {
        Self::from_map(&std::env::vars().collect())
    }

    /// Reads a map of variables.
    pub fn from_map(vars: &HashMap<String, String>) -> Result<DeliveryConfig, ConfigError> {
        let vars = Vars(vars);
        Ok(DeliveryConfig {
            auth: auth(&vars)?,
            webhook_secrets: webhook_secrets(&vars)?,
        })
    }
}
