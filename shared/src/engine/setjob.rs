//! Set jobs: queue consumers that keep the set of items of a scope (a post's
//! timeline entries, a job's suggestions, an event's prediction scores)
//! equal to what consistent reads of the facts imply.
//!
//! The rule ([`SetJob::plan`]) reads the facts and says which items should
//! exist and which exist now, each with the facts ([`Guard`]s) it depends
//! on. The engine writes only the difference, and every write that depends
//! on a fact is conditioned on it in the same transaction: a late or
//! duplicated job, or one racing a newer fact, never resurrects what a newer
//! fact removed nor removes what a newer fact created. A failed guard means a
//! newer fact won (its own job fixes the scope): that write is dropped, the
//! others go on.
//!
//! Scopes overlap (a job's suggestions and a seeker's share their pair's)
//! and their jobs run concurrently (a batch's messages, Lambda's
//! invocations), so each write is also conditioned on its target as the
//! plan read it: a put of an item read absent on its absence, a put of an
//! item read otherwise on the attributes it changes being as read, a
//! delete on the item's existence. When that fails, another job wrote the target
//! since: an item now equal to the desired one (the volatile attributes
//! aside), or one already deleted, is left as it is (nothing is written
//! twice, [`Applied::raced`]); a different item is overwritten with what
//! the facts imply, guarded by them alone.
//!
//! Delivery is at-least-once, in any order; a job is idempotent because it
//! re-reads the facts each time.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};
use chrono::{DateTime, Utc};

use super::rules::OutMessage;
use crate::item::{key_of, same_value, Item};
use crate::ledger::item_id;
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{placeholders, Store, TxError};

/// A boxed future (rules with reads are trait objects).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a guard requires of an item.
#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    Exists,
    Absent,
    /// The item exists and `attr = value`.
    Equals(&'static str, AttributeValue),
    /// The item is absent, or `attr <> value`.
    AbsentOrNot(&'static str, AttributeValue),
    /// The item exists without `attr`.
    Missing(&'static str),
    /// The item exists with these attributes as they were read (`None`:
    /// absent): the target of a put as its job read it.
    Unchanged(Vec<(String, Option<AttributeValue>)>),
    /// The item is absent, or `attr` is `true` (a once marker of an effect
    /// skipped, no effect made).
    AbsentOrFlagged(&'static str),
    /// The item exists without `attr` being `true` (a once marker of an
    /// effect made).
    PresentUnflagged(&'static str),
}

/// A fact a write depends on: checked in the same transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    /// In the ledger table (e.g. a pair marker) rather than the model table.
    pub ledger: bool,
    pub key: Item,
    pub cond: Cond,
}

impl Guard {
    fn on(key: Item, cond: Cond) -> Self {
        Self {
            ledger: false,
            key,
            cond,
        }
    }
    pub fn exists(key: Item) -> Self {
        Self::on(key, Cond::Exists)
    }
    pub fn absent(key: Item) -> Self {
        Self::on(key, Cond::Absent)
    }
    pub fn equals(key: Item, attr: &'static str, value: AttributeValue) -> Self {
        Self::on(key, Cond::Equals(attr, value))
    }
    pub fn absent_or_not(key: Item, attr: &'static str, value: AttributeValue) -> Self {
        Self::on(key, Cond::AbsentOrNot(attr, value))
    }
    /// The item exists and `attr` is as read (`None`: absent).
    pub fn same(key: Item, attr: &'static str, value: Option<&AttributeValue>) -> Self {
        let cond = match value {
            Some(v) => Cond::Equals(attr, v.clone()),
            None => Cond::Missing(attr),
        };
        Self::on(key, cond)
    }
    /// The item exists with `attrs` as read (`None`: absent).
    pub fn unchanged(key: Item, attrs: Vec<(String, Option<AttributeValue>)>) -> Self {
        Self::on(key, Cond::Unchanged(attrs))
    }
    /// A once marker (in the ledger) of an effect made: present and not
    /// `skipped`.
    pub fn made(key: Item) -> Self {
        Self::on(key, Cond::PresentUnflagged(super::once::SKIPPED)).in_ledger()
    }
    /// A once marker (in the ledger) of no effect made: absent, or
    /// `skipped`.
    pub fn not_made(key: Item) -> Self {
        Self::on(key, Cond::AbsentOrFlagged(super::once::SKIPPED)).in_ledger()
    }
    /// The same guard on the ledger table.
    pub fn in_ledger(mut self) -> Self {
        self.ledger = true;
        self
    }

    /// Whether `item` (absent: `None`) satisfies the guard now.
    pub fn holds(&self, item: Option<&Item>) -> bool {
        match (&self.cond, item) {
            (Cond::Exists, i) => i.is_some(),
            (Cond::Absent, i) => i.is_none(),
            (Cond::Equals(a, v), Some(i)) => i.get(*a).is_some_and(|h| same_value(h, v)),
            (Cond::Equals(..), None) => false,
            (Cond::AbsentOrNot(a, v), Some(i)) => !i.get(*a).is_some_and(|h| same_value(h, v)),
            (Cond::AbsentOrNot(..), None) => true,
            (Cond::Missing(a), Some(i)) => !i.contains_key(*a),
            (Cond::Missing(_), None) => false,
            (Cond::Unchanged(attrs), Some(i)) => attrs.iter().all(|(a, v)| match v {
                Some(v) => i.get(a).is_some_and(|h| same_value(h, v)),
                None => !i.contains_key(a),
            }),
            (Cond::Unchanged(_), None) => false,
            (Cond::AbsentOrFlagged(a), i) => i.is_none_or(|i| flagged(i, a)),
            (Cond::PresentUnflagged(a), i) => i.is_some_and(|i| !flagged(i, a)),
        }
    }
}

/// Whether `attr` of `item` is `true`.
fn flagged(item: &Item, attr: &str) -> bool {
    matches!(item.get(attr), Some(AttributeValue::Bool(true)))
}

/// A condition expression with its placeholders, numbered from `n`.
pub(crate) struct Expr {
    pub text: String,
    pub names: Vec<(String, String)>,
    pub values: Vec<(String, AttributeValue)>,
}

/// The condition of several guards on one item, ANDed.
pub(crate) fn condition(guards: &[&Guard], key_name: &str) -> Expr {
    let mut parts = Vec::new();
    let mut names = vec![("#k0".to_string(), key_name.to_string())];
    let mut values = Vec::new();
    for (i, g) in guards.iter().enumerate() {
        match &g.cond {
            Cond::Exists => parts.push("attribute_exists(#k0)".to_string()),
            Cond::Absent => parts.push("attribute_not_exists(#k0)".to_string()),
            Cond::Equals(a, v) => {
                parts.push(format!("#g{i} = :g{i}"));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), v.clone()));
            }
            Cond::AbsentOrNot(a, v) => {
                parts.push(format!("(attribute_not_exists(#k0) OR #g{i} <> :g{i})"));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), v.clone()));
            }
            Cond::Missing(a) => {
                parts.push(format!(
                    "attribute_exists(#k0) AND attribute_not_exists(#g{i})"
                ));
                names.push((format!("#g{i}"), a.to_string()));
            }
            Cond::AbsentOrFlagged(a) => {
                parts.push(format!("(attribute_not_exists(#k0) OR #g{i} = :g{i})"));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), AttributeValue::Bool(true)));
            }
            Cond::PresentUnflagged(a) => {
                parts.push(format!(
                    "attribute_exists(#k0) AND (attribute_not_exists(#g{i}) OR #g{i} <> :g{i})"
                ));
                names.push((format!("#g{i}"), a.to_string()));
                values.push((format!(":g{i}"), AttributeValue::Bool(true)));
            }
            Cond::Unchanged(attrs) => {
                parts.push("attribute_exists(#k0)".to_string());
                for (j, (a, v)) in attrs.iter().enumerate() {
                    names.push((format!("#g{i}_{j}"), a.clone()));
                    match v {
                        Some(v) => {
                            parts.push(format!("#g{i}_{j} = :g{i}_{j}"));
                            values.push((format!(":g{i}_{j}"), v.clone()));
                        }
                        None => parts.push(format!("attribute_not_exists(#g{i}_{j})")),
                    }
                }
            }
        }
    }
    let text = parts.join(" AND ");
    if !text.contains("#k0") {
        // DynamoDB refuses placeholders the expression does not use.
        names.retain(|(k, _)| k != "#k0");
    }
    Expr {
        text,
        names,
        values,
    }
}

/// The condition check of guards on one item (of the model table, or of
/// the ledger), for a transaction.
pub(crate) fn condition_check(
    guards: &[&Guard],
    table: &str,
    ledger_table: &str,
    key_name: &str,
) -> TransactWriteItem {
    let g = guards[0];
    let (t, kn) = if g.ledger {
        (ledger_table, crate::ledger::PK)
    } else {
        (table, key_name)
    };
    let e = condition(guards, kn);
    crate::tx::check_of(
        ConditionCheck::builder()
            .table_name(t)
            .set_key(Some(g.key.clone()))
            .condition_expression(e.text)
            .set_expression_attribute_names(placeholders(e.names))
            .set_expression_attribute_values(placeholders(e.values)),
    )
}

/// An item of the scope and the facts it depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub item: Item,
    pub guards: Vec<Guard>,
}

/// Processor-owned attributes of an existing item to set (`Some`) or remove
/// (`None`), with the facts they were computed from. The item must exist;
/// the rule includes only what differs from what it read.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardedUpdate {
    pub key: Item,
    pub attrs: Vec<(&'static str, Option<AttributeValue>)>,
    pub guards: Vec<Guard>,
    /// Metrics the update counts when it commits (e.g. `ScoreOverflow`: a
    /// number it stores clamped into a key); nothing when a newer fact wins.
    pub notes: Vec<&'static str>,
}

/// What a set job found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Items that should exist, each with the facts its existence depends on.
    pub desired: Vec<Guarded>,
    /// Items of the scope that exist now, each with the facts its removal
    /// depends on (used only if it is not desired).
    pub existing: Vec<Guarded>,
    /// Attribute updates of items the scope does not own (e.g. the scores
    /// of writers' predictions).
    pub updates: Vec<GuardedUpdate>,
    /// Jobs to enqueue once the writes are done.
    pub then: Vec<OutMessage>,
    /// Facts of the scope that are bad input: the plan keeps what their
    /// earlier valid states implied; the consumer logs and counts each and
    /// completes (SPEC §2.7).
    pub bad_input: Vec<crate::error::InputError>,
    /// Rows a rule found to be bad input and already logged where found
    /// (key and reason); counted by the consumer, never failing the job.
    pub bad_input_logged: usize,
    /// Jobs to enqueue before the writes: the next page of a large scope,
    /// so that pages are written concurrently (a retry of this job sends
    /// it again: a duplicate page job is harmless).
    pub ahead: Vec<OutMessage>,
}

/// Read access for rules: consistent reads of the model table and ledger.
#[derive(Clone)]
pub struct Reads {
    pub store: Store,
    pub table: String,
    pub ledger_table: String,
    pub now: DateTime<Utc>,
}

/// A set job rule.
pub trait SetJob: Send + Sync {
    /// The consumer's name (logs, metrics).
    fn name(&self) -> &'static str;
    /// The model table's key names (partition key first).
    fn key_names(&self) -> &'static [&'static str];
    /// Attributes that do not make two versions of an item differ (e.g. a
    /// generation time): an existing item equal but for them is kept.
    fn volatile(&self) -> &'static [&'static str] {
        &[]
    }
    /// Reads the facts for the job in `body` and plans the scope. A body that
    /// cannot be read is `MessageError::Permanent`.
    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>>;
}

// Applying a plan: the diff's writes packed into guarded transactions.
#[path = "setjob_apply.rs"]
mod apply;
pub use apply::{apply, write_units, Applied, Refused, WRITE_CONCURRENCY};
#[cfg(test)]
use apply::{changed, pack, Op, Packed, Write};

/// The SQS consumer of a [`SetJob`].
pub struct SetJobProcessor {
    job: Arc<dyn SetJob>,
    reads: Reads,
    sqs: Option<aws_sdk_sqs::Client>,
    queues: BTreeMap<String, String>,
    metrics: Metrics,
    now: fn() -> DateTime<Utc>,
}

impl SetJobProcessor {
    pub fn new(
        job: Arc<dyn SetJob>,
        store: Store,
        table: &str,
        ledger_table: &str,
        sqs: Option<aws_sdk_sqs::Client>,
        queues: BTreeMap<String, String>,
    ) -> Self {
        Self {
            job,
            reads: Reads {
                store,
                table: table.to_string(),
                ledger_table: ledger_table.to_string(),
                now: Utc::now(),
            },
            sqs,
            queues,
            metrics: Metrics::default(),
            now: Utc::now,
        }
    }

    pub fn store(&self) -> &Store {
        &self.reads.store
    }

    /// Runs one job body to completion: its next pages are sent ahead to
    /// their queue (the queue consumer's path).
    pub async fn run(&self, body: &str) -> Result<Outcome, MessageError> {
        self.run_one(body, true).await.map(|(o, _)| o)
    }

    /// Runs a job and every page after it in this process, one after the
    /// other (`verify --repair`: a repair does not depend on the queue's
    /// consumers running). Jobs for later (`then`) are still sent.
    pub async fn run_all(&self, body: &str) -> Result<Outcome, MessageError> {
        let mut outcome = Outcome::Duplicate;
        let mut bodies = vec![body.to_string()];
        while let Some(b) = bodies.pop() {
            let (o, ahead) = self.run_one(&b, false).await?;
            if o == Outcome::Applied {
                outcome = Outcome::Applied;
            }
            bodies.extend(ahead.into_iter().map(|m| m.body));
        }
        Ok(outcome)
    }

    /// Sends `msgs` to their queues with the store's backoff; a failure
    /// is retryable (the job's message comes back).
    async fn send(
        &self,
        store: &crate::store::Store,
        msgs: impl IntoIterator<Item = OutMessage>,
    ) -> Result<(), MessageError> {
        let msgs: Vec<(usize, OutMessage)> = msgs.into_iter().map(|m| (0, m)).collect();
        crate::sqs::send_out(
            self.sqs.as_ref(),
            &store.backoff(),
            &self.queues,
            &msgs,
            usize::MAX,
        )
        .await
        .map_err(|f| MessageError::Retryable(f.error))
    }

    /// One job; the pages ahead are sent (`send_ahead`) or returned.
    async fn run_one(
        &self,
        body: &str,
        send_ahead: bool,
    ) -> Result<(Outcome, Vec<OutMessage>), MessageError> {
        let mut reads = self.reads.clone();
        reads.now = (self.now)();
        let mut plan = self.job.plan(body, &reads).await?;
        if !plan.bad_input.is_empty() || plan.bad_input_logged > 0 {
            let mut bad = crate::metrics::BatchMetrics::default();
            for e in &plan.bad_input {
                tracing::warn!(processor = self.job.name(), kind = e.kind(), reason = %e, "bad input in the job's scope: what it implied is kept");
                bad.incr(crate::metrics::names::BAD_INPUT);
            }
            for _ in 0..plan.bad_input_logged {
                bad.incr(crate::metrics::names::BAD_INPUT);
            }
            self.metrics.record(self.job.name(), &bad);
        }
        let ahead = std::mem::take(&mut plan.ahead);
        if send_ahead && !ahead.is_empty() {
            self.send(&reads.store, ahead.iter().cloned()).await?;
        }
        let ahead = if send_ahead { Vec::new() } else { ahead };
        let applied = apply(
            &reads.store,
            &reads.table,
            &reads.ledger_table,
            self.job.key_names(),
            self.job.volatile(),
            &plan,
        )
        .await?;
        if !applied.noted.0.is_empty() {
            self.metrics.record(self.job.name(), &applied.noted);
        }
        if !applied.refused.is_empty() {
            // The error policy's skip (as the stream processors'): bad
            // input of its target, counted once, the message completes.
            let mut bad = crate::metrics::BatchMetrics::default();
            for r in &applied.refused {
                tracing::warn!(processor = self.job.name(), key = %r.key, kind = "Invalid", reason = %r.reason, "bad input: DynamoDB refuses the write of this target; nothing written for it (the job's other writes are made)");
                bad.incr(crate::metrics::names::BAD_INPUT);
            }
            self.metrics.record(self.job.name(), &bad);
        }
        if !plan.then.is_empty() {
            self.send(&reads.store, plan.then).await?;
        }
        if applied.writes() > 0 {
            tracing::debug!(
                processor = self.job.name(),
                puts = applied.puts,
                deletes = applied.deletes,
                updates = applied.updates,
                write_units = applied.write_units,
                "set job applied"
            );
        }
        if applied.raced > 0 {
            tracing::debug!(
                processor = self.job.name(),
                raced = applied.raced,
                "writes found made by a concurrent job: not made again"
            );
        }
        if applied.superseded > 0 {
            tracing::info!(
                processor = self.job.name(),
                superseded = applied.superseded,
                "writes dropped: a newer fact won"
            );
        }
        let outcome = if applied.writes() == 0 {
            Outcome::Duplicate
        } else {
            Outcome::Applied
        };
        Ok((outcome, ahead))
    }
}

impl MessageProcessor for SetJobProcessor {
    fn name(&self) -> &'static str {
        self.job.name()
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        self.run(body).await
    }
}

#[cfg(test)]
#[path = "setjob_tests.rs"]
mod tests;
