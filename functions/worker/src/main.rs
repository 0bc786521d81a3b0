//! The queue worker Lambda: the SQS consumer of the logical queue named by
//! `QUEUE`, of the model named by `MODEL` (a set job or a once effect). All
//! logic lives in `shared`.
//! With `MODEL_FILE` set, the model is that file (bundled with the
//! function; its SHA-256 is logged at cold start) instead.
#![recursion_limit = "256"]

/// mimalloc: the handlers allocate and free many small Items per record.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use shared::lambda::{serve_queue, Config, Processors};
use shared::retry::{Retries, MAX_ATTEMPTS};
use shared::store::{sdk_config, Backoff, Store};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, model) = Config::from_env()?;
    let queue = std::env::var("QUEUE").map_err(|_| "missing environment variable QUEUE")?;
    let sdk = sdk_config(MAX_ATTEMPTS).await;
    // Transient faults ridden out within this queue consumer's timeout.
    let retries = model
        .queues()
        .iter()
        .find(|q| q.logical == queue)
        .map_or_else(Retries::stream, Retries::queue);
    let store = Store::with_backoff(retries.dynamodb_client(&sdk), Backoff::within(&retries));
    let processors = Processors::new(&model, &config, store, Some(retries.sqs_client(&sdk)));
    let consumer = processors
        .consumer(&queue)
        .ok_or_else(|| format!("model {} has no consumer of queue {queue}", model.name))?;
    serve_queue(consumer.handler.clone()).await
}
