//! The derive Lambda: the stream consumer applying the rules of the model
//! named by `MODEL` (projections, derived items, counters, jobs). All logic
//! lives in `shared`.
//! With `MODEL_FILE` set, the model is that file (bundled with the
//! function; its SHA-256 is logged at cold start) instead.
#![recursion_limit = "256"]

/// mimalloc: the handlers allocate and free many small Items per record.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use shared::lambda::{serve_stream, Config, Processors};
use shared::retry::{Retries, MAX_ATTEMPTS};
use shared::store::{sdk_config, Backoff, Store};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let (config, model) = Config::from_env()?;
    let sdk = sdk_config(MAX_ATTEMPTS).await;
    // Transient faults ridden out within the stream function's timeout.
    let retries = Retries::stream();
    let store = Store::with_backoff(retries.dynamodb_client(&sdk), Backoff::within(&retries));
    let processors = Processors::new(&model, &config, store, Some(retries.sqs_client(&sdk)));
    serve_stream(processors.derive).await
}
