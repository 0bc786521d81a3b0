//! SPEC §6.1: what runs locally is what deploys. The deployed filters
//! applied before the handlers (adoption, unknown keys, counter repair), the
//! grants enforced on every processor call (a removed grant surfaces as
//! AccessDenied; the grants are exactly what the demos use). The
//! synthesised templates' settings against the ones the local runtime
//! actually built: `template_parity.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

use crate::apps::keys;
use crate::apps::Clock;
use jobstream::local::esm::StartingPosition;
use jobstream::local::iam::{recorder, Resource};
use jobstream::local::runtime::Runtime;
use jobstream::tools::backfill::ScanOptions;
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};
use shared::lambda::StreamHandler;
use shared::metrics::names;
use shared::models;

use crate::items::{assert_clean, put};
use crate::support::{count, descriptions, entries, env_with, model_env, Env};

/// The history of `app`: sequences 1..=n without gap, each entry's `SK`
/// its padded sequence. Returns the descriptions.
async fn gapless_history(env: &Env, app: &str) -> Vec<String> {
    for (i, e) in entries(env, app).await.iter().enumerate() {
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
    // The tables and their writers; the processors are deployed later.
    let env = env_with(|_| {}).await;
    let w = env.writer.clone();
    let mut t = Clock::new();
    // Writers first: applications with stages, before the processors read.
    for i in 0..APPS {
        let id = app(i);
        w.create(&id, "Acme", "Engineer", &t.next()).await;
        w.add_stage(&id, "s1", "Screen", 1).await.unwrap();
    }
    // The processors start (LATEST: nothing written so far is read)...
    let mut env = crate::support::redeploy(env, |o| {
        o.mapping.starting_position = StartingPosition::Latest;
    })
    .await;
    env.rt.drain().await.unwrap();
    // ...and the writers go on: the first change of each application
    // adopts it.
    for i in 0..APPS {
        w.set(&app(i), "notes", s("first"), &t.next()).await;
    }
    env.rt.drain().await.unwrap();
    // Backfill while the writers go on.
    let writes = async {
        for i in 0..APPS {
            w.set(&app(i), "notes", s("during backfill"), &t.next())
                .await;
        }
    };
    let scan = ScanOptions::default();
    tokio::join!(writes, crate::items::backfill(&env, &scan));
    env.rt.drain().await.unwrap();
    // Later changes still write entries (an adoption left pending would
    // absorb them silently, forever).
    for i in 0..APPS {
        w.set(&app(i), "status", s("interviewing"), &t.next()).await;
        w.add_stage(&app(i), "s2", "Onsite", 2).await.unwrap();
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
    assert_clean(&env).await;
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
        put(&env, item).await;
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
    let w = env.writer.clone();
    let mut t = Clock::new();
    for i in 0..3 {
        w.create(&app(i), "Acme", "Engineer", &t.next()).await;
    }
    env.rt.drain().await.unwrap();
    assert_eq!(count(&env).await, Some(3));
    let mut wrong = Item::new();
    wrong.insert(keys::PK.into(), s(keys::META_PK));
    wrong.insert(keys::SK.into(), s(keys::COUNT_SK));
    wrong.insert(keys::COUNT_ATTR.into(), n(42));
    w.put(wrong).await.unwrap();
    env.rt.drain().await.unwrap();
    assert_eq!(count(&env).await, Some(3), "the overwrite was repaired");
    assert_clean(&env).await;
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
        .create("a1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        descriptions(&env, "a1").await,
        Vec::<String>::new(),
        "no entry without PutItem"
    );
    let failed = env.rt.failed_batches();
    assert!(
        failed.iter().any(|f| f.mapping == "history"),
        "given up after the retries: {failed:?}"
    );
    assert!(failed.iter().all(|f| f.mapping == "history"), "{failed:?}");
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

/// Every model's demo (and a live adoption) under enforcement: nothing is
/// denied, and every call is on a resource a grant names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_demo_runs_under_enforced_grants() {
    for m in models::registry() {
        // A shipped model's demo is its shipped scenario.
        let file = models::file_of(&models::Source::Name(m.name.to_string())).expect("loads");
        let Some((path, text)) = shared::file::shipped_scenario(m.name) else {
            continue;
        };
        let mut env = model_env(m.name, |_| {}).await;
        let s = shared::file::scenario::Scenario::parse(text, path).expect("parses");
        let differences = shared::file::scenario::play_model(&mut env.rt, &s, &file.model, false)
            .await
            .expect("the scenario plays");
        assert_eq!(differences, Vec::<String>::new(), "{}", m.name);
        adoption_calls(&mut env.rt).await;
        own_timeline_repair_calls(&env.rt).await;
        let calls: Vec<_> = recorder()
            .calls()
            .into_iter()
            .filter(|c| c.session == env.rt.session)
            .collect();
        assert!(!calls.is_empty(), "{}: calls are checked", m.name);
        for c in calls {
            assert!(c.allowed, "{}: denied {c:?}", m.name);
            assert!(!matches!(c.resource, Resource::Other(_)), "{c:?}");
        }
    }
}

/// Every model the project ships: the registry's and the model files'.
fn shipped_models() -> Vec<models::Model> {
    models::registry()
        .into_iter()
        .chain(shipped_model_files().iter().map(|f| load_model_file(f)))
        .collect()
}

/// What each kind of processor may do per resource, from the grants.
fn granted_per_kind() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut add = |kind: &str, resource: &str, actions: &[&str]| {
        out.entry((kind.to_string(), resource.to_string()))
            .or_default()
            .extend(actions.iter().map(|a| a.to_string()));
    };
    for m in shipped_models() {
        let defs = m
            .stream_defs()
            .into_iter()
            .map(|d| (d.binary, d.grant))
            .chain(m.queue_defs().into_iter().map(|d| (d.binary, d.grant)));
        for (kind, g) in defs {
            add(kind, "table", &g.table_actions);
            add(kind, "table/index", &g.index_actions);
            add(kind, "ledger", &g.ledger_actions);
            if !g.sends_to.is_empty() {
                add(kind, "queue", &["sqs:SendMessage"]);
            }
        }
    }
    out.retain(|_, v| !v.is_empty());
    out
}

/// The recording test (run by `./scripts/test` after the suite, with
/// `JOBSTREAM_IAM_RECORD` set for both): every (processor, action,
/// resource) the demos and the whole suite used, against the grants, per
/// kind of processor. Fails on an action used and not granted (it was
/// denied) and on one granted and never used.
#[test]
#[ignore = "reads the calls the whole suite recorded: ./scripts/test runs it after the suite"]
fn the_grants_are_exactly_what_the_suite_uses() {
    let path = std::env::var(jobstream::local::iam::RECORD_ENV)
        .expect("JOBSTREAM_IAM_RECORD names the file the suite recorded its calls in");
    let text = std::fs::read_to_string(&path).expect("the suite recorded its calls");
    let shipped = shipped_models();
    let mut used: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    let mut denied = Vec::new();
    for line in text.lines() {
        let c: Value = serde_json::from_str(line).expect("a JSON line");
        let name = c["model"].as_str().unwrap();
        let Some(m) = shipped.iter().find(|m| m.name == name) else {
            // A model file a test writes for itself (its processors are the
            // shipped kinds): a call it was denied is still a missing
            // grant; what it used says nothing of the shipped models.
            if c["allowed"] != true {
                denied.push(line.to_string());
            }
            continue;
        };
        if c["processor"] == jobstream::local::iam::RUNNER {
            // `run`'s own calls: none may be denied (above); which of the
            // RunnerPolicy's mapping actions a run used is
            // deployed::runs_own_calls_are_checked_against_the_runner_policy's.
            if c["allowed"] != true {
                denied.push(line.to_string());
            }
            continue;
        }
        let kind = kind_of(m, c["processor"].as_str().unwrap());
        let resource = c["resource"].as_str().unwrap();
        let resource = if resource.starts_with("queue ") {
            "queue"
        } else {
            resource
        };
        if c["allowed"] != true {
            denied.push(line.to_string());
            continue;
        }
        used.entry((kind.to_string(), resource.to_string()))
            .or_default()
            .insert(c["action"].as_str().unwrap().to_string());
    }
    assert!(denied.is_empty(), "needed and not granted: {denied:#?}");
    let granted = granted_per_kind();
    let mut wrong = Vec::new();
    for key in granted.keys().chain(used.keys()).collect::<BTreeSet<_>>() {
        let want = granted.get(key).cloned().unwrap_or_default();
        let got = used.get(key).cloned().unwrap_or_default();
        let unused: Vec<_> = want.difference(&got).collect();
        let missing: Vec<_> = got.difference(&want).collect();
        if !unused.is_empty() || !missing.is_empty() {
            wrong.push(format!(
                "{key:?}: granted and never used {unused:?}; used and not granted {missing:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The binary (kind of processor) of `processor` in `m`.
fn kind_of(m: &models::Model, processor: &str) -> &'static str {
    m.stream_defs()
        .iter()
        .find(|d| d.name == processor)
        .map(|d| d.binary)
        .or_else(|| {
            m.queue_defs()
                .iter()
                .find(|d| d.name == processor)
                .map(|d| d.binary)
        })
        .unwrap_or_else(|| panic!("{}: unknown processor {processor}", m.name))
}

/// For a model with a fold: an aggregate whose first change the fold sees
/// is not its creation (adopted by the live fold), as after a deploy next
/// to a table in use.
async fn adoption_calls(rt: &mut Runtime) {
    if rt.model.fold.is_none() {
        return;
    }
    let writer = crate::apps::AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    let mut t = Clock::new();
    let item = crate::apps::application("adopt-me", "Acme", "Engineer", "applied", &t.next());
    // Written, then its stream records forgotten by the fold's state: the
    // HEAD is deleted as if the fold had never seen it.
    writer.put(item).await.unwrap();
    rt.drain().await.unwrap();
    let ledger = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .unwrap();
    for i in ledger.iter().filter(|i| {
        i.s(shared::ledger::PK)
            .is_ok_and(|pk| pk.contains("adopt-me"))
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
        .set("adopt-me", "notes", s("adopted"), &t.next())
        .await;
    writer
        .add_stage("adopt-me", "s1", "Screen", 1)
        .await
        .unwrap();
    rt.drain().await.unwrap();
    // A stage removed in a later batch: its state part is deleted.
    writer.remove_stage("adopt-me", "s1").await.unwrap();
    rt.drain().await.unwrap();
    writer.delete_application("adopt-me").await.unwrap();
    rt.drain().await.unwrap();
}

/// The denial is on the wire as AWS sends it: the SDKs read the error code
/// (DynamoDB `AccessDeniedException`; SQS, query-compatible,
/// `AccessDenied`) from a 400 response, as from AWS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_an_aws_shaped_access_denied_error() {
    use jobstream::local::iam::{EnforcingClient, Principal};
    use shared::models::table::Grant;
    let env = model_env("social", |_| {}).await;
    let rt = &env.rt;
    let http = EnforcingClient::new(Principal {
        session: "probe".into(),
        model: "social".into(),
        processor: "probe".into(),
        grant: Grant {
            table_actions: vec!["dynamodb:GetItem"],
            index_actions: vec![],
            ledger_actions: vec![],
            sends_to: vec![],
        },
        mappings: None,
        table: rt.config.table.clone(),
        ledger: rt.config.ledger_table.clone(),
        queues: rt
            .config
            .queues
            .iter()
            .map(|(l, u)| (u.clone(), l.clone()))
            .collect(),
        queue_names: Vec::new(),
        on_failure: None,
        record: false,
    });
    let sdk = jobstream::local::engine::sdk_config(Some(&env.engine.endpoint()), 1).await;
    let ddb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&sdk)
            .http_client(http.clone())
            .build(),
    );
    let key = |v: &str| -> Option<Item> { Some([("PK".into(), s(v)), ("SK".into(), s(v))].into()) };
    ddb.get_item()
        .table_name(&rt.config.table)
        .set_key(key("x"))
        .send()
        .await
        .expect("granted: reaches the engine");
    let err = ddb
        .put_item()
        .table_name(&rt.config.table)
        .set_item(key("x"))
        .send()
        .await
        .expect_err("PutItem is not granted");
    let raw = err
        .raw_response()
        .expect("an HTTP response")
        .status()
        .as_u16();
    assert_eq!(raw, 400);
    use aws_sdk_dynamodb::error::ProvideErrorMetadata;
    assert_eq!(err.code(), Some("AccessDeniedException"));
    assert!(err.message().unwrap().contains("dynamodb:PutItem"));
    let store = shared::store::Store::new(ddb.clone());
    let e = store
        .put_items(&rt.config.table, vec![key("y").unwrap()])
        .await
        .expect_err("BatchWriteItem is not granted");
    assert_eq!(
        e.code, "AccessDeniedException",
        "the store reads the code as from AWS"
    );
    let sqs_endpoint = tokio::task::spawn_blocking(crate::support::sqs)
        .await
        .unwrap();
    let sqs_sdk = jobstream::local::engine::sdk_config(Some(&sqs_endpoint), 1).await;
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&sqs_sdk)
            .http_client(http)
            .build(),
    );
    let url = rt.config.queues.values().next().unwrap();
    let err = sqs
        .send_message()
        .queue_url(url)
        .message_body("{}")
        .send()
        .await
        .expect_err("not granted");
    assert_eq!(err.raw_response().unwrap().status().as_u16(), 400);
    assert_eq!(err.code(), Some("AccessDenied"));
}

/// For the social model: a timeline entry forged onto its author's own
/// timeline (no fact makes it right) is removed by the set job `verify
/// --repair` runs through the consumer: an unguarded delete.
async fn own_timeline_repair_calls(rt: &Runtime) {
    if rt.model.name != "social" {
        return;
    }
    use crate::seed_items::social as sk;
    let items = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.table)
        .await
        .unwrap();
    let entry = items
        .iter()
        .find(|i| i.s(sk::PK).is_ok_and(|pk| pk.ends_with("#timeline")))
        .expect("the demo wrote timeline entries");
    let sort = entry.s(sk::SK).unwrap();
    let (post, author) = sort
        .strip_prefix("p#")
        .and_then(|r| r.split_once("#u#"))
        .expect("p#<post>#u#<author>");
    let mut forged = entry.clone();
    forged.insert(sk::PK.into(), s(sk::timeline_pk(author)));
    forged.insert(sk::SK.into(), s(sk::timeline_sk(post, author)));
    put(rt, forged).await;
    let report = rt.verify().await.unwrap();
    assert!(!report.is_clean(), "the forged entry is found");
    crate::items::repair(&rt, &report).await;
    let after = rt.verify().await.unwrap();
    assert!(
        after.is_clean(),
        "{}\n{:#?}\nbefore: {:#?}",
        after.render(),
        after.problems,
        report.problems
    );
}

/// The model files the project ships that are not registry models (a
/// shipped file `--model NAME` loads is the registry's): their stacks are
/// synthesised and compared as the registry's are.
pub(crate) fn shipped_model_files() -> Vec<PathBuf> {
    let registry: Vec<&str> = models::registry().iter().map(|m| m.name).collect();
    every_shipped_model_file()
        .into_iter()
        .filter(|p| !registry.contains(&load_model_file(p).name))
        .collect()
}

fn every_shipped_model_file() -> Vec<PathBuf> {
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models");
    [
        "hr.yaml",
        "social.yaml",
        "examples/library.yaml",
        "pickem.yaml",
        "jobboard.yaml",
    ]
    .iter()
    .map(|f| models.join(f))
    .collect()
}

/// A shipped model file's model, as `--model-file PATH` loads it.
pub(crate) fn load_model_file(path: &std::path::Path) -> models::Model {
    models::load(&models::Source::File(path.to_path_buf())).expect("a shipped model file loads")
}

/// Derive and the fold run as concurrent mappings, as Lambda runs them:
/// each mapping's first invocation waits until the other one's has
/// started. Polled one after the other by one loop, the first would wait
/// forever (the test then fails at its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn derive_and_the_fold_are_invoked_concurrently() {
    use jobstream::local::esm::{handler, Handler, RecordReader, StreamMapping};
    use std::sync::Arc;
    let mut env = env_with(|_| {}).await;
    env.writer
        .create("c1", "Acme", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    let both_started = Arc::new(tokio::sync::Barrier::new(2));
    let gate = |inner: Handler| -> Handler {
        let barrier = both_started.clone();
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        Arc::new(move |event| {
            let (barrier, first, inner) = (barrier.clone(), first.clone(), inner.clone());
            Box::pin(async move {
                if first.swap(false, Relaxed) {
                    barrier.wait().await;
                }
                inner(event).await
            })
        })
    };
    let streams = aws_sdk_dynamodbstreams::Client::new(
        &jobstream::local::engine::sdk_config(Some(&env.engine.endpoint()), 3).await,
    );
    let arn = jobstream::local::esm::stream_arn(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap();
    let gated: Vec<StreamMapping> = env
        .rt
        .mappings
        .iter()
        .map(|m| {
            let p = env.rt.stream_processor(m.name());
            StreamMapping::new(
                m.config().clone(),
                streams.clone(),
                RecordReader::Embedded(env.engine.database().clone()),
                arn.clone(),
                gate(handler(p)),
            )
        })
        .collect();
    assert_eq!(gated.len(), 2);
    env.rt.mappings = gated;
    tokio::time::timeout(std::time::Duration::from_secs(60), env.rt.drain())
        .await
        .expect("both mappings were invoked at once")
        .unwrap();
    assert_eq!(descriptions(&env, "c1").await.len(), 1);
    assert_eq!(count(&env).await, Some(1));
}

/// Local filters see records as Lambda serialises them and drop what
/// they exclude before the handler; a batch left empty is not invoked.
#[tokio::test]
async fn filters_see_records_as_lambda_serialises_them_and_drop_before_the_handler() {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use aws_lambda_events::event::dynamodb::Event;
    use aws_lambda_events::event::streams::DynamoDbEventResponse;
    use jobstream::local::esm::Handler;
    use jobstream::local::runtime::filtered;
    use shared::models::filter::KeyRule;
    use shared::models::EventFilter;
    use std::sync::atomic::Ordering;
    let text = include_str!("../fixtures/tracker-batch.json");
    let event: Event = serde_json::from_str(text).unwrap();
    let total = event.records.len();
    let seen = Arc::new(AtomicU64::new(0));
    let s2 = seen.clone();
    let inner: Handler = Arc::new(move |e: Event| {
        s2.fetch_add(e.records.len() as u64, Ordering::Relaxed);
        Box::pin(async { Ok(DynamoDbEventResponse::default()) })
    });
    let dropped = Arc::new(AtomicU64::new(0));
    let only_stages = vec![EventFilter::key("SK", &[KeyRule::Prefix("STAGE#")])];
    let h = filtered(only_stages, dropped.clone(), inner.clone());
    h(event.clone()).await.unwrap();
    let raw: serde_json::Value = serde_json::from_str(text).unwrap();
    let stages = raw["Records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["dynamodb"]["Keys"]["SK"]["S"]
                .as_str()
                .is_some_and(|sk| sk.starts_with("STAGE#"))
        })
        .count() as u64;
    assert!(stages > 0 && (stages as usize) < total);
    assert_eq!(seen.load(Ordering::Relaxed), stages);
    assert_eq!(dropped.load(Ordering::Relaxed), total as u64 - stages);
    let none = vec![EventFilter::key("SK", &[KeyRule::Equals("nothing")])];
    h(event.clone()).await.unwrap();
    let before = seen.load(Ordering::Relaxed);
    filtered(none, dropped, inner)(event).await.unwrap();
    assert_eq!(
        seen.load(Ordering::Relaxed),
        before,
        "an empty batch is not invoked"
    );
}
