//! jobstream against the hand-written peers (tracker.py, boto3; tracker.mjs,
//! AWS SDK v3) on the same stream batch: each runs as its own process, the
//! way a Lambda function does, against its own copy of the table (the same
//! source items), through its own bill meter; each handles the batch, then
//! the same batch again (a redelivery), and prints its CPU per round. The
//! tables must end equal, attribute for attribute: the comparison is fair
//! only if they did the same work.
//!
//! jobstream's process is this benchmark's own executable run again with
//! `JOBSTREAM_BENCH_CHILD=tracker`: the history and derive Lambdas' code
//! (`Config::from_env`, `Processors::new`), one batch through each.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::meter::{Bill, Meter};
use jobstream::tools::verify::scan_all;
use lambda_runtime::{Context, LambdaEvent};
use shared::item::Item;

const CHILD_ENV: &str = "JOBSTREAM_BENCH_CHILD";

/// One round of one implementation.
#[derive(Debug, Clone)]
struct Round {
    cpu: f64,
    /// jobstream only: the CPU of each processor (history, derive).
    parts: Vec<(String, f64)>,
    wall: f64,
    failures: u64,
    bill: Bill,
}

#[derive(Clone)]
struct Peer {
    name: &'static str,
    command: Vec<String>,
}

fn peers_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers")
}

/// The implementations that can run here: jobstream always, the peers once
/// `cli/benches/peers/setup.sh` installed their dependencies.
fn implementations() -> anyhow::Result<Vec<Peer>> {
    let dir = peers_dir();
    let exe = std::env::current_exe()?.display().to_string();
    let mut out = vec![Peer {
        name: "jobstream",
        command: vec![exe],
    }];
    let python = dir.join(".venv/bin/python");
    if python.exists() {
        out.push(Peer {
            name: "python/boto3",
            command: vec![
                python.display().to_string(),
                dir.join("tracker.py").display().to_string(),
            ],
        });
    }
    if dir.join("node_modules/@aws-sdk/client-dynamodb").exists() {
        out.push(Peer {
            name: "node/sdk-v3",
            command: vec![
                "node".to_string(),
                dir.join("tracker.mjs").display().to_string(),
            ],
        });
    }
    if out.len() < 3 {
        println!(
            "peers: not installed (run cli/benches/peers/setup.sh): comparing {} only",
            out.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(out)
}

fn key_of(item: &Item) -> String {
    let s = |k: &str| match item.get(k) {
        Some(AttributeValue::S(v)) => v.clone(),
        other => format!("{other:?}"),
    };
    format!("{}|{}", s("PK"), s("SK"))
}

/// The differences between two tables' items: up to `limit` lines naming
/// the key and the attributes that differ (never their values).
fn differences(a: &[Item], b: &[Item], limit: usize) -> Vec<String> {
    let index = |items: &[Item]| -> BTreeMap<String, Item> {
        items.iter().map(|i| (key_of(i), i.clone())).collect()
    };
    let (a, b) = (index(a), index(b));
    let mut out = Vec::new();
    for (k, ia) in &a {
        match b.get(k) {
            None => out.push(format!("{k}: only in jobstream's table")),
            Some(ib) if ia != ib => {
                let mut names: Vec<&String> = ia
                    .keys()
                    .chain(ib.keys())
                    .filter(|n| ia.get(*n) != ib.get(*n))
                    .collect();
                names.sort();
                names.dedup();
                out.push(format!("{k}: attributes differ: {names:?}"));
            }
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        out.push(format!("{k}: only in the peer's table"));
    }
    let n = out.len();
    out.truncate(limit);
    if n > limit {
        out.push(format!("... {} more", n - limit));
    }
    out
}

/// Runs `peer` as a child on `event_file` for `rounds` rounds, through
/// `meter`; each round starts when the child reads a line, so the bill of
/// each round is its own.
fn run_child(
    peer: &Peer,
    env: &[(&str, String)],
    event_file: &std::path::Path,
    rounds: usize,
    meter: &Meter,
) -> anyhow::Result<(Vec<Round>, Duration)> {
    let mut cmd = Command::new(&peer.command[0]);
    cmd.args(&peer.command[1..])
        .arg(event_file)
        .arg(rounds.to_string())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let mut out = Vec::new();
    for _ in 0..rounds {
        let before = meter.bill();
        writeln!(stdin, "go")?;
        stdin.flush()?;
        let line = lines
            .next()
            .with_context(|| format!("{} ended before its round", peer.name))??;
        let v: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| anyhow::anyhow!("{}: {line:?}: {e}", peer.name))?;
        out.push(Round {
            cpu: v["cpu"].as_f64().unwrap_or(f64::NAN),
            parts: v["parts"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN)))
                        .collect()
                })
                .unwrap_or_default(),
            wall: v["wall"].as_f64().unwrap_or(f64::NAN),
            failures: v["failures"].as_u64().unwrap_or(0),
            bill: meter.bill().since(&before),
        });
    }
    drop(stdin);
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "{} exited with {status}", peer.name);
    Ok((out, started.elapsed()))
}

/// jobstream's side of [`run_child`]: the history and derive Lambdas'
/// construction from the environment, each round one invocation of each
/// on the batch, after a line on stdin. Returns `None` when this process is
/// not a child.
pub async fn child_main() -> Option<anyhow::Result<()>> {
    std::env::var_os(CHILD_ENV)?;
    Some(child().await)
}

async fn child() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let event_file = args.get(1).context("no event file")?;
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_slice(&std::fs::read(event_file)?)?;
    let (config, model) = shared::lambda::Config::from_env().map_err(|e| anyhow::anyhow!("{e}"))?;
    let sdk = shared::store::sdk_config(5).await;
    let store = shared::store::Store::new(aws_sdk_dynamodb::Client::new(&sdk));
    let processors = shared::lambda::Processors::new(&model, &config, store, None);
    let fold = processors.fold.clone().context("the model has no fold")?;
    let mut stdin = std::io::stdin().lock().lines();
    for _ in 0..rounds {
        stdin.next();
        // Lambda hands each function its own decoded event: the copies are
        // made before the clock starts (the peers' parsing is outside
        // theirs too).
        let events = [event.clone(), event.clone()];
        let cpu = crate::common::process_cpu();
        let started = Instant::now();
        let mut failures = 0;
        let mut parts = serde_json::Map::new();
        for (p, event) in [
            &*fold as &dyn shared::lambda::StreamHandler,
            &*processors.derive,
        ]
        .into_iter()
        .zip(events)
        {
            let before = crate::common::process_cpu();
            let resp =
                shared::lambda::stream_handler(p, LambdaEvent::new(event, Context::default()))
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            failures += resp.batch_item_failures.len();
            let used = crate::common::process_cpu()
                .saturating_sub(before)
                .as_secs_f64();
            parts.insert(p.name().to_string(), used.into());
        }
        let cpu = crate::common::process_cpu()
            .saturating_sub(cpu)
            .as_secs_f64();
        println!(
            "{}",
            serde_json::json!({ "cpu": cpu, "parts": parts, "wall": started.elapsed().as_secs_f64(), "failures": failures })
        );
    }
    Ok(())
}

/// The comparison: `source` is the model table as the writers left it
/// (nothing processed yet), `records` the batch of its stream.
pub async fn compare(
    engine: &LocalEngine,
    rt: &Runtime,
    records: &[serde_json::Value],
    changes: usize,
) -> anyhow::Result<()> {
    let impls = implementations()?;
    let sources = scan_all(&rt.dynamodb, &rt.config.table).await?;
    let event_file =
        std::env::temp_dir().join(format!("jobstream-bench-{}.json", std::process::id()));
    std::fs::write(
        &event_file,
        serde_json::to_vec(&serde_json::json!({ "Records": records }))?,
    )?;
    let per_10k = |x: f64| x * 10_000.0 / records.len() as f64;
    let mut results = Vec::new();
    for (i, peer) in impls.iter().enumerate() {
        let table = format!("bench_tracker_{i}");
        let ledger = format!("bench_ledger_{i}");
        let mut opts = crate::common::options("tracker", engine);
        opts.table = Some(table.clone());
        opts.ledger_table = ledger.clone();
        let copy = Runtime::start(opts).await?;
        crate::common::batch_write(&copy.dynamodb, &table, &sources).await?;
        let meter = Meter::in_front_of(&engine.endpoint()).await?;
        let env = vec![
            (CHILD_ENV, "tracker".to_string()),
            ("MODEL", "tracker".to_string()),
            ("TABLE_NAME", table.clone()),
            ("LEDGER_TABLE_NAME", ledger.clone()),
            ("STATE_TABLE_NAME", ledger.clone()),
            ("AWS_ENDPOINT_URL", meter.endpoint()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", "local".to_string()),
            ("AWS_SECRET_ACCESS_KEY", "local".to_string()),
            ("RUST_LOG", "warn".to_string()),
            ("NODE_NO_WARNINGS", "1".to_string()),
        ];
        let (peer_meter, file) = (meter.clone(), event_file.clone());
        let command = peer.clone();
        let (rounds, _) =
            tokio::task::spawn_blocking(move || run_child(&command, &env, &file, 2, &peer_meter))
                .await??;
        let items = scan_all(&copy.dynamodb, &table).await?;
        results.push((peer.name, rounds, items));
    }
    let _ = std::fs::remove_file(&event_file);
    println!(
        "\nthe same {}-record batch ({changes} changes) by each implementation in its own process, warm (per 10k records; CPU of the handler alone, the engine runs in this process):",
        records.len()
    );
    println!(
        "{:<14} {:>9} {:>8} {:>11} {:>11} {:>9} {:>9}   redelivered: CPU, RRU/change, WRU/change",
        "", "CPU s", "wall s", "RRU/change", "WRU/change", "requests", "failures"
    );
    for (name, rounds, _) in &results {
        let (first, again) = (&rounds[0], &rounds[1]);
        println!(
            "{name:<14} {:>9.2} {:>8.2} {:>11.2} {:>11.2} {:>9.0} {:>9}   {:.2} s, {:.2}, {:.2}",
            per_10k(first.cpu),
            per_10k(first.wall),
            first.bill.rru() / changes as f64,
            first.bill.wru() / changes as f64,
            per_10k(first.bill.requests() as f64),
            first.failures + again.failures,
            per_10k(again.cpu),
            again.bill.rru() / changes as f64,
            again.bill.wru() / changes as f64,
        );
        if !first.parts.is_empty() {
            let parts = |r: &Round| {
                r.parts
                    .iter()
                    .map(|(p, c)| format!("{p} {:.2} s", per_10k(*c)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!(
                "{:<14} CPU by processor: {} (redelivered: {})",
                "",
                parts(first),
                parts(again)
            );
        }
        println!("{:<14} bill: {}", "", first.bill.per_change(changes));
    }
    let (_, js_rounds, js_items) = &results[0];
    let mut unequal = Vec::new();
    for (name, rounds, items) in &results[1..] {
        let js = &js_rounds[0];
        let peer = &rounds[0];
        println!(
            "{name} / jobstream: CPU {:.1}x, RRU {:.2}x, WRU {:.2}x",
            peer.cpu / js.cpu.max(1e-9),
            peer.bill.rru() / js.bill.rru().max(1e-9),
            peer.bill.wru() / js.bill.wru().max(1e-9),
        );
        let diff = differences(js_items, items, 5);
        if diff.is_empty() {
            println!(
                "{name}: table equal to jobstream's ({} items, attribute for attribute)",
                items.len()
            );
        } else {
            println!("{name}: table NOT equal to jobstream's:");
            for d in &diff {
                println!("  {d}");
            }
            unequal.push(*name);
        }
    }
    if results
        .iter()
        .any(|(_, r, _)| r.iter().any(|r| r.failures > 0))
    {
        anyhow::bail!("an implementation reported failed records");
    }
    anyhow::ensure!(
        unequal.is_empty(),
        "tables differ from jobstream's: {unequal:?} (the comparison is not fair)"
    );
    Ok(())
}
