//! The API key's lookup: the key itself from the environment (local runs), or an
//! SSM SecureString read once at init (what the template sets), so the key is never
//! in the template or the function's configuration.

use crate::config::{ApiKeySource, ConfigError};

/// The key: the value itself, or the decrypted SSM parameter. A missing or empty
/// parameter fails init with a message naming it (never the key).
pub async fn api_key(
    source: &ApiKeySource,
    ssm: &aws_sdk_ssm::Client,
) -> Result<String, ConfigError> {
    match source {
        ApiKeySource::Value(key) => Ok(key.clone()),
        ApiKeySource::SsmParameter(name) => read_parameter(ssm, name)
            .await
            .map_err(|e| ConfigError(format!("ANTHROPIC_API_KEY_PARAMETER: {e}"))),
    }
}

/// A secret from the environment (`variable` holds it) or from the SSM
/// SecureString its `…_PARAMETER` variable names, read once at init; a missing or
/// empty one fails init naming the variable or parameter, never the value.
pub async fn secret(
    variable: &str,
    source: &crate::whatsapp::SecretSource,
    ssm: &aws_sdk_ssm::Client,
) -> Result<String, ConfigError> {
    use crate::whatsapp::SecretSource;
    match source {
        SecretSource::Value(value) => Ok(value.clone()),
        SecretSource::SsmParameter(name) => read_parameter(ssm, name)
            .await
            .map_err(|e| ConfigError(format!("{variable}_PARAMETER: {e}"))),
    }
}

/// The decrypted value of the SSM parameter `name`. A failed read or an empty
/// parameter is an error naming the parameter, never its value.
pub async fn read_parameter(ssm: &aws_sdk_ssm::Client, name: &str) -> Result<String, String> {
    let output = ssm
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
    output
        .parameter()
        .and_then(|p| p.value())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("the SSM parameter {name:?} is empty"))
}
