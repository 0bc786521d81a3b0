//! `jobstream`: run any registered model's processors locally on an
//! embedded DynamoDB engine or against any endpoint, play its demo, verify
//! and backfill its derived data, or serve the engine alone.
//!
//! `args.rs` holds every command and flag; `commands/` what each does.

mod args;
mod commands;

use std::process::ExitCode;

use clap::Parser;
use shared::models;

use args::{model_names, Cli, Command, DevArgs, RunArgs};

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("JOBSTREAM_LOG")
        // The SDK's provider chains log each source that failed at WARN
        // with its raw structures (IMDS tokens, responses): the commands
        // say what is missing in one line instead.
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new("warn,dynoxide=error,aws_config=error")
        });
    // A log line stderr cannot take (its reader went away: `2>&1 | head`,
    // a log shipper that died; in the long-running commands, its reader
    // stalled too) is dropped: the subscriber's own report of it is an
    // `eprintln!`, which panicked wherever the line was logged (a handler:
    // a failed invocation; the main task: exit 101). The writer never
    // reports one (`shared::out`); the setting stays for safety.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(shared::out::log_writer)
        .log_internal_errors(false);
    // `JOBSTREAM_LOG_FORMAT=json`: one JSON object a line (a log shipper's
    // input), as the Lambdas log under `AWS_LAMBDA_LOG_FORMAT=JSON`.
    if std::env::var("JOBSTREAM_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        logs.json().with_ansi(false).init();
    } else {
        logs.fmt_fields(shared::logs::fields())
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Dev(a) => commands::local::dev(a).await,
        Command::Demo(a) => commands::local::demo(a).await,
        Command::Serve(a) => commands::local::serve(a).await,
        Command::Run(a) => commands::run::run(a).await,
        Command::Create(a) => commands::create::create(a).await,
        Command::Verify(a) => commands::tools::verify(a).await,
        Command::Backfill(a) => commands::tools::backfill(a).await,
        Command::Tables(a) => commands::tools::tables(a),
        Command::CheckModel(a) => commands::tools::check_model(a),
        Command::Import(a) => commands::tools::import(a),
        Command::Explain(a) => commands::tools::explain(a).await,
        Command::Graph(a) => commands::tools::graph(a),
        Command::Query(a) => commands::tools::query(a).await,
        Command::Models(a) => Ok(commands::tools::models(a)),
    }
}

/// The commands that print and exit end quietly when their reader goes
/// (`jobstream tables | head -1`), as Unix filters do, instead of panicking
/// in `println!`: SIGPIPE gets its default action back. The others keep
/// Rust's (ignored), which their sockets need, and print through
/// `outln!`/`errln!` (a reader gone is logged once, never a panic).
fn quiet_on_a_closed_pipe(command: &Command) {
    #[cfg(unix)]
    if matches!(
        command,
        Command::Tables(_)
            | Command::Graph(_)
            | Command::Models(_)
            | Command::Query(_)
            | Command::CheckModel(_)
            | Command::Import(_)
            | Command::Explain(_)
    ) {
        sigpipe::reset();
    }
}

/// The commands that run until stopped write stdout and stderr without
/// ever blocking (`shared::out::non_blocking`): a reader that stalls (a
/// log shipper, `| sleep`) filled the pipe and the next write blocked the
/// whole process (ops11 #3: no record processed, the probes silent,
/// SIGTERM ignored). What the pipe cannot take is dropped and counted.
/// The commands that end when their work has keep blocking writes (a slow
/// reader slows them down; nothing of their report is lost).
fn never_blocked_by_output(command: &Command) {
    if matches!(
        command,
        Command::Run(_) | Command::Serve(_) | Command::Dev(_)
    ) {
        if let Err(e) = shared::out::non_blocking() {
            tracing::warn!(error = %e, "cannot start the output writer threads: stdout and stderr are written directly (a reader that stalls blocks the process)");
        }
    }
}

/// How long the exit waits for the lines still queued (the exit line) when
/// stdout or stderr does not take them: `run`'s stop bounds it further by
/// its `--shutdown-grace` (`shared::out::exit_by`).
const EXIT_FLUSH: std::time::Duration = std::time::Duration::from_secs(1);

fn main() -> ExitCode {
    init_logs();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    quiet_on_a_closed_pipe(&cli.command);
    never_blocked_by_output(&cli.command);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            jobstream::errln!("error: cannot start the async runtime: {e}");
            shared::out::flush(EXIT_FLUSH);
            return ExitCode::FAILURE;
        }
    };
    // `run` ends within `--shutdown-grace`: what it abandoned at the stop
    // (a call on a blocking thread that never returns) does not hold the
    // process. The other commands end when their work has.
    let bounded = matches!(cli.command, Command::Run(_));
    let code = runtime.block_on(command(cli));
    shared::out::flush(EXIT_FLUSH);
    if bounded {
        runtime.shutdown_background();
    }
    code
}

/// Flags whose value may come from a variable, for a conflict's note.
const FROM_THE_ENVIRONMENT: [(&str, &str); 3] = [
    ("--model", "MODEL"),
    ("--model-file", "MODEL_FILE"),
    ("--sqs-endpoint", "AWS_ENDPOINT_URL_SQS"),
];

/// clap's usage error (or help), and its exit code. Two flags that
/// conflict may have been given by the environment (`MODEL` and
/// `MODEL_FILE` set in a unit's environment, or one of them beside the
/// other's flag): the variables are named, as clap names only the flags.
fn usage_error(e: &clap::Error) -> ExitCode {
    e.print().ok();
    if e.kind() == clap::error::ErrorKind::ArgumentConflict {
        let said = e.to_string();
        let set: Vec<String> = FROM_THE_ENVIRONMENT
            .iter()
            .filter(|(flag, _)| said.contains(&format!("'{flag} ")))
            .filter_map(|(flag, var)| {
                let value = std::env::var(var).ok().filter(|v| !v.is_empty())?;
                Some(format!("{var}={value} (as {flag})"))
            })
            .collect();
        if !set.is_empty() {
            jobstream::errln!(
                "note: set in the environment: {}; a variable counts as its flag: unset one",
                set.join(", ")
            );
        }
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

async fn command(cli: Cli) -> ExitCode {
    if let Command::Dev(DevArgs { target, .. }) | Command::Run(RunArgs { target, .. }) =
        &cli.command
    {
        if target.model.model_file.is_none() && models::find(&target.model.model).is_err() {
            jobstream::errln!(
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
            jobstream::errln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
