//! The application tracker where Rust must look: the stream read through
//! the SDK, concurrent writers, throttled commits, the demo through the
//! binary. What the tracker's writes imply, and the fixpoint after the
//! processors' own writes (the last check of every scenario file), is
//! proved by the scenario files of tests/scenarios/tracker/ (scenarios.rs).

use crate::apps::play;
use crate::apps::Clock;
use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::s;

use super::tracker_recorded::table;
use crate::items::{assert_clean, partition, play_scenario};
use crate::recorded::{check, table_json};
use crate::support::{count, descriptions, env, Env};

/// The tracker's scripted scenario (a scenario file).
const SCRIPTED: &str = "tracker/scenario_produces_exactly_the_implied_derived_state.yaml";

/// The path `jobstream run --endpoint` takes against any engine: the
/// stream read through the SDK, the same scenario, every check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processors_reading_the_stream_through_the_sdk_reach_the_same_state() {
    play_scenario(SCRIPTED, |o| {
        o.reader = jobstream::local::esm::RecordReader::Sdk
    })
    .await;
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
                w.create(&id, "Co", "Role", &t.next()).await;
                w.add_stage(&id, "s1", "Screen", 1).await.unwrap();
                w.set(&id, "status", s("interviewing"), &t.next()).await;
                w.set_stage(&id, "s1", "isCompleted", AttributeValue::Bool(true))
                    .await;
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

/// `jobstream demo --model tracker` (the binary) plays the shipped
/// scenario: every expected item, the queries printed, the pinned processor
/// writes, a fixpoint, `verify` clean.
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    let text = crate::support::demo_through_the_binary("tracker");
    for line in [
        ": 2 step(s)",
        "query history(id=acme)",
        "processor writes: 44",
    ] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
}
