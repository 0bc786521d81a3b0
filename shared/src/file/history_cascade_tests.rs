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

/// A MODIFY that changes only processor-owned attributes (a projection,
/// the mirror) writes nothing of the writer's: it decides no member's
/// fate, and a member the state lacks (a deleted incarnation's, whose
/// cascade deletes it) is not added by it (user11's finding 3: "c3
/// joined", then "c3 left", in a re-created org c3 never joined).
#[test]
fn a_projection_onto_a_member_the_state_lacks_adds_nothing() {
    let model = ORDER
        .replace(
            "table: { name: shop, pk: PK, sk: SK }",
            "table: { name: shop, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }] }",
        )
        .replace(
            "    attributes: { orderId: string, sku: string, qty: int }\n",
            "    attributes: { orderId: string, sku: string, qty: int }\n    project:\n      attributes: { GSI1PK: \"SKU#${sku}\", GSI1SK: \"${orderId}\" }\n",
        );
    assert_ne!(model, ORDER);
    let h = history(&model);
    let mut projected = line("a", 1);
    projected.insert("GSI1PK".into(), s("SKU#a"));
    projected.insert("GSI1SK".into(), s("o1"));
    let projection = change(ChangeKind::Modify, Some(line("a", 1)), Some(projected));
    let mut other = line("a", 1);
    other.insert("qty".into(), n(2));
    let written = change(ChangeKind::Modify, Some(line("a", 1)), Some(other));
    let mut mirrored = order("open");
    mirrored.insert("historySequence".into(), n(9));
    let mirror = change(ChangeKind::Modify, Some(order("open")), Some(mirrored));
    assert!(h.writes_nothing(&mirror));
    // The writer's put over the projected member, its own attributes as
    // they were (the projection dropped), and one that changes nothing at
    // all (the local engine writes a record for it): the writer's.
    let reput = change(
        ChangeKind::Modify,
        projection.new.clone(),
        Some(line("a", 1)),
    );
    assert!(!h.writes_nothing(&reput));
    assert!(!h.writes_nothing(&change(
        ChangeKind::Modify,
        Some(line("a", 1)),
        Some(line("a", 1))
    )));
    assert!(!h.writes_nothing(&written));
    assert!(!h.writes_nothing(&change(ChangeKind::Insert, None, Some(line("a", 1)))));
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    let before = st.clone();
    assert!(h.writes_nothing(&projection));
    assert!(fold(&h, &mut st, projection).is_empty());
    assert_eq!(st, before, "a projection added the member");
    // The writer's change of a member the state lacks (put over one of a
    // deleted incarnation) adds it, as before.
    assert_eq!(fold(&h, &mut st, written), ["Added line"]);
    assert!(st.parts.contains_key("LINE#a"));
}

/// user11's finding 3: members under a root that is gone, no entry
/// beside them, whose root's deletion the history folded (its HEAD says
/// `deleted`): one its state holds (written since, or the removed
/// incarnation's whose delete waits) waits for its root; one it does not
/// hold was left by the cascade, drift (without a repair: one written
/// since whose record the history has not read looks the same).
#[test]
fn a_member_its_roots_folded_deletion_left_behind_is_not_waiting() {
    let h = history(ORDER);
    let items = vec![line("a", 1), line("b", 2), line("c", 3)];
    let pk = crate::ledger::state_pk("history", "o1");
    let pending_b = format!(
        "{}{}",
        crate::engine::fold::PENDING,
        crate::ledger::item_id(&item(&[("PK", s("ORDER#o1")), ("SK", s("LINE#b"))]))
    );
    let mut head = crate::ledger::key(&pk, "HEAD");
    head.insert("seq".into(), n(0));
    head.insert("version".into(), n(7));
    head.insert("deleted".into(), AttributeValue::Bool(true));
    head.insert("epoch".into(), s("e1"));
    let found = |ledger: &[Item]| -> Vec<String> {
        h.check_tallied(&items, ledger)
            .1
            .iter()
            .map(|f| format!("{} {:?} {} {}", f.kind, f.drift, f.what, f.repair.is_some()))
            .collect()
    };
    let left = ["orphans Extra PK=ORDER#o1, SK=LINE#c left behind by a deleted order: the history folded its deletion and no record of this member since (not a member waiting for its root; if it was written since, run verify again once the history has read it) false"];
    // The state's parts in the HEAD.
    let mut inline = head.clone();
    inline.insert(
        crate::engine::fold::INLINE.into(),
        AttributeValue::M(
            [
                ("LINE#a".to_string(), AttributeValue::M(Item::new())),
                (pending_b.clone(), AttributeValue::M(Item::new())),
            ]
            .into(),
        ),
    );
    assert_eq!(found(&[inline]), left);
    // The parts as items of the HEAD's epoch (another epoch's are left
    // overs, not the state).
    let part = |epoch: &str, name: &str| {
        let mut p = crate::ledger::key(&pk, crate::engine::fold::part_sk(epoch, name));
        p.insert("data".into(), AttributeValue::M(Item::new()));
        p
    };
    let ledger = vec![
        head.clone(),
        part("e1", "LINE#a"),
        part("e1", &pending_b),
        part("e0", "LINE#c"),
    ];
    assert_eq!(found(&ledger), left);
    // Without the history's state, or with a live one: members alone wait.
    assert!(found(&[]).is_empty());
    let mut live = head.clone();
    live.insert("deleted".into(), AttributeValue::Bool(false));
    assert!(found(&[live]).is_empty());
}

/// user15's #5: with `cascade: false` the root's deletion deletes its
/// entries only; its members stay in the state (and in the table), the
/// re-created root's creation lists them, and `verify` of a partition
/// whose root is gone takes only the entries left for leftovers.
#[test]
fn with_cascade_false_the_members_stay_and_the_entries_go() {
    let kept = ORDER.replace(
        "  entries: { entity: order_entry, digits: 6 }",
        "  entries: { entity: order_entry, digits: 6 }\n  cascade: false",
    );
    assert_ne!(kept, ORDER);
    let h = history(&kept);
    assert!(!h.cascades_members());
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    fold_insert(&h, &mut st, line("a", 1));
    let c = h.cascade("o1", &st);
    let sks: Vec<&str> = c.deletes.iter().map(|d| d.key.s("SK").unwrap()).collect();
    assert_eq!(sks, ["HIST#000001", "HIST#000002"]);
    let rm = change(ChangeKind::Remove, Some(order("open")), None);
    assert!(fold(&h, &mut st, rm).is_empty());
    assert!(st.deleted);
    assert_eq!(st.seq, 0);
    assert!(st.parts.contains_key("LINE#a"), "{st:?}");
    assert_eq!(
        fold_insert(&h, &mut st, order("open")),
        ["Order placed by ann"]
    );
    let snap = h.snapshot(&st);
    let Some(AttributeValue::L(lines)) = snap.get("lines") else {
        panic!("lines: {snap:?}")
    };
    assert_eq!(lines.len(), 1, "the re-created order lists its line");

    let mut entry = item(&[("PK", s("ORDER#o1")), ("SK", s("HIST#000001"))]);
    entry.insert("sequence".into(), n(1));
    let found: Vec<String> = h
        .check(&[line("a", 1), entry])
        .iter()
        .map(|f| f.what.clone())
        .collect();
    assert_eq!(
        found,
        ["PK=ORDER#o1, SK=HIST#000001 left behind by a deleted order"]
    );
    assert!(h.check(&[line("a", 1)]).is_empty());
}
