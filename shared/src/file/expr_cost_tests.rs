//! An expression whose cost grows with the square of an item's list
//! (hostile13 #15: `xs.all(a, xs.exists(b, b == a))` over 20,000 elements
//! evaluated for 9 minutes, holding its shard) is refused at load: an
//! item's list is read inside a macro's body only by `size` and `[i]`.
//! What is linear in the item loads (Pick'Em's members of each team).

use super::test_support::{assert_at, broken, problems};

const BAG: &str = r#"jobstream: 1
name: bag
table: { name: bag, pk: PK, sk: SK }
entities:
  bag:
    key: { PK: "B#${id}", SK: BAG }
    attributes: { id: string, xs: list, ys: list, teams: list, m: map }
    check:
      - expr: "xs.all(a, a == string(a))"
        message: ok
"#;

/// Each check, quadratic in the item's lists, is refused where the list is
/// read per element.
#[test]
fn a_list_of_the_item_read_in_a_macros_body_is_refused() {
    assert_eq!(problems(BAG), vec![]);
    for (to, at) in [
        ("xs.all(a, xs.exists(b, b == a))", "xs.exists"),
        ("xs.all(a, a in ys)", "ys)"),
        ("xs.exists(a, ys == [a])", "ys =="),
        (
            "xs.map(a, size(ys.filter(b, b == a))).all(n, n > 0)",
            "ys.filter",
        ),
        ("xs.all(a, m.exists(k, k == a))", "m.exists"),
        ("xs.all(a, teams.all(t, a in t))", "teams.all(t"),
    ] {
        let (text, pos) = broken(BAG, "xs.all(a, a == string(a))", to, at);
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{to}: {p:#?}");
        assert_at(
            &p,
            pos,
            "a list of the item, is read inside the body of a macro",
        );
    }
}

/// Linear in the item: one macro, a macro over an element's own list, a
/// list's size or element, a map's key, a list macro chained after
/// another (not inside it).
#[test]
fn expressions_linear_in_the_item_load() {
    for to in [
        "size(teams) >= 2 && teams.all(t, size(get(t, 'members', [])) > 0 && get(t, 'members', []).all(x, x == string(x)))",
        "xs.all(a, size(xs) > 1 && xs[0] != a)",
        "m.all(k, m[k] == 1)",
        "xs.filter(a, a != '').map(a, a + 'x').all(b, b in ['x', 'y'])",
        "xs.all(a, get(m, a, 0) == 0)",
        "size(xs.filter(a, a in m)) == size(ys)",
    ] {
        let text = BAG.replace("xs.all(a, a == string(a))", to);
        assert_eq!(problems(&text), vec![], "{to}");
    }
}

/// An expression whose values can outgrow any item is refused where they
/// grow: a macro's variable added to itself doubles a value per nesting
/// (`[s].map(a, a + a)[0]` nested 24 times made a 1.6 GB string of a
/// 100-character attribute, 5 GB of memory in `dev`), and an item's value
/// added to every element of an item's list grows with the square of the
/// item's size.
#[test]
fn an_expression_whose_values_outgrow_the_item_is_refused() {
    let mut doubled = "xs[0]".to_string();
    for _ in 0..24 {
        doubled = format!("[{doubled}].map(a, a + a)[0]");
    }
    let doubled = format!("size({doubled}) > 0");
    let text = BAG.replace("xs.all(a, a == string(a))", &doubled);
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].message
            .contains("its values can grow to 128 items' worth"),
        "{p:#?}"
    );
    for (to, at) in [
        ("xs.map(a, a + string(m.k)).all(b, b != '')", "(a, a +"),
        (
            "xs.map(a, [a, a, a]).map(b, [b, b, b]).map(c, [c, c, c]).map(d, [d, d, d]).all(x, x != '')",
            "[d, d, d]",
        ),
    ] {
        let (text, pos) = broken(BAG, "xs.all(a, a == string(a))", to, at);
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{to}: {p:#?}");
        assert_at(&p, pos, "its values can grow");
    }
}

/// Values bounded by a few times the item's size load: a prefix on every
/// element, a template of several attributes, an element's own list mapped,
/// a chain of macros, a value tripled once.
#[test]
fn expressions_whose_values_stay_near_the_items_size_load() {
    for to in [
        "xs.map(a, 'TAG#' + string(a) + '#x').all(b, b != '')",
        "string(xs[0]) + '#' + string(ys[0]) + '#' + string(m.k) != ''",
        "teams.map(t, get(t, 'members', []).map(x, string(x) + '!')).all(l, size(l) >= 0)",
        "xs.filter(a, a != '').map(a, [a, a, a]).all(b, size(b) == 3)",
        "xs.exists_one(a, a == 'x') || size(xs.map(a, upper(string(a)))) > 0",
    ] {
        let text = BAG.replace("xs.all(a, a == string(a))", to);
        assert_eq!(problems(&text), vec![], "{to}");
    }
}
