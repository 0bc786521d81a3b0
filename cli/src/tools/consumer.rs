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
    #[arg(
        long,
        env = "JOBSTREAM_STARTING_POSITION",
        default_value = "trim-horizon"
    )]
    pub starting_position: StartingPosition,
    /// Ignore the stored checkpoints and replay every shard from
    /// TRIM_HORIZON (effects are idempotent: the derived data does not change).
    /// It replays the shards this process takes: stop the other `run`
    /// processes first (a shard another one holds is replayed only once this
    /// process takes it; the log and the status line say which wait). A flag only, no variable: a one-off, not a setting
    /// every restart of a unit would replay the stream with.
    #[arg(long)]
    pub from_start: bool,
    /// Append records that exhausted their retries to this file (JSON lines:
    /// shard, sequence numbers, reason).
    #[arg(
        long,
        env = "JOBSTREAM_ON_FAILURE_FILE",
        value_name = "PATH",
        default_value = "jobstream-failures.jsonl"
    )]
    pub on_failure_file: PathBuf,
    /// Also send them to this SQS queue, like the deployed stack.
    #[arg(
        long,
        env = "JOBSTREAM_ON_FAILURE_QUEUE_URL",
        value_name = "URL",
        value_parser = crate::local::engine::url_arg("JOBSTREAM_ON_FAILURE_QUEUE_URL")
    )]
    pub on_failure_queue_url: Option<String>,
    /// This process's lease owner (default: host:pid:random). Give a stable
    /// one to a process that is restarted in place, so it takes its leases
    /// back at once instead of after --lease-ttl-secs.
    #[arg(long, env = "JOBSTREAM_LEASE_OWNER")]
    pub lease_owner: Option<String>,
    /// Lease duration; another process takes a shard once its lease counter
    /// has not moved for this long, measured on that process's own clock (no
    /// wall clocks are compared across hosts). Leases are renewed every
    /// third of it, and released at once on SIGTERM / SIGINT.
    /// At most a day.
    #[arg(long, env = "JOBSTREAM_LEASE_TTL_SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(..=LONGEST.as_secs()))]
    pub lease_ttl_secs: u64,
    /// On SIGTERM / SIGINT: the bound of the whole stop, from the signal to
    /// the process's end, whatever DynamoDB does. No new batch starts and no
    /// lease is taken; stream batches and queue invocations in flight get
    /// the grace less a fifth of it (at most 2 s) to finish, past which they
    /// are abandoned (no checkpoint; their effects are idempotent; messages
    /// return after their visibility timeout); the leases are released
    /// within the rest but a twentieth (at most 250 ms) kept for the exit (a
    /// release that does not finish lets its lease run out by its TTL); the
    /// last line says when the stop ended. `10s`, `500ms`, `2m` or seconds; at most a day.
    #[arg(
        long,
        env = "JOBSTREAM_SHUTDOWN_GRACE",
        default_value = "10s",
        value_parser = parse_bounded_duration
    )]
    pub shutdown_grace: Duration,
    /// Print CloudWatch Embedded Metric Format lines (namespace
    /// `jobstream`, dimension `Processor`): each stream mapping's
    /// `IteratorAge` (milliseconds: the oldest record not yet checkpointed,
    /// of the shards this process holds; none held, no datapoint) and
    /// `ShardsUnread` (the shards it sees nobody reading) with every status
    /// line, and every batch's counters (`BadInput`, `Processed`, ...) as
    /// the Lambdas print them. From the environment: `true` or `false`.
    #[arg(long, env = "JOBSTREAM_EMIT_METRICS")]
    pub emit_metrics: bool,
    /// Serve Prometheus metrics on `http://ADDR/metrics`, and the probes
    /// `/healthz` (live) and `/readyz` (shards listed and leases read:
    /// holding leases or standing by), e.g. `0.0.0.0:9090`.
    #[arg(long, value_name = "ADDR", env = "JOBSTREAM_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Whether each processor's calls are checked against its grant (the
    /// IAM policy the stack deploys): `checked` (the default, the deployed
    /// behaviour: a call outside the grant is answered AccessDenied, as IAM
    /// answers a Lambda's role) or `unchecked` (against real AWS the
    /// process's own credentials are what IAM checks; the local check only
    /// catches a grant that is too narrow before deploying).
    #[arg(long, env = "JOBSTREAM_GRANTS", value_enum, default_value = "checked")]
    pub grants: GrantCheck,
}

/// `--grants`: whether a processor's calls are checked against its grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GrantCheck {
    /// Checked, as the deployed stack's IAM policies check them (default).
    Checked,
    /// Not checked here.
    Unchecked,
}

impl GrantCheck {
    /// For [`crate::local::runtime::RuntimeOptions::enforce_grants`].
    pub fn enforced(self) -> bool {
        self == GrantCheck::Checked
    }
}

/// The longest lease and shutdown grace. Unbounded, one past what an
/// `Instant` can add (about i64::MAX seconds) panicked the consumer at its
/// first lease or at SIGTERM; past a day, a holder that died keeps its
/// shards longer than anyone waits.
const LONGEST: Duration = Duration::from_secs(86_400);

/// [`parse_duration`], at most [`LONGEST`].
fn parse_bounded_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > LONGEST {
        return Err(format!("{s:?}: at most a day (1440m)"));
    }
    Ok(d)
}

/// `10s`, `500ms`, `2m`, or a number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (e.g. 10s, 500ms, 2m)"))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        other => return Err(format!("unknown unit {other:?} in {s:?} (ms, s or m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

impl ConsumerArgs {
    /// The listener of `--metrics-listen` (bound now, so a taken port fails
    /// the start, naming the address), and the line announcing it.
    pub async fn metrics_listener(&self) -> anyhow::Result<Option<tokio::net::TcpListener>> {
        let Some(addr) = &self.metrics_listen else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| anyhow::anyhow!("--metrics-listen {addr}: cannot listen: {e}"))?;
        let at = listener.local_addr()?;
        crate::outln!("metrics: http://{at}/metrics (probes: /healthz, /readyz)");
        Ok(Some(listener))
    }

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
        assert_eq!(cli.consumer.shutdown_grace, Duration::from_secs(10));
        let cli = Cli::parse_from(["run", "--shutdown-grace", "1500ms"]);
        assert_eq!(cli.consumer.shutdown_grace, Duration::from_millis(1500));
        assert_eq!(cli.consumer.metrics_listen, None);
        let cli = Cli::parse_from(["run", "--metrics-listen", "0.0.0.0:9090"]);
        assert_eq!(cli.consumer.metrics_listen.as_deref(), Some("0.0.0.0:9090"));
    }

    #[test]
    fn grants_are_checked_unless_the_user_says_otherwise() {
        let cli = Cli::try_parse_from(["run"]).unwrap();
        assert_eq!(cli.consumer.grants, GrantCheck::Checked);
        assert!(cli.consumer.grants.enforced());
        let cli = Cli::try_parse_from(["run", "--grants", "unchecked"]).unwrap();
        assert!(!cli.consumer.grants.enforced());
        assert!(Cli::try_parse_from(["run", "--grants", "off"]).is_err());
    }

    #[test]
    fn durations_parse_with_their_units() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5h").is_err());
    }

    /// A lease or a grace past what an `Instant` can add panicked the
    /// consumer (exit 101, "overflow when adding duration to instant"): at
    /// its first lease, or at SIGTERM. Bounded at a day, named at parse.
    #[test]
    fn a_lease_or_a_grace_longer_than_a_day_is_refused_at_parse() {
        let err = |args: &[&str]| {
            let argv = ["run"].iter().chain(args).copied();
            match Cli::try_parse_from(argv) {
                Ok(_) => panic!("{args:?} accepted"),
                Err(e) => e.to_string(),
            }
        };
        let e = err(&["--lease-ttl-secs", "18446744073709551615"]);
        assert!(e.contains("--lease-ttl-secs"), "{e}");
        assert!(err(&["--lease-ttl-secs", "86401"]).contains("86400"));
        let e = err(&["--shutdown-grace", "10000000000000000000s"]);
        assert!(e.contains("at most a day"), "{e}");
        assert!(err(&["--shutdown-grace", "1441m"]).contains("at most a day"));
        let day = Cli::try_parse_from([
            "run",
            "--lease-ttl-secs",
            "86400",
            "--shutdown-grace",
            "24h",
        ]);
        assert!(day.is_err(), "no hours");
        let day = Cli::try_parse_from([
            "run",
            "--lease-ttl-secs",
            "86400",
            "--shutdown-grace",
            "1440m",
        ])
        .expect("a day of each");
        assert_eq!(day.consumer.lease_ttl_secs, 86_400);
        assert_eq!(day.consumer.shutdown_grace, Duration::from_secs(86_400));
    }
}
