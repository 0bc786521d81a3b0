//! The derive Lambda: a DynamoDB Stream consumer maintaining projections,
//! counters and the jobs of the configured `MODEL`. All logic lives in `shared`.
#![recursion_limit = "256"]

use shared::lambda::{derive_processor, jobboard_derive_processor, serve_stream, Config, Model};
use shared::store::{sdk_config, Store};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let sdk = sdk_config(5).await;
    let store = Store::new(aws_sdk_dynamodb::Client::new(&sdk));
    match config.model {
        Model::Tracker => serve_stream(derive_processor(&config, store)).await,
        Model::JobBoard => {
            serve_stream(jobboard_derive_processor(
                &config,
                store,
                aws_sdk_sqs::Client::new(&sdk),
            ))
            .await
        }
    }
}
