//! The bills per million, USD, excluding the model, at the [`Prices`]: of an ask
//! (with the compactor's work amortized over it) and of a WhatsApp message.

use serde::Serialize;

use super::compaction::Amortized;
use super::degrau_run::AskFigures;
use super::numbers::sum;
use super::prices::Prices;
use super::signals::Signals;

/// The bill per million asks, USD, excluding the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bill {
    /// The ask's billed duration, ms: its own time (wall time less the time in
    /// AWS calls) plus [`Prices::assumed_aws_call_ms`] per AWS call.
    pub ask_billed_ms: f64,
    /// The ask function at its wall time as measured here (moto's latency
    /// included): for comparison, not in the total.
    pub ask_lambda_as_measured: f64,
    /// The ask function: requests and GB-seconds of its billed duration.
    pub ask_lambda: f64,
    /// The ask's DynamoDB units.
    pub ask_dynamodb: f64,
    /// The ask's SQS requests (the step jobs it sends).
    pub ask_sqs: f64,
    /// The compactor's invocations and GB-seconds, amortized.
    pub compaction_lambda: f64,
    /// The compactor's DynamoDB units, amortized.
    pub compaction_dynamodb: f64,
    /// The event source mapping's SQS requests, amortized.
    pub compaction_sqs: f64,
    /// CloudWatch Logs ingestion of what the ask prints.
    pub logs: f64,
    /// API Gateway: the ask's HTTP API request.
    pub api_gateway: f64,
    /// The ask's access log line, ingested.
    pub access_logs: f64,
    /// X-Ray: the ask's trace and each compactor invocation's (every invocation
    /// sampled: at the traffic of a small business, the default sampling rule's one
    /// request a second takes all).
    pub xray: f64,
    /// Everything.
    pub total: f64,
}

/// The bill per million asks of the mean of `asks`, with `compaction` amortized.
pub(super) fn ask_bill(
    prices: &Prices,
    asks: &[&AskFigures],
    compaction: &Amortized,
    log_bytes: f64,
    access_log_bytes: f64,
) -> Bill {
    let n = asks.len().max(1) as f64;
    let mean = |f: &dyn Fn(&AskFigures) -> f64| sum(asks.iter().map(|a| f(a))) / n;
    let ask_billed_ms = mean(&|a| {
        prices.billed_ms(
            a.wall_ms,
            a.aws.duration_ms,
            a.aws.dynamodb_calls + a.aws.sqs_calls,
        )
    });
    let ask_lambda = prices.lambda(1.0, ask_billed_ms);
    let ask_lambda_as_measured = prices.lambda(1.0, mean(&|a| a.wall_ms.ceil()));
    let ask_dynamodb = prices.dynamodb(mean(&|a| a.aws.rcu), mean(&|a| a.aws.wcu));
    let ask_sqs = prices.sqs(mean(&|a| a.aws.sqs_billed_requests as f64));
    let compaction_lambda =
        prices.lambda(compaction.invocations_per_ask, compaction.billed_ms_per_ask);
    let compaction_dynamodb = prices.dynamodb(compaction.rcu_per_ask, compaction.wcu_per_ask);
    let compaction_sqs = prices.sqs(compaction.sqs_requests_per_ask);
    let logs = prices.logs(log_bytes);
    let api_gateway = prices.http_api(1.0);
    let access_logs = prices.logs(access_log_bytes);
    let xray = prices.xray(1.0 + compaction.invocations_per_ask);
    Bill {
        ask_billed_ms,
        ask_lambda_as_measured,
        ask_lambda,
        ask_dynamodb,
        ask_sqs,
        compaction_lambda,
        compaction_dynamodb,
        compaction_sqs,
        logs,
        api_gateway,
        access_logs,
        xray,
        total: ask_lambda
            + ask_dynamodb
            + ask_sqs
            + compaction_lambda
            + compaction_dynamodb
            + compaction_sqs
            + logs
            + api_gateway
            + access_logs
            + xray,
    }
}

/// The bill per million WhatsApp messages (one message a turn), USD, excluding the
/// model: the webhook, the queue, the worker's turn, its Graph API send.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WhatsAppBill {
    /// Messages measured.
    pub messages: usize,
    /// The webhook: requests and GB-seconds (at its own memory).
    pub webhook_lambda: f64,
    /// The webhook's DynamoDB units.
    pub webhook_dynamodb: f64,
    /// The worker: requests and GB-seconds.
    pub worker_lambda: f64,
    /// The worker's DynamoDB units (the ask service's and the channel's).
    pub worker_dynamodb: f64,
    /// Every SQS request: the webhook's send, the event source mapping's receive
    /// and delete, the worker's compaction jobs.
    pub sqs: f64,
    /// Compaction, amortized as for an ask (the same service and conversations):
    /// the steady state of the ask run's last span.
    pub compaction: f64,
    /// API Gateway: Meta's delivery.
    pub api_gateway: f64,
    /// The webhook's and the worker's logs and metrics, and the delivery's access
    /// log line.
    pub logs: f64,
    /// X-Ray: the webhook's trace and the worker's.
    pub xray: f64,
    /// Meta's charge for the replies sent (free inside the service window).
    pub graph: f64,
    /// Graph API sends per message.
    pub graph_sends_per_message: f64,
    /// The worker's billed duration per message, ms (own time + the assumed AWS
    /// call latency).
    pub worker_billed_ms: f64,
    /// The webhook's billed duration per message, ms.
    pub webhook_billed_ms: f64,
    /// Everything.
    pub total: f64,
}

/// The WhatsApp bill of `figures`, with the logs the two functions printed per
/// message and the ask run's steady-state compaction.
pub fn whatsapp_bill(
    prices: &Prices,
    figures: &[super::whatsapp::WhatsAppFigures],
    log_bytes_per_message: f64,
    signals: &Signals,
    compaction: f64,
) -> WhatsAppBill {
    let n = figures.len().max(1) as f64;
    let mean =
        |f: &dyn Fn(&super::whatsapp::WhatsAppFigures) -> f64| sum(figures.iter().map(f)) / n;
    let webhook_billed_ms = mean(&|w| {
        prices.billed_ms(
            w.webhook_wall_ms,
            w.webhook_aws.duration_ms,
            w.webhook_aws.calls,
        )
    });
    let worker_billed_ms = mean(&|w| {
        prices.billed_ms(
            w.worker_wall_ms,
            w.worker_aws.dynamodb_duration_ms,
            w.worker_aws.dynamodb_calls,
        )
    });
    let webhook_lambda = prices.lambda_at(prices.webhook_memory_mb, 1.0, webhook_billed_ms);
    let worker_lambda = prices.lambda(mean(&|w| w.worker_invocations as f64), worker_billed_ms);
    let webhook_dynamodb =
        prices.dynamodb(mean(&|w| w.webhook_aws.rcu), mean(&|w| w.webhook_aws.wcu));
    let worker_dynamodb = prices.dynamodb(mean(&|w| w.worker_aws.rcu), mean(&|w| w.worker_aws.wcu));
    let sqs = prices.sqs(mean(&|w| {
        (w.webhook_aws.sqs_billed_requests + w.worker_aws.sqs_billed_requests) as f64
    }));
    let api_gateway = prices.http_api(1.0);
    let logs = prices.logs(log_bytes_per_message + signals.webhook_access_log_bytes);
    let xray = prices.xray(1.0 + mean(&|w| w.worker_invocations as f64));
    let graph_sends_per_message = mean(&|w| w.graph_sends as f64);
    let graph = graph_sends_per_message * 1e6 * prices.whatsapp_service_reply;
    WhatsAppBill {
        messages: figures.len(),
        webhook_lambda,
        webhook_dynamodb,
        worker_lambda,
        worker_dynamodb,
        sqs,
        compaction,
        api_gateway,
        logs,
        xray,
        graph,
        graph_sends_per_message,
        worker_billed_ms,
        webhook_billed_ms,
        total: webhook_lambda
            + webhook_dynamodb
            + worker_lambda
            + worker_dynamodb
            + sqs
            + compaction
            + api_gateway
            + logs
            + xray
            + graph,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use degrau_awsproxy::Summary;

    use super::*;

    #[test]
    fn the_whatsapp_bill_adds_up_its_parts() {
        use super::super::whatsapp::WhatsAppFigures;
        let p = Prices::default();
        let aws = |rcu: f64, wcu: f64, sqs: u64, calls: u64| Summary {
            rcu,
            wcu,
            sqs_billed_requests: sqs,
            dynamodb_calls: calls,
            calls: calls + sqs,
            ..Summary::default()
        };
        let figures = vec![WhatsAppFigures {
            message: 1,
            webhook_status: 200,
            webhook_wall_ms: 20.0,
            webhook_aws: aws(0.5, 3.0, 1, 3),
            worker_invocations: 1,
            worker_wall_ms: 80.0,
            worker_aws: aws(10.0, 12.0, 2, 8),
            graph_sends: 1,
        }];
        let signals = Signals {
            webhook_access_log_bytes: 300.0,
            ..Signals::default()
        };
        let bill = whatsapp_bill(&p, &figures, 1_700.0, &signals, 0.4);
        // No AWS latency recorded here: billed = wall + 5 ms per call.
        assert_eq!(bill.webhook_billed_ms, 20.0 + 4.0 * 5.0);
        assert_eq!(bill.worker_billed_ms, 80.0 + 8.0 * 5.0);
        assert!((bill.webhook_lambda - p.lambda_at(256, 1.0, 40.0)).abs() < 1e-12);
        assert!((bill.sqs - 3.0 * 0.5).abs() < 1e-12);
        assert!((bill.xray - 2.0 * 5.0).abs() < 1e-12);
        assert!((bill.api_gateway - 1.0).abs() < 1e-12);
        assert!((bill.logs - p.logs(2_000.0)).abs() < 1e-12);
        assert_eq!(bill.graph, 0.0);
        let parts = bill.webhook_lambda
            + bill.webhook_dynamodb
            + bill.worker_lambda
            + bill.worker_dynamodb
            + bill.sqs
            + bill.compaction
            + bill.api_gateway
            + bill.logs
            + bill.xray
            + bill.graph;
        assert!((bill.total - parts).abs() < 1e-9 && bill.compaction == 0.4);
    }
}
