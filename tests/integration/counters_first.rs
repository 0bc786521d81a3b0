//! seed13's #2: a processor-created counter item exists from the first
//! count on (SPEC §5.1: "created on the first count ... and stay (0 when
//! nothing counts)"; §5: "present once the item exists"), whatever the
//! batching: a follow and a like written and deleted in one stream batch
//! (a net change of 0) leave the same counts and likecount items as the
//! same writes two batches apart; a first count of 0 creates its item; a
//! replay creates nothing twice and moves nothing; a sync lost after the
//! ledger commit is made by the redelivery. `verify` judges the absence of
//! a counted item as drift (something counts into it, or its ledger
//! totals say something did) and `--repair` creates it.

use shared::item::{n, s, Item, ItemExt};

use crate::items::{assert_clean, attrs, delete, deliver, get, invoke, key, put, repair, scan};
use crate::seed_items::social as keys;
use crate::seed_items::social::{follow_item, like_item};
use crate::support::{model_env, temp_model, ModelEnv};

const AT: &str = "2026-11-28T08:00:00Z";

fn post(prefix: &str) -> String {
    format!("01JD{}", prefix.to_uppercase()).to_string() + &"0".repeat(22 - prefix.len())
}

/// A follow `<p>a -> <p>b` and a like of `<p>a` on post `post(p)`, then
/// both deleted: with a drain between the writes and the deletes when
/// `gap`, else all four records in one batch.
async fn follow_like_and_undo(env: &mut ModelEnv, p: &str, gap: bool) {
    let (a, b) = (format!("{p}a"), format!("{p}b"));
    put(&env.rt, follow_item(&a, &b, AT)).await;
    put(&env.rt, like_item(&post(p), &a, AT)).await;
    if gap {
        env.rt.drain().await.unwrap();
    }
    delete(&env.rt, keys::follow_key(&a, &b)).await;
    delete(&env.rt, keys::like_key(&post(p), &a)).await;
    env.rt.drain().await.unwrap();
}

/// The counts of `user` and the likecount of `post(p)` as items (without
/// their keys), `None` where absent.
async fn counted(env: &ModelEnv, p: &str) -> Vec<Option<Item>> {
    let without_key = |i: Option<Item>| {
        i.map(|mut i| {
            i.remove("PK");
            i.remove("SK");
            i
        })
    };
    let mut out = Vec::new();
    for user in [format!("{p}a"), format!("{p}b")] {
        out.push(without_key(get(env, keys::user_counts_key(&user)).await));
    }
    out.push(without_key(get(env, keys::likecount_key(&post(p))).await));
    out
}

fn zeros(pairs: &[&str], type_: &str) -> Option<Item> {
    let mut i: Item = pairs.iter().map(|a| (a.to_string(), n(0))).collect();
    i.insert("type".into(), s(type_));
    Some(i)
}

/// The same facts, batched two ways, leave the same derived data: every
/// user's counts item and the post's likecount item at 0. A replay of every
/// record changes nothing; `verify` finds nothing. Before: the one-batch
/// users had no counts item and the post no likecount item (`[None, None,
/// None]`), which `verify` called "no drift" too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_undone_in_the_same_batch_creates_its_items_as_two_batches_do() {
    let mut env = model_env("social", |_| {}).await;
    follow_like_and_undo(&mut env, "g", true).await;
    follow_like_and_undo(&mut env, "n", false).await;
    let counts = zeros(&[keys::FOLLOWERS, keys::FOLLOWING, keys::POSTS], "counts");
    let likes = zeros(&[keys::LIKES], "likecount");
    let want = vec![counts.clone(), counts, likes];
    assert_eq!(counted(&env, "g").await, want, "two batches apart");
    assert_eq!(counted(&env, "n").await, want, "in one batch");
    assert_clean(&env).await;
    // A replay of every record (a consumer from TRIM_HORIZON) creates
    // nothing twice and moves nothing.
    let before = scan(&env).await;
    deliver(&env, &env.records().await).await;
    assert_eq!(scan(&env).await, before, "a replay writes nothing");
    // Deleted by a writer, the counts item comes back from its key alone,
    // as one created over two batches does.
    delete(&env.rt, keys::user_counts_key("na")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(counted(&env, "n").await, want, "back after a delete");
    assert_clean(&env).await;
}

/// The counter write (the sync after the ledger commit) fails for the
/// one-batch follow and unfollow: the batch is reported, and its
/// redelivery, which finds both sources as recorded, creates the items
/// all the same (the records owe them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_count_whose_item_write_is_lost_is_made_by_the_redelivery() {
    use jobstream::faults::Fault;
    let (env, proxy) = crate::support::model_env_behind_proxy("social", |_| {}).await;
    put(&env.rt, follow_item("la", "lb", AT)).await;
    delete(&env.rt, keys::follow_key("la", "lb")).await;
    let records = env.records().await;
    let event = crate::items::records_event(&records);
    // The first TransactWriteItems is the ledger commit (the records), the
    // second the counter items' write: it fails.
    proxy.inject(Fault::server_error("TransactWriteItems", 1).after(1));
    let resp = invoke(&env, "derive", &event).await.unwrap();
    assert_eq!(resp.batch_item_failures.len(), 1, "the batch is reported");
    assert!(get(&env, keys::user_counts_key("la")).await.is_none());
    let resp = invoke(&env, "derive", &event).await.unwrap();
    assert!(resp.batch_item_failures.is_empty());
    for user in ["la", "lb"] {
        let c = get(&env, keys::user_counts_key(user)).await;
        assert_eq!(
            c.and_then(|c| c.opt_i64(keys::FOLLOWERS).ok().flatten()),
            Some(0),
            "{user}"
        );
    }
    assert_clean(&env).await;
}

/// Goals count their points into their team's score, a processor's
/// counter.
const SCORES: &str = r#"jobstream: 1
name: scores
table:
  name: scores
  pk: PK
  sk: SK
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  score:
    owner: processor
    key: { PK: "TEAM#${teamId:id}", SK: "SCORE" }
    counter:
      attributes: [points]
      created_by: processor
  goal:
    key: { PK: "GOAL#${goalId:id}", SK: "GOAL" }
    attributes:
      teamId: id
      points: int
    count:
      - counter: score
        with: { teamId: teamId }
        add: { points: points }
"#;

fn goal(id: &str, team: &str, points: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("GOAL#{id}"))),
        ("SK", s("GOAL")),
        ("type", s("goal")),
        ("teamId", s(team)),
        ("points", n(points)),
    ])
}

/// A first count of 0 is a count: `verify` reports the team's absent score
/// as drift before the derive ran, `--repair` creates it at 0, and the
/// derive creates it as well (a goal of 0 of another team). A score whose
/// totals exist and that nothing counts into any more, deleted by a writer,
/// is drift until its REMOVE record brings it back, and `--repair` brings
/// it back too. Before: no drift (the sources sum to 0), and the derive
/// created no score for a goal of 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_item_that_is_absent_is_drift_to_verify_and_repair_creates_it() {
    let path = temp_model("scores", SCORES);
    let mut env = model_env("scores", |o| o.model_file = Some(path)).await;
    let score = |team: &str| key(format!("TEAM#{team}"), "SCORE");
    put(&env.rt, goal("g1", "t1", 0)).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("TEAM#t1") && p.contains("absent")),
        "the score counted into is missing: {:#?}",
        report.problems
    );
    assert!(repair(&env, &report).await > 0);
    assert_eq!(
        get(&env, score("t1")).await.unwrap().get("points"),
        Some(&n(0))
    );
    assert_clean(&env).await;
    put(&env.rt, goal("g2", "t2", 0)).await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        get(&env, score("t2")).await.unwrap().get("points"),
        Some(&n(0))
    );
    // Nothing counts into t2 any more; its totals say something did.
    delete(&env.rt, key("GOAL#g2", "GOAL")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        get(&env, score("t2")).await.unwrap().get("points"),
        Some(&n(0))
    );
    delete(&env.rt, score("t2")).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("TEAM#t2") && p.contains("absent")),
        "{:#?}",
        report.problems
    );
    assert!(repair(&env, &report).await > 0);
    assert_eq!(
        get(&env, score("t2")).await.unwrap().get("points"),
        Some(&n(0))
    );
    env.rt.drain().await.unwrap();
    assert_clean(&env).await;
}

/// The derive's requests (per operation) on a batch of the social model's
/// common path: counts that move (new follows, likes and posts; then some
/// undone, others added), then that batch again (a redelivery). First
/// counts that move a total cost what they did: the sync they need is the
/// one a moved total makes (pinned at the figures measured before
/// `first_counts` existed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_that_move_cost_the_derive_the_requests_they_did() {
    use jobstream::meter::Meter;
    let engine = crate::support::start_engine().await;
    let meter = Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let endpoint = meter.endpoint();
    let env =
        crate::support::model_env_on(engine, "social", |o| o.processor_endpoint = Some(endpoint))
            .await;
    let p = |i: u128| crate::social::post_id(i);
    let mut seen = 0;
    let mut phases = Vec::new();
    for phase in 0..2 {
        for i in 0..10 {
            let (a, b) = (format!("u{i}"), format!("u{}", i + 10 * (phase + 1)));
            if phase == 0 || i % 2 == 0 {
                put(&env.rt, follow_item(&a, &b, AT)).await;
                put(&env.rt, like_item(&p(i as u128 % 3), &b, AT)).await;
            } else {
                delete(&env.rt, keys::follow_key(&a, &format!("u{}", i + 10))).await;
                delete(
                    &env.rt,
                    keys::like_key(&p(i as u128 % 3), &format!("u{}", i + 10)),
                )
                .await;
            }
        }
        if phase == 0 {
            for i in 0..3 {
                let post = crate::seed_items::social::post_item("u0", &p(i), AT, "hi");
                put(&env.rt, post).await;
            }
        }
        let records = env.records().await;
        let event = crate::items::records_event(&records[seen..]);
        seen = records.len();
        for _ in 0..2 {
            let bill = crate::bill::billed(&env.rt, &meter, "derive", &event).await;
            let ops: Vec<(String, u64)> = bill
                .ops
                .iter()
                .map(|(op, b)| (op.clone(), b.requests))
                .collect();
            phases.push(ops);
        }
    }
    let ops = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|(o, n)| (o.to_string(), *n)).collect()
    };
    // As measured on 7f6acd2 (before first counts): the ledger records,
    // the items, the derived items, the totals and the counter items read,
    // the commit and the counters' write; a redelivery reads.
    assert_eq!(
        phases,
        vec![
            ops(&[("BatchGetItem", 5), ("TransactWriteItems", 2)]),
            ops(&[("BatchGetItem", 4)]),
            ops(&[("BatchGetItem", 5), ("TransactWriteItems", 2)]),
            ops(&[("BatchGetItem", 6)]),
        ]
    );
    // A follow and its unfollow in one batch: its first counts are one
    // sync (the totals and items read, one transaction) beside the commit
    // of its record; its redelivery reads the records and the owed totals.
    put(&env.rt, follow_item("v1", "v2", AT)).await;
    delete(&env.rt, keys::follow_key("v1", "v2")).await;
    let records = env.records().await;
    let event = crate::items::records_event(&records[seen..]);
    let mut undone = Vec::new();
    for _ in 0..2 {
        let bill = crate::bill::billed(&env.rt, &meter, "derive", &event).await;
        undone.push(
            bill.ops
                .iter()
                .map(|(op, b)| (op.clone(), b.requests))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        undone,
        vec![
            ops(&[("BatchGetItem", 4), ("TransactWriteItems", 2)]),
            ops(&[("BatchGetItem", 4)]),
        ]
    );
    assert!(get(&env, keys::user_counts_key("v2")).await.is_some());
    assert_clean(&env).await;
}
