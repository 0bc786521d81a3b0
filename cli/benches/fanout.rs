//! Benchmark (not a test): throughput where work fans out, each figure
//! against a floor measured in the same run, on one embedded engine with
//! the social model's runtime as `jobstream dev` runs it (stream mapping,
//! queue pollers on the local SQS):
//!
//! 1. the local SQS: receive + delete (batches of 10, one consumer) at a
//!    depth of SQS_DEPTH (10,000); moto beside it at MOTO_DEPTH (1,000: its
//!    cost grows with the depth) when its virtualenv exists
//!    (`JOBSTREAM_MOTO_VENV` or `.venv-moto`);
//! 2. FOLLOWERS (10,000) follows of one user, written by 4 concurrent
//!    BatchWriteItem writers and processed (mirrors, counts, follow jobs
//!    through the queue): follows/s;
//! 3. then one post of that user: its timeline entries, all present, and
//!    write capacity per entry as DynamoDB bills it (one unit per item
//!    write, two per transaction action, items up to 1 KB);
//! 4. the floor: the same entries written by 4 concurrent BatchWriteItem
//!    writers into a fresh table of the model's definition (its indexes and
//!    stream) in the same engine; the post's time as a multiple of it.
//!
//! `cargo bench -p jobstream --bench fanout` (FOLLOWERS, SQS_DEPTH,
//! MOTO_DEPTH, MOTO_TAKE to change the sizes).

mod common;

use std::collections::HashSet;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, SendMessageBatchRequestEntry};
use chrono::{SecondsFormat, Utc};
use common::{batch_write_floor, env_usize, ratio, FLOOR_WRITERS};
use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use shared::item::{Item, ItemExt};

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::social as keys;
use seed_items::social::{follow_item, post_item};

/// Receive + delete rate of `take` messages at a depth of `depth` (300-byte
/// bodies), one consumer; returns (messages/s, send messages/s).
async fn receive_delete(endpoint: &str, depth: usize, take: usize) -> anyhow::Result<(f64, f64)> {
    let client = aws_sdk_sqs::Client::new(&sdk_config(Some(endpoint), 3).await);
    let url = client
        .create_queue()
        .queue_name(format!("bench-{}", uuid::Uuid::new_v4().simple()))
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            "60",
        )
        .send()
        .await?
        .queue_url
        .unwrap_or_default();
    let body = "x".repeat(300);
    let started = Instant::now();
    for n in 0..depth.div_ceil(10) {
        let entries = (0..10)
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(format!("{n}-{i}"))
                    .message_body(&body)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        client
            .send_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    let send_rate = (depth.div_ceil(10) * 10) as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut done = 0;
    while done < take {
        let messages = client
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await?
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        let entries = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let out = client
            .delete_message_batch()
            .queue_url(&url)
            .set_entries(Some(entries))
            .send()
            .await?;
        done += out.successful().len();
    }
    Ok((done as f64 / started.elapsed().as_secs_f64(), send_rate))
}

/// moto's server from its virtualenv, if installed (for the comparison).
struct Moto(Child, u16);

impl Moto {
    fn start() -> anyhow::Result<Option<Self>> {
        let venv = std::env::var_os("JOBSTREAM_MOTO_VENV")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-moto")
            });
        let server = venv.join("bin/moto_server");
        if !server.exists() {
            return Ok(None);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "moto did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Some(Self(child, port)))
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn iso_now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let followers = env_usize("FOLLOWERS", 10_000);
    let sqs_depth = env_usize("SQS_DEPTH", 10_000);
    let moto_depth = env_usize("MOTO_DEPTH", 1_000);
    let moto_take = env_usize("MOTO_TAKE", 200);

    // 1. The local SQS, and moto beside it.
    let sqs = LocalSqs::start()?;
    let (rate, send) = receive_delete(&sqs.endpoint(), sqs_depth, sqs_depth).await?;
    println!(
        "local SQS (fauxqs): depth {sqs_depth}: receive+delete {rate:.0} messages/s (send {send:.0}/s)"
    );
    match Moto::start()? {
        Some(moto) => {
            let endpoint = format!("http://127.0.0.1:{}", moto.1);
            let (rate, send) = receive_delete(&endpoint, moto_depth, moto_take).await?;
            println!(
                "moto: depth {moto_depth}: receive+delete {rate:.0} messages/s over {moto_take} (send {send:.0}/s)"
            );
        }
        None => println!("moto: not installed (JOBSTREAM_MOTO_VENV), not measured"),
    }

    // 2. Follows through the runtime.
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = common::options("social", &engine);
    opts.sqs_endpoint = Some(sqs.endpoint());
    opts.queue_prefix = format!("b{}-", uuid::Uuid::new_v4().simple());
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let mut rt = Runtime::start(opts).await?;
    let table = rt.config.table.clone();
    let at = iso_now();
    let fans: Vec<String> = (0..followers).map(|i| format!("f{i:05}")).collect();
    let follows: Vec<Item> = fans.iter().map(|f| follow_item(f, "star", &at)).collect();
    let started = Instant::now();
    batch_write_floor(&rt.dynamodb, &table, follows).await?;
    let written = started.elapsed();
    rt.drain_within(Duration::from_secs(3600)).await?;
    let follows_time = started.elapsed();
    println!(
        "follows: {followers} of one user by {FLOOR_WRITERS} writers ({written:.2?} to write), processed (mirrors, counts, follow jobs) in {follows_time:.2?}: {:.0} follows/s (goal 500)",
        followers as f64 / follows_time.as_secs_f64()
    );
    let follows_admitted = engine.admitted();
    println!(
        "  requests the engine served per follow, by caller (the fair front's turns): {}",
        per_caller(&follows_admitted, &Default::default(), followers)
    );
    let follows_bill = meter.bill();
    println!(
        "  bill of the processors per follow: {}",
        follows_bill.per_change(followers)
    );

    // 3. One post to every follower.
    let units = |rt: &Runtime| rt.processors.store.stats().billed_write_units();
    let units_before = units(&rt);
    let post_id = keys::ulid(Utc::now().timestamp_millis() as u64, 7);
    let busy_before = engine.busy();
    let started = Instant::now();
    rt.processors
        .store
        .put_items(
            &table,
            vec![post_item("star", &post_id, &iso_now(), "to all")],
        )
        .await?;
    rt.drain_within(Duration::from_secs(3600)).await?;
    let post_time = started.elapsed();
    let post_busy = engine.busy() - busy_before;
    let units_used = units(&rt) - units_before;
    let timelines: HashSet<String> = fans.iter().map(|f| keys::timeline_pk(f)).collect();
    let entries: Vec<Item> = jobstream::tools::verify::scan_all(&rt.dynamodb, &table)
        .await?
        .into_iter()
        .filter(|i| i.s(keys::PK).is_ok_and(|pk| timelines.contains(pk)))
        .collect();
    anyhow::ensure!(
        entries.len() == followers,
        "{} timeline entries for {followers} followers",
        entries.len()
    );

    // 4. The floor: the same entries by plain BatchWriteItem.
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    ensure_table(&rt.dynamodb, &rt.model.table, &floor_table).await?;
    let busy_before = engine.busy();
    let floor = batch_write_floor(&rt.dynamodb, &floor_table, entries).await?;
    let floor_busy = engine.busy() - busy_before;
    println!(
        "post: one post to {followers} followers, every entry present in {post_time:.2?}: {:.0} entries/s",
        followers as f64 / post_time.as_secs_f64()
    );
    println!(
        "  the engine busy (requests through its front; the stream read beside it): post {post_busy:.2?}, floor {floor_busy:.2?}: {}",
        ratio(post_busy, floor_busy)
    );
    println!(
        "  floor: the same {followers} entries by {FLOOR_WRITERS} concurrent BatchWriteItem writers: {floor:.2?} ({:.0}/s); post / floor = {} (goal <= 1.5x, issue 29)",
        followers as f64 / floor.as_secs_f64(),
        ratio(post_time, floor)
    );
    println!(
        "  write capacity as billed: {units_used} WCU = {:.2} per entry (floor: 1.00)",
        units_used as f64 / followers as f64
    );
    println!(
        "  bill of the processors for the post, per timeline entry (metered): {}",
        meter.bill().since(&follows_bill).per_change(followers)
    );
    println!(
        "  requests the engine served per timeline entry, by caller: {}",
        per_caller(&engine.admitted(), &follows_admitted, followers)
    );
    engine.stop().await;
    Ok(())
}

/// Requests admitted per caller since `before`, per change, largest first.
fn per_caller(
    now: &std::collections::HashMap<String, u64>,
    before: &std::collections::HashMap<String, u64>,
    changes: usize,
) -> String {
    let mut v: Vec<(String, u64)> = now
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    v.sort_by_key(|b| std::cmp::Reverse(b.1));
    v.iter()
        .map(|(k, n)| format!("{k} {:.2}", *n as f64 / changes.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}
