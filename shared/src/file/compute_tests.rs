//! `compute:` blocks, `map`/`list` attributes and counters whose keys come
//! from their sums: `check-model`'s problems (line and column of each) and
//! the rules of `models/pickem.yaml`.

use aws_sdk_dynamodb::types::AttributeValue;

use super::compile;
use super::rules::FileRules;
use super::test_support::{assert_at, broken, item, problems};
use crate::engine::rules::Rules;
use crate::error::InputError;
use crate::item::{n, s};

const PICKEM: &str = include_str!("../../../models/pickem.yaml");

fn rules() -> FileRules {
    super::test_support::rules(PICKEM)
}

#[test]
fn the_pickem_file_is_clean() {
    assert_eq!(compile(PICKEM, "t").err(), None);
}

/// `min`/`max` of a list are accepted where the list cannot be empty: in
/// a branch of a `? :` (the guard), or with a list written out added.
#[test]
fn a_guarded_min_or_max_is_accepted() {
    for value in [
        "size(matches) == 0 ? 0 : min(matches.map(m, m.points))",
        "max(matches.map(m, m.points) + [0])",
        "min(1, 2)",
    ] {
        let text = PICKEM.replace(
            "        mcorrect: \"size(",
            &format!("        lowest: \"{value}\"\n        mcorrect: \"size("),
        );
        assert_eq!(compile(&text, "t").err(), None, "{value}");
    }
}

/// `check-model`'s problem for each seeded mistake of `models/pickem.yaml`:
/// (what is replaced, by what, where in it the problem is, what it says).
const REFUSED: &[(&str, &str, &str, &str)] = &[
    // A compute over an unknown entity, with a suggestion.
    (
        "over: { entity: match, as: matches }",
        "over: { entity: mtach, as: matches }",
        "mtach",
        "compute over unknown entity `mtach` (did you mean `match`?)",
    ),
    // A compute over a processor entity.
    (
        "over: { entity: match, as: matches }",
        "over: { entity: standings, as: matches }",
        "standings",
        "the rows must be another writer entity",
    ),
    // A partition key name bound to nothing, saying how to bind it.
    (
        "over: { entity: match, as: matches }",
        "over: { entity: match, as: matches, bind: { slug: slg } }",
        "slg",
        "`${slug}` of its partition key must be bound to a key name of `prediction`; `slg` is not one (did you mean `slug`?)",
    ),
    (
        "over: { entity: match, as: matches }",
        "over: { entity: match, as: matches, bind: { matchId: user } }",
        "user",
        "`matchId` is not a key name of its partition key",
    ),
    // A value reading an unknown name or function.
    (
        "        mcorrect: \"size(",
        "        mcorrect: \"size(predictons) + size(",
        "\"size",
        "unknown name `predictons` in `size(predictons) + size(matches.filter(m, has(m.result) && get(predictions, m.id, -1) == m.result))` (did you mean `predictions`?)",
    ),
    (
        "        mcorrect: \"size(",
        "        mcorrect: \"summ(matches) + size(",
        "\"summ",
        "unknown function `summ` (did you mean `sum`?)",
    ),
    (
        "        mcorrect: \"size(",
        "        mcorrect: \"matches + size(",
        "\"matches",
        "computed `mcorrect`: `matches + size(",
    ),
    // A value that is no int (user6's U04: it passed check-model, then
    // every item of the entity was bad input at run time).
    (
        "        mcorrect: \"size(",
        "        label: \"'x' + string(1)\"\n        mcorrect: \"size(",
        "\"'x'",
        "computed `label`: a computed value must be an int, but `'x' + string(1)` is a string",
    ),
    // A value one of whose results is a string, the other unknown
    // (user11 #4a: it passed check-model, then every item was bad input).
    (
        "        mcorrect: \"size(",
        "        latest: \"size(matches) == 0 ? '' : max(matches.map(m, m.id))\"\n        mcorrect: \"size(",
        "\"size(matches) == 0",
        "computed `latest`: a computed value must be an int, but `size(matches) == 0 ? '' : max(matches.map(m, m.id))` is a string",
    ),
    // `min`/`max` of a list that may be empty give null, no int (user10's
    // finding 4: the value was bad input at run time, silently stale).
    (
        "        mcorrect: \"size(",
        "        lowest: \"min(matches.map(m, m.points))\"\n        mcorrect: \"size(",
        "\"min(",
        "computed `lowest`: `min` of a list that may be empty (an item with no rows) is null, not an int, and the value would be bad input there, left as it is: guard it, `size(matches) == 0 ? 0 : min(...)`",
    ),
    (
        "        mcorrect: \"size(",
        "        highest: \"size(matches) + max(matches.filter(m, has(m.result)).map(m, m.points))\"\n        mcorrect: \"size(",
        "\"size(matches) +",
        "computed `highest`: `max` of a list that may be empty",
    ),
    // A computed attribute named like a writer attribute.
    (
        "        mcorrect: \"size(",
        "        predictions: \"size(",
        "\"size",
        "computed `predictions` is a writer attribute",
    ),
    // The job's sequence is the processor's: no computed value, writer
    // attribute or projection of the entity may take its name.
    (
        "        mcorrect: \"size(",
        "        computeSequence: \"size(",
        "\"size",
        "`computeSequence` is the processor's (the job raises it with each write of the values): give the computed value another name",
    ),
    (
        "        belongsto: \"USER#${user}\"\n    count:",
        "        belongsto: \"USER#${user}\"\n        computeSequence: \"1\"\n    count:",
        "\"1\"",
        "`computeSequence` is the processor's on an entity with `compute:`",
    ),
    // A bad page; compute on a processor entity.
    (
        "      page: 200\n",
        "      page: 500\n",
        "500",
        "compute page 500: 1..=200",
    ),
    (
        "    counter:\n      attributes: [points, mcorrect, eplayed]",
        "    compute: { over: { entity: match }, values: { x: \"1\" } }\n    counter:\n      attributes: [points, mcorrect, eplayed]",
        "{ over",
        "it belongs on a writer entity",
    ),
    // A projection may not write a computed value or a sum.
    (
        "        belongsto: \"USER#${user}\"\n    count:",
        "        belongsto: \"USER#${user}\"\n        points: \"1\"\n    count:",
        "\"1\"",
        "`points` is computed (`compute:`)",
    ),
    (
        "        GSI_PK: \"STANDINGS#${year}\"",
        "        GSI_PK: \"STANDINGS#${year}\"\n        eplayed: \"1\"",
        "\"1\"",
        "`eplayed` is a sum of the counter",
    ),
];

#[test]
fn seeded_mistakes_of_computes_are_refused_at_their_place() {
    for &(from, to, at, says) in REFUSED {
        let (text, place) = broken(PICKEM, from, to, at);
        assert_at(&problems(&text), place, says);
    }
}

/// A writer attribute named like the job's sequence, on an entity with
/// `compute:`: refused where the block is, saying what to do.
#[test]
fn a_writer_attribute_named_like_the_jobs_sequence_is_refused() {
    let text = PICKEM.replace(
        "      predictions: map     # matchId -> team index\n",
        "      predictions: map     # matchId -> team index\n      computeSequence: int\n",
    );
    assert_ne!(text, PICKEM);
    super::test_support::assert_says(
        &problems(&text),
        "prediction: `computeSequence` is the processor's on an entity with `compute:` (the job raises it with each write of the values): rename `prediction`'s attribute or key name",
    );
}

#[test]
fn a_projection_on_a_processor_entity_that_is_no_counter_is_refused() {
    let text = "jobstream: 1\ntable: { name: tbl, pk: PK, sk: SK }\nentities:\n  a:\n    key: { PK: \"A#${id}\", SK: A }\n    derive: [{ entity: b, with: { id: id } }]\n  b:\n    owner: processor\n    key: { PK: \"B#${id}\", SK: B }\n    project:\n      attributes: { x: \"1\" }\n";
    assert_at(
        &problems(text),
        (11, 7),
        "`project` belongs on a writer entity (or on a counter, whose keys may come from its sums)",
    );
}

/// A team of `members`.
fn team(members: &[&str]) -> AttributeValue {
    let members = AttributeValue::L(members.iter().map(|x| s(*x)).collect());
    AttributeValue::M([("members".to_string(), members)].into())
}

/// Match m1 of event 2024-03-03-x between `teams`, with its `result` if
/// set.
fn a_match(teams: Vec<AttributeValue>, result: Option<i64>) -> crate::item::Item {
    let mut i = item(&[
        ("PK", s("EVENT#2024-03-03-x")),
        ("SK", s("MATCH#m1")),
        ("type", s("match")),
        ("id", s("m1")),
        ("name", s("Opener")),
        ("order", n(3)),
        ("points", n(10)),
        ("teams", AttributeValue::L(teams)),
    ]);
    if let Some(r) = result {
        i.insert("result".into(), n(r));
    }
    i
}

#[test]
fn map_and_list_types_are_read_and_checked() {
    let r = rules();
    assert!(r
        .projection(&a_match(vec![team(&["a"]), team(&["b"])], Some(1)))
        .is_ok());
    assert!(r
        .projection(&a_match(vec![team(&["a"]), team(&["b"])], None))
        .is_ok());
    for bad in [
        a_match(vec![team(&["a"])], None),
        a_match(vec![team(&["a"]), team(&[])], None),
        a_match(vec![team(&["a"]), s("b")], None),
        a_match(vec![team(&["a"]), team(&["b"])], Some(2)),
        a_match(vec![team(&["a"]), AttributeValue::N("1.5".into())], None),
    ] {
        assert!(r.projection(&bad).is_err(), "{bad:?}");
    }
    let err = r
        .projection(&a_match(vec![team(&["a"])], None))
        .unwrap_err()
        .to_string();
    assert!(err.contains("fewer than 2 teams"), "{err}");
}

/// A value not computed yet (absent) is no 0: the projection and the count
/// that read it wait (not bad input), the item's place in its scope's
/// index does not (it is its key's). A writer's stray value is read as 0
/// until the job brings it back.
#[test]
fn computed_values_are_read_as_stored_wait_while_absent_and_are_keyed_with_their_clamp_noted() {
    let r = rules();
    let mut p = item(&[
        ("PK", s("USER#sam")),
        ("SK", s("EVENT#2024-03-03-x")),
        ("type", s("prediction")),
        (
            "predictions",
            AttributeValue::M([("m1".to_string(), n(0))].into()),
        ),
    ]);
    let scope_index = vec![(
        "compute#scoring#EVENT#2024-03-03-x".to_string(),
        r#"["USER#sam","EVENT#2024-03-03-x"]"#.to_string(),
    )];
    let waits = |e: InputError| {
        assert!(e.waits(), "{e}");
        assert_eq!(e.kind(), "NotComputed");
        e.to_string()
    };
    let why = waits(r.projection(&p).unwrap_err());
    assert_eq!(
        why,
        "PK=USER#sam, SK=EVENT#2024-03-03-x: points not computed yet"
    );
    let why = waits(r.contributions(&p).unwrap_err());
    assert!(
        why.ends_with(": points, mcorrect not computed yet"),
        "{why}"
    );
    assert_eq!(r.derived(&p), Ok(vec![]), "no derive reads them");
    assert_eq!(r.memberships(&p).unwrap(), scope_index);
    assert!(r.notes(&p).is_empty());
    p.insert("points".into(), n(0));
    p.insert("mcorrect".into(), n(0));
    let proj = r.projection(&p).unwrap().unwrap();
    assert_eq!(proj.attrs[1], ("GSI_SK", Some(s("SCORE#000#sam"))));
    assert_eq!(proj.sources, vec!["points"]);
    let c = r.contributions(&p).unwrap();
    assert_eq!(
        c[0].values,
        vec![("points", 0), ("mcorrect", 0), ("eplayed", 1)]
    );
    assert_eq!(c.len(), 1, "a prediction is no row");
    p.insert("points".into(), n(1500));
    p.insert("mcorrect".into(), n(2));
    let proj = r.projection(&p).unwrap().unwrap();
    assert_eq!(proj.attrs[1], ("GSI_SK", Some(s("SCORE#999#sam"))));
    let notes = r.notes(&p);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].metric, "ScoreOverflow");
    assert!(
        notes[0].reason.contains("1500 does not fit 3 digits"),
        "{notes:?}"
    );
    assert_eq!(
        r.contributions(&p).unwrap()[0].values,
        vec![("points", 1500), ("mcorrect", 2), ("eplayed", 1)],
        "the sums use the true value"
    );
    // A writer's stray value is read as 0 until the job brings it back.
    p.insert("points".into(), s("lots"));
    assert_eq!(r.contributions(&p).unwrap()[0].values[0], ("points", 0));
    assert_eq!(r.memberships(&p).unwrap(), scope_index);
}

#[test]
fn a_counter_projection_keys_it_from_its_sums_and_notes_the_clamp() {
    let r = rules();
    let st = item(&[
        ("PK", s("USER#sam")),
        ("SK", s("STANDINGS#2024")),
        ("type", s("standings")),
        ("points", n(123_456)),
    ]);
    let p = r.projection(&st).unwrap().unwrap();
    assert_eq!(
        p.attrs,
        vec![
            ("GSI_PK", Some(s("STANDINGS#2024"))),
            ("GSI_SK", Some(s("SCORE#99999#sam"))),
            ("belongsto", Some(s("USER#sam"))),
        ]
    );
    assert_eq!(p.sources, vec!["points"]);
    let notes = r.notes(&st);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].reason.contains("standings.GSI_SK: 123456"),
        "{notes:?}"
    );
    // A writer's stray negative sum: keyed at 0 (noted), never bad input,
    // so the engine can bring the sum back.
    let mut stray = st.clone();
    stray.insert("points".into(), n(-5));
    let p = r.projection(&stray).unwrap().unwrap();
    assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#00000#sam"))));
    assert_eq!(r.notes(&stray).len(), 1);
    // Unset sums read as 0; the key alone is enough.
    let key = item(&[("PK", s("USER#sam")), ("SK", s("STANDINGS#2024"))]);
    let p = r.projection(&key).unwrap().unwrap();
    assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#00000#sam"))));
    assert!(r.notes(&key).is_empty());
    assert!(r.counter(&key).is_some());
}

/// A sum past 64 bits (two contributions of 2^62, as DynamoDB adds them)
/// was read as 0 and keyed `SCORE#00000`, the leader listed last, with no
/// note (spec15 #9): it is keyed at the clamp, noted; one below -2^63 at 0.
#[test]
fn a_counter_sum_past_64_bits_is_keyed_at_the_clamp_and_noted() {
    let r = rules();
    let mut st = item(&[
        ("PK", s("USER#big")),
        ("SK", s("STANDINGS#2024")),
        ("type", s("standings")),
    ]);
    for (sum, key) in [
        ("9223372036854775808", "SCORE#99999#big"),
        ("-9223372036854775809", "SCORE#00000#big"),
    ] {
        st.insert("points".into(), AttributeValue::N(sum.into()));
        let p = r.projection(&st).unwrap().unwrap();
        assert_eq!(p.attrs[1], ("GSI_SK", Some(s(key))), "{sum}");
        let notes = r.notes(&st);
        assert_eq!(notes.len(), 1, "{sum}: {notes:?}");
    }
}

#[test]
fn a_match_counts_into_the_ledger_only_version_of_its_event() {
    let r = rules();
    let m = a_match(vec![team(&["a"]), team(&["b"])], None);
    let c = r.contributions(&m).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(
        c[0].counter.key,
        vec![
            ("PK", "EVENT#2024-03-03-x".to_string()),
            ("SK", "#compute#scoring".to_string())
        ]
    );
    assert_eq!(c[0].counter.create, None, "never an item of the table");
    assert_eq!(c[0].values, vec![("rows", 1)]);
    assert!(r.counter(&c[0].counter.key_item()).is_none());
    assert!(!r.stale_counter(&c[0].counter.key_item()));
}

/// A compute over an `owner: other` entity (a key space another writer
/// owns, declared by its key only, bad9) compiled, though its rows' fields
/// are declared nowhere: the job cannot guard what it reads of them (a
/// stale value), and any field it reads is unknown. Refused, one problem
/// saying why.
#[test]
fn a_compute_over_a_key_space_another_writer_owns_is_refused() {
    let from = PICKEM
        .split("\n  match:\n")
        .nth(1)
        .and_then(|rest| rest.split("\n  prediction:\n").next())
        .expect("the match entity");
    let key = from
        .lines()
        .find(|l| l.trim_start().starts_with("key:"))
        .expect("its key");
    let text = PICKEM.replace(
        &format!("\n  match:\n{from}\n  prediction:\n"),
        &format!("\n  match:\n    owner: other\n{key}\n\n  prediction:\n"),
    );
    assert_ne!(text, PICKEM);
    let p = problems(&text);
    super::test_support::assert_says(
        &p,
        "prediction: compute over `match`: it is `owner: other` (a key space another writer owns, declared by its key only): a computed value reads its rows' fields, and `match` declares none",
    );
    assert_eq!(
        p.iter().filter(|p| p.message.contains("compute")).count(),
        1,
        "{p:#?}"
    );
}

/// A computed value reading a counter sum of its rows: a sum's change
/// starts no job, so the value would stay as first computed (user11 #5:
/// "the cheapest available tier" never followed the tiers' `held`, and
/// verify agreed with the stale value). Refused, saying what to do.
#[test]
fn a_computed_value_reading_its_rows_counter_sums_is_refused() {
    let text = r#"jobstream: 1
name: tickets
table: { name: tickets, pk: PK, sk: SK }
entities:
  event:
    key: { PK: "EVENT#${eventId}", SK: "META" }
    attributes: { eventId: string }
    compute:
      over: { entity: tier, as: tiers }
      values:
        open: "size(tiers.filter(t, t.quantity - (has(t.held) ? t.held : 0) > 0))"
  tier:
    key: { PK: "EVENT#${eventId}", SK: "TIER#${tierId}" }
    attributes: { eventId: string, tierId: string, quantity: int }
    counter: { attributes: [held], created_by: writer }
  hold:
    key: { PK: "EVENT#${eventId}", SK: "HOLD#${holdId}" }
    attributes: { eventId: string, holdId: string, tierId: string, seats: int }
    count:
      - { counter: tier, with: { eventId: eventId, tierId: tierId }, add: { held: seats } }
"#;
    let p = problems(text);
    assert!(
        p.iter().any(|p| p.message.contains(
            "event: computed `open` reads `held` of the `tier` rows, a counter sum: a sum's change starts no job"
        )),
        "{p:#?}"
    );
    let own = text.replace("(has(t.held) ? t.held : 0)", "0");
    assert_eq!(problems(&own), vec![]);
}

/// User12 finding 3: a row's attribute read through a macro's variable was
/// not checked (`dyn`): a typo or a wrong type passed `check-model` and made
/// every item bad input at run time. The rows are the `over` entity's
/// items, also after a `filter`.
#[test]
fn a_rows_attributes_are_checked_against_the_over_entity() {
    for (value, says) in [
        (
            "sum(matches.filter(m, has(m.result)).map(m, m.pointz))",
            "a row of `matches` (match) has no attribute `pointz` (did you mean `points`?)",
        ),
        (
            "size(matches.filter(m, has(m.resutl)))",
            "has no attribute `resutl` (did you mean `result`?)",
        ),
        (
            "size(matches.filter(m, m.name > 3))",
            "compares a string with an int",
        ),
        ("sum(matches.map(m, m.order + m.name))", "string"),
    ] {
        let text = PICKEM.replace(
            "        mcorrect: \"size(",
            &format!("        lowest: \"{value}\"\n        mcorrect: \"size("),
        );
        let p = problems(&text);
        assert!(
            p.iter().any(|x| x.message.contains(says)),
            "{value}: {p:#?}"
        );
    }
    // A row's own names, of their types, after a filter too.
    for value in [
        "sum(matches.filter(m, has(m.result) && m.order > 1).map(m, m.points))",
        "size(matches.filter(m, m.id != '' && m.name != ''))",
    ] {
        let text = PICKEM.replace(
            "        mcorrect: \"size(",
            &format!("        lowest: \"{value}\"\n        mcorrect: \"size("),
        );
        assert_eq!(compile(&text, "t").err(), None, "{value}");
    }
}

/// user14 #2's shape: a derive and a check reading a computed count, a
/// projection that does not.
const DEALS: &str = r#"
jobstream: 1
name: deals
table: { name: deals, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }] }
entities:
  deal:
    key: { PK: "DEAL#${dealId}", SK: "DEAL" }
    attributes: { dealId: string, title: string, stage: [lead, proposal, won] }
    check:
      - expr: "stage != 'won' || actCount >= 1"
        attribute: stage
        message: "a deal is won after an activity"
    compute:
      over: { entity: activity, as: acts }
      values:
        actCount: "size(acts)"
      queue: deal-stats
    project:
      attributes: { GSI1PK: "TITLE", GSI1SK: "${title}" }
    derive:
      - entity: proposal_deal
        when: "stage == 'proposal' && actCount == 0"
        with: { dealId: dealId, title: title }
  activity:
    key: { PK: "DEAL#${dealId}", SK: "ACT#${actId}" }
    attributes: { dealId: string, actId: string, kind: string }
  proposal_deal:
    owner: processor
    key: { PK: "IDLE", SK: "DEAL#${dealId}" }
    attributes: { dealId: string, title: string }
"#;

/// Only the aspects whose rules read a value not computed yet wait; a
/// check that reads one is not run until the value is there.
#[test]
fn only_what_reads_a_value_not_computed_yet_waits() {
    let r = super::test_support::rules(DEALS);
    let deal = |stage: &str, count: Option<i64>| {
        let mut d = item(&[
            ("PK", s("DEAL#d1")),
            ("SK", s("DEAL")),
            ("type", s("deal")),
            ("dealId", s("d1")),
            ("title", s("Big")),
            ("stage", s(stage)),
        ]);
        if let Some(c) = count {
            d.insert("actCount".into(), n(c));
        }
        d
    };
    let waiting = r.aspects(&deal("proposal", None));
    let e = waiting.derived.unwrap_err();
    assert!(e.waits(), "{e}");
    assert_eq!(
        e.to_string(),
        "PK=DEAL#d1, SK=DEAL: actCount not computed yet"
    );
    assert_eq!(
        waiting.projection.unwrap().unwrap().attrs[1],
        ("GSI1SK", Some(s("Big"))),
        "the projection reads no computed value"
    );
    assert_eq!(waiting.contributions, Ok(vec![]));
    assert_eq!(r.derived(&deal("proposal", Some(0))).unwrap().len(), 1);
    assert_eq!(r.derived(&deal("proposal", Some(1))), Ok(vec![]));
    // The check reads `actCount`: not run while it is absent.
    assert!(r.derived(&deal("won", None)).unwrap_err().waits());
    let bad = r.derived(&deal("won", Some(0))).unwrap_err();
    assert!(
        !bad.waits() && bad.to_string().contains("won after an activity"),
        "{bad}"
    );
    assert_eq!(r.derived(&deal("won", Some(2))), Ok(vec![]));
}
