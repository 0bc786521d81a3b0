//! Templates: key templates that bind names and parse back
//! (`"JOB#${postedAt:ulid}#${jobId}"`), and value templates that interpolate
//! CEL expressions (`"EMAIL#${lower(email)}"`).
//!
//! A key template is literals and binders; a binder takes the characters up
//! to the first occurrence of the literal after it (the last one takes the
//! rest) and never an empty string, so a key built from bindings parses back
//! to the same bindings as long as a bound value does not contain the literal
//! after it (ids in keys are validated by their formats).

/// A piece of a template.
#[derive(Debug, Clone, PartialEq)]
pub enum Part<E> {
    Lit(String),
    /// `${...}`: the text inside, compiled by the caller, and its character
    /// offset in the template.
    Hole(E, usize),
}

/// Splits a template into literals and `${...}` holes (braces inside a hole
/// nest; quotes are respected). Errors: (character offset, message).
pub fn split(template: &str) -> Result<Vec<Part<String>>, (usize, String)> {
    let chars: Vec<char> = template.chars().collect();
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '$' && chars.get(i + 1) == Some(&'{') {
            let start = i;
            let mut depth = 0usize;
            let mut quote: Option<char> = None;
            let mut j = i + 2;
            let mut end = None;
            while j < chars.len() {
                let c = chars[j];
                match quote {
                    Some(q) if c == q => quote = None,
                    Some(_) if c == '\\' => j += 1,
                    Some(_) => {}
                    None if c == '\'' || c == '"' => quote = Some(c),
                    None if c == '{' => depth += 1,
                    None if c == '}' && depth == 0 => {
                        end = Some(j);
                        break;
                    }
                    None if c == '}' => depth -= 1,
                    None => {}
                }
                j += 1;
            }
            let end = end.ok_or((start, "`${` without its closing `}`".to_string()))?;
            let inner: String = chars[i + 2..end].iter().collect();
            if inner.trim().is_empty() {
                return Err((start, "empty `${}`".to_string()));
            }
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Hole(inner, start + 2));
            i = end + 1;
        } else {
            lit.push(chars[i]);
            i += 1;
        }
    }
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Ok(parts)
}

/// A binder of a key template: the name and its optional format.
#[derive(Debug, Clone, PartialEq)]
pub struct Binder {
    pub name: String,
    pub format: Option<String>,
}

/// A key template.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyTemplate {
    pub source: String,
    pub parts: Vec<Part<Binder>>,
}

/// A name a template's hole may hold (letters, digits, `_`; not a digit
/// first).
pub(super) fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && c.all(|c| c.is_alphanumeric() || c == '_')
}

impl KeyTemplate {
    /// Parses a key template; holes must be `name` or `name:format`, and two
    /// binders must be separated by a literal (or the key cannot parse back).
    pub fn parse(source: &str) -> Result<Self, (usize, String)> {
        let mut parts = Vec::new();
        for p in split(source)? {
            match p {
                Part::Lit(l) => parts.push(Part::Lit(l)),
                Part::Hole(inner, at) => {
                    if matches!(parts.last(), Some(Part::Hole(..))) {
                        return Err((
                            at,
                            "two `${...}` next to each other cannot be told apart: put a separator between them".to_string(),
                        ));
                    }
                    let (name, format) = match inner.split_once(':') {
                        Some((n, f)) => (n.trim(), Some(f.trim().to_string())),
                        None => (inner.trim(), None),
                    };
                    if !is_ident(name) {
                        return Err((
                            at,
                            format!("`{inner}`: a key template binds a name (`${{name}}` or `${{name:format}}`), not an expression"),
                        ));
                    }
                    parts.push(Part::Hole(
                        Binder {
                            name: name.to_string(),
                            format,
                        },
                        at,
                    ));
                }
            }
        }
        Ok(Self {
            source: source.to_string(),
            parts,
        })
    }

    /// The binders, in order.
    pub fn binders(&self) -> impl Iterator<Item = &Binder> {
        self.parts.iter().filter_map(|p| match p {
            Part::Hole(b, _) => Some(b),
            Part::Lit(_) => None,
        })
    }

    /// Whether `other` is this template but for the names it binds (`USER#${userId}`
    /// and `USER#${id}`): the same literals, holes in the same places, so
    /// no binder of one holds a literal of the other.
    pub fn same_shape(&self, other: &KeyTemplate) -> bool {
        self.parts.len() == other.parts.len()
            && self.parts.iter().zip(&other.parts).all(|p| match p {
                (Part::Lit(a), Part::Lit(b)) => a == b,
                (Part::Hole(..), Part::Hole(..)) => true,
                _ => false,
            })
    }

    /// Matches `key`, returning the bound values in binder order.
    pub fn matches<'k>(&self, key: &'k str) -> Option<Vec<&'k str>> {
        let mut rest = key;
        let mut out = Vec::new();
        let mut parts = self.parts.iter().peekable();
        while let Some(p) = parts.next() {
            match p {
                Part::Lit(l) => rest = rest.strip_prefix(l.as_str())?,
                Part::Hole(..) => {
                    let value = match parts.peek() {
                        Some(Part::Lit(next)) => {
                            let at = rest.find(next.as_str())?;
                            &rest[..at]
                        }
                        _ => rest,
                    };
                    if value.is_empty() {
                        return None;
                    }
                    out.push(value);
                    rest = &rest[value.len()..];
                }
            }
        }
        rest.is_empty().then_some(out)
    }

    /// Builds the key from a value per binder (in binder order).
    pub fn build<S: AsRef<str>>(&self, values: &[S]) -> String {
        let mut out = String::new();
        let mut v = values.iter();
        for p in &self.parts {
            match p {
                Part::Lit(l) => out.push_str(l),
                Part::Hole(..) => out.push_str(v.next().map(|s| s.as_ref()).unwrap_or("")),
            }
        }
        out
    }
}

/// Values a binder is tried with when looking for a key two templates both
/// match: plain ids, and values holding the other template's literals (and
/// their `#`-separated pieces), alone or between other characters.
fn binder_samples(other: &KeyTemplate) -> Vec<String> {
    let mut out: Vec<String> = vec!["x".into(), "01HXAA0000000000000000000A".into(), "1".into()];
    for p in &other.parts {
        let Part::Lit(l) = p else { continue };
        let pieces = std::iter::once(l.as_str()).chain(l.split('#').filter(|s| !s.is_empty()));
        for piece in pieces {
            for v in [
                format!("x{piece}"),
                piece.to_string(),
                format!("{piece}x"),
                format!("x{piece}x"),
            ] {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Keys built from `t`: every binder `x` (or, where `fits` refuses `x`, a
/// ULID or `1`), then each binder (and all of them at once) with each
/// sample.
fn template_examples(
    t: &KeyTemplate,
    samples: &[String],
    fits: &dyn Fn(&Binder, &str) -> bool,
) -> Vec<String> {
    let fill: Vec<&str> = t
        .binders()
        .map(|b| {
            ["x", "01HXAA0000000000000000000A", "1"]
                .into_iter()
                .find(|v| fits(b, v))
                .unwrap_or("x")
        })
        .collect();
    let n = fill.len();
    let mut out = Vec::new();
    for s in samples {
        out.push(t.build(&vec![s.as_str(); n]));
        for at in 0..n {
            let vals: Vec<&str> = (0..n)
                .map(|k| if k == at { s.as_str() } else { fill[k] })
                .collect();
            out.push(t.build(&vals));
        }
    }
    out
}

impl KeyTemplate {
    /// Whether no key matches both templates, seen from their literal ends
    /// alone: every key of a template starts with its leading literal and
    /// ends with its trailing one (the whole text when it binds nothing),
    /// so two whose leading (or trailing) literals disagree share no key.
    /// Cheap: it spares [`KeyTemplate::overlap`]'s search for most pairs of
    /// a file's entities. `false` says nothing.
    pub fn disjoint(&self, other: &KeyTemplate) -> bool {
        fn lit(p: Option<&Part<Binder>>) -> &str {
            match p {
                Some(Part::Lit(l)) => l,
                _ => "",
            }
        }
        let (ha, hb) = (lit(self.parts.first()), lit(other.parts.first()));
        let (ta, tb) = (lit(self.parts.last()), lit(other.parts.last()));
        !(ha.starts_with(hb) || hb.starts_with(ha)) || !(ta.ends_with(tb) || tb.ends_with(ta))
    }

    /// A value both templates match, if one is found (decided
    /// symmetrically: each template's examples, binders also holding the
    /// other's literals, are tried against the other).
    pub fn overlap(&self, other: &KeyTemplate) -> Option<String> {
        self.overlap_fitting(other, &|_, _| true, &|_, _| true)
    }

    /// [`Self::overlap`] where a binder holds only the values its type
    /// accepts (`fits` for this template's binders, `fits_other` for
    /// `other`'s): `ORDER#${orderId:uid}` and
    /// `ORDER#${orderId:uid}#LINE#${sku}` do not overlap when a `uid`
    /// holds no `#`.
    pub fn overlap_fitting(
        &self,
        other: &KeyTemplate,
        fits: &dyn Fn(&Binder, &str) -> bool,
        fits_other: &dyn Fn(&Binder, &str) -> bool,
    ) -> Option<String> {
        let fit = |t: &KeyTemplate, f: &dyn Fn(&Binder, &str) -> bool, k: &str| {
            t.matches(k)
                .is_some_and(|vals| t.binders().zip(vals).all(|(b, v)| f(b, v)))
        };
        template_examples(self, &binder_samples(other), fits)
            .into_iter()
            .chain(template_examples(other, &binder_samples(self), fits_other))
            .find(|k| fit(self, fits, k) && fit(other, fits_other, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_templates_parse_back() {
        let t = KeyTemplate::parse("JOB#${postedAt:ulid}#${jobId}").unwrap();
        let names: Vec<_> = t.binders().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["postedAt", "jobId"]);
        assert_eq!(t.binders().next().unwrap().format.as_deref(), Some("ulid"));
        assert_eq!(t.matches("JOB#A#B"), Some(vec!["A", "B"]));
        assert_eq!(t.matches("JOB#A#B#C"), Some(vec!["A", "B#C"]));
        assert_eq!(t.matches("JOB#A"), None);
        assert_eq!(t.matches("JOB##B"), None, "empty binding");
        assert_eq!(t.matches("APP#A#B"), None);
        assert_eq!(t.build(&["A", "B"]), "JOB#A#B");
        let c = KeyTemplate::parse("#METADATA").unwrap();
        assert!(c.binders().next().is_none(), "no binders");
        assert_eq!(c.matches("#METADATA"), Some(vec![]));
        assert_eq!(c.matches("#META"), None);
        let f = KeyTemplate::parse("u#${a}#following").unwrap();
        assert_eq!(f.matches("u#x#following"), Some(vec!["x"]));
        assert_eq!(f.matches("u#x#follower"), None);
    }

    #[test]
    fn bad_key_templates_say_where() {
        assert_eq!(KeyTemplate::parse("A#${x}${y}").unwrap_err().0, 8);
        assert!(KeyTemplate::parse("A#${lower(x)}").is_err());
        assert!(KeyTemplate::parse("A#${x").is_err());
    }

    #[test]
    fn value_templates_split_into_holes() {
        let p = split("EMAIL#${lower(email)}").unwrap();
        assert_eq!(
            p,
            vec![
                Part::Lit("EMAIL#".into()),
                Part::Hole("lower(email)".into(), 8)
            ]
        );
        let p = split("${ {'a': 1}['a'] }x").unwrap();
        assert_eq!(p.len(), 2);
        let p = split("${'}' + a}").unwrap();
        assert_eq!(p, vec![Part::Hole("'}' + a".into(), 2)]);
    }

    /// `disjoint` only spares pairs that share no key: whenever the search
    /// finds a key both match, the pair is not disjoint; and templates
    /// apart by a leading or trailing literal are.
    #[test]
    fn templates_apart_by_a_literal_end_are_disjoint_and_no_overlap_is_missed() {
        let sources = [
            "ORDER",
            "ORDER#${id}",
            "ORDER#${id}#LINE#${sku}",
            "${id}",
            "${a}#${b}",
            "M1#${id}",
            "M10#${id}",
            "${id}#X",
            "${id}#Y",
            "HIST#${seq}",
            "A",
            "AA",
        ];
        let ts: Vec<KeyTemplate> = sources
            .iter()
            .map(|s| KeyTemplate::parse(s).unwrap())
            .collect();
        for (i, a) in ts.iter().enumerate() {
            for b in &ts[i..] {
                if a.overlap(b).is_some() {
                    assert!(!a.disjoint(b), "{} {}", a.source, b.source);
                    assert!(!b.disjoint(a), "{} {}", a.source, b.source);
                }
            }
        }
        let t = |s: &str| KeyTemplate::parse(s).unwrap();
        assert!(t("M1#${id}").disjoint(&t("HIST#${id}")));
        assert!(t("${id}#X").disjoint(&t("${id}#Y")));
        assert!(t("ORDER").disjoint(&t("LINE#${id}")));
        assert!(!t("M1${id}").disjoint(&t("M10#${id}")));
    }
}
