//! Benchmark (not a test), as a new user tries it: `jobstream dev --model
//! social` in its own process, writers from outside through the AWS SDK.
//!
//! 1. FOLLOWERS (5,000) follows of one user by 4 concurrent BatchWriteItem
//!    writers; done when every follower mirror exists and the queue is
//!    empty (the follow jobs processed): follows/s;
//! 2. then one post of that user; done when every follower's timeline entry
//!    is present and the queue is empty;
//!
//! Done is checked cheaply while the work runs (the user's counter, one
//! GetItem, and the queues' depth, every 100 ms) and in full (a COUNT Query
//! of the mirrors, a COUNT Scan for the entries) only once the cheap check
//! holds: a full check every 200 ms made the engine serve a scan of the
//! whole table 5 times a second beside the work it timed.
//! 3. the floor, in the same run and engine: the same entries written by 4
//!    concurrent BatchWriteItem writers into a fresh table of the model's
//!    definition; the post's time as a multiple of it.
//!
//! `cargo bench -p jobstream --bench dev_social` (FOLLOWERS to change the
//! size). The `jobstream` binary of the same build is the one measured
//! (JOBSTREAM_BIN: another one).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use chrono::{SecondsFormat, Utc};
use common::{batch_write_floor, env_usize, ratio, FLOOR_WRITERS};
use jobstream::local::engine::{ensure_table, sdk_config};
use shared::item::Item;

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::social as keys;
use seed_items::social::{follow_item, post_item};

/// Waits until the work is done without loading the engine while it
/// works: every 100 ms a cheap check (`progress`: one GetItem of a counter
/// and the queues' depth), and only once it holds the full check (`done`: a
/// Query or Scan over every item the work wrote, which costs the engine as
/// much as a share of the work itself; polled every 200 ms, as this
/// benchmark once did, it halved the engine's rate for the pipeline it
/// measured). Returns when the full check held: its end is an upper bound
/// of the work's end.
async fn wait_until<P, PF, D, DF>(
    limit: Duration,
    mut progress: P,
    mut done: D,
) -> anyhow::Result<()>
where
    P: FnMut() -> PF,
    PF: std::future::Future<Output = anyhow::Result<bool>>,
    D: FnMut() -> DF,
    DF: std::future::Future<Output = anyhow::Result<bool>>,
{
    let started = Instant::now();
    loop {
        if progress().await? {
            let checked = Instant::now();
            if done().await? {
                println!("  (the full check took {:.0?})", checked.elapsed());
                return Ok(());
            }
        }
        anyhow::ensure!(started.elapsed() < limit, "not done within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The user's counter `attr` on its counts item (0 while absent).
async fn count_of(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    user: &str,
    attr: &str,
) -> anyhow::Result<u64> {
    let item = client
        .get_item()
        .table_name(table)
        .set_key(Some(keys::user_counts_key(user)))
        .send()
        .await?
        .item
        .unwrap_or_default();
    Ok(item
        .get(attr)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

/// Items of `table` (those whose `attr` = `value` with a filter: a
/// filtered Scan), counted or returned.
async fn scan_where(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    filter: Option<(&str, &str)>,
    count_only: bool,
) -> anyhow::Result<(usize, Vec<Item>)> {
    let mut start = None;
    let mut n = 0;
    let mut items = Vec::new();
    loop {
        let mut req = client
            .scan()
            .table_name(table)
            .set_exclusive_start_key(start.take());
        if let Some((attr, value)) = filter {
            req = req
                .filter_expression("#a = :v")
                .expression_attribute_names("#a", attr)
                .expression_attribute_values(":v", AttributeValue::S(value.to_string()));
        }
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
    // JOBSTREAM_BIN: another build's binary (a before/after in one session).
    let bin =
        std::env::var("JOBSTREAM_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_jobstream").into());
    // `jobstream dev`, stopped however the benchmark ends.
    let mut dev = common::Child(
        Command::new(bin)
            .args(["dev", "--model", "social", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()?,
    );
    // Its startup lines (the rest of its output is read away).
    let prefixes = ["DynamoDB endpoint: ", "SQS endpoint: "];
    let mut endpoints = common::startup_lines(&mut dev.0, "processors:", &prefixes)?;
    let (ddb, sqs) = (endpoints.remove(0), endpoints.remove(0));
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
    // Where the time goes: every 10 s, the follows the derive has counted
    // (the user's `followers`) and the follow jobs still queued.
    let sampler = {
        let (client, sqs) = (client.clone(), sqs.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let counted = count_of(&client, table, "star", keys::FOLLOWERS).await?;
                let depth = queued(&sqs).await?;
                println!(
                    "  t={:>4.0} s: follows counted by the derive {counted}, follow jobs queued {depth}",
                    started.elapsed().as_secs_f64()
                );
            }
            #[allow(unreachable_code)]
            anyhow::Ok(())
        })
    };
    batch_write_floor(&client, table, follows).await?;
    let written = started.elapsed();
    let mirror_pk = keys::mirror_key("x", "star")
        .remove(keys::PK)
        .and_then(|v| v.as_s().ok().cloned())
        .unwrap_or_default();
    wait_until(
        limit,
        || async {
            Ok(
                count_of(&client, table, "star", keys::FOLLOWERS).await? >= followers as u64
                    && queued(&sqs).await? == 0,
            )
        },
        || async {
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
        },
    )
    .await?;
    let follows_time = started.elapsed();
    sampler.abort();
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
    wait_until(
        limit,
        || async {
            Ok(count_of(&client, table, "star", keys::POSTS).await? >= 1
                && queued(&sqs).await? == 0)
        },
        || async {
            Ok(
                scan_where(&client, table, Some((keys::SK, &entry_sk)), true)
                    .await?
                    .0
                    >= followers
                    && queued(&sqs).await? == 0,
            )
        },
    )
    .await?;
    let post_time = started.elapsed();

    // 3. The floor.
    let (_, entries) = scan_where(&client, table, Some((keys::SK, &entry_sk)), false).await?;
    anyhow::ensure!(entries.len() == followers, "{} entries", entries.len());
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    ensure_table(&client, &model.table, &floor_table).await?;
    let floor = batch_write_floor(&client, &floor_table, entries).await?;
    println!(
        "  then one post: all {followers} timeline entries present in {post_time:.2?} ({:.0} entries/s)",
        followers as f64 / post_time.as_secs_f64()
    );
    println!(
        "  floor: the same {followers} entries by {FLOOR_WRITERS} concurrent BatchWriteItem writers into the same engine: {floor:.2?} ({:.0}/s); post / floor = {} (goal <= 1.5x, issue 29)",
        followers as f64 / floor.as_secs_f64(),
        ratio(post_time, floor)
    );
    // What each TTL sweep of `dev` reads (every item of the tables with TTL).
    let mut sizes = Vec::new();
    for t in [table, shared::models::table::ledger().name] {
        let (n, _) = scan_where(&client, t, None, true).await?;
        sizes.push(format!("{t} {n} items"));
    }
    println!(
        "  tables at the end (each TTL sweep reads them all): {}",
        sizes.join(", ")
    );
    drop(dev);
    Ok(())
}
