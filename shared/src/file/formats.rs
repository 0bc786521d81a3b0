//! Named formats (SPEC §8): an id's shape stated once.
//!
//! ```yaml
//! formats:
//!   uid: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 128 }
//! entities:
//!   user:
//!     key: { PK: "USER#${userId:uid}", SK: "#PROFILE" }
//!     attributes: { followeeId: uid, referrerId: uid? }
//! ```
//!
//! A format is a string type: a key binder `${name:fmt}` or an attribute
//! typed `fmt` accepts a value that matches `pattern` (a `regex-lite`
//! pattern, compiled once at load; anchor it with `^...$` to match the
//! whole value) within `max_bytes` UTF-8 bytes. A value that does not is
//! bad input whose reason names the format.

use std::fmt;

use serde::Deserialize;

use super::model::{at, suggest, Problem, Ty, TYPE_NAMES};
use super::raw::{Ordered, Spanned};

/// `formats:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFormat {
    pub pattern: Option<Spanned<String>>,
    pub max_bytes: Option<Spanned<u64>>,
    /// A string built-in the value is normalised by in keys (`dashed`).
    pub normalize: Option<Spanned<String>>,
}

/// How a format's values are normalised in keys: one of the string
/// built-ins of expressions (the same function, the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Normalize {
    Lower,
    Upper,
    Trim,
    Slug,
    Dashed,
}

impl Normalize {
    /// Every name, as written in a file.
    pub const NAMES: &'static [&'static str] = &["lower", "upper", "trim", "slug", "dashed"];

    pub fn named(name: &str) -> Option<Self> {
        Some(match name {
            "lower" => Self::Lower,
            "upper" => Self::Upper,
            "trim" => Self::Trim,
            "slug" => Self::Slug,
            "dashed" => Self::Dashed,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The value normalised (every normaliser is idempotent).
    pub fn apply(self, v: &str) -> String {
        match self {
            Self::Lower => v.to_lowercase(),
            Self::Upper => v.to_uppercase(),
            Self::Trim => v.trim().to_string(),
            Self::Slug => super::expr::slug(v),
            Self::Dashed => super::expr::dashed(v),
        }
    }
}

/// A compiled named format.
pub struct Format {
    pub name: &'static str,
    /// The pattern as written.
    pub source: &'static str,
    pub pattern: Option<regex_lite::Regex>,
    pub max_bytes: Option<usize>,
    /// Keys hold the value normalised (`${city:city}` of `New York` is
    /// `new-york`); an attribute keeps its value as written.
    pub normalize: Option<Normalize>,
}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Format")
            .field("name", &self.name)
            .field("pattern", &self.source)
            .field("max_bytes", &self.max_bytes)
            .field("normalize", &self.normalize)
            .finish()
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.source == other.source
            && self.max_bytes == other.max_bytes
            && self.normalize == other.normalize
    }
}

impl Format {
    /// The value as keys hold it.
    pub fn key_form<'a>(&self, v: &'a str) -> std::borrow::Cow<'a, str> {
        match self.normalize {
            Some(n) => std::borrow::Cow::Owned(n.apply(v)),
            None => std::borrow::Cow::Borrowed(v),
        }
    }

    /// Why `v` is not of this format (the value itself is never quoted):
    /// its normalised form (when the format normalises) is what must match.
    pub fn reject(&self, v: &str) -> Option<String> {
        let v = self.key_form(v);
        let v = v.as_ref();
        if let Some(max) = self.max_bytes {
            if v.len() > max {
                return Some(format!(
                    "not a `{}` (longer than {max} bytes: {} bytes)",
                    self.name,
                    v.len()
                ));
            }
        }
        let pattern = self.pattern.as_ref()?;
        (!pattern.is_match(v))
            .then(|| format!("not a `{}` (does not match `{}`)", self.name, self.source))
    }
}

/// The largest compiled program of a format's pattern (`regex-lite`'s
/// size limit): its matching time is that size times the value's length.
pub const PATTERN_BYTES: usize = 64 * 1024;

/// The longest value a format with a pattern and no `max_bytes` takes.
pub const PATTERN_VALUE_BYTES: usize = 4096;

/// Compiles `formats:`: a name must not shadow a built-in type, a pattern
/// must compile within [`PATTERN_BYTES`], a byte limit must be positive
/// (absent with a pattern: [`PATTERN_VALUE_BYTES`]).
pub(super) fn compile(
    raw: Option<&Spanned<Ordered<Spanned<RawFormat>>>>,
    problems: &mut Vec<Problem>,
) -> Vec<&'static Format> {
    let mut out: Vec<&'static Format> = Vec::new();
    let Some(raw) = raw else {
        return out;
    };
    for (name, f) in &raw.value.0 {
        let pos = at(f);
        if TYPE_NAMES.contains(&name.as_str()) || name.ends_with('?') || name.is_empty() {
            problems.push(Problem::new(
                pos.0,
                pos.1,
                format!(
                    "format `{name}`: a format's name must not be a built-in type ({}) nor end in `?`",
                    TYPE_NAMES.join(", ")
                ),
            ));
            continue;
        }
        let normalize = match &f.value.normalize {
            None => None,
            Some(n) => match Normalize::named(&n.value) {
                Some(n) => Some(n),
                None => {
                    let p = at(n);
                    let hint =
                        suggest(&n.value, Normalize::NAMES.iter().copied()).unwrap_or_default();
                    problems.push(Problem::new(
                        p.0,
                        p.1,
                        format!(
                            "format `{name}`: normalize `{}` is not one of {}{hint}",
                            n.value,
                            Normalize::NAMES.join(", ")
                        ),
                    ));
                    continue;
                }
            },
        };
        if f.value.pattern.is_none() && normalize.is_none() {
            problems.push(Problem::new(
                pos.0,
                pos.1,
                format!("format `{name}`: give it a `pattern`, a `normalize`, or both"),
            ));
            continue;
        }
        let pattern = match &f.value.pattern {
            None => None,
            Some(raw) => match regex_lite::RegexBuilder::new(&raw.value)
                .size_limit(PATTERN_BYTES)
                .build()
            {
                Ok(p) => Some(p),
                Err(e) => {
                    let p = at(raw);
                    let why = e.to_string();
                    let message = if why.contains("size limit") {
                        format!(
                            "format `{name}`: pattern is too large: its program passes {} KiB, and its matching time grows with it (write fewer or smaller counted repetitions, e.g. `{{1,3000}}`)",
                            PATTERN_BYTES / 1024
                        )
                    } else {
                        format!(
                            "format `{name}`: pattern does not compile: {}",
                            why.lines().last().unwrap_or_default().trim()
                        )
                    };
                    problems.push(Problem::new(p.0, p.1, message));
                    continue;
                }
            },
        };
        let max_bytes = match &f.value.max_bytes {
            Some(m) if m.value == 0 => {
                let p = at(m);
                problems.push(Problem::new(
                    p.0,
                    p.1,
                    format!("format `{name}`: max_bytes must be at least 1"),
                ));
                continue;
            }
            Some(m) => Some(usize::try_from(m.value).unwrap_or(usize::MAX)),
            // A pattern's matching time is its program's size times the
            // value's length: bounded on both sides.
            None if pattern.is_some() => Some(PATTERN_VALUE_BYTES),
            None => None,
        };
        let source = f.value.pattern.as_ref().map_or("", |p| p.value.as_str());
        out.push(Box::leak(Box::new(Format {
            name: Box::leak(name.clone().into_boxed_str()),
            source: Box::leak(source.to_string().into_boxed_str()),
            pattern,
            max_bytes,
            normalize,
        })));
    }
    out
}

/// A type or format by its name.
pub fn named(name: &str, formats: &[&'static Format]) -> Option<Ty> {
    Ty::named(name).or_else(|| {
        formats
            .iter()
            .find(|f| f.name == name)
            .map(|f| Ty::Format(f))
    })
}

/// Every type and format name (for suggestions and messages).
pub fn names(formats: &[&'static Format]) -> Vec<&'static str> {
    TYPE_NAMES
        .iter()
        .copied()
        .chain(formats.iter().map(|f| f.name))
        .collect()
}

/// " (did you mean ...)" among the types and formats.
pub(super) fn hint(name: &str, formats: &[&'static Format]) -> String {
    suggest(name, names(formats)).unwrap_or_default()
}
