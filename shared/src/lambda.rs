//! Wiring shared by the Lambda binaries and the local runtime: configuration
//! from the environment and the processors of each model.

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{service_fn, LambdaEvent};

use crate::batch::{handle_stream_batch, StreamProcessor};
use crate::engine::derive::{DeriveConfig, DeriveProcessor};
use crate::engine::fold::{FoldConfig, FoldProcessor};
use crate::models::jobboard::derive::{JobBoardDerive, MATCHES_QUEUE, SUGGESTIONS_QUEUE};
use crate::models::jobboard::matches::MatchesProcessor;
use crate::models::jobboard::suggestions::SuggestionsProcessor;
use crate::models::tracker::{derive::TrackerDerive, history::TrackerHistory};
use crate::sqs::{handle_sqs_batch, MessageProcessor};
use crate::store::Store;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};

/// The deployable models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Model {
    /// Seed 001: application tracker (history + derive).
    #[default]
    Tracker,
    /// Seed 000: job board (derive + suggestions + matches).
    JobBoard,
}

impl std::str::FromStr for Model {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tracker" => Ok(Model::Tracker),
            "jobboard" => Ok(Model::JobBoard),
            other => Err(format!("unknown model `{other}` (tracker, jobboard)")),
        }
    }
}

/// Where a processor reads and writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The model's table (`TABLE_NAME`).
    pub table: String,
    /// The ledger table (`LEDGER_TABLE_NAME`).
    pub ledger_table: String,
    /// `MODEL` (default `tracker`).
    pub model: Model,
    /// `SUGGESTIONS_QUEUE_URL` (job board).
    pub suggestions_queue_url: Option<String>,
    /// `MATCHES_QUEUE_URL` (job board).
    pub matches_queue_url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("missing environment variable {0}")]
    Missing(&'static str),
    #[error("MODEL: {0}")]
    Model(String),
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        let var = |k: &'static str| std::env::var(k).map_err(|_| ConfigError::Missing(k));
        let model = match std::env::var("MODEL") {
            Ok(m) => m.parse().map_err(ConfigError::Model)?,
            Err(_) => Model::Tracker,
        };
        Ok(Self {
            table: var("TABLE_NAME")?,
            ledger_table: var("LEDGER_TABLE_NAME")?,
            model,
            suggestions_queue_url: std::env::var("SUGGESTIONS_QUEUE_URL").ok(),
            matches_queue_url: std::env::var("MATCHES_QUEUE_URL").ok(),
        })
    }

    fn queues(&self) -> std::collections::BTreeMap<String, String> {
        [
            (SUGGESTIONS_QUEUE, &self.suggestions_queue_url),
            (MATCHES_QUEUE, &self.matches_queue_url),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.to_string(), v)))
        .collect()
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
            queues: config.queues(),
        },
    )
}

pub type JobBoardDeriveProcessor = DeriveProcessor<JobBoardDerive>;

/// The job board's derive processor (GSI1 keys, suggestion and match jobs).
pub fn jobboard_derive_processor(
    config: &Config,
    store: Store,
    sqs: aws_sdk_sqs::Client,
) -> JobBoardDeriveProcessor {
    DeriveProcessor::new(
        JobBoardDerive,
        store,
        DeriveConfig {
            table: config.table.clone(),
            ledger_table: config.ledger_table.clone(),
            concurrency: 8,
            queues: config.queues(),
        },
    )
    .with_sqs(sqs)
}

/// The suggestions consumer.
pub fn suggestions_processor(config: &Config, store: Store) -> SuggestionsProcessor {
    SuggestionsProcessor::new(store, &config.table)
}

/// The matches consumer.
pub fn matches_processor(config: &Config, store: Store) -> MatchesProcessor {
    MatchesProcessor::new(store, &config.table, &config.ledger_table)
}

/// The Lambda handler of a queue consumer.
pub async fn sqs_handler<P: MessageProcessor>(
    processor: &P,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    Ok(handle_sqs_batch(processor, event.payload).await?)
}

/// Runs a queue consumer as a Lambda function.
pub async fn serve_sqs<P: MessageProcessor>(processor: P) -> Result<(), lambda_runtime::Error> {
    let processor = &processor;
    lambda_runtime::run(service_fn(move |event| sqs_handler(processor, event))).await
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
