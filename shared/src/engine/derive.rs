//! The derive processor: projections and counters.
//!
//! For each change the rules say what processor-owned attributes the item
//! should carry ([`Projection`]) and what it contributes to counters. The
//! engine diffs that against the image and writes only the difference:
//!
//! - a projection is a guarded UpdateItem (SET/REMOVE of the computed values,
//!   conditioned on the source attributes still holding the values they were
//!   computed from). A failed condition means a newer write won; the newer
//!   record fixes the projection, so it is success. When the image already
//!   carries the computed values nothing is written: this is the fixpoint
//!   that keeps the processor from looping on its own writes;
//! - counters go through a registry of contributions in the ledger (see
//!   [`super::counts`]): each item settles to what it contributes after its
//!   last change in the batch, with one ADD per distinct counter per
//!   transaction chunk. A redelivered record finds its contribution already
//!   recorded and writes nothing.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use futures::stream::{self, StreamExt};

use super::counts::{settle, Mode, Target};
use crate::batch::{log_bad_input, BatchFailure, StreamProcessor};
use crate::change::{Change, ChangeKind};
use crate::error::{InputError, ProcessError};
use crate::item::{display_key, Item};
use crate::metrics::{names, BatchMetrics, Metrics};
use crate::store::{Store, Update, Written};

/// Processor-owned attributes an item should carry, computed from its image.
#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    /// Attribute name and its computed value; `None` means "must be absent"
    /// (sparse indexes).
    pub attrs: Vec<(&'static str, Option<AttributeValue>)>,
    /// The source attributes the values were computed from: the write is
    /// conditioned on them still holding the image's values.
    pub sources: Vec<&'static str>,
}

/// A counter item and the numeric attribute that holds the count.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Counter {
    /// Key attributes of the counter item, as (name, string value).
    pub key: Vec<(&'static str, String)>,
    pub attr: &'static str,
}

/// An asynchronous job to enqueue (work that fans out or is heavy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutMessage {
    /// Logical queue name, mapped to a URL by configuration.
    pub queue: &'static str,
    pub body: String,
}

/// What a model derives from an item's state. Pure functions: no I/O.
pub trait DeriveRules: Send + Sync {
    /// The table's key attribute names (partition key first).
    fn key_names(&self) -> &'static [&'static str];

    /// Processor-owned attributes this item should carry, or `None` when the
    /// item has none (or is not this model's business).
    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError>;

    /// What this item, in this state, contributes to counters.
    fn contributions(&self, image: &Item) -> Result<Vec<(Counter, i64)>, InputError>;

    /// Jobs this change starts (enqueued after its other effects). Consumers
    /// of these queues must be idempotent: a redelivered record enqueues again.
    fn messages(&self, _change: &Change) -> Result<Vec<OutMessage>, InputError> {
        Ok(vec![])
    }
}

/// The SET/REMOVE needed to bring `image` to `projection`, or `None` when the
/// image already carries the computed values (the fixpoint).
pub fn projection_update(
    key_names: &[&str],
    image: &Item,
    projection: &Projection,
) -> Option<Update> {
    let mut sets = Vec::new();
    let mut removes = Vec::new();
    let mut names = Vec::new();
    let mut values = Vec::new();
    for (i, (attr, want)) in projection.attrs.iter().enumerate() {
        let have = image.get(*attr);
        if have == want.as_ref() {
            continue;
        }
        names.push((format!("#p{i}"), attr.to_string()));
        match want {
            Some(v) => {
                sets.push(format!("#p{i} = :p{i}"));
                values.push((format!(":p{i}"), v.clone()));
            }
            None => removes.push(format!("#p{i}")),
        }
    }
    if sets.is_empty() && removes.is_empty() {
        return None;
    }
    let mut conditions = vec!["attribute_exists(#k0)".to_string()];
    names.push(("#k0".to_string(), key_names[0].to_string()));
    for (i, src) in projection.sources.iter().enumerate() {
        names.push((format!("#s{i}"), src.to_string()));
        match image.get(*src) {
            Some(v) => {
                conditions.push(format!("#s{i} = :s{i}"));
                values.push((format!(":s{i}"), v.clone()));
            }
            None => conditions.push(format!("attribute_not_exists(#s{i})")),
        }
    }
    let mut expr = String::new();
    if !sets.is_empty() {
        expr.push_str("SET ");
        expr.push_str(&sets.join(", "));
    }
    if !removes.is_empty() {
        if !expr.is_empty() {
            expr.push(' ');
        }
        expr.push_str("REMOVE ");
        expr.push_str(&removes.join(", "));
    }
    Some(Update {
        key: crate::item::key_of(image, key_names),
        update_expression: expr,
        condition_expression: Some(conditions.join(" AND ")),
        names,
        values,
    })
}

/// Configuration of a derive processor.
#[derive(Debug, Clone)]
pub struct DeriveConfig {
    pub table: String,
    pub ledger_table: String,
    /// Guarded projection writes in flight at once (distinct items).
    pub concurrency: usize,
    /// Logical queue name -> queue URL, for [`DeriveRules::messages`].
    pub queues: BTreeMap<String, String>,
}

/// The derive stream processor over any [`DeriveRules`].
pub struct DeriveProcessor<R> {
    rules: R,
    store: Store,
    sqs: Option<aws_sdk_sqs::Client>,
    config: DeriveConfig,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

impl<R: DeriveRules> DeriveProcessor<R> {
    pub fn new(rules: R, store: Store, config: DeriveConfig) -> Self {
        Self {
            rules,
            store,
            sqs: None,
            config,
            metrics: Metrics::default(),
            now: Utc::now,
        }
    }

    /// Enables [`DeriveRules::messages`] through this SQS client.
    pub fn with_sqs(mut self, client: aws_sdk_sqs::Client) -> Self {
        self.sqs = Some(client);
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Sends the messages of records before `limit`, in record order, one
    /// SendMessageBatch per queue and 10 messages. Returns the index of the
    /// first record whose message could not be sent.
    async fn send_messages(
        &self,
        messages: &[(usize, OutMessage)],
        limit: usize,
    ) -> Result<(), BatchFailure> {
        let mut by_queue: BTreeMap<&str, Vec<(usize, String)>> = BTreeMap::new();
        for (i, m) in messages.iter().filter(|(i, _)| *i < limit) {
            by_queue
                .entry(m.queue)
                .or_default()
                .push((*i, m.body.clone()));
        }
        let mut first: Option<BatchFailure> = None;
        for (queue, items) in by_queue {
            let (Some(client), Some(url)) = (&self.sqs, self.config.queues.get(queue)) else {
                let index = items[0].0;
                let error =
                    ProcessError::Permanent(format!("no URL configured for queue `{queue}`"));
                if first.as_ref().is_none_or(|f| index < f.index) {
                    first = Some(BatchFailure { index, error });
                }
                continue;
            };
            let bodies: Vec<String> = items.iter().map(|(_, b)| b.clone()).collect();
            if let Err((pos, e)) = crate::sqs::send_all(client, url, &bodies).await {
                let index = items[pos].0;
                if first.as_ref().is_none_or(|f| index < f.index) {
                    first = Some(BatchFailure {
                        index,
                        error: e.into(),
                    });
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Backfill of existing items, as synthetic INSERTs through the same
    /// rules: guarded projections, counter contributions filled only where
    /// none is recorded (so a second run, or the stream processor running
    /// meanwhile, never counts an item twice), and the jobs an INSERT
    /// starts. Returns (projection writes, counter actions, messages).
    pub async fn backfill(
        &self,
        items: &[Item],
        dry_run: bool,
    ) -> Result<(usize, usize, usize), ProcessError> {
        let key_names = self.rules.key_names();
        let changes: Vec<Change> = items
            .iter()
            .map(|item| Change {
                event_id: format!(
                    "backfill:{}",
                    display_key(&crate::item::key_of(item, key_names))
                ),
                sequence_number: crate::change::SequenceNumber::parse("0")
                    .expect("0 is a sequence number"),
                kind: ChangeKind::Insert,
                origin: crate::change::Origin::User,
                keys: crate::item::key_of(item, key_names),
                old: None,
                new: Some(item.clone()),
                at: (self.now)(),
            })
            .collect();
        let mut updates = Vec::new();
        let mut messages = Vec::new();
        let mut bad = std::collections::HashSet::new();
        for (i, (item, change)) in items.iter().zip(&changes).enumerate() {
            let planned = (|| -> Result<_, InputError> {
                let u = self
                    .rules
                    .projection(item)?
                    .and_then(|p| projection_update(key_names, item, &p));
                Ok((u, self.rules.messages(change)?))
            })();
            match planned {
                Ok((u, m)) => {
                    updates.extend(u);
                    messages.extend(m.into_iter().map(|m| (i, m)));
                }
                Err(e) => {
                    bad.insert(i);
                    tracing::warn!(key = %change.key_display(), kind = e.kind(), reason = %e, "backfill: skipping item");
                }
            }
        }
        let (targets, unreadable) = self.count_targets(&changes, &bad);
        for (i, e) in unreadable {
            tracing::warn!(key = %changes[i].key_display(), kind = e.kind(), reason = %e, "backfill: not counting item");
        }
        if dry_run {
            return Ok((
                updates.len(),
                targets.iter().filter(|t| t.value != 0).count(),
                messages.len(),
            ));
        }
        let n_updates = updates.len();
        for u in updates {
            self.store.update(&self.config.table, u).await?;
        }
        let settled = settle(
            &self.store,
            &self.config.table,
            &self.config.ledger_table,
            self.name(),
            targets,
            Mode::FillAbsent,
            (self.now)(),
        )
        .await
        .map_err(|f| f.error)?;
        self.send_messages(&messages, usize::MAX)
            .await
            .map_err(|f| f.error)?;
        Ok((n_updates, settled.written, messages.len()))
    }

    /// The contributions each item of the batch should have now (its last
    /// change in the batch), for every counter any of its images touches.
    /// Each image's contributions are computed once; a record whose images
    /// cannot be read is left out and returned with its error.
    fn count_targets(
        &self,
        changes: &[Change],
        skip: &std::collections::HashSet<usize>,
    ) -> (Vec<Target>, Vec<(usize, InputError)>) {
        let mut errors = Vec::new();
        // item key -> (index of its last readable change, what it contributes after it)
        let mut last: HashMap<String, (usize, BTreeMap<Counter, i64>)> = HashMap::new();
        let mut touched: HashMap<String, std::collections::BTreeSet<Counter>> = HashMap::new();
        for (i, c) in changes.iter().enumerate() {
            if skip.contains(&i) {
                continue;
            }
            let read = |img: &Option<Item>| -> Result<Vec<(Counter, i64)>, InputError> {
                img.as_ref()
                    .map_or(Ok(Vec::new()), |img| self.rules.contributions(img))
            };
            let (old, new) = match (read(&c.old), read(&c.new)) {
                (Ok(old), Ok(new)) => (old, new),
                (Err(e), _) | (_, Err(e)) => {
                    errors.push((i, e));
                    continue;
                }
            };
            let key = display_key(&c.keys);
            let seen = touched.entry(key.clone()).or_default();
            seen.extend(old.iter().chain(&new).map(|(c, _)| c.clone()));
            let now = match c.kind {
                ChangeKind::Remove => BTreeMap::new(),
                _ => new.into_iter().collect(),
            };
            last.insert(key, (i, now));
        }
        let mut targets = Vec::new();
        for (key, (index, now)) in last {
            for counter in touched.remove(&key).unwrap_or_default() {
                let value = now.get(&counter).copied().unwrap_or(0);
                targets.push(Target {
                    index,
                    item_key: key.clone(),
                    counter,
                    value,
                });
            }
        }
        (targets, errors)
    }
}

impl<R: DeriveRules> StreamProcessor for DeriveProcessor<R> {
    fn name(&self) -> &'static str {
        "derive"
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(
        &self,
        changes: &[Change],
        metrics: &mut BatchMetrics,
    ) -> Result<(), BatchFailure> {
        let key_names = self.rules.key_names();
        // Pure part: what each change implies.
        let mut projections: HashMap<String, (usize, Option<Update>)> = HashMap::new();
        let mut bad = std::collections::HashSet::new();
        let mut messages: Vec<(usize, OutMessage)> = Vec::new();
        for (index, change) in changes.iter().enumerate() {
            let key = display_key(&change.keys);
            let planned = (|| -> Result<_, InputError> {
                let update = match (&change.kind, &change.new) {
                    (ChangeKind::Remove, _) | (_, None) => None,
                    (_, Some(new)) => self
                        .rules
                        .projection(new)?
                        .and_then(|p| projection_update(key_names, new, &p)),
                };
                Ok((update, self.rules.messages(change)?))
            })();
            match planned {
                Ok((update, out)) => {
                    messages.extend(out.into_iter().map(|m| (index, m)));
                    // Only the latest change of an item matters for its
                    // projection: earlier ones are superseded by it.
                    projections.insert(key, (index, update));
                }
                Err(e) => {
                    bad.insert(index);
                    log_bad_input(self.name(), &change.event_id, &e, metrics);
                }
            }
        }
        // Projections: distinct items, independent, guarded.
        let mut updates: Vec<(usize, Update)> = projections
            .into_values()
            .filter_map(|(i, u)| u.map(|u| (i, u)))
            .collect();
        updates.sort_by_key(|(i, _)| *i);
        let table = &self.config.table;
        let results: Vec<(usize, Result<Written, _>)> = stream::iter(updates)
            .map(|(i, u)| async move { (i, self.store.update(table, u).await) })
            .buffer_unordered(self.config.concurrency.max(1))
            .collect()
            .await;
        let mut first_failure: Option<BatchFailure> = None;
        for (i, r) in results {
            match r {
                Ok(Written::Applied) => {}
                Ok(Written::ConditionFailed) => {
                    tracing::debug!(key = %changes[i].key_display(), "projection superseded by a newer write");
                }
                Err(e) => {
                    if first_failure.as_ref().is_none_or(|f| i < f.index) {
                        first_failure = Some(BatchFailure {
                            index: i,
                            error: e.into(),
                        });
                    }
                }
            }
        }
        let limit = first_failure.as_ref().map_or(usize::MAX, |f| f.index);
        // Counters: every item settles to its contribution after its last
        // change in the batch (items whose last change is not below a failed
        // record are redelivered and settle then).
        let (targets, unreadable) = self.count_targets(changes, &bad);
        for (index, e) in unreadable {
            log_bad_input(self.name(), &changes[index].event_id, &e, metrics);
        }
        let targets: Vec<Target> = targets.into_iter().filter(|t| t.index < limit).collect();
        let now = (self.now)();
        let settled = settle(
            &self.store,
            &self.config.table,
            &self.config.ledger_table,
            self.name(),
            targets,
            Mode::Live,
            now,
        )
        .await?;
        for _ in 0..settled.already {
            metrics.incr(names::DUPLICATE);
        }
        // Jobs go last: a consumer that runs before our other effects landed
        // would see stale state.
        let sent = self.send_messages(&messages, limit).await;
        match (first_failure, sent) {
            (Some(a), Err(b)) => Err(if b.index < a.index { b } else { a }),
            (Some(f), Ok(())) | (None, Err(f)) => Err(f),
            (None, Ok(())) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::s;

    fn image(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    fn projection() -> Projection {
        Projection {
            attrs: vec![("G", Some(s("x#1"))), ("H", None)],
            sources: vec!["x", "y"],
        }
    }

    #[test]
    fn no_update_when_image_already_projected() {
        let img = image(&[("PK", s("a")), ("x", s("1")), ("G", s("x#1"))]);
        assert!(projection_update(&["PK", "SK"], &img, &projection()).is_none());
    }

    #[test]
    fn update_sets_removes_and_guards_sources() {
        let img = image(&[
            ("PK", s("a")),
            ("SK", s("b")),
            ("x", s("1")),
            ("H", s("old")),
        ]);
        let u = projection_update(&["PK", "SK"], &img, &projection()).unwrap();
        assert_eq!(u.update_expression, "SET #p0 = :p0 REMOVE #p1");
        assert_eq!(
            u.condition_expression.as_deref(),
            Some("attribute_exists(#k0) AND #s0 = :s0 AND attribute_not_exists(#s1)")
        );
        assert_eq!(u.key.len(), 2);
        assert!(u.values.contains(&(":s0".to_string(), s("1"))));
        assert!(u.values.contains(&(":p0".to_string(), s("x#1"))));
    }
}
