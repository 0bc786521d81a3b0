//! Benchmark (not a test): one 10,000-record DynamoDB Stream batch through
//! the history and derive handlers, on the embedded engine.
//!
//! The writes: 1,000 applications (JOBSTREAM_BENCH_APPS) with ten changes
//! each (`common/workloads.rs`, the tracker's), by 4 concurrent writers.
//!
//! Prints per-record handler time and DynamoDB item writes per change, and,
//! as the baseline measured in the same run on the same engine, the time of
//! one plain PutItem into the same table at the same stream size (Dynoxide's
//! writes slow down as a stream grows). Then backfill throughput on a table
//! loaded without processors. Every figure comes with its bill: the read
//! and write request units DynamoDB would charge per change (a bill meter,
//! `jobstream::meter`, between the processors and the engine; the
//! application's own writes through another).
//!
//! Then the same batch by jobstream and by its hand-written peers, each in
//! its own process (`peers/compare.rs`; `cli/benches/peers/setup.sh`
//! installs the Python and Node peers' dependencies): CPU, RRU and WRU per
//! change side by side, the tables checked equal. Run:
//! `cargo bench -p jobstream --bench handlers` (JOBSTREAM_BENCH_APPS=N to
//! change the size; 10 changes per application).

#[path = "peers/compare.rs"]
mod peers;

mod common;

use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::Event;
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::meter::Meter;
use lambda_runtime::{Context, LambdaEvent};

/// The tracker's items (shared with the integration tests).
#[allow(dead_code)]
#[path = "../../tests/integration/apps.rs"]
mod apps;
#[path = "common/seed_items.rs"]
mod seed_items;
#[path = "common/workloads.rs"]
mod workloads;

/// Round trips `processor` sent through its grant-checked clients.
fn round_trips(processor: &str) -> std::collections::BTreeMap<String, u64> {
    jobstream::local::iam::recorder().requests(processor)
}

/// One call of `rt`'s processor named by `name`'s first word on the
/// batch: time against one PutItem, item writes, process CPU, round trips
/// and the bill, per change.
async fn run_handler(
    name: &str,
    rt: &Runtime,
    event: &Event,
    changes: usize,
    baseline: Duration,
    meter: &Meter,
) -> anyhow::Result<()> {
    let processor = name.split_whitespace().next().unwrap_or(name);
    let p = rt.stream_processor(processor);
    let trips_before = round_trips(processor);
    let bill_before = meter.bill();
    let before = rt.processor_writes();
    let cpu_before = common::process_cpu();
    let started = Instant::now();
    let resp =
        shared::lambda::stream_handler(&*p, LambdaEvent::new(event.clone(), Context::default()))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    let elapsed = started.elapsed();
    let cpu = common::process_cpu().saturating_sub(cpu_before);
    anyhow::ensure!(
        resp.batch_item_failures.is_empty(),
        "{name} reported failures"
    );
    let per_record = elapsed / event.records.len() as u32;
    let w = rt.processor_writes() - before;
    println!(
        "{name:<38} {:>6} records in {:>8.2?}: {:>7.1?}/record = {:>5.2}x one PutItem; {:>5} item writes = {:.2} writes/change",
        event.records.len(),
        elapsed,
        per_record,
        per_record.as_secs_f64() / baseline.as_secs_f64(),
        w,
        w as f64 / changes as f64
    );
    let per_10k = |x: f64| x * 10_000.0 / event.records.len() as f64;
    let trips: Vec<String> = round_trips(processor)
        .into_iter()
        .map(|(op, n)| (op.clone(), n - trips_before.get(&op).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(op, n)| format!("{op} {:.0}", per_10k(n as f64)))
        .collect();
    println!(
        "{:<38} per 10k records: process CPU {:.2} s (handler + in-process engine), wall {:.2} s; round trips: {}",
        "",
        per_10k(cpu.as_secs_f64()),
        per_10k(elapsed.as_secs_f64()),
        if trips.is_empty() {
            "not counted (grants unchecked)".to_string()
        } else {
            trips.join(", ")
        }
    );
    println!(
        "{:<38} bill: {}",
        "",
        meter.bill().since(&bill_before).per_change(changes)
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    if let Some(child) = peers::child_main().await {
        return child;
    }
    let apps = common::env_usize("JOBSTREAM_BENCH_APPS", 1000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    // The processors' bill and the application's, each through its meter.
    let mut opts = common::options("tracker", &engine);
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let app_meter = Meter::in_front_of(&engine.endpoint()).await?;
    let rt = Runtime::start(opts).await?;
    let app_client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&app_meter.endpoint()), 3).await,
    );
    let empty =
        common::baseline_put(&rt.dynamodb, &rt.config.ledger_table, ["pk", "sk"], 1000).await?;
    let started = Instant::now();
    // Ten changes per application, 4 writers.
    let work = workloads::tracker(apps, 4);
    work.write(&app_client, &rt.config.table).await?;
    let changes = work.changes();
    println!(
        "wrote {changes} changes for {apps} applications in {:.2?}; the application's own writes: {}",
        started.elapsed(),
        app_meter.bill().per_change(changes)
    );
    // Every record of the table's stream so far.
    let mut stream = common::StreamTail::open(&engine, &rt.dynamodb, &rt.config.table).await?;
    let records = stream.read()?;
    if std::env::var_os("JOBSTREAM_BENCH_NO_PEERS").is_none() {
        peers::compare(&engine, &rt, &records, changes).await?;
        println!();
    }
    let event: Event = common::event(&records)?;
    // Dynoxide's writes slowed down as a table's stream grew, so the
    // baseline is a PutItem into the same table at the same stream size
    // (those records are never processed).
    let baseline = common::baseline_put(&rt.dynamodb, &rt.config.table, ["PK", "SK"], 500).await?;
    println!("baseline: one PutItem into the model table with its {}-record stream = {baseline:.1?} (into an empty table without stream: {empty:.1?})", event.records.len());
    // The same redelivery by a runtime whose processors' calls are not
    // checked against their grants (`jobstream run --grants unchecked`):
    // what the local check costs.
    let mut opts = common::options("tracker", &engine);
    opts.enforce_grants = false;
    opts.processor_endpoint = Some(meter.endpoint());
    let unchecked = Runtime::start(opts).await?;
    println!("in this process (handler + engine):");
    // Each processor once, then the same batch again (the cost of
    // at-least-once).
    for (name, rt) in [
        ("history", &rt),
        ("derive", &rt),
        ("history (redelivered)", &rt),
        ("derive (redelivered)", &rt),
        ("derive (redelivered, grants unchecked)", &unchecked),
    ] {
        run_handler(name, rt, &event, changes, baseline, &meter).await?;
    }
    engine.stop().await;
    backfill_figures(apps).await
}

/// Backfill throughput: a table loaded without processors (one stage per
/// application), backfilled with 4 segments, then backfilled again (nothing
/// left to do).
async fn backfill_figures(apps: usize) -> anyhow::Result<()> {
    use jobstream::tools::backfill::{backfill, ScanOptions};
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let rt = Runtime::start(common::options("tracker", &engine)).await?;
    let items: Vec<_> = (0..apps)
        .flat_map(|a| {
            let id = format!("app{a:05}");
            let created = "2026-11-01T09:00:00.000Z";
            let app = apps::application(&id, "Bench Co", "Engineer", "applied", created);
            [app, apps::stage(&id, "s1", "Screen", 1)]
        })
        .collect();
    common::batch_write(&rt.dynamodb, &rt.config.table, &items).await?;
    // The ledger has no stream: the cheapest write this engine does.
    let baseline =
        common::baseline_put(&rt.dynamodb, &rt.config.ledger_table, ["pk", "sk"], 200).await?;
    let scan = ScanOptions {
        segments: 4,
        ..Default::default()
    };
    for pass in ["first", "second"] {
        let (report, totals) =
            backfill(&rt.dynamodb, &rt.config, &rt.processors, &scan, false).await?;
        let per_item = report.elapsed / report.scanned.max(1) as u32;
        println!(
            "backfill ({pass} pass): {} items in {:.2?} = {:.0} items/s, {:.1?}/item = {:.2}x one PutItem without stream; {}",
            report.scanned,
            report.elapsed,
            report.items_per_sec(),
            per_item,
            per_item.as_secs_f64() / baseline.as_secs_f64(),
            totals.line(false)
        );
    }
    let verify = rt.verify().await?;
    println!(
        "verify after backfill: {} problem(s)",
        verify.problems.len()
    );
    engine.stop().await;
    Ok(())
}
