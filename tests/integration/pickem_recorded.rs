//! `models/pickem.yaml` (a model file with a `compute:` block and a counter
//! whose keys come from its sums) against what the compiled Pick'Em model
//! did before it retired (recorded, see [`crate::recorded`]; recorded while
//! both ran, the file compared live with its twin in the same run): the
//! same deployed definitions; the same pure rules on fixtures and their
//! mutations (projection, derived values, contributions, the scoring jobs
//! a change sends); the scenario file ending in the same table, `verify` and
//! processor writes; `verify` finding and repairing a forged score. The
//! races, redelivery, clamping, bad input and an event with thousands of
//! predictions run in `tests/integration/pickem.rs`, faults and kills in
//! `every_queue_model_ends_exact_under_faults_and_kills`.

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item};

use crate::league as write;
use crate::recorded::{check, scan, scenario, table_json, Mutations, Play};
use crate::support::model_env;

const EV: &str = "2024-03-03-revolution";

/// Valid writer items and processor items of every kind.
fn fixtures() -> Vec<Item> {
    let mut scored = write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]);
    scored.insert("points".into(), n(30));
    scored.insert("mcorrect".into(), n(2));
    scored.insert("GSI_PK".into(), s(format!("EVENT#{EV}")));
    scored.insert("GSI_SK".into(), s("SCORE#030#sam"));
    scored.insert("belongsto".into(), s("USER#sam"));
    let standings = crate::items::attrs(vec![
        ("PK", s("USER#sam")),
        ("SK", s("STANDINGS#2024")),
        ("type", s("standings")),
        ("points", n(123_456)),
        ("mcorrect", n(3)),
        ("eplayed", n(2)),
    ]);
    vec![
        write::user("sam", "Sam"),
        write::event("2024-03-03", "revolution", "Revolution", "upcoming"),
        write::a_match(EV, "m1", "Opener", 1, 10, false, &["A", "B"], Some(0)),
        write::a_match(EV, "m2", "Main", 120, 20, true, &["A", "B", "C"], None),
        write::prediction("sam", EV, &[("m1", 0), ("m2", 1)]),
        scored,
        standings,
    ]
}

/// Each fixture with one thing wrong (or different) at a time.
fn mutations() -> Mutations {
    let team = |m: Vec<AttributeValue>| {
        AttributeValue::M([("members".to_string(), AttributeValue::L(m))].into())
    };
    let teams = AttributeValue::L;
    let predictions = |v| AttributeValue::M([("m1".to_string(), v)].into());
    let sets = [
        ("type", s("event")),
        ("date", s("2024-03-03T20:00:00Z")),
        ("date", s("2024/03/04")),
        ("state", s("scored")),
        ("id", s("m9")),
        ("order", n(-1)),
        ("order", n(7)),
        ("points", n(-5)),
        ("points", n(40)),
        ("points", n(2000)),
        ("points", s("lots")),
        ("result", n(1)),
        ("result", n(2)),
        ("result", n(-1)),
        ("preshow", s("yes")),
        ("championships", AttributeValue::L(vec![s("World")])),
        ("championships", AttributeValue::L(vec![n(1)])),
        ("teams", teams(vec![team(vec![s("A")])])),
        ("teams", teams(vec![team(vec![s("A")]), team(vec![])])),
        ("teams", teams(vec![team(vec![s("A")]), s("B")])),
        ("predictions", predictions(n(-1))),
        ("predictions", predictions(s("0"))),
        ("predictions", predictions(n(1))),
        ("predictions", AttributeValue::M(Default::default())),
    ];
    let keys = [
        ("sam", "s#am"),
        ("sam", "s am"),
        ("sam", ""),
        ("sam", "jo"),
        ("03-03", "03-04"),
        ("03-03", "02-30"),
        ("2024", "24"),
        ("2024", "2025"),
        ("revolution", "re#volution"),
        ("revolution", "re volution"),
        ("m1", "m#1"),
        ("m2", ""),
    ];
    Mutations {
        values: vec![s("x")],
        sets: sets.map(|(a, v)| (a.to_string(), v)).into(),
        keys: keys
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
    }
}

/// The rules on every fixture and mutation: what was recorded (the
/// compiled model's aspects, but for two known differences the file has:
/// a standings key with an invalid user id or year is a counter item to
/// the file, bad input to the compiled model (nothing ever counts into
/// such a key); a writer's stray negative `points` on a processor-owned
/// item is read as it is, not as 0).
#[test]
fn the_file_rules_give_the_recorded_aspects_on_fixtures_and_mutations() {
    crate::recorded::rules("pickem", (fixtures(), mutations()));
}

#[test]
fn the_pickem_file_deploys_what_the_compiled_model_deployed() {
    crate::recorded::deploys("pickem");
}

/// `models/pickem.scenario.yaml` (the compiled demo as a scenario: three
/// rounds, every score and standing, the five screens) played through
/// `--model pickem`: the compiled demo's recorded table attribute for
/// attribute, the same `verify`, the same bad input, the processor writes
/// up to the batches' regrouping. (They vary run to run, measured on the
/// compiled model 108-116 for its demo: the order the local SQS hands out
/// scoring jobs decides how their writes' stream records fall into derive
/// batches, and a user's standings are written once per batch; and, since
/// an absent score waits for its job instead of counting 0, whether the
/// derive meets a prediction before or after its job wrote the score:
/// 50/77/107 against the recorded 58/86/116 on the 2-core machine under
/// a full suite's load, 58/85/115 idle. The exact
/// count, one write per changed score and per standings item, is proven by
/// `pickem_an_event_with_thousands_of_predictions_costs_one_write_per_changed_score`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pickem_scenario_gives_the_recorded_table_verify_and_writes() {
    let play = Play {
        writes_slack: 12,
        ..Play::all("pickem")
    };
    scenario(play).await.env.engine.stop().await;
}

/// A score a writer overwrote together with a key that agrees with it and
/// the job's sequence raised by one, as the job's own write would (nothing
/// in the stream says it is stale): `verify` finds it (the recorded
/// finding), and its repair (the scoring job, through its guards) brings
/// the score and the standings back, raising the sequence again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_finds_a_forged_score_and_repairs_it() {
    let mut env = model_env("pickem", |_| {}).await;
    let rt = &mut env.rt;
    let (date, slug) = EV.split_at(10);
    crate::support::put(rt, write::event(date, &slug[1..], "Rev", "upcoming")).await;
    crate::support::put(
        rt,
        write::a_match(EV, "m1", "Opener", 1, 10, false, &["A", "B"], Some(0)),
    )
    .await;
    crate::support::put(rt, write::prediction("sam", EV, &[("m1", 0)])).await;
    rt.drain().await.unwrap();
    crate::items::assert_clean(rt).await;
    let key = crate::items::key("USER#sam", format!("EVENT#{EV}"));
    rt.dynamodb
        .update_item()
        .table_name(&rt.config.table)
        .set_key(Some(key.clone()))
        .update_expression("SET points = :p, GSI_SK = :k ADD computeSequence :one")
        .expression_attribute_values(":p", n(500))
        .expression_attribute_values(":k", s("SCORE#500#sam"))
        .expression_attribute_values(":one", n(1))
        .send()
        .await
        .unwrap();
    rt.drain().await.unwrap();
    let mut drift = crate::recorded::repaired(rt, |_| true).await;
    let found = drift["found"].as_array().expect("found");
    assert_eq!(found.len(), 1, "{drift:#}");
    let what = found[0].to_string();
    assert!(what.contains("500") && what.contains("10"), "{what}");
    assert_eq!(drift["left"], serde_json::json!([]), "repaired");
    let t = scan(rt).await;
    let p = &t[&("USER#sam".to_string(), format!("EVENT#{EV}"))];
    assert_eq!(p.get("points"), Some(&n(10)));
    assert_eq!(p.get("GSI_SK"), Some(&s("SCORE#010#sam")));
    assert_eq!(
        p.get("computeSequence"),
        Some(&n(3)),
        "scored, forged, repaired"
    );
    let st = &t[&("USER#sam".to_string(), "STANDINGS#2024".to_string())];
    assert_eq!(st.get("points"), Some(&n(10)));
    drift["table"] = table_json(&t);
    check("pickem-drift", &drift);
    env.engine.stop().await;
}
