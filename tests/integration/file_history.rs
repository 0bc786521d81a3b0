//! A file's `history:` for orders keyed under their customer
//! (`models/examples/customer_orders.yaml`): each order's own history,
//! replayed, repaired, cascaded and adopted. (A line written just before
//! its order: `tests/scenarios/orders/`.)

use shared::item::{n, s, Item, ItemExt};

use crate::items::{assert_clean, attrs, begins, delete, key, put};
use crate::support::{model_env, shipped};

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

/// Orders keyed under their customer (`CUST#c1` / `ORDER#o1`, entries at
/// `ORDER#o1#HIST#<n>`, `ORDER#o1` a prefix of `o10`'s keys): the whole
/// stream delivered again (a replay) writes nothing and changes nothing; a
/// lost entry is found by verify and restored as a placeholder. (Their
/// histories themselves: `tests/scenarios/customer_orders/`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_orders_keyed_under_their_customer_writes_nothing_and_a_lost_entry_is_restored()
{
    let file = shipped("examples/customer_orders.yaml");
    let mut env = model_env("customer-orders", |o| o.model_file = Some(file)).await;
    let rt = &env.rt;
    // An empty table: verify lists every kind it checks, none checked
    // (user5's E1, user6's G3: kinds without findings were left out).
    let report = rt.verify().await.expect("verify");
    for kind in [
        "history-sequence",
        "history-chain",
        "history-snapshot",
        "orphans",
    ] {
        let checked = report.kinds.get(kind).map(|k| k.checked);
        assert_eq!(checked, Some(0), "{kind}\n{}", report.render());
    }
    put(rt, line_of("c1", "o1", "a", 2)).await;
    put(rt, order_of("c1", "o1", "open")).await;
    put(rt, order_of("c1", "o10", "open")).await;
    put(rt, line_of("c1", "o10", "b", 7)).await;
    env.rt.drain().await.expect("drains");
    put(&env.rt, line_of("c1", "o1", "a", 5)).await;
    put(&env.rt, line_of("c1", "o1", "z", 1)).await;
    put(&env.rt, order_of("c1", "o10", "paid")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    assert_eq!(said(rt, "c1", "o1").await.len(), 3);
    assert_eq!(said(rt, "c1", "o10").await.len(), 3);
    assert_clean(rt).await;

    // Everything delivered again (to every stream processor): nothing
    // written, nothing changes.
    let before = crate::recorded::scan(rt).await;
    crate::recorded::redelivered(&env.engine, &mut env.rt, &before).await;

    // A lost entry: found, and restored as a placeholder.
    delete(&env.rt, key("CUST#c1", "ORDER#o1#HIST#000002")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    let report = rt.verify().await.expect("verify");
    let missing = report.kinds["history-sequence"].missing;
    assert_eq!(missing, 1, "{}", report.render());
    // Both orders checked, one found wrong (checked was the findings' count).
    let checked = report.kinds["history-sequence"].checked;
    assert_eq!(checked, 2, "{}", report.render());
    crate::items::repair(&rt, &report).await;
    assert_clean(rt).await;
    assert_eq!(said(rt, "c1", "o1").await.len(), 3);
}

/// How many lines order `o`'s first entry's snapshot holds.
async fn first_entrys_lines(
    rt: &jobstream::local::runtime::Runtime,
    c: &str,
    o: &str,
) -> Option<usize> {
    let first = under(rt, c, &format!("ORDER#{o}#HIST#000001")).await;
    first[0]
        .get("snapshot")
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get("lines"))
        .and_then(|v| v.as_l().ok())
        .map(Vec::len)
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
    let file = shipped("examples/customer_orders.yaml");
    let mut env = model_env("customer-orders", |o| o.model_file = Some(file)).await;
    let rt = &env.rt;
    put(rt, order_of("c1", "o1", "open")).await;
    put(rt, line_of("c1", "o1", "a", 2)).await;
    put(rt, order_of("c1", "o10", "open")).await;
    // They predate the stream: the consumer reads from here on (a
    // creation it reads starts the history there instead).
    let deployed = env.records().await.len();
    assert_eq!(backfill(&env.rt).await, 2);
    let records = env.records().await;
    crate::history_recreate::deliver_history(&env, &records[deployed..]).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(backfill(&env.rt).await, 0);
    put(&env.rt, line_of("c1", "o1", "a", 3)).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    assert_eq!(said(rt, "c1", "o1").await, ["Imported", "2 -> 3 of a"]);
    assert_eq!(said(rt, "c1", "o10").await, ["Imported"]);
    let lines = first_entrys_lines(rt, "c1", "o1").await;
    assert_eq!(lines, Some(1), "o1's line, not o10's items");
    assert_clean(rt).await;
}

/// A line written before its order (a normal write order) waits for it
/// through a backfill too, as on the live path and in `verify`: the
/// backfill deletes nothing (user6's U01: it removed the line as a leftover
/// of a deleted order while the line's counts stayed), and the order, once
/// written, takes the line in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_written_before_its_order_survives_a_backfill_and_joins_the_order() {
    let file = shipped("examples/customer_orders.yaml");
    let mut env = model_env("customer-orders", |o| o.model_file = Some(file)).await;
    put(&env.rt, line_of("c1", "o1", "a", 2)).await;
    let (_, totals) = crate::items::backfill(&env.rt, &Default::default()).await;
    assert_eq!(
        totals.cascaded.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert_eq!(
        under(&env.rt, "c1", "ORDER#o1#LINE#").await.len(),
        1,
        "kept"
    );
    env.rt.drain().await.expect("drains");
    assert_clean(&env.rt).await;
    put(&env.rt, order_of("c1", "o1", "open")).await;
    env.rt.drain().await.expect("drains");
    let rt = &env.rt;
    let lines = first_entrys_lines(rt, "c1", "o1").await;
    assert_eq!(lines, Some(1), "the order's first entry holds its line");
    assert_clean(rt).await;
}
