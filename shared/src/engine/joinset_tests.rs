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

/// A notice keyed by holder, event and ticket that carries the order
/// (`orderId: o`): ticket ids are per order, so the key does not
/// determine `o`. `via`: the event's tickets by holder, or none (a
/// ticket's change binds every variable: its scopes need no listing).
fn notices(via: bool) -> JoinSet {
    let attr = |a: &'static str| -> AlsoFn {
        Arc::new(move |i: &Item| i.s(a).map(str::to_string).map_err(|e| e.to_string()))
    };
    let mut ticket = fact(
        "ticket",
        kt("o#${o}", "k#${t}"),
        via.then(|| kt("evt#${e}", "k#${h}#${o}#${t}")),
    );
    ticket.also = vec![
        Also {
            var: "e".into(),
            of: attr("eventId"),
        },
        Also {
            var: "h".into(),
            of: attr("holderId"),
        },
    ];
    let mut s = set(vec![ticket], vec![]);
    s.target.key = kt("u#${h}", "c#${e}#${t}");
    s.target.values = vec![
        ("ticketId".into(), Value::Var("t".into())),
        ("orderId".into(), Value::Var("o".into())),
    ];
    s
}

#[test]
fn a_carried_variable_the_key_does_not_determine_is_listed_by_the_key_or_refused() {
    let s = notices(true);
    assert_eq!(s.undetermined(), vec!["o"]);
    assert_eq!(
        s.key_step().unwrap(),
        Some(Step::List {
            fact: "ticket".into(),
            via: true
        })
    );
    assert!(s.scopes().is_ok());
    // No listing of a key's rows: refused, naming the value and the fix.
    let e = notices(false).scopes().unwrap_err().to_string();
    assert!(e.contains("`orderId: o`"), "{e}");
    assert!(
        e.contains("put `o` in the target's key or drop the value"),
        "{e}"
    );
    // A carried variable a fact keyed by the key's variables binds is
    // determined: one row per key, nothing listed.
    let mut one = notices(false);
    one.facts[0].key = kt("u#${h}#t", "k#${e}#${t}");
    one.facts[0].also.clear();
    one.facts[0].also.push(Also {
        var: "o".into(),
        of: Arc::new(|i: &Item| {
            i.s("orderId")
                .map(str::to_string)
                .map_err(|e| e.to_string())
        }),
    });
    assert!(one.undetermined().is_empty());
    assert_eq!(one.key_step().unwrap(), None);
}

#[test]
fn a_key_several_rows_imply_exists_while_any_does_and_keeps_the_row_it_carries() {
    let s = notices(true);
    let key = vars(&[("h", "u1"), ("e", "e1"), ("t", "k0")]);
    let row = |o: &str| {
        let mut v = key.clone();
        v.insert("o".into(), o.into());
        v
    };
    let item = |o: &str| -> Item {
        [
            ("PK".to_string(), s_("u#u1")),
            ("SK".to_string(), s_("c#e1#k0")),
            ("ticketId".to_string(), s_("k0")),
            ("orderId".to_string(), s_(o)),
        ]
        .into()
    };
    let g = |i: Item, guards: Vec<Guard>| Guarded { item: i, guards };
    let gone = |o: &str| Guard::absent(kt("o#${o}", "k#${t}").key(NAMES, &row(o)).unwrap());
    // (desired, existing) of one row, the item there carrying `there`.
    let decided = |o: &str, implies: bool, there: Option<&str>| -> (Vars, Decision) {
        let existing = there.map(|x| g(item(x), if implies { vec![] } else { vec![gone(o)] }));
        (row(o), (implies.then(|| g(item(o), vec![])), existing))
    };
    // The trial's case: oA refunded, oB valid, the item carrying oB: kept.
    let ((d, _), chosen) = s.merge(&[
        decided("oA", false, Some("oB")),
        decided("oB", true, Some("oB")),
    ]);
    assert_eq!(d.unwrap().item, item("oB"));
    assert_eq!(chosen, Some(row("oB")));
    // Both imply, the item carries oB: it keeps oB (never moves to the least).
    let ((d, _), _) = s.merge(&[
        decided("oA", true, Some("oB")),
        decided("oB", true, Some("oB")),
    ]);
    assert_eq!(d.unwrap().item, item("oB"));
    // The row it carries no longer implies it: the least implying row, in
    // whatever order the rows come.
    for rows in [
        vec![
            decided("oC", false, Some("oC")),
            decided("oB", true, Some("oC")),
            decided("oA", true, Some("oC")),
        ],
        vec![
            decided("oA", true, Some("oC")),
            decided("oB", true, Some("oC")),
            decided("oC", false, Some("oC")),
        ],
    ] {
        let ((d, x), chosen) = s.merge(&rows);
        assert_eq!(d.unwrap().item, item("oA"));
        assert_eq!(x.unwrap().item, item("oC"), "the item as read");
        assert_eq!(chosen, Some(row("oA")));
    }
    // No row implies it: it goes, guarded by every row's reason.
    let ((d, x), chosen) = s.merge(&[
        decided("oA", false, Some("oA")),
        decided("oB", false, Some("oA")),
    ]);
    assert!(d.is_none());
    assert_eq!(chosen, None);
    assert_eq!(x.unwrap().guards, vec![gone("oA"), gone("oB")]);
}

fn s_(v: &str) -> AttributeValue {
    crate::item::s(v)
}
