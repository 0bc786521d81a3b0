//! A model file compiled: entities with their key templates, typed
//! attributes, checks and what they imply, every expression compiled once.
//! [`compile`] reports every problem it finds with its line and column.
//!
//! Files: this one (the compiled types and the compiler's expressions),
//! `passes.rs` (a whole file's blocks, compiled in order), `shape.rs` (an entity's keys, attributes, checks),
//! `implies.rs` (`project`, `derive`, `count` and their bindings),
//! `each.rs` (`each:` of a derive or a count, and the elements it bounds),
//! `counters.rs` (counters, uncounted counters, overlapping templates),
//! `collisions.rs` (two derives that can imply one item). The
//! other blocks compile in their own modules of `file/` (sets, once,
//! history, compute, queries, formats, locate).

use std::collections::BTreeSet;

use super::expr::{Env, Expr};
use super::raw::{AttrSpec, EnumValue, Ordered, RawEntity, RawFile, Scalar, Spanned};
use super::template::{split, KeyTemplate, Part};
use crate::models::table::{Gsi, GsiProjection, TableDef};

mod counters;
pub(in crate::file) use counters::{binder_check, binder_fits};
mod collisions;
mod each;
pub use each::EachBudget;
mod implies;
mod passes;
mod shape;

/// One problem of a model file: where and what, with a suggestion when one
/// exists.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub line: u64,
    pub col: u64,
    pub message: String,
}

impl Problem {
    pub fn new(line: u64, col: u64, message: impl Into<String>) -> Self {
        Self {
            line,
            col,
            message: message.into(),
        }
    }
}

/// Leaks a name once per loaded file (the engine's vocabulary speaks
/// `&'static str`); a process loads a file once.
pub(in crate::file) fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// An attribute type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    Str,
    Int,
    /// A number (`N`) of any value DynamoDB holds, fractional included:
    /// compared and copied exactly, never computed.
    Number,
    Bool,
    Ulid,
    IsoUtc,
    Set,
    /// A map (`M`): strings, numbers (ints, or exact `number`s),
    /// booleans, lists and maps inside, read by expressions (`get(picks,
    /// id, -1)`).
    Map,
    /// A list (`L`) of the same.
    List,
    /// An enum of strings.
    Enum(Vec<String>),
    /// An enum of integers (stored as numbers).
    IntEnum(Vec<i64>),
    /// An enum of booleans.
    BoolEnum(Vec<bool>),
    /// A string of a named format (`formats:`).
    Format(&'static super::formats::Format),
    /// A type the file misnames (`integer`): the file is refused for it
    /// already, and the attribute reads as any value (no second error
    /// where it is read).
    Unknown,
}

pub const TYPE_NAMES: &[&str] = &[
    "string", "int", "number", "bool", "ulid", "iso-utc", "set", "map", "list",
];

impl Ty {
    /// A type (or key format) by its name.
    pub fn named(name: &str) -> Option<Ty> {
        Some(match name {
            "string" => Ty::Str,
            "int" => Ty::Int,
            "number" => Ty::Number,
            "bool" => Ty::Bool,
            "ulid" => Ty::Ulid,
            "iso-utc" => Ty::IsoUtc,
            "set" => Ty::Set,
            "map" => Ty::Map,
            "list" => Ty::List,
            _ => return None,
        })
    }
}

#[derive(Debug)]
pub struct Attr {
    pub name: &'static str,
    pub ty: Ty,
    pub optional: bool,
}

/// A key attribute and its template.
#[derive(Debug)]
pub struct KeyPart {
    pub attr: &'static str,
    pub template: KeyTemplate,
}

/// A value: a template of literals and expressions (a single expression
/// keeps its type), or one expression.
#[derive(Debug)]
pub struct Value(pub Vec<Part<Expr>>);

impl Value {
    /// The names its expressions read.
    pub fn reads(&self) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter_map(|p| match p {
                Part::Hole(x, _) => Some(x),
                Part::Lit(_) => None,
            })
            .flat_map(|x| x.variables.iter().map(String::as_str))
    }
}

#[derive(Debug)]
pub struct Check {
    pub expr: Expr,
    pub message: String,
    pub attribute: &'static str,
}

#[derive(Debug)]
pub struct Project {
    pub when: Option<Expr>,
    pub attrs: Vec<(&'static str, Value)>,
    /// Attributes of the item the values were computed from (the guard).
    pub sources: Vec<&'static str>,
}

/// `each: { tag: tags }` of a derive or a count: the rule applies once per
/// distinct element of the item's `set` or `list` attribute `attr`, its
/// expressions reading the element as the string `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Each {
    pub name: &'static str,
    pub attr: &'static str,
}

#[derive(Debug)]
pub struct DeriveRule {
    pub target: usize,
    pub with: Vec<(String, Value)>,
    pub when: Option<Expr>,
    pub each: Option<Each>,
}

#[derive(Debug)]
pub struct CountRule {
    pub counter: usize,
    pub with: Vec<(String, Value)>,
    pub add: Vec<(&'static str, Value)>,
    pub when: Option<Expr>,
    pub each: Option<Each>,
}

#[derive(Debug)]
pub struct CounterDef {
    pub attrs: &'static [&'static str],
    pub created_by_processor: bool,
    pub remove_at_zero: bool,
}

#[derive(Debug)]
pub struct Entity {
    pub name: &'static str,
    pub writer: bool,
    /// `owner: other`: another writer's key space (another service's items
    /// in the same table), declared by its key only: its items are no
    /// unknown entity and carry no type of this model's; they imply and
    /// check nothing.
    pub foreign: bool,
    /// Several sources may imply one item at once (`shared: true`).
    pub shared: bool,
    pub key: Vec<KeyPart>,
    pub attrs: Vec<Attr>,
    pub checks: Vec<Check>,
    pub project: Option<Project>,
    pub derive: Vec<DeriveRule>,
    pub count: Vec<CountRule>,
    pub counter: Option<CounterDef>,
    /// Writer attributes whose values identify one item (`unique:`): its
    /// counter is located through them (see [`super::locate`]).
    pub unique: Vec<&'static str>,
    /// Processor-owned attributes computed over a partition (`compute:`).
    pub compute: Option<super::compute::Compute>,
    /// Its key templates match a key of another entity's only with values
    /// their types refuse (`ORDER#${orderId:uid}` and
    /// `ORDER#${orderId:uid}#LINE#${sku}`): classifying a key checks the
    /// values' types (see [`super::rules`]'s `classify`).
    pub by_type: bool,
    /// What its `each:` rules take of a transaction per element (`None`
    /// without one): bounds the elements an item may hold.
    pub each: Option<EachBudget>,
}

impl Entity {
    /// What kind of entity this is, in a problem's words: `a writer
    /// entity`, `another writer's key space (`owner: other`)` or `a
    /// processor entity`.
    pub fn kind_words(&self) -> &'static str {
        match (self.foreign, self.writer) {
            (true, _) => "another writer's key space (`owner: other`)",
            (false, true) => "a writer entity",
            (false, false) => "a processor entity",
        }
    }

    /// The attributes `compute:` writes.
    pub fn computed(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.compute
            .iter()
            .flat_map(|c| c.values.iter().map(|(a, _)| *a))
    }

    /// What the processors write onto an item of this entity: its
    /// projection, its `compute:` values and its counter sums (a history
    /// root's mirror is the history's: see `FileRules`).
    pub fn processor_owned(&self) -> impl Iterator<Item = &'static str> + '_ {
        let projected = self
            .project
            .iter()
            .flat_map(|p| p.attrs.iter().map(|(n, _)| *n));
        let sums = self.counter.iter().flat_map(|c| c.attrs.iter().copied());
        let stamp = self
            .compute
            .is_some()
            .then_some(crate::file::compute::SEQUENCE_ATTR);
        projected.chain(self.computed()).chain(stamp).chain(sums)
    }

    /// What every item the processors make of this processor entity
    /// carries besides what its rule gives: each required attribute whose
    /// type allows one value (`__edb_v__: ["1"]`, the version ElectroDB's
    /// ownership check reads), that value. A writer entity has none (its
    /// writer writes its values).
    pub fn constants(
        &self,
    ) -> impl Iterator<Item = (&'static str, aws_sdk_dynamodb::types::AttributeValue)> + '_ {
        use aws_sdk_dynamodb::types::AttributeValue as Av;
        self.attrs
            .iter()
            .filter(|a| !self.writer && !a.optional)
            .filter_map(|a| {
                let v = match &a.ty {
                    Ty::Enum(v) if v.len() == 1 => Av::S(v[0].clone()),
                    Ty::IntEnum(v) if v.len() == 1 => Av::N(v[0].to_string()),
                    Ty::BoolEnum(v) if v.len() == 1 => Av::Bool(v[0]),
                    _ => return None,
                };
                Some((a.name, v))
            })
    }

    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// The attribute `name`, or why there is none (with a suggestion).
    pub fn known_attr(&self, name: &str) -> Result<&Attr, String> {
        self.attr(name).ok_or_else(|| {
            let hint = suggest(name, self.attrs.iter().map(|a| a.name)).unwrap_or_default();
            format!("`{name}` is not an attribute of `{}`{hint}", self.name)
        })
    }

    /// Each binder of the key templates in order (a name bound twice
    /// twice), with its format: the values a key parses into, one each.
    pub fn key_binders(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.key.iter().flat_map(|k| {
            k.template
                .binders()
                .map(|b| (b.name.as_str(), b.format.as_deref()))
        })
    }

    /// Every name bound by the key templates (first occurrence), with its
    /// format.
    pub fn binders(&self) -> Vec<(&str, Option<&str>)> {
        let mut out: Vec<(&str, Option<&str>)> = Vec::new();
        for (name, format) in self.key_binders() {
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, format));
            }
        }
        out
    }
}

/// A compiled model file.
#[derive(Debug)]
pub struct FileModel {
    pub name: &'static str,
    pub about: &'static str,
    pub table: TableDef,
    /// The table's key names (partition key first).
    pub keys: &'static [&'static str],
    pub entity_type: &'static str,
    pub writer_type_checked: bool,
    pub entities: Vec<Entity>,
    pub env: Env,
    /// Join set jobs (`sets:`).
    pub sets: Vec<super::sets::SetSpec>,
    /// The history fold (`history:`).
    pub history: Option<super::history::HistorySpec>,
    /// At-most-once effects (`once:`).
    pub once: Vec<super::once::OnceSpec>,
    /// Named formats (`formats:`), compiled once.
    pub formats: Vec<&'static super::formats::Format>,
    /// Access patterns (`queries:`).
    pub queries: Vec<super::queries::Query>,
}

impl FileModel {
    /// Lines `check-model` prints beside OK: what the file does that its
    /// author may not expect (deleting a history's root deletes its members
    /// and entries, [`super::history_compile::cascade_note`]; how many
    /// elements an `each:` attribute may hold, [`each::note`]).
    pub fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .history
            .iter()
            .map(|h| super::history_compile::cascade_note(h, &self.entities))
            .collect();
        out.extend(self.entities.iter().flat_map(each::note));
        out
    }

    pub fn key_names(&self) -> [&'static str; 2] {
        [self.table.pk, self.table.sk]
    }

    pub fn entity(&self, name: &str) -> Option<usize> {
        self.entities.iter().position(|e| e.name == name)
    }
}

/// Whether every value of type `have` is a value of type `want` (as a key
/// part, where every value is rendered as a string).
pub(super) fn fits(have: &Ty, want: &Ty) -> bool {
    match (have, want) {
        (_, Ty::Str) => true,
        (Ty::Enum(a), Ty::Enum(b)) => a.iter().all(|v| b.contains(v)),
        (Ty::IntEnum(a), Ty::IntEnum(b)) => a.iter().all(|v| b.contains(v)),
        (Ty::BoolEnum(a), Ty::BoolEnum(b)) => a.iter().all(|v| b.contains(v)),
        (Ty::IntEnum(_), Ty::Int) | (Ty::BoolEnum(_), Ty::Bool) => true,
        (Ty::Int | Ty::IntEnum(_), Ty::Number) => true,
        (Ty::Enum(a), w) => a
            .iter()
            .all(|v| super::rules::check_str("value", v, w).is_ok()),
        (h, w) => h == w,
    }
}

/// A type as the file writes it.
pub(super) fn ty_name(ty: &Ty) -> String {
    match ty {
        Ty::Str => "a `string`".into(),
        Ty::Int => "an `int`".into(),
        Ty::Number => "a `number`".into(),
        Ty::Bool => "a `bool`".into(),
        Ty::Ulid => "a `ulid`".into(),
        Ty::IsoUtc => "an `iso-utc`".into(),
        Ty::Set => "a `set`".into(),
        Ty::Map => "a `map`".into(),
        Ty::List => "a `list`".into(),
        Ty::Enum(v) => format!("one of [{}]", v.join(", ")),
        Ty::IntEnum(v) => format!("one of [{}]", join(v)),
        Ty::BoolEnum(v) => format!("one of [{}]", join(v)),
        Ty::Format(f) => format!("a `{}`", f.name),
        Ty::Unknown => "of an unknown type".into(),
    }
}

/// Values written as a YAML list's items.
fn join<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The closest of `candidates` to `name`, when it is close.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
}

/// The index of the entity `s` names among `names`, or the problem
/// `{what}: unknown entity ...` (with a suggestion) at its place.
pub fn entity_index<'a>(
    names: impl Iterator<Item = &'a str> + Clone,
    s: &Spanned<String>,
    what: &str,
) -> Result<usize, Problem> {
    names.clone().position(|n| n == s.value).ok_or_else(|| {
        let hint = suggest(&s.value, names).unwrap_or_default();
        let (l, c) = at(s);
        Problem::new(l, c, format!("{what}: unknown entity `{}`{hint}", s.value))
    })
}

/// Position of the character `offset` inside the scalar at `pos` of
/// `source` (quoted scalars start one column later).
pub(in crate::file) fn inner(source: &str, pos: (u64, u64), offset: usize) -> (u64, u64) {
    let line = source.lines().nth(pos.0.saturating_sub(1) as usize);
    let quoted = line
        .and_then(|l| l.chars().nth(pos.1.saturating_sub(1) as usize))
        .is_some_and(|c| c == '"' || c == '\'');
    (pos.0, pos.1 + offset as u64 + u64::from(quoted))
}

/// Builds a model from its parsed file, or every problem found.
pub fn compile(raw: RawFile, source: &str, default_name: &str) -> Result<FileModel, Vec<Problem>> {
    let mut c = Compiler {
        source,
        problems: Vec::new(),
        formats: Vec::new(),
    };
    let m = c.file(raw, default_name);
    let mut problems = c.problems;
    problems.sort();
    problems.dedup();
    match m {
        Some(m) if problems.is_empty() => Ok(m),
        _ => Err(problems),
    }
}

pub(super) struct Compiler<'s> {
    source: &'s str,
    pub(super) problems: Vec<Problem>,
    /// Named formats (`formats:`), compiled before the entities.
    formats: Vec<&'static super::formats::Format>,
}

/// Where a spanned value is.
/// The queue of job `logical` (its consumer has the same name): SQS name
/// `written` (a `queue_name:`), else `jobstream-<logical>-jobs`, its DLQ
/// with `-dlq`. Err: why SQS would refuse the name (letters, digits, `-`
/// and `_`, at most 76 characters so that the DLQ's name fits SQS's 80).
pub(in crate::file) fn job_queue(
    logical: &'static str,
    written: Option<&str>,
) -> Result<crate::models::table::QueueDef, String> {
    let q = written.map_or_else(|| format!("jobstream-{logical}-jobs"), str::to_string);
    if q.is_empty()
        || q.len() > 76
        || !q
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "queue name `{q}`: SQS takes letters, digits, `-` and `_`, at most 76 characters here (the DLQ adds `-dlq`)"
        ));
    }
    Ok(crate::models::table::QueueDef::standard(
        logical,
        leak(&q),
        leak(&format!("{q}-dlq")),
        logical,
    ))
}

pub(in crate::file) fn at<T>(s: &Spanned<T>) -> (u64, u64) {
    (s.referenced.line(), s.referenced.column())
}

/// The names an entity's expressions may read and their types.
pub(super) struct Scope<'a> {
    pub(super) entity: &'a str,
    pub(super) names: Vec<(String, Option<Ty>)>,
    /// The entity's counter sums when they may not be read here (a writer's
    /// checks, derives and counts): named in the error.
    pub(super) sums: Vec<&'a str>,
    /// Names that are maps of the item's attributes (a history's `old`
    /// and `new`).
    pub(super) images: &'static [&'static str],
    /// The element of a rule's `each:`: a `string` to expressions, whose
    /// fit to a key's format is known only at run time (a key that
    /// rejects it makes the source bad input).
    pub(super) element: Option<&'static str>,
}

impl Scope<'_> {
    pub(super) fn has(&self, n: &str) -> bool {
        self.names.iter().any(|(k, _)| k == n)
    }

    /// A name's declared type where a key's type is checked against it
    /// at load: not an `each:` element's (a string of the set's).
    pub(in crate::file) fn key_fit(&self, n: &str) -> Option<&Ty> {
        if self.element == Some(n) {
            return None;
        }
        self.declared(n)
    }

    /// A name's declared type, when it has one.
    pub(in crate::file) fn declared(&self, n: &str) -> Option<&Ty> {
        let found = self.names.iter().find(|(k, _)| k == n);
        found.and_then(|(_, t)| t.as_ref())
    }

    /// A name's type as the type check sees it.
    pub(super) fn ty(&self, n: &str) -> super::typecheck::T {
        super::typecheck::T::of(self.declared(n))
    }
}

impl Compiler<'_> {
    pub(super) fn err(&mut self, pos: (u64, u64), msg: impl Into<String>) {
        self.problems.push(Problem::new(pos.0, pos.1, msg));
    }

    /// Position of the character `offset` inside the scalar at `pos`
    /// (quoted scalars start one column later).
    fn inner(&self, pos: (u64, u64), offset: usize) -> (u64, u64) {
        inner(self.source, pos, offset)
    }

    pub(super) fn scope<'a>(&self, e: &'a Entity) -> Scope<'a> {
        let mut names: Vec<(String, Option<Ty>)> = e
            .attrs
            .iter()
            .map(|a| (a.name.to_string(), Some(a.ty.clone())))
            .collect();
        // A counter's expressions (its `project:`) read its sums as ints,
        // a writer's its computed attributes.
        for a in e
            .counter
            .iter()
            .flat_map(|c| c.attrs.iter().copied())
            .chain(e.computed())
        {
            if !names.iter().any(|(n, _)| n == a) {
                names.push((a.to_string(), Some(Ty::Int)));
            }
        }
        for (b, f) in e.binders() {
            if !names.iter().any(|(n, _)| n == b) {
                let ty = f.and_then(|f| super::formats::named(f, &self.formats));
                names.push((b.to_string(), ty.or(Some(Ty::Str))));
            }
        }
        Scope {
            entity: e.name,
            names,
            sums: vec![],
            images: &[],
            element: None,
        }
    }

    /// The scope of a writer's checks, derives and counts: its attributes
    /// and key names, never its counter sums (the sums are written by the
    /// counter's sync, after the record that changed them: a count reading
    /// one would chain aggregates out of order).
    pub(super) fn writer_scope<'a>(&self, e: &'a Entity) -> Scope<'a> {
        let mut scope = self.scope(e);
        let declared = |n: &str| {
            e.attrs.iter().any(|a| a.name == n)
                || e.computed().any(|c| c == n)
                || e.binders().iter().any(|(b, _)| *b == n)
        };
        let sums: Vec<&'a str> = e
            .counter
            .iter()
            .flat_map(|c| c.attrs.iter().copied())
            .filter(|s| !declared(s))
            .collect();
        scope.names.retain(|(n, _)| !sums.contains(&n.as_str()));
        scope.sums = sums;
        scope
    }

    /// Compiles one CEL expression read in `scope`; reports unknown names
    /// and functions with suggestions, type errors, and a counter's sum read
    /// where sums may not be.
    fn expr(&mut self, src: &str, pos: (u64, u64), offset: usize, scope: &Scope) -> Option<Expr> {
        use super::typecheck::{checked, Enums, Readable, T};
        let enums = Enums {
            images: scope.images,
            ..Enums::of((scope.names.iter()).filter_map(|(n, t)| Some((n.as_str(), t.as_ref()?))))
        };
        let reads = Readable {
            names: (scope
                .names
                .iter()
                .map(|(n, t)| (n.as_str(), T::of(t.as_ref()))))
            .chain(scope.sums.iter().map(|n| (*n, T::Dyn)))
            .collect(),
            says: "an expression reads the entity's attributes and key names",
            enums,
        };
        let x = match checked(src, &reads, None) {
            Ok(x) => x,
            Err(flaws) => {
                for f in flaws {
                    let p = self.inner(pos, offset + f.offset);
                    self.err(p, format!("{}: {}", scope.entity, f.message));
                }
                return None;
            }
        };
        let mut ok = true;
        for v in x
            .variables
            .iter()
            .filter(|v| scope.sums.contains(&v.as_str()))
        {
            let p = self.inner(pos, offset + src.find(v.as_str()).unwrap_or(0));
            self.err(
                p,
                format!(
                    "{}: `{v}` in `{src}` is a sum jobstream keeps on `{}` (its `counter:`): a writer's checks, projections, derives and counts read what the application writes, never a sum (sums do not chain); a parent's total that feeds another count is a `compute:` value",
                    scope.entity, scope.entity
                ),
            );
            ok = false;
        }
        ok.then_some(x)
    }

    /// A value template (`"EMAIL#${lower(email)}"`).
    pub(super) fn template(&mut self, s: &Spanned<Scalar>, scope: &Scope) -> Option<Value> {
        let pos = at(s);
        match split(&s.value.0) {
            Err((off, msg)) => {
                let p = self.inner(pos, off);
                self.err(p, format!("{}: {msg}", scope.entity));
                None
            }
            Ok(parts) => {
                let mut out = Vec::new();
                for p in parts {
                    match p {
                        Part::Lit(l) => out.push(Part::Lit(l)),
                        Part::Hole(src, off) => {
                            out.push(Part::Hole(self.expr(&src, pos, off, scope)?, off))
                        }
                    }
                }
                Some(Value(out))
            }
        }
    }

    /// A value written as one expression (`with`, `add`).
    fn expression(&mut self, s: &Spanned<Scalar>, scope: &Scope) -> Option<Value> {
        if s.value.0.contains("${") {
            return self.template(s, scope);
        }
        let e = self.expr(&s.value.0, at(s), 0, scope)?;
        Some(Value(vec![Part::Hole(e, 0)]))
    }

    pub(super) fn condition(
        &mut self,
        s: &Option<Spanned<Scalar>>,
        scope: &Scope,
    ) -> Option<Option<Expr>> {
        match s {
            None => Some(None),
            Some(s) => {
                let e = self.expr(&s.value.0, at(s), 0, scope)?;
                self.expect(&e, at(s), scope, super::typecheck::T::Bool, "a condition")?;
                Some(Some(e))
            }
        }
    }

    /// `e` (compiled at `pos`) must give a `want` (a condition a bool, a
    /// sum an int): else reported, `None`.
    pub(super) fn expect(
        &mut self,
        e: &Expr,
        pos: (u64, u64),
        scope: &Scope,
        want: super::typecheck::T,
        what: &str,
    ) -> Option<()> {
        match super::typecheck::expect(e, &|n| scope.ty(n), want, what) {
            Ok(()) => Some(()),
            Err(err) => {
                let p = self.inner(pos, err.offset);
                self.err(p, format!("{}: {}", scope.entity, err.message));
                None
            }
        }
    }

    fn entity_ref(&mut self, s: &Spanned<String>, names: &[&str], from: &str) -> Option<usize> {
        entity_index(names.iter().copied(), s, from)
            .map_err(|p| self.problems.push(p))
            .ok()
    }
}

/// The type of an enum written as a list: one kind of value throughout.
pub(super) fn enum_type(values: &[EnumValue]) -> Option<Ty> {
    let strs: Option<Vec<String>> = values
        .iter()
        .map(|v| match v {
            EnumValue::Str(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    let ints: Option<Vec<i64>> = values
        .iter()
        .map(|v| match v {
            EnumValue::Int(i) => Some(*i),
            _ => None,
        })
        .collect();
    let bools: Option<Vec<bool>> = values
        .iter()
        .map(|v| match v {
            EnumValue::Bool(b) => Some(*b),
            _ => None,
        })
        .collect();
    strs.map(Ty::Enum)
        .or(ints.map(Ty::IntEnum))
        .or(bools.map(Ty::BoolEnum))
}
