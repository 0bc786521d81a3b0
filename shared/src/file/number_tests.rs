//! `number` values: read from items (top level, inside maps and lists),
//! compared and rendered by expressions, written back, and what the
//! load-time check refuses of them (user9's finding 3).

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::{Env, Expr, Val};
use super::model::{Attr, Ty};
use super::number::Number;
use super::typecheck::{self, T};
use super::values::{read_attr, to_attr, typed_str};
use crate::item::{AttrError, Item};

fn num(s: &str) -> Val {
    Val::number(Number::parse(s).unwrap())
}

fn eval(src: &str, vars: &[(&str, Val)]) -> Result<Val, String> {
    let env = Env::new().unwrap();
    let e = Expr::compile(src).unwrap();
    env.eval(&e, |n| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v))
}

fn n(s: &str) -> AttributeValue {
    AttributeValue::N(s.to_string())
}

/// A trip's `pickup: {lat: 1.5, lng: -0.25}` and `stops: [..]` are read as
/// exact numbers (before, the whole item was bad input: "holds a number
/// that is not a 64-bit integer").
#[test]
fn fractional_numbers_inside_maps_and_lists_are_read_exactly() {
    let pickup = AttributeValue::M(
        [
            ("lat".to_string(), n("51.5")),
            ("lng".to_string(), n("-0.25")),
            ("zone".to_string(), n("7")),
            ("far".to_string(), n("1E+30")),
        ]
        .into(),
    );
    let stops = AttributeValue::L(vec![
        n("1.5"),
        AttributeValue::M([("km".into(), n("2.75"))].into()),
    ]);
    let item: Item = [("pickup".to_string(), pickup), ("stops".to_string(), stops)].into();
    let map = Attr {
        name: "pickup",
        ty: Ty::Map,
        optional: false,
    };
    let list = Attr {
        name: "stops",
        ty: Ty::List,
        optional: false,
    };
    assert_eq!(
        read_attr(&item, &map),
        Ok(Val::Map(vec![
            ("far".into(), num("1000000000000000000000000000000")),
            ("lat".into(), num("51.5")),
            ("lng".into(), num("-0.25")),
            ("zone".into(), Val::Int(7)),
        ]))
    );
    assert_eq!(
        read_attr(&item, &list),
        Ok(Val::List(vec![
            num("1.5"),
            Val::Map(vec![("km".into(), num("2.75"))])
        ]))
    );
    // What DynamoDB would not hold is still refused, naming the attribute.
    let bad: Item = [(
        "pickup".to_string(),
        AttributeValue::M([("x".into(), n("NaN"))].into()),
    )]
    .into();
    match read_attr(&bad, &map) {
        Err(AttrError::Invalid { name, reason }) => {
            assert_eq!(name, "pickup");
            assert_eq!(reason, "holds not a number");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_number_attribute_is_read_exactly_and_written_back_as_dynamodb_returns_it() {
    let price = Attr {
        name: "price",
        ty: Ty::Number,
        optional: false,
    };
    for (stored, read, written) in [
        ("12.10", num("12.1"), "12.1"),
        ("12.99", num("12.99"), "12.99"),
        ("100", Val::Int(100), "100"),
        ("1e2", Val::Int(100), "100"),
        ("-0.5", num("-0.5"), "-0.5"),
        (
            "12345678901234567890123456789012345678",
            num("12345678901234567890123456789012345678"),
            "12345678901234567890123456789012345678",
        ),
    ] {
        let item: Item = [("price".to_string(), n(stored))].into();
        let v = read_attr(&item, &price).unwrap();
        assert_eq!(v, read, "{stored}");
        assert_eq!(v.render(), written, "{stored}");
        assert_eq!(
            to_attr("price", v, Some(&Ty::Number)),
            Ok(Some(n(written))),
            "{stored}"
        );
    }
    let s: Item = [("price".to_string(), AttributeValue::S("1.5".into()))].into();
    assert!(matches!(
        read_attr(&s, &price),
        Err(AttrError::WrongType { .. })
    ));
    // In a key, a number is written as it renders: one text per value.
    assert_eq!(
        typed_str("price", "12.1", Some(&Ty::Number)),
        Ok(num("12.1"))
    );
    assert_eq!(typed_str("price", "7", Some(&Ty::Number)), Ok(Val::Int(7)));
    for bad in ["12.10", "1e2", "-0", "abc"] {
        assert!(typed_str("price", bad, Some(&Ty::Number)).is_err(), "{bad}");
    }
    // An int is a number; a number is not an int.
    assert_eq!(
        to_attr("n", Val::Int(3), Some(&Ty::Number)),
        Ok(Some(n("3")))
    );
    assert!(to_attr("n", num("1.5"), Some(&Ty::Int)).is_err());
}

/// Comparisons are exact, whichever side the number is on, against ints,
/// numbers and literals as written (never a binary double: 4.8 is 4.8).
#[test]
fn numbers_compare_exactly_with_ints_and_literals() {
    let cases: &[(&str, Val, bool)] = &[
        ("rating >= 4.5", num("4.8"), true),
        ("rating >= 4.5", Val::Int(5), true),
        ("rating >= 4.5", Val::Int(4), false),
        ("rating >= 4.5", num("4.5"), true),
        ("rating > 4.5", num("4.5"), false),
        ("rating == 4.8", num("4.8"), true),
        ("4.8 == rating", num("4.8"), true),
        ("4.80 == rating", num("4.8"), true),
        ("rating != 4.8", num("4.8"), false),
        ("4.5 < rating", num("4.8"), true),
        ("4 < rating", num("4.8"), true),
        ("5 <= rating", num("4.8"), false),
        ("rating == 5", Val::Int(5), true),
        ("rating == 5.0", Val::Int(5), true),
        ("rating < 1e2", num("99.5"), true),
        ("rating in [4.5, 4.8]", num("4.8"), true),
        ("rating in [4.5, 5]", num("4.8"), false),
        ("rating > -0.5", num("-0.25"), true),
        ("rating > 0.3", num("0.30000000000000000001"), true),
        ("rating == 0.3", num("0.30000000000000000001"), false),
        (
            "rating > 9223372036854775807",
            num("9223372036854775808"),
            true,
        ),
        ("rating != null && rating > 4", num("4.01"), true),
    ];
    for (src, v, want) in cases {
        assert_eq!(
            eval(src, &[("rating", v.clone())]),
            Ok(Val::Bool(*want)),
            "{src} with {v:?}"
        );
    }
    let pickup = Val::Map(vec![("lat".into(), num("51.5")), ("n".into(), Val::Int(3))]);
    for (src, want) in [
        ("m.lat > 50.0", true),
        ("m.lat > 50", true),
        ("50 < m.lat", true),
        ("m.lat < m.n", false),
        ("m.n < m.lat", true),
        ("has(m.lat) && m.lat == 51.5", true),
        ("get(m, 'lat', 0) >= 51.5", true),
    ] {
        assert_eq!(
            eval(src, &[("m", pickup.clone())]),
            Ok(Val::Bool(want)),
            "{src}"
        );
    }
    // Orderings of other values are CEL's own.
    let s = |x: &str| Val::Str(x.into());
    assert_eq!(
        eval("a < b", &[("a", s("a")), ("b", s("b"))]),
        Ok(Val::Bool(true))
    );
    assert_eq!(eval("a <= 3", &[("a", Val::Int(3))]), Ok(Val::Bool(true)));
    let err = eval("a < b", &[("a", Val::Int(1)), ("b", s("b"))]).unwrap_err();
    assert!(err.contains("int") && err.contains("string"), "{err}");
    let err = eval("a < b", &[("a", num("1.5")), ("b", s("b"))]).unwrap_err();
    assert!(err.contains("number") && err.contains("string"), "{err}");
}

/// A number renders (a template's hole, a bare name) as DynamoDB returns
/// it; computing with one inside a map is an error naming it a number.
#[test]
fn numbers_render_exactly_and_are_never_computed() {
    assert_eq!(
        eval("price", &[("price", num("12.10"))]).map(|v| v.render()),
        Ok("12.1".into())
    );
    assert_eq!(
        eval(
            "m.lat",
            &[("m", Val::Map(vec![("lat".into(), num("1.50"))]))]
        ),
        Ok(num("1.5"))
    );
    assert_eq!(eval("2.50", &[]), Ok(num("2.5")));
    assert_eq!(
        eval("true ? 12.10 : 1", &[]).map(|v| v.render()),
        Ok("12.1".into())
    );
    let m = Val::Map(vec![("lat".into(), num("1.5"))]);
    for src in [
        "m.lat + 1",
        "m.lat * 2",
        "-m.lat",
        "sum([m.lat])",
        "int(m.lat)",
        "pad(m.lat, 3)",
    ] {
        let err = eval(src, &[("m", m.clone())]).unwrap_err();
        assert!(err.contains("number"), "{src}: {err}");
    }
}

fn names(n: &str) -> T {
    match n {
        "rating" => T::Num,
        "stars" => T::Int,
        "title" => T::Str,
        "pickup" => T::Map,
        _ => T::Dyn,
    }
}

fn check(src: &str) -> Result<T, typecheck::Flaw> {
    typecheck::check(&Expr::compile(src).unwrap(), &names)
}

#[test]
fn check_model_accepts_comparisons_and_refuses_computations_of_numbers() {
    for src in [
        "rating >= 4.5",
        "rating == stars",
        "4.5 < rating && stars > 3",
        "rating != null && rating > 4",
        "pickup.lat > 50.0",
        "rating in [4.5, 5]",
    ] {
        assert_eq!(check(src).map_err(|f| f.message), Ok(T::Bool), "{src}");
    }
    assert_eq!(
        check("stars > 3 ? rating : 0").map_err(|f| f.message),
        Ok(T::Num)
    );
    for (src, why) in [
        (
            "rating + 1",
            "`+` adds ints, strings or lists, but it is given a number",
        ),
        (
            "rating * 100",
            "is arithmetic on ints, but it is given a number",
        ),
        ("-rating", "negates an int"),
        ("pad(rating, 3)", "pads an int"),
        (
            "int(rating)",
            "`int(...)` of a number would cut its fraction",
        ),
        ("string(rating)", "render it in a template instead"),
        ("max(rating, 1)", "`max` of numbers"),
        ("rating > title", "cannot be ordered"),
        ("rating == title", "never equal"),
    ] {
        let msg = check(src).unwrap_err().message;
        assert!(msg.contains(why), "{src}: {msg}");
        if src.contains("title") {
            continue;
        }
        assert!(
            msg.contains("keep a value you add up or compute with as an `int`"),
            "{src}: {msg}"
        );
    }
    // A sum or a computed value must be an int: a number is refused with
    // what to write instead.
    let e = Expr::compile("rating").unwrap();
    let msg = typecheck::expect(&e, &names, T::Int, "a sum (`add:`)")
        .unwrap_err()
        .message;
    assert!(
        msg.starts_with(
            "a sum (`add:`) must be an int, but `rating` is a number; a `number` is compared"
        ),
        "{msg}"
    );
    // A literal no double holds is still read as written.
    assert!(Expr::compile("rating > 0.30000000000000000001").is_ok());
    let err = Expr::compile("rating > 1.5e200").unwrap_err();
    assert!(err.message.contains("exactly as written"), "{err:?}");
}

/// The rides model (fractions at the top level and in a map) loads; a sum,
/// a computed projection or a conversion of a `number` is refused where it
/// is written, saying what to write instead.
#[test]
fn check_model_refuses_a_count_or_a_projection_computed_from_a_number() {
    use super::test_support::{assert_at, assert_says, broken, problems};
    const RIDES: &str = include_str!("../../../tests/scenarios/rides/rides.yaml");
    assert!(problems(RIDES).is_empty(), "{:#?}", problems(RIDES));
    let (text, _) = broken(RIDES, "add: { trips: 1,", "add: { trips: price,", "price");
    let p = problems(&text);
    assert_says(&p, "trip: `add: { trips: ... }` (a sum) must be an int, but `price` is a number; a `number` is compared, copied and rendered exactly, never computed");
    assert_says(&p, "(cents, not dollars)");
    let (text, at) = broken(
        RIDES,
        "GSI1SK: \"${rating}#${tripId}\"",
        "GSI1SK: \"${rating * 10}#${tripId}\"",
        "rating * 10",
    );
    let p = problems(&text);
    assert_says(&p, "`*` is arithmetic on ints, but it is given a number");
    assert_at(&p, at, "is arithmetic on ints");
}
