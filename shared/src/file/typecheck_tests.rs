//! Tests of the type check: expressions refused and accepted, and what
//! run time makes of what the check lets through.

use super::typecheck::*;
use crate::file::expr::{Env, Expr, Val};

fn names(n: &str) -> T {
    match n {
        "estimate" | "seq" => T::Int,
        "title" | "due" | "id" => T::Str,
        "done" => T::Bool,
        "tags" => T::List,
        "picks" => T::Map,
        _ => T::Dyn,
    }
}

fn value(n: &str) -> Option<Val> {
    Some(match names(n) {
        T::Int => Val::Int(5),
        T::Str => Val::Str("x".into()),
        T::Bool => Val::Bool(true),
        T::List => Val::Set(vec!["a".into()]),
        T::Map => Val::Map(vec![("k".into(), Val::Int(1))]),
        _ => return None,
    })
}

fn check_src(src: &str) -> Result<T, Flaw> {
    check(&Expr::compile(src).unwrap(), &names)
}

/// Each refused expression fails (or is never true) on values of the
/// declared types at run time: the check refuses nothing that works.
#[test]
fn what_the_check_refuses_fails_at_run_time() {
    let env = Env::new().unwrap();
    let refused = [
        ("estimate > title", "`>` compares an int with a string"),
        ("status == 'open' && estimate >= due", "`>=` compares"),
        ("estimate + title", "`+` adds an int and a string"),
        ("title - 1", "`-` is arithmetic on ints"),
        ("lower(estimate)", "`lower` takes a string"),
        ("pad(title, 6)", "`pad(n, width)` pads an int"),
        ("done && title", "`&&` joins bools"),
        ("size(estimate) > 0", "`size` takes"),
        ("title.startsWith(1)", "`startsWith` takes a string"),
        ("estimate.startsWith('a')", "a method of a string"),
        ("iso(due)", "`iso` takes epoch seconds"),
        ("(done ? 1 : 2) + 'a'", "`+` adds an int and a string"),
    ];
    for (src, why) in refused {
        let err = check_src(src).unwrap_err();
        assert!(err.message.contains(why), "{src}: {err:?}");
        let e = Expr::compile(src).unwrap();
        let vars: Vec<(String, Val)> = e
            .variables
            .iter()
            .filter_map(|v| value(v).map(|x| (v.clone(), x)))
            .collect();
        let got = env.eval(&e, |n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v));
        assert!(got.is_err(), "{src} runs: {got:?}");
    }
    // A comparison of different types is never true.
    let err = check_src("estimate == title").unwrap_err();
    assert!(err.message.contains("never equal"), "{err:?}");
    // The offset points into the expression at the operator's node.
    let err = check_src("status == 'open' && estimate > title").unwrap_err();
    assert!(err.offset >= 20, "{err:?}");
}

#[test]
fn what_the_check_accepts() {
    for src in [
        "estimate > 0 && title != ''",
        "due != null && due < '2026'",
        "title + string(estimate)",
        "pad(seq, 6) == id",
        "(size(string(seq)) >= 6 ? string(seq) : pad(seq, 6)) == id",
        "tags.exists(t, t == 'a') && 'a' in tags",
        "get(picks, id, -1) == estimate",
        "picks.k > 1 && has(picks.k)",
        "unknown > 1 && unknown + 'a' != ''",
        "day(due) == day(estimate)",
        "title.contains('a') && tags.contains('b')",
        "max(estimate, 3) - 1 > 0",
        "done ? 'x' + title : null",
    ] {
        assert!(check_src(src).is_ok(), "{src}: {:?}", check_src(src));
    }
}

#[test]
fn a_result_of_the_wrong_type_is_refused_where_one_is_wanted() {
    let e = Expr::compile("due").unwrap();
    let err = expect(&e, &names, T::Int, "a sum (`add:`)").unwrap_err();
    assert_eq!(
        err.message,
        "a sum (`add:`) must be an int, but `due` is a string"
    );
    let e = Expr::compile("estimate").unwrap();
    assert!(expect(&e, &names, T::Int, "a sum").is_ok());
    let e = Expr::compile("done ? 1 : 0").unwrap();
    assert!(expect(&e, &names, T::Int, "a sum").is_ok());
    let e = Expr::compile("estimate + 1").unwrap();
    let err = expect(&e, &names, T::Bool, "a condition (`when:`)").unwrap_err();
    assert!(err.message.contains("must be a bool"), "{err:?}");
}
