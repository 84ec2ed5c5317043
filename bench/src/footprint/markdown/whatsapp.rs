//! "The WhatsApp path, per million messages": what a message through the webhook,
//! the inbound queue and the worker did, and its bill.

use std::fmt::Write as _;

use crate::footprint::bill::WhatsAppBill;
use crate::footprint::numbers::{dollars, sum};
use crate::footprint::report::Report;
use crate::footprint::whatsapp::WhatsAppFigures;

/// The section: the path measured per message, then its bill.
pub(super) fn section(report: &Report) -> String {
    let bill = &report.whatsapp_bill;
    let mut out = String::new();
    let _ = writeln!(out, "## The WhatsApp path, per million messages\n");
    if report.whatsapp.is_empty() {
        let _ = writeln!(out, "Not measured in this run.\n");
        return out;
    }
    let n = report.whatsapp.len() as f64;
    let mean = |f: &dyn Fn(&WhatsAppFigures) -> f64| sum(report.whatsapp.iter().map(f)) / n;
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
    out.push_str(&bill_table(bill));
    out
}

/// The bill per million messages, part by part, and what Meta charges.
fn bill_table(bill: &WhatsAppBill) -> String {
    let mut out = String::new();
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
