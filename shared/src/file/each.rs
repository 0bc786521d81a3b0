//! `each:` at run time: the distinct elements of an item's `set` or `list`
//! attributes that its rules apply once per element, held to the bound
//! its rules leave them ([`super::model::EachBudget`]), and the names a
//! rule reads with an element bound ([`Element`]).

use super::expr::Val;
use super::rules::Record;
use crate::limits::MAX_TX_ACTIONS;

/// What a rule's expressions read by name: a record's values, and, in a
/// rule with `each:`, the element ([`Element`]).
pub(super) trait Names {
    fn value(&self, name: &str) -> Option<&Val>;
}

impl Names for Record<'_> {
    fn value(&self, name: &str) -> Option<&Val> {
        self.get(name)
    }
}

/// A record with one element of an `each:` attribute bound to its name.
pub(super) struct Element<'r, 'm> {
    pub rec: &'r Record<'m>,
    pub name: &'static str,
    pub value: Val,
}

impl Names for Element<'_, '_> {
    fn value(&self, name: &str) -> Option<&Val> {
        if name == self.name {
            Some(&self.value)
        } else {
            self.rec.get(name)
        }
    }
}

/// The distinct elements of each `each:` attribute of a record, sorted.
pub(super) struct Elements(Vec<(&'static str, Vec<String>)>);

impl Elements {
    /// The elements of `attr` (none when it is absent or empty).
    pub fn of(&self, attr: &str) -> &[String] {
        self.0
            .iter()
            .find(|(a, _)| *a == attr)
            .map_or(&[], |(_, v)| v.as_slice())
    }
}

/// The elements of `rec`'s `each:` attributes, or why the item is bad
/// input (a list element that is no string, by its position; more
/// elements than one transaction can take, naming the limit). The
/// reason is the entity's, without the item's key.
pub(super) fn elements(rec: &Record<'_>) -> Result<Elements, String> {
    let Some(budget) = &rec.entity.each else {
        return Ok(Elements(Vec::new()));
    };
    let mut out = Vec::with_capacity(budget.per_element.len());
    for (attr, _) in &budget.per_element {
        let mut v: Vec<String> = match rec.get(attr) {
            Some(Val::Set(v)) => v.clone(),
            Some(Val::List(items)) => items
                .iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Val::Str(s) => Ok(s.clone()),
                    other => Err(format!(
                        "`{attr}`[{i}] is a {}, not a string: `each:` reads a list of strings",
                        other.kind()
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        v.sort_unstable();
        v.dedup();
        out.push((*attr, v));
    }
    let counts: Vec<(&str, usize)> = out.iter().map(|(a, v)| (*a, v.len())).collect();
    let actions = budget.actions(&counts);
    if actions > MAX_TX_ACTIONS {
        let held: Vec<&(&str, usize)> = counts.iter().filter(|(_, n)| *n > 0).collect();
        let what = match held.as_slice() {
            [(a, n)] => format!(
                "`{a}` holds {n} distinct elements, over the {} an item of `{}` may hold",
                budget.max_alone(a),
                rec.entity.name
            ),
            _ => format!(
                "{} hold {} distinct elements, over what an item of `{}` may hold ({})",
                held.iter()
                    .map(|(a, _)| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(" and "),
                held.iter()
                    .map(|(_, n)| n.to_string())
                    .collect::<Vec<_>>()
                    .join(" and "),
                rec.entity.name,
                held.iter()
                    .map(|(a, _)| format!("`{a}` alone: {}", budget.max_alone(a)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        return Err(format!(
            "{what}: its rules apply once per element (`each:`), each a write of the item's one DynamoDB transaction of at most {MAX_TX_ACTIONS} actions, and a change that replaces every element writes each twice ({actions} actions); nothing it implies is written until it holds fewer"
        ));
    }
    Ok(Elements(out))
}
