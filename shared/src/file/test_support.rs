//! What the loader's unit tests share: a file's problems and where they are.

use super::compile;
use super::model::Problem;

/// Every problem `text` compiles with (none when it compiles).
pub(super) fn problems(text: &str) -> Vec<Problem> {
    compile(text, "t").err().unwrap_or_default()
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

/// Whether a problem at `at` says `needle`.
pub(super) fn has(p: &[Problem], at: (u64, u64), needle: &str) -> bool {
    p.iter()
        .any(|p| (p.line, p.col) == at && p.message.contains(needle))
}
