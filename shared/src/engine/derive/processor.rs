//! The derive stream processor: which records need their item read
//! (the record classification), the reconcile, then the jobs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use chrono::Utc;

use super::implied::sums_fit;
use super::Aspects;
use super::{Counter, Deriver, Hint, OutMessage, Rules, Step};
use crate::batch::{log_bad_input, BatchFailure, StreamProcessor};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::RecordSays;
use crate::error::{InputError, ProcessError};
use crate::item::{key_of, Item};
use crate::ledger::item_id;
use crate::limits::KeyLimits;
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::Store;

/// What a record's image says, every aspect asked at once
/// ([`Rules::aspects`]).
#[derive(Debug, Default)]
pub(super) struct ImageSays {
    /// It implies something: contributions, derived items or memberships.
    pub(super) implies: bool,
    /// It carries processor-owned attributes (a projection).
    pub(super) projects: bool,
    /// The first bad input any aspect meets in it.
    pub(super) bad: Option<InputError>,
}

impl ImageSays {
    /// Whether the item needs reading: what an image of it says may have to
    /// be applied, or undone (`false`: valid, implying and projecting
    /// nothing).
    pub(super) fn matters(&self) -> bool {
        self.implies || self.projects || self.bad.is_some()
    }
}

pub(super) fn read_image(rules: &dyn Rules, image: &Item) -> ImageSays {
    image_says(&rules.aspects(image), image, rules.key_names())
}

/// What an image's aspects say.
fn image_says(a: &Aspects, image: &Item, key_names: &[&str]) -> ImageSays {
    let sums = a
        .contributions
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|c| sums_fit(c, image, key_names));
    let implies = a.derived.as_ref().is_ok_and(|d| !d.is_empty())
        || (sums.is_ok() && a.contributions.as_ref().is_ok_and(|c| !c.is_empty()))
        || a.memberships.as_ref().is_ok_and(|m| !m.is_empty());
    let projects = matches!(a.projection, Ok(Some(_)));
    // Bad input first: an aspect that only waits for a value not computed
    // yet says so when nothing is bad.
    let errors = [
        a.projection.as_ref().err().cloned(),
        a.derived.as_ref().err().cloned(),
        sums.err(),
        a.memberships.as_ref().err().cloned(),
    ];
    let bad = errors
        .iter()
        .flatten()
        .find(|e| !e.waits())
        .or(errors.iter().flatten().next())
        .cloned();
    ImageSays {
        implies,
        projects,
        bad,
    }
}

/// Whether a record is a MODIFY whose images imply the same (every aspect
/// valid and equal: projection, derived items, contributions,
/// memberships) and whose new image carries that projection already, each
/// processor-owned attribute as computed (absent where it must be absent).
/// A forged or removed projection is not in place, so its record is read
/// and the projection repaired.
fn changes_nothing_kept(said: &RecordSays, change: &Change) -> bool {
    let (Some(old), Some(new), Some(image)) = (&said.old, &said.new, change.new.as_ref()) else {
        return false;
    };
    let valid = |a: &Aspects| {
        a.projection.is_ok()
            && a.derived.is_ok()
            && a.contributions.is_ok()
            && a.memberships.is_ok()
    };
    if change.kind != ChangeKind::Modify || !valid(new) || old != new {
        return false;
    }
    match &new.projection {
        Ok(Some(p)) => p
            .attrs
            .iter()
            .all(|(name, value)| image.get(*name) == value.as_ref()),
        _ => true,
    }
}

/// Whether the rules reject this item (some aspect meets bad input, or
/// waits for a value not computed yet): the processor then writes nothing
/// onto it, counter sums included.
pub fn rejects(rules: &dyn Rules, image: &Item) -> bool {
    read_image(rules, image).bad.is_some()
}

/// Whether the rules reject this item as bad input ([`rejects`], but not
/// an item whose aspects only wait for a value not computed yet).
pub fn is_bad_input(rules: &dyn Rules, image: &Item) -> bool {
    read_image(rules, image).bad.is_some_and(|e| !e.waits())
}

/// Configuration of a derive processor.
#[derive(Debug, Clone)]
pub struct DeriveConfig {
    pub table: String,
    pub ledger_table: String,
    /// Guarded projection writes in flight at once (distinct items).
    pub concurrency: usize,
    /// Logical queue name -> queue URL, for [`Rules::messages`].
    pub queues: BTreeMap<String, String>,
    /// The table's key and index key limits ([`KeyLimits::of`] its
    /// definition).
    pub limits: KeyLimits,
}

/// The derive stream processor over any [`Rules`].
pub struct DeriveProcessor {
    pub(super) deriver: Deriver,
    pub(super) sqs: Option<aws_sdk_sqs::Client>,
    pub(super) queues: BTreeMap<String, String>,
    pub(super) metrics: Metrics,
}

impl DeriveProcessor {
    pub fn new(rules: Arc<dyn Rules>, store: Store, config: DeriveConfig) -> Self {
        Self {
            deriver: Deriver {
                rules,
                store,
                table: config.table,
                ledger_table: config.ledger_table,
                processor: "derive",
                concurrency: config.concurrency,
                now: Utc::now,
                limits: config.limits,
            },
            sqs: None,
            queues: config.queues,
            metrics: Metrics::default(),
        }
    }

    /// Enables [`Rules::messages`] through this SQS client.
    pub fn with_sqs(mut self, client: aws_sdk_sqs::Client) -> Self {
        self.sqs = Some(client);
        self
    }

    pub fn store(&self) -> &Store {
        &self.deriver.store
    }

    pub fn deriver(&self) -> &Deriver {
        &self.deriver
    }

    /// Sends the messages of records before `limit`, in record order.
    /// Returns the index of the first record whose message was not sent.
    pub async fn send_messages(
        &self,
        messages: &[(usize, OutMessage)],
        limit: usize,
    ) -> Result<(), BatchFailure> {
        crate::sqs::send_out(
            self.sqs.as_ref(),
            &self.deriver.store.backoff(),
            &self.queues,
            messages,
            limit,
        )
        .await
    }

    /// The ids of the items among `items` that the rules do not know and
    /// that the processor made under an earlier version of them: counter
    /// items of a counter the rules no longer have at their key (re-keyed
    /// or removed from a model file since), which the ledger's totals at
    /// their key tell ([`Rules::stale_counter_item`],
    /// [`Rules::removed_counter_item`]), and derived items of an entity
    /// re-keyed ([`Rules::stale_derived_item`]) or removed since (the
    /// ledger keeps their owners).
    async fn left_behind(&self, items: &[Item]) -> Result<BTreeSet<String>, ProcessError> {
        let rules = &self.deriver.rules;
        let key_names = rules.key_names();
        let processor = self.deriver.processor;
        let mut out = BTreeSet::new();
        // By the ledger `pk` read: the item's id, and whether any record
        // there will do (else only totals that say the processor created
        // the counter).
        let mut candidates: HashMap<String, (String, bool)> = HashMap::new();
        let mut reads = Vec::new();
        for item in items {
            let key = key_of(item, key_names);
            if rules.stale_derived_item(item) {
                out.insert(item_id(&key));
                continue;
            }
            let stale = rules.stale_counter_item(item);
            if !stale && !rules.removed_counter_item(item) {
                continue;
            }
            let mut wanted = vec![(super::total_key(processor, &key), stale)];
            if !stale {
                wanted.push((super::owners_key(processor, &key), true));
            }
            for (at, any) in wanted {
                let Some(pk) = crate::ledger::as_s(at.get(crate::ledger::PK)) else {
                    continue;
                };
                candidates.insert(pk.to_string(), (item_id(&key), any));
                reads.push(at);
            }
        }
        if reads.is_empty() {
            return Ok(out);
        }
        let found = self
            .deriver
            .store
            .batch_get(&self.deriver.ledger_table, reads)
            .await?;
        out.extend(found.iter().filter_map(|t| {
            let pk = crate::ledger::as_s(t.get(crate::ledger::PK))?;
            let (id, any) = candidates.get(pk)?;
            (*any || crate::engine::counts::is_created(t)).then(|| id.clone())
        }));
        Ok(out)
    }

    /// Backfill of existing items: the same reconcile as the stream, plus
    /// the jobs an INSERT of each item starts. An item the rules reject is
    /// logged once, with its key and the first reason met (each aspect of
    /// its rules may reject it), and counted once. A counter or derived
    /// item the processor made under an earlier version of the rules is
    /// deleted if still as read (no bad input: see [`Self::left_behind`]);
    /// its ledger totals or owners wait for `verify --repair`.
    pub async fn backfill(
        &self,
        items: &[Item],
        dry_run: bool,
    ) -> Result<Backfilled, ProcessError> {
        let key_names = self.deriver.rules.key_names();
        let mut messages = Vec::new();
        let mut sent: std::collections::HashSet<(&'static str, String)> = Default::default();
        let mut keys = Vec::new();
        // Of each key, whether no entity matches it and its stamp names no
        // writer entity (see [`Backfilled::unsure`]).
        let mut unsure = Vec::new();
        // The first bad input met per item, by its position in `keys`.
        let mut bad: BTreeMap<usize, InputError> = BTreeMap::new();
        let mut deleted = 0;
        let left_behind = self.left_behind(items).await?;
        for item in items {
            let key = key_of(item, key_names);
            if self.deriver.rules.ignores(&key) {
                continue;
            }
            if left_behind.contains(&item_id(&key)) {
                tracing::info!(key = %crate::item::display_key(&key), dry_run, "backfill: deletes an item the processor made under an earlier version of the model (no entity has its key any more)");
                if !dry_run
                    && self
                        .deriver
                        .store
                        .delete_if_unchanged(&self.deriver.table, key_names, item)
                        .await?
                        == crate::store::Written::Applied
                {
                    deleted += 1;
                }
                continue;
            }
            let change = Change::synthetic_insert(key.clone(), item.clone(), (self.deriver.now)());
            match self.deriver.rules.messages(&change) {
                // One job of a kind per page: the rows of one scope each
                // start the same job (user16 #8: 816 for 12 accounts), and
                // a job reads its scope as it is once sent, after the
                // page's writes.
                Ok(m) => {
                    for m in m {
                        if sent.insert((m.queue, m.body.clone())) {
                            messages.push((keys.len(), m));
                        }
                    }
                }
                Err(e) => {
                    bad.insert(keys.len(), e);
                }
            }
            unsure.push(self.deriver.rules.removed_counter_item(item));
            keys.push(key);
        }
        let mut out = Backfilled {
            messages: messages.len(),
            ..Backfilled::default()
        };
        if !dry_run {
            let done = self
                .deriver
                .reconcile(&keys, &HashMap::new())
                .await
                .map_err(|(_, _, e)| e)?;
            for (pos, e) in done.bad.into_iter().filter(|(_, e)| !e.waits()) {
                bad.entry(pos).or_insert(e);
            }
            self.send_messages(&messages, usize::MAX)
                .await
                .map_err(|f| f.error)?;
            out.table_writes = done.table_writes + deleted;
            out.ledger_writes = done.ledger_writes;
        }
        for (pos, e) in bad {
            if unsure[pos] && matches!(e, InputError::UnknownEntity { .. }) {
                out.unsure.push((keys[pos].clone(), e));
                continue;
            }
            tracing::warn!(key = %crate::item::display_key(&keys[pos]), kind = e.kind(), reason = %e, "backfill: bad input");
            out.bad_input += 1;
        }
        Ok(out)
    }
}

/// What a backfill of some items wrote and met.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Backfilled {
    /// Item writes in the model table.
    pub table_writes: usize,
    /// Item writes in the ledger.
    pub ledger_writes: usize,
    /// Jobs sent (or, a dry run, that would be).
    pub messages: usize,
    /// Items the rules reject, each logged once.
    pub bad_input: usize,
    /// Items no entity matches, stamped with a name no writer entity has,
    /// and the error (not logged): each may be an item the processor
    /// derived under an entity removed from the rules since, which the
    /// reconcile of its sources (in this page or another) deletes. The
    /// caller logs as bad input those still there once every page is done.
    pub unsure: Vec<(Item, InputError)>,
}

impl StreamProcessor for DeriveProcessor {
    fn name(&self) -> &'static str {
        self.deriver.processor
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        let rules = &self.deriver.rules;
        let mut keys: Vec<Item> = Vec::new();
        let mut first_index: Vec<usize> = Vec::new();
        // Per key (by position): whether some record of it in the batch
        // needs the item read (see below).
        let mut needed: Vec<bool> = Vec::new();
        // Per key (by position): the counter it is, when every record of it
        // in the batch only asks for that counter to be synced (see below).
        let mut sync_only: Vec<Option<Counter>> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        // Per item: its records, in stream order (see `Hint::steps`).
        let mut steps: HashMap<String, Vec<Step<'_>>> = HashMap::new();
        let mut hints: HashMap<String, Hint<'_>> = HashMap::new();
        let mut messages: Vec<(usize, OutMessage)> = Vec::new();
        // Bad input is logged and counted once per record (by its index in
        // the batch): several bad puts of one item in one batch are each
        // counted, with its own reason, as they are in batches of their own.
        let mut bad_records = BTreeSet::new();
        // Items whose records in the batch include a processor's write
        // coming back onto them while they are bad (see `echo_of_bad`): the
        // item read as bad is no new bad input either (a writer's bad put in
        // the same batch is counted by its record).
        let mut echoes = BTreeSet::new();
        // Records whose new image the rules accept (index, item id), and
        // the last record of each item: whether an image's writes can exist
        // at all is asked of the item as read, and of these records only
        // where the item was read as another image (see below).
        let mut to_size: Vec<(usize, String)> = Vec::new();
        let mut last_of: HashMap<String, usize> = HashMap::new();
        // What each record says, its images parsed once (kept for the
        // reconcile: an item read as its latest image was is not parsed
        // again).
        let says: Vec<Option<RecordSays>> = changes
            .iter()
            .map(|c| (!rules.ignores(&c.keys)).then(|| rules.record(c)))
            .collect();
        let key_names = rules.key_names();
        for (index, (change, said)) in changes.iter().zip(&says).enumerate() {
            let Some(said) = said else {
                continue;
            };
            let id = item_id(&change.keys);
            let new_image = change
                .new
                .as_ref()
                .filter(|_| change.kind != ChangeKind::Remove);
            let old = said
                .old
                .as_ref()
                .zip(change.old.as_ref())
                .map(|(a, img)| image_says(a, img, key_names))
                .unwrap_or_default();
            // A MODIFY of an item already rejected (its old image: by its
            // rules, or its writes past DynamoDB's limits) that changes only
            // what the processors write onto it (a write that landed on the
            // item as it went bad: a projection guarded by what it read) is
            // no new bad input: its bad put was counted.
            let echo_of_bad = change.kind == ChangeKind::Modify
                && change
                    .old
                    .as_ref()
                    .zip(new_image)
                    .is_some_and(|(o, n)| rules.processor_owned_only(o, n))
                && (old.bad.as_ref().is_some_and(|e| !e.waits())
                    || said
                        .old
                        .as_ref()
                        .zip(change.old.as_ref())
                        .is_some_and(|(a, img)| self.deriver.unwritable(img, a).is_some()));
            if echo_of_bad {
                echoes.insert(id.clone());
            }
            match &said.messages {
                Ok(out) => messages.extend(out.iter().map(|m| (index, m.clone()))),
                Err(e) => {
                    if !echo_of_bad && bad_records.insert(index) {
                        log_bad_input(self.name(), &change.event_id, e, metrics, self.metrics());
                    }
                }
            }
            // What the record says is validated too, so that every bad
            // record is logged and counted even if the item has changed (or
            // gone) since; its effects follow the item as it is.
            let mut new = said
                .new
                .as_ref()
                .zip(new_image)
                .map(|(a, img)| image_says(a, img, key_names))
                .unwrap_or_default();
            // Writes DynamoDB cannot take are bad input of the record too:
            // asked after the reconcile, of the images it did not read.
            if new.bad.is_none() && new_image.is_some() && !echo_of_bad {
                to_size.push((index, id.clone()));
            }
            last_of.insert(id.clone(), index);
            // A record whose images are valid and imply and project nothing,
            // of an item that is no counter, changes nothing the engine
            // keeps: records arrive in order per item, so the item's
            // previous state (the old image) implied nothing either, and
            // a later state that implies something comes with its own
            // record. Such an item is not read at all (an aggregate's member
            // that only a fold reads costs the derive nothing). The same
            // holds for a MODIFY whose images are valid and imply the same,
            // the new one carrying its projection already (the processors'
            // own write coming back: a projection, a fold's sequence; or a
            // change of attributes no rule reads): the old state's record,
            // processed before it, applied what both imply. Any other
            // record of the item in the batch makes it read.
            let echo = old.bad.is_none() && new.bad.is_none() && changes_nothing_kept(said, change);
            let counter = rules
                .counter(&change.keys)
                .or_else(|| change.latest_image().and_then(|img| rules.counter(img)));
            let matters = (!echo && (old.matters() || new.matters())) || counter.is_some();
            // A record of a processor-created counter item (at its own key)
            // whose images are valid and imply nothing asks only for that
            // counter to be synced: the sync reads the counter's totals and
            // the item as it is and writes the sums with the item's own
            // projection (whoever changed, deleted or expired it), so the
            // item is not read a second time, nor its (empty) record.
            let counter_only = counter.filter(|c| {
                !old.implies
                    && !new.implies
                    && old.bad.is_none()
                    && new.bad.is_none()
                    && c.create.is_some()
                    && item_id(&c.key_item()) == item_id(&change.keys)
                    && rules.locate(&c.key_item()).is_none()
            });
            // (An image waiting for a computed value is no bad input.)
            if let Some(e) = new.bad.take().filter(|e| !e.waits()) {
                if !echo_of_bad && bad_records.insert(index) {
                    log_bad_input(self.name(), &change.event_id, &e, metrics, self.metrics());
                }
            }
            let hint = hints.entry(id.clone()).or_default();
            hint.implied_something |= old.implies || new.implies;
            // The item's latest image in the batch (none after a remove).
            hint.seen = new_image.zip(said.new.as_ref());
            steps.entry(id.clone()).or_default().push(Step {
                seq: &change.sequence_number,
                new: hint.seen,
                removed: change.kind == ChangeKind::Remove,
            });
            match position.entry(id) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(keys.len());
                    keys.push(change.keys.clone());
                    first_index.push(index);
                    needed.push(matters && counter_only.is_none());
                    sync_only.push(counter_only);
                }
                std::collections::hash_map::Entry::Occupied(e) => {
                    let at = *e.get();
                    needed[at] |= matters && counter_only.is_none();
                    if sync_only[at].is_none() {
                        sync_only[at] = counter_only;
                    }
                }
            }
        }
        for (id, hint) in hints.iter_mut() {
            hint.steps = steps.get(id).map_or(&[], Vec::as_slice);
        }
        // Counters synced without a read of their item's record: by the
        // index of their first record.
        let mut synced_only: Vec<(usize, Counter)> = Vec::new();
        let mut read: Vec<(Item, usize)> = Vec::new();
        for (((k, index), needed), counter) in
            keys.into_iter().zip(first_index).zip(needed).zip(sync_only)
        {
            match counter {
                _ if needed => read.push((k, index)),
                Some(c) => synced_only.push((index, c)),
                None => {}
            }
        }
        let (keys, first_index): (Vec<Item>, Vec<usize>) = read.into_iter().unzip();
        let first_synced = synced_only.first().map(|(i, _)| *i);
        let also = synced_only.into_iter().map(|(_, c)| c).collect();
        // The effects waiting for items of the batch, read beside the
        // reconcile (only for records that may make one's precondition
        // hold).
        let awaited = super::waiting::awaited(rules.as_ref(), changes);
        let (result, waiting) = tokio::join!(
            self.deriver.reconcile_and_sync(&keys, &hints, also),
            self.waiting_jobs(&awaited)
        );
        let (done, failure) = match result {
            Ok(d) => (d, None),
            Err((d, pos, error)) => {
                // A failure at the first position (a failed sync among
                // them) is retried from the first record of either kind.
                let index = match (first_index.get(pos).copied(), first_synced) {
                    (Some(i), Some(s)) if pos == 0 => i.min(s),
                    (Some(i), _) => i,
                    (None, s) => s.unwrap_or(0),
                };
                (d, Some(BatchFailure { index, error }))
            }
        };
        let failure = match (failure, waiting) {
            (f, Ok(jobs)) => {
                messages.extend(jobs);
                f
            }
            (Some(a), Err(b)) => Some(if b.index < a.index { b } else { a }),
            (None, Err(b)) => Some(b),
        };
        // A record whose image implies writes that cannot exist is bad
        // input of its own, even when the item was read as another image
        // (an earlier record of the batch, or the item changed since): the
        // read of the item judged only the image it found.
        let read_at: HashMap<String, usize> = keys
            .iter()
            .enumerate()
            .map(|(pos, k)| (item_id(k), pos))
            .collect();
        for (index, id) in &to_size {
            let Some(pos) = read_at.get(id) else {
                continue;
            };
            // Read as this image, and counted below when bad (not left to
            // the records, as for an item with a processor's write among
            // them).
            if last_of.get(id) == Some(index) && !done.ahead.contains(pos) && !echoes.contains(id) {
                continue;
            }
            let change = &changes[*index];
            let unwritable = says[*index]
                .as_ref()
                .and_then(|s| s.new.as_ref())
                .zip(change.new.as_ref())
                .and_then(|(a, image)| self.deriver.unwritable(image, a));
            if let Some(e) = unwritable {
                if bad_records.insert(*index) {
                    log_bad_input(self.name(), &change.event_id, &e, metrics, self.metrics());
                }
            }
        }
        // Bad input met on the item as read is counted here only when the
        // item was read as this batch's latest image of it: one read ahead
        // (changed since) is counted by the record that changed it, in its
        // own batch (one bad put, one BadInput, however the records were
        // cut into batches).
        // Read as the latest image, the bad input is that of the item's last
        // record in the batch (counted once, whether its image said so
        // already or only the read did).
        for (pos, e) in done.bad.iter().filter(|(_, e)| !e.waits()) {
            let id = item_id(&keys[*pos]);
            let index = last_of.get(&id).copied().unwrap_or(first_index[*pos]);
            if !done.ahead.contains(pos) && !echoes.contains(&id) && bad_records.insert(index) {
                log_bad_input(
                    self.name(),
                    &changes[index].event_id,
                    e,
                    metrics,
                    self.metrics(),
                );
            }
        }
        for _ in 0..done.unchanged {
            metrics.incr(names::DUPLICATE);
        }
        for (key, note) in &done.notes {
            tracing::warn!(processor = self.name(), key = %crate::item::display_key(key), metric = note.metric, reason = %note.reason, "noted");
            metrics.incr(note.metric);
        }
        // Jobs go last (a consumer that runs before our effects landed would
        // see stale state), and are sent for every record before a failure
        // even when a later effect failed.
        let limit = failure.as_ref().map_or(usize::MAX, |f| f.index);
        // Identical jobs of one batch are sent once: a job re-reads the
        // facts, and all of them are in place by now.
        let mut seen = BTreeSet::new();
        messages.sort_by_key(|(index, _)| *index);
        messages.retain(|(_, m)| seen.insert((m.queue, m.body.clone())));
        let sent = self.send_messages(&messages, limit).await;
        match (failure, sent) {
            (Some(a), Err(b)) => Err(if b.index < a.index { b } else { a }),
            (Some(f), Ok(())) | (None, Err(f)) => Err(f),
            (None, Ok(())) => Ok(()),
        }
    }
}
