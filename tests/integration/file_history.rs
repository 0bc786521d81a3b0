//! A file's `history:` for orders keyed under their customer
//! (`models/examples/customer_orders.yaml`): each order's own history,
//! replayed, repaired, cascaded and adopted. (A line written just before
//! its order: `tests/scenarios/orders/`.)

use shared::item::{n, s, Item, ItemExt};

use crate::items::{attrs, begins, delete, key, put};
use crate::support::{model_env, temp_model};

const OWNED: &str = include_str!("../../models/examples/customer_orders.yaml");

fn order_of(c: &str, o: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("CUST#{c}"))),
        ("SK", s(format!("ORDER#{o}"))),
        ("type", s("order")),
        ("customerId", s(c)),
        ("orderId", s(o)),
        ("status", s(status)),
    ])
}

fn line_of(c: &str, o: &str, sku: &str, qty: i64) -> Item {
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

/// The items of customer `c` whose sort keys start with `prefix`.
async fn under(rt: &jobstream::local::runtime::Runtime, c: &str, prefix: &str) -> Vec<Item> {
    begins(rt, &format!("CUST#{c}"), prefix).await
}

/// The descriptions of order `o`'s entries, in order.
async fn said(rt: &jobstream::local::runtime::Runtime, c: &str, o: &str) -> Vec<String> {
    under(rt, c, &format!("ORDER#{o}#HIST#"))
        .await
        .iter()
        .map(|e| e.s("description").unwrap_or("?").to_string())
        .collect()
}

async fn mirror(rt: &jobstream::local::runtime::Runtime, c: &str, o: &str) -> Option<i64> {
    under(rt, c, &format!("ORDER#{o}"))
        .await
        .into_iter()
        .find(|i| i.s("SK").ok() == Some(format!("ORDER#{o}").as_str()))
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

async fn assert_clean(rt: &jobstream::local::runtime::Runtime) {
    let report = rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{}", report.render());
}

/// Orders keyed under their customer (`CUST#c1` / `ORDER#o1`, lines at
/// `ORDER#o1#LINE#<sku>`, entries at `ORDER#o1#HIST#<n>`): each order's
/// history numbered on its own although `ORDER#o1` is a prefix of `o10`'s
/// keys; a line before its order, a change, a removal; the whole stream
/// delivered again (a replay) writes nothing; a lost entry found and
/// restored by verify; the order deleted: its lines and entries go, the
/// other order's stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_keyed_under_their_customer_keep_their_own_histories() {
    let mut env = model_env("customer-orders", |o| {
        o.model_file = Some(temp_model("owned-history", OWNED))
    })
    .await;
    let rt = &env.rt;
    put(rt, line_of("c1", "o1", "a", 2)).await;
    put(rt, order_of("c1", "o1", "open")).await;
    put(rt, order_of("c1", "o10", "open")).await;
    put(rt, line_of("c1", "o10", "b", 7)).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    put(rt, line_of("c1", "o1", "a", 5)).await;
    put(rt, line_of("c1", "o1", "z", 1)).await;
    put(rt, order_of("c1", "o10", "paid")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    assert_eq!(
        said(rt, "c1", "o1").await,
        ["Order o1 placed", "2 -> 5 of a", "Added line"]
    );
    assert_eq!(
        said(rt, "c1", "o10").await,
        ["Order o10 placed", "Added line", "Updated status"]
    );
    assert_eq!(mirror(rt, "c1", "o1").await, Some(3));
    assert_eq!(mirror(rt, "c1", "o10").await, Some(3));
    let last = under(rt, "c1", "ORDER#o1#HIST#000003").await;
    assert_eq!(last[0].s("customerId").unwrap(), "c1");
    assert_eq!(last[0].s("orderId").unwrap(), "o1");
    let lines = last[0]
        .get("snapshot")
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get("lines"))
        .and_then(|v| v.as_l().ok())
        .map(Vec::len);
    assert_eq!(lines, Some(2), "o1's own lines only");
    assert_clean(rt).await;

    // Everything delivered again: nothing written, nothing changes.
    let before = crate::support::table_by_key(rt).await;
    let records = crate::support::records_of(&env.engine, rt).await;
    let event: aws_lambda_events::event::dynamodb::Event =
        serde_json::from_value(serde_json::json!({ "Records": records })).expect("event");
    let resp = rt
        .stream_processor("history")
        .handle(event)
        .await
        .expect("handled");
    assert!(resp.batch_item_failures.is_empty());
    env.rt.drain().await.expect("drains");
    assert_eq!(crate::support::table_by_key(&env.rt).await, before);

    // A lost entry: found, and restored as a placeholder.
    let rt = &env.rt;
    delete(rt, key("CUST#c1", "ORDER#o1#HIST#000002")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    let report = rt.verify().await.expect("verify");
    assert_eq!(
        report.kinds["history-sequence"].missing,
        1,
        "{}",
        report.render()
    );
    jobstream::tools::verify::repair(&rt.processors, &report)
        .await
        .expect("repairs");
    assert_clean(rt).await;
    assert_eq!(said(rt, "c1", "o1").await.len(), 3);

    // o1 deleted: its lines and entries go; o10 keeps everything.
    delete(rt, key("CUST#c1", "ORDER#o1")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    let left: Vec<String> = under(rt, "c1", "ORDER#")
        .await
        .iter()
        .map(|i| i.s("SK").unwrap().to_string())
        .collect();
    assert_eq!(
        left,
        [
            "ORDER#o10",
            "ORDER#o10#HIST#000001",
            "ORDER#o10#HIST#000002",
            "ORDER#o10#HIST#000003",
            "ORDER#o10#LINE#b"
        ]
    );
    assert_clean(rt).await;
    // Re-created under the same id: a history from 1 again.
    put(rt, order_of("c1", "o1", "open")).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(said(&env.rt, "c1", "o1").await, ["Order o1 placed"]);
    assert_clean(&env.rt).await;
}

async fn backfill(rt: &jobstream::local::runtime::Runtime) -> u64 {
    let (_, totals) = crate::items::backfill(rt, &Default::default()).await;
    totals.imported.load(std::sync::atomic::Ordering::Relaxed)
}

/// Orders that existed before the stream was read are adopted once (by
/// backfill, then the stream's records of them absorbed), each on its own;
/// a second backfill imports nothing; changes after it are numbered on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_keyed_under_their_customer_are_adopted_once_each() {
    let mut env = model_env("customer-orders", |o| {
        o.model_file = Some(temp_model("owned-history", OWNED))
    })
    .await;
    let rt = &env.rt;
    put(rt, order_of("c1", "o1", "open")).await;
    put(rt, line_of("c1", "o1", "a", 2)).await;
    put(rt, order_of("c1", "o10", "open")).await;
    assert_eq!(backfill(rt).await, 2);
    env.rt.drain().await.expect("drains");
    assert_eq!(backfill(&env.rt).await, 0);
    put(&env.rt, line_of("c1", "o1", "a", 3)).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    assert_eq!(said(rt, "c1", "o1").await, ["Imported", "2 -> 3 of a"]);
    assert_eq!(said(rt, "c1", "o10").await, ["Imported"]);
    let first = under(rt, "c1", "ORDER#o1#HIST#000001").await;
    let lines = first[0]
        .get("snapshot")
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get("lines"))
        .and_then(|v| v.as_l().ok())
        .map(Vec::len);
    assert_eq!(lines, Some(1), "o1's line, not o10's items");
    assert_clean(rt).await;
}
