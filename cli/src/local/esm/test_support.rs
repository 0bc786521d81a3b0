//! What the mapping's test files share: a ledger table on an embedded
//! engine, and the sequence numbers of an event.

use super::*;
use crate::local::engine::{ensure_table, sdk_config, LocalEngine};

/// The ledger table the leased mappings of the tests share.
pub(super) const LEDGER: &str = "ledger";

/// An embedded engine with the ledger table [`LEDGER`], and its client.
pub(super) async fn ledger() -> (LocalEngine, aws_sdk_dynamodb::Client) {
    let engine = LocalEngine::start("127.0.0.1:0", None)
        .await
        .expect("engine starts");
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    ensure_table(&client, &shared::models::table::ledger(), LEDGER)
        .await
        .expect("ledger table");
    (engine, client)
}

/// `sdk` with every call checked against the grant `jobstream run`'s own
/// calls have (its leases included): the stack's `RunnerPolicy`, as
/// `run --grants checked` (the default) enforces it. A table named `table`,
/// the ledger [`LEDGER`], no queues.
pub(super) fn as_runner(sdk: &aws_config::SdkConfig) -> aws_config::SdkConfig {
    use crate::local::iam::{Principal, RUNNER};
    use shared::models::table::{Grant, RunnerGrant};
    Principal {
        session: uuid::Uuid::new_v4().simple().to_string(),
        model: "m".into(),
        processor: RUNNER.into(),
        grant: Grant {
            table_actions: vec![],
            index_actions: vec![],
            ledger_actions: vec![],
            sends_to: vec![],
        },
        mappings: Some(RunnerGrant::mappings(false)),
        table: "table".into(),
        ledger: LEDGER.into(),
        queues: Default::default(),
        queue_names: vec![],
        on_failure: None,
        record: false,
    }
    .checked(sdk)
}

/// The lease partition of mapping `m` on stream `arn`, as `owner` sees it.
pub(super) fn lease_table(client: &aws_sdk_dynamodb::Client, owner: &str) -> LeaseTable {
    let mut cp = CheckpointConfig::new(client.clone(), LEDGER);
    cp.owner = owner.to_string();
    LeaseTable::new(cp, "m", "arn")
}

/// The sequence numbers of an event's records, in order.
pub(super) fn seqs(event: &Event) -> Vec<u64> {
    event
        .records
        .iter()
        .map(|r| seq_of(r).parse().unwrap())
        .collect()
}

/// A handler that accepts every batch and records its sequence numbers,
/// and what it recorded.
pub(super) fn recorder() -> (Handler, Arc<Mutex<Vec<u64>>>) {
    let calls: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = calls.clone();
    let handler: Handler = Arc::new(move |event: Event| {
        seen.lock().unwrap().extend(seqs(&event));
        Box::pin(async { Ok(DynamoDbEventResponse::default()) })
    });
    (handler, calls)
}

/// A mapping of batches of 5 checkpointing under `owner`'s leases of
/// `ttl`, on a fast clock.
pub(super) fn config(
    client: &aws_sdk_dynamodb::Client,
    owner: &str,
    ttl: Duration,
) -> MappingConfig {
    let mut c = MappingConfig::new("m");
    c.batch_size = 5;
    c.retry_delay = Duration::ZERO;
    // Polling interval 25 us; the handlers call the engine: a 1 s timeout.
    c.time_scale = 0.0001;
    c.function_timeout = Duration::from_secs(10_000);
    c.discovery_interval = Duration::ZERO;
    let mut cp = CheckpointConfig::new(client.clone(), LEDGER);
    cp.owner = owner.to_string();
    cp.lease_ttl = ttl;
    c.checkpoints = Some(cp);
    c
}
