//! How a model file's and a scenario file's YAML is read: bounded first,
//! then typed.
//!
//! A file is refused before any typed reading when it is larger than
//! [`MAX_FILE_BYTES`], or when its YAML nests deeper than [`MAX_DEPTH`] or
//! breaks another of `serde-saphyr`'s budgets (its defaults: nodes, events,
//! aliases): the whole document is first read once against the budget into
//! nothing, in time linear in its size, so a hostile file is refused in
//! milliseconds wherever its nesting is (also where the typed reading would
//! have refused the first bracket for its type).

use serde::de::DeserializeOwned;

/// The largest file read (a shipped model is under 100 KB).
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// The deepest nesting of mappings and lists read: `serde-saphyr`'s own
/// default, which the scanner's limit on flow collections (`[[[...`, 255
/// by default) is lowered to. A shipped model or scenario nests under 10
/// levels; a scenario's item may nest as deep as DynamoDB allows (32).
pub const MAX_DEPTH: usize = 64;

/// Why a file could not be read: where (1-based line and column) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub line: u64,
    pub col: u64,
    pub message: String,
}

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    // Flow collections (`[[[...]]]`) are counted by the scanner, which
    // reads ahead of the budget's count: both stop at the same depth.
    budget.flow_nesting_limit = MAX_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// `source` read as a `T`, within the bounds above.
pub fn read<T: DeserializeOwned>(source: &str) -> Result<T, Refused> {
    if let Some(refused) = too_large(source.len()) {
        return Err(refused);
    }
    let refused = |e| with_hint(refused(e), source);
    serde_saphyr::from_str_with_options::<serde::de::IgnoredAny>(source, options())
        .map_err(refused)?;
    serde_saphyr::from_str_with_options(source, options()).map_err(refused)
}

/// A flow collection's parse error on a line with an unquoted `${`: the
/// parser's message says nothing of templates, so the refusal says to
/// quote it.
fn with_hint(mut r: Refused, source: &str) -> Refused {
    let line = source.lines().nth(r.line.saturating_sub(1) as usize);
    let unquoted = line.is_some_and(|l| {
        l.split(['"', '\''])
            .step_by(2)
            .any(|outside| outside.contains("${"))
    });
    if r.message.contains("flow") && unquoted {
        // The place is the refusal's own (line and column).
        if let Some(i) = r.message.rfind(" at line ") {
            r.message.truncate(i);
        }
        r.message.push_str(
            ": quote a template inside `{ }` or `[ ]` (`{ PK: \"T#${id}\" }`): there a plain value ends at a `{`, `}`, `[`, `]` or `,`",
        );
    }
    // `name: [a, b]?`: an enum made optional after its list.
    if let Some((name, list)) = line.and_then(optional_after_list) {
        if let Some(i) = r.message.rfind(" at line ") {
            r.message.truncate(i);
        }
        r.message.push_str(&format!(
            ": an optional enum has its `?` on the name: `{name}?: {list}`"
        ));
    }
    r
}

/// `(name, [list])` of a line `name: [list]?` (comments aside).
fn optional_after_list(line: &str) -> Option<(&str, &str)> {
    let code = line.split(" #").next().unwrap_or(line).trim();
    let (name, value) = code.split_once(':')?;
    let list = value.trim().strip_suffix('?')?.trim_end();
    (list.starts_with('[') && list.ends_with(']'))
        .then(|| (name.trim().trim_start_matches("- "), list))
}

/// A file of `len` bytes is refused when it is larger than [`MAX_FILE_BYTES`].
pub fn too_large(len: usize) -> Option<Refused> {
    (len > MAX_FILE_BYTES).then(|| Refused {
        line: 1,
        col: 1,
        message: format!("the file is larger than {MAX_FILE_BYTES} bytes (4 MiB): split the model"),
    })
}

fn refused(e: serde_saphyr::Error) -> Refused {
    use serde_saphyr::budget::BudgetBreach;
    let (line, col) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    let too_deep = match e.without_snippet() {
        serde_saphyr::Error::Budget {
            breach: BudgetBreach::Depth { .. },
            ..
        } => true,
        serde_saphyr::Error::ExternalMessage { source, .. } => matches!(
            source.as_ref(),
            serde_saphyr::ExternalMessageSource::Parser(scan)
                if matches!(scan.kind(), serde_saphyr::granit_parser::ErrorKind::RecursionLimitExceeded)
        ),
        _ => false,
    };
    let message = match e.without_snippet() {
        _ if too_deep => format!(
            "the YAML nests deeper than {MAX_DEPTH} levels (mappings and lists within each other): a model or scenario file needs far fewer"
        ),
        other => {
            let msg = other.to_string();
            msg.lines().next().unwrap_or("invalid YAML").to_string()
        }
    };
    Refused { line, col, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize, block: bool) -> String {
        if block {
            (0..levels)
                .map(|i| format!("{}a:\n", "  ".repeat(i)))
                .collect::<String>()
                + &format!("{}b: 1\n", "  ".repeat(levels))
        } else {
            format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
        }
    }

    /// Nesting is refused past [`MAX_DEPTH`], in block or flow style,
    /// where it goes too deep and naming the limit; at the limit it reads
    /// (a scenario's item as deep as DynamoDB allows fits).
    #[test]
    fn nesting_past_the_limit_is_refused_naming_it_and_the_limit_reads() {
        for block in [true, false] {
            let at_limit = nested(MAX_DEPTH - 1, block);
            assert!(read::<serde_json::Value>(&at_limit).is_ok(), "{block}");
            let past = nested(MAX_DEPTH + 1, block);
            let e = read::<serde_json::Value>(&past).unwrap_err();
            assert!(
                e.message
                    .contains(&format!("nests deeper than {MAX_DEPTH} levels")),
                "{block}: {e:?}"
            );
            // (Block style: each level indents further, so the text grows
            // with the square of the depth.)
            let deep = nested(if block { 1_000 } else { 100_000 }, block);
            let e = read::<serde::de::IgnoredAny>(&deep).unwrap_err();
            assert!(e.message.contains("nests deeper"), "{block}: {e:?}");
        }
    }

    /// An unquoted template inside a flow mapping (`{ PK: T#${id} }`) is
    /// a YAML error whose parser message says nothing of templates: the
    /// refusal says to quote it (user14).
    #[test]
    fn an_unquoted_template_in_a_flow_mapping_is_told_to_be_quoted() {
        let text = "key: { PK: T#${id}, SK: T }\n";
        let e = read::<serde_json::Value>(text).unwrap_err();
        assert!(e.message.contains("did not find expected"), "{e:?}");
        assert!(
            e.message.contains("quote a template inside `{ }` or `[ ]`"),
            "{e:?}"
        );
        // The place is the refusal's line and column, not in its words
        // (`check-model` cuts the words at a place they name).
        assert!(!e.message.contains(" at line "), "{e:?}");
        // Another flow error has no such hint.
        let e = read::<serde_json::Value>("key: { a: [1, 2 }\n").unwrap_err();
        assert!(!e.message.contains("quote a template"), "{e:?}");
    }

    /// An optional enum written with the `?` after its list
    /// (`by: [doctor, patient]?`) is a YAML error whose parser message
    /// says nothing of optional attributes (user16 #1): the refusal says
    /// where the `?` goes.
    #[test]
    fn an_optional_enum_with_its_mark_after_the_list_is_told_where_it_goes() {
        let text = "attributes:\n  by: [doctor, patient]?\n";
        let e = read::<serde_json::Value>(text).unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        assert!(
            e.message
                .contains("an optional enum has its `?` on the name: `by?: [doctor, patient]`"),
            "{e:?}"
        );
    }

    #[test]
    fn a_text_past_the_size_limit_is_refused_before_it_is_read() {
        let big = format!("a: '{}'\n", "x".repeat(MAX_FILE_BYTES));
        let e = read::<serde_json::Value>(&big).unwrap_err();
        assert_eq!((e.line, e.col), (1, 1));
        assert!(e.message.contains("4 MiB"), "{e:?}");
        assert!(too_large(MAX_FILE_BYTES).is_none());
    }
}
