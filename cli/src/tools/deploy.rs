//! What the CDK stack deploys, derived from the model registry
//! (`jobstream tables` prints it; `infra/tables.json` holds it; a test fails
//! when the two drift).

use serde_json::{json, Value};
use shared::models::{self, table, KeyFilter, Model};

/// DynamoDB actions each kind of processor uses, per table.
pub mod actions {
    /// The derive stream consumer: reads items as they are, guarded
    /// projections, derived items and counters in transactions.
    pub const DERIVE_TABLE: &[&str] = &[
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    pub const DERIVE_LEDGER: &[&str] = &[
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// A fold (history): entries, cascade, sequence mirror.
    pub const FOLD_TABLE: &[&str] = &[
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:Query",
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    pub const FOLD_LEDGER: &[&str] = &[
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ];
    /// Queue consumers (set jobs, once effects): consistent reads, guarded
    /// writes, index queries.
    pub const CONSUMER_TABLE: &[&str] = &[
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:BatchWriteItem",
        "dynamodb:ConditionCheckItem",
    ];
    pub const CONSUMER_LEDGER: &[&str] = &[
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:ConditionCheckItem",
    ];
}

fn filters(f: &[KeyFilter]) -> Value {
    json!(f)
}

/// One model's deployment: table, stream consumers, queues and consumers.
pub fn model(m: &Model) -> Value {
    let queues: Vec<&str> = m.consumers.iter().map(|c| c.queue.logical).collect();
    let mut streams = Vec::new();
    if let Some(f) = &m.fold {
        streams.push(json!({
            "name": f.processor,
            "binary": "history",
            "filters": filters(&f.filter),
            "tableActions": actions::FOLD_TABLE,
            "ledgerActions": actions::FOLD_LEDGER,
            "sendsTo": [],
        }));
    }
    streams.push(json!({
        "name": "derive",
        "binary": "derive",
        "filters": filters(&m.derive_filter),
        "tableActions": actions::DERIVE_TABLE,
        "ledgerActions": actions::DERIVE_LEDGER,
        "sendsTo": queues,
    }));
    let consumers: Vec<Value> = m
        .consumers
        .iter()
        .map(|c| {
            json!({
                "name": c.queue.consumer,
                "binary": "worker",
                "queue": c.queue,
                "tableActions": actions::CONSUMER_TABLE,
                "ledgerActions": actions::CONSUMER_LEDGER,
                "sendsTo": queues,
            })
        })
        .collect();
    json!({
        "name": m.name,
        "about": m.about,
        "table": m.table,
        "streamConsumers": streams,
        "queueConsumers": consumers,
    })
}

/// Every model's deployment, and the ledger.
pub fn definitions() -> Value {
    let models: Vec<Value> = models::registry().iter().map(model).collect();
    json!({
        "defaultModel": models::DEFAULT_MODEL,
        "ledger": table::ledger(),
        "models": models
    })
}

/// The same definitions for the given models alone (a model file's: the
/// first is the default).
pub fn definitions_of(chosen: &[models::Model]) -> Value {
    let defs: Vec<Value> = chosen.iter().map(model).collect();
    json!({
        "defaultModel": chosen.first().map(|m| m.name),
        "ledger": table::ledger(),
        "models": defs
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_two_stream_consumers_per_model_and_every_queue_has_a_consumer() {
        for m in models::registry() {
            let d = model(&m);
            let streams = d["streamConsumers"].as_array().unwrap();
            assert!(streams.len() <= 2, "{}: SPEC §2.9", m.name);
            for q in d["queueConsumers"].as_array().unwrap() {
                assert!(q["queue"]["visibilityTimeoutSecs"].as_u64().unwrap() >= 180);
                assert!(q["queue"]["maxReceiveCount"].as_u64().unwrap() >= 5);
            }
        }
    }
}
