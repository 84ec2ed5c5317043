//! The markdown's shorter sections: the WhatsApp path's bill, the signals' fixed
//! monthly cost, and the functions' init beside the Python peer's.

use std::fmt::Write as _;

use super::markdown::dollars;
use super::report::{Report, sum};

/// The functions' init beside the Python peer's: the same init (DynamoDB and SQS
/// clients, an HTTP client, the API key read from SSM), started one after the other
/// in each round of the same run.
pub fn init_against_peer(report: &Report) -> String {
    let peer = &report.python_peer;
    if let Some(why) = &peer.skipped {
        return format!("No Python peer this run: {why}.\n\n");
    }
    let peer_ms = peer.starts.median_init_ms();
    if peer_ms <= 0.0 {
        return String::new();
    }
    let mut out = format!(
        "Init beside the Python peer (bench/python-peer/peer.py: boto3 DynamoDB and SQS \
         clients, an httpx client, one SSM SecureString read, then the Runtime API loop; every \
         process here reads the API key from SSM on moto through the proxy, plain HTTP on \
         loopback, so no TLS handshake is timed; medians of {} starts each, interleaved; \
         issue 15's goal: at most 1/5 of the peer's):\n\n\
         | function | init, median | Python peer's | function / peer | peer / function | goal (≤ 0.20) |\n\
         |---|---:|---:|---:|---:|---|\n",
        peer.starts.init_ms.len()
    );
    for cold in &report.cold_starts {
        let ms = cold.median_init_ms();
        let ratio = ms / peer_ms;
        out.push_str(&format!(
            "| {} | {ms:.1} ms | {peer_ms:.1} ms | {ratio:.3} | {:.1}× | {} |\n",
            cold.function,
            if ms > 0.0 { peer_ms / ms } else { 0.0 },
            if ratio <= 0.2 {
                "met".to_owned()
            } else {
                format!("missed by {:.3}", ratio - 0.2)
            }
        ));
    }
    out.push('\n');
    out
}

/// The WhatsApp section of the markdown.
pub(super) fn whatsapp_markdown(report: &Report) -> String {
    let bill = &report.whatsapp_bill;
    let mut out = String::new();
    let _ = writeln!(out, "## The WhatsApp path, per million messages\n");
    if report.whatsapp.is_empty() {
        let _ = writeln!(out, "Not measured in this run.\n");
        return out;
    }
    let n = report.whatsapp.len() as f64;
    let mean = |f: &dyn Fn(&super::whatsapp::WhatsAppFigures) -> f64| {
        sum(report.whatsapp.iter().map(f)) / n
    };
    let answered = report
        .whatsapp
        .iter()
        .filter(|w| w.webhook_status == 200)
        .count();
    let _ = writeln!(
        out,
        "{} messages from one customer, one a turn, each after the last reply: Meta's signed \
         delivery to `whatsapp-webhook` (answered 200: {answered}), the inbound FIFO queue to \
         `whatsapp-worker` through the event source mapping, the turn (the ask service) and \
         the reply to the Graph API (the stand-in's). Per message: the webhook made {:.1} \
         DynamoDB calls ({:.1} RCU, {:.1} WCU) and {:.1} SQS requests; the worker {:.1} \
         DynamoDB calls ({:.1} RCU, {:.1} WCU) and, with the event source mapping's receive \
         and delete, {:.1} SQS requests, in {:.2} invocations; {:.2} Graph API sends; billed \
         {:.0} ms (webhook) and {:.0} ms (worker, the model's answer on loopback).\n",
        report.whatsapp.len(),
        mean(&|w| w.webhook_aws.dynamodb_calls as f64),
        mean(&|w| w.webhook_aws.rcu),
        mean(&|w| w.webhook_aws.wcu),
        mean(&|w| w.webhook_aws.sqs_billed_requests as f64),
        mean(&|w| w.worker_aws.dynamodb_calls as f64),
        mean(&|w| w.worker_aws.rcu),
        mean(&|w| w.worker_aws.wcu),
        mean(&|w| w.worker_aws.sqs_billed_requests as f64),
        mean(&|w| w.worker_invocations as f64),
        bill.graph_sends_per_message,
        bill.webhook_billed_ms,
        bill.worker_billed_ms,
    );
    let _ = writeln!(out, "| USD per 1M WhatsApp messages | |\n|---|---:|");
    for (label, value) in [
        (
            "webhook Lambda (requests + GB-s, 256 MB)",
            bill.webhook_lambda,
        ),
        ("webhook DynamoDB", bill.webhook_dynamodb),
        ("worker Lambda (requests + GB-s)", bill.worker_lambda),
        (
            "worker DynamoDB (the turn and the channel's records)",
            bill.worker_dynamodb,
        ),
        ("SQS (send, receive, delete; compaction jobs)", bill.sqs),
        ("compaction, amortized as for an ask", bill.compaction),
        ("API Gateway (Meta's delivery)", bill.api_gateway),
        (
            "CloudWatch Logs (both functions, the access log line)",
            bill.logs,
        ),
        ("X-Ray (the webhook's and the worker's traces)", bill.xray),
        (
            "Meta, for the replies (free inside the 24-hour service window)",
            bill.graph,
        ),
    ] {
        let _ = writeln!(out, "| {label} | {} |", dollars(value));
    }
    let _ = writeln!(out, "| **total** | **{}** |\n", dollars(bill.total));
    let _ = writeln!(
        out,
        "Meta charges a reply inside the 24-hour customer service window nothing (per-message \
         pricing since July 2025); a template sent outside it (the tenant's `template`) is \
         charged by Meta per message, by the customer's country, and is not in this total.\n"
    );
    out
}

/// The signals' fixed monthly cost, whatever the traffic.
pub(super) fn fixed_markdown(report: &Report) -> String {
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
