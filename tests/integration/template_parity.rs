//! SPEC §6.1, the stacks: each model's synthesised CloudFormation template
//! (every registry model and every shipped model file) has exactly the
//! settings the local runtime built for it: functions, event source
//! mappings, filters, batch sizes, windows, timeouts, queues, and the model
//! table's indexes (keys and projection).

use std::path::PathBuf;

use aws_sdk_sqs::types::QueueAttributeName;
use jobstream::local::esm::StartingPosition;
use jobstream::local::runtime::{queue_visibility, Runtime};
use serde_json::Value;
use shared::models;

use crate::fidelity::{load_model_file, shipped_model_files};
use crate::support::model_env;

/// `npx tsx bin/synth-offline.ts DIR --model-file PATH=DEFS...` in `infra/`:
/// one template per model of the registry and per model file, each file's
/// definition what `jobstream tables --model-file PATH` prints (written
/// here from the same function, so that no CLI build is needed).
fn synth_templates(model_files: &[PathBuf]) -> PathBuf {
    let infra = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra");
    assert!(
        infra.join("node_modules").is_dir(),
        "the parity test synthesises the CDK app: run `npm ci` in infra/ first (./scripts/test does)"
    );
    let out = std::env::temp_dir().join(format!(
        "jobstream-parity-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = std::process::Command::new("npx");
    cmd.args(["tsx", "bin/synth-offline.ts"]).arg(&out);
    for path in model_files {
        let m = load_model_file(path);
        let defs = out.join(format!("{}.defs.json", m.name));
        let printed = jobstream::tools::deploy::definitions_of(&[m]);
        std::fs::write(&defs, serde_json::to_string_pretty(&printed).unwrap()).unwrap();
        cmd.arg("--model-file")
            .arg(format!("{}={}", path.display(), defs.display()));
    }
    let status = cmd
        .current_dir(&infra)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("npx runs");
    assert!(status.success(), "synth-offline failed");
    out
}

/// Resources of `type_` in a template, by logical id.
fn resources<'a>(t: &'a Value, type_: &str) -> Vec<(&'a String, &'a Value)> {
    t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, r)| r["Type"] == type_)
        .collect()
}

fn secs(d: std::time::Duration) -> u64 {
    d.as_secs()
}

/// The parity test: every model's synthesised template has the mapping,
/// function and queue settings the local runtime actually built (its
/// mapping configurations, the filters it applies, the queues it created),
/// for the registry's models and the model files the project ships (each
/// stack as `-c modelFile=PATH` builds it, each runtime as `--model-file
/// PATH` does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_models_template_has_the_settings_the_local_runtime_builds() {
    let files: Vec<(PathBuf, models::Model)> = shipped_model_files()
        .into_iter()
        .map(|p| {
            let m = load_model_file(&p);
            (p, m)
        })
        .collect();
    let paths: Vec<PathBuf> = files.iter().map(|(p, _)| p.clone()).collect();
    let registry = models::registry();
    assert!(
        files
            .iter()
            .all(|(_, f)| registry.iter().all(|r| r.name != f.name)),
        "a file's stack is named after its model: no registry model has its name"
    );
    let out = tokio::task::spawn_blocking(move || synth_templates(&paths))
        .await
        .unwrap();
    let mut compared = 0;
    let all = registry
        .into_iter()
        .map(|m| (None, m))
        .chain(files.into_iter().map(|(p, m)| (Some(p), m)));
    for (file, m) in all {
        let path = out.join(format!("Jobstream-{}.template.json", m.name));
        let t: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let env = model_env(m.name, |o| o.model_file = file.clone()).await;
        assert_eq!(
            env.rt.model.name, m.name,
            "the runtime runs the file's model"
        );
        assert_template_has_the_runtimes_settings(&t, &m, &env.rt).await;
        compared += 1;
    }
    assert_eq!(
        compared,
        models::registry().len() + shipped_model_files().len()
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The model table's GSIs as the template creates them and as the local
/// engine created them (DescribeTable): the same keys and projection each,
/// an INCLUDE's attributes as a set.
async fn assert_the_indexes_are_the_runtimes(t: &Value, m: &models::Model, rt: &Runtime) {
    let tables = resources(t, "AWS::DynamoDB::Table");
    let Some((_, table)) = tables
        .iter()
        .find(|(_, r)| r["Properties"]["TableName"] == m.table.name)
    else {
        panic!("{}: the template creates the model table", m.name);
    };
    let sorted = |v: &Value| {
        let mut a: Vec<String> = v
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default();
        a.sort();
        a
    };
    let mut deployed: Vec<(String, String, String, String, Vec<String>)> = table["Properties"]
        ["GlobalSecondaryIndexes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|g| {
            let key = |kt: &str| {
                g["KeySchema"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|k| k["KeyType"] == kt)
                    .map(|k| k["AttributeName"].as_str().unwrap().to_string())
                    .unwrap_or_default()
            };
            (
                g["IndexName"].as_str().unwrap().to_string(),
                key("HASH"),
                key("RANGE"),
                g["Projection"]["ProjectionType"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                sorted(&g["Projection"]["NonKeyAttributes"]),
            )
        })
        .collect();
    let desc = rt
        .dynamodb
        .describe_table()
        .table_name(&rt.config.table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let mut local: Vec<(String, String, String, String, Vec<String>)> = desc
        .global_secondary_indexes()
        .iter()
        .map(|g| {
            let key = |kt: aws_sdk_dynamodb::types::KeyType| {
                g.key_schema()
                    .iter()
                    .find(|k| *k.key_type() == kt)
                    .map(|k| k.attribute_name().to_string())
                    .unwrap_or_default()
            };
            let p = g.projection().unwrap();
            let mut attrs = p.non_key_attributes().to_vec();
            attrs.sort();
            (
                g.index_name().unwrap().to_string(),
                key(aws_sdk_dynamodb::types::KeyType::Hash),
                key(aws_sdk_dynamodb::types::KeyType::Range),
                p.projection_type().unwrap().as_str().to_string(),
                attrs,
            )
        })
        .collect();
    deployed.sort();
    local.sort();
    assert_eq!(
        deployed, local,
        "{}: the indexes the engine created",
        m.name
    );
}

/// One model's template against the settings its local runtime built.
async fn assert_template_has_the_runtimes_settings(t: &Value, m: &models::Model, rt: &Runtime) {
    assert_the_indexes_are_the_runtimes(t, m, rt).await;
    let functions = resources(t, "AWS::Lambda::Function");
    let function = |name: &str| -> (&String, &Value) {
        let prefix = format!("jobstream {} {name}:", m.name);
        let f: Vec<_> = functions
            .iter()
            .filter(|(_, f)| {
                f["Properties"]["Description"]
                    .as_str()
                    .is_some_and(|d| d.starts_with(&prefix))
            })
            .collect();
        assert_eq!(f.len(), 1, "{}: one function for {name}", m.name);
        *f[0]
    };
    let mappings = resources(t, "AWS::Lambda::EventSourceMapping");
    let mapping_of = |fn_id: &str| -> &Value {
        let found: Vec<_> = mappings
            .iter()
            .filter(|(_, e)| e["Properties"]["FunctionName"]["Ref"] == fn_id)
            .collect();
        assert_eq!(found.len(), 1);
        &found[0].1["Properties"]
    };
    assert_eq!(rt.mappings.len(), m.stream_defs().len());
    assert_eq!(
        mappings
            .iter()
            .filter(|(_, e)| e["Properties"]["StartingPosition"].is_string())
            .count(),
        rt.mappings.len(),
        "{}: the same stream mappings",
        m.name
    );
    for local in &rt.mappings {
        let cfg = local.config();
        let (fn_id, f) = function(&cfg.name);
        let p = mapping_of(fn_id);
        let what = format!("{} {}", m.name, cfg.name);
        assert_eq!(p["BatchSize"], cfg.batch_size as u64, "{what}");
        assert_eq!(
            p["MaximumRetryAttempts"],
            u64::from(cfg.max_retries),
            "{what}"
        );
        assert_eq!(
            p["BisectBatchOnFunctionError"], cfg.bisect_on_error,
            "{what}"
        );
        assert_eq!(
            p["MaximumRecordAgeInSeconds"].as_u64(),
            cfg.max_record_age.map(secs),
            "{what}"
        );
        assert_eq!(
            p["MaximumBatchingWindowInSeconds"].as_u64().unwrap_or(0),
            secs(cfg.batching_window),
            "{what}"
        );
        assert_eq!(
            f["Properties"]["Timeout"],
            secs(cfg.function_timeout),
            "{what}"
        );
        assert_eq!(
            p["ParallelizationFactor"], 1,
            "{what}: one invocation per shard"
        );
        assert_eq!(
            p["StartingPosition"] == "TRIM_HORIZON",
            cfg.starting_position == StartingPosition::TrimHorizon,
            "{what}"
        );
        assert_eq!(cfg.time_scale, rt.time_scale, "{what}: only scaled");
        let deployed: Vec<Value> = p["FilterCriteria"]["Filters"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .map(|f| serde_json::from_str(f["Pattern"].as_str().unwrap()).unwrap())
                    .collect()
            })
            .unwrap_or_default();
        let applied: Vec<Value> = rt.filters[&cfg.name].iter().map(|f| f.0.clone()).collect();
        assert_eq!(deployed, applied, "{what}: the filters applied locally");
    }
    let sqs = rt.sqs.clone();
    assert_eq!(rt.queues.len(), m.queue_defs().len());
    for local in &rt.queues {
        let (fn_id, f) = function(&local.name);
        let p = mapping_of(fn_id);
        let what = format!("{} {}", m.name, local.name);
        assert_eq!(p["BatchSize"], u64::from(local.batch_size()), "{what}");
        let queue_id = p["EventSourceArn"]["Fn::GetAtt"][0].as_str().unwrap();
        let q = &t["Resources"][queue_id]["Properties"];
        let attrs = sqs
            .as_ref()
            .unwrap()
            .get_queue_attributes()
            .queue_url(&local.queue.url)
            .attribute_names(QueueAttributeName::All)
            .send()
            .await
            .unwrap();
        let a = attrs.attributes().unwrap();
        let get = |k: QueueAttributeName| a.get(&k).cloned().unwrap_or_default();
        let deployed_visibility = q["VisibilityTimeout"].as_u64().unwrap();
        let def = m
            .queues()
            .into_iter()
            .find(|d| d.consumer == local.name)
            .unwrap();
        let mut scaled = def.clone();
        scaled.visibility_timeout_secs = deployed_visibility as u32;
        assert_eq!(
            get(QueueAttributeName::VisibilityTimeout),
            queue_visibility(&scaled, rt.time_scale)
                .as_secs()
                .to_string(),
            "{what}: the deployed visibility, scaled"
        );
        let redrive: Value = serde_json::from_str(&get(QueueAttributeName::RedrivePolicy)).unwrap();
        assert_eq!(
            redrive["maxReceiveCount"], q["RedrivePolicy"]["maxReceiveCount"],
            "{what}: receives before the DLQ"
        );
        assert_eq!(
            get(QueueAttributeName::MessageRetentionPeriod),
            q["MessageRetentionPeriod"].to_string(),
            "{what}"
        );
        assert_eq!(
            f["Properties"]["Timeout"],
            u64::from(def.consumer_timeout_secs),
            "{what}"
        );
        assert_eq!(
            p["ScalingConfig"]["MaximumConcurrency"],
            u64::from(def.max_concurrency),
            "{what}"
        );
    }
}
