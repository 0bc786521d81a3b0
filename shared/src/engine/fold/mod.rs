//! The fold processor: aggregates folded, in stream order, into a durable
//! running state, emitting entries (history) as they go.
//!
//! State lives in the ledger table: a HEAD (sequence, version, last applied
//! stream sequence number, epoch, pending adoption, whether the root is bad
//! input now: [`FoldState::rejected`]) and the parts of the
//! aggregate (the root item, each child). While the parts are small
//! (up to 1.5 KB, [`INLINE`]) the HEAD holds them: a commit writes one
//! state item, as a hand-written handler keeps its state. Larger ones are
//! one item per part, keyed by the HEAD's epoch, and a commit writes only
//! the parts that changed: a new epoch (an adoption, a root deleted, parts
//! leaving the HEAD) makes the old parts garbage at once, without deleting
//! them in the HEAD's transaction. A batch reads its aggregates' HEADs in
//! BatchGetItem calls of 100, and queries a partition only where the parts
//! are items.
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
//! committed are skipped by the HEAD on redelivery. The sequence mirror on
//! the root goes in the transaction of the aggregate's last commit of the
//! batch (set exactly, fenced by the HEAD's version, guarded by the root as
//! folded, [`FoldRules::root_guard`]; a transaction refused for that guard
//! alone is sent again without it): no request of its own. A root deleted
//! and re-created starts over at 1, and its mirror never shows an earlier
//! incarnation's count (`effects.rs`).
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
//! change on (the first record of an item holds its value there). Items
//! the read saw that no record of the batch placed (they predate the
//! stream, or the writer put them after the batch's last record) are kept
//! as candidate parts ([`CANDIDATE`]), outside the rules' view, until their
//! own record settles them or a record after the read (the root showing the
//! sequence mirror) confirms them; a confirmed part joins the state and the
//! entries since the creation. A deletion is no such record (the read may
//! follow it): the cascade leaves the candidates, carried across it
//! ([`Loaded::left`]) until their own records leave them to the writer or
//! a record after the read proves them older than the stream (the removed
//! incarnation's: deleted as its cascade would have). So does a deletion
//! folded before an adoption's position, for the parts the adoption read
//! that no record since placed (the adoption's own record is their fence).
//!
//! **A creation before its adoption's position** (a backfill, or the fold
//! at a member's record, read the root before the consumer reached its
//! INSERT) drops the adoption: the adoption's state is rolled back the same
//! way; the parts that records before the creation wrote are known there
//! ([`Loaded::seen`]), the others it read are candidates, confirmed at the
//! dropped adoption's own record (after every record between the creation
//! and its read).
//!
//! So the entries are numbered without gap or duplicate, and their snapshots
//! are the exact fold of every change before them, however far the processor
//! lags behind the writers.
//!
//! Files: `step.rs` (a batch folded per aggregate), `commit.rs` (the state
//! in the ledger: load, commit), `adoption.rs` (adoption, first sight of a
//! creation or deletion), `effects.rs` (the sequence mirror, the cascade),
//! `pending.rs` (member deletes a cascade defers, and the records that
//! decide a member's fate);
//! this file the vocabulary ([`FoldRules`]) and the processor.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use crate::batch::{log_bad_input, BatchFailure, StreamProcessor};
use crate::change::{Change, SequenceNumber};
use crate::error::{InputError, ProcessError};
use crate::item::{item_size, n, s, Item, ItemExt};
use crate::ledger;
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::{placeholders, Store, TxError, Update};

mod adoption;
mod commit;
mod effects;
mod pending;
mod step;

pub use pending::PENDING;
use pending::{pending_of, pending_part, written_by};

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
    /// The root's latest change was bad input: `parts` keep its last valid
    /// state, and nothing is written onto it (its sequence mirror waits)
    /// until a valid change of it is folded, or it is deleted. Kept in the
    /// HEAD, so a later batch knows it too.
    pub rejected: bool,
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

/// What a cascade sent ([`FoldProcessor::cascade`]).
#[derive(Debug, Default)]
struct Cascaded {
    /// Items deleted.
    deleted: usize,
    /// Members not deleted because the root was back (re-created before
    /// the deletion was folded): kept in the state as pending parts
    /// ([`PENDING`]) until their own records, or the root's re-creation,
    /// settle them.
    deferred: Vec<CascadeDelete>,
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

    /// True when `change` is a processor's MODIFY: it sets a
    /// processor-owned attribute (a projection, the mirror) and changes
    /// nothing its writer wrote. No writer decided the item's fate there,
    /// so it neither keeps a member from its incarnation's cascade nor
    /// adds one to the state. (A writer's put that changes none of its
    /// own attributes drops the processor's: still the writer's record.)
    fn writes_nothing(&self, _change: &Change) -> bool {
        false
    }

    /// What the cascade deletes when the root of the incarnation folded into
    /// `state` goes away.
    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade;

    /// Whether the cascade deletes the members (the writer's items) too, or
    /// only the entries: then every member stays as written, a member of
    /// the state after the root's deletion ([`Self::root_removed`]), and a
    /// candidate carried across a deletion ([`CANDIDATE`]) is no leftover
    /// to delete but a member like any other, confirmed as usual.
    fn cascades_members(&self) -> bool {
        true
    }

    /// The state right after the root of the incarnation in `state` was
    /// deleted (its cascade run): nothing but that it is deleted when the
    /// cascade deletes the members; the members, when they stay
    /// ([`Self::cascades_members`]).
    fn root_removed(&self, _state: &FoldState) -> FoldState {
        FoldState {
            deleted: true,
            ..FoldState::default()
        }
    }

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

    /// The root's attributes as `state` last saw them (`NULL` = absent):
    /// the mirror is written only while the root still holds them, so
    /// never onto a root changed since, an incarnation re-created after
    /// the one folded above all, nor onto one that is bad input now. An
    /// empty item: unguarded. `None`: no mirror is written (no valid root
    /// folded, or the root is bad input now: [`FoldState::rejected`]).
    fn root_guard(&self, _state: &FoldState) -> Option<Item> {
        Some(Item::new())
    }

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

    /// The sort key prefix (key name, prefix) every item of the aggregate
    /// starts with, when its partition holds other aggregates too (an
    /// order keyed under its customer); `None`: the whole partition.
    fn sort_prefix(&self, _aggregate: &str) -> Option<(&'static str, String)> {
        None
    }

    /// Whether an item read under the aggregate's partition and prefix is
    /// the aggregate's (`ORDER#o1` is a prefix of order `o10`'s items too).
    fn is_of(&self, _aggregate: &str, _item: &Item) -> bool {
        true
    }

    /// What `verify` finds of the fold's entries in the table's items (a
    /// model whose `checks` verify its history says nothing here), tallying
    /// what it checked into `input`.
    fn verify(&self, _input: &crate::models::CheckInput<'_>) -> Vec<crate::models::Finding> {
        Vec::new()
    }
}

/// The items of an aggregate as they are (strongly consistent Query): its
/// partition, under its sort key prefix where the partition holds other
/// aggregates too, and only the aggregate's items.
pub async fn aggregate_items<R: FoldRules + ?Sized>(
    rules: &R,
    store: &Store,
    table: &str,
    aggregate: &str,
) -> Result<Vec<Item>, crate::error::StoreError> {
    let (pk_name, pk) = rules.partition(aggregate);
    let prefix = rules.sort_prefix(aggregate);
    let items = store
        .query_partition(
            table,
            pk_name,
            &pk,
            prefix.as_ref().map(|(n, p)| (*n, p.as_str())),
        )
        .await?;
    Ok(items
        .into_iter()
        .filter(|i| rules.is_of(aggregate, i))
        .collect())
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

/// Characters of an epoch ([`token`]: a UUID's 32 hex digits).
const EPOCH_LEN: usize = 32;

/// Bytes of the ledger item that keeps part `name` (`part`) of processor
/// `processor`'s state of `aggregate` under an epoch: what the rules ask
/// of an item near DynamoDB's item limit before folding it (the history
/// judges an item by its own writes, its state in the ledger among them).
pub fn part_item_bytes(processor: &str, aggregate: &str, name: &str, part: &Item) -> usize {
    let key = ledger::key(
        ledger::state_pk(processor, aggregate),
        part_sk(&"0".repeat(EPOCH_LEN), name),
    );
    // `data` is a map: 3 bytes, and one per attribute beside its name and
    // value.
    item_size(&key) + "data".len() + 3 + part.len() + item_size(part)
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
    /// While `adopt` waits: the parts that records before its position
    /// wrote or removed, so their value there is the fold's, not the
    /// adoption read's (kept in the HEAD up to [`SEEN_MAX_BYTES`]). When
    /// the root's creation comes first, these parts are the creation's
    /// state at once, not candidates.
    seen: std::collections::BTreeSet<String>,
    /// Parts as committed as part items under `epoch`, to write only those
    /// that change. Read only while the parts are items: with `inline`
    /// (the parts in the HEAD) it may be left empty.
    persisted_parts: BTreeMap<String, Item>,
    /// The committed parts live in the HEAD ([`INLINE`]), not in items.
    inline: bool,
    /// Sort keys of part items of other epochs: deleted after a commit.
    garbage: Vec<String>,
    /// HEAD version in the ledger (0 = no HEAD yet).
    version: u64,
    last: Option<SequenceNumber>,
    pending_last: Option<SequenceNumber>,
    /// Entries folded, not committed.
    entries: Vec<Item>,
    /// The size of `entries` (kept as they are added: a commit's cost is
    /// asked at every change staged).
    entry_bytes: usize,
    /// The (actions, bytes) of the pending commit, as [`FoldProcessor::stage_commit`]
    /// last computed them; `None`: to compute.
    staged: Option<(usize, usize)>,
    /// The adoption entry rewritten at its position, not committed.
    rewrite: Option<Item>,
    /// Candidates pending (parts named `?<name>`, see [`CANDIDATE`]): the
    /// first entry that must show those that prove to predate the creation.
    unconfirmed: Option<u64>,
    /// While candidates are pending after a dropped adoption: the mirror
    /// that adoption wrote on the root, before the partition was read (a
    /// root record showing it is no fence for them).
    stale_mirror: Option<u64>,
    /// While candidates are pending after a dropped adoption: that
    /// adoption's entry id. Its record is the fence of the candidates (the
    /// parts that adoption read): every record between the creation and
    /// the read is behind it.
    stale_adoption: Option<String>,
    /// The candidates pending were carried across a deletion of the root
    /// (no record told whether the removed incarnation had them, or the
    /// writer put them after it): at a record after the read (the
    /// fence) those left unsettled prove to predate the stream, the
    /// removed incarnation's, and are deleted as its cascade would have;
    /// one settled by its own record is the writer's (never joined as a
    /// member the history already showed).
    left: bool,

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
    /// This batch folded a creation of the root: its commit sets the
    /// mirror to the new incarnation's count, even one below the entries
    /// the batch met (the earlier incarnation's).
    created: bool,
    /// The entry count whose sequence mirror a commit of this batch settled
    /// in its transaction (written, or refused: the root gone or ahead).
    mirror_done: Option<u64>,
}

impl Loaded {
    /// Part writes (actions, bytes) of a commit of `parts`: none but the
    /// HEAD's when they fit in it; every part under a new epoch when they
    /// leave it; else the parts that changed.
    fn changed_parts(&self, parts: &BTreeMap<String, Item>) -> (usize, usize) {
        if fits_inline(parts) {
            return (0, inline_bytes(parts));
        }
        if self.inline {
            return (parts.len(), parts.values().map(item_size).sum());
        }
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
        let entry_bytes = self.entry_bytes + self.rewrite.as_ref().map_or(0, item_size);
        // The sequence mirror's update: its root counts in the transaction's
        // size, and its guard holds the root's part (at most the largest).
        let guard_bytes = parts.values().map(item_size).max().unwrap_or(0);
        // The HEAD, and the sequence mirror's update that may go with it.
        (
            2 + part_actions + self.entries.len() + usize::from(self.rewrite.is_some()) + extra,
            part_bytes + entry_bytes + extra_bytes + guard_bytes,
        )
    }

    fn current_last(&self) -> Option<&SequenceNumber> {
        self.pending_last.as_ref().or(self.last.as_ref())
    }
}

/// The HEAD attribute holding the parts when they are small enough
/// ([`fits_inline`]): one item to write per commit instead of the HEAD and
/// each changed part, each billed at least 1 KB (twice, in a transaction).
pub const INLINE: &str = "parts";

/// Parts that take up to this many bytes live in the HEAD: with its own
/// fields it stays within 2 KB, what a HEAD and one changed part item cost
/// at least.
const INLINE_MAX_BYTES: usize = 1_536;

/// What `parts` add to the HEAD that holds them.
fn inline_bytes(parts: &BTreeMap<String, Item>) -> usize {
    parts
        .iter()
        .map(|(name, data)| name.len() + item_size(data) + 3)
        .sum()
}

/// Whether `parts` are kept in the HEAD ([`INLINE`]) rather than in items.
fn fits_inline(parts: &BTreeMap<String, Item>) -> bool {
    inline_bytes(parts) <= INLINE_MAX_BYTES
}

/// Aggregates with uncommitted changes, committed together.
#[derive(Default)]
struct Tx {
    aggregates: Vec<String>,
    /// Aggregates whose records of the batch are all folded: their next
    /// commit is their last of the batch and carries their sequence mirror.
    complete: std::collections::HashSet<String>,
}

const MAX_ACTIONS: usize = 100;

/// The most part names [`Loaded::seen`] keeps (their bytes): past it, a
/// part is a candidate at a premature creation like any read, settled by
/// its record or the dropped adoption's.
const SEEN_MAX_BYTES: usize = 4_096;

/// Prefix of a candidate part's name: an item read from the table when an
/// aggregate's creation was first seen, not known yet to predate it. Rules
/// never read such parts (their names are not the rules' names).
pub const CANDIDATE: &str = "?";
const MAX_TX_BYTES: usize = 3_500_000;

/// A fold's stream processor; `R` is the rules' type (the model's: `dyn
/// FoldRules`, shared with the model).
pub struct FoldProcessor<R: ?Sized> {
    name: &'static str,
    rules: Arc<R>,
    store: Store,
    config: FoldConfig,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

impl<R: FoldRules + ?Sized> FoldProcessor<R> {
    pub fn new(name: &'static str, rules: Arc<R>, store: Store, config: FoldConfig) -> Self {
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
        p = p
            .condition_expression(expr)
            .set_expression_attribute_names(placeholders(
                names.into_iter().map(|(k, v)| (k, v.to_string())),
            ))
            .set_expression_attribute_values(placeholders(values));
    }
    crate::tx::put_of(p)
}

impl<R: FoldRules + ?Sized> StreamProcessor for FoldProcessor<R> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Folds the batch. A write DynamoDB refuses whatever the retries
    /// (`Policy::Skip`: a `ValidationException` the limits known before
    /// sending did not foresee) is never a failed batch: the batch is folded
    /// again from the ledger, each record's writes in a transaction of
    /// their own, to find the record whose writes they are; that record is
    /// bad input (logged with its key and the refusal, counted), left out,
    /// and the others fold (the records committed before are skipped by
    /// their HEADs as any redelivery).
    async fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        let mut refused = std::collections::BTreeSet::new();
        let mut alone = false;
        loop {
            let mut states = HashMap::new();
            let result = self
                .run(changes, metrics, &mut states, &refused, alone)
                .await;
            let limit = result.as_ref().err().map_or(usize::MAX, |f| f.index);
            let mirrors = self.write_mirrors(&states, limit, metrics).await;
            let failure = match (result, mirrors) {
                (Err(a), Err(b)) => {
                    if b.index < a.index {
                        b
                    } else {
                        a
                    }
                }
                (Err(a), Ok(())) | (Ok(()), Err(a)) => a,
                (Ok(()), Ok(())) => return Ok(()),
            };
            if failure.error.policy() != crate::error::Policy::Skip {
                return Err(failure);
            }
            if !alone {
                alone = true;
                continue;
            }
            if !refused.insert(failure.index) {
                return Err(failure);
            }
            let change = &changes[failure.index];
            metrics.incr(names::BAD_INPUT);
            tracing::warn!(processor = self.name, event_id = %change.event_id, key = %change.key_display(), error = %failure.error, "skipping record: bad input: DynamoDB refuses its writes (never retried)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size a part's ledger item is judged by is the size of the item
    /// a commit writes (its key under a real epoch, the part in `data`).
    #[test]
    fn a_part_is_sized_as_the_ledger_item_that_keeps_it() {
        let part: Item = [
            ("status".to_string(), s("placed")),
            ("note".to_string(), s("n".repeat(1_000))),
            ("gone".to_string(), AttributeValue::Null(true)),
        ]
        .into();
        let mut item = ledger::key(
            ledger::state_pk("history", "o1"),
            part_sk(&token(), "ORDER"),
        );
        item.insert("data".into(), AttributeValue::M(part.clone()));
        assert_eq!(
            part_item_bytes("history", "o1", "ORDER", &part),
            item_size(&item)
        );
    }
}
