//! Benchmark (not a test): CPU per change of each shipped model file
//! (SPEC §8), measured in this process.
//!
//! 1. The rules alone: every aspect the derive processor asks of a record
//!    image (`Rules::aspects` and `counter`) on the workloads' items below
//!    (bad ones included), µs per image; then what it asks of a record
//!    (both images' aspects and the jobs it starts) at once
//!    (`Rules::record`) and each question alone, µs per record.
//! 2. End to end, per model (HR, social, the tracker with its history
//!    fold, Pick'Em): the workload's writes made to a fresh embedded
//!    engine, then drained as `jobstream dev` runs it (every stream mapping,
//!    and the queue consumers on the local SQS: social's timeline jobs,
//!    Pick'Em's scoring jobs). The figure is this process's CPU time (user
//!    and system: the handlers and the in-process engine they call) per
//!    change; median and range of the rounds.
//!
//! The tracker's history and derive handlers on one 10,000-record batch,
//! by processor, are the handlers bench's. (This bench compared each file
//! with its compiled Rust twin until the twins retired: the last figures
//! are in cli/benches/LOG.md, "Model files against their retired Rust twins".)
//!
//! Run: `cargo bench -p jobstream --bench modelfile` (release). Knobs:
//! JOBSTREAM_BENCH_ROUNDS (3), JOBSTREAM_BENCH_SCALE (1: per-model
//! workload sizes), JOBSTREAM_BENCH_MODELS (hr,social,tracker,pickem),
//! JOBSTREAM_BENCH_RECORDS (20,000 images for the rules alone).

#[allow(dead_code)]
#[path = "../../tests/integration/apps.rs"]
mod apps;
mod common;
#[path = "common/seed_items.rs"]
mod seed_items;
#[path = "common/workloads.rs"]
mod workloads;

use std::time::Instant;

use common::{env_usize, process_cpu};
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use shared::change::{Change, ChangeKind};
use shared::engine::rules::Rules;
use shared::item::Item;
use workloads::{Workload, Write};

/// "median (least..greatest)".
fn figure(v: &[f64], digits: usize) -> String {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let median = match v.len() {
        0 => f64::NAN,
        l if l % 2 == 1 => v[l / 2],
        l => (v[l / 2 - 1] + v[l / 2]) / 2.0,
    };
    let lo = v.first().copied().unwrap_or(f64::NAN);
    let hi = v.last().copied().unwrap_or(f64::NAN);
    format!("{median:>7.digits$} ({lo:.digits$}..{hi:.digits$})")
}

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

/// The rules alone on the workload's items (repeated to `n` images): µs
/// per image, one figure per round after a warm-up.
fn rules_alone(w: &Workload, n: usize, rounds: usize) -> anyhow::Result<()> {
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
    let rules = shared::models::find(w.model)
        .map_err(anyhow::Error::msg)?
        .rules;
    let time = || {
        let started = Instant::now();
        std::hint::black_box(items.iter().map(|i| ask(rules.as_ref(), i)).sum::<usize>());
        started.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    time();
    let f: Vec<f64> = (0..rounds.max(1)).map(|_| time()).collect();
    println!("  {:<10} file {} µs/image", w.name, figure(&f, 2));
    Ok(())
}

/// The rules asked one aspect and the jobs at a time: the trait's own
/// `Rules::record` (each image parsed once per question, as the derive
/// asked before issue 29's cut).
struct Alone<'a>(&'a dyn Rules);

impl Rules for Alone<'_> {
    fn key_names(&self) -> &'static [&'static str] {
        self.0.key_names()
    }
    fn aspects(&self, image: &Item) -> shared::engine::rules::Aspects {
        self.0.aspects(image)
    }
    fn messages(
        &self,
        change: &Change,
    ) -> Result<Vec<shared::engine::rules::OutMessage>, shared::error::InputError> {
        self.0.messages(change)
    }
}

/// The workload's writes as stream records (each put after another of its
/// key a modify from it, a delete a remove), `n` of them.
fn records(w: &Workload, r: &dyn Rules, n: usize) -> Vec<Change> {
    let mut last: std::collections::HashMap<String, Item> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for write in w.lanes.iter().flatten() {
        let (item, put) = match write {
            Write::Put(i) => (i, true),
            Write::Delete(k) => (k, false),
        };
        let keys = shared::item::key_of(item, r.key_names());
        let id = shared::ledger::item_id(&keys);
        let old = last.remove(&id);
        let mut c = Change::synthetic_insert(keys, item.clone(), chrono::Utc::now());
        match (put, old) {
            (true, Some(old)) => (c.kind, c.old) = (ChangeKind::Modify, Some(old)),
            (true, None) => {}
            (false, old) => (c.kind, c.old, c.new) = (ChangeKind::Remove, old, None),
        }
        if put {
            last.insert(id, item.clone());
        }
        out.push(c);
    }
    out.iter().cycle().take(n).cloned().collect()
}

/// What the derive processor asks of each record (both images' aspects and
/// the jobs it starts): at once (`Rules::record`, each image parsed once)
/// and each question alone; µs per record.
fn records_alone(w: &Workload, n: usize, rounds: usize) -> anyhow::Result<()> {
    let rules = shared::models::find(w.model)
        .map_err(anyhow::Error::msg)?
        .rules;
    let changes = records(w, rules.as_ref(), n);
    let time = |r: &dyn Rules| {
        let started = Instant::now();
        std::hint::black_box(
            changes
                .iter()
                .filter(|c| r.record(c).messages.is_ok())
                .count(),
        );
        started.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    let alone = Alone(rules.as_ref());
    time(rules.as_ref());
    let (mut at_once, mut each) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(1) {
        at_once.push(time(rules.as_ref()));
        each.push(time(&alone));
    }
    println!(
        "  {:<10} at once {} µs/record; each alone {} µs/record",
        w.name,
        figure(&at_once, 2),
        figure(&each, 2)
    );
    Ok(())
}

/// One end-to-end run on a fresh engine (and the shared local SQS for
/// models with queues): (CPU per change in µs, processor writes).
async fn run_once(w: &Workload, sqs: &Option<LocalSqs>) -> anyhow::Result<(f64, u64)> {
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = common::options(w.model, &engine);
    // Waits (batching windows, polling) take no CPU: shrunk so a round
    // ends sooner; the function timeouts stay deployed.
    opts.time_scale = 0.01;
    opts.function_timeout_scale = Some(1.0);
    if let Some(sqs) = sqs {
        opts.sqs_endpoint = Some(sqs.endpoint());
        opts.queue_prefix = format!("b{}-", uuid::Uuid::new_v4().simple());
    }
    let mut rt = Runtime::start(opts).await?;
    w.write(&rt.dynamodb, &rt.config.table).await?;
    let cpu = process_cpu();
    rt.drain().await?;
    let cpu = process_cpu().saturating_sub(cpu);
    let writes = rt.processor_writes();
    engine.stop().await;
    Ok((cpu.as_secs_f64() * 1e6 / w.changes() as f64, writes))
}

async fn end_to_end(w: &Workload, rounds: usize) -> anyhow::Result<()> {
    let model = shared::models::find(w.model).map_err(|e| anyhow::anyhow!("{e}"))?;
    let sqs = if model.consumers.is_empty() {
        None
    } else {
        Some(tokio::task::spawn_blocking(LocalSqs::start).await??)
    };
    let (mut f, mut fw) = (Vec::new(), 0);
    for _ in 0..rounds.max(1) {
        let (cpu, writes) = run_once(w, &sqs).await?;
        f.push(cpu);
        fw = writes;
    }
    println!(
        "  {:<10} {:>6} changes: file {} µs/change; processor writes {fw}",
        w.name,
        w.changes(),
        figure(&f, 0),
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rounds = env_usize("JOBSTREAM_BENCH_ROUNDS", 3);
    let scale = env_usize("JOBSTREAM_BENCH_SCALE", 1).max(1);
    let images = env_usize("JOBSTREAM_BENCH_RECORDS", 20_000);
    let chosen = std::env::var("JOBSTREAM_BENCH_MODELS")
        .unwrap_or_else(|_| "hr,social,tracker,pickem".to_string());
    let workloads: Vec<Workload> = chosen
        .split(',')
        .filter_map(|m| match m.trim() {
            "hr" => Some(workloads::hr(150 * scale)),
            "social" => Some(workloads::social(60 * scale)),
            "tracker" => Some(workloads::tracker(60 * scale, 1)),
            "pickem" => Some(workloads::pickem(100 * scale)),
            _ => None,
        })
        .collect();
    println!("rules alone ({images} images each, {rounds} rounds; median (range)):");
    for w in &workloads {
        rules_alone(w, images, rounds)?;
    }
    println!("a record's questions, as the derive asks them ({images} records each, {rounds} rounds; median (range)):");
    for w in &workloads {
        records_alone(w, images, rounds)?;
    }
    println!("end to end, every processor and queue consumer drained ({rounds} rounds; process CPU per change, median (range)):");
    for w in &workloads {
        end_to_end(w, rounds).await?;
    }
    Ok(())
}
