//! Benchmark (not a test): the embedded engine's cost against the length of
//! its stream, Dynoxide as it ships beside the engine `jobstream` runs
//! (`local::stream_index`: the stream records indexed by sequence number),
//! both in the same run, in process (no HTTP), one table with a stream and
//! one GSI, items of ~200 bytes:
//!
//! 1. writes: BatchWriteItem of 25 until the stream holds N records, the
//!    rate per window of WINDOW records, and the mean PutItem latency of
//!    100 single puts at the start of each window;
//! 2. reads: the whole stream from TRIM_HORIZON by GetRecords of 1,000 (the
//!    most a call returns), the rate per window;
//!
//! each as its last window against its first (1.0x: as fast at the end as
//! at the start). Dynoxide as it ships writes RAW (20,000) records, as
//! indexed LONG (200,000; 1,000,000 for the figure).
//!
//! `cargo bench -p jobstream --bench stream_length` (RAW, LONG, WINDOW).

mod common;

use std::time::{Duration, Instant};

use common::env_usize;
use serde_json::{json, Value};

fn req<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a well-formed request")
}

fn item(i: usize) -> Value {
    json!({
        "pk": {"S": format!("user#{:07}", i % 5_000)},
        "sk": {"S": format!("event#{i:09}")},
        "gpk": {"S": format!("day#{}", i % 31)},
        "body": {"S": "x".repeat(120)},
        "n": {"N": i.to_string()},
    })
}

fn create_table(db: &dynoxide::Database, name: &str) -> anyhow::Result<()> {
    let s = |a: &str| json!({"AttributeName": a, "AttributeType": "S"});
    db.create_table(req(json!({
        "TableName": name,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "AttributeDefinitions": [s("pk"), s("sk"), s("gpk")],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [{
            "IndexName": "g",
            "KeySchema": [{"AttributeName": "gpk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"}
        }],
        "StreamSpecification": {"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    })))?;
    Ok(())
}

struct Run {
    /// Records/s written, per window.
    write_rates: Vec<f64>,
    /// Mean PutItem latency at the start of each window.
    put_latency: Vec<Duration>,
    /// Records/s read, per window.
    read_rates: Vec<f64>,
}

fn measure(db: &dynoxide::Database, records: usize, window: usize) -> anyhow::Result<Run> {
    let table = "stream_bench";
    create_table(db, table)?;
    let mut written = 0;
    let mut run = Run {
        write_rates: Vec::new(),
        put_latency: Vec::new(),
        read_rates: Vec::new(),
    };
    while written < records {
        let started = Instant::now();
        for _ in 0..100 {
            db.put_item(req(json!({"TableName": table, "Item": item(written)})))?;
            written += 1;
        }
        run.put_latency.push(started.elapsed() / 100);
        let end = (written + window - 100).min(records);
        let started = Instant::now();
        let n = end.saturating_sub(written);
        while written < end {
            let batch: Vec<Value> = (written..(written + 25).min(end))
                .map(|i| json!({"PutRequest": {"Item": item(i)}}))
                .collect();
            written += batch.len();
            let out = db.batch_write_item(req(json!({"RequestItems": {table: batch}})))?;
            anyhow::ensure!(
                serde_json::to_value(&out)?["UnprocessedItems"]
                    .as_object()
                    .is_none_or(|u| u.is_empty()),
                "unprocessed items"
            );
        }
        run.write_rates
            .push((n + 100) as f64 / (started.elapsed().as_secs_f64() + 1e-9));
    }

    let desc = serde_json::to_value(db.describe_table(req(json!({"TableName": table})))?)?;
    let arn = desc["Table"]["LatestStreamArn"].clone();
    let stream = serde_json::to_value(db.describe_stream(req(json!({"StreamArn": arn})))?)?;
    let shard = stream["StreamDescription"]["Shards"][0]["ShardId"].clone();
    let it = serde_json::to_value(db.get_shard_iterator(req(json!({
        "StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"
    })))?)?;
    let mut iterator = it["ShardIterator"].as_str().map(str::to_string);
    let mut read = 0;
    let mut in_window = 0;
    let mut started = Instant::now();
    while let Some(it) = iterator {
        let out = db.get_records(dynoxide::actions::get_records::GetRecordsRequest {
            shard_iterator: it,
            limit: Some(1000),
        })?;
        if out.records.is_empty() {
            break;
        }
        read += out.records.len();
        in_window += out.records.len();
        if in_window >= window || read >= records {
            run.read_rates
                .push(in_window as f64 / started.elapsed().as_secs_f64());
            in_window = 0;
            started = Instant::now();
        }
        iterator = out.next_shard_iterator;
    }
    anyhow::ensure!(read == records, "read {read} of {records} records");
    Ok(run)
}

fn report(name: &str, records: usize, run: &Run) {
    let first_last = |v: &[f64]| (v[0], v[v.len() - 1]);
    let (w0, w1) = first_last(&run.write_rates);
    let (r0, r1) = first_last(&run.read_rates);
    let p0 = run.put_latency[0];
    let p1 = run.put_latency[run.put_latency.len() - 1];
    println!("{name}: a stream of {records} records");
    println!(
        "  writes (BatchWriteItem): {w0:.0} records/s in the first window, {w1:.0}/s in the last: end / start = {:.2}x the rate",
        w1 / w0
    );
    println!(
        "  PutItem: {:.0} us at the start, {:.0} us at the end: end / start = {:.2}x the latency",
        p0.as_secs_f64() * 1e6,
        p1.as_secs_f64() * 1e6,
        p1.as_secs_f64() / p0.as_secs_f64()
    );
    println!(
        "  reads (GetRecords of 1,000 from TRIM_HORIZON): {r0:.0} records/s in the first window, {r1:.0}/s in the last: end / start = {:.2}x the rate",
        r1 / r0
    );
}

fn main() -> anyhow::Result<()> {
    let raw = env_usize("RAW", 20_000);
    let long = env_usize("LONG", 200_000);
    let window = env_usize("WINDOW", 5_000).max(200);

    let plain = dynoxide::Database::memory()?;
    let run = measure(&plain, raw, window)?;
    report("Dynoxide as it ships (no stream index)", raw, &run);
    drop(plain);

    let indexed = jobstream::local::stream_index::open(None)?;
    let run = measure(&indexed, long, window)?;
    report(
        "jobstream's engine (stream records indexed by sequence number)",
        long,
        &run,
    );
    Ok(())
}
