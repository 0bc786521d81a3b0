//! What each command does (the flags are in `args.rs`): the local runtime
//! (`local.rs`: dev, demo, serve), the production consumer (`run.rs`) and
//! the tools (`tools.rs`: verify, backfill, explain, query, tables, ...),
//! with the lines they print that scripts read.

pub(crate) mod create;
pub(crate) mod local;
pub(crate) mod run;
pub(crate) mod tools;

use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_server::LocalSqs;
use shared::models::Model;

use crate::args::{LocalSqsArgs, ModelArgs};

pub(crate) async fn ctrl_c() {
    if let Err(e) = tokio::signal::ctrl_c().await {
        tracing::error!(error = %e, "cannot listen for Ctrl-C; stopping");
    }
}
/// How long past its grace a stop may take to write its exit line before
/// the process is ended anyway ([`Stop::bound`]).
pub(crate) const OVERRUN: std::time::Duration = std::time::Duration::from_secs(1);

/// SIGTERM / SIGINT listened for from the moment [`Stop::listen`] is
/// called (a handler installed before the first startup check: as PID 1 a
/// signal without one is ignored, and elsewhere it kills the process
/// without a word), said on stderr with what the stop does at that moment.
pub(crate) struct Stop {
    /// When the signal came (`None`: not yet).
    signalled: tokio::sync::watch::Receiver<Option<std::time::Instant>>,
    doing: std::sync::Arc<std::sync::Mutex<&'static str>>,
}

impl Stop {
    pub(crate) fn listen(doing: &'static str) -> Self {
        let (tx, signalled) = tokio::sync::watch::channel(None);
        let doing = std::sync::Arc::new(std::sync::Mutex::new(doing));
        let said = doing.clone();
        #[cfg(unix)]
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        tokio::spawn(async move {
            let now = || *said.lock().unwrap_or_else(|p| p.into_inner());
            #[cfg(unix)]
            match term {
                Ok(mut term) => tokio::select! {
                    _ = term.recv() => jobstream::errln!("SIGTERM: {}", now()),
                    () = ctrl_c() => jobstream::errln!("SIGINT: {}", now()),
                },
                Err(e) => {
                    tracing::error!(error = %e, "cannot listen for SIGTERM; Ctrl-C only");
                    ctrl_c().await;
                    jobstream::errln!("SIGINT: {}", now());
                }
            }
            #[cfg(not(unix))]
            {
                ctrl_c().await;
                jobstream::errln!("SIGINT: {}", now());
            }
            let _ = tx.send(Some(std::time::Instant::now()));
        });
        Self { signalled, doing }
    }

    /// What a signal from now on is said to do.
    pub(crate) fn now_doing(&self, doing: &'static str) {
        *self.doing.lock().unwrap_or_else(|p| p.into_inner()) = doing;
    }

    /// Bounds the stop: once a signal came, the process ends `grace` (and
    /// [`OVERRUN`] for the exit line) after it, whatever still runs. A
    /// handler that never yields (an expression evaluated for minutes) is
    /// abandoned by the stop, but its thread would hold the process
    /// (hostile13's #18: `run --shutdown-grace 2s` alive a minute after
    /// SIGTERM): a thread of its own, outside the async runtime, ends it,
    /// at ERROR (an operator's matter: what held the handler is in the
    /// logs before), exit 1.
    pub(crate) fn bound(&self, grace: std::time::Duration) {
        let mut rx = self.signalled.clone();
        tokio::spawn(async move {
            let Ok(at) = rx.wait_for(Option::is_some).await.map(|at| *at) else {
                return;
            };
            let Some(at) = at else { return };
            let ends = at + grace + OVERRUN;
            std::thread::spawn(move || {
                std::thread::sleep(ends.saturating_duration_since(std::time::Instant::now()));
                tracing::error!(
                    grace_secs = grace.as_secs_f64(),
                    "the stop overran its grace: a handler still running is abandoned; exiting"
                );
                jobstream::errln!(
                    "stopped {:.2} s after the signal, past the grace ({:.2} s): a handler still running was abandoned",
                    at.elapsed().as_secs_f64(),
                    grace.as_secs_f64()
                );
                shared::out::flush(std::time::Duration::from_millis(500));
                std::process::exit(1);
            });
        });
    }

    /// When the signal came, if one did.
    pub(crate) fn signalled_at(&self) -> Option<std::time::Instant> {
        *self.signalled.borrow()
    }

    /// Ends when a signal came (at once if one already did).
    pub(crate) async fn signalled(&self) {
        let mut rx = self.signalled.clone();
        // An error: the listener is gone without a signal; never again.
        if rx.wait_for(Option::is_some).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The configured SQS endpoint, or the local SQS server started (and
/// installed, once) for this process, for models with queues, on
/// `--sqs-port` (a free one by default).
pub(crate) fn sqs_for(
    model: &Model,
    sqs: LocalSqsArgs,
) -> anyhow::Result<(Option<LocalSqs>, Option<String>)> {
    match sqs.sqs_endpoint {
        Some(e) => Ok((None, Some(e))),
        None if model.consumers.is_empty() => Ok((None, None)),
        None => {
            let server = LocalSqs::start_on(sqs.sqs_port.unwrap_or(0))?;
            let endpoint = server.endpoint();
            Ok((Some(server), Some(endpoint)))
        }
    }
}
/// The lines scripts read: endpoint, tables, SQS, processors.
pub(crate) fn announce(
    engine: Option<&LocalEngine>,
    rt: &Runtime,
    sqs: Option<&str>,
    model: &ModelArgs,
) {
    if let Some(engine) = engine {
        jobstream::outln!("DynamoDB endpoint: {}", engine.endpoint());
    }
    jobstream::outln!(
        "tables: {} (stream: NEW_AND_OLD_IMAGES), {} (ledger)",
        rt.config.table,
        rt.config.ledger_table
    );
    if let Some(sqs) = sqs {
        jobstream::outln!("SQS endpoint: {sqs}");
        for (logical, url) in &rt.config.queues {
            jobstream::outln!("queue {logical}: {url}");
        }
    }
    // Which version of the model runs (as the Lambdas log it): two versions
    // on one stream (a rolling deploy) each count by their own rules.
    if let Ok(file) = model.file() {
        jobstream::outln!(
            "model file: {} (sha256 {})",
            model.model_file.as_ref().map_or_else(
                || format!("models/{}.yaml, shipped", model.model),
                |p| p.display().to_string()
            ),
            file.sha256
        );
    }
    let consumers: Vec<String> = rt.queues.iter().map(|q| q.name.clone()).collect();
    jobstream::outln!(
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
/// Lists the batches given up (and the losses) on stdout; how many.
pub(crate) fn report_failures(rt: &Runtime) -> usize {
    let failed = rt.failed_batches();
    for f in &failed {
        jobstream::outln!(
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
    failed.len()
}
