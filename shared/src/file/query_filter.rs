//! The filter of a declared query: a DynamoDB filter expression (applied
//! by DynamoDB after the key condition, before the items come back) whose
//! attribute names are written plainly and aliased here (`status` is a
//! reserved word), and whose values are `:name` placeholders (a parameter
//! or a `values:` entry). DynamoDB's syntax rather than CEL: the filter runs
//! where the items are, pages stay pages, and a filter a design already
//! has (`attribute_not_exists(belongsto) OR belongsto = :u`) is written as
//! its author wrote it.

use super::model::suggest;

/// A filter expression ready to send: attribute names aliased (`#f0`),
/// placeholders renamed (`:v_<name>`).
#[derive(Debug)]
pub struct Filter {
    pub source: String,
    pub expression: String,
    /// Alias -> attribute name.
    pub names: Vec<(String, String)>,
    /// The placeholders it reads (parameters or `values:`), without `:`.
    pub placeholders: Vec<String>,
}

/// The functions of DynamoDB's filter expressions.
const FILTER_FUNCTIONS: &[&str] = &[
    "attribute_exists",
    "attribute_not_exists",
    "attribute_type",
    "begins_with",
    "contains",
    "size",
];
const FILTER_KEYWORDS: &[&str] = &["AND", "OR", "NOT", "BETWEEN", "IN"];

/// Parses a filter expression: attribute names aliased, placeholders
/// renamed. Errors: (character offset, message).
pub fn parse_filter(src: &str) -> Result<Filter, (usize, String)> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::new();
    let mut names: Vec<(String, String)> = Vec::new();
    let mut placeholders: Vec<String> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    let word_at = |from: usize| -> usize {
        let mut j = from;
        while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            out.push(c);
            i += 1;
            continue;
        }
        if c == ':' {
            let end = word_at(i + 1);
            if end == i + 1 {
                return Err((i, "`:` starts a placeholder (`:name`)".into()));
            }
            let name: String = chars[i + 1..end].iter().collect();
            out.push_str(&format!(":v_{name}"));
            if !placeholders.contains(&name) {
                placeholders.push(name);
            }
            i = end;
            continue;
        }
        if c == '#' {
            return Err((
                i,
                "write the attribute's name as is (`status`, not `#status`): names are aliased when the query runs".into(),
            ));
        }
        if c.is_ascii_digit() {
            return Err((
                i,
                "a literal value: values are placeholders (`:name`, a parameter or a `values:` entry)".into(),
            ));
        }
        if c.is_alphabetic() || c == '_' {
            let end = word_at(i);
            let word: String = chars[i..end].iter().collect();
            let next = chars[end..].iter().find(|c| !c.is_whitespace());
            if FILTER_KEYWORDS.contains(&word.to_uppercase().as_str()) && !operand_expected(&out) {
                out.push_str(&word.to_uppercase());
            } else if next == Some(&'(') {
                if !FILTER_FUNCTIONS.contains(&word.as_str()) {
                    let hint = suggest(&word, FILTER_FUNCTIONS.iter().copied()).unwrap_or_default();
                    return Err((
                        i,
                        format!(
                            "unknown function `{word}`{hint} (one of {})",
                            FILTER_FUNCTIONS.join(", ")
                        ),
                    ));
                }
                out.push_str(&word);
            } else {
                // An attribute path: `a`, `a.b`, `a[0].b`.
                let alias = match names.iter().find(|(_, n)| *n == word) {
                    Some((a, _)) => a.clone(),
                    None => {
                        let a = format!("#f{}", names.len());
                        names.push((a.clone(), word.clone()));
                        a
                    }
                };
                out.push_str(&alias);
            }
            i = end;
            continue;
        }
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err((i, "a `)` without its `(`".into()));
                }
            }
            '=' | '<' | '>' | ',' | '.' | '[' | ']' => {}
            _ => return Err((i, format!("`{c}` is not part of a filter expression"))),
        }
        if c == '[' {
            // A list index: digits up to `]`.
            let end = (i + 1..chars.len()).find(|k| chars[*k] == ']');
            let Some(end) = end else {
                return Err((i, "a `[` without its `]`".into()));
            };
            let inner: String = chars[i + 1..end].iter().collect();
            if inner.is_empty() || !inner.chars().all(|c| c.is_ascii_digit()) {
                return Err((i, "a list index is a number (`a[0]`)".into()));
            }
            out.push('[');
            out.push_str(&inner);
            out.push(']');
            i = end + 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    if depth != 0 {
        return Err((chars.len(), "a `(` without its `)`".into()));
    }
    if names.is_empty() {
        return Err((0, "a filter reads at least one attribute".into()));
    }
    Ok(Filter {
        source: src.to_string(),
        expression: out.trim().to_string(),
        names,
        placeholders,
    })
}

/// After `.`, a keyword-like word is an attribute (`a.status`... `a.in`).
fn operand_expected(out: &str) -> bool {
    out.ends_with('.')
}
