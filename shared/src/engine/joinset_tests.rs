//! Unit tests of [`super::joinset`]: templates, scopes, decisions, bodies.

use super::*;

fn vars(pairs: &[(&str, &str)]) -> Vars {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn kt(pk: &str, sk: &str) -> KeyTemplate {
    KeyTemplate::parse(pk, sk).unwrap()
}

const NAMES: &[&str] = &["PK", "SK"];

#[test]
fn templates_render_and_parse_back() {
    let t = Template::parse("p#${p}#u#${a}").unwrap();
    assert_eq!(t.to_string(), "p#${p}#u#${a}");
    assert_eq!(t.vars().collect::<Vec<_>>(), vec!["p", "a"]);
    let v = vars(&[("p", "01H"), ("a", "ann")]);
    assert_eq!(t.render(&v).unwrap(), "p#01H#u#ann");
    let mut back = Vars::new();
    assert!(t.read("p#01H#u#ann", &mut back));
    assert_eq!(back, v);
    // A bound variable must agree; no match leaves `vars` untouched.
    let mut other = vars(&[("a", "bob")]);
    assert!(!t.read("p#01H#u#ann", &mut other));
    assert_eq!(other, vars(&[("a", "bob")]));
    for bad in ["p#01H", "p##u#ann", "q#01H#u#ann", "p#01H#u#ann#x"] {
        assert!(!t.read(bad, &mut Vars::new()), "{bad}");
    }
    assert!(Template::parse("info")
        .unwrap()
        .read("info", &mut Vars::new()));
    assert!(t.render(&vars(&[("p", "x")])).is_none(), "a is unbound");
}

#[test]
fn a_listing_starts_at_the_bound_start_of_its_template() {
    let t = Template::parse("s#${j}#${s}").unwrap();
    assert_eq!(t.bound_prefix(&vars(&[("j", "j1")])), Some("s#j1#".into()));
    assert_eq!(t.bound_prefix(&vars(&[])), Some("s#".into()));
    assert_eq!(t.bound_prefix(&vars(&[("s", "x")])), Some("s#".into()));
    assert_eq!(
        t.bound_prefix(&vars(&[("j", "j1"), ("s", "x")])),
        None,
        "one value"
    );
    assert_eq!(
        Template::parse("${a}#x").unwrap().bound_prefix(&vars(&[])),
        None
    );
    assert_eq!(
        Template::parse("profile").unwrap().bound_prefix(&vars(&[])),
        None
    );
}

#[test]
fn templates_that_cannot_parse_back_are_refused() {
    for bad in ["u#${a}${b}", "u#${a}x", "u#${a", "u#${}", "u#${a-b}"] {
        assert!(Template::parse(bad).is_err(), "{bad}");
    }
}

fn valid() -> Validate {
    Arc::new(|_| Ok(()))
}

fn fact(name: &str, key: KeyTemplate, via: Option<KeyTemplate>) -> FactDecl {
    FactDecl {
        name: name.into(),
        key,
        via,
        via_ledger: None,
        valid: valid(),
        reads: vec![],
        also: vec![],
        from: None,
    }
}

fn set(facts: Vec<FactDecl>, unless: Vec<UnlessDecl>) -> JoinSet {
    JoinSet {
        name: "s",
        queue: "q",
        key_names: NAMES,
        target: TargetDecl {
            key: kt("t#${x}", "y#${y}"),
            type_attr: None,
            values: vec![],
            ttl: None,
        },
        facts,
        unless,
        when: vec![],
        volatile: &[],
        page: 10,
    }
}

#[test]
fn scopes_need_a_listing_keyed_by_what_the_change_binds() {
    // x's facts list the y's: fine both ways.
    let ok = set(
        vec![
            fact("xs", kt("x#${x}", "info"), None),
            fact(
                "pair",
                kt("x#${x}#pairs", "y#${y}"),
                Some(kt("y#${y}#pairs", "x#${x}")),
            ),
        ],
        vec![],
    );
    let scopes = ok.scopes().unwrap();
    assert_eq!(
        scopes[0].steps,
        vec![
            Step::List {
                fact: "pair".into(),
                via: false
            },
            Step::Sweep
        ]
    );
    assert!(scopes[1].steps.is_empty());
    // Without the pair fact nothing lists y for a change of xs.
    let err = set(
        vec![
            fact("xs", kt("x#${x}", "info"), None),
            fact("ys", kt("y#${y}", "info"), None),
        ],
        vec![],
    )
    .scopes()
    .unwrap_err();
    assert!(err.to_string().contains("lists"), "{err}");
    // A fact variable the target does not have.
    let err = set(vec![fact("z", kt("x#${x}#${z}", "y#${y}"), None)], vec![])
        .scopes()
        .unwrap_err();
    assert!(err.to_string().contains("`z`"), "{err}");
    // A target variable no fact binds.
    let err = set(vec![fact("xs", kt("x#${x}", "info"), None)], vec![])
        .scopes()
        .unwrap_err();
    assert!(err.to_string().contains("`y`"), "{err}");
    // An unless fact is a scope of its own.
    let with_unless = set(
        vec![fact("pair", kt("x#${x}#pairs", "y#${y}"), None)],
        vec![UnlessDecl {
            name: "block".into(),
            key: kt("y#${y}#blocks", "x#${x}"),
            also: vec![],
            once: None,
        }],
    );
    let on: Vec<String> = with_unless
        .scopes()
        .unwrap()
        .into_iter()
        .map(|s| s.on)
        .collect();
    assert_eq!(on, vec!["pair".to_string(), "block".to_string()]);
}

#[test]
fn unless_facts_exclude_and_guard() {
    let s = set(
        vec![FactDecl {
            reads: vec!["n"],
            ..fact("pair", kt("x#${x}#pairs", "y#${y}"), None)
        }],
        vec![UnlessDecl {
            name: "block".into(),
            key: kt("y#${y}#blocks", "x#${x}"),
            also: vec![],
            once: None,
        }],
    );
    let v = vars(&[("x", "1"), ("y", "2")]);
    let pair_key = kt("x#${x}#pairs", "y#${y}").key(NAMES, &v).unwrap();
    let block_key = kt("y#${y}#blocks", "x#${x}").key(NAMES, &v).unwrap();
    let target_key = kt("t#${x}", "y#${y}").key(NAMES, &v).unwrap();
    let mut pair = pair_key.clone();
    pair.insert("n".into(), AttributeValue::N("7".into()));
    let now = Utc::now();
    let table = |items: Vec<Item>| {
        move |k: &Item| {
            items
                .iter()
                .find(|i| crate::item::key_of(i, NAMES) == *k)
                .cloned()
        }
    };
    let (d, x) = s
        .decide("pair", &v, &table(vec![pair.clone()]), now)
        .unwrap();
    let d = d.unwrap();
    assert_eq!(d.item, target_key);
    assert_eq!(
        d.guards,
        vec![
            Guard::equals(pair_key.clone(), "n", AttributeValue::N("7".into())),
            Guard::absent(block_key.clone()),
        ]
    );
    assert!(x.is_none());
    // Blocked: the target goes, guarded by the block's existence.
    let (d, x) = s
        .decide(
            "block",
            &v,
            &table(vec![pair.clone(), block_key.clone(), target_key.clone()]),
            now,
        )
        .unwrap();
    assert!(d.is_none());
    assert_eq!(x.unwrap().guards, vec![Guard::exists(block_key.clone())]);
    // The pair gone and blocked: the absence of the scope's own fact
    // is preferred when it is the pair's scope.
    let (_, x) = s
        .decide("pair", &v, &table(vec![block_key, target_key]), now)
        .unwrap();
    assert_eq!(x.unwrap().guards, vec![Guard::absent(pair_key)]);
}

#[test]
fn job_bodies_round_trip_with_their_version() {
    let j = JoinJob {
        set: "s".into(),
        scope: "pair".into(),
        bind: vars(&[("x", "1")]),
        step: 1,
        after: Some("y#2".into()),
    };
    let body = j.encode();
    assert_eq!(
        body,
        r#"{"after":"y#2","bind":{"x":"1"},"scope":"pair","set":"s","step":1,"version":1}"#
    );
    assert_eq!(JoinJob::decode(&body).unwrap(), j);
    assert!(matches!(
        JoinJob::decode(r#"{"version":1,"set":"s","scope":"p","bind":{},"extra":1}"#),
        Err(MessageError::Permanent { .. })
    ));
}

#[test]
fn a_lower_bound_starts_the_listing_of_its_first_unbound_variable() {
    use super::plan::listing_start;
    let sk = Template::parse("j#${postedAt}#${zip}#${jobId}").unwrap();
    // Every key of a job posted on that day or later follows the start
    // (exclusive): the literal after the variable sorts past the bound.
    assert_eq!(
        listing_start(&sk, &vars(&[]), "postedAt", "2026-10-28").as_deref(),
        Some("j#2026-10-28")
    );
    // The variable last in its key: the bound but its last character.
    let last = Template::parse("d#${day}").unwrap();
    assert_eq!(
        listing_start(&last, &vars(&[]), "day", "2026-10-28").as_deref(),
        Some("d#2026-10-2")
    );
    assert_eq!(listing_start(&last, &vars(&[]), "day", ""), None);
    // Bound already, or not the first unbound variable: no start.
    let bound = vars(&[("postedAt", "2026-11-01")]);
    assert_eq!(listing_start(&sk, &bound, "postedAt", "2026-10-28"), None);
    assert_eq!(listing_start(&sk, &vars(&[]), "zip", "M5V"), None);
    let by_zip = Template::parse("z#${zip}#${postedAt}").unwrap();
    assert_eq!(
        listing_start(&by_zip, &vars(&[("zip", "M5V")]), "postedAt", "2026-10-28").as_deref(),
        Some("z#M5V#2026-10-2")
    );
}
