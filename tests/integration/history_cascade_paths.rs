//! The cascade's other ways in (W01's follow-ups): every path that deletes
//! a history's members because its root went leaves alone a member the
//! application wrote after the root came back, and the comparison that
//! lets a member's delete through covers the whole item the application
//! wrote, not only the fields its snapshot shows.
//!
//! Driven as W01's tests are (history_recreate_members.rs): the writer
//! far ahead of the fold, its records delivered in one batch, cut in two
//! at every position, and one per batch; a replay from the start and a
//! drain move nothing, and `verify` ends clean.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use shared::item::{s, Item};

use crate::history_recreate::deliver_history;
use crate::history_recreate_members::{
    assert_last_incarnation, entries, line, order, records_of, recreate_env,
    recreate_env_behind_proxy, transaction_faults,
};
use crate::items::{assert_clean, delete, get, key, put};
use crate::support::ModelEnv;

/// The cuts of `len` records: in two at every position, and one per batch.
fn cuts(len: usize) -> Vec<(String, Vec<usize>)> {
    let mut plans: Vec<(String, Vec<usize>)> =
        (1..len).map(|cut| (format!("c{cut}"), vec![cut])).collect();
    plans.push(("each".into(), (1..len).collect()));
    plans
}

/// Delivers `records` to the history processor in the batches `cuts`
/// makes of them (each delivered again from a failed record, as Lambda
/// does); none may be left failing.
async fn deliver_cut(env: &ModelEnv, records: &[Value], cuts: &[usize], what: &str) {
    let mut from = 0;
    for &cut in cuts.iter().chain([&records.len()]) {
        deliver_history(env, &records[from..cut]).await;
        from = cut;
    }
    // A replay from the start moves nothing (checked by the caller).
    assert_eq!(deliver_history(env, records).await, 0, "{what}");
}

/// The line of order `o` (`None`: gone).
async fn the_line(env: &ModelEnv, o: &str) -> Option<Item> {
    get(env, key(format!("ORDER#{o}"), "LINE#1")).await
}

/// Order `o` and its line before the stream is read (their two records
/// are never delivered), then: the order changes, goes with its line, and
/// both come back, the line as it was. Seven records.
async fn write_adopted_and_recreated(env: &ModelEnv, o: &str) {
    put(env, order(o, "placed")).await;
    put(env, line(o, 2)).await;
    put(env, order(o, "paid")).await;
    delete(env, key(format!("ORDER#{o}"), "ORDER")).await;
    delete(env, key(format!("ORDER#{o}"), "LINE#1")).await;
    put(env, order(o, "paid")).await;
    put(env, line(o, 2)).await;
    assert_eq!(records_of(env, o).await.len(), 7, "{o}");
}

/// A deletion of the root folded before the adoption's position (the
/// order and its line predate the stream; the first record the fold
/// meets is a change of the order, so it adopts the order as the table
/// holds it then: already re-created, its line put back as it was). The
/// deletion's cascade, when the batch that folds it ends before the
/// writer's next records, must not delete the line the application put
/// after re-creating the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_an_adopted_order_came_back_stays_whatever_the_cuts() {
    let mut env = recreate_env().await;
    let plans = cuts(5);
    for (o, _) in &plans {
        write_adopted_and_recreated(&env, o).await;
    }
    for (o, cut) in &plans {
        let records = records_of(&env, o).await;
        deliver_cut(&env, &records[2..], cut, o).await;
        assert_last_incarnation(&env, o, "cut").await;
    }
    env.rt.drain().await.expect("drains");
    for (o, _) in &plans {
        assert_last_incarnation(&env, o, "drained").await;
    }
    assert_clean(&env).await;
}

/// The adopted order's deletion folded under faults: each batch (the
/// adoption and the deletion, whose cascade finds the order back and
/// waits; then what the writer did next) has its transactions throttled
/// or their answers lost after they took effect (a consumer killed
/// between the cascade and its commit), and is delivered again from the
/// failed record: the line put last stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_an_adopted_order_came_back_stays_whatever_fails() {
    let (mut env, proxy) = recreate_env_behind_proxy().await;
    let faults = transaction_faults();
    let orders: Vec<String> = (0..faults.len()).map(|i| format!("f{i}")).collect();
    for o in &orders {
        write_adopted_and_recreated(&env, o).await;
    }
    let mut failed = 0;
    for (o, fault) in orders.iter().zip(faults) {
        let records = records_of(&env, o).await;
        for part in [&records[2..4], &records[4..]] {
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

/// Attributes of a line besides its snapshot's fields.
type Extra = Vec<(&'static str, AttributeValue)>;

/// `line` with `extra` attributes besides its snapshot's fields.
fn line_with(o: &str, extra: &[(&str, AttributeValue)]) -> Item {
    let mut l = line(o, 2);
    for (k, v) in extra {
        l.insert(k.to_string(), v.clone());
    }
    l
}

/// What the application wrote of a line besides its snapshot's fields
/// (`lineNo`, `quantity`), first and after re-creating its order: a
/// declared `note` changed, added, dropped; an undeclared attribute
/// changed.
fn variants() -> Vec<(&'static str, Extra, Extra)> {
    vec![
        ("n", vec![("note", s("gift"))], vec![("note", s("urgent"))]),
        ("a", vec![], vec![("note", s("urgent"))]),
        ("d", vec![("note", s("gift"))], vec![]),
        (
            "u",
            vec![("updatedAt", s("t1"))],
            vec![("updatedAt", s("t2"))],
        ),
    ]
}

/// The writer deletes the order alone (its line is the cascade's to
/// delete), re-creates it, then deletes the line and puts it again with
/// the same quantity but other data. A fold far behind folds the deletion
/// in a batch that ends at the re-creation, or waits with the line's
/// delete and settles it at the re-creation in a batch of its own: the
/// line it compares must be the whole item, so the application's new line
/// stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_again_with_other_data_after_its_order_came_back_stays_whatever_the_cuts() {
    let mut env = recreate_env().await;
    let mut plans = Vec::new();
    for (v, first, last) in variants() {
        for (cut, cuts) in cuts(6) {
            plans.push((format!("{v}{cut}"), first.clone(), last.clone(), cuts));
        }
    }
    for (o, first, last, _) in &plans {
        put(&env, order(o, "placed")).await;
        put(&env, line_with(o, first)).await;
        delete(&env, key(format!("ORDER#{o}"), "ORDER")).await;
        put(&env, order(o, "paid")).await;
        delete(&env, key(format!("ORDER#{o}"), "LINE#1")).await;
        put(&env, line_with(o, last)).await;
    }
    for (o, _, last, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 6, "{o}");
        deliver_cut(&env, &records, cuts, o).await;
        assert_eq!(
            the_line(&env, o).await,
            Some(line_with(o, last)),
            "{o}: the line the application put last was deleted"
        );
        assert_eq!(
            entries(&env, o).await,
            ["Created order", "Added line"],
            "{o}"
        );
    }
    env.rt.drain().await.expect("drains");
    for (o, _, last, _) in &plans {
        assert_eq!(
            the_line(&env, o).await,
            Some(line_with(o, last)),
            "{o}: drained"
        );
    }
    assert_clean(&env).await;
}

/// The other side of the whole-item comparison: a line the writer left
/// when it deleted the order alone, whose data besides its fields it
/// changed before (an update that writes no entry), is still the deleted
/// order's and goes; the re-created order's history starts without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_left_with_the_deleted_order_goes_after_a_change_of_its_other_data() {
    let mut env = recreate_env().await;
    let plans = cuts(5);
    for (o, _) in &plans {
        put(&env, order(o, "placed")).await;
        put(&env, line_with(o, &[("note", s("gift"))])).await;
        put(
            &env,
            line_with(o, &[("note", s("urgent")), ("updatedAt", s("t2"))]),
        )
        .await;
        delete(&env, key(format!("ORDER#{o}"), "ORDER")).await;
        put(&env, order(o, "paid")).await;
    }
    for (o, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 5, "{o}");
        deliver_cut(&env, &records, cuts, o).await;
        assert_eq!(
            the_line(&env, o).await,
            None,
            "{o}: the deleted order's line is left"
        );
        assert_eq!(entries(&env, o).await, ["Created order"], "{o}");
    }
    env.rt.drain().await.expect("drains");
    for (o, _) in &plans {
        assert_eq!(the_line(&env, o).await, None, "{o}: drained");
        assert_eq!(entries(&env, o).await, ["Created order"], "{o}");
    }
    assert_clean(&env).await;
}
