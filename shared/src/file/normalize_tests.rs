//! Formats that normalise a value in keys (`formats: { city: { normalize:
//! dashed } }`, `${city:city}`): what check-model refuses, with line:col
//! and suggestions, and what the rules make of items.

use super::test_support::{assert_at, position, problems, rules};
use crate::engine::rules::Rules;
use crate::item::{s, Item};

const BOARD: &str = r#"jobstream: 1
name: cities
table:
  name: cities
  pk: pk
  sk: sk
  entity_type: entityType
  gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }]
formats:
  city: { normalize: dashed }
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  job:
    key: { pk: "job#${city:city}", sk: "j#${jobId:id}" }
    attributes:
      city: string
  seeker:
    key: { pk: "seeker#${seekerId:id}", sk: "profile" }
    attributes:
      city: city
    project:
      attributes:
        GSI1PK: "city#${dashed(city)}"
        GSI1SK: "seeker#${seekerId}"
  suggestion:
    owner: processor
    key: { pk: "job#${city}", sk: "s#${jobId}#${seekerId}" }
"#;

fn item(pairs: &[(&str, &str)]) -> Item {
    pairs.iter().map(|(k, v)| (k.to_string(), s(*v))).collect()
}

/// Job 101 under the key `pk`, in `city`.
fn job(pk: &str, city: &str) -> Item {
    item(&[
        ("pk", pk),
        ("sk", "j#101"),
        ("entityType", "job"),
        ("jobId", "101"),
        ("city", city),
    ])
}

#[test]
fn the_board_compiles() {
    assert_eq!(problems(BOARD), vec![]);
}

#[test]
fn a_key_holds_the_normalised_value_and_the_attribute_keeps_its_own() {
    let r = rules(BOARD);
    assert!(r.projection(&job("job#new-york", " New  York ")).is_ok());
    assert!(r.projection(&job("job#st.-john's", "St. John's")).is_ok());
    let why = r
        .projection(&job("job#New York", "New York"))
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("keys do not match the attributes (expected pk=job#new-york"),
        "{why}"
    );
    let why = r
        .projection(&job("job#newyork", "New York"))
        .unwrap_err()
        .to_string();
    assert!(why.contains("expected pk=job#new-york"), "{why}");
}

#[test]
fn an_attribute_of_a_normalising_format_is_any_string_its_projection_normalises() {
    let r = rules(BOARD);
    let seeker = item(&[
        ("pk", "seeker#201"),
        ("sk", "profile"),
        ("entityType", "seeker"),
        ("seekerId", "201"),
        ("city", "San Francisco"),
    ]);
    let p = r.projection(&seeker).unwrap().unwrap();
    assert_eq!(p.attrs[0], ("GSI1PK", Some(s("city#san-francisco"))));
}

#[test]
fn a_normalising_format_is_checked_at_load() {
    let text = BOARD.replace("normalize: dashed", "normalize: dashes");
    let p = problems(&text);
    let (l, c) = position(&text, "dashes");
    assert_at(&p, (l, c), "format `city`: normalize `dashes` is not one of lower, upper, trim, slug, dashed (did you mean `dashed`?)");
    let text = BOARD.replace("city: { normalize: dashed }", "city: { max_bytes: 9 }");
    let p = problems(&text);
    let (l, c) = position(&text, "city: { max_bytes");
    assert_at(
        &p,
        (l, c + "city: ".len() as u64),
        "format `city`: give it a `pattern`, a `normalize`, or both",
    );
}

#[test]
fn a_pattern_applies_to_the_normalised_value() {
    let text = BOARD.replace(
        "city: { normalize: dashed }",
        "city: { normalize: dashed, pattern: \"^[a-z-]+$\" }",
    );
    let r = rules(&text);
    // `city` of the job is a plain string; the key binder's format applies.
    assert!(r.projection(&job("job#new-york", "New York")).is_ok());
    let why = r
        .projection(&job("job#new-york-2", "New York 2"))
        .unwrap_err()
        .to_string();
    assert!(why.contains("not a `city`"), "{why}");
}
