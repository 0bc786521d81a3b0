//! `once:` in a model file: what check-model refuses (each message at its
//! line and column, with a suggestion where one exists), which changes
//! start an effect, and what the effect of a job is.

use super::once::FileOnce;
use super::test_support::{assert_at, assert_says, item, model, position, problems};

use crate::change::{test_change, ChangeKind};
use crate::engine::setjob::Cond;
use crate::error::InputError;
use crate::item::{s, Item};
use crate::sqs::MessageError;

/// A small hiring board: an approved request becomes one match, the
/// pair's suggestion goes.
pub const HIRING: &str = r#"jobstream: 1
name: hiring
table: { name: hiring, pk: PK, sk: SK }
entities:
  job:
    key: { PK: "JOB#${jobId}", SK: "INFO" }
    attributes: { title: string }
  seeker:
    key: { PK: "S#${seekerId}", SK: "PROFILE" }
    attributes: { name: string }
  request:
    key: { PK: "JOB#${jobId}", SK: "REQ#${seekerId}" }
    attributes:
      status: [pending, approved, rejected]
      approvedAt: iso-utc?
  suggestion:
    owner: processor
    key: { PK: "S#${seekerId}", SK: "SUG#${jobId}" }
  match:
    owner: processor
    key: { PK: "S#${seekerId}", SK: "MATCH#${jobId}" }
    attributes: { matchedAt: iso-utc, label: string }
once:
  matches:
    on: request
    when: "status == 'approved'"
    key: "${seekerId}#${jobId}"
    require:
      - entity: request
        with: { jobId: jobId, seekerId: seekerId }
        equals: { status: "'approved'" }
        message: "the request is not approved"
      - { entity: job, with: { jobId: jobId }, message: "the job is gone" }
      - { entity: seeker, with: { seekerId: seekerId } }
    put:
      - entity: match
        with: { seekerId: seekerId, jobId: jobId, matchedAt: approvedAt, label: "m-${jobId}" }
    delete:
      - { entity: suggestion, with: { seekerId: seekerId, jobId: jobId } }
"#;

fn request(status: &str, approved_at: Option<&str>) -> Item {
    let mut i = item(&[
        ("PK", s("JOB#j1")),
        ("SK", s("REQ#s1")),
        ("type", s("request")),
        ("status", s(status)),
    ]);
    if let Some(a) = approved_at {
        i.insert("approvedAt".into(), s(a));
    }
    i
}

const DAY1: &str = "2026-11-03T10:00:00Z";

#[test]
fn an_approved_request_plans_one_transaction_keyed_by_the_pair() {
    let m = model(HIRING);
    let c = test_change(
        ChangeKind::Insert,
        None,
        Some(request("approved", Some(DAY1))),
    );
    let msgs = m.once_messages(&c).expect("valid");
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].queue, "matches");
    let once = FileOnce {
        model: m,
        spec: &m.once[0],
    };
    let plan = once.plan_of(&msgs[0].body).expect("plan");
    assert_eq!(plan.once_key, "s1#j1");
    assert_eq!(plan.checks.len(), 3);
    let (g, why) = &plan.checks[0];
    assert_eq!(g.key["PK"], s("JOB#j1"));
    assert_eq!(g.key["SK"], s("REQ#s1"));
    assert_eq!(g.cond, Cond::Equals("status", s("approved")));
    assert_eq!(why, "the request is not approved (PK=JOB#j1, SK=REQ#s1)");
    assert_eq!(plan.checks[1].0.cond, Cond::Exists);
    assert_eq!(plan.checks[1].0.key["PK"], s("JOB#j1"));
    assert!(
        plan.checks[2].1.starts_with("no `seeker` item"),
        "a default reason: {}",
        plan.checks[2].1
    );
    let m0 = &plan.puts[0];
    assert_eq!(m0["PK"], s("S#s1"));
    assert_eq!(m0["SK"], s("MATCH#j1"));
    assert_eq!(m0["matchedAt"], s(DAY1));
    assert_eq!(m0["label"], s("m-j1"));
    assert_eq!(m0["type"], s("match"), "stamped with its entity");
    assert_eq!(m0.len(), 5);
    assert_eq!(plan.deletes.len(), 1);
    assert_eq!(plan.deletes[0]["SK"], s("SUG#j1"));
}

/// A job waits for the required items of other entities than its source
/// (the job, the seeker), never for the request itself (its change into
/// `when` starts a new job); the derive reads waiting notes for a job or
/// seeker created, never for a request, nor for a job's other changes.
#[test]
fn an_effect_waits_for_required_items_of_other_entities_only() {
    let m = model(HIRING);
    let c = test_change(
        ChangeKind::Insert,
        None,
        Some(request("approved", Some(DAY1))),
    );
    let msgs = m.once_messages(&c).expect("valid");
    let once = FileOnce {
        model: m,
        spec: &m.once[0],
    };
    assert_eq!(once.plan_of(&msgs[0].body).expect("plan").waits, vec![1, 2]);
    let job = |title: &str| item(&[("PK", s("JOB#j1")), ("SK", s("INFO")), ("title", s(title))]);
    let seeker = item(&[("PK", s("S#s1")), ("SK", s("PROFILE")), ("name", s("n"))]);
    let awaited = |kind, old, new| m.awaited(&test_change(kind, old, new));
    assert!(awaited(ChangeKind::Insert, None, Some(job("t"))));
    assert!(awaited(ChangeKind::Insert, None, Some(seeker)));
    assert!(!awaited(ChangeKind::Modify, Some(job("t")), Some(job("u"))));
    assert!(!awaited(ChangeKind::Remove, Some(job("t")), None));
    assert!(!awaited(
        ChangeKind::Insert,
        None,
        Some(request("approved", Some(DAY1)))
    ));
    assert!(m.awaits());
}

#[test]
fn only_a_change_into_the_condition_starts_the_effect() {
    let m = model(HIRING);
    let approved = || Some(request("approved", Some(DAY1)));
    let count = |kind, old, new| m.once_messages(&test_change(kind, old, new)).unwrap().len();
    assert_eq!(count(ChangeKind::Insert, None, approved()), 1);
    assert_eq!(
        count(ChangeKind::Insert, None, Some(request("pending", None))),
        0
    );
    assert_eq!(
        count(
            ChangeKind::Modify,
            Some(request("pending", None)),
            approved()
        ),
        1
    );
    assert_eq!(
        count(ChangeKind::Modify, approved(), approved()),
        0,
        "still approved: nothing new"
    );
    assert_eq!(
        count(
            ChangeKind::Modify,
            approved(),
            Some(request("rejected", None))
        ),
        0
    );
    assert_eq!(count(ChangeKind::Remove, approved(), None), 0);
    // An old image whose effect could not be computed (no day) counts as
    // nothing: fixed, it starts the effect.
    assert_eq!(
        count(
            ChangeKind::Modify,
            Some(request("approved", None)),
            approved()
        ),
        1
    );
    // An old image that was bad input counts as nothing.
    assert_eq!(
        count(
            ChangeKind::Modify,
            Some(request("approvd", None)),
            approved()
        ),
        1
    );
}

/// Why the rules refuse `image` (every aspect alike), and that its
/// insert starts no job.
fn refused(m: &'static super::model::FileModel, image: Item) -> InputError {
    use crate::engine::rules::Rules;
    let a = super::rules::FileRules(m).aspects(&image);
    let e = a.refused().cloned().expect("refused");
    assert_eq!(a.projection, Err(e.clone()));
    let c = test_change(ChangeKind::Insert, None, Some(image));
    assert_eq!(m.once_messages(&c), Ok(vec![]));
    e
}

#[test]
fn a_source_whose_effect_cannot_be_computed_is_bad_input() {
    let m = model(HIRING);
    // Approved without the day the match needs: refused at the source,
    // with its key and why, never a poison message.
    match refused(m, request("approved", None)) {
        InputError::Invalid { key, reason } => {
            assert!(key.contains("REQ#s1"), "{key}");
            assert!(
                reason.contains("once `matches`: `matchedAt` of `match` has no value"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_key_value_holding_its_templates_separator_is_bad_input() {
    let m = model(HIRING);
    // `JOB#${jobId}` reads `a#b` as the job id: `s1#a#b` would also be
    // the key of seeker `s1#a` and job `b`.
    let mut r = request("approved", Some(DAY1));
    r.insert("PK".into(), s("JOB#a#b"));
    match refused(m, r) {
        InputError::Invalid { reason, .. } => assert_eq!(
            reason,
            "request: once `matches`: `jobId` of the key holds `#`, a separator of its template: two effects could share one key"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_bodies_are_refused() {
    let m = model(HIRING);
    let once = FileOnce {
        model: m,
        spec: &m.once[0],
    };
    let kind = |body: &str| match once.plan_of(body) {
        Err(MessageError::Permanent { kind, .. } | MessageError::OtherVersion { kind, .. }) => kind,
        other => panic!("{body}: {other:?}"),
    };
    assert_eq!(kind("not json"), "NotJson");
    assert_eq!(kind(r#"{"once":"matches","values":{}}"#), "NoVersion");
    assert_eq!(
        kind(r#"{"version":9,"once":"matches","values":{}}"#),
        "UnknownVersion"
    );
    assert_eq!(
        kind(r#"{"version":1,"once":"other","values":{}}"#),
        "InvalidMessage"
    );
    assert_eq!(
        kind(r#"{"version":1,"once":"matches","values":{"nope":"x"}}"#),
        "InvalidMessage"
    );
    // Values missing: the effect cannot be computed.
    assert_eq!(
        kind(r#"{"version":1,"once":"matches","values":{"jobId":"j1"}}"#),
        "InvalidMessage"
    );
    assert_eq!(
        kind(&"x".repeat(super::once::MAX_BODY_BYTES + 1)),
        "BodyTooLarge"
    );
}

#[test]
fn a_body_carries_only_what_the_effect_reads() {
    let m = model(HIRING);
    let c = test_change(
        ChangeKind::Insert,
        None,
        Some(request("approved", Some(DAY1))),
    );
    let body = &m.once_messages(&c).unwrap()[0].body;
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["version"], 1);
    let mut names: Vec<&str> = v["values"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort();
    assert_eq!(names, ["approvedAt", "jobId", "seekerId"]);
    assert!(
        !body.contains("pending"),
        "`status`, read by `when` only, stays out"
    );
}

/// Every check-model message of the block, at its line and column.
#[test]
fn check_model_says_what_is_wrong_with_a_once_block_and_where() {
    // (replace, with, the line holding, the column of, message); an empty
    // column: the line only.
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "    on: request\n",
            "    on: requst\n",
            "on: requst",
            "requst",
            "once `matches`: unknown entity `requst` (did you mean `request`?)",
        ),
        (
            "    on: request\n",
            "    on: match\n",
            "on: match",
            "match",
            "`match` is a processor entity: a once effect starts on changes of a writer entity",
        ),
        (
            "when: \"status == 'approved'\"",
            "when: \"stauts == 'approved'\"",
            "stauts",
            "\"stauts",
            "unknown name `stauts` in `stauts == 'approved'` (did you mean `status`?)",
        ),
        (
            "key: \"${seekerId}#${jobId}\"",
            "key: \"${seekerId}#${lowr(jobId)}\"",
            "lowr",
            "\"${seekerId}",
            "once `matches`: unknown function `lowr` (did you mean `lower`?)",
        ),
        (
            "      - entity: match\n",
            "      - entity: job\n",
            "- entity: job",
            "job",
            "put `job`, a writer entity: a once effect writes `owner: processor` items",
        ),
        (
            "{ entity: job, with: { jobId: jobId }, message: \"the job is gone\" }",
            "{ entity: job, with: { jobid: jobId }, message: \"the job is gone\" }",
            "jobid: jobId",
            "jobId }",
            "`jobid` is not a key name of `job` (did you mean `jobId`?)",
        ),
        (
            "{ entity: job, with: { jobId: jobId }, message: \"the job is gone\" }",
            "{ entity: job, with: {}, message: \"the job is gone\" }",
            "{ entity: job",
            "{ entity: job",
            "require `job`: `${jobId}` of its key is unbound: add `jobId:` under `with` (e.g. `jobId: jobId`)",
        ),
        (
            "equals: { status: \"'approved'\" }",
            "equals: { state: \"'approved'\" }",
            "state:",
            "\"'approved'\"",
            "`state` is not an attribute of `request` (did you mean `status`?)",
        ),
        (
            "equals: { status: \"'approved'\" }",
            "equals: { status: \"'approved'\", approvedAt: approvedAt }",
            "approvedAt: approvedAt",
            "approvedAt }",
            "one attribute under `equals`",
        ),
        (
            "equals: { status: \"'approved'\" }",
            "equals: { status: \"'approved'\" }\n        absent: true",
            "- entity: request",
            "entity: request",
            "`absent` and `equals` exclude each other",
        ),
        (
            "matchedAt: approvedAt, label: \"m-${jobId}\"",
            "matchedAt: approvedAt",
            "- entity: match",
            "entity: match",
            "put `match`: its attribute `label` is unbound: add it under `with`",
        ),
        (
            "{ entity: suggestion, with: { seekerId: seekerId, jobId: jobId } }",
            "{ entity: suggestion, with: { seekerId: seekerId, jobId: jobId, label: jobId } }",
            "label: jobId",
            "jobId } }",
            "`label` is not a key name of `suggestion` (delete binds the key only)",
        ),
        (
            "when: \"status == 'approved'\"",
            "when: \"size(status)\"",
            "size(status)",
            "\"size",
            "once `matches`: a condition (`when:`) must be a bool, but `size(status)` is an int",
        ),
        (
            "key: \"${seekerId}#${jobId}\"",
            "key: \"${seekerId}#${status + 1}\"",
            "status + 1",
            "\"${seekerId}",
            "once `matches`: `status + 1`:",
        ),
        (
            "    require:\n",
            "    requires:\n",
            "requires:",
            "",
            "unknown field `requires`",
        ),
    ];
    for (from, to, line_of, col_of, want) in cases {
        assert!(HIRING.contains(from), "{from}");
        let text = HIRING.replacen(from, to, 1);
        let p = problems(&text);
        let (line, _) = position(&text, line_of);
        let found = p.iter().find(|p| p.message.contains(want));
        let Some(found) = found else {
            panic!("want `{want}` in {p:#?}");
        };
        assert_eq!(found.line, line, "`{want}`: {p:#?}");
        if !col_of.is_empty() {
            let l = text.lines().nth(line as usize - 1).expect("line");
            let col = l.find(col_of).expect("column") as u64 + 1;
            assert_eq!(found.col, col, "`{want}` in `{l}`: {p:#?}");
        }
    }
}

#[test]
fn check_model_refuses_an_effect_that_writes_nothing_or_takes_a_sets_name() {
    let text = HIRING.replace(
        "    put:\n      - entity: match\n        with: { seekerId: seekerId, jobId: jobId, matchedAt: approvedAt, label: \"m-${jobId}\" }\n    delete:\n      - { entity: suggestion, with: { seekerId: seekerId, jobId: jobId } }\n",
        "",
    );
    assert_ne!(text, HIRING);
    let p = problems(&text);
    let at = position(&text, "on: request");
    assert_at(
        &p,
        (at.0, at.1),
        "once `matches`: it writes nothing: add `put:` or `delete:`",
    );
    // A processor `match` is unwritten now: nothing else is wrong.
    assert_eq!(p.len(), 1, "{p:#?}");
    let text = format!(
        "{}sets:\n  matches:\n    entity: suggestion\n    facts: {{ r: {{ entity: request }} }}\n",
        HIRING
    );
    let p = problems(&text);
    assert_says(&p, "once `matches`: a set has the same name");
}

#[test]
fn a_once_consumer_is_a_queue_of_the_model() {
    let m = model(HIRING);
    assert_eq!(m.once.len(), 1);
    let spec = &m.once[0];
    assert_eq!(spec.queue.logical, "matches");
    assert_eq!(spec.queue.name, "jobstream-matches-jobs");
}

#[test]
fn check_model_refuses_a_name_no_queue_can_carry() {
    let text = HIRING.replace(
        "  matches:\n    on: request",
        "  \"match es\":\n    on: request",
    );
    assert_ne!(text, HIRING);
    let p = problems(&text);
    let (line, _) = position(&text, "on: request");
    assert_at(
        &p,
        (line, 5),
        "once `match es`: a name of letters, digits, `-` and `_` (it names a queue)",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
}

/// A table whose queues exist already keeps them: `queue_name:` names the
/// SQS queue (and so its DLQ); a name SQS would refuse is a check-model
/// problem at the name, for `once:`, `sets:` and `compute:` alike.
#[test]
fn queue_name_names_the_sqs_queue_and_a_name_sqs_refuses_is_placed() {
    let named = HIRING.replace(
        "    delete:\n      - { entity: suggestion",
        "    queue_name: jobstream-match-jobs\n    delete:\n      - { entity: suggestion",
    );
    let spec = &model(&named).once[0];
    assert_eq!(spec.queue.logical, "matches", "the logical name stays");
    assert_eq!(spec.queue.name, "jobstream-match-jobs");
    assert_eq!(spec.queue.dlq_name, "jobstream-match-jobs-dlq");
    let bad = HIRING.replace(
        "    delete:\n      - { entity: suggestion",
        "    queue_name: \"match jobs\"\n    delete:\n      - { entity: suggestion",
    );
    let p = problems(&bad);
    assert_at(
        &p,
        position(&bad, "\"match jobs\""),
        "queue name `match jobs`",
    );
    let long = HIRING.replace(
        "    delete:\n      - { entity: suggestion",
        &format!(
            "    queue_name: {}\n    delete:\n      - {{ entity: suggestion",
            "q".repeat(77)
        ),
    );
    assert!(problems(&long)
        .iter()
        .any(|p| p.message.contains("at most 76 characters")));
    // A join set's queue alike.
    let social = include_str!("../../../models/social.yaml").replace(
        "  timeline:\n    entity: timeline\n",
        "  timeline:\n    entity: timeline\n    queue_name: jobstream-timeline-jobs-v2\n",
    );
    let m = model(&social);
    assert_eq!(m.sets[0].queue.name, "jobstream-timeline-jobs-v2");
    assert_eq!(m.sets[0].queue.dlq_name, "jobstream-timeline-jobs-v2-dlq");
}

/// A once effect whose item is keyed by a date besides the once key (one
/// award per user, ever, filed under the day it was reached): `verify`
/// finds a second award of one user, keeps the one the user's score asks
/// for (though the extra sorts first) and deletes the extra; awards of
/// other users, one each, are clean. The user is read back from the
/// award's key (it carries no attribute).
#[test]
fn verify_finds_a_second_item_of_one_once_key_by_its_key_names() {
    use crate::models::{CheckInput, Drift, Repair};
    let m = model(
        r#"jobstream: 1
name: awards
table: { name: awards, pk: PK, sk: SK }
entities:
  score:
    key: { PK: "U#${userId}", SK: "SCORE" }
    attributes: { points: int, reachedAt: string }
  award:
    owner: processor
    key: { PK: "AWARDS", SK: "A#${reachedAt}#${userId}" }
once:
  gold:
    on: score
    when: "points >= 100"
    key: "${userId}"
    put:
      - { entity: award, with: { reachedAt: reachedAt, userId: userId } }
"#,
    );
    let score = item(&[
        ("PK", s("U#a")),
        ("SK", s("SCORE")),
        ("type", s("score")),
        ("points", crate::item::n(150)),
        ("reachedAt", s("2026-01-02")),
    ]);
    let award = |sk: &str| item(&[("PK", s("AWARDS")), ("SK", s(sk))]);
    let clean = vec![
        score.clone(),
        award("A#2026-01-02#a"),
        award("A#2026-01-03#b"),
    ];
    // The effects made for `a` and `b`: their markers.
    let ledger: Vec<Item> = ["a", "b"]
        .map(|u| crate::engine::once::marker_key("gold", u))
        .to_vec();
    let check = |items: &[Item]| m.job_checks(&CheckInput::new(items, &ledger, chrono::Utc::now()));
    assert!(check(&clean).is_empty(), "{:#?}", check(&clean));
    // An award no effect made (no marker for `c`): a writer's, extra.
    let mut forged = clean.clone();
    forged.push(award("A#2026-01-04#c"));
    let found = check(&forged);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].what.contains("no marker"), "{}", found[0].what);
    assert!(
        matches!(&found[0].repair, Some(Repair::DeleteIfUnchanged(i)) if *i == award("A#2026-01-04#c")),
        "{found:#?}"
    );
    let mut twice = clean.clone();
    twice.push(award("A#2025-01-01#a"));
    let found = check(&twice);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].drift, Drift::Extra);
    assert!(
        found[0].what.contains("A#2025-01-01#a") && found[0].what.contains("A#2026-01-02#a"),
        "{}",
        found[0].what
    );
    assert!(
        matches!(&found[0].repair, Some(Repair::DeleteIfUnchanged(i)) if *i == award("A#2025-01-01#a")),
        "{found:#?}"
    );
}

/// An event with a writer-created counter (`sold`) and a `compute:` value
/// (`nlines`), and a once effect at a threshold of each.
const SOLD_OUT: &str = r#"jobstream: 1
name: tickets
table: { name: tickets, pk: PK, sk: SK }
entities:
  event:
    key: { PK: "EVENT#${eventId}", SK: "EVENT" }
    attributes: { eventId: string, capacity: int }
    counter: { attributes: [sold], created_by: writer }
    compute:
      over: { entity: note, as: notes }
      values: { nnotes: "size(notes)" }
      queue: notes
  note:
    key: { PK: "EVENT#${eventId}", SK: "NOTE#${noteId}" }
    attributes: { eventId: string, noteId: string }
  order:
    key: { PK: "ORDER#${orderId}", SK: "ORDER" }
    attributes: { orderId: string, eventId: string, tickets: int }
    count:
      - { counter: event, with: { eventId: eventId }, add: { sold: tickets } }
  sold_out:
    owner: processor
    key: { PK: "SOLDOUT#${eventId}", SK: "MARK" }
once:
  sold_out:
    on: event
    when: "sold >= capacity"
    key: "${eventId}"
    put:
      - { entity: sold_out, with: { eventId: eventId } }
"#;

/// A once effect reading a counter sum or a computed value of its `on`
/// entity gets one problem that says why it cannot (what a once reads) and
/// what to write instead (README gap G1: a marker when a sum reaches a
/// threshold), never only "unknown name `sold`" (user8).
#[test]
fn a_once_reading_a_sum_or_a_computed_value_says_why_and_what_to_write_instead() {
    let p = problems(SOLD_OUT);
    let about: Vec<&str> = p
        .iter()
        .filter(|p| p.message.contains("`sold`"))
        .map(|p| p.message.as_str())
        .collect();
    assert_eq!(about.len(), 1, "{p:#?}");
    assert_at(
        &p,
        position(SOLD_OUT, "\"sold >= capacity\""),
        "once `sold_out`",
    );
    for says in [
        "once `sold_out`: `sold` in `sold >= capacity` is a sum jobstream keeps on `event` (its `counter:`)",
        "a once effect reads what the application writes on its `on` entity",
        "never a counter sum or a `compute:` value",
        "keep the sum and the threshold in one processor-created counter (the counts of `sold` into it, `event`'s `count:` adding `capacity: capacity` there)",
        "a `project` with `when: \"sold >= capacity\"`",
    ] {
        assert!(about[0].contains(says), "{} should say {says}", about[0]);
    }
    assert!(!about[0].contains("unknown name"), "{}", about[0]);

    let computed = SOLD_OUT.replace("when: \"sold >= capacity\"", "when: \"nnotes > 3\"");
    let p = problems(&computed);
    assert_says(
        &p,
        "once `sold_out`: `nnotes` in `nnotes > 3` is a value `compute:` writes on `event`",
    );
    assert!(
        !p.iter().any(|p| p.message.contains("unknown name")),
        "{p:#?}"
    );
    // Other flaws of the same expression are still found.
    let both = SOLD_OUT.replace("when: \"sold >= capacity\"", "when: \"sold >= capasity\"");
    let p = problems(&both);
    assert_says(&p, "`sold` in `sold >= capasity` is a sum");
    assert_says(&p, "unknown name `capasity`");
    assert_says(&p, "(did you mean `capacity`?)");
}
