//! How large an expression may be, checked when it compiles, so that
//! nothing done with it later can overflow a thread's stack.
//!
//! The CEL crate's parser, its interpreter, the type check and our own
//! walks of a syntax tree recurse once per level of the tree, and so does
//! dropping one. A chain of binary operators (`1 + 1 + ... + 1`) is as deep
//! as it is long and the parser bounds only nesting (parentheses, calls:
//! 96 levels), so two bounds are checked, neither by recursion:
//!
//! - before parsing, the number of operators ([`MAX_OPERATORS`]), counted
//!   over the text (a string literal's too: nothing can hide an operator
//!   from the count), which bounds what the parser builds;
//! - after parsing, the depth of the syntax tree ([`MAX_DEPTH`]), measured
//!   with a list of nodes to visit, which bounds every later walk:
//!   evaluation in a handler, on a tokio worker's 2 MiB stack or Lambda's.
//!
//! The figures behind the limits are in the README (model file reference,
//! "How large an expression may be").

/// The most operators an expression may have: `+ - * / % < > = ! & | ? .
/// [ (` and the word `in`, counted wherever they appear. Parsing the
/// longest chain allowed takes under 0.4 MiB of stack (debug build), the
/// deepest nesting the parser allows with it under 0.7 MiB.
pub const MAX_OPERATORS: usize = 500;

/// The deepest syntax tree an expression may have (`a + b + c` is 3 deep:
/// `(a + b) + c`, then `> 0` one more; `&&` and `||` chains are balanced,
/// so a chain of 100 conditions is 8 deep). Evaluating a 1,100-deep tree
/// overflows a 2 MiB stack, in release and debug builds alike; this
/// limit keeps ten times that margin.
pub const MAX_DEPTH: usize = 100;

/// Where the expression has more operators than [`MAX_OPERATORS`]: the
/// character offset of the first operator past the limit.
pub(super) fn too_many_operators(source: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let chars: Vec<char> = source.chars().collect();
    let mut count = 0;
    for (at, &c) in chars.iter().enumerate() {
        let operator = match c {
            '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' | '&' | '|' | '?' | '.' | '['
            | '(' => true,
            // The relation `in`, a word of its own.
            'i' => {
                chars.get(at + 1) == Some(&'n')
                    && !at.checked_sub(1).is_some_and(|b| ident(chars[b]))
                    && !chars.get(at + 2).is_some_and(|a| ident(*a))
            }
            _ => false,
        };
        if operator {
            count += 1;
            if count > MAX_OPERATORS {
                return Some(at);
            }
        }
    }
    None
}

/// The depth of `e`'s syntax tree and its deepest node (the first met at
/// that depth), measured without recursion.
pub(super) fn depth(e: &cel::IdedExpr) -> (usize, &cel::IdedExpr) {
    use cel::common::ast::{EntryExpr, Expr as E, IdedEntryExpr};
    fn entry<'a>(x: &'a IdedEntryExpr, push: &mut impl FnMut(&'a cel::IdedExpr)) {
        match &x.expr {
            EntryExpr::StructField(f) => push(&f.value),
            EntryExpr::MapEntry(m) => {
                push(&m.key);
                push(&m.value);
            }
        }
    }
    let mut deepest = (1, e);
    let mut to_visit = vec![(1, e)];
    while let Some((d, e)) = to_visit.pop() {
        if d > deepest.0 {
            deepest = (d, e);
        }
        let mut push = |x| to_visit.push((d + 1, x));
        match &e.expr {
            E::Unspecified | E::Literal(_) | E::Ident(_) => {}
            E::Select(s) => push(&s.operand),
            E::Call(c) => {
                c.target.iter().for_each(|t| push(t));
                c.args.iter().for_each(&mut push);
            }
            E::Comprehension(c) => {
                for x in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    push(x);
                }
            }
            E::List(l) => l.elements.iter().for_each(&mut push),
            E::Map(m) => m.entries.iter().for_each(|x| entry(x, &mut push)),
            E::Struct(s) => s.entries.iter().for_each(|x| entry(x, &mut push)),
        }
    }
    deepest
}
