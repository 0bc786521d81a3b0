//! Durable on-failure destinations of the local stream mapping: records that
//! exhausted their retries are appended to a JSON-lines file and/or sent to
//! an SQS queue (the message Lambda sends for a stream's on-failure
//! destination: the batch's shard and sequence numbers, not the records),
//! besides the in-memory list the runtimes report.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;

use crate::local::esm::FailedBatch;

/// An SQS on-failure destination.
#[derive(Debug, Clone)]
pub struct FailureQueue {
    pub client: aws_sdk_sqs::Client,
    pub url: String,
}

/// Where records that exhausted their retries go besides memory.
#[derive(Debug, Clone, Default)]
pub struct OnFailureConfig {
    /// JSON lines, one per failed batch (appended; several mappings and
    /// processes may share one file).
    pub file: Option<PathBuf>,
    pub queue: Option<FailureQueue>,
}

impl OnFailureConfig {
    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.queue.is_none()
    }
}

/// The JSON line / message of one failed batch, shaped like Lambda's
/// on-failure record for a DynamoDB stream.
pub fn failure_record(f: &FailedBatch) -> serde_json::Value {
    json!({
        "requestContext": {
            "condition": "RetryAttemptsExhausted",
            "functionArn": f.mapping,
        },
        "timestamp": chrono::Utc::now().to_rfc3339(),
        "reason": f.reason,
        "DDBStreamBatchInfo": {
            "shardId": f.shard_id,
            "startSequenceNumber": f.start_sequence_number,
            "endSequenceNumber": f.end_sequence_number,
            "batchSize": f.batch_size,
            "streamArn": f.stream_arn,
        }
    })
}

/// Sends one failed batch to the configured destinations. Errors are
/// returned (the caller logs them loudly; the batch is also kept in memory).
pub async fn deliver(config: &OnFailureConfig, f: &FailedBatch) -> anyhow::Result<()> {
    let body = failure_record(f).to_string();
    if let Some(path) = &config.file {
        let line = format!("{body}\n");
        let path = path.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            // One write per line: appends of concurrent writers do not interleave.
            file.write_all(line.as_bytes())
                .with_context(|| format!("appending to {}", path.display()))?;
            file.sync_data().ok();
            Ok(())
        })
        .await??;
    }
    if let Some(q) = &config.queue {
        q.client
            .send_message()
            .queue_url(&q.url)
            .message_body(body)
            .send()
            .await
            .with_context(|| format!("SendMessage to the on-failure queue {}", q.url))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> FailedBatch {
        FailedBatch {
            mapping: "derive".into(),
            stream_arn: "arn:s".into(),
            shard_id: "shard-1".into(),
            start_sequence_number: "000000000000000000010".into(),
            end_sequence_number: "000000000000000000012".into(),
            batch_size: 3,
            reason: "function error: boom".into(),
        }
    }

    #[tokio::test]
    async fn failed_batches_are_appended_as_json_lines() {
        let path = std::env::temp_dir().join(format!(
            "jobstream-onfailure-{}.jsonl",
            uuid::Uuid::new_v4()
        ));
        let config = OnFailureConfig {
            file: Some(path.clone()),
            queue: None,
        };
        deliver(&config, &failed()).await.unwrap();
        deliver(&config, &failed()).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        let info = &lines[0]["DDBStreamBatchInfo"];
        assert_eq!(info["shardId"], "shard-1");
        assert_eq!(info["startSequenceNumber"], "000000000000000000010");
        assert_eq!(info["endSequenceNumber"], "000000000000000000012");
        assert_eq!(info["batchSize"], 3);
        assert_eq!(lines[0]["reason"], "function error: boom");
        assert_eq!(
            lines[0]["requestContext"]["condition"],
            "RetryAttemptsExhausted"
        );
    }
}
