//! The Pick'Em league (SPEC §5.3) against the embedded engine and the local SQS:
//! the seed's screens, an event with thousands of predictions, late and
//! duplicated scoring jobs, concurrent result and pick changes,
//! redelivery, the clamps counted, backfill adoption. (Corrections and
//! removals, padding and clamping, bad input: the scenario files of
//! tests/scenarios/pickem/.)
//! `--model pickem` is `models/pickem.yaml` (SPEC §8.1); the league's items
//! are literals (`crate::league`), the scores what the facts imply.

use std::collections::{BTreeMap, HashMap};

use jobstream::local::runtime::Runtime;
use serde_json::{json, Value};
use shared::engine::setjob::{Plan, SetJob};
use shared::item::{n, s, Item, ItemExt};

use crate::league as keys;
use crate::league::{self as write, expected_scores};

use crate::items::{assert_clean, get, key, num, put, put_all, reads, scan, update};
use crate::support::{model_env, redeploy_model, run_in_background, ModelEnv};

const EV: &str = "2024-03-03-revolution";
const EV2: &str = "2024-05-26-double-or-nothing";

async fn env() -> ModelEnv {
    model_env("pickem", |_| {}).await
}

/// (points, mcorrect, GSI_SK) of a prediction.
async fn score_of(rt: &Runtime, user: &str, event: &str) -> (i64, i64, String) {
    let p = get(rt, key(keys::user_pk(user), keys::event_key(event)))
        .await
        .expect("prediction exists");
    (
        num(&p, "points"),
        num(&p, "mcorrect"),
        p.s("GSI_SK").unwrap_or_default().to_string(),
    )
}

/// (points, mcorrect, eplayed, GSI_SK) of a standings item.
async fn standings(rt: &Runtime, user: &str, year: &str) -> Option<(i64, i64, i64, String)> {
    get(rt, key(keys::user_pk(user), keys::standings_key(year)))
        .await
        .map(|i| {
            (
                num(&i, "points"),
                num(&i, "mcorrect"),
                num(&i, "eplayed"),
                i.s("GSI_SK").unwrap_or_default().to_string(),
            )
        })
}

/// Differences between the table and what its facts imply: every
/// prediction's score and every standings item.
fn truth_differences(items: &[Item]) -> Vec<String> {
    let mut out = Vec::new();
    let mut sums: BTreeMap<(String, String), (i64, i64, i64)> = BTreeMap::new();
    for (p, sc) in expected_scores(items) {
        let user = p.s("PK").unwrap().trim_start_matches("USER#").to_string();
        let event = p.s("SK").unwrap().trim_start_matches("EVENT#").to_string();
        let gsi_sk = keys::prediction_gsi_sk(sc.points, &user);
        if (num(&p, "points"), num(&p, "mcorrect")) != (sc.points, sc.mcorrect)
            || p.s("GSI_SK").ok() != Some(gsi_sk.as_str())
            || p.s("GSI_PK").ok() != Some(keys::event_key(&event).as_str())
            || p.s("belongsto").ok() != Some(keys::user_pk(&user).as_str())
        {
            out.push(format!("{user}/{event}: expected {sc:?}, {gsi_sk}"));
        }
        let e = sums.entry((user, event[..4].to_string())).or_default();
        *e = (e.0 + sc.points, e.1 + sc.mcorrect, e.2 + 1);
    }
    let mut seen = 0;
    for i in items {
        let (Ok(pk), Ok(sk)) = (i.s("PK"), i.s("SK")) else {
            continue;
        };
        let Some(year) = sk.strip_prefix("STANDINGS#") else {
            continue;
        };
        seen += 1;
        let user = pk.trim_start_matches("USER#").to_string();
        let want = sums.get(&(user.clone(), year.to_string()));
        let have = (num(i, "points"), num(i, "mcorrect"), num(i, "eplayed"));
        if want != Some(&have)
            || i.s("GSI_SK").ok() != Some(keys::standings_gsi_sk(have.0, &user).as_str())
        {
            out.push(format!(
                "standings {user}/{year}: {have:?}, expected {want:?}"
            ));
        }
    }
    if seen != sums.len() {
        out.push(format!("{seen} standings items, expected {}", sums.len()));
    }
    out
}

async fn assert_truth(rt: &Runtime) {
    let d = truth_differences(&scan(rt).await);
    assert!(d.is_empty(), "derived data differs from the facts: {d:#?}");
    assert_clean(rt).await;
}

fn m(event: &str, id: &str, order: i64, points: i64, result: Option<i64>) -> Item {
    write::a_match(event, id, id, order, points, false, &["A", "B"], result)
}

async fn event_with_matches(rt: &Runtime, event: &str, matches: &[(&str, i64, i64, Option<i64>)]) {
    let (date, slug) = event.split_at(10);
    put(rt, write::event(date, &slug[1..], "Event", "upcoming")).await;
    for (id, order, points, result) in matches {
        put(rt, m(event, id, *order, *points, *result)).await;
    }
}

/// The scoring job of `models/pickem.yaml` (its `compute:` consumer).
fn scoring(rt: &Runtime) -> std::sync::Arc<dyn SetJob> {
    crate::items::set_job(&rt.model, "scoring")
}

/// A job scoring every prediction of `event` (the event's matches changed).
fn event_job(event: &str) -> String {
    let (y, rest) = event.split_at(4);
    let (m, rest) = rest[1..].split_at(2);
    let (d, slug) = rest[1..].split_at(2);
    json!({ "version": 1, "kind": "scope", "scope": { "year": y, "month": m, "dd": d, "slug": &slug[1..] } })
        .to_string()
}

/// A job scoring these users' predictions for `event`.
fn predictions_job(event: &str, users: &[&str]) -> String {
    let mut v: Value = serde_json::from_str(&event_job(event)).expect("json");
    v["kind"] = json!("items");
    v["keys"] = json!(users
        .iter()
        .map(|u| [keys::user_pk(u), keys::event_key(event)])
        .collect::<Vec<_>>());
    v.to_string()
}

async fn plan(rt: &Runtime, body: &str) -> Plan {
    scoring(rt).plan(body, &reads(rt)).await.expect("plan")
}

async fn apply_plan(rt: &Runtime, plan: &Plan) -> shared::engine::setjob::Applied {
    crate::items::apply_plan(&*scoring(rt), &reads(rt), plan).await
}

/// `jobstream demo --model pickem` (the binary) plays the shipped scenario
/// (the compiled demo's three rounds): every expected item and absent
/// item, the seed's five screens printed and compared (every partition
/// whole), a fixpoint, `verify` clean. (Its processor writes vary with how
/// the scoring jobs' writes fall into stream batches, so they are printed,
/// not pinned; the exact count is proven by
/// `pickem_an_event_with_thousands_of_predictions_costs_one_write_per_changed_score`.)
#[test]
fn the_demo_plays_the_shipped_scenario_through_the_binary() {
    let text = crate::support::demo_through_the_binary("pickem");
    for line in [
        ": 3 step(s)",
        "query standings(year=2024)",
        "query event_predictions(event=2024-05-26-aew-double-or-nothing, user=sam)",
        "USER#alex | STANDINGS#2024 | STANDINGS#2024 | SCORE#00095#alex",
    ] {
        assert!(text.contains(line), "`{line}` in:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_an_event_with_thousands_of_predictions_costs_one_write_per_changed_score() {
    let count: usize = std::env::var("PICKEM_PREDICTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200);
    let mut env = env().await;
    event_with_matches(&env.rt, EV, &[("m1", 1, 10, None), ("m2", 2, 20, None)]).await;
    let predictions: Vec<Item> = (0..count)
        .map(|i| {
            write::prediction(
                &format!("u{i:05}"),
                EV,
                &[("m1", (i % 2) as i64), ("m2", (i % 3 % 2) as i64)],
            )
        })
        .collect();
    put_all(&env.rt, predictions).await;
    env.rt.drain().await.unwrap();
    let before = env.records().await.len();
    // Both results in one transaction (updates, as an application sets a
    // result): one batch of the stream.
    let mut tx = env.rt.dynamodb.transact_write_items();
    for (id, result) in [("m1", 0), ("m2", 1)] {
        tx = tx.transact_items(shared::tx::update_of(
            aws_sdk_dynamodb::types::Update::builder()
                .table_name(&env.rt.config.table)
                .set_key(Some(key(keys::event_key(EV), format!("MATCH#{id}"))))
                .update_expression("SET #r = :r")
                .expression_attribute_names("#r", "result")
                .expression_attribute_values(":r", n(result)),
        ));
    }
    tx.send().await.unwrap();
    env.rt.drain().await.unwrap();
    let after = env.records().await.len();
    let changed = (0..count).filter(|i| i % 2 == 0 || i % 3 % 2 == 1).count();
    // Table writes: the 2 results, one per prediction whose score changed,
    // one per standings item whose sums changed (one prediction each).
    assert_eq!(
        after - before,
        2 + 2 * changed,
        "item writes for {count} predictions"
    );
    assert_truth(&env.rt).await;
    assert_eq!(env.rt.dlq_depth("scoring").await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_late_and_duplicated_scoring_jobs_write_nothing_stale() {
    let mut env = env().await;
    event_with_matches(&env.rt, EV, &[("m1", 1, 10, Some(0))]).await;
    let sam = write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]);
    put(&env.rt, sam).await;
    env.rt.drain().await.unwrap();
    assert_eq!(score_of(&env.rt, "sam", EV).await.0, 10);
    let event_job = event_job(EV);
    let rt = &env.rt;

    // Duplicate: nothing to write.
    let before = env.records().await.len();
    let p = plan(rt, &event_job).await;
    assert!(p.updates.is_empty());
    assert_eq!(apply_plan(rt, &p).await.writes(), 0);
    assert_eq!(env.records().await.len(), before);

    // Late: planned for a result that was corrected back meanwhile.
    put(rt, m(EV, "m1", 1, 10, Some(1))).await;
    let stale = plan(rt, &event_job).await;
    assert_eq!(stale.updates.len(), 1, "would score sam 0");
    put(rt, m(EV, "m1", 1, 10, Some(0))).await;
    let applied = apply_plan(rt, &stale).await;
    assert_eq!((applied.writes(), applied.superseded), (0, 1));
    assert_eq!(score_of(rt, "sam", EV).await.0, 10);

    // Late: planned before a match was added (the set of matches changed).
    let stale = {
        put(rt, write::prediction("sam", EV, &[("m1", 1), ("m2", 1)])).await;
        plan(rt, &predictions_job(EV, &["sam"])).await
    };
    assert_eq!(stale.updates.len(), 1, "would score sam 0 without m2");
    put(rt, m(EV, "m2", 2, 7, Some(1))).await;
    // Only the match's own record is derived (its jobs not yet run).
    rt.processors
        .derive
        .deriver()
        .reconcile(&[key(keys::event_key(EV), "MATCH#m2")], &HashMap::new())
        .await
        .map_err(|(_, _, e)| e)
        .unwrap();
    let applied = apply_plan(rt, &stale).await;
    assert_eq!(
        (applied.writes(), applied.superseded),
        (0, 1),
        "version guard"
    );
    env.rt.drain().await.unwrap();
    assert_eq!(
        score_of(&env.rt, "sam", EV).await,
        (7, 1, "SCORE#007#sam".into())
    );
    // Every job again, in any order: nothing moves.
    let before = env.records().await.len();
    for job in [predictions_job(EV, &["sam", "nobody"]), event_job.clone()] {
        let p = plan(&env.rt, &job).await;
        assert_eq!(apply_plan(&env.rt, &p).await.writes(), 0);
    }
    assert_eq!(env.records().await.len(), before);
    assert_truth(&env.rt).await;
}

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_concurrent_result_and_pick_changes_end_exact() {
    let env = env().await;
    let rt = env.rt;
    let events = [EV, EV2, "2025-01-10-new-year"];
    for e in events {
        event_with_matches(
            &rt,
            e,
            &[
                ("a", 1, 10, None),
                ("b", 2, 20, None),
                ("c", 3, 30, None),
                ("d", 4, 40, None),
            ],
        )
        .await;
    }
    let users: Vec<String> = (0..24).map(|i| format!("user{i:02}")).collect();
    let db = crate::items::Writer::of(&rt);
    let bg = run_in_background(rt);
    let writer = |seed: u64, results: bool| {
        let db = db.clone();
        let users = users.clone();
        tokio::spawn(async move {
            let mut r = Lcg(seed);
            for _ in 0..60 {
                let e = events[r.next(3) as usize];
                let item = if results {
                    let id = ["a", "b", "c", "d"][r.next(4) as usize];
                    let result = match r.next(4) {
                        0 => None,
                        x => Some((x % 2) as i64),
                    };
                    let points = 10 * (1 + r.next(5) as i64);
                    m(e, id, 1, points, result)
                } else {
                    let u = &users[r.next(users.len() as u64) as usize];
                    let mut picks: Vec<(&str, i64)> = Vec::new();
                    for id in ["a", "b", "c", "d"] {
                        if r.next(3) > 0 {
                            picks.push((id, r.next(2) as i64));
                        }
                    }
                    write::prediction(u, e, &picks)
                };
                db.put(item).await;
                tokio::time::sleep(std::time::Duration::from_millis(r.next(15))).await;
            }
        })
    };
    let tasks = [
        writer(1, true),
        writer(2, false),
        writer(3, false),
        writer(4, true),
    ];
    for t in tasks {
        t.await.unwrap();
    }
    let mut env = ModelEnv {
        engine: env.engine,
        rt: bg.stop().await,
    };
    env.rt.drain().await.unwrap();
    assert_truth(&env.rt).await;
    assert_eq!(env.rt.dlq_depth("scoring").await.unwrap(), 0);
    // Quiet: nothing more to do, the table does not change.
    let before = env.records().await.len();
    env.rt.drain().await.unwrap();
    assert_eq!(env.records().await.len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_redelivery_never_moves_standings_away_from_the_truth() {
    let mut env = env().await;
    event_with_matches(&env.rt, EV, &[("m1", 1, 10, None), ("m2", 2, 20, None)]).await;
    for (u, picks) in [("sam", [0, 1]), ("jo", [1, 1]), ("al", [0, 0])] {
        let p = write::prediction(u, EV, &[("m1", picks[0]), ("m2", picks[1])]);
        put(&env.rt, p).await;
    }
    env.rt.drain().await.unwrap();
    put(&env.rt, m(EV, "m1", 1, 10, Some(0))).await;
    env.rt.drain().await.unwrap();
    put(&env.rt, m(EV, "m2", 2, 20, Some(0))).await;
    put(&env.rt, m(EV, "m2", 2, 20, Some(1))).await;
    let al = write::prediction("al", EV, &[("m1", 1), ("m2", 1)]);
    put(&env.rt, al).await;
    env.rt.drain().await.unwrap();
    assert_truth(&env.rt).await;
    let truth: Vec<Option<(i64, i64, i64, String)>> = {
        let mut v = Vec::new();
        for u in ["sam", "jo", "al"] {
            v.push(standings(&env.rt, u, "2024").await);
        }
        v
    };
    let all = env.records().await;
    let derive = env.rt.stream_processor("derive");
    // Every record again, one at a time, oldest first: after each, the
    // standings are still the truth.
    for r in &all {
        let event = crate::items::records_event(std::slice::from_ref(r));
        let resp = derive.handle(event).await.expect("batch handled");
        assert!(resp.batch_item_failures.is_empty());
        for (i, u) in ["sam", "jo", "al"].iter().enumerate() {
            assert_eq!(
                standings(&env.rt, u, "2024").await,
                truth[i],
                "after a replayed record"
            );
        }
    }
    // And the whole stream as one batch.
    let event = crate::items::records_event(&all);
    derive.handle(event).await.expect("batch handled");
    env.rt.drain().await.unwrap();
    assert_eq!(env.records().await.len(), all.len(), "no write at all");
    assert_truth(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_backfill_adopts_an_existing_table_and_verify_sees_wrong_scores() {
    // Facts written while no processor reads the stream.
    let env = env().await;
    event_with_matches(
        &env.rt,
        EV,
        &[("m1", 1, 10, Some(0)), ("m2", 2, 20, Some(1))],
    )
    .await;
    event_with_matches(&env.rt, EV2, &[("d1", 1, 5, Some(1))]).await;
    let sam = write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]);
    put(&env.rt, sam).await;
    put(&env.rt, write::prediction("sam", EV2, &[("d1", 1)])).await;
    let mut wrong = write::prediction("jo", EV, &[("m1", 1), ("m2", 1)]);
    wrong.insert("points".into(), n(500));
    wrong.insert("mcorrect".into(), n(2));
    put(&env.rt, wrong).await;
    let report = env.rt.verify().await.unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("USER#jo") && p.contains("points is 500, the rows imply 20")),
        "{:#?}",
        report.problems
    );
    // A runtime that starts reading now, and a backfill of what exists.
    let ModelEnv {
        engine: _engine,
        mut rt,
    } = redeploy_model(env, "pickem", |o| {
        o.mapping.starting_position = jobstream::local::esm::StartingPosition::Latest
    })
    .await;
    let opts = jobstream::tools::backfill::ScanOptions::default();
    crate::items::backfill(&rt, &opts).await;
    rt.drain().await.unwrap();
    assert_eq!(
        score_of(&rt, "sam", EV).await,
        (30, 2, "SCORE#030#sam".into())
    );
    assert_eq!(
        score_of(&rt, "jo", EV).await,
        (20, 1, "SCORE#020#jo".into())
    );
    assert_eq!(
        standings(&rt, "sam", "2024").await,
        Some((35, 3, 2, "SCORE#00035#sam".into()))
    );
    assert_truth(&rt).await;
    // The backfill's jobs wrote the sequence with the scores: a writer's
    // `mcorrect` (no projection reads it; the standings count it) is
    // brought back by the live path alone.
    let jo = key("USER#jo", format!("EVENT#{EV}"));
    let sequence = |i: Option<Item>| i.expect("jo's prediction").get("computeSequence").cloned();
    assert_eq!(sequence(get(&rt, jo.clone()).await), Some(n(1)));
    let before = standings(&rt, "jo", "2024").await;
    update(&rt, jo.clone(), "SET mcorrect = :m", &[(":m", n(9))]).await;
    rt.drain().await.unwrap();
    assert_eq!(
        score_of(&rt, "jo", EV).await,
        (20, 1, "SCORE#020#jo".into())
    );
    assert_eq!(standings(&rt, "jo", "2024").await, before);
    assert_eq!(sequence(get(&rt, jo).await), Some(n(2)));
    assert_truth(&rt).await;
}

/// user16 #8: a backfill started one job per row of a scope (816 jobs
/// for 12 accounts on a table already exact), each reading the scope
/// again. One job of a kind per scanned page: an event of 30 matches and
/// one prediction is one scope job and one for the prediction, and the
/// score is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_starts_one_job_per_scope_not_one_per_row() {
    let env = env().await;
    let matches: Vec<(String, i64)> = (0..30).map(|i| (format!("m{i:02}"), i)).collect();
    let rows: Vec<(&str, i64, i64, Option<i64>)> = matches
        .iter()
        .map(|(id, i)| (id.as_str(), *i + 1, 1, Some(0)))
        .collect();
    event_with_matches(&env.rt, EV, &rows).await;
    let picks: Vec<(&str, i64)> = matches.iter().map(|(id, _)| (id.as_str(), 0)).collect();
    put(&env.rt, write::prediction("sam", EV, &picks)).await;
    let ModelEnv {
        engine: _engine,
        mut rt,
    } = redeploy_model(env, "pickem", |o| {
        o.mapping.starting_position = jobstream::local::esm::StartingPosition::Latest
    })
    .await;
    let opts = jobstream::tools::backfill::ScanOptions::default();
    let (_, totals) = crate::items::backfill(&rt, &opts).await;
    assert_eq!(
        totals.messages.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "the event's scope job and the prediction's"
    );
    rt.drain().await.unwrap();
    assert_eq!(score_of(&rt, "sam", EV).await.0, 30);
    assert_truth(&rt).await;
}

/// The users whose predictions the event's GSI partition lists.
async fn gsi_users(rt: &Runtime) -> Vec<String> {
    let out = rt
        .dynamodb
        .query()
        .table_name(&rt.config.table)
        .index_name("GSI")
        .key_condition_expression("GSI_PK = :e AND begins_with(GSI_SK, :s)")
        .expression_attribute_values(":e", s(keys::event_key(EV)))
        .expression_attribute_values(":s", s("SCORE#"))
        .send()
        .await
        .expect("query");
    let mut users: Vec<String> = out
        .items()
        .iter()
        .filter_map(|i| i.s("PK").ok())
        .map(|pk| pk.trim_start_matches("USER#").to_string())
        .collect();
    users.sort();
    users
}

/// The event's set of predictions is exact whatever the GSI shows: a
/// prediction whose index entry lags (simulated: its GSI keys are not there
/// yet when the event's scoring job lists the event) is still scored
/// (issue 17, defect 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_an_event_job_scores_a_prediction_the_gsi_does_not_list_yet() {
    let mut env = env().await;
    event_with_matches(&env.rt, EV, &[("m1", 1, 10, None), ("m2", 2, 5, None)]).await;
    for u in ["u1", "u2", "u3"] {
        put(&env.rt, write::prediction(u, EV, &[("m1", 0), ("m2", 1)])).await;
    }
    env.rt.drain().await.unwrap();
    assert_eq!(gsi_users(&env.rt).await, ["u1", "u2", "u3"]);
    // u2's GSI entry lags (the index has not caught up).
    update(
        &env.rt,
        key(keys::user_pk("u2"), keys::event_key(EV)),
        "REMOVE GSI_PK, GSI_SK",
        &[],
    )
    .await;
    assert_eq!(gsi_users(&env.rt).await, ["u1", "u3"], "u2 not listed");
    // A result is set; the event's job runs before the stream is read.
    update(
        &env.rt,
        key(keys::event_key(EV), "MATCH#m1"),
        "SET #result = :r",
        &[(":r", n(0))],
    )
    .await;
    let p = plan(&env.rt, &event_job(EV)).await;
    apply_plan(&env.rt, &p).await;
    for u in ["u1", "u2", "u3"] {
        assert_eq!(score_of(&env.rt, u, EV).await.0, 10, "{u} scored");
    }
    env.rt.drain().await.unwrap();
    assert_truth(&env.rt).await;
}

/// The clamps of the padding scenario (a scenario file) are counted: the
/// match's and the standings' by the engine from what the rules note, the
/// predictions' by the scoring job, as metrics of its consumer
/// (`ScoreOverflow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_clamps_are_counted() {
    let file = "pickem/pickem_padding_and_clamping_keep_true_values.yaml";
    let env = crate::items::play_scenario(file, |_| {}).await;
    let overflow = shared::metrics::names::SCORE_OVERFLOW;
    let derive = crate::items::metric_of(&env, "derive", overflow);
    assert!(derive >= 2, "clamps are counted: {derive}");
    let scoring = env.rt.consumer("scoring").metrics().get(overflow);
    assert!(scoring >= 2, "the scores' clamps are counted: {scoring}");
}

/// `explain` of a prediction says what its computed values are, as its
/// event's matches imply them now, and names a value the item holds that
/// differs (user6: `explain` said nothing of computed values).
#[tokio::test]
async fn explain_shows_a_predictions_computed_values_and_a_forged_one() {
    let mut env = env().await;
    event_with_matches(&env.rt, EV, &[("m1", 1, 3, Some(1)), ("m2", 2, 5, Some(0))]).await;
    put(
        &env.rt,
        write::prediction("ann", EV, &[("m1", 1), ("m2", 1)]),
    )
    .await;
    env.rt.drain().await.expect("drains");
    let file = crate::support::shipped("pickem.yaml");
    let ev = keys::event_key(EV);
    let rows = format!("from the match rows at PK={ev} (2 item(s) read)");
    crate::explain::says(
        &crate::explain::ask_in(&env, &file, "USER#ann", &ev).await,
        &[
            &format!("computes points = 3 {rows}"),
            &format!("computes mcorrect = 1 {rows}"),
        ],
    );
    // A writer forges the value: until its job brings it back, explain
    // names what the item holds.
    update(
        &env.rt,
        key(keys::user_pk("ann"), ev.clone()),
        "SET points = :p",
        &[(":p", n(99))],
    )
    .await;
    crate::explain::says(
        &crate::explain::ask_in(&env, &file, "USER#ann", &ev).await,
        &[&format!(
            "computes points = 3 {rows} (the item holds 99: a job pending, or drift)"
        )],
    );
    env.rt.drain().await.expect("drains");
    crate::explain::says(
        &crate::explain::ask_in(&env, &file, "USER#ann", &ev).await,
        &[&format!("computes points = 3 {rows}")],
    );
    // A match whose result names no team is bad input: never valid, it is
    // no match of the event (the job leaves it out too).
    put(&env.rt, m(EV, "m3", 3, 1, Some(2))).await;
    let rows3 = format!("from the match rows at PK={ev} (3 item(s) read)");
    crate::explain::says(
        &crate::explain::ask_in(&env, &file, "USER#ann", &ev).await,
        &[&format!("computes points = 3 {rows3}")],
    );
    // Valid, then bad again: its scope waits for it, not judged.
    put(&env.rt, m(EV, "m3", 3, 1, Some(1))).await;
    env.rt.drain().await.expect("drains");
    put(&env.rt, m(EV, "m3", 3, 1, Some(2))).await;
    env.rt.drain().await.expect("drains");
    crate::explain::says(
        &crate::explain::ask_in(&env, &file, "USER#ann", &ev).await,
        &[&format!("computes its values from the match rows at PK={ev} (3 item(s) read): not judged now, a row (PK={ev}, SK=MATCH#m3) is bad input after a valid image: the values wait for it")],
    );
}
