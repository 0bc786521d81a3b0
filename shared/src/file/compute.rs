//! A writer entity's `compute:` block: processor-owned attributes of a
//! writer's item computed over a partition of other items and the item
//! itself (SPEC §8), kept exact by a set job ([`super::compute_job`]).
//!
//! ```yaml
//! prediction:
//!   key: { PK: "USER#${user}", SK: "EVENT#${eventId}" }
//!   attributes: { predictions: map }
//!   compute:
//!     over: { entity: match, as: matches }   # the partition: every `match` whose PK
//!                                            # binds as this item's key names
//!     values:                                # processor-owned ints of this item
//!       points: "sum(matches.filter(m, has(m.result) && get(predictions, m.id, -1) == m.result).map(m, m.points))"
//!       mcorrect: "size(matches.filter(m, has(m.result) && get(predictions, m.id, -1) == m.result))"
//!     queue: scoring
//!     page: 200
//! ```
//!
//! - `over.entity`'s partition key is built from its key names, each bound
//!   (`over.bind`, default the same name) to a key name of this entity; the
//!   rows are the items of that partition whose sort key starts with the
//!   literal its template starts with, each a map of its attributes and key
//!   names (an absent optional attribute is absent: `has(m.result)`).
//! - `values` are CEL expressions reading this item (attributes, key names)
//!   and the rows (`as`, default the entity's name); each gives an int,
//!   stored as a number. An overflow is bad input, never a wrapped value.
//! - The computed attributes are readable by this entity's `project:`,
//!   `derive:` and `count:` (stored value: an int; a writer's stray value
//!   of another kind reads as 0) and nobody else writes them: a writer's
//!   stray value is brought back. An absent one is not computed yet (a
//!   writer's put dropped it, or its job has not written it first): what
//!   reads it waits, keeping the item's last state with its values (see
//!   `FileRules::aspects_of`). The job raises the item's
//!   [`SEQUENCE_ATTR`] by one in each write of the values, so the stream
//!   tells its writes from a writer's (see [`job_wrote`]).
//! - Jobs: a row inserted, removed, made valid or invalid, or whose
//!   attributes the values read changed -> the whole scope (listed from a
//!   ledger index the engine keeps exactly, paged); this item inserted,
//!   whose attributes the values or its projection read changed, or whose
//!   computed value a writer overwrote -> this item alone.
//! - Every write is guarded by the facts read: the version of the scope's
//!   set of rows (a ledger-only counter each row adds 1 to), each row's
//!   attributes read, the item's attributes read (by the values and by the
//!   projection written with them), its stored values and its
//!   [`SEQUENCE_ATTR`] (the item is read before the rows). A
//!   late or racing job whose facts no longer hold writes nothing; the newer
//!   fact's job writes the right value. A scope with a row that is bad input
//!   is not computed until the row is fixed.

use serde::Deserialize;

use super::expr::{Expr, Val};
use super::model::at;
use super::model::leak;
use super::model::{suggest, Entity, Problem};
use super::raw::{Ordered, Scalar, Spanned};
use super::template::{KeyTemplate, Part};
use super::typecheck::{checked_over, Enums, Readable, Rows, T};
use crate::models::table::QueueDef;

/// Rows read per scope job page at most (predictions per message).
pub const DEFAULT_PAGE: usize = 200;
/// A page's items at most (a message body stays small).
pub const MAX_PAGE: usize = 200;

/// The block as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompute {
    pub over: Spanned<RawOver>,
    /// Processor-owned attribute -> a CEL expression (an int).
    pub values: Spanned<Ordered<Spanned<Scalar>>>,
    /// The job queue's logical name (default `<entity>-compute`).
    pub queue: Option<Spanned<String>>,
    /// The SQS queue's name (default `jobstream-<queue>-jobs`; its DLQ
    /// `<name>-dlq`).
    pub queue_name: Option<Spanned<String>>,
    /// Items per job at most (default and limit 200).
    pub page: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOver {
    pub entity: Spanned<String>,
    /// The row entity's partition key names -> this entity's key names.
    #[serde(default)]
    pub bind: Ordered<Spanned<String>>,
    /// The rows' name in expressions (default: the entity's name).
    #[serde(rename = "as")]
    pub name: Option<Spanned<String>>,
}

/// A compiled `compute:` block.
#[derive(Debug)]
pub struct Compute {
    /// The job's name (the consumer; the ledger index's prefix).
    pub name: &'static str,
    pub queue: QueueDef,
    /// The row entity.
    pub over: usize,
    /// The rows' name in expressions.
    pub rows: String,
    /// Row entity partition key name -> this entity's key name.
    pub scope: Vec<(String, String)>,
    /// The literal the rows' sort keys start with.
    pub sk_prefix: String,
    /// The computed attributes and their expressions.
    pub values: Vec<(&'static str, Expr)>,
    /// Attributes of the rows the values read (guards, jobs).
    pub row_reads: Vec<&'static str>,
    /// Attributes of this entity the job's write is computed from (guards,
    /// jobs): what the values read, and what the projection the job writes
    /// with them reads ([`Compute::reads_projection`]), computed values
    /// aside.
    pub item_reads: Vec<&'static str>,
    pub page: usize,
}

impl Compute {
    /// Adds the attributes the entity's projection reads (its `sources`,
    /// known once its rules are compiled) to [`Compute::item_reads`]: the
    /// job writes the projection with the values, computed from the item as
    /// it read it, so a writer's change of one of them (a booking's
    /// `status` under `GSI1PK: "${status == 'confirmed' && balanceDue > 0
    /// ? ...}"`) must fail the job's write and start the item's job again,
    /// as a change of what the values read does (user15 #2: the projection
    /// of a confirmed booking landed on the held one). A computed value is
    /// guarded as a value, and its change is the job's own or a writer's
    /// stray (see [`job_wrote`]).
    pub fn reads_projection(&mut self, sources: &[&'static str]) {
        for a in sources {
            if !self.values.iter().any(|(v, _)| v == a) && !self.item_reads.contains(a) {
                self.item_reads.push(a);
            }
        }
    }
}

/// The sort key of the ledger-only version of a scope's set of rows: no
/// entity's key template may match it (checked at load).
pub fn version_sk(c: &Compute) -> String {
    format!("#compute#{}", c.name)
}

/// The attribute of the version counter.
pub const VERSION_ATTR: &str = "rows";

/// The processor-owned attribute of a computing entity's item that the job
/// raises by one, from the item as it read it, in the same update as the
/// values: a record that changes a computed value without raising it by
/// exactly one is someone else's write (a writer's forged, dropped or stale
/// value), and starts the item's job. Absent counts as 0 (an item the job
/// never wrote). It is among the job's guards (a job's write since the
/// job's read of the item, even one that left the values as read, was
/// computed from rows read later): a writer's change of it alone (values
/// kept), other than by exactly one, fails a job in flight and starts the
/// item's job again.
pub const SEQUENCE_ATTR: &str = "computeSequence";

/// An item's [`SEQUENCE_ATTR`] as stored: absent is 0; `None` when it is
/// no int (a writer's).
pub fn sequence_of(item: &crate::item::Item) -> Option<i64> {
    match item.get(SEQUENCE_ATTR) {
        None => Some(0),
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => n.parse().ok(),
        Some(_) => None,
    }
}

/// Whether the change from `old` to `new` is one the job wrote: it raised
/// [`SEQUENCE_ATTR`] by exactly one.
pub fn job_wrote(old: &crate::item::Item, new: &crate::item::Item) -> bool {
    matches!(
        (sequence_of(old), sequence_of(new)),
        (Some(o), Some(n)) if o.checked_add(1) == Some(n)
    )
}

/// The most rows a scope may hold: a job pins each row it read (a condition
/// check of its own) in the transaction that writes the values, beside the
/// written item and the scope's version, and a transaction holds 100
/// actions. A larger scope is bad input, its values left as they are.
pub const MAX_SCOPE_ROWS: usize = 98;

/// The kind of bad input a scope past [`MAX_SCOPE_ROWS`] is.
pub const SCOPE_TOO_LARGE: &str = "ScopeTooLarge";

/// Why a scope of `rows` rows (past [`MAX_SCOPE_ROWS`]) is not computed,
/// and what to do: the job's log and `verify` say the same.
pub fn scope_too_large(rows: usize) -> String {
    format!(
        "the scope holds {rows} rows; a scope holds at most {MAX_SCOPE_ROWS} (a job pins every row it read in the transaction that writes the values, beside the item and the scope's version, and a transaction holds 100 actions): its values are left as they are until the scope is back within the limit, and no repair can help; keep such a value as a `count:` sum instead"
    )
}

/// Names of attributes read as `<var>.<attr>` anywhere in `src` (an
/// over-approximation of what an expression reads of its rows: a guard
/// too many costs a retry, a guard too few a stale value).
fn fields_read(src: &str, candidates: &[&'static str]) -> Vec<&'static str> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for (i, _) in src.match_indices('.') {
        let rest = &src[i + 1..];
        let word: String = rest.chars().take_while(|c| ident(*c)).collect();
        if let Some(c) = candidates.iter().find(|c| **c == word) {
            if !out.contains(c) {
                out.push(*c);
            }
        }
    }
    out
}

/// Compiles the block of entity `i` (after every entity's shape is known).
pub fn compile(
    raw: &Spanned<RawCompute>,
    i: usize,
    entities: &[Entity],
    problems: &mut Vec<Problem>,
) -> Option<Compute> {
    let mut err = |pos: (u64, u64), msg: String| problems.push(Problem::new(pos.0, pos.1, msg));
    let e = &entities[i];
    let name = e.name;
    let r = &raw.value;
    if !e.writer {
        err(
            at(raw),
            format!("{name}: `compute:` writes processor-owned attributes of a writer's item: it belongs on a writer entity"),
        );
        return None;
    }
    let names: Vec<&str> = entities.iter().map(|e| e.name).collect();
    let Some(over) = names.iter().position(|n| *n == r.over.value.entity.value) else {
        let hint = suggest(&r.over.value.entity.value, names.iter().copied()).unwrap_or_default();
        err(
            at(&r.over.value.entity),
            format!(
                "{name}: compute over unknown entity `{}`{hint}",
                r.over.value.entity.value
            ),
        );
        return None;
    };
    let o = &entities[over];
    if e.key.len() != 2 || o.key.len() != 2 {
        // Their keys are reported where they are written.
        return None;
    }
    if o.foreign {
        // Its rows' fields are declared nowhere: nothing to read, nothing
        // the job could guard (a stale value).
        err(
            at(&r.over.value.entity),
            format!(
                "{name}: compute over `{}`: it is `owner: other` (a key space another writer owns, declared by its key only): a computed value reads its rows' fields, and `{}` declares none",
                o.name, o.name
            ),
        );
        return None;
    }
    if !o.writer || over == i {
        err(
            at(&r.over.value.entity),
            format!(
                "{name}: compute over `{}`: the rows must be another writer entity",
                o.name
            ),
        );
        return None;
    }
    let own: Vec<&str> = e.binders().iter().map(|(n, _)| *n).collect();
    let pk_binders: Vec<String> = o.key[0]
        .template
        .binders()
        .map(|b| b.name.clone())
        .collect();
    for (k, v) in &r.over.value.bind.0 {
        if !pk_binders.contains(k) {
            let hint = suggest(k, pk_binders.iter().map(String::as_str)).unwrap_or_default();
            err(
                at(v),
                format!(
                    "{name}: compute over `{}`: `{k}` is not a key name of its partition key{hint}",
                    o.name
                ),
            );
        }
    }
    let mut scope = Vec::new();
    for b in &pk_binders {
        let (to, pos) = match r.over.value.bind.0.iter().find(|(k, _)| k == b) {
            Some((_, v)) => (v.value.clone(), at(v)),
            None => (b.clone(), at(&r.over)),
        };
        if !own.contains(&to.as_str()) {
            let hint = suggest(&to, own.iter().copied()).unwrap_or_default();
            err(
                pos,
                format!(
                    "{name}: compute over `{}`: `${{{b}}}` of its partition key must be bound to a key name of `{name}`; `{to}` is not one{hint} (add `bind: {{ {b}: <key name> }}`)",
                    o.name
                ),
            );
            continue;
        }
        scope.push((b.clone(), to));
    }
    let sk_prefix = match o.key[1].template.parts.first() {
        Some(Part::Lit(l)) => l.clone(),
        _ => String::new(),
    };
    if sk_prefix.is_empty() {
        err(
            at(&r.over.value.entity),
            format!(
                "{name}: compute over `{}`: its sort key template must start with a literal (the rows are the items of the partition whose sort key starts with it)",
                o.name
            ),
        );
    }
    let rows = r
        .over
        .value
        .name
        .as_ref()
        .map_or(o.name.to_string(), |n| n.value.clone());
    let queue_logical = r
        .queue
        .as_ref()
        .map_or(format!("{name}-compute"), |q| q.value.clone());
    let cname = leak(&queue_logical);
    let written = r.queue_name.as_ref();
    let queue =
        super::model::job_queue(cname, written.map(|q| q.value.as_str())).unwrap_or_else(|why| {
            err(written.map_or(at(raw), at), format!("{name}: {why}"));
            super::model::job_queue(cname, None).expect("the default name fits SQS")
        });
    let page = match &r.page {
        None => DEFAULT_PAGE,
        Some(p) if (1..=MAX_PAGE as u64).contains(&p.value) => p.value as usize,
        Some(p) => {
            err(
                at(p),
                format!("{name}: compute page {}: 1..={MAX_PAGE}", p.value),
            );
            DEFAULT_PAGE
        }
    };
    // What the values may read: this item's attributes and key names, the
    // rows; never another computed value.
    let says = format!("it reads `{name}`'s attributes and key names and the rows, `{rows}`");
    let readable = Readable {
        names: (e.attrs.iter().map(|a| (a.name, T::of(Some(&a.ty)))))
            .chain(own.iter().map(|s| (*s, T::Dyn)))
            .chain([(rows.as_str(), T::List)])
            .collect(),
        says: &says,
        enums: Enums::of(e.attrs.iter().map(|a| (a.name, &a.ty))),
    };
    let row_names: Vec<&'static str> = o
        .attrs
        .iter()
        .map(|a| a.name)
        .chain(
            o.key
                .iter()
                .flat_map(|k| k.template.binders())
                .map(|b| leak(&b.name)),
        )
        .collect();
    // A row reads the `over` entity's attributes, of their declared
    // types, and its key names (its counter sums too: refused below, with
    // why).
    let sums: &[&'static str] = o.counter.as_ref().map_or(&[], |c| c.attrs);
    let typed_rows = Rows {
        name: rows.as_str(),
        entity: o.name,
        fields: row_names
            .iter()
            .map(|f| (*f, o.attr(f).map_or(T::Dyn, |a| T::of(Some(&a.ty)))))
            .chain(sums.iter().map(|s| (*s, T::Int)))
            .collect(),
        enums: Enums::of(o.attrs.iter().map(|a| (a.name, &a.ty))),
    };
    let mut values = Vec::new();
    let mut row_reads: Vec<&'static str> = Vec::new();
    let mut item_reads: Vec<&'static str> = Vec::new();
    if e.attr(SEQUENCE_ATTR).is_some() || own.contains(&SEQUENCE_ATTR) {
        err(
            at(raw),
            format!("{name}: `{SEQUENCE_ATTR}` is the processor's on an entity with `compute:` (the job raises it with each write of the values): rename `{name}`'s attribute or key name"),
        );
    }
    for (a, v) in &r.values.value.0 {
        if a == SEQUENCE_ATTR {
            err(
                at(v),
                format!("{name}: `{SEQUENCE_ATTR}` is the processor's (the job raises it with each write of the values): give the computed value another name"),
            );
            continue;
        }
        if e.attr(a).is_some() || own.contains(&a.as_str()) {
            err(
                at(v),
                format!("{name}: computed `{a}` is a writer attribute or a key name of `{name}`: a computed attribute is the processor's"),
            );
            continue;
        }
        // Each value is an int (a count, a sum, a score): one of another
        // type would make every item of the entity bad input at run time.
        match checked_over(
            &v.value.0,
            &readable,
            Some(&typed_rows),
            Some((T::Int, "a computed value")),
        ) {
            Err(flaws) => {
                for f in flaws {
                    err(at(v), format!("{name}: computed `{a}`: {}", f.message));
                }
            }
            Ok(x) => {
                if let Some((_, f)) = super::typecheck::unguarded_min_max(&x) {
                    err(
                        at(v),
                        format!(
                            "{name}: computed `{a}`: `{f}` of a list that may be empty (an item with no rows) is null, not an int, and the value would be bad input there, left as it is: guard it, `size({rows}) == 0 ? 0 : {f}(...)`, or add a bound to the list, `{f}(... + [0])`"
                        ),
                    );
                    continue;
                }
                // A row's counter sums are written by the processors, and
                // a sum's change starts no job: the value would not follow
                // it (user11 #5: stale for good, and verify agreed).
                let sums: &[&'static str] = o.counter.as_ref().map_or(&[], |c| c.attrs);
                if let Some(sum) = fields_read(&x.source, sums).first() {
                    err(
                        at(v),
                        format!(
                            "{name}: computed `{a}` reads `{sum}` of the `{}` rows, a counter sum: a sum's change starts no job, so the value would not follow it; compute from the rows' own attributes (e.g. a writer's `soldOut`), or count into `{name}` instead",
                            o.name
                        ),
                    );
                    continue;
                }
                for f in fields_read(&x.source, &row_names) {
                    if !row_reads.contains(&f) && o.attr(f).is_some() {
                        row_reads.push(o.attr(f).map(|a| a.name).unwrap_or(f));
                    }
                }
                for var in &x.variables {
                    if let Some(attr) = e.attr(var) {
                        if !item_reads.contains(&attr.name) {
                            item_reads.push(attr.name);
                        }
                    }
                }
                values.push((leak(a), x));
            }
        }
    }
    if values.is_empty() && r.values.value.0.is_empty() {
        err(
            at(&r.values),
            format!("{name}: `compute:` needs at least one value"),
        );
    }
    let c = Compute {
        name: cname,
        queue,
        over,
        rows,
        scope,
        sk_prefix,
        values,
        row_reads,
        item_reads,
        page,
    };
    // The version counter's key must be no entity's.
    let vsk = version_sk(&c);
    if let Some(x) = entities.iter().find(|x| {
        x.key
            .get(1)
            .is_some_and(|k| k.template.matches(&vsk).is_some())
    }) {
        err(
            at(raw),
            format!(
                "{name}: the ledger-only version of the compute's rows has the sort key `{vsk}`, which `{}`'s template matches: give `{}`'s sort key a literal prefix",
                x.name, x.name
            ),
        );
    }
    Some(c)
}

/// The partition key value of the rows of a scope (row key name -> value).
pub fn rows_pk(over: &Entity, scope: &[(String, String)]) -> Option<String> {
    let t: &KeyTemplate = &over.key[0].template;
    let vals: Option<Vec<&str>> = t
        .binders()
        .map(|b| {
            scope
                .iter()
                .find(|(k, _)| *k == b.name)
                .map(|(_, v)| v.as_str())
        })
        .collect();
    Some(t.build(&vals?))
}

/// A row as expressions read it: its attributes (absent optional ones
/// left out, so `has(m.result)` says whether it is set) and key names.
pub fn row_val(rec_vals: &[(&str, Val)]) -> Val {
    Val::Map(
        rec_vals
            .iter()
            .filter(|(_, v)| *v != Val::Null)
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_finds_row_attributes_after_a_dot() {
        let c = ["result", "points", "id", "order"];
        assert_eq!(
            fields_read(
                "sum(ms.filter(m, has(m.result) && get(p, m.id, -1) == m.result).map(m, m.points))",
                &c
            ),
            vec!["result", "id", "points"]
        );
        assert!(fields_read("size(ms)", &c).is_empty());
        assert!(fields_read("m.resultx + m.ord", &c).is_empty());
    }
}
