//! Benchmark (not a test) of the social model on the embedded engine, with
//! the processors called in process:
//!
//! 1. likes coalesced: a burst of LIKES (10,000) likes on one post, as the
//!    stream delivers it (batches of LIKE_BATCH = 100 records, the
//!    mapping's default) through the derive handler. Prints the writes of
//!    the post's likecount item per like (counted as that item's stream
//!    records: every effective write is one), then redelivers every batch
//!    and checks that nothing moves;
//! 2. fan-out: one post of a user with FANS (10,000) followers, through the
//!    timeline job and its follow-up pages. Prints timeline entries per
//!    second, item writes per entry and transaction actions per entry
//!    (puts plus the guards' ConditionChecks), then runs the jobs again
//!    (a duplicate delivery: no write).
//!
//! `cargo bench -p jobstream --bench social` (LIKES, LIKE_BATCH, FANS to
//! change the sizes).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use aws_lambda_events::event::dynamodb::Event;
use chrono::{Duration, SecondsFormat, Utc};
use jobstream::local::engine::{ensure_table, LocalEngine};
use serde_json::json;
use shared::engine::derive::{DeriveConfig, DeriveProcessor};
use shared::engine::setjob::{apply, Reads, SetJob};
use shared::item::Item;

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::social as keys;
use seed_items::social::{follow_item, like_item, post_item};
use seed_items::timeline;
use shared::models::table;
use shared::store::Store;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every stream record of `table` so far, as Lambda-shaped JSON.
async fn records(
    engine: &LocalEngine,
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let arn = jobstream::local::esm::stream_arn(client, table).await?;
    let streams = aws_sdk_dynamodbstreams::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let desc = streams.describe_stream().stream_arn(&arn).send().await?;
    let mut out = Vec::new();
    for shard in desc
        .stream_description()
        .map(|d| d.shards())
        .unwrap_or_default()
    {
        let it = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap_or_default())
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await?;
        let mut iterator = it.shard_iterator().map(str::to_string);
        while let Some(i) = iterator.take() {
            let resp = engine.database().get_records(
                dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: i,
                    limit: Some(1000),
                },
            )?;
            if resp.records.is_empty() {
                break;
            }
            for r in &resp.records {
                let mut v = serde_json::to_value(r)?;
                v["eventSourceARN"] = json!(arn);
                out.push(v);
            }
            iterator = resp.next_shard_iterator;
        }
    }
    Ok(out)
}

fn pk_of(record: &serde_json::Value) -> Option<&str> {
    record["dynamodb"]["Keys"]["PK"]["S"].as_str()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let likes = env_usize("LIKES", 10_000);
    let like_batch = env_usize("LIKE_BATCH", 100);
    let fans = env_usize("FANS", 10_000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let model = shared::models::find("social").map_err(anyhow::Error::msg)?;
    let tbl = model.table.name;
    let ledger = table::ledger();
    ensure_table(&client, &model.table, tbl).await?;
    ensure_table(&client, &ledger, ledger.name).await?;
    let store = Store::new(client.clone());
    // The processors' client goes through a bill meter (RRU, WRU).
    let meter = jobstream::meter::Meter::in_front_of(&engine.endpoint()).await?;
    let metered = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&meter.endpoint()), 3).await,
    );
    let derive = DeriveProcessor::new(
        model.rules.clone(),
        Store::new(metered.clone()),
        DeriveConfig {
            table: tbl.to_string(),
            ledger_table: ledger.name.to_string(),
            concurrency: 8,
            queues: BTreeMap::new(),
            limits: shared::limits::KeyLimits::of(&model.table),
        },
    );

    // 1. A burst of likes on one post.
    let now = Utc::now();
    let at = (now - Duration::minutes(5)).to_rfc3339_opts(SecondsFormat::Millis, true);
    let post = keys::ulid(now.timestamp_millis() as u64, 1);
    let users: Vec<String> = (0..likes).map(|i| format!("u{i:05}")).collect();
    let like_items: Vec<Item> = users.iter().map(|u| like_item(&post, u, &at)).collect();
    store.put_items(tbl, like_items).await?;
    let burst = records(&engine, &client, tbl).await?;
    let started = Instant::now();
    let bill_before = meter.bill();
    let mut writes_before = derive.store().stats().writes.load(Ordering::Relaxed);
    for chunk in burst.chunks(like_batch) {
        let event: Event = serde_json::from_value(json!({ "Records": chunk }))?;
        let resp = shared::batch::handle_stream_batch(&derive, event)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        anyhow::ensure!(resp.batch_item_failures.is_empty(), "a batch failed");
    }
    let elapsed = started.elapsed();
    let likes_bill = meter.bill().since(&bill_before);
    let derive_writes = derive.store().stats().writes.load(Ordering::Relaxed) - writes_before;
    let after = records(&engine, &client, tbl).await?;
    let likecount_pk = keys::likecount_pk(&post);
    let likecount_writes = after[burst.len()..]
        .iter()
        .filter(|r| pk_of(r) == Some(likecount_pk.as_str()))
        .count();
    let count = store
        .get(tbl, keys::likecount_key(&post))
        .await?
        .and_then(|i| i.get(keys::LIKES).and_then(|v| v.as_n().ok()).cloned());
    anyhow::ensure!(
        count.as_deref() == Some(likes.to_string().as_str()),
        "likes = {count:?}, expected {likes}"
    );
    println!("likes: {likes} likes on one post, stream batches of {like_batch}, in {elapsed:.2?}");
    println!(
        "  writes to the likecount item: {likecount_writes} = {:.4} per like (goal <= 0.01)",
        likecount_writes as f64 / likes as f64
    );
    println!(
        "  all derive writes (ledger records and totals, the likecount item): {derive_writes} = {:.2} per like",
        derive_writes as f64 / likes as f64
    );
    println!(
        "  bill of the derive per like: {}",
        likes_bill.per_change(likes)
    );
    // Redelivery of every batch: nothing moves.
    writes_before = derive.store().stats().writes.load(Ordering::Relaxed);
    for chunk in burst.chunks(like_batch) {
        let event: Event = serde_json::from_value(json!({ "Records": chunk }))?;
        shared::batch::handle_stream_batch(&derive, event)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let again = derive.store().stats().writes.load(Ordering::Relaxed) - writes_before;
    let count_again = store
        .get(tbl, keys::likecount_key(&post))
        .await?
        .and_then(|i| i.get(keys::LIKES).and_then(|v| v.as_n().ok()).cloned());
    anyhow::ensure!(count_again == count, "redelivery moved the count");
    println!("  redelivered burst: {again} writes, likes still {}", likes);

    // 2. Fan-out of one post to `fans` followers.
    let star = "star";
    let fan_ids: Vec<String> = (0..fans).map(|i| format!("f{i:05}")).collect();
    let mut setup: Vec<Item> = Vec::new();
    for f in &fan_ids {
        setup.push(follow_item(f, star, &at));
        // The mirrors as the derive processor writes them (the bench is
        // about the fan-out; follows are benchmarked with the handlers).
        let mut m = keys::mirror_key(f, star);
        m.insert(keys::TYPE.into(), shared::item::s(keys::TYPE_FOLLOWER));
        m.insert("createdAt".into(), shared::item::s(&at));
        setup.push(m);
    }
    store.put_items(tbl, setup).await?;
    let post_id = keys::ulid(now.timestamp_millis() as u64, 2);
    store
        .put_items(tbl, vec![post_item(star, &post_id, &at, "to all my fans")])
        .await?;
    let job = &timeline::set(shared::engine::joinset::DEFAULT_PAGE);
    let reads = Reads {
        store: Store::new(metered.clone()),
        table: tbl.to_string(),
        ledger_table: ledger.name.to_string(),
        now: Utc::now(),
    };
    let first = timeline::post_job(star, &post_id);
    let run_chain = |first: String| {
        let reads = reads.clone();
        async move {
            let mut bodies = vec![first];
            let mut jobs = 0;
            let mut puts = 0;
            let mut writes = 0;
            let mut superseded = 0;
            while let Some(body) = bodies.pop() {
                jobs += 1;
                let plan = job.plan(&body, &reads).await?;
                let applied = apply(
                    &reads.store,
                    &reads.table,
                    &reads.ledger_table,
                    job.key_names(),
                    job.volatile(),
                    &plan,
                )
                .await?;
                puts += applied.puts;
                writes += applied.writes();
                superseded += applied.superseded;
                bodies.extend(plan.ahead.into_iter().map(|m| m.body));
                bodies.extend(plan.then.into_iter().map(|m| m.body));
            }
            anyhow::Ok((jobs, puts, writes, superseded))
        }
    };
    let actions_before = reads.store.stats().writes.load(Ordering::Relaxed);
    let bill_before = meter.bill();
    let started = Instant::now();
    let (jobs, puts, writes, superseded) = run_chain(first.clone()).await?;
    let elapsed = started.elapsed();
    let post_bill = meter.bill().since(&bill_before);
    let actions = reads.store.stats().writes.load(Ordering::Relaxed) - actions_before;
    let entries = store
        .query(tbl, None, keys::PK, &keys::timeline_pk("f00000"), None)
        .await?
        .len();
    anyhow::ensure!(entries == 1, "first fan's timeline has {entries} entries");
    anyhow::ensure!(puts == fans, "{puts} entries written for {fans} followers");
    println!(
        "fan-out: one post to {fans} followers in {jobs} jobs, {elapsed:.2?}: {:.0} entries/s",
        puts as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  item writes per entry: {:.3} ({writes} writes, {superseded} superseded)",
        writes as f64 / puts.max(1) as f64
    );
    println!(
        "  transaction actions per entry (puts + follow and post ConditionChecks): {:.3}",
        actions as f64 / puts.max(1) as f64
    );
    println!(
        "  bill of the timeline jobs per entry: {}",
        post_bill.per_change(puts)
    );
    let started = Instant::now();
    let (_, puts_again, writes_again, _) = run_chain(first).await?;
    anyhow::ensure!(
        writes_again == 0 && puts_again == 0,
        "a duplicate job wrote"
    );
    println!(
        "  duplicate delivery of the same jobs: 0 writes in {:.2?}",
        started.elapsed()
    );
    engine.stop().await;
    Ok(())
}
