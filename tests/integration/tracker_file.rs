//! `models/tracker.yaml` (a model file with a `history:` block) against the
//! Rust tracker: the demo through both ends ends in the same table, the same
//! `verify` and the same processor writes; the pure fold rules agree change
//! by change; and the adoption, backfill and replay races of the tracker's
//! own tests (history_adoption.rs, backfill.rs) end alike through both ends.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Utc;
use jobstream::tools::backfill::ScanOptions;
use lambda_runtime::{Context, LambdaEvent};
use shared::change::{Change, ChangeKind, Origin, SequenceNumber};
use shared::engine::fold::{FoldRules, FoldState, Restated};
use shared::item::{key_of, n, s, Item, ItemExt};
use shared::models::tracker::keys;
use shared::models::tracker::scenario::{play, Clock};
use shared::models::tracker::writer::{application, stage};

use crate::support::{descriptions, env_with, partition, raw_records, Env};

fn tracker_file() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tracker.yaml"
    ))
}

/// One end: the Rust tracker (`false`) or its file (`true`).
async fn end(file: bool) -> Env {
    env_with(|o| {
        if file {
            o.model_file = Some(tracker_file());
        }
    })
    .await
}

#[test]
fn the_tracker_file_declares_what_the_rust_model_deploys() {
    shared::file::check(&tracker_file()).expect("checks");
    let rust = shared::models::find("tracker").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(tracker_file())).expect("loads");
    assert_eq!(file.table, rust.table);
    assert_eq!(file.stream_defs(), rust.stream_defs());
    let (rf, ff) = (rust.fold.expect("a fold"), file.fold.expect("a fold"));
    assert_eq!(ff.processor, rf.processor);
    assert_eq!(ff.filter, rf.filter);
}

fn change(kind: ChangeKind, old: Option<Item>, new: Option<Item>, ev: &str) -> Change {
    let image = new.as_ref().or(old.as_ref()).expect("one image");
    Change {
        event_id: ev.into(),
        sequence_number: SequenceNumber::parse("1").expect("valid"),
        kind,
        origin: Origin::User,
        keys: key_of(image, &["PK", "SK"]),
        old,
        new,
        at: Utc::now(),
    }
}

fn with(mut item: Item, attrs: &[(&str, AttributeValue)]) -> Item {
    for (k, v) in attrs {
        item.insert(k.to_string(), v.clone());
    }
    item
}

/// Every change the tracker's descriptions tell apart, in one sequence.
fn changes() -> Vec<Change> {
    use ChangeKind::*;
    let at = "2026-01-01T00:00:00.000Z";
    let a = with(
        application("a", "Acme", "Engineer", "applied", at),
        &[("salaryMin", n(100)), ("notes", AttributeValue::Null(true))],
    );
    let b = with(
        a.clone(),
        &[
            ("status", s("interviewing")),
            ("notes", s("call back")),
            ("companyName", s("Acme Inc")),
            ("skillsMatch", n(4)),
            ("companyCategory", s("ai")),
        ],
    );
    let c = with(b.clone(), &[("isArchived", AttributeValue::Bool(true))]);
    let d = with(
        b.clone(),
        &[
            ("updatedAt", s("2027-01-01T00:00:00.000Z")),
            ("GSI1PK", s("x")),
            ("historySequence", n(4)),
        ],
    );
    let s1 = stage("a", "s1", "Phone screen", 1);
    let s1b = with(s1.clone(), &[("name", s("Onsite")), ("notes", s("n"))]);
    let s2 = stage("a", "s0", "First", 1);
    let s3 = with(stage("a", "s3", "Zero", 0), &[("performanceRating", n(5))]);
    let bad = with(a.clone(), &[("status", s("ghosted"))]);
    let bad_stage = with(stage("a", "s9", "X", 1), &[("order", n(-1))]);
    let mut long = stage("a", "s8", "X", 1);
    long.insert("name".into(), s("n".repeat(101)));
    vec![
        change(Insert, None, Some(a.clone()), "e1"),
        change(Modify, Some(a.clone()), Some(b.clone()), "e2"),
        change(Modify, Some(b.clone()), Some(c.clone()), "e3"),
        change(Modify, Some(c), Some(b.clone()), "e4"),
        change(Modify, Some(b.clone()), Some(d.clone()), "e5"),
        change(Insert, None, Some(s1.clone()), "e6"),
        change(Insert, None, Some(s2), "e7"),
        change(Insert, None, Some(s3), "e8"),
        change(Modify, Some(s1.clone()), Some(s1b.clone()), "e9"),
        change(Modify, Some(s1b.clone()), Some(s1b.clone()), "e10"),
        change(Modify, Some(d.clone()), Some(bad), "e11"),
        change(Insert, None, Some(bad_stage), "e12"),
        change(Insert, None, Some(long), "e13"),
        change(Remove, Some(s1b), None, "e14"),
        change(Remove, Some(d.clone()), None, "e15"),
        change(Remove, Some(s1), None, "e16"),
        change(Insert, None, Some(a), "e17"),
    ]
}

/// A value with its maps' keys sorted (items are hash maps).
fn canon(v: &AttributeValue) -> String {
    match v {
        AttributeValue::M(m) => item_text(m),
        AttributeValue::L(l) => format!("[{}]", l.iter().map(canon).collect::<Vec<_>>().join(", ")),
        other => format!("{other:?}"),
    }
}

fn item_text(i: &Item) -> String {
    let sorted: BTreeMap<&String, String> = i.iter().map(|(k, v)| (k, canon(v))).collect();
    format!("{sorted:?}")
}

fn state_text(st: &FoldState) -> String {
    let parts: BTreeMap<&String, String> =
        st.parts.iter().map(|(k, v)| (k, item_text(v))).collect();
    format!("seq {} deleted {} parts {parts:?}", st.seq, st.deleted)
}

/// A fold's outputs, errors as their kind.
fn run(rules: &dyn FoldRules, changes: &[Change]) -> Vec<String> {
    let mut st = FoldState::default();
    let mut out = Vec::new();
    for c in changes {
        let agg = rules.aggregate(c).map(|a| a.unwrap_or_default());
        out.push(format!(
            "aggregate {agg:?} starts {} removes {} adoption {:?}",
            rules.starts_aggregate(c),
            rules.removes_root(c),
            rules.adoption_record(c)
        ));
        if rules.removes_root(c) {
            let c = rules.cascade("a", &st);
            let deletes: Vec<String> = c
                .deletes
                .iter()
                .map(|d| {
                    format!(
                        "{} {:?}",
                        item_text(&d.key),
                        d.unchanged.as_ref().map(item_text)
                    )
                })
                .collect();
            out.push(format!("cascade {deletes:?}"));
        }
        let mut absorbed = st.clone();
        out.push(format!(
            "absorb {:?}",
            rules.absorb(&mut absorbed, c).map_err(|e| e.kind())
        ));
        match rules.fold("a", &mut st, c) {
            Ok(o) => out.push(format!(
                "entries {:?} notices {}",
                o.entries.iter().map(item_text).collect::<Vec<_>>(),
                o.notices.len()
            )),
            Err(e) => out.push(format!("error {}", e.kind())),
        }
        out.push(format!("state {}", state_text(&st)));
    }
    let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("a time");
    let items: Vec<Item> = changes.iter().filter_map(|c| c.new.clone()).collect();
    out.push(format!(
        "table state {}",
        state_text(&rules.table_state(&items))
    ));
    let adopted = rules.adopt("a", &items[..1], at, "tok");
    if let shared::engine::fold::Adoption::Entry { entry, state, id } = adopted {
        out.push(format!(
            "adopt {} {} {id}",
            state_text(&state),
            item_text(&entry)
        ));
        let mut later = state.clone();
        let s5 = stage("a", "s5", "Late", 3);
        rules
            .absorb(
                &mut later,
                &change(ChangeKind::Insert, None, Some(s5.clone()), "x"),
            )
            .unwrap();
        let restated = match rules.restate(&entry, &later) {
            Restated::Rewrite(e) => format!("rewrite {}", item_text(&e)),
            other => format!("{other:?}"),
        };
        out.push(format!("restate {restated}"));
        out.push(format!("restate same {:?}", rules.restate(&entry, &state)));
        out.push(format!(
            "restate gone {:?}",
            rules.restate(&entry, &FoldState::default())
        ));
        let part = later.parts.get("STAGE#s5");
        out.push(format!(
            "correct {:?}",
            rules
                .correct_entry(&entry, "STAGE#s5", part)
                .as_ref()
                .map(item_text)
        ));
        let (key, attr) = rules.sequence_mirror("a").expect("a mirror");
        out.push(format!("mirror {} {attr}", item_text(&key)));
        out.push(format!(
            "entry key {}",
            item_text(&rules.entry_key("a", 12))
        ));
        out.push(format!("partition {:?}", rules.partition("a")));
    }
    out
}

#[test]
fn the_file_fold_agrees_with_the_rust_fold_change_by_change() {
    let rust = shared::models::find("tracker").expect("registered");
    let file = shared::models::load(&shared::models::Source::File(tracker_file())).expect("loads");
    let cs = changes();
    let (a, b) = (
        run(rust.fold.as_ref().unwrap().rules.as_ref(), &cs),
        run(file.fold.as_ref().unwrap().rules.as_ref(), &cs),
    );
    // The state's part of the root is named `APP` by the Rust fold and
    // `@root` by the file's (ledger-internal, never in the table).
    let b: Vec<String> = b
        .iter()
        .map(|l| l.replace("\"@root\"", "\"APP\""))
        .collect();
    assert!(a.len() > 60, "{}", a.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "line {i}");
    }
    assert_eq!(a.len(), b.len());
}

/// A table with what differs between two runs blanked out: entry ids (from
/// stream event ids) and the times the stream gives entries.
fn normalized(items: Vec<Item>) -> BTreeMap<(String, String), BTreeMap<String, AttributeValue>> {
    items
        .into_iter()
        .map(|i| {
            let pk = i.s("PK").unwrap_or_default().to_string();
            let sk = i.s("SK").unwrap_or_default().to_string();
            let mut attrs: BTreeMap<String, AttributeValue> = i.into_iter().collect();
            if sk.starts_with("HIST#") {
                attrs.insert("id".into(), s("ID"));
                attrs.insert("createdAt".into(), s("T"));
            }
            // The file stamps the counter it creates with its entity
            // (`type`); the Rust tracker's META/COUNT has no type.
            if pk == "META" {
                attrs.remove("type");
            }
            ((pk, sk), attrs)
        })
        .collect()
}

async fn table(env: &Env) -> BTreeMap<(String, String), BTreeMap<String, AttributeValue>> {
    normalized(
        jobstream::tools::verify::scan_all(&env.rt.dynamodb, &env.rt.config.table)
            .await
            .expect("scan"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_demo_through_both_ends_gives_the_same_table_verify_and_writes() {
    let demo = shared::models::find("tracker")
        .expect("registered")
        .demo
        .expect("tracker demo");
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = end(file).await;
        let diffs = demo(&mut env.rt).await.expect("demo runs");
        assert!(diffs.is_empty(), "file={file}: {diffs:#?}");
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        out.push((
            table(&env).await,
            env.rt.processor_writes(),
            report.render(),
            report.bad_input.len(),
        ));
        env.engine.stop().await;
    }
    let (rust, file) = (&out[0], &out[1]);
    assert!(rust.0.len() > 10, "{}", rust.0.len());
    assert_eq!(
        file.0, rust.0,
        "the same items, attribute for attribute (entry ids and times aside)"
    );
    assert_eq!(file.1, rust.1, "the same processor writes");
    assert_eq!(file.2, rust.2, "the same verify report");
    assert_eq!(file.3, rust.3, "the same bad input");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scenario_with_bad_input_ends_alike_through_both_ends() {
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = end(file).await;
        play(&env.writer).await.expect("scenario");
        // Bad input next to good: an unknown status, a negative order.
        let mut t = Clock::new();
        env.writer
            .create_application("bad", "Acme", "Engineer", "ghosted", &t.next())
            .await
            .unwrap();
        env.writer
            .put(with(stage("bad", "s", "X", 1), &[("order", n(-1))]))
            .await
            .unwrap();
        env.writer
            .create_application("ok", "Initech", "Dev", "applied", &t.next())
            .await
            .unwrap();
        env.writer.add_stage("ok", "s", "Phone", 1).await.unwrap();
        env.rt.drain().await.unwrap();
        out.push((table(&env).await, descriptions(&env, "ok").await));
        env.engine.stop().await;
    }
    assert_eq!(
        out[1].1,
        [
            "Created application Initech - Dev",
            "Added interview stage \"Phone\""
        ]
    );
    // The Rust tracker counts an application whose status is invalid in
    // META/COUNT (only `isArchived` must be readable) and the file does not
    // (a file's item is valid whole or bad input): that item and the count
    // aside, the tables are the same.
    let strip = |t: &BTreeMap<(String, String), BTreeMap<String, AttributeValue>>| {
        let mut t = t.clone();
        t.remove(&("META".to_string(), "COUNT".to_string()));
        t
    };
    assert_eq!(strip(&out[1].0), strip(&out[0].0));
}

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

/// Runs `scenario` through both ends; each must end verified, and both in
/// the same table with the same histories.
async fn both<F, Fut>(scenario: F) -> Vec<(Vec<String>, Vec<Vec<String>>)>
where
    F: Fn(Env) -> Fut,
    Fut: std::future::Future<Output = (Env, &'static str)>,
{
    let mut out = Vec::new();
    let mut tables = Vec::new();
    for file in [false, true] {
        let (env, app) = scenario(end(file).await).await;
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        out.push((descriptions(&env, app).await, stage_names(&env, app).await));
        tables.push(table(&env).await);
        env.engine.stop().await;
    }
    assert_eq!(out[1], out[0], "the same history through both ends");
    assert_eq!(tables[1], tables[0], "the same table through both ends");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_then_modify_then_backfill_through_both_ends() {
    let out = both(|env| async move {
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
    })
    .await;
    assert_eq!(out[1].0, ["Imported", "Updated Status"]);
    assert_eq!(out[1].1[0], ["Screen", "Onsite"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_racing_a_lagging_consumer_through_both_ends() {
    let out = both(|env| async move {
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
    })
    .await;
    assert_eq!(out[1].0, ["Imported", "Updated interview stage \"Screen\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adoption_racing_a_change_through_both_ends() {
    let out = both(|mut env| async move {
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
    })
    .await;
    assert_eq!(out[1].0, ["Imported"]);
    assert_eq!(out[1].1, [["Screen"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_application_shows_the_stages_the_table_held_before_the_stream_through_both_ends()
{
    let out = both(|env| async move {
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
        out[1].0,
        [
            "Created application Acme - Engineer",
            "Added interview stage \"Onsite\"",
            "Updated interview stage \"Screen\"",
            "Removed interview stage \"Take-home\"",
            "Updated Notes",
        ]
    );
    assert_eq!(out[1].1[0], ["Screen", "Take-home"]);
    assert_eq!(out[1].1[4], ["Screen", "Onsite"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_recreated_before_the_consumer_saw_either_through_both_ends() {
    let out = both(|env| async move {
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
    })
    .await;
    assert_eq!(
        out[1].0,
        [
            "Created application Globex - Manager",
            "Added interview stage \"New screen\"",
            "Added interview stage \"Onsite\""
        ]
    );
    assert!(out[1].1[0].is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_loaded_without_processors_is_the_same_after_backfill_through_both_ends() {
    let out = both(|mut env| async move {
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
    })
    .await;
    assert_eq!(out[1].0, ["Imported", "Updated Status"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tracker_scenario_file_plays_alike_through_both_ends() {
    let path = tracker_file().with_file_name("tracker.scenario.yaml");
    let scenario = shared::file::scenario::Scenario::read(&path).expect("scenario reads");
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = end(file).await;
        let diffs = shared::file::scenario::play(&mut env.rt, &scenario, &["PK", "SK"])
            .await
            .expect("plays");
        assert!(diffs.is_empty(), "file={file}: {diffs:#?}");
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        out.push((table(&env).await, env.rt.processor_writes()));
        env.engine.stop().await;
    }
    assert_eq!(
        out[1], out[0],
        "the same table and writes through both ends"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_the_same_history_drift_through_both_ends_and_repairs_it() {
    let path = tracker_file().with_file_name("tracker.scenario.yaml");
    let scenario = shared::file::scenario::Scenario::read(&path).expect("scenario reads");
    let mut out = Vec::new();
    for file in [false, true] {
        let mut env = end(file).await;
        let diffs = shared::file::scenario::play(&mut env.rt, &scenario, &["PK", "SK"])
            .await
            .expect("plays");
        assert!(diffs.is_empty(), "file={file}: {diffs:#?}");
        let db = &env.rt.dynamodb;
        let t = &env.rt.config.table;
        let key = |pk: &str, sk: &str| -> Item {
            [("PK".to_string(), s(pk)), ("SK".to_string(), s(sk))].into()
        };
        // A lost entry, a mirror behind, an entry of a deleted application
        // left behind, and one change applied twice.
        db.delete_item()
            .table_name(t)
            .set_key(Some(key("APP#acme", "HIST#00000002")))
            .send()
            .await
            .unwrap();
        db.update_item()
            .table_name(t)
            .set_key(Some(key("APP#globex", "APP#globex")))
            .update_expression("SET historySequence = :n")
            .expression_attribute_values(":n", n(1))
            .send()
            .await
            .unwrap();
        let orphan = with(key("APP#gone", "HIST#00000001"), &[("sequence", n(1))]);
        db.put_item()
            .table_name(t)
            .set_item(Some(orphan))
            .send()
            .await
            .unwrap();
        let first = partition(&env, "APP#acme")
            .await
            .into_iter()
            .find(|i| i.s("SK").ok() == Some("HIST#00000003"));
        let twice = with(
            first.expect("entry 3"),
            &[("SK", s("HIST#00000006")), ("sequence", n(6))],
        );
        db.put_item()
            .table_name(t)
            .set_item(Some(twice))
            .send()
            .await
            .unwrap();
        let report = env.rt.verify().await.expect("verify");
        // The Rust tracker also checks each entry against the previous one
        // by its description's wording (`transition_error`): the file's
        // check has no such rule (descriptions are templates).
        let comparable = |problems: &[String]| -> Vec<String> {
            let mut v: Vec<String> = problems
                .iter()
                .filter(|p| !p.contains("does not match the change between the snapshots"))
                .cloned()
                .collect();
            v.sort();
            v
        };
        let found = comparable(&report.problems);
        let repaired = jobstream::tools::verify::repair(&env.rt.processors, &report)
            .await
            .expect("repairs");
        let after = env.rt.verify().await.expect("verify");
        let left = comparable(&after.problems);
        out.push((found, repaired, left));
        env.engine.stop().await;
    }
    assert!(out[0].0.len() >= 4, "{:#?}", out[0].0);
    assert_eq!(out[1].0, out[0].0, "the same findings");
    assert_eq!(out[1].1, out[0].1, "the same repairs");
    assert_eq!(out[1].2, out[0].2, "the same drift left after repair");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_while_processors_run_end_alike_through_both_ends() {
    let mut tables = Vec::new();
    for file in [false, true] {
        let Env { engine, rt, writer } = end(file).await;
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
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        assert!(env.rt.failed_batches().is_empty());
        for wi in 0..4 {
            assert_eq!(
                descriptions(&env, &format!("w{wi}a0")).await.len(),
                8,
                "file={file}"
            );
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
        tables.push(t);
        env.engine.stop().await;
    }
    assert_eq!(tables[1], tables[0], "the same table through both ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_commits_fail_records_that_succeed_on_redelivery_alike_through_both_ends() {
    let mut tables = Vec::new();
    for file in [false, true] {
        // 2 SDK attempts, no extra backoff: 3 throttles outlast one invocation.
        let (crate::support::ModelEnv { engine, mut rt }, proxy) =
            crate::support::model_env_behind_proxy("tracker", |o| {
                o.max_attempts = 2;
                if file {
                    o.model_file = Some(tracker_file());
                }
            })
            .await;
        let writer = shared::models::tracker::writer::TrackerWriter::new(
            rt.dynamodb.clone(),
            &rt.config.table,
        );
        play(&writer).await.expect("scenario");
        proxy.inject(jobstream::faults::Fault::throttle("TransactWriteItems", 3));
        rt.drain().await.unwrap();
        assert_eq!(proxy.injected(), 3, "file={file}");
        let failed: u64 = ["history", "derive"]
            .iter()
            .map(|p| {
                rt.stream_processor(p)
                    .metrics()
                    .get(shared::metrics::names::FAILED_RECORD)
            })
            .sum();
        assert!(failed >= 1, "file={file}: a record was reported as failed");
        assert!(
            rt.failed_batches().is_empty(),
            "and succeeded on redelivery"
        );
        let env = Env { engine, rt, writer };
        let report = env.rt.verify().await.expect("verify");
        assert!(report.is_clean(), "file={file}: {:#?}", report.problems);
        tables.push(table(&env).await);
        env.engine.stop().await;
    }
    assert_eq!(tables[1], tables[0], "the same table through both ends");
}
