//! Wiring shared by the Lambda binaries and the local runtime: configuration
//! from the environment and the processors of each model.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{service_fn, LambdaEvent};

use crate::batch::{handle_stream_batch, StreamProcessor};
use crate::engine::derive::{DeriveConfig, DeriveProcessor};
use crate::engine::fold::{FoldConfig, FoldProcessor};
use crate::models::tracker::{derive::TrackerDerive, history::TrackerHistory};
use crate::store::Store;

/// Where a processor reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The model's table (`TABLE_NAME`).
    pub table: String,
    /// The ledger table (`LEDGER_TABLE_NAME`).
    pub ledger_table: String,
}

#[derive(Debug, thiserror::Error)]
#[error("missing environment variable {0}")]
pub struct MissingEnv(&'static str);

impl Config {
    pub fn from_env() -> Result<Self, MissingEnv> {
        let var = |k: &'static str| std::env::var(k).map_err(|_| MissingEnv(k));
        Ok(Self {
            table: var("TABLE_NAME")?,
            ledger_table: var("LEDGER_TABLE_NAME")?,
        })
    }
}

pub type HistoryProcessor = FoldProcessor<TrackerHistory>;
pub type TrackerDeriveProcessor = DeriveProcessor<TrackerDerive>;

/// The tracker's history processor (history entries, cascade).
pub fn history_processor(config: &Config, store: Store) -> HistoryProcessor {
    FoldProcessor::new(
        "history",
        TrackerHistory,
        store,
        FoldConfig {
            table: config.table.clone(),
            ledger_table: config.ledger_table.clone(),
        },
    )
}

/// The tracker's derive processor (GSI keys, META/COUNT).
pub fn derive_processor(config: &Config, store: Store) -> TrackerDeriveProcessor {
    DeriveProcessor::new(
        TrackerDerive,
        store,
        DeriveConfig {
            table: config.table.clone(),
            ledger_table: config.ledger_table.clone(),
            concurrency: 8,
        },
    )
}

/// The Lambda handler of a stream processor.
pub async fn stream_handler<P: StreamProcessor>(
    processor: &P,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    Ok(handle_stream_batch(processor, event.payload).await?)
}

/// Runs a stream processor as a Lambda function until the runtime stops.
pub async fn serve_stream<P: StreamProcessor>(processor: P) -> Result<(), lambda_runtime::Error> {
    let processor = &processor;
    lambda_runtime::run(service_fn(move |event| stream_handler(processor, event))).await
}
