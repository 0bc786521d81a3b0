//! A stream record asked about at once ([`Rules::record`]): the same
//! answers as each aspect and the jobs asked alone, from one parse of each
//! image (issue 29: a scored prediction was parsed five times here).

use super::rules::{checks_run, parses, FileRules};
use super::test_support::rules;
use crate::change::{test_change, Change, ChangeKind};
use crate::engine::rules::{Aspects, OutMessage, Rules};
use crate::error::InputError;
use crate::item::{key_of, Item};

/// The rules asked one aspect and the jobs at a time: the trait's own
/// [`Rules::record`].
struct Alone(FileRules);

impl Rules for Alone {
    fn key_names(&self) -> &'static [&'static str] {
        self.0.key_names()
    }
    fn aspects(&self, image: &Item) -> Aspects {
        self.0.aspects(image)
    }
    fn messages(&self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        self.0.messages(change)
    }
}

/// An item written as JSON (string lists are string sets), as the
/// scenario files write it.
fn item(json: serde_json::Value) -> Item {
    match json {
        serde_json::Value::Object(m) => crate::file::scenario::item(&m),
        other => panic!("not a map: {other}"),
    }
}

/// Every insert and remove of `items`, and every modify from one to
/// another of the same key.
fn changes(items: &[Item], keys: &[&str]) -> Vec<Change> {
    let mut out = Vec::new();
    for a in items {
        out.push(test_change(ChangeKind::Insert, None, Some(a.clone())));
        out.push(test_change(ChangeKind::Remove, Some(a.clone()), None));
        for b in items {
            if key_of(a, keys) == key_of(b, keys) {
                out.push(test_change(
                    ChangeKind::Modify,
                    Some(a.clone()),
                    Some(b.clone()),
                ));
            }
        }
    }
    out
}

fn pickem_items() -> Vec<Item> {
    use serde_json::json;
    let team = |m: &str| json!({ "members": [m] });
    let a_match = |id: &str, order: i64, result: Option<i64>| {
        let mut m = json!({
            "PK": "EVENT#2024-03-03-x", "SK": format!("MATCH#{id}"), "type": "match",
            "id": id, "name": "Opener", "order": order, "points": 10,
            "teams": [team("a"), team("b")],
        });
        if let Some(r) = result {
            m["result"] = json!(r);
        }
        m
    };
    let prediction = |user: &str, points: serde_json::Value, gsi_sk: &str| {
        json!({
            "PK": format!("USER#{user}"), "SK": "EVENT#2024-03-03-x", "type": "prediction",
            "predictions": { "m1": 0, "m2": 1 }, "points": points, "mcorrect": 1,
            "GSI_PK": "EVENT#2024-03-03-x", "GSI_SK": gsi_sk, "belongsto": format!("USER#{user}"),
        })
    };
    [
        json!({ "PK": "USER#sam", "SK": "USER", "type": "user", "name": "Sam" }),
        json!({ "PK": "EVENT", "SK": "EVENT#2024-03-03#x", "type": "event", "name": "X",
                "date": "2024-03-03", "state": "broadcast" }),
        a_match("m1", 1, None),
        a_match("m1", 1, Some(0)),
        a_match("m2", 2, Some(7)),
        prediction("sam", json!(0), "SCORE#000#sam"),
        prediction("sam", json!(10), "SCORE#010#sam"),
        prediction("sam", json!(1500), "SCORE#999#sam"),
        prediction("sam", json!("lots"), "SCORE#000#sam"),
        prediction("sam", json!(10), "SCORE#000#sam"),
        prediction("s#m", json!(0), "SCORE#000#s#m"),
        json!({ "PK": "USER#sam", "SK": "EVENT#2024-03-03-x", "type": "prediction",
                "predictions": { "m1": -1 } }),
        json!({ "PK": "USER#sam", "SK": "STANDINGS#2024", "type": "standings", "points": 10,
                "mcorrect": 1, "eplayed": 1 }),
        json!({ "PK": "USER#sam", "SK": "NOTHING#1" }),
    ]
    .into_iter()
    .map(item)
    .collect()
}

fn jobboard_items() -> Vec<Item> {
    use serde_json::json;
    let job = |status: &str, city: &str| {
        json!({ "pk": format!("job#{}", city.to_lowercase()), "sk": "j#2026-11-25#H2X#j1",
                "entityType": "job", "jobId": "j1", "employerId": "e1", "city": city,
                "postedAt": "2026-11-25", "zip": "H2X", "title": "Rust engineer",
                "description": "Rust engineer at e1", "skills": ["aws", "rust"],
                "category": "tech", "salaryMin": 104000, "salaryMax": 130000, "status": status })
    };
    let request = |status: &str| {
        let mut r = json!({ "pk": "employer#e1", "sk": "r#j1#s1", "entityType": "request",
                "employerId": "e1", "jobId": "j1", "seekerId": "s1", "status": status,
                "requestedAt": "2026-11-27", "jobCity": "Montreal",
                "jobPostedAt": "2026-11-25", "jobZip": "H2X" });
        if status == "approved" {
            r["approvedAt"] = json!("2026-11-27");
        }
        r
    };
    let seeker = |city: &str| {
        json!({ "pk": "seeker#s1", "sk": "profile", "entityType": "seeker", "seekerId": "s1",
                "name": "Ada", "city": city, "skills": ["aws", "rust"],
                "desiredSalary": 120000, "categories": ["tech"] })
    };
    [
        job("open", "Montreal"),
        job("closed", "Montreal"),
        job("open", "Montreal#1"),
        request("pending"),
        request("approved"),
        request("nonsense"),
        seeker("Montreal"),
        seeker("Toronto"),
        json!({ "pk": "employer#e1", "sk": "profile", "entityType": "employer",
                "employerId": "e1", "name": "Acme" }),
    ]
    .into_iter()
    .map(item)
    .collect()
}

/// Asked at once, a record's images and jobs are what each asks alone:
/// inserts, removes and modifies of valid items, bad input and items of
/// no entity, in a model with computed values and counters (Pick'Em) and
/// one with join sets and once effects (the job board).
#[test]
fn every_aspect_and_job_of_a_record_is_what_each_asks_alone() {
    let models = [
        (
            include_str!("../../../models/pickem.yaml"),
            pickem_items(),
            ["PK", "SK"],
        ),
        (
            include_str!("../../../models/jobboard.yaml"),
            jobboard_items(),
            ["pk", "sk"],
        ),
    ];
    for (text, items, keys) in models {
        let r = rules(text);
        let mut messages = 0;
        let mut bad = 0;
        for c in changes(&items, &keys) {
            let at_once = r.record(&c);
            assert_eq!(
                at_once,
                Alone(r).record(&c),
                "{:?} {}",
                c.kind,
                c.key_display()
            );
            messages += at_once.messages.as_ref().map_or(0, Vec::len);
            bad += usize::from(at_once.new.as_ref().is_some_and(|a| a.projection.is_err()));
        }
        // The comparison covered jobs started and bad input met.
        assert!(messages > 0, "{}", r.0.name);
        assert!(bad > 0, "{}", r.0.name);
    }
}

/// A prediction the scoring job scored (its points and index key moved):
/// its record is parsed once per image for both images' aspects and its
/// compute job (which reads both images and the projection of the new).
#[test]
fn a_scored_predictions_record_is_parsed_once_per_image() {
    let r = rules(include_str!("../../../models/pickem.yaml"));
    let items = pickem_items();
    let (old, new) = (items[5].clone(), items[6].clone());
    let c = test_change(ChangeKind::Modify, Some(old), Some(new));
    let (said, n) = parses(|| r.record(&c));
    assert_eq!(n, 2, "old and new image, once each");
    assert!(said
        .new
        .is_some_and(|a| a.projection.is_ok_and(|p| p.is_some())));
    // A writer overwrote the computed value: the job that brings it back
    // is started, from the same two parses.
    let stray = test_change(
        ChangeKind::Modify,
        Some(items[5].clone()),
        Some(items[9].clone()),
    );
    let (said, n) = parses(|| r.record(&stray));
    assert_eq!(n, 2);
    assert_eq!(
        said.messages.map(|m| m.len()),
        Ok(1),
        "the item's compute job"
    );
    // A remove has no new image to parse.
    let gone = test_change(ChangeKind::Remove, Some(items[6].clone()), None);
    assert_eq!(parses(|| r.record(&gone)).1, 1);
}

/// A modify's new image runs only the checks whose values changed since
/// its valid old image (a check is a pure function of what it reads); one
/// that fails there is the new image's bad input, as a parse of it alone
/// says.
#[test]
fn a_modifys_new_image_runs_only_the_checks_whose_values_changed() {
    let r = rules(include_str!("../../../models/pickem.yaml"));
    let items = pickem_items();
    let checks =
        r.0.entities
            .iter()
            .find(|e| e.name == "prediction")
            .map(|e| e.checks.len());
    assert_eq!(checks, Some(4));
    // Scored: only computed values and index keys moved.
    let scored = test_change(
        ChangeKind::Modify,
        Some(items[5].clone()),
        Some(items[6].clone()),
    );
    assert_eq!(
        checks_run(|| r.record(&scored)).1,
        4,
        "the old image's four, none again"
    );
    // A pick changed: the check of the picks runs again, and refuses it.
    let bad_pick = test_change(
        ChangeKind::Modify,
        Some(items[5].clone()),
        Some(items[11].clone()),
    );
    let (said, n) = checks_run(|| r.record(&bad_pick));
    assert_eq!(n, 4 + 1);
    let why = said
        .new
        .expect("a new image")
        .projection
        .expect_err("bad input");
    assert!(
        why.to_string()
            .contains("a pick is not a non-negative team index"),
        "{why}"
    );
    assert_eq!(r.0.parse(&items[11]).err(), Some(why), "as parsed alone");
    // After a bad old image every check runs.
    let fixed = test_change(
        ChangeKind::Modify,
        Some(items[11].clone()),
        Some(items[5].clone()),
    );
    assert_eq!(
        checks_run(|| r.record(&fixed)).1,
        3 + 4,
        "the bad old image stops at its third"
    );
}

/// A check that cannot be evaluated on an item's values (a pick written
/// as the string `"0"`: `>=` of a string and an int) refuses the item with
/// the check's own message first, as when it is false, and the evaluator's
/// cause after it (spec15 #2: the cause alone was said).
#[test]
fn a_check_that_cannot_be_evaluated_says_its_message_then_the_cause() {
    let r = rules(include_str!("../../../models/pickem.yaml"));
    let string_pick = item(serde_json::json!({
        "PK": "USER#sam", "SK": "EVENT#2024-03-03-x", "type": "prediction",
        "predictions": { "m1": "0" },
    }));
    let why =
        r.0.parse(&string_pick)
            .err()
            .expect("bad input")
            .to_string();
    assert_eq!(
        why,
        "prediction PK=USER#sam, SK=EVENT#2024-03-03-x: attribute `predictions` has an invalid value: a pick is not a non-negative team index (the check `predictions.all(k, predictions[k] >= 0)` could not be evaluated: found no matching overload for '_>=_' applied to '(string, int)')"
    );
}

/// A `check` without `message` was refused in serde's words (`missing field
/// `message``, no entity named: user15): it loads, and an item that fails it
/// is told the expression.
#[test]
fn a_check_without_a_message_says_its_expression() {
    let text = super::model_tests::LIBRARY.replace("        message: \"1..60 days\"\n", "");
    assert_ne!(text, super::model_tests::LIBRARY);
    let r = rules(&text);
    let loan = item(serde_json::json!({
        "PK": "M#m1", "SK": "LOAN#01HZY3Q3Z1N8X2V6W9T4K7B5D0", "type": "loan",
        "memberId": "m1", "bookId": "01HZY3Q3Z1N8X2V6W9T4K7B5D0", "days": 90,
        "state": "open", "since": "2026-01-05T09:00:00Z",
    }));
    let why = r.0.parse(&loan).err().expect("bad input").to_string();
    assert!(
        why.ends_with(
            "attribute `days` has an invalid value: fails the check `days > 0 && days <= 60`"
        ),
        "{why}"
    );
}
