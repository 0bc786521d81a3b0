//! `jobstream run`'s stream consumer settings: the flags and the
//! [`MappingConfig`] they turn into (durable checkpoints and leases in the
//! ledger table, starting position, on-failure destinations).

use std::path::PathBuf;
use std::time::Duration;

use crate::local::esm::{MappingConfig, StartingPosition};
use crate::local::lease::CheckpointConfig;
use crate::local::on_failure::{FailureQueue, OnFailureConfig};

/// Flags of a durable stream consumer (`#[command(flatten)]` them).
#[derive(Debug, Clone, clap::Args)]
pub struct ConsumerArgs {
    /// Where shards without a checkpoint start: trim-horizon (as the
    /// deployed stack) or latest.
    #[arg(long, default_value = "trim-horizon")]
    pub starting_position: StartingPosition,
    /// Ignore the stored checkpoints and replay every shard from
    /// TRIM_HORIZON (effects are idempotent: the derived data does not change).
    #[arg(long)]
    pub from_start: bool,
    /// Append records that exhausted their retries to this file (JSON lines:
    /// shard, sequence numbers, reason).
    #[arg(long, default_value = "jobstream-failures.jsonl")]
    pub on_failure_file: PathBuf,
    /// Also send them to this SQS queue, like the deployed stack.
    #[arg(long)]
    pub on_failure_queue_url: Option<String>,
    /// This process's lease owner (default: host:pid:random). Give a stable
    /// one to a process that is restarted in place, so it takes its leases
    /// back at once instead of after --lease-ttl-secs.
    #[arg(long, env = "JOBSTREAM_LEASE_OWNER")]
    pub lease_owner: Option<String>,
    /// Lease duration; another process takes a shard this long after its
    /// holder stopped renewing.
    #[arg(long, default_value_t = 20)]
    pub lease_ttl_secs: u64,
}

impl ConsumerArgs {
    /// `base` with durable checkpoints and leases in `ledger_table` (through
    /// `dynamodb`), the starting position and the on-failure destinations.
    /// `sqs` is needed only with `--on-failure-queue-url`.
    pub fn apply(
        &self,
        mut base: MappingConfig,
        dynamodb: aws_sdk_dynamodb::Client,
        ledger_table: &str,
        sqs: Option<aws_sdk_sqs::Client>,
    ) -> anyhow::Result<MappingConfig> {
        let mut checkpoints = CheckpointConfig::new(dynamodb, ledger_table);
        if let Some(owner) = &self.lease_owner {
            checkpoints.owner = owner.clone();
        }
        checkpoints.lease_ttl = Duration::from_secs(self.lease_ttl_secs.max(1));
        checkpoints.from_start = self.from_start;
        base.checkpoints = Some(checkpoints);
        base.starting_position = self.starting_position;
        let queue = match &self.on_failure_queue_url {
            Some(url) => Some(FailureQueue {
                client: sqs
                    .ok_or_else(|| anyhow::anyhow!("--on-failure-queue-url needs an SQS client"))?,
                url: url.clone(),
            }),
            None => None,
        };
        base.on_failure = OnFailureConfig {
            file: Some(self.on_failure_file.clone()),
            queue,
        };
        Ok(base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        consumer: ConsumerArgs,
    }

    #[test]
    fn flags_parse_with_run_defaults() {
        let cli = Cli::parse_from(["run"]);
        assert_eq!(
            cli.consumer.starting_position,
            StartingPosition::TrimHorizon
        );
        assert!(!cli.consumer.from_start);
        let cli = Cli::parse_from([
            "run",
            "--starting-position",
            "latest",
            "--from-start",
            "--on-failure-file",
            "/tmp/f.jsonl",
        ]);
        assert_eq!(cli.consumer.starting_position, StartingPosition::Latest);
        assert!(cli.consumer.from_start);
        assert_eq!(cli.consumer.on_failure_file, PathBuf::from("/tmp/f.jsonl"));
    }
}
