//! The cascade's rules: what goes when a history's root goes (the
//! removed incarnation's members, compared whole, and its entries).

use aws_sdk_dynamodb::types::AttributeValue;

use super::tests::{fold, fold_insert, history, line, order, ORDER};
use super::*;
use crate::change::test_change as change;
use crate::file::test_support::item;

#[test]
fn a_root_removal_cascades_its_incarnation_and_a_new_one_starts_at_one() {
    let h = history(ORDER);
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    fold_insert(&h, &mut st, line("a", 1));
    let rm = change(ChangeKind::Remove, Some(order("open")), None);
    assert!(h.removes_root(&rm));
    assert!(!h.removes_root(&change(ChangeKind::Remove, Some(line("a", 1)), None)));
    assert!(h.starts_aggregate(&change(ChangeKind::Insert, None, Some(order("open")))));
    let c = h.cascade("o1", &st);
    let sks: Vec<&str> = c.deletes.iter().map(|d| d.key.s("SK").unwrap()).collect();
    assert_eq!(sks, ["LINE#a", "HIST#000001", "HIST#000002"]);
    assert_eq!(
        c.deletes[0].unchanged.as_ref(),
        st.parts.get("LINE#a"),
        "a member is deleted only while it is the one this incarnation had"
    );
    assert!(fold(&h, &mut st, rm).is_empty());
    assert!(st.deleted);
    assert!(
        fold(
            &h,
            &mut st,
            change(ChangeKind::Remove, Some(line("a", 1)), None)
        )
        .is_empty(),
        "the cascade's own removals write no entry"
    );
    assert_eq!(
        fold_insert(&h, &mut st, order("open")),
        ["Order placed by ann"]
    );
    assert_eq!(st.seq, 1);
    let (key, attr) = h.sequence_mirror("o1").unwrap();
    assert_eq!(key, item(&[("PK", s("ORDER#o1")), ("SK", s("ORDER"))]));
    assert_eq!(attr, "historySequence");
}

/// A member with `fields` is held whole (its other data and each declared
/// attribute it lacks, `NULL`): its snapshot shows its fields, and the
/// cascade deletes it only while it is the item folded, so a line put
/// again with the same `sku` and `qty` but other data is never taken for
/// it. A member without `fields` is guarded the same way (declared
/// attributes it lacks absent).
#[test]
fn a_members_cascade_compares_the_whole_item_its_snapshot_its_fields() {
    let h = history(ORDER);
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    let mut noted = line("a", 1);
    noted.insert("note".into(), s("gift"));
    fold_insert(&h, &mut st, noted);
    let part = &st.parts["LINE#a"];
    assert_eq!(part.get("note"), Some(&s("gift")), "{part:?}");
    assert_eq!(part.get("orderId"), Some(&s("o1")));
    assert!(!part.contains_key("PK") && !part.contains_key("SK"));
    let snap = h.snapshot(&st);
    let Some(AttributeValue::L(lines)) = snap.get("lines") else {
        panic!("lines: {snap:?}")
    };
    assert_eq!(
        lines,
        &[AttributeValue::M(item(&[("sku", s("a")), ("qty", n(1))]))],
        "the snapshot shows the fields only"
    );
    let c = h.cascade("o1", &st);
    assert_eq!(c.deletes[0].unchanged.as_ref(), Some(part));
    // Only other data changed: no entry, but the state holds it.
    let mut renoted = line("a", 1);
    renoted.insert("note".into(), s("urgent"));
    let mut before = line("a", 1);
    before.insert("note".into(), s("gift"));
    let modify = change(ChangeKind::Modify, Some(before), Some(renoted));
    assert!(fold(&h, &mut st, modify).is_empty());
    assert_eq!(st.parts["LINE#a"].get("note"), Some(&s("urgent")));
    // Without `fields`: the part is the item, and the guard holds the
    // declared attributes it lacks absent.
    let open = ORDER
        .replace(
            "line: { list: lines, fields: [sku, qty],",
            "line: { list: lines,",
        )
        .replace("qty: int }", "qty: int, note: string? }");
    assert_ne!(open, ORDER);
    let h = history(&open);
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    fold_insert(&h, &mut st, line("a", 1));
    assert!(!st.parts["LINE#a"].contains_key("note"));
    let c = h.cascade("o1", &st);
    let guard = c.deletes[0].unchanged.as_ref().expect("guarded");
    assert_eq!(guard.get("note"), Some(&AttributeValue::Null(true)));
    assert_eq!(guard.get("qty"), Some(&n(1)));
}
