//! Derives that can imply one item: two derives (of two entities, or two
//! of one entity) whose keys of one processor entity may be equal. Unless
//! the entity is `shared: true`, the delete of one source would take the
//! item the other still implies (hostile13 #4); and one source item
//! implying one item twice with different values would leave it holding
//! whichever derive the engine reads first, shared or not. And two jobs
//! (`compute:`, `sets:`, `once:`) on one queue (hostile13 #17).

use super::*;
use crate::file::raw::RawDerive;

/// A piece of a derived key as a derive builds it: text the derive fixes,
/// or a value the source's item decides.
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Lit(String),
    Any,
}

/// One derive of the file, as the check reads it.
struct Site<'a> {
    source: &'a str,
    target: usize,
    derive: &'a Spanned<RawDerive>,
    /// Per key attribute of the target, the shape of the key it builds.
    shape: Vec<Vec<Seg>>,
}

impl Compiler<'_> {
    /// Every pair of derives of one processor entity whose keys may be
    /// equal: refused unless the entity is `shared: true` (two sources)
    /// or the pair is one derive written twice onto a shared entity with
    /// the same values; reported at the later derive, naming the earlier
    /// one and a key both may build.
    pub(super) fn derive_collisions(
        &mut self,
        entities: &[Entity],
        raws: &[(String, Spanned<RawEntity>)],
    ) {
        let mut sites: Vec<Site> = Vec::new();
        for (name, raw) in raws {
            for d in &raw.value.derive {
                let Some(target) = entities.iter().position(|e| e.name == d.value.entity.value)
                else {
                    continue;
                };
                let t = &entities[target];
                if t.writer || t.key.len() != 2 {
                    continue;
                }
                let Some(shape) = t
                    .key
                    .iter()
                    .map(|k| key_shape(&k.template, &d.value.with))
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                sites.push(Site {
                    source: name,
                    target,
                    derive: d,
                    shape,
                });
            }
        }
        for (j, b) in sites.iter().enumerate() {
            for a in &sites[..j] {
                if a.target != b.target
                    || !a.shape.iter().zip(&b.shape).all(|(x, y)| may_equal(x, y))
                {
                    continue;
                }
                let t = &entities[a.target];
                if let Some(msg) = collision(t, a, b) {
                    let line = a.derive.value.entity.referenced.line();
                    let key = t
                        .key
                        .iter()
                        .zip(a.shape.iter().zip(&b.shape))
                        .map(|(k, (x, y))| format!("{}={}", k.attr, example(x, y, &k.template)))
                        .collect::<Vec<_>>()
                        .join(", ");
                    self.err(
                        at(&b.derive.value.entity),
                        format!(
                            "{}: derive `{tn}` and `{}`'s derive `{tn}` (line {line}) can imply one `{tn}` item ({key}){msg}",
                            b.source,
                            a.source,
                            tn = t.name
                        ),
                    );
                }
            }
        }
    }
}

/// Why two derives of `t` whose keys may be equal cannot stand (the rest
/// of the problem's sentence), or `None` when they can.
fn collision(t: &Entity, a: &Site, b: &Site) -> Option<String> {
    let binders: Vec<&str> = t.binders().iter().map(|(n, _)| *n).collect();
    let bound = |s: &Site, n: &str| {
        s.derive
            .value
            .with
            .0
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.value.0.trim().to_string())
    };
    if a.source == b.source {
        let differ: Vec<(&str, String)> = t
            .attrs
            .iter()
            .map(|x| x.name)
            .filter(|n| !binders.contains(n))
            .filter_map(|n| {
                let (x, y) = (bound(a, n), bound(b, n));
                let shown =
                    |v: Option<String>| v.map_or("(unset)".to_string(), |v| format!("`{v}`"));
                (x != y).then(|| (n, format!("`{n}`: {} and {}", shown(x), shown(y))))
            })
            .collect();
        if let Some((first, _)) = differ.first() {
            let said: Vec<&str> = differ.iter().map(|(_, s)| s.as_str()).collect();
            return Some(format!(
                " with different values ({}): one `{s}` item implying it through both would leave it holding whichever derive is read first, shared or not: write one derive (its `when` the two joined by `||`, each value that differs chosen by a condition: `{first}: \"cond ? ... : ...\"`)",
                said.join("; "),
                s = a.source
            ));
        }
        if binders.iter().all(|n| bound(a, n) == bound(b, n)) {
            // Two `each:` over two attributes: an element in both.
            let each = |s: &Site| {
                s.derive
                    .value
                    .each
                    .as_ref()
                    .and_then(|e| e.value.0.first().map(|(_, a)| a.value.clone()))
            };
            if let Some((x, y)) = each(a).zip(each(b)).filter(|(x, y)| x != y) {
                return (!t.shared).then(|| {
                    format!(
                        " twice from one `{}` item whose `{x}` and `{y}` hold one element: derive from one attribute, or mark `{}` `shared: true` (an item implied twice by one source is one)",
                        a.source, t.name
                    )
                });
            }
            return (!t.shared).then(|| {
                format!(
                    " twice from one `{}` item: write one derive (its `when` the two joined by `||`)",
                    a.source
                )
            });
        }
    }
    if t.shared {
        return None;
    }
    let from = if a.source == b.source {
        format!("two `{}` items", a.source)
    } else {
        "both sources".to_string()
    };
    Some(format!(
        ": while {from} imply it, the delete of either would take the item the other still implies, and the item would hold the values of whichever was written last: mark `{tn}` `shared: true` (it then lives while any source implies it, with the values of the one whose key sorts last), or put in `{tn}`'s key a name each derive binds to a constant of its own (`${{src}}` bound to `'a'` in one, `'b'` in the other)",
        tn = t.name
    ))
}

/// The shape of the key `template` builds from `with`: its literals, and
/// each binder's value (a constant when the value is a quoted string or an
/// integer, a template's literals between its holes, else any text);
/// `None` when a binder is unbound (reported by the bindings' check).
fn key_shape(
    template: &crate::file::template::KeyTemplate,
    with: &Ordered<Spanned<Scalar>>,
) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    for p in &template.parts {
        match p {
            Part::Lit(l) => out.push(Seg::Lit(l.clone())),
            Part::Hole(b, _) => {
                let v = with.0.iter().find(|(n, _)| *n == b.name)?.1.value.0.trim();
                out.extend(value_shape(v));
            }
        }
    }
    Some(normal(out))
}

/// What a `with` value may render as in a key.
fn value_shape(v: &str) -> Vec<Seg> {
    if v.contains("${") {
        return match split(v) {
            Ok(parts) => parts
                .into_iter()
                .map(|p| match p {
                    Part::Lit(l) => Seg::Lit(l),
                    Part::Hole(..) => Seg::Any,
                })
                .collect(),
            Err(_) => vec![Seg::Any],
        };
    }
    let quoted = ['\'', '"'].into_iter().find_map(|q| {
        let inner = v.strip_prefix(q)?.strip_suffix(q)?;
        (!inner.contains(q) && !inner.contains('\\')).then_some(inner)
    });
    if let Some(inner) = quoted {
        return vec![Seg::Lit(inner.to_string())];
    }
    if v.chars().all(|c| c.is_ascii_digit()) {
        if let Ok(n) = v.parse::<i64>() {
            return vec![Seg::Lit(n.to_string())];
        }
    }
    vec![Seg::Any]
}

/// Adjacent literals joined, empty ones dropped, adjacent `Any`s one.
fn normal(segs: Vec<Seg>) -> Vec<Seg> {
    let mut out: Vec<Seg> = Vec::new();
    for s in segs {
        match (out.last_mut(), s) {
            (_, Seg::Lit(l)) if l.is_empty() => {}
            (Some(Seg::Lit(prev)), Seg::Lit(l)) => prev.push_str(&l),
            (Some(Seg::Any), Seg::Any) => {}
            (_, s) => out.push(s),
        }
    }
    out
}

/// The text a shape fixes at its start (all of it when it has no `Any`),
/// and at its end.
fn ends(s: &[Seg]) -> (String, String) {
    let lit = |x: Option<&Seg>| match x {
        Some(Seg::Lit(l)) => l.clone(),
        _ => String::new(),
    };
    (lit(s.first()), lit(s.last()))
}

/// Whether two shapes may render one key: false only when they provably
/// differ (their leading or trailing constants disagree, or both are
/// constants and differ).
fn may_equal(a: &[Seg], b: &[Seg]) -> bool {
    let fixed = |s: &[Seg]| s.iter().all(|x| matches!(x, Seg::Lit(_)));
    if fixed(a) && fixed(b) {
        return a == b;
    }
    let ((pa, sa), (pb, sb)) = (ends(a), ends(b));
    (pa.starts_with(&pb) || pb.starts_with(&pa)) && (sa.ends_with(&sb) || sb.ends_with(&sa))
}

/// A key both shapes may render: one's values as `x`, if the other matches
/// it; else the template as written.
fn example(a: &[Seg], b: &[Seg], template: &crate::file::template::KeyTemplate) -> String {
    let fill = |s: &[Seg]| -> String {
        s.iter()
            .map(|x| match x {
                Seg::Lit(l) => l.as_str(),
                Seg::Any => "x",
            })
            .collect()
    };
    [(a, b), (b, a)]
        .into_iter()
        .map(|(x, y)| (fill(x), y))
        .find(|(k, y)| matches(y, k))
        .map_or_else(|| template.source.clone(), |(k, _)| k)
}

/// Whether `key` is a rendering of `shape` (an `Any` one or more
/// characters).
fn matches(shape: &[Seg], key: &str) -> bool {
    match shape.split_first() {
        None => key.is_empty(),
        Some((Seg::Lit(l), rest)) => key
            .strip_prefix(l.as_str())
            .is_some_and(|k| matches(rest, k)),
        Some((Seg::Any, rest)) => key
            .char_indices()
            .skip(1)
            .map(|(i, _)| i)
            .chain(std::iter::once(key.len()))
            .filter(|i| *i > 0)
            .any(|i| matches(rest, &key[i..])),
    }
}

/// A job's queue and where the file gives it.
struct Job<'a> {
    what: String,
    queue: &'a crate::models::table::QueueDef,
    /// The `queue:` (logical name) and `queue_name:` (SQS name) written,
    /// else the job's own place.
    logical_at: (u64, u64),
    name_at: (u64, u64),
}

impl Compiler<'_> {
    /// Two jobs with one consumer (logical queue) or one SQS queue: each
    /// consumer would take the other's jobs as bad messages and
    /// dead-letter them. Reported at the later job, naming the earlier.
    pub(super) fn queue_collisions(
        &mut self,
        entities: &[Entity],
        raw: &RawFile,
        sets: &[crate::file::sets::SetSpec],
        once: &[crate::file::once::OnceSpec],
    ) {
        let mut jobs: Vec<Job> = Vec::new();
        for (e, (name, r)) in entities.iter().zip(&raw.entities.value.0) {
            let (Some(c), Some(rc)) = (&e.compute, &r.value.compute) else {
                continue;
            };
            let own = at(rc);
            jobs.push(Job {
                what: format!("{name}'s `compute:`"),
                queue: &c.queue,
                logical_at: rc.value.queue.as_ref().map_or(own, at),
                name_at: rc.value.queue_name.as_ref().map_or(own, at),
            });
        }
        let raw_sets = raw
            .sets
            .as_ref()
            .map(|s| &s.value.0[..])
            .unwrap_or_default();
        for s in sets {
            let Some((_, r)) = raw_sets.iter().find(|(n, _)| n == s.name) else {
                continue;
            };
            jobs.push(Job {
                what: format!("set `{}`", s.name),
                queue: &s.queue,
                logical_at: at(r),
                name_at: r.value.queue_name.as_ref().map_or(at(r), at),
            });
        }
        let raw_once = raw
            .once
            .as_ref()
            .map(|o| &o.value.0[..])
            .unwrap_or_default();
        for o in once {
            let Some((_, r)) = raw_once.iter().find(|(n, _)| n == o.name) else {
                continue;
            };
            jobs.push(Job {
                what: format!("once `{}`", o.name),
                queue: &o.queue,
                logical_at: at(r),
                name_at: r.value.queue_name.as_ref().map_or(at(r), at),
            });
        }
        // In the file's order, so that the later one is reported.
        jobs.sort_by_key(|j| j.name_at.min(j.logical_at));
        for (i, b) in jobs.iter().enumerate() {
            for a in &jobs[..i] {
                let (pos, said) = if a.queue.logical == b.queue.logical {
                    (
                        b.logical_at,
                        format!(
                            "the consumer `{}` is also {}'s (line {})",
                            b.queue.logical, a.what, a.logical_at.0
                        ),
                    )
                } else if a.queue.name == b.queue.name
                    || a.queue.name == b.queue.dlq_name
                    || a.queue.dlq_name == b.queue.name
                {
                    (
                        b.name_at,
                        format!(
                            "the SQS queue `{}` is also {}'s (line {})",
                            b.queue.name, a.what, a.name_at.0
                        ),
                    )
                } else {
                    continue;
                };
                self.err(
                    pos,
                    format!("{}: {said}: each consumer would take the other's jobs as bad messages and dead-letter them; give one another `queue:` or `queue_name:`", b.what),
                );
                break;
            }
        }
    }
}
