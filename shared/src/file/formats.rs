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
    pub pattern: Spanned<String>,
    pub max_bytes: Option<Spanned<u64>>,
}

/// A compiled named format.
pub struct Format {
    pub name: &'static str,
    /// The pattern as written.
    pub source: &'static str,
    pub pattern: regex_lite::Regex,
    pub max_bytes: Option<usize>,
}

impl fmt::Debug for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Format")
            .field("name", &self.name)
            .field("pattern", &self.source)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.source == other.source && self.max_bytes == other.max_bytes
    }
}

impl Format {
    /// Why `v` is not of this format (the value itself is never quoted).
    pub fn reject(&self, v: &str) -> Option<String> {
        if let Some(max) = self.max_bytes {
            if v.len() > max {
                return Some(format!(
                    "not a `{}` (longer than {max} bytes: {} bytes)",
                    self.name,
                    v.len()
                ));
            }
        }
        (!self.pattern.is_match(v))
            .then(|| format!("not a `{}` (does not match `{}`)", self.name, self.source))
    }
}

/// Compiles `formats:`: a name must not shadow a built-in type, a pattern
/// must compile, a byte limit must be positive.
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
        let pattern = match regex_lite::Regex::new(&f.value.pattern.value) {
            Ok(p) => p,
            Err(e) => {
                let p = at(&f.value.pattern);
                problems.push(Problem::new(
                    p.0,
                    p.1,
                    format!(
                        "format `{name}`: pattern does not compile: {}",
                        e.to_string().lines().last().unwrap_or_default().trim()
                    ),
                ));
                continue;
            }
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
            None => None,
        };
        out.push(Box::leak(Box::new(Format {
            name: Box::leak(name.clone().into_boxed_str()),
            source: Box::leak(f.value.pattern.value.clone().into_boxed_str()),
            pattern,
            max_bytes,
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
