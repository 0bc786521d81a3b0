//! `each:` on a derive and a count (`models/examples/qa_tags.yaml`): what
//! `check-model` refuses, and what the rules make of an item's elements.

use super::test_support::{assert_at, assert_says, broken, item, position, problems, rules};
use crate::engine::rules::Rules;
use crate::error::InputError;
use crate::item::{display_key, key_of, s, Item, ItemExt};
use aws_sdk_dynamodb::types::AttributeValue;

const QA: &str = include_str!("../../../models/examples/qa_tags.yaml");

/// The counter's key (not the query's, which reads the same).
const STATS_KEY: &str = "key: { PK: \"TAG#${tag}\", SK: \"STATS\" }\n    counter:";

fn question(tags: Option<AttributeValue>, status: &str) -> Item {
    let mut q = item(&[
        ("PK", s("Q#q1")),
        ("SK", s("QUESTION")),
        ("type", s("question")),
        ("qid", s("q1")),
        ("title", s("How?")),
        ("status", s(status)),
        ("askedAt", s("2026-11-28T10:00:00Z")),
    ]);
    if let Some(t) = tags {
        q.insert("tags".into(), t);
    }
    q
}

fn set(tags: &[&str]) -> AttributeValue {
    AttributeValue::Ss(tags.iter().map(|t| t.to_string()).collect())
}

fn list(tags: Vec<AttributeValue>) -> AttributeValue {
    AttributeValue::L(tags)
}

/// Each counter a contribution counts into, with its amounts, sorted.
fn counted(r: &super::rules::FileRules, image: &Item) -> Vec<(String, Vec<(String, i64)>)> {
    let mut out: Vec<_> = r
        .contributions(image)
        .unwrap()
        .into_iter()
        .map(|c| {
            let amounts = c.values.iter().map(|(a, n)| (a.to_string(), *n)).collect();
            (display_key(&c.counter.key_item()), amounts)
        })
        .collect();
    out.sort();
    out
}

fn derived_keys(r: &super::rules::FileRules, image: &Item) -> Vec<String> {
    let mut out: Vec<String> = r
        .derived(image)
        .unwrap()
        .iter()
        .map(|d| display_key(&key_of(d, &["PK", "SK"])))
        .collect();
    out.sort();
    out
}

#[test]
fn the_example_compiles_and_bounds_its_tags() {
    let r = rules(QA);
    let q = r.0.entity("question").unwrap();
    let budget = r.0.entities[q].each.as_ref().expect("a budget");
    // Its record, then per tag a counter total and a derived item, each
    // written twice by a change that replaces every tag: 1 + 4n <= 100.
    assert_eq!(budget.fixed, 1);
    assert_eq!(budget.per_element, vec![("tags", 2)]);
    assert_eq!(budget.max_alone("tags"), 24);
    assert_eq!(budget.actions(&[("tags", 24)]), 97);
    // `check-model` prints it.
    assert!(
        r.0.notes().iter().any(|n| n.starts_with(
            "each question.tags: an item holds at most 24 distinct elements; more is bad input"
        )),
        "{:?}",
        r.0.notes()
    );
}

#[test]
fn each_tag_is_counted_and_listed_once() {
    let r = rules(QA);
    let q = question(Some(set(&["rust", "dynamodb"])), "open");
    let both = |n: i64| vec![("questions".to_string(), 1), ("open".to_string(), n)];
    assert_eq!(
        counted(&r, &q),
        vec![
            ("PK=TAG#dynamodb, SK=STATS".to_string(), both(1)),
            ("PK=TAG#rust, SK=STATS".to_string(), both(1)),
        ]
    );
    assert_eq!(
        derived_keys(&r, &q),
        vec![
            "PK=TAG#dynamodb, SK=Q#2026-11-28T10:00:00Z#q1",
            "PK=TAG#rust, SK=Q#2026-11-28T10:00:00Z#q1",
        ]
    );
    // The derived item: its key, the values bound, the stamp; nothing else.
    let d = r.derived(&q).unwrap();
    let rust = d.iter().find(|i| i.s("PK").unwrap() == "TAG#rust").unwrap();
    assert_eq!(rust.len(), 7, "{rust:?}");
    assert_eq!(rust.s("type").unwrap(), "tag_question");
    assert_eq!(rust.s("title").unwrap(), "How?");
    assert_eq!(rust.s("status").unwrap(), "open");
    // A closed question is still counted per tag, not as open.
    let closed = question(Some(set(&["rust"])), "closed");
    assert_eq!(
        counted(&r, &closed),
        vec![("PK=TAG#rust, SK=STATS".to_string(), both(0))]
    );
}

#[test]
fn an_absent_or_empty_attribute_applies_the_rule_to_nothing() {
    let text = QA.replace("      tags: set\n", "      tags: set?\n");
    let r = rules(&text);
    for q in [question(None, "open"), question(Some(list(vec![])), "open")] {
        let text2 = text.replace("tags: set?", "tags: list?");
        let r2 = rules(&text2);
        assert!(counted(&r, &question(None, "open")).is_empty());
        assert!(derived_keys(&r, &question(None, "open")).is_empty());
        assert!(counted(&r2, &q).is_empty());
        assert!(derived_keys(&r2, &q).is_empty());
    }
}

#[test]
fn a_list_counts_each_distinct_string_once_and_refuses_another_element() {
    let text = QA.replace("      tags: set\n", "      tags: list\n");
    let r = rules(&text);
    let twice = question(Some(list(vec![s("rust"), s("go"), s("rust")])), "open");
    assert_eq!(
        derived_keys(&r, &twice),
        vec![
            "PK=TAG#go, SK=Q#2026-11-28T10:00:00Z#q1",
            "PK=TAG#rust, SK=Q#2026-11-28T10:00:00Z#q1",
        ]
    );
    assert_eq!(counted(&r, &twice).len(), 2);
    let numbered = question(
        Some(list(vec![s("rust"), AttributeValue::N("7".into())])),
        "open",
    );
    let a = r.aspects(&numbered);
    let Err(InputError::Invalid { key, reason }) = &a.contributions else {
        panic!("{:?}", a.contributions);
    };
    assert_eq!(key, "PK=Q#q1, SK=QUESTION");
    assert!(
        reason.contains("`tags`[1] is a int, not a string"),
        "{reason}"
    );
    // Bad input as a whole: no count, no listing, no other aspect.
    assert!(a.derived.is_err() && a.projection.is_err());
}

#[test]
fn an_item_with_more_elements_than_a_transaction_takes_is_bad_input_naming_the_limit() {
    let r = rules(QA);
    let tags: Vec<String> = (0..25).map(|i| format!("t{i:02}")).collect();
    let refs: Vec<&str> = tags.iter().map(String::as_str).collect();
    let ok = question(Some(set(&refs[..24])), "open");
    assert_eq!(counted(&r, &ok).len(), 24);
    assert_eq!(derived_keys(&r, &ok).len(), 24);
    let over = question(Some(set(&refs)), "open");
    let a = r.aspects(&over);
    let Err(InputError::Invalid { key, reason }) = &a.contributions else {
        panic!("{:?}", a.contributions);
    };
    assert_eq!(key, "PK=Q#q1, SK=QUESTION");
    assert!(
        reason.contains(
            "`tags` holds 25 distinct elements, over the 24 an item of `question` may hold"
        ),
        "{reason}"
    );
    assert!(
        reason.contains("100 actions") && reason.contains("(101 actions)"),
        "{reason}"
    );
    assert!(!reason.contains("t07"), "never the values: {reason}");
    assert!(a.derived.is_err(), "never a partial count or listing");
    // A list of 25 with a tag twice holds 24 distinct: fine.
    let text = QA.replace("      tags: set\n", "      tags: list\n");
    let r = rules(&text);
    let mut l: Vec<AttributeValue> = refs[..24].iter().map(|t| s(*t)).collect();
    l.push(s("t00"));
    assert_eq!(counted(&r, &question(Some(list(l)), "open")).len(), 24);
}

#[test]
fn when_with_and_add_read_the_element_as_a_string() {
    let text = QA.replace(
        "        add: { questions: 1, open: \"status == 'open' ? 1 : 0\" }",
        "        add: { questions: \"size(tag)\", open: \"status == 'open' ? 1 : 0\" }\n        when: \"!tag.startsWith('meta-')\"",
    );
    let r = rules(&text);
    let q = question(Some(set(&["meta-faq", "rust"])), "open");
    assert_eq!(
        counted(&r, &q),
        vec![(
            "PK=TAG#rust, SK=STATS".to_string(),
            vec![("questions".to_string(), 4), ("open".to_string(), 1)]
        )]
    );
    // A string is no int.
    let (text, at) = broken(QA, "add: { questions: 1,", "add: { questions: tag,", "tag,");
    let p = problems(&text);
    assert_at(&p, at, "must be an int");
    let (text, at) = broken(
        QA,
        "        with: { tag: tag }\n",
        "        with: { tag: tag }\n        when: \"tag > 3\"\n",
        "tag > 3",
    );
    assert_says(&problems(&text), "tag");
    assert!(!problems(&text).is_empty(), "{at:?}");
}

/// Elements whose counter key (or derived key) is one, through a format
/// that normalises them alike, count once (the first element's) and list
/// once: one rule never counts one item twice for one source.
#[test]
fn elements_a_key_format_makes_one_are_counted_and_listed_once() {
    let text = QA
        .replace(
            "entities:\n",
            "formats:\n  tag: { pattern: \"^.+$\", normalize: lower }\n\nentities:\n",
        )
        .replace(STATS_KEY, &STATS_KEY.replace("${tag}", "${tag:tag}"))
        .replace(
            "PK: \"TAG#${tag}\", SK: \"Q#",
            "PK: \"TAG#${tag:tag}\", SK: \"Q#",
        );
    let r = rules(&text);
    let q = question(Some(set(&["Rust", "rust", "go"])), "open");
    assert_eq!(
        counted(&r, &q)
            .iter()
            .map(|(k, a)| (k.as_str(), a[0].1))
            .collect::<Vec<_>>(),
        vec![("PK=TAG#go, SK=STATS", 1), ("PK=TAG#rust, SK=STATS", 1)]
    );
    assert_eq!(derived_keys(&r, &q).len(), 2);
    // An element the counter's key format rejects, or an empty one: the
    // question is bad input, no total moves.
    let strict = text.replace("pattern: \"^.+$\"", "pattern: \"^[a-z]+$\"");
    let r = rules(&strict);
    for (tags, says) in [
        (
            ["c++", "go"],
            "it counts into PK=TAG#c++, SK=STATS, a key `tag_stats` rejects",
        ),
        (["", "go"], "`tag` of tag_question's key is empty"),
    ] {
        let a = r.aspects(&question(Some(set(&tags)), "open"));
        let Err(InputError::Invalid { reason, .. }) = &a.contributions else {
            panic!("{:?}", a.contributions);
        };
        assert!(reason.contains(says), "{reason}");
        assert!(a.derived.is_err());
    }
}

/// Before `each:`, a `with` that bound a key name to a whole set loaded
/// and keyed one item by the elements joined by commas (`TAG#go,rust`),
/// or, through a format, was refused without a word of what to write.
#[test]
fn a_with_binding_a_whole_set_to_a_key_name_is_refused_saying_each() {
    let (text, at) = broken(
        QA,
        "        each: { tag: tags }\n        with: { tag: tag }\n",
        "        with: { tag: tags }\n",
        "tags }",
    );
    let p = problems(&text);
    assert_at(
        &p,
        at,
        "question: count `tag_stats`: `tag` of its key is bound to `tags`, a `set`",
    );
    assert_at(
        &p,
        at,
        "write `each: { tag: tags }` and bind `tag: tag` under `with`",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
    let (text, at) = broken(
        QA,
        "        each: { tag: tags }\n        with: { tag: tag, askedAt",
        "        with: { tag: tags, askedAt",
        "tags, askedAt",
    );
    let p = problems(&text);
    assert_at(
        &p,
        at,
        "question: derive `tag_question`: `tag` of its key is bound to `tags`, a `set`",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
    // Through a key format (user's report: "must be a `id`, but `tags`
    // is a `set`", with no word of `each:`).
    let text = QA
        .replace(
            "entities:\n",
            "formats:\n  id: { pattern: \"^[a-z0-9-]+$\" }\n\nentities:\n",
        )
        .replace(STATS_KEY, &STATS_KEY.replace("${tag}", "${tag:id}"))
        .replace(
            "        each: { tag: tags }\n        with: { tag: tag }\n",
            "        with: { tag: tags }\n",
        );
    let p = problems(&text);
    assert_says(&p, "write `each: { tag: tags }`");
    assert_eq!(p.len(), 1, "{p:#?}");
}

#[test]
fn an_each_check_model_refuses_names_what_to_write() {
    let cases = [
        // The element hides an attribute.
        (
            "each: { tag: tags }\n        with: { tag: tag }",
            "each: { title: tags }\n        with: { tag: title }",
            "title: tags",
            "`title` is already a name of `question`",
        ),
        // Not a set or a list.
        (
            "each: { tag: tags }\n        with: { tag: tag }",
            "each: { tag: title }\n        with: { tag: tag }",
            "title }",
            "`title` is a `string`; `each:` reads the elements of a `set` or a `list`",
        ),
        // No such attribute.
        (
            "each: { tag: tags }\n        with: { tag: tag }",
            "each: { tag: tag_list }\n        with: { tag: tag }",
            "tag_list }",
            "`tag_list` is not an attribute of `question`",
        ),
        // Two at once.
        (
            "each: { tag: tags }\n        with: { tag: tag }",
            "each: { tag: tags, t: tags }\n        with: { tag: tag }",
            "{ tag: tags, t",
            "`each:` names one element",
        ),
    ];
    for (from, to, at, says) in cases {
        let (text, pos) = broken(QA, from, to, at);
        let p = problems(&text);
        assert!(
            p.iter()
                .any(|x| x.message.contains(says) && (x.line, x.col) <= pos && x.line == pos.0),
            "want `{says}` at {pos:?} in {p:#?}"
        );
    }
}

/// A key that ignores the element would count every element into one
/// counter (or imply one item for all): refused at load.
#[test]
fn a_rule_whose_key_does_not_bind_the_element_is_refused() {
    let text = QA.replace(
        "        each: { tag: tags }\n        with: { tag: tag }\n",
        "        each: { tag: tags }\n        with: { tag: \"'all'\" }\n",
    );
    let p = problems(&text);
    let (line, _) = position(&text, "      - counter: tag_stats");
    assert_at(
        &p,
        (line, 9),
        "question: count `tag_stats` with `each: { tag: tags }`: no name of `tag_stats`'s key is bound to `tag` as it is, so every element of `tags` would count into one `tag_stats` item",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
    let text = QA.replace(
        "with: { tag: tag, askedAt",
        "with: { tag: \"lower(tag)\", askedAt",
    );
    let p = problems(&text);
    assert_says(&p, "derive `tag_question` with `each: { tag: tags }`: no name of `tag_question`'s key is bound to `tag` as it is");
}

/// A derived item keyed by the tag alone is implied by every question of
/// the tag: the rule of today (its key must bind the source's key, or it
/// is `shared: true`) still catches it through `each:`.
#[test]
fn a_derived_item_of_the_element_alone_must_be_shared() {
    let text = QA.replace(
        "key: { PK: \"TAG#${tag}\", SK: \"Q#${askedAt}#${qid}\" }",
        "key: { PK: \"TAG#${tag}\", SK: \"LATEST\" }",
    );
    let p = problems(&text);
    assert_says(
        &p,
        "question: derive `tag_question`: its key does not bind `qid` of `question`'s key",
    );
    let shared = text.replace(
        "  tag_question:\n    owner: processor\n",
        "  tag_question:\n    owner: processor\n    shared: true\n",
    );
    assert!(problems(&shared).is_empty(), "{:#?}", problems(&shared));
    // Shared, each element costs its owner record and head too: 1 + 2 * 4n.
    let r = rules(&shared);
    let q = r.0.entity("question").unwrap();
    assert_eq!(r.0.entities[q].each.as_ref().unwrap().max_alone("tags"), 12);
}

/// Two derives of one item over two attributes imply it twice from one
/// question whose sets share an element: refused unless it is shared.
#[test]
fn two_each_derives_of_one_item_over_two_attributes_must_be_shared() {
    let text = QA
        .replace("      tags: set\n", "      tags: set\n      topics: set\n")
        .replace(
            "    count:\n",
            "      - entity: tag_question\n        each: { tag: topics }\n        with: { tag: tag, askedAt: askedAt, qid: qid, title: title, status: status }\n    count:\n",
        );
    let p = problems(&text);
    assert_says(&p, "twice from one `question` item whose `tags` and `topics` hold one element: derive from one attribute, or mark `tag_question` `shared: true`");
    assert_eq!(p.len(), 1, "{p:#?}");
    let shared = text.replace(
        "  tag_question:\n    owner: processor\n",
        "  tag_question:\n    owner: processor\n    shared: true\n",
    );
    assert!(problems(&shared).is_empty(), "{:#?}", problems(&shared));
    let r = rules(&shared);
    let mut q = question(Some(set(&["rust", "go"])), "open");
    q.insert("topics".into(), set(&["rust"]));
    assert_eq!(derived_keys(&r, &q).len(), 3, "rust twice, one item");
}

/// A count into a parent found by its identity (`unique:`) per element: a
/// reminder sent about several invoices counts on each; its identity must
/// be the element as it is.
#[test]
fn a_located_counter_is_counted_once_per_element_of_its_identity() {
    let invoices = include_str!("../../../models/examples/invoices.yaml");
    assert!(invoices.ends_with("add: { total: amount, lines: 1 }\n"));
    let text = format!(
        "{invoices}\n  reminder:\n    key: {{ PK: \"REMINDER#${{reminderId}}\", SK: \"R\" }}\n    attributes: {{ reminderId: id, invoices: set }}\n    count:\n      - counter: invoice\n        each: {{ inv: invoices }}\n        with: {{ invoiceId: inv }}\n        add: {{ lines: 0, total: 0 }}\n"
    );
    let r = rules(&text);
    let reminder = item(&[
        ("PK", s("REMINDER#r1")),
        ("SK", s("R")),
        ("type", s("reminder")),
        ("reminderId", s("r1")),
        ("invoices", set(&["i-1", "i-2"])),
    ]);
    let keys: Vec<String> = r
        .contributions(&reminder)
        .unwrap()
        .iter()
        .map(|c| display_key(&c.counter.key_item()))
        .collect();
    assert_eq!(
        keys,
        vec!["PK=@invoice, SK=[\"i-1\"]", "PK=@invoice, SK=[\"i-2\"]"]
    );
    // The whole set bound to the identity: write `each:`.
    let whole = text.replace(
        "        each: { inv: invoices }\n        with: { invoiceId: inv }",
        "        with: { invoiceId: invoices }",
    );
    let p = problems(&whole);
    assert_says(
        &p,
        "reminder: count `invoice`: `invoiceId` of its identity is bound to `invoices`, a `set`",
    );
    assert_says(&p, "write `each: { invoiceId: invoices }`");
    assert_eq!(p.len(), 1, "{p:#?}");
    let refused = text.replace("with: { invoiceId: inv }", "with: { invoiceId: \"'i-1'\" }");
    assert_says(
        &problems(&refused),
        "reminder: count `invoice` with `each: { inv: invoices }`: no name of `invoice`'s identity (`unique:`) is bound to `inv` as it is",
    );
}
