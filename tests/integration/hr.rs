//! The HR SaaS (SPEC §5.2) where Rust must look: the demo through the
//! binary, concurrent upserts, redelivery and replay, a quiet table. What
//! its writes imply (DeptEmployee items, headcount, the email index, the
//! sparse open-jobs index, job lookups, bad input) is proved by the
//! scenario files of tests/scenarios/hr/ (scenarios.rs).

use std::collections::BTreeMap;

use crate::seed_items::hr as build;
use crate::seed_items::hr as keys;
use shared::item::{n, s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_clean, deliver, get, key, put, Writer};
use crate::support::{model_env, run_in_background, table_by_key, ModelEnv};

const DAY: u64 = 24 * 3600 * 1000;
const T0: u64 = 1_767_600_000_000;

fn id(n: u64) -> String {
    build::ulid(T0 + n * DAY, u128::from(n) + 7)
}

/// Ids of one organisation with two departments.
struct Org {
    org: String,
    d1: String,
    d2: String,
}

impl Org {
    fn new() -> Self {
        Self {
            org: id(1),
            d1: id(2),
            d2: id(3),
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

/// `jobstream demo --model hr`, the binary as a user runs it: the shipped
/// scenario (models/hr.scenario.yaml) played through the shipped file,
/// every access pattern of the seed printed and compared (AP8 before and
/// after a close), the bad employee counted, `verify` clean, and the
/// processors' writes pinned (56: the 44 the Rust model made on the same
/// scenario before it was deleted, the owner record of each of the 5
/// DeptEmployee items, `shared: true` since its key does not bind `orgId`,
/// and one write more per change of a shared item's owners since each
/// owner has an item of its own beside their head).
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    // Every access pattern of the seed (SPEC §5.2, AP9 in two steps) is
    // among the file's queries, each printed.
    let text = crate::support::demo_through_the_binary("hr");
    assert!(text.contains(": 3 step(s), 23 write(s)"), "{text}");
    assert!(text.contains("\nprocessor writes: 56\n"), "{text}");
    assert!(
        text.contains("bad input (not drift): emp PK=ORG#01HXAA0000000000000000000A, SK=EMP#dave:"),
        "{text}"
    );
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
    assert!(crate::items::metric_of(&env, "derive", names::DUPLICATE) > 0);
    assert_clean(&env).await;
}
