//! Type-checks a compiled expression against the declared types of the
//! names it reads, at load: a comparison or arithmetic between values of
//! incompatible types, a function called on the wrong type, a condition that
//! is not a `bool` or a sum (`add:`) that is not an `int` would fail (or be
//! always false) on every item at run time, so the file is refused instead.
//!
//! A `number` (a `number` attribute, a literal such as `4.5`) is compared
//! (with ints too), tested for equality and rendered, exactly; arithmetic,
//! `sum`, `pad`, conversions and counts of one are refused, with what to
//! write instead ([`NUMBER_HINT`]): a computed number would not be exact.
//!
//! The check is conservative: what it cannot know (a name of unknown type,
//! a map's field, a list's element, a macro's variable) is
//! `dyn` and passes; an optional attribute that is absent (`null`) is left
//! to run time (the item is then bad input as a whole).

use cel::common::ast::{operators as op, Expr as E, LiteralValue};
use cel::IdedExpr;

use super::expr::Expr;
use super::model::Ty;

mod calls;
mod enums;
mod min_max;
pub use enums::Enums;
pub use min_max::unguarded_min_max;

/// What the check knows of a value's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum T {
    Int,
    /// A `number`: an int or an exact decimal at run time.
    Num,
    Str,
    Bool,
    List,
    Map,
    Null,
    /// Unknown: anything passes.
    Dyn,
}

impl T {
    /// The check's view of a declared attribute type (`None`: undeclared).
    pub fn of(ty: Option<&Ty>) -> T {
        match ty {
            Some(Ty::Int | Ty::IntEnum(_)) => T::Int,
            Some(Ty::Number) => T::Num,
            Some(Ty::Str | Ty::Ulid | Ty::IsoUtc | Ty::Enum(_) | Ty::Format(_)) => T::Str,
            Some(Ty::Bool | Ty::BoolEnum(_)) => T::Bool,
            Some(Ty::Set | Ty::List) => T::List,
            Some(Ty::Map) => T::Map,
            Some(Ty::Unknown) | None => T::Dyn,
        }
    }

    /// The type's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            T::Int => "an int",
            T::Num => "a number",
            T::Str => "a string",
            T::Bool => "a bool",
            T::List => "a list",
            T::Map => "a map",
            T::Null => "null",
            T::Dyn => "a value",
        }
    }

    fn known(self) -> bool {
        !matches!(self, T::Dyn | T::Null)
    }

    /// Whether values of the two types may be compared: the same type, or
    /// an int and a number.
    fn comparable(self, other: T) -> bool {
        self == other || matches!((self, other), (T::Int, T::Num) | (T::Num, T::Int))
    }
}

/// What a refusal of a computation on a `number` adds.
pub const NUMBER_HINT: &str = "a `number` is compared, copied and rendered exactly, never computed (a computed fraction would not be exact): keep a value you add up or compute with as an `int` in its smallest unit (cents, not dollars), or compare the number instead";

/// A flaw in an expression found at load: where (0-based character offset
/// in its source) and why, without the place it stands (the caller says
/// which block, entity or query it is).
#[derive(Debug, Clone, PartialEq)]
pub struct Flaw {
    pub offset: usize,
    pub message: String,
}

/// The type of `expr` with `names` giving each name's declared type, or the
/// first type error met.
pub fn check(expr: &Expr, names: &dyn Fn(&str) -> T) -> Result<T, Flaw> {
    check_rows(expr, names, &Enums::default(), None)
}

/// `check`, with the names' enums and the rows of a `compute:` typed
/// ([`Rows`]).
fn check_rows(
    expr: &Expr,
    names: &dyn Fn(&str) -> T,
    enums: &Enums,
    rows: Option<&Rows>,
) -> Result<T, Flaw> {
    let (ast, info) = expr.ast();
    let cx = Cx {
        source: &expr.source,
        info,
        names,
        enums,
        rows,
    };
    cx.infer(ast, &mut Vec::new())
}

/// `check`, then the result must be `want` (a condition a `bool`, a sum an
/// `int`); `what` names the place in the message.
pub fn expect(expr: &Expr, names: &dyn Fn(&str) -> T, want: T, what: &str) -> Result<(), Flaw> {
    let got = check(expr, names)?;
    mismatch(expr, got, want, what)
}

/// `message`, followed by [`NUMBER_HINT`] when the type refused is a
/// `number`.
fn hinted(message: String, t: T) -> String {
    if t == T::Num {
        format!("{message}; {NUMBER_HINT}")
    } else {
        message
    }
}

/// A result of type `got` where `want` is wanted: refused when both are known.
fn mismatch(expr: &Expr, got: T, want: T, what: &str) -> Result<(), Flaw> {
    if got.known() && got != want {
        return Err(Flaw {
            offset: 0,
            message: hinted(
                format!(
                    "{what} must be {}, but `{}` is {}",
                    want.name(),
                    expr.source.trim(),
                    got.name()
                ),
                got,
            ),
        });
    }
    Ok(())
}

/// The names an expression may read where it stands, each with its type
/// as the check sees it, and what the place reads (said after an unknown
/// name: "a query's templates read its `params`").
pub struct Readable<'a> {
    pub names: Vec<(&'a str, T)>,
    pub says: &'a str,
    pub enums: Enums<'a>,
}

/// A `compute:`'s rows as the check sees them: the list `name` reads, each
/// row an item of `entity` with these fields (its attributes and key
/// names). A macro's variable over them (`rows.map(r, r.value)`, also
/// after a `filter`) reads only these fields, of their declared types.
pub struct Rows<'a> {
    pub name: &'a str,
    pub entity: &'a str,
    pub fields: Vec<(&'a str, T)>,
    /// The enums among the fields.
    pub enums: Enums<'a>,
}

/// `src` compiled and checked where it stands: every name it reads is one
/// of `reads` (an unknown one with the closest known one), every function
/// is one a model may call, in a shape the evaluator runs ([`calls`]), and
/// its types agree (`want`: the type its result must have, a condition's
/// `bool`). Every flaw is reported, not the first only; the type check runs
/// once the names and functions are known.
pub fn checked(src: &str, reads: &Readable, want: Option<(T, &str)>) -> Result<Expr, Vec<Flaw>> {
    checked_over(src, reads, None, want)
}

/// [`checked`], with a `compute:`'s rows typed.
pub fn checked_over(
    src: &str,
    reads: &Readable,
    rows: Option<&Rows>,
    want: Option<(T, &str)>,
) -> Result<Expr, Vec<Flaw>> {
    use super::expr::{BUILTINS, CEL_FUNCTIONS};
    use super::model::suggest;
    let x = Expr::compile(src).map_err(|e| {
        vec![Flaw {
            offset: e.offset,
            // A source past a limit is long: its position says which.
            message: if e.too_large {
                format!("expression too large: {}", e.message)
            } else {
                format!("cannot parse `{src}`: {}", e.message)
            },
        }]
    })?;
    // A call of a shape the evaluator does not run; a name it passes to
    // a macro (`all(xs, x, ...)`'s `x`) is said with it, not as unknown.
    let (mut flaws, passed) = calls::misshapen(&x);
    for v in &x.variables {
        if !reads.names.iter().any(|(n, _)| n == v) && !passed.contains(v) {
            let hint = suggest(v, reads.names.iter().map(|(n, _)| *n)).unwrap_or_default();
            // The clock, where what an item implies must not move while
            // the item does not.
            let why = match v.as_str() {
                "now" => format!(
                    "{}, never the clock: what is derived from an item changes only when a fact does; nothing fires at a moment by itself: for an effect due at a deadline, have a scheduler of yours write a fact then (e.g. `breachedAt`) and key the rule on it; the clock is read only by a set's `ttl` and `when` and by the table's TTL, which deletes",
                    reads.says
                ),
                _ => reads.says.to_string(),
            };
            flaws.push(Flaw {
                offset: src.find(v.as_str()).unwrap_or(0),
                message: format!("unknown name `{v}` in `{src}`{hint} ({why})"),
            });
        }
    }
    for f in &x.functions {
        if !BUILTINS.contains(&f.as_str()) && !CEL_FUNCTIONS.contains(&f.as_str()) {
            let hint =
                suggest(f, BUILTINS.iter().chain(CEL_FUNCTIONS).copied()).unwrap_or_default();
            flaws.push(Flaw {
                offset: src.find(f.as_str()).unwrap_or(0),
                message: format!("unknown function `{f}`{hint}"),
            });
        }
    }
    if !flaws.is_empty() {
        return Err(flaws);
    }
    let names = |n: &str| {
        let found = reads.names.iter().find(|(k, _)| *k == n);
        found.map_or(T::Dyn, |(_, t)| *t)
    };
    let got = check_rows(&x, &names, &reads.enums, rows).map_err(|e| {
        vec![Flaw {
            offset: e.offset,
            message: format!("`{}`: {}", src.trim(), e.message),
        }]
    })?;
    if let Some((want, what)) = want {
        mismatch(&x, got, want, what).map_err(|e| vec![e])?;
    }
    if let Some((offset, why)) = super::expr_cost::growth(&x, &names) {
        let message = format!("`{}`: {why}", src.trim());
        return Err(vec![Flaw { offset, message }]);
    }
    if let Some((offset, name)) = super::expr_cost::quadratic(&x, &names) {
        return Err(vec![Flaw {
            offset,
            message: format!(
                "`{}`: `{name}`, a list of the item, is read inside the body of a macro (`all`, `exists`, `map`, `filter`, ...), so the evaluation's cost grows with the square of the lists' lengths (one 400 KB item would hold its shard for minutes); read the item's lists once, outside a macro's body (inside one, only `size({name})` and `{name}[i]`), or nest macros over an element's own list (`teams.all(t, t.members.all(m, ...))`)",
                src.trim()
            ),
        }]);
    }
    Ok(x)
}

/// Whether a loop step adds the list `[var]` (a `filter`'s step).
fn adds_itself(e: &IdedExpr, var: &str) -> bool {
    match &e.expr {
        E::List(l) => {
            l.elements.len() == 1 && matches!(&l.elements[0].expr, E::Ident(n) if n == var)
        }
        E::Call(c) => c
            .target
            .iter()
            .map(|t| &**t)
            .chain(&c.args)
            .any(|x| adds_itself(x, var)),
        _ => false,
    }
}

struct Cx<'a> {
    source: &'a str,
    info: &'a cel::common::ast::SourceInfo,
    names: &'a dyn Fn(&str) -> T,
    enums: &'a Enums<'a>,
    rows: Option<&'a Rows<'a>>,
}

/// `e`'s place in `source`: its character offset (0 when unknown).
pub(super) fn char_offset(
    source: &str,
    info: &cel::common::ast::SourceInfo,
    e: &IdedExpr,
) -> usize {
    let byte = info.offset_for(e.id).map_or(0, |(start, _)| start as usize);
    source
        .get(..byte.min(source.len()))
        .map_or(0, |s| s.chars().count())
}

/// A macro variable, and whether it is a row of [`Cx::rows`].
type Bound = Vec<(String, bool)>;

impl Cx<'_> {
    fn at(&self, e: &IdedExpr) -> usize {
        char_offset(self.source, self.info, e)
    }

    fn err(&self, e: &IdedExpr, message: String) -> Result<T, Flaw> {
        Err(Flaw {
            offset: self.at(e),
            message,
        })
    }

    /// Whether `e` is the rows, or a `filter` of them: a list of rows.
    fn is_rows(&self, e: &IdedExpr, bound: &Bound) -> bool {
        let Some(rows) = self.rows else {
            return false;
        };
        match &e.expr {
            E::Ident(n) => n == rows.name && !bound.iter().any(|(b, _)| b == n),
            // `filter` expands to a loop adding `[x]`, the row itself.
            E::Comprehension(c) => {
                self.is_rows(&c.iter_range, bound)
                    && matches!(&c.result.expr, E::Ident(a) if *a == c.accu_var)
                    && adds_itself(&c.loop_step, &c.iter_var)
            }
            _ => false,
        }
    }

    /// A field of a row: one its entity has, of its declared type.
    fn row_field(&self, e: &IdedExpr, field: &str) -> Result<T, Flaw> {
        let rows = self.rows.expect("a row is read with rows");
        match rows.fields.iter().find(|(f, _)| *f == field) {
            Some((_, t)) => Ok(*t),
            None => {
                let hint = super::model::suggest(field, rows.fields.iter().map(|(f, _)| *f))
                    .unwrap_or_default();
                self.err(
                    e,
                    format!(
                        "a row of `{}` ({}) has no attribute `{field}`{hint}",
                        rows.name, rows.entity
                    ),
                )
            }
        }
    }

    fn infer(&self, e: &IdedExpr, bound: &mut Bound) -> Result<T, Flaw> {
        match &e.expr {
            E::Unspecified => Ok(T::Dyn),
            E::Literal(l) => Ok(match l {
                LiteralValue::Boolean(_) => T::Bool,
                LiteralValue::Int(_) => T::Int,
                LiteralValue::String(_) => T::Str,
                LiteralValue::Null => T::Null,
                LiteralValue::Double(_) => T::Num,
                LiteralValue::Bytes(_) | LiteralValue::UInt(_) => T::Dyn,
            }),
            E::Ident(n) => Ok(
                if let Some((_, row)) = bound.iter().rev().find(|(b, _)| b == n) {
                    if *row {
                        T::Map
                    } else {
                        T::Dyn
                    }
                } else if n.starts_with('@') {
                    T::Dyn
                } else {
                    (self.names)(n)
                },
            ),
            E::List(l) => {
                for x in &l.elements {
                    self.infer(x, bound)?;
                }
                Ok(T::List)
            }
            E::Map(m) => {
                for x in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &x.expr {
                        self.infer(&me.key, bound)?;
                        self.infer(&me.value, bound)?;
                    }
                }
                Ok(T::Map)
            }
            E::Struct(_) => Ok(T::Dyn),
            E::Select(s) => {
                let t = self.infer(&s.operand, bound)?;
                if let E::Ident(n) = &s.operand.expr {
                    if bound
                        .iter()
                        .rev()
                        .find(|(b, _)| b == n)
                        .is_some_and(|(_, row)| *row)
                    {
                        let field = self.row_field(e, &s.field)?;
                        return Ok(if s.test { T::Bool } else { field });
                    }
                }
                if s.test {
                    return Ok(T::Bool);
                }
                if t.known() && t != T::Map {
                    return self.err(
                        e,
                        format!(
                            "`.{}` reads a field, but its operand is {}",
                            s.field,
                            t.name()
                        ),
                    );
                }
                Ok(T::Dyn)
            }
            E::Comprehension(c) => {
                self.infer(&c.iter_range, bound)?;
                let rows = self.is_rows(&c.iter_range, bound);
                let depth = bound.len();
                bound.push((c.iter_var.clone(), rows));
                bound.extend(c.iter_var2.clone().map(|v| (v, false)));
                bound.push((c.accu_var.clone(), false));
                let out = self.infer(&c.loop_step, bound).and_then(|_| {
                    self.infer(&c.loop_cond, bound)?;
                    self.infer(&c.result, bound)
                });
                bound.truncate(depth);
                out.map(|_| T::Dyn)
            }
            E::Call(call) => {
                let target = match &call.target {
                    Some(t) => Some(self.infer(t, bound)?),
                    None => None,
                };
                let mut args = Vec::with_capacity(call.args.len());
                for a in &call.args {
                    args.push(self.infer(a, bound)?);
                }
                self.enum_literals(&call.func_name, &call.args, bound)?;
                self.call(e, &call.func_name, target, &args, &call.args)
            }
        }
    }

    fn call(
        &self,
        e: &IdedExpr,
        f: &str,
        target: Option<T>,
        args: &[T],
        arg_exprs: &[IdedExpr],
    ) -> Result<T, Flaw> {
        let symbol = |f: &str| f.trim_matches('_').replace('_', " ").trim().to_string();
        // One argument must be of a kind (`Dyn`/`Null` pass: unknown or left
        // to run time).
        let must = |i: usize, t: T, allowed: &[T], what: &str| -> Result<(), Flaw> {
            if t.known() && !allowed.contains(&t) {
                let at = arg_exprs.get(i).map_or(self.at(e), |a| self.at(a));
                return Err(Flaw {
                    offset: at,
                    message: hinted(format!("{what}, but it is given {}", t.name()), t),
                });
            }
            Ok(())
        };
        match f {
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS => {
                let (a, b) = (args[0], args[1]);
                for (i, t) in [(0, a), (1, b)] {
                    must(
                        i,
                        t,
                        &[T::Int, T::Num, T::Str, T::Bool],
                        &format!("`{}` orders numbers, strings or bools", symbol(f)),
                    )?;
                }
                if a.known() && b.known() && !a.comparable(b) {
                    return self.err(
                        e,
                        format!(
                            "`{}` compares {} with {}: they cannot be ordered (every item would be bad input); convert one side (`int(...)`, `string(...)`)",
                            symbol(f),
                            a.name(),
                            b.name()
                        ),
                    );
                }
                Ok(T::Bool)
            }
            op::EQUALS | op::NOT_EQUALS => {
                let (a, b) = (args[0], args[1]);
                if a.known() && b.known() && !a.comparable(b) {
                    return self.err(
                        e,
                        format!(
                            "`{}` compares {} with {}: never equal; convert one side (`int(...)`, `string(...)`)",
                            symbol(f),
                            a.name(),
                            b.name()
                        ),
                    );
                }
                Ok(T::Bool)
            }
            op::LOGICAL_AND | op::LOGICAL_OR => {
                for (i, t) in args.iter().enumerate() {
                    must(i, *t, &[T::Bool], &format!("`{}` joins bools", symbol(f)))?;
                }
                Ok(T::Bool)
            }
            op::LOGICAL_NOT | op::NOT_STRICTLY_FALSE => {
                must(0, args[0], &[T::Bool], "`!` negates a bool")?;
                Ok(T::Bool)
            }
            op::CONDITIONAL => {
                must(
                    0,
                    args[0],
                    &[T::Bool],
                    "the condition of `? :` must be a bool",
                )?;
                // Either result may be the value: one of a known type
                // is what the whole gives where the other is unknown
                // (`size(xs) == 0 ? '' : max(...)` is a string, checked
                // as one), and two known types must agree.
                let (a, b) = (args[1], args[2]);
                match (a, b) {
                    _ if a == b => Ok(a),
                    (T::Null, t) | (t, T::Null) => Ok(t),
                    (T::Int, T::Num) | (T::Num, T::Int) => Ok(T::Num),
                    (T::Dyn, t) | (t, T::Dyn) => Ok(t),
                    _ => self.err(
                        e,
                        format!(
                            "the two results of `? :` are of different types, {} and {}",
                            a.name(),
                            b.name()
                        ),
                    ),
                }
            }
            op::ADD => {
                let (a, b) = (args[0], args[1]);
                for (i, t) in [(0, a), (1, b)] {
                    must(
                        i,
                        t,
                        &[T::Int, T::Str, T::List],
                        "`+` adds ints, strings or lists",
                    )?;
                }
                if a.known() && b.known() && a != b {
                    return self.err(
                        e,
                        format!(
                            "`+` adds {} and {}: convert one side (`string(...)` to join text, `int(...)` to add numbers)",
                            a.name(),
                            b.name()
                        ),
                    );
                }
                Ok(if a.known() { a } else { b })
            }
            op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO => {
                for (i, t) in args.iter().enumerate() {
                    must(
                        i,
                        *t,
                        &[T::Int],
                        &format!("`{}` is arithmetic on ints", symbol(f)),
                    )?;
                }
                Ok(if args.iter().all(|t| *t == T::Int) {
                    T::Int
                } else {
                    T::Dyn
                })
            }
            op::NEGATE => {
                must(0, args[0], &[T::Int], "`-` negates an int")?;
                Ok(args[0])
            }
            op::IN => {
                must(
                    1,
                    args[1],
                    &[T::List, T::Map],
                    "`in` looks in a list or a map",
                )?;
                Ok(T::Bool)
            }
            op::INDEX | op::OPT_INDEX => {
                must(
                    0,
                    args[0],
                    &[T::List, T::Map],
                    "`[...]` indexes a list or a map",
                )?;
                Ok(T::Dyn)
            }
            "lower" | "upper" | "trim" | "slug" | "dashed" => {
                must(0, args[0], &[T::Str], &format!("`{f}` takes a string"))?;
                Ok(T::Str)
            }
            "isUlid" => {
                must(0, args[0], &[T::Str], "`isUlid` takes a string")?;
                Ok(T::Bool)
            }
            "epoch" => {
                must(0, args[0], &[T::Str], "`epoch` takes an ISO-8601 string")?;
                Ok(T::Int)
            }
            "iso" => {
                must(0, args[0], &[T::Int], "`iso` takes epoch seconds (an int)")?;
                Ok(T::Str)
            }
            "pad" => {
                must(0, args[0], &[T::Int], "`pad(n, width)` pads an int")?;
                if let Some(w) = args.get(1) {
                    must(1, *w, &[T::Int], "`pad`'s width is an int")?;
                }
                Ok(T::Str)
            }
            "day" | "month" | "year" => {
                must(
                    0,
                    args[0],
                    &[T::Str, T::Int],
                    &format!("`{f}` takes a date, a date-time or epoch seconds"),
                )?;
                Ok(T::Str)
            }
            "sum" => {
                must(0, args[0], &[T::List], "`sum` takes a list of ints")?;
                Ok(T::Int)
            }
            "get" => {
                must(
                    0,
                    args[0],
                    &[T::Map],
                    "`get(map, key, default)` reads a map",
                )?;
                Ok(T::Dyn)
            }
            "size" => {
                let t = target.unwrap_or(args.first().copied().unwrap_or(T::Dyn));
                if t.known() && ![T::Str, T::List, T::Map].contains(&t) {
                    return self.err(
                        e,
                        format!(
                            "`size` takes a string, a list or a map, but it is given {}",
                            t.name()
                        ),
                    );
                }
                Ok(T::Int)
            }
            "startsWith" | "endsWith" => {
                if let Some(t) = target {
                    if t.known() && t != T::Str {
                        return self.err(
                            e,
                            format!("`{f}` is a method of a string, not of {}", t.name()),
                        );
                    }
                }
                must(0, args[0], &[T::Str], &format!("`{f}` takes a string"))?;
                Ok(T::Bool)
            }
            "contains" => {
                if let Some(t) = target {
                    if t == T::List || t == T::Map {
                        return self.err_at_name(e, f, self.use_in(e, t));
                    }
                    if t.known() && t != T::Str {
                        return self.err(
                            e,
                            format!("`contains` is a method of a string, not of {}", t.name()),
                        );
                    }
                    must(0, args[0], &[T::Str], "a string `contains` a string")?;
                }
                Ok(T::Bool)
            }
            "int" | "string" | "bool" | "max" | "min"
                if args.iter().chain(&target).any(|t| *t == T::Num) =>
            {
                let what = match f {
                    "string" => "`string(...)` of a number is not exact text; render it in a template instead (`${price}` is the number as DynamoDB returns it)",
                    "int" => "`int(...)` of a number would cut its fraction",
                    _ => "`{f}` of numbers is a computation",
                };
                self.err(e, hinted(what.replace("{f}", f), T::Num))
            }
            "int" | "string" | "bool" => {
                let (allowed, what, t): (&[T], _, _) = match f {
                    "int" => (&[T::Int, T::Str], "`int` converts a string", T::Int),
                    "string" => (
                        &[T::Int, T::Str, T::Bool],
                        "`string` converts an int or a bool",
                        T::Str,
                    ),
                    _ => (&[T::Bool, T::Str], "`bool` converts a string", T::Bool),
                };
                must(0, args[0], allowed, what)?;
                Ok(t)
            }
            "max" | "min" => Ok(
                if !args.is_empty() && args.iter().all(|t| *t == T::Int) && args.len() > 1 {
                    T::Int
                } else {
                    T::Dyn
                },
            ),
            _ => Ok(T::Dyn),
        }
    }
}
