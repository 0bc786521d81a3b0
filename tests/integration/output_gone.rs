//! `serve`, `dev` and `run` whose output went away: `cmd 2>&1 | head -3`,
//! a log shipper (or `tee`) that died. Their stdout and stderr are a pipe
//! nobody reads any more (every write is EPIPE: Rust ignores SIGPIPE, which
//! their sockets need). Each keeps serving and processing as it would with
//! a reader, and a SIGTERM stops it as usual (exit 0), without a panic
//! (exit 101, "failed printing to stdout/stderr").

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use jobstream::local::engine::sdk_config;

/// A guard against hanging: what a test waits for arrives long before.
const HANG_GUARD: Duration = Duration::from_secs(120);
pub(crate) const TABLE: &str = "lambda_api_applications";

/// `jobstream ARGS` whose stdout and stderr are one pipe whose reading end
/// is already closed.
fn spawn_unread(args: &[&str]) -> Child {
    let bin = crate::support::jobstream_bin();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    crate::support::jobstream_command(&bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer.try_clone().expect("the pipe"))
        .stderr(writer)
        .spawn()
        .expect("jobstream starts")
}

/// A loopback address free now.
pub(crate) fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").to_string()
}

/// Until `check` holds (true), or `child` exits first (false).
pub(crate) async fn until<F, Fut>(child: &mut Child, what: &str, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    tokio::time::timeout(HANG_GUARD, async {
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                eprintln!("{what}: the process ended first ({status})");
                return false;
            }
            if check().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: neither within {HANG_GUARD:?}"))
}

/// SIGTERM, then how it ended.
async fn terminate(child: Child) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.expect("kill runs").success());
    let mut child = child;
    tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .expect("it ends")
}

pub(crate) async fn has_table(client: &Client, table: &str) -> bool {
    client
        .list_tables()
        .send()
        .await
        .is_ok_and(|o| o.table_names().iter().any(|t| t == table))
}

/// A tracker application item (`status` as given).
pub(crate) async fn put_application(client: &Client, id: &str, status: &str) {
    let s = |v: &str| AttributeValue::S(v.to_string());
    client
        .put_item()
        .table_name(TABLE)
        .item("PK", s(&format!("APP#{id}")))
        .item("SK", s(&format!("APP#{id}")))
        .item("id", s(id))
        .item("companyName", s("Co"))
        .item("positionTitle", s("Role"))
        .item("status", s(status))
        .item("isArchived", AttributeValue::Bool(false))
        .item("createdAt", s("2026-01-01T00:00:00Z"))
        .item("updatedAt", s("2026-01-01T00:00:00Z"))
        .send()
        .await
        .expect("put");
}

/// The tracker's application count (META/COUNT), when there is one.
pub(crate) async fn application_count(client: &Client) -> Option<String> {
    let got = client
        .get_item()
        .table_name(TABLE)
        .key("PK", AttributeValue::S("META".into()))
        .key("SK", AttributeValue::S("COUNT".into()))
        .consistent_read(true)
        .send()
        .await
        .ok()?;
    got.item()?.get("count")?.as_n().ok().cloned()
}

/// `serve`: it printed its startup lines (`DynamoDB endpoint:`, `tables:`)
/// with `println!`, which panicked at the first one (exit 101) when no one
/// read them. It serves, and stops at SIGTERM (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_whose_output_went_away_serves_and_stops_cleanly() {
    let addr = free_addr();
    let endpoint = format!("http://{addr}");
    let mut child = tokio::task::spawn_blocking(move || {
        spawn_unread(&["serve", "--model", "tracker", "--listen", &addr])
    })
    .await
    .unwrap();
    let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
    assert!(
        until(&mut child, "serve answers", || has_table(&client, TABLE)).await,
        "serve serves"
    );
    put_application(&client, "served", "applied").await;
    let status = terminate(child).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
}

/// `dev` (`dev 2>&1 | head -3`): a log line stderr could not take made the
/// log subscriber `eprintln!` its failure, a panic wherever it was logged:
/// at startup (the notice of stdout gone: exit 101), in a handler (a WARN
/// for a bad input: a failed invocation). It processes (the bad input
/// skipped, the application after it counted), and stops at SIGTERM (exit
/// 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_whose_output_went_away_processes_and_stops_cleanly() {
    let addr = free_addr();
    let endpoint = format!("http://{addr}");
    let mut child = tokio::task::spawn_blocking(move || {
        spawn_unread(&["dev", "--model", "tracker", "--listen", &addr])
    })
    .await
    .unwrap();
    let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
    assert!(
        until(&mut child, "dev answers", || has_table(&client, TABLE)).await,
        "dev serves"
    );
    // Bad input (logged at WARN, skipped), then an application to count.
    put_application(&client, "bad", "no such status").await;
    put_application(&client, "good", "applied").await;
    assert!(
        until(&mut child, "the application counted", || async {
            application_count(&client).await.as_deref() == Some("1")
        })
        .await,
        "dev processes"
    );
    let status = terminate(child).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
}

/// `run --emit-metrics` (`run 2>&1 | shipper`, the shipper died): it
/// panicked at its first log line (exit 101, before taking its leases),
/// and past that, at each batch's EMF line and at the SIGTERM line. It
/// processes, and hands over at SIGTERM (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_output_went_away_processes_and_stops_cleanly() {
    use jobstream::local::engine::ensure_table;
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
    let failures = std::env::temp_dir().join(format!("gone-{}.jsonl", uuid::Uuid::new_v4()));
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
        "--on-failure-file",
        failures.to_str().expect("a path"),
    ]
    .map(String::from);
    let mut child = tokio::task::spawn_blocking(move || {
        spawn_unread(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert!(
        crate::operations::holds_its_leases(&client, &ledger, &mut child, &model).await,
        "run started"
    );
    put_application(&client, "good", "applied").await;
    assert!(
        until(&mut child, "the application counted", || async {
            application_count(&client).await.as_deref() == Some("1")
        })
        .await,
        "run processes"
    );
    let status = terminate(child).await;
    assert!(status.success(), "exit 0 after SIGTERM: {status}");
    std::fs::remove_file(&failures).ok();
}

/// `run --emit-metrics` whose stdout alone went away (stderr still read):
/// each batch's EMF line (`println!` in `shared::metrics`) panicked inside
/// the handler after its writes ("failed printing to stdout"): a failed
/// invocation, the batch retried again and again. The application is
/// counted without a panic, the notice is logged once, exit 0 at SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whose_stdout_went_away_counts_and_says_so_once() {
    use jobstream::local::engine::ensure_table;
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
    let failures = std::env::temp_dir().join(format!("gone-{}.jsonl", uuid::Uuid::new_v4()));
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut child = Command::new(bin)
        .args(["run", "--model", "tracker", "--endpoint", &endpoint])
        .args(["--ledger-table", &ledger, "--lease-owner", "restarted"])
        .args(["--emit-metrics", "--on-failure-file"])
        .arg(&failures)
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("JOBSTREAM_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    assert!(
        crate::operations::holds_its_leases(&client, &ledger, &mut child, &model).await,
        "run started"
    );
    put_application(&client, "good", "applied").await;
    let counted = until(&mut child, "the application counted", || async {
        application_count(&client).await.as_deref() == Some("1")
    })
    .await;
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.expect("kill runs").success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("it ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(counted, "run processes: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    assert_eq!(
        stderr.matches("stdout cannot be written").count(),
        1,
        "logged once: {stderr}"
    );
    std::fs::remove_file(&failures).ok();
}
