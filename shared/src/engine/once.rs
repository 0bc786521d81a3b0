//! Once effects: writes that must happen at most once per key (a match per
//! seeker and job), given preconditions.
//!
//! One transaction holds a permanent marker in the ledger
//! (`ONCE#<consumer>#<key>`, `attribute_not_exists`), a condition check per
//! precondition, and the writes. A duplicate (however late, whatever its
//! body's other fields) fails the marker's condition and ends as
//! [`Outcome::Duplicate`]; a failed precondition ends as a logged
//! [`Outcome::Skipped`] instead of retrying forever, and leaves the marker
//! with `skipped` (what `explain` shows). A skipped marker is no effect
//! made: `verify` calls the effect missing once its preconditions hold
//! (a required item written after the source), and the effect's next job
//! (its repair, or its source changed into `when` again) takes it over.

use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use chrono::Utc;

use super::setjob::{condition_check, BoxFut, Guard, Reads};
use crate::item::{s, Item};
use crate::ledger;
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{Store, TxError};
use crate::tx;

/// What a once effect wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OncePlan {
    /// The key the effect is unique for (e.g. `<seekerId>#<jobId>`).
    pub once_key: String,
    /// Preconditions, each with the reason logged when it fails.
    pub checks: Vec<(Guard, String)>,
    pub puts: Vec<Item>,
    pub deletes: Vec<Item>,
}

/// A once rule.
pub trait Once: Send + Sync {
    fn name(&self) -> &'static str;
    fn key_names(&self) -> &'static [&'static str];
    /// Decodes the body (bad body: `MessageError::Permanent`) and says what
    /// to do; it may read (consistently) through `reads`.
    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<OncePlan, MessageError>>;
}

/// Ledger key of a once marker (bounded like every ledger key:
/// [`ledger::bounded_pk`]).
pub fn marker_key(consumer: &str, once_key: &str) -> Item {
    ledger::key(
        ledger::bounded_pk(&format!("ONCE#{consumer}#"), once_key),
        "ONCE",
    )
}

/// The SQS consumer of a [`Once`] rule.
pub struct OnceProcessor {
    rule: Arc<dyn Once>,
    reads: Reads,
    metrics: Metrics,
}

impl OnceProcessor {
    pub fn new(rule: Arc<dyn Once>, store: Store, table: &str, ledger_table: &str) -> Self {
        Self {
            rule,
            reads: Reads {
                store,
                table: table.into(),
                ledger_table: ledger_table.into(),
                now: Utc::now(),
            },
            metrics: Metrics::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.reads.store
    }

    fn actions(&self, plan: &OncePlan) -> Vec<TransactWriteItem> {
        let table = &self.reads.table;
        let key0 = self.rule.key_names()[0];
        let mut marker = marker_key(self.rule.name(), &plan.once_key);
        marker.insert("at".into(), s(self.reads.now.to_rfc3339()));
        let mut actions = vec![self.marker_put(marker)];
        for (g, _) in &plan.checks {
            actions.push(condition_check(&[g], table, &self.reads.ledger_table, key0));
        }
        actions.extend(plan.puts.iter().map(|p| tx::put(table, p.clone())));
        actions.extend(plan.deletes.iter().map(|k| tx::delete(table, k.clone())));
        actions
    }
}

impl OnceProcessor {
    /// The put of an effect's marker: where no marker is, or over a
    /// skipped one (never over the marker of an effect made).
    fn marker_put(&self, marker: Item) -> TransactWriteItem {
        tx::put_of(
            Put::builder()
                .table_name(&self.reads.ledger_table)
                .set_item(Some(marker))
                .condition_expression("attribute_not_exists(pk) OR #skipped = :skipped")
                .expression_attribute_names("#skipped", SKIPPED)
                .expression_attribute_values(":skipped", AttributeValue::Bool(true)),
        )
    }

    /// Records a skipped effect: its marker with `skipped`, unless the
    /// effect was made meanwhile (a made marker is never overwritten).
    async fn mark_skipped(&self, plan: &OncePlan) -> Result<(), MessageError> {
        let mut marker = marker_key(self.rule.name(), &plan.once_key);
        marker.insert("at".into(), s(Utc::now().to_rfc3339()));
        marker.insert(SKIPPED.into(), AttributeValue::Bool(true));
        match self
            .reads
            .store
            .transact(vec![self.marker_put(marker)])
            .await
        {
            Ok(()) | Err(TxError::ConditionsFailed { .. }) => Ok(()),
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }
}

/// The marker attribute of an effect skipped for a failed precondition.
pub const SKIPPED: &str = "skipped";

impl MessageProcessor for OnceProcessor {
    fn name(&self) -> &'static str {
        self.rule.name()
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        let mut reads = self.reads.clone();
        reads.now = Utc::now();
        let plan = self.rule.plan(body, &reads).await?;
        match self.reads.store.transact(self.actions(&plan)).await {
            Ok(()) => Ok(Outcome::Applied),
            Err(TxError::ConditionsFailed { failed }) => {
                if failed.first() == Some(&true) {
                    return Ok(Outcome::Duplicate);
                }
                let reason = plan
                    .checks
                    .iter()
                    .enumerate()
                    .find(|(i, _)| failed.get(i + 1) == Some(&true))
                    .map(|(_, (_, r))| r.clone())
                    .unwrap_or_else(|| "a precondition does not hold".into());
                self.mark_skipped(&plan).await?;
                Ok(Outcome::Skipped(reason))
            }
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }
}
