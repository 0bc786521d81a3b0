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
//! 3. a TTL sweep (TTL on, nothing expired) after the first and the last
//!    window: what each periodic sweep of `jobstream dev` and `serve` costs
//!    the engine as the table grows;
//!
//! each as its last window against its first (1.0x: as fast at the end as
//! at the start); and the floor, the same writes into the same table
//! without a stream in a second engine of the same kind, window by window
//! in turn with the first (both see the same load): the engine's own
//! slowdown as its database grows, and the stream's cost beside it. Dynoxide as it ships writes RAW (20,000) records, as
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

fn create_table(db: &dynoxide::Database, name: &str, stream: bool) -> anyhow::Result<()> {
    let s = |a: &str| json!({"AttributeName": a, "AttributeType": "S"});
    let mut def = json!({
        "TableName": name,
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "AttributeDefinitions": [s("pk"), s("sk"), s("gpk")],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [{
            "IndexName": "gsi1",
            "KeySchema": [{"AttributeName": "gpk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "ALL"}
        }]
    });
    if stream {
        def["StreamSpecification"] =
            json!({"StreamEnabled": true, "StreamViewType": "NEW_AND_OLD_IMAGES"});
    }
    db.create_table(req(def))?;
    Ok(())
}

#[derive(Default)]
struct Run {
    /// Records/s written, per window.
    write_rates: Vec<f64>,
    /// Mean PutItem latency at the start of each window.
    put_latency: Vec<Duration>,
    /// Records/s read, per window.
    read_rates: Vec<f64>,
    /// One TTL sweep (nothing expired) at the end of the first and of the
    /// last window: what `jobstream dev` and `serve` pay on every sweep.
    sweeps: Vec<Duration>,
}

const TABLE: &str = "stream_bench";

/// Writes records `from..to` to `db`: 100 single PutItems (their mean
/// latency), then BatchWriteItem of 25; returns (records/s, PutItem).
fn write_window(
    db: &dynoxide::Database,
    from: usize,
    to: usize,
) -> anyhow::Result<(f64, Duration)> {
    let mut written = from;
    let started = Instant::now();
    while written < (from + 100).min(to) {
        db.put_item(req(json!({"TableName": TABLE, "Item": item(written)})))?;
        written += 1;
    }
    let put = started.elapsed() / (written - from).max(1) as u32;
    while written < to {
        let batch: Vec<Value> = (written..(written + 25).min(to))
            .map(|i| json!({"PutRequest": {"Item": item(i)}}))
            .collect();
        written += batch.len();
        let out = db.batch_write_item(req(json!({"RequestItems": {TABLE: batch}})))?;
        anyhow::ensure!(
            serde_json::to_value(&out)?["UnprocessedItems"]
                .as_object()
                .is_none_or(|u| u.is_empty()),
            "unprocessed items"
        );
    }
    Ok((
        (to - from) as f64 / (started.elapsed().as_secs_f64() + 1e-9),
        put,
    ))
}

/// `records` written to a table with a stream in `db` and, window by
/// window in turn (so both see the same load on a shared machine), to the
/// same table without a stream in `floor_db`; then the stream read back.
fn measure(
    db: &dynoxide::Database,
    floor_db: &dynoxide::Database,
    records: usize,
    window: usize,
) -> anyhow::Result<(Run, Run)> {
    create_table(db, TABLE, true)?;
    create_table(floor_db, TABLE, false)?;
    // TTL on (no item carries the attribute): the first and the last window
    // end with one sweep, as `jobstream dev` and `serve` run them.
    db.update_time_to_live(req(json!({
        "TableName": TABLE,
        "TimeToLiveSpecification": {"Enabled": true, "AttributeName": "ttl"}
    })))?;
    let (mut run, mut floor) = (Run::default(), Run::default());
    let mut written = 0;
    while written < records {
        let to = (written + window).min(records);
        for (db, run) in [(db, &mut run), (floor_db, &mut floor)] {
            let (rate, put) = write_window(db, written, to)?;
            run.write_rates.push(rate);
            run.put_latency.push(put);
        }
        if written == 0 || to == records {
            let started = Instant::now();
            let expired = db.sweep_ttl()?;
            anyhow::ensure!(expired == 0, "{expired} items expired");
            run.sweeps.push(started.elapsed());
        }
        written = to;
    }
    run.read_rates = read_all(db, records, window)?;
    Ok((run, floor))
}

/// The stream of [`TABLE`] from TRIM_HORIZON, records/s per window.
fn read_all(db: &dynoxide::Database, records: usize, window: usize) -> anyhow::Result<Vec<f64>> {
    let table = TABLE;
    let mut rates = Vec::new();
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
            rates.push(in_window as f64 / started.elapsed().as_secs_f64());
            in_window = 0;
            started = Instant::now();
        }
        iterator = out.next_shard_iterator;
    }
    anyhow::ensure!(read == records, "read {read} of {records} records");
    Ok(rates)
}

fn report(name: &str, records: usize, run: &Run, floor: &Run) {
    let first_last = |v: &[f64]| (v[0], v[v.len() - 1]);
    let last = |v: &[Duration]| v[v.len() - 1].as_secs_f64();
    let us = |d: f64| d * 1e6;
    println!("{name}: {records} records written, window by window beside the same table without a stream (the floor)");
    let (w0, w1) = first_last(&run.write_rates);
    let (f0, f1) = first_last(&floor.write_rates);
    println!(
        "  writes (BatchWriteItem): {w0:.0} -> {w1:.0} records/s, end / start = {:.2}x the rate (floor: {f0:.0} -> {f1:.0}/s, {:.2}x); with the stream / floor at the end: {:.2}x the time",
        w1 / w0,
        f1 / f0,
        f1 / w1
    );
    let (p0, p1) = (run.put_latency[0].as_secs_f64(), last(&run.put_latency));
    let (q0, q1) = (floor.put_latency[0].as_secs_f64(), last(&floor.put_latency));
    println!(
        "  PutItem: {:.0} -> {:.0} us, end / start = {:.2}x the latency (floor: {:.0} -> {:.0} us, {:.2}x); with the stream / floor at the end: {:.2}x",
        us(p0),
        us(p1),
        p1 / p0,
        us(q0),
        us(q1),
        q1 / q0,
        p1 / q1
    );
    let (r0, r1) = first_last(&run.read_rates);
    println!(
        "  reads (GetRecords of 1,000 from TRIM_HORIZON): {r0:.0} -> {r1:.0} records/s, end / start = {:.2}x the rate",
        r1 / r0
    );
    let window = records.div_ceil(run.write_rates.len().max(1));
    let (s0, s1) = (run.sweeps[0], run.sweeps[run.sweeps.len() - 1]);
    println!(
        "  one TTL sweep, nothing expired (Dynoxide reads every item of the table): {:.1} ms at {window} items -> {:.1} ms at {records} ({:.2} us per item at the end)",
        s0.as_secs_f64() * 1e3,
        s1.as_secs_f64() * 1e3,
        s1.as_secs_f64() * 1e6 / records as f64
    );
}

fn main() -> anyhow::Result<()> {
    let raw = env_usize("RAW", 20_000);
    let long = env_usize("LONG", 200_000);
    let window = env_usize("WINDOW", 5_000).max(200);

    let (run, floor) = measure(
        &dynoxide::Database::memory()?,
        &dynoxide::Database::memory()?,
        raw,
        window,
    )?;
    report("Dynoxide as it ships (no stream index)", raw, &run, &floor);

    let open = || jobstream::local::stream_index::open(None);
    let (run, floor) = measure(&open()?, &open()?, long, window)?;
    report(
        "jobstream's engine (stream records indexed by sequence number)",
        long,
        &run,
        &floor,
    );
    Ok(())
}
