//! `jobstream`: run the processors locally on an embedded DynamoDB engine,
//! play the demo, verify derived data, or serve the engine alone.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use jobstream::engine::{sdk_config, LocalEngine};
use jobstream::esm::RecordReader;
use jobstream::jobboard::{JobBoardOptions, JobBoardRuntime};
use jobstream::moto::Moto;
use jobstream::runtime::{Runtime, RuntimeOptions};
use shared::lambda::{Config, Model};
use shared::models::{jobboard, table, tracker};

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

#[derive(clap::Args, Clone)]
struct Tables {
    /// The model's table (default: lambda_api_applications / job-app).
    #[arg(long, env = "TABLE_NAME")]
    table: Option<String>,
    /// The ledger table (markers and processor state).
    #[arg(long, env = "LEDGER_TABLE_NAME", default_value = "jobstream-ledger")]
    ledger_table: String,
}

impl Tables {
    fn config(&self) -> Config {
        self.config_for(Model::Tracker)
    }

    fn config_for(&self, model: Model) -> Config {
        let default = match model {
            Model::Tracker => tracker::table().name,
            Model::JobBoard => jobboard::table().name,
        };
        Config {
            table: self.table.clone().unwrap_or_else(|| default.to_string()),
            ledger_table: self.ledger_table.clone(),
            model,
            suggestions_queue_url: std::env::var("SUGGESTIONS_QUEUE_URL").ok(),
            matches_queue_url: std::env::var("MATCHES_QUEUE_URL").ok(),
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Embedded engine + tables + the model's processors, until Ctrl-C.
    Dev {
        /// tracker or jobboard
        #[arg(long, default_value = "tracker")]
        model: Model,
        /// SQS endpoint for the job board (default: moto, started here).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
        /// Address the engine listens on (any DynamoDB client can use it).
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        /// Persist the engine to this SQLite file (default: in memory).
        #[arg(long)]
        db: Option<String>,
        #[command(flatten)]
        tables: Tables,
    },
    /// Play a model's scenario on a fresh embedded engine and check the result.
    Demo {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// tracker or jobboard
        #[arg(long, default_value = "tracker")]
        model: Model,
        /// SQS endpoint for the job board (default: moto, started here).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
    },
    /// Serve the embedded engine alone (tables created), until Ctrl-C.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8000")]
        listen: String,
        #[arg(long)]
        db: Option<String>,
        #[command(flatten)]
        tables: Tables,
    },
    /// Run the processors alone against an engine (flag, or AWS_ENDPOINT_URL).
    Run {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[arg(long, default_value = "tracker")]
        model: Model,
        /// SQS endpoint for the job board (default: moto, started here).
        #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
        sqs_endpoint: Option<String>,
        #[command(flatten)]
        tables: Tables,
    },
    /// Recompute every derived datum from the source items and report drift
    /// (exit 0 only when no drift remains).
    Verify {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[arg(long, default_value = "tracker")]
        model: Model,
        /// Fix drift through the same guarded writes, then verify again.
        #[arg(long)]
        repair: bool,
        /// With --repair: show the fixes without writing them.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        tables: Tables,
    },
    /// Feed every existing item through the model's rules (adopting an
    /// existing table, a new rule, or a lost day of processing).
    Backfill {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
        #[arg(long, default_value = "tracker")]
        model: Model,
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
        tables: Tables,
    },
    /// Print the table definitions (JSON) shared with the CDK stack.
    Tables,
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("JOBSTREAM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,dynoxide=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn ctrl_c() {
    let _ = tokio::signal::ctrl_c().await;
}

async fn engine_with_tables(
    listen: &str,
    db: Option<&str>,
    tables: &Tables,
) -> anyhow::Result<LocalEngine> {
    let mut engine = LocalEngine::start(listen, db).await?;
    engine.start_ttl_sweeper(Duration::from_secs(1));
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let config = tables.config();
    jobstream::engine::ensure_table(&client, &tracker::table(), &config.table).await?;
    jobstream::engine::ensure_table(&client, &table::ledger(), &tables.ledger_table).await?;
    println!("DynamoDB endpoint: {}", engine.endpoint());
    println!(
        "tables: {} (stream: NEW_AND_OLD_IMAGES), {} (ledger)",
        config.table, tables.ledger_table
    );
    println!(
        "try: aws dynamodb scan --endpoint-url {} --table-name {}",
        engine.endpoint(),
        config.table
    );
    Ok(engine)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev {
            listen,
            db,
            model: Model::JobBoard,
            sqs_endpoint,
            ..
        } => {
            let engine = LocalEngine::start(&listen, db.as_deref()).await?;
            let (_moto, sqs) = sqs_endpoint_or_moto(sqs_endpoint)?;
            let mut rt = jobboard_runtime(&engine, &sqs).await?;
            println!(
                "DynamoDB endpoint: {} (table {}, ledger {})",
                engine.endpoint(),
                rt.config.table,
                rt.config.ledger_table
            );
            println!("SQS endpoint: {sqs}");
            println!(
                "processors: derive (stream), suggestions and matches (queues); Ctrl-C to stop"
            );
            let mut engine = engine;
            engine.start_ttl_sweeper(Duration::from_secs(1));
            rt.run_until(ctrl_c()).await?;
            engine.stop().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dev {
            listen, db, tables, ..
        } => {
            let engine = engine_with_tables(&listen, db.as_deref(), &tables).await?;
            let mut opts = RuntimeOptions::new(
                Some(engine.endpoint()),
                RecordReader::Embedded(engine.database().clone()),
            );
            opts.config = tables.config();
            let mut rt = Runtime::start(opts).await?;
            println!("processors: history, derive (polling the stream; Ctrl-C to stop)");
            rt.run_until(ctrl_c()).await?;
            for f in rt.failed_batches() {
                println!("on-failure: {f:?}");
            }
            engine.stop().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { listen, db, tables } => {
            let engine = engine_with_tables(&listen, db.as_deref(), &tables).await?;
            ctrl_c().await;
            engine.stop().await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo {
            listen,
            model: Model::JobBoard,
            sqs_endpoint,
        } => {
            let engine = LocalEngine::start(&listen, None).await?;
            let (_moto, sqs) = sqs_endpoint_or_moto(sqs_endpoint)?;
            let mut rt = jobboard_runtime(&engine, &sqs).await?;
            println!(
                "jobstream demo: job board on an embedded DynamoDB at {} and SQS (moto) at {sqs}",
                engine.endpoint()
            );
            let diffs = jobstream::jobboard_demo::run(&mut rt).await?;
            engine.stop().await;
            Ok(report(diffs))
        }
        Command::Demo { listen, .. } => {
            let engine = LocalEngine::start(&listen, None).await?;
            let opts = RuntimeOptions::new(
                Some(engine.endpoint()),
                RecordReader::Embedded(engine.database().clone()),
            );
            let mut rt = Runtime::start(opts).await?;
            println!(
                "jobstream demo: application tracker on an embedded DynamoDB at {}",
                engine.endpoint()
            );
            let diffs = jobstream::demo::run(&mut rt).await?;
            engine.stop().await;
            Ok(report(diffs))
        }
        Command::Run {
            endpoint,
            model: Model::JobBoard,
            sqs_endpoint,
            tables,
        } => {
            let (_moto, sqs) = sqs_endpoint_or_moto(sqs_endpoint)?;
            let config = tables.config_for(Model::JobBoard);
            let mut opts = JobBoardOptions::new(endpoint, Some(sqs), RecordReader::Sdk);
            opts.table = config.table;
            opts.ledger_table = config.ledger_table;
            let mut rt = JobBoardRuntime::start(opts).await?;
            println!(
                "processors: derive, suggestions, matches on {} (Ctrl-C to stop)",
                rt.config.table
            );
            rt.run_until(ctrl_c()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            endpoint, tables, ..
        } => {
            let mut opts = RuntimeOptions::new(endpoint, RecordReader::Sdk);
            opts.config = tables.config();
            let mut rt = Runtime::start(opts).await?;
            println!(
                "processors: history, derive on {} (Ctrl-C to stop)",
                rt.config.table
            );
            rt.run_until(ctrl_c()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify {
            endpoint,
            model,
            repair,
            dry_run,
            tables,
        } => {
            let config = tables.config_for(model);
            let client = aws_sdk_dynamodb::Client::new(&sdk_config(endpoint.as_deref(), 3).await);
            let check = || async {
                match model {
                    Model::Tracker => {
                        jobstream::verify::verify_tracker(&client, &config.table).await
                    }
                    Model::JobBoard => {
                        jobstream::verify::verify_jobboard(
                            &client,
                            &config.table,
                            chrono::Utc::now(),
                        )
                        .await
                    }
                }
            };
            let mut report = check().await?;
            println!("{}", report.render());
            for p in report.problems.iter().take(20) {
                println!("drift: {p}");
            }
            if repair && !report.is_clean() {
                if dry_run {
                    println!("dry run: {} fix(es) would be applied", report.fixes.len());
                } else {
                    let applied =
                        jobstream::verify::repair(&client, &config.table, &report).await?;
                    println!(
                        "repair: {applied} of {} fix(es) applied",
                        report.fixes.len()
                    );
                    report = check().await?;
                    println!("{}", report.render());
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
            model,
            segments,
            rate,
            checkpoint,
            dry_run,
            tables,
        } => {
            let config = tables.config_for(model);
            let sdk = sdk_config(endpoint.as_deref(), 5).await;
            let client = aws_sdk_dynamodb::Client::new(&sdk);
            let store = || shared::store::Store::new(client.clone());
            let opts = jobstream::backfill::ScanOptions {
                segments,
                rate,
                checkpoint,
                ..Default::default()
            };
            let (report, totals) = match model {
                Model::Tracker => {
                    let derive =
                        std::sync::Arc::new(shared::lambda::derive_processor(&config, store()));
                    let history =
                        std::sync::Arc::new(shared::lambda::history_processor(&config, store()));
                    jobstream::backfill::backfill_tracker(
                        &client,
                        &config.table,
                        derive,
                        history,
                        &opts,
                        dry_run,
                    )
                    .await?
                }
                Model::JobBoard => {
                    let sqs = aws_sdk_sqs::Client::new(
                        &sdk_config(std::env::var("AWS_ENDPOINT_URL_SQS").ok().as_deref(), 5).await,
                    );
                    let derive = std::sync::Arc::new(shared::lambda::jobboard_derive_processor(
                        &config,
                        store(),
                        sqs,
                    ));
                    jobstream::backfill::backfill_jobboard(
                        &client,
                        &config.table,
                        derive,
                        &opts,
                        dry_run,
                    )
                    .await?
                }
            };
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
        Command::Tables => {
            let defs = serde_json::json!({
                "tracker": tracker::table(),
                "jobboard": jobboard::table(),
                "ledger": table::ledger(),
                "jobboardQueues": jobboard::queues::queues(),
            });
            println!("{}", serde_json::to_string_pretty(&defs)?);
            Ok(ExitCode::SUCCESS)
        }
    }
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

/// The job board's runtime on an embedded engine and an SQS endpoint.
async fn jobboard_runtime(engine: &LocalEngine, sqs: &str) -> anyhow::Result<JobBoardRuntime> {
    let reader = RecordReader::Embedded(engine.database().clone());
    JobBoardRuntime::start(JobBoardOptions::new(
        Some(engine.endpoint()),
        Some(sqs.to_string()),
        reader,
    ))
    .await
}

/// The configured SQS endpoint, or a moto server started (and installed,
/// once) for this process.
fn sqs_endpoint_or_moto(configured: Option<String>) -> anyhow::Result<(Option<Moto>, String)> {
    match configured {
        Some(e) => Ok((None, e)),
        None => {
            let moto = Moto::start()?;
            let endpoint = moto.endpoint();
            Ok((Some(moto), endpoint))
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logs();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
