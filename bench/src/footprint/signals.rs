//! What the signals cost, whatever the traffic: read from `template.yaml` (the
//! access log's format, the alarm metrics, the dashboards) and from the EMF lines
//! a run printed (the custom metrics).

use std::collections::BTreeSet;

use serde::Serialize;

use super::prices::Prices;

/// `template.yaml`, for what the bill reads from it: the access log's format, the
/// alarms, the dashboards, the functions' memory.
pub const TEMPLATE: &str = include_str!("../../../template.yaml");

/// The HTTP API's access log format in `template` (a folded scalar: its lines
/// joined by spaces).
pub fn access_log_format(template: &str) -> Option<String> {
    let mut lines = template
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("AccessLogSettings:"));
    lines.find(|l| l.trim_start().starts_with("Format:"))?;
    let format: Vec<&str> = lines
        .take_while(|l| l.starts_with("          "))
        .map(str::trim)
        .collect();
    (!format.is_empty()).then(|| format.join(" "))
}

/// The size of one access log line of a request to `route` (its template, as the
/// log has it), every other `$context` variable given a value of its usual size.
pub fn access_log_line_bytes(format: &str, route: &str) -> usize {
    const VALUES: [(&str, &str); 13] = [
        ("$context.requestId", "Jk3fGhE8IAMEJpQ="),
        ("$context.requestTimeEpoch", "1796290200000"),
        ("$context.httpMethod", "POST"),
        ("$context.routeKey", ""),
        ("$context.status", "200"),
        ("$context.protocol", "HTTP/1.1"),
        ("$context.responseLength", "1234"),
        ("$context.responseLatency", "2350"),
        ("$context.integrationLatency", "2344"),
        ("$context.integrationStatus", "200"),
        ("$context.integrationErrorMessage", "-"),
        ("$context.authorizer.error", "-"),
        ("$context.error.message", "-"),
    ];
    let mut line = format.to_owned();
    // Longest names first: `$context.status` is a prefix of no other, but
    // `$context.integrationStatus` must not be read as `$context.integration...`.
    let mut values = VALUES.to_vec();
    values.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    for (name, value) in values {
        let value = if name == "$context.routeKey" {
            route
        } else {
            value
        };
        line = line.replace(name, value);
    }
    line.len() + 1
}

/// Alarm metrics in `template`: one per single-metric alarm, and each `MetricStat`
/// of a metric-math alarm.
pub fn alarm_metrics(template: &str) -> usize {
    // Top-level entries (two spaces and a name) split the file into blocks.
    let mut blocks: Vec<String> = Vec::new();
    for line in template.lines() {
        let top = line.starts_with("  ") && !line.starts_with("   ") && line.ends_with(':');
        if top || blocks.is_empty() {
            blocks.push(String::new());
        }
        if let Some(block) = blocks.last_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
        .iter()
        .filter(|block| block.contains("\n    Type: AWS::CloudWatch::Alarm\n"))
        .map(|alarm| alarm.matches("MetricStat:").count().max(1))
        .sum()
}

/// The custom metrics of EMF `lines`: each metric name with each set of dimension
/// values is one CloudWatch metric (and a month's charge).
pub fn custom_metrics(lines: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in lines {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        for directive in event["_aws"]["CloudWatchMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let namespace = directive["Namespace"].as_str().unwrap_or("");
            for set in directive["Dimensions"].as_array().into_iter().flatten() {
                let dimensions: Vec<String> = set
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|d| d.as_str())
                    .map(|d| format!("{d}={}", event[d].as_str().unwrap_or("")))
                    .collect();
                for metric in directive["Metrics"].as_array().into_iter().flatten() {
                    let name = metric["Name"].as_str().unwrap_or("");
                    out.insert(format!("{namespace}/{name}[{}]", dimensions.join(",")));
                }
            }
        }
    }
    out
}

/// What the signals cost, besides what each ask prints: from the template and from
/// the metrics the run printed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Signals {
    /// One access log line of an ask (`POST /v1/contacts/{contact}/messages`), bytes.
    pub ask_access_log_bytes: f64,
    /// One access log line of a WhatsApp delivery (`POST /whatsapp/webhook`), bytes.
    pub webhook_access_log_bytes: f64,
    /// Alarm metrics in the template.
    pub alarm_metrics: usize,
    /// Dashboards in the template.
    pub dashboards: usize,
    /// Custom metrics the four functions printed in this run.
    pub custom_metrics: Vec<String>,
    /// Per month: the alarms.
    pub alarms_per_month: f64,
    /// Per month: the dashboards.
    pub dashboards_per_month: f64,
    /// Per month: the custom metrics seen in this run.
    pub custom_metrics_per_month: f64,
    /// Per month, all three.
    pub total_per_month: f64,
}

impl Signals {
    /// The signals of `template`, with the metrics in `metric_lines`.
    pub fn of(prices: &Prices, template: &str, metric_lines: &[String]) -> Signals {
        let format = access_log_format(template).unwrap_or_default();
        let alarms = alarm_metrics(template);
        let dashboards = template.matches("Type: AWS::CloudWatch::Dashboard").count();
        let custom: Vec<String> = custom_metrics(metric_lines).into_iter().collect();
        let alarms_per_month = alarms as f64 * prices.alarm_metric_per_month;
        let dashboards_per_month = dashboards as f64 * prices.dashboard_per_month;
        let custom_metrics_per_month = custom.len() as f64 * prices.custom_metric_per_month;
        Signals {
            ask_access_log_bytes: access_log_line_bytes(
                &format,
                "POST /v1/contacts/{contact}/messages",
            ) as f64,
            webhook_access_log_bytes: access_log_line_bytes(&format, "POST /whatsapp/webhook")
                as f64,
            alarm_metrics: alarms,
            dashboards,
            custom_metrics: custom,
            alarms_per_month,
            dashboards_per_month,
            custom_metrics_per_month,
            total_per_month: alarms_per_month + dashboards_per_month + custom_metrics_per_month,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use degrau::metrics::Event;

    use super::*;

    #[test]
    fn the_signals_are_read_from_the_template() {
        let format = access_log_format(TEMPLATE).expect("the HTTP API's access log format");
        let line: serde_json::Value = serde_json::from_str(&format).unwrap();
        assert_eq!(line["route"], "$context.routeKey");
        let ask = access_log_line_bytes(&format, "POST /v1/contacts/{contact}/messages");
        let webhook = access_log_line_bytes(&format, "POST /whatsapp/webhook");
        // Every variable replaced, the route's length the only difference.
        assert!(!format!("{ask}").is_empty() && ask - webhook == 36 - 22);
        let rendered = format.replace("$context.routeKey", "R");
        assert!(
            rendered.contains("$context"),
            "the format has other variables"
        );
        assert!(ask > 200 && ask < 600, "{ask} bytes");

        // 6 functions x 2 (ask-stream's and events-out's included), the API's
        // latency, three queue ages, three DLQs, the sends, a tenant's invalid
        // config: 21 single-metric alarms; the two APIs' 5xx rates, the model's
        // error rate and the WhatsApp deliveries' failure rate hold 2 metrics each.
        assert_eq!(alarm_metrics(TEMPLATE), 21 + 2 + 2 + 2 + 2);
        assert_eq!(
            TEMPLATE.matches("Type: AWS::CloudWatch::Dashboard").count(),
            1
        );

        // The memory the bill assumes is the template's.
        let memory = |function: &str| {
            let block = TEMPLATE
                .split(&format!("\n  {function}:\n"))
                .nth(1)
                .unwrap();
            let line = block
                .lines()
                .find(|l| l.trim_start().starts_with("MemorySize:"))
                .unwrap();
            line.trim_start()["MemorySize:".len()..]
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        let p = Prices::default();
        for function in ["AskFunction", "CompactorFunction", "WhatsAppWorkerFunction"] {
            assert_eq!(memory(function), p.memory_mb, "{function}");
        }
        assert_eq!(memory("WhatsAppWebhookFunction"), p.webhook_memory_mb);
    }

    #[test]
    fn custom_metrics_count_each_name_with_each_set_of_dimension_values() {
        let lines: Vec<String> = [
            Event::new("ask").count("RoundsCommitted", 1).render(0),
            Event::new("ask").count("RoundsCommitted", 1).render(1),
            Event::new("ask")
                .dimension("ErrorType", "timeout")
                .rollup()
                .count("ModelErrors", 1)
                .render(2),
            Event::new("ask")
                .dimension("ErrorType", "overloaded")
                .rollup()
                .count("ModelErrors", 1)
                .render(3),
            "{\"level\":\"INFO\",\"message\":\"not a metric\"}".to_owned(),
        ]
        .into_iter()
        .collect();
        let metrics = custom_metrics(&lines);
        assert_eq!(
            metrics.into_iter().collect::<Vec<_>>(),
            [
                "degrau/ModelErrors[Function=ask,ErrorType=overloaded]",
                "degrau/ModelErrors[Function=ask,ErrorType=timeout]",
                "degrau/ModelErrors[Function=ask]",
                "degrau/RoundsCommitted[Function=ask]",
            ]
        );
        let p = Prices::default();
        let signals = Signals::of(&p, TEMPLATE, &lines);
        assert_eq!(signals.custom_metrics.len(), 4);
        assert!((signals.total_per_month - (29.0 * 0.10 + 3.0 + 4.0 * 0.30)).abs() < 1e-9);
    }
}
