//! `template.yaml` read as a deployer gets it: what a deploy that takes the
//! defaults is, against what a tenant's user, a flood or the data-protection law
//! would try (docs/deploy.md, Erasure, "Connect a WhatsApp number"). Each test reads
//! the template through the local provisioning's own loader
//! ([`crate::helpers::template`]).

use std::collections::HashMap;
use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::template;

/// Whether `text` matches a parameter's `AllowedPattern` (CloudFormation matches the
/// whole value), by Python's `re`.
fn allowed(pattern: &str, text: &str) -> bool {
    let output = Command::new("python3")
        .args([
            "-c",
            "import re, sys; print(bool(re.fullmatch(sys.argv[1], sys.argv[2])))",
            pattern,
            text,
        ])
        .output()
        .expect("run python3");
    String::from_utf8_lossy(&output.stdout).trim() == "True"
}

/// A parameter's default, as text.
fn default_of(template: &Value, parameter: &str) -> String {
    match &template["Parameters"][parameter]["Default"] {
        Value::String(text) => text.clone(),
        Value::Null => panic!("{parameter} has no default"),
        other => other.to_string(),
    }
}

/// A function's own environment variable.
fn env_of<'a>(template: &'a Value, function: &str, name: &str) -> &'a Value {
    &template["Resources"][function]["Properties"]["Environment"]["Variables"][name]
}

/// Every string in `value`, however deep.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(fields) => fields.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn webhook_secrets_lie_under_a_real_path_and_each_reader_knows_it_and_the_pseudonym_key() {
    let template = template();
    let pattern = template["Parameters"]["WebhookSecretsPath"]["AllowedPattern"]
        .as_str()
        .unwrap()
        .to_owned();
    for (path, ok) in [
        ("/degrau/webhooks/", true),
        ("/a/", true),
        ("/", false),
        ("", false),
        ("/degrau/webhooks", false),
        ("degrau/", false),
    ] {
        assert_eq!(allowed(&pattern, path), ok, "WebhookSecretsPath {path:?}");
    }
    // The webhook keys the queue's ids and the tombstones with it.
    assert_eq!(
        env_of(
            &template,
            "WhatsAppWebhookFunction",
            "PSEUDONYM_KEY_PARAMETER"
        ),
        &json!({"Ref": "PseudonymKeyParameter"})
    );
    let webhook_policies =
        strings(&template["Resources"]["WhatsAppWebhookFunction"]["Properties"]["Policies"]);
    assert!(
        webhook_policies
            .iter()
            .any(|s| s.ends_with(":parameter${PseudonymKeyParameter}")),
        "{webhook_policies:?}"
    );
    for function in ["AskFunction", "WhatsAppWorkerFunction"] {
        assert_eq!(
            env_of(&template, function, "WEBHOOK_SECRETS_PATH"),
            &json!({"Ref": "WebhookSecretsPath"}),
            "{function}"
        );
        assert_eq!(
            env_of(&template, function, "PSEUDONYM_KEY_PARAMETER"),
            &json!({"Ref": "PseudonymKeyParameter"}),
            "{function}"
        );
        let policies = strings(&template["Resources"][function]["Properties"]["Policies"]);
        assert!(
            policies
                .iter()
                .any(|s| s.ends_with(":parameter${PseudonymKeyParameter}")),
            "{function} may read the pseudonym secret: {policies:?}"
        );
    }
    // The defaults are a configuration the functions accept: the pseudonym secret
    // lies outside the tenants' path, so no tenant can name it.
    let vars: HashMap<String, String> = [
        ("TABLE_NAME", "t".to_owned()),
        ("ANTHROPIC_API_KEY", "k".to_owned()),
        (
            "WEBHOOK_SECRETS_PATH",
            default_of(&template, "WebhookSecretsPath"),
        ),
        (
            "PSEUDONYM_KEY_PARAMETER",
            default_of(&template, "PseudonymKeyParameter"),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = degrau_adapters::config::Config::from_map(&vars).unwrap();
    assert!(
        !config
            .webhook_secrets
            .pseudonym_key
            .starts_with(&config.webhook_secrets.path)
    );
}

#[test]
fn a_deploy_that_takes_the_defaults_gets_a_user_pool_whose_users_cannot_write_their_tenant() {
    let template = template();
    let parameters = &template["Parameters"];
    // No issuer given: the stack's own pool and app client.
    assert_eq!(default_of(&template, "JwtIssuer"), "");
    assert_eq!(
        template["Conditions"]["CreateUserPool"],
        json!({"Fn::Equals": [{"Ref": "JwtIssuer"}, ""]})
    );
    let resources = &template["Resources"];
    let pool = &resources["UserPool"];
    let client = &resources["UserPoolClient"];
    for resource in [pool, client] {
        assert_eq!(resource["Condition"], "CreateUserPool");
    }
    let pool = &pool["Properties"];
    assert_eq!(
        pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"], true,
        "no one signs up and picks a tenant"
    );
    let tenant_attribute = pool["Schema"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["Name"] == "tenant_id")
        .expect("the custom tenant_id attribute");
    assert_eq!(
        tenant_attribute["Mutable"], true,
        "an administrator may set it"
    );
    let claim = default_of(&template, "TenantClaim");
    assert_eq!(claim, "custom:tenant_id");
    let client = &client["Properties"];
    let writable: Vec<&str> = client["WriteAttributes"]
        .as_array()
        .expect("WriteAttributes listed: without a list every attribute is writable")
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        !writable.contains(&claim.as_str()),
        "the user may not write {claim}: {writable:?}"
    );
    assert!(
        client["ReadAttributes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == claim.as_str()),
        "the ID token carries the claim"
    );
    // The authorizer trusts that pool and client unless an issuer is given.
    let jwt = &resources["HttpApi"]["Properties"]["Auth"]["Authorizers"]["Jwt"]["JwtConfiguration"];
    assert_eq!(jwt["issuer"]["Fn::If"][0], "CreateUserPool");
    assert!(
        strings(&jwt["issuer"]["Fn::If"][1])
            .iter()
            .any(|s| s.contains("cognito-idp") && s.contains("${UserPool}"))
    );
    assert_eq!(jwt["issuer"]["Fn::If"][2], json!({"Ref": "JwtIssuer"}));
    assert_eq!(
        jwt["audience"]["Fn::If"][1],
        json!([{"Ref": "UserPoolClient"}])
    );
    assert_eq!(jwt["audience"]["Fn::If"][2], json!({"Ref": "JwtAudience"}));
    // The function reads the claim named by the parameter and checks the audience.
    assert_eq!(
        env_of(&template, "AskFunction", "TENANT_CLAIM"),
        &json!({"Ref": "TenantClaim"})
    );
    assert_eq!(
        env_of(&template, "AskFunction", "JWT_AUDIENCE")["Fn::If"][1],
        json!({"Ref": "UserPoolClient"})
    );
    // Your own issuer needs its audiences, and the own pool the attribute it holds.
    let rules = strings(&template["Rules"]);
    assert!(
        template["Rules"]["OwnIssuerNeedsAnAudience"]["RuleCondition"]
            .to_string()
            .contains("JwtIssuer")
    );
    assert!(rules.iter().any(|s| s == "custom:tenant_id"));
    assert!(parameters["JwtAudience"]["Default"] == "");
}

#[test]
fn erased_items_leave_the_backups_within_the_recovery_period_and_the_worker_reads_the_index() {
    let template = template();
    let period = &template["Parameters"]["PointInTimeRecoveryDays"];
    let days: u64 = default_of(&template, "PointInTimeRecoveryDays")
        .parse()
        .unwrap();
    assert!(days <= 7, "a week at most by default: {days}");
    assert_eq!(period["MaxValue"], 35);
    let pitr = &template["Resources"]["Table"]["Properties"]["PointInTimeRecoverySpecification"];
    assert_eq!(pitr["PointInTimeRecoveryEnabled"], true);
    assert_eq!(
        pitr["RecoveryPeriodInDays"],
        json!({"Ref": "PointInTimeRecoveryDays"})
    );
    // The README's erasure section says so, and what to do after a restore.
    let readme = include_str!("../../../docs/data-protection.md");
    let erasure = &readme[readme.find("**Erasure.**").unwrap()..];
    let erasure = &erasure[..erasure.find("## ").unwrap()];
    for said in ["PointInTimeRecoveryDays", "restore"] {
        assert!(erasure.contains(said), "the erasure section says {said}");
    }
    // A queued WhatsApp message names its record by incarnation: the worker may
    // query the incarnation index.
    let policies =
        strings(&template["Resources"]["WhatsAppWorkerFunction"]["Properties"]["Policies"]);
    assert!(
        policies
            .iter()
            .any(|s| s == "${Table.Arn}/index/by-incarnation"),
        "{policies:?}"
    );
}

#[test]
fn every_queue_and_the_table_are_encrypted_pinned_and_a_key_of_yours_reaches_all_of_them() {
    let template = template();
    assert_eq!(default_of(&template, "KmsKeyArn"), "");
    assert_eq!(
        template["Conditions"]["UseKmsKey"],
        json!({"Fn::Not": [{"Fn::Equals": [{"Ref": "KmsKeyArn"}, ""]}]})
    );
    let no_value = json!({"Ref": "AWS::NoValue"});
    let mut queues = 0;
    for (name, resource) in template["Resources"].as_object().unwrap() {
        let properties = &resource["Properties"];
        match resource["Type"].as_str() {
            Some("AWS::SQS::Queue") => {
                queues += 1;
                assert_eq!(
                    properties["SqsManagedSseEnabled"],
                    json!({"Fn::If": ["UseKmsKey", no_value, true]}),
                    "{name}: SQS-managed SSE unless a key is given"
                );
                assert_eq!(
                    properties["KmsMasterKeyId"],
                    json!({"Fn::If": ["UseKmsKey", {"Ref": "KmsKeyArn"}, no_value]}),
                    "{name}"
                );
            }
            Some("AWS::DynamoDB::Table") => {
                let sse = &properties["SSESpecification"]["Fn::If"];
                assert_eq!(sse[0], "UseKmsKey", "{name}");
                assert_eq!(
                    sse[1],
                    json!({"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": {"Ref": "KmsKeyArn"}}),
                    "{name}"
                );
            }
            Some("AWS::Serverless::Function") => {
                let statements = properties["Policies"][0]["Statement"].as_array().unwrap();
                let kms = statements
                    .iter()
                    .find(|s| s["Fn::If"][0] == "UseKmsKey")
                    .unwrap_or_else(|| panic!("{name} may not use the key"));
                let actions = strings(&kms["Fn::If"][1]["Action"]);
                for action in ["kms:Decrypt", "kms:GenerateDataKey"] {
                    assert!(actions.iter().any(|a| a == action), "{name}: {action}");
                }
                assert_eq!(kms["Fn::If"][1]["Resource"], json!({"Ref": "KmsKeyArn"}));
            }
            _ => {}
        }
    }
    assert_eq!(
        queues, 6,
        "the jobs, WhatsApp and events queues and their dead-letter queues"
    );
}

#[test]
fn the_streaming_route_streams_through_a_rest_api_that_checks_the_user_pools_tokens() {
    let template = template();
    let resources = &template["Resources"];
    let api = &resources["StreamApi"]["Properties"];
    let route = &api["DefinitionBody"]["paths"]["/contacts/{contact}/messages/stream"];
    let integration = &route["post"]["x-amazon-apigateway-integration"];
    assert_eq!(integration["type"], "aws_proxy");
    assert_eq!(integration["responseTransferMode"], "STREAM");
    let uri = integration["uri"]["Fn::Sub"].as_str().unwrap();
    assert!(
        uri.contains(
            "/2021-11-15/functions/${AskStreamFunction.Arn}/response-streaming-invocations"
        ),
        "InvokeWithResponseStream's path: {uri}"
    );
    // The token is checked before the function runs, by the stack's user pool.
    assert_eq!(
        route["post"]["security"],
        serde_json::json!([{"CognitoIdToken": []}])
    );
    let scheme = &api["DefinitionBody"]["components"]["securitySchemes"]["CognitoIdToken"];
    assert_eq!(scheme["x-amazon-apigateway-authtype"], "cognito_user_pools");
    assert_eq!(
        scheme["x-amazon-apigateway-authorizer"]["providerARNs"][0]["Fn::If"],
        serde_json::json!([
            "CreateUserPool",
            {"Fn::GetAtt": ["UserPool", "Arn"]},
            {"Ref": "StreamUserPoolArn"}
        ]),
        "the stack's own pool, or the one given with your own issuer"
    );
    let function = &resources["AskStreamFunction"];
    assert_eq!(
        function["Metadata"]["BuildProperties"]["Binary"],
        "ask-stream"
    );
    assert_eq!(env_of(&template, "AskStreamFunction", "AUTH_MODE"), "jwt");
    assert_eq!(
        env_of(&template, "AskStreamFunction", "CORS_ALLOWED_ORIGIN")["Ref"],
        "AllowedOrigin"
    );
    // A browser's preflight is answered for the one allowed origin only.
    let preflight = &route["options"]["x-amazon-apigateway-integration"]["responses"]["default"]["responseParameters"];
    assert_eq!(
        preflight["method.response.header.Access-Control-Allow-Origin"]["Fn::Sub"],
        "'${AllowedOrigin}'"
    );
    assert_eq!(default_of(&template, "AllowedOrigin"), "");
    // The function may be invoked by this API only, on this route.
    let permission = &resources["StreamApiInvokePermission"]["Properties"];
    assert_eq!(permission["Principal"], "apigateway.amazonaws.com");
    assert!(
        permission["SourceArn"]["Fn::Sub"]
            .as_str()
            .unwrap()
            .ends_with("${StreamApi}/*/POST/contacts/*/messages/stream")
    );
}

#[test]
fn no_trace_holds_a_contact_id_or_a_client_address() {
    let template = template();
    // API Gateway's REST API segment records the URL (its path names the contact)
    // and the client's IP address: not traced. The HTTP API cannot be.
    let stream_api = &template["Resources"]["StreamApi"]["Properties"];
    assert_eq!(stream_api["TracingEnabled"], false);
    // The functions' own segments (Lambda's) hold neither.
    assert_eq!(template["Globals"]["Function"]["Tracing"], "Active");
}

#[test]
fn a_first_deploy_sees_its_parameters_grouped_and_gets_one_base_url_per_api() {
    let template = template();
    let groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
        .as_array()
        .unwrap();
    let mut grouped: Vec<String> = groups
        .iter()
        .flat_map(|group| strings(&group["Parameters"]))
        .collect();
    // The first group is what a first deploy decides.
    let first = strings(&groups[0]["Parameters"]);
    for named in [
        "ModelProvider",
        "Model",
        "AnthropicApiKeyParameter",
        "PseudonymKeyParameter",
        "AlarmEmail",
    ] {
        assert!(first.iter().any(|p| p == named), "{named} in {first:?}");
    }
    grouped.sort();
    let total = grouped.len();
    grouped.dedup();
    assert_eq!(grouped.len(), total, "a parameter in two groups");
    let mut parameters: Vec<String> = template["Parameters"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    parameters.sort();
    assert_eq!(grouped, parameters, "every parameter in one group");

    // Both APIs take the same paths from their base URL: the streaming REST API's
    // stage is the `/v1` its resources leave out.
    let outputs = &template["Outputs"];
    let base = |name: &str| {
        outputs[name]["Value"]["Fn::Sub"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        base("ApiUrl").ends_with("${AWS::URLSuffix}"),
        "{}",
        base("ApiUrl")
    );
    assert!(
        base("StreamApiUrl").ends_with("${AWS::URLSuffix}"),
        "{}",
        base("StreamApiUrl")
    );
    let api = &template["Resources"]["StreamApi"]["Properties"];
    let stage = api["StageName"].as_str().unwrap();
    let paths: Vec<&String> = api["DefinitionBody"]["paths"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    for path in paths {
        let served = format!("/{stage}{path}");
        assert!(
            served.starts_with("/v1/contacts/") && !served.starts_with("/v1/v1/"),
            "{served}"
        );
    }
    for output in ["InspectorUrl", "DashboardUrl", "AlarmsTopic"] {
        assert!(outputs.get(output).is_some(), "output {output}");
    }
}
