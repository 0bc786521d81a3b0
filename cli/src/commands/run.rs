//! `jobstream run`: the model's processors as a production consumer
//! against deployed tables and queues.

use std::process::ExitCode;
use std::time::Duration;

use jobstream::local::deployed::{queue_urls, require_tables, QueueNames};
use jobstream::local::engine::{
    dynamodb_endpoint, require_credentials, require_region, require_regional_host,
    require_resolvable, sdk_config, sqs_endpoint as engine_sqs_endpoint,
};
use jobstream::local::esm::RecordReader;
use jobstream::local::iam::Principal;
use jobstream::local::runtime::{Provision, Runtime};
use shared::retry::Retries;

use super::{announce, report_failures, Stop};
use crate::args::RunArgs;
use jobstream::tools::consumer::ConsumerArgs;

/// `jobstream run`: the model's processors against deployed tables and
/// queues (never created: each is checked against the definition), with
/// every on-failure destination checked before the first record.
pub(crate) async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Listened for before the first startup check (ops10 #6: a signal
    // during them, as PID 1, was lost and the process went on to work).
    let stop = Stop::listen("stopping before the processors started");
    let grace = args.consumer.shutdown_grace;
    stop.bound(grace);
    let starting = start(args);
    tokio::pin!(starting);
    // Checks that get no answer are retried for the call budget: said
    // while it lasts, not 40 s of silence (a wrong port, an outage).
    let slow = tokio::time::sleep(SLOW_STARTUP);
    tokio::pin!(slow);
    let mut said = false;
    let started = loop {
        tokio::select! {
            started = &mut starting => break started?,
            () = stop.signalled() => {
                exit_within_grace(&stop, grace);
                return Ok(ExitCode::SUCCESS);
            }
            () = &mut slow, if !said => {
                said = true;
                jobstream::errln!(
                    "startup: the checks have not finished after {} s (DynamoDB or SQS not answering: nothing listening at the endpoint, an outage?); a check that gets no answer is retried for up to {} s",
                    SLOW_STARTUP.as_secs(),
                    Retries::startup().call_budget.as_secs()
                );
            }
        }
    };
    stop.now_doing("finishing batches in flight, releasing leases");
    serve(started, &stop).await
}

/// The lines still queued at the exit (the stop's last word) are waited
/// for no later than the end of the grace: a stdout or stderr that does not
/// take them never holds the stop past it.
fn exit_within_grace(stop: &Stop, grace: Duration) {
    if let Some(at) = stop.signalled_at() {
        shared::out::exit_by(at + grace);
    }
}

/// How long the startup checks go unanswered before `run` says so.
const SLOW_STARTUP: Duration = Duration::from_secs(5);

/// What `run` starts before its processors work: the runtime and what its
/// stop reports.
struct Started {
    rt: Runtime,
    consumer: ConsumerArgs,
}

/// Without `--sqs-endpoint`, the region's own SQS host must resolve (else
/// refused at once, naming the flag: not 40 s of retries).
async fn require_sqs_host(c: &aws_config::SdkConfig, given: Option<&str>) -> anyhow::Result<()> {
    match given {
        Some(_) => Ok(()),
        None => require_regional_host(c, "sqs", "--sqs-endpoint").await,
    }
}

/// The startup checks (tables, queues, destinations) and the runtime.
async fn start(args: RunArgs) -> anyhow::Result<Started> {
    let RunArgs {
        endpoint,
        target,
        sqs_endpoint,
        consumer,
    } = args;
    // However it is named (flag or the SDK's variables), one endpoint:
    // a loopback one gets the same region and credentials either way.
    let endpoint = dynamodb_endpoint(endpoint)?;
    let sqs_endpoint = engine_sqs_endpoint(sqs_endpoint)?;
    let model = target.model()?;
    // A queue URL that can never work is named before any call.
    jobstream::local::deployed::require_queue_urls_valid(&model, |v| std::env::var(v).ok())?;
    // Every call of the process's own (startup checks, the stream, the
    // queues, leases) is checked against the stack's RunnerPolicy, as the
    // processors' against their grants.
    let runner = consumer.grants.enforced().then(|| {
        Principal::runner(
            &model,
            &target.table_name(&model),
            &target.ledger(),
            &Default::default(),
            consumer.on_failure_queue_url.clone(),
        )
    });
    let checked = |c: aws_config::SdkConfig| match &runner {
        Some(r) => r.checked(&c),
        None => c,
    };
    let sdk = sdk_config(endpoint.as_deref(), 5).await;
    require_region(&sdk, "DynamoDB")?;
    require_credentials(&sdk, "DynamoDB").await?;
    require_resolvable(endpoint.as_deref(), "--endpoint").await?;
    require_resolvable(sqs_endpoint.as_deref(), "--sqs-endpoint").await?;
    let region = sdk.region().map(|r| r.to_string());
    let via = jobstream::local::remedy::Via {
        endpoint: endpoint.as_deref(),
        region: region.as_deref(),
    };
    let sdk = checked(sdk);
    // The startup checks ride out throttles and outages of seconds as the
    // handlers do (a restart during one must not exit); permanent errors
    // fail at once.
    let startup = Retries::startup();
    // Tables first (the same check runs in `Runtime::start`): what is
    // missing is named before anything else is looked up.
    require_tables(
        &jobstream::local::deployed::startup_client(&startup, &sdk),
        &model,
        &target.table_name(&model),
        &target.ledger(),
        via,
    )
    .await?;
    let has_queues = !model.consumers.is_empty();
    let naming = QueueNames::of(target.stack.as_deref(), sqs_endpoint.as_deref());
    let sqs_client = if has_queues || consumer.on_failure_queue_url.is_some() {
        let c = sdk_config(sqs_endpoint.as_deref(), 5).await;
        if sqs_endpoint.is_none() && c.region().is_none() {
            // Most often a local `serve` whose SQS was not named (user15):
            // the flag first, the region second.
            anyhow::bail!(
                "model {} has queues and no --sqs-endpoint was given: pass --sqs-endpoint URL \
                 (against `jobstream serve`, the `SQS endpoint:` line it printed), --stack S \
                 with AWS_REGION for a deployed stack's queues, or set AWS_REGION for the \
                 region's own SQS",
                model.name
            );
        }
        let what = jobstream::local::deployed::sqs_asked(sqs_endpoint.as_deref());
        require_region(&c, &what)?;
        // Credentials before the first SQS call (a queue looked up by
        // name); with `QUEUE_URL_*` only, a missing variable is named
        // first (no call is made to find out).
        if !matches!(naming, QueueNames::EnvOnly) || !has_queues {
            require_credentials(&c, &what).await?;
            if has_queues {
                require_sqs_host(&c, sqs_endpoint.as_deref()).await?;
            }
        }
        let c = checked(c);
        // Finding the queues, checking the on-failure queue and sending it
        // what is given up: the processors' retries.
        Some((startup.sqs_client(&c), c, what))
    } else {
        None
    };
    let queues = match &sqs_client {
        Some((c, config, what)) if has_queues => {
            let urls = queue_urls(c, what, &model, naming, |v| std::env::var(v).ok()).await?;
            require_credentials(config, what).await?;
            require_sqs_host(config, sqs_endpoint.as_deref()).await?;
            urls
        }
        _ => Default::default(),
    };
    let mut opts = target.options(endpoint, RecordReader::Sdk);
    opts.sqs_endpoint = sqs_endpoint.clone();
    opts.provision = Provision::Existing { queues };
    opts.enforce_grants = consumer.grants.enforced();
    opts.runner = runner;
    let failure_sqs = sqs_client
        .as_ref()
        .filter(|_| consumer.on_failure_queue_url.is_some())
        .map(|(c, _, _)| c.clone());
    opts.mapping = consumer.apply(
        opts.mapping,
        aws_sdk_dynamodb::Client::new(&sdk),
        &target.ledger(),
        failure_sqs,
    )?;
    let on_failure = opts.mapping.on_failure.clone();
    let mut rt = Runtime::start(opts).await?;
    jobstream::local::on_failure::check(&on_failure).await?;
    rt.status_every = Some(Duration::from_secs(30));
    rt.emit_metrics = consumer.emit_metrics;
    rt.metrics_listener = consumer.metrics_listener().await?;
    rt.shutdown_grace = consumer.shutdown_grace;
    let sqs_said = match (&sqs_endpoint, &sqs_client) {
        (Some(e), _) => Some(e.clone()),
        (None, Some((_, c, _))) if has_queues => Some(format!(
            "the SDK's own for region {}",
            c.region().map(|r| r.to_string()).unwrap_or_default()
        )),
        _ => None,
    };
    announce(None, &rt, sqs_said.as_deref(), &target.model);
    Ok(Started { rt, consumer })
}

/// The processors at work until a signal, then the stop and its report.
async fn serve(started: Started, stop: &Stop) -> anyhow::Result<ExitCode> {
    let Started { mut rt, consumer } = started;
    rt.run_until(stop.signalled()).await?;
    exit_within_grace(stop, consumer.shutdown_grace);
    jobstream::outln!("{}", rt.status());
    let losses = rt.losses();
    let undelivered = rt.undelivered();
    let listed = report_failures(&rt);
    // The stop's last word (the process ends right after it, waiting for
    // nothing still running: see main).
    if let Some(at) = stop.signalled_at() {
        jobstream::errln!(
            "stopped {:.2} s after the signal (--shutdown-grace {:?})",
            at.elapsed().as_secs_f64(),
            consumer.shutdown_grace
        );
    }
    if listed > 0 {
        jobstream::errln!(
            "{}",
            given_up_line(
                listed as u64,
                losses,
                undelivered,
                &consumer.on_failure_file.display().to_string(),
                consumer.on_failure_queue_url.is_some()
            )
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The last line of a run that gave records up: how many batches, the
/// losses, and where they are. A batch the on-failure destination failed to
/// take is listed above only: the file is named as holding only the ones
/// it took (ops9: "listed in" a file that held none of them).
fn given_up_line(listed: u64, losses: u64, undelivered: u64, file: &str, queue: bool) -> String {
    let lost = if losses > 0 {
        format!(" and {losses} range(s) of records were LOST (trimmed, or in shards that vanished): run `jobstream backfill`")
    } else {
        String::new()
    };
    let delivered = listed.saturating_sub(undelivered);
    let whereabouts = match (undelivered, delivered) {
        (0, _) => format!("listed above and in {file}"),
        (_, 0) if !queue => format!(
            "the on-failure destination FAILED for all {undelivered} batch(es): they are listed above only; {file} holds none of them"
        ),
        _ if !queue => format!(
            "the on-failure destination FAILED for {undelivered} of {listed} batch(es): those are listed above only; {file} holds the other {delivered}"
        ),
        _ => format!(
            "the on-failure destination FAILED for {undelivered} of {listed} batch(es): those are listed above (and in {file} if the file took them before the queue failed); the other {delivered} are in {file} and the queue"
        ),
    };
    format!("records were given up{lost}; {whereabouts}")
}

#[cfg(test)]
mod tests {
    use super::given_up_line;

    #[test]
    fn the_exit_line_names_the_file_only_for_the_batches_it_holds() {
        let f = "work/f.jsonl";
        assert_eq!(
            given_up_line(3, 0, 0, f, false),
            "records were given up; listed above and in work/f.jsonl"
        );
        let none = given_up_line(22, 0, 22, f, false);
        assert!(none.contains("FAILED for all 22 batch(es)"), "{none}");
        assert!(none.contains("work/f.jsonl holds none of them"), "{none}");
        assert!(!none.contains("listed in"), "{none}");
        let some = given_up_line(5, 1, 2, f, false);
        assert!(some.contains("1 range(s) of records were LOST"), "{some}");
        assert!(some.contains("FAILED for 2 of 5"), "{some}");
        assert!(some.contains("holds the other 3"), "{some}");
    }
}
