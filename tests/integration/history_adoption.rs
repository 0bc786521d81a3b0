//! The history fold where a real adopter meets it: a table that held data
//! before the stream was read, backfill next to a lagging consumer, verify's
//! repairs racing commits, an application deleted and re-created under the
//! same id before the consumer saw either (re-created in the batch of its
//! delete: tests/scenarios/tracker/), and a removal of an application with
//! many stages. Where the
//! compiled tracker ran the same race before it retired, the table must end
//! as it ended then (recorded, see [`crate::recorded`]).

use crate::apps::keys;
use crate::apps::Clock;
use crate::apps::IMPORTED;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::tools::backfill::ScanOptions;
use jobstream::tools::verify::{repair, scan_all};
use shared::item::{s, Item, ItemExt};

use super::tracker_recorded::table;
use crate::items::{assert_clean, begins, invoke, partition, records_event, sks};
use crate::recorded::{check, table_json};
use crate::support::{descriptions, entries, env, env_writer_clock, raw_records, Env};

/// Delivers the stream records from position `from` on to both processors
/// as one batch each (a consumer that lagged until now); returns the new
/// position. The processors' own writes are delivered by later calls.
async fn deliver(env: &Env, from: usize) -> usize {
    let records = raw_records(env).await;
    let to = records.len();
    if from < to {
        let event = records_event(&records[from..]);
        for name in ["history", "derive"] {
            let resp = invoke(env, name, &event).await.expect("handled");
            let failures = resp.batch_item_failures;
            assert!(failures.is_empty(), "a batch failed: {failures:?}");
        }
    }
    to
}

/// Delivers until the stream holds nothing new (the processors' own writes
/// included).
async fn settle(env: &Env, mut from: usize) -> usize {
    loop {
        let to = deliver(env, from).await;
        if to == from {
            return to;
        }
        from = to;
    }
}

/// `verify` over items as a (possibly racing) scan saw them.
async fn verify_scan(env: &Env, items: &[Item]) -> jobstream::tools::verify::Report {
    let ledger = scan_all(&env.rt.dynamodb, &env.rt.config.ledger_table)
        .await
        .unwrap();
    jobstream::tools::verify::verify_items(&env.rt.model, items, &ledger, chrono::Utc::now())
}

async fn backfill(env: &Env) -> u64 {
    let (_, totals) = crate::items::backfill(env, &ScanOptions::default()).await;
    totals.imported.load(std::sync::atomic::Ordering::Relaxed)
}

fn snapshot_of(entry: &Item) -> &Item {
    match entry.get("snapshot") {
        Some(AttributeValue::M(m)) => m,
        _ => panic!("entry without a snapshot: {entry:?}"),
    }
}

fn stage_names(entry: &Item) -> Vec<String> {
    match snapshot_of(entry).get("interviewStages") {
        Some(AttributeValue::L(l)) => l
            .iter()
            .map(|v| match v {
                AttributeValue::M(m) => m.s("name").unwrap_or_default().to_string(),
                _ => String::new(),
            })
            .collect(),
        _ => panic!("snapshot without stages"),
    }
}

/// `verify` is clean, and `app`'s descriptions, each entry's stage names and
/// the whole table are what the compiled tracker ended with in the same
/// race (the recording `name`).
async fn assert_recorded(env: &Env, name: &str, app: &str) {
    assert_clean(env).await;
    let stages: Vec<Vec<String>> = entries(env, app)
        .await
        .iter()
        .map(|e| match e.get("snapshot") {
            Some(AttributeValue::M(m)) if m.contains_key("interviewStages") => stage_names(e),
            Some(AttributeValue::M(_)) => vec!["no stages".to_string()],
            _ => vec!["no snapshot".to_string()],
        })
        .collect();
    check(
        name,
        &serde_json::json!({
            "descriptions": descriptions(env, app).await,
            "stages": stages,
            "table": table_json(&table(env).await),
        }),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_then_modify_then_backfill_starts_with_the_adoption_entry() {
    let (env, w, mut t) = env_writer_clock().await;
    // Before jobstream: an application with two stages.
    w.create("pre", "Acme", "Engineer", &t.next()).await;
    w.add_stage("pre", "s1", "Screen", 1).await.unwrap();
    w.add_stage("pre", "s2", "Onsite", 2).await.unwrap();
    let deployed = raw_records(&env).await.len();
    // Deployed; a change arrives before any backfill.
    w.set("pre", "notes", s("called back"), &t.next()).await;
    let at = settle(&env, deployed).await;
    assert_eq!(backfill(&env).await, 0, "the fold adopted it already");
    w.set("pre", "status", s("interviewing"), &t.next()).await;
    settle(&env, at).await;
    assert_eq!(
        descriptions(&env, "pre").await,
        [IMPORTED, "Updated Status"]
    );
    let e = entries(&env, "pre").await;
    assert_eq!(stage_names(&e[0]), ["Screen", "Onsite"]);
    assert_eq!(snapshot_of(&e[0]).s("notes").unwrap(), "called back");
    assert_eq!(snapshot_of(&e[0]).s("status").unwrap(), "applied");
    assert_eq!(stage_names(&e[1]), ["Screen", "Onsite"]);
    assert_eq!(snapshot_of(&e[1]).s("status").unwrap(), "interviewing");
    assert_recorded(&env, "tracker-adopt-then-modify-then-backfill", "pre").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_racing_a_lagging_consumer_neither_duplicates_nor_reapplies() {
    let (env, w, mut t) = env_writer_clock().await;
    // Written while the consumer lags (its stream position is 0).
    w.create("lag", "Acme", "Engineer", &t.next()).await;
    w.add_stage("lag", "s1", "Screen", 1).await.unwrap();
    assert_eq!(backfill(&env).await, 1);
    // A second backfill and the consumer reaching the older INSERTs, then
    // the import's entry: neither duplicates nor re-applies.
    assert_eq!(backfill(&env).await, 0);
    let at = settle(&env, 0).await;
    w.set_stage("lag", "s1", "isCompleted", AttributeValue::Bool(true))
        .await;
    // Redelivered from the start: skipped by the HEAD.
    settle(&env, 0).await;
    settle(&env, at).await;
    // The consumer reached the application's INSERT: its history starts
    // there, the backfill's adoption replaced (user9's FINDINGS #15; the
    // compiled tracker kept `Imported` and lost the creation).
    assert_eq!(
        descriptions(&env, "lag").await,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Screen\"",
            "Updated interview stage \"Screen\""
        ]
    );
    let e = entries(&env, "lag").await;
    assert!(stage_names(&e[0]).is_empty());
    assert_eq!(stage_names(&e[1]), ["Screen"]);
    assert_recorded(&env, "tracker-backfill-racing-a-lagging-consumer", "lag").await;
}

/// A backfill ahead of the consumer adopted the application and wrote its
/// `historySequence` (1); a stage added after that is read when the
/// consumer reaches the INSERT (its record in a later batch). The
/// backfill's mirror on the application's records is no sign that the read
/// came before them: the stage is its own entry, never part of `Created`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_added_after_a_premature_adoption_is_its_own_entry() {
    let (env, w, mut t) = env_writer_clock().await;
    w.create("pa", "Acme", "Engineer", &t.next()).await;
    w.add_stage("pa", "s1", "Screen", 1).await.unwrap();
    assert_eq!(backfill(&env).await, 1);
    w.add_stage("pa", "s2", "Onsite", 2).await.unwrap();
    let records = raw_records(&env).await;
    let cut = records
        .iter()
        .position(|r| r["dynamodb"]["Keys"]["SK"]["S"].as_str() == Some("STAGE#s2"))
        .expect("the stage's INSERT");
    let resp = invoke(&env, "history", &records_event(&records[..cut])).await;
    assert!(resp.unwrap().batch_item_failures.is_empty());
    settle(&env, cut).await;
    assert_eq!(
        descriptions(&env, "pa").await,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Screen\"",
            "Added interview stage \"Onsite\""
        ]
    );
    let e = entries(&env, "pa").await;
    assert!(stage_names(&e[0]).is_empty(), "{:?}", stage_names(&e[0]));
    assert_eq!(stage_names(&e[1]), ["Screen"]);
    assert_eq!(stage_names(&e[2]), ["Screen", "Onsite"]);
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adoption_racing_a_change_shows_the_state_at_its_own_position() {
    let (env, w, mut t) = env_writer_clock().await;
    w.create("race", "Acme", "Engineer", &t.next()).await;
    // It predates the stream: the consumer never reads its INSERT.
    let deployed = raw_records(&env).await.len();
    assert_eq!(backfill(&env).await, 1);
    w.add_stage("race", "s1", "Screen", 1).await.unwrap();
    // The import read the partition, then the stage was added before its
    // entry committed: the stream shows the stage's INSERT before the
    // entry's (positions swapped, sequence numbers kept ascending).
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
    assert!(fence < stage);
    let (fence_seq, stage_seq) = (
        records[fence]["dynamodb"]["SequenceNumber"].clone(),
        records[stage]["dynamodb"]["SequenceNumber"].clone(),
    );
    records.swap(fence, stage);
    records[fence]["dynamodb"]["SequenceNumber"] = fence_seq;
    records[stage]["dynamodb"]["SequenceNumber"] = stage_seq;
    let delivered = records.len();
    let resp = invoke(&env, "history", &records_event(&records[deployed..])).await;
    assert!(resp.unwrap().batch_item_failures.is_empty());
    settle(&env, delivered).await;
    let e = entries(&env, "race").await;
    assert_eq!(e.len(), 1, "{:?}", descriptions(&env, "race").await);
    // The stage was added before the entry's own position: it is part of
    // the adoption, not an entry of its own, and not lost.
    assert_eq!(stage_names(&e[0]), ["Screen"]);
    let mut env = env;
    env.rt.drain().await.unwrap();
    assert_recorded(&env, "tracker-an-adoption-racing-a-change", "race").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_racing_commits_never_overwrites_a_real_entry() {
    let (env, w, mut t) = env_writer_clock().await;
    w.create("r", "Acme", "Engineer", &t.next()).await;
    w.set("r", "notes", s("one"), &t.next()).await;
    w.set("r", "notes", s("two"), &t.next()).await;
    settle(&env, 0).await;
    // A scan that read the application (historySequence 3) but not entry 3,
    // committed meanwhile.
    let scanned: Vec<Item> = scan_all(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.s(keys::SK).ok() != Some(keys::hist_sk(3).as_str()))
        .collect();
    let report = verify_scan(&env, &scanned).await;
    assert_eq!(report.kinds["history-sequence"].missing, 1);
    repair(&env.rt.processors, &report).await.unwrap();
    assert_eq!(
        descriptions(&env, "r").await,
        [
            "Created application Acme - Engineer",
            "Updated Notes",
            "Updated Notes"
        ]
    );
    assert!(!entries(&env, "r").await[2].contains_key("restored"));
    // A partition whose application is being deleted (the cascade has not
    // run yet, the scan saw the application) gets no placeholders.
    let at = raw_records(&env).await.len();
    let scanned: Vec<Item> = scan_all(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap()
        .into_iter()
        .filter(|i| i.s(keys::SK).ok() != Some(keys::hist_sk(2).as_str()))
        .collect();
    w.delete_application("r").await.unwrap();
    settle(&env, at).await;
    let report = verify_scan(&env, &scanned).await;
    assert_eq!(report.kinds["history-sequence"].missing, 1);
    repair(&env.rt.processors, &report).await.unwrap();
    assert!(partition(&env, &keys::app_pk("r")).await.is_empty());
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_application_with_many_stages_commits_and_imports_do_too() {
    let (env, w, mut t) = env_writer_clock().await;
    for app in ["many", "big"] {
        w.create(app, "Acme", "Engineer", &t.next()).await;
        for i in 0..98 {
            w.add_stage(app, &format!("s{i:03}"), "Stage", i)
                .await
                .unwrap();
        }
    }
    // "big" is imported by backfill (its history was never read).
    let big_done = raw_records(&env).await.len();
    assert_eq!(backfill(&env).await, 2);
    let at = settle(&env, big_done).await;
    assert_eq!(descriptions(&env, "big").await, [IMPORTED]);
    for i in 0..24 {
        w.set("many", "notes", s(format!("n{i}")), &t.next()).await;
    }
    w.delete_application("many").await.unwrap();
    settle(&env, at).await;
    assert!(partition(&env, &keys::app_pk("many")).await.is_empty());
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_without_processors_then_writes_and_backfill_concurrently_end_exact() {
    let env = env().await;
    let mut t = Clock::new();
    for i in 0..8 {
        let id = format!("old{i}");
        env.writer.create(&id, "Old Co", "Role", &t.next()).await;
        env.writer.add_stage(&id, "s1", "Screen", 1).await.unwrap();
    }
    let Env { engine, rt, writer } = env;
    let (client, config) = (rt.dynamodb.clone(), rt.config.clone());
    let processors =
        shared::lambda::Processors::new(&rt.model, &config, rt.processors.store.clone(), None);
    let runner = crate::support::run_in_background(rt);
    let writes = {
        let w = writer.clone();
        tokio::spawn(async move {
            let mut t = Clock::new();
            for i in 0..8 {
                let old = format!("old{i}");
                w.set(&old, "notes", s("later"), &t.next()).await;
                w.add_stage(&old, "s2", "Onsite", 2).await.unwrap();
                let new = format!("new{i}");
                w.create(&new, "New Co", "Role", &t.next()).await;
                w.add_stage(&new, "s1", "Screen", 1).await.unwrap();
                if i % 3 == 0 {
                    w.delete_application(&old).await.unwrap();
                }
            }
        })
    };
    jobstream::tools::backfill::backfill(
        &client,
        &config,
        &processors,
        &ScanOptions::default(),
        false,
    )
    .await
    .unwrap();
    writes.await.unwrap();
    let mut rt = runner.stop().await;
    rt.drain().await.unwrap();
    let env = Env { engine, rt, writer };
    for i in 0..8 {
        // Created while the consumer runs: its history starts with its
        // creation, whether the backfill reached it first or not (user9's
        // FINDINGS #15: a backfill ahead of the consumer replaced it).
        let d = descriptions(&env, &format!("new{i}")).await;
        assert_eq!(
            d,
            [
                "Created application New Co - Role",
                "Added interview stage \"Screen\""
            ],
            "new{i}"
        );
        let old = descriptions(&env, &format!("old{i}")).await;
        if i % 3 == 0 {
            assert!(old.is_empty(), "old{i}: {old:?}");
        } else {
            // The backfill adopted it first, or the consumer folded its
            // INSERT first (the stream still holds it): one start, never two.
            let starts = old
                .iter()
                .filter(|d| *d == IMPORTED || d.starts_with("Created application"))
                .count();
            assert_eq!(starts, 1, "old{i}: {old:?}");
            assert!(
                old[0] == IMPORTED || old[0] == "Created application Old Co - Role",
                "old{i}: {old:?}"
            );
            assert!(old.len() <= 4, "old{i}: {old:?}");
        }
    }
    let items = scan_all(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap();
    let report = verify_scan(&env, &items).await;
    assert!(report.is_clean(), "{:#?}", report.problems);
}

/// Issue 17 defect 11, case 1: a stage the table held before the stream (no
/// record of it is ever delivered) and no application item; the application
/// is created later. Its "Created" entry shows the stage, as the table held
/// it right after the creation, even though a change of the stage and a new
/// stage raced the consumer's read of the partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_application_shows_the_stages_the_table_held_before_the_stream() {
    let (env, w, mut t) = env_writer_clock().await;
    // Before jobstream: an orphan stage, and one removed later.
    w.add_stage("orph", "s1", "Screen", 1).await.unwrap();
    w.add_stage("orph", "s3", "Take-home", 3).await.unwrap();
    let deployed = raw_records(&env).await.len();
    w.create("orph", "Acme", "Engineer", &t.next()).await;
    // After the creation, before the consumer reads the partition.
    w.add_stage("orph", "s2", "Onsite", 2).await.unwrap();
    w.set_stage("orph", "s1", "isCompleted", AttributeValue::Bool(true))
        .await;
    w.remove_stage("orph", "s3").await.unwrap();
    let at = settle(&env, deployed).await;
    assert_eq!(
        descriptions(&env, "orph").await,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Onsite\"",
            "Updated interview stage \"Screen\"",
            "Removed interview stage \"Take-home\"",
        ]
    );
    let e = entries(&env, "orph").await;
    assert_eq!(stage_names(&e[0]), ["Screen", "Take-home"]);
    assert_eq!(stage_names(&e[1]), ["Screen", "Onsite", "Take-home"]);
    assert_eq!(stage_names(&e[3]), ["Screen", "Onsite"]);
    let completed = |entry: &Item| match snapshot_of(entry).get("interviewStages") {
        Some(AttributeValue::L(l)) => match &l[0] {
            AttributeValue::M(m) => m.get("isCompleted").cloned(),
            _ => None,
        },
        _ => None,
    };
    assert_eq!(completed(&e[0]), Some(AttributeValue::Bool(false)));
    assert_eq!(completed(&e[2]), Some(AttributeValue::Bool(true)));
    // A later change shows the pre-stream stage too.
    w.set("orph", "notes", s("called"), &t.next()).await;
    settle(&env, at).await;
    let e = entries(&env, "orph").await;
    assert_eq!(e.len(), 5);
    assert_eq!(stage_names(&e[4]), ["Screen", "Onsite"]);
    assert_recorded(&env, "tracker-created-shows-earlier-stages", "orph").await;
}

/// Issue 17 defect 11, case 2: an application that existed before the
/// stream (with stages, one of them removed before the delete), deleted and
/// re-created under the same id before the consumer saw either change. The
/// new incarnation starts over: "Created" with none of the old stages, which
/// the delete's cascade removes; a reused stage id with new content stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_recreated_before_the_consumer_saw_either_starts_over() {
    let (env, w, mut t) = env_writer_clock().await;
    w.create("rc", "Acme", "Engineer", &t.next()).await;
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
    w.create("rc", "Globex", "Manager", &t.next()).await;
    w.add_stage("rc", "new", "New screen", 1).await.unwrap();
    w.add_stage("rc", "same", "Onsite", 2).await.unwrap();
    settle(&env, deployed).await;
    assert_eq!(
        descriptions(&env, "rc").await,
        [
            "Created application Globex - Manager",
            "Added interview stage \"New screen\"",
            "Added interview stage \"Onsite\""
        ]
    );
    let e = entries(&env, "rc").await;
    assert!(stage_names(&e[0]).is_empty(), "{:?}", stage_names(&e[0]));
    assert_eq!(stage_names(&e[2]), ["New screen", "Onsite"]);
    assert_eq!(
        sks(&begins(&env, &keys::app_pk("rc"), "STAGE#").await),
        ["STAGE#new", "STAGE#same"]
    );
    assert_eq!(backfill(&env).await, 0);
    assert_recorded(
        &env,
        "tracker-deleted-and-recreated-before-the-consumer-saw-either",
        "rc",
    )
    .await;
}

/// Case 1 across batches: the creation is delivered alone, its read of the
/// partition sees a stage that predates the stream (no record of it ever
/// comes) and one added after the creation (its record comes in the next
/// batch). The first joins every entry once a record after the read shows
/// it unchanged; the second is the change it is, never part of "Created".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_delivered_alone_settles_what_its_read_saw_in_later_batches() {
    let (env, w, mut t) = env_writer_clock().await;
    w.add_stage("cb", "p", "Prep", 0).await.unwrap();
    let deployed = raw_records(&env).await.len();
    w.create("cb", "Acme", "Engineer", &t.next()).await;
    w.add_stage("cb", "late", "Late", 5).await.unwrap();
    // The first batch holds the creation only.
    let records = raw_records(&env).await;
    let event = records_event(&records[deployed..deployed + 1]);
    let resp = invoke(&env, "history", &event).await;
    assert!(resp.unwrap().batch_item_failures.is_empty());
    settle(&env, deployed + 1).await;
    assert_eq!(
        descriptions(&env, "cb").await,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Late\""
        ]
    );
    let e = entries(&env, "cb").await;
    assert_eq!(stage_names(&e[0]), ["Prep"]);
    assert_eq!(stage_names(&e[1]), ["Prep", "Late"]);
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_loaded_without_processors_is_the_same_after_backfill() {
    let mut env = env().await;
    let w = &env.writer;
    let mut t = Clock::new();
    for i in 0..6 {
        let id = format!("old{i}");
        w.create(&id, "Old Co", "Role", &t.next()).await;
        w.add_stage(&id, "s1", "Screen", 1).await.unwrap();
        if i % 2 == 0 {
            w.set(&id, "isArchived", AttributeValue::Bool(true), &t.next())
                .await;
        }
    }
    let at = raw_records(&env).await.len();
    assert_eq!(backfill(&env).await, 6);
    assert_eq!(backfill(&env).await, 0, "a second run imports nothing");
    // The consumer then reads only what came after (the imports' own
    // writes): nothing re-applied.
    settle(&env, at).await;
    env.writer
        .set("old1", "status", s("rejected"), &t.next())
        .await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        descriptions(&env, "old1").await,
        [IMPORTED, "Updated Status"]
    );
    assert_recorded(
        &env,
        "tracker-a-table-loaded-without-processors-is-the-same-after-backfill",
        "old1",
    )
    .await;
}
