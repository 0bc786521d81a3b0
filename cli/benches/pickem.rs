//! Benchmark (not a test): scoring one Pick'Em event with PREDICTIONS
//! predictions (default 10,000, one user each) when its results arrive, on
//! the embedded engine with the model's runtime (stream mapping + the local SQS
//! for the scoring jobs), as `jobstream dev` runs it.
//!
//! Setup (not timed) writes the event, 3 matches and the predictions, and
//! brings them to their derived state in process (reconcile + one in-process
//! scoring of the event: every prediction scored 0, standings created). The
//! timed step writes the 3 results in one transaction and drains: the event
//! job (`models/pickem.yaml`'s `compute:`) lists the predictions from the
//! ledger, scores them in pages, each
//! changed score is one write, and the derive processor sums the standings
//! (one write per standings item per batch).
//!
//! Prints the time, the model-table item writes (stream records, i.e. item
//! changes) against the goal, and the ledger writes.
//! `cargo bench -p jobstream --bench pickem` (`PREDICTIONS=2000` for a
//! quicker run; `--profile dev` reuses the debug build).

mod common;
#[path = "common/seed_items.rs"]
mod seed_items;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::Update;
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::StartingPosition;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use seed_items::pickem;
use shared::engine::setjob::{apply, Reads};
use shared::item::{n, s, Item};
use shared::models::Job;

const EV: &str = "2024-03-03-aew-revolution";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count = common::env_usize("PREDICTIONS", 10_000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let sqs = LocalSqs::start()?;
    let options = |prefix: &str| {
        let mut o = common::options("pickem", &engine);
        o.sqs_endpoint = Some(sqs.endpoint());
        o.queue_prefix = prefix.to_string();
        o
    };
    // Setup, in process (its records are not replayed: the measured
    // runtime's mapping starts at LATEST).
    let setup = Runtime::start(options("setup-")).await?;
    let table = setup.config.table.clone();
    let started = Instant::now();
    let mut facts: Vec<Item> = vec![
        pickem::event(
            "2024-03-03",
            "aew-revolution",
            "AEW Revolution",
            "broadcast",
        ),
        pickem::a_match(EV, "m1", 1, 10, None),
        pickem::a_match(EV, "m2", 2, 25, None),
        pickem::a_match(EV, "m3", 3, 40, None),
    ];
    for i in 0..count as i64 {
        let picks =
            [("m1", i % 2), ("m2", i / 2 % 2), ("m3", i / 4 % 2)].map(|(m, t)| (m.into(), t));
        facts.push(pickem::prediction(&format!("user{i:06}"), EV, &picks));
    }
    common::batch_write(&setup.dynamodb, &table, &facts).await?;
    let keys_of: Vec<Item> = facts
        .iter()
        .map(|i| shared::item::key_of(i, &["PK", "SK"]))
        .collect();
    let deriver = setup.processors.derive.deriver().clone();
    for chunk in keys_of.chunks(1000) {
        deriver
            .reconcile(chunk, &HashMap::new())
            .await
            .map_err(|(_, _, e)| anyhow::anyhow!("{e}"))?;
    }
    let reads = Reads {
        store: setup.processors.store.clone(),
        table: table.clone(),
        ledger_table: setup.config.ledger_table.clone(),
        now: chrono::Utc::now(),
    };
    // The model's scoring job (its `compute:` consumer), on the event.
    let scoring = setup
        .model
        .consumers
        .iter()
        .find_map(|c| match &c.job {
            Job::Set(j) if c.queue.logical == "scoring" => Some(j.clone()),
            _ => None,
        })
        .ok_or_else(|| anyhow::anyhow!("the model has no scoring consumer"))?;
    let mut bodies = vec![serde_json::json!({
        "version": 1,
        "kind": "scope",
        "scope": { "year": "2024", "month": "03", "dd": "03", "slug": "aew-revolution" },
    })
    .to_string()];
    while let Some(body) = bodies.pop() {
        let plan = scoring
            .plan(&body, &reads)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        apply(
            &reads.store,
            &table,
            &reads.ledger_table,
            &["PK", "SK"],
            &[],
            &plan,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        bodies.extend(plan.then.into_iter().map(|m| m.body));
    }
    println!(
        "setup: {count} predictions derived and scored 0 in {:.1?}",
        started.elapsed()
    );

    let mut opts = options("bench-");
    opts.mapping.starting_position = StartingPosition::Latest;
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let mut rt = Runtime::start(opts).await?;
    rt.drain().await?;
    let bill_before = meter.bill();
    let mut stream = common::StreamTail::open(&engine, &rt.dynamodb, &table).await?;
    stream.read()?;
    let writes_before = rt.processor_writes();

    // The results, set as an application sets them (updates), in one
    // transaction.
    let mut tx = rt.dynamodb.transact_write_items();
    for (id, result) in [("m1", 0), ("m2", 1), ("m3", 1)] {
        let mut k = Item::new();
        k.insert("PK".into(), s(format!("EVENT#{EV}")));
        k.insert("SK".into(), s(format!("MATCH#{id}")));
        tx = tx.transact_items(shared::tx::update_of(
            Update::builder()
                .table_name(&table)
                .set_key(Some(k))
                .update_expression("SET #r = :r")
                .expression_attribute_names("#r", "result")
                .expression_attribute_values(":r", n(result)),
        ));
    }
    let busy_before = engine.busy();
    let timed = Instant::now();
    tx.send().await?;
    rt.drain_within(Duration::from_secs(3600)).await?;
    let elapsed = timed.elapsed();
    let busy = engine.busy() - busy_before;
    let table_writes = stream.read()?.len() - 3;
    let processor_writes = rt.processor_writes() - writes_before;
    // Score changes: every prediction that picked at least one winner.
    let changed = (0..count as i64)
        .filter(|i| i % 2 == 0 || i / 2 % 2 == 1 || i / 4 % 2 == 1)
        .count();
    let goal = 2 * changed;
    println!(
        "scored one event with {count} predictions ({changed} scores changed) in {elapsed:.2?}"
    );
    println!(
        "model-table item writes: {table_writes} (goal: {changed} predictions + {changed} standings = {goal}); {:.3} per changed score",
        table_writes as f64 / changed.max(1) as f64 / 2.0
    );
    println!("all processor item writes (table + ledger records and totals): {processor_writes}");
    println!(
        "time per changed score (prediction + standings): {:.2?}",
        elapsed / changed.max(1) as u32
    );
    println!(
        "bill of the processors per changed score (the application's one transaction apart): {}",
        meter.bill().since(&bill_before).per_change(changed)
    );
    // The floor: the scored predictions, as they are now, written by plain
    // BatchWriteItem (4 concurrent writers) into a fresh table of the
    // model's definition in the same engine.
    let pk_sk = |i: &Item| {
        use shared::item::ItemExt as _;
        (
            i.s("PK").unwrap_or_default().to_string(),
            i.s("SK").unwrap_or_default().to_string(),
        )
    };
    let predictions: std::collections::HashSet<(String, String)> =
        keys_of[4..].iter().map(pk_sk).collect();
    let scored: Vec<Item> = jobstream::tools::verify::scan_all(&rt.dynamodb, &table)
        .await?
        .into_iter()
        .filter(|i| predictions.contains(&pk_sk(i)))
        .collect();
    anyhow::ensure!(scored.len() == count, "{} predictions found", scored.len());
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    jobstream::local::engine::ensure_table(&rt.dynamodb, &rt.model.table, &floor_table).await?;
    let busy_before = engine.busy();
    let floor = common::batch_write_floor(&rt.dynamodb, &floor_table, scored).await?;
    let floor_busy = engine.busy() - busy_before;
    println!(
        "floor: the same {count} predictions by {} concurrent BatchWriteItem writers: {floor:.2?}; scoring / floor = {} (goal <= 3x)",
        common::FLOOR_WRITERS,
        common::ratio(elapsed, floor)
    );
    println!(
        "the engine busy (requests through its front; the stream read beside it): scoring {busy:.2?}, floor {floor_busy:.2?}: {}",
        common::ratio(busy, floor_busy)
    );
    engine.stop().await;
    Ok(())
}
