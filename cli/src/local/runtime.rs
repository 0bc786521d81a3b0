//! The local runtime of any registered model: its tables, its queues (on an
//! SQS endpoint such as moto), its processors, and the local event source
//! mappings that feed them, as Lambda would.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use shared::lambda::{Config, Processors, QueueHandler, StreamHandler};
use shared::models::{self, BoxError, Harness, Model};
use shared::store::{Backoff, Store};

use crate::local::engine::{ensure_table, sdk_config};
use crate::local::esm::{stream_arn, FailedBatch, MappingConfig, RecordReader, StreamMapping};
use crate::local::sqs_esm::{create_queue, QueueMapping};

/// Where the runtime connects and how its mappings behave.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// The model's name (see `shared::models::registry`).
    pub model: String,
    /// A model file (SPEC §8); when set, it is the model (`model` unused).
    pub model_file: Option<std::path::PathBuf>,
    /// Endpoint of the engine (tables, stream); `None` = the environment.
    pub endpoint: Option<String>,
    /// Endpoint the processors write through (defaults to `endpoint`; a
    /// fault proxy in tests).
    pub processor_endpoint: Option<String>,
    /// SQS endpoint (models with queues).
    pub sqs_endpoint: Option<String>,
    pub reader: RecordReader,
    /// The model's table (default: the model's own name for it).
    pub table: Option<String>,
    pub ledger_table: String,
    /// Prefix of the queue names (tests use a unique one per test).
    pub queue_prefix: String,
    /// Local visibility timeout (Lambda's is 6 x the function timeout; a
    /// short one makes local retries quick).
    pub visibility: Duration,
    /// Settings of every stream mapping (its name is set per processor).
    pub mapping: MappingConfig,
    /// SDK attempts per request for the processors (standard retry mode).
    pub max_attempts: u32,
    /// Our own backoff for what the SDK does not retry.
    pub backoff: Backoff,
}

impl RuntimeOptions {
    pub fn new(model: &str, endpoint: Option<String>, reader: RecordReader) -> Self {
        Self {
            model: model.to_string(),
            model_file: None,
            endpoint,
            processor_endpoint: None,
            sqs_endpoint: None,
            reader,
            table: None,
            ledger_table: models::table::ledger().name.to_string(),
            queue_prefix: String::new(),
            visibility: Duration::from_secs(1),
            mapping: MappingConfig::new("stream"),
            max_attempts: 5,
            backoff: Backoff::default(),
        }
    }
}

/// A model's processors and their mappings.
pub struct Runtime {
    pub model: Model,
    pub config: Config,
    /// Client for writers and readers (not the processors').
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub sqs: Option<aws_sdk_sqs::Client>,
    pub processors: Processors,
    pub mappings: Vec<StreamMapping>,
    pub queues: Vec<QueueMapping>,
    /// Print a status line this often while running (when it changed).
    pub status_every: Option<Duration>,
}

impl Runtime {
    /// Creates the tables and queues if missing and builds the mappings.
    pub async fn start(opts: RuntimeOptions) -> anyhow::Result<Self> {
        let source = models::Source::new(&opts.model, opts.model_file.as_deref());
        let model = models::load(&source).map_err(anyhow::Error::msg)?;
        let sdk = sdk_config(opts.endpoint.as_deref(), opts.max_attempts).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
        let table = opts
            .table
            .clone()
            .unwrap_or_else(|| model.table.name.to_string());
        ensure_table(&dynamodb, &model.table, &table).await?;
        ensure_table(&dynamodb, &models::table::ledger(), &opts.ledger_table).await?;
        let mut config = Config {
            table,
            ledger_table: opts.ledger_table.clone(),
            model: model.name.to_string(),
            queues: Default::default(),
        };
        let sqs = match (&opts.sqs_endpoint, model.consumers.is_empty()) {
            (_, true) => None,
            (Some(e), false) => Some(aws_sdk_sqs::Client::new(
                &sdk_config(Some(e), opts.max_attempts).await,
            )),
            (None, false) => {
                anyhow::bail!("model {} has queues: an SQS endpoint is needed", model.name)
            }
        };
        let mut created = Vec::new();
        if let Some(sqs) = &sqs {
            for def in model.queues() {
                let q = create_queue(sqs, &def, &opts.queue_prefix, opts.visibility).await?;
                config.queues.insert(def.logical.to_string(), q.url.clone());
                created.push((def, q));
            }
        }
        let proc_sdk = match &opts.processor_endpoint {
            Some(e) => sdk_config(Some(e), opts.max_attempts).await,
            None => sdk.clone(),
        };
        let store = Store::with_backoff(aws_sdk_dynamodb::Client::new(&proc_sdk), opts.backoff);
        let processors = Processors::new(&model, &config, store, sqs.clone());
        let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
        let arn = stream_arn(&dynamodb, &config.table).await?;
        let mappings = processors
            .streams()
            .into_iter()
            .map(|p| {
                let mut cfg = opts.mapping.clone();
                cfg.name = p.name().to_string();
                StreamMapping::new(
                    cfg,
                    streams.clone(),
                    opts.reader.clone(),
                    arn.clone(),
                    crate::local::esm::handler(p),
                )
            })
            .collect();
        let mut queues = Vec::new();
        for (def, q) in created {
            let consumer = processors
                .consumer(def.logical)
                .with_context(|| format!("no consumer for queue {}", def.logical))?;
            queues.push(QueueMapping::new(
                def.consumer,
                sqs.clone().expect("queues exist only with SQS"),
                q,
                def.batch_size,
                crate::local::sqs_esm::sqs_handler(consumer.handler.clone()),
            ));
        }
        Ok(Self {
            model,
            config,
            dynamodb,
            sqs,
            processors,
            mappings,
            queues,
            status_every: None,
        })
    }

    /// The stream processor called `name` (`derive`, `history`, ...).
    pub fn stream_processor(&self, name: &str) -> Arc<dyn StreamHandler> {
        self.processors
            .stream(name)
            .unwrap_or_else(|| panic!("model {} has no processor {name}", self.model.name))
    }

    /// The queue consumer called `name` (or of logical queue `name`).
    pub fn consumer(&self, name: &str) -> Arc<dyn QueueHandler> {
        self.processors
            .consumer(name)
            .map(|c| c.handler.clone())
            .unwrap_or_else(|| panic!("model {} has no consumer {name}", self.model.name))
    }

    /// Processes the stream and the queues until all are empty (failed
    /// messages included: they come back after the visibility timeout and
    /// end in their DLQ). Gives up after `limit`.
    pub async fn drain_within(&mut self, limit: Duration) -> anyhow::Result<usize> {
        let started = Instant::now();
        let mut total = 0;
        let mut quiet = 0;
        while quiet < 2 {
            anyhow::ensure!(started.elapsed() < limit, "not drained within {limit:?}");
            let mut active = false;
            for m in &mut self.mappings {
                let r = m.poll_once().await?;
                total += r.done;
                active |= r.done > 0 || r.pending > 0;
            }
            for q in &mut self.queues {
                let done = q.poll_once().await?;
                total += done;
                let (visible, in_flight) = q.depth().await?;
                active |= done > 0 || visible > 0 || in_flight > 0;
            }
            if active {
                quiet = 0;
                if !self.queues.is_empty() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            } else {
                quiet += 1;
            }
        }
        Ok(total)
    }

    /// Processes everything on the stream and the queues, including what
    /// the processors' own writes put there, until nothing is left.
    pub async fn drain(&mut self) -> anyhow::Result<usize> {
        self.drain_within(Duration::from_secs(300)).await
    }

    /// Item writes the processors have issued so far.
    pub fn processor_writes(&self) -> u64 {
        use std::sync::atomic::Ordering;
        self.processors.store.stats().writes.load(Ordering::Relaxed)
    }

    /// Records sent to the on-failure destinations so far.
    pub fn failed_batches(&self) -> Vec<FailedBatch> {
        self.mappings
            .iter()
            .flat_map(|m| m.on_failure.take())
            .collect()
    }

    /// One polling round of the stream and the queues; true if there was work.
    async fn poll_round(&mut self) -> bool {
        let mut busy = crate::local::esm::poll_streams(&mut self.mappings).await;
        for q in &mut self.queues {
            match q.poll_once().await {
                Ok(n) => busy |= n > 0,
                Err(e) => tracing::warn!(queue = %q.name, error = %e, "queue poll failed"),
            }
        }
        busy
    }

    /// Polls until `stop` resolves (Ctrl-C in `jobstream dev` / `run`).
    pub async fn run_until(&mut self, stop: impl Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(stop);
        let mut last_status = Instant::now();
        let mut said = String::new();
        loop {
            if let Some(every) = self.status_every {
                if last_status.elapsed() >= every {
                    last_status = Instant::now();
                    let line = self.status();
                    if line != said {
                        println!("{line}");
                        said = line;
                    }
                }
            }
            let busy = self.poll_round().await;
            if crate::local::esm::pause_or_stop(busy, stop.as_mut()).await {
                crate::local::esm::release_all(&mut self.mappings).await;
                return Ok(());
            }
        }
    }

    /// One status line: invocations per processor, and the records sent to
    /// the on-failure destinations so far.
    pub fn status(&self) -> String {
        let invocations: Vec<String> = self
            .mappings
            .iter()
            .map(|m| format!("{} {}", m.name(), m.invocations))
            .chain(
                self.queues
                    .iter()
                    .map(|q| format!("{} {}", q.name, q.invocations)),
            )
            .collect();
        let failed: usize = self.mappings.iter().map(|m| m.on_failure.len()).sum();
        format!(
            "status: invocations {}; on-failure: {failed} batch(es)",
            invocations.join(", ")
        )
    }

    /// Messages currently in a consumer's DLQ.
    pub async fn dlq_depth(&self, consumer: &str) -> anyhow::Result<u64> {
        let q = self
            .queues
            .iter()
            .find(|q| q.name == consumer)
            .context("no such consumer")?;
        let sqs = self.sqs.as_ref().context("no SQS")?;
        let (visible, in_flight) = crate::local::sqs_esm::depth(sqs, &q.queue.dlq_url).await?;
        Ok(visible + in_flight)
    }

    /// The URL of a consumer's queue.
    pub fn queue_url(&self, consumer: &str) -> Option<String> {
        self.queues
            .iter()
            .find(|q| q.name == consumer)
            .map(|q| q.queue.url.clone())
    }

    /// `verify` of the model's table (no repair).
    pub async fn verify(&self) -> anyhow::Result<crate::tools::verify::Report> {
        crate::tools::verify::verify(&self.model, &self.processors, &self.config).await
    }
}

fn boxed(e: anyhow::Error) -> BoxError {
    e.into()
}

impl Harness for Runtime {
    fn dynamodb(&self) -> &aws_sdk_dynamodb::Client {
        &self.dynamodb
    }
    fn table(&self) -> &str {
        &self.config.table
    }
    fn ledger_table(&self) -> &str {
        &self.config.ledger_table
    }
    fn drain(&mut self) -> shared::engine::setjob::BoxFut<'_, Result<usize, BoxError>> {
        Box::pin(async move { Runtime::drain(self).await.map_err(boxed) })
    }
    fn processor_writes(&self) -> u64 {
        Runtime::processor_writes(self)
    }
    fn verify(&mut self) -> shared::engine::setjob::BoxFut<'_, Result<Vec<String>, BoxError>> {
        Box::pin(async move {
            let report = Runtime::verify(self).await.map_err(boxed)?;
            Ok(report.problems)
        })
    }
    fn dead_letters(
        &mut self,
    ) -> shared::engine::setjob::BoxFut<'_, Result<Vec<String>, BoxError>> {
        Box::pin(async move {
            let mut out: Vec<String> = self
                .failed_batches()
                .iter()
                .map(|f| format!("records sent to the on-failure destination: {f:?}"))
                .collect();
            let consumers: Vec<String> = self.queues.iter().map(|q| q.name.clone()).collect();
            for c in consumers {
                let d = self.dlq_depth(&c).await.map_err(boxed)?;
                if d > 0 {
                    out.push(format!("{d} message(s) in the {c} DLQ"));
                }
            }
            Ok(out)
        })
    }
}
