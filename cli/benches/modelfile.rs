//! Benchmark (not a test): CPU per record of a model file, against its Rust
//! twin while one is compiled (SPEC §8; goal: within 1.5x).
//!
//! 1. The rules alone: every aspect the derive processor asks of a record
//!    image (projection, derived items, contributions, counter, ignores),
//!    for `models/hr.yaml` (its Rust twin is retired: the file alone), on
//!    every writer entity, processor items, one bad item in ten.
//! 2. End to end: employee changes written to a fresh embedded engine and
//!    drained through the local derive mapping (`models/hr.yaml`).
//! 3. The rules alone for `models/pickem.yaml` against the Rust Pick'Em
//!    rules (users, events, matches, predictions, standings, bad input).
//!
//! Run: `cargo bench -p jobstream --bench modelfile`
//! (JOBSTREAM_BENCH_RECORDS=N images, JOBSTREAM_BENCH_EMPS=N employees).
//! Without room for a release build, the dev profile with the workspace
//! crates optimised like the dependencies compares alike:
//! `CARGO_PROFILE_DEV_PACKAGE_SHARED_OPT_LEVEL=2
//! CARGO_PROFILE_DEV_PACKAGE_JOBSTREAM_OPT_LEVEL=2 cargo bench -p jobstream
//! --bench modelfile --profile dev`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use shared::engine::rules::Rules;
use shared::item::{s, Item};

#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::hr as build;

fn hr_file() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/hr.yaml"))
}

fn ulid(n: u64) -> String {
    build::ulid(1_767_600_000_000 + n * 1000, u128::from(n))
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Record images as the derive processor sees them.
fn images(n: usize) -> Vec<Item> {
    let org = ulid(1);
    let depts: Vec<String> = (0..8).map(|d| ulid(10 + d)).collect();
    (0..n as u64)
        .map(|i| {
            let d = &depts[(i % 8) as usize];
            let mut item = match i % 10 {
                0..=4 => build::emp(&org, &ulid(1000 + i), &format!("E{i}@Acme.co"), "E", d),
                5 => build::dept(&org, d, "Dept", &ulid(2)),
                6 => build::job(
                    &org,
                    &ulid(1000 + i),
                    &ulid(5000 + i),
                    d,
                    "Engineer",
                    "open",
                ),
                7 => build::app(
                    &ulid(3),
                    &ulid(1000 + i),
                    &ulid(5000 + i),
                    &ulid(4),
                    "applied",
                ),
                8 => [
                    ("PK".to_string(), s(format!("DEPT#{d}"))),
                    ("SK".to_string(), s(format!("EMP#{}", ulid(i)))),
                ]
                .into(),
                _ => build::emp(&org, "not-a-ulid", "x@y.z", "X", d),
            };
            if i % 20 == 1 {
                item.insert("status".into(), s("inactive"));
            }
            item
        })
        .collect()
}

/// What the derive processor asks of one image: every aspect at once
/// (`Rules::aspects`, one parse of a file's image), and whether it is a
/// counter.
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

/// The same, each aspect asked on its own (what the derive processor did
/// before `Rules::aspects`: a file's image parsed once per aspect): the
/// baseline of the same run.
fn ask_each(r: &dyn Rules, item: &Item) -> usize {
    if r.ignores(item) {
        return 1;
    }
    r.projection(item)
        .map(|p| p.map_or(0, |p| p.attrs.len()))
        .unwrap_or(0)
        + r.derived(item).map(|d| d.len()).unwrap_or(0)
        + r.contributions(item).map(|c| c.len()).unwrap_or(0)
        + r.memberships(item).map(|m| m.len()).unwrap_or(0)
        + usize::from(r.counter(item).is_some())
}

type Ask = fn(&dyn Rules, &Item) -> usize;

fn time_rules(r: &dyn Rules, items: &[Item], rounds: usize, ask: Ask) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut check = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        check = items.iter().map(|i| ask(r, i)).sum();
        best = best.min(started.elapsed());
    }
    (best, check)
}

/// The rules alone, Rust and file, each way of asking: prints µs/record and
/// the ratios.
fn compare_rules(what: &str, rust: &dyn Rules, file: &dyn Rules, items: &[Item]) {
    let n = items.len();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!("rules alone, {n} {what} record images:");
    for (how, ask) in [
        ("each aspect on its own", ask_each as Ask),
        ("all aspects at once", ask as Ask),
    ] {
        // Warm up, then the best of five rounds each.
        time_rules(rust, items, 1, ask);
        time_rules(file, items, 1, ask);
        let (rt, rc) = time_rules(rust, items, 5, ask);
        let (ft, fc) = time_rules(file, items, 5, ask);
        assert_eq!(rc, fc, "both rule sets imply the same number of things");
        println!(
            "  {how:<24} Rust {:>8.2} µs/record, file {:>8.2} µs/record: file / Rust {:>5.2}x",
            per(rt),
            per(ft),
            ft.as_secs_f64() / rt.as_secs_f64()
        );
    }
}

/// The rules of a model file alone, each way of asking: prints µs/record.
fn file_rules_alone(what: &str, file: &dyn Rules, items: &[Item]) {
    let n = items.len();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!("rules alone, {n} {what} record images:");
    for (how, ask) in [
        ("each aspect on its own", ask_each as Ask),
        ("all aspects at once", ask as Ask),
    ] {
        // Warm up, then the best of five rounds.
        time_rules(file, items, 1, ask);
        let (ft, _) = time_rules(file, items, 5, ask);
        println!("  {how:<24} file {:>8.2} µs/record", per(ft));
    }
}

async fn end_to_end(
    model_file: Option<PathBuf>,
    emps: usize,
) -> anyhow::Result<(Duration, u64, jobstream::meter::Bill)> {
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = RuntimeOptions::new(
        "hr",
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    opts.model_file = model_file;
    let meter = jobstream::meter::Meter::in_front_of(&engine.endpoint()).await?;
    opts.processor_endpoint = Some(meter.endpoint());
    let mut rt = Runtime::start(opts).await?;
    let org = ulid(1);
    let depts: Vec<String> = (0..4).map(|d| ulid(10 + d)).collect();
    for d in &depts {
        let item = build::dept(&org, d, "Dept", &ulid(2));
        rt.dynamodb
            .put_item()
            .table_name(&rt.config.table)
            .set_item(Some(item))
            .send()
            .await?;
    }
    for round in 0..2u64 {
        for e in 0..emps as u64 {
            let d = &depts[((e + round) % 4) as usize];
            let item = build::emp(&org, &ulid(1000 + e), &format!("e{e}@acme.co"), "E", d);
            rt.dynamodb
                .put_item()
                .table_name(&rt.config.table)
                .set_item(Some(item))
                .send()
                .await?;
        }
    }
    let started = Instant::now();
    rt.drain().await?;
    let took = started.elapsed();
    let writes = rt.processor_writes();
    engine.stop().await;
    Ok((took, writes, meter.bill()))
}

fn pickem_file() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/pickem.yaml"
    ))
}

/// Pick'Em record images: users, events, matches (scored and not),
/// predictions (scored and not), standings, one bad item in ten.
fn pickem_images(n: usize) -> Vec<Item> {
    use shared::models::pickem::entities::write;
    let ev = |i: u64| format!("2024-03-{:02}-ev{}", 1 + i % 28, i % 28);
    (0..n as u64)
        .map(|i| {
            let e = ev(i);
            match i % 10 {
                0 => write::user(&format!("u{i}"), "User"),
                1 => write::event(&e[..10], &e[11..], "Event", "upcoming"),
                2 | 3 => write::a_match(
                    &e,
                    &format!("m{}", i % 7),
                    "Match",
                    (i % 9) as i64,
                    10,
                    false,
                    &["A", "B"],
                    (i % 2 == 0).then_some(0),
                ),
                4..=7 => {
                    let mut p = write::prediction(
                        &format!("u{}", i % 500),
                        &e,
                        &[("m1", 0), ("m2", 1), ("m3", 0)],
                    );
                    if i % 2 == 0 {
                        p.insert("points".into(), shared::item::n(20));
                        p.insert("mcorrect".into(), shared::item::n(2));
                    }
                    p
                }
                8 => [
                    ("PK".to_string(), s(format!("USER#u{}", i % 500))),
                    ("SK".to_string(), s("STANDINGS#2024")),
                    ("type".to_string(), s("standings")),
                    ("points".to_string(), shared::item::n(120)),
                ]
                .into(),
                _ => {
                    let mut p = write::prediction(&format!("u{i}"), &e, &[]);
                    p.insert("predictions".into(), s("not a map"));
                    p
                }
            }
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = env_usize("JOBSTREAM_BENCH_RECORDS", 20_000);
    let emps = env_usize("JOBSTREAM_BENCH_EMPS", 200);
    let items = images(n);
    let file = shared::file::load(&hr_file()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let file_rules = file.model().rules;
    file_rules_alone("HR", file_rules.as_ref(), &items);
    let pitems = pickem_images(n);
    let pfile = shared::file::load(&pickem_file()).map_err(|e| anyhow::anyhow!("{e}"))?;
    let pfile_rules = pfile.model().rules;
    let prust = shared::models::find("pickem")
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .rules;
    // (The file's matches also count into the ledger-only version of
    // their event, as the Rust model's do: the same number of things.)
    compare_rules("Pick'Em", prust.as_ref(), pfile_rules.as_ref(), &pitems);
    let records = 2 * emps + 4;
    let (f_took, f_writes, f_bill) = end_to_end(Some(hr_file()), emps).await?;
    println!("end to end, {records} records drained through the local derive mapping:");
    println!(
        "  models/hr.yaml     {:>8.1} µs/record, {f_writes} processor writes",
        f_took.as_secs_f64() * 1e6 / records as f64
    );
    // 4 departments, then every employee written twice.
    let changes = 4 + 2 * emps;
    println!("  bill, models/hr.yaml: {}", f_bill.per_change(changes));
    Ok(())
}
