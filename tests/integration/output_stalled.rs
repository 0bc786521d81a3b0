//! `run`, `serve` and `dev` whose stdout and stderr are a pipe whose reader
//! stays but does not read (a stalled log shipper, `2>&1 | sleep 100000`).
//! ops11 #3: once the pipe's 64 KiB were full, the next write blocked a
//! runtime thread and the whole process stopped: no record processed, the
//! probes unanswered, SIGTERM ignored (alive 30 s after it with a 10 s
//! grace). Each keeps serving and processing, answers `/healthz`, and
//! stops at SIGTERM as it would with a reader; what the pipe could not take
//! is dropped, counted, and said once it is read again.

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::Client;
use jobstream::local::engine::{ensure_table, sdk_config};

use crate::output_gone::{application_count, free_addr, has_table, put_application, until, TABLE};
use crate::support::Started;

/// How long a process without a grace (`serve`, `dev`) may take to end
/// after SIGTERM: a liveness bound, far above what it takes.
const GONE_BOUND: Duration = Duration::from_secs(12);

/// `jobstream ARGS` (with `JOBSTREAM_LOG=log`) whose stdout and stderr are
/// one pipe that is already full and that nobody reads: its first write
/// would block. The reading end, to read it later (or never).
fn spawn_stalled(args: &[&str], log: &str) -> (Started, std::io::PipeReader) {
    let bin = crate::support::jobstream_bin();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    // The pipe's buffer (64 KiB), filled as a reader that stopped reading
    // leaves it; from a thread, which waits if the buffer is smaller
    // (until the test reads or drops the reader).
    let mut filler = writer.try_clone().expect("the pipe");
    std::thread::spawn(move || filler.write_all(&[b'.'; 64 * 1024]));
    let child = crate::support::jobstream_command(&bin)
        .args(args)
        .env("JOBSTREAM_LOG", log)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().expect("the pipe"))
        .stderr(writer)
        .spawn()
        .expect("jobstream starts");
    (Started::new(child), reader)
}

/// SIGTERM to `child`, then its exit status and how long it took after the
/// signal; killed (and the test failed) past `bound`.
async fn terminate_within(
    mut started: Started,
    bound: Duration,
) -> (std::process::ExitStatus, Duration) {
    let mut child = started.take();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(killed.expect("kill runs").success());
    let began = Instant::now();
    tokio::task::spawn_blocking(move || loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return (status, began.elapsed());
        }
        if began.elapsed() > bound {
            child.kill().ok();
            child.wait().ok();
            panic!("still running {bound:?} after SIGTERM (its output not read)");
        }
        std::thread::sleep(Duration::from_millis(50));
    })
    .await
    .unwrap()
}

/// `GET path` on the metrics listener, bounded (a wedged process never
/// answers): status and body, or `None`.
async fn probe(addr: &str, path: &str) -> Option<(u16, String)> {
    let addr = addr.parse().expect("an address");
    tokio::time::timeout(
        Duration::from_secs(5),
        jobstream::local::metrics::get(addr, path),
    )
    .await
    .ok()?
    .ok()
}

/// An engine with tracker's table and a fresh ledger, and the `run` flags
/// against them (`--metrics-listen` on a free port, a 2 s grace).
struct RunTarget {
    _engine: jobstream::local::engine::LocalEngine,
    client: Client,
    model: shared::models::Model,
    ledger: String,
    metrics: String,
    failures: std::path::PathBuf,
    args: Vec<String>,
}

const GRACE: Duration = Duration::from_secs(2);

impl RunTarget {
    async fn new() -> Self {
        let engine = crate::support::start_engine().await;
        let endpoint = engine.endpoint();
        let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
        let model = shared::models::find("tracker").expect("shipped");
        ensure_table(&client, &model.table, TABLE)
            .await
            .expect("table");
        let ledger = format!("ledger-{}", uuid::Uuid::new_v4().simple());
        ensure_table(&client, &shared::models::table::ledger(), &ledger)
            .await
            .expect("ledger");
        let failures = std::env::temp_dir().join(format!("stalled-{ledger}.jsonl"));
        let metrics = free_addr();
        let args = [
            "run",
            "--model",
            "tracker",
            "--endpoint",
            &endpoint,
            "--ledger-table",
            &ledger,
            "--lease-owner",
            "restarted",
            "--emit-metrics",
            "--metrics-listen",
            &metrics,
            "--shutdown-grace",
            "2s",
            "--on-failure-file",
            failures.to_str().expect("a path"),
        ]
        .map(String::from)
        .to_vec();
        Self {
            _engine: engine,
            client,
            model,
            ledger,
            metrics,
            failures,
            args,
        }
    }

    async fn spawn_stalled(&self, log: &'static str) -> (Started, std::io::PipeReader) {
        let args = self.args.clone();
        tokio::task::spawn_blocking(move || {
            spawn_stalled(&args.iter().map(String::as_str).collect::<Vec<_>>(), log)
        })
        .await
        .unwrap()
    }
}

impl Drop for RunTarget {
    fn drop(&mut self) {
        std::fs::remove_file(&self.failures).ok();
    }
}

/// `run --emit-metrics` with debug logs into a pipe nobody reads (the
/// finding's `JOBSTREAM_LOG=debug run ... 2>&1 | sleep 100000`): it blocked
/// at its first log line, before its leases or its metrics listener. It
/// takes its leases, answers `/healthz`, counts an application, and is gone
/// within the grace of a SIGTERM, exit 0, the pipe still unread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_output_reader_stalled_processes_answers_and_stops_within_the_grace() {
    let t = RunTarget::new().await;
    let (mut child, _unread) = t.spawn_stalled("debug").await;
    assert!(
        crate::operations::holds_its_leases(&t.client, &t.ledger, child.child(), &t.model).await,
        "run started"
    );
    assert_eq!(
        probe(&t.metrics, "/healthz").await,
        Some((200, "ok\n".to_string())),
        "/healthz answers"
    );
    put_application(&t.client, "good", "applied").await;
    assert!(
        until(child.child(), "the application counted", || async {
            application_count(&t.client).await.as_deref() == Some("1")
        })
        .await,
        "run processes"
    );
    let (status, took) = terminate_within(child, GONE_BOUND).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    // Gone within the grace and a fixed margin (the process's start of the
    // stop and its exit, seen from outside), as `stop.rs` has it.
    assert!(took < GRACE + Duration::from_secs(1), "gone after {took:?}");
}

/// `run` with trace logs into a pipe nobody reads, until it dropped lines;
/// then the reader reads again. The drops are counted on `/metrics`
/// (`jobstream_output_lines_dropped_total{stream="stderr"}`), said on
/// stderr once it is read again, and the stop's last word (`stopped N s
/// after the signal`) is written before the exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_output_reader_resumes_is_told_what_was_dropped_and_gets_the_exit_line() {
    let t = RunTarget::new().await;
    let (mut child, mut reader) = t.spawn_stalled("trace").await;
    assert!(
        crate::operations::holds_its_leases(&t.client, &t.ledger, child.child(), &t.model).await,
        "run started"
    );
    let dropped = |text: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with("jobstream_output_lines_dropped_total{stream=\"stderr\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        until(child.child(), "stderr lines dropped", || async {
            probe(&t.metrics, "/metrics")
                .await
                .is_some_and(|(_, body)| dropped(&body) > 0)
        })
        .await,
        "drops are counted"
    );
    // The reader reads again.
    let read = Arc::new(Mutex::new(Vec::new()));
    let into = read.clone();
    let drain = std::thread::spawn(move || {
        let mut chunk = [0u8; 64 * 1024];
        while let Ok(n @ 1..) = reader.read(&mut chunk) {
            into.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    let said = || String::from_utf8_lossy(&read.lock().unwrap()).into_owned();
    assert!(
        until(child.child(), "the drops said", || async {
            said().contains(" log lines dropped: stderr was not being read")
        })
        .await,
        "said once read again"
    );
    let (status, _) = terminate_within(child, GONE_BOUND).await;
    drain.join().expect("the reader ends at the pipe's end");
    let out = said();
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    assert!(!out.contains("panicked"), "no panic");
    let exit_line = out
        .lines()
        .find(|l| l.starts_with("stopped ") && l.ends_with("(--shutdown-grace 2s)"));
    assert!(exit_line.is_some(), "the exit line is written");
}

/// `serve` into a pipe nobody reads: its first startup line blocked it, and
/// SIGTERM did nothing. It serves and ends at SIGTERM, exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_whose_output_reader_stalled_serves_and_stops() {
    let addr = free_addr();
    let endpoint = format!("http://{addr}");
    let (mut child, _unread) = tokio::task::spawn_blocking(move || {
        spawn_stalled(&["serve", "--model", "tracker", "--listen", &addr], "debug")
    })
    .await
    .unwrap();
    let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
    assert!(
        until(child.child(), "serve answers", || has_table(&client, TABLE)).await,
        "serve serves"
    );
    put_application(&client, "served", "applied").await;
    let (status, _) = terminate_within(child, GONE_BOUND).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
}

/// `dev` into a pipe nobody reads: it blocked at its first line. It
/// processes (the application counted) and ends at SIGTERM, exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_whose_output_reader_stalled_processes_and_stops() {
    let addr = free_addr();
    let endpoint = format!("http://{addr}");
    let (mut child, _unread) = tokio::task::spawn_blocking(move || {
        spawn_stalled(&["dev", "--model", "tracker", "--listen", &addr], "debug")
    })
    .await
    .unwrap();
    let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
    assert!(
        until(child.child(), "dev answers", || has_table(&client, TABLE)).await,
        "dev serves"
    );
    put_application(&client, "good", "applied").await;
    assert!(
        until(child.child(), "the application counted", || async {
            application_count(&client).await.as_deref() == Some("1")
        })
        .await,
        "dev processes"
    );
    let (status, _) = terminate_within(child, GONE_BOUND).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
}
