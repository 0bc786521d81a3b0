//! user15's #5: declaring `history:` made the processor delete the
//! application's own items. A booking moved to another guest (a delete
//! and a put in one `TransactWriteItems`, as the README advises for a
//! move) lost its payment to the history's cascade. `cascade: false` in
//! the `history:` block keeps the members: deleting (or moving) the root
//! deletes its entries only; the members stay as written, a root
//! re-created later lists them (members put before their root), and
//! `verify` finds no drift.
//!
//! Driven live (the runtime drained) and by hand (the writer ahead of the
//! fold, its records cut in two at every position and one per batch,
//! the fold first meeting the order at its creation, at its line, or at
//! its deletion), as history_cascade_later.rs drives the cascade.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::items::{assert_clean, attrs, begins, delete, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// Orders under their customer, lines under their order, `cascade: false`.
const KEEP: &str = r#"
jobstream: 1
name: keep
table: { name: keep, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  order:
    key: { PK: "CUST#${customerId}", SK: "ORDER#${orderId}" }
    attributes: { customerId: id, orderId: id, status: [placed, paid] }
  line:
    key: { PK: "CUST#${customerId}", SK: "ORDER#${orderId}#LINE#${sku}" }
    attributes: { customerId: id, orderId: id, sku: id, qty: int }
  order_entry:
    owner: processor
    key: { PK: "CUST#${customerId:id}", SK: "ORDER#${orderId:id}#HIST#${sequence}" }
history:
  root: { entity: order, created: "Order ${orderId} placed" }
  members:
    line: { list: lines, fields: [sku, qty] }
  entries: { entity: order_entry, digits: 6 }
  cascade: false
"#;

async fn keep_env() -> ModelEnv {
    let model = temp_model("keep", KEEP);
    model_env("keep", |o| o.model_file = Some(model)).await
}

fn order(c: &str, o: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("CUST#{c}"))),
        ("SK", s(format!("ORDER#{o}"))),
        ("type", s("order")),
        ("customerId", s(c)),
        ("orderId", s(o)),
        ("status", s(status)),
    ])
}

fn order_key(c: &str, o: &str) -> Item {
    key(format!("CUST#{c}"), format!("ORDER#{o}"))
}

fn line(c: &str, o: &str, sku: &str, qty: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("CUST#{c}"))),
        ("SK", s(format!("ORDER#{o}#LINE#{sku}"))),
        ("type", s("line")),
        ("customerId", s(c)),
        ("orderId", s(o)),
        ("sku", s(sku)),
        ("qty", n(qty)),
    ])
}

/// The line's quantity (`None`: the line is gone).
async fn line_qty(env: &ModelEnv, c: &str, o: &str, sku: &str) -> Option<i64> {
    get(
        env,
        key(format!("CUST#{c}"), format!("ORDER#{o}#LINE#{sku}")),
    )
    .await
    .map(|l| l.i64("qty").expect("a qty"))
}

/// Order `o`'s entries as (sequence, description, the skus its snapshot
/// lists), in order.
async fn history(env: &ModelEnv, c: &str, o: &str) -> Vec<(i64, String, Vec<String>)> {
    begins(env, &format!("CUST#{c}"), &format!("ORDER#{o}#HIST#"))
        .await
        .iter()
        .map(|e| {
            let skus = match e.get("snapshot") {
                Some(AttributeValue::M(m)) => match m.get("lines") {
                    Some(AttributeValue::L(l)) => l
                        .iter()
                        .map(|v| match v {
                            AttributeValue::M(m) => m.s("sku").unwrap_or("?").to_string(),
                            _ => "?".to_string(),
                        })
                        .collect(),
                    _ => vec!["no lines".to_string()],
                },
                _ => vec!["no snapshot".to_string()],
            };
            (
                e.opt_i64("sequence").ok().flatten().unwrap_or(-1),
                e.s("description").unwrap_or("?").to_string(),
                skus,
            )
        })
        .collect()
}

fn these(v: &[(i64, &str, &[&str])]) -> Vec<(i64, String, Vec<String>)> {
    v.iter()
        .map(|(i, d, l)| (*i, d.to_string(), l.iter().map(|x| x.to_string()).collect()))
        .collect()
}

async fn mirror(env: &ModelEnv, c: &str, o: &str) -> Option<i64> {
    get(env, order_key(c, o))
        .await
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// The order moved to customer `to`: its deletion and its put under `to`
/// in one transaction (the README's advice for a move).
async fn move_order(env: &ModelEnv, from: &str, to: &str, o: &str, status: &str) {
    let rt = &env.rt;
    let table = &rt.config.table;
    let del = Delete::builder()
        .table_name(table)
        .set_key(Some(order_key(from, o)))
        .build()
        .expect("a delete");
    let put = Put::builder()
        .table_name(table)
        .set_item(Some(order(to, o, status)))
        .build()
        .expect("a put");
    rt.dynamodb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().delete(del).build())
        .transact_items(TransactWriteItem::builder().put(put).build())
        .send()
        .await
        .expect("the move");
}

/// Live: a line survives its order's deletion and its order's move; the
/// entries go; the order re-created lists the line; verify is clean at
/// every settled moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_survives_its_orders_deletion_and_move_and_joins_its_re_creation() {
    let mut env = keep_env().await;
    put(&env, order("c1", "o1", "placed")).await;
    put(&env, line("c1", "o1", "a", 1)).await;
    put(&env, order("c1", "o2", "placed")).await;
    put(&env, line("c1", "o2", "b", 2)).await;
    put(&env, order("c1", "o3", "placed")).await;
    put(&env, line("c1", "o3", "a", 3)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        history(&env, "c1", "o1").await,
        these(&[(1, "Order o1 placed", &[]), (2, "Added line", &["a"])])
    );

    // o1 deleted; o2 moved to c2 (delete + put in one transaction); o3
    // deleted, then its line deleted and another put while it is gone.
    delete(&env, order_key("c1", "o1")).await;
    move_order(&env, "c1", "c2", "o2", "placed").await;
    delete(&env, order_key("c1", "o3")).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(line_qty(&env, "c1", "o3", "a").await, Some(3), "deleted");
    delete(
        &env,
        key("CUST#c1".to_string(), "ORDER#o3#LINE#a".to_string()),
    )
    .await;
    put(&env, line("c1", "o3", "b", 4)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(line_qty(&env, "c1", "o1", "a").await, Some(1), "deleted");
    assert_eq!(line_qty(&env, "c1", "o2", "b").await, Some(2), "moved");
    assert!(history(&env, "c1", "o1").await.is_empty(), "entries go");
    assert!(history(&env, "c1", "o2").await.is_empty(), "entries go");
    assert_eq!(
        history(&env, "c2", "o2").await,
        these(&[(1, "Order o2 placed", &[])])
    );
    assert_clean(&env).await;

    // o1 re-created: its creation lists the line, which stayed; o3's
    // lists the line put while it was gone, not the one deleted.
    put(&env, order("c1", "o1", "paid")).await;
    put(&env, order("c1", "o3", "paid")).await;
    // o2 moved back: its line is there again.
    move_order(&env, "c2", "c1", "o2", "paid").await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        history(&env, "c1", "o1").await,
        these(&[(1, "Order o1 placed", &["a"])])
    );
    assert_eq!(mirror(&env, "c1", "o1").await, Some(1));
    assert_eq!(
        history(&env, "c1", "o2").await,
        these(&[(1, "Order o2 placed", &["b"])])
    );
    assert!(history(&env, "c2", "o2").await.is_empty());
    assert_eq!(line_qty(&env, "c1", "o2", "b").await, Some(2));
    assert_eq!(
        history(&env, "c1", "o3").await,
        these(&[(1, "Order o3 placed", &["b"])])
    );
    assert_clean(&env).await;
}

/// The stream records of order `o` of customer `c` (order, lines, entries).
async fn records_of(env: &ModelEnv, c: &str, o: &str) -> Vec<Value> {
    let pk = format!("CUST#{c}");
    let prefix = format!("ORDER#{o}");
    env.records()
        .await
        .into_iter()
        .filter(|r| {
            let keys = &r["dynamodb"]["Keys"];
            keys["PK"]["S"].as_str() == Some(pk.as_str())
                && keys["SK"]["S"]
                    .as_str()
                    .is_some_and(|sk| sk == prefix || sk.starts_with(&format!("{prefix}#")))
        })
        .collect()
}

/// The cuts of `len` records: in two at every position, and one per batch.
fn cuts(len: usize) -> Vec<Vec<usize>> {
    let mut plans: Vec<Vec<usize>> = (1..len).map(|cut| vec![cut]).collect();
    plans.push((1..len).collect());
    plans
}

/// The writer ahead of the fold: order `o` put, its line put, the order
/// deleted and put again; the records from `skip` on delivered at each
/// cut (then replayed): the line is there at every moment, and once
/// drained the re-created order's one entry lists it, verify clean.
async fn line_stays_whatever_the_cuts(skip: usize) {
    let mut env = keep_env().await;
    let plans = cuts(4 - skip);
    let names: Vec<String> = (0..plans.len()).map(|i| format!("s{skip}p{i}")).collect();
    for o in &names {
        put(&env, order("c", o, "placed")).await;
        put(&env, line("c", o, "a", 1)).await;
        delete(&env, order_key("c", o)).await;
        put(&env, order("c", o, "paid")).await;
    }
    for (o, cuts) in names.iter().zip(&plans) {
        let records = records_of(&env, "c", o).await;
        assert_eq!(records.len(), 4, "{o}");
        let records = &records[skip..];
        let mut from = 0;
        for &cut in cuts.iter().chain([&records.len()]) {
            assert_eq!(deliver_history(&env, &records[from..cut]).await, 0, "{o}");
            assert_eq!(
                line_qty(&env, "c", o, "a").await,
                Some(1),
                "{o} (cuts {cuts:?}, at {cut}): the line was deleted"
            );
            from = cut;
        }
        assert_eq!(deliver_history(&env, records).await, 0, "{o} replayed");
    }
    env.rt.drain().await.expect("drains");
    for (o, cuts) in names.iter().zip(&plans) {
        assert_eq!(line_qty(&env, "c", o, "a").await, Some(1), "{o}: drained");
        assert_eq!(
            history(&env, "c", o).await,
            these(&[(1, &format!("Order {o} placed"), &["a"])]),
            "{o} (cuts {cuts:?})"
        );
        assert_eq!(mirror(&env, "c", o).await, Some(1), "{o}");
    }
    assert_clean(&env).await;
}

/// The fold meets the order at its creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_met_at_the_creation_the_line_stays_whatever_the_cuts() {
    line_stays_whatever_the_cuts(0).await;
}

/// The fold meets the order at its line (the order, re-created by then,
/// adopted; its deletion before the adoption's position).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_met_at_the_line_the_line_stays_whatever_the_cuts() {
    line_stays_whatever_the_cuts(1).await;
}

/// The fold meets the order at its deletion (the line read with the
/// partition: a candidate carried across the deletion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_met_at_the_deletion_the_line_stays_whatever_the_cuts() {
    line_stays_whatever_the_cuts(2).await;
}

/// A backfill removes what a deleted root left (an entry beside no root),
/// as its cascade would have: with `cascade: false`, the entries only; the
/// line stays, and joins its order once it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_removes_a_deleted_roots_entries_and_keeps_its_line() {
    let mut env = keep_env().await;
    put(&env, line("c", "o", "a", 1)).await;
    let mut entry = key("CUST#c".to_string(), "ORDER#o#HIST#000001".to_string());
    entry.insert("sequence".into(), n(1));
    entry.insert("description".into(), s("Order o placed"));
    put(&env, entry).await;
    let (_, totals) = crate::items::backfill(&env, &Default::default()).await;
    assert_eq!(
        totals.cascaded.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the entry"
    );
    assert!(history(&env, "c", "o").await.is_empty());
    assert_eq!(line_qty(&env, "c", "o", "a").await, Some(1), "the line");
    env.rt.drain().await.expect("drains");
    assert_clean(&env).await;
    put(&env, order("c", "o", "placed")).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        history(&env, "c", "o").await,
        these(&[(1, "Order o placed", &["a"])])
    );
    assert_clean(&env).await;
}

/// `cascade` switched from `true` to `false` on a live table while a
/// member's delete waits (the fold met the order's deletion after the
/// writer had put it again, so the line's delete waits for the
/// re-creation's record, already in the stream): the deletion was folded
/// under `cascade: true`, and its deferred delete runs as it decided,
/// whichever model is deployed when the re-creation's record comes; the
/// history and the table agree (`verify` clean). A deletion folded after
/// the switch keeps its members (the README's `history:` section says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_folded_before_cascade_is_switched_off_deletes_as_it_decided() {
    let on = temp_model("keep_on", &KEEP.replace("cascade: false", "cascade: true"));
    let env = model_env("keep", |o| o.model_file = Some(on)).await;
    for o in ["o", "p"] {
        put(&env, order("c", o, "placed")).await;
        put(&env, line("c", o, "a", 1)).await;
        delete(&env, order_key("c", o)).await;
        put(&env, order("c", o, "paid")).await;
    }
    let records = records_of(&env, "c", "o").await;
    assert_eq!(records.len(), 4);
    assert_eq!(deliver_history(&env, &records[..3]).await, 0);
    assert_eq!(
        line_qty(&env, "c", "o", "a").await,
        Some(1),
        "the line's delete waits for the records to come"
    );
    let off = temp_model("keep_off", KEEP);
    let mut env = crate::support::redeploy_model(env, "keep", |o| o.model_file = Some(off)).await;
    assert_eq!(deliver_history(&env, &records[3..]).await, 0);
    assert_eq!(
        line_qty(&env, "c", "o", "a").await,
        None,
        "the deletion folded under `cascade: true` deletes the line"
    );
    env.rt.drain().await.expect("drains");
    assert_eq!(
        history(&env, "c", "o").await,
        these(&[(1, "Order o placed", &[])]),
        "the re-created order lists no line"
    );
    // Order p's deletion is folded after the switch: its line stays and
    // the re-created order lists it.
    assert_eq!(line_qty(&env, "c", "p", "a").await, Some(1));
    assert_eq!(
        history(&env, "c", "p").await,
        these(&[(1, "Order p placed", &["a"])])
    );
    assert_clean(&env).await;
}
