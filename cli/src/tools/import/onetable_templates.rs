//! OneTable value templates: their pieces as `runTemplate` reads them,
//! and a template as a projected attribute.

use super::super::{cel_str, holes, number_in_key, pad_number, DraftProject};
use super::Field;

/// A piece of a OneTable value template.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Piece {
    Lit(String),
    /// `${name}` or `${name:size[:pad]}`.
    Var {
        name: String,
        pad: Option<(usize, String)>,
    },
}

/// Splits `account#${id}` / `${n:6:0}` as OneTable's `runTemplate` reads it
/// (`/\${(.*?)}/g`, then `name:len:pad`).
pub(super) fn pieces(template: &str) -> Vec<Piece> {
    let (holes, tail) = holes(template);
    let mut out = Vec::new();
    for (lit, inner) in holes {
        if !lit.is_empty() {
            out.push(Piece::Lit(lit));
        }
        let mut parts = inner.split(':');
        let name = parts.next().unwrap_or_default().to_string();
        let pad = parts
            .next()
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .map(|l| (l, parts.next().unwrap_or("0").to_string()));
        out.push(Piece::Var { name, pad });
    }
    if !tail.is_empty() {
        out.push(Piece::Lit(tail));
    }
    out
}

/// Whether a template hole is a field name (not an expression).
pub(super) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether a template of the model pads `name` with `0` (`${n:6:0}`): then
/// the number is an integer, written with `pad()`.
pub(super) fn padded_with_zeros(fields: &[Field], name: &str) -> bool {
    fields.iter().filter_map(|f| f.str("value")).any(|t| {
        pieces(t).iter().any(
            |p| matches!(p, Piece::Var { name: n, pad: Some((_, z)) } if n == name && z == "0"),
        )
    })
}

/// A `value` template as a projected attribute: a value template while
/// every name it reads is required (or a key name: `in_key`), else one
/// expression that is `null` (no attribute: a sparse index) while any is
/// absent.
pub(super) fn projection(
    attr: &str,
    value: &str,
    fields: &[Field],
    in_key: &[&str],
) -> Result<DraftProject, String> {
    let field = |n: &str| fields.iter().find(|f| f.name == n);
    let ps = pieces(value);
    let mut notes = Vec::new();
    let mut optional: Vec<String> = Vec::new();
    for p in &ps {
        if let Piece::Var { name, .. } = p {
            match field(name) {
                Some(f) if f.required() || in_key.contains(&f.name) => {}
                Some(_) => {
                    if !optional.contains(name) {
                        optional.push(name.clone());
                    }
                }
                None => {
                    return Err(format!(
                        "it reads `{name}`, which is not a field of this model"
                    ))
                }
            }
        }
    }
    if ps
        .iter()
        .any(|p| matches!(p, Piece::Lit(l) if l.contains("${")))
    {
        return Err("it holds an unclosed `${`".into());
    }
    let numeric = |n: &str| field(n).is_some_and(|f| f.ty() == "number");
    let hole = |name: &str, pad: &Option<(usize, String)>, notes: &mut Vec<String>| {
        Ok(match pad {
        None => {
            let note = number_in_key(name, "OneTable");
            if numeric(name) && !notes.contains(&note) {
                notes.push(note);
            }
            name.to_string()
        }
        Some((len, p)) if p == "0" && numeric(name) => pad_number(name, *len),
        // Projected unpadded, it would rewrite the key OneTable padded.
        Some((len, p)) => {
            return Err(format!(
                "it pads `{name}` to {len} with `{p}`, and only numbers padded with 0 are reproduced (`pad()`)"
            ))
        }
        })
    };
    let value = if optional.is_empty() {
        let mut t = String::new();
        for p in &ps {
            match p {
                Piece::Lit(l) => t.push_str(l),
                Piece::Var { name, pad } => {
                    t.push_str(&format!("${{{}}}", hole(name, pad, &mut notes)?))
                }
            }
        }
        t
    } else {
        let mut e = Vec::new();
        for p in &ps {
            match p {
                Piece::Lit(l) => e.push(cel_str(l)),
                Piece::Var { name, pad } => {
                    let h = hole(name, pad, &mut notes)?;
                    e.push(if pad.is_none() && numeric(name) {
                        // `string()` of a `number` is refused (not exact
                        // text); of an `int` (padded elsewhere) it is not.
                        if !padded_with_zeros(fields, name) {
                            return Err(format!(
                                "it reads `{name}`, a number that may be absent, which a model file renders only in a template, not in the expression this sparse key needs"
                            ));
                        }
                        format!("string({h})")
                    } else {
                        h
                    });
                }
            }
        }
        let cond: Vec<String> = optional.iter().map(|n| format!("{n} != null")).collect();
        format!("${{{} ? {} : null}}", cond.join(" && "), e.join(" + "))
    };
    Ok(DraftProject {
        attr: attr.to_string(),
        value,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}
