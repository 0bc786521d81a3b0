//! Several rows of one target (see [`super`]): a target that carries a
//! variable its key does not determine (`orderId: o` of a notice keyed by
//! holder, event and ticket, where ticket ids are per order) is implied by
//! every row of its key, one per value. The rule, the same in the job,
//! `verify` and `explain`:
//!
//! - the item exists while ANY row of its key implies it;
//! - it carries the values of one implying row: the row it already carries
//!   while that row implies it (so it never moves between rows while that
//!   row holds, whatever order the jobs run in), else the least implying
//!   row (its carried variables compared in the target's value order, as
//!   strings);
//! - it goes only when no row implies it, guarded by each row's reason.
//!
//! A job decides a key from its rows: those among its candidates, and,
//! when they leave it undecided ([`JoinSet::undecided`]: the item exists and
//! the row it carries is not one of them implying it), every row of the key,
//! listed by [`JoinSet::key_step`] (a fact's partition or `via` listing
//! keyed by the target key's variables; one listing per partition and
//! start, shared by the job's keys). So a delete or a replacement is
//! decided from all rows, while a put the item's own row confirms, or an
//! item written fresh (from the least implying row the job read: a row
//! whose job runs later finds it and keeps it), costs no listing. A set
//! whose rows of a key cannot be listed so is refused at load.

use super::*;

/// A listed entry: a table item, or a ledger listing's member sort key.
#[derive(Clone)]
pub(super) enum Entry {
    Item(Item),
    Member(String),
}

/// Listings already read by one job (by step, partition and start).
pub(super) type KeyCache = HashMap<String, Vec<Entry>>;

impl JoinSet {
    /// The first listing (a fact's partition, or its `via` listing) other
    /// than `skip`'s whose partition `bound` renders and whose items bind
    /// every variable of `missing`.
    pub(crate) fn listing_step(
        &self,
        skip: &str,
        bound: &BTreeSet<&str>,
        missing: &BTreeSet<&str>,
    ) -> Option<Step> {
        let lists = |k: &KeyTemplate, also: &[Also]| {
            let mut binds = k.vars();
            binds.extend(also.iter().map(|a| a.var.as_str()));
            k.pk.vars().all(|v| bound.contains(v)) && missing.iter().all(|m| binds.contains(m))
        };
        self.facts.iter().filter(|f| f.name != skip).find_map(|f| {
            if lists(&f.key, &f.also) {
                Some(Step::List {
                    fact: f.name.clone(),
                    via: false,
                })
            } else if f.via.as_ref().is_some_and(|v| lists(v, &[])) {
                Some(Step::List {
                    fact: f.name.clone(),
                    via: true,
                })
            } else {
                None
            }
        })
    }

    /// What a fact keyed by the bound variables lacks to list the missing
    /// ones (user11 #7: the message named the variables, not where to put
    /// them): its key and `also` (a partition of the table), or its `via`
    /// listing's keys alone (`also` is read from the fact, not the index).
    pub(crate) fn listing_hint(
        &self,
        skip: &str,
        bound: &BTreeSet<&str>,
        missing: &BTreeSet<&str>,
    ) -> String {
        let mut hints = Vec::new();
        for f in self.facts.iter().filter(|f| f.name != skip) {
            if f.key.pk.vars().all(|v| bound.contains(v)) {
                let has = f.binds();
                let lacking = missing.iter().copied().filter(|m| !has.contains(m));
                hints.push(format!(
                    "fact `{}`'s partition is keyed by them but its key and `also` do not hold {}",
                    f.name,
                    var_names(lacking)
                ));
            }
            if let Some(v) = f
                .via
                .as_ref()
                .filter(|v| v.pk.vars().all(|x| bound.contains(x)))
            {
                let has = v.vars();
                let lacking = missing.iter().copied().filter(|m| !has.contains(m));
                hints.push(format!(
                    "fact `{}`'s `via` listing is keyed by them but its keys do not hold {} (a `via` listing binds only its own keys' variables, not `also`: add them to the index's sort key template)",
                    f.name,
                    var_names(lacking)
                ));
            }
        }
        if hints.is_empty() {
            // The facts that hold what is missing: each could be listed
            // through a `via`.
            let holders: Vec<String> = (self.facts.iter())
                .filter(|f| f.name != skip && f.via.is_none())
                .filter(|f| {
                    let has = f.binds();
                    missing.iter().all(|m| has.contains(m))
                })
                .map(|f| format!("`{}`", f.name))
                .collect();
            if !holders.is_empty() {
                hints.push(format!(
                    "give fact {} a `via:` listing keyed by {}: an entity that mirrors it under them (written by a `derive:`), or an index of the table its items project by them (README, `sets:`)",
                    holders.join(" or "),
                    var_names(bound.iter().copied())
                ));
            }
        }
        if hints.is_empty() {
            String::new()
        } else {
            format!("; {}", hints.join("; "))
        }
    }

    /// The carried variables (in value order) the target's key does not
    /// determine: a fact whose key the key's variables (and those its
    /// facts determine) render determines its `also` variables too.
    pub fn undetermined(&self) -> Vec<&str> {
        let mut known: BTreeSet<&str> = self.target.key.vars();
        loop {
            let before = known.len();
            for f in &self.facts {
                if f.key.vars().iter().all(|v| known.contains(v)) {
                    known.extend(f.also.iter().map(|a| a.var.as_str()));
                }
            }
            if known.len() == before {
                break;
            }
        }
        self.target
            .carried()
            .into_iter()
            .map(|(_, v)| v)
            .filter(|v| !known.contains(v))
            .collect()
    }

    /// How a job lists every row of one target key, when several rows can
    /// imply it (`None`: one row per key). Refuses a set whose rows of a
    /// key no fact lists.
    pub fn key_step(&self) -> Result<Option<Step>, DeclError> {
        let undetermined = self.undetermined();
        let Some(first) = undetermined.first() else {
            return Ok(None);
        };
        let bound = self.target.key.vars();
        let missing: BTreeSet<&str> = self.target.carried().into_iter().map(|(_, v)| v).collect();
        let attr = self
            .target
            .carried()
            .into_iter()
            .find(|(_, v)| v == first)
            .map_or(*first, |(a, _)| a);
        self.listing_step("", &bound, &missing)
            .map(Some)
            .ok_or_else(|| {
                self.set_err(format!(
                    "the target carries `{attr}: {first}`, which its key {} / {} does not \
                 determine: several rows of the facts can imply one item with different \
                 values, and no fact's partition (nor its `via` listing) keyed by {} lists \
                 them; put `{first}` in the target's key or drop the value",
                    self.target.key.pk,
                    self.target.key.sk,
                    var_names(bound.iter().copied()),
                ))
            })
    }

    /// The carried variables' values of a row, in value order.
    fn carried_of(&self, vars: &Vars) -> Vec<Option<String>> {
        self.target
            .carried()
            .into_iter()
            .map(|(_, v)| vars.get(v).cloned())
            .collect()
    }

    /// The carried values an item holds, in value order.
    fn carried_by(&self, item: &Item) -> Vec<Option<String>> {
        self.target
            .carried()
            .into_iter()
            .map(|(a, _)| item.s(a).ok().map(str::to_string))
            .collect()
    }

    /// Whether the rows a job read of one key leave it undecided: the
    /// item exists and the row it carries is not one of them implying it
    /// (it may have stopped, or another row not read may imply it).
    pub(super) fn undecided(&self, rows: &[(Vars, Decision)]) -> bool {
        let Some(item) = rows.iter().find_map(|(_, (_, e))| e.as_ref()) else {
            return false;
        };
        let own = self.carried_by(&item.item);
        !rows
            .iter()
            .any(|(v, (d, _))| d.is_some() && self.carried_of(v) == own)
    }

    /// The decision for one target key from the decisions of its rows
    /// (see the module's rule), and the row whose values it carries
    /// (`None`: no row implies it).
    pub fn merge(&self, rows: &[(Vars, Decision)]) -> (Decision, Option<Vars>) {
        let item = rows
            .iter()
            .find_map(|(_, (_, e))| e.as_ref())
            .map(|g| g.item.clone());
        let own = item.as_ref().map(|i| self.carried_by(i));
        let implying: Vec<&(Vars, Decision)> =
            rows.iter().filter(|(_, (d, _))| d.is_some()).collect();
        let chosen = implying
            .iter()
            .find(|(v, _)| own.as_ref() == Some(&self.carried_of(v)))
            .or_else(|| implying.iter().min_by_key(|(v, _)| self.carried_of(v)));
        if let Some((vars, (desired, existing))) = chosen {
            let existing = existing.clone().or_else(|| {
                item.map(|item| Guarded {
                    item,
                    guards: vec![],
                })
            });
            return ((desired.clone(), existing), Some(vars.clone()));
        }
        // No row implies it: it goes while every row's reason holds.
        let existing = item.map(|item| {
            let mut guards: Vec<Guard> = Vec::new();
            for g in rows.iter().filter_map(|(_, (_, e))| e.as_ref()) {
                for x in &g.guards {
                    if !guards.contains(x) {
                        guards.push(x.clone());
                    }
                }
            }
            Guarded { item, guards }
        });
        ((None, existing), None)
    }

    /// Every row of the target key `bind` renders (its variables bound),
    /// listed by `step` ([`JoinSet::key_step`]) to the end, with the fact
    /// item each row was listed from (a ledger listing gives none).
    pub(super) async fn key_rows(
        &self,
        step: &Step,
        bind: &Vars,
        reads: &Reads,
        cache: &mut KeyCache,
    ) -> Result<Vec<(Vars, Option<Item>)>, MessageError> {
        let names = self.key_names;
        let store = &reads.store;
        let Step::List { fact, via } = step else {
            return Ok(vec![]);
        };
        let f = self
            .fact(fact)
            .ok_or_else(|| MessageError::invalid("no such fact"))?;
        let (listing, also) = match (&f.via, via) {
            (Some(v), true) => (v, &[][..]),
            _ => (&f.key, &f.also[..]),
        };
        let pk = listing
            .pk
            .render(bind)
            .ok_or_else(|| MessageError::invalid("the listing's partition is not bound"))?;
        let prefix = listing.sk.bound_prefix(bind);
        let ledger = self.ledger_listing(step)?.map(|(index, _)| index);
        let mut start = prefix.clone();
        if let (None, false, Some(b)) = (ledger, *via, f.from.as_ref()) {
            let lower = (b.start)(reads.now)
                .ok()
                .and_then(|min| plan::listing_start(&listing.sk, bind, &b.var, &min));
            if lower > start {
                start = lower;
            }
        }
        let id = format!("{fact}\u{1}{via}\u{1}{pk}\u{1}{start:?}");
        if !cache.contains_key(&id) {
            let mut entries = Vec::new();
            let mut after = start.clone();
            loop {
                let next = if let Some(index) = ledger {
                    let (members, next) = crate::engine::derive::index_members(
                        store,
                        &reads.ledger_table,
                        &format!("{index}#{pk}"),
                        after.as_deref(),
                        DEFAULT_PAGE,
                    )
                    .await?;
                    let within = |m: &String| prefix.as_ref().is_none_or(|p| m.starts_with(p));
                    let end = members.iter().position(|m| !within(m));
                    let stop = end.is_some();
                    entries.extend(
                        members
                            .into_iter()
                            .take(end.unwrap_or(usize::MAX))
                            .map(Entry::Member),
                    );
                    if stop {
                        None
                    } else {
                        next
                    }
                } else {
                    let (items, next) = list_page(
                        reads,
                        names,
                        &pk,
                        prefix.as_deref(),
                        after.as_deref(),
                        DEFAULT_PAGE,
                    )
                    .await?;
                    entries.extend(items.into_iter().map(Entry::Item));
                    next
                };
                if next.is_none() {
                    break;
                }
                after = next;
            }
            cache.insert(id.clone(), entries);
        }
        let mut out = Vec::new();
        for e in cache.get(&id).into_iter().flatten() {
            let mut vars = bind.clone();
            match e {
                Entry::Member(m) => {
                    if listing.sk.read(m, &mut vars) {
                        out.push((vars, None));
                    }
                }
                Entry::Item(i) => {
                    if listing.read(names, i, &mut vars) && bind_also(also, i, &mut vars) {
                        out.push((vars, (!*via).then(|| i.clone())));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// One page of a listing's partition on the table, its sort keys within
/// `prefix` when there is one (a page ends at the first item past it).
pub(super) async fn list_page(
    reads: &Reads,
    names: &[&str],
    pk: &str,
    prefix: Option<&str>,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<Item>, Option<String>), crate::error::StoreError> {
    let (mut items, mut next) = reads
        .store
        .query_page_within(&reads.table, names[0], pk, names[1], prefix, after, limit)
        .await?;
    if let Some(p) = prefix {
        let within = |i: &Item| i.s(names[1]).is_ok_and(|sk| sk.starts_with(p));
        if let Some(end) = items.iter().position(|i| !within(i)) {
            items.truncate(end);
            next = None;
        }
    }
    Ok((items, next))
}
