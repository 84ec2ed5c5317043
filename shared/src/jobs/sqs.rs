//! The SQS FIFO adapter of the [`Jobs`] port.
//!
//! One conversation is one message group, so its jobs run in order and one at a
//! time. The group id is a hash of the contact's partition key rather than the key
//! itself: the ids are limited to 128 characters (a tenant and a contact may reach
//! 200) and they show up in the console and in the DLQ, where a phone number should
//! not. The deduplication id names one step (`session`, `summarized_until`) or one
//! session's fact extraction, so the triggers of the rounds that pass the threshold
//! before the step lands collapse into one delivery. SQS de-duplicates only within
//! five minutes; the compactor's conditional write is what makes a step idempotent.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{EnqueueError, Job, Jobs};
use crate::store::ContactKey;

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

    async fn send(&self, job: &Job) -> Result<bool, EnqueueError> {
        let body = serde_json::to_string(job).map_err(|e| EnqueueError(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_group_id(message_group_id(&job.key()))
            .message_deduplication_id(deduplication_id(job))
            .send()
            .await
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(e).to_string()))?;
        Ok(true)
    }
}

#[async_trait]
impl Jobs for SqsJobs {
    async fn enqueue_step(
        &self,
        key: &ContactKey,
        session: u32,
        summarized_until: u64,
    ) -> Result<bool, EnqueueError> {
        self.send(&Job::Step {
            tenant: key.tenant.clone(),
            contact: key.contact.clone(),
            session,
            summarized_until,
        })
        .await
    }

    async fn enqueue_facts(&self, key: &ContactKey, session: u32) -> Result<bool, EnqueueError> {
        self.send(&Job::Facts {
            tenant: key.tenant.clone(),
            contact: key.contact.clone(),
            session,
        })
        .await
    }
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The message group of a conversation: hex SHA-256 of `T#{tenant}#C#{contact}`
/// (64 characters).
pub fn message_group_id(key: &ContactKey) -> String {
    sha256_hex(&format!("T#{}#C#{}", key.tenant, key.contact))
}

/// The deduplication id of a job: hex SHA-256 of the group id followed by
/// `#step#{session}#{summarized_until}` or `#facts#{session}` (64 characters).
pub fn deduplication_id(job: &Job) -> String {
    let group = message_group_id(&job.key());
    match job {
        Job::Step {
            session,
            summarized_until,
            ..
        } => sha256_hex(&format!("{group}#step#{session}#{summarized_until}")),
        Job::Facts { session, .. } => sha256_hex(&format!("{group}#facts#{session}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ContactId, TenantId};
    use std::sync::{Arc, Mutex};

    fn key(contact: &str) -> ContactKey {
        ContactKey {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse(contact).unwrap(),
        }
    }

    fn step(contact: &str, session: u32, summarized_until: u64) -> Job {
        let key = key(contact);
        Job::Step {
            tenant: key.tenant,
            contact: key.contact,
            session,
            summarized_until,
        }
    }

    #[test]
    fn one_group_per_conversation_and_one_id_per_step() {
        let group = message_group_id(&key("+5511900000000"));
        assert_eq!(group.len(), 64);
        assert!(
            !group.contains("5511900000000"),
            "no phone number in the id"
        );
        assert_eq!(group, message_group_id(&step("+5511900000000", 1, 0).key()));
        assert_ne!(group, message_group_id(&key("+5511900000001")));
        // The longest ids still fit SQS's 128-character limit.
        let long = ContactKey {
            tenant: TenantId::parse(&"t".repeat(64)).unwrap(),
            contact: ContactId::parse(&"c".repeat(128)).unwrap(),
        };
        assert_eq!(message_group_id(&long).len(), 64);

        let first = deduplication_id(&step("+5511900000000", 1, 0));
        assert_eq!(first, deduplication_id(&step("+5511900000000", 1, 0)));
        assert_eq!(
            first,
            sha256_hex(&format!("{group}#step#1#0")),
            "the documented recipe"
        );
        assert_ne!(first, deduplication_id(&step("+5511900000000", 1, 12)));
        assert_ne!(first, deduplication_id(&step("+5511900000000", 2, 0)));
        assert_ne!(first, deduplication_id(&step("+5511900000001", 1, 0)));
        let facts = Job::Facts {
            tenant: TenantId::parse("barber").unwrap(),
            contact: ContactId::parse("+5511900000000").unwrap(),
            session: 1,
        };
        assert_eq!(
            deduplication_id(&facts),
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
        let key = key("+5511900000000");
        assert!(jobs.enqueue_step(&key, 1, 12).await.unwrap());
        assert!(jobs.enqueue_facts(&key, 1).await.unwrap());

        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        let (target, body) = &seen[0];
        assert_eq!(target, "AmazonSQS.SendMessage");
        assert_eq!(body["QueueUrl"], "http://queue/jobs.fifo");
        assert_eq!(body["MessageGroupId"], message_group_id(&key));
        let job: Job = serde_json::from_str(body["MessageBody"].as_str().unwrap()).unwrap();
        assert_eq!(job, step("+5511900000000", 1, 12));
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
        let error = jobs
            .enqueue_step(&key("+5511900000000"), 1, 0)
            .await
            .unwrap_err();
        assert!(error.to_string().contains("could not enqueue"), "{error}");
    }
}
