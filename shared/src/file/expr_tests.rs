//! The expression engine: compiling, binding, the built-ins and their errors.

use super::*;

fn eval(src: &str, vars: &[(&str, Val)]) -> Result<Val, String> {
    let env = Env::new().unwrap();
    let e = Expr::compile(src).unwrap();
    env.eval(&e, |n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v))
}

/// A prepared value (converted once, borrowed by each evaluation) reads
/// as the value itself: rows with absent keys and nested lists, and
/// the same error when an evaluation fails.
#[test]
fn a_prepared_value_reads_as_the_value_with_absent_keys_nested_lists_and_errors() {
    let env = Env::new().unwrap();
    let row = |id: &str, result: Option<i64>| {
        let mut m = vec![
            ("id".to_string(), Val::Str(id.into())),
            ("points".to_string(), Val::Int(10)),
            (
                "teams".to_string(),
                Val::List(vec![Val::Set(vec!["a".into()])]),
            ),
        ];
        m.extend(result.map(|r| ("result".to_string(), Val::Int(r))));
        Val::Map(m)
    };
    let rows = Val::List(vec![
        row("m1", Some(0)),
        row("m2", None),
        row("m3", Some(1)),
    ]);
    let prepared = rows.prepare();
    let picks = Val::Map(vec![("m1".into(), Val::Int(0)), ("m3".into(), Val::Int(0))]);
    for src in [
        "sum(rows.filter(m, has(m.result) && get(picks, m.id, -1) == m.result).map(m, m.points))",
        "size(rows.filter(m, size(m.teams) == 1))",
        "sum(rows.map(m, m.id))",
    ] {
        let e = Expr::compile(src).unwrap();
        let as_val = env.eval(&e, |n| match n {
            "rows" => Some(&rows),
            "picks" => Some(&picks),
            _ => None,
        });
        let as_prepared = env.eval_with(&e, |n| match n {
            "rows" => Some(Arg::Prepared(&prepared)),
            "picks" => Some(Arg::Val(&picks)),
            _ => None,
        });
        assert_eq!(as_prepared, as_val, "{src}");
        // Evaluated again: the prepared value is only borrowed.
        let again = env.eval_with(&e, |n| match n {
            "rows" => Some(Arg::Prepared(&prepared)),
            "picks" => Some(Arg::Val(&picks)),
            _ => None,
        });
        assert_eq!(again, as_val, "{src}");
    }
    let e = Expr::compile("sum(rows.filter(m, has(m.result)).map(m, m.points))").unwrap();
    assert_eq!(
        env.eval_with(&e, |_| Some(Arg::Prepared(&prepared))),
        Ok(Val::Int(20))
    );
}

#[test]
fn builtins_and_variables() {
    let email = Val::Str("Alice.Ünal@Acme.CO".into());
    assert_eq!(
        eval("'EMAIL#' + lower(email)", &[("email", email)]),
        Ok(Val::Str("EMAIL#alice.ünal@acme.co".into()))
    );
    assert_eq!(eval("pad(7, 3)", &[]), Ok(Val::Str("007".into())));
    assert_eq!(eval("pad(12345, 3)", &[]), Ok(Val::Str("999".into())));
    assert_eq!(eval("pad(-1, 3)", &[]), Ok(Val::Str("000".into())));
    assert!(eval("pad(1, 19)", &[]).is_err());
    assert_eq!(
        eval("slug('  New York ')", &[]),
        Ok(Val::Str("new-york".into()))
    );
    assert_eq!(
        eval("dashed(' St. John\\'s  Harbour ')", &[]),
        Ok(Val::Str("st.-john's-harbour".into()))
    );
    assert_eq!(
        eval("epoch('2026-01-01T00:00:01Z') + 604800", &[]),
        Ok(Val::Int(1_767_225_601 + 604_800))
    );
    assert_eq!(
        eval("iso(0)", &[]),
        Ok(Val::Str("1970-01-01T00:00:00Z".into()))
    );
    assert_eq!(
        eval("s == 'open'", &[("s", Val::Str("open".into()))]),
        Ok(Val::Bool(true))
    );
    assert_eq!(
        eval("isUlid('01HXAA0000000000000000000A')", &[]),
        Ok(Val::Bool(true))
    );
    assert_eq!(eval("trim('  ') != ''", &[]), Ok(Val::Bool(false)));
    assert_eq!(
        eval("day(1767225601 - 30 * 86400)", &[]),
        Ok(Val::Str("2025-12-02".into()))
    );
    assert!(eval("day(9223372036854775807)", &[]).is_err());
    // A condition's result: a bool, else its kind named (not its value).
    assert_eq!(Val::Bool(true).bool_of("b"), Ok(true));
    let err = Val::Str("secret".into()).bool_of("s").unwrap_err();
    assert_eq!(err, "`s` gave a string, not a bool");
}

#[test]
fn a_macros_own_variable_is_not_read_from_the_item() {
    let e = Expr::compile("size(job.filter(k, k in other)) + n").unwrap();
    assert_eq!(e.variables, ["job", "other", "n"]);
    let set = |v: &[&str]| Val::Set(v.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        eval(
            "size(a.filter(k, k in b))",
            &[("a", set(&["go", "rust"])), ("b", set(&["aws", "rust"]))]
        ),
        Ok(Val::Int(1))
    );
    assert_eq!(
        eval(
            "a.all(x, x != '') && a.exists(y, y == 'go')",
            &[("a", set(&["go"]))]
        ),
        Ok(Val::Bool(true))
    );
    // Outside its macro, the same name is a variable of the item.
    let e = Expr::compile("k + size(l.filter(k, k == 'a'))").unwrap();
    assert_eq!(e.variables, ["k", "l"]);
}

#[test]
fn sums_and_map_lookups() {
    let picks = Val::Map(vec![("m1".into(), Val::Int(0)), ("m2".into(), Val::Int(1))]);
    assert_eq!(eval("sum([1, 2, 39])", &[]), Ok(Val::Int(42)));
    assert_eq!(eval("sum([])", &[]), Ok(Val::Int(0)));
    let big = Val::Int(i64::MAX);
    let err = eval("sum([n, 1])", &[("n", big)]).unwrap_err();
    assert!(err.contains("`sum`: integer overflow"), "{err}");
    let err = eval("sum(['a'])", &[]).unwrap_err();
    assert!(err.contains("not an int"), "{err}");
    assert_eq!(
        eval("get(p, 'm2', -1)", &[("p", picks.clone())]),
        Ok(Val::Int(1))
    );
    assert_eq!(
        eval("get(p, 'zz', -1)", &[("p", picks.clone())]),
        Ok(Val::Int(-1))
    );
    assert_eq!(
        eval("get(p, 'm1', -1)", &[("p", Val::Null)]),
        Ok(Val::Int(-1))
    );
    assert!(eval("get('x', 'm1', -1)", &[])
        .unwrap_err()
        .contains("not a map"));
    // A sum over a partition: the points of the rows whose result is
    // the pick.
    let rows = Val::List(vec![
        Val::Map(vec![
            ("id".into(), Val::Str("m1".into())),
            ("result".into(), Val::Int(0)),
            ("points".into(), Val::Int(10)),
        ]),
        Val::Map(vec![
            ("id".into(), Val::Str("m2".into())),
            ("result".into(), Val::Int(0)),
            ("points".into(), Val::Int(25)),
        ]),
    ]);
    assert_eq!(
        eval(
            "sum(rows.filter(r, get(p, r.id, -1) == r.result).map(r, r.points))",
            &[("rows", rows), ("p", picks)]
        ),
        Ok(Val::Int(10))
    );
}

#[test]
fn a_prepared_value_reads_as_the_value_it_was_prepared_from() {
    let env = Env::new().unwrap();
    let rows = Val::List(vec![
        Val::Map(vec![("points".into(), Val::Int(10))]),
        Val::Map(vec![("points".into(), Val::Int(25))]),
    ]);
    let prepared = rows.prepare();
    let sum = Expr::compile("sum(rows.map(r, r.points)) + n").unwrap();
    let n = Val::Int(7);
    let plain = env.eval(&sum, |v| match v {
        "rows" => Some(&rows),
        "n" => Some(&n),
        _ => None,
    });
    assert_eq!(plain, Ok(Val::Int(42)));
    // The same rows prepared once, read by two evaluations.
    for _ in 0..2 {
        let got = env.eval_with(&sum, |v| match v {
            "rows" => Some(Arg::Prepared(&prepared)),
            "n" => Some(Arg::Val(&n)),
            _ => None,
        });
        assert_eq!(got, plain);
    }
    // A bare name of a prepared value, and an unbound name.
    let set = Val::Set(vec!["a".into(), "b".into()]).prepare();
    let bare = Expr::compile("s").unwrap();
    assert_eq!(
        env.eval_with(&bare, |_| Some(Arg::Prepared(&set))),
        Ok(Val::Set(vec!["a".into(), "b".into()]))
    );
    let err = env.eval_with(&sum, |_| None).unwrap_err();
    assert!(err.contains("has no value"), "{err}");
}

#[test]
fn day_of_dates_and_date_times() {
    for written in [
        "2024-03-03",
        "2024/03/03",
        "2024-03-03T20:00:00Z",
        "2024/03/03 8pm",
    ] {
        assert_eq!(day(written), Ok("2024-03-03".to_string()), "{written}");
    }
    for bad in ["2024-02-30", "24-03-03", "yesterday", "", "2024-3-3"] {
        assert!(day(bad).is_err(), "{bad}");
    }
    // A date-time with an offset is the UTC date of its instant (the
    // README: "the UTC date"), not the date written before its offset.
    assert_eq!(
        day("2024-03-03T23:30:00-05:00"),
        Ok("2024-03-04".to_string())
    );
    assert_eq!(
        day("2024-03-04T01:00:00+02:00"),
        Ok("2024-03-03".to_string())
    );
    assert_eq!(
        day("2024-03-03T23:30:00.250+00:00"),
        Ok("2024-03-03".to_string())
    );
    // `month` and `year` read what `day` reads: the month a booking checks
    // in (`REV#${hotelId}#${month(checkIn)}`), the UTC month of an offset.
    assert_eq!(month("2024/03/03"), Ok("2024-03".to_string()));
    assert_eq!(
        month("2024-03-31T23:30:00-05:00"),
        Ok("2024-04".to_string())
    );
    assert_eq!(year("2024-12-31T23:30:00-05:00"), Ok("2025".to_string()));
    assert!(month("yesterday").is_err());
    assert_eq!(
        eval("month(d) + '|' + year(d)", &[("d", Val::Int(1767225600))]),
        Ok(Val::Str("2026-01|2026".into()))
    );
    assert_eq!(
        eval(
            "day(d) == '2024-03-03'",
            &[("d", Val::Str("2024/03/03".into()))]
        ),
        Ok(Val::Bool(true))
    );
}

#[test]
fn clamps_are_recorded_where_asked() {
    let (v, c) = recording_clamps(|| eval("pad(123456, 5) + pad(7, 3)", &[]));
    assert_eq!(v, Ok(Val::Str("99999007".into())));
    assert_eq!(
        c,
        vec![Clamp {
            value: 123456,
            width: 5
        }]
    );
    let (_, c) = recording_clamps(|| eval("pad(99999, 5)", &[]));
    assert!(c.is_empty(), "fits: no clamp");
    let (v, c) = recording_clamps(|| eval("pad(-5, 3)", &[]));
    assert_eq!(v, Ok(Val::Str("000".into())));
    assert_eq!(
        c,
        vec![Clamp {
            value: -5,
            width: 3
        }],
        "below: clamped too"
    );
    // Outside a recording nothing is kept.
    eval("pad(123456, 5)", &[]).unwrap();
    let (_, c) = recording_clamps(|| ());
    assert!(c.is_empty());
}

#[test]
fn overflow_and_unbound_names_are_errors() {
    let big = Val::Int(i64::MAX);
    assert!(eval("n + 1", &[("n", big)]).is_err());
    assert!(eval("missing == 1", &[]).is_err());
    assert!(eval("1 / 0", &[]).is_err());
}

#[test]
fn compile_reports_where_and_what_it_reads() {
    assert_eq!(
        Expr::compile(" orgId ").unwrap().ident.as_deref(),
        Some("orgId")
    );
    assert_eq!(Expr::compile("orgId + 'x'").unwrap().ident, None);
    let e = Expr::compile("xs.all(x, x > n) && xs.map(y, y + 1).size() > 0").unwrap();
    assert_eq!(
        e.variables,
        vec!["xs", "n"],
        "a macro's own names are not read"
    );
    let e = Expr::compile("status == 'open' && size(orgId) > 0").unwrap();
    assert_eq!(e.variables, vec!["status", "orgId"]);
    assert_eq!(e.functions, vec!["size"]);
    let err = Expr::compile("status == ").unwrap_err();
    assert!(err.offset <= 11, "{err:?}");
}

/// Every function `check-model` accepts runs: a name listed but not
/// declared passed the check and failed every item at run time.
#[test]
fn every_accepted_function_evaluates() {
    let calls = [
        ("size", "size(s) == 3"),
        ("contains", "s.contains('b')"),
        ("startsWith", "s.startsWith('a')"),
        ("endsWith", "s.endsWith('c')"),
        ("has", "has(m.k)"),
        ("all", "xs.all(x, x > 0)"),
        ("exists", "xs.exists(x, x == 2)"),
        ("exists_one", "xs.exists_one(x, x == 2)"),
        ("map", "xs.map(x, x * 2)[0] == 2"),
        ("filter", "size(xs.filter(x, x > 1)) == 2"),
        ("int", "int('7') == 7"),
        ("string", "string(7) == '7'"),
        ("bool", "bool('true')"),
        ("max", "max(xs) == 3 && max(1, 5, 2) == 5"),
        ("min", "min(xs) == 1 && min(4, 2) == 2"),
        ("lower", "lower('AB') == 'ab'"),
        ("upper", "upper('ab') == 'AB'"),
        ("trim", "trim(' a ') == 'a'"),
        ("slug", "slug('A b') == 'a-b'"),
        ("dashed", "dashed('New York') == 'new-york'"),
        ("pad", "pad(7, 3) == '007'"),
        ("epoch", "epoch('1970-01-01T00:01:00Z') == 60"),
        ("iso", "iso(60) == '1970-01-01T00:01:00Z'"),
        ("day", "day(86400) == '1970-01-02'"),
        ("month", "month(86400 * 40) == '1970-02'"),
        ("year", "year('2024-03-03T23:30:00-05:00') == '2024'"),
        ("isUlid", "isUlid('01ARZ3NDEKTSV4RRFFQ69G5FAV')"),
        ("sum", "sum(xs) == 6"),
        ("get", "get(m, 'k', 0) == 1 && get(m, 'z', 0) == 0"),
    ];
    let vars = [
        ("s", Val::Str("abc".into())),
        ("xs", Val::List(vec![Val::Int(1), Val::Int(2), Val::Int(3)])),
        ("m", Val::Map(vec![("k".to_string(), Val::Int(1))])),
    ];
    for name in BUILTINS.iter().chain(CEL_FUNCTIONS) {
        let (_, src) = calls
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no call of `{name}` in this test"));
        assert_eq!(eval(src, &vars), Ok(Val::Bool(true)), "{name}: {src}");
    }
}

#[test]
fn env_is_shareable_across_threads() {
    fn check<T: Send + Sync>() {}
    check::<Env>();
    check::<Expr>();
}

/// The fields an expression reads of a variable read only through them
/// (what a history's `updated:` rule converts of an image), and `None`
/// for one read whole, indexed, or not at all; a macro's own names are
/// not the variable's.
#[test]
fn the_fields_of_a_variable_read_only_through_them_are_known() {
    let fields = |src: &str, var: &str| {
        Expr::compile(src)
            .unwrap()
            .fields_of(var)
            .map(|f| f.to_vec())
    };
    let rule = "old.isArchived != true && new.isArchived == true";
    assert_eq!(fields(rule, "old"), Some(vec!["isArchived".to_string()]));
    assert_eq!(fields(rule, "new"), Some(vec!["isArchived".to_string()]));
    assert_eq!(
        fields("has(old.notes) && old.name != old.notes", "old"),
        Some(vec!["notes".to_string(), "name".to_string()])
    );
    assert_eq!(fields("old.a.b == 1", "old"), Some(vec!["a".to_string()]));
    assert_eq!(fields("old == new", "old"), None);
    assert_eq!(fields("old.a == 1 || size(old) > 2", "old"), None);
    assert_eq!(fields("old['a'] == 1", "old"), None);
    assert_eq!(fields("new.a == 1", "old"), None);
    // `x` is the macro's, never the variable `old`.
    assert_eq!(
        fields("old.items.exists(x, x.done) && old.ok", "old"),
        Some(vec!["items".to_string(), "ok".to_string()])
    );
    assert_eq!(fields("[1].exists(old, old.a == 1) && old.b", "old"), None);
    // Each evaluates the same with a map of those fields alone.
    let env = Env::new().unwrap();
    let whole = Val::Map(vec![
        ("isArchived".to_string(), Val::Bool(true)),
        ("name".to_string(), Val::Str("n".into())),
    ]);
    let part = Val::Map(vec![("isArchived".to_string(), Val::Bool(true))]);
    let off = Val::Map(vec![("isArchived".to_string(), Val::Bool(false))]);
    let e = Expr::compile(rule).unwrap();
    for old in [&whole, &part] {
        let got = env.eval(&e, |n| match n {
            "old" => Some(&off),
            "new" => Some(old),
            _ => None,
        });
        assert_eq!(got, Ok(Val::Bool(true)));
    }
}

/// A function given a value of another type names the types, never the
/// value (hostile13's #19: `lower(contact.email)` of a list logged the
/// whole list, `got 'DefaultList([String("...alice@example.com"), ...])'`,
/// and `verify` and `explain` printed it too).
#[test]
fn a_wrongly_typed_argument_names_its_type_never_its_value() {
    let secret = |s: &str| Val::Str(format!("PIIMARK-{s}"));
    for (value, kind) in [
        (
            Val::List(vec![secret("alice@example.com"), secret("SSN")]),
            "a list",
        ),
        (Val::Map(vec![("home".into(), secret("bob@home"))]), "a map"),
        (Val::Int(5551234567), "an int"),
    ] {
        let contact = Val::Map(vec![("email".into(), value)]);
        let err = eval("lower(contact.email)", &[("contact", contact)]).unwrap_err();
        assert!(
            !err.contains("PIIMARK") && !err.contains("5551234567"),
            "{err}"
        );
        assert!(!err.contains("Arc<") && !err.contains("Default"), "{err}");
        assert!(err.contains(kind) && err.contains("a string"), "{err}");
    }
}

/// The deepest expression of each shape that compiles (a chain of `+`,
/// of field selections, of indexes, of macros over a list, macros nested
/// in each other) is type-checked, evaluated and dropped on a thread with
/// a quarter of a tokio worker's stack; one level more is refused, as too
/// deep, with the limit named (hostile13 #1).
#[test]
fn the_deepest_expression_allowed_of_each_shape_runs_on_a_quarter_of_a_workers_stack() {
    use super::super::typecheck::{checked, Enums, Readable, T};
    type Shape = fn(usize) -> String;
    let shapes: [(&str, Shape); 5] = [
        ("plus", |k| format!("{} > 0", vec!["x"; k].join(" + "))),
        ("select", |k| format!("m{} == 1", ".a".repeat(k))),
        ("index", |k| format!("l{} == 1", "[0]".repeat(k))),
        ("macros", |k| {
            format!("size([1]{}) > 0", ".map(v, v + 1)".repeat(k))
        }),
        ("nested", |k| {
            (0..k).fold("x > 0".to_string(), |body, i| {
                format!("[1].all(v{i}, {body})")
            })
        }),
    ];
    for (shape, source) in shapes {
        let deepest = (1..)
            .take_while(|k| Expr::compile(&source(*k)).is_ok())
            .last()
            .unwrap_or_else(|| panic!("{shape}: one level compiles"));
        let refused = Expr::compile(&source(deepest + 1)).unwrap_err();
        assert!(refused.too_large, "{shape}: {refused:?}");
        assert!(
            refused.message.contains(&format!("more than {MAX_DEPTH}")),
            "{shape}: {refused:?}"
        );
        let src = source(deepest);
        std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || {
                let reads = Readable {
                    names: vec![("x", T::Int), ("m", T::Map), ("l", T::List)],
                    says: "test",
                    enums: Enums::default(),
                };
                let e = checked(&src, &reads, None).unwrap_or_else(|f| panic!("{shape}: {f:?}"));
                let env = Env::new().unwrap();
                let (x, m, l) = (Val::Int(1), Val::Map(vec![]), Val::List(vec![]));
                // Evaluated to the bottom (a missing key or index is an
                // error found there, not an overflow).
                let _ = env.eval(&e, |n| match n {
                    "x" => Some(&x),
                    "m" => Some(&m),
                    "l" => Some(&l),
                    _ => None,
                });
            })
            .unwrap()
            .join()
            .unwrap_or_else(|_| panic!("{shape}: the thread ends"));
    }
}

/// Before it is parsed, an expression is refused past [`MAX_OPERATORS`]
/// operator characters (a string's counted too: nothing hides one), at
/// the first one past the limit; `&&` and `||` chains are balanced trees,
/// so a long one is shallow.
#[test]
fn an_expression_past_the_operator_limit_is_refused_before_it_is_parsed() {
    let long = format!("{} > 0", vec!["x"; MAX_OPERATORS + 1].join("+"));
    let e = Expr::compile(&long).unwrap_err();
    assert!(
        e.too_large && e.message.contains("more than 500 operators"),
        "{e:?}"
    );
    // The 501st: the `>` after 501 `x` joined by 500 `+`, and a space.
    assert_eq!(e.offset, 2 * MAX_OPERATORS + 2, "{e:?}");
    let text = format!("size('{}') > 0", "-".repeat(MAX_OPERATORS));
    assert!(Expr::compile(&text).unwrap_err().too_large);
    // `in` is an operator, `inside` a name.
    let ins = format!("x {}", "in l ".repeat(MAX_OPERATORS + 1));
    assert!(Expr::compile(&ins)
        .unwrap_err()
        .message
        .contains("operators"));
    let names = vec!["inside"; MAX_OPERATORS + 1].join(", ");
    assert!(Expr::compile(&format!("size([{names}]) > 0")).is_ok());
    let all = vec!["x > 0"; 120].join(" && ");
    assert!(Expr::compile(&all).is_ok(), "120 conditions: a tree 8 deep");
}
