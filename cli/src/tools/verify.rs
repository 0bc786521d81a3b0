//! `jobstream verify`: recomputes every derived datum of any model from the
//! source items and the model's rules, and reports drift per kind (checked,
//! wrong, missing, extra, a sample); `--repair` fixes it through the live
//! path: the same reconcile, counter sync and set jobs, with their guards.
//!
//! Generic kinds: `projection` (processor-owned attributes), `derived`
//! (items other items imply), `counter` (counter items = sums of
//! contributions), `ledger` (totals = sums of the recorded contributions),
//! `index` (a source item missing from a ledger index its rules list it in:
//! a join set or a `compute:` reading the index would not find it).
//! Models add their own kinds (their `checks`). Items the rules reject are
//! listed as bad input, not as drift.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use shared::engine::derive::{
    checked_contributions, index_key, projection_update, total_attr, total_key, total_pk, Implied,
};
use shared::engine::rules::Counter;
use shared::engine::writable::{self, Writes};
use shared::item::{display_key, key_of, Item, ItemExt};
use shared::lambda::{Config, Processors};
use shared::ledger::{item_id, parse_item_id};
use shared::models::{CheckInput, Drift, Finding, Model, Repair};

#[path = "verify_counters.rs"]
mod counters;
#[path = "verify_owners.rs"]
mod owners;
#[path = "verify_repair.rs"]
mod repair;
pub use repair::repair;

/// Drift of one kind of derived datum.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KindReport {
    pub checked: u64,
    pub wrong: u64,
    pub missing: u64,
    pub extra: u64,
    /// Up to 5 example keys with what is wrong.
    pub samples: Vec<String>,
}

impl KindReport {
    pub fn drift(&self) -> u64 {
        self.wrong + self.missing + self.extra
    }
}

/// How many findings of each list `verify` prints without `--all`.
pub const LISTED: usize = 20;

/// What verification found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub kinds: BTreeMap<&'static str, KindReport>,
    /// Every problem: what and where.
    pub problems: Vec<String>,
    /// Items the rules reject (keys and reasons): not drift.
    pub bad_input: Vec<String>,
    pub repairs: Vec<Repair>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    fn checked(&mut self, kind: &'static str) {
        self.kinds.entry(kind).or_default().checked += 1;
    }

    fn found(&mut self, f: Finding) {
        let k = self.kinds.entry(f.kind).or_default();
        match f.drift {
            Drift::Wrong => k.wrong += 1,
            Drift::Missing => k.missing += 1,
            Drift::Extra => k.extra += 1,
        }
        if k.samples.len() < 5 {
            k.samples.push(f.what.clone());
        }
        self.problems.push(format!("{}: {}", f.kind, f.what));
        if let Some(r) = f.repair {
            if !self.repairs.contains(&r) {
                self.repairs.push(r);
            }
        }
    }

    /// The findings as printed, drift first then bad input: the first
    /// [`LISTED`] of each unless `all`, and how many more there are.
    pub fn listing(&self, all: bool) -> Vec<String> {
        let cap = if all { usize::MAX } else { LISTED };
        let mut out = Vec::new();
        for (label, items) in [
            ("drift", &self.problems),
            ("bad input (not drift)", &self.bad_input),
        ] {
            out.extend(items.iter().take(cap).map(|p| format!("{label}: {p}")));
            if items.len() > cap {
                let more = items.len() - cap;
                out.push(format!(
                    "{label}: ... and {more} more (--all lists every one)"
                ));
            }
        }
        out
    }

    /// What `--repair --dry-run` prints: each repair that would run.
    pub fn dry_run(&self, key_names: &[&str]) -> Vec<String> {
        self.repairs
            .iter()
            .map(|r| format!("repair: {}", r.describe(key_names)))
            .collect()
    }

    /// The drift report as a table.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .kinds
            .iter()
            .map(|(k, r)| {
                vec![
                    k.to_string(),
                    r.checked.to_string(),
                    r.wrong.to_string(),
                    r.missing.to_string(),
                    r.extra.to_string(),
                    r.samples.first().cloned().unwrap_or_default(),
                ]
            })
            .collect();
        shared::report::render_table(
            &["kind", "checked", "wrong", "missing", "extra", "sample"],
            &rows,
        )
    }
}

/// What a counter item should hold: the sums over its source items.
struct ExpectedCounter {
    counter: Counter,
    /// Exact past 64 bits (DynamoDB's numbers hold 38 digits).
    sums: BTreeMap<String, i128>,
    /// Ids of the source items that contribute.
    sources: BTreeSet<String>,
}

impl ExpectedCounter {
    fn new(counter: Counter) -> Self {
        Self {
            counter,
            sums: BTreeMap::new(),
            sources: BTreeSet::new(),
        }
    }
}

/// Every item of a table (Scan, consistent).
pub async fn scan_all(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<Vec<Item>> {
    let progress = crate::progress::spinner(format!("scanning {table}"));
    let mut pages = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .send();
    let mut items = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page?;
        progress.inc(page.items().len() as u64);
        items.extend(page.items().iter().cloned());
    }
    progress.finish_and_clear();
    Ok(items)
}

/// Verifies a model's table and ledger.
pub async fn verify(model: &Model, p: &Processors, config: &Config) -> anyhow::Result<Report> {
    let client = p.store.client();
    let items = scan_all(client, &config.table).await?;
    let ledger = scan_all(client, &config.ledger_table).await?;
    Ok(verify_items(model, &items, &ledger, chrono::Utc::now()))
}

/// The drift of a model's items (pure).
pub fn verify_items(
    model: &Model,
    items: &[Item],
    ledger: &[Item],
    now: chrono::DateTime<chrono::Utc>,
) -> Report {
    let rules = &model.rules;
    let key_names = rules.key_names();
    let limits = shared::limits::KeyLimits::of(&model.table);
    let mut report = Report::default();
    // The engine's own kinds, listed even with nothing to check.
    for kind in ["projection", "derived", "counter", "ledger"] {
        report.kinds.entry(kind).or_default();
    }
    let by_id: HashMap<String, &Item> = items
        .iter()
        .map(|i| (item_id(&key_of(i, key_names)), i))
        .collect();
    let mut desired: BTreeMap<String, (Item, Item)> = BTreeMap::new();
    // Every source of each shared derived item.
    let mut shared_owners = owners::Expected::new();
    let mut sums: BTreeMap<String, ExpectedCounter> = BTreeMap::new();
    // What the engine recorded per source item: an item that turned into bad
    // input keeps what its earlier valid states implied.
    let recorded: HashMap<String, Implied> = ledger
        .iter()
        .filter(|rec| is_source_record(rec))
        .filter_map(|rec| Some((recorded_source(rec)?, Implied::from_record(rec).ok()?)))
        .collect();
    // The derived items the sources' records name, and the owners kept.
    let recorded_derived: BTreeSet<&str> = recorded
        .values()
        .flat_map(|i| i.derived.keys().map(String::as_str))
        .collect();
    let owner_pks = owners::owners_pks(ledger);
    let total_pks: BTreeSet<&str> = ledger
        .iter()
        .filter_map(|rec| rec.s(shared::ledger::PK).ok())
        .filter(|pk| pk.starts_with(TOTALS))
        .collect();
    // Totals whose counter item the processor created (stamped).
    let created_pks: BTreeSet<&str> = ledger
        .iter()
        .filter(|rec| shared::engine::counts::is_created(rec))
        .filter_map(|rec| rec.s(shared::ledger::PK).ok())
        .filter(|pk| pk.starts_with(TOTALS))
        .collect();
    // The members of every ledger index, by their ledger key.
    let listed: BTreeSet<(&str, &str)> = ledger
        .iter()
        .filter_map(|rec| {
            let pk = rec.s(shared::ledger::PK).ok()?;
            pk.starts_with("IDX#")
                .then_some((pk, rec.s(shared::ledger::SK).ok()?))
        })
        .collect();
    let mut bad = BTreeSet::new();
    // An aspect waiting for a value not computed yet is no bad input: it
    // keeps what the ledger recorded, as bad input does, unlisted (the
    // value itself is judged by the compute checks).
    let mut note_bad = |report: &mut Report, key: &Item, e: &shared::error::InputError| {
        if !e.waits() && bad.insert(item_id(key)) {
            // The key once: most errors name it already.
            let (shown, why) = (display_key(key), e.to_string());
            report.bad_input.push(if why.contains(&shown) {
                format!("{why} ({})", e.kind())
            } else {
                format!("{shown}: {why} ({})", e.kind())
            });
        }
    };
    for item in items {
        let key = key_of(item, key_names);
        if rules.ignores(&key) {
            continue;
        }
        // A counter the processor created under an earlier version of the
        // model (its key template edited since, or its entity removed): no
        // source implies it. The ledger's totals at its key say the
        // processor created it (an application's item is never this).
        let tpk = total_pk("derive", &key);
        if (rules.stale_counter_item(item) && total_pks.contains(tpk.as_str()))
            || (rules.removed_counter_item(item) && created_pks.contains(tpk.as_str()))
        {
            report.checked("counter");
            report.found(Finding {
                kind: "counter",
                drift: Drift::Extra,
                what: format!(
                    "{}: a counter of an earlier version of the model (no counter has this key any more)",
                    display_key(&key)
                ),
                repair: Some(Repair::DeleteIfUnchanged(item.clone())),
            });
            continue;
        }
        // A derived item of an earlier version of the model: a source's
        // record naming it reports it below (its reconcile deletes it).
        if owners::earlier_derived(rules.as_ref(), item, &recorded_derived, &owner_pks) {
            report.checked("derived");
            if !recorded_derived.contains(item_id(&key).as_str()) {
                report.found(owners::left_behind(&key, item));
            }
            continue;
        }
        let projection = rules.projection(item);
        let derived = rules.derived(item);
        let contributions = checked_contributions(rules.as_ref(), item);
        let memberships = rules.memberships(item);
        // Writes DynamoDB cannot take: the engine treats the whole item as
        // bad input and keeps what it implied before.
        let writes = Writes {
            projection: projection.as_ref().ok().and_then(Option::as_ref),
            derived: derived.as_deref().unwrap_or_default(),
            contributions: contributions.as_deref().unwrap_or_default(),
            memberships: memberships.as_deref().map_or(0, <[_]>::len),
        };
        let within = writable::check(rules.as_ref(), &limits, "derive", item, &writes);
        // An item waiting for a value not computed yet is no drift (what
        // reads the value keeps what the ledger recorded); its value is
        // judged by the compute checks, whose repair (the job) writes it,
        // and the item is reconciled after it, as its record would be.
        let waits = [
            projection.as_ref().err(),
            derived.as_ref().err(),
            contributions.as_ref().err(),
            memberships.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .any(|e| e.waits());
        if waits && !report.repairs.contains(&Repair::Reconcile(key.clone())) {
            report.repairs.push(Repair::Reconcile(key.clone()));
        }
        let rejected = derived.is_err() || contributions.is_err() || memberships.is_err();
        // Not listed where the engine lists it (one derived before the
        // index existed: by a compiled model, or an earlier model file);
        // the reconcile of the item lists it. An item the rules reject keeps
        // what it had.
        if let (Ok(()), Ok(ms), false) = (&within, &memberships, rejected) {
            for (index, member) in ms {
                let k = index_key(index, member);
                let at = (k.s(shared::ledger::PK), k.s(shared::ledger::SK));
                if let (Ok(pk), Ok(sk)) = at {
                    if !listed.contains(&(pk, sk)) {
                        report.found(Finding {
                            kind: "index",
                            drift: Drift::Missing,
                            what: format!(
                                "{}: not listed in the ledger index {index}",
                                display_key(&key)
                            ),
                            repair: Some(Repair::Reconcile(key.clone())),
                        });
                    }
                }
            }
        }
        let (projection, derived, contributions) = match within {
            Ok(()) => (projection, derived, contributions),
            Err(e) => (Err(e.clone()), Err(e.clone()), Err(e)),
        };
        match projection {
            // The engine writes nothing onto an item its rules reject: its
            // projection is what its last valid state left.
            Ok(Some(_)) if rejected => {}
            Ok(Some(proj)) => {
                report.checked("projection");
                if projection_update(key_names, item, &proj).is_some() {
                    report.found(Finding {
                        kind: "projection",
                        drift: Drift::Wrong,
                        what: format!("{}: processor-owned attributes differ", display_key(&key)),
                        repair: Some(Repair::Reconcile(key.clone())),
                    });
                }
            }
            Ok(None) => {}
            Err(e) => note_bad(&mut report, &key, &e),
        }
        let kept = recorded.get(&item_id(&key));
        match derived {
            Ok(ds) => {
                for d in ds {
                    owners::imply(&mut desired, &mut shared_owners, rules.as_ref(), d, &key);
                }
            }
            Err(e) => {
                note_bad(&mut report, &key, &e);
                for (_, d) in kept.iter().flat_map(|k| &k.derived) {
                    owners::imply(
                        &mut desired,
                        &mut shared_owners,
                        rules.as_ref(),
                        d.clone(),
                        &key,
                    );
                }
            }
        }
        match contributions {
            Ok(cs) => {
                for c in cs {
                    let id = item_id(&c.counter.key_item());
                    let e = sums
                        .entry(id)
                        .or_insert_with(|| ExpectedCounter::new(c.counter.clone()));
                    for (a, v) in &c.values {
                        *e.sums.entry(a.to_string()).or_insert(0) += i128::from(*v);
                    }
                    e.sources.insert(item_id(&key));
                }
            }
            Err(e) => {
                note_bad(&mut report, &key, &e);
                for (cid, (ckey, values)) in kept.iter().flat_map(|k| &k.contributions) {
                    let Some(counter) = rules.counter(ckey) else {
                        continue;
                    };
                    let e = sums
                        .entry(cid.clone())
                        .or_insert_with(|| ExpectedCounter::new(counter));
                    for (a, v) in values {
                        *e.sums.entry(a.clone()).or_insert(0) += i128::from(*v);
                    }
                    e.sources.insert(item_id(&key));
                }
            }
        }
    }
    // Derived items: missing or different, and extra (recorded by the
    // engine but no longer implied).
    for (id, (d, source)) in &desired {
        report.checked("derived");
        let drift = match by_id.get(id) {
            // Its TTL is past: the sweep took it, or will.
            None if shared::item::expired(d, model.table.ttl_attribute, now) => None,
            None => Some(Drift::Missing),
            Some(have) if !shared::item::same_items(have, d) => Some(Drift::Wrong),
            _ => None,
        };
        if let Some(drift) = drift {
            report.found(Finding {
                kind: "derived",
                drift,
                what: format!(
                    "{} (from {})",
                    display_key(&key_of(d, key_names)),
                    display_key(source)
                ),
                repair: Some(Repair::Reconcile(source.clone())),
            });
        }
    }
    // Items of a derived entity's shape that no source implies (ghosts: a
    // source gone while its item was edited, or an item a writer made),
    // whether or not the ledger lists them.
    for item in items {
        let key = key_of(item, key_names);
        if !rules.is_derived(&key) {
            continue;
        }
        report.checked("derived");
        if !desired.contains_key(&item_id(&key)) {
            report.found(Finding {
                kind: "derived",
                drift: Drift::Extra,
                what: format!("{}: no source implies it", display_key(&key)),
                repair: Some(Repair::DeleteIfUnchanged(item.clone())),
            });
        }
    }
    let mut recorded_totals: BTreeMap<String, BTreeMap<String, i128>> = BTreeMap::new();
    // Per totals' `pk`: the counter key and the sources whose records count
    // into it.
    let mut counted_by: BTreeMap<String, (Item, Vec<Item>)> = BTreeMap::new();
    let mut totals: BTreeMap<String, BTreeMap<String, i128>> = BTreeMap::new();
    for rec in ledger {
        let pk = rec.s(shared::ledger::PK).unwrap_or_default();
        if let Some(id) = pk
            .strip_prefix("SRC#derive#")
            .filter(|_| is_source_record(rec))
        {
            let Ok(implied) = Implied::from_record(rec) else {
                continue;
            };
            for (did, dkey) in &implied.derived {
                // (Derived shapes were all checked above.)
                if !desired.contains_key(did)
                    && by_id.contains_key(did)
                    && !rules.is_derived(&key_of(dkey, key_names))
                {
                    let source = match rec.get("src") {
                        Some(aws_sdk_dynamodb::types::AttributeValue::M(k)) => Some(k.clone()),
                        _ => None,
                    };
                    report.found(Finding {
                        kind: "derived",
                        drift: Drift::Extra,
                        what: format!("{} (recorded for {id})", display_key(dkey)),
                        repair: Some(match source {
                            Some(s) => Repair::Reconcile(s),
                            None => Repair::DeleteIfUnchanged((*by_id[did]).clone()),
                        }),
                    });
                }
            }
            for (_, (ckey, values)) in implied.contributions {
                let tpk = total_pk("derive", &ckey);
                if let Some(source) = recorded_source_key(rec) {
                    counted_by
                        .entry(tpk.clone())
                        .or_insert_with(|| (ckey.clone(), Vec::new()))
                        .1
                        .push(source);
                }
                let e = recorded_totals.entry(tpk).or_default();
                for (a, v) in values {
                    *e.entry(a).or_insert(0) += i128::from(v);
                }
            }
        } else if pk.starts_with(TOTALS) {
            let values = rec
                .keys()
                .filter_map(|k| k.strip_prefix("t_"))
                .filter_map(|a| Some((a.to_string(), rec.opt_i128(&total_attr(a)).ok()??)))
                .collect();
            totals.insert(pk.to_string(), values);
        }
    }
    // The ledger's own consistency: totals = sums of the records.
    let nonzero = |m: &BTreeMap<String, i128>| -> BTreeMap<String, i128> {
        m.iter()
            .filter(|(_, v)| **v != 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let ids: BTreeSet<&String> = recorded_totals.keys().chain(totals.keys()).collect();
    for id in ids {
        report.checked("ledger");
        let a = recorded_totals.get(id).map(nonzero).unwrap_or_default();
        let b = totals.get(id).map(nonzero).unwrap_or_default();
        if a != b {
            report.found(Finding {
                kind: "ledger",
                drift: Drift::Wrong,
                what: format!("totals of {id} differ from the recorded contributions"),
                repair: None,
            });
        }
    }
    // Totals of a key no counter of the model has any more (a counter's
    // key template edited since): dropped once nothing counts into them.
    for tpk in totals.keys() {
        let known = counted_by.get(tpk);
        let Some(ckey) = known
            .map(|(k, _)| k.clone())
            .or_else(|| parse_item_id(tpk.strip_prefix(TOTALS)?))
        else {
            continue;
        };
        if !rules.stale_counter(&ckey) {
            continue;
        }
        report.checked("ledger");
        report.found(Finding {
            kind: "ledger",
            drift: Drift::Extra,
            what: format!(
                "totals of {}: no counter of the model has this key any more",
                display_key(&ckey)
            ),
            repair: Some(Repair::StaleTotals {
                totals: total_key("derive", &ckey),
                sources: known.map(|(_, s)| s.clone()).unwrap_or_default(),
            }),
        });
    }
    owners::check(rules.as_ref(), &shared_owners, ledger, &mut report);
    // Counters whose ledger totals exist: something counted into them
    // once (a processor-created one is kept from its first count on).
    let once_counted: BTreeMap<String, Item> = totals
        .keys()
        .filter_map(|tpk| {
            let ckey = counted_by
                .get(tpk)
                .map(|(k, _)| k.clone())
                .or_else(|| parse_item_id(tpk.strip_prefix(TOTALS)?))?;
            Some((item_id(&ckey), ckey))
        })
        .collect();
    let ledger_says = counters::LedgerSays {
        counted_by: &counted_by,
        once_counted: &once_counted,
    };
    counters::check(
        rules.as_ref(),
        &limits,
        items,
        &by_id,
        &mut sums,
        ledger_says,
        &bad,
        &mut report,
    );

    // The model's own checks tally what they checked, every kind they
    // check listed (0 included).
    let input = CheckInput::new(items, ledger, now);
    let mut found = model
        .fold
        .as_ref()
        .map(|fold| fold.rules.verify(&input))
        .unwrap_or_default();
    found.extend(model.rules.checks(&input));
    for (kind, n) in input.tally() {
        report.kinds.entry(kind).or_default().checked += n;
    }
    report.bad_input.extend(input.bad_inputs());
    for f in found {
        report.found(f);
    }
    report
}

/// A derive's record of a source item (not the pending state kept beside
/// a large one, sort key `L`).
fn is_source_record(rec: &Item) -> bool {
    rec.s(shared::ledger::PK)
        .is_ok_and(|pk| pk.starts_with("SRC#derive#"))
        && rec.s(shared::ledger::SK) == Ok(shared::engine::derive::SOURCE_SK)
}

/// The id of the source item a ledger record is about (its `src` key: the
/// record's own key may be a hash of it, see `shared::ledger::bounded_pk`).
fn recorded_source(rec: &Item) -> Option<String> {
    match rec.get("src") {
        Some(aws_sdk_dynamodb::types::AttributeValue::M(k)) => Some(item_id(k)),
        _ => rec
            .s(shared::ledger::PK)
            .ok()?
            .strip_prefix("SRC#derive#")
            .map(str::to_string),
    }
}

/// The key of the source item a ledger record is about.
fn recorded_source_key(rec: &Item) -> Option<Item> {
    match rec.get("src") {
        Some(aws_sdk_dynamodb::types::AttributeValue::M(k)) => Some(k.clone()),
        _ => parse_item_id(
            rec.s(shared::ledger::PK)
                .ok()?
                .strip_prefix("SRC#derive#")?,
        ),
    }
}

/// The `pk` prefix of the derive processor's counter totals.
const TOTALS: &str = "TOTAL#derive#";

#[cfg(test)]
mod listing_tests {
    use shared::item::{n, s, Item};
    use shared::models::Repair;

    use super::{Report, LISTED};

    /// `--repair --dry-run` names each repair by what it does and the keys
    /// it touches, never an item's other attributes or a job's body (user
    /// finding E2: it printed Rust's `Debug` of whole items).
    #[test]
    fn a_dry_run_names_what_each_repair_does_by_keys_only() {
        let item = |pk: &str, sk: &str| -> Item {
            [
                ("PK".to_string(), s(pk)),
                ("SK".to_string(), s(sk)),
                ("salary".to_string(), n(91_000)),
            ]
            .into()
        };
        let report = Report {
            repairs: vec![
                Repair::Reconcile(item("ORG#1", "EMP#2")),
                Repair::Counter {
                    counter: item("ORG#1", "#METADATA"),
                    sources: vec![item("ORG#1", "EMP#2"), item("ORG#1", "EMP#3")],
                },
                Repair::Job {
                    queue: "fanout",
                    body: r#"{"secret":"x"}"#.into(),
                },
                Repair::DeleteIfUnchanged(item("DEPT#9", "EMP#2")),
                Repair::StaleTotals {
                    totals: [
                        ("pk".to_string(), s("c#ORG#7")),
                        ("sk".to_string(), s("totals")),
                        ("sum_seats".to_string(), n(0)),
                    ]
                    .into(),
                    sources: vec![],
                },
                Repair::StaleOwners {
                    item: item("HOLDS#h", "B#b0"),
                    records: vec![item("OWN#x", "O"), item("OWN#x", "R#y")],
                    sources: vec![item("GUEST#g", "BOOK#b0")],
                },
            ],
            ..Report::default()
        };
        assert_eq!(
            report.dry_run(&["PK", "SK"]),
            [
                "repair: reconcile the item PK=ORG#1, SK=EMP#2",
                "repair: set the counter PK=ORG#1, SK=#METADATA to its totals after reconciling 2 source item(s): PK=ORG#1, SK=EMP#2; PK=ORG#1, SK=EMP#3",
                "repair: run a job through the queue fanout (14 bytes)",
                "repair: delete PK=DEPT#9, SK=EMP#2 if it is still as read",
                "repair: delete the stale ledger totals pk=c#ORG#7, sk=totals once every sum is 0 (after reconciling 0 source item(s))",
                "repair: delete the ledger owners of PK=HOLDS#h, SK=B#b0 (2 record(s)), which nothing reads any more, if still as read and the item is gone or still derived (after reconciling 1 source item(s))",
            ]
        );
    }

    /// A list longer than what is printed says how many more there are
    /// (user finding E1: 24 of 47 drift lines, and no word of the rest).
    #[test]
    fn a_long_list_says_how_many_more_and_all_lists_every_one() {
        let report = Report {
            problems: (0..LISTED + 7).map(|i| format!("p{i}")).collect(),
            bad_input: vec!["b0".into()],
            ..Report::default()
        };
        let short = report.listing(false);
        assert_eq!(short.len(), LISTED + 2);
        assert_eq!(
            short[LISTED],
            "drift: ... and 7 more (--all lists every one)"
        );
        assert_eq!(short[LISTED + 1], "bad input (not drift): b0");
        let all = report.listing(true);
        assert_eq!(all.len(), LISTED + 8);
        assert!(all.iter().all(|l| !l.contains("more")));
    }
}
