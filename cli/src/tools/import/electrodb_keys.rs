//! ElectroDB keys as its `_makeKey` builds them: a key's shape (prefix,
//! labelled composites, a template's tail, casing), the table key's
//! template and a secondary index key's projection.

use serde_json::{Map, Value as Json};

use super::super::{
    cel_name, cel_str, fresh, ident, pad_number, unnamable, DraftCheck, DraftProject,
};
use super::Attribute;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Casing {
    Lower,
    Upper,
    None,
}

impl Casing {
    fn of(v: Option<&str>) -> Casing {
        match v {
            Some("upper") => Casing::Upper,
            Some("none") => Casing::None,
            _ => Casing::Lower,
        }
    }

    fn apply(self, s: &str) -> String {
        match self {
            Casing::Lower => s.to_lowercase(),
            Casing::Upper => s.to_uppercase(),
            Casing::None => s.to_string(),
        }
    }

    fn function(self) -> Option<&'static str> {
        match self {
            Casing::Lower => Some("lower"),
            Casing::Upper => Some("upper"),
            Casing::None => None,
        }
    }
}

/// A key as ElectroDB writes it: literal text, then (label, attribute)
/// pairs, then a template's text after its last attribute (`FEED` of a
/// constant template: all of it); building stops at the first absent
/// attribute, before the tail.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KeyShape {
    pub(super) prefix: String,
    pub(super) composites: Vec<(String, String)>,
    pub(super) tail: String,
    pub(super) casing: Casing,
}

pub(super) fn composites(key: &Json) -> Vec<String> {
    key.get("composite")
        .or_else(|| key.get("facets"))
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The labels of a `template` key (`T#${taskId}#x`): the text before each
/// attribute, and the text after the last one.
pub(super) fn template_shape(template: &str) -> (Vec<(String, String)>, String) {
    let (holes, tail) = super::super::holes(template);
    let labels = holes
        .into_iter()
        .map(|(label, name)| (label, name.trim().to_string()))
        .collect();
    (labels, tail)
}

/// The shape of one key of an index.
pub(super) fn shape(
    key: &Json,
    entity: &str,
    version: &str,
    service: &str,
    index: &Map<String, Json>,
    is_pk: bool,
    attrs: &[Attribute],
) -> KeyShape {
    let casing = Casing::of(key.get("casing").and_then(Json::as_str));
    if let Some(t) = key.get("template").and_then(Json::as_str) {
        // ElectroDB's `_makeKey` writes the text after the last attribute
        // too (once every attribute is there), cased as the rest.
        let (labels, tail) = template_shape(t);
        return KeyShape {
            prefix: String::new(),
            composites: labels,
            tail,
            casing,
        };
    }
    let names = composites(key);
    let prefix = if is_pk {
        let mut p = format!("${service}");
        if let Some(scope) = index.get("scope").and_then(Json::as_str) {
            p.push_str(&format!("_{scope}"));
        }
        p
    } else {
        let collection = match index.get("collection") {
            Some(Json::String(c)) => format!("${c}"),
            Some(Json::Array(cs)) => cs
                .iter()
                .filter_map(Json::as_str)
                .enumerate()
                .map(|(i, c)| {
                    if i == 0 {
                        format!("${c}")
                    } else {
                        format!("#{c}")
                    }
                })
                .collect(),
            _ => String::new(),
        };
        if collection.is_empty() {
            format!("${entity}_{version}")
        } else {
            format!("{collection}#{entity}_{version}")
        }
    };
    KeyShape {
        prefix,
        composites: names
            .into_iter()
            .map(|n| {
                let label = attrs
                    .iter()
                    .find(|a| a.name == n)
                    .map_or(n.as_str(), |a| a.label());
                (format!("#{label}_"), n)
            })
            .collect(),
        tail: String::new(),
        casing,
    }
}

/// A TODO for each `number` a key holds as it is (not padded): ElectroDB
/// writes it as JavaScript's `String(n)` does, with an exponent below 1e-6
/// and from 1e21, where the file renders none (once per attribute).
pub(super) fn numbers_in_key(sh: &KeyShape, attrs: &[Attribute], notes: &mut Vec<String>) {
    for (_, n) in &sh.composites {
        let Some(a) = attrs.iter().find(|a| a.name == *n) else {
            continue;
        };
        if a.kind() != "number" || a.padding().is_some_and(|(_, ch)| ch == "0") {
            continue;
        }
        let note = super::super::number_in_key(&a.field, "ElectroDB");
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
}

/// The CEL expression of a composite's value as ElectroDB writes it in a key
/// (padded, cased), or `None` when it is the attribute as is.
pub(super) fn transformed(a: &Attribute, casing: Casing) -> Option<String> {
    if let Some((len, ch)) = a.padding() {
        if ch == "0" && a.kind() == "number" {
            return Some(pad_number(&a.field, len as usize));
        }
    }
    match casing.function() {
        Some(f) if a.is_text() => Some(format!("{f}({})", a.field)),
        _ => None,
    }
}

/// The primary key's template: cased literals; a composite written as is
/// binds its attribute, a transformed one a fresh name tied by a check.
pub(super) fn key_template(
    sh: &KeyShape,
    attrs: &[Attribute],
    taken: &mut Vec<String>,
    checks: &mut Vec<DraftCheck>,
    notes: &mut Vec<String>,
) -> String {
    let attr = |n: &str| attrs.iter().find(|a| a.name == n);
    let mut t = sh.casing.apply(&sh.prefix);
    for (label, n) in &sh.composites {
        t.push_str(&sh.casing.apply(label));
        let Some(a) = attr(n) else { continue };
        if !a.required() {
            notes.push(format!(
                "`{}` is part of the primary key but not required: ElectroDB refuses a put without it, here it is read from the key",
                a.field
            ));
        }
        if a.padded_otherwise() {
            // Not reproduced: a name of its own, not tied to the attribute.
            let b = fresh(&format!("{}_key", ident(&a.field)), taken);
            taken.push(b.clone());
            notes.push(format!(
                "the key holds `{}` padded as only numbers padded with 0 are reproduced here: its part binds `{b}`, not tied to `{}` by a check (an item whose key disagrees with it is not refused)",
                a.field, a.field
            ));
            t.push_str(&format!("${{{b}}}"));
            continue;
        }
        let plain = transformed(a, sh.casing).is_none();
        // A plain part binds the attribute itself when its name can be a
        // binder (a reserved word can: no expression reads it).
        let bindable = cel_name(&a.field) || (plain && ident(&a.field) == a.field);
        if !bindable {
            // Neither a check nor the binder can name it: a name of its own,
            // not tied to the attribute.
            let b = fresh(&format!("{}_key", ident(&a.field)), taken);
            taken.push(b.clone());
            notes.push(format!(
                "{}: the key binds its part as `{b}`, not tied to `{}` by a check (a model file cannot name it in an expression); an item whose key disagrees with it is not refused",
                unnamable(&a.field),
                a.field
            ));
            t.push_str(&format!("${{{b}}}"));
            continue;
        }
        match transformed(a, sh.casing) {
            None => t.push_str(&format!("${{{}}}", a.field)),
            Some(expr) => {
                let suffix = match sh.casing.function() {
                    Some(f) if a.is_text() => f,
                    _ => "key",
                };
                let base = format!("{}_{suffix}", a.field);
                let b = match checks
                    .iter()
                    .find(|c| c.expr == format!("{expr} == {base}"))
                {
                    Some(_) => base,
                    None => {
                        let b = fresh(&base, taken);
                        taken.push(b.clone());
                        // In the user's words, as the OneTable importer
                        // says it: the padding, not its CEL.
                        let message = match a.padding() {
                            Some((len, _)) if suffix == "key" => {
                                format!("the key holds `{}` padded to {len} digits", a.field)
                            }
                            _ => format!("the key holds `{expr}`"),
                        };
                        checks.push(DraftCheck {
                            expr: format!("{expr} == {b}"),
                            attribute: a.field.clone(),
                            message,
                        });
                        b
                    }
                };
                t.push_str(&format!("${{{b}}}"));
            }
        }
    }
    t.push_str(&sh.casing.apply(&sh.tail));
    t
}

/// A GSI key attribute as a projection, as ElectroDB's put writes it
/// (checked against the library: `tests/js/electrodb.mjs`, set `sparse`):
///
/// - an index none of whose attributes the item holds gets neither key
///   (when every attribute the index reads is optional, the value is `null`
///   while all are absent; an index reading none is never written and is
///   not projected: the caller notes it);
/// - otherwise each key is built up to its first absent attribute (a value
///   template while every attribute of the key is required);
/// - a key that comes out empty (a `template` starting with an absent
///   attribute) is not written either.
pub(super) fn projection(
    field: &str,
    sh: &KeyShape,
    index_reads: &[&Attribute],
    attrs: &[Attribute],
) -> Result<DraftProject, String> {
    let attr = |n: &str| attrs.iter().find(|a| a.name == n);
    let prefix = sh.casing.apply(&sh.prefix);
    let reads: Vec<&Attribute> = sh.composites.iter().filter_map(|(_, n)| attr(n)).collect();
    let hole = |a: &Attribute| transformed(a, sh.casing).unwrap_or_else(|| a.field.clone());
    // While every attribute the index reads may be absent, the index is
    // sparse: no keys without any of them.
    let sparse = index_reads.iter().all(|a| !a.required());
    let first_empty = sh
        .composites
        .first()
        .is_some_and(|(label, _)| prefix.is_empty() && sh.casing.apply(label).is_empty());
    // In a sparse index reading one attribute, that one is present
    // wherever the key is written.
    let present = |a: &Attribute| a.required() || (sparse && index_reads.len() == 1);
    let needs_expr = sparse || reads.iter().any(|a| !present(a));
    let value = if !needs_expr {
        let mut t = prefix;
        for (label, n) in &sh.composites {
            t.push_str(&sh.casing.apply(label));
            if let Some(a) = attr(n) {
                t.push_str(&format!("${{{}}}", hole(a)));
            }
        }
        t.push_str(&sh.casing.apply(&sh.tail));
        t
    } else {
        // prefix + label1 + (v1 == null ? '' : v1 + label2 + (v2 == null ?
        // '' : v2 + tail)): the template's tail follows the last attribute.
        let mut tail = if sh.tail.is_empty() {
            String::new()
        } else {
            cel_str(&sh.casing.apply(&sh.tail))
        };
        for (i, (label, n)) in sh.composites.iter().enumerate().rev() {
            let Some(a) = attr(n) else { continue };
            let v = if a.is_text() || transformed(a, sh.casing).is_some() {
                hole(a)
            } else if a.kind() == "number" {
                // `string()` of a `number` is refused (not exact text).
                return Err(format!(
                    "it reads `{}`, a number that may be absent, which a model file renders only in a template, not in the expression this key needs",
                    a.field
                ));
            } else {
                format!("string({})", a.field)
            };
            let rest = if tail.is_empty() {
                v
            } else {
                format!("{v} + {tail}")
            };
            let label = sh.casing.apply(label);
            tail = if present(a) {
                if label.is_empty() {
                    rest
                } else {
                    format!("{} + {rest}", cel_str(&label))
                }
            } else if i == 0 && first_empty {
                // The key would be '': not written.
                format!("{} == null ? null : {rest}", a.field)
            } else {
                format!("{} + ({} == null ? '' : {rest})", cel_str(&label), a.field)
            };
        }
        let key = if tail.is_empty() {
            cel_str(&prefix)
        } else if prefix.is_empty() {
            tail
        } else {
            format!("{} + {tail}", cel_str(&prefix))
        };
        if sparse {
            let none: Vec<String> = index_reads
                .iter()
                .map(|a| format!("{} == null", a.field))
                .collect();
            let key = if first_empty { format!("({key})") } else { key };
            format!("${{{} ? null : {key}}}", none.join(" && "))
        } else {
            format!("${{{key}}}")
        }
    };
    Ok(DraftProject {
        attr: field.to_string(),
        value,
        note: None,
    })
}
