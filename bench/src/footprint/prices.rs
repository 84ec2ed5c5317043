//! The prices the bills use (USD; us-east-1, on demand), and what a duration,
//! a request or a unit costs per million at them.

use serde::Serialize;

/// The prices the bill uses (USD; us-east-1, on demand, as in
/// the AWS price pages of late 2026).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prices {
    /// Lambda duration, arm64, per GB-second.
    pub lambda_gb_second: f64,
    /// Lambda requests, per million.
    pub lambda_per_million_requests: f64,
    /// Memory of both functions in `template.yaml` (`MemorySize`), MB.
    pub memory_mb: u64,
    /// DynamoDB on-demand, per million write request units (1 KB).
    pub dynamodb_per_million_write_units: f64,
    /// DynamoDB on-demand, per million read request units (4 KB strongly
    /// consistent; half a unit eventually consistent; transactions double).
    pub dynamodb_per_million_read_units: f64,
    /// SQS FIFO, per million requests (each 64 KB of payload is one request).
    pub sqs_fifo_per_million_requests: f64,
    /// CloudWatch Logs ingestion, per GB.
    pub logs_per_gb: f64,
    /// Memory of the WhatsApp webhook in `template.yaml`, MB (the other three
    /// functions have [`Prices::memory_mb`]).
    pub webhook_memory_mb: u64,
    /// API Gateway HTTP API, per million requests (the first 300 million a month;
    /// each 512 KB of a request or response counts as one).
    pub http_api_per_million_requests: f64,
    /// X-Ray, per million traces recorded (the first 100,000 a month are free;
    /// retrieving and scanning traces, $0.50 per million, only when someone looks).
    pub xray_per_million_traces: f64,
    /// CloudWatch, per alarm metric a month (standard resolution; a metric-math
    /// alarm pays for each metric in it; the first 10 are free).
    pub alarm_metric_per_month: f64,
    /// CloudWatch, per dashboard a month (the first 3 of an account are free).
    pub dashboard_per_month: f64,
    /// CloudWatch, per custom metric a month (the first 10,000; EMF: each metric
    /// name with each set of dimension values is one).
    pub custom_metric_per_month: f64,
    /// Meta, per reply the WhatsApp worker sends: a free-form reply inside the
    /// 24-hour customer service window is free (Meta's per-message pricing since
    /// July 2025); only the tenant's template outside it is charged, by country.
    pub whatsapp_service_reply: f64,
    /// Not a price: the latency assumed for one DynamoDB or SQS call in AWS, ms
    /// ("single-digit milliseconds"), billed in place of moto's on this machine.
    pub assumed_aws_call_ms: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            lambda_gb_second: 0.000_013_333_4,
            lambda_per_million_requests: 0.20,
            memory_mb: 512,
            dynamodb_per_million_write_units: 0.625,
            dynamodb_per_million_read_units: 0.125,
            sqs_fifo_per_million_requests: 0.50,
            logs_per_gb: 0.50,
            webhook_memory_mb: 256,
            http_api_per_million_requests: 1.00,
            xray_per_million_traces: 5.00,
            alarm_metric_per_month: 0.10,
            dashboard_per_month: 3.00,
            custom_metric_per_month: 0.30,
            whatsapp_service_reply: 0.0,
            assumed_aws_call_ms: 5.0,
        }
    }
}

impl Prices {
    /// USD per million invocations lasting `ms` each (billed per started ms).
    pub fn lambda(&self, invocations_per_ask: f64, ms_per_ask: f64) -> f64 {
        self.lambda_at(self.memory_mb, invocations_per_ask, ms_per_ask)
    }

    /// [`Prices::lambda`] for a function of `memory_mb`.
    pub fn lambda_at(&self, memory_mb: u64, invocations_per_ask: f64, ms_per_ask: f64) -> f64 {
        let gb = memory_mb as f64 / 1024.0;
        invocations_per_ask * self.lambda_per_million_requests
            + 1e6 * gb * (ms_per_ask / 1000.0) * self.lambda_gb_second
    }

    /// USD per million asks of `requests` HTTP API requests each.
    pub fn http_api(&self, requests: f64) -> f64 {
        requests * self.http_api_per_million_requests
    }

    /// USD per million asks recording `traces` X-Ray traces each.
    pub fn xray(&self, traces: f64) -> f64 {
        traces * self.xray_per_million_traces
    }

    /// USD per million asks of `rcu` and `wcu` each.
    pub fn dynamodb(&self, rcu: f64, wcu: f64) -> f64 {
        rcu * self.dynamodb_per_million_read_units + wcu * self.dynamodb_per_million_write_units
    }

    /// USD per million asks of `requests` billed SQS requests each.
    pub fn sqs(&self, requests: f64) -> f64 {
        requests * self.sqs_fifo_per_million_requests
    }

    /// USD per million asks printing `bytes` of logs each.
    pub fn logs(&self, bytes: f64) -> f64 {
        1e6 * bytes / 1e9 * self.logs_per_gb
    }

    /// What each second of model time costs per million asks (the ask function
    /// waits for the model, and Lambda bills the wait).
    pub fn per_model_second(&self) -> f64 {
        self.lambda(0.0, 1000.0)
    }

    /// The duration billed for an invocation that lasted `wall_ms`, of which
    /// `aws_ms` waiting on `calls` AWS calls: moto's latency is replaced by
    /// [`Prices::assumed_aws_call_ms`] per call; Lambda bills started ms.
    pub fn billed_ms(&self, wall_ms: f64, aws_ms: f64, calls: u64) -> f64 {
        ((wall_ms - aws_ms).max(0.0) + calls as f64 * self.assumed_aws_call_ms).ceil()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_bill_follows_the_prices() {
        let p = Prices::default();
        // 1 M requests at 100 ms and 512 MB: $0.20 + 0.5 GB × 0.1 s × 1e6 × $0.0000133334.
        assert!((p.lambda(1.0, 100.0) - (0.20 + 0.666_67)).abs() < 1e-3);
        assert!((p.dynamodb(2.0, 4.0) - (0.25 + 2.5)).abs() < 1e-9);
        assert!((p.sqs(3.0) - 1.5).abs() < 1e-9);
        assert!((p.per_model_second() - 6.6667).abs() < 1e-3);
    }
}
