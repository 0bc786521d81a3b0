//! The local runtime of any registered model: its tables, its queues (on an
//! SQS endpoint such as the local SQS server), its processors, and the local event source
//! mappings that feed them, as Lambda would.
//!
//! What runs locally is what deploys (SPEC §6.1): every mapping, function
//! and queue setting comes from the model's one definition of each
//! processor (its `stream_defs` and `queue_defs`, the same the
//! CDK stack reads through `jobstream tables`); durations are only scaled
//! by [`RuntimeOptions::time_scale`]. Each mapping's event filters are
//! applied to every record before its handler, each processor's calls are
//! checked against its grant ([`crate::local::iam`]), and the stream
//! mappings run concurrently, as Lambda runs them.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use shared::lambda::{Config, Processors, QueueHandler, StreamHandler};
use shared::models::table::StreamSettings;
use shared::models::{self, BoxError, EventFilter, Harness, Model, StreamProcessorDef};
use shared::retry::Retries;
use shared::store::{Backoff, Store};

use crate::local::deployed::{require_queue, require_tables};
use crate::local::engine::{
    ensure_table_in, processor_credentials, require_region, runtime_sdk_config, sdk_config,
};
use crate::local::esm::{
    stream_arn, FailedBatch, Handler, MappingConfig, MappingStats, RecordReader, StreamMapping,
};
use crate::local::iam::{EnforcingClient, Principal};
use crate::local::remedy::Via;
use crate::local::sqs_esm::{create_queue, Polling, QueueMapping};

mod consume;
mod drain;

/// Whether the runtime may create what it runs on.
#[derive(Debug, Clone, Default)]
pub enum Provision {
    /// The embedded engine's and the local SQS's way (`dev`, `demo`,
    /// tests): tables and queues that are missing are created.
    #[default]
    Create,
    /// `jobstream run`'s: nothing is created. The tables must exist with
    /// their keys, stream and TTL, and each queue is at the given URL
    /// (logical name -> URL) with the definition's visibility and redrive
    /// policy; anything missing or different is a startup error naming it.
    Existing { queues: BTreeMap<String, String> },
}

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
    /// Every duration of the definition (function timeouts, batching
    /// window, maximum record age, SQS visibility) is multiplied by this:
    /// 1.0 for `dev`, `demo` and `run`; tests shrink it, never a count.
    pub time_scale: f64,
    /// The scale of every consumer's function timeout (stream mappings and
    /// queues); `None`: [`Self::time_scale`], like every other duration
    /// (`run`, `dev` and `demo`: 1.0, the deployed timeout). Integration
    /// tests scale time by 1/60 but keep this at 1.0 (the deployed 60 s and
    /// 30 s): a job of a thousand writes, or a stream batch of 400 KB
    /// snapshots, takes seconds on the embedded engine in a debug build on
    /// a loaded machine, which a 1 s timeout would cut (the timeout bounds
    /// work, which scaling does not make faster); the tests of the timeout
    /// itself scale it.
    pub function_timeout_scale: Option<f64>,
    /// Check each processor's calls against its grant (default on).
    pub enforce_grants: bool,
    /// (processor, action) pairs taken out of the grants, on every resource
    /// (a test proving that a missing grant surfaces as AccessDenied).
    pub revoke: Vec<(String, String)>,
    /// `jobstream run`'s own calls (the stream, polling the queues, the
    /// startup checks) checked against the stack's `RunnerPolicy`: the
    /// principal ([`Principal::runner`]), its queues filled in here.
    pub runner: Option<Principal>,
    /// What a stream mapping has beyond the definition's settings
    /// (checkpoints, starting position, on-failure destinations, retry
    /// pacing); the name and every SPEC §6.1 setting are set per processor
    /// from its definition.
    pub mapping: MappingConfig,
    /// At most this many SDK attempts per request for the processors
    /// (standard retry mode, see `shared::retry`): the deployed
    /// [`shared::retry::MAX_ATTEMPTS`] by default; tests of retries running
    /// out lower it. Each processor's call budget is its function's, as
    /// deployed (two thirds of its timeout, scaled as the timeout is).
    pub max_attempts: u32,
    /// Our own backoff for what the SDK does not retry; its time budget is
    /// set per processor, the same as its SDK clients' call budget.
    pub backoff: Backoff,
    /// Concurrent pollers (and invocations) per queue; `None` = the queue's
    /// `max_concurrency` from its definition (what the stack deploys as the
    /// mapping's maximum concurrency).
    pub queue_concurrency: Option<u32>,
    /// For comparing two models on one scenario, never for proving a model
    /// right: [`Runtime::drain`] runs the stream mappings until they are
    /// quiet with the queue pollers stopped, then the queues until they are
    /// empty, and again until both are quiet, so two runs interleave alike
    /// and their write counts can be compared exactly. (Lambda runs them
    /// concurrently, as `drain` does by default.)
    pub drain_in_phases: bool,
    /// Create what is missing, or require it as deployed.
    pub provision: Provision,
    /// The `--db` file the embedded engine keeps the tables in (`dev
    /// --db`): with [`Provision::Create`], a declared index its table
    /// lacks is added there ([`crate::local::provision::ensure_table_in`]).
    pub db_file: Option<std::path::PathBuf>,
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
            time_scale: 1.0,
            function_timeout_scale: None,
            enforce_grants: true,
            revoke: Vec::new(),
            runner: None,
            mapping: MappingConfig::new("stream"),
            max_attempts: shared::retry::MAX_ATTEMPTS,
            backoff: Backoff::default(),
            queue_concurrency: None,
            drain_in_phases: false,
            provision: Provision::Create,
            db_file: None,
        }
    }
}

/// The local mapping configuration of stream processor `def`: `base` (what
/// is not a deployed setting) with the definition's batch size, batching
/// window, retries, bisect, maximum record age and function timeout, and
/// `time_scale`.
pub fn mapping_config(
    def: &StreamProcessorDef,
    base: &MappingConfig,
    time_scale: f64,
) -> MappingConfig {
    let s = &def.settings;
    let secs = |n: u32| Duration::from_secs(u64::from(n));
    let mut cfg = base.clone();
    cfg.name = def.name.to_string();
    cfg.batch_size = s.batch_size as usize;
    cfg.batching_window = secs(s.batching_window_secs);
    cfg.max_retries = s.max_retries;
    cfg.bisect_on_error = s.bisect_on_error;
    cfg.max_record_age = Some(secs(s.max_record_age_secs));
    cfg.function_timeout = secs(s.timeout_secs);
    cfg.time_scale = time_scale;
    cfg
}

/// The local visibility timeout of a queue: the definition's, scaled
/// (SQS counts whole seconds; at least 1).
pub fn queue_visibility(def: &models::table::QueueDef, time_scale: f64) -> Duration {
    Duration::from_secs_f64(f64::from(def.visibility_timeout_secs) * time_scale)
        .max(Duration::from_secs(1))
}

/// The function timeout of a queue's consumer: the definition's, scaled.
pub fn queue_function_timeout(def: &models::table::QueueDef, time_scale: f64) -> Duration {
    Duration::from_secs_f64(f64::from(def.consumer_timeout_secs) * time_scale.max(0.0))
}

/// `inner` behind a mapping's event filters, as Lambda applies them: records
/// no filter matches never reach the handler (counted in `dropped`); a batch
/// left empty is not invoked at all.
pub fn filtered(filters: Vec<EventFilter>, dropped: Arc<AtomicU64>, inner: Handler) -> Handler {
    if filters.is_empty() {
        return inner;
    }
    Arc::new(move |mut event: Event| {
        let before = event.records.len();
        event.records.retain(|r| match serde_json::to_value(r) {
            Ok(v) => models::filter::passes(&filters, &v),
            // Never dropped silently: the handler sees what cannot be matched.
            Err(_) => true,
        });
        dropped.fetch_add((before - event.records.len()) as u64, Ordering::Relaxed);
        if event.records.is_empty() {
            return Box::pin(async { Ok(DynamoDbEventResponse::default()) });
        }
        inner(event)
    })
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
    /// Records each stream mapping's filters kept from its handler.
    pub filtered_out: BTreeMap<String, Arc<AtomicU64>>,
    /// The event filters each stream mapping applies (its definition's).
    pub filters: BTreeMap<String, Vec<EventFilter>>,
    /// The time scale the mappings and queues were built with.
    pub time_scale: f64,
    /// This runtime's id in [`crate::local::iam::recorder`]'s calls.
    pub session: String,
    /// With the status line, print each mapping's EMF metric lines
    /// ([`MappingStats::emf_lines`]).
    pub emit_metrics: bool,
    /// On stop, how long batches in flight may take to finish before they
    /// are abandoned without a checkpoint.
    pub shutdown_grace: Duration,
    /// [`RuntimeOptions::drain_in_phases`].
    pub drain_in_phases: bool,
    /// Serve `/metrics`, `/healthz` and `/readyz` here while
    /// [`Self::run_until`] runs (`run --metrics-listen`).
    pub metrics_listener: Option<tokio::net::TcpListener>,
}

impl Runtime {
    /// Creates the tables and queues if missing ([`Provision::Create`]) or
    /// checks them as deployed ([`Provision::Existing`]), and builds the
    /// mappings.
    pub async fn start(opts: RuntimeOptions) -> anyhow::Result<Self> {
        let source = models::Source::new(&opts.model, opts.model_file.as_deref());
        let model = models::load(&source).map_err(anyhow::Error::msg)?;
        // `run`'s own principal names the session (its leases' client,
        // built before, records under it too).
        let mut runner = opts.runner.clone();
        let session = runner
            .as_ref()
            .map(|r| r.session.clone())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let plain_sdk = runtime_sdk_config(opts.endpoint.as_deref(), opts.max_attempts).await;
        require_region(&plain_sdk, "DynamoDB")?;
        let sdk = match &runner {
            Some(r) => r.checked(&plain_sdk),
            None => plain_sdk.clone(),
        };
        // Writers' and readers' client (tests, tools); the runtime's own
        // startup checks go through `sdk` (checked under `run`).
        let dynamodb = aws_sdk_dynamodb::Client::new(&plain_sdk);
        let own = aws_sdk_dynamodb::Client::new(&sdk);
        let table = opts
            .table
            .clone()
            .unwrap_or_else(|| model.table.name.to_string());
        let via = Via::of(opts.endpoint.as_deref(), &plain_sdk);
        match &opts.provision {
            Provision::Create => {
                let file = opts.db_file.as_deref();
                let made = ensure_table_in(&dynamodb, &model.table, &table, via, file).await?;
                if let Some(file) = file {
                    for g in &made.added {
                        let tool = crate::local::provision::tool_flags(
                            opts.model_file.as_deref().ok_or(opts.model.as_str()),
                            Some(table.as_str()).filter(|t| *t != model.table.name),
                            Some(opts.ledger_table.as_str()),
                            opts.endpoint.as_deref(),
                            opts.sqs_endpoint
                                .as_deref()
                                .filter(|_| !model.consumers.is_empty()),
                        );
                        let said = crate::local::provision::index_added(&table, file, g, &tool);
                        crate::errln!("{said}");
                    }
                }
                let ledger = models::table::ledger();
                ensure_table_in(&dynamodb, &ledger, &opts.ledger_table, via, file).await?;
            }
            Provision::Existing { .. } => {
                require_tables(&own, &model, &table, &opts.ledger_table, via).await?;
            }
        }
        let mut config = Config {
            table,
            ledger_table: opts.ledger_table.clone(),
            model: model.name.to_string(),
            queues: Default::default(),
        };
        // Deployed queues are reached through the configured endpoint or
        // the SDK's own (the region's); created ones need an endpoint.
        let sqs_sdk = match (&opts.sqs_endpoint, &opts.provision) {
            _ if model.consumers.is_empty() => None,
            (Some(e), _) => Some(sdk_config(Some(e), opts.max_attempts).await),
            (None, Provision::Existing { .. }) => Some(sdk_config(None, opts.max_attempts).await),
            (None, Provision::Create) => {
                anyhow::bail!("model {} has queues: an SQS endpoint is needed", model.name)
            }
        };
        if let Some(c) = &sqs_sdk {
            require_region(c, "SQS")?;
        }
        if let (Some(r), Provision::Existing { queues }) = (&mut runner, &opts.provision) {
            r.queues = queues
                .iter()
                .map(|(logical, url)| (url.clone(), logical.clone()))
                .collect();
        }
        let sqs = sqs_sdk.as_ref().map(|c| match &runner {
            Some(r) => aws_sdk_sqs::Client::new(&r.checked(c)),
            None => aws_sdk_sqs::Client::new(c),
        });
        let mut created = Vec::new();
        if let Some(sqs) = &sqs {
            for def in model.queues() {
                let visibility = queue_visibility(&def, opts.time_scale);
                let q = match &opts.provision {
                    Provision::Create => {
                        create_queue(sqs, &def, &opts.queue_prefix, visibility).await?
                    }
                    Provision::Existing { queues } => {
                        let url = queues.get(def.logical).with_context(|| {
                            format!(
                                "queue {}: no URL given ({})",
                                def.logical,
                                shared::lambda::queue_env(def.logical)
                            )
                        })?;
                        require_queue(sqs, &def, url, visibility).await?
                    }
                };
                config.queues.insert(def.logical.to_string(), q.url.clone());
                created.push((def, q));
            }
        }
        let proc_sdk = match &opts.processor_endpoint {
            Some(e) => runtime_sdk_config(Some(e), opts.max_attempts).await,
            None => plain_sdk.clone(),
        };
        // Each processor's SDK calls ride out transient faults as its
        // function does when deployed (`shared::retry`): the budget is its
        // function timeout's, scaled as the mapping scales the timeout.
        let timeout_scale = opts
            .function_timeout_scale
            .unwrap_or(opts.time_scale)
            .max(0.0);
        let retries_of = |name: &str| -> Retries {
            let timeout = match model.queues().iter().find(|q| q.consumer == name) {
                Some(q) => q.consumer_timeout_secs,
                None => model
                    .stream_defs()
                    .iter()
                    .find(|d| d.name == name)
                    .map_or(StreamSettings::DEPLOYED.timeout_secs, |d| {
                        d.settings.timeout_secs
                    }),
            };
            Retries::within(Duration::from_secs(u64::from(timeout)).mul_f64(timeout_scale))
                .with_max_attempts(opts.max_attempts)
        };
        // Our own backoff (what the SDK does not retry) within the same
        // budget as the SDK's retries of the processor it serves.
        let store = Store::with_backoff(
            Retries::stream()
                .with_max_attempts(opts.max_attempts)
                .dynamodb_client(&proc_sdk),
            opts.backoff,
        )
        .with_budget(
            Retries::within(
                Duration::from_secs(u64::from(StreamSettings::DEPLOYED.timeout_secs))
                    .mul_f64(timeout_scale),
            )
            .call_budget,
        );
        let queue_names: BTreeMap<String, String> = config
            .queues
            .iter()
            .map(|(logical, url)| (url.clone(), logical.clone()))
            .collect();
        // Each processor signs as a caller of its own at the embedded
        // engine's fair front (as each function has its own role in AWS).
        let proc_endpoint = opts
            .processor_endpoint
            .as_deref()
            .or(opts.endpoint.as_deref());
        let proc_config = |name: &str| {
            let b = retries_of(name).dynamodb(aws_sdk_dynamodb::config::Builder::from(&proc_sdk));
            match processor_credentials(proc_endpoint, name) {
                Some(c) => b.credentials_provider(c),
                None => b,
            }
        };
        let clients = |name: &str| -> (Store, Option<aws_sdk_sqs::Client>) {
            let grant = model.grant(name).filter(|_| opts.enforce_grants);
            let Some(mut grant) = grant else {
                let sqs = sqs_sdk.as_ref().map(|c| {
                    let b = aws_sdk_sqs::config::Builder::from(&match &runner {
                        Some(r) => r.checked(c),
                        None => c.clone(),
                    });
                    aws_sdk_sqs::Client::from_conf(retries_of(name).sqs(b).build())
                });
                return (
                    store
                        .with_client(aws_sdk_dynamodb::Client::from_conf(
                            proc_config(name).build(),
                        ))
                        .with_budget(retries_of(name).call_budget),
                    sqs,
                );
            };
            for (processor, action) in &opts.revoke {
                if processor == name {
                    for list in [
                        &mut grant.table_actions,
                        &mut grant.index_actions,
                        &mut grant.ledger_actions,
                    ] {
                        list.retain(|a| a != action);
                    }
                }
            }
            let http = EnforcingClient::new(Principal {
                session: session.clone(),
                model: model.name.to_string(),
                processor: name.to_string(),
                grant,
                mappings: None,
                table: config.table.clone(),
                ledger: config.ledger_table.clone(),
                queues: queue_names.clone(),
                queue_names: Vec::new(),
                on_failure: None,
                record: opts.revoke.is_empty(),
            });
            let ddb = proc_config(name).http_client(http.clone()).build();
            let sqs = sqs_sdk.as_ref().map(|c| {
                aws_sdk_sqs::Client::from_conf(
                    retries_of(name)
                        .sqs(aws_sdk_sqs::config::Builder::from(c))
                        .http_client(http)
                        .build(),
                )
            });
            (
                store
                    .with_client(aws_sdk_dynamodb::Client::from_conf(ddb))
                    .with_budget(retries_of(name).call_budget),
                sqs,
            )
        };
        let processors = Processors::with_clients(&model, &config, store.clone(), &clients);
        let streams = match &runner {
            Some(r) => crate::local::stream_identity::streams_client_through(
                &sdk,
                aws_smithy_runtime_api::client::http::SharedHttpClient::new(
                    crate::local::iam::EnforcingClient::new(r.clone()),
                ),
            ),
            None => crate::local::stream_identity::streams_client(&sdk),
        };
        let arn = stream_arn(&own, &config.table).await?;
        let mut filtered_out = BTreeMap::new();
        let mut filters = BTreeMap::new();
        let mut mappings = Vec::new();
        for def in model.stream_defs() {
            let p = processors
                .stream(def.name)
                .with_context(|| format!("no stream processor {}", def.name))?;
            let dropped = Arc::new(AtomicU64::new(0));
            filtered_out.insert(def.name.to_string(), dropped.clone());
            filters.insert(def.name.to_string(), def.filters.clone());
            mappings.push(StreamMapping::new(
                MappingConfig {
                    timeout_scale: opts.function_timeout_scale,
                    ..mapping_config(&def, &opts.mapping, opts.time_scale)
                },
                streams.clone(),
                opts.reader.clone(),
                arn.clone(),
                filtered(def.filters.clone(), dropped, crate::local::esm::handler(p)),
            ));
        }
        // LATEST is where the stream stands now, as a mapping's creation
        // fixes it in Lambda.
        for m in &mut mappings {
            m.pin_latest().await;
        }
        let mut queues = Vec::new();
        for (def, q) in created {
            let consumer = processors
                .consumer(def.logical)
                .with_context(|| format!("no consumer for queue {}", def.logical))?;
            let concurrency = opts.queue_concurrency.unwrap_or(def.max_concurrency);
            queues.push(
                QueueMapping::new(
                    def.consumer,
                    sqs.clone().expect("queues exist only with SQS"),
                    q,
                    def.batch_size,
                    crate::local::sqs_esm::sqs_handler(consumer.handler.clone()),
                )
                .with_concurrency(concurrency)
                .with_function_timeout(queue_function_timeout(
                    &def,
                    opts.function_timeout_scale.unwrap_or(opts.time_scale),
                )),
            );
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
            filtered_out,
            filters,
            time_scale: opts.time_scale,
            session,
            emit_metrics: false,
            shutdown_grace: Duration::from_secs(10),
            drain_in_phases: opts.drain_in_phases,
            metrics_listener: None,
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

    /// Batches given up that the on-failure destinations failed to take.
    pub fn undelivered(&self) -> u64 {
        self.mappings
            .iter()
            .map(|m| m.on_failure.undelivered())
            .sum()
    }

    /// Losses reported so far (trimmed records, vanished shards).
    pub fn losses(&self) -> u64 {
        self.mappings.iter().map(|m| m.on_failure.losses()).sum()
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
    fn verify(
        &mut self,
    ) -> shared::engine::setjob::BoxFut<'_, Result<shared::models::Verified, BoxError>> {
        Box::pin(async move {
            let report = Runtime::verify(self).await.map_err(boxed)?;
            Ok(shared::models::Verified {
                problems: report.problems,
                bad_input: report.bad_input,
            })
        })
    }
    fn bad_input(&self) -> u64 {
        use shared::metrics::names::BAD_INPUT;
        let streams = self.processors.streams().into_iter();
        let consumers = self.processors.consumers.iter();
        streams.map(|p| p.metrics().get(BAD_INPUT)).sum::<u64>()
            + consumers
                .map(|c| c.handler.metrics().get(BAD_INPUT))
                .sum::<u64>()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_deployed_setting_comes_from_the_definition_not_the_base() {
        let m = models::find(models::DEFAULT_MODEL).unwrap();
        let def = &m.stream_defs()[0];
        let mut base = MappingConfig::new("x");
        base.batch_size = 1;
        base.max_retries = 3;
        base.bisect_on_error = false;
        base.function_timeout = Duration::from_millis(1);
        base.max_record_age = None;
        base.batching_window = Duration::from_secs(9);
        let cfg = mapping_config(def, &base, 0.5);
        assert_eq!(cfg.name, def.name);
        assert_eq!(cfg.batch_size, 100);
        assert_eq!(cfg.max_retries, 10);
        assert!(cfg.bisect_on_error);
        assert_eq!(cfg.function_timeout, Duration::from_secs(60));
        assert_eq!(cfg.max_record_age, Some(Duration::from_secs(86_400)));
        assert_eq!(cfg.batching_window, Duration::ZERO);
        assert_eq!(cfg.time_scale, 0.5, "durations are scaled, never replaced");
    }

    /// Each processor reaches the embedded engine's fair front as a caller
    /// of its own (its own access key, as each function has its own role
    /// in AWS), so one processor's requests never queue behind another's.
    #[tokio::test]
    async fn each_processor_signs_as_a_caller_of_its_own_at_the_engines_front() {
        use crate::local::engine::{processor_access_key, LocalEngine};
        use crate::local::front::PROCESSORS_ACCESS_KEY;
        let engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
        let opts = RuntimeOptions::new(
            models::DEFAULT_MODEL,
            Some(engine.endpoint()),
            RecordReader::Embedded(engine.database().clone()),
        );
        let mut rt = Runtime::start(opts).await.unwrap();
        let s = |v: &str| aws_sdk_dynamodb::types::AttributeValue::S(v.to_string());
        rt.dynamodb
            .put_item()
            .table_name(&rt.config.table)
            .item("PK", s("APP#k1"))
            .item("SK", s("APP#k1"))
            .item("id", s("k1"))
            .item("companyName", s("Key Co"))
            .item("positionTitle", s("Engineer"))
            .item("status", s("applied"))
            .item(
                "isArchived",
                aws_sdk_dynamodb::types::AttributeValue::Bool(false),
            )
            .item("dateApplied", s("2026-11-01"))
            .item("createdAt", s("2026-11-01T09:00:00.000Z"))
            .item("updatedAt", s("2026-11-01T09:00:00.000Z"))
            .send()
            .await
            .unwrap();
        rt.drain().await.unwrap();
        let admitted = engine.admitted();
        let names: Vec<String> = rt
            .model
            .stream_defs()
            .iter()
            .map(|d| d.name.to_string())
            .collect();
        assert!(names.len() >= 2, "{names:?}");
        for name in &names {
            assert!(
                admitted
                    .get(&processor_access_key(name))
                    .is_some_and(|n| *n > 0),
                "{name} made no call under its own key: {admitted:?}"
            );
        }
        // The runtime's own calls (provisioning, its writers' client) keep
        // the runtime's key.
        assert!(admitted.contains_key(PROCESSORS_ACCESS_KEY), "{admitted:?}");
        engine.stop().await;
    }

    #[test]
    fn a_queue_keeps_its_deployed_visibility_scaled() {
        let q = models::table::QueueDef::standard("l", "n", "d", "c");
        assert_eq!(queue_visibility(&q, 1.0), Duration::from_secs(180));
        assert_eq!(queue_visibility(&q, 1.0 / 60.0).as_secs(), 3);
        assert_eq!(queue_visibility(&q, 0.0), Duration::from_secs(1));
    }
}
