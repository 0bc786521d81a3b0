//! `models/tracker.yaml` (a model file with a `history:` block) against the
//! Rust tracker: the demo through both ends ends in the same table, the same
//! `verify` and the same processor writes; the pure fold rules agree change
//! by change; the scenario file plays alike; `verify` finds the same drift
//! (races and faults: tracker_file_races.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Utc;
use shared::change::{Change, ChangeKind, Origin, SequenceNumber};
use shared::engine::fold::{FoldRules, FoldState, Restated};
use shared::item::{key_of, n, s, Item, ItemExt};
use shared::models::tracker::scenario::{play, Clock};
use shared::models::tracker::writer::{application, stage};

use crate::support::{descriptions, env_with, partition, Env};

pub(crate) fn tracker_file() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tracker.yaml"
    ))
}

/// One end: the Rust tracker (`false`) or its file (`true`).
pub(crate) async fn end(file: bool) -> Env {
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

pub(crate) async fn table(
    env: &Env,
) -> BTreeMap<(String, String), BTreeMap<String, AttributeValue>> {
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
