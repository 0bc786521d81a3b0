//! What the CDK stack deploys, derived from the model registry
//! (`jobstream tables` prints it; `infra/tables.json` holds it; a test fails
//! when the two drift).

use serde_json::{json, Value};
use shared::metrics::names;
use shared::models::{self, table, Model};

/// One model's deployment: table, stream consumers (filters, mapping and
/// function settings, grants), queues and their consumers, from the
/// model's one definition of each processor.
pub fn model(m: &Model) -> Value {
    json!({
        "name": m.name,
        "about": m.about,
        "table": m.table,
        "streamConsumers": m.stream_defs(),
        "queueConsumers": m.queue_defs(),
        "runner": m.runner_grant(),
    })
}

/// Every model's deployment, and the ledger.
pub fn definitions() -> Value {
    let models: Vec<Value> = models::registry().iter().map(model).collect();
    json!({
        "defaultModel": models::DEFAULT_MODEL,
        "ledger": table::ledger(),
        "stackNames": table::STACK_NAMES,
        "metrics": metrics(),
        "models": models
    })
}

/// The processors' Embedded Metric Format metrics the stack alarms on.
fn metrics() -> Value {
    json!({
        "namespace": shared::metrics::NAMESPACE,
        "dimension": shared::metrics::DIMENSION,
        "badInput": names::BAD_INPUT,
    })
}

/// The same definitions for the given models alone (a model file's: the
/// first is the default).
pub fn definitions_of(chosen: &[models::Model]) -> Value {
    let defs: Vec<Value> = chosen.iter().map(model).collect();
    json!({
        "defaultModel": chosen.first().map(|m| m.name),
        "ledger": table::ledger(),
        "stackNames": table::STACK_NAMES,
        "metrics": metrics(),
        "models": defs
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tables --model-file` feeds the same stack as `tables`: every key
    /// the stack reads is there (the metrics were missing: `cdk synth -c
    /// modelFile=...` failed on `metrics.namespace`).
    #[test]
    fn definitions_of_chosen_models_have_every_key_of_the_registrys() {
        let all = definitions();
        let one = models::registry().into_iter().next().expect("a model");
        let some = definitions_of(&[one]);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&some), keys(&all));
        assert_eq!(some["metrics"], all["metrics"]);
        assert_eq!(some["ledger"], all["ledger"]);
    }

    #[test]
    fn at_most_two_stream_consumers_per_model_and_every_queue_has_a_consumer() {
        for m in models::registry() {
            let d = model(&m);
            let streams = d["streamConsumers"].as_array().unwrap();
            assert!(streams.len() <= 2, "{}: SPEC §2.9", m.name);
            for q in d["queueConsumers"].as_array().unwrap() {
                assert!(q["queue"]["visibilityTimeoutSecs"].as_u64().unwrap() >= 180);
                assert!(
                    q["queue"]["visibilityTimeoutSecs"].as_u64().unwrap()
                        >= 6 * q["queue"]["consumerTimeoutSecs"].as_u64().unwrap()
                );
                assert!(q["queue"]["maxReceiveCount"].as_u64().unwrap() >= 5);
            }
        }
    }
}
