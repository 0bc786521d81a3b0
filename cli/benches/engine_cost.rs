//! Benchmark (not a test): the embedded engine alone, what one item or one
//! action costs it by request shape, so that the processors' figures can be
//! read against it (issue 29: the scoring and fan-out floors).
//!
//! ITEMS items (default 10,000) shaped like a scored prediction
//! (key, type, a map of three picks, two numbers, the index keys: about 200
//! bytes) are written into a fresh table of the bench's own definition
//! (`TABLE_MODEL`: stream on, one index) by each shape in turn, through the same SDK client and fair
//! front as production (`jobstream dev`, the processors). PREFILL items
//! (default 0) are written first, untimed, so a shape can be measured on a
//! grown table. Each shape prints its time per item and per action, by
//! fifth of its items (the table growing), and the process's CPU.
//!
//! Shapes: BatchWriteItem of 25 (one writer, and the scoring bench's floor's four);
//! PutItem; TransactWriteItems of 1, 25 and 100 puts; of 100 puts each
//! conditioned (`attribute_not_exists`); of 50 conditioned puts and 50
//! ConditionChecks on other items; of 100 conditioned updates of existing
//! items (the scoring job's shape: `SET points, GSI_SK`). DIRECT=1 also runs
//! the batch, the 100 puts and the 100 updates on the engine's own API
//! (`dynoxide::Database`, no HTTP, no SDK), which says what is the engine's.
//!
//! `cargo bench -p jobstream --bench engine_cost` (`ITEMS=2000` for a
//! quicker run, `ONLY=text` for the shapes whose name holds it; `--profile
//! dev` reuses the debug build).

mod common;

use std::time::Instant;

use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem, Update};
use aws_sdk_dynamodb::Client;
use jobstream::local::engine::LocalEngine;
use serde_json::{json, Value};
use shared::item::{n, s, Item};

const EVENT: &str = "EVENT#2024-03-03-aew-revolution";

/// One scored prediction's attributes: `(name, S or N, value)`.
/// A scoring table as the items below need it: keys `PK`/`SK`, one index
/// `GSI` (`GSI_PK`, `GSI_SK`), its stream on.
const TABLE_MODEL: &str = r#"jobstream: 1
name: engine-cost
table:
  name: engine-cost
  pk: PK
  sk: SK
  gsis:
    - { name: GSI, pk: GSI_PK, sk: GSI_SK }
entities:
  prediction:
    key: { PK: "USER#${user}", SK: "EVENT#${event}" }
    attributes: { user: string, event: string, points: int, mcorrect: int, predictions: map }
"#;

fn fields(i: usize, points: usize) -> Vec<(&'static str, bool, String)> {
    vec![
        ("PK", true, format!("USER#user{i:06}")),
        ("SK", true, EVENT.to_string()),
        ("type", true, "prediction".into()),
        ("points", false, points.to_string()),
        ("mcorrect", false, (points % 4).to_string()),
        ("GSI_PK", true, EVENT.to_string()),
        (
            "GSI_SK",
            true,
            format!("{:06}#user{i:06}", 1_000_000 - points),
        ),
    ]
}

fn item(i: usize, points: usize) -> Item {
    let mut item: Item = fields(i, points)
        .into_iter()
        .map(|(k, is_s, v)| {
            (
                k.to_string(),
                if is_s {
                    s(v)
                } else {
                    n(v.parse::<i64>().unwrap_or(0))
                },
            )
        })
        .collect();
    let picks = [("m1", i % 2), ("m2", i / 2 % 2), ("m3", i / 4 % 2)]
        .into_iter()
        .map(|(m, t)| (m.to_string(), n(t as i64)))
        .collect();
    item.insert(
        "predictions".into(),
        aws_sdk_dynamodb::types::AttributeValue::M(picks),
    );
    item
}

/// The same item in DynamoDB's wire JSON, for the engine's own API.
fn item_json(i: usize, points: usize) -> Value {
    let mut m = serde_json::Map::new();
    for (k, is_s, v) in fields(i, points) {
        m.insert(
            k.into(),
            if is_s {
                json!({ "S": v })
            } else {
                json!({ "N": v })
            },
        );
    }
    m.insert(
        "predictions".into(),
        json!({ "M": { "m1": { "N": (i % 2).to_string() }, "m2": { "N": (i / 2 % 2).to_string() }, "m3": { "N": (i / 4 % 2).to_string() } } }),
    );
    Value::Object(m)
}

fn key(i: usize) -> Item {
    [
        ("PK".to_string(), s(format!("USER#user{i:06}"))),
        ("SK".to_string(), s(EVENT)),
    ]
    .into_iter()
    .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Batch,
    Put,
    /// TransactWriteItems of puts: actions per request, conditioned.
    TxPut(usize, bool),
    /// Half conditioned puts, half ConditionChecks of other items.
    TxPutCheck(usize),
    /// Conditioned updates of existing items.
    TxUpdate(usize),
    /// The engine's own API: batch of 25, 100 puts, 100 updates.
    DirectBatch,
    DirectTxPut,
    DirectTxUpdate,
}

impl Shape {
    fn name(self) -> String {
        match self {
            Shape::Batch => "BatchWriteItem, 25 puts".into(),
            Shape::Put => "PutItem".into(),
            Shape::TxPut(a, false) => format!("TransactWriteItems, {a} puts"),
            Shape::TxPut(a, true) => format!("TransactWriteItems, {a} conditioned puts"),
            Shape::TxPutCheck(a) => {
                format!(
                    "TransactWriteItems, {} conditioned puts + {} ConditionChecks",
                    a / 2,
                    a / 2
                )
            }
            Shape::TxUpdate(a) => format!("TransactWriteItems, {a} conditioned updates"),
            Shape::DirectBatch => "direct: BatchWriteItem, 25 puts".into(),
            Shape::DirectTxPut => "direct: TransactWriteItems, 100 puts".into(),
            Shape::DirectTxUpdate => "direct: TransactWriteItems, 100 conditioned updates".into(),
        }
    }

    /// Items written per request, and actions per request.
    fn per_request(self) -> (usize, usize) {
        match self {
            Shape::Batch | Shape::DirectBatch => (25, 25),
            Shape::Put => (1, 1),
            Shape::TxPut(a, _) | Shape::TxUpdate(a) => (a, a),
            Shape::TxPutCheck(a) => (a / 2, a),
            Shape::DirectTxPut | Shape::DirectTxUpdate => (100, 100),
        }
    }

    /// Whether the shape writes items that exist (updates).
    fn updates(self) -> bool {
        matches!(self, Shape::TxUpdate(_) | Shape::DirectTxUpdate)
    }
}

fn put(table: &str, i: usize, conditioned: bool) -> TransactWriteItem {
    let mut p = Put::builder().table_name(table).set_item(Some(item(i, 0)));
    if conditioned {
        p = p.condition_expression("attribute_not_exists(PK)");
    }
    shared::tx::put_of(p)
}

fn update(table: &str, i: usize) -> TransactWriteItem {
    shared::tx::update_of(
        Update::builder()
            .table_name(table)
            .set_key(Some(key(i)))
            .update_expression("SET points = :p, mcorrect = :m, GSI_SK = :g")
            .condition_expression("attribute_exists(PK) AND points <> :p")
            .expression_attribute_values(":p", n(10))
            .expression_attribute_values(":m", n(1))
            .expression_attribute_values(":g", s(format!("{:06}#user{i:06}", 1_000_000 - 10))),
    )
}

fn check(table: &str, i: usize) -> TransactWriteItem {
    TransactWriteItem::builder()
        .condition_check(
            ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key(i)))
                .condition_expression("attribute_exists(PK)")
                .build()
                .expect("table, key and condition are set"),
        )
        .build()
}

/// Sends the request that writes items `range` by `shape`.
async fn send(
    client: &Client,
    db: &dynoxide::Database,
    table: &str,
    shape: Shape,
    range: std::ops::Range<usize>,
    checks_from: usize,
) -> anyhow::Result<()> {
    match shape {
        Shape::Batch => {
            let items: Vec<Item> = range.map(|i| item(i, 0)).collect();
            common::batch_write(client, table, &items).await?;
        }
        Shape::Put => {
            for i in range {
                client
                    .put_item()
                    .table_name(table)
                    .set_item(Some(item(i, 0)))
                    .send()
                    .await?;
            }
        }
        Shape::TxPut(_, conditioned) => {
            let actions = range.map(|i| put(table, i, conditioned)).collect();
            client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await?;
        }
        Shape::TxPutCheck(_) => {
            let mut actions: Vec<TransactWriteItem> = Vec::new();
            for i in range {
                actions.push(put(table, i, true));
                actions.push(check(table, checks_from + i));
            }
            client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await?;
        }
        Shape::TxUpdate(_) => {
            let actions = range.map(|i| update(table, i)).collect();
            client
                .transact_write_items()
                .set_transact_items(Some(actions))
                .send()
                .await?;
        }
        Shape::DirectBatch => {
            let puts: Vec<Value> = range
                .map(|i| json!({ "PutRequest": { "Item": item_json(i, 0) } }))
                .collect();
            let req = json!({ "RequestItems": { table: puts } });
            let out = db.batch_write_item(serde_json::from_value(req)?)?;
            anyhow::ensure!(out.unprocessed_items.is_empty(), "unprocessed items");
        }
        Shape::DirectTxPut => {
            let actions: Vec<Value> = range
                .map(|i| json!({ "Put": { "TableName": table, "Item": item_json(i, 0) } }))
                .collect();
            db.transact_write_items(serde_json::from_value(json!({ "TransactItems": actions }))?)?;
        }
        Shape::DirectTxUpdate => {
            let actions: Vec<Value> = range
                .map(|i| {
                    json!({ "Update": {
                        "TableName": table,
                        "Key": { "PK": { "S": format!("USER#user{i:06}") }, "SK": { "S": EVENT } },
                        "UpdateExpression": "SET points = :p, mcorrect = :m, GSI_SK = :g",
                        "ConditionExpression": "attribute_exists(PK) AND points <> :p",
                        "ExpressionAttributeValues": {
                            ":p": { "N": "10" }, ":m": { "N": "1" },
                            ":g": { "S": format!("{:06}#user{i:06}", 1_000_000 - 10) },
                        },
                    } })
                })
                .collect();
            db.transact_write_items(serde_json::from_value(json!({ "TransactItems": actions }))?)?;
        }
    }
    Ok(())
}

/// Items `from..to` by plain BatchWriteItem, untimed.
async fn fill(client: &Client, table: &str, from: usize, to: usize) -> anyhow::Result<()> {
    let items: Vec<Item> = (from..to).map(|i| item(i, 0)).collect();
    common::batch_write(client, table, &items).await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let count = common::env_usize("ITEMS", 10_000);
    let prefill = common::env_usize("PREFILL", 0);
    let direct = std::env::var("DIRECT").is_ok_and(|v| v == "1");
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let db = engine.database().clone();
    let client =
        Client::new(&jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await);
    // The table of a scoring model: stream on, one index (the bench's own
    // file, so no shipped model is named here).
    let file = std::env::temp_dir().join(format!(
        "engine-cost-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&file, TABLE_MODEL)?;
    let model = shared::models::load(&shared::models::Source::File(file.clone()))
        .map_err(|e| anyhow::anyhow!(e))?;
    std::fs::remove_file(&file).ok();
    let mut shapes = vec![
        Shape::Batch,
        Shape::Put,
        Shape::TxPut(1, false),
        Shape::TxPut(25, false),
        Shape::TxPut(100, false),
        Shape::TxPut(100, true),
        Shape::TxPutCheck(100),
        Shape::TxUpdate(100),
    ];
    if direct {
        shapes.extend([
            Shape::DirectBatch,
            Shape::DirectTxPut,
            Shape::DirectTxUpdate,
        ]);
    }
    // ONLY=text: the shapes whose name holds it (e.g. `direct`).
    if let Ok(only) = std::env::var("ONLY") {
        shapes.retain(|s| s.name().contains(&only));
    }
    println!(
        "engine alone: {count} items a shape (about 200 bytes, a scoring table: stream on, one index), {prefill} items in the table before"
    );
    // The scoring bench's floor: 4 concurrent BatchWriteItem writers.
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    jobstream::local::engine::ensure_table(&client, &model.table, &floor_table).await?;
    fill(&client, &floor_table, count, count + prefill).await?;
    let items: Vec<Item> = (0..count).map(|i| item(i, 0)).collect();
    let floor = common::batch_write_floor(&client, &floor_table, items).await?;
    let floor_per_item = floor / count.max(1) as u32;
    println!(
        "floor ({} concurrent BatchWriteItem writers, as the scoring bench's): {floor:.2?}, {floor_per_item:.1?} per item",
        common::FLOOR_WRITERS
    );
    for shape in shapes {
        let table = format!("t-{}", uuid::Uuid::new_v4().simple());
        jobstream::local::engine::ensure_table(&client, &model.table, &table).await?;
        // Untimed: the table grown by PREFILL items (keys past the
        // measured ones and their checks), and for updates the items.
        fill(&client, &table, 2 * count, 2 * count + prefill).await?;
        if shape.updates() {
            fill(&client, &table, 0, count).await?;
        }
        if matches!(shape, Shape::TxPutCheck(_)) {
            fill(&client, &table, count, 2 * count).await?;
        }
        let (per_request, actions) = shape.per_request();
        let fifth = (count / 5).max(per_request) / per_request * per_request;
        let cpu = common::process_cpu();
        let started = Instant::now();
        let mut windows: Vec<String> = Vec::new();
        let mut written = 0;
        while written < count {
            let window = Instant::now();
            let end = (written + fifth).min(count);
            let mut at = written;
            while at < end {
                let to = (at + per_request).min(end);
                send(&client, &db, &table, shape, at..to, count).await?;
                at = to;
            }
            windows.push(format!("{:.1?}", window.elapsed() / (end - written) as u32));
            written = end;
        }
        let elapsed = started.elapsed();
        let cpu = common::process_cpu().saturating_sub(cpu);
        let per_item = elapsed / count.max(1) as u32;
        let per_action = elapsed / (count * actions / per_request).max(1) as u32;
        println!(
            "{}: {elapsed:.2?}, {per_item:.1?} per item ({:.2}x the floor's), {per_action:.1?} per action; by fifth: {}; process CPU {cpu:.2?}",
            shape.name(),
            per_item.as_secs_f64() / floor_per_item.as_secs_f64().max(1e-9),
            windows.join(", ")
        );
    }
    engine.stop().await;
    Ok(())
}
