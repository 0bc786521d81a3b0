//! `jobstream run` as operators watch it: Prometheus metrics and the
//! health probes over HTTP, while a shard retries a failing record.

use std::time::Duration;

use crate::apps::AppWriter;
use jobstream::local::engine::sdk_config;
use jobstream::local::lease::CheckpointConfig;
use jobstream::local::runtime::Runtime;

use crate::support::{run_in_background, TIME_SCALE};

/// A guard against hanging: what a test waits for arrives long before.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// `GET path` (HTTP/1.0): status and body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    jobstream::local::metrics::get(addr, path)
        .await
        .expect("the endpoint answers")
}

/// The value of the first sample of `metric` whose labels start with
/// `labels` (e.g. `processor="history"`).
fn sample(text: &str, metric: &str, labels: &str) -> Option<i64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{{labels}")))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_retrying_a_failing_record_reports_a_rising_iterator_age_on_metrics() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let mut opts = crate::support::embedded_options(&engine, "tracker");
    opts.time_scale = TIME_SCALE;
    // History cannot write its entries: each of its invocations fails.
    opts.revoke = vec![("history".into(), "dynamodb:PutItem".into())];
    opts.backoff = shared::store::Backoff {
        max_times: 0,
        ..Default::default()
    };
    // Retries a (scaled) second apart and more: the record is still being
    // retried across the scrapes below.
    opts.mapping.retry_delay = Duration::from_secs(60);
    let mut leases = CheckpointConfig::new(client, &opts.ledger_table);
    leases.owner = "metrics-test".into();
    opts.mapping.checkpoints = Some(leases);
    let mut rt = Runtime::start(opts).await.expect("runtime starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    rt.metrics_listener = Some(listener);
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let bg = run_in_background(rt);
    assert_eq!(get(addr, "/healthz").await, (200, "ok\n".to_string()));
    // Ready (200) as soon as the shards are listed and the leases read,
    // standing by until the shard's leases (one per stream mapping) are
    // taken; then holding them.
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            match get(addr, "/readyz").await {
                (200, body) if body.starts_with("ready: holding") => return,
                (200, body) => assert_eq!(body, "ready: standing by (no lease held)\n"),
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("never ready, holding the shard's leases");
    writer
        .create("a1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    let age = "jobstream_iterator_age_milliseconds";
    let history = "processor=\"history\"";
    let (first, text) = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (status, text) = get(addr, "/metrics").await;
            assert_eq!(status, 200);
            let failed = sample(&text, "jobstream_invocations_failed_total", history);
            match sample(&text, age, history) {
                Some(a) if a > 0 && failed > Some(0) => return (a, text),
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("the failing record never showed in the iterator age");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, later_text) = get(addr, "/metrics").await;
    let later = sample(&later_text, age, history).expect("still held");
    assert!(
        later >= first + 100,
        "the age rises while the record is retried: {first} then {later}\n{text}"
    );
    assert_eq!(
        sample(&later_text, "jobstream_records_processed_total", history),
        Some(0)
    );
    assert_eq!(
        sample(&later_text, "jobstream_leases_held", history),
        Some(1)
    );
    // The other processor, its grant intact, catches up (under load it
    // may not have by now) while the history's record is still held.
    let derive = "processor=\"derive\"";
    let held = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let (_, text) = get(addr, "/metrics").await;
            if sample(&text, age, derive) == Some(0) {
                return sample(&text, age, history);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the derive never caught up");
    assert!(
        held.is_some_and(|a| a >= later),
        "history still held: {held:?}"
    );
    let rt = bg.stop().await;
    drop(rt);
}

/// A drain that gives up says what was still left (user5's E5: `demo`
/// waited with no word while a record or a job kept failing): here the
/// history's record, retried because its grant lacks PutItem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_gives_up_names_what_is_still_pending() {
    let engine = crate::support::start_engine().await;
    let mut opts = crate::support::embedded_options(&engine, "tracker");
    opts.time_scale = TIME_SCALE;
    opts.revoke = vec![("history".into(), "dynamodb:PutItem".into())];
    let mut rt = Runtime::start(opts).await.expect("runtime starts");
    AppWriter::new(rt.dynamodb.clone(), &rt.config.table)
        .create("a1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    let err = rt
        .drain_within(Duration::from_secs(3))
        .await
        .expect_err("the history's record keeps failing");
    let said = format!("{err:#}");
    let left = said
        .strip_prefix("not drained within 3s: ")
        .unwrap_or_else(|| panic!("{said}"));
    let history = left.split("; ").find(|p| p.starts_with("history: "));
    assert!(
        history.is_some_and(|p| p.ends_with(" record(s) fetched or waiting for a retry")),
        "{said}"
    );
    assert!(!said.contains("derive:"), "the derive caught up: {said}");
}

/// Two stream mappings read out of phase (one's next read due while the
/// other's is not: a slow DescribeStream or a loaded machine shifts them
/// apart) have no round in which no shard waits. A drain that called the
/// streams quiet only after such a round went on for as long as they
/// stayed apart (user11's #9: `demo` sat at a step 7 s to minutes after its
/// work was done, every queue empty). Here they are put 120 ms apart (the
/// deployed 250 ms polling rate) and the drain must settle within its guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_settles_while_its_stream_mappings_read_out_of_phase() {
    let engine = crate::support::start_engine().await;
    let mut opts = crate::support::embedded_options(&engine, "tracker");
    opts.time_scale = 1.0;
    let mut rt = Runtime::start(opts).await.expect("runtime starts");
    assert!(
        rt.mappings.len() >= 2,
        "the tracker has two stream mappings"
    );
    AppWriter::new(rt.dynamodb.clone(), &rt.config.table)
        .create("a1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    for m in rt.mappings.iter_mut() {
        m.poll_once().await.expect("a mapping polls");
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    rt.drain_within(Duration::from_secs(20))
        .await
        .expect("the drain settles while the mappings read out of phase");
    let report = rt.verify().await.expect("verify runs");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// SIGTERM while DynamoDB accepts requests and never answers (a black
/// hole): the whole stop (batches in flight, checkpoints, the lease
/// release) ends within `--shutdown-grace`; what cannot finish is abandoned
/// (a lease not released runs out by its TTL), and no lease is taken after
/// the stop began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_dynamodb_hangs_ends_within_the_grace() {
    use jobstream::faults::{Fault, FaultProxy};
    let engine = crate::support::start_engine().await;
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let through = aws_sdk_dynamodb::Client::new(
        &sdk_config(Some(&proxy.endpoint()), shared::retry::MAX_ATTEMPTS).await,
    );
    let mut opts = crate::support::embedded_options(&engine, "tracker");
    opts.time_scale = TIME_SCALE;
    opts.function_timeout_scale = Some(1.0);
    // The processors and the leases reach DynamoDB through the proxy.
    opts.processor_endpoint = Some(proxy.endpoint());
    let mut leases = CheckpointConfig::new(through, &opts.ledger_table);
    leases.owner = "stop-test".into();
    opts.mapping.checkpoints = Some(leases);
    let mut rt = Runtime::start(opts).await.expect("runtime starts");
    let grace = Duration::from_secs(2);
    rt.shutdown_grace = grace;
    let stats: Vec<_> = rt.mappings.iter().map(|m| m.stats()).collect();
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let bg = run_in_background(rt);
    let held = |s: &jobstream::local::esm::MappingStats| s.leases_held();
    tokio::time::timeout(HANG_GUARD, async {
        while !stats.iter().all(|s| held(s) == 1) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every mapping takes its lease");
    // From now on no DynamoDB call of the processors or the leases is
    // answered.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    for op in [
        "GetItem",
        "BatchGetItem",
        "Query",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "TransactWriteItems",
        "BatchWriteItem",
    ] {
        proxy.inject(Fault::held(op, u32::MAX, gate.clone()));
    }
    writer
        .create("a1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    // Batches in flight hang on their reads.
    tokio::time::timeout(HANG_GUARD, async {
        while proxy.injected() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the processors' calls hang");
    let began = std::time::Instant::now();
    let rt = tokio::time::timeout(HANG_GUARD, bg.stop())
        .await
        .expect("the stop returns");
    let took = began.elapsed();
    // A liveness bound, generous: the grace and a margin.
    assert!(
        took < grace + Duration::from_secs(5),
        "the stop took {took:?} with a {grace:?} grace"
    );
    for s in &stats {
        assert_eq!(held(s), 0, "{}: no lease held after the stop", s.name);
    }
    assert!(rt.failed_batches().is_empty(), "nothing given up");
}

/// `jobstream run` (re)started while DynamoDB throttles its startup
/// checks, then answers them 503: it waits the window out, as the handlers
/// ride out throttles and outages of seconds, and starts (takes its
/// leases). It used to exit 1 after 0.1-0.3 s ("unhandled error
/// (ThrottlingException)", ops9's finding 2), and a supervisor's start
/// limit then stopped it for good. (A missing table, missing credentials
/// and no region still fail at once: `deployed`'s tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_started_during_a_throttle_or_an_outage_waits_it_out() {
    use jobstream::faults::{Fault, FaultProxy};
    let t = RunSetup::new().await;
    let proxy = FaultProxy::in_front_of(&t.engine.endpoint())
        .await
        .expect("proxy starts");
    let failures = std::env::temp_dir().join(format!("startup-{}.jsonl", uuid::Uuid::new_v4()));
    // Throttled for two seconds, then unavailable for two more.
    proxy.inject(Fault::throttling("DescribeTable", 0).for_window(Duration::from_secs(2)));
    proxy.inject(Fault::unavailable("DescribeTable", 0).for_window(Duration::from_secs(4)));
    let mut child = t.spawn_run(&proxy.endpoint(), &failures);
    if !t.holds_its_leases(&mut child).await {
        let out = child.wait_with_output().expect("output");
        panic!(
            "run exited during the window ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        proxy.injected() >= 2,
        "the startup checks met the window: {}",
        proxy.injected()
    );
    let out = crate::support::sigterm(child).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    std::fs::remove_file(&failures).ok();
}

/// What a test of a `jobstream run` process starts from: an engine with
/// tracker's table and a fresh ledger (a client of both), and the binary.
struct RunSetup {
    engine: jobstream::local::engine::LocalEngine,
    client: aws_sdk_dynamodb::Client,
    model: shared::models::Model,
    ledger: String,
    bin: std::path::PathBuf,
}

impl RunSetup {
    async fn new() -> Self {
        use jobstream::local::engine::ensure_table;
        let engine = crate::support::start_engine().await;
        let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
        let model = shared::models::find("tracker").expect("shipped");
        ensure_table(&client, &model.table, model.table.name)
            .await
            .expect("table");
        let ledger = format!("ledger-{}", uuid::Uuid::new_v4().simple());
        ensure_table(&client, &shared::models::table::ledger(), &ledger)
            .await
            .expect("ledger");
        let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
            .await
            .unwrap();
        Self {
            engine,
            client,
            model,
            ledger,
            bin,
        }
    }

    /// `jobstream run --model tracker` at `endpoint` with the ledger, lease
    /// owner `restarted`, stdout and stderr piped.
    fn spawn_run(&self, endpoint: &str, failures: &std::path::Path) -> std::process::Child {
        crate::support::jobstream_command(&self.bin)
            .args(["run", "--model", "tracker", "--endpoint", endpoint])
            .args(["--ledger-table", &self.ledger, "--lease-owner", "restarted"])
            .arg("--on-failure-file")
            .arg(failures)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("jobstream run starts")
    }

    /// [`holds_its_leases`] of this setup's process.
    async fn holds_its_leases(&self, child: &mut std::process::Child) -> bool {
        holds_its_leases(&self.client, &self.ledger, child, &self.model).await
    }
}

/// Waits until `child` holds a lease per stream processor of `model` in
/// `ledger` (true), or exits first (false).
pub(crate) async fn holds_its_leases(
    client: &aws_sdk_dynamodb::Client,
    ledger: &str,
    child: &mut std::process::Child,
    model: &shared::models::Model,
) -> bool {
    holds_leases_as(client, ledger, child, model, "restarted").await
}

/// [`holds_its_leases`] of lease owner `owner`.
pub(crate) async fn holds_leases_as(
    client: &aws_sdk_dynamodb::Client,
    ledger: &str,
    child: &mut std::process::Child,
    model: &shared::models::Model,
    owner: &str,
) -> bool {
    let held = || async {
        let page = client.scan().table_name(ledger).send().await.expect("scan");
        page.items()
            .iter()
            .filter(|i| {
                i.get("leaseOwner")
                    .and_then(|v| v.as_s().ok())
                    .map(String::as_str)
                    == Some(owner)
            })
            .count()
    };
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            if child.try_wait().expect("wait").is_some() {
                return false;
            }
            if held().await == model.stream_defs().len() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("run starts or exits")
}

/// `jobstream run` whose stdout goes away (a log shipper restarted, `|
/// head`): the status line it prints at SIGTERM (and every 30 s) used to
/// panic ("failed printing to stdout: Broken pipe", exit 101) in the middle
/// of the handover (ops9's finding 8). It logs that stdout is gone once and
/// stops as it would otherwise: exit 0, leases released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_stdout_went_away_stops_cleanly_without_a_panic() {
    let t = RunSetup::new().await;
    let failures = std::env::temp_dir().join(format!("stdout-{}.jsonl", uuid::Uuid::new_v4()));
    let mut child = t.spawn_run(&t.engine.endpoint(), &failures);
    assert!(t.holds_its_leases(&mut child).await, "run started");
    // The reader of its stdout goes away.
    drop(child.stdout.take());
    let out = crate::support::sigterm(child).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    assert!(stderr.contains("stdout cannot be written"), "{stderr}");
    std::fs::remove_file(&failures).ok();
}
