//! `jobstream run` as a durable stream consumer against the embedded engine:
//! checkpoints and leases in the ledger table, a restart resumes where the
//! last batch's effects ended, two consumers never process one record both,
//! a kill in the middle of a batch is made exact by the restart.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::apps::play;
use crate::apps::AppWriter;
use aws_lambda_events::event::dynamodb::Event;
use jobstream::local::engine::{sdk_config, LocalEngine};
use jobstream::local::esm::{
    handler, release_all, stream_arn, Handler, MappingConfig, RecordReader, StreamMapping,
};
use jobstream::local::lease::{checkpoint_pk, CheckpointConfig};
use jobstream::local::runtime::Runtime;
use shared::metrics::names;

use crate::items::assert_clean;
use crate::support::{assert_exact, raw_records, run_in_background, Env};

const BATCH: usize = 5;

async fn client(engine: &LocalEngine) -> aws_sdk_dynamodb::Client {
    aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await)
}

/// Mapping settings of a `run` process named `owner`: small batches,
/// durable checkpoints and leases.
async fn mapping(engine: &LocalEngine, owner: &str, lease_ttl: Duration) -> MappingConfig {
    let mut m = MappingConfig::new("stream");
    m.batch_size = BATCH;
    m.retry_delay = Duration::from_millis(5);
    m.discovery_interval = Duration::from_millis(100);
    let mut c = CheckpointConfig::new(client(engine).await, shared::models::table::ledger().name);
    c.owner = owner.to_string();
    c.lease_ttl = lease_ttl;
    m.checkpoints = Some(c);
    m
}

/// A `run` process on `engine`: the tracker's two consumers.
async fn run_process(engine: &LocalEngine, owner: &str, lease_ttl: Duration) -> Runtime {
    let mut opts = crate::support::embedded_options(engine, "tracker");
    opts.mapping = mapping(engine, owner, lease_ttl).await;
    Runtime::start(opts).await.expect("runtime starts")
}

async fn env(owner: &str, lease_ttl: Duration) -> Env {
    let engine = crate::support::start_engine().await;
    let rt = run_process(&engine, owner, lease_ttl).await;
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    Env { engine, rt, writer }
}

/// Records each mapping read: processed by its handler, or dropped by its
/// deployed event filter before it.
fn processed(rt: &Runtime) -> (u64, u64) {
    let read = |p: &str| {
        rt.stream_processor(p).metrics().get(names::PROCESSED)
            + rt.filtered_out[p].load(std::sync::atomic::Ordering::Relaxed)
    };
    (read("history"), read("derive"))
}

/// Checkpoint items of the ledger for the table's stream.
async fn checkpoint_items(env: &Env, mapping: &str) -> Vec<shared::item::Item> {
    let arn = stream_arn(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap();
    let out = env
        .rt
        .dynamodb
        .query()
        .table_name(&env.rt.config.ledger_table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(
            ":pk",
            aws_sdk_dynamodb::types::AttributeValue::S(checkpoint_pk(mapping, &arn)),
        )
        .send()
        .await
        .unwrap();
    out.items().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_at_the_checkpoint_and_reads_nothing_twice() {
    let mut env = env("run-1", Duration::from_secs(30)).await;
    let expected = play(&env.writer).await.unwrap();
    // A few batches, then the process goes away (no release: as if killed
    // between two batches).
    for _ in 0..3 {
        jobstream::local::esm::poll_streams(&mut env.rt.mappings).await;
    }
    let first = processed(&env.rt);
    assert!(
        first.0 > 0 && first.1 > 0,
        "the first process made progress"
    );
    let items = checkpoint_items(&env, "history").await;
    assert_eq!(items.len(), 1, "one shard, one checkpoint item");
    assert!(items[0].contains_key("sequenceNumber"));

    // The restarted process has the same identity: it takes its leases back
    // at once and resumes after the checkpoint.
    let restarted = run_process(&env.engine, "run-1", Duration::from_secs(30)).await;
    let old = std::mem::replace(&mut env.rt, restarted);
    drop(old);
    env.rt.drain().await.unwrap();
    let second = processed(&env.rt);
    let stream_len = raw_records(&env).await.len() as u64;
    assert_eq!(
        first.0 + second.0,
        stream_len,
        "history read each record once"
    );
    assert_eq!(
        first.1 + second.1,
        stream_len,
        "derive read each record once"
    );
    assert_exact(&env, &expected).await;

    // A third start reads nothing at all.
    let mut third = run_process(&env.engine, "run-1", Duration::from_secs(30)).await;
    assert_eq!(third.drain().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_start_replays_deliberately_and_changes_nothing() {
    let mut env = env("run-1", Duration::from_secs(30)).await;
    let expected = play(&env.writer).await.unwrap();
    env.rt.drain().await.unwrap();
    let stream_len = raw_records(&env).await.len() as u64;
    let mut opts = crate::support::embedded_options(&env.engine, "tracker");
    opts.mapping = mapping(&env.engine, "run-1", Duration::from_secs(30)).await;
    if let Some(c) = opts.mapping.checkpoints.as_mut() {
        c.from_start = true;
    }
    let mut replay = Runtime::start(opts).await.unwrap();
    replay.drain().await.unwrap();
    // Every record again, once, from the first; the replay's own writes
    // are already-correct values (which the embedded engine still streams
    // as MODIFY records), read once too.
    let now = raw_records(&env).await.len() as u64;
    assert!(now >= stream_len);
    assert_eq!(processed(&replay), (now, now));
    assert_exact(&env, &expected).await;
}

/// Waits until `rt`'s history consumer processed more than `than` records.
async fn progress(metrics: &shared::metrics::Metrics, than: u64) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while metrics.get(names::PROCESSED) <= than {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the consumer makes progress");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_the_stream_without_processing_a_record_twice() {
    let ttl = Duration::from_secs(30);
    let mut env = env("run-a", ttl).await;
    let a = std::mem::replace(&mut env.rt, run_process(&env.engine, "spare", ttl).await);
    let b = run_process(&env.engine, "run-b", ttl).await;
    let (a_history, b_history) = (a.stream_processor("history"), b.stream_processor("history"));
    // A runs while the application writes; B starts beside it.
    let a = run_in_background(a);
    play(&env.writer).await.unwrap();
    progress(a_history.metrics(), 0).await;
    let b = run_in_background(b);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A stops (letting its leases go, as `run` does at exit); B takes over
    // the shard and processes what comes next.
    let mut a = a.stop().await;
    release_all(&mut a.mappings).await;
    env.writer
        .create("late", "Late Ltd", "SRE", "2024-06-01T10:00:00Z")
        .await;
    progress(b_history.metrics(), 0).await;
    let mut b = b.stop().await;
    release_all(&mut b.mappings).await;
    // A comes back and finishes whatever is left.
    a.drain().await.unwrap();
    let stream_len = raw_records(&env).await.len() as u64;
    let (pa, pb) = (processed(&a), processed(&b));
    assert!(pb.0 > 0, "B processed after the handover: {pb:?}");
    assert_eq!(
        pa.0 + pb.0,
        stream_len,
        "history: each record by one process once"
    );
    assert_eq!(
        pa.1 + pb.1,
        stream_len,
        "derive: each record by one process once"
    );
    assert_clean(&env.rt).await;
}

/// Runs the real handler on the first half of the `kill_at`-th batch, then
/// never returns: the process dies there (effects of half a batch done, no
/// checkpoint).
fn dying(
    real: Handler,
    kill_at: usize,
    seen: Arc<Mutex<Vec<String>>>,
    dead: Arc<tokio::sync::Notify>,
) -> Handler {
    let calls = Arc::new(Mutex::new(0usize));
    Arc::new(move |mut event: Event| {
        let (real, seen, dead) = (real.clone(), seen.clone(), dead.clone());
        let call = {
            let mut c = calls.lock().unwrap();
            *c += 1;
            *c
        };
        Box::pin(async move {
            if call == kill_at {
                event.records.truncate(event.records.len().div_ceil(2));
            }
            seen.lock().unwrap().extend(
                event
                    .records
                    .iter()
                    .filter_map(|r| r.change.sequence_number.clone()),
            );
            let resp = real(event).await?;
            if call == kill_at {
                dead.notify_one();
                std::future::pending::<()>().await;
            }
            Ok(resp)
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_mid_batch_then_a_restart_by_another_process_ends_exact() {
    let ttl = Duration::from_millis(800);
    let env = env("victim", ttl).await;
    let expected = play(&env.writer).await.unwrap();
    let arn = stream_arn(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .unwrap();
    let streams =
        aws_sdk_dynamodbstreams::Client::new(&sdk_config(Some(&env.engine.endpoint()), 3).await);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dead = Arc::new(tokio::sync::Notify::new());
    let mut config = mapping(&env.engine, "victim", ttl).await;
    config.name = "history".into();
    let mut victim = StreamMapping::new(
        config,
        streams,
        RecordReader::Embedded(env.engine.database().clone()),
        arn,
        dying(
            handler(env.rt.stream_processor("history").clone()),
            3,
            seen.clone(),
            dead.clone(),
        ),
    );
    let task = tokio::spawn(async move {
        loop {
            victim.poll_once().await.expect("poll");
        }
    });
    tokio::time::timeout(Duration::from_secs(30), dead.notified())
        .await
        .expect("the third batch starts");
    task.abort(); // kill -9: no release, no checkpoint of the third batch
    let _ = task.await;
    let by_victim: HashSet<String> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(by_victim.len(), 2 * BATCH + BATCH.div_ceil(2));

    // Another process: waits out the victim's lease (its counter still for
    // a lease duration, as the successor's own clock measures it), resumes
    // at its checkpoint (the end of the second batch).
    let mut successor = run_process(&env.engine, "successor", ttl).await;
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            successor.drain().await.unwrap();
            if successor.mappings.iter().all(|m| !m.shards().is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the victim's lease was never taken over");
    successor.drain().await.unwrap();
    let stream_len = raw_records(&env).await.len() as u64;
    let history = processed(&successor).0;
    let reread = by_victim.len() as u64 + history - stream_len;
    assert!(
        reread <= BATCH as u64,
        "re-read {reread} records after the restart (at most one batch)"
    );
    assert_eq!(
        reread,
        BATCH.div_ceil(2) as u64,
        "exactly the half-done batch"
    );
    assert!(
        crate::items::metric_of(&successor, "history", names::DUPLICATE) > 0,
        "the half batch was recognised"
    );
    assert_eq!(
        processed(&successor).1,
        stream_len,
        "derive read everything once"
    );
    let env = Env {
        rt: successor,
        ..env
    };
    assert_exact(&env, &expected).await;
}

fn num(item: &shared::item::Item, name: &str) -> i64 {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_makes_a_run_process_hand_its_leases_over_at_once() {
    let ttl = Duration::from_secs(600); // a successor would wait 10 minutes for expiry
    let env = env("in-test", ttl).await;
    let expected = play(&env.writer).await.unwrap();
    let failures = std::env::temp_dir().join(format!("sigterm-{}.jsonl", uuid::Uuid::new_v4()));
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let child = std::process::Command::new(bin)
        .args(["run", "--model", "tracker", "--endpoint"])
        .arg(env.engine.endpoint())
        .args(["--lease-owner", "first", "--lease-ttl-secs", "600"])
        .arg("--on-failure-file")
        .arg(&failures)
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("jobstream run starts");
    // Until the child holds both mappings' leases.
    let held = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let mut owners = Vec::new();
            for mapping in ["history", "derive"] {
                for item in checkpoint_items(&env, mapping).await {
                    if item
                        .get("leaseOwner")
                        .and_then(|v| v.as_s().ok())
                        .map(String::as_str)
                        == Some("first")
                        && num(&item, "leaseExpiresAt") > chrono::Utc::now().timestamp_millis()
                    {
                        owners.push(mapping);
                    }
                }
            }
            if owners.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(held.is_ok(), "the child took its leases");
    let out = crate::support::sigterm(child).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit 0 after SIGTERM: {stderr}");
    assert!(stderr.contains("SIGTERM"), "{stderr}");
    // Which version of the model ran, as the Lambdas log it.
    let shipped = shared::models::file_of(&shared::models::Source::Name("tracker".into())).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "model file: models/tracker.yaml, shipped (sha256 {})",
            shipped.sha256
        )),
        "{stdout}"
    );
    // Released: expired now, checkpoint kept.
    for mapping in ["history", "derive"] {
        for item in checkpoint_items(&env, mapping).await {
            assert_eq!(num(&item, "leaseExpiresAt"), 0, "{mapping}: released");
        }
    }
    // A successor takes over at once (not after the 10-minute TTL) and
    // finishes exactly.
    let mut successor = run_process(&env.engine, "second", ttl).await;
    jobstream::local::esm::poll_streams(&mut successor.mappings).await;
    for m in &successor.mappings {
        assert_eq!(m.shards().len(), 1, "{} took the shard at once", m.name());
    }
    successor.drain().await.unwrap();
    std::fs::remove_file(&failures).ok();
    let env = Env {
        rt: successor,
        ..env
    };
    assert_exact(&env, &expected).await;
}

/// `run` never starts an in-memory SQS (queued jobs would be lost at exit
/// after the checkpoint moved past their records): a model with queues
/// runs on the deployed ones, and without their URLs it refuses to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_never_starts_a_local_sqs_for_a_model_with_queues() {
    let bin = tokio::task::spawn_blocking(crate::support::jobstream_bin)
        .await
        .unwrap();
    let queued = shared::models::registry()
        .into_iter()
        .find(|m| !m.consumers.is_empty())
        .expect("a model with queues");
    let engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let table = format!("t{}", uuid::Uuid::new_v4().simple());
    let ledger = format!("{table}-ledger");
    jobstream::local::engine::ensure_table(&client, &queued.table, &table)
        .await
        .unwrap();
    jobstream::local::engine::ensure_table(&client, &shared::models::table::ledger(), &ledger)
        .await
        .unwrap();
    let endpoint = engine.endpoint();
    let name = queued.name;
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(bin);
        cmd.args([
            "run",
            "--model",
            name,
            "--endpoint",
            &endpoint,
            "--table",
            &table,
            "--ledger-table",
            &ledger,
        ])
        .env("AWS_REGION", "eu-west-1")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("JOBSTREAM_STACK");
        for q in queued.queues() {
            cmd.env_remove(shared::lambda::queue_env(q.logical));
        }
        cmd.output()
    })
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "refused: {stderr}");
    assert!(
        stderr.contains("QUEUE_URL_"),
        "names the variable: {stderr}"
    );
    assert!(stderr.contains("--stack"), "says how: {stderr}");
    assert!(
        !stdout.contains("processors:") && !stdout.contains("SQS endpoint:"),
        "nothing started: {stdout}"
    );
}

/// The function timeout bounds work, which scaling the test clock does
/// not make faster: a stream batch that takes longer than the scaled
/// timeout (60 s x 1/60 = 1 s) but far less than the deployed 60 s is never
/// cut, as Lambda would not cut it. (A cut batch is retried and ends exact,
/// but what the cut invocation counted is lost with it: the 400 KB snapshot
/// test once saw `SnapshotTooLarge` short of its omitted entries on a loaded
/// machine.) Every request the processors send is held 1.5 s once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_batch_within_the_deployed_timeout_is_not_cut_by_the_scaled_clock() {
    use jobstream::faults::Fault;
    let (
        crate::support::ModelEnv {
            engine: _engine,
            mut rt,
        },
        proxy,
    ) = crate::support::model_env_behind_proxy("tracker", |_| {}).await;
    for op in [
        "TransactWriteItems",
        "UpdateItem",
        "PutItem",
        "GetItem",
        "BatchGetItem",
        "Query",
    ] {
        proxy.inject(Fault::slow(op, 1, Duration::from_millis(1500)));
    }
    let w = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    w.create("slow", "Co", "Role", "2026-11-01T09:00:00.000Z")
        .await;
    rt.drain().await.unwrap();
    assert!(proxy.injected() > 0, "requests were held");
    for m in &rt.mappings {
        let stats = m.stats();
        assert_eq!(
            stats
                .failed_invocations
                .load(std::sync::atomic::Ordering::Relaxed),
            0,
            "{}: no invocation was cut",
            stats.name
        );
    }
    assert!(rt.verify().await.unwrap().is_clean());
}
