//! The SQS FIFO adapter of the [`Jobs`] port.
//!
//! One life of a conversation (a head's incarnation) is one message group, so its
//! jobs run in order and one at a time. The group id is a hash of the tenant and
//! the incarnation: ids are limited to 128 characters, and they show up in the
//! console and in the DLQ, where neither should name anyone (the job body names
//! the contact only through the incarnation, see [`Job`]). The deduplication id
//! names one step (`session`, `summarized_until`) or one session's fact
//! extraction, so the triggers of the rounds that pass the threshold before the
//! step lands collapse into one delivery. SQS de-duplicates only within five
//! minutes; the compactor's conditional write is what makes a job idempotent.
//!
//! (`docs/DESIGN.md`: "The flows" and invariant 12.)

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use degrau::domain::{Incarnation, TenantId};
use degrau::jobs::{EnqueueError, Job, Jobs};

/// Sends jobs to an SQS FIFO queue.
#[derive(Debug, Clone)]
pub struct SqsJobs {
    /// The SQS client, built once at init.
    pub client: aws_sdk_sqs::Client,
    /// The FIFO queue's URL (`JOBS_QUEUE_URL`).
    pub queue_url: String,
}

impl SqsJobs {
    /// An adapter sending to `queue_url`.
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        SqsJobs {
            client,
            queue_url: queue_url.into(),
        }
    }
}

#[async_trait]
impl Jobs for SqsJobs {
    async fn enqueue(&self, job: &Job) -> Result<bool, EnqueueError> {
        let body = serde_json::to_string(job).map_err(|e| EnqueueError(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(job_group_id(job))
            .message_deduplication_id(deduplication_id(job))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(true)
    }
}

/// The message group a job is sent in: its conversation's
/// ([`message_group_id`]), or for a recall index job that group's own index
/// group (`…-index`): an index job neither waits for the conversation's steps
/// and extractions nor is held back, and dead-lettered, behind one that keeps
/// failing.
pub fn job_group_id(job: &Job) -> String {
    let group = message_group_id(job.tenant(), job.incarnation());
    match job {
        Job::Index { .. } => format!("{group}-index"),
        _ => group,
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The message group of one life of a conversation: hex SHA-256 of
/// `T#{tenant}#I#{incarnation}` (64 characters).
pub fn message_group_id(tenant: &TenantId, incarnation: &Incarnation) -> String {
    sha256_hex(&format!("T#{tenant}#I#{incarnation}"))
}

/// The deduplication id of a job: hex SHA-256 of the group id followed by
/// `#step#{session}#{summarized_until}#{last_seq}`, `#fold#…` alike, `#facts#{session}` or
/// `#index#{session}` (64
/// characters). A step's `last_seq` makes each round's request its own: a request
/// from a later round is never dropped as a copy of one that found nothing to fold.
pub fn deduplication_id(job: &Job) -> String {
    let group = message_group_id(job.tenant(), job.incarnation());
    match job {
        Job::Step {
            session,
            summarized_until,
            last_seq,
            ..
        } => sha256_hex(&format!(
            "{group}#step#{session}#{summarized_until}#{last_seq}"
        )),
        Job::Fold {
            session,
            summarized_until,
            last_seq,
            ..
        } => sha256_hex(&format!(
            "{group}#fold#{session}#{summarized_until}#{last_seq}"
        )),
        Job::Facts { session, .. } => sha256_hex(&format!("{group}#facts#{session}")),
        Job::Index { session, .. } => sha256_hex(&format!("{group}#index#{session}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    const ONE: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
    const OTHER: &str = "ffffffffffffffff0000000000000000";

    fn barber() -> TenantId {
        TenantId::parse("barber").unwrap()
    }

    fn life(incarnation: &str) -> Incarnation {
        Incarnation::parse(incarnation).unwrap()
    }

    fn step(incarnation: &str, session: u32, summarized_until: u64) -> Job {
        Job::Step {
            tenant: barber(),
            incarnation: life(incarnation),
            session,
            summarized_until,
            last_seq: 30,
        }
    }

    fn facts(incarnation: &str, session: u32) -> Job {
        Job::Facts {
            tenant: barber(),
            incarnation: life(incarnation),
            session,
        }
    }

    #[test]
    fn an_index_job_has_its_lifes_index_group_and_the_others_share_its_group() {
        let index = Job::Index {
            tenant: barber(),
            incarnation: life(ONE),
            session: 1,
            summarise: true,
        };
        let group = message_group_id(&barber(), &life(ONE));
        assert_eq!(job_group_id(&index), format!("{group}-index"));
        assert_eq!(job_group_id(&facts(ONE, 1)), group);
        assert_eq!(job_group_id(&step(ONE, 1, 0)), group);
        assert!(job_group_id(&index).len() <= 128);
        assert_ne!(deduplication_id(&index), deduplication_id(&facts(ONE, 1)));
    }

    #[test]
    fn one_group_per_life_of_a_conversation_and_one_id_per_step() {
        let group = message_group_id(&barber(), &life(ONE));
        assert_eq!(group.len(), 64);
        assert_eq!(group, sha256_hex(&format!("T#barber#I#{ONE}")));
        assert_ne!(group, message_group_id(&barber(), &life(OTHER)));
        assert_ne!(
            group,
            message_group_id(&TenantId::parse("clinic").unwrap(), &life(ONE))
        );
        // The longest ids still fit SQS's 128-character limit.
        let long = message_group_id(
            &TenantId::parse(&"t".repeat(64)).unwrap(),
            &life(&"a".repeat(64)),
        );
        assert_eq!(long.len(), 64);

        let first = deduplication_id(&step(ONE, 1, 0));
        assert_eq!(first, deduplication_id(&step(ONE, 1, 0)));
        assert_eq!(
            first,
            sha256_hex(&format!("{group}#step#1#0#30")),
            "the documented recipe"
        );
        assert_ne!(first, deduplication_id(&step(ONE, 1, 12)));
        let later_round = Job::Step {
            tenant: barber(),
            incarnation: life(ONE),
            session: 1,
            summarized_until: 0,
            last_seq: 34,
        };
        assert_ne!(
            first,
            deduplication_id(&later_round),
            "a later round's request is its own"
        );
        assert_ne!(first, deduplication_id(&step(ONE, 2, 0)));
        assert_ne!(first, deduplication_id(&step(OTHER, 1, 0)));
        assert_eq!(
            deduplication_id(&facts(ONE, 1)),
            sha256_hex(&format!("{group}#facts#1"))
        );
    }

    /// What the fake SQS endpoint received: the `X-Amz-Target` header and the body.
    type Seen = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

    /// A fake SQS endpoint (the JSON protocol) answering every call with `status`.
    async fn fake_sqs(status: u16) -> (String, Seen) {
        use axum::http::{HeaderMap, StatusCode};
        let seen: Seen = Arc::default();
        let recorded = seen.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
            let recorded = recorded.clone();
            async move {
                let target = headers
                    .get("x-amz-target")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let body = serde_json::from_str(&body).unwrap_or_default();
                recorded.lock().unwrap().push((target, body));
                let status = StatusCode::from_u16(status).unwrap();
                let answer = if status.is_success() {
                    r#"{"MessageId":"5fea7756-0ea4-451a-a703-a558b933e274","SequenceNumber":"1"}"#
                } else {
                    r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no queue"}"#
                };
                (
                    status,
                    [("content-type", "application/x-amz-json-1.0")],
                    answer,
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    fn client(endpoint: &str) -> aws_sdk_sqs::Client {
        use aws_sdk_sqs::config::{Credentials, Region, retry::RetryConfig};
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .retry_config(RetryConfig::disabled())
            .build();
        aws_sdk_sqs::Client::from_conf(config)
    }

    #[tokio::test]
    async fn sends_the_job_with_its_group_and_deduplication_ids() {
        let (url, seen) = fake_sqs(200).await;
        let jobs = SqsJobs::new(client(&url), "http://queue/jobs.fifo");
        assert!(jobs.enqueue(&step(ONE, 1, 12)).await.unwrap());
        assert!(jobs.enqueue(&facts(ONE, 1)).await.unwrap());

        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        let (target, body) = &seen[0];
        assert_eq!(target, "AmazonSQS.SendMessage");
        assert_eq!(body["QueueUrl"], "http://queue/jobs.fifo");
        assert_eq!(
            body["MessageGroupId"],
            message_group_id(&barber(), &life(ONE))
        );
        let job: Job = serde_json::from_str(body["MessageBody"].as_str().unwrap()).unwrap();
        assert_eq!(job, step(ONE, 1, 12));
        assert_eq!(body["MessageDeduplicationId"], deduplication_id(&job));
        let facts: Job = serde_json::from_str(seen[1].1["MessageBody"].as_str().unwrap()).unwrap();
        assert_eq!(facts.kind(), "facts");
        assert_eq!(seen[1].1["MessageGroupId"], body["MessageGroupId"]);
        assert_ne!(
            seen[1].1["MessageDeduplicationId"],
            body["MessageDeduplicationId"]
        );
    }

    #[tokio::test]
    async fn a_refused_send_is_an_enqueue_error() {
        let (url, _) = fake_sqs(400).await;
        let jobs = SqsJobs::new(client(&url), "http://queue/missing.fifo");
        let error = jobs.enqueue(&step(ONE, 1, 0)).await.unwrap_err();
        assert!(error.to_string().contains("could not enqueue"), "{error}");
    }
}
