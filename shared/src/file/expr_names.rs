//! What a compiled expression reads of its variables (walks of its
//! syntax tree, once, at compile time): the free variables, and those read
//! only through some of their fields.

/// The identifiers `e` reads that no enclosing macro binds, in no
/// particular order (`@`-names are the macros' internals).
pub(super) fn free_variables(e: &cel::IdedExpr, bound: &mut Vec<String>, out: &mut Vec<String>) {
    use cel::common::ast::{EntryExpr, Expr as E};
    let entry = |x: &EntryExpr, bound: &mut Vec<String>, out: &mut Vec<String>| match x {
        EntryExpr::StructField(f) => free_variables(&f.value, bound, out),
        EntryExpr::MapEntry(m) => {
            free_variables(&m.key, bound, out);
            free_variables(&m.value, bound, out);
        }
    };
    match &e.expr {
        E::Unspecified | E::Literal(_) => {}
        E::Ident(n) => {
            if !n.starts_with('@') && !bound.contains(n) && !out.contains(n) {
                out.push(n.clone());
            }
        }
        E::Call(c) => {
            if let Some(t) = &c.target {
                free_variables(t, bound, out);
            }
            for a in &c.args {
                free_variables(a, bound, out);
            }
        }
        E::Comprehension(c) => {
            free_variables(&c.iter_range, bound, out);
            free_variables(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            free_variables(&c.loop_cond, bound, out);
            free_variables(&c.loop_step, bound, out);
            free_variables(&c.result, bound, out);
            bound.truncate(depth);
        }
        E::List(l) => {
            for x in &l.elements {
                free_variables(x, bound, out);
            }
        }
        E::Map(m) => {
            for x in &m.entries {
                entry(&x.expr, bound, out);
            }
        }
        E::Struct(st) => {
            for x in &st.entries {
                entry(&x.expr, bound, out);
            }
        }
        E::Select(sel) => free_variables(&sel.operand, bound, out),
    }
}

/// How `e` reads each free variable: `Some(fields)` while every
/// occurrence is the operand of a field selection, `None` once one is not
/// (or a macro binds a name it reads free elsewhere: read whole, to be
/// safe).
pub(super) fn selections(
    e: &cel::IdedExpr,
    bound: &mut Vec<String>,
    out: &mut Vec<(String, Option<Vec<String>>)>,
) {
    use cel::common::ast::{EntryExpr, Expr as E};
    fn note(out: &mut Vec<(String, Option<Vec<String>>)>, name: &str, field: Option<&str>) {
        let at = match out.iter().position(|(n, _)| n == name) {
            Some(at) => at,
            None => {
                out.push((name.to_string(), Some(Vec::new())));
                out.len() - 1
            }
        };
        match (&mut out[at].1, field) {
            (Some(fields), Some(f)) => {
                if !fields.iter().any(|x| x == f) {
                    fields.push(f.to_string());
                }
            }
            (slot, _) => *slot = None,
        }
    }
    let free = |n: &str, bound: &[String]| !n.starts_with('@') && !bound.iter().any(|b| b == n);
    let entry = |x: &EntryExpr, bound: &mut Vec<String>, out: &mut Vec<_>| match x {
        EntryExpr::StructField(f) => selections(&f.value, bound, out),
        EntryExpr::MapEntry(m) => {
            selections(&m.key, bound, out);
            selections(&m.value, bound, out);
        }
    };
    match &e.expr {
        E::Unspecified | E::Literal(_) => {}
        E::Ident(n) => {
            if free(n, bound) {
                note(out, n, None);
            }
        }
        E::Select(sel) => match &sel.operand.expr {
            E::Ident(n) if free(n, bound) => note(out, n, Some(&sel.field)),
            _ => selections(&sel.operand, bound, out),
        },
        E::Call(c) => {
            if let Some(t) = &c.target {
                selections(t, bound, out);
            }
            for a in &c.args {
                selections(a, bound, out);
            }
        }
        E::Comprehension(c) => {
            selections(&c.iter_range, bound, out);
            selections(&c.accu_init, bound, out);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            // A name the macro binds is read whole wherever it is free.
            for n in &bound[depth..] {
                if !n.starts_with('@') {
                    note(out, n, None);
                }
            }
            selections(&c.loop_cond, bound, out);
            selections(&c.loop_step, bound, out);
            selections(&c.result, bound, out);
            bound.truncate(depth);
        }
        E::List(l) => {
            for x in &l.elements {
                selections(x, bound, out);
            }
        }
        E::Map(m) => {
            for x in &m.entries {
                entry(&x.expr, bound, out);
            }
        }
        E::Struct(st) => {
            for x in &st.entries {
                entry(&x.expr, bound, out);
            }
        }
    }
}
