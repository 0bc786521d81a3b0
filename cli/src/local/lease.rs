//! Durable checkpoints and fenced shard leases of the local event source
//! mapping, kept in the ledger table (no stream, TTL), one item per
//! (mapping, shard), as the Kinesis Client Library keeps its lease table:
//!
//! | attribute        | meaning                                                        |
//! |------------------|----------------------------------------------------------------|
//! | `pk`             | `CKPT#<mapping>#<stream ARN>` ([`checkpoint_pk`])              |
//! | `sk`             | `SHARD#<shard id>` ([`shard_sk`])                              |
//! | `leaseOwner`     | the process holding the shard                                  |
//! | `leaseCounter`   | KCL's lease counter: +1 at every acquisition, renewal and checkpoint; the fencing token |
//! | `leaseExpiresAt` | epoch ms on the holder's clock, for operators to read; 0: released |
//! | `sequenceNumber` | the last record whose batch took effect (absent: none yet)     |
//! | `latestFrom`     | epoch ms: `--starting-position latest` began here (first start) |
//! | `shardEnd`       | true once every record of a closed shard took effect           |
//! | `vanished`       | true: the shard left the stream before it was read to its end  |
//! | `ttl`            | set on finished shards only (a week on: the stream is gone)    |
//! | `leaseAcquisition` | a random id per acquisition (and per `vanished` closing): the writes under one lease keep it |
//! | `leaseWrite`     | a random id per write: which write the item holds now          |
//!
//! Every acquisition is a compare-and-set on the counter the taker saw (so
//! two takers of one shard cannot both win) and returns the new counter, the
//! token. Every renewal, checkpoint, completion and release is conditioned on
//! owner, token *and* the acquisition's id: a process that lost a shard (expired, stolen, or taken
//! by a second process with the same owner string) can no longer write its
//! checkpoint, and an older checkpoint never overwrites a newer one.
//!
//! A write whose answer is lost may still have landed (a connection reset
//! after the server committed, a timeout, or the SDK's retry of a write
//! whose first attempt landed, which then fails its own condition). Such a
//! failure is resolved by reading the item back (consistently): the write
//! landed iff the item holds its `leaseWrite` id; the item still carries
//! this lease's `leaseAcquisition`, with a higher counter, iff only this
//! lease's own writes moved it (an earlier write of ours whose answer was
//! lost): the counter is adopted as the token and the write sent again.
//! Anything else (another acquisition, even under our owner string) is
//! someone else's write: the lease is lost. Fencing stays exact: no write
//! of another process can carry our ids.
//!
//! Expiry is judged as the Kinesis Client Library judges it, never by
//! comparing wall clocks across hosts: renewals and checkpoints increment
//! the counter, and an observer ([`Observer`]) deems a lease expired when
//! its counter (and holder) has not moved for the lease duration, measured
//! on the observer's own monotonic clock from when it first saw that
//! counter. A process just started therefore waits one lease duration before
//! it takes a lease it never saw move. The holder stops using its lease a
//! lease duration after it *sent* its last successful renewal, which is
//! before any observer can have seen it still: no two processes both
//! believe they hold a shard, whatever their clocks say.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use shared::item::{n, s, Item};

mod observer;
pub use observer::Observer;

/// Turns on durable checkpoints and leases for a mapping.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    pub client: aws_sdk_dynamodb::Client,
    pub ledger_table: String,
    /// This process's identity. Unique per process unless a restarted
    /// process should take its predecessor's leases back at once.
    pub owner: String,
    /// How long a lease lasts without renewal (renewed every third of it,
    /// in a task of its own beside the work).
    pub lease_ttl: Duration,
    /// Ignore stored checkpoints: read every shard from TRIM_HORIZON again
    /// (and overwrite the checkpoints as processing goes).
    pub from_start: bool,
    /// Added to this host's wall clock where one is written (`updatedAt`,
    /// `leaseExpiresAt`): 0 in production; tests of clock skew set it (no
    /// lease decision reads a wall clock).
    pub clock_skew_ms: i64,
}

impl CheckpointConfig {
    pub fn new(client: aws_sdk_dynamodb::Client, ledger_table: &str) -> Self {
        Self {
            client,
            ledger_table: ledger_table.to_string(),
            owner: default_owner(),
            lease_ttl: Duration::from_secs(20),
            from_start: false,
            clock_skew_ms: 0,
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

/// The shard id of a sort key written by [`shard_sk`].
pub fn shard_of_sk(sk: &str) -> Option<&str> {
    sk.strip_prefix("SHARD#")
}

mod attr {
    pub const OWNER: &str = "leaseOwner";
    pub const COUNTER: &str = "leaseCounter";
    pub const EXPIRES: &str = "leaseExpiresAt";
    pub const SEQ: &str = "sequenceNumber";
    pub const SHARD_END: &str = "shardEnd";
    pub const VANISHED: &str = "vanished";
    pub const LATEST_FROM: &str = "latestFrom";
    pub const UPDATED: &str = "updatedAt";
    pub const ACQUISITION: &str = "leaseAcquisition";
    pub const WRITE: &str = "leaseWrite";
}

/// A fresh id for one write (or acquisition).
fn write_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Where a shard's processing stands, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// The last record that took effect.
    pub sequence_number: Option<String>,
    /// Every record of the (closed) shard took effect.
    pub shard_end: bool,
}

/// One shard's item of the lease partition, as a Query returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseItem {
    pub shard_id: String,
    pub owner: Option<String>,
    /// The fencing token of the current holder (0: never taken).
    pub counter: i64,
    pub expires_at_ms: i64,
    pub checkpoint: Checkpoint,
    pub latest_from_ms: Option<i64>,
    pub updated_at_ms: i64,
    /// The id of the acquisition the lease is held under (`None`: never
    /// taken, or written by a version without it).
    pub acquisition: Option<String>,
    /// The id of the last write.
    pub write: Option<String>,
}

impl LeaseItem {
    /// Held (not released, not completed): live unless its counter stopped
    /// moving ([`Observer::live`]).
    pub fn held(&self) -> bool {
        self.owner.is_some() && self.expires_at_ms != 0 && !self.checkpoint.shard_end
    }
}

/// A lease this process took: the token its writes are conditioned on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub token: i64,
    /// The acquisition's id: every write under the lease is checked
    /// against it when its answer is lost.
    pub acquisition: String,
    /// This process stops using the lease at this instant unless renewed
    /// (a lease duration after the acquisition was sent).
    pub valid_until: Instant,
    pub checkpoint: Checkpoint,
    pub latest_from_ms: Option<i64>,
}

/// A successful renewal (or checkpoint): the new token and how long the
/// lease is ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    pub token: i64,
    pub valid_until: Instant,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another owner (or a newer acquisition under our owner string) took the
    /// shard: stop processing it, write nothing more for it.
    #[error("lease on shard {shard} lost")]
    Lost { shard: String },
    /// Its text carries the service's answer (throttled, refused, denied,
    /// a connection closed): an operator reading the log line needs the
    /// cause, not only the step.
    #[error("ledger {op} on shard {shard}: {}", shared::error::causes(cause.as_ref()))]
    Store {
        op: &'static str,
        shard: String,
        cause: Box<aws_sdk_dynamodb::Error>,
    },
}

/// The leases and checkpoints of one mapping on one stream.
#[derive(Debug, Clone)]
pub struct LeaseTable {
    config: CheckpointConfig,
    pk: String,
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

type Update = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

/// The longest one lease call (acquisition, renewal, checkpoint, listing,
/// read-back) may take, the SDK's retries included: a third of the lease
/// duration, the interval of the renewals. A lease is renewed once less
/// than two thirds of it is left, so a renewal that fails this way leaves
/// time for another before the lease runs out; a call the engine never
/// answers cannot hold the shard (or the lock its writes share) past the
/// lease, as the stream consumers' 40 s call budget did with a 20 s lease.
pub fn lease_call_budget(lease_ttl: Duration) -> Duration {
    lease_ttl / 3
}

/// `client` with its calls bounded by [`lease_call_budget`] (each attempt
/// by half of it, so an attempt that is never answered is tried again).
/// Everything else (endpoint, credentials, retries, the runner's grant
/// check) is kept.
fn bounded_client(
    client: &aws_sdk_dynamodb::Client,
    lease_ttl: Duration,
) -> aws_sdk_dynamodb::Client {
    let budget = lease_call_budget(lease_ttl);
    let timeouts = aws_sdk_dynamodb::config::timeout::TimeoutConfig::builder()
        .connect_timeout(shared::retry::CONNECT_TIMEOUT.min(budget))
        .operation_timeout(budget)
        .operation_attempt_timeout(budget / 2)
        .build();
    aws_sdk_dynamodb::Client::from_conf(
        client
            .config()
            .to_builder()
            .timeout_config(timeouts)
            .build(),
    )
}

impl LeaseTable {
    /// The leases of `mapping` on `stream_arn`, through `config`'s client
    /// with its calls bounded by the lease duration ([`lease_call_budget`]).
    pub fn new(mut config: CheckpointConfig, mapping: &str, stream_arn: &str) -> Self {
        config.client = bounded_client(&config.client, config.lease_ttl);
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

    /// This host's wall clock (skewed in tests): written, never compared.
    fn now_ms(&self) -> i64 {
        now_ms() + self.config.clock_skew_ms
    }

    fn expiry(&self) -> i64 {
        self.now_ms() + i64::try_from(self.config.lease_ttl.as_millis()).unwrap_or(i64::MAX / 2)
    }

    fn update(&self, shard_id: &str) -> Update {
        self.config
            .client
            .update_item()
            .table_name(&self.config.ledger_table)
            .key(shared::ledger::PK, s(&self.pk))
            .key(shared::ledger::SK, s(shard_sk(shard_id)))
    }

    fn store_error<E>(op: &'static str, shard: &str, e: E) -> LeaseError
    where
        aws_sdk_dynamodb::Error: From<E>,
    {
        LeaseError::Store {
            op,
            shard: shard.to_string(),
            cause: Box::new(e.into()),
        }
    }

    /// Every lease item of the mapping: one (paged) Query, what a standby
    /// reads instead of writing one conditional update per shard.
    pub async fn list(&self) -> Result<Vec<LeaseItem>, LeaseError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .config
                .client
                .query()
                .table_name(&self.config.ledger_table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", shared::ledger::PK)
                .expression_attribute_values(":pk", s(&self.pk))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| Self::store_error("query", "*", e))?;
            out.extend(page.items().iter().filter_map(lease_item));
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// Takes the shard if its counter is still `seen` (`None`: no item yet):
    /// a compare-and-set, so of two takers one wins. `Ok(None)`: someone
    /// else moved first. `reset` (`--from-start`) forgets the stored
    /// checkpoint, completed or not. An acquisition whose answer was lost
    /// is read back: it is ours if the item holds its id.
    pub async fn take(
        &self,
        shard_id: &str,
        seen: Option<i64>,
        reset: bool,
    ) -> Result<Option<Taken>, LeaseError> {
        let sent = Instant::now();
        let expires = self.expiry();
        let id = write_id();
        let set = "SET #o = :me, #e = :exp, #u = :now, #a = :w, #w = :w ADD #c :one";
        // Items without a counter (never taken) read as counter 0.
        let unchanged = "(attribute_not_exists(#c) OR #c = :seen)";
        let req = if reset {
            // --from-start may take a completed shard again.
            self.update(shard_id)
                .update_expression(format!("{set} REMOVE #se, #s, #t"))
                .condition_expression(unchanged)
                .expression_attribute_names("#s", attr::SEQ)
                .expression_attribute_names("#t", shared::ledger::TTL)
        } else {
            self.update(shard_id)
                .update_expression(set)
                .condition_expression(format!("{unchanged} AND attribute_not_exists(#se)"))
        };
        let req = req
            .expression_attribute_values(":seen", n(seen.unwrap_or(0)))
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_names("#c", attr::COUNTER)
            .expression_attribute_names("#se", attr::SHARD_END)
            .expression_attribute_names("#a", attr::ACQUISITION)
            .expression_attribute_names("#w", attr::WRITE)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":exp", n(expires))
            .expression_attribute_values(":now", n(self.now_ms()))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":w", s(&id))
            .return_values(ReturnValue::AllNew);
        let item = match req.send().await {
            Ok(out) => out.attributes().and_then(lease_item).unwrap_or_default(),
            Err(e) => match self.read_back(shard_id, "take", &e).await {
                Some(Some(item)) if item.write.as_deref() == Some(&id) => {
                    tracing::info!(shard = shard_id, owner = %self.config.owner, "the acquisition landed though its answer was lost: the lease is ours");
                    item
                }
                _ if is_condition_failure(&e) => return Ok(None),
                _ => return Err(Self::store_error("take", shard_id, e)),
            },
        };
        Ok(Some(Taken {
            token: item.counter,
            acquisition: id,
            valid_until: sent + self.config.lease_ttl,
            checkpoint: item.checkpoint,
            latest_from_ms: item.latest_from_ms,
        }))
    }

    /// The shard's lease item, read consistently (`None`: no item).
    pub async fn read(&self, shard_id: &str) -> Result<Option<LeaseItem>, LeaseError> {
        let out = self
            .config
            .client
            .get_item()
            .table_name(&self.config.ledger_table)
            .key(shared::ledger::PK, s(&self.pk))
            .key(shared::ledger::SK, s(shard_sk(shard_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Self::store_error("read", shard_id, e))?;
        Ok(out.item().and_then(lease_item))
    }

    /// After a write `op` failed with `e`: the item as it is now (`None`
    /// when it cannot be read; the failure is logged).
    async fn read_back(
        &self,
        shard_id: &str,
        op: &'static str,
        e: &UpdateFailure,
    ) -> Option<Option<LeaseItem>> {
        match self.read(shard_id).await {
            Ok(item) => Some(item),
            Err(read) => {
                tracing::warn!(shard = shard_id, op, error = %shared::error::causes(e), read_error = %shared::error::causes(&read), "a lease write failed and reading the lease back failed too: whether it landed is known at the next write");
                None
            }
        }
    }

    /// Records, for a shard never taken yet, that `--starting-position
    /// latest` began at `at_ms` (the mapping's first start): a restart before
    /// its first checkpoint resumes there, not at a later LATEST. `closed`:
    /// the shard was closed before the start; LATEST reads none of it.
    pub async fn mark_latest(
        &self,
        shard_id: &str,
        at_ms: i64,
        closed: bool,
    ) -> Result<(), LeaseError> {
        let mut req = self
            .update(shard_id)
            .condition_expression("attribute_not_exists(#c)")
            .expression_attribute_names("#c", attr::COUNTER)
            .expression_attribute_names("#l", attr::LATEST_FROM)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_values(":at", n(at_ms))
            .expression_attribute_values(":now", n(self.now_ms()))
            .expression_attribute_values(":zero", n(0));
        req = if closed {
            req.update_expression("SET #c = :zero, #l = :at, #u = :now, #se = :t")
                .expression_attribute_names("#se", attr::SHARD_END)
                .expression_attribute_values(":t", AttributeValue::Bool(true))
        } else {
            req.update_expression("SET #c = :zero, #l = :at, #u = :now")
        };
        match self.conditional(req, "mark latest", shard_id).await {
            Ok(_) | Err(LeaseError::Lost { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn fenced(&self, shard_id: &str, lease: &Held<'_>, write: &str) -> Update {
        self.update(shard_id)
            .condition_expression("#o = :me AND #c = :tok AND #a = :acq")
            .expression_attribute_names("#o", attr::OWNER)
            .expression_attribute_names("#a", attr::ACQUISITION)
            .expression_attribute_values(":acq", s(lease.acquisition))
            .expression_attribute_names("#c", attr::COUNTER)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_names("#w", attr::WRITE)
            .expression_attribute_values(":me", s(&self.config.owner))
            .expression_attribute_values(":tok", n(lease.token))
            .expression_attribute_values(":now", n(self.now_ms()))
            .expression_attribute_values(":w", s(write))
    }

    /// Sends the write `build` makes of a request fenced by `lease` (owner
    /// and token; `#w = :w` bound to the write's id, which the update
    /// expression must SET). A failure is resolved by reading the item back
    /// (see the module's documentation): landed, an earlier write of this
    /// lease landed (its counter adopted, the write sent again), or lost.
    /// Returns the token after the write (`bump`: it increments the
    /// counter) and when the write that landed was sent.
    async fn fenced_write(
        &self,
        op: &'static str,
        shard_id: &str,
        lease: &Held<'_>,
        bump: bool,
        build: impl Fn(Update) -> Update,
    ) -> Result<(i64, Instant), LeaseError> {
        let mut token = lease.token;
        let mut last = None;
        for _ in 0..FENCED_ATTEMPTS {
            let id = write_id();
            let sent = Instant::now();
            let held = Held {
                token,
                acquisition: lease.acquisition,
            };
            let e = match build(self.fenced(shard_id, &held, &id)).send().await {
                Ok(_) => return Ok((token + i64::from(bump), sent)),
                Err(e) => e,
            };
            let Some(item) = self.read_back(shard_id, op, &e).await else {
                return Err(Self::store_error(op, shard_id, e));
            };
            let ours = item.as_ref().filter(|i| {
                i.owner.as_deref() == Some(self.config.owner.as_str())
                    && i.acquisition.as_deref() == Some(lease.acquisition)
            });
            match ours {
                Some(i) if i.write.as_deref() == Some(&id) => {
                    tracing::info!(
                        shard = shard_id,
                        op,
                        token = i.counter,
                        "a lease write landed though its answer was lost"
                    );
                    return Ok((i.counter, sent));
                }
                Some(i) if i.held() && i.counter > token => {
                    tracing::info!(shard = shard_id, op, token, adopted = i.counter, "an earlier write under this lease landed though its answer was lost: its counter is the token now; the write is sent again");
                    token = i.counter;
                    last = Some(e);
                }
                // Still as we left it: the write did not land (yet: if it
                // does, the next write adopts it).
                Some(i) if i.counter == token && !is_condition_failure(&e) => {
                    return Err(Self::store_error(op, shard_id, e))
                }
                _ if is_condition_failure(&e) || item.is_some() => {
                    return Err(LeaseError::Lost {
                        shard: shard_id.to_string(),
                    })
                }
                _ => return Err(Self::store_error(op, shard_id, e)),
            }
        }
        Err(match last {
            Some(e) => Self::store_error(op, shard_id, e),
            None => LeaseError::Lost {
                shard: shard_id.to_string(),
            },
        })
    }

    /// Renews the lease held with `lease`: the counter moves (what every
    /// observer watches), and the new counter is the token from now on.
    pub async fn renew(&self, shard_id: &str, lease: &Held<'_>) -> Result<Renewed, LeaseError> {
        self.checkpoint(shard_id, lease, None).await
    }

    /// Writes the checkpoint (the last record whose batch took effect) and
    /// renews the lease (the counter moves: the returned token replaces
    /// the held one), only while `lease` still holds it; `None` renews only.
    /// Fails with [`LeaseError::Lost`] otherwise.
    pub async fn checkpoint(
        &self,
        shard_id: &str,
        lease: &Held<'_>,
        sequence_number: Option<&str>,
    ) -> Result<Renewed, LeaseError> {
        let build = |req: Update| {
            let req = req
                .expression_attribute_names("#e", attr::EXPIRES)
                .expression_attribute_values(":exp", n(self.expiry()))
                .expression_attribute_values(":one", n(1));
            match sequence_number {
                Some(seq) => req
                    .update_expression("SET #e = :exp, #u = :now, #w = :w, #s = :seq ADD #c :one")
                    .expression_attribute_names("#s", attr::SEQ)
                    .expression_attribute_values(":seq", s(seq)),
                None => req.update_expression("SET #e = :exp, #u = :now, #w = :w ADD #c :one"),
            }
        };
        let (token, sent) = self
            .fenced_write("checkpoint", shard_id, lease, true, build)
            .await?;
        Ok(Renewed {
            token,
            valid_until: sent + self.config.lease_ttl,
        })
    }

    /// Marks the shard completed (every record took effect) and lets the
    /// lease go.
    pub async fn finish(
        &self,
        shard_id: &str,
        lease: &Held<'_>,
        sequence_number: Option<&str>,
    ) -> Result<(), LeaseError> {
        let ttl = chrono::Utc::now().timestamp() + 7 * 24 * 3600;
        let build = |req: Update| {
            let req = req
                .expression_attribute_names("#e", attr::EXPIRES)
                .expression_attribute_names("#se", attr::SHARD_END)
                .expression_attribute_names("#t", shared::ledger::TTL)
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":true", AttributeValue::Bool(true))
                .expression_attribute_values(":ttl", n(ttl));
            match sequence_number {
                Some(seq) => req
                    .update_expression(
                        "SET #e = :zero, #se = :true, #t = :ttl, #u = :now, #w = :w, #s = :seq",
                    )
                    .expression_attribute_names("#s", attr::SEQ)
                    .expression_attribute_values(":seq", s(seq)),
                None => req.update_expression(
                    "SET #e = :zero, #se = :true, #t = :ttl, #u = :now, #w = :w",
                ),
            }
        };
        self.fenced_write("finish", shard_id, lease, false, build)
            .await
            .map(drop)
    }

    /// Lets the lease go (at shutdown), so another process takes the shard
    /// without waiting for expiry. The checkpoint stays.
    pub async fn release(&self, shard_id: &str, lease: &Held<'_>) -> Result<(), LeaseError> {
        let build = |req: Update| {
            req.update_expression("SET #e = :zero, #u = :now, #w = :w")
                .expression_attribute_names("#e", attr::EXPIRES)
                .expression_attribute_values(":zero", n(0))
        };
        self.fenced_write("release", shard_id, lease, false, build)
            .await
            .map(drop)
    }

    /// Closes the book on a checkpointed shard that no longer exists in the
    /// stream (its unread records are lost), if its counter is still `seen`.
    /// True: this process won and reports the loss (exactly one does).
    pub async fn mark_vanished(&self, shard_id: &str, seen: i64) -> Result<bool, LeaseError> {
        let ttl = chrono::Utc::now().timestamp() + 7 * 24 * 3600;
        let id = write_id();
        let req = self
            .update(shard_id)
            .update_expression(
                "SET #se = :true, #v = :true, #t = :ttl, #e = :zero, #u = :now, #a = :w, #w = :w ADD #c :one",
            )
            .expression_attribute_names("#a", attr::ACQUISITION)
            .expression_attribute_names("#w", attr::WRITE)
            .expression_attribute_values(":w", s(&id))
            .condition_expression("#c = :seen AND attribute_not_exists(#se)")
            .expression_attribute_names("#se", attr::SHARD_END)
            .expression_attribute_names("#v", attr::VANISHED)
            .expression_attribute_names("#t", shared::ledger::TTL)
            .expression_attribute_names("#e", attr::EXPIRES)
            .expression_attribute_names("#u", attr::UPDATED)
            .expression_attribute_names("#c", attr::COUNTER)
            .expression_attribute_values(":true", AttributeValue::Bool(true))
            .expression_attribute_values(":ttl", n(ttl))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":now", n(self.now_ms()))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":seen", n(seen));
        match req.send().await {
            Ok(_) => Ok(true),
            Err(e) => match self.read_back(shard_id, "mark vanished", &e).await {
                Some(Some(item)) if item.write.as_deref() == Some(&id) => Ok(true),
                _ if is_condition_failure(&e) => Ok(false),
                _ => Err(Self::store_error("mark vanished", shard_id, e)),
            },
        }
    }

    /// Sends `req`: [`LeaseError::Lost`] when its condition fails.
    async fn conditional(
        &self,
        req: Update,
        op: &'static str,
        shard_id: &str,
    ) -> Result<UpdateItemOutput, LeaseError> {
        match req.send().await {
            Ok(out) => Ok(out),
            Err(e) if is_condition_failure(&e) => Err(LeaseError::Lost {
                shard: shard_id.to_string(),
            }),
            Err(e) => Err(Self::store_error(op, shard_id, e)),
        }
    }
}

/// Attempts of one fenced write whose earlier attempts' answers were lost.
const FENCED_ATTEMPTS: usize = 3;

type UpdateFailure = aws_sdk_dynamodb::error::SdkError<
    UpdateItemError,
    aws_sdk_dynamodb::config::http::HttpResponse,
>;

fn is_condition_failure(e: &UpdateFailure) -> bool {
    e.as_service_error()
        .is_some_and(UpdateItemError::is_conditional_check_failed_exception)
}

/// The lease a fenced write is made under: its token (the counter as this
/// process last wrote it) and its acquisition's id.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    pub token: i64,
    pub acquisition: &'a str,
}

fn num(item: &Item, name: &str) -> Option<i64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

fn lease_item(item: &Item) -> Option<LeaseItem> {
    let sk = item.get(shared::ledger::SK)?.as_s().ok()?;
    Some(LeaseItem {
        shard_id: shard_of_sk(sk)?.to_string(),
        owner: item.get(attr::OWNER).and_then(|v| v.as_s().ok()).cloned(),
        counter: num(item, attr::COUNTER).unwrap_or(0),
        expires_at_ms: num(item, attr::EXPIRES).unwrap_or(0),
        checkpoint: checkpoint_of(Some(item)),
        latest_from_ms: num(item, attr::LATEST_FROM),
        updated_at_ms: num(item, attr::UPDATED).unwrap_or(0),
        acquisition: item
            .get(attr::ACQUISITION)
            .and_then(|v| v.as_s().ok())
            .cloned(),
        write: item.get(attr::WRITE).and_then(|v| v.as_s().ok()).cloned(),
    })
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
mod tests;
