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
        (
            "month(done) == ''",
            "`month` takes a date, a date-time or epoch seconds",
        ),
        ("(done ? 1 : 2) + 'a'", "`+` adds an int and a string"),
        ("int(done) == 1", "`int` converts a string"),
        ("bool(seq)", "`bool` converts a string"),
        ("string(tags) == ''", "`string` converts an int or a bool"),
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
        "title.contains('a') && 'b' in tags",
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

/// `checked` (the load-time check) with [`names`]: the flaws' messages
/// and offsets, or the expression's variables when it is accepted.
fn load(src: &str) -> Result<Expr, Vec<Flaw>> {
    let reads = Readable {
        names: [
            "estimate", "seq", "title", "due", "id", "done", "tags", "picks",
        ]
        .into_iter()
        .map(|n| (n, names(n)))
        .collect(),
        says: "a test reads its names",
        enums: Enums::default(),
    };
    checked(src, &reads, None)
}

fn run(env: &Env, src: &str) -> Result<Val, String> {
    let e = Expr::compile(src).unwrap();
    let vars: Vec<(String, Val)> = e
        .variables
        .iter()
        .filter_map(|v| value(v).map(|x| (v.clone(), x)))
        .collect();
    env.eval(&e, |n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v))
}

/// A call the evaluator does not run as written (a method called as a
/// function, a function called as a method, a macro not on its list, a
/// wrong number of arguments) is refused at load, at the function's name,
/// with the call to write (user15 #1: `startsWith(checkIn, checkInMonth)`
/// was OK for `check-model` and made every item bad input).
#[test]
fn a_call_of_a_shape_the_evaluator_does_not_run_is_refused_with_what_to_write() {
    let env = Env::new().unwrap();
    let refused = [
        ("startsWith(title, due)", 0, "write `title.startsWith(due)`"),
        ("endsWith(title, 'Z')", 0, "write `title.endsWith('Z')`"),
        (
            "done && contains(title, 'B')",
            8,
            "write `title.contains('B')`",
        ),
        (
            "startsWith(title + due, 'a')",
            0,
            "write `(title + due).startsWith('a')`",
        ),
        ("startsWith(title)", 0, "`s.startsWith(prefix)`"),
        (
            "size(title, 1) > 0",
            0,
            "`size` takes 1 argument (`size(x)` or `x.size()`), but it is given 2",
        ),
        ("title.size(1) > 0", 6, "`size` takes"),
        ("size() > 0", 0, "given 0"),
        ("title.startsWith()", 6, "`startsWith` takes 1 argument"),
        ("title.startsWith('a', 'b')", 6, "given 2"),
        ("title.contains()", 6, "given 0"),
        ("tags.contains('a')", 5, "write `'a' in tags`"),
        ("picks.contains('k')", 6, "write `'k' in picks`"),
        (
            "lower()",
            0,
            "`lower` takes 1 argument (`lower(s)`), but it is given 0",
        ),
        ("pad(seq) == id", 0, "`pad(n, width)`"),
        ("get(picks, id) == 1", 0, "`get(map, key, default)`"),
        ("'7'.int() == 7", 4, "write `int('7')`"),
        ("estimate.string() == ''", 9, "write `string(estimate)`"),
        ("title.lower() == ''", 6, "write `lower(title)`"),
        ("all(tags, t, t == 'a')", 0, "write `tags.all(t, t == 'a')`"),
        (
            "exists(tags, t, t == 'a')",
            0,
            "write `tags.exists(t, t == 'a')`",
        ),
        ("size(map(tags, t, t)) > 0", 5, "write `tags.map(t, t)`"),
        ("tags.all(title)", 5, "`list.all(x, condition)`"),
        ("has()", 0, "`has(m.field)`"),
        ("picks.has(k)", 6, "`has(m.field)`"),
    ];
    for (src, at, why) in refused {
        let flaws = load(src).expect_err(src);
        assert!(
            flaws
                .iter()
                .any(|f| f.message.contains(why) && f.offset == at),
            "{src}: at {at}, `{why}`: {flaws:?}"
        );
        assert!(run(&env, src).is_err(), "{src} runs");
    }
    // Shapes the evaluator runs, but not as written: an argument more is
    // ignored (`lower(title, 'b')` is `lower(title)`), and so is the
    // receiver of a function called as a method (`tags.max()` is null).
    let ignored = [
        ("lower(title, 'b') == ''", 0, "`lower` takes 1 argument"),
        ("pad(seq, 6, 1) == id", 0, "`pad` takes 2 arguments"),
        ("iso(seq, 1) == ''", 0, "given 2"),
        ("tags.max() == 1", 5, "write `max(tags)`"),
        ("estimate.min(1) == 1", 9, "write `min(estimate, 1)`"),
        ("max() == 1", 0, "`max` takes"),
    ];
    for (src, at, why) in ignored {
        let flaws = load(src).expect_err(src);
        assert!(
            flaws
                .iter()
                .any(|f| f.message.contains(why) && f.offset == at),
            "{src}: at {at}, `{why}`: {flaws:?}"
        );
    }
}

/// Every call shape the load-time check accepts runs on values of the
/// declared types (it may still find a value bad, `epoch('x')`): the
/// check and the evaluator agree on each function's receiver and
/// arguments.
#[test]
fn every_call_shape_the_check_accepts_runs() {
    let env = Env::new().unwrap();
    let args = [
        "",
        "title",
        "title, due",
        "seq, 6",
        "picks, id, 0",
        "tags",
        "done",
        "picks",
        "seq",
        "tags, seq",
    ];
    let mut accepted = 0;
    for f in crate::file::expr::BUILTINS
        .iter()
        .chain(crate::file::expr::CEL_FUNCTIONS)
    {
        let mut shapes = Vec::new();
        for a in args {
            shapes.push(format!("{f}({a})"));
            for receiver in ["title", "tags", "seq", "done", "picks"] {
                shapes.push(format!("{receiver}.{f}({a})"));
            }
        }
        for src in shapes {
            // A shape the check accepts must also have the types it
            // wants; only the shape is under test here.
            if load(&src).is_ok() {
                accepted += 1;
                // A value may still be bad input (`epoch` of a string
                // that is no time); the call itself runs.
                if let Err(e) = run(&env, &src) {
                    for shape in ["Undeclared", "no matching overload", "argument count"] {
                        assert!(!e.contains(shape), "{src} is accepted but fails: {e}");
                    }
                }
            }
        }
    }
    assert!(accepted >= 20, "{accepted} shapes accepted");
}
