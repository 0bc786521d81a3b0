//! The DynamoDB adapter: guarded updates, transactions that say which action
//! failed, batch writes that retry UnprocessedItems, paginated queries.
//!
//! Throttling, 5xx and transport errors are retried by the SDK's own
//! standard retry strategy (jittered exponential backoff within a time
//! budget, see [`crate::retry`]). What the SDK does not
//! retry (UnprocessedItems, transactions cancelled by `TransactionConflict` or
//! throttling of one action) is retried here with jittered backoff (`backon`)
//! within the same time budget ([`Backoff`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, PutRequest, TransactWriteItem, WriteRequest,
};
use aws_sdk_dynamodb::Client;
use backon::Retryable;

use crate::error::StoreError;
use crate::item::Item;

mod backoff;
mod query;
pub use backoff::{Backoff, Delays};

/// Outcome of a conditional write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    Applied,
    /// The condition did not hold: for a guarded write this means a newer
    /// write won (or the effect is already there), which is success.
    ConditionFailed,
}

/// Why a transaction did not commit.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// Cancelled because conditions failed; `failed[i]` is true when action
    /// `i`'s condition failed.
    #[error("transaction cancelled: condition failed on actions {failed:?}")]
    ConditionsFailed { failed: Vec<bool> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Counters of what the store did, for benchmarks, the loop-freedom check
/// and the CLI summary.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Item writes issued and applied (a transaction of n actions counts n).
    pub writes: AtomicU64,
    /// Of `writes`, the actions of applied TransactWriteItems (condition
    /// checks included), which DynamoDB bills twice.
    pub transact_actions: AtomicU64,
    /// Requests that failed and were retried by our own backoff.
    pub retries: AtomicU64,
}

impl StoreStats {
    /// Write capacity units as DynamoDB bills the writes counted so far, for
    /// items up to 1 KB: one per item write, two per transaction action.
    pub fn billed_write_units(&self) -> u64 {
        self.writes.load(Ordering::Relaxed) + self.transact_actions.load(Ordering::Relaxed)
    }
}

/// A DynamoDB client plus the bookkeeping every processor wants.
#[derive(Clone)]
pub struct Store {
    client: Client,
    backoff: Backoff,
    stats: Arc<StoreStats>,
}

/// Loads the SDK configuration the Lambdas and the CLI share: standard retry
/// mode (jittered exponential backoff on throttling, 5xx and transient
/// transport errors) with at most `max_attempts` attempts, and the stream
/// consumers' call budget ([`crate::retry::Retries::stream`]). The
/// processors' clients are built from it through
/// [`crate::retry::Retries::dynamodb_client`], which also lifts the SDK's
/// retry quota and sets their function's budget.
pub async fn sdk_config(max_attempts: u32) -> aws_config::SdkConfig {
    sdk_loader(max_attempts).load().await
}

/// The loader behind [`sdk_config`], for callers that set more (endpoint,
/// region, credentials) before loading.
pub fn sdk_loader(max_attempts: u32) -> aws_config::ConfigLoader {
    let retries = crate::retry::Retries::stream().with_max_attempts(max_attempts);
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .retry_config(retries.retry_config())
        .timeout_config(retries.timeout_config())
}

/// An SDK error shown as the service's code and message
/// ([`crate::error::sdk_cause`]: "ValidationException: Item size has
/// exceeded the maximum allowed size", not "service error"), its source
/// kept.
#[derive(Debug)]
struct Described {
    cause: String,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl Described {
    fn of<E, R>(err: SdkError<E, R>) -> Box<dyn std::error::Error + Send + Sync>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        Box::new(Described {
            cause: crate::error::sdk_cause(&err),
            source: Box::new(err),
        })
    }
}

impl std::fmt::Display for Described {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.cause)
    }
}

impl std::error::Error for Described {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

fn classify<E, R>(operation: &'static str, table: &str, err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let (code, retryable) = match &err {
        SdkError::ServiceError(se) => {
            let code = se.err().code().unwrap_or("Unknown").to_string();
            let permanent = matches!(
                code.as_str(),
                "ValidationException" | "ItemCollectionSizeLimitExceededException"
            );
            (code, !permanent)
        }
        SdkError::TimeoutError(_) => ("Timeout".to_string(), true),
        SdkError::DispatchFailure(_) => ("DispatchFailure".to_string(), true),
        SdkError::ResponseError(_) => ("ResponseError".to_string(), true),
        SdkError::ConstructionFailure(_) => ("ConstructionFailure".to_string(), false),
        _ => ("Unknown".to_string(), true),
    };
    StoreError {
        operation,
        table: table.to_string(),
        code,
        retryable,
        source: Described::of(err),
    }
}

/// A cancelled transaction is worth retrying only when every reason is a
/// transient one (a conflict with another transaction, throttling, a
/// service-side error). A `ValidationError` (an item over 400 KB, two
/// actions on one item...) will fail the same way forever.
pub fn cancellation_is_retryable(reasons: &[Option<String>]) -> bool {
    reasons.iter().flatten().all(|code| {
        matches!(
            code.as_str(),
            "None"
                | "TransactionConflict"
                | "ThrottlingError"
                | "ProvisionedThroughputExceeded"
                | "RequestLimitExceeded"
                | "InternalServerError"
        )
    })
}

fn is_conditional<E: ProvideErrorMetadata, R>(err: &SdkError<E, R>) -> bool {
    matches!(err, SdkError::ServiceError(se) if se.err().code() == Some("ConditionalCheckFailedException"))
}

/// The string attribute `name` of `item` (an item or a page's last key).
fn string_of(item: Option<&Item>, name: &str) -> Option<String> {
    item?.get(name)?.as_s().ok().cloned()
}

/// A sort key condition of a Query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortKey {
    /// `begins_with(name, prefix)`
    BeginsWith(String, String),
    /// `name BETWEEN lo AND hi`
    Between(String, String, String),
}

/// Expression placeholders as the SDK's builders take them: `None` when
/// there are none (DynamoDB refuses an empty map).
pub fn placeholders<K: Into<String>, V>(
    pairs: impl IntoIterator<Item = (K, V)>,
) -> Option<std::collections::HashMap<String, V>> {
    let map: std::collections::HashMap<String, V> =
        pairs.into_iter().map(|(k, v)| (k.into(), v)).collect();
    (!map.is_empty()).then_some(map)
}

/// An update expression with its condition and placeholders.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    pub key: Item,
    pub update_expression: String,
    pub condition_expression: Option<String>,
    pub names: Vec<(String, String)>,
    pub values: Vec<(String, AttributeValue)>,
}

impl Update {
    /// The same update as one action of a TransactWriteItems on `table`.
    pub fn transact_item(self, table: &str) -> TransactWriteItem {
        crate::tx::update_of(
            aws_sdk_dynamodb::types::Update::builder()
                .table_name(table)
                .set_key(Some(self.key))
                .update_expression(self.update_expression)
                .set_condition_expression(self.condition_expression)
                .set_expression_attribute_names(placeholders(self.names))
                .set_expression_attribute_values(placeholders(self.values)),
        )
    }
}

impl Store {
    pub fn new(client: Client) -> Self {
        Self::with_backoff(client, Backoff::default())
    }

    pub fn with_backoff(client: Client, backoff: Backoff) -> Self {
        Self {
            client,
            backoff,
            stats: Arc::new(StoreStats::default()),
        }
    }

    /// The same store, its own retries bounded by `budget` (a processor's
    /// call budget, [`crate::retry::Retries::call_budget`]).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.backoff.budget = budget;
        self
    }

    /// Our own backoff (the queue sends of a processor use it too).
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }

    /// The same store (backoff, statistics) through another client, e.g.
    /// one whose calls are checked against a processor's grant.
    pub fn with_client(&self, client: Client) -> Self {
        Self {
            client,
            backoff: self.backoff,
            stats: self.stats.clone(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn stats(&self) -> &StoreStats {
        &self.stats
    }

    fn count_writes(&self, n: usize) {
        self.stats.writes.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The outcome of one conditional write (`operation` on `table`):
    /// applied (counted), its condition failed, or an error.
    fn written<O, E, R>(
        &self,
        sent: Result<O, SdkError<E, R>>,
        operation: &'static str,
        table: &str,
    ) -> Result<Written, StoreError>
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        match sent {
            Ok(_) => {
                self.count_writes(1);
                Ok(Written::Applied)
            }
            Err(e) if is_conditional(&e) => Ok(Written::ConditionFailed),
            Err(e) => Err(classify(operation, table, e)),
        }
    }

    /// Before a batch call's next attempt at what it left unprocessed:
    /// counts the retry and waits the next of `delays`; once they are
    /// spent, the error (`code`, with how many `left` `what`s).
    async fn wait_to_retry(
        &self,
        delays: &mut Delays,
        operation: &'static str,
        table: &str,
        code: &str,
        left: usize,
        what: &str,
    ) -> Result<(), StoreError> {
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        let Some(delay) = delays.next() else {
            return Err(StoreError {
                operation,
                table: table.to_string(),
                code: code.to_string(),
                retryable: true,
                source: format!("{left} {what} still unprocessed after the retries' budget").into(),
            });
        };
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// One guarded UpdateItem.
    pub async fn update(&self, table: &str, u: Update) -> Result<Written, StoreError> {
        let req = self
            .client
            .update_item()
            .table_name(table)
            .set_key(Some(u.key))
            .update_expression(u.update_expression)
            .set_condition_expression(u.condition_expression)
            .set_expression_attribute_names(placeholders(u.names))
            .set_expression_attribute_values(placeholders(u.values));
        self.written(req.send().await, "UpdateItem", table)
    }

    /// TransactWriteItems (at most 100 actions, never two on one item).
    /// Cancellations caused only by conflicts or throttling are retried with
    /// backoff; cancellations with failed conditions are returned with the
    /// index of every failed action so the caller can tell "already applied"
    /// from a lost race. The actions are borrowed (each attempt sends a copy):
    /// a caller that may send them again keeps them.
    pub async fn transact(&self, actions: impl AsRef<[TransactWriteItem]>) -> Result<(), TxError> {
        let actions = actions.as_ref();
        let n = actions.len();
        if n == 0 {
            return Ok(());
        }
        let attempt = || async {
            let res = self
                .client
                .transact_write_items()
                .set_transact_items(Some(actions.to_vec()))
                .send()
                .await;
            match res {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(se))
                    if se.err().code() == Some("TransactionCanceledException") =>
                {
                    let reasons: Vec<Option<String>> = match se.err() {
                        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(tc) => tc
                            .cancellation_reasons()
                            .iter()
                            .map(|r| r.code().map(str::to_string))
                            .collect(),
                        _ => Vec::new(),
                    };
                    let failed: Vec<bool> = (0..n)
                        .map(|i| {
                            reasons.get(i).and_then(|r| r.as_deref())
                                == Some("ConditionalCheckFailed")
                        })
                        .collect();
                    if failed.iter().any(|f| *f) {
                        Err(TxError::ConditionsFailed { failed })
                    } else {
                        let code = reasons
                            .iter()
                            .flatten()
                            .find(|c| c.as_str() != "None")
                            .cloned()
                            .unwrap_or_else(|| "TransactionCanceled".to_string());
                        let retryable = cancellation_is_retryable(&reasons);
                        Err(TxError::Store(StoreError {
                            operation: "TransactWriteItems",
                            table: "(transaction)".to_string(),
                            code,
                            retryable,
                            source: Described::of(SdkError::ServiceError(se)),
                        }))
                    }
                }
                Err(e) => Err(TxError::Store(classify(
                    "TransactWriteItems",
                    "(transaction)",
                    e,
                ))),
            }
        };
        let res = attempt
            .retry(self.backoff)
            .when(|e: &TxError| matches!(e, TxError::Store(s) if s.retryable))
            .notify(|_, _| {
                self.stats.retries.fetch_add(1, Ordering::Relaxed);
            })
            .await;
        if res.is_ok() {
            self.count_writes(n);
            self.stats
                .transact_actions
                .fetch_add(n as u64, Ordering::Relaxed);
        }
        res
    }

    /// Unconditional puts and deletes of independent items through
    /// BatchWriteItem, 25 at a time, retrying UnprocessedItems with backoff.
    pub async fn batch_write(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
    ) -> Result<(), StoreError> {
        for chunk in requests.chunks(25) {
            let mut pending = chunk.to_vec();
            let mut delays = self.backoff.delays();
            while !pending.is_empty() {
                let sent = pending.len();
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(table, pending.clone())
                    .send()
                    .await
                    .map_err(|e| classify("BatchWriteItem", table, e))?;
                let left: Vec<WriteRequest> = out
                    .unprocessed_items()
                    .and_then(|m| m.get(table))
                    .cloned()
                    .unwrap_or_default();
                self.count_writes(sent - left.len());
                if !left.is_empty() {
                    let (op, code) = ("BatchWriteItem", "UnprocessedItems");
                    self.wait_to_retry(&mut delays, op, table, code, left.len(), "items")
                        .await?;
                }
                pending = left;
            }
        }
        Ok(())
    }

    /// Deletes the given keys (BatchWriteItem).
    pub async fn delete_keys(&self, table: &str, keys: Vec<Item>) -> Result<(), StoreError> {
        let reqs = keys
            .into_iter()
            .map(|k| {
                WriteRequest::builder()
                    .delete_request(
                        DeleteRequest::builder()
                            .set_key(Some(k))
                            .build()
                            .expect("key is set"),
                    )
                    .build()
            })
            .collect();
        self.batch_write(table, reqs).await
    }

    /// Puts the given items (BatchWriteItem).
    pub async fn put_items(&self, table: &str, items: Vec<Item>) -> Result<(), StoreError> {
        let reqs = items
            .into_iter()
            .map(|i| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(i))
                            .build()
                            .expect("item is set"),
                    )
                    .build()
            })
            .collect();
        self.batch_write(table, reqs).await
    }

    /// BatchGetItem (strongly consistent), 100 keys per request, retrying
    /// UnprocessedKeys with backoff. Absent items are simply not returned.
    pub async fn batch_get(&self, table: &str, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let mut out = Vec::new();
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            let mut delays = self.backoff.delays();
            while !pending.is_empty() {
                let ka = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(pending.clone()))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| StoreError {
                        operation: "BatchGetItem",
                        table: table.to_string(),
                        code: "ConstructionFailure".into(),
                        retryable: false,
                        source: Box::new(e),
                    })?;
                let resp = self
                    .client
                    .batch_get_item()
                    .request_items(table, ka)
                    .send()
                    .await
                    .map_err(|e| classify("BatchGetItem", table, e))?;
                if let Some(items) = resp.responses().and_then(|r| r.get(table)) {
                    out.extend(items.iter().cloned());
                }
                pending = resp
                    .unprocessed_keys()
                    .and_then(|u| u.get(table))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
                if !pending.is_empty() {
                    let (op, code) = ("BatchGetItem", "UnprocessedKeys");
                    self.wait_to_retry(&mut delays, op, table, code, pending.len(), "keys")
                        .await?;
                }
            }
        }
        Ok(out)
    }

    /// Deletes `key` only while the item `absent` (same table) does not
    /// exist, in one transaction. Returns whether it was deleted.
    pub async fn delete_while_absent(
        &self,
        table: &str,
        key: Item,
        absent: &Item,
    ) -> Result<bool, StoreError> {
        let name = absent.keys().next().cloned().unwrap_or_default();
        let actions = vec![
            crate::tx::check_of(
                aws_sdk_dynamodb::types::ConditionCheck::builder()
                    .table_name(table)
                    .set_key(Some(absent.clone()))
                    .condition_expression("attribute_not_exists(#k)")
                    .expression_attribute_names("#k", name),
            ),
            crate::tx::delete(table, key),
        ];
        match self.transact(actions).await {
            Ok(()) => Ok(true),
            Err(TxError::ConditionsFailed { .. }) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }

    /// Deletes `item` only if it is still exactly as given (every attribute
    /// equal): a repair never deletes what changed since it was read.
    pub async fn delete_if_unchanged(
        &self,
        table: &str,
        key_names: &[&str],
        item: &Item,
    ) -> Result<Written, StoreError> {
        let mut req = self
            .client
            .delete_item()
            .table_name(table)
            .set_key(Some(crate::item::key_of(item, key_names)));
        let mut conds = Vec::new();
        for (i, (k, v)) in item.iter().enumerate() {
            conds.push(format!("#a{i} = :v{i}"));
            req = req
                .expression_attribute_names(format!("#a{i}"), k)
                .expression_attribute_values(format!(":v{i}"), v.clone());
        }
        req = req.condition_expression(conds.join(" AND "));
        self.written(req.send().await, "DeleteItem", table)
    }

    /// GetItem, strongly consistent.
    pub async fn get(&self, table: &str, key: Item) -> Result<Option<Item>, StoreError> {
        self.client
            .get_item()
            .table_name(table)
            .set_key(Some(key))
            .consistent_read(true)
            .send()
            .await
            .map(|o| o.item)
            .map_err(|e| classify("GetItem", table, e))
    }
}

#[cfg(test)]
mod cancellation_tests {
    use super::cancellation_is_retryable;

    #[test]
    fn only_transient_cancellations_are_retried() {
        let r =
            |v: &[&str]| -> Vec<Option<String>> { v.iter().map(|s| Some(s.to_string())).collect() };
        assert!(cancellation_is_retryable(&r(&[
            "None",
            "TransactionConflict"
        ])));
        assert!(cancellation_is_retryable(&r(&["ThrottlingError", "None"])));
        assert!(!cancellation_is_retryable(&r(&["None", "ValidationError"])));
        assert!(!cancellation_is_retryable(&r(&[
            "ItemCollectionSizeLimitExceeded"
        ])));
    }
}
