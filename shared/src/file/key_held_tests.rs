//! An optional attribute the key binds and the item does not hold reads as
//! the key holds it (import16 #1: ElectroDB keeps a padded number's part
//! only in the key; declared `position_key?: string` so that a history can
//! name its members by it, every entry ElectroDB wrote was bad input, the
//! absent attribute shadowing the key's part its check reads).

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::Val;
use super::history::FileHistory;
use super::rules::{FileRules, Parsed};
use super::test_support::{assert_says, item, model, problems};
use crate::change::{test_change as change, ChangeKind};
use crate::engine::fold::{FoldRules, FoldState};
use crate::engine::rules::Rules;
use crate::error::InputError;
use crate::item::{n, s, Item, ItemExt};

/// A playlist and its entries, as `jobstream import electrodb` writes an
/// entity whose sort key pads `position` (plus a history over them).
const PLAYLISTS: &str = r#"
jobstream: 1
name: playlists
table: { name: playlists, pk: pk, sk: sk, entity_type: __edb_e__, gsis: [{ name: gsi1, pk: gsi1pk, sk: gsi1sk }] }
entities:
  entry:
    key: { pk: "$music#playlistid_${playlistId}", sk: "$entry_1#position_${position_key}" }
    attributes:
      playlistId: string
      position: int
      position_key?: string
      trackId: string
    check:
      - { expr: "pad(position, 4) == position_key", attribute: position, message: "the key holds `position` padded to 4 digits" }
    project:
      attributes: { gsi1pk: "track#${trackId}", gsi1sk: "at#${position_key}" }
  playlist:
    key: { pk: "$music#playlistid_${playlistId}", sk: "$playlist_1" }
    attributes:
      playlistId: string
  hist:
    owner: processor
    key: { pk: "$music#playlistid_${playlistId}", sk: "hist#${sequence}" }
history:
  root: { entity: playlist, created: "created" }
  members:
    entry: { list: entries, fields: [position_key, position, trackId], added: "Added ${trackId} at ${position_key}" }
  entries: { entity: hist }
"#;

fn entry(position: i64, sk_part: &str, stored: Option<&str>) -> Item {
    let mut i = item(&[
        ("pk", s("$music#playlistid_pl1")),
        ("sk", s(format!("$entry_1#position_{sk_part}"))),
        ("__edb_e__", s("entry")),
        ("playlistId", s("pl1")),
        ("position", n(position)),
        ("trackId", s("T1")),
    ]);
    if let Some(v) = stored {
        i.insert("position_key".into(), s(v));
    }
    i
}

fn playlist() -> Item {
    item(&[
        ("pk", s("$music#playlistid_pl1")),
        ("sk", s("$playlist_1")),
        ("__edb_e__", s("playlist")),
        ("playlistId", s("pl1")),
    ])
}

#[test]
fn an_absent_optional_attribute_the_key_binds_reads_as_the_key_holds_it() {
    let m = model(PLAYLISTS);
    let Ok(Parsed::Writer(r)) = m.parse(&entry(1, "0001", None)) else {
        panic!("the entry as ElectroDB writes it is valid");
    };
    assert_eq!(r.get("position_key"), Some(&Val::Str("0001".into())));
    // What the record reads, its projection reads too.
    let p = FileRules(m)
        .projection(&entry(1, "0001", None))
        .expect("valid")
        .expect("projected");
    assert!(
        p.attrs.contains(&("gsi1sk", Some(s("at#0001")))),
        "{:?}",
        p.attrs
    );
}

#[test]
fn a_held_value_must_agree_with_the_key() {
    let m = model(PLAYLISTS);
    assert!(matches!(
        m.parse(&entry(1, "0001", Some("0001"))),
        Ok(Parsed::Writer(_))
    ));
    // A stored value the key disagrees with (the check agreeing with it)
    // is bad input: the key is not the one the attributes build.
    let Err(e) = m.parse(&entry(2, "0001", Some("0002"))) else {
        panic!("a stored value the key disagrees with is bad input");
    };
    assert!(e.to_string().contains("keys do not match"), "{e}");
    // The check still ties the key's part to `position`.
    let Err(e) = m.parse(&entry(2, "0001", None)) else {
        panic!("a key the check refuses is bad input");
    };
    assert!(matches!(e, InputError::Attribute { .. }), "{e}");
    assert!(e.to_string().contains("padded to 4 digits"), "{e}");
}

#[test]
fn a_required_attribute_the_key_binds_is_still_required() {
    let m = model(&PLAYLISTS.replace("position_key?: string", "position_key: string"));
    let Err(e) = m.parse(&entry(1, "0001", None)) else {
        panic!("a required attribute the item lacks is bad input");
    };
    assert!(e.to_string().contains("position_key"), "{e}");
}

#[test]
fn a_history_names_its_members_by_a_part_kept_only_in_the_key() {
    let h = FileHistory(model(PLAYLISTS));
    let mut st = FoldState::default();
    h.fold(
        "x",
        &mut st,
        &change(ChangeKind::Insert, None, Some(playlist())),
    )
    .unwrap();
    let out = h
        .fold(
            "x",
            &mut st,
            &change(ChangeKind::Insert, None, Some(entry(1, "0001", None))),
        )
        .unwrap();
    let e = &out.entries[0];
    assert_eq!(e.s("description").unwrap(), "Added T1 at 0001");
    let Some(AttributeValue::M(snap)) = e.get("snapshot") else {
        panic!("a snapshot");
    };
    let Some(AttributeValue::L(list)) = snap.get("entries") else {
        panic!("entries listed");
    };
    let want: Item = item(&[
        ("position_key", s("0001")),
        ("position", n(1)),
        ("trackId", s("T1")),
    ]);
    assert_eq!(list, &vec![AttributeValue::M(want)]);
}

/// Nor need it be declared: a name only the member's sort key binds
/// names it in snapshots, as the key holds it (typed by its format), once
/// listed in `fields` (or always, without `fields`).
#[test]
fn a_key_only_name_names_a_member_undeclared() {
    let undeclared = PLAYLISTS.replace("      position_key?: string\n", "");
    let snapshot_entries = |text: &str| {
        let h = FileHistory(model(text));
        let mut st = FoldState::default();
        h.fold(
            "x",
            &mut st,
            &change(ChangeKind::Insert, None, Some(playlist())),
        )
        .unwrap();
        let out = h
            .fold(
                "x",
                &mut st,
                &change(ChangeKind::Insert, None, Some(entry(1, "0001", None))),
            )
            .unwrap();
        let e = &out.entries[0];
        let Some(AttributeValue::M(snap)) = e.get("snapshot") else {
            panic!("a snapshot");
        };
        let Some(AttributeValue::L(list)) = snap.get("entries") else {
            panic!("entries listed");
        };
        let AttributeValue::M(m) = &list[0] else {
            panic!("a map");
        };
        (e.s("description").unwrap().to_string(), m.clone())
    };
    let (said, member) = snapshot_entries(&undeclared);
    assert_eq!(said, "Added T1 at 0001");
    assert_eq!(member.get("position_key"), Some(&s("0001")));
    assert_eq!(member.len(), 3, "{member:?}");
    // Without `fields`: the whole item, and the key's names.
    let all = undeclared.replace("fields: [position_key, position, trackId], ", "");
    let (_, member) = snapshot_entries(&all);
    assert_eq!(member.get("position_key"), Some(&s("0001")), "{member:?}");
    assert_eq!(member.get("trackId"), Some(&s("T1")), "{member:?}");
    // With `fields` that leave it out: said where.
    let left_out = undeclared.replace(
        "fields: [position_key, position, trackId]",
        "fields: [position, trackId]",
    );
    assert_says(
        &problems(&left_out),
        "`position_key` of its sort key `$entry_1#position_${position_key}` must be among its `fields`",
    );
}

/// A description reads a key name the item does not hold (the scope
/// allows every key name) as its key holds it, not `null`.
#[test]
fn a_description_reads_a_key_only_name_from_the_key() {
    let text = PLAYLISTS
        .replace(
            "key: { pk: \"$music#playlistid_${playlistId}\", sk: \"$playlist_1\" }",
            "key: { pk: \"$music#playlistid_${pid}\", sk: \"$playlist_1\" }",
        )
        .replace("created: \"created\"", "created: \"Created ${pid}\"");
    let h = FileHistory(model(&text));
    let out = h
        .fold(
            "x",
            &mut FoldState::default(),
            &change(ChangeKind::Insert, None, Some(playlist())),
        )
        .unwrap();
    assert_eq!(out.entries[0].s("description").unwrap(), "Created pl1");
}

/// Without `fields`, a member keyed under its owner shows the key-only
/// names of its own part of the sort key, not its aggregate's.
#[test]
fn a_member_shows_its_own_key_only_names_not_its_aggregates() {
    let text = include_str!("../../../models/examples/customer_orders.yaml")
        .replace(
            "attributes: { customerId: id, orderId: id, sku: id, qty: int }",
            "attributes: { customerId: id, qty: int }",
        )
        .replace(
            "SK: \"ORDER#${orderId}#LINE#${sku}\"",
            "SK: \"ORDER#${orderId:id}#LINE#${sku:id}\"",
        )
        .replace("fields: [sku, qty], ", "");
    let h = FileHistory(model(&text));
    let mut st = FoldState::default();
    let order = item(&[
        ("PK", s("CUST#c1")),
        ("SK", s("ORDER#o1")),
        ("type", s("order")),
        ("customerId", s("c1")),
        ("orderId", s("o1")),
        ("status", s("open")),
    ]);
    let line = item(&[
        ("PK", s("CUST#c1")),
        ("SK", s("ORDER#o1#LINE#a")),
        ("type", s("line")),
        ("customerId", s("c1")),
        ("qty", n(2)),
    ]);
    for i in [order, line] {
        h.fold(
            "CUST#c1\u{1f}o1",
            &mut st,
            &change(ChangeKind::Insert, None, Some(i)),
        )
        .unwrap();
    }
    let snap = h.snapshot(&st);
    let Some(AttributeValue::L(lines)) = snap.get("lines") else {
        panic!("lines listed: {snap:?}");
    };
    // The item as its writer wrote it, and `sku`; no `orderId`.
    let want: Item = item(&[
        ("customerId", s("c1")),
        ("qty", n(2)),
        ("sku", s("a")),
        ("type", s("line")),
    ]);
    assert_eq!(lines, &vec![AttributeValue::M(want)]);
}
