//! Durable checkpoints and shard leases of the local event source mapping,
//! kept in the ledger table (no stream, TTL), one item per (mapping, shard):
//!
//! | attribute        | meaning                                                        |
//! |------------------|----------------------------------------------------------------|
//! | `pk`             | `CKPT#<mapping>#<stream ARN>` ([`checkpoint_pk`])              |
//! | `sk`             | `SHARD#<shard id>` ([`shard_sk`])                              |
//! | `leaseOwner`     | the process holding the shard                                  |
//! | `leaseExpiresAt` | epoch milliseconds; after it any process may take the shard    |
//! | `sequenceNumber` | the last record whose batch took effect (absent: none yet)     |
//! | `shardEnd`       | true once every record of a closed shard took effect           |
//! | `ttl`            | set on finished shards only (a week on: the stream is gone)    |
//!
//! The checkpoint is written after a batch's effects, never before, and only
//! while the writer still holds the lease (a conditional write), as the
//! Kinesis Client Library does: a shard is processed by one process at a
//! time, and a restart resumes at the first record not yet processed.
//! Expiry compares wall clocks of the processes: keep `lease_ttl` well above
//! their skew.

use std::time::Duration;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use shared::item::Item;

/// Turns on durable checkpoints and leases for a mapping.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    pub client: aws_sdk_dynamodb::Client,
    pub ledger_table: String,
    /// This process's identity. Unique per process unless a restarted
    /// process should take its predecessor's leases back at once.
    pub owner: String,
    /// How long a lease lasts without renewal (renewed at every checkpoint
    /// and when half of it is left).
    pub lease_ttl: Duration,
    /// Ignore stored checkpoints: read every shard from TRIM_HORIZON again
    /// (and overwrite the checkpoints as processing goes).
    pub from_start: bool,
}

impl CheckpointConfig {
    pub fn new(client: aws_sdk_dynamodb::Client, ledger_table: &str) -> Self {
        Self {
            client,
            ledger_table: ledger_table.to_string(),
            owner: default_owner(),
            lease_ttl: Duration::from_secs(20),
            from_start: false,
        }
    }
}

/// `<host>:<pid>:<random>`: unique per process.
pub fn default_owner() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &random[..8])
}

/// Partition of a mapping's checkpoints on one stream. The stream ARN (not
/// the table name) scopes them: a re-enabled stream starts afresh.
pub fn checkpoint_pk(mapping: &str, stream_arn: &str) -> String {
    format!("CKPT#{mapping}#{stream_arn}")
}

/// Sort key of one shard's checkpoint and lease.
pub fn shard_sk(shard_id: &str) -> String {
    format!("SHARD#{shard_id}")
}

mod attr {
    pub const OWNER: &str = "leaseOwner";
    pub const EXPIRES: &str = "leaseExpiresAt";
    pub const SEQ: &str = "sequenceNumber";
    pub const SHARD_END: &str = "shardEnd";
    pub const UPDATED: &str = "updatedAt";
}

/// Where a shard's processing stands, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last record that took effect.
    pub sequence_number: Option<String>,
    /// Every record of the (closed) shard took effect.
    pub shard_end: bool,
}

/// Outcome of trying to take a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// Ours until `expires_at_ms` (renew before).
    Lease {
        checkpoint: Checkpoint,
        expires_at_ms: i64,
    },
    /// Another owner holds an unexpired lease.
    Held { owner: String },
    /// The shard was completed (by anyone): nothing to take.
    Finished,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another owner took the shard (our lease had expired): stop processing it.
    #[error("lease on shard {shard} lost")]
    Lost { shard: String },
    #[error("ledger {op} on shard {shard}")]
    Store {
        op: &'static str,
        shard: String,
        #[source]
        source: Box<aws_sdk_dynamodb::Error>,
    },
}

/// The leases and checkpoints of one mapping on one stream.
#[derive(Debug, Clone)]
pub struct LeaseTable {
    config: CheckpointConfig,
    pk: String,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

impl LeaseTable {
    pub fn new(config: CheckpointConfig, mapping: &str, stream_arn: &str) -> Self {
        Self {
            pk: checkpoint_pk(mapping, stream_arn),
            config,
        }
    }

    pub fn owner(&self) -> &str {
        &self.config.owner
    }

    pub fn from_start(&self) -> bool {
        self.config.from_start
    }

    pub fn lease_ttl(&self) -> Duration {
        self.config.lease_ttl
    }

    fn expiry(&self) -> i64 {
        now_ms() + i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX / 2)
    }

    fn update(
        &self,
        shard_id: &str,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.config
            .client
            .update_item()
            .table_name(&self.config.ledger_table)
            .key(shared::ledger::PK, s(&self.pk))
            .key(shared::ledger::SK, s(&shard_sk(shard_id)))
    }

    fn store_error(
        op: &'static str,
        shard: &str,
        e: aws_sdk_dynamodb::error::SdkError<UpdateItemError>,
    ) -> LeaseError {
        LeaseError::Store {
            op,
            shard: shard.to_string(),
            source: Box::new(e.into()),
        }
    }

    /// Takes the shard if nobody holds it, we already do, or its lease has
    /// expired; returns where processing stands. `reset` (`--from-start`)
    /// forgets the stored checkpoint, completed or not.
    pub async fn acquire(&self, shard_id: &str, reset: bool) -> Result<Acquired, LeaseError> {
        let expires = self.expiry();
        let free = "(attribute_not_exists(#o) OR #o = :me OR #e < :now)";
        let req = if reset {
            self.update(shard_id)
                .update_expression("SET #o = :me, #e = :exp, #u = :now REMOVE #se, #s, #t")
                .condition_expression(free)
                .expression_attribute_names("#s", attr::SEQ)
                .expression_attribute_names("#t", shared::ledger::TTL)
        } else {
            self.update(shard_id)
                .update_expression("SET #o = :me, #e = :exp, #u = :now")
                .condition_expression(format!("attribute_not_exists(#se) AND {free}"))
        };
        let out = req
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_names("#se", attr::SHARD_END)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":exp", n(expires))
            .expression_attribute_values(":now", n(now_ms()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match out {
            Ok(out) => Ok(Acquired::Lease {
                checkpoint: checkpoint_of(out.attributes()),
                expires_at_ms: expires,
            }),
            Err(e) => match e.as_service_error() {
                Some(UpdateItemError::ConditionalCheckFailedException(c)) => {
                    let old = c.item();
                    if checkpoint_of(old).shard_end {
                        Ok(Acquired::Finished)
                    } else {
                        let owner = old
                            .and_then(|i| i.get(attr::OWNER))
                            .and_then(|v| v.as_s().ok())
                            .cloned()
                            .unwrap_or_default();
                        Ok(Acquired::Held { owner })
                    }
                }
                _ => Err(Self::store_error("acquire", shard_id, e)),
            },
        }
    }

    /// Writes the checkpoint (the last record whose batch took effect) and
    /// renews the lease; `None` renews only. Fails with [`LeaseError::Lost`]
    /// if another owner took the shard.
    pub async fn checkpoint(
        &self,
        shard_id: &str,
        sequence_number: Option<&str>,
    ) -> Result<i64, LeaseError> {
        let expires = self.expiry();
        let mut req = self
            .update(shard_id)
            .condition_expression("#o = :me")
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":exp", n(expires))
            .expression_attribute_values(":now", n(now_ms()));
        req = match sequence_number {
            Some(seq) => req
                .update_expression("SET #e = :exp, #u = :now, #s = :seq")
                .expression_attribute_names("#s", attr::SEQ)
                .expression_attribute_values(":seq", s(seq)),
            None => req.update_expression("SET #e = :exp, #u = :now"),
        };
        self.conditional(req, "checkpoint", shard_id).await?;
        Ok(expires)
    }

    /// Marks the shard completed (every record took effect) and lets the
    /// lease go.
    pub async fn finish(
        &self,
        shard_id: &str,
        sequence_number: Option<&str>,
    ) -> Result<(), LeaseError> {
        let ttl = chrono::Utc::now().timestamp() + 7 * 24 * 3600;
        let mut req = self
            .update(shard_id)
            .condition_expression("#o = :me")
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#se", attr::SHARD_END)
            .expression_attribute_names("#t", shared::ledger::TTL)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":ttl", n(ttl))
            .expression_attribute_values(":now", n(now_ms()));
        req = match sequence_number {
            Some(seq) => req
                .update_expression("SET #e = :zero, #se = :true, #t = :ttl, #u = :now, #s = :seq")
                .expression_attribute_names("#s", attr::SEQ)
                .expression_attribute_values(":seq", s(seq)),
            None => req.update_expression("SET #e = :zero, #se = :true, #t = :ttl, #u = :now"),
        };
        self.conditional(req, "finish", shard_id).await
    }

    /// Lets the lease go (at shutdown), so another process takes the shard
    /// without waiting for expiry. The checkpoint stays.
    pub async fn release(&self, shard_id: &str) -> Result<(), LeaseError> {
        let req = self
            .update(shard_id)
            .update_expression("SET #e = :zero, #u = :now")
            .condition_expression("#o = :me")
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":now", n(now_ms()));
        self.conditional(req, "release", shard_id).await
    }

    async fn conditional(
        &self,
        req: aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder,
        op: &'static str,
        shard_id: &str,
    ) -> Result<(), LeaseError> {
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e)
                if e.as_service_error()
                    .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
            {
                Err(LeaseError::Lost {
                    shard: shard_id.to_string(),
                })
            }
            Err(e) => Err(Self::store_error(op, shard_id, e)),
        }
    }

    /// Whether a lease written at `expires_at_ms` should be renewed now
    /// (less than half of it left).
    pub fn due_for_renewal(&self, expires_at_ms: i64) -> bool {
        let half = i64::try_from(self.config.lease_ttl.as_millis() / 2).unwrap_or(0);
        expires_at_ms - now_ms() < half
    }
}

fn checkpoint_of(item: Option<&Item>) -> Checkpoint {
    let Some(item) = item else {
        return Checkpoint::default();
    };
    Checkpoint {
        sequence_number: item.get(attr::SEQ).and_then(|v| v.as_s().ok()).cloned(),
        shard_end: item
            .get(attr::SHARD_END)
            .and_then(|v| v.as_bool().ok())
            .copied()
            .unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_mapping_the_stream_and_the_shard() {
        let arn = "arn:aws:dynamodb:eu-west-1:123:table/t/stream/2024-01-01T00:00:00.000";
        assert_eq!(checkpoint_pk("history", arn), format!("CKPT#history#{arn}"));
        assert_eq!(shard_sk("shardId-0001"), "SHARD#shardId-0001");
        assert_ne!(checkpoint_pk("history", arn), checkpoint_pk("derive", arn));
    }

    #[test]
    fn owners_are_unique_per_call() {
        assert_ne!(default_owner(), default_owner());
    }

    #[test]
    fn a_stored_item_reads_as_its_checkpoint() {
        let mut item = Item::new();
        item.insert(attr::SEQ.into(), s("000000000000000000042"));
        item.insert(attr::SHARD_END.into(), AttributeValue::Bool(true));
        assert_eq!(
            checkpoint_of(Some(&item)),
            Checkpoint {
                sequence_number: Some("000000000000000000042".into()),
                shard_end: true
            }
        );
        assert_eq!(checkpoint_of(None), Checkpoint::default());
    }
}
