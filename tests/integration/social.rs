//! The social model (SPEC §5.1) against the embedded engine and the local SQS: the
//! demo, paging over thousands of followers, races of follow, unfollow,
//! post and delete, late and duplicated jobs, TTL expiry of a timeline
//! entry, a bad job body, verify and repair. (Mirrors, counts, timelines
//! and bad input records: the scenario files of tests/scenarios/social/.)

use std::collections::BTreeSet;
use std::time::Duration as StdDuration;

use crate::seed_items::social as keys;
use crate::seed_items::social::{follow_item, like_item, post_item, user_item};
use crate::seed_items::timeline;
use chrono::{Duration, SecondsFormat, Utc};
use lambda_runtime::{Context, LambdaEvent};
use shared::engine::setjob::SetJob;
use shared::item::{Item, ItemExt};
use shared::store::Store;

use crate::items::{
    apply_plan, assert_clean, assert_exact, delete, deliver_jobs, get, partition, put_all, reads,
    scan, sqs_event,
};
use crate::support::{model_env, run_in_background, ModelEnv};

async fn social() -> ModelEnv {
    model_env("social", |_| {}).await
}

pub(crate) fn iso(mins_ago: i64) -> String {
    (Utc::now() - Duration::minutes(mins_ago)).to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn post_id(n: u128) -> String {
    keys::ulid(Utc::now().timestamp_millis() as u64, n)
}

/// How many entries `user`'s timeline holds.
pub(crate) async fn timeline_len(store: &Store, table: &str, user: &str) -> usize {
    let pk = keys::timeline_pk(user);
    let entries = store.query(table, None, keys::PK, &pk, None).await;
    entries.expect("query").len()
}

async fn counts(env: &ModelEnv, user: &str) -> (i64, i64, i64) {
    let i = get(env, keys::user_counts_key(user))
        .await
        .expect("counts item");
    assert_eq!(i.s(keys::TYPE).unwrap(), "counts");
    (
        i.i64(keys::FOLLOWERS).unwrap(),
        i.i64(keys::FOLLOWING).unwrap(),
        i.i64(keys::POSTS).unwrap(),
    )
}

/// Authors on a user's timeline, by post id.
async fn timeline(env: &ModelEnv, user: &str) -> BTreeSet<(String, String)> {
    partition(env, &keys::timeline_pk(user))
        .await
        .iter()
        .map(|e| {
            (
                e.s("postId").unwrap().to_string(),
                e.s("authorId").unwrap().to_string(),
            )
        })
        .collect()
}

/// `jobstream demo --model social`, the binary as a user runs it (with the
/// local SQS): the shipped scenario through the shipped file, each of the
/// seed's seven access patterns printed and compared, the two bad items
/// counted and listed by `verify`, nothing dead-lettered, OK. (Its exact
/// items, writes and fixpoint: social_recorded.rs.)
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    let text = crate::support::demo_through_the_binary("social");
    assert!(text.contains(" and SQS at http://"), "{text}");
    assert!(text.contains(": 2 step(s)"), "{text}");
    assert_eq!(
        text.matches("bad input (not drift): ").count(),
        2,
        "the self-follow and the post id that is no ULID: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_thousands_of_followers_fans_out_in_pages() {
    let mut env = social().await;
    let fans: Vec<String> = (0..2100).map(|i| format!("fan{i:05}")).collect();
    put_all(
        &env,
        fans.iter()
            .map(|f| follow_item(f, "star", &iso(60)))
            .collect(),
    )
    .await;
    // 2100 follows start 2100 follow jobs; "star" has no post yet, so they
    // have nothing to write. The stream is drained, the queue emptied (a
    // purge, to keep this test about the post), then the post fans out.
    jobstream::local::esm::drain(&mut env.rt.mappings)
        .await
        .unwrap();
    let queue = env.rt.queues[0].queue.url.clone();
    env.rt
        .sqs
        .as_ref()
        .unwrap()
        .purge_queue()
        .queue_url(&queue)
        .send()
        .await
        .unwrap();
    assert_eq!(counts(&env, "star").await, (2100, 0, 0));
    let p = post_id(7);
    put_all(&env, vec![post_item("star", &p, &iso(1), "hello")]).await;
    env.rt.drain().await.unwrap();
    let mut with_entry = 0;
    for f in fans.iter().step_by(50).chain(fans.last()) {
        with_entry += timeline(&env, f).await.len();
    }
    assert_eq!(with_entry, 2100 / 50 + 1, "first, middle and last pages");
    assert_exact(&mut env.rt).await;
    delete(&env, keys::post_key("star", &p)).await;
    env.rt.drain().await.unwrap();
    for f in fans.iter().step_by(50).chain(fans.last()) {
        assert!(timeline(&env, f).await.is_empty());
    }
    assert_exact(&mut env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_and_duplicated_jobs_never_resurrect_an_entry() {
    let mut env = social().await;
    put_all(&env, vec![follow_item("f", "a", &iso(60))]).await;
    env.rt.drain().await.unwrap();
    // A post job planned while f follows a, applied after the unfollow:
    // its guard fails, nothing is written.
    let p = post_id(1);
    put_all(&env, vec![post_item("a", &p, &iso(5), "x")]).await;
    let job = timeline::set(shared::engine::joinset::DEFAULT_PAGE);
    let body = timeline::post_job("a", &p);
    let r = reads(&env);
    let stale = job.plan(&body, &r).await.unwrap();
    assert_eq!(stale.desired.len(), 1);
    delete(&env, keys::follow_key("f", "a")).await;
    let applied = apply_plan(&job, &r, &stale).await;
    assert_eq!((applied.puts, applied.superseded), (0, 1));
    env.rt.drain().await.unwrap();
    assert!(timeline(&env, "f").await.is_empty());
    // The same job delivered again, twice, late: still nothing.
    deliver_jobs(&env, "timeline", &[body.clone(), body.clone()]).await;
    assert!(timeline(&env, "f").await.is_empty());
    // A follow job planned while f does not follow a (it would delete),
    // applied after f follows again: the delete is dropped.
    put_all(&env, vec![follow_item("f", "a", &iso(1))]).await;
    env.rt.drain().await.unwrap();
    assert_eq!(timeline(&env, "f").await.len(), 1);
    let unfollow = timeline::follow_job("f", "a");
    delete(&env, keys::follow_key("f", "a")).await;
    let r = reads(&env);
    let stale = job.plan(&unfollow, &r).await.unwrap();
    assert_eq!((stale.desired.len(), stale.existing.len()), (0, 1));
    put_all(&env, vec![follow_item("f", "a", &iso(0))]).await;
    let applied = apply_plan(&job, &r, &stale).await;
    assert_eq!((applied.deletes, applied.superseded), (0, 1));
    env.rt.drain().await.unwrap();
    assert_eq!(timeline(&env, "f").await.len(), 1);
    // A post deleted: late post jobs of its creation change nothing.
    delete(&env, keys::post_key("a", &p)).await;
    env.rt.drain().await.unwrap();
    deliver_jobs(&env, "timeline", &[body.clone(), body]).await;
    assert!(timeline(&env, "f").await.is_empty());
    assert_exact(&mut env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_follow_unfollow_post_delete_and_likes_end_exact() {
    let env = social().await;
    let ModelEnv { engine, rt } = env;
    let tbl = rt.config.table.clone();
    let bg = run_in_background(rt);
    let client = Store::new({
        let cfg = jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 5).await;
        aws_sdk_dynamodb::Client::new(&cfg)
    });
    let users = ["u0", "u1", "u2", "u3", "u4", "u5"];
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let client = client.clone();
        let tbl = tbl.clone();
        writers.push(tokio::spawn(async move {
            let mut x = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(w + 1);
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut posts: Vec<(String, String)> = Vec::new();
            for i in 0..60 {
                let a = users[(next() % 6) as usize];
                let b = users[(next() % 6) as usize];
                let op = next() % 6;
                let put = |item: Item| {
                    let client = client.clone();
                    let tbl = tbl.clone();
                    async move { client.put_items(&tbl, vec![item]).await.unwrap() }
                };
                match op {
                    0 | 1 if a != b => put(follow_item(a, b, &iso(0))).await,
                    2 => client
                        .delete_keys(&tbl, vec![keys::follow_key(a, b)])
                        .await
                        .unwrap(),
                    3 => {
                        let id = keys::ulid(
                            Utc::now().timestamp_millis() as u64,
                            u128::from(w) << 32 | i,
                        );
                        put(post_item(a, &id, &iso(0), "p")).await;
                        posts.push((a.to_string(), id));
                    }
                    4 if !posts.is_empty() => {
                        let (author, id) = posts.remove((next() % posts.len() as u64) as usize);
                        client
                            .delete_keys(&tbl, vec![keys::post_key(&author, &id)])
                            .await
                            .unwrap();
                    }
                    _ => {
                        if let Some((_, id)) = posts.last() {
                            put(like_item(id, b, &iso(0))).await;
                        }
                    }
                }
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    tokio::time::sleep(StdDuration::from_millis(200)).await;
    let rt = bg.stop().await;
    let mut env = ModelEnv { engine, rt };
    env.rt.drain().await.unwrap();
    assert_exact(&mut env.rt).await;
    let before = scan(&env).await;
    env.rt.drain().await.unwrap();
    assert_eq!(scan(&env).await, before, "fixpoint once quiet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_expiry_of_a_timeline_entry_changes_nothing_else() {
    let mut env = social().await;
    // A post whose ttl is 3 s ahead.
    let created = Utc::now() - Duration::seconds(keys::POST_TTL_SECS - 3);
    let p = keys::ulid(created.timestamp_millis() as u64, 1);
    put_all(
        &env,
        vec![
            follow_item("f", "a", &iso(60 * 24 * 8)),
            post_item(
                "a",
                &p,
                &created.to_rfc3339_opts(SecondsFormat::Millis, true),
                "x",
            ),
        ],
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_eq!(timeline(&env, "f").await.len(), 1, "written while ahead");
    tokio::time::sleep(StdDuration::from_secs(4)).await;
    // Past its ttl, not yet removed: DynamoDB's to delete, not drift.
    assert_eq!(timeline(&env, "f").await.len(), 1);
    assert_clean(&env.rt).await;
    let before: Vec<Item> = scan(&env)
        .await
        .into_iter()
        .filter(|i| i.s(keys::PK).unwrap() != keys::timeline_pk("f"))
        .collect();
    let writes = env.rt.processor_writes();
    assert_eq!(env.engine.sweep_ttl().await.unwrap(), 1);
    env.rt.drain().await.unwrap();
    assert!(timeline(&env, "f").await.is_empty());
    assert_eq!(scan(&env).await, before, "nothing else changed");
    assert_eq!(env.rt.processor_writes(), writes, "no processor write");
    assert_eq!(counts(&env, "a").await, (1, 0, 1));
    assert_exact(&mut env.rt).await;
}

/// A job body that is no job of this build (the timeline's consumer) is bad
/// input whose retry cannot help (SPEC §2.7): counted and skipped, not
/// retried to the DLQ. (The records that are bad input: a scenario file.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_job_body_is_counted_and_skipped() {
    let env = social().await;
    let consumer = env.rt.consumer("timeline");
    let resp = shared::lambda::sqs_handler(
        &*consumer,
        LambdaEvent::new(sqs_event(&["{\"version\":1}".into()]), Context::default()),
    )
    .await
    .unwrap();
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!(consumer.metrics().get(shared::metrics::names::BAD_INPUT), 1);
}

/// Engine fix (setjob `apply`): a guard that fails in a late transaction of
/// a large plan (a page of 1000 entries is about 21 transactions) drops
/// that write only; the plan is not failed as "guards keep failing".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_failing_late_in_a_full_page_drops_only_that_write() {
    let env = social().await;
    // Fans fan0000..fan0999, each following star (and its mirror).
    let (_, mut items) = crate::joinset::followers(1000, "fan", "star", &iso(60));
    let p = post_id(1);
    items.push(post_item("star", &p, &iso(1), "x"));
    put_all(&env, items).await;
    let job = timeline::set(shared::engine::joinset::DEFAULT_PAGE);
    let body = timeline::post_job("star", &p);
    let r = reads(&env);
    let plan = job.plan(&body, &r).await.unwrap();
    assert_eq!(plan.desired.len(), 1000);
    // The last fan (sorted last: in the last transaction) unfollows; a
    // superseded write is not a failure.
    delete(&env, keys::follow_key("fan0999", "star")).await;
    let applied = apply_plan(&job, &r, &plan).await;
    assert_eq!((applied.puts, applied.superseded), (999, 1));
    assert!(timeline(&env, "fan0999").await.is_empty());
    assert_eq!(timeline(&env, "fan0998").await.len(), 1);
}

/// A mirror a writer edited (writers must not, nothing stops them) still
/// goes with its follow; `verify` finds mirrors no follow implies and
/// edited ones, and `--repair` deletes or restores them (issue 17,
/// defect 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_and_stray_mirrors_are_found_and_never_outlive_their_follow() {
    let mut env = social().await;
    put_all(
        &env,
        vec![
            user_item("a", "A"),
            user_item("b", "B"),
            user_item("c", "C"),
            follow_item("a", "b", &iso(5)),
            follow_item("c", "b", &iso(5)),
        ],
    )
    .await;
    env.rt.drain().await.unwrap();
    let mirror = get(&env, keys::mirror_key("a", "b")).await.expect("mirror");
    let mut edited = mirror.clone();
    edited.insert("note".into(), shared::item::s("edited"));
    put_all(&env, vec![edited.clone()]).await;
    env.rt.drain().await.unwrap();
    // The follow goes: its mirror goes, whatever its content.
    delete(&env, keys::follow_key("a", "b")).await;
    env.rt.drain().await.unwrap();
    assert!(
        get(&env, keys::mirror_key("a", "b")).await.is_none(),
        "no ghost follower"
    );
    assert_eq!(counts(&env, "b").await.0, 1);
    assert_exact(&mut env.rt).await;

    // A stray mirror (no follow) and an edited one (its follow stands).
    let mut stray = mirror.clone();
    for (k, v) in keys::mirror_key("a", "c") {
        stray.insert(k, v);
    }
    let mut edited = get(&env, keys::mirror_key("c", "b")).await.expect("mirror");
    let restored = edited.clone();
    edited.insert("note".into(), shared::item::s("edited"));
    put_all(&env, vec![stray, edited]).await;
    let report = env.rt.verify().await.unwrap();
    assert_eq!(report.problems.len(), 2, "{:#?}", report.problems);
    crate::items::repair(&env.rt, &report).await;
    assert!(get(&env, keys::mirror_key("a", "c")).await.is_none());
    assert_eq!(get(&env, keys::mirror_key("c", "b")).await, Some(restored));
    env.rt.drain().await.unwrap();
    assert_exact(&mut env.rt).await;
}

/// `verify` finds timeline drift (a missing, an extra and a wrong entry)
/// and `--repair` brings it back through the join set's follow scope, every
/// page of it run in process (no queue consumer needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_timeline_drift_and_repair_runs_every_page() {
    let mut env = social().await;
    let (p1, p2, p3) = (post_id(1), post_id(2), post_id(3));
    put_all(
        &env,
        vec![
            follow_item("f", "a", &iso(60)),
            post_item("a", &p1, &iso(30), "one"),
            post_item("a", &p2, &iso(20), "two"),
        ],
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_eq!(timeline(&env, "f").await.len(), 2);
    // Drift: p1's entry deleted, p2's entry forged, an entry of a post that
    // does not exist.
    delete(&env, keys::timeline_key("f", &p1, "a")).await;
    let mut wrong = get(&env, keys::timeline_key("f", &p2, "a")).await.unwrap();
    wrong.insert("createdAt".into(), shared::item::s("2000-01-01T00:00:00Z"));
    let mut extra = wrong.clone();
    extra.extend(keys::timeline_key("f", &p3, "a"));
    extra.insert("postId".into(), shared::item::s(&p3));
    env.rt
        .processors
        .store
        .put_items(&env.rt.config.table, vec![wrong, extra])
        .await
        .unwrap();
    let report = env.rt.verify().await.unwrap();
    assert_eq!(report.problems.len(), 3, "{:#?}", report.problems);
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(
        timeline(&env, "f").await,
        BTreeSet::from([(p1.clone(), "a".to_string()), (p2.clone(), "a".to_string())])
    );
    assert_exact(&mut env.rt).await;
    // The follow turned bad input: its entries stay, and are not drift.
    put_all(&env, vec![follow_item("f", "a", "yesterday")]).await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        timeline(&env, "f").await,
        BTreeSet::from([(p1, "a".to_string()), (p2, "a".to_string())])
    );
    let report = env.rt.verify().await.unwrap();
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.bad_input.len(), 1, "{:#?}", report.bad_input);
}
