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

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::{PutRequest, TransactWriteItem, Update, WriteRequest};
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::{RecordReader, StartingPosition};
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use jobstream::local::sqs_server::LocalSqs;
use shared::engine::setjob::{apply, Reads};
use shared::item::{n, s, Item};
use shared::models::Job;

const EV: &str = "2024-03-03-aew-revolution";

fn item(pairs: Vec<(&str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A match of the event (`models/pickem.yaml`), single-member teams A and B.
fn a_match(id: &str, order: i64, points: i64, result: Option<i64>) -> Item {
    let team = |m: &str| {
        AttributeValue::M([("members".to_string(), AttributeValue::L(vec![s(m)]))].into())
    };
    let mut m = item(vec![
        ("PK", s(format!("EVENT#{EV}"))),
        ("SK", s(format!("MATCH#{id}"))),
        ("type", s("match")),
        ("id", s(id)),
        ("name", s(id)),
        ("order", n(order)),
        ("points", n(points)),
        ("preshow", AttributeValue::Bool(false)),
        ("championships", AttributeValue::L(vec![])),
        ("teams", AttributeValue::L(vec![team("A"), team("B")])),
    ]);
    if let Some(r) = result {
        m.insert("result".into(), n(r));
    }
    m
}

/// A user's picks for the event.
fn prediction(user: &str, picks: &[(&str, i64)]) -> Item {
    item(vec![
        ("PK", s(format!("USER#{user}"))),
        ("SK", s(format!("EVENT#{EV}"))),
        ("type", s("prediction")),
        (
            "predictions",
            AttributeValue::M(picks.iter().map(|(m, t)| (m.to_string(), n(t))).collect()),
        ),
    ])
}

/// Model-table item changes so far (stream records, read through the
/// engine's own API).
async fn stream_records(engine: &LocalEngine, rt: &Runtime) -> anyhow::Result<usize> {
    let streams = aws_sdk_dynamodbstreams::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let arn = jobstream::local::esm::stream_arn(&rt.dynamodb, &rt.config.table).await?;
    let desc = streams.describe_stream().stream_arn(&arn).send().await?;
    let mut total = 0;
    for shard in desc
        .stream_description()
        .map(|d| d.shards().to_vec())
        .unwrap_or_default()
    {
        let it = streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(shard.shard_id().unwrap_or_default())
            .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
            .send()
            .await?;
        let mut iterator = it.shard_iterator().map(str::to_string);
        while let Some(i) = iterator.take() {
            let resp = engine.database().get_records(
                dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: i,
                    limit: Some(1000),
                },
            )?;
            if resp.records.is_empty() {
                break;
            }
            total += resp.records.len();
            iterator = resp.next_shard_iterator;
        }
    }
    Ok(total)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count: usize = std::env::var("PREDICTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let sqs = LocalSqs::start()?;
    let options = |prefix: &str| {
        let mut o = RuntimeOptions::new(
            "pickem",
            Some(engine.endpoint()),
            RecordReader::Embedded(engine.database().clone()),
        );
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
        item(vec![
            ("PK", s("EVENT")),
            ("SK", s("EVENT#2024-03-03#aew-revolution")),
            ("type", s("event")),
            ("date", s("2024/03/03")),
            ("name", s("AEW Revolution")),
            ("state", s("broadcast")),
        ]),
        a_match("m1", 1, 10, None),
        a_match("m2", 2, 25, None),
        a_match("m3", 3, 40, None),
    ];
    for i in 0..count {
        let i64i = i as i64;
        facts.push(prediction(
            &format!("user{i:06}"),
            &[("m1", i64i % 2), ("m2", i64i / 2 % 2), ("m3", i64i / 4 % 2)],
        ));
    }
    for chunk in facts.chunks(25) {
        let reqs: Vec<WriteRequest> = chunk
            .iter()
            .map(|i| {
                Ok::<_, anyhow::Error>(
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(i.clone())).build()?)
                        .build(),
                )
            })
            .collect::<Result<_, _>>()?;
        setup.processors.store.batch_write(&table, reqs).await?;
    }
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
    let records_before = stream_records(&engine, &rt).await?;
    let writes_before = rt.processors.store.stats().writes.load(Ordering::Relaxed);

    // The results, set as an application sets them (updates), in one
    // transaction.
    let mut tx = rt.dynamodb.transact_write_items();
    for (id, result) in [("m1", 0), ("m2", 1), ("m3", 1)] {
        let mut k = Item::new();
        k.insert("PK".into(), s(format!("EVENT#{EV}")));
        k.insert("SK".into(), s(format!("MATCH#{id}")));
        tx = tx.transact_items(
            TransactWriteItem::builder()
                .update(
                    Update::builder()
                        .table_name(&table)
                        .set_key(Some(k))
                        .update_expression("SET #r = :r")
                        .expression_attribute_names("#r", "result")
                        .expression_attribute_values(":r", n(result))
                        .build()?,
                )
                .build(),
        );
    }
    let timed = Instant::now();
    tx.send().await?;
    rt.drain_within(Duration::from_secs(3600)).await?;
    let elapsed = timed.elapsed();
    let table_writes = stream_records(&engine, &rt).await? - records_before - 3;
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
    let floor = common::batch_write_floor(&rt.dynamodb, &floor_table, scored).await?;
    println!(
        "floor: the same {count} predictions by {} concurrent BatchWriteItem writers: {floor:.2?}; scoring / floor = {} (goal <= 3x)",
        common::FLOOR_WRITERS,
        common::ratio(elapsed, floor)
    );
    engine.stop().await;
    Ok(())
}
