//! user10's finding 2: an order's lines written before the order. The fold
//! meets a line's record first; when the order is already in the table by
//! then (the writer ahead of the consumer), it is adopted (`Imported`),
//! and the order's INSERT, reached before the adoption's position, drops
//! that adoption: the history starts at the creation. Entry 1 ("Order
//! placed by ...") must list every line put before the order (what the
//! fold learned of them from their records, and what the adoption read of
//! lines whose records it never sees), at its first write and for good;
//! a line put after the order is entry 2's "Added line". Whatever the
//! batch cuts: lines and order in one batch, in separate batches, the
//! adoption's record with the order or after it.
//!
//! Batches are delivered by hand, as Lambda delivers them.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::items::{assert_clean, attrs, begins, get, key, put};
use crate::support::{model_env, run_in_background, temp_model, ModelEnv};

/// user10's marketplace cut to its history: an order and its lines in the
/// order's partition.
const MARKET: &str = r#"
jobstream: 1
name: market
table: { name: market, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  order:
    key: { PK: "ORDER#${orderId}", SK: "ORDER" }
    attributes: { orderId: id, customerId: id, status: [placed, paid, shipped] }
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${lineNo}" }
    attributes: { orderId: id, lineNo: int, qty: int }
  order_entry:
    owner: processor
    key: { PK: "ORDER#${orderId}", SK: "HIST#${sequence}" }
history:
  root:
    entity: order
    created: "Order placed by ${customerId}"
    updated:
      - { when: "old.status != new.status", say: "Status ${old.status} -> ${new.status}" }
  members:
    line: { list: lines, fields: [lineNo, qty], order: [lineNo], added: "Added line ${lineNo}" }
  entries: { entity: order_entry, digits: 6 }
"#;

async fn market() -> ModelEnv {
    let model = temp_model("market", MARKET);
    model_env("market", |o| o.model_file = Some(model)).await
}

fn order(o: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{o}"))),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s(o)),
        ("customerId", s("cy")),
        ("status", s("placed")),
    ])
}

fn line(o: &str, no: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{o}"))),
        ("SK", s(format!("LINE#{no}"))),
        ("type", s("line")),
        ("orderId", s(o)),
        ("lineNo", n(no)),
        ("qty", n(no)),
    ])
}

/// Order `o`'s entries as (sequence, description, the line numbers its
/// snapshot lists), in order.
async fn history(env: &ModelEnv, o: &str) -> Vec<(i64, String, Vec<i64>)> {
    begins(env, &format!("ORDER#{o}"), "HIST#")
        .await
        .iter()
        .map(|e| {
            let lines = match e.get("snapshot") {
                Some(AttributeValue::M(m)) => match m.get("lines") {
                    Some(AttributeValue::L(l)) => l
                        .iter()
                        .map(|v| match v {
                            AttributeValue::M(m) => m.i64("lineNo").unwrap_or(-1),
                            _ => -1,
                        })
                        .collect(),
                    _ => vec![-1],
                },
                _ => vec![-1],
            };
            (
                e.opt_i64("sequence").ok().flatten().unwrap_or(-1),
                e.s("description").unwrap_or("?").to_string(),
                lines,
            )
        })
        .collect()
}

fn these(v: &[(i64, &str, &[i64])]) -> Vec<(i64, String, Vec<i64>)> {
    v.iter()
        .map(|(i, d, l)| (*i, d.to_string(), l.to_vec()))
        .collect()
}

async fn mirror(env: &ModelEnv, o: &str) -> Option<i64> {
    get(env, key(format!("ORDER#{o}"), "ORDER"))
        .await
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// The stream records of order `o`'s partition (order, lines, entries).
async fn records_of(env: &ModelEnv, o: &str) -> Vec<Value> {
    let pk = format!("ORDER#{o}");
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["PK"]["S"].as_str() == Some(pk.as_str()))
        .collect()
}

/// Whatever the fold shows of `o` at any moment: once entry 1 is the
/// creation, it lists `lines` (lines put before the order whose records
/// the fold read before it), maybe more.
async fn assert_creation_shows(env: &ModelEnv, o: &str, lines: &[i64]) {
    let h = history(env, o).await;
    if let Some((1, d, l)) = h.first() {
        if d.starts_with("Order placed") {
            assert!(
                lines.iter().all(|no| l.contains(no)),
                "{o}: entry 1 does not list the lines put before the order: {h:?}"
            );
        }
    }
}

/// Delivers `o`'s records from `from` on (the processor's own writes
/// included) in batches `cut` records long, checking entry 1 after each,
/// until the stream holds nothing new.
async fn settle(env: &ModelEnv, o: &str, mut from: usize, cut: usize, lines: &[i64]) {
    loop {
        let records = records_of(env, o).await;
        if from >= records.len() {
            return;
        }
        let to = records.len().min(from + cut);
        assert_eq!(deliver_history(env, &records[from..to]).await, 0);
        assert_creation_shows(env, o, lines).await;
        from = to;
    }
}

/// Five lines, then the order, all written before the consumer reads any
/// of them; the records delivered in the batches `cuts` gives (their
/// lengths, then the rest one batch at a time).
async fn five_lines_then_the_order(env: &ModelEnv, o: &str, cuts: &[usize]) {
    for no in 1..=5 {
        put(env, line(o, no)).await;
    }
    put(env, order(o)).await;
    let mut from = 0;
    for &cut in cuts {
        let records = records_of(env, o).await;
        assert_eq!(deliver_history(env, &records[from..from + cut]).await, 0);
        assert_creation_shows(env, o, &[1, 2, 3, 4, 5]).await;
        from += cut;
    }
    settle(env, o, from, 100, &[1, 2, 3, 4, 5]).await;
    assert_eq!(
        history(env, o).await,
        these(&[(1, "Order placed by cy", &[1, 2, 3, 4, 5])]),
        "{o}"
    );
    assert_eq!(mirror(env, o).await, Some(1), "{o}");
}

/// FINDINGS 2: the lines in one batch (the order already written: the
/// fold adopts it, `Imported`), the order's INSERT in the next, alone or
/// with the adoption's record; or the lines cut in two batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_before_their_order_show_in_its_creation_whatever_the_cuts() {
    let env = market().await;
    // The lines; then the order alone; then the adoption's record.
    five_lines_then_the_order(&env, "a", &[5, 1, 1]).await;
    // The lines; then the order with the fold's own writes.
    five_lines_then_the_order(&env, "b", &[5]).await;
    // Three lines; two lines and the order; then the rest.
    five_lines_then_the_order(&env, "c", &[3, 3]).await;
    // One record per batch.
    five_lines_then_the_order(&env, "d", &[1, 1, 1, 1, 1, 1, 1, 1]).await;
    // Lines and order in one batch (the creation is ahead in the batch:
    // nothing adopted).
    five_lines_then_the_order(&env, "e", &[6]).await;
    let mut env = env;
    env.rt.drain().await.expect("drains");
    for o in ["a", "b", "c", "d", "e"] {
        assert_eq!(
            history(&env, o).await,
            these(&[(1, "Order placed by cy", &[1, 2, 3, 4, 5])]),
            "{o}"
        );
    }
    assert_clean(&env).await;
}

/// The lines' batch folded before the order is written (nothing to adopt:
/// no root yet), then the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_folded_before_their_order_is_written_show_in_its_creation() {
    let env = market().await;
    for no in 1..=5 {
        put(&env, line("o", no)).await;
    }
    let records = records_of(&env, "o").await;
    assert_eq!(deliver_history(&env, &records).await, 0);
    assert!(history(&env, "o").await.is_empty());
    put(&env, order("o")).await;
    settle(&env, "o", 5, 100, &[1, 2, 3, 4, 5]).await;
    assert_eq!(
        history(&env, "o").await,
        these(&[(1, "Order placed by cy", &[1, 2, 3, 4, 5])])
    );
    assert_clean(&env).await;
}

/// A line put after the order (before the consumer read anything) is
/// entry 2's addition, not part of the creation; and a line whose record
/// the consumer never reads (put before the stream: its record is left
/// out of every delivery) shows from the creation on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_after_the_order_is_added_and_one_before_the_stream_is_there_from_the_start() {
    let env = market().await;
    put(&env, line("o", 9)).await;
    for no in 1..=3 {
        put(&env, line("o", no)).await;
    }
    put(&env, order("o")).await;
    put(&env, line("o", 4)).await;
    let records = records_of(&env, "o").await;
    assert_eq!(records.len(), 6);
    // Line 9 predates the stream: its record is never delivered.
    assert_eq!(deliver_history(&env, &records[1..4]).await, 0);
    assert_eq!(deliver_history(&env, &records[4..5]).await, 0);
    settle(&env, "o", 5, 1, &[1, 2, 3]).await;
    assert_eq!(
        history(&env, "o").await,
        these(&[
            (1, "Order placed by cy", &[1, 2, 3, 9]),
            (2, "Added line 4", &[1, 2, 3, 4, 9]),
        ])
    );
    assert_eq!(mirror(&env, "o").await, Some(2));
    assert_clean(&env).await;
}

/// A backfill on the live table adopts the order before the consumer read
/// anything; the lines' records come first, then the order's INSERT: the
/// creation lists the lines (what the fold folded before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_ahead_of_lines_put_before_their_order_keeps_them_in_its_creation() {
    let env = market().await;
    for no in 1..=3 {
        put(&env, line("o", no)).await;
    }
    put(&env, order("o")).await;
    let opts = jobstream::tools::backfill::ScanOptions::default();
    crate::items::backfill(&env, &opts).await;
    assert_eq!(
        history(&env, "o").await,
        these(&[(1, "Imported", &[1, 2, 3])])
    );
    assert_eq!(
        deliver_history(&env, &records_of(&env, "o").await[..3]).await,
        0
    );
    settle(&env, "o", 3, 1, &[1, 2, 3]).await;
    assert_eq!(
        history(&env, "o").await,
        these(&[(1, "Order placed by cy", &[1, 2, 3])])
    );
    assert_eq!(mirror(&env, "o").await, Some(1));
    assert_clean(&env).await;
}

/// A line changed after the order was put (both before the consumer read
/// anything): the creation shows the line as it was then, the change is
/// the next entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_changed_after_the_order_shows_its_old_value_in_the_creation() {
    let env = market().await;
    for no in 1..=3 {
        put(&env, line("o", no)).await;
    }
    put(&env, order("o")).await;
    let mut changed = line("o", 2);
    changed.insert("qty".into(), n(7));
    put(&env, changed).await;
    let records = records_of(&env, "o").await;
    assert_eq!(deliver_history(&env, &records[..3]).await, 0);
    settle(&env, "o", 3, 1, &[1, 2, 3]).await;
    let qty_of_line_2 = |e: &Item| -> i64 {
        let Some(AttributeValue::M(snap)) = e.get("snapshot") else {
            return -1;
        };
        let Some(AttributeValue::L(lines)) = snap.get("lines") else {
            return -1;
        };
        lines
            .iter()
            .filter_map(|v| match v {
                AttributeValue::M(m) if m.i64("lineNo").ok() == Some(2) => m.i64("qty").ok(),
                _ => None,
            })
            .next()
            .unwrap_or(-1)
    };
    let entries = begins(&env, "ORDER#o", "HIST#").await;
    let said: Vec<(String, i64)> = entries
        .iter()
        .map(|e| {
            (
                e.s("description").unwrap_or("?").to_string(),
                qty_of_line_2(e),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("Order placed by cy".to_string(), 2),
            ("Updated line".to_string(), 7)
        ]
    );
    assert_clean(&env).await;
}

/// user10's load: three writers, each putting five lines and then their
/// order, while the processors run. Every creation lists its five lines,
/// no `Imported` stays, and verify is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_writers_putting_lines_before_their_orders() {
    let ModelEnv { engine, rt } = market().await;
    let client = rt.dynamodb.clone();
    let table = rt.config.table.clone();
    let runner = run_in_background(rt);
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (client, table) = (client.clone(), table.clone());
            tokio::spawn(async move {
                for i in (w..30).step_by(3) {
                    let o = format!("w{i}");
                    let items = (1..=5).map(|no| line(&o, no)).chain([order(&o)]);
                    for item in items {
                        client
                            .put_item()
                            .table_name(&table)
                            .set_item(Some(item))
                            .send()
                            .await
                            .expect("put");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.expect("writes");
    }
    let mut rt = runner.stop().await;
    rt.drain().await.expect("drains");
    let env = ModelEnv { engine, rt };
    for i in 0..30 {
        let o = format!("w{i}");
        assert_eq!(
            history(&env, &o).await,
            these(&[(1, "Order placed by cy", &[1, 2, 3, 4, 5])]),
            "{o}"
        );
    }
    assert_clean(&env).await;
}
