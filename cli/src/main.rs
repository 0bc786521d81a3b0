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
    /// The tracker table.
    #[arg(long, env = "TABLE_NAME", default_value = "lambda_api_applications")]
    table: String,
    /// The ledger table (markers and processor state).
    #[arg(long, env = "LEDGER_TABLE_NAME", default_value = "jobstream-ledger")]
    ledger_table: String,
}

impl Tables {
    fn config(&self) -> Config {
        Config {
            table: self.table.clone(),
            ledger_table: self.ledger_table.clone(),
            ..Config::default()
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
        #[command(flatten)]
        tables: Tables,
    },
    /// Recompute the tracker's derived data and report drift (exit 1 on drift).
    Verify {
        #[arg(long, env = "JOBSTREAM_ENDPOINT")]
        endpoint: Option<String>,
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
    jobstream::engine::ensure_table(&client, &tracker::table(), &tables.table).await?;
    jobstream::engine::ensure_table(&client, &table::ledger(), &tables.ledger_table).await?;
    println!("DynamoDB endpoint: {}", engine.endpoint());
    println!(
        "tables: {} (stream: NEW_AND_OLD_IMAGES), {} (ledger)",
        tables.table, tables.ledger_table
    );
    println!(
        "try: aws dynamodb scan --endpoint-url {} --table-name {}",
        engine.endpoint(),
        tables.table
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
            let mut rt = JobBoardRuntime::start(JobBoardOptions::new(
                Some(engine.endpoint()),
                Some(sqs.clone()),
                RecordReader::Embedded(engine.database().clone()),
            ))
            .await?;
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
            let mut rt = JobBoardRuntime::start(JobBoardOptions::new(
                Some(engine.endpoint()),
                Some(sqs.clone()),
                RecordReader::Embedded(engine.database().clone()),
            ))
            .await?;
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
        Command::Run { endpoint, tables } => {
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
        Command::Verify { endpoint, tables } => {
            let client = aws_sdk_dynamodb::Client::new(&sdk_config(endpoint.as_deref(), 3).await);
            let report = jobstream::verify::verify_tracker(&client, &tables.table).await?;
            println!(
                "checked {} applications, {} stages, {} history entries; META/COUNT {:?}",
                report.applications, report.stages, report.history_entries, report.count
            );
            for p in &report.problems {
                println!("drift: {p}");
            }
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
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
