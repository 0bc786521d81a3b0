//! user9's trips (`rides.yaml` cut to its history): `backfill` run while
//! the processors run (FINDINGS #15), and a trip re-created with other
//! attributes than the history's `fields` behind a lagging fold (#14).
//!
//! A root whose INSERT is still ahead of the consumer is adopted by a
//! backfill (an `Imported` entry 1); when the consumer reaches the INSERT,
//! the history starts there: the creation's entry replaces the adoption's,
//! and every change after it is its own entry. Only a history whose
//! records the stream no longer holds keeps its adoption.

use shared::item::{n, s, Item, ItemExt};

use crate::history_recreate::deliver_history;
use crate::items::{assert_clean, attrs, delete, get, history_entries, put};
use crate::support::{model_env, run_in_background, temp_model, ModelEnv};

const TRIPS: &str = r#"
jobstream: 1
name: trips
table: { name: trips, pk: pk, sk: sk }
entities:
  Trip:
    key: { pk: "trip#${id}", sk: "trip#" }
    attributes:
      id: string
      riderId: string
      status: [requested, accepted, pickedup, delivered, cancelled]
      driverId?: string
      fareCents?: int
  trip_hist:
    owner: processor
    key: { pk: "trip#${id}", sk: "hist#${sequence}" }
history:
  root:
    entity: Trip
    fields: [status, driverId, fareCents]
    created: "Trip requested by ${riderId}"
    updated:
      - { when: "old.status != new.status", say: "Status ${old.status} -> ${new.status}" }
  entries: { entity: trip_hist, digits: 6 }
"#;

async fn trips() -> ModelEnv {
    let model = temp_model("trips", TRIPS);
    model_env("trips", |o| o.model_file = Some(model)).await
}

fn trip(id: &str, rider: &str, status: &str) -> Item {
    attrs(vec![
        ("pk", s(format!("trip#{id}"))),
        ("sk", s("trip#")),
        ("type", s("Trip")),
        ("id", s(id)),
        ("riderId", s(rider)),
        ("status", s(status)),
        ("driverId", s("d1")),
        ("fareCents", n(900)),
    ])
}

/// The key of trip `id`.
fn root(id: &str) -> Item {
    attrs(vec![("pk", s(format!("trip#{id}"))), ("sk", s("trip#"))])
}

/// The trip's entries as (sequence, description), in order.
async fn said(env: &ModelEnv, id: &str) -> Vec<(i64, String)> {
    history_entries(env, &format!("trip#{id}"), "hist#").await
}

fn these(v: &[(i64, &str)]) -> Vec<(i64, String)> {
    v.iter().map(|(i, d)| (*i, d.to_string())).collect()
}

/// The trip's `historySequence` (`None`: absent, or no trip).
async fn mirror(env: &ModelEnv, id: &str) -> Option<i64> {
    get(env, root(id))
        .await
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// The stream records of trip `id` (its root and entries).
async fn records_of(env: &ModelEnv, id: &str) -> Vec<serde_json::Value> {
    let pk = format!("trip#{id}");
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["pk"]["S"].as_str() == Some(pk.as_str()))
        .collect()
}

async fn backfill(env: &ModelEnv) -> u64 {
    let opts = jobstream::tools::backfill::ScanOptions::default();
    let (_, totals) = crate::items::backfill(env, &opts).await;
    totals.imported.load(std::sync::atomic::Ordering::Relaxed)
}

/// FINDINGS #15: a trip created while the consumer lags is adopted by a
/// backfill (`Imported`); the consumer reaching its INSERT starts the
/// history there ("Trip requested by r3", then its status change), the
/// mirror never past the entries, and nothing moves again on redelivery
/// or a second backfill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_ahead_of_a_lagging_consumer_keeps_the_real_start_of_the_history() {
    let env = trips().await;
    put(&env, trip("t1", "r3", "requested")).await;
    put(&env, trip("t1", "r3", "accepted")).await;
    assert_eq!(backfill(&env).await, 1, "no HEAD yet: adopted");
    assert_eq!(said(&env, "t1").await, these(&[(1, "Imported")]));
    assert_eq!(mirror(&env, "t1").await, Some(1));
    let records = records_of(&env, "t1").await;
    // The consumer reaches the INSERT alone: the creation's entry replaces
    // the adoption's.
    assert_eq!(deliver_history(&env, &records[..1]).await, 0);
    assert_eq!(
        said(&env, "t1").await,
        these(&[(1, "Trip requested by r3")])
    );
    assert_eq!(mirror(&env, "t1").await, Some(1));
    assert_eq!(deliver_history(&env, &records[1..]).await, 0);
    let whole = these(&[
        (1, "Trip requested by r3"),
        (2, "Status requested -> accepted"),
    ]);
    assert_eq!(said(&env, "t1").await, whole);
    // Everything again (a redelivery), and a second backfill: nothing moves.
    let records = records_of(&env, "t1").await;
    assert_eq!(deliver_history(&env, &records).await, 0);
    assert_eq!(backfill(&env).await, 0);
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_eq!(said(&env, "t1").await, whole);
    assert_eq!(mirror(&env, "t1").await, Some(2));
    assert_clean(&env).await;
}

/// The stream no longer holds the trip's INSERT (trimmed past 24 h): the
/// backfill's adoption stands, the changes after it are entries 2...
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_whose_creation_the_stream_no_longer_holds_keeps_its_adoption() {
    let env = trips().await;
    put(&env, trip("t1", "r3", "requested")).await;
    put(&env, trip("t1", "r3", "accepted")).await;
    assert_eq!(backfill(&env).await, 1);
    put(&env, trip("t1", "r3", "pickedup")).await;
    let records = records_of(&env, "t1").await;
    assert_eq!(deliver_history(&env, &records[1..]).await, 0);
    assert_eq!(
        said(&env, "t1").await,
        these(&[(1, "Imported"), (2, "Status accepted -> pickedup")])
    );
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_eq!(mirror(&env, "t1").await, Some(2));
}

/// A trip created, deleted and re-created before the consumer saw any of
/// it, adopted by a backfill in between or after: the history is the
/// latest incarnation's, from its creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_re_created_around_a_backfill_starts_at_its_own_creation() {
    let env = trips().await;
    put(&env, trip("a", "r1", "requested")).await;
    assert_eq!(backfill(&env).await, 1);
    delete(&env, root("a")).await;
    put(&env, trip("b", "r1", "requested")).await;
    delete(&env, root("b")).await;
    put(&env, trip("a", "r2", "requested")).await;
    put(&env, trip("b", "r2", "accepted")).await;
    assert_eq!(backfill(&env).await, 1, "b adopted");
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_eq!(said(&env, "a").await, these(&[(1, "Trip requested by r2")]));
    assert_eq!(said(&env, "b").await, these(&[(1, "Trip requested by r2")]));
    assert_eq!(mirror(&env, "a").await, Some(1));
    assert_eq!(mirror(&env, "b").await, Some(1));
    assert_clean(&env).await;
}

/// user9's run: trips created and moved on while the processors run, and
/// three backfills during it. Every history starts with its creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfills_while_the_processors_run_never_replace_a_creation() {
    let ModelEnv { engine, rt } = trips().await;
    let (client, config) = (rt.dynamodb.clone(), rt.config.clone());
    let processors =
        shared::lambda::Processors::new(&rt.model, &config, rt.processors.store.clone(), None);
    let runner = run_in_background(rt);
    let table = config.table.clone();
    let writes = {
        let client = client.clone();
        tokio::spawn(async move {
            for round in ["requested", "accepted", "pickedup", "delivered"] {
                for i in 0..12 {
                    client
                        .put_item()
                        .table_name(&table)
                        .set_item(Some(trip(&format!("t{i}"), &format!("r{i}"), round)))
                        .send()
                        .await
                        .expect("put");
                }
            }
        })
    };
    let opts = jobstream::tools::backfill::ScanOptions::default();
    for _ in 0..3 {
        jobstream::tools::backfill::backfill(&client, &config, &processors, &opts, false)
            .await
            .expect("backfill runs");
    }
    writes.await.expect("writes");
    let mut rt = runner.stop().await;
    rt.drain().await.expect("drains");
    let env = ModelEnv { engine, rt };
    for i in 0..12 {
        let t = format!("t{i}");
        let d = said(&env, &t).await;
        assert_eq!(d.len(), 4, "{t}: {d:?}");
        assert_eq!(d[0].1, format!("Trip requested by r{i}"), "{t}: {d:?}");
        assert_eq!(mirror(&env, &t).await, Some(4), "{t}");
    }
    assert_clean(&env).await;
}

/// FINDINGS #14: the trip re-created with the same `fields` but another
/// rider (which its `created` description reads) is told apart from the
/// incarnation folded: a lagging batch of the old one never writes its
/// count onto it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_count_never_lands_on_a_trip_re_created_with_another_rider() {
    let env = trips().await;
    for status in ["requested", "accepted", "pickedup", "accepted"] {
        put(&env, trip("t1", "r1", status)).await;
    }
    delete(&env, root("t1")).await;
    put(&env, trip("t1", "r2", "accepted")).await;
    let records = records_of(&env, "t1").await;
    assert_eq!(records.len(), 6);
    assert_eq!(deliver_history(&env, &records[..4]).await, 0);
    assert_eq!(said(&env, "t1").await.len(), 4);
    assert_eq!(
        mirror(&env, "t1").await,
        None,
        "the old incarnation's count was written onto the re-created trip"
    );
    assert_eq!(deliver_history(&env, &records[4..]).await, 0);
    assert_eq!(
        said(&env, "t1").await,
        these(&[(1, "Trip requested by r2")])
    );
    assert_eq!(mirror(&env, "t1").await, Some(1));
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_clean(&env).await;
}
