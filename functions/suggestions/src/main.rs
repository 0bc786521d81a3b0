//! The suggestions Lambda: an SQS consumer (job board). All logic lives in `shared`.
#![recursion_limit = "256"]

use shared::lambda::{serve_sqs, suggestions_processor, Config};
use shared::store::{sdk_config, Store};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = Config::from_env()?;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(5).await);
    serve_sqs(suggestions_processor(&config, Store::new(client))).await
}
