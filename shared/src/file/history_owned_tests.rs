//! A history whose root is keyed under its owner (an order under its
//! customer): the aggregate is the owner and the root's id, a member
//! waiting for its root is no orphan, and templates told apart only by
//! their values' types.

use aws_sdk_dynamodb::types::AttributeValue;

use super::tests::history;
use super::*;
use crate::change::test_change as change;
use crate::file::compile;
use crate::file::test_support::{assert_says, item};

/// An order keyed under its customer (models/examples/customer_orders.yaml).
const OWNED: &str = include_str!("../../../models/examples/customer_orders.yaml");

fn owned_order(o: &str, status: &str) -> Item {
    item(&[
        ("PK", s("CUST#c1")),
        ("SK", s(format!("ORDER#{o}"))),
        ("type", s("order")),
        ("customerId", s("c1")),
        ("orderId", s(o)),
        ("status", s(status)),
    ])
}

fn owned_line(o: &str, sku: &str, qty: i64) -> Item {
    item(&[
        ("PK", s("CUST#c1")),
        ("SK", s(format!("ORDER#{o}#LINE#{sku}"))),
        ("type", s("line")),
        ("customerId", s("c1")),
        ("orderId", s(o)),
        ("sku", s(sku)),
        ("qty", n(qty)),
    ])
}

/// A history root keyed under its owner: the aggregate is (customer,
/// order), its items those whose sort keys start with the order's, its
/// entries numbered under it; `o10`'s items (under the prefix `ORDER#o1`)
/// are not `o1`'s.
#[test]
fn an_order_keyed_under_its_customer_folds_its_own_lines_into_its_own_entries() {
    let h = history(OWNED);
    let agg = r#"["c1","o1"]"#;
    use ChangeKind::*;
    let of = |i: Item| h.aggregate(&change(Insert, None, Some(i))).unwrap();
    assert_eq!(of(owned_order("o1", "open")).as_deref(), Some(agg));
    assert_eq!(of(owned_line("o1", "a", 1)).as_deref(), Some(agg));
    assert_eq!(
        of(owned_line("o10", "a", 1)).as_deref(),
        Some(r#"["c1","o10"]"#)
    );
    assert!(h.starts_aggregate(&change(Insert, None, Some(owned_order("o1", "open")))));
    assert!(!h.starts_aggregate(&change(Insert, None, Some(owned_line("o1", "a", 1)))));
    let mut st = FoldState::default();
    let mut entries = Vec::new();
    for (i, c) in [
        change(Insert, None, Some(owned_order("o1", "open"))),
        change(Insert, None, Some(owned_line("o1", "a", 2))),
        change(
            Modify,
            Some(owned_line("o1", "a", 2)),
            Some(owned_line("o1", "a", 5)),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = c;
        c.event_id = format!("ev{i}");
        entries.extend(h.fold(agg, &mut st, &c).unwrap().entries);
    }
    let said: Vec<&str> = entries
        .iter()
        .map(|e| e.s("description").unwrap())
        .collect();
    assert_eq!(said, ["Order o1 placed", "Added line", "2 -> 5 of a"]);
    let e = &entries[2];
    assert_eq!(e.s("PK").unwrap(), "CUST#c1");
    assert_eq!(e.s("SK").unwrap(), "ORDER#o1#HIST#000003");
    assert_eq!(e.s("customerId").unwrap(), "c1");
    assert_eq!(e.s("orderId").unwrap(), "o1");
    let AttributeValue::M(snap) = &e["snapshot"] else {
        panic!("a map")
    };
    assert_eq!(
        snap["lines"],
        AttributeValue::L(vec![AttributeValue::M(item(&[
            ("sku", s("a")),
            ("qty", n(5))
        ]))])
    );
    assert_eq!(
        h.aggregate(&change(Insert, None, Some(e.clone()))).unwrap(),
        None,
        "an entry is the processor's"
    );
    // Where its items are, and which are its.
    assert_eq!(h.partition(agg), ("PK", "CUST#c1".to_string()));
    assert_eq!(h.sort_prefix(agg), Some(("SK", "ORDER#o1".to_string())));
    assert!(h.is_of(agg, &owned_line("o1", "a", 1)));
    assert!(h.is_of(agg, e));
    assert!(!h.is_of(agg, &owned_line("o10", "a", 1)));
    assert!(!h.is_of(agg, &owned_order("o10", "open")));
    let (key, _) = h.sequence_mirror(agg).unwrap();
    assert_eq!(key, item(&[("PK", s("CUST#c1")), ("SK", s("ORDER#o1"))]));
    // The cascade deletes its line and entries, nothing of `o10`.
    let c = h.cascade(agg, &st);
    let sks: Vec<&str> = c.deletes.iter().map(|d| d.key.s("SK").unwrap()).collect();
    assert_eq!(
        sks,
        [
            "ORDER#o1#LINE#a",
            "ORDER#o1#HIST#000001",
            "ORDER#o1#HIST#000002",
            "ORDER#o1#HIST#000003"
        ]
    );
    // Adoption of the order with `o10`'s items filtered out by is_of.
    let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    let partition: Vec<Item> = [
        owned_order("o1", "open"),
        owned_line("o1", "a", 1),
        owned_order("o10", "paid"),
        owned_line("o10", "b", 7),
    ]
    .into_iter()
    .filter(|i| h.is_of(agg, i))
    .collect();
    let Adoption::Entry { entry, .. } = h.adopt(agg, &partition, at, "tok") else {
        panic!("the root is there")
    };
    assert_eq!(entry.s("SK").unwrap(), "ORDER#o1#HIST#000001");
    let rec = h
        .adoption_record(&change(Insert, None, Some(entry.clone())))
        .expect("an adoption entry");
    assert_eq!(rec.aggregate, agg);
    // A snapshot corrected through a part keeps the aggregate's names.
    let part = owned_line("o1", "b", 3);
    let fixed = h
        .correct_entry(
            &entry,
            "ORDER#o1#LINE#b",
            Some(&h.part(&h.spec().members[0].shape, &part)),
        )
        .expect("a part more");
    let AttributeValue::M(snap) = &fixed["snapshot"] else {
        panic!("a map")
    };
    assert!(matches!(&snap["lines"], AttributeValue::L(l) if l.len() == 2));
    // verify: two orders of one customer, each checked on its own.
    let mut root = owned_order("o1", "open");
    root.insert("historySequence".into(), n(3));
    let mut items = vec![root, owned_line("o1", "a", 5), owned_order("o10", "paid")];
    items.extend(entries.clone());
    let found: Vec<String> = h.check(&items).iter().map(|f| f.what.clone()).collect();
    assert!(found.is_empty(), "o10 has no history yet: {found:#?}");
    let lost: Vec<Item> = items
        .iter()
        .filter(|i| i.s("SK").unwrap() != "ORDER#o1#HIST#000002")
        .cloned()
        .collect();
    let found: Vec<String> = h.check(&lost).iter().map(|f| f.what.clone()).collect();
    assert_eq!(found, ["CUST#c1/ORDER#o1: entry 2 of 1..=3 is missing"]);
    let orphans = vec![
        owned_line("o1", "a", 5),
        entries[0].clone(),
        owned_order("o10", "paid"),
    ];
    let found: Vec<String> = h.check(&orphans).iter().map(|f| f.what.clone()).collect();
    assert_eq!(
        found,
        [
            "PK=CUST#c1, SK=ORDER#o1#LINE#a left behind by a deleted order",
            "PK=CUST#c1, SK=ORDER#o1#HIST#000001 left behind by a deleted order",
        ]
    );
}

/// A member whose root is absent and who has no entry beside it waits for
/// its root (written before it, or while it was deleted: the root's next
/// creation takes it in), so it is not drift and `--repair` never deletes
/// it (user finding U03: a customer's order line was deleted by repair);
/// with an entry left behind, the root existed and its cascade left both.
#[test]
fn a_member_waiting_for_its_root_is_no_orphan() {
    let h = history(OWNED);
    let waiting = vec![owned_line("o1", "a", 5), owned_line("o1", "b", 2)];
    let found: Vec<String> = h.check(&waiting).iter().map(|f| f.what.clone()).collect();
    assert!(found.is_empty(), "{found:#?}");
}

/// Templates told apart only by their values' types compile (and a key is
/// its entity whose values fit); the same templates over plain strings
/// overlap, and are refused.
#[test]
fn an_order_and_its_lines_are_told_apart_by_their_ids_types() {
    let h = history(OWNED);
    let m = h.0;
    let (e, _) = m.classify("CUST#c1", "ORDER#o1#LINE#a").unwrap();
    assert_eq!(e.name, "line");
    let (e, _) = m.classify("CUST#c1", "ORDER#o1").unwrap();
    assert_eq!(e.name, "order");
    let (e, _) = m.classify("CUST#c1", "ORDER#o1#HIST#000001").unwrap();
    assert_eq!(e.name, "order_entry");
    // A key no entity's values fit: the first match, whose parse says why.
    let (e, _) = m.classify("CUST#c1", "ORDER#o 1").unwrap();
    assert_eq!(e.name, "order");
    let plain = OWNED.replace(
        "attributes: { customerId: id, orderId: id, status",
        "attributes: { customerId: id, orderId: string, status",
    );
    let p = compile(&plain, "t").expect_err("overlaps");
    assert_says(&p, "`order` (line 21) and `line` both match the key");
}

/// Where writers' items carry their entity's name (`writer_type: checked`,
/// the default), entries carry their own (`type: order_entry`), so a reader
/// that selects items by it (OneTable's `find`, ElectroDB's entity
/// filter) never reads an entry as an order (import13's #1: an order's
/// `find` by its sort key prefix returned its entries as orders). Where
/// writers' items carry none (`writer_type: free`: the tracker, SPEC §3's
/// exact entry), neither do entries.
#[test]
fn entries_carry_their_entity_type_where_writers_items_carry_theirs() {
    let entries = |h: &FileHistory, agg: &str, root: Item| {
        let mut st = FoldState::default();
        h.fold(agg, &mut st, &change(ChangeKind::Insert, None, Some(root)))
            .unwrap()
            .entries
    };
    let checked = history(OWNED);
    let e = entries(&checked, r#"["c1","o1"]"#, owned_order("o1", "open"));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].s("type").ok(), Some("order_entry"), "{e:?}");

    let free = history(include_str!("../../../models/tracker.yaml"));
    let app = item(&[
        ("PK", s("APP#a1")),
        ("SK", s("APP#a1")),
        ("id", s("a1")),
        ("companyName", s("Acme")),
        ("positionTitle", s("Engineer")),
        ("status", s("applied")),
        ("isArchived", AttributeValue::Bool(false)),
        ("createdAt", s("2026-11-28T00:00:00Z")),
        ("updatedAt", s("2026-11-28T00:00:00Z")),
    ]);
    let e = entries(&free, "a1", app);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(!e[0].contains_key("type"), "{e:?}");
}

/// Ops16 #4: a file that does not know an attribute another file's
/// processors write onto the root (index keys a newer file projects, in a
/// rolling deploy's mixed window) folds its write as the root's change;
/// a root that lists its `fields:` records changes of those alone. (What
/// the README's rolling-deploy advice rests on.)
#[test]
fn an_attribute_the_file_does_not_know_is_a_change_unless_the_root_lists_fields() {
    let with_fields = OWNED.replace(
        "root: { entity: order, created:",
        "root: { entity: order, fields: [customerId, orderId, status], created:",
    );
    assert_ne!(with_fields, OWNED);
    let agg = r#"["c1","o1"]"#;
    let mut projected = owned_order("o1", "open");
    projected.insert("GSI2PK".into(), s("CS#c1"));
    projected.insert("GSI2SK".into(), s("open#o1"));
    for (text, want) in [
        (OWNED, vec!["Order o1 placed", "Updated GSI2PK, GSI2SK"]),
        (with_fields.as_str(), vec!["Order o1 placed"]),
    ] {
        let h = history(text);
        let mut st = FoldState::default();
        let mut said = Vec::new();
        for (i, mut c) in [
            change(ChangeKind::Insert, None, Some(owned_order("o1", "open"))),
            change(
                ChangeKind::Modify,
                Some(owned_order("o1", "open")),
                Some(projected.clone()),
            ),
        ]
        .into_iter()
        .enumerate()
        {
            c.event_id = format!("ev{i}");
            for e in h.fold(agg, &mut st, &c).unwrap().entries {
                said.push(e.s("description").unwrap().to_string());
            }
        }
        assert_eq!(said, want);
    }
}
