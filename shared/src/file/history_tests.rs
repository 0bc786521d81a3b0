//! The `history:` block: an order and its lines folded into numbered
//! entries with snapshots, and `check-model`'s message for each mistake.

use aws_sdk_dynamodb::types::AttributeValue;

use super::*;
use crate::change::test_change as change;
use crate::file::compile;
use crate::file::test_support::{assert_says, item, model};

/// The README's example: an order and its lines.
pub const ORDER: &str = include_str!("../../../models/examples/orders.yaml");

pub(super) fn history(text: &str) -> FileHistory {
    FileHistory(model(text))
}

pub(super) fn order(status: &str) -> Item {
    item(&[
        ("PK", s("ORDER#o1")),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s("o1")),
        ("customer", s("ann")),
        ("status", s(status)),
        ("historySequence", n(3)),
    ])
}

pub(super) fn line(sku: &str, qty: i64) -> Item {
    item(&[
        ("PK", s("ORDER#o1")),
        ("SK", s(format!("LINE#{sku}"))),
        ("type", s("line")),
        ("orderId", s("o1")),
        ("sku", s(sku)),
        ("qty", n(qty)),
    ])
}

pub(super) fn fold(h: &FileHistory, st: &mut FoldState, c: Change) -> Vec<String> {
    h.fold("o1", st, &c)
        .unwrap()
        .entries
        .iter()
        .map(|e| e.s("description").unwrap().to_string())
        .collect()
}

/// [`fold`] of `item` put new.
pub(super) fn fold_insert(h: &FileHistory, st: &mut FoldState, item: Item) -> Vec<String> {
    fold(h, st, change(ChangeKind::Insert, None, Some(item)))
}

#[test]
fn an_order_and_its_lines_fold_into_numbered_entries() {
    let h = history(ORDER);
    let mut st = FoldState::default();
    use ChangeKind::*;
    assert_eq!(
        fold(&h, &mut st, change(Insert, None, Some(order("open")))),
        ["Order placed by ann"]
    );
    assert_eq!(
        fold(&h, &mut st, change(Insert, None, Some(line("b", 1)))),
        ["Added line"]
    );
    assert_eq!(
        fold(&h, &mut st, change(Insert, None, Some(line("a", 2)))),
        ["Added line"]
    );
    assert_eq!(
        fold(
            &h,
            &mut st,
            change(Modify, Some(line("a", 2)), Some(line("a", 5)))
        ),
        ["2 -> 5 of a"]
    );
    assert!(
        fold(
            &h,
            &mut st,
            change(Modify, Some(line("a", 5)), Some(line("a", 5)))
        )
        .is_empty(),
        "nothing of the line changed"
    );
    assert_eq!(
        fold(
            &h,
            &mut st,
            change(Modify, Some(order("open")), Some(order("paid")))
        ),
        ["Updated status"],
        "without labels, the names of the attributes that changed"
    );
    let mut mirrored = order("paid");
    mirrored.insert("historySequence".into(), n(9));
    assert!(
        fold(
            &h,
            &mut st,
            change(Modify, Some(order("paid")), Some(mirrored))
        )
        .is_empty(),
        "the mirror is the processor's: no entry"
    );
    let out = h
        .fold("o1", &mut st, &change(Remove, Some(line("b", 1)), None))
        .unwrap();
    let e = &out.entries[0];
    assert_eq!(e.s("description").unwrap(), "Removed line");
    assert_eq!(e.s("SK").unwrap(), "HIST#000006");
    assert_eq!(e.s("PK").unwrap(), "ORDER#o1");
    assert_eq!(e.s("orderId").unwrap(), "o1");
    assert_eq!(e.i64("sequence").unwrap(), 6);
    assert_eq!(e.s("createdAt").unwrap(), "2023-11-14T22:13:20.000Z");
    assert_eq!(
        e.s("id").unwrap(),
        Uuid::new_v5(&ENTRY_ID_NAMESPACE, b"ev").to_string()
    );
    assert_eq!(
        e.s("type").unwrap(),
        "order_entry",
        "writers' items carry theirs"
    );
    assert_eq!(e.len(), 9);
    let AttributeValue::M(snap) = &e["snapshot"] else {
        panic!("a map")
    };
    assert_eq!(snap["status"], s("paid"));
    assert_eq!(snap["type"], s("order"));
    for gone in ["PK", "SK", "historySequence"] {
        assert!(!snap.contains_key(gone), "{gone}");
    }
    assert_eq!(
        snap["lines"],
        AttributeValue::L(vec![AttributeValue::M(item(&[
            ("sku", s("a")),
            ("qty", n(5))
        ]))])
    );
    assert_eq!(st.seq, 6);
}

#[test]
fn members_are_listed_in_their_order_with_absent_fields_null() {
    let text = ORDER.replace(
        "line: { list: lines, fields: [sku, qty],",
        "line: { list: lines, fields: [sku, qty, note], order: [qty, sku],",
    );
    let text = text.replace("qty: int }", "qty: int, note: string? }");
    let h = history(&text);
    let mut st = FoldState::default();
    fold_insert(&h, &mut st, order("open"));
    for (sku, qty) in [("c", 10), ("b", 2), ("a", 2)] {
        fold_insert(&h, &mut st, line(sku, qty));
    }
    let AttributeValue::L(lines) = &h.snapshot(&st)["lines"] else {
        panic!("a list")
    };
    let skus: Vec<&str> = lines
        .iter()
        .map(|l| match l {
            AttributeValue::M(m) => m.s("sku").unwrap(),
            _ => "",
        })
        .collect();
    assert_eq!(skus, ["a", "b", "c"], "by qty (a number), then sku");
    let AttributeValue::M(first) = &lines[0] else {
        panic!("a map")
    };
    assert_eq!(first["note"], AttributeValue::Null(true));
}

#[test]
fn adoption_reads_the_partition_and_its_entry_is_recognised_on_the_stream() {
    let h = history(ORDER);
    let mut old_entry = h.entry_key("o1", 2);
    old_entry.insert("sequence".into(), n(2));
    let partition = vec![order("open"), line("a", 1), old_entry];
    let at = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
    let Adoption::Entry { state, entry, id } = h.adopt("o1", &partition, at, "tok") else {
        panic!("the root is there")
    };
    assert_eq!(state.seq, 3, "after the entries already there");
    assert_eq!(entry.s("SK").unwrap(), "HIST#000003");
    assert_eq!(entry.s("description").unwrap(), "Imported");
    assert_eq!(entry.s("id").unwrap(), id);
    let rec = h
        .adoption_record(&change(ChangeKind::Insert, None, Some(entry.clone())))
        .expect("an adoption entry");
    assert_eq!((rec.aggregate.as_str(), rec.sequence), ("o1", 3));
    assert_eq!(
        h.aggregate(&change(ChangeKind::Insert, None, Some(entry.clone())))
            .unwrap(),
        None
    );
    assert_eq!(
        h.aggregate(&change(ChangeKind::Insert, None, Some(line("a", 1))))
            .unwrap(),
        Some("o1".to_string())
    );
    assert_eq!(h.restate(&entry, &state), Restated::Same);
    // A line added between the read and the entry's position.
    let mut later = state.clone();
    h.absorb(
        &mut later,
        &change(ChangeKind::Insert, None, Some(line("b", 4))),
    )
    .unwrap();
    let Restated::Rewrite(fixed) = h.restate(&entry, &later) else {
        panic!("the snapshot changes")
    };
    let AttributeValue::M(snap) = &fixed["snapshot"] else {
        panic!("a map")
    };
    assert!(matches!(&snap["lines"], AttributeValue::L(l) if l.len() == 2));
    // The same correction through a part.
    let part = later.parts.get("LINE#b").cloned();
    assert_eq!(
        h.correct_entry(&entry, "LINE#b", part.as_ref()),
        Some(fixed.clone())
    );
    assert_eq!(h.correct_entry(&fixed, "LINE#b", part.as_ref()), None);
    let gone = FoldState::default();
    assert_eq!(h.restate(&entry, &gone), Restated::RootGone);
    assert!(matches!(
        h.adopt("o1", &[line("a", 1)], at, "t"),
        Adoption::Rootless(_)
    ));
}

#[test]
fn bad_items_are_input_errors_and_an_oversized_snapshot_is_omitted_with_a_notice() {
    let h = history(ORDER);
    let mut st = FoldState::default();
    let mut bad = order("open");
    bad.insert("status".into(), s("lost"));
    let err = h
        .fold("o1", &mut st, &change(ChangeKind::Insert, None, Some(bad)))
        .unwrap_err();
    assert!(err.to_string().contains("status"), "{err}");
    assert!(!err.to_string().contains("lost"), "never the value: {err}");
    fold_insert(&h, &mut st, order("open"));
    for i in 0..210 {
        let mut l = line(&format!("s{i:03}"), 1);
        l.insert("sku".into(), s(format!("s{i:03}{}", "x".repeat(2000))));
        st.parts.insert(
            format!("LINE#s{i:03}"),
            h.part(&h.spec().members[0].shape, &l),
        );
    }
    let out = h
        .fold(
            "o1",
            &mut st,
            &change(ChangeKind::Insert, None, Some(line("z", 1))),
        )
        .unwrap();
    assert_eq!(out.notices.len(), 1);
    assert_eq!(out.notices[0].0, names::SNAPSHOT_TOO_LARGE);
    let e = &out.entries[0];
    assert!(!e.contains_key("snapshot"));
    assert!(e.s("snapshotOmitted").unwrap().contains("400 KB"));
}

#[test]
fn the_filter_reads_roots_members_and_adoption_entries() {
    let h = history(ORDER);
    let f = serde_json::to_value(&h.spec().filter).unwrap();
    assert_eq!(
        f,
        serde_json::json!([
            { "dynamodb": { "Keys": { "SK": { "S": [{ "prefix": "ORDER" }, { "prefix": "LINE#" }] } } } },
            { "eventName": ["INSERT"], "dynamodb": {
                "Keys": { "SK": { "S": [{ "prefix": "HIST#" }] } },
                "NewImage": { "description": { "S": ["Imported"] } } } }
        ])
    );
    assert_eq!(h.spec().processor, "history");
}

#[test]
fn the_order_example_and_every_shipped_history_compile() {
    compile(ORDER, "t").unwrap_or_else(|p| panic!("{p:#?}"));
    let with_history = crate::file::SHIPPED
        .iter()
        .filter(|(_, text)| text.contains("\nhistory:"))
        .map(|(path, text)| {
            let m = compile(text, "t").unwrap_or_else(|p| panic!("{path}: {p:#?}"));
            assert!(m.history.is_some(), "{path}");
        })
        .count();
    assert!(with_history >= 1, "a shipped model keeps a history");
}

/// The root's part in the fold state (the ledger) is named by its sort
/// key's literal prefix, as the compiled folds named it (a stack moved from
/// one to a file needs no migration); `@root` when there is none.
#[test]
fn the_roots_part_is_named_by_its_sort_key_prefix() {
    use crate::file::history::root_part;
    assert_eq!(root_part(Some("APP#")), "APP");
    assert_eq!(root_part(Some("ORDER#")), "ORDER");
    assert_eq!(root_part(Some("#METADATA")), "#METADATA");
    assert_eq!(root_part(Some("#")), "@root");
    assert_eq!(root_part(None), "@root");
}

#[test]
fn verify_finds_gaps_a_lagging_mirror_repeats_a_stale_snapshot_and_orphans() {
    let h = history(ORDER);
    let mut st = FoldState::default();
    let mut entries = Vec::new();
    for (i, c) in [
        change(ChangeKind::Insert, None, Some(order("open"))),
        change(ChangeKind::Insert, None, Some(line("a", 1))),
        change(ChangeKind::Modify, Some(order("open")), Some(order("paid"))),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = c;
        c.event_id = format!("ev{i}");
        entries.extend(h.fold("o1", &mut st, &c).unwrap().entries);
    }
    let mut root = order("paid");
    root.insert("historySequence".into(), n(3));
    let mut items = vec![root.clone(), line("a", 1)];
    items.extend(entries.clone());
    assert!(h.check(&items).is_empty(), "{:#?}", h.check(&items));
    let what = |items: &[Item]| -> Vec<String> {
        h.check(items)
            .iter()
            .map(|f| format!("{} {:?} {} {}", f.kind, f.drift, f.what, f.repair.is_some()))
            .collect()
    };
    // Entry 2 lost, the mirror behind.
    let mut behind = root.clone();
    behind.insert("historySequence".into(), n(2));
    let lost = vec![behind, line("a", 1), entries[0].clone(), entries[2].clone()];
    assert_eq!(
        what(&lost),
        [
            "history-sequence Wrong ORDER#o1: historySequence is 2, expected 3 true",
            "history-sequence Missing ORDER#o1: entry 2 of 1..=3 is missing true",
        ]
    );
    // Beside the history's state (its HEAD in the ledger): an entry past
    // it and the mirror is a stray no change produced, one extra entry
    // (user10's #7: 96 "missing" ones and a mirror raised to it); one past
    // the mirror alone is the fold's, its mirror lagging.
    let head = |seq: i64| -> Vec<Item> {
        let mut head = crate::ledger::key(crate::ledger::state_pk("history", "o1"), "HEAD");
        head.insert("seq".into(), n(seq));
        vec![head]
    };
    let with_ledger = |items: &[Item], ledger: &[Item]| -> Vec<String> {
        h.check_tallied(items, ledger)
            .1
            .iter()
            .map(|f| format!("{} {:?} {} {}", f.kind, f.drift, f.what, f.repair.is_some()))
            .collect()
    };
    let mut stray = entries[0].clone();
    stray.insert("SK".into(), s("HIST#000099"));
    stray.insert("sequence".into(), n(99));
    stray.insert("id".into(), s("forged"));
    let mut strayed = items.clone();
    strayed.push(stray);
    assert_eq!(
        with_ledger(&strayed, &head(3)),
        ["history-sequence Extra ORDER#o1: entry 99 (PK=ORDER#o1, SK=HIST#000099) is past the last entry the history wrote (3: its state and historySequence): no change produced it, repair deletes it true"]
    );
    // Every repair printed by what it does and the keys it touches (a
    // dry run printed Rust's Debug of whole items).
    let told: Vec<String> = [&lost, &strayed]
        .iter()
        .flat_map(|items| h.check_tallied(items, &head(3)).1)
        .filter_map(|f| f.repair.map(|r| r.describe(&["PK", "SK"])))
        .collect();
    assert_eq!(
        told,
        [
            "raise historySequence of PK=ORDER#o1, SK=ORDER to 3 (never lowers it)",
            "put a placeholder for the lost entry PK=ORDER#o1, SK=HIST#000002 while it is absent and historySequence of PK=ORDER#o1, SK=ORDER has reached 2",
            "delete the stray entry PK=ORDER#o1, SK=HIST#000099 (no change produced it) while it is the item read and neither historySequence of PK=ORDER#o1, SK=ORDER nor the history's state has reached 99",
        ]
    );
    let mut lagging = items.clone();
    lagging[0].insert("historySequence".into(), n(2));
    assert_eq!(
        with_ledger(&lagging, &head(3)),
        ["history-sequence Wrong ORDER#o1: historySequence is 2, expected 3 true"]
    );
    // Entry 1 written again as entry 4, and the line changed since.
    let mut again = entries[0].clone();
    again.insert("SK".into(), s("HIST#000004"));
    again.insert("sequence".into(), n(4));
    let mut root4 = root.clone();
    root4.insert("historySequence".into(), n(4));
    let mut repeated = vec![root4, line("a", 9)];
    repeated.extend(entries.clone());
    repeated.push(again);
    assert_eq!(
        what(&repeated),
        [
            "history-chain Wrong ORDER#o1: entry 4: repeats the change of entry 1 false",
            "history-snapshot Wrong ORDER#o1: the latest snapshot (entry 4) differs from the current state in lines, status (not repairable: history is append-only; the next change's entry shows the current state; verify compares no earlier snapshot, and no description) false",
        ]
    );
    // The root or a line bad input now: its snapshot is its last valid
    // state, and the item is bad input, not drift (user7's V02: verify
    // could never be clean while a root was bad input).
    let mut bad_line = line("a", 1);
    bad_line.insert("qty".into(), s("many"));
    // A bad root's mirror is not judged either (user7's V04): behind the
    // entries (the writer's put dropped it) or past them, its repair would
    // write onto the rejected item; the fold sets it once the root is valid.
    let mut lagging = order("lost");
    lagging.remove("historySequence");
    let mut past = order("lost");
    past.insert("historySequence".into(), n(5));
    for bad in [
        vec![order("lost"), line("a", 1)],
        vec![lagging, line("a", 1)],
        vec![past, line("a", 1)],
        vec![root.clone(), bad_line],
    ] {
        let mut items = bad;
        items.extend(entries.clone());
        assert_eq!(what(&items), Vec::<String>::new());
    }
    // The root gone: what is left of its partition.
    let orphans = vec![line("a", 1), entries[0].clone()];
    assert_eq!(
        what(&orphans),
        [
            "orphans Extra PK=ORDER#o1, SK=LINE#a left behind by a deleted order true",
            "orphans Extra PK=ORDER#o1, SK=HIST#000001 left behind by a deleted order true",
        ]
    );
    let told: Vec<String> = h
        .check(&orphans)
        .into_iter()
        .filter_map(|f| f.repair.map(|r| r.describe(&["PK", "SK"])))
        .collect();
    assert_eq!(
        told[0],
        "delete PK=ORDER#o1, SK=LINE#a, left behind by a deleted root, while PK=ORDER#o1, SK=ORDER is absent"
    );
}

/// A root's `compute:` values (and the job's `computeSequence`) and counter
/// sums are the processor's, like its projection: never in a snapshot, and
/// a change of them alone writes no entry. They were in `verify`'s "current state" (unrepairable drift on
/// every order) while the fold's snapshots, taken before the job wrote
/// them, had none.
#[test]
fn a_roots_computed_values_and_sums_are_never_in_its_snapshot() {
    let text = ORDER.replace(
        "    attributes: { orderId: string, customer: string, status: [open, paid, shipped] }\n",
        "    attributes: { orderId: string, customer: string, status: [open, paid, shipped] }\n    compute:\n      over: { entity: line, as: items }\n      values: { total: \"sum(items.map(l, l.qty))\" }\n      queue: totals\n    counter: { attributes: [notes], created_by: writer }\n  note:\n    key: { PK: \"NOTE#${noteId}\", SK: \"N\" }\n    attributes: { orderId: string }\n    count:\n      - { counter: order, with: { orderId: orderId }, add: { notes: 1 } }\n",
    );
    let h = history(&text);
    let mut st = FoldState::default();
    let placed = order("open");
    fold_insert(&h, &mut st, placed.clone());
    let mut computed = placed.clone();
    computed.insert("total".into(), n(12));
    computed.insert("notes".into(), n(2));
    computed.insert("computeSequence".into(), n(1));
    let said = fold(
        &h,
        &mut st,
        change(ChangeKind::Modify, Some(placed), Some(computed)),
    );
    assert!(said.is_empty(), "the processor's values alone: {said:?}");
    let snap = h.snapshot(&st);
    assert!(
        !snap.contains_key("total")
            && !snap.contains_key("notes")
            && !snap.contains_key("computeSequence"),
        "{snap:?}"
    );
    assert_eq!(snap["status"], s("open"));
}

/// The mirror's guard (U03) is the root's writer attributes as folded:
/// not its keys, its projection or the mirror, which processors write
/// (the derive processor's projection never blocks the mirror).
#[test]
fn the_mirror_is_guarded_by_the_roots_writer_attributes_as_folded() {
    let projected = ORDER.replace(
        "table: { name: shop, pk: PK, sk: SK }",
        "table: { name: shop, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }] }",
    );
    let projected = projected.replace(
        "    attributes: { orderId: string, customer: string, status: [open, paid, shipped] }\n",
        "    attributes: { orderId: string, customer: string, status: [open, paid, shipped] }\n    project:\n      attributes: { GSI1PK: \"STATUS#${status}\", GSI1SK: \"${orderId}\" }\n",
    );
    assert_ne!(projected, ORDER);
    let h = history(&projected);
    let mut st = FoldState::default();
    assert_eq!(h.root_guard(&st), None, "no root folded yet");
    let mut root = order("open");
    root.insert("GSI1PK".into(), s("STATUS#open"));
    root.insert("GSI1SK".into(), s("o1"));
    fold_insert(&h, &mut st, root);
    let guard = h.root_guard(&st).expect("the root folded");
    let mut names: Vec<&str> = guard.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["customer", "orderId", "status", "type"]);
    assert_eq!(guard["status"], s("open"));
    fold_insert(&h, &mut st, line("a", 1));
    assert_eq!(h.root_guard(&st).expect("kept")["status"], s("open"));
    fold(
        &h,
        &mut st,
        change(ChangeKind::Remove, Some(order("paid")), None),
    );
    assert_eq!(h.root_guard(&st), None, "the root deleted");
}

/// user7's V04: nothing is written onto a root the rules reject. Its
/// mirror's guard holds on no bad item: the declared attributes the root
/// lacked are guarded absent (a put adding an optional `note` of the wrong
/// type changes nothing the root had), and while the root is bad input
/// (`rejected`, which the processor sets on its bad record) there is no
/// guard at all: no mirror. A change of processor-owned attributes alone
/// (a mirror or projection written onto it by a race) is not folded or
/// counted again; valid again as the history last showed it, no entry.
#[test]
fn a_root_that_is_bad_input_gets_no_mirror_and_is_not_counted_twice() {
    let text = ORDER.replace(
        "status: [open, paid, shipped] }",
        "status: [open, paid, shipped], note: string? }",
    );
    let h = history(&text);
    let mut st = FoldState::default();
    use ChangeKind::*;
    fold(&h, &mut st, change(Insert, None, Some(order("open"))));
    let guard = h.root_guard(&st).expect("the root folded");
    assert_eq!(
        guard.get("note"),
        Some(&AttributeValue::Null(true)),
        "{guard:?}"
    );
    assert_eq!(guard["status"], s("open"));
    let mut bad = order("open");
    bad.insert("note".into(), n(1));
    let (cond, names, values) = crate::engine::fold::unchanged_condition(&guard);
    assert!(cond.contains("attribute_not_exists"), "{cond}");
    assert!(names.iter().any(|(_, a)| a == "note"), "{names:?}");
    assert!(!values.is_empty());
    // The bad record: the rules refuse it, the processor marks the root.
    let refused = h.fold(
        "o1",
        &mut st.clone(),
        &change(Modify, Some(order("open")), Some(bad.clone())),
    );
    assert!(refused.is_err());
    st.rejected = true;
    assert_eq!(h.root_guard(&st), None, "no mirror onto a bad root");
    // A mirror written onto it anyway: nothing folded, nothing refused.
    let mut mirrored = bad.clone();
    mirrored.insert("historySequence".into(), n(9));
    let out = h
        .fold(
            "o1",
            &mut st,
            &change(Modify, Some(bad.clone()), Some(mirrored.clone())),
        )
        .expect("not bad input again");
    assert!(out.entries.is_empty());
    assert!(st.rejected, "still bad");
    // Valid again as it was: no entry, and the mirror may be written.
    let out = h
        .fold(
            "o1",
            &mut st,
            &change(Modify, Some(mirrored), Some(order("open"))),
        )
        .expect("valid");
    assert!(out.entries.is_empty(), "{:?}", out.entries);
    assert!(!st.rejected);
    assert_eq!(h.root_guard(&st).expect("valid")["status"], s("open"));
    // Bad again, then valid with a change: an entry.
    st.rejected = true;
    assert_eq!(
        fold(&h, &mut st, change(Modify, Some(bad), Some(order("paid")))),
        ["Updated status"]
    );
    assert!(!st.rejected);
}

/// `owner: other` declares another writer's key space by its key only
/// (bad9): a history cannot fold such an entity as its root or a member
/// (it has no fields to snapshot). The root used to compile; a member was
/// refused for an undeclared attribute, which it cannot declare. Each is
/// one problem naming the entity and the history, saying why.
#[test]
fn a_key_space_another_writer_owns_is_neither_a_historys_root_nor_a_member() {
    let foreign = |which: &str| {
        let (from, to) = match which {
            "order" => (
                "  order:\n    key: { PK: \"ORDER#${orderId}\", SK: ORDER }\n    attributes: { orderId: string, customer: string, status: [open, paid, shipped] }\n",
                "  order:\n    owner: other\n    key: { PK: \"ORDER#${orderId}\", SK: ORDER }\n",
            ),
            _ => (
                "  line:\n    key: { PK: \"ORDER#${orderId}\", SK: \"LINE#${sku}\" }\n    attributes: { orderId: string, sku: string, qty: int }\n",
                "  line:\n    owner: other\n    key: { PK: \"ORDER#${orderId}\", SK: \"LINE#${sku}\" }\n",
            ),
        };
        assert!(ORDER.contains(from), "{which}");
        ORDER.replace(from, to)
    };
    let root = foreign("order").replace(
        "root: { entity: order, created: \"Order placed by ${customer}\" }",
        "root: { entity: order, created: \"Order placed\" }",
    );
    let p = compile(&root, "t").expect_err("a foreign root");
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_says(
        &p,
        "history: the root `order` is `owner: other` (a key space another writer owns, declared by its key only): a history folds its root's fields into snapshots, and `order` has none",
    );
    let member = foreign("line").replace(
        "line: { list: lines, fields: [sku, qty], updated: \"${old.qty} -> ${new.qty} of ${sku}\" }",
        "line: { list: lines }",
    );
    let p = compile(&member, "t").expect_err("a foreign member");
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_says(
        &p,
        "history: member `line` is `owner: other` (a key space another writer owns, declared by its key only): a history folds its members' fields into snapshots, and `line` has none",
    );
}
