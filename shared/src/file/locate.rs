//! `unique:`: a counter found through an identity (SPEC §8).
//!
//! ```yaml
//! invoice:
//!   key: { PK: "ACCOUNT#${accountId}", SK: "INV#${invoiceId}" }
//!   attributes: { accountId: string, invoiceId: string, total: int? }
//!   unique: [invoiceId]
//!   counter: { attributes: [total, lines] }
//! line:
//!   key: { PK: "INV#${invoiceId}", SK: "LINE#${n}" }
//!   count:
//!     - { counter: invoice, with: { invoiceId: invoiceId }, add: { total: amount, lines: 1 } }
//! ```
//!
//! A count into an entity with `unique:` binds exactly its identity; the
//! ledger keeps the totals under the *logical* key `@<entity>` /
//! `["<value>", ...]` (never written to the table), and the engine finds
//! the item that carries the identity ([`crate::engine::locate`]).

use aws_sdk_dynamodb::types::AttributeValue;

use super::model::{at, fits, suggest, ty_name, Entity, Problem, Scope, Ty};
use super::raw::{Ordered, RawEntity, Scalar, Spanned};
use crate::engine::locate::Locate;
use crate::item::{Item, ItemExt};

fn err(problems: &mut Vec<Problem>, pos: (u64, u64), msg: String) {
    problems.push(Problem::new(pos.0, pos.1, msg));
}

/// The `unique:` names of an entity, checked: declared, required, scalar
/// attributes of a writer entity whose `counter:` the writer creates.
pub(super) fn unique(
    e: &Entity,
    raw: &RawEntity,
    problems: &mut Vec<Problem>,
) -> Vec<&'static str> {
    let Some(u) = &raw.unique else {
        return vec![];
    };
    let name = e.name;
    if u.value.is_empty() {
        err(
            problems,
            at(u),
            format!("{name}: `unique:` needs at least one attribute"),
        );
    }
    if !e.writer {
        err(
            problems,
            at(u),
            format!("{name}: `unique:` locates a writer's item; a processor entity is keyed by what derives it"),
        );
    }
    match &e.counter {
        None => err(
            problems,
            at(u),
            format!("{name}: `unique:` says how counts find this entity's item: give it a `counter:` block (or remove `unique:`)"),
        ),
        Some(c) if c.created_by_processor => err(
            problems,
            at(u),
            format!("{name}: a counter found through `unique:` is the writer's item (`created_by: writer`): the processor cannot create an item whose key it does not know"),
        ),
        Some(_) => {}
    }
    let mut out: Vec<&'static str> = Vec::new();
    for n in &u.value {
        match e.attr(&n.value) {
            Some(a) if a.optional || a.ty == Ty::Set => err(
                problems,
                at(n),
                format!(
                    "{name}: `unique:` attribute `{}` must be a required scalar (not optional, not a set)",
                    n.value
                ),
            ),
            Some(a) if out.contains(&a.name) => err(
                problems,
                at(n),
                format!("{name}: `{}` appears twice in `unique:`", n.value),
            ),
            Some(_) => {}
            None if e.binders().iter().any(|(b, _)| *b == n.value) => err(
                problems,
                at(n),
                format!(
                    "{name}: `unique:` attribute `{0}` is bound by the key only: declare `{0}` under `attributes:` too (the item carries its identity as an attribute)",
                    n.value
                ),
            ),
            None => {
                let hint = suggest(&n.value, e.attrs.iter().map(|a| a.name)).unwrap_or_default();
                err(
                    problems,
                    at(n),
                    format!(
                        "{name}: `unique:` names `{}`, not an attribute of `{name}`{hint}",
                        n.value
                    ),
                );
            }
        }
        // Every name is kept (a refused one too: the file is refused
        // already, and a count into the entity is checked against it, not
        // against the key).
        if !out.contains(&n.value.as_str()) {
            out.push(Box::leak(n.value.clone().into_boxed_str()));
        }
    }
    out
}

/// A count's `with` into an entity with `unique:`: exactly its identity,
/// each value of a type the identity's attribute accepts.
pub(super) fn check_with(
    with: &Ordered<Spanned<Scalar>>,
    target: &Entity,
    pos: (u64, u64),
    scope: &Scope,
    problems: &mut Vec<Problem>,
) {
    // An identity refused where it is declared says nothing more here.
    if target
        .unique
        .iter()
        .any(|u| target.attr(u).is_none_or(|a| a.optional || a.ty == Ty::Set))
    {
        return;
    }
    let ids = target.unique.join(", ");
    for u in &target.unique {
        if !with.0.iter().any(|(n, _)| n == u) {
            let same = if scope.has(u) {
                format!(" (e.g. `{u}: {u}`)")
            } else {
                String::new()
            };
            err(
                problems,
                pos,
                format!(
                    "{}: count `{}`: `{u}` of its identity (`unique: [{ids}]`) is unbound: add `{u}:` under `with`{same}",
                    scope.entity, target.name
                ),
            );
        }
    }
    for (n, v) in &with.0 {
        if !target.unique.contains(&n.as_str()) {
            let hint = suggest(n, target.unique.iter().copied()).unwrap_or_default();
            err(
                problems,
                at(v),
                format!(
                    "{}: `{n}`: a count into `{}` binds exactly its identity (`unique: [{ids}]`), not its key{hint}",
                    scope.entity, target.name
                ),
            );
            continue;
        }
        let Some(want) = target.attr(n).map(|a| a.ty.clone()) else {
            continue;
        };
        let src = v.value.0.trim();
        // An `each:` element: checked against the identity at run time.
        let Some(have) = scope.key_fit(src) else {
            continue;
        };
        // A whole set or list: the count says to write `each:`.
        if matches!(have, Ty::Set | Ty::List) {
            continue;
        }
        if !fits(have, &want) {
            err(
                problems,
                at(v),
                format!(
                    "{}: `{n}` of `{}`'s identity must be {}, but `{src}` is {}",
                    scope.entity,
                    target.name,
                    ty_name(&want),
                    ty_name(have)
                ),
            );
        }
    }
}

/// What to say to a count that cannot bind its counter's key (a parent the
/// source does not key): the identity it could count through instead.
pub(super) fn unique_hint(with: &Ordered<Spanned<Scalar>>, target: &Entity) -> String {
    if !target.writer || target.counter.is_none() {
        return String::new();
    }
    let ids: Vec<&str> = with
        .0
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| {
            target
                .attr(n)
                .is_some_and(|a| !a.optional && a.ty != Ty::Set)
        })
        .collect();
    let ids = if ids.is_empty() {
        "<attributes>".to_string()
    } else {
        ids.join(", ")
    };
    format!(
        "; or, if the source cannot know it and [{ids}] identify one `{0}` across the table, declare `unique: [{ids}]` on `{0}` and bind only that",
        target.name
    )
}

/// The partition key value of a located counter's logical key.
fn logical_pk(entity: &str) -> String {
    format!("@{entity}")
}

/// The logical key of an entity's identity values (in `unique:` order).
pub(super) fn logical_key(
    keys: [&'static str; 2],
    entity: &Entity,
    values: &[String],
) -> Vec<(&'static str, String)> {
    vec![
        (keys[0], logical_pk(entity.name)),
        (
            keys[1],
            serde_json::to_string(values).expect("strings serialise"),
        ),
    ]
}

/// The entity and identity values of a logical key, if it is one.
pub(super) fn parse_logical<'m>(
    entities: &'m [Entity],
    keys: [&'static str; 2],
    key: &Item,
) -> Option<(&'m Entity, Vec<String>)> {
    let pk = key.s(keys[0]).ok()?;
    let name = pk.strip_prefix('@')?;
    let e = entities
        .iter()
        .find(|e| e.name == name && !e.unique.is_empty())?;
    let values: Vec<String> = serde_json::from_str(key.s(keys[1]).ok()?).ok()?;
    (values.len() == e.unique.len()).then_some((e, values))
}

/// The identity as the located item carries it (each value typed by its
/// attribute), or `None` when a value is not of its attribute's type.
pub(super) fn identity(entity: &Entity, values: &[String]) -> Option<Locate> {
    let mut out = Vec::with_capacity(values.len());
    for (n, v) in entity.unique.iter().zip(values) {
        let a = entity.attr(n)?;
        let val = super::rules::typed_str(n, v, Some(&a.ty)).ok()?;
        let av: AttributeValue = super::rules::to_attr(n, val, Some(&a.ty)).ok()??;
        out.push((a.name, av));
    }
    Some(Locate { identity: out })
}
