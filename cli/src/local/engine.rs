//! The embedded DynamoDB engine (Dynoxide) served over HTTP on loopback, so
//! processors and any other client reach it through the ordinary AWS SDK.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt as _;
use tokio::sync::oneshot;

use super::front::{FairGate, Front};
pub use super::provision::{ensure_table, ensure_table_at, ensure_table_in, Ensured};
pub use super::sdk_config::*;
use super::stream_trim::{Trimmer, RETENTION};
use tokio::task::JoinHandle;

/// A running embedded engine: Dynoxide's server on a private loopback port,
/// reached through the fair front ([`super::front`]) on the public one.
pub struct LocalEngine {
    db: dynoxide::Database,
    addr: SocketAddr,
    gate: Arc<FairGate>,
    trimmer: Arc<Trimmer>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    sweeper: Option<JoinHandle<()>>,
}

impl LocalEngine {
    /// Starts an engine on `addr` (`127.0.0.1:0` for an ephemeral port), in
    /// memory or persisted to the SQLite file `path`.
    pub async fn start(addr: &str, path: Option<&str>) -> anyhow::Result<Self> {
        let (db, side) = super::stream_index::open_with_side(path)?;
        let trimmer = Arc::new(Trimmer::new(side));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let addr = listener.local_addr()?;
        // Dynoxide's own server, reached only through the front.
        let inner = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the engine's private port")?;
        let inner_addr = inner.local_addr()?;
        let gate = FairGate::new();
        let front = Front::new(
            gate.clone(),
            trimmer.horizons.clone(),
            format!("http://{inner_addr}"),
        )
        .router();
        let (tx, rx) = oneshot::channel::<()>();
        let (inner_tx, inner_rx) = oneshot::channel::<()>();
        let served = db.clone();
        let server = tokio::spawn(async move {
            let engine = tokio::spawn(async move {
                let shutdown = inner_rx.map(drop);
                if let Err(e) = dynoxide::server::serve_with_shutdown(inner, served, shutdown).await
                {
                    tracing::error!(error = %e, "embedded engine stopped");
                }
            });
            if let Err(e) = axum::serve(listener, front)
                .with_graceful_shutdown(rx.map(drop))
                .await
            {
                tracing::error!(error = %e, "embedded engine's front stopped");
            }
            let _ = inner_tx.send(());
            let _ = engine.await;
        });
        Ok(Self {
            db,
            addr,
            gate,
            trimmer,
            shutdown: Some(tx),
            server: Some(server),
            sweeper: None,
        })
    }

    /// Requests the front admitted into the engine so far, per caller
    /// (access key id).
    pub fn admitted(&self) -> std::collections::HashMap<String, u64> {
        self.gate.admitted()
    }

    /// How long the requests admitted so far kept the engine busy, in all
    /// (each from its admission to its answer's end).
    pub fn busy(&self) -> Duration {
        self.gate.held()
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn database(&self) -> &dynoxide::Database {
        &self.db
    }

    /// Deletes expired items now (what DynamoDB's TTL process does in the
    /// background); the REMOVE records carry the TTL service identity.
    pub async fn sweep_ttl(&self) -> anyhow::Result<usize> {
        let db = self.db.clone();
        Ok(tokio::task::spawn_blocking(move || db.sweep_ttl()).await??)
    }

    /// Trims every table's stream of the records created before `cutoff`
    /// (Unix seconds, the engine's clock), a chunk at a time under the
    /// engine's gate; returns how many went. Iterators into what went are
    /// answered `TrimmedDataAccessException` ([`super::stream_trim`]).
    pub async fn trim_stream(&self, cutoff: i64) -> anyhow::Result<usize> {
        trim_stream(&self.gate, &self.trimmer, cutoff).await
    }

    /// Sweeps TTL in the background, as DynamoDB's TTL process deletes
    /// expired items (within days of their expiry, AWS says; any cadence is
    /// faithful): a sweep every `every`, but never more than
    /// [`SWEEP_SHARE`] of the engine's time. Dynoxide's sweep reads every
    /// item of every table with TTL on (the model's table and the ledger),
    /// under the engine's lock a page at a time, so one sweep costs as
    /// much as the tables are large: at a fixed cadence it took a growing
    /// share of the engine from the writers and the processors ([`sweep_pause`]).
    /// After each sweep, the streams are trimmed of what is older than
    /// DynamoDB's 24 hours ([`RETENTION`]).
    pub fn start_ttl_sweeper(&mut self, every: Duration) {
        let db = self.db.clone();
        let gate = self.gate.clone();
        let trimmer = self.trimmer.clone();
        self.sweeper = Some(tokio::spawn(async move {
            loop {
                let started = std::time::Instant::now();
                let db = db.clone();
                match tokio::task::spawn_blocking(move || db.sweep_ttl()).await {
                    Ok(Ok(n)) if n > 0 => tracing::info!(expired = n, "TTL sweep"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "TTL sweep failed"),
                    _ => {}
                }
                let cutoff = chrono::Utc::now().timestamp() - RETENTION.as_secs() as i64;
                match trim_stream(&gate, &trimmer, cutoff).await {
                    Ok(n) if n > 0 => {
                        tracing::info!(records = n, "stream trimmed (older than 24 h)")
                    }
                    Err(e) => tracing::warn!(error = %format!("{e:#}"), "stream trim failed"),
                    _ => {}
                }
                let took = started.elapsed();
                tokio::time::sleep(sweep_pause(every, took)).await;
            }
        }));
    }

    /// Stops the server and the sweeper.
    pub async fn stop(mut self) {
        self.signal_stop();
        if let Some(h) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), h).await;
        }
    }

    /// Aborts the sweeper and tells the server to stop.
    fn signal_stop(&mut self) {
        if let Some(s) = self.sweeper.take() {
            s.abort();
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for LocalEngine {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// The caller the stream's trim queues as at the engine's gate.
const HOUSEKEEPING: &str = "jobstream-housekeeping";

async fn trim_stream(
    gate: &Arc<FairGate>,
    trimmer: &Arc<Trimmer>,
    cutoff: i64,
) -> anyhow::Result<usize> {
    let tables = {
        let _turn = gate.acquire(HOUSEKEEPING).await;
        let t = trimmer.clone();
        tokio::task::spawn_blocking(move || t.tables()).await??
    };
    let mut total = 0;
    for table in tables {
        loop {
            let _turn = gate.acquire(HOUSEKEEPING).await;
            let t = trimmer.clone();
            let name = table.clone();
            let (n, more) =
                tokio::task::spawn_blocking(move || t.trim_step(&name, cutoff)).await??;
            total += n;
            if !more {
                break;
            }
        }
    }
    Ok(total)
}

/// The most of the engine's time the periodic TTL sweep takes.
pub const SWEEP_SHARE: f64 = 0.05;

/// The pause after a sweep that took `took`, so that sweeps start every
/// `every` at most and take at most [`SWEEP_SHARE`] of the time.
pub fn sweep_pause(every: Duration, took: Duration) -> Duration {
    let cycle = every.max(took.div_f64(SWEEP_SHARE));
    cycle.saturating_sub(took)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::front::PROCESSORS_ACCESS_KEY;
    use crate::local::sdk_config::local_credentials;
    use aws_sdk_dynamodb::types::AttributeValue;
    use aws_smithy_runtime_api::client::http::{
        HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpConnector,
    };
    use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
    use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
    use aws_smithy_types::body::SdkBody;
    use std::sync::{Arc, Mutex};

    /// DynamoDB as it answers a table being created: CreateTable returns
    /// CREATING, and UpdateTimeToLive is refused (ResourceInUseException)
    /// until a DescribeTable has seen the table ACTIVE. Records the calls.
    #[derive(Debug, Clone, Default)]
    struct Creating(Arc<Mutex<(bool, bool, Vec<String>)>>);

    impl HttpClient for Creating {
        fn http_connector(
            &self,
            _: &HttpConnectorSettings,
            _: &RuntimeComponents,
        ) -> SharedHttpConnector {
            SharedHttpConnector::new(self.clone())
        }
    }

    impl HttpConnector for Creating {
        fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
            let op = request
                .headers()
                .get("x-amz-target")
                .unwrap_or_default()
                .trim_start_matches("DynamoDB_20120810.")
                .to_string();
            let mut state = self.0.lock().unwrap();
            let (created, active) = (state.0, state.1);
            let error = |kind: &str| {
                (
                    400,
                    format!(
                        r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{kind}","message":"{kind}"}}"#
                    ),
                )
            };
            let (status, body) = match op.as_str() {
                "DescribeTable" if !created => error("ResourceNotFoundException"),
                "DescribeTable" => {
                    state.1 = true;
                    (
                        200,
                        r#"{"Table":{"TableName":"t","TableStatus":"ACTIVE"}}"#.to_string(),
                    )
                }
                "CreateTable" => {
                    state.0 = true;
                    (
                        200,
                        r#"{"TableDescription":{"TableName":"t","TableStatus":"CREATING"}}"#
                            .to_string(),
                    )
                }
                "UpdateTimeToLive" if !active => error("ResourceInUseException"),
                "UpdateTimeToLive" => (
                    200,
                    r#"{"TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true}}"#
                        .to_string(),
                ),
                _ => error("UnknownOperationException"),
            };
            state.2.push(op);
            let mut r = HttpResponse::new(
                aws_smithy_runtime_api::http::StatusCode::try_from(status).expect("status"),
                SdkBody::from(body),
            );
            r.headers_mut()
                .insert("content-type", "application/x-amz-json-1.0");
            HttpConnectorFuture::ready(Ok(r))
        }
    }

    #[tokio::test]
    async fn ttl_is_enabled_only_once_the_created_table_is_active() {
        let fake = Creating::default();
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("eu-west-1"))
            .credentials_provider(local_credentials("local"))
            .http_client(fake.clone())
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(config);
        let created = ensure_table(&client, &shared::models::table::ledger(), "t")
            .await
            .expect("TTL enabled after the table became ACTIVE");
        assert!(created);
        let calls = fake.0.lock().unwrap().2.clone();
        assert_eq!(
            calls,
            [
                "DescribeTable",
                "CreateTable",
                "DescribeTable",
                "UpdateTimeToLive"
            ]
        );
    }

    #[test]
    fn the_ttl_sweep_keeps_its_cadence_while_cheap_and_its_share_when_not() {
        let second = Duration::from_secs(1);
        // A sweep of a small table: once a second, as before.
        assert_eq!(
            sweep_pause(second, Duration::from_millis(10)),
            Duration::from_millis(990)
        );
        // A sweep of large tables (Dynoxide reads every item): 5% of the
        // engine's time, not 50%.
        assert_eq!(
            sweep_pause(second, Duration::from_millis(500)),
            Duration::from_millis(9_500)
        );
        let took = Duration::from_millis(2_000);
        let share = took.as_secs_f64() / (took + sweep_pause(second, took)).as_secs_f64();
        assert!((share - SWEEP_SHARE).abs() < 1e-9, "{share}");
    }

    #[tokio::test]
    async fn the_background_sweep_deletes_what_expired() {
        let mut engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
        let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
        let def = shared::models::table::ledger();
        ensure_table(&client, &def, "swept").await.unwrap();
        let expired = (chrono::Utc::now().timestamp() - 10).to_string();
        client
            .put_item()
            .table_name("swept")
            .item(def.pk, AttributeValue::S("p".into()))
            .item(def.sk, AttributeValue::S("s".into()))
            .item(def.ttl_attribute.unwrap(), AttributeValue::N(expired))
            .send()
            .await
            .unwrap();
        engine.start_ttl_sweeper(Duration::from_millis(20));
        let mut left = 1;
        for _ in 0..500 {
            left = client
                .scan()
                .table_name("swept")
                .send()
                .await
                .unwrap()
                .count();
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(left, 0, "the expired item was swept");
        engine.stop().await;
    }

    #[tokio::test]
    async fn records_older_than_the_retention_are_trimmed_and_iterators_into_them_refused() {
        use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
        let engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
        let sdk = sdk_config(Some(&engine.endpoint()), 1).await;
        let client = aws_sdk_dynamodb::Client::new(&sdk);
        let streams = aws_sdk_dynamodbstreams::Client::new(&sdk);
        // A table with a stream, created through the engine's front.
        let def = shared::models::find(shared::models::DEFAULT_MODEL)
            .unwrap()
            .table;
        assert!(def.stream);
        assert!(ensure_table(&client, &def, "trimmed").await.unwrap());
        let arn = client
            .describe_table()
            .table_name("trimmed")
            .send()
            .await
            .unwrap()
            .table()
            .and_then(|t| t.latest_stream_arn())
            .unwrap()
            .to_string();
        let put = |pk: &'static str| {
            let s = |v: &str| AttributeValue::S(v.into());
            client
                .put_item()
                .table_name("trimmed")
                .item(def.pk, s(pk))
                .item(def.sk, s(pk))
                .send()
        };
        put("old1").await.unwrap();
        put("old2").await.unwrap();
        // The next record in a later second of the engine's clock.
        let old_second = chrono::Utc::now().timestamp();
        while chrono::Utc::now().timestamp() <= old_second {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        put("new").await.unwrap();
        let shard = streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .unwrap()
            .stream_description()
            .unwrap()
            .shards()[0]
            .shard_id()
            .unwrap()
            .to_string();
        let iterator = |kind: ShardIteratorType, seq: Option<String>| {
            let sent = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(&shard)
                .shard_iterator_type(kind)
                .set_sequence_number(seq)
                .send();
            async move { sent.await.map(|o| o.shard_iterator().unwrap().to_string()) }
        };
        let read = |iterator: String| streams.get_records().shard_iterator(iterator).send();
        let keys = |records: &[Record]| -> Vec<String> {
            records
                .iter()
                .map(|r| {
                    r.dynamodb().unwrap().keys().unwrap()[def.pk]
                        .as_s()
                        .unwrap()
                        .clone()
                })
                .collect()
        };
        let first = iterator(ShardIteratorType::TrimHorizon, None)
            .await
            .unwrap();
        let before = read(first).await.unwrap();
        let records = before.records();
        assert_eq!(keys(records), ["old1", "old2", "new"]);
        let seq = |i: usize| {
            let change = records[i].dynamodb().unwrap();
            Some(change.sequence_number().unwrap().to_string())
        };
        let new_at = records[2]
            .dynamodb()
            .unwrap()
            .approximate_creation_date_time()
            .unwrap()
            .secs();
        // An iterator after the first record, taken before the trim.
        let held = iterator(ShardIteratorType::AfterSequenceNumber, seq(0))
            .await
            .unwrap();

        // Everything created before the new record's second: the old two.
        assert_eq!(engine.trim_stream(new_at).await.unwrap(), 2);

        let horizon = iterator(ShardIteratorType::TrimHorizon, None)
            .await
            .unwrap();
        assert_eq!(keys(read(horizon).await.unwrap().records()), ["new"]);
        // After the first old record: the second is gone, as DynamoDB
        // answers; so at it, and through the iterator held from before.
        let trimmed = [
            iterator(ShardIteratorType::AfterSequenceNumber, seq(0))
                .await
                .unwrap_err()
                .into_service_error()
                .is_trimmed_data_access_exception(),
            iterator(ShardIteratorType::AtSequenceNumber, seq(1))
                .await
                .unwrap_err()
                .into_service_error()
                .is_trimmed_data_access_exception(),
            read(held)
                .await
                .unwrap_err()
                .into_service_error()
                .is_trimmed_data_access_exception(),
        ];
        assert_eq!(trimmed, [true; 3], "after, at, held");
        // After the last trimmed record: nothing unread is missing.
        let after_last = iterator(ShardIteratorType::AfterSequenceNumber, seq(1))
            .await
            .unwrap();
        assert_eq!(keys(read(after_last).await.unwrap().records()), ["new"]);
        // The stream mapping's reader sees the trim as the mapping expects.
        let api = crate::local::shards::SdkStreams {
            client: streams.clone(),
            reader: crate::local::shards::RecordReader::Sdk,
        };
        let e = crate::local::shards::StreamsApi::shard_iterator(
            &api,
            &arn,
            &shard,
            &crate::local::shards::IteratorPosition::AfterSequenceNumber(seq(0).unwrap()),
        )
        .await
        .unwrap_err();
        assert!(e.is::<crate::local::shards::Trimmed>(), "{e:#}");
        // Nothing younger than the cutoff goes.
        assert_eq!(engine.trim_stream(new_at).await.unwrap(), 0);
        engine.stop().await;
    }

    #[tokio::test]
    async fn the_runtimes_requests_reach_the_engine_as_a_caller_of_their_own() {
        let engine = LocalEngine::start("127.0.0.1:0", None).await.unwrap();
        let app = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 1).await);
        let runtime =
            aws_sdk_dynamodb::Client::new(&runtime_sdk_config(Some(&engine.endpoint()), 1).await);
        app.list_tables().send().await.unwrap();
        app.list_tables().send().await.unwrap();
        runtime.list_tables().send().await.unwrap();
        let admitted = engine.admitted();
        assert_eq!(admitted.get("local"), Some(&2), "{admitted:?}");
        assert_eq!(
            admitted.get(PROCESSORS_ACCESS_KEY),
            Some(&1),
            "{admitted:?}"
        );
        engine.stop().await;
    }
}
