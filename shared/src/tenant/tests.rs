//! Tests of the tenant's settings: defaults, overrides, bounds, and how a
//! `CONFIG` item reads.

use super::*;

#[test]
fn tenant_values_override_defaults_and_absent_ones_do_not() {
    let defaults = Defaults::default();
    let tenant = TenantConfig {
        instructions: Some("Book haircuts.".into()),
        compaction_threshold_tokens: Some(5000),
        session_idle_minutes: Some(30),
        ..TenantConfig::default()
    };
    let settings = Settings::resolve(&defaults, Some(&tenant)).unwrap();
    assert_eq!(settings.instructions, "Book haircuts.");
    assert_eq!(settings.compaction.threshold_tokens, 5000);
    assert_eq!(
        settings.compaction.keep_messages,
        defaults.compaction.keep_messages
    );
    assert_eq!(settings.session_idle_minutes, 30);
    assert_eq!(settings.model, defaults.model);
    assert_eq!(
        Settings::resolve(&defaults, None).unwrap().instructions,
        defaults.instructions
    );
}

#[test]
fn blank_instructions_fall_back_to_the_default() {
    let tenant = TenantConfig {
        instructions: Some("  ".into()),
        ..TenantConfig::default()
    };
    let defaults = Defaults::default();
    assert_eq!(
        Settings::resolve(&defaults, Some(&tenant))
            .unwrap()
            .instructions,
        defaults.instructions
    );
}

#[test]
fn a_thinking_budget_is_read_within_its_bounds_and_refused_outside() {
    let config: TenantConfig = serde_json::from_str(r#"{"thinking_budget_tokens": 2048}"#).unwrap();
    let settings = Settings::resolve(&Defaults::default(), Some(&config)).unwrap();
    assert_eq!(settings.thinking_budget_tokens, Some(2048));
    assert_eq!(
        Settings::resolve(&Defaults::default(), None)
            .unwrap()
            .thinking_budget_tokens,
        None,
        "off unless the tenant turns it on"
    );
    for bad in [0, 1023, 8001] {
        let error = serde_json::from_str::<TenantConfig>(&format!(
            r#"{{"thinking_budget_tokens": {bad}}}"#
        ))
        .unwrap_err();
        assert!(
            error.to_string().contains("thinking_budget_tokens"),
            "{error}"
        );
    }
}

#[test]
fn a_retention_of_zero_or_shorter_than_the_idle_timeout_is_refused() {
    let defaults = Defaults::default();
    let with = |days, idle_minutes| TenantConfig {
        transcript_retention_days: Some(days),
        session_idle_minutes: Some(idle_minutes),
        ..TenantConfig::default()
    };
    for (days, idle) in [(0, 60), (1, 24 * 60 + 1), (2, 3 * 24 * 60), (1, 0)] {
        let error = Settings::resolve(&defaults, Some(&with(days, idle))).unwrap_err();
        assert!(error.to_string().contains("must be at least"), "{error}");
    }
    for (days, idle) in [(1, 60), (1, 24 * 60), (3, 3 * 24 * 60)] {
        let settings = Settings::resolve(&defaults, Some(&with(days, idle))).unwrap();
        assert_eq!(
            settings.retention_after_activity_seconds(),
            i64::from(days) * 86_400 + idle as i64 * 60
        );
    }
    assert!(Settings::resolve(&defaults, None).is_ok());
}

#[test]
fn tools_default_to_every_built_in_and_a_declared_list_replaces_them() {
    let defaults = Defaults::default();
    let names = |settings: Settings| {
        settings
            .tools
            .iter()
            .map(|t| t.name().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(Settings::resolve(&defaults, None).unwrap()),
        crate::tools::demo::BUILT_IN_TOOLS
    );
    let config: TenantConfig = serde_json::from_str(r#"{"tools": ["book_slot"]}"#).unwrap();
    assert_eq!(
        names(Settings::resolve(&defaults, Some(&config)).unwrap()),
        ["book_slot"]
    );
    let none: TenantConfig = serde_json::from_str(r#"{"tools": []}"#).unwrap();
    assert!(
        Settings::resolve(&defaults, Some(&none))
            .unwrap()
            .tools
            .is_empty()
    );
}

#[test]
fn a_config_with_a_broken_tool_does_not_read_and_says_which_field() {
    let error = serde_json::from_str::<TenantConfig>(
        r#"{"instructions": "Book haircuts.", "tools": ["list_free_slots",
            {"name": "book_slot", "description": "Books.", "input_schema": {"type": "object"},
             "webhook": {"url": "https://tools.example.com", "secret_parameter": "/degrau/x",
                         "timeout_ms": 60000}}]}"#,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("tools[1] (`book_slot`): webhook.timeout_ms must be from 100 to 10000"),
        "{error}"
    );
}

#[test]
fn the_cache_ttl_is_one_of_three_values_and_the_tenant_overrides_the_default() {
    let defaults = Defaults::default();
    assert_eq!(
        Settings::resolve(&defaults, None).unwrap().cache_ttl,
        defaults.cache_ttl
    );
    for (text, policy) in [
        ("5m", CacheTtlPolicy::FiveMinutes),
        ("1h", CacheTtlPolicy::OneHour),
        ("auto", CacheTtlPolicy::Auto),
    ] {
        let config: TenantConfig =
            serde_json::from_str(&format!(r#"{{"cache_ttl": "{text}"}}"#)).unwrap();
        assert_eq!(
            Settings::resolve(&defaults, Some(&config))
                .unwrap()
                .cache_ttl,
            policy
        );
        assert_eq!(
            serde_json::to_value(&config).unwrap()["cache_ttl"],
            text,
            "written back as read"
        );
    }
    for bad in [r#""10m""#, r#""1H""#, r#""""#, "60"] {
        let error = serde_json::from_str::<TenantConfig>(&format!(r#"{{"cache_ttl": {bad}}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cache_ttl") || error.contains("string"),
            "{bad}: {error}"
        );
    }
}

#[test]
fn the_token_keep_is_a_tenant_setting_beside_the_message_keep() {
    let defaults = Defaults::default();
    let config: TenantConfig =
        serde_json::from_str(r#"{"window_keep_tokens": 1500, "window_keep_messages": 4}"#).unwrap();
    let settings = Settings::resolve(&defaults, Some(&config)).unwrap();
    assert_eq!(settings.compaction.keep_tokens, 1500);
    assert_eq!(settings.compaction.keep_messages, 4);
    let unset = Settings::resolve(&defaults, None).unwrap();
    assert_eq!(
        unset.compaction.keep_tokens,
        defaults.compaction.keep_tokens
    );
    assert!(serde_json::from_str::<TenantConfig>(r#"{"window_keep_tokens": -1}"#).is_err());
}

#[test]
fn unknown_config_fields_are_refused() {
    assert!(serde_json::from_str::<TenantConfig>(r#"{"instructons": "typo"}"#).is_err());
}
