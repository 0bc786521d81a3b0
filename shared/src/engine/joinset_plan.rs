//! Deciding and planning join set jobs (see [`super`]): what one row
//! implies, and the reads of one page of a job (its listings, each fact,
//! `unless` fact and target read once) planned into guarded writes.

use super::*;

/// A fact's lowest value of a variable (a string, as its key sorts), from
/// the job's clock.
pub type FromFn = Arc<dyn Fn(DateTime<Utc>) -> Result<String, String> + Send + Sync>;

/// A lower bound on a variable of a fact's key: a row whose value sorts
/// below [`ListFrom::start`] is not the fact's (no target; an existing one
/// goes while the fact is as read), and a listing of the fact's partition
/// whose first unbound variable it is starts at it: items before it are
/// never read.
#[derive(Clone)]
pub struct ListFrom {
    pub var: String,
    pub start: FromFn,
}

impl fmt::Debug for ListFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ListFrom({})", self.var)
    }
}

/// Where a listing of sort keys `sk` (its variables bound by `vars` up to
/// the first unbound one, `var`) can start, exclusively, so that every key
/// whose `var` is at least `min` follows: the bound prefix and `min`, when
/// a literal follows `var` (`j#2026-10-28` for `j#${postedAt}#...`), else
/// `min` but its last character. `None`: the bound does not apply (`var`
/// is bound or not the first unbound variable).
pub(super) fn listing_start(sk: &Template, vars: &Vars, var: &str, min: &str) -> Option<String> {
    let mut out = String::new();
    for (i, p) in sk.0.iter().enumerate() {
        match p {
            Part::Lit(l) => out.push_str(l),
            Part::Var(v) => match vars.get(v) {
                Some(x) => out.push_str(x),
                None if v != var => return None,
                None => {
                    return match sk.0.get(i + 1) {
                        Some(Part::Lit(l)) if !l.is_empty() => Some(out + min),
                        _ => {
                            let mut m = min.to_string();
                            m.pop()?;
                            Some(out + &m)
                        }
                    };
                }
            },
        }
    }
    None
}

impl JoinSet {
    /// What one row implies. `read` gives the item at a key as read
    /// consistently (`None`: absent). Pure.
    pub fn decide(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<Decision> {
        self.decide_row(scope, vars, read, &|_| None, now)
            .map(|(d, _, _)| d)
    }

    /// [`JoinSet::decide`] with the ledger's items too (the once markers
    /// `unless` facts name): what `verify` compares the table with.
    pub fn decide_in(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        read_ledger: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<Decision> {
        self.decide_row(scope, vars, read, read_ledger, now)
            .map(|(d, _, _)| d)
    }

    /// [`JoinSet::decide`], and whether evaluating `when`, the values or
    /// the TTL failed on valid facts (bad input the stream rules did not
    /// see, e.g. an overflow: counted by the consumer).
    fn decide_row(
        &self,
        scope: &str,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
        read_ledger: &dyn Fn(&Item) -> Option<Item>,
        now: DateTime<Utc>,
    ) -> Option<RowDecision> {
        let names = self.key_names;
        let target_key = self.target.key.key(names, vars)?;
        let existing = read(&target_key).filter(|e| !self.expired(e, now));
        let keep = |existing: Option<Item>, bad: bool, fact: Option<(Item, String)>| {
            let g = existing.map(|item| Guarded {
                item,
                guards: vec![],
            });
            Some(((g.clone(), g), bad, fact))
        };
        let mut items: Vec<(&FactDecl, Item, Option<Item>)> = Vec::new();
        for f in &self.facts {
            let key = f.key.key(names, vars)?;
            let item = read(&key);
            items.push((f, key, item));
        }
        let mut states = Vec::new();
        // A valid fact whose `also` disagrees with the row: not this row's.
        let mut elsewhere = false;
        for (f, _, item) in &items {
            states.push(match item {
                None => State::Absent,
                Some(i) => match (f.valid)(i) {
                    Ok(()) => {
                        let mut own = vars.clone();
                        if !f.also.is_empty() && !bind_also(&f.also, i, &mut own) {
                            elsewhere = true;
                        }
                        State::Valid
                    }
                    Err(reason) => State::Bad(reason),
                },
            });
        }
        // A fact that is bad input: the target keeps what its earlier
        // valid states implied; the fact is logged and counted once per
        // job (by the caller).
        if let Some((key, reason)) = items
            .iter()
            .zip(&states)
            .find_map(|((_, k, _), s)| match s {
                State::Bad(r) => Some((k.clone(), r.clone())),
                _ => None,
            })
        {
            return keep(existing, false, Some((key, reason)));
        }
        // An `unless` fact present excludes the row; a once marker only of
        // an effect made: one skipped (its precondition failed, an approval
        // withdrawn before its job ran) made nothing (spec15 #10).
        let mut unless = Vec::new();
        for u in &self.unless {
            let (key, ledger) = u.key_of(names, vars)?;
            let present = if ledger {
                Guard::made(key.clone()).holds(read_ledger(&key).as_ref())
            } else {
                read(&key).is_some()
            };
            unless.push((u, key, present, ledger));
        }
        // The guard that the fact is absent (a once marker: not made), or
        // present (made).
        let unless_guard = |k: &Item, ledger: bool, present: bool| match (ledger, present) {
            (true, true) => Guard::made(k.clone()),
            (true, false) => Guard::not_made(k.clone()),
            (false, true) => Guard::exists(k.clone()),
            (false, false) => Guard::absent(k.clone()),
        };
        let facts: BTreeMap<&str, &Item> = items
            .iter()
            .filter_map(|(f, _, i)| i.as_ref().map(|i| (f.name.as_str(), i)))
            .collect();
        // The facts as read: a put depends on all of them.
        let as_read = |attrs_only: bool| -> Vec<Guard> {
            let mut g = Vec::new();
            for (f, key, item) in &items {
                if f.reads.is_empty() {
                    if !attrs_only {
                        g.push(Guard::exists(key.clone()));
                    }
                } else {
                    for a in &f.reads {
                        g.push(Guard::same(
                            key.clone(),
                            a,
                            item.as_ref().and_then(|i| i.get(*a)),
                        ));
                    }
                }
            }
            if !attrs_only {
                g.extend(unless.iter().map(|(_, k, _, l)| unless_guard(k, *l, false)));
            }
            g
        };
        let all_valid = states.iter().all(|s| matches!(s, State::Valid));
        let excluded = elsewhere || unless.iter().any(|(_, _, present, _)| *present);
        let row = Row {
            vars,
            facts: &facts,
            now,
        };
        let desired = if all_valid && !excluded {
            match self.build(&row, &target_key) {
                Ok(Some(item)) => Some(Guarded {
                    item,
                    guards: as_read(false),
                }),
                Ok(None) => None,
                Err(reason) => {
                    tracing::warn!(
                        set = self.name,
                        key = %crate::item::display_key(&target_key),
                        reason = %reason,
                        "bad input: the target is kept"
                    );
                    return keep(existing, true, None);
                }
            }
        } else {
            None
        };
        let existing = existing.map(|item| {
            // The first absent fact (present `unless` fact), the scope's
            // own preferred.
            let other = |name: &str| name != scope;
            let absent = items
                .iter()
                .filter(|(_, _, i)| i.is_none())
                .min_by_key(|(f, _, _)| other(&f.name));
            let present = unless
                .iter()
                .filter(|(_, _, p, _)| *p)
                .min_by_key(|(u, _, _, _)| other(&u.name));
            let guards = if let Some((_, k, _)) = absent {
                vec![Guard::absent(k.clone())]
            } else if let Some((_, k, _, l)) = present {
                vec![unless_guard(k, *l, true)]
            } else {
                // Only `when` or the TTL says no: the delete holds while the
                // attributes they read are as read (a fact that goes meanwhile
                // only confirms it).
                as_read(true)
            };
            Guarded { item, guards }
        });
        Some(((desired, existing), false, None))
    }

    /// The row the facts determine for the target key of `vars`, when it
    /// is another: a valid fact whose `also` binds a variable otherwise
    /// than the row does (a question moved to another tag, listed among
    /// its old tag's followers) says which row that key has now, and only
    /// that row may decide its item. A late job of the old scope judged
    /// the item by its own row alone and deleted what the new row implies
    /// (user15 #9). `None`: the row is the key's own, a fact it needs is
    /// not read (absent, or not among `read`'s), or the determined row
    /// renders another target key (a target of its own, which this row's
    /// key does not carry).
    pub(crate) fn determined(
        &self,
        vars: &Vars,
        read: &dyn Fn(&Item) -> Option<Item>,
    ) -> Option<Vars> {
        let names = self.key_names;
        let key = self.target.key.key(names, vars)?;
        let mut row = vars.clone();
        // A rebound variable can key another fact with an `also` of its
        // own: at most one round per fact.
        for _ in 0..self.facts.len() {
            let mut moved = false;
            for f in self.facts.iter().filter(|f| !f.also.is_empty()) {
                let Some(item) = f.key.key(names, &row).and_then(|k| read(&k)) else {
                    continue;
                };
                if (f.valid)(&item).is_err() {
                    continue;
                }
                for a in &f.also {
                    let Ok(v) = (a.of)(&item) else { continue };
                    if valid_var_value(&v) && row.get(&a.var) != Some(&v) {
                        row.insert(a.var.clone(), v);
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        (row != *vars && self.target.key.key(names, &row)? == key).then_some(row)
    }

    fn expired(&self, item: &Item, now: DateTime<Utc>) -> bool {
        crate::item::expired(item, self.target.ttl.as_ref().map(|(a, _)| *a), now)
    }

    /// The target of a row whose facts hold, if `when` and the TTL say so.
    fn build(&self, row: &Row<'_>, key: &Item) -> Result<Option<Item>, String> {
        for b in self.facts.iter().filter_map(|f| f.from.as_ref()) {
            let min = (b.start)(row.now)?;
            if row.vars.get(&b.var).is_some_and(|v| *v < min) {
                return Ok(None);
            }
        }
        for w in &self.when {
            let holds = match w {
                When::Distinct(a, b) => row.vars.get(a) != row.vars.get(b),
                When::Expr(p) => p(row)?,
            };
            if !holds {
                return Ok(None);
            }
        }
        let mut item = key.clone();
        if let Some((attr, value)) = &self.target.type_attr {
            item.insert(attr.to_string(), s(value));
        }
        for (attr, v) in &self.target.values {
            item.insert(attr.clone(), v.eval(row)?);
        }
        if let Some((attr, v)) = &self.target.ttl {
            let ttl = v.eval(row)?;
            let secs: i64 = ttl
                .as_n()
                .ok()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("ttl `{attr}` is not an integer"))?;
            if secs <= row.now.timestamp() {
                return Ok(None);
            }
            item.insert(attr.to_string(), ttl);
        }
        Ok(Some(item))
    }

    /// The ledger index and the listing of `step` when it lists a fact
    /// through a listing kept in the ledger (an index's keys).
    pub(super) fn ledger_listing(
        &self,
        step: &Step,
    ) -> Result<Option<(&str, &KeyTemplate)>, MessageError> {
        let Step::List { fact, via: true } = step else {
            return Ok(None);
        };
        let f = self
            .fact(fact)
            .ok_or_else(|| MessageError::invalid("no such fact"))?;
        Ok(match (&f.via_ledger, &f.via) {
            (Some(index), Some(v)) => Some((index.as_str(), v)),
            _ => None,
        })
    }

    /// Reads every fact, `unless` fact and target of `candidates` not
    /// read yet (the model table's into `known`, once markers into
    /// `ledger_known`).
    async fn read_rows(
        &self,
        candidates: &[Vars],
        known: &mut HashMap<String, Item>,
        ledger_known: &mut HashMap<String, Item>,
        reads: &Reads,
    ) -> Result<(), MessageError> {
        let names = self.key_names;
        let store = &reads.store;
        // Every fact, unless fact and target of the page, each read once.
        let mut wanted: BTreeMap<String, Item> = BTreeMap::new();
        let mut markers: BTreeMap<String, Item> = BTreeMap::new();
        for vars in candidates {
            let keys = self
                .facts
                .iter()
                .map(|f| &f.key)
                .chain(std::iter::once(&self.target.key))
                .filter_map(|k| k.key(names, vars))
                .map(|k| (k, false))
                .chain(self.unless.iter().filter_map(|u| u.key_of(names, vars)));
            for (k, ledger) in keys {
                // A key that cannot exist (a target's key past its limit:
                // bad input where its write is refused) is read absent.
                if !ledger && !crate::limits::key_can_exist(&k, names) {
                    continue;
                }
                let id = item_id(&k);
                if ledger {
                    markers.insert(id, k);
                } else if !known.contains_key(&id) {
                    wanted.insert(id, k);
                }
            }
        }
        // BatchGetItem requests of 100 keys, a few in flight at once.
        let keys: Vec<Item> = wanted.into_values().collect();
        let chunks: Vec<Vec<Item>> = keys.chunks(100).map(<[Item]>::to_vec).collect();
        let table = reads.table.as_str();
        let mut gets = futures::stream::iter(chunks)
            .map(|c| store.batch_get(table, c))
            .buffer_unordered(READ_CONCURRENCY);
        while let Some(items) = gets.next().await {
            for item in items? {
                known.insert(item_id(&crate::item::key_of(&item, names)), item);
            }
        }
        // Once markers the `unless` facts name, from the ledger.
        let marker_keys: Vec<Item> = markers.into_values().collect();
        for chunk in marker_keys.chunks(100) {
            for item in store.batch_get(&reads.ledger_table, chunk.to_vec()).await? {
                let key = crate::item::key_of(&item, &[crate::ledger::PK, crate::ledger::SK]);
                ledger_known.insert(item_id(&key), item);
            }
        }
        Ok(())
    }

    /// Reads the facts of one page of `job` and plans it.
    pub async fn plan_job(
        &self,
        job: &JoinJob,
        scope: &Scope,
        reads: &Reads,
    ) -> Result<Plan, MessageError> {
        let names = self.key_names;
        let store = &reads.store;
        let mut plan = Plan::default();
        // Items already read (by key id) and the candidates' variables.
        let mut known: HashMap<String, Item> = HashMap::new();
        let mut candidates: Vec<Vars> = Vec::new();
        if scope.steps.is_empty() {
            candidates.push(job.bind.clone());
        }
        // The listing steps from the job's cursor on, within one page of
        // candidates: a small scope is one message, a large one continues
        // where the page ends.
        let (mut step_no, mut after) = (job.step, job.after.clone());
        let mut listed = 0;
        while let Some(step) = scope.steps.get(step_no) {
            let next = if let Some((index, v)) = self.ledger_listing(step)? {
                // A listing kept in the ledger (an index's keys): its members.
                let pk = v
                    .pk
                    .render(&job.bind)
                    .ok_or_else(|| MessageError::invalid("the listing's partition is not bound"))?;
                let (members, next) = crate::engine::derive::index_members(
                    store,
                    &reads.ledger_table,
                    &format!("{index}#{pk}"),
                    after.as_deref(),
                    self.page - listed,
                )
                .await?;
                listed += members.len();
                for m in members {
                    let mut vars = job.bind.clone();
                    if v.sk.read(&m, &mut vars) {
                        candidates.push(vars);
                    }
                }
                next
            } else {
                let (listing, is_fact, is_target, also) = match step {
                    Step::List { fact, via } => {
                        let f = self
                            .fact(fact)
                            .ok_or_else(|| MessageError::invalid("no such fact"))?;
                        match (&f.via, via) {
                            (Some(v), true) => (v, false, false, &[][..]),
                            _ => (&f.key, true, false, &f.also[..]),
                        }
                    }
                    Step::Sweep => (&self.target.key, false, true, &[][..]),
                };
                let carried = if is_target {
                    self.target.carried()
                } else {
                    vec![]
                };
                let pk = listing
                    .pk
                    .render(&job.bind)
                    .ok_or_else(|| MessageError::invalid("the listing's partition is not bound"))?;
                // Only the sort keys that can match: from the template's bound
                // start (`s#<jobId>#` of one job's targets) to where it ends.
                let prefix = listing.sk.bound_prefix(&job.bind);
                let mut start = after.clone().or_else(|| prefix.clone());
                // A fact's lower bound: its listing starts there.
                let from = match step {
                    Step::List { fact, .. } if is_fact => {
                        self.fact(fact).and_then(|f| f.from.as_ref())
                    }
                    _ => None,
                };
                if let Some(b) = from {
                    let lower = (b.start)(reads.now)
                        .ok()
                        .and_then(|min| listing_start(&listing.sk, &job.bind, &b.var, &min));
                    if lower > start {
                        start = lower;
                    }
                }
                let (items, next) = super::rows::list_page(
                    reads,
                    names,
                    &pk,
                    prefix.as_deref(),
                    start.as_deref(),
                    self.page - listed,
                )
                .await?;
                listed += items.len();
                for item in items {
                    let mut vars = job.bind.clone();
                    if !listing.read(names, &item, &mut vars) {
                        continue;
                    }
                    if is_target && self.expired(&item, reads.now) {
                        continue;
                    }
                    // A fact listed binds its `also` (one that cannot is not a
                    // candidate: a sweep finds its target); a target its
                    // carried variables.
                    if is_fact && !bind_also(also, &item, &mut vars) {
                        continue;
                    }
                    let carried_ok = carried.iter().all(|(attr, var)| match item.s(attr) {
                        Ok(v) if valid_var_value(v) && vars.get(*var).is_none_or(|b| b == v) => {
                            vars.insert(var.to_string(), v.to_string());
                            true
                        }
                        _ => false,
                    });
                    if !carried_ok {
                        continue;
                    }
                    if is_fact || is_target {
                        known.insert(item_id(&crate::item::key_of(&item, names)), item);
                    }
                    candidates.push(vars);
                }
                next
            };
            if next.is_none() {
                step_no += 1;
            }
            after = next;
            if listed >= self.page || after.is_some() {
                break;
            }
        }
        if step_no < scope.steps.len() {
            plan.ahead.push(OutMessage {
                queue: self.queue,
                body: JoinJob {
                    step: step_no,
                    after,
                    ..job.clone()
                }
                .encode(),
            });
        }
        let mut ledger_known: HashMap<String, Item> = HashMap::new();
        self.read_rows(&candidates, &mut known, &mut ledger_known, reads)
            .await?;
        let mut decided = Decided {
            scope: &scope.on,
            now: reads.now,
            ..Decided::default()
        };
        for vars in &candidates {
            decided.add(self, vars, &known, &ledger_known, &mut plan);
        }
        // A row that would delete its key's item while a fact places the
        // key in another row (see `determined`): that row is read and
        // decided too, so that the key is decided by the row it has now.
        for _ in 0..self.facts.len() {
            let read = |k: &Item| known.get(&item_id(k)).cloned();
            let mut more: Vec<Vars> = std::mem::take(&mut decided.deleting)
                .iter()
                .filter_map(|v| self.determined(v, &read))
                .filter(|v| !decided.seen.contains(v))
                .collect();
            more.sort();
            more.dedup();
            if more.is_empty() {
                break;
            }
            self.read_rows(&more, &mut known, &mut ledger_known, reads)
                .await?;
            for vars in &more {
                decided.add(self, vars, &known, &ledger_known, &mut plan);
            }
        }
        // A target several rows can imply, whose rows here do not decide it
        // (it exists, and the row it carries is not one of them implying
        // it): every row of its key (see `joinset_rows.rs`).
        if let Some(step) = self
            .key_step()
            .map_err(|e| MessageError::invalid(e.to_string()))?
        {
            let key_vars = self.target.key.vars();
            let need: Vec<Vars> = decided
                .by_key
                .iter()
                .filter(|(_, rows)| self.undecided(rows))
                .map(|(_, rows)| {
                    rows[0]
                        .0
                        .iter()
                        .filter(|(k, _)| key_vars.contains(k.as_str()))
                        .map(|(k, x)| (k.clone(), x.clone()))
                        .collect()
                })
                .collect();
            let mut cache = super::rows::KeyCache::new();
            let mut more = Vec::new();
            for bind in need {
                for (vars, item) in self.key_rows(&step, &bind, reads, &mut cache).await? {
                    if let Some(item) = item {
                        known.insert(item_id(&crate::item::key_of(&item, names)), item);
                    }
                    more.push(vars);
                }
            }
            self.read_rows(&more, &mut known, &mut ledger_known, reads)
                .await?;
            for vars in &more {
                decided.add(self, vars, &known, &ledger_known, &mut plan);
            }
        }
        for (_, rows) in &decided.by_key {
            let ((desired, existing), _) = self.merge(rows);
            plan.desired.extend(desired);
            plan.existing.extend(existing);
        }
        Ok(plan)
    }
}

impl SetJob for JoinSet {
    fn name(&self) -> &'static str {
        self.name
    }

    fn key_names(&self) -> &'static [&'static str] {
        self.key_names
    }

    fn volatile(&self) -> &'static [&'static str] {
        self.volatile
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            let (job, scope) = self.job(body)?;
            self.plan_job(&job, &scope, reads).await
        })
    }
}

/// The rows a job decided, by target key (in the order keys were met).
#[derive(Default)]
struct Decided<'a> {
    /// The job's scope (the fact that changed) and clock.
    scope: &'a str,
    now: DateTime<Utc>,
    seen: BTreeSet<Vars>,
    /// Rows decided to delete their key's item (implying nothing while it
    /// exists), since last taken.
    deleting: Vec<Vars>,
    bad_facts: BTreeSet<String>,
    by_key: Vec<(String, Vec<(Vars, Decision)>)>,
    slot: HashMap<String, usize>,
}

impl Decided<'_> {
    /// Decides the row `vars` (once), logging a bad fact once per job.
    fn add(
        &mut self,
        set: &JoinSet,
        vars: &Vars,
        known: &HashMap<String, Item>,
        ledger_known: &HashMap<String, Item>,
        plan: &mut Plan,
    ) {
        if !self.seen.insert(vars.clone()) {
            return;
        }
        let Some(key) = set.target.key.key(set.key_names, vars) else {
            return;
        };
        let read = |k: &Item| known.get(&item_id(k)).cloned();
        let read_ledger = |k: &Item| ledger_known.get(&item_id(k)).cloned();
        let Some((decision, bad, bad_fact)) =
            set.decide_row(self.scope, vars, &read, &read_ledger, self.now)
        else {
            return;
        };
        plan.bad_input_logged += usize::from(bad);
        if let Some((key, reason)) = bad_fact {
            let label = crate::item::display_key(&key);
            if self.bad_facts.insert(label.clone()) {
                tracing::warn!(set = set.name, key = %label, reason = %reason, "a fact is bad input: what it implied is kept");
                plan.bad_input_logged += 1;
            }
        }
        let id = item_id(&key);
        let by_key = &mut self.by_key;
        let i = *self.slot.entry(id.clone()).or_insert_with(|| {
            by_key.push((id, Vec::new()));
            by_key.len() - 1
        });
        if decision.0.is_none() && decision.1.is_some() {
            self.deleting.push(vars.clone());
        }
        self.by_key[i].1.push((vars.clone(), decision));
    }
}
