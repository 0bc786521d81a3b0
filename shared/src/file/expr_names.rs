//! What a compiled expression reads of its variables (walks of its
//! syntax tree, once, at compile time): the free variables, and those read
//! only through some of their fields.

/// What the walk meets: a free identifier (with the field selected on it,
/// if the identifier is a selection's operand), or the names a macro binds
/// over its body.
enum Seen<'a> {
    Free(&'a str, Option<&'a str>),
    Binds(&'a [String]),
}

/// Walks `e` once, telling `seen` each free identifier it reads (`@`-names
/// are the macros' internals) and each macro's bound names.
fn walk(e: &cel::IdedExpr, bound: &mut Vec<String>, seen: &mut dyn FnMut(Seen<'_>)) {
    use cel::common::ast::{EntryExpr, Expr as E};
    let free = |n: &str, bound: &[String]| !n.starts_with('@') && !bound.iter().any(|b| b == n);
    let entry = |x: &EntryExpr, bound: &mut Vec<String>, seen: &mut dyn FnMut(Seen<'_>)| match x {
        EntryExpr::StructField(f) => walk(&f.value, bound, seen),
        EntryExpr::MapEntry(m) => {
            walk(&m.key, bound, seen);
            walk(&m.value, bound, seen);
        }
    };
    match &e.expr {
        E::Unspecified | E::Literal(_) => {}
        E::Ident(n) => {
            if free(n, bound) {
                seen(Seen::Free(n, None));
            }
        }
        E::Select(sel) => match &sel.operand.expr {
            E::Ident(n) if free(n, bound) => seen(Seen::Free(n, Some(&sel.field))),
            _ => walk(&sel.operand, bound, seen),
        },
        E::Call(c) => {
            if let Some(t) = &c.target {
                walk(t, bound, seen);
            }
            for a in &c.args {
                walk(a, bound, seen);
            }
        }
        E::Comprehension(c) => {
            walk(&c.iter_range, bound, seen);
            walk(&c.accu_init, bound, seen);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            seen(Seen::Binds(&bound[depth..]));
            walk(&c.loop_cond, bound, seen);
            walk(&c.loop_step, bound, seen);
            walk(&c.result, bound, seen);
            bound.truncate(depth);
        }
        E::List(l) => {
            for x in &l.elements {
                walk(x, bound, seen);
            }
        }
        E::Map(m) => {
            for x in &m.entries {
                entry(&x.expr, bound, seen);
            }
        }
        E::Struct(st) => {
            for x in &st.entries {
                entry(&x.expr, bound, seen);
            }
        }
    }
}

/// The identifiers `e` reads that no enclosing macro binds, in no
/// particular order.
pub(super) fn free_variables(e: &cel::IdedExpr, bound: &mut Vec<String>, out: &mut Vec<String>) {
    walk(e, bound, &mut |s| {
        if let Seen::Free(n, _) = s {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    });
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
    walk(e, bound, &mut |s| match s {
        Seen::Free(n, field) => note(out, n, field),
        // A name the macro binds is read whole wherever it is free.
        Seen::Binds(names) => {
            for n in names.iter().filter(|n| !n.starts_with('@')) {
                note(out, n, None);
            }
        }
    });
}
