//! Backfill and verify: adopting a table that already holds data, and
//! proving (and repairing) the derived data.

use std::sync::Arc;

use crate::apps::IMPORTED;
use crate::apps::{play, Clock};
use jobstream::tools::backfill::{BackfillTotals, ScanOptions, ScanReport};
use jobstream::tools::verify::repair;
use shared::item::{n, s, ItemExt};

use crate::items::{assert_clean, delete, item, key, partition, put, update};
use crate::support::{count, descriptions, env, Env};

/// The tracker backfill over the test's table and processors.
async fn run_backfill(
    env: &Env,
    opts: &ScanOptions,
    dry_run: bool,
) -> (ScanReport, Arc<BackfillTotals>) {
    jobstream::tools::backfill::backfill(
        &env.rt.dynamodb,
        &env.rt.config,
        &env.rt.processors,
        opts,
        dry_run,
    )
    .await
    .expect("backfill runs")
}

async fn backfill(env: &Env, segments: u32, dry_run: bool) -> (u64, u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let opts = ScanOptions {
        segments,
        ..Default::default()
    };
    let (report, t) = run_backfill(env, &opts, dry_run).await;
    assert!(report.scanned > 0);
    (
        t.table_writes.load(Relaxed),
        t.ledger_writes.load(Relaxed),
        t.imported.load(Relaxed),
        report.scanned,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_loaded_without_processors_is_exact_after_backfill_and_a_second_run_writes_nothing()
{
    let env = env().await;
    // Loaded while no processor ran (the stream is never read in this test).
    play(&env.writer).await.unwrap();
    assert_eq!(count(&env).await, None);
    let dry = backfill(&env, 3, true).await;
    assert!(dry.2 == 3, "dry run counts the imports: {dry:?}");
    assert_eq!(count(&env).await, None, "dry run writes nothing");
    assert!(descriptions(&env, "acme").await.is_empty());

    let (table_writes, ledger_writes, imported, _) = backfill(&env, 3, false).await;
    // Three applications remain: a projection each, and META/COUNT set once
    // per scanned page that counted (pages of segments run concurrently).
    assert_eq!(imported, 3, "three applications remain");
    assert!((4..=6).contains(&table_writes), "{table_writes}");
    assert!(ledger_writes > 0);
    assert_eq!(count(&env).await, Some(2));
    for id in ["acme", "globex", "initech"] {
        assert_eq!(descriptions(&env, id).await, [IMPORTED]);
    }
    assert_clean(&env.rt).await;
    // Stages of acme are in the imported snapshot.
    let acme = partition(&env, "APP#acme").await;
    let entry = acme
        .iter()
        .find(|i| i.s("SK").unwrap() == "HIST#00000001")
        .unwrap();
    let aws_sdk_dynamodb::types::AttributeValue::M(snap) = &entry["snapshot"] else {
        panic!("map")
    };
    assert!(
        matches!(&snap["interviewStages"], aws_sdk_dynamodb::types::AttributeValue::L(l) if l.len() == 1)
    );

    let again = backfill(&env, 2, false).await;
    assert_eq!(
        (again.0, again.1, again.2),
        (0, 0, 0),
        "second run changes nothing"
    );
    assert_eq!(count(&env).await, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_while_writes_and_processors_run_ends_exact() {
    let env = env().await;
    // Some data exists before the processors start.
    for i in 0..10 {
        env.writer
            .create(
                &format!("old{i}"),
                "Old Co",
                "Role",
                "2026-10-01T00:00:00.000Z",
            )
            .await;
    }
    let Env { engine, rt, writer } = env;
    let (client, config) = (rt.dynamodb.clone(), rt.config.clone());
    let processors = std::sync::Arc::new(shared::lambda::Processors::new(
        &rt.model,
        &config,
        rt.processors.store.clone(),
        None,
    ));
    let runner = crate::support::run_in_background(rt);
    let writers = {
        let w = writer.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                let id = format!("new{i}");
                let mut t = Clock::new();
                w.create(&id, "New Co", "Role", &t.next()).await;
                w.add_stage(&id, "s", "Screen", 1).await.unwrap();
                w.set_archived(&id, i % 2 == 0, &t.next()).await.unwrap();
                w.set_archived(&format!("old{i}"), i % 3 == 0, &t.next())
                    .await
                    .unwrap();
            }
        })
    };
    let opts = ScanOptions {
        segments: 4,
        ..Default::default()
    };
    let backfills = (0..2).map(|_| {
        let (client, config, processors, opts) = (
            client.clone(),
            config.clone(),
            processors.clone(),
            opts.clone(),
        );
        tokio::spawn(async move {
            jobstream::tools::backfill::backfill(&client, &config, &processors, &opts, false)
                .await
                .unwrap()
        })
    });
    for b in backfills.collect::<Vec<_>>() {
        b.await.unwrap();
    }
    writers.await.unwrap();
    let mut rt = runner.stop().await;
    rt.drain().await.unwrap();
    let env = Env { engine, rt, writer };
    // active: old i with i % 3 != 0 (6), new i with i odd (5)
    assert_eq!(count(&env).await, Some(11));
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_each_injected_drift_and_repair_removes_it() {
    let mut env = env().await;
    play(&env.writer).await.unwrap();
    env.rt.drain().await.unwrap();
    assert!(env.rt.verify().await.unwrap().is_clean());
    // Wrong count, stale GSI key, missing history entry, a leftover stage.
    let mut wrong = key("META", "COUNT");
    wrong.insert("count".into(), n(99));
    put(&env, wrong).await;
    let stale = [(":x", s("STATUS#applied#ARCHIVED#0"))];
    update(&env, key("APP#acme", "APP#acme"), "SET GSI1PK = :x", &stale).await;
    delete(&env, key("APP#acme", "HIST#00000003")).await;
    // A deleted application's stage and entry its cascade left behind (a
    // stage alone would wait for its application: no drift).
    put(
        &env,
        item(&[("PK", "APP#gone"), ("SK", "STAGE#x"), ("id", "x")]),
    )
    .await;
    put(
        &env,
        item(&[
            ("PK", "APP#gone"),
            ("SK", "HIST#00000001"),
            ("sequence", "1"),
        ]),
    )
    .await;

    let report = env.rt.verify().await.unwrap();
    assert_eq!(report.kinds["counter"].wrong, 1, "{:#?}", report.problems);
    assert_eq!(report.kinds["projection"].wrong, 1);
    assert_eq!(report.kinds["history-sequence"].missing, 1);
    assert_eq!(report.kinds["orphans"].extra, 2);
    assert!(report.kinds["projection"].samples[0].contains("APP#acme"));
    assert_eq!(report.problems.len(), 5, "{:#?}", report.problems);

    // Every repair goes through the live path: the reconcile, the counter
    // sync, the history's guarded writes.
    repair(&env.rt.processors, &report).await.unwrap();
    let after = env.rt.verify().await.unwrap();
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(count(&env).await, Some(2));
    let d = descriptions(&env, "acme").await;
    assert_eq!(d.len(), 7);
    assert!(d[2].contains("restored by jobstream verify"));
    // The repairs are ordinary writes: the processors see them and stay put.
    env.rt.drain().await.unwrap();
    assert!(env.rt.verify().await.unwrap().is_clean());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_resumes_from_its_checkpoint() {
    let env = env().await;
    for i in 0..30 {
        env.writer
            .create(&format!("a{i}"), "Co", "Role", "2026-10-01T00:00:00.000Z")
            .await;
    }
    let dir =
        std::env::temp_dir().join(format!("jobstream-ckpt-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("backfill.json");
    let opts = ScanOptions {
        segments: 3,
        page_size: 5,
        checkpoint: Some(file.clone()),
        ..Default::default()
    };
    let (first, t) = run_backfill(&env, &opts, false).await;
    // The scan may also meet the entries the backfill itself writes.
    assert!(first.scanned >= 30, "{}", first.scanned);
    assert_eq!(t.imported.load(std::sync::atomic::Ordering::Relaxed), 30);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(saved["segments"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["done"] == true));
    // Every segment is recorded as done: a rerun with the file scans nothing.
    let (again, _) = run_backfill(&env, &opts, false).await;
    assert_eq!(again.scanned, 0);
    assert_eq!(count(&env).await, Some(30));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The one-shot tools' numbers that became durations: `backfill --rate 0`
/// (or negative) panicked at its first page ("cannot convert float seconds
/// to Duration"), `verify --repair --settle` past what an `Instant` can
/// add panicked once drift was found. Both are usage errors (exit 2,
/// naming the flag), before any request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_or_a_settle_no_duration_can_hold_is_a_usage_error() {
    use crate::output_gone::{put_application, TABLE};
    use aws_sdk_dynamodb::Client;
    use jobstream::local::engine::{ensure_table, sdk_config};
    let engine = crate::support::start_engine().await;
    let endpoint = engine.endpoint();
    let client = Client::new(&sdk_config(Some(&endpoint), 3).await);
    let model = shared::models::find("tracker").expect("shipped");
    ensure_table(&client, &model.table, TABLE)
        .await
        .expect("table");
    ensure_table(
        &client,
        &shared::models::table::ledger(),
        "jobstream-ledger",
    )
    .await
    .expect("ledger");
    put_application(&client, "one", "applied").await;
    let tool =
        |args: Vec<String>| tokio::task::spawn_blocking(move || crate::support::jobstream(&args));
    let with = |args: &[&str]| -> Vec<String> {
        let common = ["--model", "tracker", "--endpoint", &endpoint];
        args.iter()
            .chain(common.iter())
            .map(|s| s.to_string())
            .collect()
    };
    for (args, flag) in [
        (with(&["backfill", "--rate", "0"]), "--rate"),
        (with(&["backfill", "--rate=-5"]), "--rate"),
        (with(&["backfill", "--rate", "NaN"]), "--rate"),
        (
            with(&["verify", "--repair", "--settle", "18446744073709551615"]),
            "--settle",
        ),
    ] {
        let out = tool(args.clone()).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

/// user10's #8: a bad input item met by a backfill is logged once (with
/// its key and reason) and counted once, however many of its rules'
/// aspects reject it (it was logged 3 times).
#[tokio::test]
async fn a_backfill_logs_and_counts_a_bad_input_item_once() {
    let (logs, _guard) = crate::support::Captured::start();
    let env = env().await;
    put(
        &env.rt,
        item(&[("PK", "WHAT#x"), ("SK", "Y"), ("type", "what")]),
    )
    .await;
    let (_, totals) = run_backfill(&env, &ScanOptions::default(), false).await;
    let logged = logs.text();
    let lines: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("backfill: bad input"))
        .collect();
    assert_eq!(lines.len(), 1, "{logged}");
    assert!(lines[0].contains("PK=WHAT#x, SK=Y"), "{logged}");
    assert_eq!(
        totals.bad_input.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    assert!(
        totals
            .line(false)
            .ends_with(", 1 bad input item(s) (logged)"),
        "{}",
        totals.line(false)
    );
}
