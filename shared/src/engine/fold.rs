//! The fold processor: aggregates folded, in stream order, into a durable
//! running state, emitting entries (history) as they go.
//!
//! State lives in the ledger table, one item per part of the aggregate (the
//! root item, each child) plus a HEAD (sequence, version, last applied
//! stream sequence number, epoch, pending adoption). Parts are keyed by the
//! HEAD's epoch: a new epoch (an adoption, a root deleted) makes the old
//! parts garbage at once, without deleting them in the HEAD's transaction.
//!
//! Each transaction writes, atomically: the entries, the changed parts, and
//! the HEAD guarded by its version (or by its absence). A record whose
//! stream sequence number is not above the HEAD's `last` is a redelivery
//! and is skipped; so no per-record marker is written: the HEAD's version
//! guard already makes a concurrent or repeated commit fail.
//!
//! A batch is folded per aggregate (records of one aggregate in stream
//! order), and the commits of several aggregates share a transaction of up
//! to 100 actions: about one HEAD write per aggregate per batch. On a failure
//! the first record not committed is reported; records after it that were
//! committed are skipped by the HEAD on redelivery.
//!
//! **Adoption.** An aggregate with no HEAD whose first change is not the
//! creation of its root is adopted: the partition is read (strongly
//! consistent Query) and its state and one adoption entry are written,
//! guarded by the HEAD's absence (the same guard as backfill's import, so
//! exactly one of them starts the history). The adoption entry's own stream
//! record is the position the adoption stands for: every record of the
//! aggregate before it is absorbed into the state without an entry, and
//! when the fold reaches it, the entry's snapshot is made the state at that
//! position (rewritten, guarded by the entry's id, if a change raced the
//! read). Records after it fold as usual.
//!
//! **First seen creating or deleting its root.** No adoption: the state is
//! the partition as read, rolled back by the batch's records from the
//! change on (the first record of an item holds its value there). On a
//! creation, items the read saw that no record of the batch placed are kept
//! as candidate parts ([`CANDIDATE`]), outside the rules' view, until their
//! own record settles them or a record after the read (the root showing the
//! sequence mirror) confirms them; a confirmed part joins the state and the
//! entries since the creation.
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

/// One item the cascade deletes.
#[derive(Debug, Clone, PartialEq)]
pub struct CascadeDelete {
    pub key: Item,
    /// Delete only while the item still holds these values (`NULL` = absent
    /// or null): an item of a later incarnation under the same key differs
    /// and is kept. `None`: unconditional.
    pub unchanged: Option<Item>,
}

/// Items to delete when an aggregate's root goes away: only what belonged
/// to the incarnation that was removed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cascade {
    pub deletes: Vec<CascadeDelete>,
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

/// An adoption entry seen on the stream (the INSERT of an entry this fold
/// wrote when it adopted the aggregate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptionRecord {
    pub aggregate: String,
    pub sequence: u64,
    pub id: String,
}

/// How an aggregate without state is adopted from its items as they are.
#[derive(Debug, Clone, PartialEq)]
pub enum Adoption {
    /// The root exists: the history starts (or, after entries written by
    /// someone else, continues) with this adoption entry, whose `id` marks
    /// its stream record.
    Entry {
        state: FoldState,
        entry: Item,
        id: String,
    },
    /// No root: the state of the items there, and no entry.
    Rootless(FoldState),
}

/// What an adoption entry must become at its own stream position.
#[derive(Debug, Clone, PartialEq)]
pub enum Restated {
    /// It already shows the state.
    Same,
    /// A change raced the adoption's read: the entry showing the state.
    Rewrite(Item),
    /// The root was deleted before the entry's position: nothing to adopt.
    RootGone,
}

/// What a model folds. Pure functions: no I/O.
///
/// Delivery is at-least-once and in order per aggregate; the processor makes
/// effects exactly-once (HEAD position and version), the rules only compute.
pub trait FoldRules: Send + Sync {
    /// The aggregate this change belongs to, or `None` if it is not this
    /// fold's business (e.g. the processor's own entries).
    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError>;

    /// `Some` when `change` is the INSERT of an adoption entry.
    fn adoption_record(&self, change: &Change) -> Option<AdoptionRecord>;

    /// True when `change` creates the aggregate's root: an aggregate without
    /// state starts from nothing there instead of being adopted.
    fn starts_aggregate(&self, change: &Change) -> bool;

    /// True when `change` deletes the aggregate's root.
    fn removes_root(&self, change: &Change) -> bool;

    /// What the cascade deletes when the root of the incarnation folded into
    /// `state` goes away.
    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade;

    /// Folds `change` into `state`; returns the entries it implies.
    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError>;

    /// Applies `change` to `state` without entries (a change before the
    /// adoption's position: already part of the adoption entry).
    fn absorb(&self, state: &mut FoldState, change: &Change) -> Result<(), InputError>;

    /// Key of the aggregate's root item and the processor-owned attribute on
    /// it that mirrors `state.seq` (e.g. `historySequence`).
    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)>;

    /// The table's key attribute names (partition key first).
    fn key_names(&self) -> &'static [&'static str];

    /// Adoption of an aggregate from the items of its partition as they
    /// are now; `token` is unique per attempt (entry id, epoch).
    fn adopt(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: DateTime<Utc>,
        token: &str,
    ) -> Adoption;

    /// The state of an aggregate's items as they are (its root and children
    /// that are valid; `seq` the highest entry there), read when a change
    /// of an aggregate without state creates or deletes its root.
    fn table_state(&self, partition: &[Item]) -> FoldState;

    /// Key of the aggregate's entry number `seq`.
    fn entry_key(&self, aggregate: &str, seq: u64) -> Item;

    /// Entry `entry` (as written) with part `part` of its snapshot set to
    /// `value` (absent: `None`); `None` when it already shows that or has no
    /// snapshot to correct.
    fn correct_entry(&self, entry: &Item, part: &str, value: Option<&Item>) -> Option<Item>;

    /// The adoption entry `entry` (as written) at its own stream position,
    /// where the state is `state`.
    fn restate(&self, entry: &Item, state: &FoldState) -> Restated;

    /// The partition (key name, value) holding an aggregate's items.
    fn partition(&self, aggregate: &str) -> (&'static str, String);

    /// What `verify` finds of the fold's entries in the table's items (a
    /// model whose `checks` verify its history says nothing here).
    fn verify(&self, _items: &[Item]) -> Vec<crate::models::Finding> {
        Vec::new()
    }
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

/// Sort key of a part in the ledger: `P#<epoch>#<name>` (`PART#<name>` for
/// the epoch-less layout of earlier versions).
pub fn part_sk(epoch: &str, name: &str) -> String {
    if epoch.is_empty() {
        format!("PART#{name}")
    } else {
        format!("P#{epoch}#{name}")
    }
}

/// The part name of sort key `sk` if it belongs to `epoch`.
fn part_name<'a>(sk: &'a str, epoch: &str) -> Option<&'a str> {
    if epoch.is_empty() {
        sk.strip_prefix("PART#")
    } else {
        sk.strip_prefix("P#")?
            .strip_prefix(epoch)?
            .strip_prefix('#')
    }
}

/// A fresh epoch / adoption token.
fn token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// An aggregate's state as loaded from / last written to the ledger, plus
/// what is folded but not committed yet.
#[derive(Debug, Clone, Default)]
struct Loaded {
    state: FoldState,
    epoch: String,
    /// Waiting for the adoption entry's record: (sequence, entry id).
    adopt: Option<(u64, String)>,
    /// Parts as committed under `epoch`.
    persisted_parts: BTreeMap<String, Item>,
    /// Sort keys of part items of other epochs: deleted after a commit.
    garbage: Vec<String>,
    /// HEAD version in the ledger (0 = no HEAD yet).
    version: u64,
    last: Option<SequenceNumber>,
    pending_last: Option<SequenceNumber>,
    /// Entries folded, not committed.
    entries: Vec<Item>,
    /// The adoption entry rewritten at its position, not committed.
    rewrite: Option<Item>,
    /// Candidates pending (parts named `?<name>`, see [`CANDIDATE`]): the
    /// first entry that must show those that prove to predate the creation.
    unconfirmed: Option<u64>,

    first_pending: Option<usize>,
    dirty: bool,
    /// The mirror value seen on the root's latest image in this batch
    /// (from records not folded before: a replayed record's image is older
    /// than the item).
    mirror_seen: Option<Option<i64>>,
    touched: Option<usize>,
    /// Whether a record not folded before was met in this batch (only
    /// replayed ones: the mirror is read before it is written, so a replay
    /// sends no write).
    advanced: bool,
    /// The entry count when the batch first met the aggregate: unless the
    /// batch adds entries, the mirror was written when they were folded (a
    /// record not folded before, e.g. another writer's change that raced
    /// the mirror's write, may show an older mirror than the item's).
    base_seq: Option<u64>,
}

impl Loaded {
    fn changed_parts(&self, parts: &BTreeMap<String, Item>) -> (usize, usize) {
        let puts = parts
            .iter()
            .filter(|(k, v)| self.persisted_parts.get(*k) != Some(v))
            .map(|(_, v)| item_size(v))
            .fold((0, 0), |(c, b), size| (c + 1, b + size));
        let deletes = self
            .persisted_parts
            .keys()
            .filter(|k| !parts.contains_key(*k))
            .count();
        (puts.0 + deletes, puts.1)
    }

    /// Actions and bytes of this aggregate's commit if its state were `parts`
    /// with `extra` more entries of `extra_bytes`.
    fn cost(
        &self,
        parts: &BTreeMap<String, Item>,
        extra: usize,
        extra_bytes: usize,
    ) -> (usize, usize) {
        let (part_actions, part_bytes) = self.changed_parts(parts);
        let entry_bytes: usize = self
            .entries
            .iter()
            .chain(&self.rewrite)
            .map(item_size)
            .sum();
        (
            1 + part_actions + self.entries.len() + usize::from(self.rewrite.is_some()) + extra,
            part_bytes + entry_bytes + extra_bytes,
        )
    }

    fn current_last(&self) -> Option<&SequenceNumber> {
        self.pending_last.as_ref().or(self.last.as_ref())
    }
}

/// Aggregates with uncommitted changes, committed together.
#[derive(Default)]
struct Tx {
    aggregates: Vec<String>,
}

const MAX_ACTIONS: usize = 100;

/// Prefix of a candidate part's name: an item read from the table when an
/// aggregate's creation was first seen, not known yet to predate it. Rules
/// never read such parts (their names are not the rules' names).
pub const CANDIDATE: &str = "?";
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

    /// Backfill: adopts an aggregate that has no state yet, through the same
    /// guard as the live fold (the HEAD's absence), so running it twice, or
    /// while the stream processor runs, starts the history once.
    pub async fn import(&self, aggregate: &str, dry_run: bool) -> Result<Imported, ProcessError> {
        if self.load(aggregate).await?.version > 0 {
            return Ok(Imported::AlreadyKnown);
        }
        let (pk_name, pk) = self.rules.partition(aggregate);
        let items = self
            .store
            .query_partition(&self.config.table, pk_name, &pk, None)
            .await?;
        let tok = token();
        let adoption = self.rules.adopt(aggregate, &items, (self.now)(), &tok);
        let Adoption::Entry { state, .. } = &adoption else {
            return Ok(Imported::Nothing);
        };
        if dry_run {
            return Ok(Imported::Imported);
        }
        let seq = state.seq;
        if self
            .write_adoption(aggregate, adoption, &tok)
            .await?
            .is_none()
        {
            return Ok(Imported::AlreadyKnown);
        }
        if let Some((key, attr)) = self.rules.sequence_mirror(aggregate) {
            self.store
                .update(&self.config.table, self.mirror_update(key, attr, seq))
                .await?;
        }
        Ok(Imported::Imported)
    }

    fn mirror_update(&self, key: Item, attr: &'static str, seq: u64) -> Update {
        let k0 = self.rules.key_names()[0];
        Update {
            key,
            update_expression: "SET #a = :s".into(),
            condition_expression: Some(
                "attribute_exists(#k0) AND (attribute_not_exists(#a) OR #a < :s)".into(),
            ),
            names: vec![("#a".into(), attr.into()), ("#k0".into(), k0.into())],
            values: vec![(":s".into(), n(seq))],
        }
    }

    /// Writes an adoption: its parts under a new epoch, then, in one
    /// transaction guarded by the HEAD's absence, the HEAD and the adoption
    /// entry. `None` when another adopter (or the live fold) won.
    async fn write_adoption(
        &self,
        aggregate: &str,
        adoption: Adoption,
        epoch: &str,
    ) -> Result<Option<Loaded>, ProcessError> {
        let Adoption::Entry { state, entry, id } = adoption else {
            return Ok(None);
        };
        self.put_parts(aggregate, epoch, &state.parts).await?;
        let mut loaded = Loaded {
            adopt: Some((state.seq, id)),
            state,
            epoch: epoch.to_string(),
            ..Loaded::default()
        };
        let k0 = self.rules.key_names()[0];
        let actions = vec![
            self.head_put(aggregate, &loaded),
            put_action(
                &self.config.table,
                entry,
                Some((
                    "attribute_not_exists(#k0)".to_string(),
                    vec![("#k0", k0)],
                    vec![],
                )),
            ),
        ];
        match self.store.transact(actions).await {
            Ok(()) => {
                loaded.version = 1;
                loaded.persisted_parts = loaded.state.parts.clone();
                Ok(Some(loaded))
            }
            Err(TxError::ConditionsFailed { .. }) => Ok(None),
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }

    /// Puts parts outside any transaction: they count only once a HEAD
    /// naming their epoch commits.
    async fn put_parts(
        &self,
        aggregate: &str,
        epoch: &str,
        parts: &BTreeMap<String, Item>,
    ) -> Result<(), ProcessError> {
        let pk = ledger::state_pk(self.name, aggregate);
        let items = parts
            .iter()
            .map(|(name, data)| {
                let mut item = ledger::key(&pk, part_sk(epoch, name));
                item.insert("data".into(), AttributeValue::M(data.clone()));
                item
            })
            .collect();
        Ok(self
            .store
            .put_items(&self.config.ledger_table, items)
            .await?)
    }

    async fn load(&self, aggregate: &str) -> Result<Loaded, ProcessError> {
        let pk = ledger::state_pk(self.name, aggregate);
        let items = self
            .store
            .query_partition(&self.config.ledger_table, ledger::PK, &pk, None)
            .await?;
        let mut loaded = Loaded::default();
        let mut parts = Vec::new();
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
                loaded.epoch = item
                    .opt_s("epoch")
                    .map_err(bad)?
                    .unwrap_or_default()
                    .to_string();
                let adopt_seq = item.opt_i64("adopt").map_err(bad)?;
                let adopt_id = item.opt_s("adoptId").map_err(bad)?;
                if let (Some(seq), Some(id)) = (adopt_seq, adopt_id) {
                    loaded.adopt = Some((seq as u64, id.to_string()));
                }
                loaded.unconfirmed = item.opt_i64("ucFrom").map_err(bad)?.map(|f| f as u64);
            } else if let Some(AttributeValue::M(data)) = item.get("data") {
                parts.push((sk, data.clone()));
            }
        }
        for (sk, data) in parts {
            match part_name(&sk, &loaded.epoch) {
                Some(name) if loaded.version > 0 && !loaded.state.deleted => {
                    loaded.state.parts.insert(name.to_string(), data);
                }
                _ => loaded.garbage.push(sk),
            }
        }
        if loaded.version == 0 {
            loaded.epoch = token();
        }
        loaded.persisted_parts = loaded.state.parts.clone();
        Ok(loaded)
    }

    fn head_put(&self, aggregate: &str, l: &Loaded) -> TransactWriteItem {
        let pk = ledger::state_pk(self.name, aggregate);
        let mut head = ledger::key(&pk, "HEAD");
        head.insert("seq".into(), n(l.state.seq));
        head.insert("version".into(), n(l.version + 1));
        head.insert("deleted".into(), AttributeValue::Bool(l.state.deleted));
        if let Some(last) = l.current_last() {
            head.insert("last".into(), s(last.padded()));
        }
        if !l.epoch.is_empty() {
            head.insert("epoch".into(), s(&l.epoch));
        }
        if let Some((seq, id)) = &l.adopt {
            head.insert("adopt".into(), n(seq));
            head.insert("adoptId".into(), s(id));
        }
        if let Some(from) = l.unconfirmed {
            head.insert("ucFrom".into(), n(from));
        }
        let cond = if l.version == 0 {
            ("attribute_not_exists(pk)".to_string(), vec![], vec![])
        } else {
            (
                "version = :v".to_string(),
                vec![],
                vec![(":v", n(l.version))],
            )
        };
        put_action(&self.config.ledger_table, head, Some(cond))
    }

    /// The actions of one aggregate's commit.
    fn commit_actions(&self, aggregate: &str, l: &Loaded) -> Vec<TransactWriteItem> {
        let mut actions: Vec<TransactWriteItem> = l
            .entries
            .iter()
            .map(|e| put_action(&self.config.table, e.clone(), None))
            .collect();
        if let Some(entry) = &l.rewrite {
            let id = entry.get("id").cloned().unwrap_or_else(|| s(""));
            actions.push(put_action(
                &self.config.table,
                entry.clone(),
                Some(("#id = :id".into(), vec![("#id", "id")], vec![(":id", id)])),
            ));
        }
        actions.push(self.head_put(aggregate, l));
        let pk = ledger::state_pk(self.name, aggregate);
        for (name, data) in &l.state.parts {
            if l.persisted_parts.get(name) != Some(data) {
                let mut item = ledger::key(&pk, part_sk(&l.epoch, name));
                item.insert("data".into(), AttributeValue::M(data.clone()));
                actions.push(put_action(&self.config.ledger_table, item, None));
            }
        }
        for name in l
            .persisted_parts
            .keys()
            .filter(|k| !l.state.parts.contains_key(*k))
        {
            let del = Delete::builder()
                .table_name(&self.config.ledger_table)
                .set_key(Some(ledger::key(&pk, part_sk(&l.epoch, name))));
            actions.push(
                TransactWriteItem::builder()
                    .delete(del.build().expect("set"))
                    .build(),
            );
        }
        actions
    }

    /// Commits every aggregate of `tx`: entries, changed parts and the HEAD
    /// guarded by its version, in one transaction. On failure nothing took
    /// effect; the aggregates are forgotten so a retry reloads them.
    async fn flush(
        &self,
        tx: &mut Tx,
        states: &mut HashMap<String, Loaded>,
    ) -> Result<(), BatchFailure> {
        let aggregates: Vec<String> = std::mem::take(&mut tx.aggregates)
            .into_iter()
            .filter(|a| states.get(a).is_some_and(|l| l.dirty))
            .collect();
        if aggregates.is_empty() {
            return Ok(());
        }
        let mut actions = Vec::new();
        let mut first = usize::MAX;
        for agg in &aggregates {
            let l = &states[agg];
            actions.extend(self.commit_actions(agg, l));
            first = first.min(l.first_pending.unwrap_or(usize::MAX));
        }
        match self.store.transact(actions).await {
            Ok(()) => {
                let mut garbage = Vec::new();
                for agg in &aggregates {
                    let l = states.get_mut(agg).expect("in tx");
                    l.version += 1;
                    l.persisted_parts = l.state.parts.clone();
                    l.last = l.pending_last.take().or(l.last.take());
                    l.entries.clear();
                    l.rewrite = None;
                    l.first_pending = None;
                    l.dirty = false;
                    let pk = ledger::state_pk(self.name, agg);
                    garbage.extend(l.garbage.drain(..).map(|sk| ledger::key(&pk, sk)));
                }
                if !garbage.is_empty() {
                    if let Err(e) = self
                        .store
                        .delete_keys(&self.config.ledger_table, garbage)
                        .await
                    {
                        // Harmless: parts of other epochs are never read as
                        // state, and the next load collects them again.
                        tracing::warn!(processor = self.name, error = %e, "ledger garbage left for later");
                    }
                }
                Ok(())
            }
            Err(e) => {
                for agg in &aggregates {
                    states.remove(agg);
                }
                let error = match e {
                    TxError::ConditionsFailed { .. } => ProcessError::Conflict(
                        "a state version changed under this processor; retrying from the ledger"
                            .into(),
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
        let mut unconditional = Vec::new();
        let mut deleted = 0;
        for d in &c.deletes {
            match &d.unchanged {
                None => unconditional.push(d.key.clone()),
                Some(expected) => {
                    let (cond, names, values) = unchanged_condition(expected);
                    if self
                        .store
                        .delete_if(&self.config.table, d.key.clone(), cond, names, values)
                        .await?
                        == Written::Applied
                    {
                        deleted += 1;
                    }
                }
            }
        }
        deleted += unconditional.len();
        self.store
            .delete_keys(&self.config.table, unconditional)
            .await?;
        Ok(deleted)
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
            if !l.advanced || l.base_seq.is_some_and(|b| l.state.seq <= b) {
                // Only replayed records, or no entry added by this batch:
                // the mirror was most likely written when the entries were
                // folded (unless that write was lost).
                match self.store.get(&self.config.table, key.clone()).await {
                    Ok(root) => {
                        let lags = root.is_some_and(|r| {
                            r.opt_i64(attr).ok().flatten().is_none_or(|h| h < want)
                        });
                        if !lags {
                            continue;
                        }
                    }
                    Err(e) => {
                        if first.as_ref().is_none_or(|f| touched < f.index) {
                            first = Some(BatchFailure {
                                index: touched,
                                error: e.into(),
                            });
                        }
                        continue;
                    }
                }
            }
            match self
                .store
                .update(
                    &self.config.table,
                    self.mirror_update(key, attr, l.state.seq),
                )
                .await
            {
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

    /// The state of `agg`'s items just before `rest[0]`: the partition as
    /// it is (strongly consistent Query), rolled back by the batch's records
    /// from `rest[0]` on. Read only for an aggregate without state.
    async fn state_before(
        &self,
        agg: &str,
        rest: &[&Change],
    ) -> Result<(FoldState, std::collections::BTreeSet<String>), ProcessError> {
        let (pk_name, pk) = self.rules.partition(agg);
        let items = self
            .store
            .query_partition(&self.config.table, pk_name, &pk, None)
            .await?;
        let mut state = self.rules.table_state(&items);
        let touched = self.roll_back(&mut state, rest);
        Ok((state, touched))
    }

    /// Rolls `state` (items as read, maybe after some of `rest`) back to the
    /// position of `rest[0]`: the first of these records of each item holds
    /// the item as it was there (its old image; none for an INSERT).
    /// Returns the names of the parts these records touch.
    fn roll_back(
        &self,
        state: &mut FoldState,
        rest: &[&Change],
    ) -> std::collections::BTreeSet<String> {
        let mut seen = std::collections::HashSet::new();
        let mut touched = std::collections::BTreeSet::new();
        for change in rest {
            if !seen.insert(crate::item::display_key(&change.keys)) {
                continue;
            }
            let gone = Change {
                kind: crate::change::ChangeKind::Remove,
                old: None,
                new: None,
                ..(*change).clone()
            };
            // Errors: not a part of the state (e.g. an entry) or bad input,
            // which the fold reports when it reaches the record itself.
            let held: Vec<String> = state.parts.keys().cloned().collect();
            let _ = self.rules.absorb(state, &gone);
            touched.extend(held.into_iter().filter(|p| !state.parts.contains_key(p)));
            let before: std::collections::BTreeSet<String> = state.parts.keys().cloned().collect();
            if let Some(old) = &change.old {
                let back = Change {
                    kind: crate::change::ChangeKind::Modify,
                    old: None,
                    new: Some(old.clone()),
                    ..(*change).clone()
                };
                let _ = self.rules.absorb(state, &back);
                touched.extend(state.parts.keys().filter(|p| !before.contains(*p)).cloned());
            }
        }
        touched
    }

    /// Settles the candidates of `agg` (items read from the table when its
    /// root's creation was first seen, that no record of that batch
    /// placed: they predate the creation, or a change that raced the read
    /// wrote them). A record of a candidate decides it: its old image is the
    /// item at the creation (none: it did not exist). A `fence` record,
    /// after the read (the root showing the sequence mirror the commit wrote
    /// after it, or the root's deletion), confirms every candidate left as
    /// read. A confirmed one joins the state and every entry since the
    /// creation (`correct`: rewritten guarded by their id).
    #[allow(clippy::too_many_arguments)]
    async fn confirm(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        correct: bool,
        fence: bool,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        let Some(from) = l.unconfirmed else {
            return Ok(());
        };
        let candidates: BTreeMap<String, Item> = l
            .state
            .parts
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(CANDIDATE)?.to_string(), v.clone())))
            .collect();
        let mut settled = Vec::new();
        let mut add = Vec::new();
        if fence {
            for (name, v) in candidates {
                settled.push(name.clone());
                add.push((name, v));
            }
        } else {
            let mut probe = FoldState {
                parts: candidates,
                ..FoldState::default()
            };
            for name in self.roll_back(&mut probe, &[change]) {
                if let Some(v) = probe.parts.get(&name) {
                    add.push((name.clone(), v.clone()));
                }
                settled.push(name);
            }
        }
        if settled.is_empty() {
            return Ok(());
        }
        for name in &settled {
            l.state.parts.remove(&format!("{CANDIDATE}{name}"));
        }
        if !l.state.parts.keys().any(|k| k.starts_with(CANDIDATE)) {
            l.unconfirmed = None;
        }
        for (name, v) in &add {
            l.state.parts.insert(name.clone(), v.clone());
        }
        l.dirty = true;
        l.first_pending.get_or_insert(index);
        if !tx.aggregates.iter().any(|a| a == agg) {
            tx.aggregates.push(agg.to_string());
        }
        if !correct || add.is_empty() {
            return Ok(());
        }
        tracing::info!(processor = self.name, aggregate = %agg, parts = add.len(), "items that predate the creation: its entries show them");
        let fix = |e: &Item| {
            let mut out: Option<Item> = None;
            for (name, v) in &add {
                if let Some(f) = self
                    .rules
                    .correct_entry(out.as_ref().unwrap_or(e), name, Some(v))
                {
                    out = Some(f);
                }
            }
            out
        };
        let keys = self.rules.key_names();
        let same = |a: &Item, b: &Item| keys.iter().all(|k| a.get(*k) == b.get(*k));
        let wanted: Vec<Item> = (from..=l.state.seq)
            .map(|seq| self.rules.entry_key(agg, seq))
            .collect();
        let mut missing = Vec::new();
        for key in &wanted {
            match l.entries.iter_mut().find(|e| same(e, key)) {
                Some(e) => {
                    if let Some(fixed) = fix(e) {
                        *e = fixed;
                    }
                }
                None => missing.push(key),
            }
        }
        let mut committed = Vec::new();
        if !missing.is_empty() {
            // One strongly consistent Query of the partition (the fold's
            // grant has no GetItem on the table).
            let (pk_name, pk) = self.rules.partition(agg);
            let items = self
                .store
                .query_partition(&self.config.table, pk_name, &pk, None)
                .await
                .map_err(|e| BatchFailure {
                    index,
                    error: e.into(),
                })?;
            for item in items.iter().filter(|i| missing.iter().any(|k| same(i, k))) {
                if let Some(fixed) = fix(item) {
                    let id = fixed.get("id").cloned().unwrap_or_else(|| s(""));
                    committed.push(put_action(
                        &self.config.table,
                        fixed,
                        Some(("#id = :id".into(), vec![("#id", "id")], vec![(":id", id)])),
                    ));
                }
            }
        }
        // Committed entries: rewritten now (the same content on a retry,
        // as the HEAD still names the candidates until the commit).
        for chunk in committed.chunks(25) {
            match self.store.transact(chunk.to_vec()).await {
                Ok(()) | Err(TxError::ConditionsFailed { .. }) => {}
                Err(TxError::Store(e)) => {
                    return Err(BatchFailure {
                        index,
                        error: e.into(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Adopts `agg` (no HEAD, first change not its root's creation).
    async fn adopt_now(&self, agg: &str) -> Result<Loaded, ProcessError> {
        let (pk_name, pk) = self.rules.partition(agg);
        let items = self
            .store
            .query_partition(&self.config.table, pk_name, &pk, None)
            .await?;
        let tok = token();
        match self.rules.adopt(agg, &items, (self.now)(), &tok) {
            a @ Adoption::Entry { .. } => match self.write_adoption(agg, a, &tok).await? {
                Some(l) => {
                    tracing::info!(processor = self.name, aggregate = %agg, "adopted");
                    Ok(l)
                }
                // Backfill (or another consumer) adopted it meanwhile.
                None => self.load(agg).await,
            },
            Adoption::Rootless(state) => {
                self.put_parts(agg, &tok, &state.parts).await?;
                Ok(Loaded {
                    persisted_parts: state.parts.clone(),
                    state,
                    epoch: tok,
                    dirty: true,
                    ..Loaded::default()
                })
            }
        }
    }

    /// Folds one change of `agg` into its state (and the transaction).
    /// `rest`: the batch's records of `agg` from this one on, in order.
    #[allow(clippy::too_many_arguments)]
    async fn step(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        rest: &[&Change],
        metrics: &mut BatchMetrics,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let at = |error| BatchFailure { index, error };
        if !states.contains_key(agg) {
            let l = self.load(agg).await.map_err(at)?;
            states.insert(agg.to_string(), l);
        }
        let (is_root, root_mirror) = match self.rules.sequence_mirror(agg) {
            Some((key, attr)) if key.iter().all(|(k, v)| change.keys.get(k) == Some(v)) => (
                true,
                change
                    .new
                    .as_ref()
                    .map(|img| img.opt_i64(attr).ok().flatten()),
            ),
            _ => (false, None),
        };
        let l = states.get_mut(agg).expect("loaded above");
        l.base_seq.get_or_insert(l.state.seq);
        l.touched = Some(index);
        if l.current_last()
            .is_some_and(|last| change.sequence_number <= *last)
        {
            metrics.incr(names::DUPLICATE);
            tracing::info!(processor = self.name, event_id = %change.event_id, key = %change.key_display(), "already folded; skipping");
            return Ok(());
        }
        l.advanced = true;
        if is_root {
            l.mirror_seen = root_mirror;
        }
        if let Some(record) = self.rules.adoption_record(change) {
            return self
                .reach_adoption(agg, index, change, record, states, tx)
                .await;
        }
        let starts = self.rules.starts_aggregate(change);
        let removes = self.rules.removes_root(change);
        if l.version == 0 && !l.dirty && (starts || removes) {
            // First seen creating or deleting its root: the state is the
            // items the table held just before this change (children that
            // predate the stream; the incarnation a deletion removes).
            let (mut state, touched) = self.state_before(agg, rest).await.map_err(at)?;
            if starts {
                // A creation starts the history afresh; parts read that no
                // record of this batch placed are confirmed later.
                state.seq = 0;
                let pending: Vec<String> = state
                    .parts
                    .keys()
                    .filter(|p| !touched.contains(*p))
                    .cloned()
                    .collect();
                for name in &pending {
                    if let Some(v) = state.parts.remove(name) {
                        state.parts.insert(format!("{CANDIDATE}{name}"), v);
                    }
                }
                if !pending.is_empty() {
                    l.unconfirmed = Some(1);
                    // The parts read are written now under the HEAD's epoch
                    // (they count once the HEAD commits), so the commit
                    // stays small however many there are.
                    self.put_parts(agg, &l.epoch, &state.parts)
                        .await
                        .map_err(at)?;
                    l.persisted_parts = state.parts.clone();
                }
            }
            l.state = state;
        } else if l.version == 0 && !l.dirty {
            let mut adopted = self.adopt_now(agg).await.map_err(at)?;
            adopted.touched = l.touched;
            adopted.mirror_seen = l.mirror_seen;
            adopted.advanced = l.advanced;
            adopted.base_seq = l.base_seq;
            if adopted.dirty {
                adopted.first_pending = Some(index);
                tx.aggregates.push(agg.to_string());
            }
            *l = adopted;
        }
        if l.unconfirmed.is_some() {
            let fence = removes
                || (is_root
                    && matches!(root_mirror, Some(Some(h)) if l.unconfirmed.is_some_and(|f| h >= f as i64)));
            self.confirm(agg, index, change, fence && !removes, fence, states, tx)
                .await?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        if l.adopt.is_some() && removes {
            // The adopted incarnation is deleted before the adoption's
            // position (a re-creation may follow): cascade it as it stood
            // here, its adoption entry included; the history starts over.
            let mut before = l.state.clone();
            self.roll_back(&mut before, rest);
            let cascade = self.rules.cascade(agg, &before);
            self.flush(tx, states).await?;
            let count = self.cascade(&cascade).await.map_err(at)?;
            tracing::info!(processor = self.name, aggregate = %agg, deleted = count, "cascade delete before the adoption's position");
            let output = match self.rules.fold(agg, &mut before, change) {
                Ok(o) => o,
                Err(e) => {
                    log_bad_input(self.name, &change.event_id, &e, metrics);
                    return Ok(());
                }
            };
            return self
                .stage_commit(agg, index, change, before, output.entries, true, states, tx)
                .await;
        }
        if l.adopt.is_some() {
            // Before the adoption's position: part of the adoption entry.
            let mut next = l.state.clone();
            if let Err(e) = self.rules.absorb(&mut next, change) {
                log_bad_input(self.name, &change.event_id, &e, metrics);
                return Ok(());
            }
            return self
                .stage_commit(agg, index, change, next, Vec::new(), false, states, tx)
                .await;
        }
        if removes && !l.state.deleted {
            let cascade = self.rules.cascade(agg, &l.state);
            self.flush(tx, states).await?;
            let count = self.cascade(&cascade).await.map_err(at)?;
            tracing::info!(processor = self.name, aggregate = %agg, deleted = count, "cascade delete");
        }
        let l = &states[agg];
        let mut next = l.state.clone();
        let output = match self.rules.fold(agg, &mut next, change) {
            Ok(o) => o,
            Err(e) => {
                log_bad_input(self.name, &change.event_id, &e, metrics);
                return Ok(());
            }
        };
        for (metric, notice) in &output.notices {
            metrics.incr(metric);
            tracing::error!(processor = self.name, event_id = %change.event_id, kind = notice.kind(), reason = %notice, "entry written without part of its content");
        }
        self.stage_commit(agg, index, change, next, output.entries, false, states, tx)
            .await
    }

    /// The adoption entry's own record: the adoption's position.
    async fn reach_adoption(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        record: AdoptionRecord,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let l = &states[agg];
        if l.adopt.as_ref() != Some(&(record.sequence, record.id.clone())) {
            return Ok(());
        }
        let Some(entry) = &change.new else {
            return Ok(());
        };
        let mut next = l.state.clone();
        let mut rewrite = None;
        match self.rules.restate(entry, &l.state) {
            Restated::Same => {}
            Restated::Rewrite(e) => rewrite = Some(e),
            Restated::RootGone => {
                let cascade = self.rules.cascade(agg, &l.state);
                self.flush(tx, states).await?;
                self.cascade(&cascade)
                    .await
                    .map_err(|error| BatchFailure { index, error })?;
                next = FoldState {
                    deleted: true,
                    ..FoldState::default()
                };
            }
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        l.adopt = None;
        l.rewrite = rewrite.or(l.rewrite.take());
        self.stage_commit(agg, index, change, next, Vec::new(), true, states, tx)
            .await
    }

    /// Adds one folded change of `agg` (its next state and entries) to the
    /// transaction, committing what is pending first if it would not fit.
    /// `force`: commit even if the state did not change (the HEAD did).
    #[allow(clippy::too_many_arguments)]
    async fn stage_commit(
        &self,
        agg: &str,
        index: usize,
        change: &Change,
        next: FoldState,
        entries: Vec<Item>,
        force: bool,
        states: &mut HashMap<String, Loaded>,
        tx: &mut Tx,
    ) -> Result<(), BatchFailure> {
        let Some(l) = states.get(agg) else {
            return Ok(());
        };
        // A root deleted: a new epoch, the old parts become garbage.
        let new_epoch = next.deleted && !l.state.deleted;
        if entries.is_empty() && next == l.state && !new_epoch && !force {
            // Nothing changed (e.g. only processor-owned attributes): no
            // entry, no state write.
            return Ok(());
        }
        let entry_bytes: usize = entries.iter().map(item_size).sum();
        let cost = |l: &Loaded| {
            if new_epoch {
                (1 + l.entries.len() + entries.len(), entry_bytes)
            } else {
                l.cost(&next.parts, entries.len(), entry_bytes)
            }
        };
        let (others_actions, others_bytes) = tx
            .aggregates
            .iter()
            .filter(|a| a.as_str() != agg)
            .filter_map(|a| states.get(a))
            .filter(|o| o.dirty)
            .map(|o| o.cost(&o.state.parts, 0, 0))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
        let (actions, bytes) = cost(l);
        if (others_actions + actions > MAX_ACTIONS || others_bytes + bytes > MAX_TX_BYTES)
            && !tx.aggregates.is_empty()
        {
            self.flush(tx, states).await?;
        }
        let Some(l) = states.get_mut(agg) else {
            return Ok(());
        };
        if new_epoch {
            let old = std::mem::replace(&mut l.epoch, token());
            let stale: Vec<String> = l.persisted_parts.keys().map(|p| part_sk(&old, p)).collect();
            l.garbage.extend(stale);
            l.persisted_parts.clear();
            l.adopt = None;
            l.unconfirmed = None;
        }
        l.state = next;
        l.entries.extend(entries);
        l.pending_last = Some(change.sequence_number.clone());
        l.first_pending.get_or_insert(index);
        l.dirty = true;
        if !tx.aggregates.iter().any(|a| a == agg) {
            tx.aggregates.push(agg.to_string());
        }
        Ok(())
    }

    async fn run(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
        states: &mut HashMap<String, Loaded>,
    ) -> Result<(), BatchFailure> {
        // Records of one aggregate stay in stream order; aggregates are
        // folded one after the other, in order of their first record.
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        for (index, change) in changes.iter().enumerate() {
            let agg = match self.rules.adoption_record(change) {
                Some(r) => r.aggregate,
                None => match self.rules.aggregate(change) {
                    Ok(Some(a)) => a,
                    Ok(None) => continue,
                    Err(e) => {
                        log_bad_input(self.name, &change.event_id, &e, metrics);
                        continue;
                    }
                },
            };
            let g = *position.entry(agg.clone()).or_insert_with(|| {
                groups.push((agg, Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(index);
        }
        let mut tx = Tx::default();
        for (g, (agg, indices)) in groups.iter().enumerate() {
            let records: Vec<&Change> = indices.iter().map(|&i| &changes[i]).collect();
            for (pos, &index) in indices.iter().enumerate() {
                if let Err(failure) = self
                    .step(
                        agg,
                        index,
                        &changes[index],
                        &records[pos..],
                        metrics,
                        states,
                        &mut tx,
                    )
                    .await
                {
                    // The first record not committed: this one, anything
                    // pending, and every aggregate not reached yet.
                    let pending = states
                        .values()
                        .filter(|l| l.dirty)
                        .filter_map(|l| l.first_pending);
                    let later = groups[g + 1..].iter().map(|(_, ix)| ix[0]);
                    let first = pending
                        .chain(later)
                        .chain([index, failure.index])
                        .min()
                        .expect("non-empty");
                    return Err(BatchFailure {
                        index: first,
                        error: failure.error,
                    });
                }
            }
        }
        self.flush(&mut tx, states).await
    }
}

/// A condition expression with its attribute names and values.
pub type Condition = (String, Vec<(String, String)>, Vec<(String, AttributeValue)>);

/// `(condition, names, values)` holding while an item still has the
/// attribute values of `expected` (`NULL` = absent or null).
pub fn unchanged_condition(expected: &Item) -> Condition {
    let mut parts = Vec::new();
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (i, (attr, value)) in expected.iter().enumerate() {
        names.push((format!("#u{i}"), attr.clone()));
        if matches!(value, AttributeValue::Null(_)) {
            parts.push(format!(
                "(attribute_not_exists(#u{i}) OR attribute_type(#u{i}, :null))"
            ));
            if !values
                .iter()
                .any(|(k, _): &(String, AttributeValue)| k == ":null")
            {
                values.push((":null".to_string(), s("NULL")));
            }
        } else {
            parts.push(format!("#u{i} = :u{i}"));
            values.push((format!(":u{i}"), value.clone()));
        }
    }
    if parts.is_empty() {
        parts.push("attribute_exists(#u0)".into());
    }
    (parts.join(" AND "), names, values)
}

type Cond<'a> = (
    String,
    Vec<(&'a str, &'a str)>,
    Vec<(&'a str, AttributeValue)>,
);

fn put_action(table: &str, item: Item, cond: Option<Cond<'_>>) -> TransactWriteItem {
    let mut p = Put::builder().table_name(table).set_item(Some(item));
    if let Some((expr, names, values)) = cond {
        p = p.condition_expression(expr);
        for (k, v) in names {
            p = p.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            p = p.expression_attribute_values(k, v);
        }
    }
    TransactWriteItem::builder()
        .put(p.build().expect("table and item are set"))
        .build()
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
    fn adoption_record(&self, change: &Change) -> Option<AdoptionRecord> {
        (**self).adoption_record(change)
    }
    fn starts_aggregate(&self, change: &Change) -> bool {
        (**self).starts_aggregate(change)
    }
    fn removes_root(&self, change: &Change) -> bool {
        (**self).removes_root(change)
    }
    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade {
        (**self).cascade(aggregate, state)
    }
    fn fold(
        &self,
        aggregate: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError> {
        (**self).fold(aggregate, state, change)
    }
    fn absorb(&self, state: &mut FoldState, change: &Change) -> Result<(), InputError> {
        (**self).absorb(state, change)
    }
    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)> {
        (**self).sequence_mirror(aggregate)
    }
    fn key_names(&self) -> &'static [&'static str] {
        (**self).key_names()
    }
    fn adopt(
        &self,
        aggregate: &str,
        partition: &[Item],
        at: DateTime<Utc>,
        token: &str,
    ) -> Adoption {
        (**self).adopt(aggregate, partition, at, token)
    }
    fn restate(&self, entry: &Item, state: &FoldState) -> Restated {
        (**self).restate(entry, state)
    }
    fn table_state(&self, partition: &[Item]) -> FoldState {
        (**self).table_state(partition)
    }
    fn entry_key(&self, aggregate: &str, seq: u64) -> Item {
        (**self).entry_key(aggregate, seq)
    }
    fn correct_entry(&self, entry: &Item, part: &str, value: Option<&Item>) -> Option<Item> {
        (**self).correct_entry(entry, part, value)
    }
    fn partition(&self, aggregate: &str) -> (&'static str, String) {
        (**self).partition(aggregate)
    }
    fn verify(&self, items: &[Item]) -> Vec<crate::models::Finding> {
        (**self).verify(items)
    }
}
