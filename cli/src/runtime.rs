//! The local runtime: the tracker's tables and its two stream consumers
//! (history, derive) wired to an engine through local event source mappings.

use std::sync::Arc;

use shared::lambda::{
    derive_processor, history_processor, Config, HistoryProcessor, TrackerDeriveProcessor,
};
use shared::models::{table, tracker};
use shared::store::{Backoff, Store};

use crate::engine::{ensure_table, sdk_config};
use crate::esm::{drain, handler, stream_arn, MappingConfig, RecordReader, StreamMapping};

/// Where the runtime connects.
#[derive(Clone)]
pub struct RuntimeOptions {
    /// Endpoint of the engine (tables, stream).
    pub endpoint: Option<String>,
    /// Endpoint the processors write through (defaults to `endpoint`; a
    /// fault proxy in tests).
    pub processor_endpoint: Option<String>,
    pub reader: RecordReader,
    pub config: Config,
    pub mapping: MappingConfig,
    /// SDK attempts per request for the processors (standard retry mode).
    pub max_attempts: u32,
    /// Our own backoff for what the SDK does not retry.
    pub backoff: Backoff,
}

impl RuntimeOptions {
    pub fn new(endpoint: Option<String>, reader: RecordReader) -> Self {
        Self {
            endpoint,
            processor_endpoint: None,
            reader,
            config: default_config(),
            mapping: MappingConfig::new("stream"),
            max_attempts: 5,
            backoff: Backoff::default(),
        }
    }
}

/// Default table names of the tracker.
pub fn default_config() -> Config {
    Config {
        table: tracker::table().name.to_string(),
        ledger_table: table::ledger().name.to_string(),
        ..Config::default()
    }
}

/// The tracker's processors and their mappings.
pub struct Runtime {
    pub config: Config,
    /// Client for writers and readers (not the processors').
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub history: Arc<HistoryProcessor>,
    pub derive: Arc<TrackerDeriveProcessor>,
    pub mappings: Vec<StreamMapping>,
}

impl Runtime {
    /// Creates the tables if missing and builds the two mappings.
    pub async fn start(opts: RuntimeOptions) -> anyhow::Result<Self> {
        let sdk = sdk_config(opts.endpoint.as_deref(), opts.max_attempts).await;
        let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
        ensure_table(&dynamodb, &tracker::table(), &opts.config.table).await?;
        ensure_table(&dynamodb, &table::ledger(), &opts.config.ledger_table).await?;
        let proc_sdk = match &opts.processor_endpoint {
            Some(e) => sdk_config(Some(e), opts.max_attempts).await,
            None => sdk.clone(),
        };
        let store = || Store::with_backoff(aws_sdk_dynamodb::Client::new(&proc_sdk), opts.backoff);
        let history = Arc::new(history_processor(&opts.config, store()));
        let derive = Arc::new(derive_processor(&opts.config, store()));
        let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
        let arn = stream_arn(&dynamodb, &opts.config.table).await?;
        let mapping = |name: &str, h| {
            let mut cfg = opts.mapping.clone();
            cfg.name = name.to_string();
            StreamMapping::new(cfg, streams.clone(), opts.reader.clone(), arn.clone(), h)
        };
        let mappings = vec![
            mapping("history", handler(history.clone())),
            mapping("derive", handler(derive.clone())),
        ];
        Ok(Self {
            config: opts.config,
            dynamodb,
            history,
            derive,
            mappings,
        })
    }

    /// Processes everything on the stream, including what the processors'
    /// own writes put there, until nothing is left.
    pub async fn drain(&mut self) -> anyhow::Result<usize> {
        drain(&mut self.mappings).await
    }

    /// Item writes the processors have issued so far.
    pub fn processor_writes(&self) -> u64 {
        use std::sync::atomic::Ordering;
        self.history.store().stats().writes.load(Ordering::Relaxed)
            + self.derive.store().stats().writes.load(Ordering::Relaxed)
    }

    /// Records sent to the on-failure destinations so far.
    pub fn failed_batches(&self) -> Vec<crate::esm::FailedBatch> {
        self.mappings
            .iter()
            .flat_map(|m| m.on_failure.take())
            .collect()
    }

    /// One polling round of every mapping; true if there was work.
    async fn poll_round(&mut self) -> bool {
        crate::esm::poll_streams(&mut self.mappings).await
    }

    /// Polls until `stop` resolves (Ctrl-C in `jobstream dev`).
    pub async fn run_until(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        tokio::pin!(stop);
        loop {
            let busy = self.poll_round().await;
            if crate::esm::pause_or_stop(busy, stop.as_mut()).await {
                return Ok(());
            }
        }
    }
}
