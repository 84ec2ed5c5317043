//! Metrics in CloudWatch Embedded Metric Format: one JSON line per event on stdout,
//! which Lambda ships to CloudWatch Logs and CloudWatch turns into metrics. No
//! message text, phone numbers or keys: only counts, sizes and types.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// Namespace of every degrau metric.
pub const NAMESPACE: &str = "degrau";

/// A CloudWatch unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count.
    Count,
    /// Milliseconds.
    Milliseconds,
    /// A ratio or other unitless value.
    None,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// One EMF event: dimensions and metric values, rendered as one JSON line.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    dimensions: Vec<(&'static str, String)>,
    metrics: Vec<(&'static str, f64, Unit)>,
    rollup: bool,
}

impl Event {
    /// An event for `function` (dimension `Function`).
    pub fn new(function: &str) -> Event {
        Event {
            dimensions: vec![("Function", function.to_owned())],
            metrics: Vec::new(),
            rollup: false,
        }
    }

    /// Also publishes the metrics under `Function` alone, so alarms and dashboards
    /// can sum across the extra dimensions (every `ErrorType`, say).
    pub fn rollup(mut self) -> Event {
        self.rollup = true;
        self
    }

    /// Adds a dimension (e.g. `ErrorType`).
    pub fn dimension(mut self, name: &'static str, value: impl Into<String>) -> Event {
        self.dimensions.push((name, value.into()));
        self
    }

    /// Adds a metric value.
    pub fn metric(mut self, name: &'static str, value: f64, unit: Unit) -> Event {
        self.metrics.push((name, value, unit));
        self
    }

    /// Adds a count.
    pub fn count(self, name: &'static str, value: u64) -> Event {
        self.metric(name, value as f64, Unit::Count)
    }

    /// The EMF JSON document at `timestamp_ms`.
    pub fn render(&self, timestamp_ms: u64) -> String {
        let mut root = Map::new();
        let dimension_names: Vec<&str> = self.dimensions.iter().map(|(name, _)| *name).collect();
        let mut dimension_sets = vec![dimension_names];
        if self.rollup && self.dimensions.len() > 1 {
            dimension_sets.insert(0, vec!["Function"]);
        }
        let definitions: Vec<Value> = self
            .metrics
            .iter()
            .map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()}))
            .collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": dimension_sets,
                    "Metrics": definitions,
                }]
            }),
        );
        for (name, value) in &self.dimensions {
            root.insert((*name).into(), Value::String(value.clone()));
        }
        for (name, value, _) in &self.metrics {
            root.insert((*name).into(), json!(value));
        }
        Value::Object(root).to_string()
    }

    /// Prints the event to stdout, where Lambda's log pipeline picks EMF up
    /// (unless [`set_muted`]).
    pub fn emit(&self) {
        if MUTED.load(Ordering::Relaxed) {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        println!("{}", self.render(now));
    }
}

/// Whether [`Event::emit`] prints nothing (see [`set_muted`]).
static MUTED: AtomicBool = AtomicBool::new(false);

/// Stops (or restarts) every metric line of the process: a simulation playing
/// thousands of rounds has no log pipeline to feed. Tests only.
#[cfg(any(test, feature = "test-util"))]
pub fn set_muted(muted: bool) {
    MUTED.store(muted, Ordering::Relaxed);
}

/// A process's first invocation. Lambda runs each invocation of an instance in the
/// same process, so the first one a process serves is the one that paid for its
/// cold start: counting it (`ColdStart`, 1, once per process) counts the instances
/// started, per function.
#[derive(Debug)]
pub struct ColdStart(AtomicBool);

impl ColdStart {
    /// A process that has served nothing yet.
    pub const fn new() -> ColdStart {
        ColdStart(AtomicBool::new(true))
    }

    /// The `ColdStart` event of `function` the first time it is asked for; `None`
    /// every time after.
    pub fn first_invocation(&self, function: &str) -> Option<Event> {
        self.0
            .swap(false, Ordering::Relaxed)
            .then(|| Event::new(function).count("ColdStart", 1))
    }
}

impl Default for ColdStart {
    fn default() -> Self {
        ColdStart::new()
    }
}

/// This process's own [`ColdStart`].
static PROCESS: ColdStart = ColdStart::new();

/// Emits `ColdStart` for `function` on this process's first invocation, and nothing
/// after. Each function's `main` calls it at the start of every invocation.
pub fn record_cold_start(function: &str) {
    if let Some(event) = PROCESS.first_invocation(function) {
        event.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_embedded_metric_format() {
        let line = Event::new("ask")
            .dimension("ErrorType", "timeout")
            .rollup()
            .count("ModelErrors", 1)
            .metric("ModelLatency", 12.5, Unit::Milliseconds)
            .render(1_700_000_000_000);
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["_aws"]["Timestamp"], 1_700_000_000_000u64);
        let directive = &value["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(directive["Namespace"], "degrau");
        assert_eq!(
            directive["Dimensions"],
            json!([["Function"], ["Function", "ErrorType"]])
        );
        assert_eq!(
            directive["Metrics"],
            json!([{"Name": "ModelErrors", "Unit": "Count"}, {"Name": "ModelLatency", "Unit": "Milliseconds"}])
        );
        assert_eq!(value["Function"], "ask");
        assert_eq!(value["ErrorType"], "timeout");
        assert_eq!(value["ModelErrors"], 1.0);
        assert_eq!(value["ModelLatency"], 12.5);
        assert!(!line.contains('\n'), "one line per event");
    }

    #[test]
    fn a_cold_start_is_counted_once_per_process() {
        let process = ColdStart::new();
        let first = process
            .first_invocation("ask")
            .expect("the first invocation");
        let value: Value = serde_json::from_str(&first.render(0)).unwrap();
        assert_eq!(value["ColdStart"], 1.0);
        assert_eq!(value["Function"], "ask");
        assert_eq!(
            value["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([{"Name": "ColdStart", "Unit": "Count"}])
        );
        for _ in 0..3 {
            assert_eq!(process.first_invocation("ask"), None);
        }
    }
}
