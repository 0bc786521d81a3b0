//! `jobstream import onetable|electrodb SCHEMA.json`: a model file from the
//! schema a team already has in a DynamoDB client library.
//!
//! - [`onetable`] - a OneTable schema (`onetable:1.1.0`: `indexes`,
//!   `models` with `value` templates, `params.typeField`).
//! - [`electrodb`] - ElectroDB entities serialised to JSON (their `schema`:
//!   `model`, `attributes`, `indexes` with `composite` lists or `template`,
//!   `casing`, `collection`).
//!
//! Both build a [`Draft`], rendered as YAML with a `# TODO:` comment at each
//! place the schema's semantics have no equivalent in the format (a JS
//! function, a default, a number padded in a key with other than `0`), saying what to write
//! by hand. Keys are reproduced exactly: a key part the library writes in a
//! transformed form (padded, lower-cased) binds its own name in the key
//! template, and a `check` ties it to the attribute, so an item whose key
//! disagrees with its attributes is bad input, as for any model file.

pub mod electrodb;
pub mod onetable;

use serde_json::Value as Json;
use std::fmt::Write as _;
use std::path::Path;

/// The library a schema comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Library {
    /// A OneTable schema (`format: onetable:1.1.0`).
    Onetable,
    /// ElectroDB entities' `schema`, as JSON.
    Electrodb,
}

/// `jobstream import`: the model file (to `out`, else stdout), checked as
/// `check-model` checks it. Returns the problems as `PLACE:LINE:COL:
/// message` lines (empty: the file passes); the file is written either way,
/// for fixing. A file already at `out` is refused unless `force`.
pub fn run(
    from: Library,
    schema: &Path,
    name: Option<String>,
    table: Option<String>,
    out: Option<&Path>,
    force: bool,
) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(schema)
        .map_err(|e| anyhow::anyhow!("{}: {e}", schema.display()))?;
    let path = schema.display().to_string();
    let name = name.unwrap_or_else(|| {
        schema
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".into())
    });
    let table = table.unwrap_or_else(|| name.clone());
    let draft = match from {
        Library::Onetable => onetable::import(&text, &path, &name, &table)?,
        Library::Electrodb => electrodb::import(&text, &path, &name, &table)?,
    };
    let yaml = draft.render(&path);
    match out {
        Some(o) => {
            let mut file = std::fs::OpenOptions::new();
            file.write(true);
            if force {
                file.create(true).truncate(true);
            } else {
                file.create_new(true);
            }
            let written = file.open(o).and_then(|mut f| {
                use std::io::Write as _;
                f.write_all(yaml.as_bytes())
            });
            written.map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
                    "{}: exists (a model file you may have extended): import to another file and compare, or pass --force to replace it",
                    o.display()
                ),
                _ => anyhow::anyhow!("{}: {e}", o.display()),
            })?
        }
        None => print!("{yaml}"),
    }
    let shown = out
        .map(|o| o.display().to_string())
        .unwrap_or_else(|| "(the model file printed above)".into());
    Ok(match shared::file::compile(&yaml, &name) {
        Ok(_) => vec![],
        Err(problems) => problems
            .iter()
            .map(|p| format!("{shown}:{}:{}: {}", p.line, p.col, p.message))
            .collect(),
    })
}

/// Why a schema could not be imported: what and where.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// JSON nested past serde_json's 128 levels: JSON all the same.
    #[error("{path}: nested deeper than 128 levels (the importer's limit; no schema the libraries write nests so): {source}")]
    TooDeep {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: not JSON: {source} ({export})")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
        /// How to export the library's schema as JSON.
        export: &'static str,
    },
    #[error("{path}: {at}: {why}")]
    Schema {
        path: String,
        /// Where in the schema (`models.Account.pk`).
        at: String,
        why: String,
    },
}

/// `text` read as JSON, or why not: nested too deep, or not JSON (with
/// `export`: how to export the library's schema as JSON).
pub(super) fn parse_json(
    text: &str,
    path: &str,
    export: &'static str,
) -> Result<serde_json::Value, ImportError> {
    serde_json::from_str(text).map_err(|source| {
        let path = path.to_string();
        if source.to_string().starts_with("recursion limit exceeded") {
            ImportError::TooDeep { path, source }
        } else {
            ImportError::Json {
                path,
                source,
                export,
            }
        }
    })
}

/// An attribute's type in the model file.
#[derive(Debug, Clone, PartialEq)]
pub enum DraftTy {
    /// `string`, `int`, `number`, `bool`, `ulid`, `iso-utc`, `set`, `list`, `map`.
    Named(&'static str),
    /// A list of allowed values, typed as written: all strings, all
    /// integers or all booleans (see [`enum_of`]).
    Enum(Vec<serde_json::Value>),
}

/// An enum's type from a schema's list of values, typed as written (`[1,
/// 2, 3]` numbers, `["a"]` strings, `[true]` booleans), or why a model
/// file's enum cannot hold it (one kind of scalar per list, integers only).
pub fn enum_of(values: &[serde_json::Value]) -> Result<DraftTy, String> {
    use serde_json::Value as J;
    let shown = || serde_json::Value::Array(values.to_vec()).to_string();
    if values.is_empty() {
        return Err(format!("enum {}: no values", shown()));
    }
    let all = |f: fn(&J) -> bool| values.iter().all(f);
    if all(J::is_string) || all(|v| v.is_i64() || v.is_u64()) || all(J::is_boolean) {
        Ok(DraftTy::Enum(values.to_vec()))
    } else if all(J::is_number) {
        Err(format!(
            "enum {}: a model file's enum holds strings, integers or booleans; typed `number` (write the values as a `check:`)",
            shown()
        ))
    } else {
        Err(format!(
            "enum {}: values of several kinds, which a model file's enum cannot hold (one kind per list)",
            shown()
        ))
    }
}

#[derive(Debug, Clone)]
pub struct DraftAttr {
    pub name: String,
    pub ty: DraftTy,
    pub optional: bool,
    /// What to write by hand, if anything.
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DraftCheck {
    pub expr: String,
    pub attribute: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct DraftProject {
    pub attr: String,
    /// A value template (`"acct#${id}"`) or one expression (`"${...}"`).
    pub value: String,
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DraftEntity {
    pub name: String,
    /// Comments above the entity.
    pub notes: Vec<String>,
    /// Key attribute -> template, partition key first.
    pub key: Vec<(String, String)>,
    pub attributes: Vec<DraftAttr>,
    pub checks: Vec<DraftCheck>,
    pub project: Vec<DraftProject>,
}

#[derive(Debug, Clone)]
pub struct DraftGsi {
    pub name: String,
    pub pk: String,
    /// `None`: an index keyed by its partition key alone.
    pub sk: Option<String>,
    /// What the library's schema says the index projects (the table it
    /// creates has that projection; `check` holds the model to it).
    pub project: DraftProjection,
}

/// A GSI's `project:` as the library's schema says it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DraftProjection {
    #[default]
    All,
    Keys,
    /// Attributes (their names in the table), as listed.
    Attrs(Vec<String>),
}

impl DraftProjection {
    /// The library's `all`, `keys_word` or list of attribute names (`None`:
    /// absent, `all`); `Err` for anything else (the word as written).
    pub fn of(v: Option<&Json>, keys_word: &str) -> Result<DraftProjection, String> {
        match v {
            None => Ok(DraftProjection::All),
            Some(Json::String(w)) if w.eq_ignore_ascii_case("all") => Ok(DraftProjection::All),
            Some(Json::String(w)) if w.eq_ignore_ascii_case(keys_word) => Ok(DraftProjection::Keys),
            Some(Json::Array(a)) if a.is_empty() => Ok(DraftProjection::Keys),
            Some(Json::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(DraftProjection::Attrs)
                .ok_or_else(|| Json::Array(a.clone()).to_string()),
            Some(other) => Err(other.to_string()),
        }
    }

    /// In a model file's words: `all`, `keys`, `[a, b]`.
    pub fn written(&self) -> String {
        match self {
            DraftProjection::All => "all".into(),
            DraftProjection::Keys => "keys".into(),
            DraftProjection::Attrs(v) => format!("[{}]", v.join(", ")),
        }
    }

    /// `, project: ...` in a `gsis` entry (nothing for `all`).
    fn rendered(&self) -> String {
        match self {
            DraftProjection::All => String::new(),
            DraftProjection::Keys => ", project: keys".into(),
            DraftProjection::Attrs(v) => format!(
                ", project: [{}]",
                v.iter().map(|a| q(a)).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// A model file before rendering.
#[derive(Debug, Clone)]
pub struct Draft {
    pub name: String,
    pub about: String,
    /// Comments at the top of the file (after the generated-by line).
    pub notes: Vec<String>,
    pub table: String,
    pub pk: String,
    pub sk: String,
    pub gsis: Vec<DraftGsi>,
    pub entity_type: String,
    /// The table's TTL attribute (OneTable's `ttl: true` field).
    pub ttl: Option<String>,
    /// `writer_type: free` (why, as a comment): the library stamps one
    /// type on items of two entities here.
    pub writer_type_free: Option<String>,
    pub entities: Vec<DraftEntity>,
}

/// A YAML double-quoted scalar (JSON's escapes are YAML's).
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn comment(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}# {line}");
    }
}

impl Draft {
    /// The model file: YAML, `jobstream: 1`, comments where a hand is needed.
    pub fn render(&self, generated_from: &str) -> String {
        let mut out = String::new();
        comment(
            &mut out,
            "",
            &format!("Imported by `jobstream import` from {generated_from}."),
        );
        comment(
            &mut out,
            "",
            "Check it with `jobstream check-model FILE`; each `TODO:` says what the schema\n\
             meant that this file does not say yet.",
        );
        for n in &self.notes {
            comment(&mut out, "", &format!("TODO: {n}"));
        }
        let _ = writeln!(out, "jobstream: 1");
        let _ = writeln!(out, "name: {}", q(&self.name));
        let _ = writeln!(out, "about: {}", q(&self.about));
        let _ = writeln!(out, "table:");
        let _ = writeln!(out, "  name: {}", q(&self.table));
        let _ = writeln!(out, "  pk: {}", q(&self.pk));
        let _ = writeln!(out, "  sk: {}", q(&self.sk));
        if !self.gsis.is_empty() {
            let _ = writeln!(out, "  gsis:");
            for g in &self.gsis {
                let sk =
                    g.sk.as_ref()
                        .map(|sk| format!(", sk: {}", q(sk)))
                        .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "    - {{ name: {}, pk: {}{sk}{} }}",
                    q(&g.name),
                    q(&g.pk),
                    g.project.rendered()
                );
            }
        }
        if let Some(ttl) = &self.ttl {
            comment(
                &mut out,
                "  ",
                &format!(
                    "The library's createTable() does not enable TTL, and jobstream refuses a table\n\
                     whose TTL is off: before adopting it, enable it on `{ttl}` (DynamoDB then deletes\n\
                     the items whose `{ttl}` is past):\n  \
                     aws dynamodb update-time-to-live --table-name {} --time-to-live-specification Enabled=true,AttributeName={ttl}",
                    self.table
                ),
            );
            let _ = writeln!(out, "  ttl: {}", q(ttl));
        }
        let _ = writeln!(out, "  entity_type: {}", q(&self.entity_type));
        if let Some(why) = &self.writer_type_free {
            comment(&mut out, "  ", why);
            let _ = writeln!(out, "  writer_type: free");
        }
        // An empty mapping is `{}`: `entities:` alone would be null, a
        // file check-model cannot parse (it says "no entities" instead).
        let none = if self.entities.is_empty() { " {}" } else { "" };
        let _ = writeln!(out, "entities:{none}");
        for e in &self.entities {
            for n in &e.notes {
                comment(&mut out, "  ", &format!("TODO: {n}"));
            }
            let _ = writeln!(out, "  {}:", q(&e.name));
            let _ = writeln!(out, "    key:");
            for (k, t) in &e.key {
                let _ = writeln!(out, "      {}: {}", q(k), q(t));
            }
            if !e.attributes.is_empty() {
                let _ = writeln!(out, "    attributes:");
                for a in &e.attributes {
                    if let Some(n) = &a.note {
                        comment(&mut out, "      ", &format!("TODO: {n}"));
                    }
                    // `?` after the name: optional (an enum's too).
                    let opt = if a.optional { "?" } else { "" };
                    let ty = match &a.ty {
                        DraftTy::Named(t) => q(t),
                        DraftTy::Enum(values) => format!(
                            "[{}]",
                            values
                                .iter()
                                .map(|v| match v {
                                    serde_json::Value::String(s) => q(s),
                                    other => other.to_string(),
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    };
                    let _ = writeln!(out, "      {}: {ty}", q(&format!("{}{opt}", a.name)));
                }
            }
            if !e.checks.is_empty() {
                let _ = writeln!(out, "    check:");
                for c in &e.checks {
                    let _ = writeln!(
                        out,
                        "      - {{ expr: {}, attribute: {}, message: {} }}",
                        q(&c.expr),
                        q(&c.attribute),
                        q(&c.message)
                    );
                }
            }
            if !e.project.is_empty() {
                let _ = writeln!(out, "    project:");
                let _ = writeln!(out, "      attributes:");
                for p in &e.project {
                    if let Some(n) = &p.note {
                        comment(&mut out, "        ", &format!("TODO: {n}"));
                    }
                    let _ = writeln!(out, "        {}: {}", q(&p.attr), q(&p.value));
                }
            }
        }
        out
    }
}

/// The holes of a `${...}` template: the literal text before each and its
/// inside, then the text after the last one (an unclosed `${` included).
pub fn holes(template: &str) -> (Vec<(String, String)>, String) {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + end];
        out.push((rest[..start].to_string(), inner.to_string()));
        rest = &rest[start + end + 1..];
    }
    (out, rest.to_string())
}

/// A CEL string literal.
pub fn cel_str(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A number padded with `0` to `len` characters as both libraries pad it
/// (JavaScript's `padStart` on its text): a longer one is kept whole, and a
/// negative one gets its zeros before the sign (`-5` to 4: `00-5`); `pad()`
/// alone clamps both.
pub fn pad_number(name: &str, len: usize) -> String {
    let s = format!("string({name})");
    if len <= 2 {
        // A negative number's text (2 characters at least) is never padded.
        return format!("(size({s}) >= {len} ? {s} : pad({name}, {len}))");
    }
    // A negative number: its zeros by the size of its text.
    let mut zeros = cel_str(&"0".repeat(len - 2));
    for size in 3..len {
        zeros = format!(
            "size({s}) == {size} ? {} : {zeros}",
            cel_str(&"0".repeat(len - size))
        );
    }
    format!("(size({s}) >= {len} ? {s} : {name} >= 0 ? pad({name}, {len}) : ({zeros}) + {s})")
}

/// What a key holding the `number` attribute `field` as it is says: the
/// library renders it as JavaScript's `String(n)` does, the file as
/// DynamoDB returns it (imp11's finding 8: OneTable's `price#1e-7`).
pub fn number_in_key(field: &str, library: &str) -> String {
    format!(
        "`{field}`, a number, is in a key: {library} writes one below 1e-6 or from 1e21 as JavaScript's `String(n)` does, with an exponent (`1e-7`), where this file renders none (`0.0000001`), so such an item would be bad input; other numbers are written alike"
    )
}

/// A name usable in templates and CEL (letters, digits, `_`), from a
/// schema's name.
pub fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.chars().next().is_none_or(|c| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// CEL's keywords and reserved words: not usable as names in expressions.
const CEL_RESERVED: &[&str] = &[
    "false",
    "in",
    "null",
    "true",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether a model file can write `name` in an expression (a CEL
/// identifier, not a reserved word) and bind it in a key template.
pub fn cel_name(name: &str) -> bool {
    let mut c = name.chars();
    c.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && c.all(|c| c.is_alphanumeric() || c == '_')
        && !CEL_RESERVED.contains(&name)
}

/// What an attribute a model file cannot name in an expression says.
pub fn unnamable(name: &str) -> String {
    if CEL_RESERVED.contains(&name) {
        format!("`{name}` is a CEL reserved word")
    } else {
        format!("`{name}` is not a name (letters, digits, `_`)")
    }
}

/// A name not yet taken among `taken`, from `base`.
pub fn fresh(base: &str, taken: &[String]) -> String {
    let mut name = base.to_string();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}{n}");
        n += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// user9's finding 9: both libraries pad a number's text with
    /// JavaScript's `padStart` (`String(-5).padStart(4, '0')` is `00-5`,
    /// as the real libraries write it in tests/integration/import.rs);
    /// `pad()` alone clamped a negative number to `0000`.
    #[test]
    fn numbers_are_padded_as_pad_start_pads_their_text() {
        use shared::file::expr::{Env, Expr, Val};
        let env = Env::new().expect("env");
        let pad_start = |n: i64, len: usize| {
            let t = n.to_string();
            format!("{}{t}", "0".repeat(len.saturating_sub(t.len())))
        };
        for len in 1..=8 {
            let e = Expr::compile(&pad_number("n", len)).expect("compiles");
            for n in [
                -1_234_567, -12_345, -999, -99, -5, 0, 7, 42, 999, 12_345, 99_999_999,
            ] {
                let v = Val::Int(n);
                let got = env.eval(&e, |name| (name == "n").then_some(&v));
                assert_eq!(got, Ok(Val::Str(pad_start(n, len))), "{n} to {len}");
            }
        }
    }

    #[test]
    fn names_and_literals_are_safe_in_the_format() {
        assert_eq!(ident("first-name"), "first_name");
        assert_eq!(ident("1st"), "_1st");
        assert_eq!(cel_str("it's"), "'it\\'s'");
        assert_eq!(q("a\"b#${c}"), "\"a\\\"b#${c}\"");
        assert_eq!(fresh("id_key", &["id_key".into()]), "id_key2");
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod projection_tests;
