//! The derive Lambda: the stream consumer applying the rules of the model
//! named by `MODEL` (projections, derived items, counters, jobs). All logic
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
    // Transient faults ridden out within the stream function's timeout.
    let processors = Processors::deployed(&model, &config, &sdk, &Retries::stream(), true);
    serve_stream(processors.derive).await
}
