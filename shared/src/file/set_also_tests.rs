//! Join sets that say the job board (models/jobboard.yaml): facts binding
//! variables from their attributes (`also`), targets carrying variables as
//! attributes, an index listing by an `also` expression, and `unless` on a
//! once effect's marker. What check-model refuses, with line:col and
//! suggestions, and the scopes the engine derives.

use super::test_support::{assert_at, assert_says, model, position, problems};
use crate::engine::joinset::Step;

/// The job board's model file (models/jobboard.yaml).
pub(super) const BOARD: &str = include_str!("../../../models/jobboard.yaml");

/// [`BOARD`] with its first `from` replaced by `to` (which must be there).
pub(super) fn replaced(from: &str, to: &str) -> String {
    let text = BOARD.replacen(from, to, 1);
    assert_ne!(text, BOARD, "{from}");
    text
}

#[test]
fn the_job_board_compiles() {
    assert_eq!(problems(BOARD), vec![]);
}

#[test]
fn scopes_list_a_citys_seekers_from_the_ledger_and_a_seekers_city_from_its_item() {
    let m = model(BOARD);
    let set = m.sets[0].declaration(m);
    let scopes = set.scopes().expect("scopes");
    let of = |on: &str| scopes.iter().find(|s| s.on == on).expect(on);
    // A job's change binds its key and its employer: the city's seekers
    // come from the ledger's listing of GSI1, its suggestions by a sweep.
    let job = of("job");
    assert_eq!(
        job.bound.iter().map(String::as_str).collect::<Vec<_>>(),
        ["city", "employerId", "jobId", "postedAt", "zip"]
    );
    assert_eq!(
        job.steps,
        [
            Step::List {
                fact: "seeker".into(),
                via: true
            },
            Step::Sweep
        ]
    );
    // A seeker's binds its id and its city (normalised): the city's jobs
    // are listed from their partition (each binding its employer), the
    // seeker's suggestions of the city by a sweep (carrying the job's key
    // parts as attributes).
    let seeker = of("seeker");
    assert_eq!(
        seeker.bound.iter().map(String::as_str).collect::<Vec<_>>(),
        ["city", "seekerId"]
    );
    assert_eq!(
        seeker.steps,
        [
            Step::List {
                fact: "job".into(),
                via: false
            },
            Step::Sweep
        ]
    );
    // A request binds the whole pair from its attributes: one candidate.
    assert!(of("requested").steps.is_empty());
    // The match marker starts nothing (the once effect deletes the pair's
    // suggestion itself).
    assert!(scopes.iter().all(|s| s.on != "matched"));
    assert_eq!(
        set.target
            .carried()
            .into_iter()
            .map(|(a, _)| a)
            .collect::<Vec<_>>(),
        ["employerId", "postedAt", "zip"]
    );
}

#[test]
fn an_also_reading_an_unknown_name_is_placed_with_a_suggestion() {
    let text = replaced(
        "also: { city: \"dashed(city)\" }",
        "also: { city: \"dashed(cty)\" }",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "\"dashed(cty)\"");
    assert_at(&p, (l, c), "set `suggestions`: fact `seeker`: also `city`: unknown name `cty` in `dashed(cty)` (did you mean `city`?)");
}

#[test]
fn an_unless_once_must_name_an_effect_that_deletes_the_target() {
    let text = replaced("matched: { once: matches }", "matched: { once: matchs }");
    let p = problems(&text);
    let (l, c) = position(&text, "matchs }");
    assert_at(
        &p,
        (l, c),
        "set `suggestions`: unless `matched`: no once effect `matchs` (did you mean `matches`?)",
    );
    let text = replaced(
        "    delete:\n      - entity: suggestion\n        with: { city: jobCity, jobId: jobId, seekerId: seekerId }\n",
        "",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "matches }");
    assert_at(&p, (l, c), "set `suggestions`: unless `matched`: once `matches` does not delete the set's `suggestion`");
    let text = replaced(
        "matched: { once: matches }",
        "matched: { once: matches, entity: match }",
    );
    let p = problems(&text);
    assert_says(
        &p,
        "unless `matched`: `once` stands alone (no `entity`, `via` nor `also`)",
    );
    let text = replaced(
        "key: \"${seekerId}#${jobId}\"",
        "key: \"${lower(seekerId)}#${jobId}\"",
    );
    let p = problems(&text);
    assert_says(
        &p,
        "the key of once `matches` (`${lower(seekerId)}#${jobId}`) must be plain names",
    );
}

#[test]
fn a_fact_needs_an_entity_and_once_is_for_unless_only() {
    let text = replaced(
        "job: { entity: job, also: { employerId: employerId }",
        "job: { also: { employerId: employerId }",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "job: { also");
    assert_at(
        &p,
        (l, c + "job: ".len() as u64),
        "set `suggestions`: fact `job` needs an `entity`",
    );
    let text = replaced(
        "job: { entity: job, also: { employerId: employerId }",
        "job: { entity: job, once: matches, also: { employerId: employerId }",
    );
    let p = problems(&text);
    assert_says(&p, "fact `job`: `once` names an `unless` fact only");
}

#[test]
fn an_index_listing_binds_key_names_and_also_expressions_only() {
    let text = replaced(
        "GSI1PK: \"city#${dashed(city)}\"",
        "GSI1PK: \"city#${lower(city)}\"",
    );
    let p = problems(&text);
    assert_says(&p, "via `GSI1`: `GSI1PK` of `seeker`: `${lower(city)}` is not one of its key names nor an `also` expression of the fact");
}

#[test]
fn a_variable_of_a_fact_must_be_in_the_targets_key_or_carried() {
    // Without `postedAt: postedAt` the target does not carry the job's
    // date: a seeker's sweep could not find its job.
    let text = replaced(
        "      postedAt: postedAt\n      zip: zip\n",
        "      zip: zip\n",
    );
    let p = problems(&text);
    assert_says(&p, "fact `job`: variable `postedAt` is not in the target's key job#${city} (nor a value of it)");
}

#[test]
fn missing_when_is_a_set_expression_placed_with_a_suggestion() {
    let text = replaced(
        "missing_when: \"job.postedAt >= day(now - 6 * 86400)\"",
        "missing_when: \"jobb.postedAt >= day(now - 6 * 86400)\"",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "\"jobb.postedAt");
    assert_at(&p, (l, c), "set `suggestions`: unknown name `jobb` in `jobb.postedAt >= day(now - 6 * 86400)` (did you mean `job`?)");
}

/// A fact listed through an index whose keys lack a variable the change
/// must list (user11 #7): the refusal names the fact and what to add to
/// the index's keys, not only the variables.
#[test]
fn a_via_listing_lacking_a_variable_says_where_to_put_it() {
    let tickets = include_str!("../../../tests/scenarios/tickets/tickets.yaml");
    assert_eq!(problems(tickets), vec![]);
    let text = tickets.replace(
        "GSI1SK: \"TICKET#${holderId}#${orderId}#${ticketId}\"",
        "GSI1SK: \"TICKET#${orderId}#${ticketId}\"",
    );
    let p = problems(&text);
    assert!(
        p.iter().any(|p| p.message.contains(
            "fact `ticket`'s `via` listing is keyed by them but its keys do not hold `h` (a `via` listing binds only its own keys' variables, not `also`"
        )),
        "{p:#?}"
    );
}

/// The Q&A feed (tests/scenarios/tagfeed/): a feed item keyed by user and
/// question carries the tag, which the question's `primaryTag` (`also`)
/// determines.
const TAGFEED: &str = include_str!("../../../tests/scenarios/tagfeed/tagfeed.yaml");
/// Ticket holders' notices (tests/scenarios/tickets/): the ticket's `also`
/// binds variables of the notice's key.
const TICKETS: &str = include_str!("../../../tests/scenarios/tickets/tickets.yaml");

fn by_id(items: &[crate::item::Item]) -> impl Fn(&crate::item::Item) -> Option<crate::item::Item> {
    let map: std::collections::HashMap<String, crate::item::Item> = items
        .iter()
        .map(|i| {
            let k = crate::item::key_of(i, &["PK", "SK"]);
            (crate::ledger::item_id(&k), i.clone())
        })
        .collect();
    move |k| map.get(&crate::ledger::item_id(k)).cloned()
}

#[test]
fn a_row_a_fact_places_elsewhere_determines_the_row_of_its_key() {
    use super::test_support::item;
    use crate::item::s;
    let m = model(TAGFEED);
    let set = m.sets[0].declaration(m);
    let question = |tag: &str| {
        item(&[
            ("PK", s("Q#q1")),
            ("SK", s("Q")),
            ("type", s("question")),
            ("questionId", s("q1")),
            ("title", s("t")),
            ("primaryTag", s(tag)),
        ])
    };
    let row = |t: &str| {
        [("q", "q1"), ("t", t), ("u", "u4")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<crate::engine::joinset::Vars>()
    };
    // Listed among py's followers, q1 is go's now: its key's row is go's.
    let read = by_id(&[question("go")]);
    assert_eq!(set.determined(&row("py"), &read), Some(row("go")));
    // The row the facts place it in, or a question not read: none other.
    assert_eq!(set.determined(&row("go"), &read), None);
    assert_eq!(set.determined(&row("py"), &by_id(&[])), None);

    // A ticket's `also` binds the notice's holder: another holder's row is
    // another key (a notice of its own), never this key's row.
    let m = model(TICKETS);
    let set = m.sets[0].declaration(m);
    let ticket = item(&[
        ("PK", s("ORDER#oA")),
        ("SK", s("TICKET#k0")),
        ("type", s("ticket")),
        ("orderId", s("oA")),
        ("ticketId", s("k0")),
        ("eventId", s("e1")),
        ("holderId", s("u1")),
        ("status", s("valid")),
    ]);
    let row: crate::engine::joinset::Vars = [("e", "e1"), ("h", "u9"), ("o", "oA"), ("t", "k0")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(set.determined(&row, &by_id(&[ticket])), None);
}
