//! The seeds' writes after the upgrade ((c) of [`crate::migration`], each
//! seed's test taking the harness's three ways) and the jobs each seed with
//! queues left in flight at the switch.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item, ItemExt};

use crate::apps::AppWriter;
use crate::items::{assert_exact, attrs, delete, get, key, put, update};
use crate::migration::{
    fixture_num, go_on, in_flight_repaired, key_of, lower_key, now_iso, num_at, Fixture,
};
use crate::support::ModelEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracker_tables_of_the_compiled_model_go_on_exactly() {
    go_on("tracker", tracker_writes).await;
}

/// (c) for the tracker.
async fn tracker_writes(mut env: ModelEnv, fx: Fixture) {
    let fx = &fx;
    // (c) A stage completed, a status change, a new application: history
    // numbering goes on from the compiled model's, the mirror follows it,
    // META/COUNT counts the new one.
    let hist = |items: &[Item], app: &str| {
        let pk = format!("APP#{app}");
        items
            .iter()
            .filter(|i| i.s("PK").ok() == Some(pk.as_str()))
            .filter(|i| i.s("SK").unwrap_or_default().starts_with("HIST#"))
            .count() as i64
    };
    let acme = hist(&fx.table, "acme");
    let initech = hist(&fx.table, "initech");
    assert!(acme > 1 && initech > 1, "the demo's histories");
    let count = num_at(&env, key("META", "COUNT"), "count").await;
    let w = AppWriter::new(env.rt.dynamodb.clone(), &env.rt.config.table);
    let at = "2026-12-01T09:00:00.000Z";
    w.set_stage("acme", "s1", "notes", s("went well")).await;
    w.set("initech", "status", s("interviewing"), at).await;
    w.create("hooli", "Hooli", "Engineer", at).await;
    env.rt.drain().await.unwrap();
    let entry = |app: &str, seq: i64| key(format!("APP#{app}"), format!("HIST#{seq:08}"));
    let description =
        |i: Option<Item>| i.map(|i| i.s("description").unwrap_or_default().to_string());
    let stage = fx
        .table
        .iter()
        .find(|i| i.s("PK").ok() == Some("APP#acme") && i.s("SK").ok() == Some("STAGE#s1"))
        .and_then(|i| i.s("name").ok())
        .expect("acme's stage s1")
        .to_string();
    assert_eq!(
        description(get(&env, entry("acme", acme + 1)).await),
        Some(format!("Updated interview stage \"{stage}\""))
    );
    assert_eq!(get(&env, entry("acme", acme + 2)).await, None, "one entry");
    assert_eq!(
        description(get(&env, entry("initech", initech + 1)).await).as_deref(),
        Some("Updated Status")
    );
    assert_eq!(
        num_at(&env, key("APP#acme", "APP#acme"), "historySequence").await,
        acme + 1
    );
    assert_eq!(
        num_at(&env, key("APP#initech", "APP#initech"), "historySequence").await,
        initech + 1
    );
    assert_eq!(
        description(get(&env, entry("hooli", 1)).await).as_deref(),
        Some("Created application Hooli - Engineer")
    );
    assert_eq!(num_at(&env, key("META", "COUNT"), "count").await, count + 1);
    assert_exact(&mut env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn social_tables_of_the_compiled_model_go_on_exactly() {
    go_on("social", social_writes).await;
}

/// (c) for social.
async fn social_writes(mut env: ModelEnv, fx: Fixture) {
    let fx = &fx;
    // (c) ann unfollows bob and follows dee, dee posts and likes ann's
    // post: the counts move by one each (nothing counted twice), the
    // follower mirrors follow, ann's timeline loses bob's posts and gains
    // dee's.
    let count = |u: &str, a: &str| fixture_num(fx, &format!("u#{u}"), "count", a);
    let post = fx
        .table
        .iter()
        .find(|i| i.s("PK").ok() == Some("u#ann#post"))
        .and_then(|i| i.s("postId").ok())
        .expect("a post of ann's")
        .to_string();
    let post = post.as_str();
    let likes = fixture_num(fx, &format!("p#{post}#likecount"), "count", "likes").max(0);
    let liked = |i: &&Item| i.s("PK").ok() == Some(format!("p#{post}#likelist").as_str());
    assert!(
        !fx.table
            .iter()
            .filter(liked)
            .any(|i| i.s("SK").ok() == Some("u#dee")),
        "dee's like is new"
    );
    let at = now_iso();
    delete(&env, key("u#ann#following", "u#bob")).await;
    put(
        &env,
        attrs(vec![
            ("PK", s("u#ann#following")),
            ("SK", s("u#dee")),
            ("createdAt", s(&at)),
        ]),
    )
    .await;
    let dee_post = ulid::Ulid::new().to_string();
    put(
        &env,
        attrs(vec![
            ("PK", s("u#dee#post")),
            ("SK", s(format!("p#{dee_post}"))),
            ("postId", s(&dee_post)),
            ("body", s("hello after the upgrade")),
            ("createdAt", s(&at)),
        ]),
    )
    .await;
    put(
        &env,
        attrs(vec![
            ("PK", s(format!("p#{post}#likelist"))),
            ("SK", s("u#dee")),
            ("createdAt", s(&at)),
        ]),
    )
    .await;
    env.rt.drain().await.unwrap();
    let now = |u: &str, a: &'static str| {
        let k = key(format!("u#{u}"), "count");
        let env = &env;
        async move { num_at(env, k, a).await }
    };
    assert_eq!(now("ann", "following").await, count("ann", "following"));
    assert_eq!(now("bob", "followers").await, count("bob", "followers") - 1);
    assert_eq!(now("dee", "followers").await, count("dee", "followers") + 1);
    assert_eq!(now("dee", "posts").await, count("dee", "posts") + 1);
    assert_eq!(
        num_at(&env, key(format!("p#{post}#likecount"), "count"), "likes").await,
        likes + 1
    );
    assert!(get(&env, key("u#bob#follower", "u#ann")).await.is_none());
    assert!(get(&env, key("u#dee#follower", "u#ann")).await.is_some());
    let timeline = crate::items::partition(&env, "u#ann#timeline").await;
    let authors: Vec<String> = timeline
        .iter()
        .map(|i| i.s("authorId").unwrap_or_default().to_string())
        .collect();
    assert!(!authors.iter().any(|a| a == "bob"), "{authors:?}");
    assert!(
        timeline
            .iter()
            .any(|i| i.s("SK").ok() == Some(format!("p#{dee_post}#u#dee").as_str())),
        "{authors:?}"
    );
    assert_exact(&mut env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hr_tables_of_the_compiled_model_go_on_exactly() {
    go_on("hr", hr_writes).await;
}

/// (c) for HR.
async fn hr_writes(mut env: ModelEnv, fx: Fixture) {
    let fx = &fx;
    // (c) alice moves from Engineering to Design, bob (People Ops) is
    // deactivated: each headcount moves by one, alice's roster item moves,
    // bob's stays.
    let org = "ORG#01KE6JQ3010000000000000002";
    let (eng, ops, design) = (
        "01KE6JQ3020000000000000003",
        "01KE6JQ3030000000000000004",
        "01KGKTMN040000000000000005",
    );
    let (alice, bob) = ("01KE953T0A000000000000000B", "01KEBQGH0B000000000000000C");
    let headcount = |d: &str| fixture_num(fx, org, &format!("DEPT#{d}"), "headcount");
    let (e0, o0, d0) = (headcount(eng), headcount(ops), headcount(design));
    assert!(e0 > 0 && o0 > 0 && d0 > 0, "the demo's departments");
    update(
        &env,
        key(org, format!("EMP#{alice}")),
        "SET #departmentId = :d",
        &[(":d", s(design))],
    )
    .await;
    update(
        &env,
        key(org, format!("EMP#{bob}")),
        "SET #status = :s",
        &[(":s", s("inactive"))],
    )
    .await;
    env.rt.drain().await.unwrap();
    let now = |d: &str| key(org, format!("DEPT#{d}"));
    assert_eq!(num_at(&env, now(eng), "headcount").await, e0 - 1);
    assert_eq!(num_at(&env, now(ops), "headcount").await, o0 - 1);
    assert_eq!(num_at(&env, now(design), "headcount").await, d0 + 1);
    let roster = |d: &str, e: &str| key(format!("DEPT#{d}"), format!("EMP#{e}"));
    assert!(get(&env, roster(eng, alice)).await.is_none());
    assert!(get(&env, roster(design, alice)).await.is_some());
    assert!(get(&env, roster(ops, bob)).await.is_some());
    assert_exact(&mut env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_tables_of_the_compiled_model_go_on_exactly() {
    go_on("pickem", pickem_writes).await;
}

/// (c) for Pick'Em.
async fn pickem_writes(mut env: ModelEnv, fx: Fixture) {
    let fx = &fx;
    let (ev, result, expected) = rescored(fx);
    update(
        &env,
        key(ev, "MATCH#m1"),
        "SET #result = :r",
        &[(":r", n(result))],
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_scores(&env, ev, &expected).await;
    assert_exact(&mut env.rt).await;
}

/// The opener (m1) of AEW Revolution going to the other team than the
/// fixture's result: the event's key, the new result, and per user their
/// points on the event and in the 2024 standings after rescoring (each
/// prediction gains or loses the match's points once).
fn rescored(fx: &Fixture) -> (&'static str, i64, Vec<(String, i64, i64)>) {
    let ev = "EVENT#2024-03-03-aew-revolution";
    let m1 = fx
        .table
        .iter()
        .find(|i| i.s("PK").ok() == Some(ev) && i.s("SK").ok() == Some("MATCH#m1"))
        .expect("the opener");
    let (was, worth) = (m1.i64("result").unwrap(), m1.i64("points").unwrap());
    let result = 1 - was;
    let mut expected = Vec::new();
    for p in fx
        .table
        .iter()
        .filter(|i| i.s("SK").ok() == Some(ev) && i.s("type").ok() == Some("prediction"))
    {
        let user = p.s("PK").unwrap().to_string();
        let picked = match p.get("predictions") {
            Some(AttributeValue::M(m)) => m.get("m1").and_then(|v| match v {
                AttributeValue::N(n) => n.parse::<i64>().ok(),
                _ => None,
            }),
            _ => None,
        };
        let delta = match picked {
            Some(x) if x == result => worth,
            Some(x) if x == was => -worth,
            _ => 0,
        };
        let points = p.i64("points").unwrap() + delta;
        let standing = fixture_num(fx, &user, "STANDINGS#2024", "points") + delta;
        expected.push((user, points, standing));
    }
    assert!(
        expected.iter().any(|(_, p, s)| *p > 0 && *s > 0),
        "the demo's predictions"
    );
    (ev, result, expected)
}

async fn assert_scores(env: &ModelEnv, ev: &str, expected: &[(String, i64, i64)]) {
    for (user, points, standing) in expected {
        let at = |sk: &str| key(user.as_str(), sk);
        assert_eq!(num_at(env, at(ev), "points").await, *points, "{user}");
        let standings = num_at(env, at("STANDINGS#2024"), "points").await;
        assert_eq!(standings, *standing, "{user}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn social_jobs_in_flight_at_the_upgrade_are_done_by_the_step() {
    let (env, _fx) = in_flight_repaired("social").await;
    // cid followed bob and bob posted (dated 2099: its entries' TTL never
    // passes while the fixture is read): the timeline of ann, who followed
    // bob, and cid's show the post.
    let entry = "p#01M8EAAAAA0000000000000042#u#bob";
    for user in ["ann", "cid"] {
        let k = key(format!("u#{user}#timeline"), entry);
        assert!(get(&env, k).await.is_some(), "{user}'s timeline");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobboard_jobs_in_flight_at_the_upgrade_are_done_by_the_step() {
    let (env, _fx) = in_flight_repaired("jobboard").await;
    // e1 approved s2's request for j4: the match exists (once).
    let matches = crate::items::partition(&env, "seeker#s2").await;
    let j4 = matches.iter().filter(|i| {
        let sk = i.s("sk").unwrap_or_default();
        sk.starts_with("j#") && sk.ends_with("#j4")
    });
    assert_eq!(j4.count(), 1, "{matches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_jobs_in_flight_at_the_upgrade_are_done_by_the_step() {
    let (env, fx) = in_flight_repaired("pickem").await;
    // The opener's result changed in flight: every prediction rescored.
    let (ev, result, expected) = rescored(&fx);
    let m1 = get(&env, key(ev, "MATCH#m1")).await.expect("the opener");
    assert_eq!(m1.i64("result").unwrap(), result, "the write in flight");
    assert_scores(&env, ev, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobboard_tables_of_the_compiled_model_go_on_exactly() {
    go_on("jobboard", jobboard_writes).await;
}

/// (c) for the job board.
async fn jobboard_writes(mut env: ModelEnv, fx: Fixture) {
    let fx = &fx;
    // (c) A move: seeker s1 moves from Montreal to Toronto (her index key
    // follows, her Montreal suggestions go), a Montreal job closes (its
    // suggestions go) and one opens for Go engineers: s2, in Montreal since
    // before the upgrade, is suggested it (the city's seekers are listed);
    // verify checks every suggestion the facts imply.
    let montreal_job = fx
        .table
        .iter()
        .find(|i| {
            i.s("pk").ok() == Some("job#montreal")
                && i.s("sk").unwrap_or_default().starts_with("j#")
                && i.s("status").ok() == Some("open")
        })
        .expect("an open Montreal job")
        .clone();
    let seeker = || lower_key("seeker#s1", "profile");
    update(&env, seeker(), "SET #city = :c", &[(":c", s("Toronto"))]).await;
    let job = key_of(&montreal_job, "pk", "sk");
    update(&env, job, "SET #status = :s", &[(":s", s("closed"))]).await;
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    put(
        &env,
        attrs(vec![
            ("pk", s("job#montreal")),
            ("sk", s(format!("j#{today}#H3B#j9"))),
            ("entityType", s("job")),
            ("jobId", s("j9")),
            ("employerId", s("e2")),
            ("city", s("Montreal")),
            ("postedAt", s(&today)),
            ("zip", s("H3B")),
            ("title", s("Go engineer")),
            ("category", s("tech")),
            ("skills", AttributeValue::Ss(vec!["go".into()])),
            ("salaryMax", n(120_000)),
            ("status", s("open")),
        ]),
    )
    .await;
    env.rt.drain().await.unwrap();
    let suggested = get(&env, lower_key("job#montreal", "s#j9#s2")).await;
    assert!(suggested.is_some(), "s2 is suggested the new job");
    let s1 = get(&env, seeker()).await.expect("s1");
    assert_eq!(s1.s("GSI1PK").unwrap(), "city#toronto");
    let montreal = crate::items::partition(&env, "job#montreal").await;
    let job_id = montreal_job.s("jobId").unwrap();
    for i in &montreal {
        let sk = i.s("sk").unwrap_or_default();
        assert!(!sk.ends_with("#s1") || !sk.starts_with("s#"), "{sk}");
        assert!(!sk.starts_with(&format!("s#{job_id}#")), "{sk}");
    }
    assert_exact(&mut env.rt).await;
}
