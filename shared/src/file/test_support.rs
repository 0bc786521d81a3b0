//! What the loader's unit tests share: a file's problems and where they
//! are, its model and rules, and items to ask them about.

use aws_sdk_dynamodb::types::AttributeValue;

use super::model::Problem;
use super::rules::FileRules;
use super::{compile, FileModel};
use crate::item::Item;

/// Every problem `text` compiles with (none when it compiles).
pub(super) fn problems(text: &str) -> Vec<Problem> {
    compile(text, "t").err().unwrap_or_default()
}

/// The model of `text`, which must compile, for the rest of the run.
pub(super) fn model(text: &str) -> &'static FileModel {
    Box::leak(Box::new(
        compile(text, "t").unwrap_or_else(|p| panic!("{p:#?}")),
    ))
}

/// The rules of `text`, which must compile.
pub(super) fn rules(text: &str) -> FileRules {
    FileRules(model(text))
}

/// An item of `(name, value)` pairs.
pub(crate) fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// Line (1-based) and column of the first `needle` in `text`.
pub(super) fn position(text: &str, needle: &str) -> (u64, u64) {
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle}"));
    (i as u64 + 1, line.find(needle).expect("found") as u64 + 1)
}

/// `text` with `from` (which must occur once) replaced by `to`, and the
/// line and column where `at` (in `to`) then is.
pub(super) fn broken(text: &str, from: &str, to: &str, at: &str) -> (String, (u64, u64)) {
    assert_eq!(text.matches(from).count(), 1, "{from}");
    let text = text.replace(from, to);
    let start = text.find(to).expect("replaced") + to.find(at).expect("`at` in `to`");
    let line = text[..start].matches('\n').count() + 1;
    let col = start - text[..start].rfind('\n').map_or(0, |i| i + 1) + 1;
    (text, (line as u64, col as u64))
}

/// Whether a problem at `at` says `needle`.
pub(super) fn has(p: &[Problem], at: (u64, u64), needle: &str) -> bool {
    p.iter()
        .any(|p| (p.line, p.col) == at && p.message.contains(needle))
}

/// Asserts a problem at `at` says `needle`.
#[track_caller]
pub(super) fn assert_at(p: &[Problem], at: (u64, u64), needle: &str) {
    assert!(has(p, at, needle), "want {at:?} `{needle}` in {p:#?}");
}

/// Asserts a problem (wherever it is) says `needle`.
#[track_caller]
pub(super) fn assert_says(p: &[Problem], needle: &str) {
    assert!(
        p.iter().any(|p| p.message.contains(needle)),
        "want `{needle}` in {p:#?}"
    );
}
