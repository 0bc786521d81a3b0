//! Model D, the HR SaaS (SPEC §5.2), end to end on the embedded engine:
//! writers use plain puts and deletes only; the derive processor keeps
//! DeptEmployee items, department headcount, the email index, the sparse
//! open-jobs index, application index and job lookup items exact.

use std::collections::BTreeMap;

use crate::seed_items::hr as build;
use crate::seed_items::hr as keys;
use shared::item::{n, s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_clean, delete, deliver, get, key, put, Writer};
use crate::support::{model_env, run_in_background, table_by_key, ModelEnv};

const DAY: u64 = 24 * 3600 * 1000;
const T0: u64 = 1_767_600_000_000;

fn id(n: u64) -> String {
    build::ulid(T0 + n * DAY, u128::from(n) + 7)
}

/// Ids of one organisation with three departments.
struct Org {
    org: String,
    d1: String,
    d2: String,
    d3: String,
}

impl Org {
    fn new() -> Self {
        Self {
            org: id(1),
            d1: id(2),
            d2: id(3),
            d3: id(4),
        }
    }

    fn emp(&self, emp: &str, dept: &str) -> Item {
        build::emp(&self.org, emp, &format!("{emp}@acme.co"), "E", dept)
    }

    fn dept(&self, dept: &str) -> Item {
        build::dept(&self.org, dept, "Dept", &id(99))
    }
}

async fn env() -> ModelEnv {
    model_env("hr", |_| {}).await
}

async fn drain(env: &mut ModelEnv) {
    env.rt.drain().await.expect("drain");
}

async fn headcount(env: &ModelEnv, o: &Org, dept: &str) -> Option<i64> {
    get(env, key(keys::org_pk(&o.org), keys::dept_key(dept)))
        .await
        .expect("department exists")
        .opt_i64(keys::HEADCOUNT)
        .expect("a number")
}

/// The DeptEmployee items of a department: their employee ids.
async fn roster(env: &ModelEnv, dept: &str) -> Vec<String> {
    let pk = keys::dept_key(dept);
    table_by_key(&env.rt)
        .await
        .into_iter()
        .filter(|((p, _), _)| *p == pk)
        .map(|((_, sk), item)| {
            assert_eq!(item.len(), 4, "PK, SK, orgId, type: {item:?}");
            assert_eq!(item.s("type").unwrap(), "dept_emp");
            sk.trim_start_matches("EMP#").to_string()
        })
        .collect()
}

/// `jobstream demo --model hr`, the binary as a user runs it: the shipped
/// scenario (models/hr.scenario.yaml) played through the shipped file,
/// every access pattern of the seed printed and compared (AP8 before and
/// after a close), the bad employee counted, `verify` clean, and the
/// processors' writes pinned (49: the 44 the Rust model made on the same
/// scenario before it was deleted, and the owner record of each of the 5
/// DeptEmployee items, `shared: true` since its key does not bind `orgId`).
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    // Every access pattern of the seed (SPEC §5.2, AP9 in two steps) is
    // among the file's queries, each printed.
    let text = crate::support::demo_through_the_binary("hr");
    assert!(text.contains(": 3 step(s), 23 write(s)"), "{text}");
    assert!(text.contains("\nprocessor writes: 49\n"), "{text}");
    assert!(
        text.contains("bad input (not drift): PK=ORG#01HXAA0000000000000000000A, SK=EMP#dave"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_deactivations_deletes_and_re_creates() {
    let mut env = env().await;
    let o = Org::new();
    let (a, b) = (id(10), id(11));
    for d in [&o.d1, &o.d2] {
        put(&env, o.dept(d)).await;
    }
    put(&env, o.emp(&a, &o.d1)).await;
    put(&env, o.emp(&b, &o.d1)).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d1).await, [a.as_str(), b.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(2));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(0), "present at 0");

    // Move: the old DeptEmployee goes, the new one comes.
    put(&env, o.emp(&a, &o.d2)).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d1).await, [b.as_str()]);
    assert_eq!(roster(&env, &o.d2).await, [a.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));

    // Deactivation: still on the roster, no longer counted.
    let mut gone = o.emp(&a, &o.d2);
    gone.insert("status".into(), s("inactive"));
    gone.insert("terminatedAt".into(), s("2026-03-01"));
    put(&env, gone).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d2).await, [a.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(0));

    // Move while inactive, then reactivate: counted where they are.
    let mut moved = o.emp(&a, &o.d1);
    moved.insert("status".into(), s("inactive"));
    put(&env, moved).await;
    put(&env, o.emp(&a, &o.d1)).await;
    drain(&mut env).await;
    assert!(roster(&env, &o.d2).await.is_empty());
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(2));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(0));

    // Delete, then re-create in another department.
    delete(&env, key(keys::org_pk(&o.org), keys::emp_key(&b))).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d1).await, [a.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    put(&env, o.emp(&b, &o.d2)).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d2).await, [b.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    // Several changes of one employee in one batch: only the last counts.
    put(&env, o.emp(&b, &o.d1)).await;
    delete(&env, key(keys::org_pk(&o.org), keys::emp_key(&b))).await;
    put(&env, o.emp(&b, &o.d2)).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d2).await, [b.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn employees_before_their_department_are_counted_when_it_appears() {
    let mut env = env().await;
    let o = Org::new();
    let (a, b, c) = (id(10), id(11), id(12));
    put(&env, o.emp(&a, &o.d3)).await;
    put(&env, o.emp(&b, &o.d3)).await;
    let mut inactive = o.emp(&c, &o.d3);
    inactive.insert("status".into(), s("inactive"));
    put(&env, inactive).await;
    drain(&mut env).await;
    let dept_pk = keys::org_pk(&o.org);
    let dept_sk = keys::dept_key(&o.d3);
    assert_eq!(
        get(&env, key(&dept_pk, &dept_sk)).await,
        None,
        "never created"
    );
    assert_eq!(
        roster(&env, &o.d3).await.len(),
        3,
        "AP7 needs no department"
    );

    put(&env, o.dept(&o.d3)).await;
    drain(&mut env).await;
    assert_eq!(headcount(&env, &o, &o.d3).await, Some(2));

    // Deleted: stays deleted; re-created with a writer's wrong count.
    delete(&env, key(&dept_pk, &dept_sk)).await;
    put(&env, o.emp(&c, &o.d3)).await;
    drain(&mut env).await;
    assert_eq!(get(&env, key(&dept_pk, &dept_sk)).await, None);
    let mut stale = o.dept(&o.d3);
    stale.insert(keys::HEADCOUNT.into(), n(12));
    put(&env, stale).await;
    drain(&mut env).await;
    assert_eq!(headcount(&env, &o, &o.d3).await, Some(3));
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_jobs_index_is_sparse_and_lookups_follow_postings() {
    let mut env = env().await;
    let o = Org::new();
    let (j1, j2, at1, at2) = (id(20), id(21), id(30), id(31));
    let open = build::job(&o.org, &j1, &at1, &o.d1, "Engineer", "open");
    put(&env, open.clone()).await;
    put(
        &env,
        build::job(&o.org, &j2, &at2, &o.d1, "Designer", "draft"),
    )
    .await;
    drain(&mut env).await;
    let org_pk = keys::org_pk(&o.org);
    let sk1 = keys::job_sk(&at1, &j1);
    let item = get(&env, key(&org_pk, &sk1)).await.unwrap();
    assert_eq!(item.s("GSI1PK").unwrap(), keys::open_jobs_gsi1pk(&o.org));
    assert_eq!(item.s("GSI1SK").unwrap(), sk1);
    let draft = get(&env, key(&org_pk, keys::job_sk(&at2, &j2)))
        .await
        .unwrap();
    assert!(!draft.contains_key("GSI1PK") && !draft.contains_key("GSI1SK"));
    let lookup = get(&env, key(keys::job_pk(&j1), keys::META_SK))
        .await
        .unwrap();
    assert_eq!(lookup.len(), 5);
    assert_eq!(lookup.s("orgId").unwrap(), o.org);
    assert_eq!(lookup.s("postedAt").unwrap(), at1);
    assert_eq!(lookup.s("type").unwrap(), "job_lookup");

    // Close (a writer's put that even keeps the old index keys).
    let mut closed = item.clone();
    closed.insert("status".into(), s("closed"));
    closed.insert("closedAt".into(), s("2026-03-01"));
    put(&env, closed).await;
    drain(&mut env).await;
    let item = get(&env, key(&org_pk, &sk1)).await.unwrap();
    assert!(!item.contains_key("GSI1PK") && !item.contains_key("GSI1SK"));
    assert!(get(&env, key(keys::job_pk(&j1), keys::META_SK))
        .await
        .is_some());

    // Deleted: its lookup goes; its applications stay (no cascade).
    let app = build::app(&j1, &id(40), &id(41), &id(10), "applied");
    put(&env, app).await;
    delete(&env, key(&org_pk, &sk1)).await;
    drain(&mut env).await;
    assert!(get(&env, key(keys::job_pk(&j1), keys::META_SK))
        .await
        .is_none());
    let app = get(&env, key(keys::job_pk(&j1), keys::app_sk(&id(41), &id(40))))
        .await
        .unwrap();
    assert_eq!(app.s("GSI1PK").unwrap(), keys::emp_key(&id(10)));
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_values_of_processor_attributes_are_brought_back() {
    let mut env = env().await;
    let o = Org::new();
    let a = id(10);
    put(&env, o.dept(&o.d1)).await;
    let mut e = build::emp(&o.org, &a, "Ünsal@Acme.CO", "Ü", &o.d1);
    e.insert("GSI1PK".into(), s("EMAIL#Ünsal@Acme.CO"));
    e.insert("GSI1SK".into(), s("junk"));
    put(&env, e).await;
    drain(&mut env).await;
    let item = get(&env, key(keys::org_pk(&o.org), keys::emp_key(&a)))
        .await
        .unwrap();
    assert_eq!(item.s("GSI1PK").unwrap(), "EMAIL#ünsal@acme.co");
    assert_eq!(item.s("GSI1SK").unwrap(), keys::emp_key(&a));
    let mut dept = o.dept(&o.d1);
    dept.insert(keys::HEADCOUNT.into(), s("lots"));
    put(&env, dept).await;
    // A writer's copy of the DeptEmployee item is not the source of truth.
    drain(&mut env).await;
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    // Quiet: draining again writes nothing.
    let before = table_by_key(&env.rt).await;
    let writes = env.rt.processor_writes();
    drain(&mut env).await;
    assert_eq!(table_by_key(&env.rt).await, before);
    assert_eq!(env.rt.processor_writes(), writes);
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_and_enums_are_skipped_counted_and_block_nothing() {
    let mut env = env().await;
    let o = Org::new();
    let (a, b) = (id(10), id(11));
    put(&env, o.dept(&o.d1)).await;
    put(&env, o.emp(&a, &o.d1)).await;
    drain(&mut env).await;
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));

    // A valid employee turned invalid keeps what it implied.
    let mut bad_status = o.emp(&a, &o.d2);
    bad_status.insert("status".into(), s("on-leave"));
    put(&env, bad_status).await;
    // A non-ULID id (key and attribute agree), a UUID department.
    put(&env, o.emp("emp-17", &o.d1)).await;
    put(&env, o.emp(&id(12), "550e8400-e29b-41d4-a716-446655440000")).await;
    // A posting with a date for postedAt, an application with a bad status.
    put(
        &env,
        build::job(&o.org, &id(20), "2026-03-01", &o.d1, "x", "open"),
    )
    .await;
    put(&env, build::app(&id(20), &id(21), &id(22), &a, "hired")).await;
    // Keys that do not match the attributes.
    let mut moved_key = o.emp(&id(13), &o.d1);
    moved_key.insert("orgId".into(), s(id(5)));
    put(&env, moved_key).await;
    // After all of them, a good record still takes effect.
    put(&env, o.emp(&b, &o.d1)).await;
    drain(&mut env).await;

    let bad = env
        .rt
        .stream_processor("derive")
        .metrics()
        .get(names::BAD_INPUT);
    assert_eq!(bad, 6, "each bad record counted once");
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(2), "a kept, b added");
    assert_eq!(roster(&env, &o.d1).await, [a.as_str(), b.as_str()]);
    assert!(roster(&env, &o.d2).await.is_empty());
    let all = table_by_key(&env.rt).await;
    for item in all.values() {
        let t = item.s("type").unwrap_or_default();
        if t == "job"
            || (t == "emp" && item.s("empId").unwrap() != a && item.s("empId").unwrap() != b)
        {
            assert!(!item.contains_key("GSI1PK"), "no projection of bad input");
        }
    }
    assert!(get(&env, key(keys::job_pk(&id(20)), keys::META_SK))
        .await
        .is_none());

    // Valid again (what it implies now applies); the never-valid items are
    // listed by verify as bad input, not as drift.
    put(&env, o.emp(&a, &o.d2)).await;
    drain(&mut env).await;
    assert_eq!(roster(&env, &o.d2).await, [a.as_str()]);
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(1));
    put(&env, o.dept(&o.d2)).await;
    drain(&mut env).await;
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report.is_clean(),
        "bad input is not drift: {:#?}",
        report.problems
    );
    assert_eq!(report.bad_input.len(), 5, "{:#?}", report.bad_input);
    for line in &report.bad_input {
        assert!(!line.contains("on-leave@"), "keys and reasons only");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_plain_upserts_keep_one_departments_headcount_exact() {
    let env = env().await;
    let o = Org::new();
    put(&env, o.dept(&o.d1)).await;
    put(&env, o.dept(&o.d2)).await;
    let writer = Writer::of(&env);
    let ModelEnv { engine, rt } = env;
    let background = run_in_background(rt);
    let emps: Vec<String> = (0..12).map(|i| id(100 + i)).collect();
    let mut tasks = Vec::new();
    for w in 0..3u64 {
        let writer = writer.clone();
        let o = Org::new();
        let emps = emps.clone();
        tasks.push(tokio::spawn(async move {
            for round in 0..10u64 {
                for (i, e) in emps.iter().enumerate() {
                    if !(i as u64 + w).is_multiple_of(3) {
                        continue;
                    }
                    let dept = if (round + i as u64).is_multiple_of(2) {
                        &o.d1
                    } else {
                        &o.d2
                    };
                    let mut item = o.emp(e, dept);
                    if (round * 7 + i as u64 + w).is_multiple_of(4) {
                        item.insert("status".into(), s("inactive"));
                    }
                    writer.put(item).await;
                }
            }
        }));
    }
    // A writer overwriting the department (plain upsert, stale counts).
    {
        let writer = writer.clone();
        let o = Org::new();
        tasks.push(tokio::spawn(async move {
            for round in 0..10 {
                let mut d = o.dept(&o.d1);
                if round % 2 == 0 {
                    d.insert(keys::HEADCOUNT.into(), n(round * 5));
                }
                writer.put(d).await;
                tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rt = background.stop().await;
    let mut env = ModelEnv { engine, rt };
    drain(&mut env).await;

    let items = table_by_key(&env.rt).await;
    let mut truth: BTreeMap<String, i64> = BTreeMap::new();
    for item in items.values().filter(|i| i.s("type").ok() == Some("emp")) {
        let d = item.s("departmentId").unwrap().to_string();
        let entry = truth.entry(d).or_default();
        if item.s("status").unwrap() == "active" {
            *entry += 1;
        }
        let de = items
            .get(&(
                keys::dept_key(item.s("departmentId").unwrap()),
                keys::emp_key(item.s("empId").unwrap()),
            ))
            .expect("DeptEmployee where the employee is");
        assert_eq!(de.s("orgId").unwrap(), o.org);
    }
    let des = items
        .values()
        .filter(|i| i.s("type").ok() == Some("dept_emp"))
        .count();
    assert_eq!(des, emps.len(), "one DeptEmployee per employee");
    for d in [&o.d1, &o.d2] {
        assert_eq!(
            headcount(&env, &o, d).await,
            Some(truth.get(d.as_str()).copied().unwrap_or(0)),
        );
    }
    // The table is unchanged once quiet.
    let writes = env.rt.processor_writes();
    drain(&mut env).await;
    assert_eq!(table_by_key(&env.rt).await, items);
    assert_eq!(env.rt.processor_writes(), writes);
    assert_clean(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redelivery_and_replay_never_move_headcount_away_from_the_truth() {
    let mut env = env().await;
    let o = Org::new();
    let (a, b) = (id(10), id(11));
    put(&env, o.dept(&o.d1)).await;
    put(&env, o.dept(&o.d2)).await;
    drain(&mut env).await;
    let start = env.records().await.len();

    // Changes not yet processed: a joins d1, moves to d2, b joins d1 and
    // leaves.
    put(&env, o.emp(&a, &o.d1)).await;
    put(&env, o.emp(&a, &o.d2)).await;
    put(&env, o.emp(&b, &o.d1)).await;
    let mut left = o.emp(&b, &o.d1);
    left.insert("status".into(), s("inactive"));
    put(&env, left).await;
    let records = env.records().await[start..].to_vec();
    assert_eq!(records.len(), 4);

    // The first record alone already yields the current truth (the engine
    // derives from the item as it is, not from the record's image).
    deliver(&env, &records[..1]).await;
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(0));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    deliver(&env, &records).await;
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(0));
    assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    drain(&mut env).await;
    let settled = table_by_key(&env.rt).await;

    // Replays: everything from the start, each record alone, backwards,
    // overlapping windows. No write at all, so no moment of a wrong count.
    let all = env.records().await;
    let mut replays: Vec<Vec<serde_json::Value>> = vec![all.clone()];
    replays.extend(all.iter().rev().map(|r| vec![r.clone()]));
    replays.extend(all.windows(3).map(<[_]>::to_vec));
    let writes = env.rt.processor_writes();
    for batch in &replays {
        deliver(&env, batch).await;
        assert_eq!(headcount(&env, &o, &o.d1).await, Some(0));
        assert_eq!(headcount(&env, &o, &o.d2).await, Some(1));
    }
    assert_eq!(
        env.rt.processor_writes() - writes,
        0,
        "replays write nothing"
    );
    assert_eq!(env.records().await.len(), all.len());
    assert_eq!(table_by_key(&env.rt).await, settled);
    assert!(
        env.rt
            .stream_processor("derive")
            .metrics()
            .get(names::DUPLICATE)
            > 0
    );
    assert_clean(&env).await;
}

/// A posting re-posted under a new `postedAt` (a new item, the old one
/// deleted): both items imply the same lookup item `JOB#<jobId>` / `#META`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_re_posted_job_keeps_its_lookup_item() {
    let o = Org::new();
    let (j, at1, at2) = (id(20), id(30), id(31));
    let old = build::job(&o.org, &j, &at1, &o.d1, "Engineer", "open");
    let new = build::job(&o.org, &j, &at2, &o.d1, "Engineer", "open");
    let org_pk = keys::org_pk(&o.org);
    // New first, then the old one deleted; in one batch and in two.
    for one_batch in [true, false] {
        let mut env = env().await;
        put(&env, old.clone()).await;
        drain(&mut env).await;
        put(&env, new.clone()).await;
        if !one_batch {
            drain(&mut env).await;
        }
        delete(&env, key(&org_pk, keys::job_sk(&at1, &j))).await;
        drain(&mut env).await;
        let lookup = get(&env, key(keys::job_pk(&j), keys::META_SK)).await;
        assert_eq!(
            lookup.map(|l| l.s("postedAt").unwrap().to_string()),
            Some(at2.clone()),
            "one batch: {one_batch}"
        );
    }
}

/// Two live postings of one job id (a re-date in progress) imply one
/// lookup item: written once per transaction, kept while either implies
/// it, and gone only when neither does (issue 17, defect 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_lives_while_any_of_its_postings_does() {
    let mut env = env().await;
    let o = Org::new();
    let (j, at1, at2) = (id(20), id(30), id(31));
    let old = build::job(&o.org, &j, &at1, &o.d1, "Engineer", "open");
    let new = build::job(&o.org, &j, &at2, &o.d1, "Engineer", "open");
    let org_pk = keys::org_pk(&o.org);
    let posted = |l: Option<Item>| l.map(|l| l.s("postedAt").unwrap().to_string());
    // Both in one batch: one transaction, no rejected double write.
    put(&env, old.clone()).await;
    put(&env, new.clone()).await;
    drain(&mut env).await;
    assert!(
        env.rt.failed_batches().is_empty(),
        "{:?}",
        env.rt.failed_batches()
    );
    assert_eq!(
        posted(get(&env, key(keys::job_pk(&j), keys::META_SK)).await),
        Some(at2.clone()),
        "the greatest posting's content"
    );
    assert_clean(&env).await;
    // The re-date is taken back: the new posting goes, the old one still
    // implies the lookup.
    delete(&env, key(&org_pk, keys::job_sk(&at2, &j))).await;
    drain(&mut env).await;
    assert_eq!(
        posted(get(&env, key(keys::job_pk(&j), keys::META_SK)).await),
        Some(at1.clone()),
        "kept for the posting that still implies it"
    );
    assert_clean(&env).await;
    delete(&env, key(&org_pk, keys::job_sk(&at1, &j))).await;
    drain(&mut env).await;
    assert!(get(&env, key(keys::job_pk(&j), keys::META_SK))
        .await
        .is_none());
    assert_clean(&env).await;
}

/// A DeptEmployee item a writer edited is still the processor's: it goes
/// with its employee (issue 17, defect 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_dept_employee_goes_with_its_employee() {
    let mut env = env().await;
    let o = Org::new();
    let a = id(10);
    put(&env, o.dept(&o.d1)).await;
    put(&env, o.emp(&a, &o.d1)).await;
    drain(&mut env).await;
    let mut edited = get(&env, key(keys::dept_key(&o.d1), keys::emp_key(&a)))
        .await
        .expect("DeptEmployee");
    edited.insert("note".into(), s("a writer was here"));
    put(&env, edited).await;
    drain(&mut env).await;
    delete(&env, key(keys::org_pk(&o.org), keys::emp_key(&a))).await;
    drain(&mut env).await;
    assert!(
        get(&env, key(keys::dept_key(&o.d1), keys::emp_key(&a)))
            .await
            .is_none(),
        "no ghost DeptEmployee"
    );
    assert_eq!(headcount(&env, &o, &o.d1).await, Some(0));
    assert_clean(&env).await;
}

/// An employee moved to another organisation under the same id (its new
/// item written, then the old one deleted; in one batch and in two): both
/// items imply one DeptEmployee item `DEPT#<d>` / `EMP#<e>`, whose key
/// does not bind `orgId`. The mirror stays for the employee that still
/// implies it (it went with the old item's delete before `dept_emp` was
/// `shared: true`, which check-model now asks for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_employee_moved_to_another_org_keeps_its_dept_employee() {
    let o = Org::new();
    let other = id(50);
    let a = id(10);
    let moved = build::emp(&other, &a, "a@acme.co", "E", &o.d1);
    for one_batch in [true, false] {
        let mut env = env().await;
        put(&env, o.dept(&o.d1)).await;
        put(&env, o.emp(&a, &o.d1)).await;
        drain(&mut env).await;
        put(&env, moved.clone()).await;
        if !one_batch {
            drain(&mut env).await;
        }
        delete(&env, key(keys::org_pk(&o.org), keys::emp_key(&a))).await;
        drain(&mut env).await;
        let mirror = get(&env, key(keys::dept_key(&o.d1), keys::emp_key(&a))).await;
        assert_eq!(
            mirror.map(|m| m.s("orgId").unwrap().to_string()),
            Some(other.clone()),
            "one batch: {one_batch}"
        );
        assert_clean(&env).await;
        // The moved employee goes too: so does its mirror.
        delete(&env, key(keys::org_pk(&other), keys::emp_key(&a))).await;
        drain(&mut env).await;
        assert!(get(&env, key(keys::dept_key(&o.d1), keys::emp_key(&a)))
            .await
            .is_none());
        assert_clean(&env).await;
    }
}
