//! The cost of an expression, bounded at load: an item's list read once per
//! element of a macro's list (`xs.all(a, xs.exists(b, b == a))`) costs the
//! square of the item's size (hostile13 #15: 20,000 elements evaluated for
//! 9 minutes, holding the shard), so such an expression is refused where
//! the list is read. Every other expression is linear in the item: a macro
//! reads each element once, and a macro over an element's own list
//! (`teams.all(t, t.members.all(...))`) reads each nested element once.

use cel::common::ast::{operators as op, Expr as E};
use cel::IdedExpr;

use super::expr::Expr;
use super::typecheck::T;

/// The first list of the item (a name of type `list`; a map when a macro
/// iterates it) read inside a macro's body, where it is read once per
/// element of the macro's list: quadratic in the item's size. Inside a
/// body, `size(xs)` and `xs[i]` are of constant cost, and so is a macro
/// over the element's own list. The place and the name.
pub fn quadratic(expr: &Expr, names: &dyn Fn(&str) -> T) -> Option<(usize, String)> {
    let (ast, info) = expr.ast();
    let w = Walk {
        source: &expr.source,
        info,
        names,
    };
    w.per_element(ast, &mut Vec::new(), false)
}

struct Walk<'a> {
    source: &'a str,
    info: &'a cel::common::ast::SourceInfo,
    names: &'a dyn Fn(&str) -> T,
}

impl Walk<'_> {
    /// `e`'s place: its character offset in the source.
    fn at(&self, e: &IdedExpr) -> usize {
        super::typecheck::char_offset(self.source, self.info, e)
    }

    /// A free name of the item (not a macro's variable).
    fn free<'e>(&self, e: &'e IdedExpr, bound: &[String]) -> Option<&'e str> {
        match &e.expr {
            E::Ident(n) if !n.starts_with('@') && !bound.contains(n) => Some(n),
            _ => None,
        }
    }

    /// [`quadratic`]'s walk: `looped` when `e` is evaluated once per
    /// element of a macro's list. Its depth is the expression's, bounded at
    /// load.
    fn per_element(
        &self,
        e: &IdedExpr,
        bound: &mut Vec<String>,
        looped: bool,
    ) -> Option<(usize, String)> {
        let found = |n: &str| Some((self.at(e), n.to_string()));
        match &e.expr {
            E::Ident(_) => match self.free(e, bound) {
                Some(n) if looped && (self.names)(n) == T::List => found(n),
                _ => None,
            },
            E::Select(s) => self.per_element(&s.operand, bound, looped),
            E::List(l) => (l.elements.iter()).find_map(|x| self.per_element(x, bound, looped)),
            E::Map(m) => m.entries.iter().find_map(|x| match &x.expr {
                cel::common::ast::EntryExpr::MapEntry(me) => self
                    .per_element(&me.key, bound, looped)
                    .or_else(|| self.per_element(&me.value, bound, looped)),
                _ => None,
            }),
            E::Comprehension(c) => {
                if looped {
                    if let Some(n) = self.free(&c.iter_range, bound) {
                        if (self.names)(n) == T::Map {
                            return Some((self.at(&c.iter_range), n.to_string()));
                        }
                    }
                }
                let once = self
                    .per_element(&c.iter_range, bound, looped)
                    .or_else(|| self.per_element(&c.accu_init, bound, looped));
                if once.is_some() {
                    return once;
                }
                let depth = bound.len();
                bound.push(c.iter_var.clone());
                bound.extend(c.iter_var2.clone());
                bound.push(c.accu_var.clone());
                let body = self
                    .per_element(&c.loop_cond, bound, true)
                    .or_else(|| self.per_element(&c.loop_step, bound, true));
                let out = body.or_else(|| self.per_element(&c.result, bound, looped));
                bound.truncate(depth);
                out
            }
            E::Call(c) => {
                // `size(xs)`, `xs.size()` and `xs[i]` read no more than one
                // element.
                let constant = matches!(c.func_name.as_str(), "size" | op::INDEX | op::OPT_INDEX);
                let operands: Vec<&IdedExpr> =
                    c.target.iter().map(|t| &**t).chain(&c.args).collect();
                for (i, x) in operands.into_iter().enumerate() {
                    if constant && i == 0 && self.free(x, bound).is_some() {
                        continue;
                    }
                    if let Some(found) = self.per_element(x, bound, looped) {
                        return Some(found);
                    }
                }
                None
            }
            _ => None,
        }
    }
}

/// DynamoDB's largest item: what one name of the item may hold.
const ITEM: f64 = 400.0 * 1024.0;

/// The most an expression's values may hold: 64 items' worth (26.2 MB).
const MAX_VALUE_BYTES: f64 = 64.0 * ITEM;

/// The first place where `expr`'s values can grow past
/// [`MAX_VALUE_BYTES`] (hostile: `[s].map(a, a + a)[0]` nested doubles
/// its value per level, 5 GB from a 100-character attribute at 24 levels;
/// `xs.map(a, a + s)` adds the item's `s` to each of its elements): the
/// place and the bound, in bytes (infinite where a macro's result doubles
/// per element). Each name of the item is taken as a whole item; a value
/// is bounded by the values it is made of: `+` adds, `? :` takes the larger,
/// an element or a field is no larger than its list or map, a macro's
/// result sums what each element adds.
/// The place and why, in words.
pub fn growth(expr: &Expr, names: &dyn Fn(&str) -> T) -> Option<(usize, String)> {
    let (ast, info) = expr.ast();
    let w = Walk {
        source: &expr.source,
        info,
        names,
    };
    let (offset, bytes) = w.size(ast, &mut Vec::new()).err()?;
    let bound = if bytes.is_finite() {
        let items = (bytes / ITEM).ceil();
        format!("{items:.0} items' worth ({:.1} MB)", bytes / 1e6)
    } else {
        "no bound".to_string()
    };
    Some((offset, format!(
        "its values can grow to {bound} from items of 400 KB (at most 64 items' worth, {:.1} MB), here: each use of a macro's variable copies its value (`[s].map(a, a + a)` doubles it at each nesting), and an item's value added to each element of a list grows with the square of the item's size; build each value once from the item's attributes",
        MAX_VALUE_BYTES / 1e6
    )))
}

/// An upper bound on a value's size in bytes, affine in the variables of
/// the macros around it: `konst + Σ coef × |var|`; and on its number of
/// elements where it is known tighter than its bytes (a list written out,
/// a macro's result: one element per element of its list).
#[derive(Clone, Debug, Default)]
struct Size {
    konst: f64,
    vars: Vec<(String, f64)>,
    count: Option<f64>,
}

impl Size {
    fn bytes(b: f64) -> Size {
        Size {
            konst: b,
            ..Size::default()
        }
    }

    fn var(name: &str) -> Size {
        Size {
            vars: vec![(name.to_string(), 1.0)],
            ..Size::default()
        }
    }

    fn counted(mut self, n: f64) -> Size {
        self.count = Some(n);
        self
    }

    /// Its elements: at most one per byte.
    fn elements(&self, scope: &[(String, f64)]) -> f64 {
        let bytes = self.concrete(scope);
        self.count.map_or(bytes, |n| n.min(bytes))
    }

    fn coef(&self, name: &str) -> f64 {
        (self.vars.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, c)| c)
            .sum()
    }

    fn without(mut self, names: &[&str]) -> Size {
        self.vars.retain(|(n, _)| !names.contains(&n.as_str()));
        self
    }

    fn plus(self, other: Size) -> Size {
        self.merge(other, |a, b| a + b)
    }

    fn max(self, other: Size) -> Size {
        self.merge(other, f64::max)
    }

    /// Each term of the two bounds combined by `op` (coefficients are never
    /// negative, so a term one side lacks is the other's as it is).
    fn merge(mut self, other: Size, op: fn(f64, f64) -> f64) -> Size {
        self.konst = op(self.konst, other.konst);
        self.count = self.count.zip(other.count).map(|(a, b)| op(a, b));
        for (n, c) in other.vars {
            match self.vars.iter_mut().find(|(m, _)| *m == n) {
                Some((_, d)) => *d = op(*d, c),
                None => self.vars.push((n, c)),
            }
        }
        self
    }

    fn times(mut self, k: f64) -> Size {
        self.konst *= k;
        for (_, c) in &mut self.vars {
            *c *= k;
        }
        self
    }

    /// The bound in bytes, each variable at its own bound (`scope`,
    /// innermost last).
    fn concrete(&self, scope: &[(String, f64)]) -> f64 {
        let of = |n: &str| {
            (scope.iter().rev())
                .find(|(m, _)| m == n)
                .map_or(ITEM, |(_, b)| *b)
        };
        self.vars
            .iter()
            .fold(self.konst, |acc, (n, c)| acc + c * of(n))
    }
}

/// A scalar's size: a number, a bool, a null. Sizes count what the item
/// counts: at least one byte an element, so a list of the item has at most
/// as many elements as the item has bytes.
const SCALAR: f64 = 1.0;

impl Walk<'_> {
    /// [`growth`]'s walk: `e`'s bound, or the first place past the limit.
    fn size(&self, e: &IdedExpr, scope: &mut Vec<(String, f64)>) -> Result<Size, (usize, f64)> {
        // Each kind of node in a function of its own: a frame per level
        // stays small (the depth is bounded at load, the stack is a
        // worker's).
        let s = match &e.expr {
            E::Ident(n) => self.ident(n, scope),
            E::Literal(l) => literal(l),
            E::Select(s) if s.test => Size::bytes(SCALAR),
            E::Select(s) => self.size(&s.operand, scope)?,
            E::Comprehension(c) => self.comprehension(e, c, scope)?,
            E::Call(c) => self.call(c, scope)?,
            _ => self.aggregate(e, scope)?,
        };
        let bytes = s.concrete(scope);
        if bytes > MAX_VALUE_BYTES {
            return Err((self.at(e), bytes));
        }
        Ok(s)
    }

    fn ident(&self, n: &str, scope: &[(String, f64)]) -> Size {
        if scope.iter().any(|(m, _)| m == n) {
            return Size::var(n);
        }
        match (self.names)(n) {
            T::Int | T::Num | T::Bool | T::Null => Size::bytes(SCALAR),
            T::Str | T::List | T::Map | T::Dyn => Size::bytes(ITEM),
        }
    }

    /// A list, a map or a message written out: the sum of its parts.
    #[inline(never)]
    fn aggregate(
        &self,
        e: &IdedExpr,
        scope: &mut Vec<(String, f64)>,
    ) -> Result<Size, (usize, f64)> {
        use cel::common::ast::EntryExpr;
        let mut sum = Size::default();
        let parts: Vec<&IdedExpr> = match &e.expr {
            E::List(l) => l.elements.iter().collect(),
            E::Map(m) => (m.entries.iter())
                .flat_map(|x| match &x.expr {
                    EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
                    EntryExpr::StructField(f) => vec![&f.value],
                })
                .collect(),
            E::Struct(st) => (st.entries.iter())
                .filter_map(|x| match &x.expr {
                    EntryExpr::StructField(f) => Some(&f.value),
                    EntryExpr::MapEntry(_) => None,
                })
                .collect(),
            _ => return Ok(Size::bytes(SCALAR)),
        };
        for x in parts {
            sum = sum.plus(self.size(x, scope)?);
        }
        Ok(match &e.expr {
            E::List(l) => sum.counted(l.elements.len() as f64),
            E::Map(m) => sum.counted(m.entries.len() as f64),
            _ => sum,
        })
    }

    #[inline(never)]
    fn call(
        &self,
        c: &cel::common::ast::CallExpr,
        scope: &mut Vec<(String, f64)>,
    ) -> Result<Size, (usize, f64)> {
        let mut args = Vec::with_capacity(c.args.len() + 1);
        for x in c.target.iter().map(|t| &**t).chain(&c.args) {
            args.push(self.size(x, scope)?);
        }
        let sum = |args: Vec<Size>| {
            let mut it = args.into_iter();
            let first = it.next().unwrap_or_default();
            it.fold(first, Size::plus)
        };
        Ok(match c.func_name.as_str() {
            op::ADD => sum(args),
            // The larger branch (the condition is a bool).
            op::CONDITIONAL => {
                let mut it = args.into_iter().skip(1);
                let a = it.next().unwrap_or_default();
                a.max(it.next().unwrap_or_default())
            }
            // An element or entry is no larger than its whole; `get`'s
            // default is its own.
            op::INDEX | op::OPT_INDEX => args.into_iter().next().unwrap_or_default(),
            "get" => {
                let mut it = args.into_iter();
                let whole = it.next().unwrap_or_default();
                whole.max(it.nth(1).unwrap_or_default())
            }
            "max" | "min" | "trim" | "string" => sum(args),
            // Case mappings may lengthen a character (`ΐ` to three).
            "lower" | "upper" | "slug" | "dashed" => sum(args).times(3.0),
            "pad" | "iso" | "day" | "month" | "year" => Size::bytes(32.0),
            // Everything else gives a bool or a number.
            _ => Size::bytes(SCALAR),
        })
    }

    /// A macro's result: its step adds what each element adds to the
    /// accumulator, so the result is its start, plus the element's
    /// coefficient times the list, plus the rest of the step once per
    /// element (at most one per byte of the list). A step that reads the
    /// accumulator twice doubles it per element: unbounded.
    #[inline(never)]
    fn comprehension(
        &self,
        e: &IdedExpr,
        c: &cel::common::ast::ComprehensionExpr,
        scope: &mut Vec<(String, f64)>,
    ) -> Result<Size, (usize, f64)> {
        let range = self.size(&c.iter_range, scope)?;
        let init = self.size(&c.accu_init, scope)?;
        let whole = range.concrete(scope);
        let n = range.elements(scope);
        let depth = scope.len();
        scope.push((c.iter_var.clone(), whole));
        if let Some(v) = &c.iter_var2 {
            scope.push((v.clone(), whole));
        }
        // The accumulator counts as empty in the step's own values: what
        // it accumulates is bounded below, from what each step adds.
        scope.push((c.accu_var.clone(), 0.0));
        let cond = self.size(&c.loop_cond, scope);
        let step = cond.and_then(|_| self.size(&c.loop_step, scope));
        scope.truncate(depth);
        let step = step?;
        let vars: Vec<&str> = std::iter::once(c.iter_var.as_str())
            .chain(c.iter_var2.as_deref())
            .collect();
        let per_element: f64 = vars.iter().map(|v| step.coef(v)).sum();
        let rest = step.clone().without(&vars).without(&[&c.accu_var]);
        let total = match step.coef(&c.accu_var) {
            d if d > 1.0 => return Err((self.at(e), f64::INFINITY)),
            d if d > 0.0 => {
                // What each step adds beside its element, once per
                // element: at most once per byte of the list.
                let once = match (rest.vars.is_empty(), range.count) {
                    (true, Some(k)) => Size::bytes(rest.konst * k),
                    (true, None) => range.clone().times(rest.konst),
                    (false, _) => Size::bytes(rest.concrete(scope) * n),
                };
                let total = init.clone().plus(range.times(per_element)).plus(once);
                match added(&c.loop_step, &c.accu_var) {
                    Some(k) => total.counted(init.elements(scope) + k * n),
                    None => total,
                }
            }
            _ => init.max(range.times(per_element).plus(rest)),
        };
        let bytes = total.concrete(scope);
        if bytes > MAX_VALUE_BYTES {
            return Err((self.at(e), bytes));
        }
        scope.push((c.accu_var.clone(), bytes));
        let result = self.size(&c.result, scope);
        scope.truncate(depth);
        // The accumulator, as the result reads it, at its bound.
        let result = result?;
        if matches!(&c.result.expr, E::Ident(n) if *n == c.accu_var) {
            return Ok(total);
        }
        let accu = result.coef(&c.accu_var);
        Ok(result.without(&[&c.accu_var]).plus(total.times(accu)))
    }
}

/// The elements a macro's step adds to its accumulator `accu` (`accu +
/// [f]`, `p ? accu + [v] : accu`), where the step is of that shape.
fn added(step: &IdedExpr, accu: &str) -> Option<f64> {
    match &step.expr {
        E::Ident(n) if n == accu => Some(0.0),
        E::Call(c) if c.func_name == op::ADD && c.target.is_none() => match c.args.as_slice() {
            [a, b] => match (&a.expr, &b.expr) {
                (E::Ident(n), E::List(l)) if n == accu => Some(l.elements.len() as f64),
                _ => None,
            },
            _ => None,
        },
        E::Call(c) if c.func_name == op::CONDITIONAL => match c.args.as_slice() {
            [_, a, b] => Some(added(a, accu)?.max(added(b, accu)?)),
            _ => None,
        },
        _ => None,
    }
}

fn literal(l: &cel::common::ast::LiteralValue) -> Size {
    use cel::common::ast::LiteralValue as L;
    Size::bytes(match l {
        L::String(s) => (s.inner().len() as f64).max(SCALAR),
        L::Bytes(b) => (b.inner().len() as f64).max(SCALAR),
        _ => SCALAR,
    })
}
