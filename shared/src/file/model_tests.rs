//! `check-model`'s problems on seeded mistakes (line and column of each),
//! and the rules of a small model file on valid and bad items.

use aws_sdk_dynamodb::types::AttributeValue;

use super::test_support::{assert_at, assert_says, broken, item, position, problems, rules};
use super::{compile, Problem};
use crate::engine::rules::Rules;
use crate::item::{n, s, Item};

/// A small library: members borrow books; a member's loans are counted on
/// the member (processor-created counter item), a loan is mirrored under
/// its book, and open loans are in a sparse index.
pub const LIBRARY: &str = include_str!("../../../models/examples/library.yaml");

const B: &str = "01HXAA0000000000000000000A";

fn loan(member: &str, book: &str, state: &str) -> Item {
    item(&[
        ("PK", s(format!("M#{member}"))),
        ("SK", s(format!("LOAN#{book}"))),
        ("type", s("loan")),
        ("memberId", s(member)),
        ("bookId", s(book)),
        ("days", n(14)),
        ("state", s(state)),
        ("since", s("2026-01-01T00:00:00Z")),
    ])
}

#[test]
fn a_valid_item_implies_its_projection_items_and_counts() {
    let r = rules(LIBRARY);
    let open = loan("ann", B, "open");
    let p = r.projection(&open).unwrap().unwrap();
    assert_eq!(
        p.attrs,
        vec![
            ("GSI1PK", Some(s("OPEN"))),
            ("GSI1SK", Some(s("2026-01-01T00:00:00Z#ann"))),
            ("due", Some(n(1_767_225_600 + 14 * 86_400))),
        ]
    );
    assert_eq!(p.sources, vec!["state", "since", "memberId", "days"]);
    let d = r.derived(&open).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["PK"], s(format!("B#{B}")));
    assert_eq!(d[0]["SK"], s("M#ann"));
    assert_eq!(d[0]["since"], s("2026-01-01T00:00:00Z"));
    assert_eq!(d[0]["type"], s("book_loan"));
    assert_eq!(d[0].len(), 4);
    let c = r.contributions(&open).unwrap();
    assert_eq!(c[0].values, vec![("open", 1), ("total", 1)]);
    assert_eq!(
        c[0].counter.key,
        vec![("PK", "M#ann".to_string()), ("SK", "COUNT".to_string())]
    );
    assert_eq!(c[0].counter.create, Some(vec![("type", s("loans"))]));
    // Returned: out of the sparse index, still counted in the total.
    let back = loan("ann", B, "returned");
    let p = r.projection(&back).unwrap().unwrap();
    assert!(p.attrs.iter().all(|(_, v)| v.is_none()));
    assert_eq!(
        r.contributions(&back).unwrap()[0].values,
        vec![("open", 0), ("total", 1)]
    );
    // The counter item is recognised from its key; the mirror is ignored.
    let counter = item(&[("PK", s("M#ann")), ("SK", s("COUNT"))]);
    assert!(r.counter(&counter).is_some());
    assert!(!r.ignores(&counter));
    let mirror = item(&[("PK", s(format!("B#{B}"))), ("SK", s("M#ann"))]);
    assert!(r.ignores(&mirror));
    let bad_mirror = item(&[("PK", s("B#nope")), ("SK", s("M#ann"))]);
    assert!(
        r.ignores(&bad_mirror),
        "recognised by shape; implies nothing"
    );
}

#[test]
fn bad_input_is_a_structured_error_never_a_panic() {
    let r = rules(LIBRARY);
    let kind = |i: &Item| r.derived(i).unwrap_err().kind();
    let mut i = loan("ann", B, "open");
    i.insert("days".into(), n(0));
    assert_eq!(kind(&i), "InvalidValue", "check fails");
    i.insert("days".into(), s("14"));
    assert_eq!(kind(&i), "WrongType");
    i.insert("days".into(), n("1.5"));
    assert_eq!(kind(&i), "InvalidValue");
    // Overflow inside an expression is bad input, not a wrapped number.
    i.insert("days".into(), n(i64::MAX));
    let e = r.projection(&i).unwrap_err();
    assert_eq!(e.kind(), "InvalidValue", "{e}");
    let mut i = loan("ann", B, "lost");
    assert_eq!(kind(&i), "InvalidValue");
    i = loan("ann", "not-a-ulid", "open");
    assert_eq!(kind(&i), "InvalidValue");
    i = loan("ann", B, "open");
    i.insert("memberId".into(), s("bob"));
    assert_eq!(kind(&i), "Invalid", "keys do not match the attributes");
    i = loan("ann", B, "open");
    i.insert("type".into(), s("member"));
    assert_eq!(kind(&i), "InvalidValue");
    i.remove("type");
    assert_eq!(kind(&i), "MissingAttribute");
    i = loan("ann", B, "open");
    i.insert("since".into(), s("2026-01-01T00:00:00+02:00"));
    assert_eq!(kind(&i), "InvalidValue", "UTC only");
    let unknown = item(&[("PK", s("X")), ("SK", s("Y"))]);
    assert_eq!(kind(&unknown), "UnknownEntity");
    let no_sk = item(&[("PK", s("X"))]);
    assert_eq!(kind(&no_sk), "MissingAttribute");
    let msg = r.derived(&loan("ann", B, "lost")).unwrap_err().to_string();
    assert!(msg.contains("PK=M#ann") && msg.contains("state"), "{msg}");
    assert!(!msg.contains("2026-01-01"), "never the item: {msg}");
    // A set attribute: absent is the empty set; a list is the wrong type.
    let mut m = item(&[
        ("PK", s("M#ann")),
        ("SK", s("PROFILE")),
        ("type", s("member")),
        ("memberId", s("ann")),
        ("name", s("Ann")),
    ]);
    assert!(r.derived(&m).is_ok());
    m.insert("tags".into(), AttributeValue::L(vec![]));
    assert_eq!(kind(&m), "WrongType");
}

/// The problems of `text` with LIBRARY's line `line` replaced.
fn problems_with(line: u64, replacement: &str) -> Vec<Problem> {
    let mut lines: Vec<&str> = LIBRARY.lines().collect();
    lines[line as usize - 1] = replacement;
    problems(&(lines.join("\n") + "\n"))
}

fn line_of(needle: &str) -> u64 {
    position(LIBRARY, needle).0
}

#[test]
fn the_library_model_is_clean_and_the_readme_shows_it() {
    assert_eq!(compile(LIBRARY, "t").err(), None);
    let readme = include_str!("../../../README.md");
    let body: String = LIBRARY.lines().skip(2).map(|l| format!("{l}\n")).collect();
    assert!(
        readme.contains(&body),
        "README's model differs from models/library.yaml"
    );
}

#[test]
fn seeded_mistakes_are_reported_at_their_line_and_column() {
    // An unknown name in an expression, with a suggestion.
    let l = line_of("expr: \"days > 0");
    let p = problems_with(l, "      - expr: \"dayz > 0 && days <= 60\"");
    assert_at(&p, (l, 16), "unknown name `dayz`");
    assert_at(&p, (l, 16), "did you mean `days`?");
    // The clock, where rules read only the item (user7: "unknown name
    // `now`" said not why).
    let p = problems_with(l, "      - expr: \"days < now\"");
    assert_at(&p, (l, 23), "unknown name `now` in `days < now` (an expression reads the entity's attributes and key names, never the clock: what is derived from an item changes only when a fact does");
    // And what to do for an effect due at a deadline (user10 #1: an SLA
    // breach, sent to mechanisms that cannot fire at a moment).
    assert_at(&p, (l, 23), "nothing fires at a moment by itself: for an effect due at a deadline, have a scheduler of yours write a fact then");
    // An unknown function.
    let l = line_of("GSI1SK: \"${since}");
    let p = problems_with(l, "        GSI1SK: \"${lowr(since)}#${memberId}\"");
    assert_at(&p, (l, 20), "unknown function `lowr`");
    assert_at(&p, (l, 20), "did you mean `lower`?");
    // An unknown entity, with a suggestion.
    let l = line_of("- entity: book_loan");
    let p = problems_with(l, "      - entity: book_lone");
    assert_at(&p, (l, 17), "unknown entity `book_lone`");
    assert_at(&p, (l, 17), "did you mean `book_loan`?");
    // An unbound key name of a derived item.
    let l = line_of("with: { bookId: bookId, memberId");
    let p = problems_with(l, "        with: { bookId: bookId, since: since }");
    assert_at(&p, (l - 1, 9), "`${memberId}` of its key is unbound");
    // An unknown type.
    let l = line_of("days: int");
    let p = problems_with(l, "      days: integer");
    assert_at(&p, (l, 13), "unknown type `integer`");
    // A counter attribute the counter does not keep.
    let l = line_of("add: { open:");
    let p = problems_with(l, "        add: { opne: 1, total: 1 }");
    assert_at(&p, (l, 22), "`opne` is not an attribute of counter `loans`");
    // An unquoted `#`: a comment, the value is empty.
    let l = line_of("key: { PK: \"M#${memberId}\", SK: \"PROFILE\" }");
    let p = problems_with(l, "    key: { PK: \"M#${memberId}\", SK: #PROFILE }");
    assert_at(&p, (l, 37), "`#PROFILE` is a comment");
    assert_at(&p, (l, 37), "quote it (\"#PROFILE\")");
    // A misspelt field.
    let l = line_of("memberId: string");
    let p = problems_with(l - 1, "    atributes:");
    assert!(
        p.iter()
            .any(|p| p.line == l - 1 && p.message.contains("did you mean `attributes`?")),
        "{p:#?}"
    );
    // A CEL syntax error points inside the expression.
    let l = line_of("when: \"state == 'open'\"");
    let p = problems_with(l, "      when: \"state == \"");
    assert!(
        p.iter()
            .any(|p| p.line == l && p.col >= 13 && p.message.contains("cannot parse")),
        "{p:#?}"
    );
}

#[test]
fn templates_two_entities_both_match_are_reported_with_an_example_key() {
    let text = LIBRARY.replace(
        "key: { PK: \"M#${memberId}\", SK: \"COUNT\" }",
        "key: { PK: \"M#${memberId}\", SK: \"${what}\" }",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_says(&p, "both match the key PK=M#x, SK=PROFILE");
}

#[test]
fn reserved_blocks_and_versions_are_refused_clearly() {
    // `once:` is read now: an entry without its source is refused.
    let p = compile(&format!("{LIBRARY}once:\n  mail: {{}}\n"), "t").unwrap_err();
    assert_says(&p, "missing field `on`");
    // `sets:` is read now: an entry without its target is refused.
    let p = compile(&format!("{LIBRARY}sets:\n  timeline: {{}}\n"), "t").unwrap_err();
    assert_says(&p, "missing field `entity`");
    let p = compile(&LIBRARY.replace("jobstream: 1", "jobstream: 2"), "t").unwrap_err();
    let l = line_of("jobstream: 1");
    assert_at(&p, (l, 12), "unsupported format version 2");
}

/// A file with two entities, `first` declared before `second`.
fn two_entities(first: (&str, &str), second: (&str, &str)) -> String {
    let ent = |(name, pk): (&str, &str)| {
        format!(
            "  {name}:\n    key: {{ PK: \"{pk}\", SK: \"PROFILE\" }}\n    attributes:\n      id: string\n"
        )
    };
    format!(
        "jobstream: 1\ntable: {{ name: tbl, pk: PK, sk: SK }}\nentities:\n{}{}",
        ent(first),
        ent(second)
    )
}

#[test]
fn an_overlap_is_reported_in_both_orders_at_its_line_with_an_example_key() {
    let user = ("user", "U#${id}");
    let team = ("team", "U#${id}#TEAM");
    for (text, later_line) in [(two_entities(user, team), 9), (two_entities(team, user), 9)] {
        let p = compile(&text, "t").unwrap_err();
        assert_eq!(p.len(), 1, "{text}\n{p:#?}");
        assert_at(
            &p,
            (later_line, 10),
            "both match the key PK=U#x#TEAM, SK=PROFILE",
        );
        assert!(
            p[0].message.contains("`user`") && p[0].message.contains("`team`"),
            "{p:#?}"
        );
        // imp11's finding 12: changing the templates means re-keying a
        // table; the message says the other way out, which works.
        assert!(p[0].message.contains("pattern: \"^[^#]+$\""), "{p:#?}");
    }
    let typed = two_entities(("user", "U#${id:key_part}"), team).replace(
        "entities:",
        "formats:\n  key_part: { pattern: \"^[^#]+$\" }\nentities:",
    );
    assert!(compile(&typed, "t").is_ok(), "{typed}");
    // By construction: a binder that may contain the other template's
    // literal (`A#${a}` holds `B#x`), whichever is declared first.
    for (first, second) in [
        (("outer", "A#${a}"), ("inner", "A#B#${b}")),
        (("inner", "A#B#${b}"), ("outer", "A#${a}")),
        (("left", "${a}#B"), ("right", "A#${b}")),
        (("right", "A#${b}"), ("left", "${a}#B")),
    ] {
        let p = compile(&two_entities(first, second), "t").unwrap_err();
        assert!(
            p.iter()
                .any(|p| p.line == 9 && p.message.contains("both match the key")),
            "{first:?} {second:?}: {p:#?}"
        );
    }
    // Distinct literals: no overlap either way.
    for (first, second) in [
        (("user", "U#${id}"), ("team", "T#${id}")),
        (("team", "T#${id}"), ("user", "U#${id}")),
    ] {
        assert_eq!(compile(&two_entities(first, second), "t").err(), None);
    }
}

const SOCIAL: &str = include_str!("../../../models/social.yaml");

#[test]
fn a_via_listing_nothing_maintains_is_refused_saying_what_would_list() {
    assert_eq!(compile(SOCIAL, "t").err(), None);
    // The follower mirror no longer derived from a follow.
    let derive = "    derive:\n      - entity: follower\n        with: { followed: followed, follower: follower, createdAt: createdAt }\n";
    assert!(SOCIAL.contains(derive));
    let text = SOCIAL.replace(derive, "");
    let p = compile(&text, "t").unwrap_err();
    let (line, col) = position(&text, "via: follower");
    let at = (line, col + "via: ".len() as u64);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, at, "nothing writes `follower` items");
    assert_at(&p, at, "derive one per `follow`");
}

/// A model with enums of each kind and an expression over a string.
const TYPED: &str = r#"jobstream: 1
table: { name: tbl, pk: PK, sk: SK }
entities:
  seat:
    key: { PK: "S#${seatId}", SK: "SEAT" }
    attributes:
      seatId: string
      level: [1, 2, 3]
      vip: [true]
      zone: ["1", b]
      label: string
    project:
      attributes:
        tag: "${int(label) + 1}"
"#;

fn seat(level: AttributeValue, vip: AttributeValue, zone: &str) -> Item {
    item(&[
        ("PK", s("S#a")),
        ("SK", s("SEAT")),
        ("type", s("seat")),
        ("seatId", s("a")),
        ("level", level),
        ("vip", vip),
        ("zone", s(zone)),
        ("label", s("secret-label")),
    ])
}

#[test]
fn enums_of_numbers_and_booleans_are_typed_as_written() {
    let r = rules(TYPED);
    let mut ok = seat(n(2), AttributeValue::Bool(true), "1");
    // A label its projection can read (`int(label)`).
    ok.insert("label".into(), s("7"));
    assert!(r.derived(&ok).is_ok(), "{:?}", r.derived(&ok));
    let kind = |i: &Item| r.derived(i).unwrap_err().kind();
    assert_eq!(
        kind(&seat(n(4), AttributeValue::Bool(true), "b")),
        "InvalidValue"
    );
    assert_eq!(
        kind(&seat(s("2"), AttributeValue::Bool(true), "b")),
        "WrongType"
    );
    assert_eq!(
        kind(&seat(n(2), AttributeValue::Bool(false), "b")),
        "InvalidValue"
    );
    assert_eq!(
        kind(&seat(n(2), AttributeValue::Bool(true), "c")),
        "InvalidValue"
    );
    let msg = r
        .derived(&seat(n(4), AttributeValue::Bool(true), "b"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("not one of 1|2|3"), "{msg}");
    // One kind of value per enum.
    let p = compile(&TYPED.replace("[1, 2, 3]", "[1, two]"), "t").unwrap_err();
    assert_at(&p, (8, 14), "all strings, all integers or all booleans");
}

#[test]
fn error_messages_name_keys_and_reasons_never_values() {
    let r = rules(TYPED);
    // A CEL error over a value (a string that is not a number).
    let e = r
        .projection(&seat(n(2), AttributeValue::Bool(true), "1"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("PK=S#a") && e.contains("`int` failed"), "{e}");
    assert!(!e.contains("secret-label"), "never a value: {e}");
    // A value outside its enum, a wrong entity type.
    let r = rules(LIBRARY);
    let msg = r
        .derived(&loan("ann", B, "secret-state"))
        .unwrap_err()
        .to_string();
    assert!(!msg.contains("secret-state"), "{msg}");
    let mut i = loan("ann", B, "open");
    i.insert("type".into(), s("secret-type"));
    let msg = r.derived(&i).unwrap_err().to_string();
    assert!(
        msg.contains("expected `loan`") && !msg.contains("secret-type"),
        "{msg}"
    );
}

#[test]
fn a_comment_after_a_value_is_fine() {
    let text = LIBRARY.replace("jobstream: 1", "jobstream: 1 #v1");
    assert_eq!(compile(&text, "t").err(), None);
    let text = LIBRARY.replace("days: int", "days: int #todo");
    assert_eq!(compile(&text, "t").err(), None);
}

#[test]
fn a_via_an_index_needs_the_index_keys_projected_from_key_names() {
    let text = SOCIAL
        .replace(
            "  ttl: ttl\n",
            "  ttl: ttl\n  gsis:\n    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }\n",
        )
        .replace("via: follower }", "via: GSI1 }");
    let p = compile(&text, "t").unwrap_err();
    assert_says(&p, "`follow` projects no `GSI1PK`");
    let text = text.replace(
        "    derive:\n      - entity: follower\n",
        "    project:\n      attributes:\n        GSI1PK: \"u#${followed}#follower\"\n        GSI1SK: \"u#${follower}\"\n    derive:\n      - entity: follower\n",
    );
    assert_eq!(compile(&text, "t").err(), None);
    let bad = text.replace("GSI1SK: \"u#${follower}\"", "GSI1SK: \"${createdAt}\"");
    let p = compile(&bad, "t").unwrap_err();
    assert_says(&p, "`${createdAt}` is not one of its key names");
    // An index keyed by its partition key alone lists nothing: refused,
    // saying what to list by instead.
    let one = text.replace(
        "{ name: GSI1, pk: GSI1PK, sk: GSI1SK }",
        "{ name: GSI1, pk: GSI1PK }",
    );
    let p = compile(&one, "t").unwrap_err();
    assert_says(
        &p,
        "index `GSI1` is keyed by its partition key `GSI1PK` alone: a listing by an index reads both keys",
    );
}

/// A count, check or derive reading its own entity's counter sum passed
/// `check-model` and then failed every item at run time (`total` has no
/// value): sums are kept by jobstream after the record that changed them,
/// so they cannot feed another count.
#[test]
fn a_count_reading_its_own_counter_sum_is_refused_at_load() {
    let text = r#"jobstream: 1
name: shop
table: { name: shop, pk: PK, sk: SK }
entities:
  customer:
    key: { PK: "CUST#${customerId}", SK: "PROFILE" }
    attributes: { name: string }
    counter: { attributes: [spend], created_by: writer }
  order:
    key: { PK: "CUST#${customerId}", SK: "ORDER#${orderId}" }
    attributes: { orderId: string, status: [placed, cancelled] }
    unique: [orderId]
    counter: { attributes: [total], created_by: writer }
    check:
      - { expr: "total >= 0", message: "no negative total" }
    count:
      - counter: customer
        with: { customerId: customerId }
        add: { spend: "status != 'cancelled' ? total : 0" }
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${lineNo}" }
    attributes: { qty: int }
    count:
      - counter: order
        with: { orderId: orderId }
        add: { total: qty }
"#;
    let p = compile(text, "t").err().unwrap_or_default();
    let needle = "is a sum jobstream keeps on `order`";
    assert_eq!(
        p.iter().filter(|p| p.message.contains(needle)).count(),
        2,
        "{p:#?}"
    );
    assert_at(&p, (15, 18), "`total` in `total >= 0`");
    assert_at(&p, (19, 48), "a `compute:` value");
    // The same file reading an attribute instead compiles.
    let fixed = text
        .replace("? total : 0", "? 1 : 0")
        .replace("total >= 0", "true");
    assert_eq!(compile(&fixed, "t").err(), None);
}

/// A derived item whose key does not bind its source's whole key (a task's
/// mirror under its assignee, without the task's project) can be implied by
/// two tasks at once: refused at the derive's entity with what to do; the
/// same file with the project in the mirror's key, or the mirror `shared:
/// true`, compiles.
#[test]
fn a_derived_key_that_does_not_bind_its_sources_key_is_refused_unless_shared() {
    let text = r#"jobstream: 1
name: tasks
table: { name: tasks, pk: PK, sk: SK }
entities:
  task:
    key: { PK: "PROJECT#${projectId}", SK: "TASK#${taskId}" }
    attributes: { projectId: string, taskId: string, assignee: string }
    derive:
      - entity: assigned
        with: { assignee: assignee, taskId: taskId, project: projectId }
  assigned:
    owner: processor
    key: { PK: "USER#${assignee}", SK: "TASK#${taskId}" }
    attributes: { project: string }
"#;
    let p = compile(text, "t").err().unwrap_or_default();
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(
        &p,
        (9, 17),
        "derive `assigned`: its key does not bind `projectId` of `task`'s key",
    );
    assert_at(&p, (9, 17), "mark `assigned` `shared: true`");
    // An expression of the name is not the name (`lower(x)` maps two to one).
    let lowered = text
        .replace("USER#${assignee}\"", "USER#${assignee}#${p}\"")
        .replace(
            "project: projectId }",
            "project: projectId, p: \"lower(projectId)\" }",
        );
    let p = compile(&lowered, "t").err().unwrap_or_default();
    assert_at(&p, (9, 17), "does not bind `projectId`");
    let keyed = lowered.replace("lower(projectId)", "projectId");
    assert_eq!(compile(&keyed, "t").err(), None);
    let shared = text.replace("owner: processor", "owner: processor\n    shared: true");
    assert_eq!(compile(&shared, "t").err(), None);
}

/// Every shipped model file and example passes the rule above.
#[test]
fn the_shipped_files_bind_their_sources_keys_or_are_shared() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../models");
    for sub in ["", "/examples"] {
        for f in std::fs::read_dir(format!("{dir}{sub}")).unwrap() {
            let path = f.unwrap().path();
            let name = path.to_string_lossy().to_string();
            if !name.ends_with(".yaml") || name.ends_with(".scenario.yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(compile(&text, "t").err(), None, "{name}");
        }
    }
}

/// R03: an expression that cannot work on the declared types (a number
/// ordered against a time, a sum of text, a condition that is a number, a
/// function on the wrong type) is refused at load, at its line and column,
/// with a way out; at run time each would make every item bad input.
#[test]
fn expressions_are_type_checked_against_the_declared_attributes() {
    let refused = [
        (
            "state == 'open' && days > since",
            "when: \"state == 'open'\"",
            "> since",
            "`>` compares an int with a string",
        ),
        (
            "days",
            "when: \"state == 'open'\"",
            "days",
            "a condition must be a bool, but `days` is an int",
        ),
        (
            "lower(days) != ''",
            "when: \"state == 'open'\"",
            "days)",
            "`lower` takes a string, but it is given an int",
        ),
    ];
    for (expr, at, needle, why) in refused {
        let (text, place) = broken(LIBRARY, at, &format!("when: \"{expr}\""), needle);
        let p = problems(&text);
        assert_at(&p, place, why);
        assert_eq!(p.len(), 1, "{p:#?}");
    }
    // A sum that is text: named with the attribute it feeds.
    let (text, place) = broken(LIBRARY, "total: 1 }", "total: since }", "since }");
    assert_at(
        &problems(&text),
        place,
        "`add: { total: ... }` (a sum) must be an int, but `since` is a string",
    );
    let text = LIBRARY.replace("total: 1 }", "total: \"n${days}\" }");
    let p = compile(&text, "t").unwrap_err();
    assert!(p[0].message.contains("not a template"), "{p:#?}");
    // What works on its types still loads.
    let text = LIBRARY.replace("total: 1 }", "total: \"days > 7 ? days : 0\" }");
    assert_eq!(compile(&text, "t").err(), None);
}

/// R03: an expression that fails on one item (here an optional attribute
/// absent, which no load-time check can rule out) makes the item bad input
/// as a whole: none of its aspects applies (not its counts while its
/// derived item is refused), and each aspect asked alone says so too
/// (`verify` asks them one by one).
#[test]
fn an_item_an_expression_fails_on_is_bad_input_in_every_aspect() {
    let text = LIBRARY
        .replace(
            "      since: iso-utc\n    check:",
            "      since: iso-utc\n      note?: string\n    check:",
        )
        .replace(
            "      - entity: book_loan\n",
            "      - entity: book_loan\n        when: \"size(note) > 0\"\n",
        );
    let r = rules(&text);
    let mut noted = loan("ann", B, "open");
    noted.insert("note".into(), s("x"));
    let a = r.aspects(&noted);
    assert_eq!(a.derived.as_ref().map(Vec::len), Ok(1), "{a:?}");
    assert_eq!(a.contributions.as_ref().map(Vec::len), Ok(1), "{a:?}");
    let bare = loan("ann", B, "open");
    let a = r.aspects(&bare);
    let why = a.derived.as_ref().unwrap_err().to_string();
    assert!(why.contains("size"), "{why}");
    assert_eq!(
        a.contributions.as_ref().err(),
        a.derived.as_ref().err(),
        "{a:?}"
    );
    assert_eq!(
        a.projection.as_ref().err(),
        a.derived.as_ref().err(),
        "{a:?}"
    );
    assert_eq!(
        a.memberships.as_ref().err(),
        a.derived.as_ref().err(),
        "{a:?}"
    );
    assert!(r.contributions(&bare).is_err());
    assert!(r.projection(&bare).is_err());
    assert!(r.derived(&bare).is_err());
}

/// A table or index name CreateTable refuses is check-model's error, at its
/// place (user finding E4: `name: h` passed, then `serve` died with the
/// engine's ValidationException).
#[test]
fn a_table_or_index_name_dynamodb_refuses_is_refused_at_its_place() {
    let text = TYPED.replace(
        "table: { name: tbl, pk: PK, sk: SK }",
        "table: { name: h, pk: PK, sk: SK, gsis: [{ name: \"by level\", pk: G1PK, sk: G1SK }] }",
    );
    let p = compile(&text, "t").unwrap_err();
    assert_at(
        &p,
        (2, 16),
        "table name `h`: DynamoDB takes 3 to 255 characters",
    );
    let col = text.lines().nth(1).unwrap().find("\"by level\"").unwrap() as u64 + 1;
    assert_at(&p, (2, col), "index name `by level`");
}

/// What the processors write onto a writer's item (a projection, counter
/// sums, the history's mirror, computed values) is told from what a writer
/// changed, on valid and bad images alike: the derive counts a bad item's
/// processor-only MODIFY as no new bad input.
#[test]
fn a_change_of_processor_owned_attributes_only_is_told_from_a_writers() {
    let only = |model: &str, old: &Item, changes: &[(&str, Option<AttributeValue>)]| {
        let mut new = old.clone();
        for (a, v) in changes {
            match v {
                Some(v) => new.insert(a.to_string(), v.clone()),
                None => new.remove(*a),
            };
        }
        rules(model).processor_owned_only(old, &new)
    };
    // An employee (bad: no firstName) and its projection.
    let hr = include_str!("../../../models/hr.yaml");
    let mut emp = item(&[
        ("PK", s(format!("ORG#{B}"))),
        ("SK", s(format!("EMP#{B}"))),
        ("type", s("emp")),
        ("email", s("a@b.c")),
    ]);
    assert!(only(
        hr,
        &emp,
        &[("GSI1PK", Some(s("EMAIL#a@b.c"))), ("GSI1SK", Some(s("x")))]
    ));
    assert!(only(hr, &emp, &[("GSI1PK", None)]));
    assert!(!only(
        hr,
        &emp,
        &[("GSI1PK", Some(s("x"))), ("email", Some(s("b@b.c")))]
    ));
    assert!(!only(hr, &emp, &[("firstName", Some(s("Ann")))]));
    // A department's headcount (a writer's counter item).
    emp.insert("SK".into(), s(format!("DEPT#{B}")));
    assert!(only(hr, &emp, &[("headcount", Some(n(2)))]));
    // The tracker's history mirror and projection on an application.
    let tracker = include_str!("../../../models/tracker.yaml");
    let app = item(&[
        ("PK", s("APP#a")),
        ("SK", s("APP#a")),
        ("status", s("ghosted")),
    ]);
    assert!(only(
        tracker,
        &app,
        &[("historySequence", Some(n(3))), ("GSI2PK", None)]
    ));
    assert!(!only(tracker, &app, &[("status", Some(s("applied")))]));
    // A prediction's computed score.
    let pickem = include_str!("../../../models/pickem.yaml");
    let pred = item(&[("PK", s("USER#u")), ("SK", s("EVENT#2026-01-01-x"))]);
    assert!(only(
        pickem,
        &pred,
        &[("points", Some(n(3))), ("mcorrect", Some(n(1)))]
    ));
    assert!(!only(pickem, &pred, &[("predictions", Some(s("x")))]));
    // A key no entity has: every change is a writer's.
    let stray = item(&[("PK", s("NOPE#1")), ("SK", s("NOPE"))]);
    assert!(!only(hr, &stray, &[("GSI1PK", Some(s("x")))]));
}

/// A derive, a set or a once effect writing into an `owner: other` entity
/// (another writer's key space, declared by its key only) was refused as
/// "a writer entity", which says nothing of why: the message names the
/// key space for what it is.
#[test]
fn writes_into_a_key_space_another_writer_owns_are_refused_naming_it() {
    let base = "jobstream: 1\nname: t\ntable: { name: t, pk: PK, sk: SK }\nentities:\n  app:\n    key: { PK: \"APP#${id}\", SK: \"#META\" }\n    attributes: { id: string, status: [new, approved] }\nDERIVE  ext:\n    owner: other\n    key: { PK: \"EXT#${id}\", SK: \"#META\" }\nONCE";
    let derive = base
        .replace(
            "DERIVE",
            "    derive:\n      - entity: ext\n        with: { id: id }\n",
        )
        .replace("ONCE", "");
    assert_says(
        &problems(&derive),
        "app: derives `ext`, another writer's key space (`owner: other`): derived items must be `owner: processor`",
    );
    let once = base.replace("DERIVE", "").replace(
        "ONCE",
        "once:\n  approve:\n    \"on\": app\n    queue_name: jobstream-approve-jobs\n    when: \"status == 'approved'\"\n    key: \"${id}\"\n    put:\n      - entity: ext\n        with: { id: id }\n",
    );
    assert_says(
        &problems(&once),
        "once `approve`: put `ext`, another writer's key space (`owner: other`): a once effect writes `owner: processor` items",
    );
}

/// User12 finding 9b: the table's TTL attribute declared a string (an
/// `iso-utc`) passed; DynamoDB ignores a TTL that is not a number, so the
/// items never expired. Refused where it is declared; an `int` passes.
#[test]
fn the_tables_ttl_attribute_declared_other_than_a_number_is_refused() {
    let (text, place) = broken(
        LIBRARY,
        "      days: int\n",
        "      days: int\n      ttl: iso-utc\n",
        "iso-utc",
    );
    assert_at(
        &problems(&text),
        place,
        "loan.ttl: `ttl` is the table's TTL attribute",
    );
    let ok = LIBRARY.replace("      days: int\n", "      days: int\n      ttl: int?\n");
    assert!(problems(&ok).is_empty());
}
