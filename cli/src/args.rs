//! The command line: every command, its flags and their help (what
//! `jobstream --help` prints). What each command does is in `commands/`.

use clap::{Parser, Subcommand};
use jobstream::local::engine::url_arg;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::RuntimeOptions;
use jobstream::tools::consumer::ConsumerArgs;
use shared::lambda::Config;
use shared::models::{self, Model};

#[derive(Parser)]
#[command(
    name = "jobstream",
    version,
    about = "Derived data for DynamoDB single-table designs, from the table's stream"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--model`: a name from the registry.
/// `--rate`: items per second, a positive number (0, a negative or NaN
/// made no pause a `Duration` can hold: a panic at the first page).
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?}: items per second, a positive number")),
    }
}

pub(crate) fn model_names() -> String {
    models::registry()
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--model NAME` or `--model-file PATH`: which model a command runs.
#[derive(clap::Args, Clone)]
pub(crate) struct ModelArgs {
    /// The model (see `jobstream models`).
    #[arg(long, env = "MODEL", default_value = models::DEFAULT_MODEL)]
    pub(crate) model: String,
    /// A model file (YAML, `jobstream: 1`) instead of a registered model;
    /// check it with `jobstream check-model PATH`.
    #[arg(
        long,
        env = "MODEL_FILE",
        value_name = "PATH",
        conflicts_with = "model"
    )]
    pub(crate) model_file: Option<std::path::PathBuf>,
}

impl ModelArgs {
    pub(crate) fn source(&self) -> models::Source {
        models::Source::new(&self.model, self.model_file.as_deref())
    }

    pub(crate) fn load(&self) -> anyhow::Result<Model> {
        models::load(&self.source()).map_err(anyhow::Error::msg)
    }

    /// The flag that names this model again on a command line.
    pub(crate) fn flag(&self) -> String {
        match &self.model_file {
            Some(path) => format!("--model-file {}", path.display()),
            None => format!("--model {}", self.model),
        }
    }

    /// The model's file: `--model-file`, or the shipped file `--model`
    /// names.
    pub(crate) fn file(&self) -> anyhow::Result<&'static shared::file::Loaded> {
        models::file_of(&self.source()).map_err(anyhow::Error::msg)
    }
}

#[derive(clap::Args, Clone)]
pub(crate) struct Target {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// The model's table (default: the model's own table name).
    #[arg(long, env = "TABLE_NAME")]
    pub(crate) table: Option<String>,
    /// The ledger table (markers, records, checkpoints); default: the
    /// stack's (`<stack>-ledger`) with --stack, else `jobstream-ledger`.
    #[arg(long, env = "LEDGER_TABLE_NAME")]
    pub(crate) ledger_table: Option<String>,
    /// The deployed stack to run against (`cdk deploy -c stackName=S`): its
    /// ledger `S-ledger` and its queues `S-<queue name>` (a QUEUE_URL_<QUEUE>
    /// or --ledger-table still wins).
    #[arg(long, env = "JOBSTREAM_STACK", value_name = "STACK")]
    pub(crate) stack: Option<String>,
}

impl Target {
    pub(crate) fn model(&self) -> anyhow::Result<Model> {
        self.model.load()
    }

    /// `--ledger-table`, else the stack's ledger, else `jobstream-ledger`.
    pub(crate) fn ledger(&self) -> String {
        match (&self.ledger_table, &self.stack) {
            (Some(l), _) => l.clone(),
            (None, Some(stack)) => models::table::STACK_NAMES.ledger(stack),
            (None, None) => models::table::ledger().name.to_string(),
        }
    }

    pub(crate) fn table_name(&self, model: &Model) -> String {
        self.table
            .clone()
            .unwrap_or_else(|| model.table.name.to_string())
    }

    pub(crate) fn options(&self, endpoint: Option<String>, reader: RecordReader) -> RuntimeOptions {
        let mut opts = RuntimeOptions::new(&self.model.model, endpoint, reader);
        opts.model_file = self.model.model_file.clone();
        opts.table = self.table.clone();
        opts.ledger_table = self.ledger();
        opts
    }

    /// Configuration for tools (verify, backfill): table names and the
    /// queue URLs from the environment (`QUEUE_URL_<LOGICAL>`).
    pub(crate) fn config(&self, model: &Model) -> Config {
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
pub(crate) struct ToolSqs {
    /// An SQS endpoint whose queues carry the definition's names, as
    /// `jobstream dev` creates them (it prints `SQS endpoint:`); with
    /// --stack, the stack's queues at this endpoint. Default: the region's
    /// SQS, for --stack or QUEUE_URL_<LOGICAL>.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS", value_name = "URL", value_parser = url_arg("AWS_ENDPOINT_URL_SQS"))]
    pub(crate) sqs_endpoint: Option<String>,
}

/// `--endpoint` of the tools that read a live table (verify, backfill,
/// explain, query).
#[derive(clap::Args, Clone)]
pub(crate) struct ToolEndpoint {
    /// DynamoDB endpoint, e.g. `jobstream serve`'s or `jobstream dev`'s
    /// `http://127.0.0.1:8000` (default: the region's, from the AWS
    /// environment).
    #[arg(long, env = "JOBSTREAM_ENDPOINT", value_parser = url_arg("JOBSTREAM_ENDPOINT"))]
    pub(crate) endpoint: Option<String>,
}

/// `dev`'s and `demo`'s SQS: an endpoint, or a local server started here.
#[derive(clap::Args, Clone)]
pub(crate) struct LocalSqsArgs {
    /// SQS endpoint for models with queues (default: a local SQS server, started here).
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS", value_parser = url_arg("AWS_ENDPOINT_URL_SQS"))]
    pub(crate) sqs_endpoint: Option<String>,
    /// Port of that local SQS server on 127.0.0.1 (default: a free one;
    /// either way it is printed as `SQS endpoint:`).
    #[arg(long, value_name = "PORT", conflicts_with = "sqs_endpoint")]
    pub(crate) sqs_port: Option<u16>,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Embedded engine + tables (+ queues on the local SQS) + the model's processors, until Ctrl-C.
    Dev(DevArgs),
    /// Play a model's scenario on a fresh embedded engine and check the result.
    Demo(DemoArgs),
    /// Serve the embedded engine alone, with the tables of every model (or
    /// of `--model`), until Ctrl-C.
    Serve(ServeArgs),
    /// Run the model's processors as a production consumer against an
    /// engine or DynamoDB (flag, or AWS_ENDPOINT_URL): durable checkpoints,
    /// fenced shard leases shared across processes, SIGTERM handover.
    Run(RunArgs),
    /// Create what `run` needs on an endpoint no CDK stack deploys to
    /// (`serve`, DynamoDB Local, moto): the model's table, the ledger and
    /// each queue with its DLQ, as the stack defines and names them (with
    /// --stack, `S-ledger` and `S-<queue>`). What exists is left as it is
    /// and checked as `run` checks it. Prints the `run` command line.
    #[command(
        after_help = "Examples:\n  jobstream serve --model-file my-table.yaml &      # or any DynamoDB endpoint\n  jobstream create --model-file my-table.yaml --stack Dev \\\n    --endpoint http://127.0.0.1:8000 --sqs-endpoint http://127.0.0.1:9324\n  jobstream run --model-file my-table.yaml --stack Dev \\\n    --endpoint http://127.0.0.1:8000 --sqs-endpoint http://127.0.0.1:9324"
    )]
    Create(CreateArgs),
    /// Recompute every derived datum from the source items and report drift
    /// (exit 0 only when no drift remains).
    Verify(VerifyArgs),
    /// Feed every existing item through the model's rules (adopting an
    /// existing table, a new rule, or a lost day of processing).
    Backfill(BackfillArgs),
    /// Print the definitions the CDK stack deploys (JSON): tables, queues,
    /// processors and filters of every model (or of one model file).
    Tables(TablesArgs),
    /// Check a model file without running anything: every problem as
    /// PATH:LINE:COL: message (exit 1 on any).
    CheckModel(CheckModelArgs),
    /// Print a model as a Mermaid flowchart (entities, what each implies,
    /// the indexes; GitHub renders it in a ```mermaid block).
    Graph(GraphArgs),
    /// A model file from a client library's schema (OneTable, ElectroDB):
    /// printed (or written to --out), checked like `check-model`.
    Import(ImportArgs),
    /// Explain one item of a live table: what a source implies now and what
    /// the ledger recorded; which sources imply a derived item or a counter,
    /// by which rule; the rule that rejects bad input and why. Exit 0 when
    /// an item has the key, 1 when none has (the answer is printed: what
    /// such a key would be) or a request failed, 2 on a usage error (an
    /// empty key value, or one over DynamoDB's key limits), before any
    /// request.
    Explain(ExplainArgs),
    /// Run one of a model file's declared access patterns (`queries:`)
    /// against a table: its items as a table (keys, then attributes) or
    /// JSON, every page read. Without a query name: list the queries and
    /// their parameters. Usage errors (unknown query, missing or invalid
    /// parameter) exit 2.
    #[command(
        after_help = "Examples:\n  jobstream query --model-file my-table.yaml            # its queries and their parameters\n  jobstream query --model-file my-table.yaml --endpoint http://127.0.0.1:8000 \\\n    QUERY param=value ...\n  jobstream query --model NAME --endpoint http://127.0.0.1:8000 --json \\\n    QUERY param=value ...           # a shipped model's file (models/)"
    )]
    Query(QueryArgs),
    /// List the shipped models, or print one's file (the YAML `--model
    /// NAME` runs, to read or to start a file of your own from).
    #[command(
        after_help = "Examples:\n  jobstream models                      # the shipped models\n  jobstream models NAME > my-table.yaml     # a shipped model's file\n  jobstream models NAME --scenario      # its demo (a scenario file)"
    )]
    Models(ModelsArgs),
}

#[derive(clap::Args)]
pub(crate) struct CreateArgs {
    /// The DynamoDB endpoint (on AWS, deploy the stack with CDK instead).
    #[arg(long, env = "JOBSTREAM_ENDPOINT", value_parser = url_arg("JOBSTREAM_ENDPOINT"))]
    pub(crate) endpoint: String,
    #[command(flatten)]
    pub(crate) target: Target,
    /// The SQS endpoint for the model's queues (default: --endpoint).
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS", value_parser = url_arg("AWS_ENDPOINT_URL_SQS"))]
    pub(crate) sqs_endpoint: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct ModelsArgs {
    /// A shipped model: print its file.
    pub(crate) name: Option<String>,
    /// With NAME: print its demo (the scenario `jobstream demo` plays).
    #[arg(long, requires = "name")]
    pub(crate) scenario: bool,
}

#[derive(clap::Args)]
pub(crate) struct DevArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    #[command(flatten)]
    pub(crate) sqs: LocalSqsArgs,
    /// Address the engine listens on (any DynamoDB client can use it).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub(crate) listen: String,
    /// Persist the engine to this SQLite file (default: in memory).
    #[arg(long)]
    pub(crate) db: Option<String>,
}

#[derive(clap::Args)]
pub(crate) struct DemoArgs {
    /// Address of the embedded engine (port 0: a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub(crate) listen: String,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// A scenario file (YAML: `writes` in order, then the `expect`ed
    /// items; after every step `verify`, bad input and dead letters are
    /// checked too); default: `<model file stem>.scenario.yaml` next to
    /// --model-file if present, or a shipped model's own
    /// (`models/NAME.scenario.yaml`). A scenario's `model:` is the model
    /// played. Without one, nothing is written and `verify` runs.
    #[arg(long, value_name = "PATH")]
    pub(crate) scenario: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) sqs: LocalSqsArgs,
}

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// Address the engine listens on (DynamoDB and DynamoDB Streams).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub(crate) listen: String,
    /// Persist the engine to this SQLite file (default: in memory).
    #[arg(long)]
    pub(crate) db: Option<String>,
    /// Also start the local SQS on this port of 127.0.0.1 (0: a free
    /// one), printed as `SQS endpoint:`: the queues `jobstream create` makes
    /// and `jobstream run` consumes, with the engine alone.
    #[arg(long, value_name = "PORT")]
    pub(crate) sqs_port: Option<u16>,
    /// Only this model's tables (default: every model's).
    #[arg(long, env = "MODEL")]
    pub(crate) model: Option<String>,
    /// Only this model file's tables.
    #[arg(
        long,
        env = "MODEL_FILE",
        value_name = "PATH",
        conflicts_with = "model"
    )]
    pub(crate) model_file: Option<std::path::PathBuf>,
    /// The model's table name (with --model or --model-file).
    #[arg(long, env = "TABLE_NAME")]
    pub(crate) table: Option<String>,
    /// The ledger table (the processors' records and totals); give each
    /// model's table its own (with --stack: the stack's).
    #[arg(long, env = "LEDGER_TABLE_NAME", default_value = "jobstream-ledger")]
    pub(crate) ledger_table: String,
}

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// DynamoDB and DynamoDB Streams endpoint, e.g. `jobstream serve`'s
    /// `http://127.0.0.1:8000` (default: the region's, from the AWS
    /// environment).
    #[arg(long, env = "JOBSTREAM_ENDPOINT", value_parser = url_arg("JOBSTREAM_ENDPOINT"))]
    pub(crate) endpoint: Option<String>,
    #[command(flatten)]
    pub(crate) target: Target,
    /// SQS endpoint of a durable SQS, required for models with queues
    /// (e.g. https://sqs.eu-west-1.amazonaws.com; `dev` and `demo` start
    /// a local one instead). Without --stack, the queues are found there by
    /// the names `jobstream create` gives them (or QUEUE_URL_<LOGICAL>).
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS", value_parser = url_arg("AWS_ENDPOINT_URL_SQS"))]
    pub(crate) sqs_endpoint: Option<String>,
    #[command(flatten)]
    pub(crate) consumer: ConsumerArgs,
}

#[derive(clap::Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub(crate) endpoint: ToolEndpoint,
    #[command(flatten)]
    pub(crate) target: Target,
    /// Fix drift through the live path's guarded writes, then verify again.
    #[arg(long)]
    pub(crate) repair: bool,
    /// With --repair: show the repairs without applying them.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// With --repair: verify again until clean for up to SECS seconds
    /// (the live processors apply what a repair starts, a queued job or a
    /// reconciled item's record, a moment later); 0: once, at once.
    /// Findings no repair addresses end the wait once they stay the same.
    /// At most a day.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(..=86_400))]
    pub(crate) settle: u64,
    /// Print every drift finding and bad input item (default: the first
    /// 20 of each, and how many more there are).
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) sqs: ToolSqs,
}

#[derive(clap::Args)]
pub(crate) struct BackfillArgs {
    #[command(flatten)]
    pub(crate) endpoint: ToolEndpoint,
    #[command(flatten)]
    pub(crate) target: Target,
    /// Parallel Scan segments (DynamoDB's TotalSegments, 1..=1000000; at
    /// most 32 are scanned at once).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub(crate) segments: u32,
    /// Items per second (about RCU/s for items up to 4 KB), a positive
    /// number; unlimited if absent.
    #[arg(long, value_parser = positive_rate)]
    pub(crate) rate: Option<f64>,
    /// Resume from / save progress to this file.
    #[arg(long)]
    pub(crate) checkpoint: Option<std::path::PathBuf>,
    /// Count what would be written, write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) sqs: ToolSqs,
}

#[derive(clap::Args)]
pub(crate) struct TablesArgs {
    /// The definitions of this model file alone (the CDK app's
    /// `-c modelFile=PATH` runs this).
    #[arg(long, value_name = "PATH")]
    pub(crate) model_file: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct CheckModelArgs {
    /// The model file (YAML, `jobstream: 1`).
    pub(crate) path: std::path::PathBuf,
}

#[derive(clap::Args)]
pub(crate) struct GraphArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
}

#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    /// The schema's library.
    #[arg(value_enum)]
    pub(crate) from: jobstream::tools::import::Library,
    /// The schema: a OneTable schema file, or ElectroDB entity schemas
    /// serialised to JSON (see the README).
    pub(crate) schema: std::path::PathBuf,
    /// The model's name (default: the schema file's stem).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// The table's name (default: the model's name).
    #[arg(long)]
    pub(crate) table: Option<String>,
    /// Write the model file here instead of stdout (a file already there is
    /// refused: see `--force`).
    #[arg(long, short, value_name = "PATH")]
    pub(crate) out: Option<std::path::PathBuf>,
    /// Replace the file `--out` names if it exists (e.g. a model file you
    /// extended: import elsewhere and compare instead).
    #[arg(long, requires = "out")]
    pub(crate) force: bool,
}

#[derive(clap::Args)]
pub(crate) struct ExplainArgs {
    #[command(flatten)]
    pub(crate) endpoint: ToolEndpoint,
    #[command(flatten)]
    pub(crate) target: Target,
    /// The item's partition key value.
    pub(crate) pk: String,
    /// The item's sort key value.
    pub(crate) sk: String,
}

#[derive(clap::Args)]
pub(crate) struct QueryArgs {
    #[command(flatten)]
    pub(crate) endpoint: ToolEndpoint,
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// The model's table (default: the model's own table name).
    #[arg(long, env = "TABLE_NAME")]
    pub(crate) table: Option<String>,
    /// Print the items as JSON (an array of objects), every attribute of each
    /// (the table view shows the query's `attributes:`).
    #[arg(long)]
    pub(crate) json: bool,
    /// Items read per request (default: DynamoDB's 1 MB pages).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    pub(crate) page_size: Option<i32>,
    /// The query (see `jobstream query --model-file F` for the list).
    pub(crate) name: Option<String>,
    /// The query's parameters, `param=value`.
    #[arg(value_name = "PARAM=VALUE")]
    pub(crate) params: Vec<String>,
}
