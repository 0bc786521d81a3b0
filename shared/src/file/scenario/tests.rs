//! The scenario format: parsing, values, vars, repeats and the checks.

use super::*;

#[test]
fn scenario_values_map_to_attributes() {
    let s: Scenario = serde_saphyr::from_str(
        "writes:\n  - put: { PK: a, SK: b, n: 3, ok: true, tags: [a, b], gone: null }\n  - delete: { PK: a, SK: b }\nexpect:\n  - { PK: a, SK: c, count: 2 }\n",
    )
    .unwrap();
    assert_eq!(s.writes.len(), 2);
    let Write::Put(m) = &s.writes[0] else {
        panic!("a put")
    };
    let i = item(m);
    assert_eq!(i["n"], AttributeValue::N("3".into()));
    assert_eq!(i["ok"], AttributeValue::Bool(true));
    assert_eq!(i["tags"], AttributeValue::Ss(vec!["a".into(), "b".into()]));
    assert_eq!(i["gone"], AttributeValue::Null(true));
    assert_eq!(item(&s.expect[0])["count"], AttributeValue::N("2".into()));
}

#[test]
fn unknown_write_kinds_are_errors() {
    assert!(serde_saphyr::from_str::<Scenario>("writes:\n  - upsert: { PK: a }\n").is_err());
}

#[test]
fn steps_and_queries_parse() {
    let s: Scenario = serde_saphyr::from_str(
        "writes:\n  - put: { PK: a, SK: b }\nqueries:\n  - query: q\n    params: { org: 01HX, n: 3 }\n    expect:\n      - { SK: b }\nsteps:\n  - say: later\n    writes:\n      - delete: { PK: a, SK: b }\n    queries:\n      - { query: q, expect: [] }\n",
    )
    .unwrap();
    let steps = s.all_steps();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[1].say, Some("later"));
    assert_eq!(s.query_count(), 2);
    // Parameters in name order (a JSON map).
    assert_eq!(s.queries[0].title(), "q(n=3, org=01HX)");
    assert_eq!(
        s.queries[0].args(),
        [
            ("n".to_string(), "3".to_string()),
            ("org".to_string(), "01HX".to_string())
        ]
    );
    assert!(serde_saphyr::from_str::<Scenario>("steps:\n  - sey: x\n").is_err());
}

#[test]
fn vars_are_computed_from_now_and_put_in_place() {
    let mut s: Scenario = serde_saphyr::from_str(
        "vars:\n  t: \"iso(now - 60)\"\n  ttl: \"epoch(t) + 604800\"\nwrites:\n  - put: { PK: \"p#${t}\", SK: b, at: \"${t}\", ttl: \"${ttl}\" }\nsteps:\n  - queries:\n      - { query: q, params: { since: \"${t}\" }, expect: [{ ttl: \"${ttl}\" }] }\n",
    )
    .unwrap();
    s.resolve(1_767_600_060).unwrap();
    let Write::Put(m) = &s.writes[0] else {
        panic!("a put")
    };
    let i = item(m);
    assert_eq!(i["PK"], AttributeValue::S("p#2026-01-05T08:00:00Z".into()));
    assert_eq!(i["at"], AttributeValue::S("2026-01-05T08:00:00Z".into()));
    assert_eq!(i["ttl"], AttributeValue::N("1768204800".into()));
    let q = &s.steps[0].queries[0];
    assert_eq!(
        q.args(),
        [("since".to_string(), "2026-01-05T08:00:00Z".to_string())]
    );
    let want = item(&q.expect.as_ref().unwrap()[0]);
    assert_eq!(want["ttl"], AttributeValue::N("1768204800".into()));
    let mut bad: Scenario = serde_saphyr::from_str("vars:\n  t: \"nope(now)\"\n").unwrap();
    assert!(bad.resolve(0).is_err());
}

#[test]
fn a_repeat_expands_to_numbered_writes() {
    let s: Scenario = serde_saphyr::from_str(
        "writes:\n  - repeat: { times: 3, put: { PK: \"u#fan${i}#following\", SK: \"u#star\", n: \"${i}\" } }\n  - repeat: { times: 2, put: { PK: a }, delete: { PK: a } }\n  - repeat: { times: 0, delete: { PK: a } }\n",
    )
    .unwrap();
    let Write::Repeat(r) = &s.writes[0] else {
        panic!("a repeat")
    };
    let w = r.expand().unwrap();
    assert_eq!(w.len(), 3);
    let Write::Put(m) = &w[2] else {
        panic!("a put")
    };
    let i = item(m);
    assert_eq!(i["PK"], AttributeValue::S("u#fan3#following".into()));
    assert_eq!(
        i["n"],
        AttributeValue::N("3".into()),
        "only `${{i}}`: a number"
    );
    for bad in &s.writes[1..] {
        let Write::Repeat(r) = bad else {
            panic!("a repeat")
        };
        assert!(r.expand().is_err());
    }
}

#[test]
fn checks_parse_at_the_top_level_and_per_step() {
    let s = Scenario::parse(
        "model: ../shop.yaml\nitems: 3\nbad_input: 1\nverify: { bad_input: 1, says: [\"not a `id`\"] }\nsteps:\n  - items: 0\n  - bad_input: 2\n    verify: {}\n",
        "s.yaml",
    )
    .unwrap();
    let steps = s.all_steps();
    assert_eq!((steps[0].items, steps[0].bad_input), (Some(3), Some(1)));
    let v = steps[0].verify.unwrap();
    assert_eq!(
        (v.bad_input, v.says.as_slice()),
        (1, &["not a `id`".to_string()][..])
    );
    assert_eq!(
        (steps[1].items, steps[1].bad_input, steps[1].verify),
        (Some(0), None, None)
    );
    assert_eq!(steps[2].bad_input, Some(2));
    assert_eq!(steps[2].verify, Some(&VerifyCheck::default()));
    use crate::models::Source;
    let at = std::path::Path::new("tests/scenarios/shop/a.yaml");
    assert_eq!(
        s.model_source(at),
        Some(Source::File("tests/scenarios/shop/../shop.yaml".into()))
    );
    let named = Scenario::parse("model: shop\n", "s.yaml").unwrap();
    assert_eq!(named.model_source(at), Some(Source::Name("shop".into())));
    assert_eq!(
        Scenario::parse("{}", "s.yaml").unwrap().model_source(at),
        None
    );
}

#[test]
fn misspelt_checks_are_errors_with_their_place() {
    for (text, field) in [
        ("verify: { bad: 1 }\n", "bad"),
        ("steps:\n  - item: 3\n", "item"),
        ("verfy: {}\n", "verfy"),
        ("writes:\n  - transact: [{ upsert: { PK: a } }]\n", "upsert"),
    ] {
        let e = Scenario::parse(text, "s.yaml").expect_err(text);
        assert!(e.starts_with("s.yaml:") && e.contains(field), "{text}: {e}");
    }
    let e = Scenario::parse("items: -1\n", "s.yaml").expect_err("a count");
    assert!(e.starts_with("s.yaml:1:"), "{e}");
}

#[test]
fn a_transact_is_one_write_of_its_actions_with_vars_in_place() {
    let mut s: Scenario = serde_saphyr::from_str(
        "vars:\n  day: \"iso(now)\"\nwrites:\n  - transact:\n      - delete: { PK: a, SK: b }\n      - put: { PK: c, SK: b, at: \"${day}\" }\n",
    )
    .unwrap();
    s.resolve(1_767_600_000).unwrap();
    s.validate().unwrap();
    assert_eq!(s.all_steps()[0].write_count(), 1, "one request");
    let Write::Transact(ops) = &s.writes[0] else {
        panic!("a transact")
    };
    let TransactOp::Put(m) = &ops[1] else {
        panic!("a put")
    };
    assert_eq!(
        item(m)["at"],
        AttributeValue::S("2026-01-05T08:00:00Z".into())
    );
    let items = play::transact_items(ops, "t", &["PK", "SK"]);
    assert_eq!(items.len(), 2);
    let delete = items[0].delete().expect("a delete");
    assert_eq!(delete.key().len(), 2);
    assert_eq!(delete.table_name(), "t");
    assert!(items[1].put().is_some());
}

#[test]
fn malformed_writes_name_their_step_and_field() {
    let e = Scenario::parse(
        "steps:\n  - writes:\n      - put: { PK: a, SK: b }\n      - transact: []\n",
        "s.yaml",
    )
    .expect_err("empty");
    assert_eq!(
        e,
        "s.yaml: step 1, write 2: transact: 1 to 100 actions, not 0"
    );
    let big: String = (0..101)
        .map(|i| format!("      - put: {{ PK: a{i} }}\n"))
        .collect();
    let e = Scenario::parse(&format!("writes:\n  - transact:\n{big}"), "s.yaml").expect_err("big");
    assert!(
        e.contains("step 0 (the top level), write 1: transact: 1 to 100 actions, not 101"),
        "{e}"
    );
    let e = Scenario::parse(
        "writes:\n  - repeat: { times: 0, put: { PK: a } }\n",
        "s.yaml",
    )
    .expect_err("no rounds");
    assert!(
        e.contains("step 0 (the top level), write 1: repeat: `times`"),
        "{e}"
    );
}

#[test]
fn a_difference_names_its_step_by_number_and_by_its_say() {
    let s: Scenario = serde_saphyr::from_str(
        "writes: []\nsteps:\n  - say: \"a forged value is brought back\"\n  - writes: []\n",
    )
    .unwrap();
    let steps = s.all_steps();
    assert_eq!(steps[0].label(0), "step 0 (the top level)");
    assert_eq!(
        steps[1].label(1),
        "step 1 (\"a forged value is brought back\")"
    );
    assert_eq!(steps[2].label(2), "step 2");
}
