//! Benchmark (not a test) of the hr model: item writes the derive processor
//! makes per employee change, against the minimum the change needs.
//!
//! The minimum of a change: one write per processor-owned attribute set
//! that changes (the employee's GSI1 keys), one per derived item that
//! changes (a DeptEmployee put or delete), plus one counter write per
//! department whose headcount changes in a batch (however many of its
//! employees changed in it). Table writes are counted as the stream records
//! they produce; ledger writes (records and totals) are shown beside them.
//!
//! Employees of one organisation spread over departments; stream batches of
//! 100 records, as Lambda delivers them by default; every phase changes
//! each employee once. Run:
//! `cargo bench -p jobstream --bench hr` (JOBSTREAM_BENCH_EMPS=N employees,
//! JOBSTREAM_BENCH_DEPTS=N departments).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use aws_lambda_events::event::dynamodb::Event;
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use serde_json::Value;
use shared::engine::derive::projection_update;
use shared::engine::rules::Rules;
use shared::item::{s, Item};

mod common;
#[path = "common/seed_items.rs"]
mod seed_items;
use seed_items::hr as build;
use seed_items::hr as keys;
use seed_items::nth_ulid as ulid;

/// The rules of `--model hr` (the shipped models/hr.yaml).
fn hr_rules() -> &'static dyn Rules {
    static RULES: std::sync::OnceLock<std::sync::Arc<dyn Rules>> = std::sync::OnceLock::new();
    RULES
        .get_or_init(|| {
            shared::models::find("hr")
                .expect("the hr model loads")
                .rules
        })
        .as_ref()
}

const BATCH: usize = 100;

/// How the writer writes a change.
#[derive(Clone, Copy)]
enum Write {
    /// A plain PutItem of the whole item as the writer knows it (without
    /// the processor's attributes: the GSI1 keys must be written back).
    Put,
    /// An UpdateItem of the changed attributes only.
    Update,
}

/// The item as stored once the processor set its projection.
fn projected(item: &Item) -> Item {
    let mut out = item.clone();
    if let Ok(Some(p)) = hr_rules().projection(item) {
        for (a, v) in p.attrs {
            match v {
                Some(v) => out.insert(a.to_string(), v),
                None => out.remove(a),
            };
        }
    }
    out
}

/// The minimum table writes of one change (`old`, `new`: the item as
/// stored before and after the writer's write): a projection write if the
/// new item does not carry its processor-owned attributes, one write per
/// derived item that changes; and the counter deltas it causes.
fn minimum(old: Option<&Item>, new: Option<&Item>) -> (usize, BTreeMap<String, i64>) {
    let r = hr_rules();
    let needs_projection = new
        .and_then(|n| Some(projection_update(r.key_names(), n, &r.projection(n).ok()??)))
        .flatten()
        .is_some();
    let mut writes = usize::from(needs_projection);
    let derived = |i: Option<&Item>| {
        i.map(|i| r.derived(i).unwrap_or_default())
            .unwrap_or_default()
    };
    let (od, nd) = (derived(old), derived(new));
    writes += nd.iter().filter(|d| !od.contains(d)).count();
    let key = |d: &Item| (d.get(keys::PK).cloned(), d.get(keys::SK).cloned());
    let new_keys: BTreeSet<_> = nd.iter().map(|d| format!("{:?}", key(d))).collect();
    writes += od
        .iter()
        .filter(|d| !new_keys.contains(&format!("{:?}", key(d))))
        .count();
    let mut deltas = BTreeMap::new();
    for (img, sign) in [(old, -1), (new, 1)] {
        for c in img
            .map(|i| r.contributions(i).unwrap_or_default())
            .unwrap_or_default()
        {
            *deltas.entry(format!("{:?}", c.counter.key)).or_insert(0) += sign;
        }
    }
    deltas.retain(|_, v| *v != 0);
    (writes, deltas)
}

struct Bench {
    /// The engine (stopped when dropped).
    _engine: LocalEngine,
    rt: Runtime,
    stream: common::StreamTail,
    /// Stream records read so far.
    seen: Vec<Value>,
    /// The writer's items, by employee id.
    emps: BTreeMap<String, Item>,
    /// The processor's bill (RRU, WRU).
    meter: jobstream::meter::Meter,
    /// The records the processor's writes produced in the phases so far.
    produced: Vec<Value>,
}

impl Bench {
    async fn put(&mut self, item: Item) -> anyhow::Result<()> {
        self.rt
            .dynamodb
            .put_item()
            .table_name(&self.rt.config.table)
            .set_item(Some(item))
            .send()
            .await?;
        Ok(())
    }

    /// The writer's UpdateItem: SET what changed, REMOVE what went.
    async fn update(&mut self, old: &Item, new: &Item) -> anyhow::Result<()> {
        let mut req = self
            .rt
            .dynamodb
            .update_item()
            .table_name(&self.rt.config.table)
            .key(keys::PK, old[keys::PK].clone())
            .key(keys::SK, old[keys::SK].clone());
        let mut sets = Vec::new();
        let mut removes = Vec::new();
        for (i, (a, v)) in new
            .iter()
            .filter(|(a, v)| old.get(*a) != Some(*v))
            .enumerate()
        {
            sets.push(format!("#s{i} = :s{i}"));
            req = req
                .expression_attribute_names(format!("#s{i}"), a)
                .expression_attribute_values(format!(":s{i}"), v.clone());
        }
        for (i, a) in old.keys().filter(|a| !new.contains_key(*a)).enumerate() {
            removes.push(format!("#r{i}"));
            req = req.expression_attribute_names(format!("#r{i}"), a);
        }
        let mut expr = format!("SET {}", sets.join(", "));
        if !removes.is_empty() {
            expr.push_str(&format!(" REMOVE {}", removes.join(", ")));
        }
        req.update_expression(expr).send().await?;
        Ok(())
    }

    async fn delete(&mut self, item: &Item) -> anyhow::Result<()> {
        self.rt
            .dynamodb
            .delete_item()
            .table_name(&self.rt.config.table)
            .key(keys::PK, item[keys::PK].clone())
            .key(keys::SK, item[keys::SK].clone())
            .send()
            .await?;
        Ok(())
    }

    /// Stream records written since the last call.
    fn new_records(&mut self) -> anyhow::Result<Vec<Value>> {
        let out = self.stream.read()?;
        self.seen.extend(out.iter().cloned());
        Ok(out)
    }

    /// Delivers `records` in Lambda-sized batches; returns (table writes,
    /// ledger writes, the records the processor's writes produced, time).
    async fn deliver(
        &mut self,
        records: &[Value],
    ) -> anyhow::Result<(
        usize,
        u64,
        Vec<Value>,
        std::time::Duration,
        jobstream::meter::Bill,
    )> {
        let handler = self.rt.stream_processor("derive");
        let before = self.rt.processor_writes();
        let bill = self.meter.bill();
        let mut produced = Vec::new();
        let started = Instant::now();
        for chunk in records.chunks(BATCH) {
            let resp = handler
                .handle(common::event::<Event>(chunk)?)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            anyhow::ensure!(resp.batch_item_failures.is_empty(), "a batch failed");
            produced.extend(self.new_records()?);
        }
        let elapsed = started.elapsed();
        let all = self.rt.processor_writes() - before;
        Ok((
            produced.len(),
            all - produced.len() as u64,
            produced,
            elapsed,
            self.meter.bill().since(&bill),
        ))
    }

    /// Applies one change per employee with `f` (new item or `None` to
    /// delete), delivers the records, prints the figures. Keeps the records
    /// the processor's writes produced.
    async fn phase(
        &mut self,
        name: &str,
        write: Write,
        f: impl Fn(usize, Option<&Item>) -> Option<Item>,
    ) -> anyhow::Result<()> {
        let mut changes: Vec<(Option<Item>, Option<Item>)> = Vec::new();
        let ids: Vec<String> = self.emps.keys().cloned().collect();
        for (i, id) in ids.iter().enumerate() {
            let old = self.emps.get(id).filter(|e| !e.is_empty()).cloned();
            let new = f(i, old.as_ref());
            if old.is_some() && old == new {
                continue;
            }
            let stored_old = old.as_ref().map(projected);
            let stored_new = match (&old, &new, write) {
                (Some(o), Some(n), Write::Update) => {
                    let mut stored = projected(o);
                    self.update(o, n).await?;
                    for a in o.keys().filter(|a| !n.contains_key(*a)) {
                        stored.remove(a);
                    }
                    stored.extend(n.clone());
                    Some(stored)
                }
                (_, Some(n), _) => {
                    self.put(n.clone()).await?;
                    Some(n.clone())
                }
                (Some(o), None, _) => {
                    self.delete(o).await?;
                    None
                }
                (None, None, _) => continue,
            };
            changes.push((stored_old, stored_new));
            match new {
                Some(n) => self.emps.insert(id.clone(), n),
                None => self.emps.remove(id),
            };
        }
        let records = self.new_records()?;
        anyhow::ensure!(records.len() == changes.len(), "one record per change");
        let mut min = 0;
        for batch in changes.chunks(BATCH) {
            let mut net: BTreeMap<String, i64> = BTreeMap::new();
            for (old, new) in batch {
                let (w, deltas) = minimum(old.as_ref(), new.as_ref());
                min += w;
                for (k, v) in deltas {
                    *net.entry(k).or_insert(0) += v;
                }
            }
            min += net.values().filter(|v| **v != 0).count();
        }
        let (table, ledger, produced, elapsed, bill) = self.deliver(&records).await?;
        report(name, changes.len(), table, min, ledger, elapsed, &bill);
        self.produced.extend(produced);
        Ok(())
    }

    /// A [`Self::phase`] changing each employee there is: `f` edits a copy.
    async fn edits(
        &mut self,
        name: &str,
        write: Write,
        f: impl Fn(usize, &mut Item),
    ) -> anyhow::Result<()> {
        self.phase(name, write, |i, e| {
            let mut e = e?.clone();
            f(i, &mut e);
            Some(e)
        })
        .await
    }

    /// Delivers `records` again (no change has a minimum: every write is
    /// above it) and prints the figures.
    async fn redeliver(&mut self, name: &str, records: &[Value]) -> anyhow::Result<()> {
        let (table, ledger, _, elapsed, bill) = self.deliver(records).await?;
        report(name, records.len(), table, 0, ledger, elapsed, &bill);
        Ok(())
    }
}

fn report(
    name: &str,
    changes: usize,
    table: usize,
    min: usize,
    ledger: u64,
    elapsed: std::time::Duration,
    bill: &jobstream::meter::Bill,
) {
    let per = |x: f64| x / changes.max(1) as f64;
    println!(
        "{name:<34} {changes:>5} changes: {table:>5} table writes = {:.2}/change (minimum {min} = {:.2}/change{}); {ledger:>5} ledger writes; {:>7.2?}/record",
        per(table as f64),
        per(min as f64),
        if table == min { ", at the minimum" } else { ", ABOVE THE MINIMUM" },
        elapsed / changes.max(1) as u32,
    );
    println!("{:<34} bill: {}", "", bill.per_change(changes));
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let n_emps = common::env_usize("JOBSTREAM_BENCH_EMPS", 400);
    let n_depts = common::env_usize("JOBSTREAM_BENCH_DEPTS", 10).max(2);
    let engine = LocalEngine::start("127.0.0.1:0", None).await?;
    let mut opts = common::options("hr", &engine);
    let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
    let rt = Runtime::start(opts).await?;
    let stream = common::StreamTail::open(&engine, &rt.dynamodb, &rt.config.table).await?;
    let mut b = Bench {
        _engine: engine,
        rt,
        stream,
        seen: Vec::new(),
        emps: BTreeMap::new(),
        meter,
        produced: Vec::new(),
    };
    let org = ulid(1);
    let depts: Vec<String> = (0..n_depts as u64).map(|d| ulid(10 + d)).collect();
    for d in &depts {
        b.put(build::dept(&org, d, "Dept", &ulid(9))).await?;
    }
    let dept_records = b.new_records()?;
    b.deliver(&dept_records).await?;
    let _ = b.new_records()?;
    for i in 0..n_emps as u64 {
        let id = ulid(1000 + i);
        b.emps.insert(id, Item::new());
    }
    println!(
        "{n_emps} employees in {n_depts} departments of one organisation; stream batches of {BATCH} records"
    );
    b.phase("hire (put)", Write::Put, |i, _| {
        Some(build::emp(
            &org,
            &ulid(1000 + i as u64),
            &format!("E{i}@Acme.co"),
            "E",
            &depts[i % n_depts],
        ))
    })
    .await?;
    let moved = |by: usize| {
        let depts = &depts;
        move |i: usize, e: &mut Item| {
            e.insert("departmentId".into(), s(&depts[(i + by) % n_depts]));
        }
    };
    b.edits("move (put)", Write::Put, moved(1)).await?;
    b.edits("deactivate every other (put)", Write::Put, |i, e| {
        if i % 2 == 0 {
            e.insert("status".into(), s("inactive"));
            e.insert("terminatedAt".into(), s("2026-03-01"));
        } else {
            e.insert("lastName".into(), s("Renamed"));
        }
    })
    .await?;
    b.edits("change email (update)", Write::Update, |i, e| {
        e.insert("email".into(), s(format!("new.{i}@ACME.co")));
    })
    .await?;
    b.edits("move and reactivate (update)", Write::Update, |i, e| {
        moved(3)(i, e);
        e.insert("status".into(), s("active"));
        e.remove("terminatedAt");
    })
    .await?;
    b.edits("deactivate every other (update)", Write::Update, |i, e| {
        if i % 2 == 1 {
            e.insert("status".into(), s("inactive"));
        }
    })
    .await?;
    b.edits("move (update)", Write::Update, moved(5)).await?;
    // The processor's own writes come back on the stream: a fixpoint.
    let produced = std::mem::take(&mut b.produced);
    b.redeliver("processor's own records (fixpoint)", &produced)
        .await?;
    // A consumer restarted from TRIM_HORIZON: every record again.
    let replay: Vec<Value> = b.seen.clone();
    b.redeliver("replay of the whole stream", &replay).await?;
    let _ = b.new_records()?;
    b.phase("delete", Write::Put, |_, _| None).await?;
    Ok(())
}
