//! user14's cascade loss: a root put, deleted and put again, then a member
//! put under it (its record after all of the root's). A fold that first
//! meets the aggregate at the creation or the deletion reads the partition
//! as it is then, with the member already there; the member was never the
//! removed incarnation's, and no cut of the records may let the deletion's
//! cascade take it. Nor may `verify` find drift afterwards.
//!
//! Driven as W01's tests are (history_recreate_members.rs): the writer
//! ahead of the fold, its records delivered cut in two at every position
//! and one per batch; a replay from the start and a drain move nothing.

use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::history_recreate_members::{
    assert_last_incarnation, entries, line, line_quantity, order, records_of, recreate_env,
};
use crate::items::{assert_clean, attrs, begins, delete, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// The cuts of `len` records: in two at every position, and one per batch.
fn cuts(len: usize) -> Vec<(String, Vec<usize>)> {
    let mut plans: Vec<(String, Vec<usize>)> =
        (1..len).map(|cut| (format!("c{cut}"), vec![cut])).collect();
    plans.push(("each".into(), (1..len).collect()));
    plans
}

/// Delivers `records` in the batches `cuts` makes of them, then replays
/// them all (which must fail nothing).
async fn deliver_cut(env: &ModelEnv, records: &[Value], cuts: &[usize], what: &str) {
    let mut from = 0;
    for &cut in cuts.iter().chain([&records.len()]) {
        assert_eq!(deliver_history(env, &records[from..cut]).await, 0, "{what}");
        from = cut;
    }
    assert_eq!(deliver_history(env, records).await, 0, "{what} replayed");
}

/// Each order's `n` records but its first, delivered at its cuts: the line
/// the application put last stays at every cut and once drained, its order
/// created with it, and verify is clean.
async fn line_stays_whatever_the_cuts(
    env: &mut ModelEnv,
    plans: &[(String, Vec<usize>)],
    n: usize,
) {
    for (o, cuts) in plans {
        let records = records_of(env, o).await;
        assert_eq!(records.len(), n, "{o}");
        deliver_cut(env, &records[1..], cuts, o).await;
        assert_eq!(
            line_quantity(env, o).await,
            Some(2),
            "{o} (cuts {cuts:?}): the line the application put last was deleted"
        );
    }
    env.rt.drain().await.expect("drains");
    for (o, _) in plans {
        assert_eq!(line_quantity(env, o).await, Some(2), "{o}: drained");
        assert_eq!(
            entries(env, o).await,
            ["Created order", "Added line"],
            "{o}"
        );
    }
    assert_clean(env).await;
}

/// The order put, deleted and put again with `status`, then its line put
/// (cascade2.py, cascade4.py).
async fn write_recreated_then_line(env: &ModelEnv, o: &str, status: &str) {
    put(env, order(o, "placed")).await;
    delete(env, key(format!("ORDER#{o}"), "ORDER")).await;
    put(env, order(o, status)).await;
    put(env, line(o, 2)).await;
}

/// The fold first meets the order at its creation, with the writer
/// already past the line's put: the line, read with the partition, is no
/// member of the incarnation the deletion removes, whatever the cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_its_order_came_back_stays_when_the_fold_first_meets_the_creation() {
    let mut env = recreate_env().await;
    let mut plans = Vec::new();
    for status in ["placed", "paid"] {
        for (cut, c) in cuts(4) {
            plans.push((format!("{status}{cut}"), status, c));
        }
    }
    for (o, status, _) in &plans {
        write_recreated_then_line(&env, o, status).await;
    }
    for (o, _, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 4, "{o}");
        deliver_cut(&env, &records, cuts, o).await;
        assert_last_incarnation(&env, o, &format!("cuts {cuts:?}")).await;
    }
    env.rt.drain().await.expect("drains");
    for (o, _, cuts) in &plans {
        assert_last_incarnation(&env, o, &format!("drained, cuts {cuts:?}")).await;
    }
    assert_clean(&env).await;
}

/// The order predates the stream (its INSERT is never delivered): the
/// fold first meets it at its deletion, with the writer already past the
/// re-creation and the line's put. The line is no member of the removed
/// incarnation, whatever the cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_its_order_came_back_stays_when_the_fold_first_meets_the_deletion() {
    let mut env = recreate_env().await;
    let plans = cuts(3);
    for (o, _) in &plans {
        write_recreated_then_line(&env, o, "paid").await;
    }
    line_stays_whatever_the_cuts(&mut env, &plans, 4).await;
}

/// user14's model, trimmed to its history: deals keyed under their
/// account (several deals in one partition), activities under the deal.
const CRM: &str = r#"
jobstream: 1
name: crm
table: { name: crm, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  deal:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}" }
    attributes:
      accountId: id
      dealId: id
      stage: [lead, qualified, proposal, won, lost]
      amount: int
  activity:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}#ACT#${at}#${activityId}" }
    attributes:
      accountId: id
      dealId: id
      activityId: id
      at: iso-utc
      kind: [call, email]
  deal_entry:
    owner: processor
    key: { PK: "ACCT#${accountId:id}", SK: "DEAL#${dealId:id}#HIST#${sequence}" }
history:
  root:
    entity: deal
    created: "Deal ${dealId} created at ${stage}"
    updated:
      - { when: "old.stage != new.stage", say: "Stage ${old.stage} -> ${new.stage}" }
  members:
    activity: { list: activities, fields: [at, activityId, kind] }
  entries: { entity: deal_entry, digits: 6 }
"#;

fn deal(d: &str, stage: &str) -> Item {
    attrs(vec![
        ("PK", s("ACCT#X")),
        ("SK", s(format!("DEAL#{d}"))),
        ("type", s("deal")),
        ("accountId", s("X")),
        ("dealId", s(d)),
        ("stage", s(stage)),
        ("amount", n(100)),
    ])
}

const AT: &str = "2026-03-01T00:00:00Z";

fn activity_sk(d: &str) -> String {
    format!("DEAL#{d}#ACT#{AT}#a1")
}

fn activity(d: &str) -> Item {
    attrs(vec![
        ("PK", s("ACCT#X")),
        ("SK", s(activity_sk(d))),
        ("type", s("activity")),
        ("accountId", s("X")),
        ("dealId", s(d)),
        ("activityId", s("a1")),
        ("at", s(AT)),
        ("kind", s("call")),
    ])
}

/// The records of deal `d` (its items' sort keys start with `DEAL#d#` or
/// are `DEAL#d`).
async fn deal_records(env: &ModelEnv, d: &str) -> Vec<Value> {
    let root = format!("DEAL#{d}");
    let prefix = format!("DEAL#{d}#");
    env.records()
        .await
        .into_iter()
        .filter(|r| {
            r["dynamodb"]["Keys"]["SK"]["S"]
                .as_str()
                .is_some_and(|sk| sk == root || sk.starts_with(&prefix))
        })
        .collect()
}

/// The user's repro (cascade2.py, cascade4.py) in the user's partition
/// layout: each deal of account X put, deleted, put again, then an
/// activity put under it; the fold behind, the records cut everywhere.
/// Every activity stays, and each deal's history is its creation and the
/// activity's addition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_activity_put_after_its_deal_came_back_stays_in_a_shared_partition() {
    let model = temp_model("crm", CRM);
    let mut env = model_env("crm", |o| o.model_file = Some(model)).await;
    let mut plans = Vec::new();
    for stage in ["lead", "won"] {
        for (cut, c) in cuts(4) {
            plans.push((format!("{stage}{cut}"), stage, c));
        }
    }
    for (d, stage, _) in &plans {
        put(&env, deal(d, "lead")).await;
        delete(&env, key("ACCT#X", format!("DEAL#{d}"))).await;
        put(&env, deal(d, stage)).await;
        put(&env, activity(d)).await;
    }
    for (d, stage, cuts) in &plans {
        let records = deal_records(&env, d).await;
        assert_eq!(records.len(), 4, "{d}");
        deliver_cut(&env, &records, cuts, d).await;
        assert!(
            get(&env, key("ACCT#X", activity_sk(d))).await.is_some(),
            "{d} (cuts {cuts:?}): the activity the application put last was deleted"
        );
        let history: Vec<String> = begins(&env, "ACCT#X", &format!("DEAL#{d}#HIST#"))
            .await
            .iter()
            .map(|e| e.s("description").unwrap_or("?").to_string())
            .collect();
        assert_eq!(
            history,
            [
                format!("Deal {d} created at {stage}"),
                "Added activity".to_string()
            ],
            "{d} (cuts {cuts:?})"
        );
    }
    env.rt.drain().await.expect("drains");
    for (d, _, _) in &plans {
        assert!(
            get(&env, key("ACCT#X", activity_sk(d))).await.is_some(),
            "{d}: drained"
        );
    }
    assert_clean(&env).await;
}

/// The order predates the stream and the fold first meets a change of it
/// (so it adopts the order as the table holds it then, the writer already
/// past the re-creation and the line's put): the deletion folded before
/// the adoption's position leaves the line, whatever the cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_after_an_adopted_order_came_back_stays() {
    let mut env = recreate_env().await;
    let plans = cuts(4);
    for (o, _) in &plans {
        put(&env, order(o, "placed")).await;
        put(&env, order(o, "paid")).await;
        delete(&env, key(format!("ORDER#{o}"), "ORDER")).await;
        put(&env, order(o, "paid")).await;
        put(&env, line(o, 2)).await;
    }
    line_stays_whatever_the_cuts(&mut env, &plans, 5).await;
}

/// The other side: a line the adopted order had before the stream (no
/// record of it ever delivered) is still the removed incarnation's when
/// the order is deleted before the adoption's position, and goes once the
/// fold reaches a record after its read (the adoption's own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_the_adopted_order_had_goes_with_it() {
    let mut env = recreate_env().await;
    let plans = cuts(2);
    for (o, _) in &plans {
        put(&env, order(o, "placed")).await;
        put(&env, line(o, 1)).await;
        put(&env, order(o, "paid")).await;
        delete(&env, key(format!("ORDER#{o}"), "ORDER")).await;
    }
    for (o, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 4, "{o}");
        deliver_cut(&env, &records[2..], cuts, o).await;
    }
    env.rt.drain().await.expect("drains");
    for (o, _) in &plans {
        assert_eq!(line_quantity(&env, o).await, None, "{o}: the line is left");
        assert!(entries(&env, o).await.is_empty(), "{o}");
    }
    assert_clean(&env).await;
}

/// A line put while its order is gone (after the deletion, no
/// re-creation): the fold first meets the order's creation and reads the
/// line with the partition; the deletion leaves it, and its own record
/// makes it a member waiting for its order (no drift), whatever the cuts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_put_while_its_order_is_gone_waits_for_it() {
    let mut env = recreate_env().await;
    let plans = cuts(3);
    for (o, _) in &plans {
        put(&env, order(o, "placed")).await;
        delete(&env, key(format!("ORDER#{o}"), "ORDER")).await;
        put(&env, line(o, 2)).await;
    }
    for (o, cuts) in &plans {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 3, "{o}");
        deliver_cut(&env, &records, cuts, o).await;
        assert_eq!(
            line_quantity(&env, o).await,
            Some(2),
            "{o} (cuts {cuts:?}): the line put while its order was gone was deleted"
        );
    }
    env.rt.drain().await.expect("drains");
    for (o, _) in &plans {
        assert_eq!(line_quantity(&env, o).await, Some(2), "{o}: drained");
    }
    assert_clean(&env).await;
}

/// A line that predates the stream under an order the fold first meets
/// at its creation, deleted for good right after: no record after the
/// read tells whether the line is older than the stream, so the deletion
/// leaves it, and `verify` reports it left behind (never silent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_a_deletion_could_not_place_is_left_and_reported() {
    let env = recreate_env().await;
    put(&env, line("o1", 1)).await;
    put(&env, order("o1", "placed")).await;
    delete(&env, key("ORDER#o1", "ORDER")).await;
    let records = records_of(&env, "o1").await;
    assert_eq!(records.len(), 3);
    // The line's record is never delivered: it predates the stream.
    deliver_cut(&env, &records[1..], &[], "o1").await;
    assert_eq!(line_quantity(&env, "o1").await, Some(1));
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report.problems.iter().any(
            |p| format!("{p:?}").contains("LINE#1") && format!("{p:?}").contains("left behind")
        ),
        "{:#?}",
        report.problems
    );
}
