//! The one module that speaks to the `cel` crate (pinned in `Cargo.toml`).
//!
//! Every expression of a model file is compiled once, when the file loads
//! ([`Expr::compile`]); evaluating one binds only the variables it names, in
//! a fresh scope per item ([`Env::eval`]). The built-ins a model may call are
//! registered once in [`Env::new`]: `lower`, `upper`, `trim`, `slug`,
//! `pad(n, width)` (zero padding, clamped to the largest value that fits and to 0 below),
//! `epoch(iso)`, `iso(seconds)`, `day(d)` (the UTC date, `YYYY-MM-DD`, of epoch
//! seconds, a date or a date-time), `isUlid(s)`, `sum(list)`, `get(map, key,
//! default)`. CEL errors on integer overflow;
//! the caller turns any evaluation error into bad input.

use std::sync::Arc;

// What an expression reads: its free variables, and of which only fields.
#[path = "expr_names.rs"]
mod names;
use names::{free_variables, selections};

// How large an expression may be (checked without recursion).
#[path = "expr_bounds.rs"]
mod bounds;
#[path = "expr_reason.rs"]
mod reason;
pub use bounds::{MAX_DEPTH, MAX_OPERATORS};
use reason::reason;

use super::number::Number;

/// A value an expression reads or returns: what a model's attributes hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Str(String),
    Int(i64),
    /// A number that is not an int: fractional, or an integer beyond 64
    /// bits (a `number` attribute, a number inside a map or a list, a
    /// literal such as `4.5`). Exact; an integer that fits 64 bits is always
    /// an [`Val::Int`] (see [`Val::number`]), so equal values are equal.
    Num(Number),
    Bool(bool),
    /// A string set (`SS`), sorted.
    Set(Vec<String>),
    /// A fact's attributes by name (set jobs: `post.createdAt`), or a
    /// `map` attribute (string keys).
    Map(Vec<(String, Val)>),
    /// Rows of a partition (`compute:`), or a list read by an expression.
    List(Vec<Val>),
    Null,
}

impl Val {
    /// A number as expressions read it: an `Int` when it is an integer
    /// that fits 64 bits, else a `Num`.
    pub fn number(n: Number) -> Val {
        match n.as_i64() {
            Some(i) => Val::Int(i),
            None => Val::Num(n),
        }
    }

    /// The bool expression `source` gave, or why it is none (its kind, never
    /// the value).
    pub fn bool_of(self, source: &str) -> Result<bool, String> {
        match self {
            Val::Bool(b) => Ok(b),
            other => Err(format!("`{source}` gave a {}, not a bool", other.kind())),
        }
    }

    /// What kind of value it is (for messages: values are never printed).
    pub fn kind(&self) -> &'static str {
        match self {
            Val::Str(_) => "string",
            Val::Int(_) => "int",
            Val::Num(_) => "number",
            Val::Bool(_) => "bool",
            Val::Set(_) => "set",
            Val::Map(_) => "map",
            Val::List(_) => "list",
            Val::Null => "null",
        }
    }

    /// The value as it appears inside a template.
    pub fn render(&self) -> String {
        match self {
            Val::Str(s) => s.clone(),
            Val::Int(i) => i.to_string(),
            Val::Num(n) => n.to_string(),
            Val::Bool(b) => b.to_string(),
            Val::Set(v) => v.join(","),
            Val::Map(_) | Val::List(_) => String::new(),
            Val::Null => String::new(),
        }
    }

    fn to_cel(&self) -> cel::Value {
        match self {
            Val::Str(s) => cel::Value::String(Arc::new(s.clone())),
            Val::Int(i) => cel::Value::Int(*i),
            Val::Num(n) => n.to_cel(),
            Val::Bool(b) => cel::Value::Bool(*b),
            Val::Set(v) => cel::Value::List(Arc::new(
                v.iter()
                    .map(|s| cel::Value::String(Arc::new(s.clone())))
                    .collect(),
            )),
            Val::Map(m) => m
                .iter()
                .map(|(k, v)| (k.clone(), v.to_cel()))
                .collect::<std::collections::HashMap<String, cel::Value>>()
                .into(),
            Val::List(l) => cel::Value::List(Arc::new(l.iter().map(Val::to_cel).collect())),
            Val::Null => cel::Value::Null,
        }
    }

    fn from_cel(v: cel::Value) -> Result<Val, String> {
        Ok(match v {
            cel::Value::String(s) => Val::Str(s.to_string()),
            cel::Value::Int(i) => Val::Int(i),
            cel::Value::UInt(u) => {
                Val::Int(i64::try_from(u).map_err(|_| format!("{u} does not fit an int"))?)
            }
            cel::Value::Bool(b) => Val::Bool(b),
            cel::Value::Null => Val::Null,
            ref v @ cel::Value::Opaque(_) if Number::from_cel(v).is_some() => {
                Number::from_cel(v).cloned().map_or(Val::Null, Val::number)
            }
            cel::Value::List(l) => {
                let mut out = Vec::with_capacity(l.len());
                for v in l.iter() {
                    match v {
                        cel::Value::String(s) => out.push(s.to_string()),
                        other => {
                            return Err(format!("a list of {} is not a string set", kind(other)))
                        }
                    }
                }
                out.sort();
                out.dedup();
                Val::Set(out)
            }
            other => return Err(format!("a {} is not an attribute value", kind(&other))),
        })
    }
}

/// A value converted for the interpreter once and read by many
/// evaluations, e.g. a partition's rows read for each of its items: each
/// evaluation borrows it (a variable is otherwise converted for every
/// evaluation, deeply: every row, every map).
#[derive(Debug)]
pub struct Prepared {
    /// As a bare name's value is read.
    value: cel::Value,
    /// As the interpreter reads a variable (or why it cannot).
    boxed: Result<Box<dyn cel::common::value::Val>, String>,
}

impl Val {
    /// This value, converted once for many evaluations.
    pub fn prepare(&self) -> Prepared {
        let value = self.to_cel();
        let boxed =
            <Box<dyn cel::common::value::Val>>::try_from(value.clone()).map_err(|e| reason(&e));
        Prepared { value, boxed }
    }
}

/// One variable's value: converted for this evaluation, or prepared once.
enum Var<'a> {
    Owned(Box<dyn cel::common::value::Val>),
    Borrowed(&'a dyn cel::common::value::Val),
}

/// The variables of one evaluation by name.
struct Vars<'e, 'a>(Vec<(&'e str, Var<'a>)>);

impl cel::context::VariableResolver for Vars<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<cel::common::value::CowVal<'b, 'b>> {
        self.0
            .iter()
            .find(|(n, _)| *n == variable)
            .map(|(_, v)| match v {
                Var::Owned(v) => cel::common::value::CowVal::Borrowed(v.as_ref()),
                Var::Borrowed(v) => cel::common::value::CowVal::Borrowed(*v),
            })
    }
}

/// A variable's value as [`Env::eval_with`] reads it.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Val(&'a Val),
    Prepared(&'a Prepared),
}

fn kind(v: &cel::Value) -> String {
    match v {
        cel::Value::Opaque(o) => o.runtime_type_name().to_string(),
        _ => v.type_of().to_string(),
    }
}

/// A compiled expression and the names it reads.
#[derive(Debug)]
pub struct Expr {
    program: cel::Program,
    /// What is evaluated: the program with its numbers made exact
    /// ([`super::number::exact`]).
    exact: Box<cel::IdedExpr>,
    /// The values of the names `exact` put in place of number literals.
    consts: Box<[(String, Prepared)]>,
    /// The source text (for messages).
    pub source: String,
    /// Variables it reads, in the order they first appear in the source.
    pub variables: Vec<String>,
    /// Functions it calls that are not operators.
    pub functions: Vec<String>,
    /// `Some(name)` when the expression is a bare name (read without CEL).
    ident: Option<String>,
    /// The variables read only through their fields (`old.isArchived`),
    /// with those fields: a map passed for one of them needs no other
    /// entry ([`Expr::fields_of`]).
    selected: Box<[(String, Box<[String]>)]>,
}

/// A compile error: where in the expression (0-based character offset) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileError {
    pub offset: usize,
    pub message: String,
    /// The expression is larger than a limit ([`MAX_OPERATORS`],
    /// [`MAX_DEPTH`]): the message says which, and what to change.
    pub too_large: bool,
}

/// The names of the built-in functions a model may call besides CEL's own.
pub const BUILTINS: &[&str] = &[
    "lower", "upper", "trim", "slug", "dashed", "pad", "epoch", "iso", "day", "month", "year",
    "isUlid", "sum", "get",
];

/// CEL's own functions and macros a model may call.
pub const CEL_FUNCTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "int",
    "string",
    "bool",
    "max",
    "min",
];

impl Expr {
    /// The parsed expression and where each node was written (read by the
    /// load-time type check, [`super::typecheck`]).
    pub fn ast(&self) -> (&cel::IdedExpr, &cel::common::ast::SourceInfo) {
        (self.program.expression(), self.program.source_info())
    }

    /// Compiles `source` (once, at load).
    /// Bounded first ([`MAX_OPERATORS`] before it is parsed, [`MAX_DEPTH`]
    /// after), so that no later walk of its tree can overflow a stack.
    pub fn compile(source: &str) -> Result<Expr, CompileError> {
        if let Some(offset) = bounds::too_many_operators(source) {
            return Err(CompileError {
                offset,
                message: format!(
                    "more than {MAX_OPERATORS} operators (`+`, `==`, `.`, `(`, `[`, `in` and the like, counted inside strings too): split the expression (e.g. one `check` per condition)"
                ),
                too_large: true,
            });
        }
        let program = cel::Program::compile(source).map_err(|errs| {
            let first = errs.errors.first();
            CompileError {
                offset: first
                    .map(|e| offset_of(source, e.pos.0, e.pos.1))
                    .unwrap_or(0),
                message: first
                    .map(|e| e.msg.clone())
                    .unwrap_or_else(|| "cannot parse".to_string()),
                too_large: false,
            }
        })?;
        let (depth, deepest) = bounds::depth(program.expression());
        if depth > MAX_DEPTH {
            let byte = program
                .source_info()
                .offset_for(deepest.id)
                .map_or(0, |(start, _)| start as usize);
            return Err(CompileError {
                offset: source
                    .get(..byte.min(source.len()))
                    .map_or(0, |s| s.chars().count()),
                message: format!(
                    "nested {depth} levels deep, more than {MAX_DEPTH}: split the expression (each `+`, `*`, `==`, `.` or `[` of a chain nests one level more; `&&` and `||` chains nest little)"
                ),
                too_large: true,
            });
        }
        let (exact, numbers) =
            super::number::exact(program.expression(), source, program.source_info()).map_err(
                |(at, message)| CompileError {
                    offset: source.get(..at).map_or(0, |s| s.chars().count()),
                    message,
                    too_large: false,
                },
            )?;
        let consts = numbers
            .into_iter()
            .enumerate()
            .map(|(i, n)| (format!("@num{i}"), Val::Num(n).prepare()))
            .collect();
        let refs = program.references();
        // Free variables only: a macro's own (`k` in `l.filter(k, k > 1)`)
        // is bound by the macro, not read from the item.
        let mut variables = Vec::new();
        free_variables(program.expression(), &mut Vec::new(), &mut variables);
        variables.sort_by_key(|v| (first_word(source, v).unwrap_or(usize::MAX), v.clone()));
        let mut functions: Vec<String> = refs
            .functions()
            .iter()
            .filter(|f| f.chars().next().is_some_and(|c| c.is_alphabetic()))
            .map(|s| s.to_string())
            .collect();
        functions.sort();
        let trimmed = source.trim();
        let ident = (variables.len() == 1 && variables[0] == trimmed).then(|| trimmed.to_string());
        let mut uses = Vec::new();
        selections(&exact, &mut Vec::new(), &mut uses);
        let selected = uses
            .into_iter()
            .filter_map(|(name, fields)| Some((name, fields?.into_boxed_slice())))
            .collect();
        Ok(Expr {
            program,
            exact: Box::new(exact),
            consts,
            source: source.to_string(),
            variables,
            functions,
            ident,
            selected,
        })
    }

    /// The fields of variable `name` the expression reads when it reads
    /// the variable only through them (`old.isArchived`, `has(old.notes)`):
    /// a map bound to it evaluates the same with only those entries.
    /// `None` when it reads the variable otherwise (whole, indexed, in a
    /// macro that rebinds its name), or not at all.
    pub fn fields_of(&self, name: &str) -> Option<&[String]> {
        self.selected
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| &f[..])
    }
}

/// Character offset of a (1-based line, 0-based column) position in `source`.
fn offset_of(source: &str, line: isize, col: isize) -> usize {
    let line = line.max(1) as usize;
    let before: usize = source
        .split('\n')
        .take(line - 1)
        .map(|l| l.chars().count() + 1)
        .sum();
    before + col.max(0) as usize
}

/// Where `word` first appears as an identifier in `source`.
fn first_word(source: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = source[from..].find(word) {
        let at = from + i;
        let before = source[..at].chars().next_back();
        let after = source[at + word.len()..].chars().next();
        if !before.is_some_and(ident) && !after.is_some_and(ident) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The evaluation environment: CEL's standard library and the built-ins,
/// registered once per model.
pub struct Env {
    root: cel::Context<'static, 'static>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Env")
    }
}

fn str_err(function: &str, e: impl ToString) -> cel::ExecutionError {
    cel::ExecutionError::function_error(function, e)
}

impl Env {
    pub fn new() -> Result<Self, String> {
        let mut root = cel::Context::default();
        let err = |e: cel::DeclarationError| e.to_string();
        root.add_function("lower", |s: Arc<String>| s.to_lowercase())
            .map_err(err)?;
        root.add_function("upper", |s: Arc<String>| s.to_uppercase())
            .map_err(err)?;
        root.add_function("trim", |s: Arc<String>| s.trim().to_string())
            .map_err(err)?;
        root.add_function("slug", |s: Arc<String>| slug(&s))
            .map_err(err)?;
        root.add_function("dashed", |s: Arc<String>| dashed(&s))
            .map_err(err)?;
        root.add_function("isUlid", |s: Arc<String>| {
            ulid::Ulid::from_string(&s).is_ok()
        })
        .map_err(err)?;
        root.add_function(
            "pad",
            |n: cel::Value, width: i64| -> Result<Arc<String>, cel::ExecutionError> {
                // An integer past 64 bits (a counter's sum, exact to 38
                // digits) is clamped as any other: at the largest value the
                // width holds, or at 0 (spec15 #9: it was keyed at 0).
                let n = match &n {
                    cel::Value::Int(i) => *i,
                    v => match Number::from_cel(v) {
                        Some(x) if x.is_integer() => match x.cmp_i64(0) {
                            std::cmp::Ordering::Less => i64::MIN,
                            _ => i64::MAX,
                        },
                        _ => return Err(str_err("pad", "its value is not an integer (a `number` with a fraction, or no number)")),
                    },
                };
                let out = pad(n, width).map_err(|e| str_err("pad", e))?;
                if out.parse::<i64>().is_ok_and(|v| v != n) {
                    note_clamp(n, width);
                }
                Ok(Arc::new(out))
            },
        )
        .map_err(err)?;
        // `day(d)`, `month(d)`, `year(d)`: the UTC date, month or year of a
        // date, a date-time, or epoch seconds.
        type DatePart = fn(&str) -> Result<String, String>;
        let parts: [(&'static str, DatePart, &'static str); 3] = [
            ("day", day, "%Y-%m-%d"),
            ("month", month, "%Y-%m"),
            ("year", year, "%Y"),
        ];
        for (name, of_text, format) in parts {
            root.add_function(
                name,
                move |v: cel::Value| -> Result<Arc<String>, cel::ExecutionError> {
                    match v {
                        cel::Value::String(s) => {
                            of_text(&s).map(Arc::new).map_err(|e| str_err(name, e))
                        }
                        cel::Value::Int(secs) => epoch_date(secs, format)
                            .map(Arc::new)
                            .ok_or_else(|| str_err(name, "out of range")),
                        _ => Err(str_err(name, "not a date, a date-time or epoch seconds")),
                    }
                },
            )
            .map_err(err)?;
        }
        root.add_function(
            "sum",
            |list: Arc<Vec<cel::Value>>| -> Result<i64, cel::ExecutionError> {
                sum(&list).map_err(|e| str_err("sum", e))
            },
        )
        .map_err(err)?;
        root.add_function(
            "get",
            |map: cel::Value,
             key: cel::Value,
             default: cel::Value|
             -> Result<cel::Value, cel::ExecutionError> {
                get(&map, &key, default).map_err(|e| str_err("get", e))
            },
        )
        .map_err(err)?;
        root.add_function(
            "epoch",
            |s: Arc<String>| -> Result<i64, cel::ExecutionError> {
                chrono::DateTime::parse_from_rfc3339(&s)
                    .map(|t| t.timestamp())
                    .map_err(|_| str_err("epoch", "not an ISO-8601 time"))
            },
        )
        .map_err(err)?;
        // CEL's stdlib here lists `max`/`min` among its functions but does
        // not declare them: the crate's own, declared (a list or arguments).
        root.add_function("max", cel::functions::max).map_err(err)?;
        root.add_function("min", cel::functions::min).map_err(err)?;
        root.add_function(
            "iso",
            |secs: i64| -> Result<Arc<String>, cel::ExecutionError> {
                chrono::DateTime::from_timestamp(secs, 0)
                    .map(|t| Arc::new(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()))
                    .ok_or_else(|| str_err("iso", "out of range"))
            },
        )
        .map_err(err)?;
        // The orderings of numbers and ints, exact (the compiler puts them
        // in place of `<`, `<=`, `>` and `>=`: `super::number::exact`).
        for (op, name) in super::number::ORDERINGS {
            root.add_function(
                name,
                move |a: cel::Value, b: cel::Value| -> Result<bool, cel::ExecutionError> {
                    super::number::compare(&a, &b)
                        .map(|o| super::number::holds(name, o))
                        .ok_or_else(|| {
                            cel::ExecutionError::no_such_overload(op, vec![kind(&a), kind(&b)])
                        })
                },
            )
            .map_err(err)?;
        }
        Ok(Self { root })
    }

    /// Evaluates `expr` with `lookup` giving the value of each variable it
    /// reads (`None`: unbound, an error).
    pub fn eval<'a>(
        &self,
        expr: &Expr,
        lookup: impl Fn(&str) -> Option<&'a Val>,
    ) -> Result<Val, String> {
        self.eval_with(expr, |n| lookup(n).map(Arg::Val))
    }

    /// [`Env::eval`] where a variable may be a value [`Prepared`] once for
    /// many evaluations (a partition's rows, an image's map).
    pub fn eval_with<'a>(
        &self,
        expr: &Expr,
        lookup: impl Fn(&str) -> Option<Arg<'a>>,
    ) -> Result<Val, String> {
        // A bare name (most template holes and bindings) needs no interpreter.
        if let Some(name) = &expr.ident {
            return match lookup(name) {
                Some(Arg::Val(v)) => Ok(v.clone()),
                Some(Arg::Prepared(p)) => {
                    Val::from_cel(p.value.clone()).map_err(|e| format!("`{}`: {e}", expr.source))
                }
                None => Err(format!("`{name}` has no value")),
            };
        }
        // The variables it reads, each converted once, resolved by name
        // (no scope map is built per evaluation).
        let mut vars = Vec::with_capacity(expr.variables.len());
        for v in &expr.variables {
            let value = match lookup(v).ok_or_else(|| format!("`{v}` has no value"))? {
                Arg::Val(v) => Var::Owned(
                    v.to_cel()
                        .try_into()
                        .map_err(|e| format!("`{}`: {}", expr.source, reason(&e)))?,
                ),
                Arg::Prepared(p) => Var::Borrowed(
                    p.boxed
                        .as_deref()
                        .map_err(|e| format!("`{}`: {e}", expr.source))?,
                ),
            };
            vars.push((v.as_str(), value));
        }
        for (name, p) in expr.consts.iter() {
            let value = p
                .boxed
                .as_deref()
                .map_err(|e| format!("`{}`: {e}", expr.source))?;
            vars.push((name.as_str(), Var::Borrowed(value)));
        }
        let vars = Vars(vars);
        let root: &cel::Context<'_, '_> = &self.root;
        let mut scope = root.new_inner_scope();
        scope.set_variable_resolver(&vars);
        let out = cel::Value::resolve(&expr.exact, &scope)
            .map_err(|e| format!("`{}`: {}", expr.source, reason(&e)))?;
        Val::from_cel(out).map_err(|e| format!("`{}`: {e}", expr.source))
    }
}

/// The calendar day (`YYYY-MM-DD`) of a date written `YYYY-MM-DD` or
/// `YYYY/MM/DD`, or of a date-time starting with one: an RFC 3339 time with
/// an offset is the UTC day of its instant (`...T23:30:00-05:00` is the
/// next day), one without is read as UTC.
pub fn day(s: &str) -> Result<String, String> {
    utc_date(s).map(|d| d.format("%Y-%m-%d").to_string())
}

/// The month (`YYYY-MM`) of what [`day`] reads.
pub fn month(s: &str) -> Result<String, String> {
    utc_date(s).map(|d| d.format("%Y-%m").to_string())
}

/// The year (`YYYY`) of what [`day`] reads.
pub fn year(s: &str) -> Result<String, String> {
    utc_date(s).map(|d| d.format("%Y").to_string())
}

fn utc_date(s: &str) -> Result<chrono::NaiveDate, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&chrono::Utc).date_naive());
    }
    s.get(..10)
        .map(|d| d.replace('/', "-"))
        .and_then(|d| chrono::NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok())
        .ok_or_else(|| "not a date (YYYY-MM-DD, YYYY/MM/DD or a date-time)".to_string())
}

/// The UTC date of epoch seconds, formatted.
fn epoch_date(secs: i64, format: &str) -> Option<String> {
    chrono::DateTime::from_timestamp(secs, 0).map(|t| t.format(format).to_string())
}

/// The sum of a list of ints; an overflow is an error (bad input), never a
/// wrapped sum.
pub fn sum(list: &[cel::Value]) -> Result<i64, String> {
    let mut total: i64 = 0;
    for v in list {
        let n = match v {
            cel::Value::Int(i) => *i,
            cel::Value::UInt(u) => {
                i64::try_from(*u).map_err(|_| "a number does not fit an int".to_string())?
            }
            other => return Err(format!("a {} in the list is not an int", kind(other))),
        };
        total = total
            .checked_add(n)
            .ok_or_else(|| "integer overflow".to_string())?;
    }
    Ok(total)
}

/// `map[key]`, or `default` when the map has no such key (a map that is
/// null, e.g. an optional attribute that is absent, has no keys).
pub fn get(map: &cel::Value, key: &cel::Value, default: cel::Value) -> Result<cel::Value, String> {
    use cel::objects::Key;
    let m = match map {
        cel::Value::Map(m) => m,
        cel::Value::Null => return Ok(default),
        other => return Err(format!("a {} is not a map", kind(other))),
    };
    let k = match key {
        cel::Value::String(s) => Key::String(s.clone()),
        cel::Value::Int(i) => Key::Int(*i),
        cel::Value::UInt(u) => Key::Uint(*u),
        cel::Value::Bool(b) => Key::Bool(*b),
        other => return Err(format!("a {} cannot be a key", kind(other))),
    };
    Ok(m.get(&k).cloned().unwrap_or(default))
}

/// A number `pad` clamped (its value and the width it did not fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clamp {
    pub value: i64,
    pub width: i64,
}

thread_local! {
    static CLAMPS: std::cell::RefCell<Option<Vec<Clamp>>> = const { std::cell::RefCell::new(None) };
}

fn note_clamp(value: i64, width: i64) {
    CLAMPS.with(|c| {
        if let Some(v) = c.borrow_mut().as_mut() {
            v.push(Clamp { value, width });
        }
    });
}

/// Runs `f` (evaluations on this thread) and returns what it returned with
/// every number `pad` clamped meanwhile.
pub fn recording_clamps<T>(f: impl FnOnce() -> T) -> (T, Vec<Clamp>) {
    let before = CLAMPS.with(|c| c.borrow_mut().replace(Vec::new()));
    let out = f();
    let clamps = CLAMPS.with(|c| std::mem::replace(&mut *c.borrow_mut(), before));
    (out, clamps.unwrap_or_default())
}

/// Trimmed, lower case, each run of white space one `-` (`" New  York "`
/// is `new-york`; punctuation is kept: `st.-john's`).
pub fn dashed(s: &str) -> String {
    s.trim()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-")
}

/// Lower case, runs of anything but letters and digits to one `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.trim().to_lowercase().chars() {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// `n` zero-padded to `width` digits, clamped to the largest value that fits
/// and to 0 below (a clamp is noted where the caller records it: a key
/// never fails on a writer's stray number in a processor-owned attribute).
pub fn pad(n: i64, width: i64) -> Result<String, String> {
    if !(1..=18).contains(&width) {
        return Err(format!("width {width} is not 1..=18"));
    }
    let max = 10_i64.pow(width as u32) - 1;
    Ok(format!("{:0w$}", n.clamp(0, max), w = width as usize))
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
