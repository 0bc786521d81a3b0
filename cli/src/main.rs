//! `jobstream`: run any registered model's processors locally on an
//! embedded DynamoDB engine or against any endpoint, play its demo, verify
//! and backfill its derived data, or serve the engine alone.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use jobstream::local::deployed::{queue_urls, require_tables};
use jobstream::local::engine::{ensure_table, require_region, sdk_config, LocalEngine};
use jobstream::local::esm::RecordReader;
use jobstream::local::iam::Principal;
use jobstream::local::runtime::{Provision, Runtime, RuntimeOptions};
use jobstream::local::sqs_server::LocalSqs;
use jobstream::tools::consumer::ConsumerArgs;
use shared::lambda::{Config, Processors};
use shared::models::{self, Model};

#[derive(Parser)]
#[command(
    name = "jobstream",
    version,
    about = "Derived data for DynamoDB single-table designs, from the table's stream"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--model`: a name from the registry.
fn model_names() -> String {
    models::registry()
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--model NAME` or `--model-file PATH`: which model a command runs.
#[derive(clap::Args, Clone)]
struct ModelArgs {
    /// The model (see `jobstream models`).
    #[arg(long, default_value = models::DEFAULT_MODEL)]
    model: String,
    /// A model file (YAML, `jobstream: 1`) instead of a registered model;
    /// check it with `jobstream check-model PATH`.
    #[arg(
        long,
        env = "MODEL_FILE",
        value_name = "PATH",
        conflicts_with = "model"
    )]
    model_file: Option<std::path::PathBuf>,
}

impl ModelArgs {
    fn source(&self) -> models::Source {
        models::Source::new(&self.model, self.model_file.as_deref())
    }

    fn load(&self) -> anyhow::Result<Model> {
        models::load(&self.source()).map_err(anyhow::Error::msg)
    }

    /// The model's file: `--model-file`, or the shipped file `--model`
    /// names.
    fn file(&self) -> anyhow::Result<&'static shared::file::Loaded> {
        models::file_of(&self.source()).map_err(anyhow::Error::msg)
    }
}

#[derive(clap::Args, Clone)]
struct Target {
    #[command(flatten)]
    model: ModelArgs,
    /// The model's table (default: the model's own table name).
    #[arg(long, env = "TABLE_NAME")]
    table: Option<String>,
    /// The ledger table (markers, records, checkpoints); default: the
    /// stack's (`<stack>-ledger`) with --stack, else `jobstream-ledger`.
    #[arg(long, env = "LEDGER_TABLE_NAME")]
    ledger_table: Option<String>,
    /// The deployed stack to run against (`cdk deploy -c stackName=S`): its
    /// ledger `S-ledger` and its queues `S-<queue name>` (a QUEUE_URL_<QUEUE>
    /// or --ledger-table still wins).
    #[arg(long, env = "JOBSTREAM_STACK", value_name = "STACK")]
    stack: Option<String>,
}

impl Target {
    fn model(&self) -> anyhow::Result<Model> {
        self.model.load()
    }

    /// `--ledger-table`, else the stack's ledger, else `jobstream-ledger`.
    fn ledger(&self) -> String {
        match (&self.ledger_table, &self.stack) {
            (Some(l), _) => l.clone(),
            (None, Some(stack)) => models::table::STACK_NAMES.ledger(stack),
            (None, None) => models::table::ledger().name.to_string(),
        }
    }

    fn table_name(&self, model: &Model) -> String {
        self.table
            .clone()
            .unwrap_or_else(|| model.table.name.to_string())
    }

    fn options(&self, endpoint: Option<String>, reader: RecordReader) -> RuntimeOptions {
        let mut opts = RuntimeOptions::new(&self.model.model, endpoint, reader);
        opts.model_file = self.model.model_file.clone();
        opts.table = self.table.clone();
        opts.ledger_table = self.ledger();
        opts
    }

    /// Configuration for tools (verify, backfill): table names and the
    /// queue URLs from the environment (`QUEUE_URL_<LOGICAL>`).
    fn config(&self, model: &Model) -> Config {
        Config {
            table: self.table_name(model),
            ledger_table: self.ledger(),
            model: model.name.to_string(),
            queues: model
                .queues()
                .iter()
                .filter_map(|q| {
                    std::env::var(shared::lambda::queue_env(q.logical))
                        .ok()
                        .map(|u| (q.logical.to_string(), u))
                })
                .collect(),
        }
    }
}

/// Where `verify --repair` and `backfill` send a model's queue jobs.
#[derive(clap::Args, Clone)]
struct ToolSqs {
    /// An SQS endpoint whose queues carry the definition's names, as
    /// `jobstream dev` creates them (it prints `SQS endpoint:`); with
    /// --stack, the stack's queues at this endpoint. Default: the region's
    /// SQS, for --stack or QUEUE_URL_<LOGICAL>.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS", value_name = "URL")]
    sqs_endpoint: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Embedded engine + tables (+ queues on the local SQS) + the model's processors, until Ctrl-C.
    Dev {
        #[command(flatten)]
        target: Target,
        /// SQS endpoint for models with queues (default: a local SQS server, started here).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
        /// Address the engine listens on (any DynamoDB client can use it).
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        /// Persist the engine to this SQLite file (default: in memory).
        #[arg(long)]
        db: Option<String>,
    },
    /// Play a model's scenario on a fresh embedded engine and check the result.
    Demo {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        #[command(flatten)]
        model: ModelArgs,
        /// A scenario file (YAML: `writes` in order, then the `expect`ed
        /// items); default: `<model file stem>.scenario.yaml` next to
        /// --model-file if present, or a shipped model's own
        /// (`models/NAME.scenario.yaml`). Without one, nothing is written
        /// and `verify` runs.
        #[arg(long, value_name = "PATH")]
        scenario: Option<std::path::PathBuf>,
        /// SQS endpoint for models with queues (default: a local SQS server, started here).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
    },
    /// Serve the embedded engine alone, with the tables of every model (or
    /// of `--model`), until Ctrl-C.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        #[arg(long)]
        db: Option<String>,
        /// Only this model's tables (default: every model's).
        #[arg(long)]
        model: Option<String>,
        /// Only this model file's tables.
        #[arg(
            long,
            env = "MODEL_FILE",
            value_name = "PATH",
            conflicts_with = "model"
        )]
        model_file: Option<std::path::PathBuf>,
        /// The model's table name (with --model or --model-file).
        #[arg(long, env = "TABLE_NAME")]
        table: Option<String>,
        #[arg(long, env = "LEDGER_TABLE_NAME", default_value = "jobstream-ledger")]
        ledger_table: String,
    },
    /// Run the model's processors as a production consumer against an
    /// engine or DynamoDB (flag, or AWS_ENDPOINT_URL): durable checkpoints,
    /// fenced shard leases shared across processes, SIGTERM handover.
    Run {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[command(flatten)]
        target: Target,
        /// SQS endpoint of a durable SQS, required for models with queues
        /// (e.g. https://sqs.eu-west-1.amazonaws.com; `dev` and `demo` start
        /// a local one instead).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
        #[command(flatten)]
        consumer: ConsumerArgs,
    },
    /// Recompute every derived datum from the source items and report drift
    /// (exit 0 only when no drift remains).
    Verify {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[command(flatten)]
        target: Target,
        /// Fix drift through the live path's guarded writes, then verify again.
        #[arg(long)]
        repair: bool,
        /// With --repair: show the repairs without applying them.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        sqs: ToolSqs,
    },
    /// Feed every existing item through the model's rules (adopting an
    /// existing table, a new rule, or a lost day of processing).
    Backfill {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[command(flatten)]
        target: Target,
        /// Parallel Scan segments.
        #[arg(long, default_value_t = 4)]
        segments: u32,
        /// Items per second (about RCU/s for items up to 4 KB); unlimited if absent.
        #[arg(long)]
        rate: Option<f64>,
        /// Resume from / save progress to this file.
        #[arg(long)]
        checkpoint: Option<std::path::PathBuf>,
        /// Count what would be written, write nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        sqs: ToolSqs,
    },
    /// Print the definitions the CDK stack deploys (JSON): tables, queues,
    /// processors and filters of every model (or of one model file).
    Tables {
        /// The definitions of this model file alone (the CDK app's
        /// `-c modelFile=PATH` runs this).
        #[arg(long, value_name = "PATH")]
        model_file: Option<std::path::PathBuf>,
    },
    /// Check a model file without running anything: every problem as
    /// PATH:LINE:COL: message (exit 1 on any).
    CheckModel {
        /// The model file (YAML, `jobstream: 1`).
        path: std::path::PathBuf,
    },
    /// Print a model as a Mermaid flowchart (entities, what each implies,
    /// the indexes; GitHub renders it in a ```mermaid block).
    Graph {
        #[command(flatten)]
        model: ModelArgs,
    },
    /// A model file from a client library's schema (OneTable, ElectroDB):
    /// printed (or written to --out), checked like `check-model`.
    Import {
        /// The schema's library.
        #[arg(value_enum)]
        from: jobstream::tools::import::Library,
        /// The schema: a OneTable schema file, or ElectroDB entity schemas
        /// serialised to JSON (see the README).
        schema: std::path::PathBuf,
        /// The model's name (default: the schema file's stem).
        #[arg(long)]
        name: Option<String>,
        /// The table's name (default: the model's name).
        #[arg(long)]
        table: Option<String>,
        /// Write the model file here instead of stdout.
        #[arg(long, short, value_name = "PATH")]
        out: Option<std::path::PathBuf>,
    },
    /// Explain one item of a live table: what a source implies now and what
    /// the ledger recorded; which sources imply a derived item or a counter,
    /// by which rule; the rule that rejects bad input and why.
    Explain {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[command(flatten)]
        target: Target,
        /// The item's partition key value.
        pk: String,
        /// The item's sort key value.
        sk: String,
    },
    /// Run one of a model file's declared access patterns (`queries:`)
    /// against a table: its items as a table (keys, then attributes) or
    /// JSON, every page read. Without a query name: list the queries and
    /// their parameters. Usage errors (unknown query, missing or invalid
    /// parameter) exit 2.
    #[command(
        after_help = "Examples:\n  jobstream query --model-file my-table.yaml            # its queries and their parameters\n  jobstream query --model-file my-table.yaml --endpoint http://127.0.0.1:8000 \\\n    QUERY param=value ...\n  jobstream query --model NAME --endpoint http://127.0.0.1:8000 --json \\\n    QUERY param=value ...           # a shipped model's file (models/)"
    )]
    Query {
        /// DynamoDB endpoint (e.g. `jobstream dev`'s http://127.0.0.1:8000);
        /// default: the SDK's own (AWS).
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[command(flatten)]
        model: ModelArgs,
        /// The model's table (default: the model's own table name).
        #[arg(long, env = "TABLE_NAME")]
        table: Option<String>,
        /// Print the items as JSON (an array of objects), every attribute of each
        /// (the table view shows the query's `attributes:`).
        #[arg(long)]
        json: bool,
        /// Items read per request (default: DynamoDB's 1 MB pages).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
        page_size: Option<i32>,
        /// The query (see `jobstream query --model-file F` for the list).
        name: Option<String>,
        /// The query's parameters, `param=value`.
        #[arg(value_name = "PARAM=VALUE")]
        params: Vec<String>,
    },
    /// List the models.
    Models,
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("JOBSTREAM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,dynoxide=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::error!(error = %e, "cannot listen for Ctrl-C; stopping");
    }
}

/// SIGTERM (`docker stop`, Kubernetes) or SIGINT (Ctrl-C). A handler is
/// installed, so this holds as PID 1 too.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => eprintln!("SIGTERM: finishing batches in flight, releasing leases"),
                    () = ctrl_c() => eprintln!("SIGINT: finishing batches in flight, releasing leases"),
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM; Ctrl-C only");
                ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    ctrl_c().await;
}

/// The configured SQS endpoint, or the local SQS server started (and
/// installed, once) for this process, for models with queues.
fn sqs_for(
    model: &Model,
    configured: Option<String>,
) -> anyhow::Result<(Option<LocalSqs>, Option<String>)> {
    match configured {
        Some(e) => Ok((None, Some(e))),
        None if model.consumers.is_empty() => Ok((None, None)),
        None => {
            let server = LocalSqs::start()?;
            let endpoint = server.endpoint();
            Ok((Some(server), Some(endpoint)))
        }
    }
}

/// The lines scripts read: endpoint, tables, SQS, processors.
fn announce(engine: Option<&LocalEngine>, rt: &Runtime, sqs: Option<&str>, model: &ModelArgs) {
    if let Some(engine) = engine {
        println!("DynamoDB endpoint: {}", engine.endpoint());
    }
    println!(
        "tables: {} (stream: NEW_AND_OLD_IMAGES), {} (ledger)",
        rt.config.table, rt.config.ledger_table
    );
    if let Some(sqs) = sqs {
        println!("SQS endpoint: {sqs}");
        for (logical, url) in &rt.config.queues {
            println!("queue {logical}: {url}");
        }
    }
    // Which version of the model runs (as the Lambdas log it): two versions
    // on one stream (a rolling deploy) each count by their own rules.
    if let Ok(file) = model.file() {
        println!(
            "model file: {} (sha256 {})",
            model.model_file.as_ref().map_or_else(
                || format!("models/{}.yaml, shipped", model.model),
                |p| p.display().to_string()
            ),
            file.sha256
        );
    }
    let consumers: Vec<String> = rt.queues.iter().map(|q| q.name.clone()).collect();
    println!(
        "processors: {} (stream){}; model {}; Ctrl-C to stop",
        rt.model.stream_processors().join(", "),
        if consumers.is_empty() {
            String::new()
        } else {
            format!(", {} (queues)", consumers.join(", "))
        },
        rt.model.name
    );
}

fn report_failures(rt: &Runtime) -> bool {
    let failed = rt.failed_batches();
    for f in &failed {
        println!(
            "on-failure: {} {} shard {} records {}..{} ({}): {}",
            f.condition.as_str(),
            f.mapping,
            f.shard_id,
            f.start_sequence_number,
            f.end_sequence_number,
            f.batch_size,
            f.reason
        );
    }
    failed.is_empty()
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev {
            target,
            sqs_endpoint,
            listen,
            db,
        } => {
            let model = target.model()?;
            let mut engine = LocalEngine::start(&listen, db.as_deref()).await?;
            let (_local_sqs, sqs) = sqs_for(&model, sqs_endpoint)?;
            let mut opts = target.options(
                Some(engine.endpoint()),
                RecordReader::Embedded(engine.database().clone()),
            );
            opts.sqs_endpoint = sqs.clone();
            let mut rt = Runtime::start(opts).await?;
            engine.start_ttl_sweeper(Duration::from_secs(1));
            announce(Some(&engine), &rt, sqs.as_deref(), &target.model);
            rt.run_until(ctrl_c()).await?;
            report_failures(&rt);
            engine.stop().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo {
            listen,
            model,
            scenario,
            sqs_endpoint,
        } => {
            let m = model.load()?;
            let file = model.file()?;
            // The file's scenario (given, next to it, or shipped), or
            // (without one) nothing written and a verify.
            let scenario = scenario_for(&model, scenario.as_deref())?;
            let engine = LocalEngine::start(&listen, None).await?;
            let (_local_sqs, sqs) = sqs_for(&m, sqs_endpoint)?;
            let mut opts = RuntimeOptions::new(
                &model.model,
                Some(engine.endpoint()),
                RecordReader::Embedded(engine.database().clone()),
            );
            opts.model_file = model.model_file.clone();
            opts.sqs_endpoint = sqs.clone();
            let mut rt = Runtime::start(opts).await?;
            println!(
                "jobstream demo: {} on an embedded DynamoDB at {}{}",
                m.about,
                engine.endpoint(),
                sqs.map(|s| format!(" and SQS at {s}")).unwrap_or_default()
            );
            let diffs = match scenario {
                Some((path, s)) => {
                    let steps = s.all_steps();
                    println!(
                        "scenario {path}: {} step(s), {} write(s), {} expected item(s), {} absent, {} quer{}",
                        steps.len(),
                        steps.iter().map(|s| s.write_count()).sum::<usize>(),
                        steps.iter().map(|s| s.expect.len()).sum::<usize>(),
                        steps.iter().map(|s| s.absent.len()).sum::<usize>(),
                        s.query_count(),
                        if s.query_count() == 1 { "y" } else { "ies" }
                    );
                    let mut diffs =
                        shared::file::scenario::play_model(&mut rt, &s, &file.model, true)
                            .await
                            .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let dead = shared::models::Harness::dead_letters(&mut rt)
                        .await
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    diffs.extend(dead.into_iter().map(|d| format!("dead letters: {d}")));
                    let writes = rt.processor_writes();
                    println!("processor writes: {writes}");
                    // A second drain proves the fixpoint: no record, no write.
                    let more = rt.drain().await?;
                    if more != 0 || rt.processor_writes() != writes {
                        diffs.push(format!(
                            "no fixpoint: {more} more record(s), {} more write(s) after draining",
                            rt.processor_writes() - writes
                        ));
                    }
                    if let Some(want) = s.processor_writes.filter(|w| *w != writes) {
                        diffs.push(format!("processor writes: {writes}, expected {want}"));
                    }
                    diffs.extend(demo_verify(&mut rt).await?);
                    diffs
                }
                None => {
                    println!("no scenario file: nothing written; verify only");
                    demo_verify(&mut rt).await?
                }
            };
            engine.stop().await;
            Ok(report(diffs))
        }
        Command::Serve {
            listen,
            db,
            model,
            model_file,
            table,
            ledger_table,
        } => {
            if table.is_some() && model.is_none() && model_file.is_none() {
                anyhow::bail!("--table needs --model or --model-file");
            }
            let mut engine = LocalEngine::start(&listen, db.as_deref()).await?;
            engine.start_ttl_sweeper(Duration::from_secs(1));
            let client =
                aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
            let chosen: Vec<Model> = match (&model, &model_file) {
                (_, Some(file)) => vec![models::load(&models::Source::File(file.clone()))
                    .map_err(anyhow::Error::msg)?],
                (Some(name), None) => vec![models::find(name).map_err(anyhow::Error::msg)?],
                (None, None) => models::registry(),
            };
            let mut names = Vec::new();
            for m in &chosen {
                let name = table.clone().unwrap_or_else(|| m.table.name.to_string());
                ensure_table(&client, &m.table, &name).await?;
                names.push(format!("{name} ({})", m.name));
            }
            ensure_table(&client, &models::table::ledger(), &ledger_table).await?;
            println!("DynamoDB endpoint: {}", engine.endpoint());
            println!(
                "tables: {} (stream: NEW_AND_OLD_IMAGES), {ledger_table} (ledger)",
                names.join(", ")
            );
            ctrl_c().await;
            engine.stop().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            endpoint,
            target,
            sqs_endpoint,
            consumer,
        } => run_deployed(target, endpoint, sqs_endpoint, consumer).await,
        Command::Verify {
            endpoint,
            target,
            repair,
            dry_run,
            sqs,
        } => {
            let model = target.model()?;
            let config = tool_config(&target, &model, &sqs, repair && !dry_run).await?;
            let p = tool_processors(&model, &config, endpoint.as_deref(), &sqs).await?;
            let mut report = jobstream::tools::verify::verify(&model, &p, &config).await?;
            print_report(&report);
            if repair && !report.is_clean() {
                if dry_run {
                    println!("dry run: {} repair(s) would run", report.repairs.len());
                    for r in &report.repairs {
                        println!("repair: {r:?}");
                    }
                } else {
                    let ran = jobstream::tools::verify::repair(&p, &report).await?;
                    println!("repair: {ran} repair(s) ran through the live path");
                    report = jobstream::tools::verify::verify(&model, &p, &config).await?;
                    print_report(&report);
                }
            }
            println!(
                "{}",
                if report.is_clean() {
                    "no drift"
                } else {
                    "drift remains"
                }
            );
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Backfill {
            endpoint,
            target,
            segments,
            rate,
            checkpoint,
            dry_run,
            sqs,
        } => {
            let model = target.model()?;
            let config = tool_config(&target, &model, &sqs, !dry_run).await?;
            let p = tool_processors(&model, &config, endpoint.as_deref(), &sqs).await?;
            let opts = jobstream::tools::backfill::ScanOptions {
                segments,
                rate,
                checkpoint,
                ..Default::default()
            };
            let client = p.store.client().clone();
            let (report, totals) =
                jobstream::tools::backfill::backfill(&client, &config, &p, &opts, dry_run).await?;
            println!(
                "backfill of {}: {} items scanned in {:.2?} ({:.0} items/s){}",
                config.table,
                report.scanned,
                report.elapsed,
                report.items_per_sec(),
                if dry_run { " [dry run]" } else { "" }
            );
            println!("{}", totals.line(dry_run));
            Ok(ExitCode::SUCCESS)
        }
        Command::Tables { model_file } => {
            let defs = match model_file {
                Some(file) => jobstream::tools::deploy::definitions_of(&[models::load(
                    &models::Source::File(file),
                )
                .map_err(anyhow::Error::msg)?]),
                None => jobstream::tools::deploy::definitions(),
            };
            println!("{}", serde_json::to_string_pretty(&defs)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckModel { path } => match shared::file::check(&path) {
            Ok(()) => {
                println!("{}: OK", path.display());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                for line in e.lines() {
                    println!("{line}");
                }
                Ok(ExitCode::FAILURE)
            }
        },
        Command::Import {
            from,
            schema,
            name,
            table,
            out,
        } => {
            let problems =
                jobstream::tools::import::run(from, &schema, name, table, out.as_deref())?;
            for p in &problems {
                eprintln!("{p}");
            }
            Ok(if problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Explain {
            endpoint,
            target,
            pk,
            sk,
        } => {
            let model = target.model()?;
            let config = target.config(&model);
            let file = Some(&target.model.file()?.model);
            let client = aws_sdk_dynamodb::Client::new(&sdk_config(endpoint.as_deref(), 5).await);
            let key = jobstream::tools::explain::key(&model, pk, sk);
            let tables = jobstream::tools::explain::Tables {
                client: &client,
                table: &config.table,
                ledger: &config.ledger_table,
            };
            let x = jobstream::tools::explain::explain(&model, file, &tables, &key).await?;
            for line in &x.lines {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Graph { model } => {
            let graph = jobstream::tools::graph::file_graph(&model.file()?.model);
            print!("{graph}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Query {
            endpoint,
            model,
            table,
            json,
            page_size,
            name,
            params,
        } => run_query(endpoint, model, table, json, page_size, name, params).await,
        Command::Models => {
            for m in models::registry() {
                println!("{:<10} {}", m.name, m.about);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `jobstream query`: list the queries, or run one (usage errors exit 2).
async fn run_query(
    endpoint: Option<String>,
    model: ModelArgs,
    table: Option<String>,
    json: bool,
    page_size: Option<i32>,
    name: Option<String>,
    params: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let file = &model.file()?.model;
    let mut stdout = std::io::stdout();
    let Some(name) = name else {
        jobstream::tools::query::list(file, &mut stdout)?;
        return Ok(ExitCode::SUCCESS);
    };
    // Usage errors first, before any request.
    let bound = match jobstream::tools::query::prepare(file, &name, &params) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let table = table.unwrap_or_else(|| file.table.name.to_string());
    let sdk = sdk_config(endpoint.as_deref(), 5).await;
    require_region(&sdk, "DynamoDB")?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let out = shared::file::query_run::run(&client, &table, &bound, page_size).await?;
    jobstream::tools::query::print(file, &name, &out, json, &mut stdout)?;
    Ok(ExitCode::SUCCESS)
}

/// A tool's configuration: [`Target::config`], with `--stack` the stack's
/// queues for those `QUEUE_URL_<LOGICAL>` does not give.
/// A tool's configuration. Its queues (`--stack`'s, `--sqs-endpoint`'s by
/// name, or `QUEUE_URL_<LOGICAL>`) are resolved before anything is read;
/// when the tool will enqueue (`writes`), a model queue without a URL is an
/// error then, never after half the work.
async fn tool_config(
    target: &Target,
    model: &Model,
    sqs: &ToolSqs,
    writes: bool,
) -> anyhow::Result<Config> {
    let mut config = target.config(model);
    if model.consumers.is_empty() {
        return Ok(config);
    }
    let naming = match (&target.stack, &sqs.sqs_endpoint) {
        (Some(stack), _) => Some(jobstream::local::deployed::QueueNames::Stack(stack)),
        (None, Some(_)) => Some(jobstream::local::deployed::QueueNames::AsDefined),
        (None, None) => None,
    };
    if let Some(naming) = naming {
        let c = sdk_config(sqs.sqs_endpoint.as_deref(), 5).await;
        require_region(&c, "SQS")?;
        config.queues = queue_urls(&aws_sdk_sqs::Client::new(&c), model, naming, |v| {
            std::env::var(v).ok()
        })
        .await?;
    }
    let missing: Vec<String> = model
        .queues()
        .iter()
        .filter(|q| !config.queues.contains_key(q.logical))
        .map(|q| shared::lambda::queue_env(q.logical))
        .collect();
    if writes && !missing.is_empty() {
        anyhow::bail!(
            "model {} sends jobs to its queues, and {} ha{} no URL: give --stack S (the deployed \
             queues), --sqs-endpoint URL (the queues by their names, as `jobstream dev` creates \
             them: it prints `SQS endpoint:`), or {}; nothing was written",
            model.name,
            missing.join(", "),
            if missing.len() == 1 { "s" } else { "ve" },
            missing.join(" / ")
        );
    }
    Ok(config)
}

/// The processors a tool uses (verify, backfill): the live path's, through
/// the given endpoint; SQS through `AWS_ENDPOINT_URL_SQS` or the default
/// chain. The tables must exist as deployed (nothing is created).
async fn tool_processors(
    model: &Model,
    config: &Config,
    endpoint: Option<&str>,
    sqs: &ToolSqs,
) -> anyhow::Result<Processors> {
    let sdk = sdk_config(endpoint, 5).await;
    require_region(&sdk, "DynamoDB")?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    require_tables(&client, model, &config.table, &config.ledger_table).await?;
    let store = shared::store::Store::new(client);
    // An SQS client only where a queue has a URL: a `verify` that sends no
    // job needs no SQS region.
    let sqs = if config.queues.is_empty() {
        None
    } else {
        let c = sdk_config(sqs.sqs_endpoint.as_deref(), 5).await;
        require_region(&c, "SQS")?;
        Some(aws_sdk_sqs::Client::new(&c))
    };
    Ok(Processors::new(model, config, store, sqs))
}

/// `jobstream run`: the model's processors against deployed tables and
/// queues (never created: each is checked against the definition), with
/// every on-failure destination checked before the first record.
async fn run_deployed(
    target: Target,
    endpoint: Option<String>,
    sqs_endpoint: Option<String>,
    consumer: ConsumerArgs,
) -> anyhow::Result<ExitCode> {
    let model = target.model()?;
    // Every call of the process's own (startup checks, the stream, the
    // queues, leases) is checked against the stack's RunnerPolicy, as the
    // processors' against their grants.
    let runner = consumer.grants.enforced().then(|| {
        Principal::runner(
            &model,
            &target.table_name(&model),
            &target.ledger(),
            &Default::default(),
            consumer.on_failure_queue_url.clone(),
        )
    });
    let checked = |c: aws_config::SdkConfig| match &runner {
        Some(r) => r.checked(&c),
        None => c,
    };
    let sdk = sdk_config(endpoint.as_deref(), 5).await;
    require_region(&sdk, "DynamoDB")?;
    let sdk = checked(sdk);
    // Tables first (the same check runs in `Runtime::start`): what is
    // missing is named before anything else is looked up.
    require_tables(
        &aws_sdk_dynamodb::Client::new(&sdk),
        &model,
        &target.table_name(&model),
        &target.ledger(),
    )
    .await?;
    let has_queues = !model.consumers.is_empty();
    let sqs_client = if has_queues || consumer.on_failure_queue_url.is_some() {
        let c = sdk_config(sqs_endpoint.as_deref(), 5).await;
        require_region(&c, "SQS")?;
        let c = checked(c);
        Some((aws_sdk_sqs::Client::new(&c), c))
    } else {
        None
    };
    let queues = match &sqs_client {
        Some((c, _)) if has_queues => {
            queue_urls(
                c,
                &model,
                jobstream::local::deployed::QueueNames::stack_or_env(target.stack.as_deref()),
                |v| std::env::var(v).ok(),
            )
            .await?
        }
        _ => Default::default(),
    };
    let mut opts = target.options(endpoint, RecordReader::Sdk);
    opts.sqs_endpoint = sqs_endpoint.clone();
    opts.provision = Provision::Existing { queues };
    opts.enforce_grants = consumer.grants.enforced();
    opts.runner = runner;
    let failure_sqs = sqs_client
        .as_ref()
        .filter(|_| consumer.on_failure_queue_url.is_some())
        .map(|(c, _)| c.clone());
    opts.mapping = consumer.apply(
        opts.mapping,
        aws_sdk_dynamodb::Client::new(&sdk),
        &target.ledger(),
        failure_sqs,
    )?;
    let on_failure = opts.mapping.on_failure.clone();
    let mut rt = Runtime::start(opts).await?;
    jobstream::local::on_failure::check(&on_failure).await?;
    rt.status_every = Some(Duration::from_secs(30));
    rt.emit_metrics = consumer.emit_metrics;
    rt.metrics_listener = consumer.metrics_listener().await?;
    rt.shutdown_grace = consumer.shutdown_grace;
    let sqs_said = match (&sqs_endpoint, &sqs_client) {
        (Some(e), _) => Some(e.clone()),
        (None, Some((_, c))) if has_queues => Some(format!(
            "the SDK's own for region {}",
            c.region().map(|r| r.to_string()).unwrap_or_default()
        )),
        _ => None,
    };
    announce(None, &rt, sqs_said.as_deref(), &target.model);
    rt.run_until(terminated()).await?;
    println!("{}", rt.status());
    let losses = rt.losses();
    let undelivered = rt.undelivered();
    if !report_failures(&rt) {
        eprintln!(
            "records were given up{}{}; listed in {}",
            if losses > 0 {
                format!(" and {losses} range(s) of records were LOST (trimmed, or in shards that vanished): run `jobstream backfill`")
            } else {
                String::new()
            },
            if undelivered > 0 {
                format!("; the on-failure destination FAILED for {undelivered} batch(es), listed above only")
            } else {
                String::new()
            },
            consumer.on_failure_file.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(report: &jobstream::tools::verify::Report) {
    println!("{}", report.render());
    for p in report.problems.iter().take(20) {
        println!("drift: {p}");
    }
    for b in report.bad_input.iter().take(20) {
        println!("bad input (not drift): {b}");
    }
}

/// The scenario of a model file: `--scenario`, else
/// `<stem>.scenario.yaml` next to the file when it exists, else a shipped
/// model's own (`models/NAME.scenario.yaml`, embedded); with the path it
/// came from.
fn scenario_for(
    model: &ModelArgs,
    given: Option<&std::path::Path>,
) -> anyhow::Result<Option<(String, shared::file::scenario::Scenario)>> {
    use shared::file::scenario::Scenario;
    let path = match (given, &model.model_file) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(model_file)) => {
            let stem = model_file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let p = model_file.with_file_name(format!("{stem}.scenario.yaml"));
            if !p.exists() {
                return Ok(None);
            }
            p
        }
        (None, None) => {
            return match shared::file::shipped_scenario(&model.model) {
                Some((path, text)) => Ok(Some((
                    path.to_string(),
                    Scenario::parse(text, path).map_err(anyhow::Error::msg)?,
                ))),
                None => Ok(None),
            };
        }
    };
    let s = Scenario::read(&path).map_err(anyhow::Error::msg)?;
    Ok(Some((path.display().to_string(), s)))
}

/// `verify` of a demo run: its drift and bad input, printed.
async fn demo_verify(rt: &mut Runtime) -> anyhow::Result<Vec<String>> {
    let report = rt.verify().await?;
    println!("{}", report.render());
    for b in report.bad_input.iter().take(20) {
        println!("bad input (not drift): {b}");
    }
    Ok(report
        .problems
        .iter()
        .map(|p| format!("drift: {p}"))
        .collect())
}

fn report(diffs: Vec<String>) -> ExitCode {
    if diffs.is_empty() {
        println!("\nOK: every derived item is what the scenario implies.");
        ExitCode::SUCCESS
    } else {
        println!("\nFAILED:");
        for d in diffs {
            println!("- {d}");
        }
        ExitCode::FAILURE
    }
}

/// The commands that print and exit end quietly when their reader goes
/// (`jobstream tables | head -1`), as Unix filters do, instead of panicking
/// in `println!`: SIGPIPE gets its default action back. The long-running
/// ones keep Rust's (ignored), which their sockets need.
fn quiet_on_a_closed_pipe(command: &Command) {
    #[cfg(unix)]
    if matches!(
        command,
        Command::Tables { .. }
            | Command::Graph { .. }
            | Command::Models
            | Command::Query { .. }
            | Command::CheckModel { .. }
            | Command::Import { .. }
            | Command::Explain { .. }
    ) {
        sigpipe::reset();
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logs();
    let cli = Cli::parse();
    quiet_on_a_closed_pipe(&cli.command);
    if let Command::Dev { target, .. } | Command::Run { target, .. } = &cli.command {
        if target.model.model_file.is_none() && models::find(&target.model.model).is_err() {
            eprintln!(
                "error: unknown model `{}` (one of: {})",
                target.model.model,
                model_names()
            );
            return ExitCode::FAILURE;
        }
    }
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
