//! The history Lambda: the stream consumer folding the model named by
//! `MODEL` (a model with a fold, such as a history). All logic
//! lives in `shared`.
//! With `MODEL_FILE` set, the model is that file (bundled with the
//! function; its SHA-256 is logged at cold start) instead.
#![recursion_limit = "256"]

/// mimalloc: the handlers allocate and free many small Items per record.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use shared::lambda::{cold_start, serve_stream, Processors};
use shared::retry::Retries;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let (config, model, sdk) = cold_start().await?;
    // Transient faults ridden out within the stream function's timeout; no
    // SQS (a fold sends no job).
    let processors = Processors::deployed(&model, &config, &sdk, &Retries::stream(), false);
    let fold = processors
        .fold
        .ok_or_else(|| format!("model {} has no fold", model.name))?;
    serve_stream(fold).await
}
