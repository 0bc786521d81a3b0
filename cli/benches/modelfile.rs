//! Benchmark (not a test): CPU per record of each shipped model file
//! against its Rust twin (SPEC §8; issues 25 and 26: within 1.3x end to
//! end, the tracker within 1.1x on the handlers bench's workload).
//!
//! 1. The rules alone: every aspect the derive processor asks of a record
//!    image (`Rules::aspects` and `counter`), for each file and its twin,
//!    on the same images (the workloads' items below, bad ones included).
//! 2. End to end, per model (HR, social, the tracker with its history
//!    fold, Pick'Em): the same writes made to a fresh embedded engine, then
//!    drained as `jobstream dev` runs it (every stream mapping, and the
//!    queue consumers on the local SQS: social's timeline jobs, Pick'Em's
//!    scoring jobs). The figure is this process's CPU time (user + system:
//!    the handlers and the in-process engine they call) per change, the
//!    ends alternating round by round; median and range of the rounds.
//! 3. The handlers bench's workload (cli/benches/handlers.rs: 1,000
//!    applications, 10 changes each, one 10,000-record stream batch)
//!    through the tracker's history and derive handlers, called as Lambda
//!    calls them, for `models/tracker.yaml` and the Rust tracker.
//!
//! `--model NAME` is the Rust twin while one exists; once the Rust models
//! retire it is the embedded file, and the ratios read 1.0 (the figures of
//! the last comparison are in README.md, "What a model file costs").
//!
//! Run: `cargo bench -p jobstream --bench modelfile` (release). Knobs:
//! JOBSTREAM_BENCH_ROUNDS (3), JOBSTREAM_BENCH_SCALE (1: per-model
//! workload sizes), JOBSTREAM_BENCH_APPS (1000: the handlers workload; 0
//! skips it), JOBSTREAM_BENCH_MODELS (hr,social,tracker,pickem),
//! JOBSTREAM_BENCH_RECORDS (20,000 images for the rules alone). Without
//! room for a release build: `CARGO_PROFILE_DEV_OPT_LEVEL=2 cargo bench -p
//! jobstream --bench modelfile --profile dev` compares alike.

#[path = "modelfile/work.rs"]
mod work;

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use aws_lambda_events::event::dynamodb::Event;
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use jobstream::local::sqs_server::LocalSqs;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::json;
use shared::engine::rules::Rules;
use shared::item::Item;
use work::{Workload, Write};

fn model_file(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")).join(name)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time (user + system) of this whole process so far: the handlers
/// and the embedded engine they call, which runs in the same process.
/// Linux only (`/proc/self/stat`, in clock ticks of 10 ms).
fn process_cpu() -> Duration {
    let read = || -> Option<Duration> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces), from field 3.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    };
    read().unwrap_or_default()
}

/// Median, least and greatest of some figures.
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let median = if v.is_empty() {
        f64::NAN
    } else if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (
        median,
        v.first().copied().unwrap_or(f64::NAN),
        v.last().copied().unwrap_or(f64::NAN),
    )
}

/// "median (least..greatest)".
fn figure(v: &[f64], digits: usize) -> String {
    let (m, lo, hi) = spread(v);
    format!("{m:>7.digits$} ({lo:.digits$}..{hi:.digits$})")
}

// ---------------------------------------------------------------- rules alone

/// What the derive processor asks of one image: every aspect at once,
/// and whether it is a counter.
fn ask(r: &dyn Rules, item: &Item) -> usize {
    if r.ignores(item) {
        return 1;
    }
    let a = r.aspects(item);
    a.projection
        .map(|p| p.map_or(0, |p| p.attrs.len()))
        .unwrap_or(0)
        + a.derived.map(|d| d.len()).unwrap_or(0)
        + a.contributions.map(|c| c.len()).unwrap_or(0)
        + a.memberships.map(|m| m.len()).unwrap_or(0)
        + usize::from(r.counter(item).is_some())
}

fn time_rules(r: &dyn Rules, items: &[Item]) -> (Duration, usize) {
    let started = Instant::now();
    let check = items.iter().map(|i| ask(r, i)).sum();
    (started.elapsed(), check)
}

/// The rules alone, twin and file, on the workload's items (repeated to
/// `n` images): µs per image, rounds alternating.
fn compare_rules(w: &Workload, n: usize, rounds: usize) -> anyhow::Result<()> {
    let items: Vec<Item> = w
        .lanes
        .iter()
        .flatten()
        .filter_map(|w| match w {
            Write::Put(i) => Some(i.clone()),
            Write::Delete(_) => None,
        })
        .cycle()
        .take(n)
        .collect();
    let twin = shared::models::find(w.model).map_err(|e| anyhow::anyhow!("{e}"))?;
    let file = shared::file::load(&model_file(w.file)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (twin, file) = (twin.rules, file.model().rules);
    time_rules(twin.as_ref(), &items);
    time_rules(file.as_ref(), &items);
    let (mut t, mut f) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        let (tt, tc) = time_rules(twin.as_ref(), &items);
        let (ft, fc) = time_rules(file.as_ref(), &items);
        anyhow::ensure!(
            tc == fc,
            "{}: the file and its twin imply as many things",
            w.name
        );
        t.push(tt.as_secs_f64() * 1e6 / n as f64);
        f.push(ft.as_secs_f64() * 1e6 / n as f64);
    }
    let ratios: Vec<f64> = f.iter().zip(&t).map(|(f, t)| f / t).collect();
    println!(
        "  {:<10} twin {} µs/image, file {} µs/image: file / twin {}x",
        w.name,
        figure(&t, 2),
        figure(&f, 2),
        figure(&ratios, 2)
    );
    Ok(())
}

// ----------------------------------------------------------------- end to end

/// A fresh engine (and the shared local SQS for models with queues) with
/// the model's runtime: `--model NAME` (`file` false) or its file.
async fn start(
    w: &Workload,
    file: bool,
    sqs: &Option<LocalSqs>,
) -> anyhow::Result<(LocalEngine, Runtime)> {
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = RuntimeOptions::new(
        w.model,
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    if file {
        opts.model_file = Some(model_file(w.file));
    }
    // Waits (batching windows, polling) take no CPU: shrunk so a round
    // ends sooner; the function timeouts stay deployed.
    opts.time_scale = 0.01;
    opts.function_timeout_scale = Some(1.0);
    if let Some(sqs) = sqs {
        opts.sqs_endpoint = Some(sqs.endpoint());
        opts.queue_prefix = format!("b{}-", uuid::Uuid::new_v4().simple());
    }
    let rt = Runtime::start(opts).await?;
    Ok((engine, rt))
}

/// Makes the workload's writes (lanes concurrently, each in order).
async fn write(rt: &Runtime, w: &Workload) -> anyhow::Result<()> {
    let mut tasks = Vec::new();
    for lane in &w.lanes {
        let (db, table) = (rt.dynamodb.clone(), rt.config.table.clone());
        let lane: Vec<(bool, Item)> = lane
            .iter()
            .map(|w| match w {
                Write::Put(i) => (true, i.clone()),
                Write::Delete(k) => (false, k.clone()),
            })
            .collect();
        tasks.push(tokio::spawn(async move {
            for (put, item) in lane {
                if put {
                    db.put_item()
                        .table_name(&table)
                        .set_item(Some(item))
                        .send()
                        .await?;
                } else {
                    db.delete_item()
                        .table_name(&table)
                        .set_key(Some(item))
                        .send()
                        .await?;
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// One end-to-end run: (CPU per change in µs, processor writes).
async fn run_once(w: &Workload, file: bool, sqs: &Option<LocalSqs>) -> anyhow::Result<(f64, u64)> {
    let (engine, mut rt) = start(w, file, sqs).await?;
    write(&rt, w).await?;
    let cpu = process_cpu();
    rt.drain().await?;
    let cpu = process_cpu().saturating_sub(cpu);
    let writes = rt.processor_writes();
    engine.stop().await;
    Ok((cpu.as_secs_f64() * 1e6 / w.changes() as f64, writes))
}

async fn end_to_end(w: &Workload, rounds: usize) -> anyhow::Result<()> {
    let queues = !shared::models::find(w.model)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .consumers
        .is_empty();
    let sqs = if queues {
        Some(tokio::task::spawn_blocking(LocalSqs::start).await??)
    } else {
        None
    };
    let (mut t, mut f) = (Vec::new(), Vec::new());
    let (mut tw, mut fw) = (0, 0);
    for round in 0..rounds.max(1) {
        // Alternating which end goes first: a drift of the machine's
        // load weighs on both.
        for file in [round % 2 == 1, round % 2 == 0] {
            let (cpu, writes) = run_once(w, file, &sqs).await?;
            if file {
                f.push(cpu);
                fw = writes;
            } else {
                t.push(cpu);
                tw = writes;
            }
        }
    }
    let ratios: Vec<f64> = f.iter().zip(&t).map(|(f, t)| f / t).collect();
    println!(
        "  {:<10} {:>6} changes: twin {} µs/change, file {} µs/change: file / twin {}x; processor writes twin {tw}, file {fw}",
        w.name,
        w.changes(),
        figure(&t, 0),
        figure(&f, 0),
        figure(&ratios, 2),
    );
    Ok(())
}

// ------------------------------------------------- the handlers bench's batch

/// Every record of the model table's stream, as one Lambda event.
async fn stream_event(engine: &LocalEngine, rt: &Runtime) -> anyhow::Result<Event> {
    let records = common::stream_records(engine, rt).await?;
    Ok(serde_json::from_value(json!({ "Records": records }))?)
}

/// CPU of one handler call on the batch, in seconds per 10,000 records.
async fn handler_cpu(rt: &Runtime, name: &str, event: &Event) -> anyhow::Result<f64> {
    let p = rt.stream_processor(name);
    let cpu = process_cpu();
    let resp =
        shared::lambda::stream_handler(&*p, LambdaEvent::new(event.clone(), Context::default()))
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    let cpu = process_cpu().saturating_sub(cpu);
    anyhow::ensure!(
        resp.batch_item_failures.is_empty(),
        "{name} reported failures"
    );
    Ok(cpu.as_secs_f64() * 10_000.0 / event.records.len() as f64)
}

async fn handlers_batch(apps: usize, rounds: usize) -> anyhow::Result<()> {
    let w = work::tracker(apps, 4);
    // (history, derive) CPU per 10k records, per end.
    let mut cpu: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    let mut records = 0;
    for round in 0..rounds.max(1) {
        for file in [round % 2 == 1, round % 2 == 0] {
            let (engine, rt) = start(&w, file, &None).await?;
            write(&rt, &w).await?;
            let event = stream_event(&engine, &rt).await?;
            records = event.records.len();
            let history = handler_cpu(&rt, "history", &event).await?;
            let derive = handler_cpu(&rt, "derive", &event).await?;
            cpu[usize::from(file)].push((history, derive));
            engine.stop().await;
        }
    }
    println!(
        "the handlers bench's batch: {records} records ({apps} applications), one Lambda call per handler; process CPU per 10k records:"
    );
    for (what, pick) in [
        ("history", (|c: &(f64, f64)| c.0) as fn(&(f64, f64)) -> f64),
        ("derive", |c| c.1),
        ("both", |c| c.0 + c.1),
    ] {
        let t: Vec<f64> = cpu[0].iter().map(pick).collect();
        let f: Vec<f64> = cpu[1].iter().map(pick).collect();
        let ratios: Vec<f64> = f.iter().zip(&t).map(|(f, t)| f / t).collect();
        println!(
            "  {what:<8} Rust tracker {} s, models/tracker.yaml {} s: file / Rust {}x",
            figure(&t, 2),
            figure(&f, 2),
            figure(&ratios, 2)
        );
    }
    println!("  (goal: file within 1.1x of the Rust tracker)");
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rounds = env_usize("JOBSTREAM_BENCH_ROUNDS", 3);
    let scale = env_usize("JOBSTREAM_BENCH_SCALE", 1).max(1);
    let images = env_usize("JOBSTREAM_BENCH_RECORDS", 20_000);
    let apps = env_usize("JOBSTREAM_BENCH_APPS", 1000);
    let chosen = std::env::var("JOBSTREAM_BENCH_MODELS")
        .unwrap_or_else(|_| "hr,social,tracker,pickem".to_string());
    let workloads: Vec<Workload> = chosen
        .split(',')
        .filter_map(|m| match m.trim() {
            "hr" => Some(work::hr(150 * scale)),
            "social" => Some(work::social(60 * scale)),
            "tracker" => Some(work::tracker(60 * scale, 1)),
            "pickem" => Some(work::pickem(100 * scale)),
            _ => None,
        })
        .collect();
    println!("rules alone ({images} images each, {rounds} rounds; median (range)):");
    for w in &workloads {
        compare_rules(w, images, rounds)?;
    }
    println!("end to end, every processor and queue consumer drained ({rounds} rounds; process CPU per change, median (range)):");
    for w in &workloads {
        end_to_end(w, rounds).await?;
    }
    println!("  (goal: each file within 1.3x of its twin)");
    if apps > 0 {
        handlers_batch(apps, rounds).await?;
    }
    Ok(())
}
