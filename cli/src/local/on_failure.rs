//! Durable on-failure destinations of the local stream mapping: records
//! given up are appended to a JSON-lines file and/or sent to an SQS queue,
//! besides the in-memory list the runtimes report.
//!
//! Each record has the envelope Lambda writes for a DynamoDB stream's
//! on-failure destination (`requestContext`, `responseContext`, `version`,
//! `timestamp`, `DDBStreamBatchInfo`), so one tool reads both. Lambda's
//! conditions are `RetryAttemptsExhausted` and `RecordAgeExceeded`. Losses
//! Lambda has no record for use the same envelope with their own condition
//! (and `approximateInvokeCount` 0):
//!
//! - `RecordsTrimmed`: the records after `startSequenceNumber` and before
//!   `endSequenceNumber` (both exclusive; the end is empty when nothing was
//!   left to read) were trimmed from the stream before they were processed.
//! - `ShardVanished`: the shard no longer exists in the stream; every record
//!   after `startSequenceNumber` (its last checkpoint; empty: none) is lost.
//!
//! Both add a human `reason`; `jobstream backfill` adopts what was lost.

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

/// Why records were given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Lambda's: the batch failed more than `MaximumRetryAttempts` times.
    RetryAttemptsExhausted,
    /// Lambda's: records older than `MaximumRecordAgeInSeconds`.
    RecordAgeExceeded,
    /// Ours: trimmed from the stream (past its retention) before processing.
    RecordsTrimmed,
    /// Ours: a checkpointed shard no longer exists in the stream.
    ShardVanished,
}

impl Condition {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RetryAttemptsExhausted => "RetryAttemptsExhausted",
            Self::RecordAgeExceeded => "RecordAgeExceeded",
            Self::RecordsTrimmed => "RecordsTrimmed",
            Self::ShardVanished => "ShardVanished",
        }
    }

    /// A loss of records that were never handed to the function.
    pub fn is_loss(self) -> bool {
        matches!(self, Self::RecordsTrimmed | Self::ShardVanished)
    }
}

/// The ARN of the function a mapping stands for: the stream's region and
/// account, the mapping's name (`arn:aws:lambda:<region>:<account>:function:<name>`).
pub fn function_arn(mapping: &str, stream_arn: &str) -> String {
    let mut parts = stream_arn.split(':');
    let (region, account) = match (parts.nth(3), parts.next()) {
        (Some(r), Some(a)) if !r.is_empty() && !a.is_empty() => (r, a),
        _ => ("local", "000000000000"),
    };
    format!("arn:aws:lambda:{region}:{account}:function:{mapping}")
}

fn iso(t: Option<chrono::DateTime<chrono::Utc>>) -> serde_json::Value {
    json!(t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)))
}

/// The JSON line / message of one failed batch, in Lambda's shape.
pub fn failure_record(f: &FailedBatch) -> serde_json::Value {
    let mut response = json!({"statusCode": 200, "executedVersion": "$LATEST"});
    if let Some(e) = &f.function_error {
        response["functionError"] = json!(e);
    }
    json!({
        "requestContext": {
            "requestId": uuid::Uuid::new_v4().to_string(),
            "functionArn": function_arn(&f.mapping, &f.stream_arn),
            "condition": f.condition.as_str(),
            "approximateInvokeCount": f.invoke_count,
        },
        "responseContext": response,
        "version": "1.0",
        "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "reason": f.reason,
        "DDBStreamBatchInfo": {
            "shardId": f.shard_id,
            "startSequenceNumber": f.start_sequence_number,
            "endSequenceNumber": f.end_sequence_number,
            "approximateArrivalOfFirstRecord": iso(f.first_arrival),
            "approximateArrivalOfLastRecord": iso(f.last_arrival),
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
            .message_body(shared::sqs::sqs_text(&body))
            .send()
            .await
            .with_context(|| format!("SendMessage to the on-failure queue {}", q.url))?;
    }
    Ok(())
}

/// Checks every destination before the first record is given up: the
/// file can be opened for appending (it is created if missing, nothing is
/// written) and the queue exists. An error names the destination and says
/// what to do.
pub async fn check(config: &OnFailureConfig) -> anyhow::Result<()> {
    if let Some(path) = &config.file {
        let p = path.clone();
        tokio::task::spawn_blocking(move || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
        })
        .await?
        .with_context(|| {
            format!(
                "--on-failure-file {} cannot be appended to: records given up would have \
                 nowhere to go. Give a writable path (--on-failure-file or \
                 JOBSTREAM_ON_FAILURE_FILE; in a container, a mounted volume): the file is \
                 needed with --on-failure-queue-url too",
                path.display()
            )
        })?;
    }
    if let Some(q) = &config.queue {
        q.client
            .get_queue_attributes()
            .queue_url(&q.url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .with_context(|| {
                format!(
                    "--on-failure-queue-url {}: the queue cannot be read (missing, or no access)",
                    q.url
                )
            })?;
    }
    Ok(())
}

/// `OnFailureUndelivered` (batches the destinations failed to take) of a
/// mapping as one CloudWatch Embedded Metric Format line.
pub fn undelivered_emf(mapping: &str, count: u64, timestamp_ms: i64) -> String {
    let name = "OnFailureUndelivered";
    crate::local::esm::emf_line(mapping, name, "Count", count, timestamp_ms)
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
            condition: Condition::RetryAttemptsExhausted,
            first_arrival: chrono::DateTime::from_timestamp(1_700_000_000, 0),
            last_arrival: chrono::DateTime::from_timestamp(1_700_000_002, 0),
            invoke_count: 11,
            function_error: Some("Unhandled".into()),
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

    #[tokio::test]
    async fn an_unwritable_file_is_refused_before_anything_is_given_up() {
        let dir = std::env::temp_dir().join(format!("no-such-dir-{}", uuid::Uuid::new_v4()));
        let config = OnFailureConfig {
            file: Some(dir.join("failures.jsonl")),
            queue: None,
        };
        let e = check(&config).await.expect_err("refused");
        let msg = format!("{e:#}");
        assert!(
            msg.contains("failures.jsonl") && msg.contains("volume"),
            "{msg}"
        );
        let ok = OnFailureConfig {
            file: Some(std::env::temp_dir().join(format!("ok-{}.jsonl", uuid::Uuid::new_v4()))),
            queue: None,
        };
        check(&ok).await.expect("a writable path passes");
        std::fs::remove_file(ok.file.unwrap()).ok();
    }

    #[test]
    fn the_record_has_lambdas_envelope() {
        let v = failure_record(&FailedBatch {
            stream_arn: "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/2024".into(),
            ..failed()
        });
        let ctx = &v["requestContext"];
        assert_eq!(
            ctx["functionArn"],
            "arn:aws:lambda:eu-west-1:123456789012:function:derive"
        );
        assert_eq!(ctx["approximateInvokeCount"], 11);
        assert!(ctx["requestId"].as_str().is_some_and(|s| s.len() == 36));
        assert_eq!(v["responseContext"]["statusCode"], 200);
        assert_eq!(v["responseContext"]["executedVersion"], "$LATEST");
        assert_eq!(v["responseContext"]["functionError"], "Unhandled");
        assert_eq!(v["version"], "1.0");
        assert!(v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        let info = &v["DDBStreamBatchInfo"];
        assert_eq!(
            info["approximateArrivalOfFirstRecord"],
            "2023-11-14T22:13:20.000Z"
        );
        assert_eq!(
            info["approximateArrivalOfLastRecord"],
            "2023-11-14T22:13:22.000Z"
        );
        assert_eq!(
            function_arn("derive", "arn"),
            "arn:aws:lambda:local:000000000000:function:derive"
        );
    }
}
