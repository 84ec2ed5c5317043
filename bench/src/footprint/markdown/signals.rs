//! "Signals, per month whatever the traffic": the alarms', dashboards' and
//! custom metrics' fixed monthly cost.

use std::fmt::Write as _;

use crate::footprint::numbers::dollars;
use crate::footprint::report::Report;

/// The signals' fixed monthly cost, whatever the traffic.
pub(super) fn section(report: &Report) -> String {
    let s = &report.signals;
    let p = &report.prices;
    let mut out = String::new();
    let _ = writeln!(out, "## Signals, per month whatever the traffic\n");
    let _ = writeln!(out, "| per month | count | USD |\n|---|---:|---:|");
    let _ = writeln!(
        out,
        "| alarm metrics (${:.2} each; a metric-math alarm pays per metric) | {} | {} |",
        p.alarm_metric_per_month,
        s.alarm_metrics,
        dollars(s.alarms_per_month)
    );
    let _ = writeln!(
        out,
        "| dashboards (${:.2} each) | {} | {} |",
        p.dashboard_per_month,
        s.dashboards,
        dollars(s.dashboards_per_month)
    );
    let _ = writeln!(
        out,
        "| custom metrics the four functions printed in this run (${:.2} each) | {} | {} |",
        p.custom_metric_per_month,
        s.custom_metrics.len(),
        dollars(s.custom_metrics_per_month)
    );
    let _ = writeln!(
        out,
        "| **total** | | **{}** |\n",
        dollars(s.total_per_month)
    );
    let _ = writeln!(
        out,
        "Free tiers left out (10 alarm metrics, 3 dashboards and 10 custom metrics an account). \
         The custom metrics are those this run printed: an error, a refused fact, a sweep or a \
         tool of a tenant's adds its own dimension values, each a metric of its own from the \
         month it first appears. SNS e-mail to the alarm topic: the first 1,000 a month free.\n"
    );
    out
}
