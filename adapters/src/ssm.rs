//! Secrets from SSM Parameter Store: a [`SecretSource`] (the secret itself from the
//! environment for local runs, or the name of an SSM SecureString, what the template
//! sets) read once at init, and [`read_parameter`], the one read of a decrypted
//! parameter that every secret goes through (the webhook tools' signing secrets too).
//! A secret is never in the template, the function's configuration or a message.
//!
//! This module knows no other of the crate: the configuration and the WhatsApp
//! channel both use it.

use std::collections::HashMap;

/// Where a secret comes from: `NAME` (the value) or `NAME_PARAMETER` (an SSM
/// parameter's name).
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The variable itself (local runs; the stack sets a dummy API key).
    Value(String),
    /// The name of an SSM SecureString holding it.
    SsmParameter(String),
}

// Written by hand so that `{:?}` of a configuration cannot leak the secret.
impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Value(_) => f.write_str("Value(<redacted>)"),
            SecretSource::SsmParameter(name) => write!(f, "SsmParameter({name:?})"),
        }
    }
}

impl SecretSource {
    /// The source `vars` set for the secret `name`: `name` itself wins over
    /// `{name}_PARAMETER`; `None` when neither is set (a blank value is unset).
    pub fn from_vars(vars: &HashMap<String, String>, name: &str) -> Option<SecretSource> {
        let get = |name: &str| {
            vars.get(name)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        get(name)
            .map(SecretSource::Value)
            .or_else(|| get(&format!("{name}_PARAMETER")).map(SecretSource::SsmParameter))
    }

    /// The secret `name`: the value itself, or the decrypted SSM parameter. A
    /// missing or empty parameter is an error naming `{name}_PARAMETER` and the
    /// parameter, never the value.
    pub async fn read(&self, name: &str, ssm: &aws_sdk_ssm::Client) -> Result<String, String> {
        match self {
            SecretSource::Value(value) => Ok(value.clone()),
            SecretSource::SsmParameter(parameter) => read_parameter(ssm, parameter)
                .await
                .map_err(|e| format!("{name}_PARAMETER: {e}")),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_wins_over_the_parameter_and_a_blank_one_is_unset() {
        let vars = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let both = vars(&[("KEY", "k"), ("KEY_PARAMETER", "/p")]);
        assert_eq!(
            SecretSource::from_vars(&both, "KEY"),
            Some(SecretSource::Value("k".into()))
        );
        let parameter = vars(&[("KEY", "  "), ("KEY_PARAMETER", " /p ")]);
        assert_eq!(
            SecretSource::from_vars(&parameter, "KEY"),
            Some(SecretSource::SsmParameter("/p".into()))
        );
        assert_eq!(SecretSource::from_vars(&vars(&[]), "KEY"), None);
        assert!(!format!("{:?}", SecretSource::Value("k3y".into())).contains("k3y"));
    }
}
