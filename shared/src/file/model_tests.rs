//! `check-model`'s problems on seeded mistakes (line and column of each),
//! and the rules of a small model file on valid and bad items.

use aws_sdk_dynamodb::types::AttributeValue;

use super::rules::FileRules;
use super::{compile, Problem};
use crate::engine::rules::Rules;
use crate::item::{n, s, Item};

/// A small library: members borrow books; a member's loans are counted on
/// the member (processor-created counter item), a loan is mirrored under
/// its book, and open loans are in a sparse index.
pub const LIBRARY: &str = include_str!("../../../models/library.yaml");

const B: &str = "01HXAA0000000000000000000A";

fn rules(text: &str) -> FileRules {
    FileRules(Box::leak(Box::new(
        compile(text, "t").unwrap_or_else(|p| panic!("{p:#?}")),
    )))
}

fn loan(member: &str, book: &str, state: &str) -> Item {
    [
        ("PK", s(format!("M#{member}"))),
        ("SK", s(format!("LOAN#{book}"))),
        ("type", s("loan")),
        ("memberId", s(member)),
        ("bookId", s(book)),
        ("days", n(14)),
        ("state", s(state)),
        ("since", s("2026-01-01T00:00:00Z")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn a_valid_item_implies_its_projection_items_and_counts() {
    let r = rules(LIBRARY);
    let item = loan("ann", B, "open");
    let p = r.projection(&item).unwrap().unwrap();
    assert_eq!(
        p.attrs,
        vec![
            ("GSI1PK", Some(s("OPEN"))),
            ("GSI1SK", Some(s("2026-01-01T00:00:00Z#ann"))),
            ("due", Some(n(1_767_225_600 + 14 * 86_400))),
        ]
    );
    assert_eq!(p.sources, vec!["state", "since", "memberId", "days"]);
    let d = r.derived(&item).unwrap();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["PK"], s(format!("B#{B}")));
    assert_eq!(d[0]["SK"], s("M#ann"));
    assert_eq!(d[0]["since"], s("2026-01-01T00:00:00Z"));
    assert_eq!(d[0]["type"], s("book_loan"));
    assert_eq!(d[0].len(), 4);
    let c = r.contributions(&item).unwrap();
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
    let counter: Item = [
        ("PK".to_string(), s("M#ann")),
        ("SK".to_string(), s("COUNT")),
    ]
    .into();
    assert!(r.counter(&counter).is_some());
    assert!(!r.ignores(&counter));
    let mirror: Item = [
        ("PK".to_string(), s(format!("B#{B}"))),
        ("SK".to_string(), s("M#ann")),
    ]
    .into();
    assert!(r.ignores(&mirror));
    let bad_mirror: Item = [
        ("PK".to_string(), s("B#nope")),
        ("SK".to_string(), s("M#ann")),
    ]
    .into();
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
    let unknown: Item = [("PK".to_string(), s("X")), ("SK".to_string(), s("Y"))].into();
    assert_eq!(kind(&unknown), "UnknownEntity");
    let no_sk: Item = [("PK".to_string(), s("X"))].into();
    assert_eq!(kind(&no_sk), "MissingAttribute");
    let msg = r.derived(&loan("ann", B, "lost")).unwrap_err().to_string();
    assert!(msg.contains("PK=M#ann") && msg.contains("state"), "{msg}");
    assert!(!msg.contains("2026-01-01"), "never the item: {msg}");
    // A set attribute: absent is the empty set; a list is the wrong type.
    let mut m: Item = [
        ("PK", s("M#ann")),
        ("SK", s("PROFILE")),
        ("type", s("member")),
        ("memberId", s("ann")),
        ("name", s("Ann")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert!(r.derived(&m).is_ok());
    m.insert("tags".into(), AttributeValue::L(vec![]));
    assert_eq!(kind(&m), "WrongType");
}

/// The problems of `text` with LIBRARY's line `line` replaced.
fn problems_with(line: usize, replacement: &str) -> Vec<Problem> {
    let mut lines: Vec<&str> = LIBRARY.lines().collect();
    lines[line - 1] = replacement;
    let text = lines.join("\n") + "\n";
    compile(&text, "t").err().unwrap_or_default()
}

fn line_of(needle: &str) -> usize {
    LIBRARY
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle}"))
        + 1
}

fn assert_one(p: &[Problem], line: usize, col: u64, needle: &str) {
    assert!(
        p.iter()
            .any(|p| p.line as usize == line && p.col == col && p.message.contains(needle)),
        "want {line}:{col} `{needle}` in {p:#?}"
    );
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
    assert_one(&p, l, 16, "unknown name `dayz`");
    assert_one(&p, l, 16, "did you mean `days`?");
    // An unknown function.
    let l = line_of("GSI1SK: \"${since}");
    let p = problems_with(l, "        GSI1SK: \"${lowr(since)}#${memberId}\"");
    assert_one(&p, l, 20, "unknown function `lowr`");
    assert_one(&p, l, 20, "did you mean `lower`?");
    // An unknown entity, with a suggestion.
    let l = line_of("- entity: book_loan");
    let p = problems_with(l, "      - entity: book_lone");
    assert_one(&p, l, 17, "unknown entity `book_lone`");
    assert_one(&p, l, 17, "did you mean `book_loan`?");
    // An unbound key name of a derived item.
    let l = line_of("with: { bookId: bookId, memberId");
    let p = problems_with(l, "        with: { bookId: bookId, since: since }");
    assert_one(&p, l - 1, 9, "`${memberId}` of its key is unbound");
    // An unknown type.
    let l = line_of("days: int");
    let p = problems_with(l, "      days: integer");
    assert_one(&p, l, 13, "unknown type `integer`");
    // A counter attribute the counter does not keep.
    let l = line_of("add: { open:");
    let p = problems_with(l, "        add: { opne: 1, total: 1 }");
    assert_one(&p, l, 22, "`opne` is not an attribute of counter `loans`");
    // An unquoted `#`: a comment, the value is empty.
    let l = line_of("key: { PK: \"M#${memberId}\", SK: \"PROFILE\" }");
    let p = problems_with(l, "    key: { PK: \"M#${memberId}\", SK: #PROFILE }");
    assert_one(&p, l, 37, "`#PROFILE` is a comment");
    assert_one(&p, l, 37, "quote it (\"#PROFILE\")");
    // A misspelt field.
    let l = line_of("memberId: string");
    let p = problems_with(l - 1, "    atributes:");
    assert!(
        p.iter()
            .any(|p| p.line as usize == l - 1 && p.message.contains("did you mean `attributes`?")),
        "{p:#?}"
    );
    // A CEL syntax error points inside the expression.
    let l = line_of("when: \"state == 'open'\"");
    let p = problems_with(l, "      when: \"state == \"");
    assert!(
        p.iter()
            .any(|p| p.line as usize == l && p.col >= 13 && p.message.contains("cannot parse")),
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
    assert!(
        p.iter()
            .any(|p| p.message.contains("both match the key PK=M#x, SK=PROFILE")),
        "{p:#?}"
    );
}

#[test]
fn reserved_blocks_and_versions_are_refused_clearly() {
    let p = compile(&format!("{LIBRARY}once:\n  mail: {{}}\n"), "t").unwrap_err();
    assert!(
        p.iter().any(|p| p.message.contains("`once:` is reserved")),
        "{p:#?}"
    );
    // `sets:` is read now: an entry without its target is refused.
    let p = compile(&format!("{LIBRARY}sets:\n  timeline: {{}}\n"), "t").unwrap_err();
    assert!(
        p.iter()
            .any(|p| p.message.contains("missing field `entity`")),
        "{p:#?}"
    );
    let p = compile(&LIBRARY.replace("jobstream: 1", "jobstream: 2"), "t").unwrap_err();
    let l = line_of("jobstream: 1");
    assert_one(&p, l, 12, "unsupported format version 2");
}
