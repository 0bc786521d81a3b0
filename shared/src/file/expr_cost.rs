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
