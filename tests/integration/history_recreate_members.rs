//! user8's W01: an order (a history's root) deleted and re-created twice,
//! its line deleted and put again each time. The cascade of an earlier
//! incarnation, folded after the writer re-put the line with the very
//! content that incarnation had, must not delete it: the line the
//! application wrote last stays, and the history never invents a
//! "Removed" entry for it. Whatever the batches' cuts, however far the
//! fold lags, and across a kill between the cascade and its commit.
//!
//! Batches are delivered by hand, as Lambda delivers them (a batch that
//! reports a failed record is delivered again from that record on).

use jobstream::faults::{Fault, FaultProxy};
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::items::{assert_clean, attrs, begins, delete, get, key, put};
use crate::support::{model_env, model_env_behind_proxy, temp_model, ModelEnv};

/// The user's model (recreate_twice.yaml): an order and its lines (a
/// line's `note` is not in its snapshot: history_cascade_paths.rs).
pub(crate) const RECREATE: &str = r#"
jobstream: 1
name: recreate
table: { name: recreate, pk: PK, sk: SK }
entities:
  order:
    key: { PK: "ORDER#${orderId}", SK: "ORDER" }
    attributes: { orderId: string, status: [placed, paid] }
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${lineNo}" }
    attributes: { orderId: string, lineNo: int, quantity: int, note: string? }
  order_entry:
    owner: processor
    key: { PK: "ORDER#${orderId}", SK: "HIST#${sequence}" }
history:
  root: { entity: order }
  members:
    line: { list: lines, fields: [lineNo, quantity] }
  entries: { entity: order_entry }
"#;

pub(crate) fn order(o: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{o}"))),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s(o)),
        ("status", s(status)),
    ])
}

pub(crate) fn line(o: &str, quantity: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{o}"))),
        ("SK", s("LINE#1")),
        ("type", s("line")),
        ("orderId", s(o)),
        ("lineNo", n(1)),
        ("quantity", n(quantity)),
    ])
}

/// The user's writes: the order and its line, then `times` times: the
/// order deleted, its line deleted, the order put again, its line put
/// again (quantity 2 each time).
async fn write_recreated(env: &ModelEnv, o: &str, times: usize) {
    put(env, order(o, "placed")).await;
    put(env, line(o, 1)).await;
    for _ in 0..times {
        delete(env, key(format!("ORDER#{o}"), "ORDER")).await;
        delete(env, key(format!("ORDER#{o}"), "LINE#1")).await;
        put(env, order(o, "paid")).await;
        put(env, line(o, 2)).await;
    }
}

/// The stream records of order `o`'s partition, in order.
pub(crate) async fn records_of(env: &ModelEnv, o: &str) -> Vec<Value> {
    let pk = format!("ORDER#{o}");
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["PK"]["S"].as_str() == Some(pk.as_str()))
        .collect()
}

/// The line's quantity (`None`: the line is gone).
pub(crate) async fn line_quantity(env: &ModelEnv, o: &str) -> Option<i64> {
    get(env, key(format!("ORDER#{o}"), "LINE#1"))
        .await
        .map(|l| l.i64("quantity").expect("a quantity"))
}

/// [`RECREATE`]'s environment.
pub(crate) async fn recreate_env() -> ModelEnv {
    let model = temp_model("recreate", RECREATE);
    model_env("recreate", |o| o.model_file = Some(model)).await
}

/// [`recreate_env`] behind a fault proxy.
pub(crate) async fn recreate_env_behind_proxy() -> (ModelEnv, FaultProxy) {
    let model = temp_model("recreate", RECREATE);
    model_env_behind_proxy("recreate", |o| o.model_file = Some(model)).await
}

/// Each of a batch's first four transactions throttled, or its answer
/// lost after it took effect (a consumer killed between the cascade and
/// its commit).
pub(crate) fn transaction_faults() -> Vec<Fault> {
    let mut faults = Vec::new();
    for after in 0..4 {
        faults.push(Fault::throttle("TransactWriteItems", 1).after(after));
        faults.push(
            Fault::server_error("TransactWriteItems", 1)
                .after(after)
                .after_effect(),
        );
    }
    faults
}

/// The order's entries' descriptions, in order.
pub(crate) async fn entries(env: &ModelEnv, o: &str) -> Vec<String> {
    begins(env, &format!("ORDER#{o}"), "HIST#")
        .await
        .iter()
        .map(|e| e.s("description").unwrap_or("?").to_string())
        .collect()
}

/// What the last incarnation must show: its line (quantity 2), its two
/// entries, no invented removal.
pub(crate) async fn assert_last_incarnation(env: &ModelEnv, o: &str, how: &str) {
    assert_eq!(
        line_quantity(env, o).await,
        Some(2),
        "{o} ({how}): the line the application put last was deleted"
    );
    assert_eq!(
        entries(env, o).await,
        ["Created order", "Added line"],
        "{o} ({how})"
    );
}

/// The scenario's ten writes folded in one batch (the demo's case).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_its_order_was_re_created_twice_stays_when_folded_in_one_batch() {
    let mut env = recreate_env().await;
    write_recreated(&env, "o1", 2).await;
    let records = records_of(&env, "o1").await;
    assert_eq!(records.len(), 10, "{records:#?}");
    assert_eq!(deliver_history(&env, &records).await, 0);
    assert_last_incarnation(&env, "o1", "one batch").await;
    // A replay from the start moves nothing.
    assert_eq!(deliver_history(&env, &records).await, 0);
    assert_last_incarnation(&env, "o1", "replayed").await;
    env.rt.drain().await.expect("drains");
    assert_last_incarnation(&env, "o1", "drained").await;
    assert_clean(&env).await;
}

/// The same writes re-created two and three times, the fold lagging
/// behind them all, delivered cut in two at every position (the
/// deletion's cascade folded in one batch, what the writer did next in a
/// later one) and one record per batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_its_order_was_re_created_stays_whatever_the_cuts() {
    let mut env = recreate_env().await;
    let mut plans = Vec::new();
    for times in [2usize, 3] {
        let len = 2 + 4 * times;
        for cut in 1..len {
            plans.push((format!("t{times}c{cut}"), times, vec![cut]));
        }
        plans.push((format!("t{times}each"), times, (1..len).collect()));
    }
    for (o, times, _) in &plans {
        write_recreated(&env, o, *times).await;
    }
    for (o, times, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 2 + 4 * times, "{o}");
        let mut from = 0;
        for &cut in cuts.iter().chain([&records.len()]) {
            assert_eq!(deliver_history(&env, &records[from..cut]).await, 0, "{o}");
            from = cut;
        }
        assert_last_incarnation(&env, o, &format!("cuts {cuts:?}")).await;
        // A replay from the start moves nothing.
        assert_eq!(deliver_history(&env, &records).await, 0, "{o}");
        assert_last_incarnation(&env, o, "replayed").await;
    }
    env.rt.drain().await.expect("drains");
    for (o, _, cuts) in &plans {
        assert_last_incarnation(&env, o, &format!("drained, cuts {cuts:?}")).await;
    }
    assert_clean(&env).await;
}

/// The deletions' records reach the fold only after the writer re-put
/// the line (the fold far behind), and a fault hits each batch folding
/// them (its transaction throttled, or its answer lost after it took
/// effect: a consumer killed between the cascade and its commit); the
/// batch delivered again from the failed record keeps the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_its_order_was_re_created_stays_whatever_fails_while_folding_the_deletion()
{
    let (mut env, proxy) = recreate_env_behind_proxy().await;
    let faults = transaction_faults();
    let orders: Vec<String> = (0..faults.len()).map(|i| format!("f{i}")).collect();
    for o in &orders {
        write_recreated(&env, o, 2).await;
    }
    let mut failed = 0;
    for (o, fault) in orders.iter().zip(faults) {
        let records = records_of(&env, o).await;
        // The first incarnation folded; then the rest under the fault, in
        // two batches: the first ends with the second deletion (whose
        // cascade waits: the order is back), the second holds what the
        // writer did next.
        assert_eq!(deliver_history(&env, &records[..2]).await, 0);
        for part in [&records[2..7], &records[7..]] {
            proxy.clear();
            proxy.inject(fault.clone());
            failed += deliver_history(&env, part).await;
            proxy.clear();
        }
        assert_last_incarnation(&env, o, &format!("{fault:?}")).await;
    }
    assert!(failed >= 2, "the faults failed {failed} deliveries");
    env.rt.drain().await.expect("drains");
    for o in &orders {
        assert_last_incarnation(&env, o, "drained").await;
    }
    assert_clean(&env).await;
}

/// The writer deletes the order alone (its line is the cascade's to
/// delete) and re-creates it without the line; the fold, behind, folds
/// the deletion in a batch that ends there, finds the order back, and
/// keeps the line's delete waiting: at the re-creation the line, still as
/// the deleted order had it, goes (nothing of the old order is left), and
/// the new history starts over without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_the_writer_left_goes_at_the_re_creation_when_the_cascade_waited() {
    let mut env = recreate_env().await;
    put(&env, order("o1", "placed")).await;
    put(&env, line("o1", 1)).await;
    delete(&env, key("ORDER#o1", "ORDER")).await;
    put(&env, order("o1", "paid")).await;
    let records = records_of(&env, "o1").await;
    assert_eq!(records.len(), 4, "{records:#?}");
    assert_eq!(deliver_history(&env, &records[..3]).await, 0);
    assert_eq!(
        line_quantity(&env, "o1").await,
        Some(1),
        "deleted while the order is back and its re-creation not folded"
    );
    assert_eq!(deliver_history(&env, &records[3..]).await, 0);
    assert_eq!(
        line_quantity(&env, "o1").await,
        None,
        "the old line is left"
    );
    assert_eq!(entries(&env, "o1").await, ["Created order"]);
    // A replay from the start moves nothing.
    assert_eq!(deliver_history(&env, &records).await, 0);
    assert_eq!(line_quantity(&env, "o1").await, None);
    assert_eq!(entries(&env, "o1").await, ["Created order"]);
    env.rt.drain().await.expect("drains");
    assert_eq!(entries(&env, "o1").await, ["Created order"]);
    assert_clean(&env).await;
}
