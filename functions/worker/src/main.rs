//! The queue worker Lambda: the SQS consumer of the logical queue named by
//! `QUEUE`, of the model named by `MODEL` (a set job or a once effect). All
//! logic lives in `shared`.
//! With `MODEL_FILE` set, the model is that file (bundled with the
//! function; its SHA-256 is logged at cold start) instead.
#![recursion_limit = "256"]

/// mimalloc: the handlers allocate and free many small Items per record.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use shared::lambda::{cold_start, serve_queue, Processors};
use shared::retry::Retries;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (config, model, sdk) = cold_start().await?;
    let queue = std::env::var("QUEUE").map_err(|_| "missing environment variable QUEUE")?;
    // Transient faults ridden out within this queue consumer's timeout.
    let retries = model
        .queues()
        .iter()
        .find(|q| q.logical == queue)
        .map_or_else(Retries::stream, Retries::queue);
    let processors = Processors::deployed(&model, &config, &sdk, &retries, true);
    let consumer = processors
        .consumer(&queue)
        .ok_or_else(|| format!("model {} has no consumer of queue {queue}", model.name))?;
    serve_queue(consumer.handler.clone()).await
}
