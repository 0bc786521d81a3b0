//! `models/jobboard.yaml` (through `--model-file`) where the file once fell
//! short of the Rust job board: `verify` finds a second match for one pair
//! (a `once:` effect's item beside the one its key made) and repairs it; a
//! seeker's scope reads its city's jobs of the window only (`from:` on the
//! job fact), with the same suggestions. And the job board in miniature
//! (tests/scenarios/board/board.yaml): a rescoring to the same score
//! extends no suggestion's life.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::runtime::Runtime;
use jobstream::meter::Meter;
use shared::item::{n, s, Item, ItemExt};

use crate::items::{begins, put, set_job};
use crate::support::{model_env, shipped, ModelEnv};

async fn board() -> ModelEnv {
    model_env("jobboard", |o| {
        o.model_file = Some(shipped("jobboard.yaml"))
    })
    .await
}

fn day(days_ago: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::days(days_ago))
        .date_naive()
        .to_string()
}

fn set(v: &[&str]) -> AttributeValue {
    AttributeValue::Ss(v.iter().map(|x| x.to_string()).collect())
}

fn job(id: &str, city: &str, posted: &str, title: &str) -> Item {
    let zip = "M5V";
    crate::items::attrs(vec![
        ("pk", s(format!("job#{}", city.to_lowercase()))),
        ("sk", s(format!("j#{posted}#{zip}#{id}"))),
        ("entityType", s("job")),
        ("jobId", s(id)),
        ("employerId", s("e1")),
        ("city", s(city)),
        ("postedAt", s(posted)),
        ("zip", s(zip)),
        ("title", s(title)),
        ("skills", set(&["rust", "aws"])),
        ("salaryMax", n(150_000)),
        ("status", s("open")),
    ])
}

fn seeker(id: &str, city: &str) -> Item {
    crate::items::attrs(vec![
        ("pk", s(format!("seeker#{id}"))),
        ("sk", s("profile")),
        ("entityType", s("seeker")),
        ("seekerId", s(id)),
        ("name", s("Sam")),
        ("city", s(city)),
        ("skills", set(&["rust", "aws"])),
        ("desiredSalary", n(120_000)),
    ])
}

fn approved(job: &Item, seeker_id: &str, on: &str) -> Item {
    let job_id = job.s("jobId").unwrap();
    crate::items::attrs(vec![
        ("pk", s("employer#e1")),
        ("sk", s(format!("r#{job_id}#{seeker_id}"))),
        ("entityType", s("request")),
        ("employerId", s("e1")),
        ("jobId", s(job_id)),
        ("seekerId", s(seeker_id)),
        ("status", s("approved")),
        ("requestedAt", s(on)),
        ("jobCity", job["city"].clone()),
        ("jobPostedAt", job["postedAt"].clone()),
        ("jobZip", job["zip"].clone()),
        ("approvedAt", s(on)),
    ])
}

fn extra(r: &jobstream::tools::verify::Report, kind: &str) -> u64 {
    r.kinds.get(kind).map_or(0, |k| k.extra)
}

/// A match written a second time for one (seeker, job), under another
/// date of its key (as a forged or replayed write would): `verify` reports
/// it with both keys, `--repair` deletes it and keeps the one the approval
/// made (although the extra sorts first), and `verify` is then clean. A
/// clean board reports nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_a_second_match_for_one_pair_and_repair_removes_it() {
    let ModelEnv { engine: _e, mut rt } = board().await;
    let today = day(0);
    let j1 = job("j1", "Toronto", &day(2), "Engineer");
    put(&rt, j1.clone()).await;
    put(&rt, seeker("s1", "Toronto")).await;
    put(&rt, seeker("s2", "Toronto")).await;
    put(&rt, approved(&j1, "s1", &today)).await;
    put(&rt, approved(&j1, "s2", &today)).await;
    rt.drain().await.unwrap();
    let made = begins(&rt, "seeker#s1", "j#").await;
    assert_eq!(made.len(), 1, "the approval made one match: {made:?}");
    assert_eq!(made[0].s("sk").unwrap(), format!("j#{today}#j1"));

    let clean = rt.verify().await.unwrap();
    assert!(clean.is_clean(), "{:#?}", clean.problems);
    assert_eq!(extra(&clean, "matches"), 0);

    let mut forged = made[0].clone();
    forged.insert("sk".into(), s("j#2000-01-01#j1"));
    forged.insert("matchedAt".into(), s("2000-01-01"));
    put(&rt, forged).await;
    rt.drain().await.unwrap();

    let report = rt.verify().await.unwrap();
    assert_eq!(extra(&report, "matches"), 1, "{:#?}", report.problems);
    assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
    let p = &report.problems[0];
    assert!(
        p.contains("j#2000-01-01#j1") && p.contains(&format!("j#{today}#j1")),
        "names both keys: {p}"
    );
    assert!(p.contains("s1#j1"), "names the once key: {p}");

    crate::items::repair(&rt, &report).await;
    let left = begins(&rt, "seeker#s1", "j#").await;
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].s("sk").unwrap(), format!("j#{today}#j1"), "kept");
    assert_eq!(begins(&rt, "seeker#s2", "j#").await.len(), 1);
    let after = rt.verify().await.unwrap();
    assert!(after.is_clean(), "{:#?}", after.problems);
}

/// What a read of the table through `meter` is billed (RRU), per op.
fn read_units(meter: &Meter, op: &str) -> f64 {
    meter.bill().ops.get(op).map_or(0.0, |o| o.rru)
}

/// A city with 40 jobs older than the window and 3 of its last days (each
/// job near 4 KB, so that every one read shows in the bill): a seeker's
/// scope queries the jobs of the window only (and its city's suggestions),
/// its reads billed no more than reading those items one by one; the
/// suggestions are those of the recent jobs, the same as the jobs' own
/// scopes made, and `verify` is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seekers_scope_reads_only_the_jobs_of_the_window() {
    let ModelEnv { engine, mut rt } = board().await;
    let title = "T".repeat(3500);
    let old: Vec<Item> = (0..40)
        .map(|i| job(&format!("old{i:02}"), "Toronto", &day(40 + i), &title))
        .collect();
    let recent: Vec<Item> = (1..=3)
        .map(|i| job(&format!("new{i}"), "Toronto", &day(i), &title))
        .collect();
    rt.processors
        .store
        .put_items(
            &rt.config.table,
            old.iter().chain(&recent).cloned().collect(),
        )
        .await
        .unwrap();
    put(&rt, seeker("s1", "Toronto")).await;
    rt.drain().await.unwrap();
    let wanted: BTreeSet<String> = ["new1", "new2", "new3"]
        .iter()
        .map(|j| format!("s#{j}#s1"))
        .collect();
    let made: BTreeSet<String> = begins(&rt, "job#toronto", "s#")
        .await
        .iter()
        .map(|i| i.s("sk").unwrap().to_string())
        .collect();
    assert_eq!(made, wanted, "the recent jobs' suggestions");

    // The seeker's scope, planned through a bill meter.
    let bind = [("seekerId", "s1"), ("city", "toronto")].map(|(k, v)| (k.into(), v.into()));
    let (plan, desired, meter) = scope_billed(&engine, &rt, "seeker", bind.into()).await;
    let queried = read_units(&meter, "Query");
    assert!(plan.ahead.is_empty() && plan.then.is_empty(), "one page");
    assert_eq!(desired, wanted, "the same suggestions");

    // What the window's jobs and the seeker's suggestions cost read one
    // by one (consistently, as the scope reads).
    let before = read_units(&meter, "GetItem");
    let cfg = jobstream::local::engine::sdk_config(Some(&meter.endpoint()), 3).await;
    let client = aws_sdk_dynamodb::Client::new(&cfg);
    for sk in recent
        .iter()
        .map(|j| j.s("sk").unwrap().to_string())
        .chain(wanted.iter().cloned())
    {
        client
            .get_item()
            .table_name(&rt.config.table)
            .key("pk", s("job#toronto"))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .unwrap();
    }
    let window = read_units(&meter, "GetItem") - before;
    let one_old = {
        let before = read_units(&meter, "GetItem");
        client
            .get_item()
            .table_name(&rt.config.table)
            .key("pk", s("job#toronto"))
            .key("sk", old[0]["sk"].clone())
            .consistent_read(true)
            .send()
            .await
            .unwrap();
        read_units(&meter, "GetItem") - before
    };
    println!("seeker scope: Query {queried} RRU; the window's items one by one {window} RRU; one old job {one_old} RRU");
    assert!(one_old >= 1.0, "an old job shows in the bill");
    assert!(
        queried <= window,
        "the scope's queries ({queried} RRU) read more than the window ({window} RRU)"
    );
    assert!(rt.verify().await.unwrap().is_clean());
}

/// The plan of the suggestions' `scope` for `bind`, its reads through a
/// fresh bill meter: the plan, the suggestions' keys it wants, the meter.
async fn scope_billed(
    engine: &jobstream::local::engine::LocalEngine,
    rt: &Runtime,
    scope: &str,
    bind: std::collections::BTreeMap<String, String>,
) -> (shared::engine::setjob::Plan, BTreeSet<String>, Meter) {
    let meter = Meter::in_front_of(&engine.endpoint()).await.unwrap();
    let cfg = jobstream::local::engine::sdk_config(Some(&meter.endpoint()), 3).await;
    let store = shared::store::Store::new(aws_sdk_dynamodb::Client::new(&cfg));
    let reads = shared::engine::setjob::Reads {
        store,
        ..crate::items::reads(rt)
    };
    let model =
        shared::models::load(&shared::models::Source::File(shipped("jobboard.yaml"))).unwrap();
    let suggestions = set_job(&model, "suggestions");
    let body = shared::engine::joinset::JoinJob {
        set: "suggestions".into(),
        scope: scope.into(),
        bind,
        step: 0,
        after: None,
    }
    .encode();
    let plan = suggestions.plan(&body, &reads).await.unwrap();
    let sk = |g: &shared::engine::setjob::Guarded| g.item.s("sk").unwrap().to_string();
    let wanted = plan.desired.iter().map(sk).collect();
    (plan, wanted, meter)
}

/// The plan of a job's scope for `job`, through a fresh bill meter: the
/// suggestions' keys it wants, and its bill.
async fn job_scope_billed(
    engine: &jobstream::local::engine::LocalEngine,
    rt: &Runtime,
    job: &Item,
) -> (BTreeSet<String>, jobstream::meter::Bill) {
    let bind = ["employerId", "jobId", "postedAt", "zip"]
        .iter()
        .map(|k| (k.to_string(), job.s(k).unwrap().to_string()))
        .chain([("city".to_string(), "toronto".to_string())])
        .collect();
    let (_, wanted, meter) = scope_billed(engine, rt, "job", bind).await;
    (wanted, meter.bill())
}

/// A job's scope lists its city's seekers from the ledger's exact listing
/// of GSI1's `city#<city>` keys (as the Rust twin queried GSI1), never the
/// table: 60 seekers of another city (each near 4 KB) change nothing it
/// reads, request for request and unit for unit, and nothing is scanned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_scope_lists_the_seekers_of_its_city_only() {
    let ModelEnv { engine, mut rt } = board().await;
    let j1 = job("j1", "Toronto", &day(1), "Engineer");
    put(&rt, j1.clone()).await;
    for i in 0..3 {
        put(&rt, seeker(&format!("t{i}"), "Toronto")).await;
    }
    rt.drain().await.unwrap();
    let (wanted, alone) = job_scope_billed(&engine, &rt, &j1).await;
    let toronto: BTreeSet<String> = (0..3).map(|i| format!("s#j1#t{i}")).collect();
    assert_eq!(wanted, toronto);

    let name = "N".repeat(3500);
    let montreal: Vec<Item> = (0..60)
        .map(|i| {
            let mut s = seeker(&format!("m{i:02}"), "Montreal");
            s.insert("name".into(), shared::item::s(&name));
            s
        })
        .collect();
    rt.processors
        .store
        .put_items(&rt.config.table, montreal)
        .await
        .unwrap();
    rt.drain().await.unwrap();
    let (wanted, beside) = job_scope_billed(&engine, &rt, &j1).await;
    assert_eq!(wanted, toronto, "the same suggestions");
    println!(
        "job scope: {} requests, {} RRU alone; {} requests, {} RRU beside 60 seekers of another city",
        alone.requests(),
        alone.rru(),
        beside.requests(),
        beside.rru()
    );
    assert!(!beside.ops.contains_key("Scan"), "{beside:?}");
    assert_eq!(beside.requests(), alone.requests(), "{beside:?}");
    assert_eq!(beside.rru(), alone.rru(), "{beside:?}");
    assert!(rt.verify().await.unwrap().is_clean());
}

/// The job board in miniature (tests/scenarios/board/board.yaml, whose
/// suggestions and matches a scenario file proves): a rescoring to the
/// same score keeps a suggestion as it is, neither its `generatedAt` nor
/// its `ttl` rewritten (its life not extended); the clock moves past a
/// second first, so a rewrite would show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescoring_to_the_same_score_extends_no_suggestions_life() {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/board/board.yaml");
    let ModelEnv { engine: _e, mut rt } = model_env("board", |o| o.model_file = Some(file)).await;
    let today = day(0);
    let seeker = |salary| {
        let pairs = [
            ("PK", s("CITY#mtl")),
            ("SK", s("SEEKER#a")),
            ("type", s("seeker")),
        ];
        let more = [("desiredSalary", n(salary)), ("categories", set(&["tech"]))];
        let skills = ("skills", set(&["aws", "rust"]));
        crate::items::attrs(pairs.into_iter().chain(more).chain([skills]).collect())
    };
    put(&rt, seeker(100)).await;
    let job = [
        ("PK", s("CITY#mtl")),
        ("SK", s("JOB#j1")),
        ("type", s("job")),
        ("status", s("open")),
        ("skills", set(&["aws", "rust"])),
        ("salaryMax", n(120)),
        ("category", s("tech")),
        ("postedAt", s(&today)),
    ];
    put(&rt, crate::items::attrs(job.to_vec())).await;
    rt.drain().await.unwrap();
    let sug = crate::items::key("SUG#mtl", "S#j1#a");
    let first = crate::items::get(&rt, sug.clone())
        .await
        .expect("a suggestion");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    put(&rt, seeker(110)).await;
    rt.drain().await.unwrap();
    let again = crate::items::get(&rt, sug).await.expect("kept");
    assert_eq!(again["score"], n(10000), "the same score");
    assert_eq!(again["generatedAt"], first["generatedAt"], "not rewritten");
    assert_eq!(again["ttl"], first["ttl"], "its life not extended");
}
