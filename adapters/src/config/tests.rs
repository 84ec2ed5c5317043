//! The configuration's tests: defaults, every documented variable, and the first bad
//! variable named.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn jwt_is_the_default_auth_mode() {
    let config =
        Config::from_map(&vars(&[("TABLE_NAME", "t"), ("ANTHROPIC_API_KEY", "k")])).unwrap();
    assert_eq!(
        config.auth,
        AuthConfig::Jwt {
            claim: "custom:tenant_id".into(),
            audiences: Vec::new(),
        }
    );
    let pinned = Config::from_map(&vars(&[
        ("TABLE_NAME", "t"),
        ("ANTHROPIC_API_KEY", "k"),
        ("TENANT_CLAIM", "tenant"),
        ("JWT_AUDIENCE", "client-a, client-b,"),
    ]))
    .unwrap();
    assert_eq!(
        pinned.auth,
        AuthConfig::Jwt {
            claim: "tenant".into(),
            audiences: vec!["client-a".into(), "client-b".into()],
        }
    );
    assert_eq!(config.anthropic_base_url, "https://api.anthropic.com");
    // The plan names the deployment's model as the one a tenant may choose.
    let expected = Defaults {
        platform: degrau::platform::Plan {
            models: Some(vec![Defaults::default().model]),
            ..degrau::platform::Plan::default()
        },
        ..Defaults::default()
    };
    assert_eq!(config.defaults, expected);
    assert_eq!(config.scopes.platform_admin, "platform:admin");
    assert_eq!(config.ask_timeout_seconds, DEFAULT_ASK_TIMEOUT_SECONDS);
    assert_eq!(
        config.stream_timeout_seconds,
        DEFAULT_STREAM_TIMEOUT_SECONDS
    );
    assert_eq!(config.webhook_secrets, SecretNames::default());
    assert_eq!(config.webhook_secrets.path, "/degrau/webhooks/");
}

#[test]
fn reads_every_documented_variable() {
    let config = Config::from_map(&vars(&[
        ("TABLE_NAME", "degrau"),
        ("JOBS_QUEUE_URL", "http://q"),
        ("ANTHROPIC_API_KEY", "k"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4010/"),
        ("MODEL", "claude-opus-5"),
        ("SUMMARY_MODEL", "claude-haiku-4-5"),
        ("COMPACTION_THRESHOLD_TOKENS", "9000"),
        ("WINDOW_KEEP_MESSAGES", "8"),
        ("SESSION_IDLE_MINUTES", "30"),
        ("AUTH_MODE", "dev"),
        ("MODEL_TIMEOUT_SECONDS", "5"),
        ("ASK_TIMEOUT_SECONDS", "20"),
        ("STREAM_TIMEOUT_SECONDS", "300"),
        ("CORS_ALLOWED_ORIGIN", "https://chat.example.com"),
        ("CONTEXT_POLICY", "sliding"),
        ("SWEEP_BUCKETS", "64"),
        ("WINDOW_KEEP_TOKENS", "1500"),
        ("CACHE_TTL", "1h"),
        ("PAUSE_FOLD", "off"),
        ("PAUSE_FOLD_KEEP_MESSAGES", "6"),
        ("QUOTA_ROUNDS_PER_HOUR", "120"),
        ("QUOTA_SUMMARY_CALLS_PER_HOUR", "30"),
    ]))
    .unwrap();
    assert_eq!(config.defaults.quota.rounds_per_hour, 120);
    assert_eq!(config.defaults.quota.summary_calls_per_hour, 30);
    assert_eq!(config.defaults.compaction.keep_tokens, 1500);
    assert!(!config.defaults.compaction.pause_fold);
    assert_eq!(config.defaults.compaction.fold_keep_messages, 6);
    assert_eq!(
        config.defaults.cache_ttl,
        degrau::plan::cache_ttl::CacheTtlPolicy::OneHour
    );
    assert_eq!(config.defaults.sweep_buckets, 64);
    assert_eq!(config.auth, AuthConfig::Dev);
    assert_eq!(config.anthropic_base_url, "http://127.0.0.1:4010");
    assert_eq!(config.jobs_queue_url.as_deref(), Some("http://q"));
    assert_eq!(config.defaults.model, "claude-opus-5");
    assert_eq!(config.defaults.compaction.threshold_tokens, 9000);
    assert_eq!(config.defaults.compaction.keep_messages, 8);
    assert_eq!(config.defaults.session_idle_minutes, 30);
    assert_eq!(config.model_timeout_seconds, 5);
    assert_eq!(config.ask_timeout_seconds, 20);
    assert_eq!(config.stream_timeout_seconds, 300);
    assert_eq!(
        config.cors_allowed_origin.as_deref(),
        Some("https://chat.example.com")
    );
    assert_eq!(
        config.defaults.context_policy,
        degrau::tenant::ContextPolicy::SlidingWindow
    );
}

#[test]
fn fails_fast_naming_the_variable() {
    let err = Config::from_map(&vars(&[("ANTHROPIC_API_KEY", "k")])).unwrap_err();
    assert!(err.to_string().contains("TABLE_NAME"));
    let err = Config::from_map(&vars(&[("TABLE_NAME", "t")])).unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"));
    let from_ssm = Config::from_map(&vars(&[
        ("TABLE_NAME", "t"),
        ("ANTHROPIC_API_KEY_PARAMETER", "/degrau/key"),
    ]))
    .unwrap();
    assert_eq!(
        from_ssm.anthropic_api_key,
        Some(SecretSource::SsmParameter("/degrau/key".into()))
    );
    let direct = Config::from_map(&vars(&[
        ("TABLE_NAME", "t"),
        ("ANTHROPIC_API_KEY", "sk-secret"),
    ]))
    .unwrap();
    assert!(
        !format!("{direct:?}").contains("sk-secret"),
        "the key never reaches a log"
    );
    let base = [("TABLE_NAME", "t"), ("ANTHROPIC_API_KEY", "k")];
    for (name, value) in [
        ("AUTH_MODE", "none"),
        ("COMPACTION_THRESHOLD_TOKENS", "lots"),
        ("SESSION_IDLE_MINUTES", "0"),
        // Longer than the default transcript retention (90 days).
        ("SESSION_IDLE_MINUTES", "200000"),
        ("CONTEXT_POLICY", "everything"),
        ("ASK_TIMEOUT_SECONDS", "2"),
        ("ASK_TIMEOUT_SECONDS", "soon"),
        ("STREAM_TIMEOUT_SECONDS", "1"),
        ("CORS_ALLOWED_ORIGIN", "chat.example.com"),
        ("CORS_ALLOWED_ORIGIN", "https://chat.example.com/"),
        ("SWEEP_BUCKETS", "0"),
        ("SWEEP_BUCKETS", "256"),
        ("MODEL_PROVIDER", "openai"),
        ("CACHE_TTL", "10m"),
        ("PAUSE_FOLD", "yes"),
        ("PAUSE_FOLD_KEEP_MESSAGES", "0"),
        ("PAUSE_FOLD_KEEP_MESSAGES", "few"),
        ("WINDOW_KEEP_TOKENS", "many"),
        ("QUOTA_ROUNDS_PER_HOUR", "-1"),
        ("QUOTA_SUMMARY_CALLS_PER_HOUR", "lots"),
        ("WEBHOOK_SECRETS_PATH", "/"),
        ("WEBHOOK_SECRETS_PATH", "/degrau/webhooks"),
        ("WEBHOOK_SECRETS_PATH", "degrau/webhooks/"),
        ("WEBHOOK_SECRETS_PATH", "/degrau//webhooks/"),
        ("PSEUDONYM_KEY_PARAMETER", "/degrau/webhooks/x/key"),
        ("PSEUDONYM_KEY_PARAMETER", "degrau-key"),
    ] {
        let mut all = vars(&base);
        all.insert(name.into(), value.into());
        let err = Config::from_map(&all).unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn dev_auth_is_refused_on_lambda_and_taken_by_a_local_runner() {
    let local = [
        ("TABLE_NAME", "t"),
        ("ANTHROPIC_API_KEY", "k"),
        ("AUTH_MODE", "dev"),
        ("AWS_LAMBDA_FUNCTION_NAME", "ask"),
    ];
    assert_eq!(
        Config::from_map(&vars(&local)).unwrap().auth,
        AuthConfig::Dev
    );
    let mut lambda = vars(&local);
    lambda.insert("LAMBDA_TASK_ROOT".into(), "/var/task".into());
    let err = Config::from_map(&lambda).unwrap_err().to_string();
    assert!(
        err.contains("AUTH_MODE=dev is refused on AWS Lambda"),
        "{err}"
    );
    lambda.insert("AUTH_MODE".into(), "jwt".into());
    assert!(Config::from_map(&lambda).is_ok());
}

#[test]
fn bedrock_needs_no_api_key_and_anthropic_stays_the_default() {
    let bedrock = Config::from_map(&vars(&[
        ("TABLE_NAME", "t"),
        ("MODEL_PROVIDER", "bedrock"),
        ("MODEL", "us.anthropic.claude-sonnet-5-v1:0"),
    ]))
    .unwrap();
    assert_eq!(bedrock.model_provider, ModelProvider::Bedrock);
    assert_eq!(bedrock.anthropic_api_key, None);
    assert_eq!(bedrock.defaults.model, "us.anthropic.claude-sonnet-5-v1:0");
    let default =
        Config::from_map(&vars(&[("TABLE_NAME", "t"), ("ANTHROPIC_API_KEY", "k")])).unwrap();
    assert_eq!(default.model_provider, ModelProvider::Anthropic);
    let err = Config::from_map(&vars(&[
        ("TABLE_NAME", "t"),
        ("MODEL_PROVIDER", "anthropic"),
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
}
