//! A source whose once effect cannot be computed is bad input as a whole
//! (README, `once:`; import16 #5): every aspect refused with why (no count,
//! no projection, no derive) and no job, whatever refused it: a value of
//! the key holding its separator or empty, a key over DynamoDB's limits,
//! a `when` or a value that fails. An image another rule refuses starts no
//! effect either, and counts as nothing once fixed. Each image's effects
//! are computed once per record, for its aspects and its jobs alike.

use super::once_run::plans;
use super::test_support::{item, model};
use crate::change::{test_change, ChangeKind};
use crate::engine::rules::Rules;
use crate::error::InputError;
use crate::file::rules::FileRules;
use crate::item::{s, Item};

/// Plays: counted per user, indexed by track, a listen derived; a user's
/// first play of a track is a discovery, once per pair.
const PLAYS: &str = r#"jobstream: 1
name: plays
table: { name: plays, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: GSI1PK }] }
entities:
  play:
    key: { PK: "USER#${userId}", SK: "PLAY#${playId}" }
    attributes: { trackId: string, note?: string, level?: string, rating?: string }
    project:
      attributes: { GSI1PK: "TRACK#${trackId}" }
    derive:
      - { entity: listen, with: { playId: playId, userId: userId } }
    count:
      - { counter: userPlays, with: { userId: userId }, add: { plays: 1, stars: "rating == null ? 0 : int(rating)" } }
  userPlays:
    owner: processor
    key: { PK: "USER#${userId}", SK: "PLAYS" }
    counter: { attributes: [plays, stars], created_by: processor }
  listen:
    owner: processor
    key: { PK: "LISTEN#${playId}", SK: "USER#${userId}" }
  discovery:
    owner: processor
    key: { PK: "USER#${userId}", SK: "DISCOVERED#${trackId}" }
    attributes: { rank: int }
once:
  discoveries:
    on: play
    when: "note == null || int(note) >= 0"
    key: "${userId}#${trackId}"
    put:
      - { entity: discovery, with: { userId: userId, trackId: trackId, rank: "level == null ? 0 : int(level)" } }
"#;

fn play(track: &str, more: &[(&str, &str)]) -> Item {
    let mut i = item(&[
        ("PK", s("USER#ann")),
        ("SK", s("PLAY#p1")),
        ("type", s("play")),
        ("trackId", s(track)),
    ]);
    for (k, v) in more {
        i.insert(k.to_string(), s(*v));
    }
    i
}

/// The reason every aspect of `image` is refused for (all four alike);
/// its insert says so and starts no job.
fn refused(rules: &FileRules, image: &Item) -> String {
    let a = rules.aspects(image);
    let Err(e) = &a.projection else {
        panic!("not refused: {a:?}")
    };
    assert_eq!(a.derived.as_ref().err(), Some(e));
    assert_eq!(a.contributions.as_ref().err(), Some(e));
    assert_eq!(a.memberships.as_ref().err(), Some(e));
    let insert = test_change(ChangeKind::Insert, None, Some(image.clone()));
    let said = rules.record(&insert);
    assert_eq!(said.new.as_ref(), Some(&a));
    assert_eq!(said.messages, Ok(vec![]));
    match e {
        InputError::Invalid { key, reason } => {
            assert_eq!(key, "PK=USER#ann, SK=PLAY#p1");
            reason.clone()
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_source_whose_effect_cannot_be_computed_is_refused_in_every_aspect() {
    let rules = FileRules(model(PLAYS));
    // Valid: projected, derived, counted, and its insert starts the job.
    let a = rules.aspects(&play("t1", &[]));
    assert!(a.projection.as_ref().is_ok_and(Option::is_some), "{a:?}");
    assert_eq!(a.derived.as_ref().map(Vec::len), Ok(1));
    assert_eq!(a.contributions.as_ref().map(Vec::len), Ok(1));
    let insert = test_change(ChangeKind::Insert, None, Some(play("t1", &[])));
    assert_eq!(rules.record(&insert).messages.map(|m| m.len()), Ok(1));
    let long = "l".repeat(1020);
    for (image, why) in [
        (
            play("a#b", &[]),
            "play: once `discoveries`: `trackId` of the key holds `#`, a separator of its template: two effects could share one key",
        ),
        (
            play("", &[]),
            "play: once `discoveries`: `trackId` of the key is empty",
        ),
        (
            play(&long, &[]),
            "play: once `discoveries`: its `discovery` item: `SK` (sort key of the table) would be 1031 bytes, over DynamoDB's limit of 1024 bytes",
        ),
        (
            play("t1", &[("note", "x")]),
            "play: once `discoveries`: `note == null || int(note) >= 0`:",
        ),
        (
            play("t1", &[("level", "x")]),
            "play: once `discoveries`: `level == null ? 0 : int(level)`:",
        ),
    ] {
        let reason = refused(&rules, &image);
        assert!(reason.starts_with(why), "{reason}\n  expected: {why}");
    }
}

#[test]
fn an_image_another_rule_refuses_starts_no_effect_and_counts_as_nothing_once_fixed() {
    let rules = FileRules(model(PLAYS));
    // A rating that is no number: its count fails, so the play is bad
    // input, and its effect is not made either.
    let bad = play("t1", &[("rating", "x")]);
    let insert = test_change(ChangeKind::Insert, None, Some(bad.clone()));
    let said = rules.record(&insert);
    assert!(said.new.as_ref().is_some_and(|a| a.refused().is_some()));
    assert_eq!(said.messages, Ok(vec![]));
    // Fixed, `when` true in both images: the job starts now.
    let fixed = test_change(
        ChangeKind::Modify,
        Some(bad),
        Some(play("t1", &[("rating", "4")])),
    );
    assert_eq!(rules.record(&fixed).messages.map(|m| m.len()), Ok(1));
    // A change of a valid play whose `when` held before starts nothing.
    let again = test_change(
        ChangeKind::Modify,
        Some(play("t1", &[("rating", "4")])),
        Some(play("t1", &[("rating", "5")])),
    );
    assert_eq!(rules.record(&again).messages, Ok(vec![]));
    // The same answers from the jobs asked alone.
    for c in [insert, fixed, again] {
        assert_eq!(rules.messages(&c), rules.record(&c).messages);
    }
}

#[test]
fn each_images_effect_is_computed_once_per_record() {
    let rules = FileRules(model(PLAYS));
    let insert = test_change(ChangeKind::Insert, None, Some(play("t1", &[])));
    let (said, n) = plans(|| rules.record(&insert));
    assert_eq!((said.messages.map(|m| m.len()), n), (Ok(1), 1));
    let modify = test_change(
        ChangeKind::Modify,
        Some(play("t1", &[])),
        Some(play("t1", &[("rating", "3")])),
    );
    let (said, n) = plans(|| rules.record(&modify));
    assert_eq!(
        (said.messages, n),
        (Ok(vec![]), 2),
        "the old image and the new"
    );
    let bad = test_change(ChangeKind::Insert, None, Some(play("a#b", &[])));
    assert_eq!(plans(|| rules.record(&bad)).1, 1);
}
