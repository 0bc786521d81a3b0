//! A fresh engine, tables, queues and runtime per test, for any model.

use std::sync::OnceLock;

use crate::apps::keys;
use crate::apps::AppWriter;
pub use crate::items::{partition, put};
use aws_lambda_events::event::dynamodb::Event;
use jobstream::faults::FaultProxy;
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::{Runtime, RuntimeOptions};
use jobstream::local::sqs_server::LocalSqs;
use serde_json::{json, Value};
use shared::item::{Item, ItemExt};
use shared::store::Backoff;

/// Every duration of the deployed definition (function timeouts, SQS
/// visibility, batching window, record age) is multiplied by this in tests:
/// the counts (10 retries, 5 receives) and the order stay the deployed ones
/// (SPEC §6.1). A 180 s visibility becomes 3 s, a 60 s timeout 1 s.
pub const TIME_SCALE: f64 = 1.0 / 60.0;

/// One local SQS server per test binary (it stops when the binary exits);
/// every test uses its own queue names.
pub fn sqs() -> String {
    static SQS: OnceLock<LocalSqs> = OnceLock::new();
    SQS.get_or_init(|| LocalSqs::start().expect("the local SQS starts"))
        .endpoint()
}

/// An engine and a model's runtime (queues on the shared local SQS, named for
/// this test).
pub struct ModelEnv {
    pub engine: LocalEngine,
    pub rt: Runtime,
}

impl ModelEnv {
    /// Every stream record of the table so far (see [`records_of`]).
    pub async fn records(&self) -> Vec<Value> {
        records_of(&self.engine, &self.rt).await
    }
}

/// Engine + the runtime of `model` (or of the model file `f` names),
/// options adjusted by `f`.
pub async fn model_env(model: &str, f: impl FnOnce(&mut RuntimeOptions)) -> ModelEnv {
    model_env_on(start_engine().await, model, f).await
}

/// [`model_env`] whose processors reach the engine through a fault proxy,
/// with one SDK attempt and none of our own backoff (every injected fault
/// fails the call it hits, which the mapping or SQS delivers again, as in
/// production); then options adjusted by `f`.
pub async fn model_env_behind_proxy(
    model: &str,
    f: impl FnOnce(&mut RuntimeOptions),
) -> (ModelEnv, FaultProxy) {
    let engine = start_engine().await;
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let endpoint = proxy.endpoint();
    let env = model_env_on(engine, model, |o| {
        o.processor_endpoint = Some(endpoint);
        o.max_attempts = 1;
        o.backoff = Backoff {
            max_times: 0,
            ..Backoff::default()
        };
        f(o);
    })
    .await;
    (env, proxy)
}

/// Engine + tracker runtime whose processors reach the engine through a
/// fault proxy with the deployed retry configuration (the SDK's attempts,
/// backoff and call budget, our own backoff): nothing friendlier, nothing
/// harsher than a Lambda gets.
pub async fn env_behind_proxy_as_deployed() -> (Env, FaultProxy) {
    let engine = start_engine().await;
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let endpoint = proxy.endpoint();
    let ModelEnv { engine, rt } = model_env_on(engine, "tracker", |o| {
        o.processor_endpoint = Some(endpoint);
    })
    .await;
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    (Env { engine, rt, writer }, proxy)
}

/// A fresh embedded engine on a free port.
pub async fn start_engine() -> LocalEngine {
    LocalEngine::start("127.0.0.1:0", None)
        .await
        .expect("engine starts")
}

/// The options of `model`'s runtime on `engine`, its stream read in
/// process (as the local mapping reads it), all else the defaults.
pub fn embedded_options(engine: &LocalEngine, model: &str) -> RuntimeOptions {
    let db = engine.database().clone();
    RuntimeOptions::new(model, Some(engine.endpoint()), RecordReader::Embedded(db))
}

/// [`model_env`] on an engine already started (a meter or a proxy in
/// front of it, say).
pub async fn model_env_on(
    engine: LocalEngine,
    model: &str,
    f: impl FnOnce(&mut RuntimeOptions),
) -> ModelEnv {
    let mut opts = embedded_options(&engine, model);
    opts.time_scale = TIME_SCALE;
    // The deployed queue timeout, unscaled: jobs of a thousand writes take
    // seconds here (see `RuntimeOptions::function_timeout_scale`).
    opts.function_timeout_scale = Some(1.0);
    f(&mut opts);
    // The model the options name (a model file when `f` gave one).
    let source = shared::models::Source::new(model, opts.model_file.as_deref());
    let m = shared::models::load(&source).expect("a model");
    if !m.consumers.is_empty() && opts.sqs_endpoint.is_none() {
        opts.sqs_endpoint = Some(tokio::task::spawn_blocking(sqs).await.expect("local SQS"));
        opts.queue_prefix = format!("t{}-", uuid::Uuid::new_v4().simple());
    }
    let rt = Runtime::start(opts).await.expect("runtime starts");
    ModelEnv { engine, rt }
}

pub struct Env {
    pub engine: LocalEngine,
    pub rt: Runtime,
    pub writer: AppWriter,
}

/// Engine + tracker runtime with default settings.
pub async fn env() -> Env {
    env_with(|_| {}).await
}

/// [`env`], a clone of its writer and a fresh clock: what a test of the
/// tracker's writes starts with.
pub async fn env_writer_clock() -> (Env, AppWriter, crate::apps::Clock) {
    let env = env().await;
    let w = env.writer.clone();
    (env, w, crate::apps::Clock::new())
}

/// Engine + tracker runtime, options adjusted by `f`.
pub async fn env_with(f: impl FnOnce(&mut RuntimeOptions)) -> Env {
    let ModelEnv { engine, rt } = model_env("tracker", f).await;
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    Env { engine, rt, writer }
}

/// `model`'s processors deployed anew next to `env`'s tables (the same
/// engine), options adjusted by `f`.
pub async fn redeploy_model(
    env: ModelEnv,
    model: &str,
    f: impl FnOnce(&mut RuntimeOptions),
) -> ModelEnv {
    drop(env.rt);
    model_env_on(env.engine, model, f).await
}

/// The processors deployed anew next to `env`'s tables (the same engine), options
/// adjusted by `f`: a stack deployed next to a table in use.
pub async fn redeploy(env: Env, f: impl FnOnce(&mut RuntimeOptions)) -> Env {
    let Env { engine, rt, writer } = env;
    drop(rt);
    let ModelEnv { engine, rt } = model_env_on(engine, "tracker", f).await;
    Env { engine, rt, writer }
}

/// Engine + tracker runtime whose processors write through a fault proxy,
/// with `max_attempts` SDK attempts and `backoff_times` retries of our own
/// backoff; the mapping retries as deployed.
pub async fn env_behind_proxy(max_attempts: u32, backoff_times: usize) -> (Env, FaultProxy) {
    let (ModelEnv { engine, rt }, proxy) = model_env_behind_proxy("tracker", |o| {
        o.max_attempts = max_attempts;
        o.backoff = Backoff {
            max_times: backoff_times,
            ..Backoff::default()
        };
    })
    .await;
    let writer = AppWriter::new(rt.dynamodb.clone(), &rt.config.table);
    (Env { engine, rt, writer }, proxy)
}

/// Every stream record of `table` so far, as a Lambda event (read through
/// the engine's own API, as the local mapping does).
pub async fn stream_event(env: &Env) -> Event {
    crate::items::records_event(&raw_records(env).await)
}

/// The stream's records as Lambda-shaped JSON.
pub async fn raw_records(env: &Env) -> Vec<Value> {
    records_of(&env.engine, &env.rt).await
}

/// Every stream record of `rt`'s table so far, as Lambda-shaped JSON (read
/// through the engine's own API, as the local mapping does).
pub async fn records_of(engine: &LocalEngine, rt: &Runtime) -> Vec<Value> {
    StreamTap::of(engine, rt).await.records().await
}

/// A table's stream, read as the local mapping reads it, by a holder that
/// keeps neither the engine nor the runtime (a second consumer beside the
/// mapping's, say).
#[derive(Clone)]
pub struct StreamTap {
    db: dynoxide::Database,
    streams: aws_sdk_dynamodbstreams::Client,
    arn: String,
}

impl StreamTap {
    pub async fn of(engine: &LocalEngine, rt: &Runtime) -> Self {
        let streams = aws_sdk_dynamodbstreams::Client::new(
            &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
        );
        let arn = jobstream::local::esm::stream_arn(&rt.dynamodb, &rt.config.table)
            .await
            .expect("stream");
        let db = engine.database().clone();
        Self { db, streams, arn }
    }

    /// Every record so far, as Lambda-shaped JSON.
    pub async fn records(&self) -> Vec<Value> {
        let (streams, arn) = (&self.streams, &self.arn);
        let desc = streams
            .describe_stream()
            .stream_arn(arn)
            .send()
            .await
            .expect("describe");
        let mut out = Vec::new();
        for shard in desc.stream_description().expect("description").shards() {
            let it = streams
                .get_shard_iterator()
                .stream_arn(arn)
                .shard_id(shard.shard_id().expect("id"))
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("iterator");
            let mut iterator = it.shard_iterator().map(str::to_string);
            while let Some(i) = iterator.take() {
                let req = dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: i,
                    limit: Some(1000),
                };
                let resp = self.db.get_records(req).expect("get records");
                if resp.records.is_empty() {
                    break;
                }
                for r in &resp.records {
                    let mut v = serde_json::to_value(r).expect("json");
                    v["eventSourceARN"] = json!(arn);
                    out.push(v);
                }
                iterator = resp.next_shard_iterator;
            }
        }
        out
    }
}

/// The table holds what `expected` implies, and `verify` is clean.
pub async fn assert_exact(env: &Env, expected: &crate::apps::Expected) {
    crate::apps::assert_observed(&env.rt.dynamodb, &env.rt.config.table, expected).await;
    crate::items::assert_clean(env).await;
}

/// The history entries of an application, in sequence order.
pub async fn entries(env: &Env, app_id: &str) -> Vec<Item> {
    crate::items::begins(env, &keys::app_pk(app_id), "HIST#").await
}

/// History descriptions of an application, in sequence order.
pub async fn descriptions(env: &Env, app_id: &str) -> Vec<String> {
    let entries = entries(env, app_id).await;
    let text = |i: &Item| i.s("description").unwrap_or_default().to_string();
    entries.iter().map(text).collect()
}

/// META/COUNT, if present.
pub async fn count(env: &Env) -> Option<i64> {
    partition(env, keys::META_PK)
        .await
        .first()
        .and_then(|i| i.opt_i64(keys::COUNT_ATTR).ok().flatten())
}

/// The processors of `rt` polling in the background, as `jobstream dev`
/// runs them, until [`Background::stop`].
pub struct Background {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<Runtime>,
}

pub fn run_in_background(mut rt: Runtime) -> Background {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        rt.run_until(async {
            let _ = stopped.await;
        })
        .await
        .expect("processors run");
        rt
    });
    Background { stop, handle }
}

impl Background {
    /// Stops polling and hands the runtime back.
    pub async fn stop(self) -> Runtime {
        self.stop.send(()).expect("runner alive");
        self.handle.await.expect("runner joins")
    }
}

/// The `jobstream` binary (built here if needed: this crate links only the
/// library), as a user runs it; `JOBSTREAM_TEST_BIN` names another build
/// (an earlier commit's, to see a new test fail on it first).
pub fn jobstream_bin() -> std::path::PathBuf {
    static BIN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("JOBSTREAM_TEST_BIN") {
            return bin.into();
        }
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "jobstream", "--bin", "jobstream"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "the jobstream binary builds");
        let exe = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/integration-<hash> -> target/<profile>/jobstream
        exe.parent()
            .and_then(|deps| deps.parent())
            .expect("target dir")
            .join("jobstream")
    })
    .clone()
}

/// The `jobstream` binary `bin` as a test starts it: none of the
/// variables that would point it elsewhere than its flags say (an SQS or
/// DynamoDB endpoint, a table, a ledger, a stack, a model or one of `run`'s
/// settings from the environment).
pub fn jobstream_command(bin: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(bin);
    for v in [
        "AWS_ENDPOINT_URL_SQS",
        "JOBSTREAM_ENDPOINT",
        "TABLE_NAME",
        "LEDGER_TABLE_NAME",
        "JOBSTREAM_STACK",
        "MODEL",
        "MODEL_FILE",
        "JOBSTREAM_STARTING_POSITION",
        "JOBSTREAM_ON_FAILURE_FILE",
        "JOBSTREAM_ON_FAILURE_QUEUE_URL",
        "JOBSTREAM_LEASE_TTL_SECS",
        "JOBSTREAM_SHUTDOWN_GRACE",
        "JOBSTREAM_EMIT_METRICS",
    ] {
        c.env_remove(v);
    }
    c
}

/// A process a test started, killed if the test ends (fails) with it
/// still running: a wedged one would outlive the test.
pub struct Started(Option<std::process::Child>);

impl Started {
    pub fn new(child: std::process::Child) -> Self {
        Self(Some(child))
    }

    pub fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("still running")
    }

    /// The process, no longer killed at the end of the test.
    pub fn take(&mut self) -> std::process::Child {
        self.0.take().expect("still running")
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// SIGTERM to a spawned `jobstream run` (the signal is delivered), then
/// its output once it exits.
pub async fn sigterm(child: std::process::Child) -> std::process::Output {
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap()
}

/// `jobstream ARGS` through the binary; its output.
pub fn jobstream<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> std::process::Output {
    std::process::Command::new(jobstream_bin())
        .args(args)
        .output()
        .expect("jobstream runs")
}

/// Every item of the runtime's table by (PK, SK): two runs of one scenario
/// (a model file and its Rust twin) compare as maps.
pub async fn table_by_key(rt: &Runtime) -> std::collections::BTreeMap<(String, String), Item> {
    let items = crate::items::scan(rt).await.into_iter();
    items.map(|i| (crate::items::pk_sk(&i), i)).collect()
}

/// `jobstream demo --model MODEL` through the binary: it succeeds, says
/// which model, plays the shipped scenario, prints every access pattern the
/// file declares (`query NAME(`), fails nothing and ends OK; its output.
pub fn demo_through_the_binary(model: &str) -> String {
    let out = std::process::Command::new(jobstream_bin())
        .args(["demo", "--model", model])
        .env("RUST_LOG", "warn")
        .output()
        .expect("jobstream runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file =
        shared::models::file_of(&shared::models::Source::Name(model.into())).expect("a model");
    assert!(
        text.starts_with(&format!("jobstream demo: {}", file.model.about)),
        "{text}"
    );
    assert!(
        text.contains(&format!("scenario models/{model}.scenario.yaml: ")),
        "{text}"
    );
    assert!(
        !file.model.queries.is_empty(),
        "{model} declares its access patterns"
    );
    for q in &file.model.queries {
        assert!(
            text.contains(&format!("\nquery {}(", q.name)),
            "{}: {text}",
            q.name
        );
    }
    assert!(text.contains("\nprocessor writes: "), "{text}");
    assert!(!text.contains("FAILED"), "{text}");
    assert!(
        text.ends_with("OK: every derived item is what the scenario implies.\n"),
        "{text}"
    );
    text
}

/// A model file written for the test: `<name>.yaml` in a fresh directory.
pub fn temp_model(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("jobstream-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).expect("writes");
    path
}

/// A file the project ships under `models/` (`hr.yaml`, `examples/…`).
pub fn shipped(file: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models")
        .join(file)
}

/// Faults on every one of `ops`, one after the other, each after `after`
/// more requests: a 5xx and throttling before the request reaches the
/// engine, a 5xx after it took effect (a commit whose answer is lost), a
/// connection reset before, and one after. (One at a time: a message meets
/// fewer faults than its queue's receives, so none is dead-lettered by the
/// faults alone.)
pub fn inject_faults(proxy: &FaultProxy, ops: &[&str]) {
    use jobstream::faults::Fault;
    for (i, after) in [2u32, 5, 9, 14, 20].into_iter().enumerate() {
        for op in ops {
            proxy.inject(match i {
                0 => Fault::server_error(op, 1).after(after),
                1 => Fault::throttle(op, 1).after(after),
                2 => Fault::server_error(op, 1).after(after).after_effect(),
                3 => Fault::reset(op, 1).after(after),
                _ => Fault::reset(op, 1).after(after).after_effect(),
            });
        }
    }
}

/// The log lines written on this thread while the guard [`Captured::start`]
/// returns lives (a test on a current-thread runtime: the processors log
/// there), at the subscriber's default level (`info`) and above.
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    pub fn start() -> (Self, tracing::subscriber::DefaultGuard) {
        // tracing caches each log site's interest across all threads'
        // subscribers; a site first reached on another thread while no
        // capture was alive could be cached as uninteresting and drop this
        // thread's lines (one test in three lost all its lines when run
        // beside others). A global subscriber at `info` that keeps nothing
        // keeps every site at `info` and above interesting.
        static INTERESTED: std::sync::Once = std::sync::Once::new();
        INTERESTED.call_once(|| {
            use tracing_subscriber::layer::SubscriberExt;
            let keep_nothing =
                tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::INFO);
            tracing::subscriber::set_global_default(keep_nothing)
                .expect("no other global subscriber in the tests");
        });
        let logs = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).to_string()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
