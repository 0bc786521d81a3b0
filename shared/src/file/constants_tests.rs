//! A processor entity's required one-value enum (`__edb_v__: ["1"]`) is a
//! constant every item the processors make of it carries (import16 #4:
//! history entries in an ElectroDB table carried `__edb_e__` but no
//! `__edb_v__`, so ElectroDB's ownership check hid them, and nothing in the
//! file could stamp it: the entries entity takes no `project`, and a
//! declared attribute was never filled).

use aws_sdk_dynamodb::types::AttributeValue;

use super::history::FileHistory;
use super::rules::FileRules;
use super::test_support::{item, model};
use crate::change::{test_change as change, ChangeKind};
use crate::engine::fold::{FoldRules, FoldState};
use crate::engine::rules::Rules;
use crate::item::{s, Item};

const PLAYLISTS: &str = r#"
jobstream: 1
name: playlists
table: { name: playlists, pk: pk, sk: sk, entity_type: __edb_e__ }
entities:
  playlist:
    key: { pk: "$music#playlistid_${playlistId}", sk: "$playlist_1" }
    attributes:
      playlistId: string
      __edb_v__: ["1"]
    derive:
      - { entity: playlistCopy, with: { playlistId: playlistId } }
    count:
      - { counter: playlistCount, with: {}, add: { playlists: 1 } }
  playlistCopy:
    owner: processor
    key: { pk: "copy#${playlistId}", sk: "$copy_1" }
    attributes:
      __edb_v__: ["1"]
      note?: ["x"]
  playlistCount:
    owner: processor
    key: { pk: "counts", sk: "$playlists_1" }
    attributes:
      __edb_v__: ["1"]
    counter: { attributes: [playlists], created_by: processor }
  playlistHist:
    owner: processor
    key: { pk: "$music#playlistid_${playlistId}", sk: "$playlistitems#hist#${sequence}" }
    attributes:
      __edb_v__: ["1"]
history:
  root: { entity: playlist, created: "created" }
  entries: { entity: playlistHist, digits: 6 }
"#;

fn playlist() -> Item {
    item(&[
        ("pk", s("$music#playlistid_pl1")),
        ("sk", s("$playlist_1")),
        ("__edb_e__", s("playlist")),
        ("__edb_v__", s("1")),
        ("playlistId", s("pl1")),
    ])
}

#[test]
fn a_history_entry_carries_its_entities_constants() {
    let h = FileHistory(model(PLAYLISTS));
    let out = h
        .fold(
            "x",
            &mut FoldState::default(),
            &change(ChangeKind::Insert, None, Some(playlist())),
        )
        .unwrap();
    let e = &out.entries[0];
    assert_eq!(e.get("__edb_e__"), Some(&s("playlistHist")));
    assert_eq!(e.get("__edb_v__"), Some(&s("1")));
}

#[test]
fn a_derived_item_and_a_created_counter_carry_their_constants() {
    let r = FileRules(model(PLAYLISTS));
    let derived = r.derived(&playlist()).unwrap();
    assert_eq!(derived[0].get("__edb_v__"), Some(&s("1")));
    assert_eq!(
        derived[0].get("note"),
        None,
        "an optional one is no constant"
    );
    let c = r.contributions(&playlist()).unwrap();
    let create = c[0]
        .counter
        .create
        .as_ref()
        .expect("the processor creates it");
    assert!(
        create.contains(&("__edb_v__", AttributeValue::S("1".into()))),
        "{create:?}"
    );
}

#[test]
fn a_once_put_carries_its_entities_constants() {
    use super::once::FileOnce;
    let text = super::once_tests::HIRING.replace(
        "attributes: { matchedAt: iso-utc, label: string }",
        "attributes: { matchedAt: iso-utc, label: string, __v: [\"2\"] }",
    );
    let m = model(&text);
    let mut req = item(&[
        ("PK", s("JOB#j1")),
        ("SK", s("REQ#s1")),
        ("type", s("request")),
        ("status", s("approved")),
    ]);
    req.insert("approvedAt".into(), s("2026-11-03T10:00:00Z"));
    let msgs = m
        .once_messages(&change(ChangeKind::Insert, None, Some(req)))
        .expect("valid");
    let once = FileOnce {
        model: m,
        spec: &m.once[0],
    };
    let plan = once.plan_of(&msgs[0].body).expect("plan");
    assert_eq!(plan.puts[0].get("__v"), Some(&s("2")));
}

/// An attribute of the entries entity that is no constant is written on no
/// entry: refused, saying what a constant is (import16 #4: `__edb_v__:
/// string` loaded and was never filled).
#[test]
fn an_entries_attribute_no_entry_holds_is_refused_saying_what_a_constant_is() {
    let text = PLAYLISTS.replacen(
        "    key: { pk: \"$music#playlistid_${playlistId}\", sk: \"$playlistitems#hist#${sequence}\" }\n    attributes:\n      __edb_v__: [\"1\"]",
        "    key: { pk: \"$music#playlistid_${playlistId}\", sk: \"$playlistitems#hist#${sequence}\" }\n    attributes:\n      __edb_v__: string",
        1,
    );
    assert_ne!(text, PLAYLISTS);
    super::test_support::assert_says(
        &super::test_support::problems(&text),
        "history: entries `playlistHist`: `__edb_v__` is written on no entry",
    );
}

/// A `project` on the entries entity (what the README does for a counter)
/// is refused saying how an entry carries a constant (import16's
/// hist-edbv.yaml).
#[test]
fn a_project_on_the_entries_entity_is_told_of_constants() {
    let text = PLAYLISTS.replacen(
        "    attributes:\n      __edb_v__: [\"1\"]\nhistory:",
        "    project:\n      attributes: { __edb_v__: \"1\" }\nhistory:",
        1,
    );
    assert_ne!(text, PLAYLISTS);
    super::test_support::assert_says(
        &super::test_support::problems(&text),
        "a constant, a required one-value enum under its `attributes:` (`__edb_v__: [\"1\"]`)",
    );
}
