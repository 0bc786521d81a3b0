//! Benchmark (not a test), as a new user tries it: `jobstream dev --model
//! social` in its own process, writers from outside through the AWS SDK.
//!
//! 1. FOLLOWERS (5,000) follows of one user by 4 concurrent BatchWriteItem
//!    writers; done when every follower mirror exists and the queue is
//!    empty (the follow jobs processed): follows/s;
//! 2. then one post of that user; done when every follower's timeline entry
//!    is present (a COUNT scan once the queue is empty);
//! 3. the floor, in the same run and engine: the same entries written by 4
//!    concurrent BatchWriteItem writers into a fresh table of the model's
//!    definition; the post's time as a multiple of it.
//!
//! `cargo bench -p jobstream --bench dev_social` (FOLLOWERS to change the
//! size). The `jobstream` binary of the same build is the one measured.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{SecondsFormat, Utc};
use common::{batch_write_floor, env_usize, ratio, FLOOR_WRITERS};
use jobstream::local::engine::{ensure_table, sdk_config};
use shared::item::Item;

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::social as keys;
use seed_items::social::{follow_item, post_item};

/// The `jobstream dev` process, stopped however the benchmark ends.
struct Dev(std::process::Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `done` every 200 ms until it holds (at most `limit`).
async fn wait_until<F, Fut>(limit: Duration, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = Instant::now();
    while !done().await? {
        anyhow::ensure!(started.elapsed() < limit, "not done within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// Items of `table` whose `attr` = `value` (a filtered Scan), counted or
/// returned.
async fn scan_where(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    attr: &str,
    value: &str,
    count_only: bool,
) -> anyhow::Result<(usize, Vec<Item>)> {
    let mut start = None;
    let mut n = 0;
    let mut items = Vec::new();
    loop {
        let mut req = client
            .scan()
            .table_name(table)
            .filter_expression("#a = :v")
            .expression_attribute_names("#a", attr)
            .expression_attribute_values(":v", AttributeValue::S(value.to_string()))
            .set_exclusive_start_key(start.take());
        if count_only {
            req = req.select(Select::Count);
        }
        let out = req.send().await?;
        n += out.count() as usize;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(k) if !k.is_empty() => start = Some(k),
            _ => return Ok((n, items)),
        }
    }
}

/// Messages in every queue of the SQS endpoint (visible + in flight).
async fn queued(sqs: &aws_sdk_sqs::Client) -> anyhow::Result<u64> {
    let mut total = 0;
    for url in sqs.list_queues().send().await?.queue_urls() {
        let (visible, in_flight) = jobstream::local::sqs_esm::depth(sqs, url).await?;
        total += visible + in_flight;
    }
    Ok(total)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let followers = env_usize("FOLLOWERS", 5_000);
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut dev = Dev(Command::new(env!("CARGO_BIN_EXE_jobstream"))
        .args(["dev", "--model", "social", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?);
    let stdout = dev.0.stdout.take().context("dev's stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let (mut ddb, mut sqs) = (None, None);
    for line in lines.by_ref() {
        let line = line?;
        if let Some(e) = line.strip_prefix("DynamoDB endpoint: ") {
            ddb = Some(e.trim().to_string());
        }
        if let Some(e) = line.strip_prefix("SQS endpoint: ") {
            sqs = Some(e.trim().to_string());
        }
        if line.starts_with("processors:") {
            break;
        }
    }
    let (Some(ddb), Some(sqs)) = (ddb, sqs) else {
        anyhow::bail!("jobstream dev did not print its endpoints");
    };
    // Keep reading dev's status lines so its stdout never blocks.
    std::thread::spawn(move || for _ in lines {});
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&ddb), 3).await);
    let sqs = aws_sdk_sqs::Client::new(&sdk_config(Some(&sqs), 3).await);
    let model = shared::models::find("social").map_err(anyhow::Error::msg)?;
    let table = model.table.name;
    let limit = Duration::from_secs(3600);

    // 1. Follows.
    let at = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    let fans: Vec<String> = (0..followers).map(|i| format!("f{i:05}")).collect();
    let follows: Vec<Item> = fans.iter().map(|f| follow_item(f, "star", &at)).collect();
    let started = Instant::now();
    batch_write_floor(&client, table, follows).await?;
    let written = started.elapsed();
    let mirror_pk = keys::mirror_key("x", "star")
        .remove(keys::PK)
        .and_then(|v| v.as_s().ok().cloned())
        .unwrap_or_default();
    wait_until(limit, || async {
        let mirrors = client
            .query()
            .table_name(table)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", keys::PK)
            .expression_attribute_values(":pk", AttributeValue::S(mirror_pk.clone()))
            .select(Select::Count)
            .send()
            .await?
            .count() as usize;
        Ok(mirrors >= followers && queued(&sqs).await? == 0)
    })
    .await?;
    let follows_time = started.elapsed();
    println!(
        "jobstream dev --model social: {followers} follows by {FLOOR_WRITERS} writers ({written:.2?} to write); mirrors done, follow jobs processed in {follows_time:.2?}: {:.0} follows/s",
        followers as f64 / follows_time.as_secs_f64()
    );

    // 2. One post.
    let post_id = keys::ulid(Utc::now().timestamp_millis() as u64, 7);
    let entry_sk = keys::timeline_sk(&post_id, "star");
    let started = Instant::now();
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
    let put = post_item("star", &post_id, &now, "to all");
    client
        .put_item()
        .table_name(table)
        .set_item(Some(put))
        .send()
        .await?;
    wait_until(limit, || async {
        if queued(&sqs).await? > 0 {
            return Ok(false);
        }
        Ok(scan_where(&client, table, keys::SK, &entry_sk, true)
            .await?
            .0
            >= followers)
    })
    .await?;
    let post_time = started.elapsed();

    // 3. The floor.
    let (_, entries) = scan_where(&client, table, keys::SK, &entry_sk, false).await?;
    anyhow::ensure!(entries.len() == followers, "{} entries", entries.len());
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    ensure_table(&client, &model.table, &floor_table).await?;
    let floor = batch_write_floor(&client, &floor_table, entries).await?;
    println!(
        "  then one post: all {followers} timeline entries present in {post_time:.2?} ({:.0} entries/s)",
        followers as f64 / post_time.as_secs_f64()
    );
    println!(
        "  floor: the same {followers} entries by {FLOOR_WRITERS} concurrent BatchWriteItem writers into the same engine: {floor:.2?} ({:.0}/s); post / floor = {} (goal <= 3x)",
        followers as f64 / floor.as_secs_f64(),
        ratio(post_time, floor)
    );
    drop(dev);
    Ok(())
}
