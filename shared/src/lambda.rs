//! Wiring shared by the Lambda binaries and the local runtime: configuration
//! from the environment, and the processors of any registered model.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use lambda_runtime::{service_fn, LambdaEvent};

use crate::batch::{handle_stream_batch, StreamProcessor, WholeBatchFailure};
use crate::engine::derive::{DeriveConfig, DeriveProcessor};
use crate::engine::fold::{FoldConfig, FoldProcessor, FoldRules};
use crate::engine::once::OnceProcessor;
use crate::engine::setjob::{BoxFut, SetJobProcessor};
use crate::metrics::Metrics;
use crate::models::{Job, Model};
use crate::sqs::{handle_sqs_batch, MessageProcessor, NoMessageId};
use crate::store::Store;

/// Where a model's processors read and write.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The model's table (`TABLE_NAME`).
    pub table: String,
    /// The ledger table (`LEDGER_TABLE_NAME`).
    pub ledger_table: String,
    /// `MODEL`.
    pub model: String,
    /// Logical queue name -> URL (`QUEUE_URL_<LOGICAL>`, see [`queue_env`]).
    pub queues: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("missing environment variable {0}")]
    Missing(String),
    #[error("MODEL: {0}")]
    Model(String),
    /// The model file (`MODEL_FILE`), every problem with its line and column.
    #[error("MODEL_FILE: {0}")]
    ModelFile(#[from] crate::file::LoadError),
}

/// The environment variable holding a logical queue's URL:
/// `QUEUE_URL_<LOGICAL, upper case>`.
pub fn queue_env(logical: &str) -> String {
    let name: String = logical
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("QUEUE_URL_{name}")
}

impl Config {
    /// `MODEL` (or `MODEL_FILE`, a model file bundled with the function: its
    /// SHA-256 is logged here, at cold start), `TABLE_NAME`,
    /// `LEDGER_TABLE_NAME` and the queue URLs of the model's queues.
    pub fn from_env() -> Result<(Self, Model), ConfigError> {
        let var = |k: &str| std::env::var(k).map_err(|_| ConfigError::Missing(k.to_string()));
        let loaded = match std::env::var_os("MODEL_FILE") {
            Some(path) => crate::file::load(std::path::Path::new(&path))?,
            None => crate::models::file_of(&crate::models::Source::Name(var("MODEL")?))
                .map_err(ConfigError::Model)?,
        };
        // A bundled file or a shipped one (`MODEL=NAME`): which bytes run.
        tracing::info!(
            model_file = %loaded.path.display(),
            sha256 = %loaded.sha256,
            model = loaded.model.name,
            "model file loaded"
        );
        let model = loaded.model();
        let queues = model
            .queues()
            .iter()
            .filter_map(|q| {
                std::env::var(queue_env(q.logical))
                    .ok()
                    .map(|u| (q.logical.to_string(), u))
            })
            .collect();
        Ok((
            Self {
                table: var("TABLE_NAME")?,
                ledger_table: var("LEDGER_TABLE_NAME")?,
                model: model.name.to_string(),
                queues,
            },
            model,
        ))
    }
}

/// A stream processor behind a pointer (any model's).
pub trait StreamHandler: Send + Sync {
    fn name(&self) -> &'static str;
    fn handle(&self, event: Event) -> BoxFut<'_, Result<DynamoDbEventResponse, WholeBatchFailure>>;
    fn metrics(&self) -> &Metrics;
}

impl<P: StreamProcessor> StreamHandler for P {
    fn name(&self) -> &'static str {
        StreamProcessor::name(self)
    }
    fn handle(&self, event: Event) -> BoxFut<'_, Result<DynamoDbEventResponse, WholeBatchFailure>> {
        Box::pin(handle_stream_batch(self, event))
    }
    fn metrics(&self) -> &Metrics {
        StreamProcessor::metrics(self)
    }
}

/// A queue consumer behind a pointer (any model's).
pub trait QueueHandler: Send + Sync {
    fn name(&self) -> &'static str;
    fn handle(&self, event: SqsEvent) -> BoxFut<'_, Result<SqsBatchResponse, NoMessageId>>;
    fn metrics(&self) -> &Metrics;
}

impl<P: MessageProcessor> QueueHandler for P {
    fn name(&self) -> &'static str {
        MessageProcessor::name(self)
    }
    fn handle(&self, event: SqsEvent) -> BoxFut<'_, Result<SqsBatchResponse, NoMessageId>> {
        Box::pin(handle_sqs_batch(self, event))
    }
    fn metrics(&self) -> &Metrics {
        MessageProcessor::metrics(self)
    }
}

/// The fold processor of a model.
pub type Fold = FoldProcessor<dyn FoldRules>;

/// A queue consumer of a model, by its queue.
pub struct QueueConsumer {
    /// Logical queue name.
    pub queue: &'static str,
    pub handler: Arc<dyn QueueHandler>,
    /// Set when the consumer is a set job (`verify --repair` runs it).
    pub set_job: Option<Arc<SetJobProcessor>>,
}

/// Every processor of a model, wired to one store.
pub struct Processors {
    pub store: Store,
    pub derive: Arc<DeriveProcessor>,
    pub fold: Option<Arc<Fold>>,
    pub consumers: Vec<QueueConsumer>,
}

impl Processors {
    /// Builds the processors of `model`. `sqs` is needed by models with
    /// queues.
    pub fn new(
        model: &Model,
        config: &Config,
        store: Store,
        sqs: Option<aws_sdk_sqs::Client>,
    ) -> Self {
        Self::with_clients(model, config, store.clone(), &|_| {
            (store.clone(), sqs.clone())
        })
    }

    /// The processors of a deployed function whose calls ride transient
    /// faults out within `retries` (its timeout): the SDK's retries of its
    /// DynamoDB client and our own backoff alike; an SQS client when `sqs`
    /// (a function that sends jobs or reads a queue).
    pub fn deployed(
        model: &Model,
        config: &Config,
        sdk: &aws_config::SdkConfig,
        retries: &crate::retry::Retries,
        sqs: bool,
    ) -> Self {
        let backoff = crate::store::Backoff::within(retries);
        let store = Store::with_backoff(retries.dynamodb_client(sdk), backoff);
        let sqs = sqs.then(|| retries.sqs_client(sdk));
        Self::new(model, config, store, sqs)
    }

    /// Builds the processors of `model`, each with the store and SQS client
    /// `clients` gives for its name (e.g. clients enforcing each
    /// processor's own grant); `store` is the one [`Processors::store`]
    /// holds.
    pub fn with_clients(
        model: &Model,
        config: &Config,
        store: Store,
        clients: &dyn Fn(&str) -> (Store, Option<aws_sdk_sqs::Client>),
    ) -> Self {
        let (derive_store, sqs) = clients("derive");
        let mut derive = DeriveProcessor::new(
            model.rules.clone(),
            derive_store,
            DeriveConfig {
                table: config.table.clone(),
                ledger_table: config.ledger_table.clone(),
                concurrency: 8,
                queues: config.queues.clone(),
                limits: crate::limits::KeyLimits::of(&model.table),
            },
        );
        if let Some(sqs) = &sqs {
            derive = derive.with_sqs(sqs.clone());
        }
        let fold = model.fold.as_ref().map(|f| {
            Arc::new(FoldProcessor::new(
                f.processor,
                f.rules.clone(),
                clients(f.processor).0,
                FoldConfig {
                    table: config.table.clone(),
                    ledger_table: config.ledger_table.clone(),
                },
            ))
        });
        let consumers = model
            .consumers
            .iter()
            .map(|c| match (&c.job, clients(c.queue.consumer)) {
                (Job::Set(job), (store, sqs)) => {
                    let p = Arc::new(SetJobProcessor::new(
                        job.clone(),
                        store,
                        &config.table,
                        &config.ledger_table,
                        sqs,
                        config.queues.clone(),
                    ));
                    QueueConsumer {
                        queue: c.queue.logical,
                        handler: p.clone(),
                        set_job: Some(p),
                    }
                }
                (Job::Once(rule), (store, _)) => QueueConsumer {
                    queue: c.queue.logical,
                    handler: Arc::new(OnceProcessor::new(
                        rule.clone(),
                        store,
                        &config.table,
                        &config.ledger_table,
                    )),
                    set_job: None,
                },
            })
            .collect();
        Self {
            store,
            derive: Arc::new(derive),
            fold,
            consumers,
        }
    }

    /// The stream processors, in the order they run (fold first).
    pub fn streams(&self) -> Vec<Arc<dyn StreamHandler>> {
        let mut out: Vec<Arc<dyn StreamHandler>> = Vec::new();
        if let Some(f) = &self.fold {
            out.push(f.clone());
        }
        out.push(self.derive.clone());
        out
    }

    /// The stream processor called `name`.
    pub fn stream(&self, name: &str) -> Option<Arc<dyn StreamHandler>> {
        self.streams().into_iter().find(|p| p.name() == name)
    }

    /// The consumer of logical queue `queue`, or named `queue`.
    pub fn consumer(&self, queue: &str) -> Option<&QueueConsumer> {
        self.consumers
            .iter()
            .find(|c| c.queue == queue || c.handler.name() == queue)
    }
}

/// What a Lambda's `main` starts from: the logs set up ([`crate::logs`]), the
/// model and its tables and queues ([`Config::from_env`]), and the SDK
/// configuration ([`crate::store::sdk_config`], standard retries).
pub async fn cold_start() -> Result<(Config, Model, aws_config::SdkConfig), lambda_runtime::Error> {
    crate::logs::init_lambda();
    let (config, model) = Config::from_env()?;
    let sdk = crate::store::sdk_config(crate::retry::MAX_ATTEMPTS).await;
    Ok((config, model, sdk))
}

/// The Lambda handler of a stream processor.
pub async fn stream_handler(
    processor: &dyn StreamHandler,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    Ok(processor.handle(event.payload).await?)
}

/// The Lambda handler of a queue consumer.
pub async fn sqs_handler(
    processor: &dyn QueueHandler,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    Ok(processor.handle(event.payload).await?)
}

/// Runs a stream processor as a Lambda function until the runtime stops.
pub async fn serve_stream(handler: Arc<dyn StreamHandler>) -> Result<(), lambda_runtime::Error> {
    let handler = &*handler;
    lambda_runtime::run(service_fn(move |event| stream_handler(handler, event))).await
}

/// Runs a queue consumer as a Lambda function until the runtime stops.
pub async fn serve_queue(handler: Arc<dyn QueueHandler>) -> Result<(), lambda_runtime::Error> {
    let handler = &*handler;
    lambda_runtime::run(service_fn(move |event| sqs_handler(handler, event))).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_urls_come_from_one_variable_per_logical_queue() {
        assert_eq!(queue_env("suggestions"), "QUEUE_URL_SUGGESTIONS");
        assert_eq!(queue_env("timeline-fanout"), "QUEUE_URL_TIMELINE_FANOUT");
    }
}
