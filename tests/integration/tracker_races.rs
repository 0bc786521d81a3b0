//! `models/tracker.yaml` under races, each ending in the table the compiled
//! tracker ended in (recorded, see [`crate::recorded`]): the adoption,
//! backfill and replay races of the tracker's own tests (history_adoption.rs,
//! backfill.rs), concurrent writers while the processors run, and throttled
//! commits.

use crate::apps::keys;
use crate::apps::{play, Clock};
use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::tools::backfill::ScanOptions;
use lambda_runtime::{Context, LambdaEvent};
use shared::item::{s, ItemExt};

use super::tracker_recorded::table;
use crate::recorded::{check, table_json};
use crate::support::{descriptions, partition, raw_records, Env};
// ------------------------------------------------ adoption and backfill races

/// Delivers the stream records from `from` on to both processors as one
/// batch each (a consumer that lagged until now); returns the new position.
async fn deliver(env: &Env, from: usize) -> usize {
    let records = raw_records(env).await;
    let to = records.len();
    if from < to {
        let event: Event =
            serde_json::from_value(serde_json::json!({ "Records": records[from..].to_vec() }))
                .expect("a Lambda event");
        for p in ["history", "derive"] {
            let failures = shared::lambda::stream_handler(
                &*env.rt.stream_processor(p),
                LambdaEvent::new(event.clone(), Context::default()),
            )
            .await
            .expect("handler")
            .batch_item_failures;
            assert!(failures.is_empty(), "a batch failed: {failures:?}");
        }
    }
    to
}

async fn settle(env: &Env, mut from: usize) -> usize {
    loop {
        let to = deliver(env, from).await;
        if to == from {
            return to;
        }
        from = to;
    }
}

async fn backfill(env: &Env) -> u64 {
    let (_, totals) = jobstream::tools::backfill::backfill(
        &env.rt.dynamodb,
        &env.rt.config,
        &env.rt.processors,
        &ScanOptions::default(),
        false,
    )
    .await
    .expect("backfill runs");
    totals.imported.load(std::sync::atomic::Ordering::Relaxed)
}

/// Stage names of each entry of an application, in sequence order.
async fn stage_names(env: &Env, app: &str) -> Vec<Vec<String>> {
    partition(env, &keys::app_pk(app))
        .await
        .into_iter()
        .filter(|i| i.s(keys::SK).unwrap_or_default().starts_with("HIST#"))
        .map(|e| match e.get("snapshot") {
            Some(AttributeValue::M(m)) => match m.get("interviewStages") {
                Some(AttributeValue::L(l)) => l
                    .iter()
                    .map(|v| match v {
                        AttributeValue::M(m) => m.s("name").unwrap_or_default().to_string(),
                        _ => String::new(),
                    })
                    .collect(),
                _ => vec!["no stages".to_string()],
            },
            _ => vec!["no snapshot".to_string()],
        })
        .collect()
}

/// Runs `scenario` on the tracker; it must end verified, in the recorded
/// table with the recorded histories (`name`).
async fn recorded<F, Fut>(name: &str, scenario: F) -> (Vec<String>, Vec<Vec<String>>)
where
    F: Fn(Env) -> Fut,
    Fut: std::future::Future<Output = (Env, &'static str)>,
{
    let (env, app) = scenario(crate::support::env().await).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    let out = (descriptions(&env, app).await, stage_names(&env, app).await);
    check(
        name,
        &serde_json::json!({ "descriptions": out.0, "stages": out.1, "table": table_json(&table(&env).await) }),
    );
    env.engine.stop().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_then_modify_then_backfill() {
    let out = recorded(
        "tracker-adopt-then-modify-then-backfill",
        |env| async move {
            let mut t = Clock::new();
            let w = &env.writer;
            w.create_application("pre", "Acme", "Engineer", "applied", &t.next())
                .await
                .unwrap();
            w.add_stage("pre", "s1", "Screen", 1).await.unwrap();
            w.add_stage("pre", "s2", "Onsite", 2).await.unwrap();
            let deployed = raw_records(&env).await.len();
            w.update_application("pre", &[("notes", s("called back"))], &t.next())
                .await
                .unwrap();
            let at = settle(&env, deployed).await;
            assert_eq!(backfill(&env).await, 0, "the fold adopted it already");
            w.update_application("pre", &[("status", s("interviewing"))], &t.next())
                .await
                .unwrap();
            settle(&env, at).await;
            (env, "pre")
        },
    )
    .await;
    assert_eq!(out.0, ["Imported", "Updated Status"]);
    assert_eq!(out.1[0], ["Screen", "Onsite"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_racing_a_lagging_consumer() {
    let out = recorded(
        "tracker-backfill-racing-a-lagging-consumer",
        |env| async move {
            let w = &env.writer;
            let mut t = Clock::new();
            w.create_application("lag", "Acme", "Engineer", "applied", &t.next())
                .await
                .unwrap();
            w.add_stage("lag", "s1", "Screen", 1).await.unwrap();
            assert_eq!(backfill(&env).await, 1);
            // A second backfill and the consumer reaching the older INSERTs,
            // then the import's entry: neither duplicates nor re-applies.
            assert_eq!(backfill(&env).await, 0);
            let at = settle(&env, 0).await;
            w.update_stage("lag", "s1", &[("isCompleted", AttributeValue::Bool(true))])
                .await
                .unwrap();
            // Redelivered from the start: skipped by the HEAD.
            settle(&env, 0).await;
            settle(&env, at).await;
            (env, "lag")
        },
    )
    .await;
    assert_eq!(out.0, ["Imported", "Updated interview stage \"Screen\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adoption_racing_a_change() {
    let out = recorded(
        "tracker-an-adoption-racing-a-change",
        |mut env| async move {
            let mut t = Clock::new();
            env.writer
                .create_application("race", "Acme", "Engineer", "applied", &t.next())
                .await
                .unwrap();
            assert_eq!(backfill(&env).await, 1);
            env.writer
                .add_stage("race", "s1", "Screen", 1)
                .await
                .unwrap();
            // The import read the partition, then the stage was added before
            // its entry committed: the stage's INSERT before the entry's.
            let mut records = raw_records(&env).await;
            let sk_of = |r: &serde_json::Value| {
                r["dynamodb"]["Keys"]["SK"]["S"]
                    .as_str()
                    .map(str::to_string)
            };
            let fence = records
                .iter()
                .position(|r| sk_of(r).as_deref() == Some("HIST#00000001"))
                .expect("the import's entry");
            let stage = records
                .iter()
                .position(|r| sk_of(r).as_deref() == Some("STAGE#s1"))
                .expect("the stage's INSERT");
            let (fs, ss) = (
                records[fence]["dynamodb"]["SequenceNumber"].clone(),
                records[stage]["dynamodb"]["SequenceNumber"].clone(),
            );
            records.swap(fence, stage);
            records[fence]["dynamodb"]["SequenceNumber"] = fs;
            records[stage]["dynamodb"]["SequenceNumber"] = ss;
            let delivered = records.len();
            let event: Event = serde_json::from_value(serde_json::json!({ "Records": records }))
                .expect("a Lambda event");
            let resp = shared::lambda::stream_handler(
                &*env.rt.stream_processor("history"),
                LambdaEvent::new(event, Context::default()),
            )
            .await
            .unwrap();
            assert!(resp.batch_item_failures.is_empty());
            settle(&env, delivered).await;
            env.rt.drain().await.unwrap();
            (env, "race")
        },
    )
    .await;
    assert_eq!(out.0, ["Imported"]);
    assert_eq!(out.1, [["Screen"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_application_shows_the_stages_the_table_held_before_the_stream() {
    let out = recorded("tracker-created-shows-earlier-stages", |env| async move {
        let w = &env.writer;
        let mut t = Clock::new();
        w.add_stage("orph", "s1", "Screen", 1).await.unwrap();
        w.add_stage("orph", "s3", "Take-home", 3).await.unwrap();
        let deployed = raw_records(&env).await.len();
        w.create_application("orph", "Acme", "Engineer", "applied", &t.next())
            .await
            .unwrap();
        w.add_stage("orph", "s2", "Onsite", 2).await.unwrap();
        w.update_stage("orph", "s1", &[("isCompleted", AttributeValue::Bool(true))])
            .await
            .unwrap();
        w.remove_stage("orph", "s3").await.unwrap();
        let at = settle(&env, deployed).await;
        w.update_application("orph", &[("notes", s("called"))], &t.next())
            .await
            .unwrap();
        settle(&env, at).await;
        (env, "orph")
    })
    .await;
    assert_eq!(
        out.0,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Onsite\"",
            "Updated interview stage \"Screen\"",
            "Removed interview stage \"Take-home\"",
            "Updated Notes",
        ]
    );
    assert_eq!(out.1[0], ["Screen", "Take-home"]);
    assert_eq!(out.1[4], ["Screen", "Onsite"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_recreated_before_the_consumer_saw_either() {
    let out = recorded(
        "tracker-deleted-and-recreated-before-the-consumer-saw-either",
        |env| async move {
            let w = &env.writer;
            let mut t = Clock::new();
            w.create_application("rc", "Acme", "Engineer", "applied", &t.next())
                .await
                .unwrap();
            for (id, name, order) in [
                ("old", "Old screen", 1),
                ("same", "Phone", 2),
                ("rm", "Gone", 3),
            ] {
                w.add_stage("rc", id, name, order).await.unwrap();
            }
            let deployed = raw_records(&env).await.len();
            w.remove_stage("rc", "rm").await.unwrap();
            w.delete_application("rc").await.unwrap();
            w.create_application("rc", "Globex", "Manager", "applied", &t.next())
                .await
                .unwrap();
            w.add_stage("rc", "new", "New screen", 1).await.unwrap();
            w.add_stage("rc", "same", "Onsite", 2).await.unwrap();
            settle(&env, deployed).await;
            assert_eq!(backfill(&env).await, 0);
            (env, "rc")
        },
    )
    .await;
    assert_eq!(
        out.0,
        [
            "Created application Globex - Manager",
            "Added interview stage \"New screen\"",
            "Added interview stage \"Onsite\""
        ]
    );
    assert!(out.1[0].is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_loaded_without_processors_is_the_same_after_backfill() {
    let out = recorded(
        "tracker-a-table-loaded-without-processors-is-the-same-after-backfill",
        |mut env| async move {
            let w = &env.writer;
            let mut t = Clock::new();
            for i in 0..6 {
                let id = format!("old{i}");
                w.create_application(&id, "Old Co", "Role", "applied", &t.next())
                    .await
                    .unwrap();
                w.add_stage(&id, "s1", "Screen", 1).await.unwrap();
                if i % 2 == 0 {
                    w.update_application(
                        &id,
                        &[("isArchived", AttributeValue::Bool(true))],
                        &t.next(),
                    )
                    .await
                    .unwrap();
                }
            }
            let at = raw_records(&env).await.len();
            assert_eq!(backfill(&env).await, 6);
            assert_eq!(backfill(&env).await, 0, "a second run imports nothing");
            // The consumer then reads only what came after (the imports' own
            // writes): nothing re-applied.
            settle(&env, at).await;
            env.writer
                .update_application("old1", &[("status", s("rejected"))], &t.next())
                .await
                .unwrap();
            env.rt.drain().await.unwrap();
            (env, "old1")
        },
    )
    .await;
    assert_eq!(out.0, ["Imported", "Updated Status"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_while_processors_run_end_alike() {
    {
        let Env { engine, rt, writer } = crate::support::env().await;
        let runner = crate::support::run_in_background(rt);
        // 4 writers x 3 applications x 8 writes, each writer its own keys.
        let mut tasks = Vec::new();
        for wi in 0..4 {
            let w = writer.clone();
            tasks.push(tokio::spawn(async move {
                for ai in 0..3 {
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
                    if ai == 2 {
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
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "{:#?}", report.problems);
        assert!(env.rt.failed_batches().is_empty());
        for wi in 0..4 {
            assert_eq!(descriptions(&env, &format!("w{wi}a0")).await.len(), 8);
            assert!(partition(&env, &format!("APP#w{wi}a2")).await.is_empty());
        }
        // The times the writers' clock gives the applications differ
        // between runs (each writer's clock starts at its start).
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
        env.engine.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_commits_fail_records_that_succeed_on_redelivery_alike() {
    {
        // 2 SDK attempts, no extra backoff: 3 throttles outlast one invocation.
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
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "{:#?}", report.problems);
        check("tracker-throttled", &table_json(&table(&env).await));
        env.engine.stop().await;
    }
}
