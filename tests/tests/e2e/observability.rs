//! `template.yaml`'s signals: every alarm notifies someone (on alarm and on OK), the
//! alarms watch every function, queue, dead-letter queue and the API, tracing is on,
//! the API's access log is JSON without bodies or contact ids, and the dashboard
//! reads the cache ratio as a sum over a sum, shows every alarm and only metrics the
//! code emits. No moto needed (the template is read by the provisioning's loader).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

use crate::helpers::template;

fn resources_of<'a>(template: &'a Value, kind: &str) -> Vec<(&'a String, &'a Value)> {
    template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, resource)| resource["Type"] == kind)
        .collect()
}

/// What is wrong with the alarms' actions: each alarm must notify the alarms' topic
/// (the one given, else the stack's own) when it fires and when it is OK again.
fn alarm_action_problems(template: &Value) -> Vec<String> {
    let topic =
        json!({"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]});
    let mut problems = Vec::new();
    for (name, alarm) in resources_of(template, "AWS::CloudWatch::Alarm") {
        for actions in ["AlarmActions", "OKActions"] {
            if alarm["Properties"][actions] != json!([topic]) {
                problems.push(format!(
                    "{name}.{actions}: {}",
                    alarm["Properties"][actions]
                ));
            }
        }
        if alarm["Properties"]["ActionsEnabled"] == json!(false) {
            problems.push(format!("{name}: actions disabled"));
        }
    }
    problems
}

#[test]
fn every_alarm_notifies_the_alarm_topic_on_alarm_and_on_ok() {
    let template = template();
    let alarms = resources_of(&template, "AWS::CloudWatch::Alarm");
    // 4 functions x (errors, throttles), the API's 5xx and latency, two queues' age,
    // two dead-letter queues, WhatsApp sends, the model's error rate.
    assert!(alarms.len() >= 16, "{} alarms", alarms.len());
    assert_eq!(alarm_action_problems(&template), Vec::<String>::new());

    // The topic: created unless one is given, with the e-mail subscribed when given.
    assert_eq!(
        template["Conditions"]["CreateAlarmTopic"],
        json!({"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]})
    );
    let topic = &template["Resources"]["AlarmTopic"];
    assert_eq!(topic["Type"], "AWS::SNS::Topic");
    assert_eq!(topic["Condition"], "CreateAlarmTopic");
    let subscription = &template["Resources"]["AlarmEmailSubscription"];
    assert_eq!(subscription["Condition"], "SubscribeAlarmEmail");
    assert_eq!(subscription["Properties"]["Protocol"], "email");
    assert_eq!(
        subscription["Properties"]["Endpoint"],
        json!({"Ref": "AlarmEmail"})
    );
    for parameter in ["AlarmTopicArn", "AlarmEmail"] {
        assert_eq!(
            template["Parameters"][parameter]["Default"], "",
            "{parameter}"
        );
    }

    // The check fails an alarm that notifies no one, or only when it fires.
    for (property, value) in [("OKActions", Value::Null), ("AlarmActions", json!([]))] {
        let mut broken = template.clone();
        broken["Resources"]["AskErrorsAlarm"]["Properties"][property] = value;
        assert_eq!(alarm_action_problems(&broken).len(), 1, "{property}");
    }
}

/// The alarms on `namespace`/`metric` whose dimension `dimension` is `value`, as
/// single-metric alarms or inside a metric-math alarm.
fn alarms_on(
    template: &Value,
    namespace: &str,
    metric: &str,
    dimension: &str,
    value: &Value,
) -> Vec<String> {
    let matches = |m: &Value| {
        m["Namespace"] == namespace
            && m["MetricName"] == metric
            && m["Dimensions"]
                .as_array()
                .is_some_and(|d| d.contains(&json!({"Name": dimension, "Value": value})))
    };
    resources_of(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .filter(|(_, alarm)| {
            let p = &alarm["Properties"];
            matches(p)
                || p["Metrics"].as_array().is_some_and(|metrics| {
                    metrics.iter().any(|m| matches(&m["MetricStat"]["Metric"]))
                })
        })
        .map(|(name, _)| name.clone())
        .collect()
}

#[test]
fn the_alarms_watch_every_function_queue_dead_letter_queue_and_the_api() {
    let template = template();
    let functions = resources_of(&template, "AWS::Serverless::Function");
    assert_eq!(functions.len(), 6);
    for (name, _) in &functions {
        for metric in ["Errors", "Throttles"] {
            let alarms = alarms_on(
                &template,
                "AWS/Lambda",
                metric,
                "FunctionName",
                &json!({"Ref": name}),
            );
            assert_eq!(alarms.len(), 1, "{name} {metric}: {alarms:?}");
        }
    }
    let queues = resources_of(&template, "AWS::SQS::Queue");
    let mut dead_letter = BTreeSet::new();
    for (name, queue) in &queues {
        let target = &queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"];
        if target.is_null() {
            continue;
        }
        dead_letter.insert(target["Fn::GetAtt"][0].as_str().unwrap().to_owned());
        let name_of = json!({"Fn::GetAtt": [name, "QueueName"]});
        let alarms = alarms_on(
            &template,
            "AWS/SQS",
            "ApproximateAgeOfOldestMessage",
            "QueueName",
            &name_of,
        );
        assert_eq!(
            alarms.len(),
            1,
            "the age of {name}'s oldest message: {alarms:?}"
        );
    }
    assert_eq!(dead_letter.len(), 3, "{dead_letter:?}");
    for name in &dead_letter {
        let name_of = json!({"Fn::GetAtt": [name, "QueueName"]});
        let alarms = alarms_on(
            &template,
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            "QueueName",
            &name_of,
        );
        assert_eq!(alarms.len(), 1, "{name}: {alarms:?}");
    }
    let api = json!({"Ref": "HttpApi"});
    for metric in ["5xx", "Latency"] {
        let alarms = alarms_on(&template, "AWS/ApiGateway", metric, "ApiId", &api);
        assert_eq!(alarms.len(), 1, "the API's {metric}: {alarms:?}");
    }
    // The streaming API (a REST API: its metrics are by name).
    let stream_api = json!({"Fn::Sub": "${AWS::StackName}-stream"});
    let alarms = alarms_on(
        &template,
        "AWS/ApiGateway",
        "5XXError",
        "ApiName",
        &stream_api,
    );
    assert_eq!(alarms, ["StreamApiServerErrorsAlarm"], "{alarms:?}");
    assert_eq!(
        template["Resources"]["StreamApi"]["Properties"]["DefinitionBody"]["info"]["title"],
        stream_api,
        "the alarm's ApiName is the streaming API's name"
    );
    let sends = alarms_on(
        &template,
        "degrau",
        "SendFailures",
        "Function",
        &json!("whatsapp-worker"),
    );
    assert_eq!(sends.len(), 1);
    let model = alarms_on(
        &template,
        "degrau",
        "ModelErrors",
        "Function",
        &json!("ask"),
    );
    assert_eq!(model.len(), 1);

    // Thresholds are parameters with defaults, or 0 where any one event is news (a
    // dead-lettered message, a reply the Graph API refused).
    for (name, alarm) in resources_of(&template, "AWS::CloudWatch::Alarm") {
        let threshold = &alarm["Properties"]["Threshold"];
        match threshold["Ref"].as_str() {
            Some(parameter) => {
                let declared = &template["Parameters"][parameter];
                assert!(
                    !declared["Default"].is_null(),
                    "{name}: {parameter} has no default"
                );
                assert_eq!(declared["Type"], "Number", "{name}: {parameter}");
            }
            None => assert_eq!(threshold, &json!(0), "{name}: a literal threshold"),
        }
        assert!(
            alarm["Properties"]["AlarmDescription"]
                .as_str()
                .is_some_and(|d| d.len() > 20),
            "{name} says what it means"
        );
    }
}

#[test]
fn every_function_is_traced_and_the_api_logs_json_lines_without_bodies_or_contact_ids() {
    let template = template();
    assert_eq!(template["Globals"]["Function"]["Tracing"], "Active");
    for (name, function) in resources_of(&template, "AWS::Serverless::Function") {
        let own = &function["Properties"]["Tracing"];
        assert!(own.is_null() || own == "Active", "{name} turns tracing off");
    }

    let logs = &template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"];
    assert_eq!(
        logs["DestinationArn"],
        json!({"Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]})
    );
    let group = &template["Resources"]["ApiAccessLogGroup"];
    assert_eq!(
        group["Properties"]["RetentionInDays"],
        json!({"Ref": "LogRetentionDays"})
    );
    let format: Value = serde_json::from_str(logs["Format"].as_str().unwrap())
        .expect("the access log format is one JSON object");
    let variables: BTreeSet<&str> = format
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_str().unwrap())
        .collect();
    // The route's template (`POST /v1/contacts/{contact}/messages`), never the path;
    // nothing of the request's body, query, caller or token.
    assert!(variables.contains("$context.routeKey"));
    assert!(variables.contains("$context.status"));
    for variable in &variables {
        assert!(variable.starts_with("$context."), "{variable}");
        for forbidden in [
            "path",
            "identity",
            "body",
            "query",
            "claims",
            "requestOverride",
            "customDomain",
        ] {
            assert!(
                !variable.contains(forbidden),
                "{variable} may carry personal data"
            );
        }
    }
}

/// The names a metric row of a dashboard widget refers to (CloudWatch's shorthand:
/// `"."` repeats the row above's value at that place, `"..."` repeats every value up
/// to the options).
fn dashboard_metric_names(metrics: &[Value]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut previous: Vec<Value> = Vec::new();
    for row in metrics {
        let row = row.as_array().unwrap();
        if row.first().is_some_and(|first| first.is_object()) {
            continue; // an expression
        }
        let values: Vec<Value> = if row.first() == Some(&json!("...")) {
            previous.clone()
        } else {
            row.iter()
                .enumerate()
                .filter(|(_, v)| !v.is_object())
                .map(|(i, v)| {
                    if v == "." {
                        previous[i].clone()
                    } else {
                        v.clone()
                    }
                })
                .collect()
        };
        out.push((
            values[0].as_str().unwrap().to_owned(),
            values[1].as_str().unwrap().to_owned(),
        ));
        previous = values;
    }
    out
}

#[test]
fn the_dashboard_reads_the_cache_ratio_as_a_sum_over_a_sum_and_shows_every_alarm() {
    let template = template();
    let body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
        .as_str()
        .unwrap();
    // `${Resource}` and `${Resource.Attribute}` become their names, so the body parses.
    let mut text = String::new();
    let mut rest = body;
    while let Some(start) = rest.find("${") {
        let end = start + rest[start..].find('}').unwrap();
        text.push_str(&rest[..start]);
        text.push_str(&rest[start + 2..end]);
        rest = &rest[end + 1..];
    }
    text.push_str(rest);
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard body is JSON");
    let widgets = dashboard["widgets"].as_array().unwrap();

    // Cache read ratio: Σ cache-read tokens over Σ every input token, never an
    // average of per-round ratios.
    let ratio = widgets
        .iter()
        .find(|w| {
            w["properties"]["title"]
                .as_str()
                .unwrap_or("")
                .starts_with("Cache read ratio")
        })
        .expect("a cache read ratio widget");
    let metrics = ratio["properties"]["metrics"].as_array().unwrap();
    let expression = metrics[0][0]["expression"].as_str().unwrap();
    assert_eq!(expression, "100 * r / (r + i + c)");
    let mut ids = BTreeSet::new();
    for (row, name) in metrics[1..].iter().zip([
        "CacheReadInputTokens",
        "InputTokens",
        "CacheCreationInputTokens",
    ]) {
        let options = row.as_array().unwrap().last().unwrap();
        assert_eq!(options["stat"], "Sum", "{name}");
        ids.insert(options["id"].as_str().unwrap());
    }
    assert_eq!(ids, BTreeSet::from(["c", "i", "r"]));
    assert!(
        !text.contains("CacheReadRatio"),
        "no average of per-round ratios"
    );

    // Every alarm of the template is on the alarm widget.
    let shown: BTreeSet<String> = widgets
        .iter()
        .filter(|w| w["type"] == "alarm")
        .flat_map(|w| w["properties"]["alarms"].as_array().unwrap().iter())
        .map(|a| a.as_str().unwrap().trim_end_matches(".Arn").to_owned())
        .collect();
    let alarms: BTreeSet<String> = resources_of(&template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(shown, alarms);

    // Every degrau metric on it is one the code emits; the WhatsApp channel's and
    // each function's cold starts are there.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut sources = String::new();
    for dir in ["shared/src", "functions", "adapters/src", "channels"] {
        collect_rust(&root.join(dir), &mut sources);
    }
    let mut names = BTreeSet::new();
    for widget in widgets.iter().filter(|w| w["type"] == "metric") {
        for (namespace, name) in
            dashboard_metric_names(widget["properties"]["metrics"].as_array().unwrap())
        {
            if namespace == "degrau" {
                assert!(
                    sources.contains(&format!("\"{name}\"")),
                    "no code emits {name}"
                );
                names.insert(name);
            }
        }
    }
    for name in [
        "MessagesRecorded",
        "TurnsAnswered",
        "SendFailures",
        "ColdStart",
    ] {
        assert!(names.contains(name), "{name} is not on the dashboard");
    }
    let cold: Vec<&Value> = widgets
        .iter()
        .filter(|w| {
            w["properties"]["title"]
                .as_str()
                .unwrap_or("")
                .starts_with("Cold starts")
        })
        .collect();
    assert_eq!(cold.len(), 1);
    assert_eq!(
        cold[0]["properties"]["metrics"].as_array().unwrap().len(),
        4
    );
}

fn collect_rust(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rust(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}
