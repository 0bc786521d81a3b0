//! `compute:` blocks, `map`/`list` attributes and counters whose keys come
//! from their sums: `check-model`'s problems (line and column of each) and
//! the rules of `models/pickem.yaml`.

use aws_sdk_dynamodb::types::AttributeValue;

use super::compile;
use super::model::Problem;
use super::rules::FileRules;
use crate::engine::rules::Rules;
use crate::item::{n, s, Item};

const PICKEM: &str = include_str!("../../../models/pickem.yaml");

fn rules() -> FileRules {
    FileRules(Box::leak(Box::new(
        compile(PICKEM, "t").unwrap_or_else(|p| panic!("{p:#?}")),
    )))
}

fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// `text` with `from` replaced by `to` (which must occur once), and the
/// 1-based line and column where `at` (in `to`) then is.
fn broken(from: &str, to: &str, at: &str) -> (String, usize, u64) {
    assert_eq!(PICKEM.matches(from).count(), 1, "{from}");
    let text = PICKEM.replace(from, to);
    let start = text.find(to).expect("replaced") + to.find(at).expect("`at` in `to`");
    let line = text[..start].matches('\n').count() + 1;
    let col = start - text[..start].rfind('\n').map_or(0, |i| i + 1) + 1;
    (text, line, col as u64)
}

fn assert_one(p: &[Problem], line: usize, col: u64, needle: &str) {
    assert!(
        p.iter()
            .any(|p| p.line as usize == line && p.col == col && p.message.contains(needle)),
        "want {line}:{col} `{needle}` in {p:#?}"
    );
}

#[test]
fn the_pickem_file_is_clean() {
    assert_eq!(compile(PICKEM, "t").err(), None);
}

#[test]
fn a_compute_over_an_unknown_entity_is_refused_with_a_suggestion() {
    let (text, line, col) = broken(
        "over: { entity: match, as: matches }",
        "over: { entity: mtach, as: matches }",
        "mtach",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "compute over unknown entity `mtach` (did you mean `match`?)",
    );
}

#[test]
fn a_compute_over_a_processor_entity_is_refused() {
    let (text, line, col) = broken(
        "over: { entity: match, as: matches }",
        "over: { entity: standings, as: matches }",
        "standings",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "the rows must be another writer entity");
}

#[test]
fn a_partition_key_name_bound_to_nothing_is_refused_saying_how_to_bind_it() {
    let (text, line, col) = broken(
        "over: { entity: match, as: matches }",
        "over: { entity: match, as: matches, bind: { slug: slg } }",
        "slg",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "`${slug}` of its partition key must be bound to a key name of `prediction`; `slg` is not one (did you mean `slug`?)",
    );
    let (text, line, col) = broken(
        "over: { entity: match, as: matches }",
        "over: { entity: match, as: matches, bind: { matchId: user } }",
        "user",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "`matchId` is not a key name of its partition key",
    );
}

#[test]
fn a_value_reading_an_unknown_name_or_function_is_refused() {
    let (text, line, col) = broken(
        "        mcorrect: \"size(",
        "        mcorrect: \"size(predictons) + size(",
        "\"size",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "unknown name `predictons` in `size(predictons) + size(matches.filter(m, has(m.result) && get(predictions, m.id, -1) == m.result))` (did you mean `predictions`?)",
    );
    let (text, line, col) = broken(
        "        mcorrect: \"size(",
        "        mcorrect: \"summ(matches) + size(",
        "\"summ",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "unknown function `summ` (did you mean `sum`?)",
    );
    let (text, line, col) = broken(
        "        mcorrect: \"size(",
        "        mcorrect: \"matches + size(",
        "\"matches",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "computed `mcorrect`: `matches + size(");
}

#[test]
fn a_computed_attribute_named_like_a_writer_attribute_is_refused() {
    let (text, line, col) = broken(
        "        mcorrect: \"size(",
        "        predictions: \"size(",
        "\"size",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(
        &p,
        line,
        col,
        "computed `predictions` is a writer attribute",
    );
}

#[test]
fn compute_on_a_processor_entity_and_a_bad_page_are_refused() {
    let (text, line, col) = broken("      page: 200\n", "      page: 500\n", "500");
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "compute page 500: 1..=200");
    let (text, line, col) = broken(
        "    counter:\n      attributes: [points, mcorrect, eplayed]",
        "    compute: { over: { entity: match }, values: { x: \"1\" } }\n    counter:\n      attributes: [points, mcorrect, eplayed]",
        "{ over",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "it belongs on a writer entity");
}

#[test]
fn a_projection_may_not_write_a_computed_value_or_a_sum() {
    let (text, line, col) = broken(
        "        belongsto: \"USER#${user}\"\n    count:",
        "        belongsto: \"USER#${user}\"\n        points: \"1\"\n    count:",
        "\"1\"",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "`points` is computed (`compute:`)");
    let (text, line, col) = broken(
        "        GSI_PK: \"STANDINGS#${year}\"",
        "        GSI_PK: \"STANDINGS#${year}\"\n        eplayed: \"1\"",
        "\"1\"",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_one(&p, line, col, "`eplayed` is a sum of the counter");
}

#[test]
fn a_projection_on_a_processor_entity_that_is_no_counter_is_refused() {
    let text = "jobstream: 1\ntable: { name: tbl, pk: PK, sk: SK }\nentities:\n  a:\n    key: { PK: \"A#${id}\", SK: A }\n    derive: [{ entity: b, with: { id: id } }]\n  b:\n    owner: processor\n    key: { PK: \"B#${id}\", SK: B }\n    project:\n      attributes: { x: \"1\" }\n";
    let p = compile(text, "t").unwrap_err();
    assert_one(
        &p,
        11,
        7,
        "`project` belongs on a writer entity (or on a counter, whose keys may come from its sums)",
    );
}

#[test]
fn map_and_list_types_are_read_and_checked() {
    let r = rules();
    let team = |m: &[&str]| {
        AttributeValue::M(
            [(
                "members".to_string(),
                AttributeValue::L(m.iter().map(|x| s(*x)).collect()),
            )]
            .into(),
        )
    };
    let a_match = |teams: Vec<AttributeValue>, result: Option<i64>| {
        let mut i = item(&[
            ("PK", s("EVENT#2024-03-03-x")),
            ("SK", s("MATCH#m1")),
            ("type", s("match")),
            ("id", s("m1")),
            ("name", s("Opener")),
            ("order", n(3)),
            ("points", n(10)),
            ("teams", AttributeValue::L(teams)),
        ]);
        if let Some(r) = result {
            i.insert("result".into(), n(r));
        }
        i
    };
    assert!(r
        .projection(&a_match(vec![team(&["a"]), team(&["b"])], Some(1)))
        .is_ok());
    assert!(r
        .projection(&a_match(vec![team(&["a"]), team(&["b"])], None))
        .is_ok());
    for bad in [
        a_match(vec![team(&["a"])], None),
        a_match(vec![team(&["a"]), team(&[])], None),
        a_match(vec![team(&["a"]), s("b")], None),
        a_match(vec![team(&["a"]), team(&["b"])], Some(2)),
        a_match(vec![team(&["a"]), AttributeValue::N("1.5".into())], None),
    ] {
        assert!(r.projection(&bad).is_err(), "{bad:?}");
    }
    let err = r
        .projection(&a_match(vec![team(&["a"])], None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("fewer than 2 teams"), "{err}");
}

#[test]
fn computed_values_are_read_as_stored_and_keyed_with_their_clamp_noted() {
    let r = rules();
    let mut p = item(&[
        ("PK", s("USER#sam")),
        ("SK", s("EVENT#2024-03-03-x")),
        ("type", s("prediction")),
        (
            "predictions",
            AttributeValue::M([("m1".to_string(), n(0))].into()),
        ),
    ]);
    let proj = r.projection(&p).unwrap().unwrap();
    assert_eq!(
        proj.attrs[1],
        ("GSI_SK", Some(s("SCORE#000#sam"))),
        "unset: 0"
    );
    assert_eq!(proj.sources, vec!["points"]);
    assert!(r.notes(&p).is_empty());
    let c = r.contributions(&p).unwrap();
    assert_eq!(
        c[0].values,
        vec![("points", 0), ("mcorrect", 0), ("eplayed", 1)]
    );
    assert_eq!(c.len(), 1, "a prediction is no row");
    p.insert("points".into(), n(1500));
    p.insert("mcorrect".into(), n(2));
    let proj = r.projection(&p).unwrap().unwrap();
    assert_eq!(proj.attrs[1], ("GSI_SK", Some(s("SCORE#999#sam"))));
    let notes = r.notes(&p);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].metric, "ScoreOverflow");
    assert!(
        notes[0].reason.contains("1500 does not fit 3 digits"),
        "{notes:?}"
    );
    assert_eq!(
        r.contributions(&p).unwrap()[0].values,
        vec![("points", 1500), ("mcorrect", 2), ("eplayed", 1)],
        "the sums use the true value"
    );
    // A writer's stray value is read as 0 until the job brings it back.
    p.insert("points".into(), s("lots"));
    assert_eq!(r.contributions(&p).unwrap()[0].values[0], ("points", 0));
    assert_eq!(
        r.memberships(&p).unwrap(),
        vec![(
            "compute#scoring#EVENT#2024-03-03-x".to_string(),
            r#"["USER#sam","EVENT#2024-03-03-x"]"#.to_string()
        )]
    );
}

#[test]
fn a_counter_projection_keys_it_from_its_sums_and_notes_the_clamp() {
    let r = rules();
    let st = item(&[
        ("PK", s("USER#sam")),
        ("SK", s("STANDINGS#2024")),
        ("type", s("standings")),
        ("points", n(123_456)),
    ]);
    let p = r.projection(&st).unwrap().unwrap();
    assert_eq!(
        p.attrs,
        vec![
            ("GSI_PK", Some(s("STANDINGS#2024"))),
            ("GSI_SK", Some(s("SCORE#99999#sam"))),
            ("belongsto", Some(s("USER#sam"))),
        ]
    );
    assert_eq!(p.sources, vec!["points"]);
    let notes = r.notes(&st);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].reason.contains("standings.GSI_SK: 123456"),
        "{notes:?}"
    );
    // A writer's stray negative sum: keyed at 0 (noted), never bad input,
    // so the engine can bring the sum back.
    let mut stray = st.clone();
    stray.insert("points".into(), n(-5));
    let p = r.projection(&stray).unwrap().unwrap();
    assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#00000#sam"))));
    assert_eq!(r.notes(&stray).len(), 1);
    // Unset sums read as 0; the key alone is enough.
    let key = item(&[("PK", s("USER#sam")), ("SK", s("STANDINGS#2024"))]);
    let p = r.projection(&key).unwrap().unwrap();
    assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#00000#sam"))));
    assert!(r.notes(&key).is_empty());
    assert!(r.counter(&key).is_some());
}

#[test]
fn a_match_counts_into_the_ledger_only_version_of_its_event() {
    let r = rules();
    let m = item(&[
        ("PK", s("EVENT#2024-03-03-x")),
        ("SK", s("MATCH#m1")),
        ("type", s("match")),
        ("id", s("m1")),
        ("name", s("Opener")),
        ("order", n(3)),
        ("points", n(10)),
        (
            "teams",
            AttributeValue::L(vec![
                AttributeValue::M(
                    [("members".to_string(), AttributeValue::L(vec![s("a")]))].into(),
                ),
                AttributeValue::M(
                    [("members".to_string(), AttributeValue::L(vec![s("b")]))].into(),
                ),
            ]),
        ),
    ]);
    let c = r.contributions(&m).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].counter.key,
        vec![
            ("PK", "EVENT#2024-03-03-x".to_string()),
            ("SK", "#compute#scoring".to_string())
        ]
    );
    assert_eq!(c[0].counter.create, None, "never an item of the table");
    assert_eq!(c[0].values, vec![("rows", 1)]);
    assert!(r.counter(&c[0].counter.key_item()).is_none());
    assert!(!r.stale_counter(&c[0].counter.key_item()));
}
