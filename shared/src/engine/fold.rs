//! The fold processor: aggregates folded, in stream order, into a durable
//! running state, emitting entries (history) as they go.
//!
//! State lives in the ledger table, one item per part of the aggregate (the
//! root item, each child) plus a HEAD (sequence, version, last applied
//! stream sequence number). Each transaction chunk writes, atomically: one
//! marker per record, the entries, the changed parts, and the HEAD guarded by
//! its version. A record whose stream sequence number is not above the
//! HEAD's is a redelivery and is skipped; a record whose marker already
//! exists cancels the chunk, which is then retried from the ledger.
//!
//! So the entries are numbered without gap or duplicate, and their snapshots
//! are the exact fold of every change before them, however far the processor
//! lags behind the writers.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use crate::batch::{log_bad_input, BatchFailure, StreamProcessor};
use crate::change::{Change, SequenceNumber};
use crate::error::{InputError, ProcessError};
use crate::item::{item_size, n, s, Item, ItemExt};
use crate::ledger;
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::{Store, TxError, Update, Written};

/// The running state of one aggregate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FoldState {
    /// Parts of the aggregate by name (e.g. `APP`, `STAGE#<id>`): the
    /// attributes the rules keep of each.
    pub parts: BTreeMap<String, Item>,
    /// Number of entries written so far.
    pub seq: u64,
    /// The aggregate's root was deleted (and its items cascaded).
    pub deleted: bool,
}

/// Items to delete when an aggregate's root goes away.
#[derive(Debug, Clone, PartialEq)]
pub struct Cascade {
    pub pk_name: &'static str,
    pub pk: String,
    pub sk_name: &'static str,
    pub sk_prefixes: Vec<String>,
}

/// What folding one change produced.
#[derive(Debug, Default, PartialEq)]
pub struct FoldOutput {
    /// Items to put into the source table (e.g. history entries).
    pub entries: Vec<Item>,
    /// Bad input that did not stop the fold (e.g. a snapshot omitted because
    /// it would exceed 400 KB): logged and counted.
    pub notices: Vec<(&'static str, InputError)>,
}

/// What a model folds. Pure functions: no I/O.
pub trait FoldRules: Send + Sync {
    /// The aggregate this change belongs to, or `None` if it is not this
    /// fold's business (e.g. the processor's own entries).
    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError>;

    /// Items to delete before folding this change (root deleted).
    fn cascade(&self, aggregate: &str, change: &Change) -> Option<Cascade>;

    /// Folds `change` into `state`; returns the entries it implies.
    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError>;

    /// Key of the aggregate's root item and the processor-owned attribute on
    /// it that mirrors `state.seq` (e.g. `historySequence`).
    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)>;

    /// The table's key attribute names (partition key first).
    fn key_names(&self) -> &'static [&'static str];

    /// Adoption of an aggregate that has no state yet (backfill): its state
    /// and entries from the items of its partition as they are now, or
    /// `None` if there is nothing to import (no root, or entries exist).
    fn import(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: DateTime<Utc>,
    ) -> Option<(FoldState, Vec<Item>)>;

    /// The partition (key name, value) holding an aggregate's items.
    fn partition(&self, aggregate: &str) -> (&'static str, String);
}

/// What importing an aggregate did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// State and entries written.
    Imported,
    /// The aggregate already has state or entries: nothing written.
    AlreadyKnown,
    /// Nothing to import (e.g. no root item).
    Nothing,
}

#[derive(Debug, Clone)]
pub struct FoldConfig {
    pub table: String,
    pub ledger_table: String,
}

/// An aggregate's state as loaded from / last written to the ledger.
#[derive(Debug, Clone)]
struct Loaded {
    state: FoldState,
    persisted_parts: BTreeMap<String, Item>,
    /// HEAD version in the ledger (0 = no HEAD yet).
    version: u64,
    last: Option<SequenceNumber>,
    /// Pending (not yet committed) last sequence number.
    pending_last: Option<SequenceNumber>,
    dirty: bool,
    /// The mirror value seen on the root's latest image in this batch.
    mirror_seen: Option<Option<i64>>,
    touched: Option<usize>,
}

/// A transaction chunk being filled.
#[derive(Default)]
struct Chunk {
    first_index: Option<usize>,
    markers: Vec<TransactWriteItem>,
    entries: Vec<TransactWriteItem>,
    bytes: usize,
}

const MAX_ACTIONS: usize = 100;
const MAX_TX_BYTES: usize = 3_500_000;

pub struct FoldProcessor<R> {
    name: &'static str,
    rules: R,
    store: Store,
    config: FoldConfig,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

impl<R: FoldRules> FoldProcessor<R> {
    pub fn new(name: &'static str, rules: R, store: Store, config: FoldConfig) -> Self {
        Self {
            name,
            rules,
            store,
            config,
            metrics: Metrics::default(),
            now: Utc::now,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn rules(&self) -> &R {
        &self.rules
    }

    /// Backfill: imports an aggregate that has no state yet, through one
    /// transaction guarded by the HEAD's absence (so running it twice, or
    /// while the stream processor runs, writes nothing the second time).
    pub async fn import(&self, aggregate: &str, dry_run: bool) -> Result<Imported, ProcessError> {
        if self.load(aggregate).await?.version > 0 {
            return Ok(Imported::AlreadyKnown);
        }
        let (pk_name, pk) = self.rules.partition(aggregate);
        let items = self
            .store
            .query_partition(&self.config.table, pk_name, &pk, None)
            .await?;
        let Some((state, entries)) = self.rules.import(aggregate, &items, (self.now)()) else {
            return Ok(Imported::Nothing);
        };
        if dry_run {
            return Ok(Imported::Imported);
        }
        let state_pk = ledger::state_pk(self.name, aggregate);
        let ledger_table = &self.config.ledger_table;
        let mut head = ledger::key(&state_pk, "HEAD");
        head.insert("seq".into(), n(state.seq));
        head.insert("version".into(), n(1));
        head.insert("deleted".into(), AttributeValue::Bool(false));
        let put = |table: &str, item: Item, cond: Option<&str>| {
            let p = Put::builder()
                .table_name(table)
                .set_item(Some(item))
                .set_condition_expression(cond.map(str::to_string));
            TransactWriteItem::builder()
                .put(p.build().expect("set"))
                .build()
        };
        let mut actions = vec![put(ledger_table, head, Some("attribute_not_exists(pk)"))];
        for (name, data) in &state.parts {
            let mut item = ledger::key(&state_pk, format!("PART#{name}"));
            item.insert("data".into(), AttributeValue::M(data.clone()));
            actions.push(put(ledger_table, item, None));
        }
        let k0 = self.rules.key_names()[0];
        for e in entries {
            actions.push(put(
                &self.config.table,
                e,
                Some(&format!("attribute_not_exists({k0})")),
            ));
        }
        match self.store.transact(actions).await {
            Ok(()) => {}
            Err(TxError::ConditionsFailed { .. }) => return Ok(Imported::AlreadyKnown),
            Err(TxError::Store(e)) => return Err(e.into()),
        }
        if let Some((key, attr)) = self.rules.sequence_mirror(aggregate) {
            let update = Update {
                key,
                update_expression: "SET #a = :s".into(),
                condition_expression: Some(
                    "attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a < :s)".into(),
                ),
                names: vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())],
                values: vec![(":s".into(), n(state.seq))],
            };
            self.store.update(&self.config.table, update).await?;
        }
        Ok(Imported::Imported)
    }

    async fn load(&self, aggregate: &str) -> Result<Loaded, ProcessError> {
        let pk = ledger::state_pk(self.name, aggregate);
        let items = self
            .store
            .query_partition(&self.config.ledger_table, ledger::PK, &pk, None)
            .await?;
        let mut loaded = Loaded {
            state: FoldState::default(),
            persisted_parts: BTreeMap::new(),
            version: 0,
            last: None,
            pending_last: None,
            dirty: false,
            mirror_seen: None,
            touched: None,
        };
        for item in items {
            let sk = ledger::as_s(item.get(ledger::SK))
                .unwrap_or_default()
                .to_string();
            if sk == "HEAD" {
                let bad = |e| {
                    ProcessError::Permanent(format!("ledger HEAD of {aggregate} is corrupt: {e}"))
                };
                loaded.state.seq = item.i64("seq").map_err(bad)? as u64;
                loaded.version = item.i64("version").map_err(bad)? as u64;
                loaded.state.deleted = item.opt_bool("deleted").map_err(bad)?.unwrap_or(false);
                loaded.last = item
                    .opt_s("last")
                    .map_err(bad)?
                    .and_then(SequenceNumber::parse);
            } else if let Some(part) = sk.strip_prefix("PART#") {
                if let Some(AttributeValue::M(data)) = item.get("data") {
                    loaded.state.parts.insert(part.to_string(), data.clone());
                }
            }
        }
        loaded.persisted_parts = loaded.state.parts.clone();
        Ok(loaded)
    }

    /// Commits a chunk: markers, entries, and every dirty aggregate's HEAD
    /// (guarded by its version) and changed parts.
    async fn flush(
        &self,
        chunk: &mut Chunk,
        states: &mut HashMap<String, Loaded>,
    ) -> Result<(), BatchFailure> {
        let Some(first) = chunk.first_index else {
            return Ok(());
        };
        let mut actions = std::mem::take(&mut chunk.markers);
        actions.append(&mut chunk.entries);
        let ledger_table = &self.config.ledger_table;
        let mut committed = Vec::new();
        for (agg, l) in states.iter().filter(|(_, l)| l.dirty) {
            let pk = ledger::state_pk(self.name, agg);
            let mut head = ledger::key(&pk, "HEAD");
            head.insert("seq".into(), n(l.state.seq));
            head.insert("version".into(), n(l.version + 1));
            head.insert("deleted".into(), AttributeValue::Bool(l.state.deleted));
            if let Some(last) = &l.pending_last {
                head.insert("last".into(), s(last.padded()));
            }
            let put = Put::builder().table_name(ledger_table).set_item(Some(head));
            let put = if l.version == 0 {
                put.condition_expression("attribute_not_exists(pk)")
            } else {
                put.condition_expression("version = :v")
                    .expression_attribute_values(":v", n(l.version))
            };
            actions.push(
                TransactWriteItem::builder()
                    .put(put.build().expect("set"))
                    .build(),
            );
            for (name, data) in &l.state.parts {
                if l.persisted_parts.get(name) != Some(data) {
                    let mut item = ledger::key(&pk, format!("PART#{name}"));
                    item.insert("data".into(), AttributeValue::M(data.clone()));
                    let put = Put::builder().table_name(ledger_table).set_item(Some(item));
                    actions.push(
                        TransactWriteItem::builder()
                            .put(put.build().expect("set"))
                            .build(),
                    );
                }
            }
            for name in l
                .persisted_parts
                .keys()
                .filter(|k| !l.state.parts.contains_key(*k))
            {
                let del = Delete::builder()
                    .table_name(ledger_table)
                    .set_key(Some(ledger::key(&pk, format!("PART#{name}"))));
                actions.push(
                    TransactWriteItem::builder()
                        .delete(del.build().expect("set"))
                        .build(),
                );
            }
            committed.push(agg.clone());
        }
        chunk.first_index = None;
        chunk.bytes = 0;
        let result = self.store.transact(actions).await;
        match result {
            Ok(()) => {
                for agg in committed {
                    if let Some(l) = states.get_mut(&agg) {
                        l.version += 1;
                        l.persisted_parts = l.state.parts.clone();
                        l.last = l.pending_last.clone().or(l.last.take());
                        l.dirty = false;
                    }
                }
                Ok(())
            }
            Err(e) => {
                // Nothing of the chunk took effect; forget the in-memory fold
                // so a retry starts again from the ledger.
                for agg in committed {
                    states.remove(&agg);
                }
                let error = match e {
                    TxError::ConditionsFailed { .. } => ProcessError::Conflict(
                        "a marker or state version changed under this processor; retrying from the ledger".into(),
                    ),
                    TxError::Store(e) => e.into(),
                };
                Err(BatchFailure {
                    index: first,
                    error,
                })
            }
        }
    }

    async fn cascade(&self, c: &Cascade) -> Result<usize, ProcessError> {
        let items = self
            .store
            .query_partition(&self.config.table, c.pk_name, &c.pk, None)
            .await?;
        let keys: Vec<Item> = items
            .into_iter()
            .filter(|i| {
                ledger::as_s(i.get(c.sk_name))
                    .is_some_and(|sk| c.sk_prefixes.iter().any(|p| sk.starts_with(p.as_str())))
            })
            .map(|i| crate::item::key_of(&i, &[c.pk_name, c.sk_name]))
            .collect();
        let count = keys.len();
        self.store.delete_keys(&self.config.table, keys).await?;
        Ok(count)
    }

    /// Writes the sequence mirror of every aggregate the batch touched, where
    /// the root's latest image does not already show it.
    async fn write_mirrors(
        &self,
        states: &HashMap<String, Loaded>,
        limit: usize,
    ) -> Result<(), BatchFailure> {
        let mut first: Option<BatchFailure> = None;
        for (agg, l) in states {
            let Some(touched) = l.touched.filter(|t| *t < limit) else {
                continue;
            };
            if l.state.deleted || l.state.seq == 0 || l.dirty {
                continue;
            }
            let Some((key, attr)) = self.rules.sequence_mirror(agg) else {
                continue;
            };
            let want = l.state.seq as i64;
            if l.mirror_seen == Some(Some(want)) {
                continue;
            }
            let k0 = self.rules.key_names()[0];
            let update = Update {
                key,
                update_expression: "SET #a = :s".into(),
                condition_expression: Some(
                    "attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a < :s)".into(),
                ),
                names: vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())],
                values: vec![(":s".into(), n(want))],
            };
            match self.store.update(&self.config.table, update).await {
                Ok(Written::Applied | Written::ConditionFailed) => {}
                Err(e) => {
                    if first.as_ref().is_none_or(|f| touched < f.index) {
                        first = Some(BatchFailure {
                            index: touched,
                            error: e.into(),
                        });
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    async fn run(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
        states: &mut HashMap<String, Loaded>,
    ) -> Result<(), BatchFailure> {
        let mut chunk = Chunk::default();
        for (index, change) in changes.iter().enumerate() {
            let agg = match self.rules.aggregate(change) {
                Ok(Some(a)) => a,
                Ok(None) => continue,
                Err(e) => {
                    log_bad_input(self.name, &change.event_id, &e, metrics);
                    continue;
                }
            };
            if !states.contains_key(&agg) {
                match self.load(&agg).await {
                    Ok(l) => {
                        states.insert(agg.clone(), l);
                    }
                    Err(error) => {
                        self.flush(&mut chunk, states).await?;
                        return Err(BatchFailure { index, error });
                    }
                }
            }
            let (is_root, root_mirror) = match self.rules.sequence_mirror(&agg) {
                Some((key, attr)) if key.iter().all(|(k, v)| change.keys.get(k) == Some(v)) => (
                    true,
                    change
                        .new
                        .as_ref()
                        .map(|img| img.opt_i64(attr).ok().flatten()),
                ),
                _ => (false, None),
            };
            let l = states.get_mut(&agg).expect("loaded above");
            l.touched = Some(index);
            if is_root {
                l.mirror_seen = root_mirror;
            }
            let current = l.pending_last.as_ref().or(l.last.as_ref());
            if current.is_some_and(|last| change.sequence_number <= *last) {
                metrics.incr(names::DUPLICATE);
                tracing::info!(processor = self.name, event_id = %change.event_id, key = %change.key_display(), "already folded; skipping");
                continue;
            }
            if let Some(c) = self.rules.cascade(&agg, change) {
                self.flush(&mut chunk, states).await?;
                match self.cascade(&c).await {
                    Ok(count) => {
                        tracing::info!(processor = self.name, aggregate = %agg, deleted = count, "cascade delete")
                    }
                    Err(error) => return Err(BatchFailure { index, error }),
                }
            }
            let l = states.get_mut(&agg).expect("loaded above");
            let mut next = l.state.clone();
            let output = match self.rules.fold(&agg, &mut next, change) {
                Ok(o) => o,
                Err(e) => {
                    log_bad_input(self.name, &change.event_id, &e, metrics);
                    continue;
                }
            };
            if output.entries.is_empty() && next == states[&agg].state {
                // Nothing user-visible changed (e.g. only processor-owned
                // attributes): no entry, no state write, no marker.
                continue;
            }
            for (metric, notice) in &output.notices {
                metrics.incr(metric);
                tracing::error!(processor = self.name, event_id = %change.event_id, kind = notice.kind(), reason = %notice, "entry written without part of its content");
            }
            let entry_bytes: usize = output.entries.iter().map(item_size).sum();
            let parts_bytes: usize = next.parts.values().map(item_size).sum();
            // Each folded change costs its marker, the HEAD and a part at most
            // (one HEAD per aggregate, so this over-estimates).
            let actions = chunk.markers.len() * 3 + chunk.entries.len() + output.entries.len() + 3;
            if chunk.first_index.is_some()
                && (actions > MAX_ACTIONS || chunk.bytes + entry_bytes + parts_bytes > MAX_TX_BYTES)
            {
                self.flush(&mut chunk, states).await?;
            }
            let now = (self.now)();
            chunk.first_index.get_or_insert(index);
            chunk.markers.push(ledger::marker_put(
                &self.config.ledger_table,
                self.name,
                &change.event_id,
                now,
            ));
            for entry in output.entries {
                chunk.entries.push(
                    TransactWriteItem::builder()
                        .put(
                            Put::builder()
                                .table_name(&self.config.table)
                                .set_item(Some(entry))
                                .build()
                                .expect("set"),
                        )
                        .build(),
                );
            }
            chunk.bytes += entry_bytes + parts_bytes;
            let l = states.get_mut(&agg).expect("loaded above");
            l.state = next;
            l.pending_last = Some(change.sequence_number.clone());
            l.dirty = true;
        }
        self.flush(&mut chunk, states).await
    }
}

impl<R: FoldRules> StreamProcessor for FoldProcessor<R> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        let mut states = HashMap::new();
        let result = self.run(changes, metrics, &mut states).await;
        let limit = result.as_ref().err().map_or(usize::MAX, |f| f.index);
        let mirrors = self.write_mirrors(&states, limit).await;
        match (result, mirrors) {
            (Err(a), Err(b)) => Err(if b.index < a.index { b } else { a }),
            (Err(a), Ok(())) | (Ok(()), Err(a)) => Err(a),
            (Ok(()), Ok(())) => Ok(()),
        }
    }
}

/// Rules behind a shared pointer (the model registry holds `Arc<dyn FoldRules>`).
impl<T: FoldRules + ?Sized> FoldRules for std::sync::Arc<T> {
    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError> {
        (**self).aggregate(change)
    }
    fn cascade(&self, aggregate: &str, change: &Change) -> Option<Cascade> {
        (**self).cascade(aggregate, change)
    }
    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError> {
        (**self).fold(aggregate, state, change)
    }
    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)> {
        (**self).sequence_mirror(aggregate)
    }
    fn key_names(&self) -> &'static [&'static str] {
        (**self).key_names()
    }
    fn import(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: DateTime<Utc>,
    ) -> Option<(FoldState, Vec<Item>)> {
        (**self).import(aggregate, partition, at)
    }
    fn partition(&self, aggregate: &str) -> (&'static str, String) {
        (**self).partition(aggregate)
    }
}
