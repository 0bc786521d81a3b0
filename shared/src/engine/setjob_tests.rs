//! Unit tests of set jobs' transaction packing and guards.

use super::*;
use crate::item::s;

fn key(pk: &str) -> Item {
    [("PK".to_string(), s(pk)), ("SK".to_string(), s("x"))].into()
}

#[test]
fn string_sets_are_compared_as_sets() {
    let ss = |v: &[&str]| AttributeValue::Ss(v.iter().map(|s| s.to_string()).collect());
    let mut item = key("a");
    item.insert("tags".into(), ss(&["b", "a"]));
    // A replay (or another writer) may store the set in another order.
    assert!(Guard::equals(key("a"), "tags", ss(&["a", "b"])).holds(Some(&item)));
    assert!(!Guard::absent_or_not(key("a"), "tags", ss(&["a", "b"])).holds(Some(&item)));
    assert!(!Guard::equals(key("a"), "tags", ss(&["a", "c"])).holds(Some(&item)));
    let mut other = key("a");
    other.insert("tags".into(), ss(&["a", "b"]));
    assert!(crate::item::same_items(&item, &other));
    other.insert("n".into(), AttributeValue::Ns(vec!["1".into()]));
    assert!(!crate::item::same_items(&item, &other));
}

#[test]
fn conditions_name_only_the_placeholders_they_use() {
    let g = Guard::equals(key("a"), "status", s("open"));
    let e = condition(&[&g], "PK");
    assert_eq!(e.text, "#g0 = :g0");
    assert_eq!(e.names, vec![("#g0".to_string(), "status".to_string())]);
    let g = Guard::absent_or_not(key("a"), "status", s("open"));
    let e = condition(&[&g], "PK");
    assert_eq!(e.names.len(), 2);
}

#[test]
fn guards_hold_as_their_conditions_say() {
    let item: Item = [("status".to_string(), s("open"))].into();
    assert!(Guard::exists(key("a")).holds(Some(&item)));
    assert!(!Guard::exists(key("a")).holds(None));
    assert!(Guard::absent(key("a")).holds(None));
    assert!(Guard::equals(key("a"), "status", s("open")).holds(Some(&item)));
    assert!(!Guard::equals(key("a"), "status", s("closed")).holds(Some(&item)));
    assert!(Guard::absent_or_not(key("a"), "status", s("closed")).holds(Some(&item)));
    assert!(Guard::absent_or_not(key("a"), "status", s("open")).holds(None));
    assert!(!Guard::absent_or_not(key("a"), "status", s("open")).holds(Some(&item)));
}

#[test]
fn pack_shares_checks_and_folds_own_guards_into_the_write() {
    let post = Guard::exists(key("post"));
    let ops = vec![
        Op {
            write: Write::Put(key("e1")),
            key: key("e1"),
            guards: vec![post.clone(), Guard::exists(key("f1"))],
            own: None,
            size: 10,
            notes: Vec::new(),
        },
        Op {
            write: Write::Put(key("e2")),
            key: key("e2"),
            guards: vec![post.clone(), Guard::absent(key("e2"))],
            own: None,
            size: 2000,
            notes: Vec::new(),
        },
    ];
    let Packed {
        actions,
        owners,
        taken,
        rest,
        units,
        ..
    } = pack(ops, "t", "l", &["PK", "SK"]);
    assert!(rest.is_empty());
    assert_eq!(taken.len(), 2);
    // e1, post (shared), f1, e2 (its own guard folded into its put).
    assert_eq!(actions.len(), 4);
    assert_eq!(owners[1], vec![0, 1], "the post check belongs to both");
    // Billed twice per action: e1 (1 KB), the two checks, e2 (2 KB).
    assert_eq!(units, 2 * (1 + 1 + 1 + 2));
    let e2 = actions[3].put().unwrap();
    assert_eq!(e2.condition_expression(), Some("attribute_not_exists(#k0)"));
}

#[test]
fn the_target_as_read_is_part_of_its_own_write() {
    let op = |write, own| Op {
        write,
        key: key("e"),
        guards: vec![Guard::equals(key("e"), "n", s("1"))],
        own,
        size: 10,
        notes: Vec::new(),
    };
    let ops = vec![op(Write::Put(key("e")), Some(Guard::absent(key("e"))))];
    let p = pack(ops, "t", "l", &["PK", "SK"]);
    assert_eq!(p.writes, vec![Some(0)]);
    let put = p.actions[0].put().unwrap();
    assert_eq!(
        put.condition_expression(),
        Some("#g0 = :g0 AND attribute_not_exists(#k0)")
    );
    let ops = vec![op(Write::Delete, Some(Guard::exists(key("e"))))];
    let p = pack(ops, "t", "l", &["PK", "SK"]);
    let delete = p.actions[0].delete().unwrap();
    assert_eq!(
        delete.condition_expression(),
        Some("#g0 = :g0 AND attribute_exists(#k0)")
    );
    // Read otherwise: the attributes the put changes, as read.
    let read: Item = [("n".to_string(), s("1")), ("old".to_string(), s("x"))].into();
    let mut want = read.clone();
    want.remove("old");
    want.insert("score".into(), s("9"));
    want.insert("at".into(), s("now"));
    let attrs = changed(&read, &want, &["at"]);
    assert_eq!(
        attrs,
        vec![
            ("old".to_string(), Some(s("x"))),
            ("score".to_string(), None)
        ]
    );
    let g = Guard::unchanged(key("e"), attrs);
    assert!(g.holds(Some(&read)));
    assert!(!g.holds(Some(&want)), "a concurrent job's equal put");
    assert!(!g.holds(None));
    let e = condition(&[&g], "PK");
    assert_eq!(
        e.text,
        "attribute_exists(#k0) AND #g0_0 = :g0_0 AND attribute_not_exists(#g0_1)"
    );
    assert_eq!(e.names.len(), 3);
    // Once a concurrent write was found different: the facts alone.
    let p = pack(
        vec![op(Write::Put(key("e")), None)],
        "t",
        "l",
        &["PK", "SK"],
    );
    assert_eq!(
        p.actions[0].put().unwrap().condition_expression(),
        Some("#g0 = :g0")
    );
}
