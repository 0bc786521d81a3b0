//! A model file's `once:` effects through the local runtime: an approved
//! request becomes exactly one match (its suggestion deleted in the same
//! transaction) under re-approval, redelivery and concurrent delivery; a
//! failed precondition ends as a logged `Skipped`; a source whose effect
//! cannot be computed is bad input at the source.

use jobstream::local::runtime::Runtime;
use lambda_runtime::{Context, LambdaEvent};
use shared::item::{key_of, s, Item, ItemExt};
use shared::metrics::names;

use crate::items::{assert_clean, begins, delete, item, put, repair, sqs_event};
use crate::scenarios::model_file;
use crate::support::model_env;

const DAY1: &str = "2026-11-03T10:00:00Z";
const DAY2: &str = "2026-11-09T10:00:00Z";

fn job(id: &str) -> Item {
    item(&[
        ("PK", &format!("JOB#{id}")),
        ("SK", "INFO"),
        ("type", "job"),
        ("title", "t"),
    ])
}

fn seeker(id: &str) -> Item {
    item(&[
        ("PK", &format!("S#{id}")),
        ("SK", "PROFILE"),
        ("type", "seeker"),
        ("name", "n"),
    ])
}

fn request(job: &str, seeker: &str, status: &str, approved_at: Option<&str>) -> Item {
    let mut i = item(&[
        ("PK", &format!("JOB#{job}")),
        ("SK", &format!("REQ#{seeker}")),
        ("type", "request"),
        ("status", status),
    ]);
    if let Some(a) = approved_at {
        i.insert("approvedAt".into(), s(a));
    }
    i
}

/// The suggestion a set job would have written (processor-owned).
fn suggestion(job: &str, seeker: &str) -> Item {
    item(&[
        ("PK", &format!("S#{seeker}")),
        ("SK", &format!("SUG#{job}")),
        ("type", "suggestion"),
    ])
}

/// The item of `rt`'s table or, `ledger`, of its ledger at (pk, sk).
async fn get(rt: &Runtime, ledger: bool, pk: &str, sk: &str) -> Option<Item> {
    let (table, names) = match ledger {
        true => (&rt.config.ledger_table, ["pk", "sk"]),
        false => (&rt.config.table, ["PK", "SK"]),
    };
    let req = rt
        .dynamodb
        .get_item()
        .table_name(table)
        .consistent_read(true);
    let req = req.key(names[0], s(pk)).key(names[1], s(sk));
    req.send().await.expect("get").item
}

async fn matches_of(rt: &Runtime, seeker: &str) -> Vec<Item> {
    begins(rt, &format!("S#{seeker}"), "MATCH#").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_match_per_pair_under_reapproval_redelivery_and_concurrent_delivery() {
    let file = model_file("hiring/hiring.yaml");
    let mut env = model_env("hiring", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    let seekers = ["a", "b", "c", "d"];
    put(rt, job("j1")).await;
    for sk in seekers {
        put(rt, seeker(sk)).await;
        put(rt, suggestion("j1", sk)).await;
        put(rt, request("j1", sk, "pending", None)).await;
    }
    rt.drain().await.expect("drain");
    assert!(matches_of(rt, "a").await.is_empty(), "pending: no match");
    // Every request approved at once.
    let writes = seekers.map(|sk| put(rt, request("j1", sk, "approved", Some(DAY1))));
    futures::future::join_all(writes).await;
    rt.drain().await.expect("drain");
    for sk in seekers {
        let m = matches_of(rt, sk).await;
        assert_eq!(m.len(), 1, "{sk}: {m:?}");
        assert_eq!(m[0].s("matchedAt").unwrap(), DAY1);
        assert_eq!(m[0].s("type").unwrap(), "match");
        assert!(
            get(rt, false, &format!("S#{sk}"), "SUG#j1").await.is_none(),
            "{sk}: the pair's suggestion went with it"
        );
    }
    assert!(
        get(rt, true, "ONCE#matches#a#j1", "ONCE").await.is_some(),
        "the pair's marker is in the ledger"
    );
    // Approved again another day (pending -> approved) and the first job
    // redelivered twice, concurrently, in two batches.
    put(rt, request("j1", "a", "pending", None)).await;
    put(rt, request("j1", "a", "approved", Some(DAY2))).await;
    let body = serde_json::json!({
        "version": 1,
        "once": "matches",
        "values": { "approvedAt": DAY1, "jobId": "j1", "seekerId": "a" }
    })
    .to_string();
    let event = sqs_event(&[body.clone(), body.clone(), body]);
    let consumer = rt.consumer("matches");
    let (r1, r2) = tokio::join!(
        shared::lambda::sqs_handler(
            &*consumer,
            LambdaEvent::new(event.clone(), Context::default())
        ),
        shared::lambda::sqs_handler(&*consumer, LambdaEvent::new(event, Context::default())),
    );
    assert!(r1.expect("handled").batch_item_failures.is_empty());
    assert!(r2.expect("handled").batch_item_failures.is_empty());
    rt.drain().await.expect("drain");
    let m = matches_of(rt, "a").await;
    assert_eq!(m.len(), 1, "exactly one match: {m:?}");
    assert_eq!(m[0].s("matchedAt").unwrap(), DAY1, "the first one stays");
    let metrics = consumer.metrics();
    assert_eq!(
        metrics.get(names::DUPLICATE),
        7,
        "six redelivered, one re-approval"
    );
    assert_eq!(metrics.get(names::SKIPPED), 0);
    assert_eq!(rt.dlq_depth("matches").await.expect("dlq"), 0);
    assert_clean(rt).await;
    // The application deletes a match the effect made: at most once, so it
    // is not made again, and verify does not call it missing (a repair
    // could never clear it: verify would exit 1 forever).
    let m = matches_of(rt, "b").await.remove(0);
    delete(rt, key_of(&m, &["PK", "SK"])).await;
    rt.drain().await.expect("drain");
    assert!(matches_of(rt, "b").await.is_empty(), "not redone");
    assert_clean(rt).await;
    env.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_precondition_is_skipped_and_an_uncomputable_effect_is_bad_input() {
    let file = model_file("hiring/hiring.yaml");
    let mut env = model_env("hiring", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    put(rt, seeker("a")).await;
    // No job j9: the precondition fails, logged, not retried.
    put(rt, request("j9", "a", "approved", Some(DAY1))).await;
    // Approved without the day the match needs: bad input at the source.
    put(rt, job("j1")).await;
    put(rt, request("j1", "a", "approved", None)).await;
    rt.drain().await.expect("drain");
    assert!(matches_of(rt, "a").await.is_empty());
    let consumer = rt.consumer("matches");
    let metrics = consumer.metrics();
    assert_eq!(metrics.get(names::SKIPPED), 1);
    assert_eq!(metrics.get(names::DUPLICATE), 0);
    assert_eq!(crate::items::metric_of(&rt, "derive", names::BAD_INPUT), 1);
    assert_eq!(rt.dlq_depth("matches").await.expect("dlq"), 0);
    // Fixed: the request starts its match (a bad old image counts as
    // nothing).
    put(rt, request("j1", "a", "approved", Some(DAY2))).await;
    rt.drain().await.expect("drain");
    let m = matches_of(rt, "a").await;
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0]["SK"], s("MATCH#j1"));
    // A body that is not a job of this effect is bad input: counted and
    // skipped (SPEC §2.7: retrying cannot help), never a write.
    let consumer = rt.consumer("matches");
    let resp = shared::lambda::sqs_handler(
        &*consumer,
        LambdaEvent::new(
            sqs_event(&[r#"{"version":1,"once":"matches","values":{"nope":"x"}}"#.into()]),
            Context::default(),
        ),
    )
    .await
    .expect("handled");
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!(consumer.metrics().get(shared::metrics::names::BAD_INPUT), 1);
    env.engine.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_effects_end_exact_under_faults_and_answers_lost_after_commit() {
    use jobstream::faults::Fault;
    let file = model_file("hiring/hiring.yaml");
    let (mut env, proxy) =
        crate::support::model_env_behind_proxy("hiring", |o| o.model_file = Some(file.clone()))
            .await;
    let rt = &mut env.rt;
    let seekers: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    put(rt, job("j1")).await;
    for sk in &seekers {
        put(rt, seeker(sk)).await;
        put(rt, suggestion("j1", sk)).await;
    }
    // Every operation of the consumer fails now and then: before the
    // engine, throttled, and after the commit (the answer lost).
    for (i, after) in [1u32, 3, 6, 10].into_iter().enumerate() {
        for op in ["TransactWriteItems", "GetItem", "BatchGetItem", "Query"] {
            proxy.inject(match i {
                0 => Fault::server_error(op, 1).after(after),
                1 => Fault::throttle(op, 1).after(after),
                2 => Fault::server_error(op, 1).after(after).after_effect(),
                _ => Fault::reset(op, 1).after(after).after_effect(),
            });
        }
    }
    let writes = seekers
        .iter()
        .map(|sk| put(rt, request("j1", sk, "approved", Some(DAY1))));
    futures::future::join_all(writes).await;
    // One approved twice (pending in between): still one match.
    put(rt, request("j1", "s0", "pending", None)).await;
    put(rt, request("j1", "s0", "approved", Some(DAY2))).await;
    rt.drain().await.expect("drain");
    assert!(
        proxy.injected_after_effect() > 0,
        "answers were lost after their request took effect"
    );
    for sk in &seekers {
        let m = matches_of(rt, sk).await;
        assert_eq!(m.len(), 1, "{sk}: {m:?}");
        // Whichever of s0's two jobs commits first (a fault may hold the
        // first back past the second) is the one match.
        let day = m[0].s("matchedAt").unwrap();
        assert!(day == DAY1 || (sk == "s0" && day == DAY2), "{sk}: {day}");
        assert!(
            get(rt, false, &format!("S#{sk}"), "SUG#j1").await.is_none(),
            "{sk}: suggestion gone"
        );
    }
    let consumer = rt.consumer("matches");
    assert_eq!(consumer.metrics().get(names::SKIPPED), 0);
    assert_eq!(rt.dlq_depth("matches").await.expect("dlq"), 0);
    assert_clean(rt).await;
    env.engine.stop().await;
}

/// An item of a once effect's put that no effect made (no marker in the
/// ledger: a writer's forgery, a buggy writer) is drift, reported and
/// deleted by `--repair`, as a forged derived item is; one the effect made
/// stays, its source gone or not (import13 #11, user14 #8: `verify` said
/// no drift).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_once_item_no_effect_made_is_drift_and_repaired() {
    let file = model_file("hiring/hiring.yaml");
    let mut env = model_env("hiring", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    put(rt, job("j1")).await;
    put(rt, seeker("a")).await;
    put(rt, request("j1", "a", "approved", Some(DAY1))).await;
    rt.drain().await.expect("drain");
    assert_eq!(matches_of(rt, "a").await.len(), 1, "the effect's match");
    assert_clean(rt).await;
    // A match for a seeker who asked for nothing, written by a writer.
    let forged = item(&[
        ("PK", "S#nobody"),
        ("SK", "MATCH#j1"),
        ("type", "match"),
        ("matchedAt", DAY2),
    ]);
    put(rt, forged).await;
    rt.drain().await.expect("drain");
    let report = rt.verify().await.expect("verify");
    let said: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(report.problems.len(), 1, "{said:#?}");
    assert!(
        said[0].contains("PK=S#nobody, SK=MATCH#j1") && said[0].contains("no marker"),
        "{said:#?}"
    );
    assert_eq!(repair(rt, &report).await, 1);
    assert!(matches_of(rt, "nobody").await.is_empty(), "deleted");
    assert_eq!(matches_of(rt, "a").await.len(), 1, "the effect's stays");
    assert_clean(rt).await;
    env.engine.stop().await;
}

/// `explain` of a play whose once key cannot be made (import16 #5): bad
/// input, the effect named as the rule that rejects it and why, and what
/// its last valid state implied kept (its count, its listen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_once_effect_a_source_is_refused_by() {
    let file = model_file("plays/plays.yaml");
    let mut env = model_env("plays", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    let play = |track: &str| {
        item(&[
            ("PK", "USER#ann"),
            ("SK", "PLAY#p1"),
            ("type", "play"),
            ("trackId", track),
            ("playedAt", DAY1),
        ])
    };
    put(rt, play("t1")).await;
    rt.drain().await.expect("drain");
    put(rt, play("t1#x")).await;
    rt.drain().await.expect("drain");
    let x = crate::explain::ask_in(&env, &file, "USER#ann", "PLAY#p1").await;
    assert_eq!(x.kind, "bad input", "{:#?}", x.lines);
    crate::explain::says(
        &x,
        &[
            "rejected by: once `discoveries` on play (when `true`, key `${userId}#${trackId}`): an item whose effect cannot be computed is bad input",
            "why: PK=USER#ann, SK=PLAY#p1: play: once `discoveries`: `trackId` of the key holds `#`, a separator of its template: two effects could share one key",
            "still derives PK=LISTEN#p1, SK=USER#ann",
        ],
    );
    env.engine.stop().await;
}
