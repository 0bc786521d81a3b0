//! `min(list)` and `max(list)` whose list may be empty: of an empty list
//! they give `null`, no int.

use cel::common::ast::{operators as op, Expr as E};
use cel::IdedExpr;

use super::{Cx, Enums, T};
use crate::file::expr::Expr;

/// The first `min(list)` or `max(list)` of `expr` outside the branches of
/// a `? :`, whose list may be empty (not a list written out, nor one with
/// such a list added): the call's offset and name. Of an empty list they
/// give `null`, no int, so a computed value written so is bad input on
/// every item whose list is empty.
pub fn unguarded_min_max(expr: &Expr) -> Option<(usize, String)> {
    let (ast, info) = expr.ast();
    let cx = Cx {
        source: &expr.source,
        info,
        names: &|_| T::Dyn,
        enums: &Enums::default(),
        rows: None,
    };
    cx.unguarded(ast)
}

/// Whether a list expression is never empty: a list written out with an
/// element, or a `+` with such a list.
fn never_empty(e: &IdedExpr) -> bool {
    match &e.expr {
        E::List(l) => !l.elements.is_empty(),
        E::Call(c) if c.func_name == op::ADD && c.target.is_none() => {
            c.args.iter().any(never_empty)
        }
        _ => false,
    }
}

impl Cx<'_> {
    fn unguarded(&self, e: &IdedExpr) -> Option<(usize, String)> {
        match &e.expr {
            E::List(l) => l.elements.iter().find_map(|x| self.unguarded(x)),
            E::Map(m) => m.entries.iter().find_map(|x| match &x.expr {
                cel::common::ast::EntryExpr::MapEntry(me) => self
                    .unguarded(&me.key)
                    .or_else(|| self.unguarded(&me.value)),
                _ => None,
            }),
            E::Select(s) => self.unguarded(&s.operand),
            E::Comprehension(c) => [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .find_map(|x| self.unguarded(x)),
            E::Call(c) => {
                let f = c.func_name.as_str();
                if (f == "min" || f == "max")
                    && c.target.is_none()
                    && c.args.len() == 1
                    && !never_empty(&c.args[0])
                {
                    return Some((self.at(e), f.to_string()));
                }
                // The branches of `? :` are guarded by its condition.
                let args = if f == op::CONDITIONAL {
                    &c.args[..1]
                } else {
                    &c.args[..]
                };
                c.target
                    .iter()
                    .map(|t| &**t)
                    .chain(args)
                    .find_map(|x| self.unguarded(x))
            }
            _ => None,
        }
    }
}
