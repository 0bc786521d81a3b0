//! A row of a `compute:` scope that is bad input (SPEC §5: a bad record
//! "changes no derived data ... and does not block later records"). A row
//! that never was valid implies nothing: the scope is computed without it.
//! Trial12 seed12's finding 3: one Pick'Em match written with `points: 2.5`
//! froze its event's scores and standings, and `verify` said
//! "computed value | 0 checked". Fixed, the match is a row like any other.

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::runtime::Runtime;

use crate::items::{get, key, num, put};
use crate::league as write;
use crate::support::model_env;

const EV: &str = "2024-08-08-blk";

/// (points, mcorrect) of a prediction, `None` where absent.
async fn score(rt: &Runtime, user: &str) -> (Option<i64>, Option<i64>) {
    let p = get(rt, key(write::user_pk(user), write::event_key(EV)))
        .await
        .expect("prediction exists");
    let at = |a: &str| p.get(a).map(|_| num(&p, a));
    (at("points"), at("mcorrect"))
}

async fn standing_points(rt: &Runtime, user: &str) -> Option<i64> {
    get(rt, key(write::user_pk(user), write::standings_key("2024")))
        .await
        .map(|i| num(&i, "points"))
}

fn ok_match(points: i64) -> shared::item::Item {
    write::a_match(EV, "ok", "ok", 1, points, false, &["A", "B"], Some(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_match_never_valid_blocks_no_scoring_of_its_event_and_its_replay_changes_nothing() {
    let mut env = model_env("pickem", |_| {}).await;
    put(
        &env.rt,
        write::event("2024-08-08", "blk", "Event", "upcoming"),
    )
    .await;
    put(&env.rt, ok_match(7)).await;
    put(&env.rt, write::prediction("b1", EV, &[("ok", 1)])).await;
    env.rt.drain().await.unwrap();
    assert_eq!(score(&env.rt, "b1").await, (Some(7), Some(1)));

    // One bad match (a points value that is no int): bad input.
    let mut bad = write::a_match(EV, "bad", "bad", 2, 0, false, &["A", "B"], None);
    bad.insert("points".into(), AttributeValue::N("2.5".into()));
    put(&env.rt, bad).await;
    env.rt.drain().await.unwrap();
    // Later valid writes are scored.
    put(&env.rt, ok_match(9)).await;
    put(
        &env.rt,
        write::prediction("b2", EV, &[("ok", 1), ("bad", 1)]),
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        score(&env.rt, "b1").await,
        (Some(9), Some(1)),
        "b1 rescored"
    );
    assert_eq!(score(&env.rt, "b2").await, (Some(9), Some(1)), "b2 scored");
    assert_eq!(standing_points(&env.rt, "b1").await, Some(9));
    assert_eq!(standing_points(&env.rt, "b2").await, Some(9));

    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?} {:#?}", report.problems, report.bad_input);
    assert!(report.problems.is_empty(), "{said}");
    assert_eq!(report.bad_input.len(), 1, "{said}");
    assert!(report.bad_input[0].contains("MATCH#bad"), "{said}");
    assert_eq!(report.kinds["computed value"].checked, 2, "{said}");

    // The whole stream again (the bad match's records among them): no
    // write at all, the scores as they are.
    let all = env.records().await;
    crate::items::deliver(&env.rt, &all).await;
    for r in &all {
        crate::items::deliver(&env.rt, std::slice::from_ref(r)).await;
    }
    env.rt.drain().await.unwrap();
    assert_eq!(env.records().await.len(), all.len(), "no write at all");
    assert_eq!(score(&env.rt, "b1").await, (Some(9), Some(1)));
    assert_eq!(score(&env.rt, "b2").await, (Some(9), Some(1)));

    // The match fixed: a row of its event now, b2's pick of it scores.
    put(
        &env.rt,
        write::a_match(EV, "bad", "bad", 2, 3, false, &["A", "B"], Some(1)),
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_eq!(score(&env.rt, "b1").await, (Some(9), Some(1)));
    assert_eq!(score(&env.rt, "b2").await, (Some(12), Some(2)));
    assert_eq!(standing_points(&env.rt, "b2").await, Some(12));
    let report = env.rt.verify().await.expect("verify");
    let said = format!("{:#?} {:#?}", report.problems, report.bad_input);
    assert!(
        report.problems.is_empty() && report.bad_input.is_empty(),
        "{said}"
    );
    assert_eq!(report.kinds["computed value"].checked, 2, "{said}");
}
