//! `jobstream run` stopped by SIGTERM while DynamoDB accepts every call and
//! never answers: the whole stop (stream batches and queue invocations in
//! flight, the lease release, the exit) ends within `--shutdown-grace`,
//! each part by the deadline the grace gives it (ops9's finding 5: a queue
//! invocation in flight was abandoned only at the end of the grace, after
//! the release, where the README gives it the grace less a fifth).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::seed_items::jobboard::seeker_changed;
use jobstream::faults::{Fault, FaultProxy};
use jobstream::local::engine::sdk_config;
use jobstream::local::sqs_esm::depth;

/// A guard against hanging: what the test waits for arrives long before.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Every DynamoDB and DynamoDB Streams operation `run` makes once started.
const EVERY_CALL: &[&str] = &[
    "GetItem",
    "BatchGetItem",
    "Query",
    "Scan",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "TransactWriteItems",
    "TransactGetItems",
    "BatchWriteItem",
    "DescribeTable",
    "DescribeStream",
    "GetShardIterator",
    "GetRecords",
    "ListStreams",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stopped_while_dynamodb_hangs_is_gone_within_the_grace() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let sqs_endpoint = crate::support::sqs();
    let stack = format!("stop{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let created = crate::support::jobstream(&[
        "create",
        "--model",
        "jobboard",
        "--stack",
        &stack,
        "--endpoint",
        &engine.endpoint(),
        "--sqs-endpoint",
        &sqs_endpoint,
    ]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let failures = std::env::temp_dir().join(format!("stop-{stack}.jsonl"));
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let grace = Duration::from_secs(2);
    let child = crate::support::jobstream_command(&bin)
        .args(["run", "--model", "jobboard", "--stack", &stack])
        .args([
            "--endpoint",
            &proxy.endpoint(),
            "--sqs-endpoint",
            &sqs_endpoint,
        ])
        .args(["--shutdown-grace", "2s", "--lease-owner", "stopping"])
        .arg("--on-failure-file")
        .arg(&failures)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    let ledger = format!("{stack}-ledger");
    let streams = shared::models::find("jobboard")
        .expect("shipped")
        .stream_defs()
        .len();
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            let page = client
                .scan()
                .table_name(&ledger)
                .send()
                .await
                .expect("scan");
            let held = page
                .items()
                .iter()
                .filter(|i| {
                    i.get("leaseOwner")
                        .and_then(|v| v.as_s().ok())
                        .map(String::as_str)
                        == Some("stopping")
                })
                .count();
            if held == streams {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("run takes its leases");
    // From now on no DynamoDB call of the process is answered.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    for op in EVERY_CALL {
        proxy.inject(Fault::held(op, u32::MAX, gate.clone()));
    }
    // A job whose reads hang: a queue invocation in flight.
    let sqs = aws_sdk_sqs::Client::new(&sdk_config(Some(&sqs_endpoint), 3).await);
    let url = sqs
        .get_queue_url()
        .queue_name(format!("{stack}-jobstream-suggestion-jobs"))
        .send()
        .await
        .expect("the queue exists")
        .queue_url
        .expect("its url");
    sqs.send_message()
        .queue_url(&url)
        .message_body(seeker_changed("s", "montreal"))
        .send()
        .await
        .expect("sent");
    tokio::time::timeout(HANG_GUARD, async {
        while depth(&sqs, &url).await.expect("depth") != (0, 1) || proxy.injected() == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the job is received and its call hangs");
    let pid = child.id().to_string();
    let began = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(
        HANG_GUARD,
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await
    .expect("run exits")
    .unwrap()
    .unwrap();
    let took = began.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    let at = |needle: &str| {
        stderr
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not logged: {stderr}"))
    };
    // The queue invocation is abandoned with the stream batches, at the
    // grace less a fifth, and the release (which hangs too) ends after it.
    assert!(
        at("shutdown grace over: a queue invocation in flight abandoned")
            < at("shutdown grace over: leases not released run out by their TTL"),
        "{stderr}"
    );
    // The stop's last word: when it ended, by the process's own clock.
    let last = stderr.lines().last().unwrap_or_default();
    let secs: f64 = last
        .strip_prefix("stopped ")
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the last line says when the stop ended: {stderr}"));
    assert!(
        secs <= grace.as_secs_f64() && last.ends_with("(--shutdown-grace 2s)"),
        "{last}"
    );
    // Gone within the grace and a fixed margin (the process's start of the
    // stop and its exit, seen from outside).
    assert!(took < grace + Duration::from_secs(1), "gone after {took:?}");
    gate.add_permits(1_000);
    std::fs::remove_file(&failures).ok();
}

/// A metrics client that connected and never finished its request (a
/// stalled scrape, a half-open connection) held the stop for as long as it
/// stayed: the metrics server's graceful shutdown waited for every
/// connection (39 s past a 3 s grace, until the client gave up). It is
/// cut at the end of the release's share of the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_metrics_client_does_not_hold_the_stop() {
    use jobstream::local::engine::ensure_table;
    use tokio::io::AsyncWriteExt;
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
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let listen = format!("127.0.0.1:{port}");
    let failures = std::env::temp_dir().join(format!("stalled-{ledger}.jsonl"));
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let mut child = crate::support::jobstream_command(&bin)
        .args([
            "run",
            "--model",
            "tracker",
            "--endpoint",
            &engine.endpoint(),
        ])
        .args(["--ledger-table", &ledger, "--lease-owner", "stalled"])
        .args(["--shutdown-grace", "2s", "--metrics-listen", &listen])
        .arg("--on-failure-file")
        .arg(&failures)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    assert!(
        crate::operations::holds_leases_as(&client, &ledger, &mut child, &model, "stalled").await,
        "run started"
    );
    // A request whose headers never end.
    let mut stalled = tokio::net::TcpStream::connect(&listen)
        .await
        .expect("the metrics endpoint listens");
    stalled
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    // A liveness bound, checked once: well past the grace.
    let out = tokio::task::spawn_blocking(move || {
        let began = Instant::now();
        while child.try_wait().expect("wait").is_none() {
            if began.elapsed() > Duration::from_secs(12) {
                child.kill().ok();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "still running 12 s after SIGTERM with a 2 s grace: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().expect("output")
    })
    .await
    .unwrap();
    drop(stalled);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    let secs: f64 = last
        .strip_prefix("stopped ")
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the last line says when the stop ended: {stderr}"));
    assert!(secs <= 2.0, "{last}");
    std::fs::remove_file(&failures).ok();
}

/// A SIGTERM while `run` is still in its startup checks (an outage: its
/// first DescribeTable never answered) stops it at once, said on stderr,
/// exit 0. ops10 #6: the handler was installed only once the processors
/// had started, so as PID 1 (a container, where SIGTERM without a handler
/// is ignored) the signal was lost and the process went on to take work;
/// elsewhere it died of the signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stopped_during_its_startup_checks_stops_at_once() {
    let engine = crate::support::start_engine().await;
    let stack = format!("early{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let created = crate::support::jobstream(&[
        "create",
        "--model",
        "tracker",
        "--stack",
        &stack,
        "--endpoint",
        &engine.endpoint(),
    ]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    proxy.inject(Fault::held("DescribeTable", u32::MAX, gate.clone()));
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let child = crate::support::jobstream_command(&bin)
        .args(["run", "--model", "tracker", "--stack", &stack])
        .args(["--endpoint", &proxy.endpoint(), "--lease-owner", "early"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    tokio::time::timeout(HANG_GUARD, async {
        while proxy.injected() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("its startup check is held");
    let out = tokio::time::timeout(HANG_GUARD, crate::support::sigterm(child))
        .await
        .expect("run exits");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit 0 after SIGTERM: {:?} {stderr}",
        out.status
    );
    assert!(
        stderr.contains("SIGTERM: stopping before the processors started"),
        "{stderr}"
    );
    gate.add_permits(1_000);
}

/// Startup checks that get no answer (nothing listens at `--endpoint`: a
/// wrong port, an engine not up yet) are retried for the call budget; the
/// process said nothing meanwhile (ops10, user10: 40 s of silence). It says
/// within seconds what it is waiting for, and still stops at a SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_startup_checks_get_no_answer_says_so_while_it_waits() {
    use std::io::{BufRead, BufReader};
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        l.local_addr().expect("its address").port()
    };
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let mut child = crate::support::jobstream_command(&bin)
        .args(["run", "--model", "tracker"])
        .args(["--endpoint", &format!("http://127.0.0.1:{refused}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    let stderr = child.stderr.take().expect("piped");
    let waiting = tokio::time::timeout(
        HANG_GUARD,
        tokio::task::spawn_blocking(move || {
            BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .find(|l| l.contains("the checks have not finished"))
        }),
    )
    .await
    .expect("a line within the guard")
    .unwrap();
    let line = waiting.expect("it says what it waits for");
    assert!(line.contains("is retried for up to"), "{line}");
    let out = tokio::time::timeout(HANG_GUARD, crate::support::sigterm(child))
        .await
        .expect("run exits");
    assert!(
        out.status.success(),
        "exit 0 after SIGTERM: {:?}",
        out.status
    );
}
