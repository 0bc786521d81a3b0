//! Benchmark (not a test): one 10,000-record DynamoDB Stream batch through
//! the history and derive handlers, on the embedded engine.
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

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use jobstream::meter::Meter;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::json;
use shared::item::{n, s};

/// The tracker's writes as an application makes them (shared with the
/// integration tests).
#[allow(dead_code)]
#[path = "../../tests/integration/apps.rs"]
mod apps;
use apps::{AppWriter as TrackerWriter, Clock};

async fn write_changes(w: &TrackerWriter, apps: usize) -> anyhow::Result<usize> {
    let mut tasks = Vec::new();
    for part in 0..4 {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            let mut changes = 0;
            for a in (part..apps).step_by(4) {
                let id = format!("app{a:05}");
                let mut t = Clock::new();
                w.create_application(&id, "Bench Co", "Engineer", "applied", &t.next())
                    .await?;
                w.update_application(&id, &[("status", s("interviewing"))], &t.next())
                    .await?;
                w.add_stage(&id, "s1", "Screen", 1).await?;
                w.add_stage(&id, "s2", "Onsite", 2).await?;
                w.update_stage(&id, "s1", &[("isCompleted", AttributeValue::Bool(true))])
                    .await?;
                w.update_application(&id, &[("notes", s("good call"))], &t.next())
                    .await?;
                w.update_application(&id, &[], &t.next()).await?;
                w.set_archived(&id, true, &t.next()).await?;
                w.set_archived(&id, false, &t.next()).await?;
                w.update_application(&id, &[("salaryMin", n(100_000))], &t.next())
                    .await?;
                changes += 10;
            }
            anyhow::Ok(changes)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await??;
    }
    Ok(total)
}

/// Time of one plain PutItem into `table`.
async fn baseline_put(rt: &Runtime, table: &str, n_puts: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for i in 0..n_puts {
        rt.dynamodb
            .put_item()
            .table_name(table)
            .item(
                if table == rt.config.table { "PK" } else { "pk" },
                s(format!("BENCH#{i}")),
            )
            .item(if table == rt.config.table { "SK" } else { "sk" }, s("x"))
            .item("v", n(i))
            .send()
            .await?;
    }
    Ok(started.elapsed() / n_puts as u32)
}

/// CPU time (user + system) of this whole process so far: the handler
/// and the embedded engine it calls, which runs in the same process.
/// Linux only (`/proc/self/stat`, in clock ticks of 10 ms).
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Round trips `processor` sent through its grant-checked clients.
fn round_trips(processor: &str) -> std::collections::BTreeMap<String, u64> {
    jobstream::local::iam::recorder().requests(processor)
}

async fn run_handler(
    name: &str,
    p: &dyn shared::lambda::StreamHandler,
    event: &Event,
    changes: usize,
    baseline: Duration,
    writes: impl Fn() -> u64,
    meter: &Meter,
) -> anyhow::Result<()> {
    let processor = name.split_whitespace().next().unwrap_or(name);
    let trips_before = round_trips(processor);
    let bill_before = meter.bill();
    let before = writes();
    let cpu_before = process_cpu();
    let started = Instant::now();
    let resp =
        shared::lambda::stream_handler(p, LambdaEvent::new(event.clone(), Context::default()))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    let elapsed = started.elapsed();
    let cpu = process_cpu()
        .zip(cpu_before)
        .map(|(a, b)| a.saturating_sub(b));
    anyhow::ensure!(
        resp.batch_item_failures.is_empty(),
        "{name} reported failures"
    );
    let per_record = elapsed / event.records.len() as u32;
    let w = writes() - before;
    println!(
        "{name:<38} {:>6} records in {:>8.2?}: {:>7.1?}/record = {:>5.2}x one PutItem; {:>5} item writes = {:.2} writes/change",
        event.records.len(),
        elapsed,
        per_record,
        per_record.as_secs_f64() / baseline.as_secs_f64(),
        w,
        w as f64 / changes as f64
    );
    let per_10k = |d: Duration| d.as_secs_f64() * 10_000.0 / event.records.len() as f64;
    let trips: Vec<String> = round_trips(processor)
        .into_iter()
        .map(|(op, n)| (op.clone(), n - trips_before.get(&op).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .map(|(op, n)| {
            format!(
                "{op} {:.0}",
                n as f64 * 10_000.0 / event.records.len() as f64
            )
        })
        .collect();
    println!(
        "{:<38} per 10k records: process CPU {} (handler + in-process engine), wall {:.2} s; round trips: {}",
        "",
        cpu.map_or("n/a".to_string(), |c| format!("{:.2} s", per_10k(c))),
        per_10k(elapsed),
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
    let apps: usize = std::env::var("JOBSTREAM_BENCH_APPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    // The processors' bill and the application's, each through its meter.
    let meter = Meter::in_front_of(&engine.endpoint()).await?;
    let app_meter = Meter::in_front_of(&engine.endpoint()).await?;
    let mut opts = RuntimeOptions::new(
        "tracker",
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    opts.processor_endpoint = Some(meter.endpoint());
    let rt = Runtime::start(opts).await?;
    let app_client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&app_meter.endpoint()), 3).await,
    );
    let writer = TrackerWriter::new(app_client, &rt.config.table);
    let empty = baseline_put(&rt, &rt.config.ledger_table, 1000).await?;
    let started = Instant::now();
    let changes = write_changes(&writer, apps).await?;
    println!(
        "wrote {changes} changes for {apps} applications in {:.2?}; the application's own writes: {}",
        started.elapsed(),
        app_meter.bill().per_change(changes)
    );
    let records = common::stream_records(&engine, &rt).await?;
    if std::env::var_os("JOBSTREAM_BENCH_NO_PEERS").is_none() {
        peers::compare(&engine, &rt, &records, changes).await?;
        println!();
    }
    let event: Event = serde_json::from_value(json!({ "Records": records }))?;
    // Dynoxide's writes slow down as a table's stream grows, so the baseline
    // is a PutItem into the same table at the same stream size (those
    // records are never processed).
    let baseline = baseline_put(&rt, &rt.config.table, 500).await?;
    println!("baseline: one PutItem into the model table with its {}-record stream = {baseline:.1?} (into an empty table without stream: {empty:.1?})", event.records.len());
    let history = rt.stream_processor("history");
    let derive = rt.stream_processor("derive");
    // One store for both processors: each run is measured on its own.
    let hist_writes = || rt.processors.store.stats().writes.load(Ordering::Relaxed);
    let derive_writes = hist_writes;
    println!("in this process (handler + engine):");
    run_handler(
        "history",
        &*history,
        &event,
        changes,
        baseline,
        hist_writes,
        &meter,
    )
    .await?;
    run_handler(
        "derive",
        &*derive,
        &event,
        changes,
        baseline,
        derive_writes,
        &meter,
    )
    .await?;
    // Redelivery of the same batch: the cost of at-least-once.
    run_handler(
        "history (redelivered)",
        &*history,
        &event,
        changes,
        baseline,
        hist_writes,
        &meter,
    )
    .await?;
    run_handler(
        "derive (redelivered)",
        &*derive,
        &event,
        changes,
        baseline,
        derive_writes,
        &meter,
    )
    .await?;
    // The same redelivery by a runtime whose processors' calls are not
    // checked against their grants (`jobstream run --grants unchecked`):
    // what the local check costs.
    let mut opts = RuntimeOptions::new(
        "tracker",
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    opts.enforce_grants = false;
    opts.processor_endpoint = Some(meter.endpoint());
    let unchecked = Runtime::start(opts).await?;
    let derive = unchecked.stream_processor("derive");
    let unchecked_writes = || {
        unchecked
            .processors
            .store
            .stats()
            .writes
            .load(Ordering::Relaxed)
    };
    run_handler(
        "derive (redelivered, grants unchecked)",
        &*derive,
        &event,
        changes,
        baseline,
        unchecked_writes,
        &meter,
    )
    .await?;
    engine.stop().await;
    backfill_figures(apps).await
}

/// Backfill throughput: a table loaded without processors (one stage per
/// application), backfilled with 4 segments, then backfilled again (nothing
/// left to do).
async fn backfill_figures(apps: usize) -> anyhow::Result<()> {
    use jobstream::tools::backfill::{backfill, ScanOptions};
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let opts = RuntimeOptions::new(
        "tracker",
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    let rt = Runtime::start(opts).await?;
    let w = TrackerWriter::new(rt.dynamodb.clone(), &rt.config.table);
    for a in 0..apps {
        let id = format!("app{a:05}");
        w.create_application(
            &id,
            "Bench Co",
            "Engineer",
            "applied",
            "2026-11-01T09:00:00.000Z",
        )
        .await?;
        w.add_stage(&id, "s1", "Screen", 1).await?;
    }
    // The ledger has no stream: the cheapest write this engine does.
    let baseline = baseline_put(&rt, &rt.config.ledger_table, 200).await?;
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
