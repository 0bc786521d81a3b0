//! An absent `compute:` value is "not computed yet", never 0 (SPEC §8): a
//! writer's PutItem replaces the whole item, dropping its computed values
//! and `computeSequence`, and until the item's job writes them back (a
//! queue round trip) every rule that reads them keeps what the item's
//! last image with its values implied; an item inserted without them
//! implies nothing through those rules until its job first writes. Each
//! test watches every write of the derived datum (every stream record of
//! its item), not only the end state.
//!
//! Before: the rules read an absent value as 0, so the standings of a
//! re-put prediction dropped by its old points, then rose (user15 #6 and
//! user14 #2 are the shapes of the other two tests).

use serde_json::Value;
use shared::item::{s, Item, ItemExt};

use crate::items::{assert_clean, attrs, get, key, num, put, put_all};
use crate::league::{self as write, event_key, standings_key, user_pk};
use crate::support::{model_env, temp_model, ModelEnv};

/// Every stream record of the item at `pk`/`sk`, in stream order: its new
/// image (`None`: a remove).
async fn writes_of(env: &ModelEnv, pk: &str, sk: &str) -> Vec<Option<Value>> {
    env.records()
        .await
        .into_iter()
        .filter(|r| {
            r["dynamodb"]["Keys"]["PK"]["S"] == pk && r["dynamodb"]["Keys"]["SK"]["S"] == sk
        })
        .map(|r| (r["eventName"] != "REMOVE").then(|| r["dynamodb"]["NewImage"].clone()))
        .collect()
}

/// A number attribute of a record's new image (`None`: absent).
fn number(image: &Value, a: &str) -> Option<i64> {
    image[a]["N"].as_str().and_then(|v| v.parse().ok())
}

const EV: &str = "2024-03-03-revolution";

/// A re-put: the score before, the new picks, the score they imply.
type Step = (i64, [(&'static str, i64); 2], i64);

/// sam's standings points of 2024.
async fn standings_points(env: &ModelEnv) -> i64 {
    let standings = get(&env.rt, key(user_pk("sam"), standings_key("2024"))).await;
    num(&standings.expect("standings"), "points")
}

/// A scored prediction re-put by its writer with other picks: the
/// standings move from the old score straight to the new one, in both
/// directions, never through the score without the prediction's points
/// (before: 10, then 0, then 15 as the job rescored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_put_prediction_moves_the_standings_straight_to_its_new_score() {
    let mut env = model_env("pickem", |_| {}).await;
    let (date, slug) = EV.split_at(10);
    put(&env.rt, write::event(date, &slug[1..], "Event", "upcoming")).await;
    put_all(
        &env.rt,
        vec![
            write::a_match(EV, "m1", "m1", 1, 10, false, &["A", "B"], Some(0)),
            write::a_match(EV, "m2", "m2", 2, 5, false, &["A", "B"], Some(1)),
        ],
    )
    .await;
    put(
        &env.rt,
        write::prediction("sam", EV, &[("m1", 0), ("m2", 0)]),
    )
    .await;
    env.rt.drain().await.expect("drains");
    let (pk, sk) = (user_pk("sam"), standings_key("2024"));
    assert_eq!(standings_points(&env).await, 10);
    // (old score, picks of the re-put, new score)
    let steps: [Step; 3] = [
        (10, [("m1", 0), ("m2", 1)], 15),
        (15, [("m1", 1), ("m2", 1)], 5),
        (5, [("m1", 1), ("m2", 1)], 5),
    ];
    for (old, picks, new) in steps {
        let before = writes_of(&env, &pk, &sk).await.len();
        let prediction = write::prediction("sam", EV, &picks);
        assert!(
            !prediction.contains_key("points"),
            "a writer's put: no values"
        );
        put(&env.rt, prediction).await;
        env.rt.drain().await.expect("drains");
        let moved: Vec<Option<i64>> = writes_of(&env, &pk, &sk).await[before..]
            .iter()
            .map(|w| w.as_ref().and_then(|i| number(i, "points")))
            .collect();
        let direct: Vec<Option<i64>> = if old == new { vec![] } else { vec![Some(new)] };
        assert_eq!(moved, direct, "the standings' points from {old} to {new}");
        assert_eq!(standings_points(&env).await, new);
        let p = get(&env.rt, key(user_pk("sam"), event_key(EV)))
            .await
            .expect("prediction");
        assert_eq!(num(&p, "points"), new);
        assert_eq!(
            p.s("GSI_SK").ok(),
            Some(write::prediction_gsi_sk(new, "sam").as_str())
        );
    }
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// user15 #6's shape: a sparse "unanswered" index keyed from a computed
/// answer count.
const QA: &str = r#"
jobstream: 1
name: qa_waiting
table:
  name: qa_waiting
  pk: PK
  sk: SK
  gsis: [{ name: GSI2, pk: GSI2PK, sk: GSI2SK }]
entities:
  question:
    key: { PK: "Q#${qid}", SK: "QUESTION" }
    attributes: { qid: string, title: string, status: [open, closed], primaryTag: string }
    compute:
      over: { entity: answer, as: answers }
      values:
        answerCount: "size(answers)"
      queue: answer-counts
    project:
      attributes:
        GSI2PK: "${status == 'open' && answerCount == 0 ? 'UNANSWERED#' + primaryTag : null}"
        GSI2SK: "Q#${qid}"
  answer:
    key: { PK: "Q#${qid}", SK: "ANSWER#${aid}" }
    attributes: { qid: string, aid: string, body: string }
"#;

fn question(qid: &str, title: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("Q#{qid}"))),
        ("SK", s("QUESTION")),
        ("type", s("question")),
        ("qid", s(qid)),
        ("title", s(title)),
        ("status", s("open")),
        ("primaryTag", s("rust")),
    ])
}

fn answer(qid: &str, aid: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("Q#{qid}"))),
        ("SK", s(format!("ANSWER#{aid}"))),
        ("type", s("answer")),
        ("qid", s(qid)),
        ("aid", s(aid)),
        ("body", s("yes")),
    ])
}

/// A question with three answers is never listed as unanswered: neither
/// when it is inserted after its answers nor when its writer edits its
/// title by PutItem (before: every such put listed it until the job wrote
/// `answerCount` back). A question without answers is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sparse_index_keyed_from_a_computed_count_never_lists_an_item_its_rows_exclude() {
    let path = temp_model("qa_waiting", QA);
    let mut env = model_env("qa_waiting", |o| o.model_file = Some(path)).await;
    put_all(
        &env.rt,
        vec![answer("q1", "a1"), answer("q1", "a2"), answer("q1", "a3")],
    )
    .await;
    put(&env.rt, question("q1", "How?")).await;
    put(&env.rt, question("q2", "Why?")).await;
    env.rt.drain().await.expect("drains");
    for title in ["How, exactly?", "How, really?"] {
        put(&env.rt, question("q1", title)).await;
        env.rt.drain().await.expect("drains");
    }
    let listed: Vec<Value> = writes_of(&env, "Q#q1", "QUESTION")
        .await
        .into_iter()
        .flatten()
        .filter(|i| !i["GSI2PK"].is_null())
        .collect();
    assert_eq!(listed, Vec::<Value>::new(), "q1 listed as unanswered");
    let q1 = get(&env.rt, key("Q#q1", "QUESTION")).await.expect("q1");
    assert_eq!((num(&q1, "answerCount"), q1.get("GSI2PK")), (3, None));
    assert_eq!(q1.s("title").ok(), Some("How, really?"));
    let q2 = get(&env.rt, key("Q#q2", "QUESTION")).await.expect("q2");
    assert_eq!(
        (num(&q2, "answerCount"), q2.get("GSI2PK")),
        (0, Some(&s("UNANSWERED#rust")))
    );
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// user14 #2's shape: a derived item while a computed count is 0.
const DEALS: &str = r#"
jobstream: 1
name: deals_waiting
table: { name: deals_waiting, pk: PK, sk: SK }
entities:
  deal:
    key: { PK: "DEAL#${dealId}", SK: "DEAL" }
    attributes: { dealId: string, title: string, stage: [lead, proposal, won] }
    compute:
      over: { entity: activity, as: acts }
      values:
        actCount: "size(acts)"
      queue: deal-stats
    derive:
      - entity: proposal_deal
        when: "stage == 'proposal' && actCount == 0"
        with: { dealId: dealId, title: title }
  activity:
    key: { PK: "DEAL#${dealId}", SK: "ACT#${actId}" }
    attributes: { dealId: string, actId: string, kind: string }
  proposal_deal:
    owner: processor
    key: { PK: "IDLE", SK: "DEAL#${dealId}" }
    attributes: { dealId: string, title: string }
"#;

fn deal(id: &str, title: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("DEAL#{id}"))),
        ("SK", s("DEAL")),
        ("type", s("deal")),
        ("dealId", s(id)),
        ("title", s(title)),
        ("stage", s("proposal")),
    ])
}

fn activity(deal: &str, id: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("DEAL#{deal}"))),
        ("SK", s(format!("ACT#{id}"))),
        ("type", s("activity")),
        ("dealId", s(deal)),
        ("actId", s(id)),
        ("kind", s("call")),
    ])
}

/// A proposal with an activity is never derived as idle: not when it is
/// inserted after its activity, nor when its writer re-puts it (before:
/// put on each, deleted when the job wrote `actCount = 1`). A proposal
/// without activity is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derive_while_a_computed_count_is_0_is_never_put_for_an_item_whose_rows_say_otherwise() {
    let path = temp_model("deals_waiting", DEALS);
    let mut env = model_env("deals_waiting", |o| o.model_file = Some(path)).await;
    put(&env.rt, activity("d1", "a1")).await;
    put(&env.rt, deal("d1", "Big one")).await;
    put(&env.rt, deal("d2", "Small one")).await;
    env.rt.drain().await.expect("drains");
    put(&env.rt, deal("d1", "Bigger one")).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        writes_of(&env, "IDLE", "DEAL#d1").await,
        Vec::<Option<Value>>::new(),
        "d1 derived as idle"
    );
    let d1 = get(&env.rt, key("DEAL#d1", "DEAL")).await.expect("d1");
    assert_eq!(num(&d1, "actCount"), 1);
    let idle = get(&env.rt, key("IDLE", "DEAL#d2"))
        .await
        .expect("d2 is idle");
    assert_eq!(idle.get("title"), Some(&s("Small one")));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// A table loaded without processors (no values computed): `verify`
/// reports each absent value and each item missing from its scope's
/// listing (nothing the values imply: what reads them waits), and one
/// `--repair` brings the table to exact, the jobs writing the values and
/// the items then implying, with no processor reading the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_repair_brings_a_table_loaded_without_processors_to_exact() {
    let path = temp_model(
        "qa_waiting_repair",
        &QA.replace("qa_waiting", "qa_waiting_repair"),
    );
    let env = model_env("qa_waiting_repair", |o| o.model_file = Some(path)).await;
    put_all(
        &env.rt,
        vec![
            answer("q1", "a1"),
            answer("q1", "a2"),
            question("q1", "How?"),
            question("q2", "Why?"),
        ],
    )
    .await;
    let report = env.rt.verify().await.expect("verify");
    let mut problems = report.problems.clone();
    problems.sort();
    assert_eq!(
        problems,
        vec![
            "computed value: PK=Q#q1, SK=QUESTION: answerCount is absent, the rows imply 2",
            "computed value: PK=Q#q2, SK=QUESTION: answerCount is absent, the rows imply 0",
            "index: PK=Q#q1, SK=QUESTION: not listed in the ledger index compute#answer-counts#Q#q1",
            "index: PK=Q#q2, SK=QUESTION: not listed in the ledger index compute#answer-counts#Q#q2",
        ]
    );
    assert_eq!(report.bad_input, Vec::<String>::new());
    crate::items::repair(&env.rt, &report).await;
    let q1 = get(&env.rt, key("Q#q1", "QUESTION")).await.expect("q1");
    assert_eq!((num(&q1, "answerCount"), q1.get("GSI2PK")), (2, None));
    let q2 = get(&env.rt, key("Q#q2", "QUESTION")).await.expect("q2");
    assert_eq!(q2.get("GSI2PK"), Some(&s("UNANSWERED#rust")));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// A prediction re-put while no processor runs: `verify` reports its
/// absent score alone (its standings keep its last score: no drift), and
/// one `--repair` writes the score and brings the standings to it, with
/// no processor reading the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_repair_of_a_re_put_prediction_brings_its_standings_along() {
    let mut env = model_env("pickem", |_| {}).await;
    let (date, slug) = EV.split_at(10);
    put(&env.rt, write::event(date, &slug[1..], "Event", "upcoming")).await;
    put_all(
        &env.rt,
        vec![
            write::a_match(EV, "m1", "m1", 1, 10, false, &["A", "B"], Some(0)),
            write::a_match(EV, "m2", "m2", 2, 5, false, &["A", "B"], Some(1)),
        ],
    )
    .await;
    put(
        &env.rt,
        write::prediction("sam", EV, &[("m1", 0), ("m2", 0)]),
    )
    .await;
    env.rt.drain().await.expect("drains");
    assert_eq!(standings_points(&env).await, 10);
    put(
        &env.rt,
        write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]),
    )
    .await;
    let report = env.rt.verify().await.expect("verify");
    assert_eq!(
        report.problems,
        vec![format!(
            "computed value: PK=USER#sam, SK=EVENT#{EV}: points is absent, the rows imply 15, mcorrect is absent, the rows imply 2"
        )]
    );
    assert_eq!(standings_points(&env).await, 10, "kept");
    let file = crate::support::shipped("pickem.yaml");
    let explained = crate::explain::ask_in(&env, &file, "USER#sam", &event_key(EV)).await;
    crate::explain::says(
        &explained,
        &[&format!(
            "PK=USER#sam, SK=EVENT#{EV}: points not computed yet: what reads them (its projection, derives, counts) keeps what its last state with its values implied; nothing is written onto it until its job writes them"
        )],
    );
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(standings_points(&env).await, 15);
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// What a writer's re-put of a scored prediction costs, counted by a bill
/// meter between the processors and the engine (never timed): deciding
/// that what reads the score waits is a function of the record's images,
/// so it costs no request, and the writes of the moment the score read as
/// 0 are gone. Printed; the derive's two records of the prediction (the
/// put's, the job's) and the one job, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_put_prediction_costs_no_request_more() {
    let engine = crate::support::start_engine().await;
    let meter = jobstream::meter::Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let mut env = crate::support::model_env_on(engine, "pickem", |o| {
        o.processor_endpoint = Some(meter.endpoint());
    })
    .await;
    let (date, slug) = EV.split_at(10);
    put(&env.rt, write::event(date, &slug[1..], "Event", "upcoming")).await;
    put_all(
        &env.rt,
        vec![
            write::a_match(EV, "m1", "m1", 1, 10, false, &["A", "B"], Some(0)),
            write::a_match(EV, "m2", "m2", 2, 5, false, &["A", "B"], Some(1)),
        ],
    )
    .await;
    put(
        &env.rt,
        write::prediction("sam", EV, &[("m1", 0), ("m2", 0)]),
    )
    .await;
    env.rt.drain().await.expect("drains");
    let before = meter.bill();
    put(
        &env.rt,
        write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]),
    )
    .await;
    env.rt.drain().await.expect("drains");
    let bill = meter.bill().since(&before);
    println!("a re-put prediction rescored: {}", bill.per_change(1));
    assert_eq!(standings_points(&env).await, 15);
    let requests = |op: &str| bill.ops.get(op).map_or(0, |o| o.requests);
    // The job: the scope's version and the rows.
    assert_eq!((requests("GetItem"), requests("Query")), (1, 1), "{bill:?}");
    // No projection written from a score read as 0 (before: one
    // UpdateItem, and the standings moved twice: 5 TransactWriteItems,
    // 10 BatchGetItem measured; now 3 and 9).
    assert_eq!(requests("UpdateItem"), 0, "{bill:?}");
    assert!(requests("TransactWriteItems") <= 3, "{bill:?}");
    assert!(requests("BatchGetItem") <= 9, "{bill:?}");
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}
