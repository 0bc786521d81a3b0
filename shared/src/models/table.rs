//! Table definitions shared by the local runtime (CreateTable) and the CDK
//! stack (`jobstream tables --json` writes them; `infra/` reads that file).

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Gsi {
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
}

/// A table: string keys, GSIs projecting all attributes, optional TTL.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TableDef {
    /// Default table name (overridable by configuration).
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
    pub gsis: Vec<Gsi>,
    pub ttl_attribute: Option<&'static str>,
    /// NEW_AND_OLD_IMAGES stream (the source table) or none (the ledger).
    pub stream: bool,
}

/// The ledger: idempotency markers and fold state. No stream, TTL `ttl`.
pub fn ledger() -> TableDef {
    TableDef {
        name: "jobstream-ledger",
        pk: crate::ledger::PK,
        sk: crate::ledger::SK,
        gsis: vec![],
        ttl_attribute: Some(crate::ledger::TTL),
        stream: false,
    }
}

/// A work queue, its consumer and its dead-letter queue. Shared by the local
/// runtime (the local SQS) and the CDK stack (through `jobstream tables`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct QueueDef {
    /// Logical name (the key of [`crate::engine::rules::OutMessage::queue`]).
    pub logical: &'static str,
    pub name: &'static str,
    pub dlq_name: &'static str,
    /// The consumer's name (processor name, Lambda function suffix).
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
    /// Most concurrent invocations of the consumer for this queue: the SQS
    /// mapping's `ScalingConfig.MaximumConcurrency` when deployed, the number
    /// of concurrent pollers/invocations locally (never reserved
    /// concurrency, which would throttle messages into the DLQ).
    pub max_concurrency: u32,
}

const CONSUMER_TIMEOUT: u32 = 30;

impl QueueDef {
    /// A standard queue with the contract's settings (SPEC §2.9):
    /// visibility 6 x the consumer timeout, 5 receives, DLQ kept 14 days.
    pub fn standard(
        logical: &'static str,
        name: &'static str,
        dlq_name: &'static str,
        consumer: &'static str,
    ) -> Self {
        Self {
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
            max_concurrency: 5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_queue_settings_follow_the_contract() {
        let q = QueueDef::standard("l", "n", "d", "c");
        assert!(q.visibility_timeout_secs >= 6 * q.consumer_timeout_secs);
        assert!(q.max_receive_count >= 5);
        assert!(q.dlq_retention_secs > q.retention_secs);
    }
}
