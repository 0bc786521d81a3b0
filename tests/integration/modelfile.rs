//! A user's own model in a file (SPEC §8): `models/hr.yaml` run by the same
//! runtime as the Rust HR model ends in the same table, with the same
//! `verify` and the same processor writes, under bad input, faults,
//! redelivery and concurrent writers; `tables --model-file` gives the
//! definition the stack deploys.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_lambda_events::event::dynamodb::Event;
use jobstream::faults::{Fault, FaultProxy};
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use serde_json::json;
use shared::item::{s, Item, ItemExt};
use shared::metrics::names;
use shared::models::hr::entities::build;

use crate::support::{put, run_in_background};

const DAY: u64 = 24 * 3600 * 1000;
const T0: u64 = 1_767_600_000_000;

fn id(n: u64) -> String {
    build::ulid(T0 + n * DAY, u128::from(n) + 7)
}

fn hr_file() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models/hr.yaml"))
}

/// Which end runs: the Rust model or its file.
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    Rust,
    File,
}

struct Run {
    engine: LocalEngine,
    rt: Runtime,
    proxy: Option<FaultProxy>,
}

async fn start(end: End, faults: bool) -> Run {
    let engine = LocalEngine::start("127.0.0.1:0", None)
        .await
        .expect("engine starts");
    let mut opts = RuntimeOptions::new(
        "hr",
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    );
    if end == End::File {
        opts.model_file = Some(hr_file());
    }
    let proxy = if faults {
        let p = FaultProxy::start(
            engine
                .endpoint()
                .trim_start_matches("http://")
                .parse()
                .expect("socket address"),
        )
        .await
        .expect("proxy starts");
        opts.processor_endpoint = Some(p.endpoint());
        opts.max_attempts = 1;
        opts.backoff = shared::store::Backoff {
            max_times: 0,
            ..Default::default()
        };
        Some(p)
    } else {
        None
    };
    let rt = Runtime::start(opts).await.expect("runtime starts");
    Run { engine, rt, proxy }
}

async fn delete(rt: &Runtime, pk: &str, sk: &str) {
    rt.dynamodb
        .delete_item()
        .table_name(&rt.config.table)
        .key("PK", s(pk))
        .key("SK", s(sk))
        .send()
        .await
        .expect("delete");
}

async fn scan(rt: &Runtime) -> BTreeMap<(String, String), Item> {
    crate::support::table_by_key(rt).await
}

async fn assert_clean(rt: &Runtime) {
    let report = rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_file_runs_where_the_model_name_did() {
    let run = start(End::File, false).await;
    assert_eq!(run.rt.model.name, "hr-file");
    assert_eq!(run.rt.config.table, "acme-hr");
    assert_eq!(run.rt.model.stream_processors(), ["derive"]);
    // Loaded once per process: the same compiled model every time.
    let a = shared::file::load(&hr_file()).expect("loads");
    let b = shared::file::load(&hr_file()).expect("loads");
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.sha256.len(), 64);
    run.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hr_demo_through_both_ends_gives_the_same_table_verify_and_writes() {
    let demo = shared::models::find("hr")
        .expect("registered")
        .demo
        .expect("hr demo");
    let mut out = Vec::new();
    for end in [End::Rust, End::File] {
        let mut run = start(end, false).await;
        let diffs = demo(&mut run.rt).await.expect("demo runs");
        assert!(diffs.is_empty(), "{end:?}: {diffs:#?}");
        assert_clean(&run.rt).await;
        let report = run.rt.verify().await.expect("verify");
        out.push((
            scan(&run.rt).await,
            run.rt.processor_writes(),
            report.render(),
            report.bad_input.len(),
        ));
        run.engine.stop().await;
    }
    let (rust, file) = (&out[0], &out[1]);
    assert!(!rust.0.is_empty());
    assert_eq!(file.0, rust.0, "the same items, attribute for attribute");
    assert_eq!(file.1, rust.1, "the same processor writes");
    assert_eq!(file.2, rust.2, "the same verify report");
    assert_eq!(file.3, rust.3, "the same bad input");
}

/// Writes with every kind of bad input between good ones, on one
/// organisation.
async fn write_with_bad_input(rt: &Runtime) {
    let (org, d1, d2) = (id(1), id(2), id(3));
    for d in [&d1, &d2] {
        put(rt, build::dept(&org, d, "Dept", &id(99))).await;
    }
    let emp = |e: &str, d: &str| build::emp(&org, e, &format!("{e}@Acme.co"), "E", d);
    put(rt, emp(&id(10), &d1)).await;
    // Bad: an id that is not a ULID, a missing attribute, a wrong type,
    // an invalid enum, keys that do not match, a key of no entity.
    put(rt, emp("E-11", &d1)).await;
    let mut missing = emp(&id(12), &d1);
    missing.remove("lastName");
    put(rt, missing).await;
    let mut wrong = emp(&id(13), &d1);
    wrong.insert("email".into(), shared::item::n(5));
    put(rt, wrong).await;
    let mut enum_ = emp(&id(14), &d1);
    enum_.insert("status".into(), s("on-leave"));
    put(rt, enum_).await;
    let mut moved_key = emp(&id(15), &d1);
    moved_key.insert("orgId".into(), s(id(5)));
    put(rt, moved_key).await;
    put(
        rt,
        [("PK".to_string(), s("USER#1")), ("SK".to_string(), s("X"))].into(),
    )
    .await;
    // Good ones still take effect: a move, a deactivation, a job opened and
    // closed, an application, a delete.
    put(rt, emp(&id(16), &d1)).await;
    put(rt, emp(&id(10), &d2)).await;
    let mut inactive = emp(&id(16), &d1);
    inactive.insert("status".into(), s("inactive"));
    put(rt, inactive).await;
    put(
        rt,
        build::job(&org, &id(20), &id(21), &d1, "Engineer", "open"),
    )
    .await;
    put(
        rt,
        build::job(&org, &id(22), &id(23), &d2, "Designer", "open"),
    )
    .await;
    put(
        rt,
        build::job(&org, &id(22), &id(23), &d2, "Designer", "closed"),
    )
    .await;
    put(
        rt,
        build::app(&id(20), &id(24), &id(25), &id(10), "applied"),
    )
    .await;
    put(rt, emp(&id(17), &d2)).await;
    delete(rt, &format!("ORG#{org}"), &format!("EMP#{}", id(17))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_faults_and_redelivery_end_alike_through_both_ends() {
    let mut out = Vec::new();
    for end in [End::Rust, End::File] {
        let mut run = start(end, true).await;
        let proxy = run.proxy.take().expect("proxy");
        // Throttling on the processors' transactions: batches fail and are
        // retried by the local mapping, as Lambda would. (Adding a 5xx on
        // UpdateItem loses counter syncs in the engine, whatever the model:
        // see `a_5xx_counter_sync_after_a_throttled_transaction_is_not_lost`.)
        proxy.inject(Fault::throttle("TransactWriteItems", 2).after(1));
        write_with_bad_input(&run.rt).await;
        run.rt.drain().await.expect("drain");
        assert!(proxy.injected() >= 2, "{end:?}: faults were injected");
        assert!(
            run.rt.failed_batches().is_empty(),
            "{end:?}: retried, never given up: {:?}",
            run.rt.failed_batches()
        );
        assert_clean(&run.rt).await;
        let derive = run.rt.stream_processor("derive");
        let bad = derive.metrics().get(names::BAD_INPUT);
        assert!(
            bad >= 6,
            "{end:?}: each bad record counted (again when its batch is retried)"
        );
        let writes = run.rt.processor_writes();
        let before = scan(&run.rt).await;
        // Every record delivered again (Lambda's at-least-once): nothing
        // changes, nothing is written.
        let records = crate::support::records_of(&run.engine, &run.rt).await;
        let event: Event = serde_json::from_value(json!({ "Records": records })).expect("event");
        let resp = derive.handle(event).await.expect("handled");
        assert!(resp.batch_item_failures.is_empty(), "{end:?}");
        run.rt.drain().await.expect("drain");
        assert_eq!(
            scan(&run.rt).await,
            before,
            "{end:?}: redelivery changes nothing"
        );
        assert_eq!(
            run.rt.processor_writes(),
            writes,
            "{end:?}: and writes nothing"
        );
        assert_clean(&run.rt).await;
        out.push((before, bad));
        run.engine.stop().await;
    }
    assert_eq!(out[1].0, out[0].0, "the same table through both ends");
    assert_eq!(out[1].1, out[0].1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_end_exact_and_alike_through_both_ends() {
    let mut out = Vec::new();
    for end in [End::Rust, End::File] {
        let run = start(end, false).await;
        let (org, depts) = (id(1), [id(2), id(3), id(4)]);
        for d in &depts {
            put(&run.rt, build::dept(&org, d, "Dept", &id(99))).await;
        }
        let client = run.rt.dynamodb.clone();
        let table = run.rt.config.table.clone();
        let bg = run_in_background(run.rt);
        // Four writers, each moving its own employees between departments
        // and (de)activating them while the processors run.
        let writers: Vec<_> = (0..4u64)
            .map(|w| {
                let (client, table, org, depts) =
                    (client.clone(), table.clone(), org.clone(), depts.clone());
                tokio::spawn(async move {
                    for step in 0..6u64 {
                        for e in 0..3u64 {
                            let emp = id(100 + w * 10 + e);
                            let dept = &depts[((w + e + step) % 3) as usize];
                            let mut item =
                                build::emp(&org, &emp, &format!("{emp}@acme.co"), "E", dept);
                            if (w + e + step) % 4 == 0 {
                                item.insert("status".into(), s("inactive"));
                            }
                            client
                                .put_item()
                                .table_name(&table)
                                .set_item(Some(item))
                                .send()
                                .await
                                .expect("put");
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
        let mut rt = bg.stop().await;
        rt.drain().await.expect("drain");
        assert_clean(&rt).await;
        let items = scan(&rt).await;
        // The last step (5) decides: headcount = active employees per dept.
        for (i, d) in depts.iter().enumerate() {
            let want = (0..4u64)
                .flat_map(|w| (0..3u64).map(move |e| (w, e)))
                .filter(|(w, e)| ((w + e + 5) % 3) as usize == i && (w + e + 5) % 4 != 0)
                .count();
            let dept = &items[&(format!("ORG#{org}"), format!("DEPT#{d}"))];
            assert_eq!(
                dept.opt_i64("headcount").expect("number"),
                Some(want as i64),
                "{end:?}: headcount of {d}"
            );
        }
        out.push(items);
        run.engine.stop().await;
    }
    assert_eq!(out[1], out[0], "the same table through both ends");
}

#[test]
fn tables_of_a_model_file_are_the_definition_of_its_rust_twin() {
    let file = shared::models::load(&shared::models::Source::File(hr_file())).expect("loads");
    let rust = shared::models::find("hr").expect("registered");
    let mut f = jobstream::tools::deploy::definitions_of(&[file]);
    let mut r = jobstream::tools::deploy::definitions_of(&[rust]);
    assert_eq!(f["defaultModel"], "hr-file");
    for d in [&mut f, &mut r] {
        let m = &mut d["models"][0];
        m["name"] = json!("-");
        m["about"] = json!("-");
        d["defaultModel"] = json!("-");
    }
    assert_eq!(
        f, r,
        "the stack deploys the file as it deploys the Rust model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hr_scenario_file_plays_alike_through_both_ends() {
    let path = hr_file().with_file_name("hr.scenario.yaml");
    let scenario = shared::file::scenario::Scenario::read(&path).expect("scenario reads");
    let mut out = Vec::new();
    for end in [End::Rust, End::File] {
        let mut run = start(end, false).await;
        let diffs = shared::file::scenario::play(&mut run.rt, &scenario, &["PK", "SK"])
            .await
            .expect("plays");
        assert!(diffs.is_empty(), "{end:?}: {diffs:#?}");
        assert_clean(&run.rt).await;
        let bad = run
            .rt
            .stream_processor("derive")
            .metrics()
            .get(names::BAD_INPUT);
        assert_eq!(bad, 1, "{end:?}: the one bad employee");
        out.push((scan(&run.rt).await, run.rt.processor_writes()));
        run.engine.stop().await;
    }
    assert_eq!(
        out[1], out[0],
        "the same table and writes through both ends"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_that_is_not_met_says_what_differs() {
    let text = "writes:\n  - put: { PK: \"ORG#01HXAA0000000000000000000A\", SK: \"DEPT#01HXAB0000000000000000000B\", type: dept, deptId: 01HXAB0000000000000000000B, orgId: 01HXAA0000000000000000000A, name: Eng, managerId: 01HXAD0000000000000000000D }\nexpect:\n  - { PK: \"ORG#01HXAA0000000000000000000A\", SK: \"DEPT#01HXAB0000000000000000000B\", headcount: 3 }\n  - { PK: \"DEPT#01HXAB0000000000000000000B\", SK: \"EMP#x\" }\nabsent:\n  - { PK: \"ORG#01HXAA0000000000000000000A\", SK: \"DEPT#01HXAB0000000000000000000B\" }\n";
    let dir = std::env::temp_dir().join(format!("jobstream-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("s.scenario.yaml");
    std::fs::write(&path, text).expect("write");
    let scenario = shared::file::scenario::Scenario::read(&path).expect("reads");
    let mut run = start(End::File, false).await;
    let diffs = shared::file::scenario::play(&mut run.rt, &scenario, &["PK", "SK"])
        .await
        .expect("plays");
    assert_eq!(diffs.len(), 3, "{diffs:#?}");
    assert!(
        diffs[0].ends_with("`headcount` is 0, expected 3"),
        "values as JSON: {}",
        diffs[0]
    );
    assert!(diffs[1].starts_with("missing"), "{}", diffs[1]);
    assert!(
        diffs[2].starts_with("present, expected absent"),
        "{}",
        diffs[2]
    );
    run.engine.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 17, defect 1 (not specific to model files): the first batch's
/// ledger commit goes through, a projection write after it fails (5xx on
/// UpdateItem) and so do both counter syncs (throttled transactions). The
/// batch must resume at its first record, not at the failed projection:
/// the department records and the source that owes `headcount` were
/// before it, and a resume past them left the departments without
/// `headcount` once the stream was drained (`verify`: "headcount = None,
/// the sources sum to 0/1"). Both ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_counter_sync_after_a_throttled_transaction_is_not_lost() {
    for end in [End::Rust, End::File] {
        let mut run = start(end, true).await;
        let proxy = run.proxy.take().expect("proxy");
        proxy.inject(Fault::throttle("TransactWriteItems", 2).after(1));
        proxy.inject(Fault::server_error("UpdateItem", 2).after(2));
        write_with_bad_input(&run.rt).await;
        run.rt.drain().await.expect("drain");
        assert!(run.rt.failed_batches().is_empty(), "{end:?}");
        assert_clean(&run.rt).await;
        run.engine.stop().await;
    }
}
