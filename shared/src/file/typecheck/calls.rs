//! The shape of each call: whether a function is written as a method of
//! its first operand (`s.startsWith(p)`) or as a function (`lower(s)`),
//! and with how many arguments. The evaluator runs only the shapes it
//! declares: `startsWith(s, p)` fails on every item (`Undeclared reference`),
//! `lower(s, 'x')` ignores its second argument and `xs.max()` its receiver.
//! Each other shape is refused at load, at the function's name, with the
//! call to write when one is clear (user15 #1).

use cel::common::ast::{operators as op, EntryExpr, Expr as E};
use cel::IdedExpr;

use super::{char_offset, Flaw};
use crate::file::expr::Expr;

/// How many arguments a form takes: at least `.0`, at most `.1`.
type Count = (usize, usize);

const MANY: usize = usize::MAX;

/// How a function the model may call is written.
struct Shape {
    name: &'static str,
    /// Called as a function (`lower(s)`): its arguments.
    global: Option<Count>,
    /// Called as a method (`s.startsWith(p)`): the arguments in its
    /// parentheses.
    method: Option<Count>,
    /// What a method is called on, in messages ("a string").
    of: &'static str,
    /// How it is written, in messages.
    usage: &'static str,
    /// A macro: written so, it is expanded when compiled; a call left
    /// under its name is one of another shape (never run).
    macro_: bool,
}

const fn function(name: &'static str, n: usize, usage: &'static str) -> Shape {
    Shape {
        name,
        global: Some((n, n)),
        method: None,
        of: "",
        usage,
        macro_: false,
    }
}

const fn method(name: &'static str, of: &'static str, usage: &'static str) -> Shape {
    Shape {
        name,
        global: None,
        method: Some((1, 1)),
        of,
        usage,
        macro_: false,
    }
}

const fn list_macro(name: &'static str, most: usize, usage: &'static str) -> Shape {
    Shape {
        name,
        global: None,
        method: Some((2, most)),
        of: "a list",
        usage,
        macro_: true,
    }
}

/// Every function of [`crate::file::expr::BUILTINS`] and
/// [`crate::file::expr::CEL_FUNCTIONS`], as the evaluator runs it.
const SHAPES: &[Shape] = &[
    Shape {
        name: "size",
        global: Some((1, 1)),
        method: Some((0, 0)),
        of: "a string, a list or a map",
        usage: "`size(x)` or `x.size()`",
        macro_: false,
    },
    method("startsWith", "a string", "`s.startsWith(prefix)`"),
    method("endsWith", "a string", "`s.endsWith(suffix)`"),
    method("contains", "a string", "`s.contains(part)`"),
    Shape {
        name: "has",
        global: Some((1, 1)),
        method: None,
        of: "",
        usage: "`has(m.field)`, a field of a map or a row",
        macro_: true,
    },
    list_macro("all", 2, "`list.all(x, condition)`"),
    list_macro("exists", 2, "`list.exists(x, condition)`"),
    list_macro("exists_one", 2, "`list.exists_one(x, condition)`"),
    list_macro(
        "map",
        3,
        "`list.map(x, value)` or `list.map(x, condition, value)`",
    ),
    list_macro("filter", 2, "`list.filter(x, condition)`"),
    function("int", 1, "`int(x)`"),
    function("string", 1, "`string(x)`"),
    function("bool", 1, "`bool(x)`"),
    Shape {
        name: "max",
        global: Some((1, MANY)),
        method: None,
        of: "",
        usage: "`max(list)` or `max(a, b, ...)`",
        macro_: false,
    },
    Shape {
        name: "min",
        global: Some((1, MANY)),
        method: None,
        of: "",
        usage: "`min(list)` or `min(a, b, ...)`",
        macro_: false,
    },
    function("lower", 1, "`lower(s)`"),
    function("upper", 1, "`upper(s)`"),
    function("trim", 1, "`trim(s)`"),
    function("slug", 1, "`slug(s)`"),
    function("dashed", 1, "`dashed(s)`"),
    function("pad", 2, "`pad(n, width)`"),
    function("epoch", 1, "`epoch(iso)`"),
    function("iso", 1, "`iso(seconds)`"),
    function("day", 1, "`day(d)`"),
    function("month", 1, "`month(d)`"),
    function("year", 1, "`year(d)`"),
    function("isUlid", 1, "`isUlid(s)`"),
    function("sum", 1, "`sum(list)`"),
    function("get", 3, "`get(map, key, default)`"),
];

fn fits(form: Option<Count>, n: usize) -> bool {
    form.is_some_and(|(least, most)| (least..=most).contains(&n))
}

/// "1 argument", "at least 1 argument", "2 or 3 arguments".
fn count(c: Count) -> String {
    let noun = |n: usize| if n == 1 { "argument" } else { "arguments" };
    match c {
        (0, 0) => "no argument".to_string(),
        (a, b) if a == b => format!("{a} {}", noun(a)),
        (a, MANY) => format!("at least {a} {}", noun(a)),
        (a, b) if b == a + 1 => format!("{a} or {b} arguments"),
        (a, b) => format!("{a} to {b} arguments"),
    }
}

/// The calls of `expr` of a shape the evaluator does not run, each at its
/// function's name; and the names such a call's arguments are (a
/// misshapen macro's variable, reported with the call, not as unknown).
pub fn misshapen(expr: &Expr) -> (Vec<Flaw>, Vec<String>) {
    let (ast, info) = expr.ast();
    let text = Text {
        source: &expr.source,
        info,
    };
    let mut out = (Vec::new(), Vec::new());
    walk(ast, &mut |e| {
        if let E::Call(c) = &e.expr {
            if let Some(message) = text.refusal(e, c) {
                out.0.push(Flaw {
                    offset: text.name_at(e, &c.func_name),
                    message,
                });
                let is_macro = SHAPES.iter().any(|s| s.name == c.func_name && s.macro_);
                for a in c.args.iter().filter(|_| is_macro) {
                    if let E::Ident(n) = &a.expr {
                        out.1.push(n.clone());
                    }
                }
            }
        }
    });
    out
}

/// Calls `f` on `e` and each expression inside it.
fn walk(e: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(e);
    match &e.expr {
        E::Call(c) => {
            c.target.iter().for_each(|t| walk(t, f));
            c.args.iter().for_each(|a| walk(a, f));
        }
        E::Select(s) => walk(&s.operand, f),
        E::List(l) => l.elements.iter().for_each(|x| walk(x, f)),
        E::Map(m) => {
            for x in &m.entries {
                if let EntryExpr::MapEntry(me) = &x.expr {
                    walk(&me.key, f);
                    walk(&me.value, f);
                }
            }
        }
        E::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(x, f);
            }
        }
        _ => {}
    }
}

/// The source text of the parts of a call, for the call to write.
pub(super) struct Text<'a> {
    pub source: &'a str,
    pub info: &'a cel::common::ast::SourceInfo,
}

impl Text<'_> {
    /// Why the call `e` does not run as written, or `None`.
    fn refusal(&self, e: &IdedExpr, c: &cel::common::ast::CallExpr) -> Option<String> {
        let f = c.func_name.as_str();
        let shape = SHAPES.iter().find(|s| s.name == f)?;
        let n = c.args.len();
        match &c.target {
            Some(target) => {
                if shape.method.is_some() {
                    let form = shape.method?;
                    if fits(Some(form), n) && !shape.macro_ {
                        return None;
                    }
                    return Some(self.miscounted(shape, form, n));
                }
                // A function called as a method: its receiver is its
                // first argument.
                let call = fits(shape.global, n + 1)
                    .then(|| {
                        let mut parts = vec![self.unwrapped(self.receiver(e, target, f)?)];
                        parts.extend(self.args(e, n)?);
                        Some(format!("`{f}({})`", parts.join(", ")))
                    })
                    .flatten();
                Some(match call {
                    Some(call) => format!("`{f}` is a function, not a method: write {call}"),
                    None => format!("`{f}` is a function, not a method: {}", shape.usage),
                })
            }
            None => {
                if let Some(form) = shape.global {
                    if fits(Some(form), n) && !shape.macro_ {
                        return None;
                    }
                    return Some(self.miscounted(shape, form, n));
                }
                // A method called as a function: its first argument is
                // its receiver.
                let call = (n >= 1 && fits(shape.method, n - 1))
                    .then(|| {
                        let args = self.args(e, n)?;
                        let receiver = if primary(&c.args[0]) || wrapped(&args[0]) {
                            args[0].clone()
                        } else {
                            format!("({})", args[0])
                        };
                        Some(format!("`{receiver}.{f}({})`", args[1..].join(", ")))
                    })
                    .flatten();
                Some(match call {
                    Some(call) => {
                        format!(
                            "`{f}` is a method of {}, not a function: write {call}",
                            shape.of
                        )
                    }
                    None => format!(
                        "`{f}` is a method of {}, not a function: {}",
                        shape.of, shape.usage
                    ),
                })
            }
        }
    }

    fn miscounted(&self, shape: &Shape, form: Count, n: usize) -> String {
        if shape.macro_ && fits(Some(form), n) {
            // The count is right, yet the macro did not apply: its
            // variable is not a plain name.
            return format!("`{}` is written {}, `x` a name", shape.name, shape.usage);
        }
        format!(
            "`{}` takes {} ({}), but it is given {n}",
            shape.name,
            count(form),
            shape.usage
        )
    }

    /// The byte where `e` was written.
    fn byte(&self, e: &IdedExpr) -> usize {
        self.info
            .offset_for(e.id)
            .map_or(0, |(start, _)| start as usize)
            .min(self.source.len())
    }

    /// The character offset of the name of the call `e` (written just
    /// before its `(`, where the call is placed), or of the call.
    pub(super) fn name_at(&self, e: &IdedExpr, name: &str) -> usize {
        let paren = self.byte(e);
        let before = self.source[..paren].trim_end();
        if self.source[paren..].starts_with('(') && before.ends_with(name) {
            before[..before.len() - name.len()].chars().count()
        } else {
            char_offset(self.source, self.info, e)
        }
    }

    /// The source of the `n` arguments of the call `e`, each trimmed:
    /// split at the commas outside brackets and quotes between its
    /// parentheses. `None` when they cannot be told apart.
    pub(super) fn args(&self, e: &IdedExpr, n: usize) -> Option<Vec<String>> {
        let from = self.byte(e);
        let inner = self.source.get(from..)?.strip_prefix('(')?;
        let mut parts = Vec::new();
        let mut depth = 0usize;
        let mut start = 0;
        let mut chars = inner.char_indices();
        let mut end = None;
        while let Some((i, ch)) = chars.next() {
            match ch {
                '\'' | '"' => {
                    // A string: up to the same quote, past escapes.
                    let mut escaped = false;
                    for (_, c) in chars.by_ref() {
                        if escaped {
                            escaped = false;
                        } else if c == '\\' {
                            escaped = true;
                        } else if c == ch {
                            break;
                        }
                    }
                }
                '(' | '[' | '{' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' | ']' | '}' => depth = depth.checked_sub(1)?,
                ',' if depth == 0 => {
                    parts.push(inner[start..i].trim().to_string());
                    start = i + 1;
                }
                _ => {}
            }
        }
        let last = inner[start..end?].trim();
        if !last.is_empty() || !parts.is_empty() {
            parts.push(last.to_string());
        }
        let parses = |p: &String| Expr::compile(p).is_ok();
        (parts.len() == n && parts.iter().all(parses)).then_some(parts)
    }

    /// The source of the receiver `target` of the method call `e` named
    /// `name`: from where it starts to the `.` before the name, with the
    /// parentheses it opened.
    pub(super) fn receiver(&self, e: &IdedExpr, target: &IdedExpr, name: &str) -> Option<String> {
        let mut start = usize::MAX;
        walk(target, &mut |x| start = start.min(self.byte(x)));
        let paren = self.byte(e);
        let end = self.source[..paren]
            .trim_end()
            .strip_suffix(name)?
            .trim_end()
            .strip_suffix('.')?
            .len();
        let mut text = self.source.get(start..end)?.trim().to_string();
        let mut from = start;
        while text.matches(')').count() > text.matches('(').count() {
            from = self.source[..from].trim_end().strip_suffix('(')?.len();
            text = format!("({text}");
        }
        Expr::compile(&text).is_ok().then_some(text)
    }

    /// `text` without the parentheses around the whole of it.
    fn unwrapped(&self, text: String) -> String {
        if wrapped(&text) {
            text[1..text.len() - 1].trim().to_string()
        } else {
            text
        }
    }
}

/// Whether `text` is one parenthesized expression: its first `(` closes
/// at its last character.
fn wrapped(text: &str) -> bool {
    if !(text.starts_with('(') && text.ends_with(')')) {
        return false;
    }
    let mut depth = 0i64;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i == text.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// Whether `e` may be a method's receiver without parentheses: a name, a
/// field, a literal, a list, a map, a call or an index.
fn primary(e: &IdedExpr) -> bool {
    match &e.expr {
        E::Call(c) => {
            c.func_name.starts_with(|c: char| c.is_alphabetic())
                || c.func_name == op::INDEX
                || c.func_name == op::OPT_INDEX
        }
        _ => true,
    }
}

impl super::Cx<'_> {
    fn text(&self) -> Text<'_> {
        Text {
            source: self.source,
            info: self.info,
        }
    }

    /// A refusal of the call `e` of `name`, at the name.
    pub(super) fn err_at_name(
        &self,
        e: &IdedExpr,
        name: &str,
        message: String,
    ) -> Result<super::T, Flaw> {
        Err(Flaw {
            offset: self.text().name_at(e, name),
            message,
        })
    }

    /// Why `xs.contains(v)` on a list or a map (`t`) is refused: the
    /// evaluator's `contains` is a string's; `v in xs` is written instead.
    pub(super) fn use_in(&self, e: &IdedExpr, t: super::T) -> String {
        let text = self.text();
        let written = match &e.expr {
            E::Call(c) => c.target.as_ref().and_then(|target| {
                let receiver = text.receiver(e, target, &c.func_name)?;
                let arg = text.args(e, 1)?.pop()?;
                Some(format!("write `{arg} in {receiver}`"))
            }),
            _ => None,
        };
        format!(
            "`contains` is a method of a string, not of {}: whether {} holds a value is `in`, {}",
            t.name(),
            t.name(),
            written.unwrap_or_else(|| "`value in xs`".to_string())
        )
    }
}
