//! The matches Lambda: an approved request becomes exactly one match item,
//! and the pair's suggestion goes, in one transaction.
//!
//! Exactly one match per (seeker, job) however often and however late the
//! job is delivered, and whatever the approval day: the transaction also puts
//! a pair marker in the ledger (`MATCH#<seekerId>#<jobId>`, no TTL) with
//! `attribute_not_exists`. A request no longer approved, or a job or seeker
//! that no longer exists, ends the message with a logged outcome instead of
//! retrying it forever.

use aws_sdk_dynamodb::types::{ConditionCheck, Delete, Put, TransactWriteItem};

use super::keys;
use super::messages::{decode, MatchJob};
use super::suggestions::body_error;
use crate::item::{s, Item};
use crate::ledger;
use crate::metrics::Metrics;
use crate::sqs::{MessageError, MessageProcessor, Outcome};
use crate::store::{Store, TxError};

pub struct MatchesProcessor {
    store: Store,
    table: String,
    ledger_table: String,
    metrics: Metrics,
}

fn key(pk: String, sk: String) -> Item {
    [(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(sk))].into()
}

/// The match item of an approved request.
pub fn match_item(m: &MatchJob) -> Item {
    [
        (keys::PK, s(keys::seeker_pk(&m.seeker_id))),
        (keys::SK, s(keys::match_sk(&m.matched_at, &m.job_id))),
        (keys::ENTITY_TYPE, s("match")),
        (keys::GSI1PK, s(keys::employer_pk(&m.employer_id))),
        (
            keys::GSI1SK,
            s(keys::match_gsi1sk(&m.matched_at, &m.job_id, &m.seeker_id)),
        ),
        ("jobId", s(&m.job_id)),
        ("seekerId", s(&m.seeker_id)),
        ("employerId", s(&m.employer_id)),
        ("city", s(&m.city)),
        ("postedAt", s(&m.posted_at)),
        ("zip", s(&m.zip)),
        ("matchedAt", s(&m.matched_at)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl MatchesProcessor {
    pub fn new(store: Store, table: &str, ledger_table: &str) -> Self {
        Self {
            store,
            table: table.into(),
            ledger_table: ledger_table.into(),
            metrics: Metrics::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn actions(&self, m: &MatchJob) -> Vec<TransactWriteItem> {
        let check = |k: Item, cond: &str| {
            let mut c = ConditionCheck::builder()
                .table_name(&self.table)
                .set_key(Some(k))
                .condition_expression(cond);
            if cond.contains(":approved") {
                c = c
                    .expression_attribute_names("#st", "status")
                    .expression_attribute_values(":approved", s("approved"));
            }
            TransactWriteItem::builder()
                .condition_check(c.build().expect("set"))
                .build()
        };
        let mut marker = ledger::key(format!("MATCH#{}#{}", m.seeker_id, m.job_id), "PAIR");
        marker.insert(
            "matchSk".into(),
            s(keys::match_sk(&m.matched_at, &m.job_id)),
        );
        vec![
            // 0: the request is still approved
            check(
                key(
                    keys::employer_pk(&m.employer_id),
                    keys::request_sk(&m.job_id, &m.seeker_id),
                ),
                "#st = :approved",
            ),
            // 1: the job exists
            check(
                key(
                    keys::job_pk(&m.city),
                    keys::job_sk(&m.posted_at, &m.zip, &m.job_id),
                ),
                "attribute_exists(pk)",
            ),
            // 2: the seeker exists
            check(
                key(keys::seeker_pk(&m.seeker_id), keys::PROFILE_SK.into()),
                "attribute_exists(pk)",
            ),
            // 3: one match per pair, ever
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.ledger_table)
                        .set_item(Some(marker))
                        .condition_expression("attribute_not_exists(pk)")
                        .build()
                        .expect("set"),
                )
                .build(),
            // 4: the match
            TransactWriteItem::builder()
                .put(
                    Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(match_item(m)))
                        .condition_expression("attribute_not_exists(pk)")
                        .build()
                        .expect("set"),
                )
                .build(),
            // 5: the pair's suggestion goes
            TransactWriteItem::builder()
                .delete(
                    Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(key(
                            keys::job_pk(&m.city),
                            keys::suggestion_sk(&m.job_id, &m.seeker_id),
                        )))
                        .build()
                        .expect("set"),
                )
                .build(),
        ]
    }
}

impl MessageProcessor for MatchesProcessor {
    fn name(&self) -> &'static str {
        "matches"
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    async fn process(&self, body: &str) -> Result<Outcome, MessageError> {
        let m: MatchJob = decode(body).map_err(body_error)?;
        match self.store.transact(self.actions(&m)).await {
            Ok(()) => Ok(Outcome::Applied),
            Err(TxError::ConditionsFailed { failed }) => {
                let pair = format!("seeker {} / job {}", m.seeker_id, m.job_id);
                Ok(
                    if failed.get(3).copied().unwrap_or(false)
                        || failed.get(4).copied().unwrap_or(false)
                    {
                        Outcome::Duplicate
                    } else if failed[0] {
                        Outcome::Skipped(format!(
                            "{pair}: the request is no longer approved (or gone)"
                        ))
                    } else if failed[1] {
                        Outcome::Skipped(format!("{pair}: the job no longer exists"))
                    } else {
                        Outcome::Skipped(format!("{pair}: the seeker no longer exists"))
                    },
                )
            }
            Err(TxError::Store(e)) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::ItemExt;

    #[test]
    fn match_item_keys() {
        let m = MatchJob {
            employer_id: "301".into(),
            job_id: "101".into(),
            seeker_id: "201".into(),
            city: "montreal".into(),
            posted_at: "2026-11-01".into(),
            zip: "H2X".into(),
            matched_at: "2026-11-03".into(),
        };
        let i = match_item(&m);
        assert_eq!(i.s("pk").unwrap(), "seeker#201");
        assert_eq!(i.s("sk").unwrap(), "j#2026-11-03#101");
        assert_eq!(i.s("GSI1PK").unwrap(), "employer#301");
        assert_eq!(i.s("GSI1SK").unwrap(), "m#2026-11-03#101#201");
        assert_eq!(i.s("entityType").unwrap(), "match");
        assert_eq!(i.len(), 12);
    }
}
