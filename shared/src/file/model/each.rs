//! `each:` on a writer's `derive:` and `count:` rules: the rule applies
//! once per distinct element of a `set` or `list` attribute, its
//! expressions reading the element by the name `each:` gives it (a
//! `string`). Compiled here: the name and its attribute, the scope the
//! rule's expressions read, the key that must bind the element, a `with`
//! that binds a whole set or list to a key name, and the bound on the
//! elements one item may hold ([`EachBudget`]).

use super::*;
use crate::file::typecheck::T;
use crate::limits::MAX_TX_ACTIONS;

/// How many distinct elements an entity's `each:` attributes may hold
/// together: every element is a counter total and a derived item in the
/// item's one transaction (with its ledger record), and a change that
/// replaces them all writes each twice (the old element's undone, the new
/// one's done). `fixed` is what the entity's other rules take of the
/// transaction at most, `per_element` what one element of an attribute
/// takes (its rules' writes, one way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EachBudget {
    pub fixed: usize,
    pub per_element: Vec<(&'static str, usize)>,
}

impl EachBudget {
    /// The most distinct elements attribute `attr` may hold while the
    /// entity's other `each:` attributes are empty.
    pub fn max_alone(&self, attr: &str) -> usize {
        let per = self
            .per_element
            .iter()
            .find(|(a, _)| *a == attr)
            .map_or(1, |(_, n)| *n);
        MAX_TX_ACTIONS.saturating_sub(self.fixed) / (2 * per).max(1)
    }

    /// The transaction actions a change of an item whose `each:`
    /// attributes hold `counts` distinct elements may take at most.
    pub fn actions(&self, counts: &[(&str, usize)]) -> usize {
        self.fixed
            + counts
                .iter()
                .map(|(a, n)| {
                    let per = self.per_element.iter().find(|(x, _)| x == a);
                    2 * per.map_or(0, |(_, p)| *p) * n
                })
                .sum::<usize>()
    }
}

/// The writes one rule's item takes of a transaction, one way: a counter's
/// total, a derived item, or a shared derived item with its owner record
/// and the owners' head.
fn rule_actions(shared: bool) -> usize {
    if shared {
        3
    } else {
        1
    }
}

impl Compiler<'_> {
    /// An `each: { tag: tags }` of a rule of `source`: one name, not a name
    /// the entity's expressions read already, and a `set` or `list`
    /// attribute of `source`. `None` (reported) otherwise.
    pub(super) fn each(
        &mut self,
        raw: &Option<Spanned<Ordered<Spanned<String>>>>,
        source: &Entity,
        reads: &Scope,
    ) -> Option<Each> {
        let raw = raw.as_ref()?;
        let e = source.name;
        let [(name, attr)] = raw.value.0.as_slice() else {
            self.err(
                at(raw),
                format!("{e}: `each:` names one element and the `set` or `list` attribute it is taken from (`each: {{ tag: tags }}`)"),
            );
            return None;
        };
        let written = format!("`each: {{ {name}: {} }}`", attr.value);
        if !crate::file::template::is_ident(name) {
            self.err(
                at(raw),
                format!("{e}: {written}: `{name}` is no name an expression can read (letters, digits and `_`, not starting with a digit)"),
            );
            return None;
        }
        if reads.has(name) || reads.sums.contains(&name.as_str()) {
            self.err(
                at(raw),
                format!("{e}: {written}: `{name}` is already a name of `{e}` (an attribute, a key name, a computed value or a sum), which the element would hide: name the element otherwise"),
            );
            return None;
        }
        let a = match source.known_attr(&attr.value) {
            Ok(a) => a,
            Err(why) => {
                self.err(at(attr), format!("{e}: {written}: {why}"));
                return None;
            }
        };
        match a.ty {
            Ty::Set | Ty::List => {}
            // Refused where it is declared already.
            Ty::Unknown => return None,
            ref ty => {
                self.err(
                    at(attr),
                    format!("{e}: {written}: `{}` is {}; `each:` reads the elements of a `set` or a `list` (a single value is bound under `with` as it is)", a.name, ty_name(ty)),
                );
                return None;
            }
        }
        Some(Each {
            name: leak(name),
            attr: a.name,
        })
    }

    /// The scope of a rule with `each`: `reads` and the element, a string.
    pub(super) fn each_scope<'a>(&self, source: &'a Entity, each: Option<Each>) -> Scope<'a> {
        let mut scope = self.writer_scope(source);
        if let Some(x) = each {
            scope.names.push((x.name.to_string(), Some(Ty::Str)));
            scope.element = Some(x.name);
        }
        scope
    }

    /// A rule with `each` must build its target's key (or, for a located
    /// counter, its identity) from the element as it is: else every
    /// element would count into, or derive, one item.
    pub(super) fn key_binds_each(
        &mut self,
        each: Option<Each>,
        with: &Ordered<Spanned<Scalar>>,
        target: &Entity,
        pos: (u64, u64),
        source: &str,
        what: &str,
    ) {
        let Some(x) = each else {
            return;
        };
        let keyed: Vec<&str> = if target.unique.is_empty() {
            target.binders().into_iter().map(|(b, _)| b).collect()
        } else {
            target.unique.clone()
        };
        let binds = with
            .0
            .iter()
            .any(|(n, v)| keyed.contains(&n.as_str()) && v.value.0.trim() == x.name);
        if binds {
            return;
        }
        let part = if target.unique.is_empty() {
            "key"
        } else {
            "identity (`unique:`)"
        };
        self.err(
            pos,
            format!(
                "{source}: {what} `{t}` with `each: {{ {n}: {a} }}`: no name of `{t}`'s {part} is bound to `{n}` as it is, so every element of `{a}` would {verb} one `{t}` item: bind one to the element (`with: {{ {k}: {n} }}`)",
                t = target.name,
                n = x.name,
                a = x.attr,
                k = keyed.first().copied().unwrap_or("name"),
                verb = if what == "count" { "count into" } else { "imply" },
            ),
        );
    }

    /// A `with` that binds a key name of the target to a whole `set` or
    /// `list` (`with: { tag: tags }`): a key holds one string (the set
    /// would be written joined by commas, one item for all its elements).
    /// Refused, saying to write `each:`.
    pub(super) fn whole_set_keyed(
        &mut self,
        raw: &Ordered<Spanned<Scalar>>,
        with: &[(String, Value)],
        target: &Entity,
        scope: &Scope,
        what: &str,
    ) {
        let keyed: Vec<&str> = target
            .binders()
            .into_iter()
            .map(|(b, _)| b)
            .chain(target.unique.iter().copied())
            .collect();
        for (n, v) in with {
            let [Part::Hole(x, _)] = v.0.as_slice() else {
                continue;
            };
            let Some((_, written)) = raw.0.iter().find(|(k, _)| k == n) else {
                continue;
            };
            if !keyed.contains(&n.as_str())
                || written.value.0.contains("${")
                || crate::file::typecheck::check(x, &|n| scope.ty(n)) != Ok(T::List)
            {
                continue;
            }
            let src = written.value.0.trim();
            let kind = scope.declared(src).map_or("a list".to_string(), ty_name);
            let verb = if what == "count" {
                "count into"
            } else {
                "derive"
            };
            self.err(
                at(written),
                format!(
                    "{e}: {what} `{t}`: `{n}` of its {part} is bound to `{src}`, {kind}: a key holds one string (it would be the elements joined by commas, one `{t}` for them all); to {verb} one `{t}` per element, write `each: {{ {n}: {src} }}` and bind `{n}: {n}` under `with`",
                    e = scope.entity,
                    t = target.name,
                    part = if target.unique.contains(&n.as_str()) {
                        "identity"
                    } else {
                        "key"
                    },
                ),
            );
        }
    }

    /// What the rules of `entities[i]` take of a transaction (see
    /// [`EachBudget`]), `indexed` being the ledger index entries its items
    /// may hold (sets' facts listed `via` an index); `None` when none of
    /// its rules has `each:`.
    pub(super) fn each_budget(entities: &[Entity], i: usize, indexed: usize) -> Option<EachBudget> {
        let e = &entities[i];
        let eaches = e
            .derive
            .iter()
            .map(|d| d.each)
            .chain(e.count.iter().map(|c| c.each));
        if eaches.clone().all(|x| x.is_none()) {
            return None;
        }
        // Besides its ledger record, each moved at most (the old undone,
        // the new done): the compute scopes' versions it counts into (a
        // total each), and its ledger index entries (two writes each).
        let versions = entities
            .iter()
            .filter_map(|x| x.compute.as_ref())
            .filter(|c| c.over == i)
            .count();
        // Its own place in a compute scope's index, or under its identity
        // (`unique:`).
        let own = usize::from(e.compute.is_some()) + usize::from(!e.unique.is_empty());
        let mut budget = EachBudget {
            fixed: 1 + 2 * versions + 4 * (own + indexed),
            per_element: Vec::new(),
        };
        let mut add = |each: Option<Each>, n: usize| match each {
            // A rule of one item moves it at most (the old one undone,
            // the new one done).
            None => budget.fixed += 2 * n,
            Some(x) => match budget.per_element.iter_mut().find(|(a, _)| *a == x.attr) {
                Some((_, per)) => *per += n,
                None => budget.per_element.push((x.attr, n)),
            },
        };
        for d in &e.derive {
            add(d.each, rule_actions(entities[d.target].shared));
        }
        for c in &e.count {
            add(c.each, rule_actions(false));
        }
        Some(budget)
    }
}

/// `check-model`'s line for each `each:` attribute of `e`: how many
/// distinct elements an item may hold.
pub(super) fn note(e: &Entity) -> Vec<String> {
    let Some(budget) = &e.each else {
        return Vec::new();
    };
    budget
        .per_element
        .iter()
        .map(|(attr, _)| {
            format!(
                "each {}.{attr}: an item holds at most {} distinct elements; more is bad input (each element is a write of the item's one transaction of at most {MAX_TX_ACTIONS} actions, twice when every element is replaced)",
                e.name,
                budget.max_alone(attr)
            )
        })
        .collect()
}
