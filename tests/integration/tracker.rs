//! The application tracker end to end: descriptions, snapshots, sequences,
//! META/COUNT, sparse GSI2, cascade, fixpoint, concurrent writers.

use crate::apps::keys;
use crate::apps::{differences, observe};
use crate::apps::{play, Clock};
use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item, ItemExt};

use super::tracker_recorded::table;
use crate::items::{assert_clean, partition};
use crate::recorded::{check, table_json};
use crate::support::{count, descriptions, env, Env};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_produces_exactly_the_implied_derived_state() {
    let mut env = env().await;
    let expected = play(&env.writer).await.unwrap();
    env.rt.drain().await.unwrap();
    let observed = observe(&env.rt.dynamodb, &env.rt.config.table, &expected)
        .await
        .unwrap();
    assert_eq!(differences(&expected, &observed), Vec::<String>::new());
    assert_clean(&env).await;
    assert!(env.rt.failed_batches().is_empty());
    // Archived application: GSI1 says ARCHIVED#1 and GSI2 keys are absent.
    let globex = &partition(&env, "APP#globex").await[0];
    assert_eq!(globex.s("GSI1PK").unwrap(), "STATUS#unsubmitted#ARCHIVED#1");
    assert!(!globex.contains_key("GSI2PK") && !globex.contains_key("GSI2SK"));
    assert_eq!(globex.i64("historySequence").unwrap(), 3);
    // Deleted application: nothing left, and no stage-removal entry was written.
    assert!(partition(&env, "APP#umbrella").await.is_empty());
}

/// The application and its stages as stored right now, as a snapshot.
async fn table_snapshot(env: &Env, app_id: &str) -> Item {
    crate::apps::spec_snapshot(&partition(env, &keys::app_pk(app_id)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_is_the_state_right_after_its_change_although_processing_lags() {
    let mut env = env().await;
    let w = env.writer.clone();
    let mut t = Clock::new();
    let mut truth = Vec::new();
    w.create_application("a", "Acme", "Dev", "applied", &t.next())
        .await
        .unwrap();
    truth.push(table_snapshot(&env, "a").await);
    w.add_stage("a", "s2", "Onsite", 2).await.unwrap();
    truth.push(table_snapshot(&env, "a").await);
    w.add_stage("a", "s1", "Phone", 1).await.unwrap();
    truth.push(table_snapshot(&env, "a").await);
    // updatedAt-only: no entry, but the next snapshot must show the new updatedAt.
    w.update_application("a", &[], &t.next()).await.unwrap();
    w.update_stage(
        "a",
        "s1",
        &[
            ("isCompleted", AttributeValue::Bool(true)),
            ("performanceRating", n(5)),
        ],
    )
    .await
    .unwrap();
    truth.push(table_snapshot(&env, "a").await);
    w.update_application(
        "a",
        &[("status", s("interviewing")), ("jobSource", s("linkedin"))],
        &t.next(),
    )
    .await
    .unwrap();
    truth.push(table_snapshot(&env, "a").await);
    w.remove_stage("a", "s2").await.unwrap();
    truth.push(table_snapshot(&env, "a").await);
    w.set_archived("a", true, &t.next()).await.unwrap();
    truth.push(table_snapshot(&env, "a").await);

    env.rt.drain().await.unwrap();
    let entries = crate::support::entries(&env, "a").await;
    assert_eq!(entries.len(), truth.len());
    for (i, (entry, want)) in entries.iter().zip(&truth).enumerate() {
        assert_eq!(entry.i64("sequence").unwrap(), i as i64 + 1);
        assert_eq!(entry.s("SK").unwrap(), format!("HIST#{:08}", i + 1));
        assert_eq!(
            entry.get("snapshot"),
            Some(&AttributeValue::M(want.clone())),
            "snapshot of entry {}",
            i + 1
        );
    }
    // Spot checks that do not go through the snapshot code at all.
    let AttributeValue::M(fourth) = &entries[3]["snapshot"] else {
        panic!("map")
    };
    assert_eq!(fourth["updatedAt"], s("2026-11-01T09:02:00.000Z"));
    let AttributeValue::L(stages) = &fourth["interviewStages"] else {
        panic!("list")
    };
    let names: Vec<_> = stages
        .iter()
        .map(|v| {
            if let AttributeValue::M(m) = v {
                m.s("name").unwrap().to_string()
            } else {
                String::new()
            }
        })
        .collect();
    assert_eq!(names, ["Phone", "Onsite"], "sorted by order");
    assert_eq!(
        descriptions(&env, "a").await.last().unwrap(),
        "Archived application"
    );
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processors_reach_a_fixpoint_after_their_own_writes() {
    let mut env = env().await;
    play(&env.writer).await.unwrap();
    env.rt.drain().await.unwrap();
    let writes = env.rt.processor_writes();
    let records = crate::support::raw_records(&env).await.len();
    assert!(writes > 0);
    // Everything the processors wrote has come back through the stream and
    // was processed by drain(); another round finds nothing and writes nothing.
    assert_eq!(env.rt.drain().await.unwrap(), 0);
    assert_eq!(env.rt.processor_writes(), writes);
    assert_eq!(crate::support::raw_records(&env).await.len(), records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascade_deletes_every_stage_and_entry_without_removal_entries() {
    let mut env = env().await;
    let w = env.writer.clone();
    w.create_application(
        "big",
        "Big Co",
        "Dev",
        "applied",
        "2026-11-01T09:00:00.000Z",
    )
    .await
    .unwrap();
    for i in 0..30 {
        w.add_stage("big", &format!("st{i:02}"), &format!("Round {i}"), i)
            .await
            .unwrap();
    }
    w.create_application(
        "keep",
        "Keep Co",
        "Dev",
        "applied",
        "2026-11-01T09:00:00.000Z",
    )
    .await
    .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(partition(&env, "APP#big").await.len(), 1 + 30 + 31);
    w.delete_application("big").await.unwrap();
    env.rt.drain().await.unwrap();
    assert!(
        partition(&env, "APP#big").await.is_empty(),
        "stages and history are gone"
    );
    assert_eq!(count(&env).await, Some(1));
    assert_eq!(descriptions(&env, "keep").await.len(), 1);
    assert_clean(&env).await;
    // Re-creating the application starts a new history at 1.
    w.create_application(
        "big",
        "Big Co",
        "Dev 2",
        "applied",
        "2026-11-02T09:00:00.000Z",
    )
    .await
    .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(
        descriptions(&env, "big").await,
        ["Created application Big Co - Dev 2"]
    );
    assert_clean(&env).await;
}

/// `writers` concurrent writers, each writing `apps` applications of its
/// own through 8 writes while the processors run; the last application of
/// each writer is deleted, the odd ones stay archived. Returns the drained
/// environment.
async fn concurrent_writers(writers: usize, apps: usize) -> Env {
    let Env { engine, rt, writer } = env().await;
    let runner = crate::support::run_in_background(rt);
    let mut tasks = Vec::new();
    for wi in 0..writers {
        let w = writer.clone();
        tasks.push(tokio::spawn(async move {
            for ai in 0..apps {
                let id = format!("w{wi}a{ai}");
                let mut t = Clock::new();
                w.create_application(&id, "Co", "Role", "applied", &t.next())
                    .await
                    .unwrap();
                w.add_stage(&id, "s1", "Screen", 1).await.unwrap();
                w.update_application(&id, &[("status", s("interviewing"))], &t.next())
                    .await
                    .unwrap();
                w.update_stage(&id, "s1", &[("isCompleted", AttributeValue::Bool(true))])
                    .await
                    .unwrap();
                w.set_archived(&id, true, &t.next()).await.unwrap();
                if ai % 2 == 0 {
                    w.set_archived(&id, false, &t.next()).await.unwrap();
                } else {
                    w.update_application(&id, &[], &t.next()).await.unwrap();
                }
                w.add_stage(&id, "s2", "Final", 2).await.unwrap();
                if ai == apps - 1 {
                    w.delete_application(&id).await.unwrap();
                } else {
                    w.remove_stage(&id, "s2").await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut rt = runner.stop().await;
    rt.drain().await.unwrap();
    let env = Env { engine, rt, writer };
    assert_clean(&env).await;
    assert!(env.rt.failed_batches().is_empty());
    for wi in 0..writers {
        for ai in 0..apps - 1 {
            let d = descriptions(&env, &format!("w{wi}a{ai}")).await;
            let restore_or_nothing = if ai % 2 == 0 { 1 } else { 0 };
            assert_eq!(d.len(), 7 + restore_or_nothing, "w{wi}a{ai}: {d:?}");
        }
        assert!(partition(&env, &format!("APP#w{wi}a{}", apps - 1))
            .await
            .is_empty());
    }
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_writers_while_processors_run_end_exact() {
    // 8 writers x 6 applications x 8 writes = 384 writes.
    let env = concurrent_writers(8, 6).await;
    // Active: ai in {0, 2, 4} per writer.
    assert_eq!(count(&env).await, Some(8 * 3));
}

/// 4 writers x 3 applications: the table the compiled tracker ended with
/// (recorded), but for the writers' clock times (each writer's clock starts
/// at its start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_end_in_the_recorded_table() {
    let env = concurrent_writers(4, 3).await;
    let mut t = table(&env).await;
    for attrs in t.values_mut() {
        for k in ["createdAt", "updatedAt", "GSI1SK", "GSI2SK"] {
            if attrs.contains_key(k) {
                attrs.insert(k.to_string(), s("T"));
            }
        }
        if let Some(AttributeValue::M(snap)) = attrs.get_mut("snapshot") {
            snap.insert("createdAt".into(), s("T"));
            snap.insert("updatedAt".into(), s("T"));
        }
    }
    check("tracker-concurrent-writers", &table_json(&t));
}

/// 2 SDK attempts, no extra backoff: 3 throttles of the commits outlast one
/// invocation; the records are reported failed, succeed on redelivery, and
/// the table ends as the compiled tracker's did (recorded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_commits_fail_records_that_succeed_on_redelivery() {
    let (crate::support::ModelEnv { engine, mut rt }, proxy) =
        crate::support::model_env_behind_proxy("tracker", |o| {
            o.max_attempts = 2;
        })
        .await;
    let writer = crate::apps::AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    play(&writer).await.expect("scenario");
    proxy.inject(jobstream::faults::Fault::throttle("TransactWriteItems", 3));
    rt.drain().await.unwrap();
    assert_eq!(proxy.injected(), 3);
    let failed: u64 = ["history", "derive"]
        .iter()
        .map(|p| {
            rt.stream_processor(p)
                .metrics()
                .get(shared::metrics::names::FAILED_RECORD)
        })
        .sum();
    assert!(failed >= 1, "a record was reported as failed");
    assert!(
        rt.failed_batches().is_empty(),
        "and succeeded on redelivery"
    );
    let env = Env { engine, rt, writer };
    assert_clean(&env).await;
    check("tracker-throttled", &table_json(&table(&env).await));
    env.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processors_reading_the_stream_through_the_sdk_reach_the_same_state() {
    // The path `jobstream run --endpoint` takes against any engine.
    let mut env =
        crate::support::env_with(|o| o.reader = jobstream::local::esm::RecordReader::Sdk).await;
    let expected = play(&env.writer).await.unwrap();
    env.rt.drain().await.unwrap();
    let observed = observe(&env.rt.dynamodb, &env.rt.config.table, &expected)
        .await
        .unwrap();
    assert_eq!(differences(&expected, &observed), Vec::<String>::new());
    assert_clean(&env).await;
}

/// `jobstream demo --model tracker` (the binary) plays the shipped
/// scenario: every expected item, the queries printed, the pinned processor
/// writes, a fixpoint, `verify` clean.
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    let text = crate::support::demo_through_the_binary("tracker");
    for line in [
        ": 2 step(s)",
        "query history(id=acme)",
        "processor writes: 42",
    ] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
}

/// A META/COUNT as the compiled tracker left it (no `type`): the file's
/// processors count on from it, and `verify` finds it right (a deployed
/// stack switches to the file without migration).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_the_compiled_tracker_left_is_counted_on() {
    let mut env = env().await;
    let w = env.writer.clone();
    let mut t = Clock::new();
    for id in ["a1", "a2"] {
        w.create_application(id, "Acme", "Engineer", "applied", &t.next())
            .await
            .unwrap();
    }
    env.rt.drain().await.unwrap();
    let meta = partition(&env, keys::META_PK).await;
    assert_eq!(meta[0].s("type").unwrap(), "application_count");
    let mut left: Item = meta[0].clone();
    left.remove("type");
    w.put(left).await.unwrap();
    w.create_application("a3", "Acme", "Engineer", "applied", &t.next())
        .await
        .unwrap();
    w.set_archived("a1", true, &t.next()).await.unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(count(&env).await, Some(2));
    assert_clean(&env).await;
    assert!(env.rt.failed_batches().is_empty());
}
