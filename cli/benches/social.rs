//! Benchmark (not a test) of the social model's likes on the embedded
//! engine, the derive processor called in process: a burst of LIKES
//! (10,000) likes on one post, as the stream delivers it (batches of
//! LIKE_BATCH = 100 records, the mapping's default) through the derive
//! handler. Prints the writes of the post's likecount item per like
//! (counted as that item's stream records: every effective write is one)
//! and the bill, then redelivers every batch and checks that nothing
//! moves. (One post's fan-out to its followers is the fanout bench's.)
//!
//! `cargo bench -p jobstream --bench social` (LIKES, LIKE_BATCH to change
//! the sizes).

mod common;
#[path = "common/seed_items.rs"]
mod seed_items;

use std::time::Instant;

use aws_lambda_events::event::dynamodb::Event;
use chrono::{Duration, SecondsFormat, Utc};
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use seed_items::social as keys;
use shared::item::Item;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let likes = common::env_usize("LIKES", 10_000);
    let like_batch = common::env_usize("LIKE_BATCH", 100);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = common::options("social", &engine);
    // The local SQS hosts the queues the runtime creates (likes send no job).
    let sqs = LocalSqs::start()?;
    opts.sqs_endpoint = Some(sqs.endpoint());
    // The processors' client goes through a bill meter (RRU, WRU).
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let rt = Runtime::start(opts).await?;
    let (tbl, store) = (rt.config.table.as_str(), &rt.processors.store);
    let derive = rt.stream_processor("derive");

    let now = Utc::now();
    let at = (now - Duration::minutes(5)).to_rfc3339_opts(SecondsFormat::Millis, true);
    let post = keys::ulid(now.timestamp_millis() as u64, 1);
    let like_items: Vec<Item> = (0..likes)
        .map(|i| keys::like_item(&post, &format!("u{i:05}"), &at))
        .collect();
    common::batch_write(&rt.dynamodb, tbl, &like_items).await?;
    let mut stream = common::StreamTail::open(&engine, &rt.dynamodb, tbl).await?;
    let burst = stream.read()?;
    let likecount_pk = keys::likecount_pk(&post);
    let count = || async {
        let item = store.get(tbl, keys::likecount_key(&post)).await?;
        anyhow::Ok(item.and_then(|i| i.get(keys::LIKES).and_then(|v| v.as_n().ok()).cloned()))
    };
    for delivery in ["first", "redelivered"] {
        let started = Instant::now();
        let bill_before = meter.bill();
        let writes_before = rt.processor_writes();
        for chunk in burst.chunks(like_batch) {
            let resp = derive
                .handle(common::event::<Event>(chunk)?)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            anyhow::ensure!(resp.batch_item_failures.is_empty(), "a batch failed");
        }
        let elapsed = started.elapsed();
        let bill = meter.bill().since(&bill_before);
        let derive_writes = rt.processor_writes() - writes_before;
        let likecount_writes = stream
            .read()?
            .iter()
            .filter(|r| r["dynamodb"]["Keys"]["PK"]["S"].as_str() == Some(&likecount_pk))
            .count();
        let counted = count().await?;
        anyhow::ensure!(
            counted.as_deref() == Some(likes.to_string().as_str()),
            "likes = {counted:?} after the {delivery} delivery, expected {likes}"
        );
        if delivery == "redelivered" {
            println!("  redelivered burst: {derive_writes} writes, likes still {likes}");
            continue;
        }
        let per_like = |x: usize| x as f64 / likes as f64;
        println!(
            "likes: {likes} likes on one post, stream batches of {like_batch}, in {elapsed:.2?}"
        );
        println!(
            "  writes to the likecount item: {likecount_writes} = {:.4} per like (goal <= 0.01)",
            per_like(likecount_writes)
        );
        println!(
            "  all derive writes (ledger records and totals, the likecount item): {derive_writes} = {:.2} per like",
            per_like(derive_writes as usize)
        );
        println!("  bill of the derive per like: {}", bill.per_change(likes));
    }
    engine.stop().await;
    Ok(())
}
