//! The history fold's round trips, counted through a bill meter (the
//! requests the handlers benchmark counts), with the outcome checked exact:
//! each test pins a request the fold no longer sends.

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::meter::Bill;
use shared::item::{n, s, ItemExt};

use crate::apps::keys;
use crate::bill::{billed, metered};
use crate::items::assert_clean;
use crate::support::{descriptions, env, partition, stream_event, Env};

fn requests(bill: &Bill, op: &str) -> u64 {
    bill.ops.get(op).map_or(0, |o| o.requests)
}

/// The `historySequence` on an application's item (None: absent or no item).
async fn mirror(env: &Env, app: &str) -> Option<i64> {
    partition(env, &keys::app_pk(app))
        .await
        .into_iter()
        .find(|i| i.s(keys::SK).ok() == Some(keys::app_sk(app).as_str()))
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// Writes three applications with a few changes each (entries 4, 4 and 2).
async fn three_applications(env: &Env) {
    let w = &env.writer;
    for id in ["a", "b", "c"] {
        w.create(id, "Co", "Engineer", "2026-01-01T00:00:00.000Z")
            .await;
        w.set(id, "notes", s("n"), "2026-01-02T00:00:00.000Z").await;
    }
    for id in ["a", "b"] {
        w.add_stage(id, "s1", "Screen", 1).await.unwrap();
        w.set_stage(id, "s1", "isCompleted", AttributeValue::Bool(true))
            .await;
    }
}

/// The `historySequence` mirror goes in the transaction that commits the
/// entries and the HEAD: a batch of three applications sends one
/// TransactWriteItems and no UpdateItem (before: one UpdateItem per
/// application after the commit), and each application shows its last
/// entry's number. The same batch again writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sequence_mirror_is_written_with_the_commit() {
    let mut env = env().await;
    let (meter, rt) = metered(&env).await;
    three_applications(&env).await;
    let event = stream_event(&env).await;

    let bill = billed(&rt, &meter, "history", &event).await;
    assert_eq!(requests(&bill, "UpdateItem"), 0, "{bill:?}");
    assert_eq!(requests(&bill, "TransactWriteItems"), 1, "{bill:?}");
    for (app, last) in [("a", 4), ("b", 4), ("c", 2)] {
        assert_eq!(descriptions(&env, app).await.len(), last as usize, "{app}");
        assert_eq!(mirror(&env, app).await, Some(last), "{app}");
    }

    let again = billed(&rt, &meter, "history", &event).await;
    assert_eq!(again.wru(), 0.0, "a redelivery writes nothing: {again:?}");
    env.rt.drain().await.unwrap();
    assert_clean(&env).await;
}

/// An application deleted after its records were read and before the
/// history commits them: the mirror's condition (the item exists) refuses
/// inside the transaction, which is sent again without it; the entries and
/// the other applications' mirrors commit, nothing recreates the deleted
/// item, no record fails, and its REMOVE then cascades its history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_deleted_before_the_commit_refuses_only_its_mirror() {
    let mut env = env().await;
    let (meter, rt) = metered(&env).await;
    three_applications(&env).await;
    let event = stream_event(&env).await;
    env.writer.delete_application("b").await.unwrap();

    let bill = billed(&rt, &meter, "history", &event).await;
    let tx = &bill.ops["TransactWriteItems"];
    assert_eq!(
        (tx.requests, tx.cancelled, requests(&bill, "UpdateItem")),
        (2, 1, 0),
        "one transaction refused for b's mirror, sent again without it: {bill:?}"
    );
    assert_eq!(mirror(&env, "a").await, Some(4));
    assert_eq!(mirror(&env, "c").await, Some(2));
    let b = partition(&env, &keys::app_pk("b")).await;
    assert!(
        b.iter()
            .all(|i| i.s(keys::SK).ok() != Some(keys::app_sk("b").as_str())),
        "the deleted application stays deleted: {b:?}"
    );
    assert_eq!(descriptions(&env, "b").await.len(), 4);

    env.rt.drain().await.unwrap();
    assert!(
        descriptions(&env, "b").await.is_empty(),
        "the REMOVE cascades"
    );
    assert_clean(&env).await;
}

/// A mirror found ahead of a root this batch created (a writer's, or an
/// earlier incarnation's count a lagging batch wrote onto the re-created
/// item: history_defects) is this incarnation's count after the commit,
/// set in the commit's own transaction (no request of its own); the
/// others' mirrors are raised as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_ahead_of_a_created_root_is_set_in_the_commit() {
    let env = env().await;
    let (meter, rt) = metered(&env).await;
    three_applications(&env).await;
    let event = stream_event(&env).await;
    env.rt
        .dynamodb
        .update_item()
        .table_name(&env.rt.config.table)
        .key(keys::PK, s(keys::app_pk("c")))
        .key(keys::SK, s(keys::app_sk("c")))
        .update_expression("SET historySequence = :h")
        .expression_attribute_values(":h", n(7))
        .send()
        .await
        .unwrap();

    let bill = billed(&rt, &meter, "history", &event).await;
    assert_eq!(requests(&bill, "UpdateItem"), 0, "{bill:?}");
    assert_eq!(mirror(&env, "c").await, Some(2));
    assert_eq!(mirror(&env, "a").await, Some(4));
    assert_eq!(descriptions(&env, "c").await.len(), 2);
}
