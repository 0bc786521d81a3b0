//! SPEC §6.1: what runs locally is what deploys. The deployed filters
//! applied before the handlers (adoption, unknown keys, counter repair), the
//! grants enforced on every processor call (a removed grant surfaces as
//! AccessDenied; the grants are exactly what the demos use), and the
//! synthesised templates' settings equal to the ones the local runtime
//! actually built, for every model in the registry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

use aws_sdk_sqs::types::QueueAttributeName;
use jobstream::local::esm::StartingPosition;
use jobstream::local::iam::{recorder, Resource};
use jobstream::local::runtime::{queue_visibility, Runtime};
use jobstream::tools::backfill::ScanOptions;
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};
use shared::lambda::StreamHandler;
use shared::metrics::names;
use shared::models::tracker::keys;
use shared::models::tracker::scenario::Clock;
use shared::models::{self, table::grants};

use crate::support::{assert_verified, count, descriptions, env_with, model_env, partition, Env};

/// The history of `app`: sequences 1..=n without gap, each entry's `SK`
/// its padded sequence. Returns the descriptions.
async fn gapless_history(env: &Env, app: &str) -> Vec<String> {
    let entries: Vec<Item> = partition(env, &keys::app_pk(app))
        .await
        .into_iter()
        .filter(|i| i.s(keys::SK).unwrap_or_default().starts_with("HIST#"))
        .collect();
    for (i, e) in entries.iter().enumerate() {
        let seq = i as i64 + 1;
        assert_eq!(e.i64("sequence").unwrap(), seq, "{app}: gap or duplicate");
        assert_eq!(e.s(keys::SK).unwrap(), keys::hist_sk(seq as u64));
    }
    descriptions(env, app).await
}

const APPS: usize = 4;

fn app(i: usize) -> String {
    format!("pre{i}")
}

/// Done when (issue 16): writers first, then the processors (starting at
/// LATEST, as a stack deployed next to a table in use), then a backfill while
/// writers go on: every application's history is gapless and records every
/// change made after the processors started, under the deployed filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_under_the_deployed_filters_leaves_every_history_gapless() {
    let mut env = env_with(|o| o.mapping.starting_position = StartingPosition::Latest).await;
    let mut t = Clock::new();
    // Writers first: applications with stages, before the processors read.
    for i in 0..APPS {
        let id = app(i);
        env.writer
            .create_application(&id, "Acme", "Engineer", "applied", &t.next())
            .await
            .unwrap();
        env.writer.add_stage(&id, "s1", "Screen", 1).await.unwrap();
    }
    // The processors start (LATEST: nothing written so far is read)...
    env.rt.drain().await.unwrap();
    // ...and the writers go on: the first change of each application
    // adopts it.
    for i in 0..APPS {
        env.writer
            .update_application(&app(i), &[("notes", s("first"))], &t.next())
            .await
            .unwrap();
    }
    env.rt.drain().await.unwrap();
    // Backfill while the writers go on.
    let writes = async {
        for i in 0..APPS {
            env.writer
                .update_application(&app(i), &[("notes", s("during backfill"))], &t.next())
                .await
                .unwrap();
        }
    };
    let scan = ScanOptions::default();
    let backfill = jobstream::tools::backfill::backfill(
        &env.rt.dynamodb,
        &env.rt.config,
        &env.rt.processors,
        &scan,
        false,
    );
    let ((), backfilled) = tokio::join!(writes, backfill);
    backfilled.expect("backfill runs");
    env.rt.drain().await.unwrap();
    // Later changes still write entries (an adoption left pending would
    // absorb them silently, forever).
    for i in 0..APPS {
        env.writer
            .update_application(&app(i), &[("status", s("interviewing"))], &t.next())
            .await
            .unwrap();
        env.writer.add_stage(&app(i), "s2", "Onsite", 2).await.unwrap();
    }
    env.rt.drain().await.unwrap();
    for i in 0..APPS {
        let d = gapless_history(&env, &app(i)).await;
        assert_eq!(d.first().map(String::as_str), Some("Imported"), "{d:?}");
        assert_eq!(
            &d[d.len() - 3..],
            [
                "Updated Notes",
                "Updated Status",
                "Added interview stage \"Onsite\""
            ],
            "{}: every change after the processors started has its entry: {d:?}",
            app(i)
        );
    }
    assert!(
        env.rt.filtered_out["history"].load(Relaxed) > 0,
        "the deployed history filter was applied"
    );
    assert_verified(&env).await;
}

/// An item with a key shape no rule knows is bad input: it reaches derive
/// (no filter drops it) and is counted, for every model whose filter
/// dropped such records before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_key_records_reach_derive_and_are_counted_as_bad_input() {
    for model in ["tracker", "jobboard"] {
        let mut env = model_env(model, |_| {}).await;
        let m = &env.rt.model;
        let mut item = Item::new();
        item.insert(m.table.pk.into(), s("SOMETHING#else"));
        item.insert(m.table.sk.into(), s("unknown"));
        env.rt
            .dynamodb
            .put_item()
            .table_name(&env.rt.config.table)
            .set_item(Some(item))
            .send()
            .await
            .unwrap();
        env.rt.drain().await.unwrap();
        let derive = env.rt.processors.derive.metrics();
        assert_eq!(derive.get(names::BAD_INPUT), 1, "{model}: counted once");
        assert_eq!(env.rt.filtered_out["derive"].load(Relaxed), 0, "{model}");
    }
}

/// A writer's overwrite of META/COUNT reaches derive and is repaired (the
/// deployed `APP#` filter dropped it: the count stayed wrong until some
/// application changed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meta_count_overwrite_is_repaired() {
    let mut env = env_with(|_| {}).await;
    let mut t = Clock::new();
    for i in 0..3 {
        env.writer
            .create_application(&app(i), "Acme", "Engineer", "applied", &t.next())
            .await
            .unwrap();
    }
    env.rt.drain().await.unwrap();
    assert_eq!(count(&env).await, Some(3));
    let mut wrong = Item::new();
    wrong.insert(keys::PK.into(), s(keys::META_PK));
    wrong.insert(keys::SK.into(), s(keys::COUNT_SK));
    wrong.insert(keys::COUNT_ATTR.into(), n(42));
    env.writer.put(wrong).await.unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(count(&env).await, Some(3), "the overwrite was repaired");
    assert_verified(&env).await;
}

/// A grant without an action the code needs: the call is answered as AWS
/// answers it (HTTP 400 AccessDeniedException), classified as in
/// production (retried, then the records go to the on-failure
/// destination), never applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_grant_surfaces_as_access_denied() {
    let mut env = env_with(|o| {
        o.revoke = vec![("history".into(), "dynamodb:PutItem".into())];
        // Our own backoff off (it retries AccessDenied as production does):
        // the mapping's 10 retries and bisect are what this test waits for.
        o.backoff = shared::store::Backoff {
            max_times: 0,
            ..Default::default()
        };
    })
    .await;
    env.writer
        .create_application("a1", "Acme", "Engineer", "applied", "2026-01-01T00:00:00.000Z")
        .await
        .unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(
        descriptions(&env, "a1").await,
        Vec::<String>::new(),
        "no entry without PutItem"
    );
    let failed = env.rt.failed_batches();
    let history: Vec<_> = failed.iter().filter(|f| f.mapping == "history").collect();
    assert!(!history.is_empty(), "given up after the retries: {failed:?}");
    assert!(
        history.iter().all(|f| f.reason.contains("AccessDenied")),
        "{history:?}"
    );
    let denied: Vec<_> = recorder()
        .calls()
        .into_iter()
        .filter(|c| c.session == env.rt.session && !c.allowed)
        .collect();
    assert!(!denied.is_empty());
    assert!(denied
        .iter()
        .all(|c| c.processor == "history" && c.action == "dynamodb:PutItem"));
    // The other processor, with its grant intact, did its work.
    assert_eq!(count(&env).await, Some(1));
}

/// Every model's demo under enforcement: nothing denied, and per kind of
/// processor the actions used on each resource are exactly the granted
/// ones (a grant never used is a grant too many).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grants_are_exactly_what_the_demos_use() {
    type Used = BTreeMap<(&'static str, &'static str), BTreeSet<String>>;
    let mut used: Used = BTreeMap::new();
    for m in models::registry() {
        let Some(demo) = m.demo else { continue };
        let mut env = model_env(m.name, |_| {}).await;
        let differences = demo(&mut env.rt).await.expect("demo runs");
        assert_eq!(differences, Vec::<String>::new(), "{}", m.name);
        adoption_calls(&mut env.rt).await;
        for c in recorder().calls() {
            if c.session != env.rt.session {
                continue;
            }
            assert!(c.allowed, "{}: denied {c:?}", m.name);
            let kind = kind_of(&m, &c.processor);
            let resource = match &c.resource {
                Resource::Table => "table",
                Resource::Index => "index",
                Resource::Ledger => "ledger",
                Resource::Queue(_) => "queue",
                Resource::Other(o) => panic!("{}: a call outside the model: {o}", m.name),
            };
            used.entry((kind, resource)).or_default().insert(c.action);
        }
    }
    let granted = |list: &[&str]| -> BTreeSet<String> { list.iter().map(|a| a.to_string()).collect() };
    let mut expected: Used = BTreeMap::new();
    expected.insert(("history", "table"), granted(grants::FOLD_TABLE));
    expected.insert(("history", "ledger"), granted(grants::FOLD_LEDGER));
    expected.insert(("derive", "table"), granted(grants::DERIVE_TABLE));
    expected.insert(("derive", "ledger"), granted(grants::DERIVE_LEDGER));
    expected.insert(("derive", "queue"), granted(&["sqs:SendMessage"]));
    expected.insert(("worker", "table"), granted(grants::CONSUMER_TABLE));
    expected.insert(("worker", "index"), granted(grants::CONSUMER_INDEX));
    expected.insert(("worker", "ledger"), granted(grants::CONSUMER_LEDGER));
    expected.insert(("worker", "queue"), granted(&["sqs:SendMessage"]));
    let mut wrong = Vec::new();
    for (key, want) in &expected {
        let got = used.get(key).cloned().unwrap_or_default();
        let unused: Vec<_> = want.difference(&got).collect();
        let missing: Vec<_> = got.difference(want).collect();
        if !unused.is_empty() || !missing.is_empty() {
            wrong.push(format!(
                "{key:?}: granted and never used {unused:?}; used and not granted {missing:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let extra: Vec<_> = used.keys().filter(|k| !expected.contains_key(k)).collect();
    assert!(extra.is_empty(), "calls on resources no grant names: {extra:?}");
}

/// The binary (kind of processor) of `processor` in `m`.
fn kind_of(m: &models::Model, processor: &str) -> &'static str {
    m.stream_defs()
        .iter()
        .find(|d| d.name == processor)
        .map(|d| d.binary)
        .or_else(|| m.queue_defs().iter().find(|d| d.name == processor).map(|d| d.binary))
        .unwrap_or_else(|| panic!("{}: unknown processor {processor}", m.name))
}

/// For a model with a fold: an aggregate whose first change the fold sees
/// is not its creation (adopted by the live fold), as after a deploy next
/// to a table in use.
async fn adoption_calls(rt: &mut Runtime) {
    if rt.model.fold.is_none() {
        return;
    }
    let writer = shared::models::tracker::writer::TrackerWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let mut t = Clock::new();
    let item = shared::models::tracker::writer::application("adopt-me", "Acme", "Engineer", "applied", &t.next());
    // Written, then its stream records forgotten by the fold's state: the
    // HEAD is deleted as if the fold had never seen it.
    writer.put(item).await.unwrap();
    rt.drain().await.unwrap();
    let ledger = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .unwrap();
    for i in ledger.iter().filter(|i| {
        i.s(shared::ledger::PK).is_ok_and(|pk| pk.contains("adopt-me"))
    }) {
        let key: Item = [shared::ledger::PK, shared::ledger::SK]
            .iter()
            .map(|k| (k.to_string(), i[*k].clone()))
            .collect();
        rt.dynamodb
            .delete_item()
            .table_name(&rt.config.ledger_table)
            .set_key(Some(key))
            .send()
            .await
            .unwrap();
    }
    writer
        .update_application("adopt-me", &[("notes", s("adopted"))], &t.next())
        .await
        .unwrap();
    writer.delete_application("adopt-me").await.unwrap();
    rt.drain().await.unwrap();
}

/// `npx tsx bin/synth-offline.ts DIR` in `infra/`: one template per model.
fn synth_templates() -> PathBuf {
    let infra = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra");
    assert!(
        infra.join("node_modules").is_dir(),
        "the parity test synthesises the CDK app: run `npm ci` in infra/ first (./scripts/test does)"
    );
    let out = std::env::temp_dir().join(format!("jobstream-parity-{}", uuid::Uuid::new_v4().simple()));
    let status = std::process::Command::new("npx")
        .args(["tsx", "bin/synth-offline.ts"])
        .arg(&out)
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
/// mapping configurations, the filters it applies, the queues it created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_models_template_has_the_settings_the_local_runtime_builds() {
    let out = tokio::task::spawn_blocking(synth_templates).await.unwrap();
    for m in models::registry() {
        let path = out.join(format!("Jobstream-{}.template.json", m.name));
        let t: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let env = model_env(m.name, |_| {}).await;
        let rt = &env.rt;
        let functions = resources(&t, "AWS::Lambda::Function");
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
        let mappings = resources(&t, "AWS::Lambda::EventSourceMapping");
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
            mappings.iter().filter(|(_, e)| e["Properties"]["StartingPosition"].is_string()).count(),
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
            assert_eq!(p["MaximumRetryAttempts"], u64::from(cfg.max_retries), "{what}");
            assert_eq!(p["BisectBatchOnFunctionError"], cfg.bisect_on_error, "{what}");
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
            assert_eq!(f["Properties"]["Timeout"], secs(cfg.function_timeout), "{what}");
            assert_eq!(p["ParallelizationFactor"], 1, "{what}: one invocation per shard");
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
            let def = m.queues().into_iter().find(|d| d.consumer == local.name).unwrap();
            let mut scaled = def.clone();
            scaled.visibility_timeout_secs = deployed_visibility as u32;
            assert_eq!(
                get(QueueAttributeName::VisibilityTimeout),
                queue_visibility(&scaled, rt.time_scale).as_secs().to_string(),
                "{what}: the deployed visibility, scaled"
            );
            let redrive: Value = serde_json::from_str(&get(QueueAttributeName::RedrivePolicy)).unwrap();
            assert_eq!(
                redrive["maxReceiveCount"].to_string().trim_matches('"'),
                q["RedrivePolicy"]["maxReceiveCount"].to_string(),
                "{what}: receives before the DLQ"
            );
            assert_eq!(
                get(QueueAttributeName::MessageRetentionPeriod),
                q["MessageRetentionPeriod"].to_string(),
                "{what}"
            );
            assert_eq!(f["Properties"]["Timeout"], u64::from(def.consumer_timeout_secs), "{what}");
            assert_eq!(
                p["ScalingConfig"]["MaximumConcurrency"],
                u64::from(def.max_concurrency),
                "{what}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
