//! Benchmark (not a test): a hot shard. Sustained writes at fixed rates
//! (100, 250, 500, 1,000 changes/s by default) into ONE partition, processed
//! by the model's stream mappings with the deployed batch size, batching
//! window and parallelization factor (printed), for the tracker (one
//! application updated), social (likes of one post: one counter) and a
//! model file (models/examples/library.yaml: loans of one member), two ways
//! (`HOT_VIA`):
//!
//! - `dev`: `jobstream dev`'s runtime in this process (the embedded engine
//!   with its TTL sweeper, records read through the engine's own API);
//! - `run`: two processes, `jobstream serve` (the engine) and `jobstream run
//!   --endpoint` against it (GetRecords over HTTP, durable checkpoints and
//!   fenced leases in the ledger, as a self-hosted consumer runs), read
//!   through `run --metrics-listen`'s `/metrics`.
//!
//! Every few seconds it prints the writes accepted, the records each
//! mapping processed and its iterator age; at the end of each rate, whether
//! the mappings caught up and how long that took, and the bill (RRU/WRU per
//! change, processors and application apart).
//!
//! The baseline, in the same run and engine: the rate the engine accepts
//! plain PutItems of the same items (8 concurrent writers, no processors),
//! the rate above which no derive could keep up here.
//!
//! It reports; it asserts nothing about time. Run:
//! `cargo bench -p jobstream --bench hot_shard` (HOT_RATES=100,250,500,1000,
//! HOT_SECONDS=15 per rate, HOT_MODELS=tracker,social,library,
//! HOT_VIA=dev,run; HOT_JOBSTREAM=PATH runs another build's `jobstream`
//! for `run`, e.g. a baseline's).

/// The tracker's items (shared with the integration tests).
#[allow(dead_code)]
#[path = "../../tests/integration/apps.rs"]
mod apps;
mod common;
#[path = "common/seed_items.rs"]
mod seed_items;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::process::Stdio;

use anyhow::Context as _;
use aws_sdk_dynamodb::types::AttributeValue;
use common::{env_usize, Child};
use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use jobstream::local::metrics::get;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use jobstream::meter::Meter;
use shared::item::{s, Item};

/// Seconds between two samples.
const SAMPLE: Duration = Duration::from_secs(3);
/// Concurrent writes in flight at most (the writers' connection pool).
const IN_FLIGHT: usize = 64;
/// How long the mappings get to catch up once the writes stop.
const CATCH_UP: Duration = Duration::from_secs(120);

/// One hot-shard workload: a model and the `i`-th change of its hot
/// partition (a PutItem).
struct Workload {
    name: &'static str,
    model: &'static str,
    model_file: Option<std::path::PathBuf>,
    /// Items to put before the run (what the changes refer to).
    setup: fn() -> Vec<Item>,
    change: fn(usize) -> Item,
}

fn now_iso() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn tracker_app(i: usize) -> Item {
    // One application, updated again and again (each change a new note and
    // updatedAt: one history entry each).
    let created = "2026-11-01T09:00:00.000Z";
    let mut item = apps::application("hot", "Hot Co", "Engineer", "applied", created);
    item.insert("updatedAt".into(), s(now_iso()));
    item.insert("notes".into(), s(format!("change {i}")));
    item.insert("dateApplied".into(), s("2026-11-01"));
    item
}

fn social_like(i: usize) -> Item {
    let post = seed_items::ulid(1_764_000_000_000, 1);
    seed_items::social::like_item(&post, &format!("u{i:07}"), &now_iso())
}

fn library_loan(i: usize) -> Item {
    let book = seed_items::ulid(1_764_000_000_000 + i as u64, i as u128);
    seed_items::attrs([
        ("PK", s("M#hot")),
        ("SK", s(format!("LOAN#{book}"))),
        ("type", s("loan")),
        ("memberId", s("hot")),
        ("bookId", s(book)),
        ("days", AttributeValue::N("14".into())),
        ("state", s("open")),
        ("since", s(now_iso())),
    ])
}

fn library_member() -> Vec<Item> {
    vec![seed_items::attrs([
        ("PK", s("M#hot")),
        ("SK", s("PROFILE")),
        ("type", s("member")),
        ("memberId", s("hot")),
        ("name", s("Hot Member")),
    ])]
}

fn workloads() -> Vec<Workload> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    vec![
        Workload {
            name: "tracker (one application updated)",
            model: "tracker",
            model_file: None,
            setup: Vec::new,
            change: tracker_app,
        },
        Workload {
            name: "social (likes of one post)",
            model: "social",
            model_file: None,
            setup: Vec::new,
            change: social_like,
        },
        Workload {
            name: "library model file (loans of one member)",
            model: "library",
            model_file: Some(root.join("models/examples/library.yaml")),
            setup: library_member,
            change: library_loan,
        },
    ]
}

/// Puts `change(i)` for i in `from..` as fast as `writers` concurrent
/// writers go, for `secs`: PutItems/s.
async fn put_floor(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    change: fn(usize) -> Item,
    secs: Duration,
) -> anyhow::Result<f64> {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let writers = (0..8).map(|w| {
        let (client, table, done) = (client.clone(), table.to_string(), done.clone());
        tokio::spawn(async move {
            let mut i = w;
            while started.elapsed() < secs {
                client
                    .put_item()
                    .table_name(&table)
                    .set_item(Some(change(i)))
                    .send()
                    .await?;
                done.fetch_add(1, Ordering::Relaxed);
                i += 8;
            }
            anyhow::Ok(())
        })
    });
    for w in futures::future::join_all(writers).await {
        w??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

fn model_of(w: &Workload) -> anyhow::Result<shared::models::Model> {
    match &w.model_file {
        Some(path) => shared::file::model(path).map_err(|e| anyhow::anyhow!("{e}")),
        None => shared::models::find(w.model).map_err(anyhow::Error::msg),
    }
}

/// How the processors run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// `jobstream dev`'s runtime in this process: the embedded engine (with
    /// its TTL sweeper), records read through the engine's own API.
    Dev,
    /// Two processes, as a self-hosted consumer runs: `jobstream serve`
    /// (the engine) and `jobstream run --endpoint` against it (GetRecords
    /// over HTTP, durable checkpoints and leases in the ledger), observed
    /// through `run --metrics-listen`.
    Run,
}

impl Via {
    fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "dev" => Some(Self::Dev),
            "run" => Some(Self::Run),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Self::Dev => "dev (in process)",
            Self::Run => "run (jobstream serve + jobstream run, two processes)",
        }
    }
}

/// The processors under measurement and how to read their counters.
enum Consumer {
    InProcess {
        probe: jobstream::local::metrics::Probe,
        stop: tokio::sync::oneshot::Sender<()>,
        runner: tokio::task::JoinHandle<anyhow::Result<()>>,
        engine: LocalEngine,
    },
    Processes {
        /// `run`'s `--metrics-listen` address.
        metrics: std::net::SocketAddr,
        /// The stream processors, as `/metrics` labels them.
        mappings: Vec<String>,
        _run: Child,
        _serve: Child,
        _dir: TempDir,
    },
}

/// A directory removed at the end (the on-failure file of `run`).
struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// (mapping, records processed, iterator age in ms) per stream mapping.
type Counters = Vec<(String, u64, i64)>;

impl Consumer {
    async fn counters(&self) -> anyhow::Result<Counters> {
        match self {
            Self::InProcess { probe, .. } => Ok(probe
                .streams
                .iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        m.records_processed.load(Ordering::Relaxed),
                        m.iterator_age(),
                    )
                })
                .collect()),
            Self::Processes {
                metrics, mappings, ..
            } => {
                let (status, body) = get(*metrics, "/metrics").await?;
                anyhow::ensure!(status == 200, "GET /metrics: {status}");
                Ok(parse_metrics(&body, mappings))
            }
        }
    }

    async fn stop(self) -> anyhow::Result<()> {
        match self {
            Self::InProcess {
                stop,
                runner,
                engine,
                ..
            } => {
                let _ = stop.send(());
                runner.await??;
                engine.stop().await;
                Ok(())
            }
            Self::Processes { .. } => Ok(()),
        }
    }
}

/// Each mapping's records processed and largest iterator age, from `run`'s
/// Prometheus exposition.
fn parse_metrics(text: &str, mappings: &[String]) -> Counters {
    mappings
        .iter()
        .map(|name| {
            let label = format!("{{processor=\"{name}\"");
            let value = |line: &str| {
                line.rsplit(' ')
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let processed = text
                .lines()
                .filter(|l| l.starts_with(&format!("jobstream_records_processed_total{label}")))
                .map(value)
                .sum::<f64>();
            let age = text
                .lines()
                .filter(|l| l.starts_with(&format!("jobstream_iterator_age_milliseconds{label}")))
                .map(value)
                .fold(0.0, f64::max);
            (name.clone(), processed as u64, age as i64)
        })
        .collect()
}

/// The runtime of `w` started as `via`, with its bill meter in front:
/// (consumer, processors' meter, engine endpoint, model table).
async fn start(
    w: &Workload,
    via: Via,
) -> anyhow::Result<(Consumer, Meter, String, String, Option<LocalSqs>)> {
    let model = model_of(w)?;
    let has_queues = !model.queues().is_empty();
    // A local SQS for models with queues (social's jobs), as `dev` starts.
    let sqs = if has_queues {
        Some(LocalSqs::start()?)
    } else {
        None
    };
    match via {
        Via::Dev => {
            let mut engine = LocalEngine::start("127.0.0.1:0", None).await?;
            engine.start_ttl_sweeper(Duration::from_secs(1));
            let mut opts = common::options(w.model, &engine);
            opts.model_file = w.model_file.clone();
            let meter = common::meter_processors(&mut opts, &engine.endpoint()).await?;
            if let Some(sqs) = &sqs {
                opts.sqs_endpoint = Some(sqs.endpoint());
                opts.queue_prefix = format!("hot{}-", uuid::Uuid::new_v4().simple());
            }
            let mut rt = Runtime::start(opts).await?;
            let table = rt.config.table.clone();
            let endpoint = engine.endpoint();
            let probe = rt.probe();
            let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let runner = tokio::spawn(async move {
                rt.run_until(async {
                    let _ = stop_rx.await;
                })
                .await
            });
            let consumer = Consumer::InProcess {
                probe,
                stop,
                runner,
                engine,
            };
            Ok((consumer, meter, endpoint, table, sqs))
        }
        Via::Run => {
            // `HOT_JOBSTREAM`: another build's binary (a baseline measured
            // beside this one).
            let exe = std::env::var("HOT_JOBSTREAM")
                .unwrap_or_else(|_| env!("CARGO_BIN_EXE_jobstream").to_string());
            let model_args: Vec<String> = match &w.model_file {
                Some(f) => vec!["--model-file".into(), f.display().to_string()],
                None => vec!["--model".into(), w.model.into()],
            };
            let mut serve = Child(
                std::process::Command::new(&exe)
                    .arg("serve")
                    .args(&model_args)
                    .args(["--listen", "127.0.0.1:0"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .spawn()
                    .context("starting jobstream serve")?,
            );
            let endpoint =
                common::startup_lines(&mut serve.0, "tables:", &["DynamoDB endpoint: "])?.remove(0);
            let meter = Meter::in_front_of(&endpoint).await?;
            let mut queue_env = Vec::new();
            if let Some(sqs) = &sqs {
                let client = aws_sdk_sqs::Client::new(&sdk_config(Some(&sqs.endpoint()), 3).await);
                let prefix = format!("hot{}-", uuid::Uuid::new_v4().simple());
                for def in model.queues() {
                    let visibility = jobstream::local::runtime::queue_visibility(&def, 1.0);
                    let q =
                        jobstream::local::sqs_esm::create_queue(&client, &def, &prefix, visibility)
                            .await?;
                    queue_env.push((shared::lambda::queue_env(def.logical), q.url));
                }
            }
            let metrics = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
            let dir = TempDir(
                std::env::temp_dir().join(format!("hot-shard-{}", uuid::Uuid::new_v4().simple())),
            );
            std::fs::create_dir_all(&dir.0)?;
            let mut cmd = std::process::Command::new(&exe);
            cmd.arg("run")
                .args(&model_args)
                .args(["--endpoint", &meter.endpoint()])
                .arg("--metrics-listen")
                .arg(metrics.to_string())
                .arg("--on-failure-file")
                .arg(dir.0.join("failures.jsonl"))
                .envs(queue_env)
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            if let Some(sqs) = &sqs {
                cmd.args(["--sqs-endpoint", &sqs.endpoint()]);
            }
            let run = Child(cmd.spawn().context("starting jobstream run")?);
            let started = Instant::now();
            while get(metrics, "/readyz").await.map(|r| r.0).unwrap_or(0) != 200 {
                anyhow::ensure!(
                    started.elapsed() < Duration::from_secs(120),
                    "jobstream run not ready within 120 s"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let consumer = Consumer::Processes {
                metrics,
                mappings: model
                    .stream_defs()
                    .iter()
                    .map(|d| d.name.to_string())
                    .collect(),
                _run: run,
                _serve: serve,
                _dir: dir,
            };
            let table = model.table.name.to_string();
            Ok((consumer, meter, endpoint, table, sqs))
        }
    }
}

async fn run_rate(w: &Workload, via: Via, rate: usize, secs: Duration) -> anyhow::Result<()> {
    let (consumer, meter, endpoint, table, _sqs) = start(w, via).await?;
    let app_meter = Meter::in_front_of(&endpoint).await?;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&app_meter.endpoint()), 3).await);
    let plain = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&endpoint), 3).await);
    for item in (w.setup)() {
        client
            .put_item()
            .table_name(&table)
            .set_item(Some(item))
            .send()
            .await?;
    }

    // The writer: change i is due at start + i / rate.
    let written = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut writer = {
        let (client, table, written) = (client.clone(), table.clone(), written.clone());
        let change = w.change;
        tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
            let total = (rate as f64 * secs.as_secs_f64()) as usize;
            for i in 0..total {
                let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
                tokio::time::sleep_until(due.into()).await;
                let permit = slots.clone().acquire_owned().await?;
                let (client, table, written) = (client.clone(), table.clone(), written.clone());
                tokio::spawn(async move {
                    let r = client
                        .put_item()
                        .table_name(&table)
                        .set_item(Some(change(i)))
                        .send()
                        .await;
                    if r.is_ok() {
                        written.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(permit);
                });
            }
            // Every write answered.
            let _ = slots.acquire_many(IN_FLIGHT as u32).await?;
            anyhow::Ok(started.elapsed())
        })
    };

    let mut last = (Instant::now(), 0u64, consumer.counters().await?);
    let mut max_age = 0i64;
    let mut writing = true;
    let mut write_time = Duration::ZERO;
    let mut quiet_since: Option<Instant> = None;
    let mut caught_up = None;
    loop {
        tokio::time::sleep(SAMPLE).await;
        let now = Instant::now();
        let dt = now.duration_since(last.0).as_secs_f64();
        let n = written.load(Ordering::Relaxed);
        let per = consumer.counters().await?;
        let mappings: Vec<String> = per
            .iter()
            .zip(&last.2)
            .map(|((name, p, age), (_, p0, _))| {
                max_age = max_age.max(*age);
                format!(
                    "{name} {:.0} rec/s, iterator age {:.1} s",
                    p.saturating_sub(*p0) as f64 / dt,
                    *age as f64 / 1000.0
                )
            })
            .collect();
        println!(
            "  t={:>5.1} s  writes {:>6.0}/s  {}",
            started.elapsed().as_secs_f64(),
            (n - last.1) as f64 / dt,
            mappings.join("; ")
        );
        if writing && writer.is_finished() {
            writing = false;
            write_time = (&mut writer).await??;
        }
        if !writing {
            let idle = per
                .iter()
                .zip(&last.2)
                .all(|((_, p, age), (_, p0, _))| p == p0 && *age == 0);
            match (idle, quiet_since) {
                (true, None) => quiet_since = Some(now),
                (true, Some(_)) => {
                    caught_up = quiet_since.map(|q| q.duration_since(started));
                    break;
                }
                (false, _) => quiet_since = None,
            }
            if started.elapsed() > write_time + CATCH_UP {
                break;
            }
        }
        last = (now, n, per);
    }
    let writes = written.load(Ordering::Relaxed);
    let processed: Vec<String> = consumer
        .counters()
        .await?
        .into_iter()
        .map(|(name, p, _)| format!("{name} {p}"))
        .collect();
    println!(
        "  rate {rate}/s: {writes} writes in {:.1} s ({:.0}/s accepted); records processed: {}; largest iterator age {:.1} s; {}",
        write_time.as_secs_f64(),
        writes as f64 / write_time.as_secs_f64().max(1e-9),
        processed.join(", "),
        max_age as f64 / 1000.0,
        match caught_up {
            Some(t) => format!("caught up {:.1} s after the writes ended", t.saturating_sub(write_time).as_secs_f64()),
            None => format!("NOT caught up {CATCH_UP:?} after the writes ended"),
        }
    );
    println!(
        "  bill: processors {}{}; application {}",
        meter.bill().per_change(writes as usize),
        if via == Via::Run {
            " (run's own checkpoints and leases in the ledger included)"
        } else {
            ""
        },
        app_meter.bill().per_change(writes as usize)
    );
    // The engine's floor, same run, same engine: plain PutItems of the same
    // changes into a fresh table of the model's definition (with its stream).
    let floor_table = format!("floor-{}", uuid::Uuid::new_v4().simple());
    ensure_table(&plain, &model_of(w)?.table, &floor_table).await?;
    let floor = put_floor(&plain, &floor_table, w.change, Duration::from_secs(3)).await?;
    println!(
        "  floor: the engine accepts {floor:.0} plain PutItems/s of these items (8 writers, same engine, stream on, no processors); offered rate / floor = {:.2}",
        rate as f64 / floor
    );
    consumer.stop().await?;
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let rates: Vec<usize> = std::env::var("HOT_RATES")
        .unwrap_or_else(|_| "100,250,500,1000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let secs = Duration::from_secs(env_usize("HOT_SECONDS", 15) as u64);
    let models = std::env::var("HOT_MODELS").unwrap_or_else(|_| "tracker,social,library".into());
    let vias: Vec<Via> = std::env::var("HOT_VIA")
        .unwrap_or_else(|_| "dev,run".into())
        .split(',')
        .filter_map(Via::parse)
        .collect();
    for w in workloads()
        .into_iter()
        .filter(|w| models.split(',').any(|m| m.trim() == w.model))
    {
        let defs = model_of(&w)?.stream_defs();
        let settings: Vec<String> = defs
            .iter()
            .map(|d| {
                format!(
                    "{}: batch {}, window {} s, parallelization {}, {} MB",
                    d.name,
                    d.settings.batch_size,
                    d.settings.batching_window_secs,
                    d.settings.parallelization_factor,
                    d.settings.memory_mb
                )
            })
            .collect();
        println!("{} — mappings as deployed: {}", w.name, settings.join("; "));
        for &via in &vias {
            for &rate in &rates {
                println!(
                    " {rate} changes/s for {secs:?} into one partition, through {}:",
                    via.name()
                );
                run_rate(&w, via, rate, secs).await?;
            }
        }
    }
    Ok(())
}
