//! The job board's queues: shared by the local runtime (moto) and the CDK
//! stack (through `jobstream tables`).

use serde::Serialize;

use super::derive::{MATCHES_QUEUE, SUGGESTIONS_QUEUE};

/// A work queue, its consumer and its dead-letter queue.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QueueDef {
    /// Logical name (the key of [`crate::engine::derive::OutMessage::queue`]).
    pub logical: &'static str,
    pub name: &'static str,
    pub dlq_name: &'static str,
    /// The consumer binary.
    pub consumer: &'static str,
    pub consumer_timeout_secs: u32,
    /// >= 6 x the consumer's timeout (Lambda's guidance for SQS sources).
    pub visibility_timeout_secs: u32,
    /// Receives before a message moves to the DLQ (>= 5).
    pub max_receive_count: u32,
    pub retention_secs: u32,
    /// Longer than the source queue's, so nothing expires in the DLQ first.
    pub dlq_retention_secs: u32,
    pub batch_size: u32,
}

const CONSUMER_TIMEOUT: u32 = 30;

pub fn queues() -> Vec<QueueDef> {
    let q = |logical, name, dlq_name, consumer| QueueDef {
        logical,
        name,
        dlq_name,
        consumer,
        consumer_timeout_secs: CONSUMER_TIMEOUT,
        visibility_timeout_secs: 6 * CONSUMER_TIMEOUT,
        max_receive_count: 5,
        retention_secs: 4 * 24 * 3600,
        dlq_retention_secs: 14 * 24 * 3600,
        batch_size: 10,
    };
    vec![
        q(
            SUGGESTIONS_QUEUE,
            "jobstream-suggestion-jobs",
            "jobstream-suggestion-jobs-dlq",
            "suggestions",
        ),
        q(
            MATCHES_QUEUE,
            "jobstream-match-jobs",
            "jobstream-match-jobs-dlq",
            "matches",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_settings_follow_the_contract() {
        for q in queues() {
            assert!(q.visibility_timeout_secs >= 6 * q.consumer_timeout_secs);
            assert!(q.max_receive_count >= 5);
            assert!(q.dlq_retention_secs > q.retention_secs);
        }
    }
}
