//! `jobstream run --metrics-listen ADDR`: what a self-hosted consumer's
//! operators expect, over HTTP. `/metrics` serves the consumer's figures in
//! the Prometheus (OpenMetrics) text format through `prometheus-client`,
//! read from the runtime's own counters at each scrape; `/healthz` answers
//! while the process serves (liveness); `/readyz` answers 200 once every
//! stream mapping has listed its shards and read the lease table (it then
//! holds leases or stands by), 503 before that and once shutdown began
//! (readiness). The server is axum, already in the tree under the embedded
//! engine.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `jobstream_iterator_age_milliseconds` | gauge: age of the oldest record not yet checkpointed (0: caught up; while reads fail or a read is not answered, since the last read that answered); only for the shards whose lease this process holds now | `processor`, `shard` |
//! | `jobstream_records_processed_total` | counter: stream records whose batch took effect, queue messages deleted after success | `processor` |
//! | `jobstream_invocations_total` | counter | `processor` |
//! | `jobstream_invocations_failed_total` | counter: errors, panics, timeouts, partial failures | `processor` |
//! | `jobstream_records_bad_input_total` | counter: records skipped as bad input (logged with key and reason) | `processor` |
//! | `jobstream_records_given_up_total` | counter: records sent to the on-failure destinations | `processor` |
//! | `jobstream_record_ranges_lost_total` | counter: ranges trimmed from the stream or in vanished shards | `processor` |
//! | `jobstream_leases_held` | gauge | `processor` |
//! | `jobstream_leases_lost_total` | counter: leases this process stopped holding, by `reason`: `taken` (the ledger shows another acquisition), `ran_out` (no renewal or checkpoint succeeded for a lease duration: its ledger writes fail), `vanished` (the shard left the stream) | `processor`, `reason` |
//! | `jobstream_shards` | gauge: the stream's shards whose turn has come, as this process judges them at the scrape: `held` here (always `jobstream_leases_held`), `elsewhere` (another process renews it), `stale` (its holder has not renewed it for half a lease duration, or this process could not read the leases for that long), `unheld` (released, expired or never taken: nobody reads it) | `processor`, `state` |
//! | `jobstream_dynamodb_last_success_age_seconds` | gauge: since a call of the processor to DynamoDB or DynamoDB Streams (lease reads and writes, DescribeStream, shard reads) last succeeded | `processor` |
//! | `jobstream_queue_messages_in_flight` | gauge: messages whose invocation runs now | `processor` |
//! | `jobstream_stream_read_failures_total` | counter: GetShardIterator / GetRecords failures (retried after a pause doubling up to 10 s) | `processor` |
//! | `jobstream_stream_describe_failures_total` | counter: DescribeStream failures (shard discovery; retried after a jittered pause doubling from 1 s, at most 30 s) | `processor` |
//! | `jobstream_queue_poll_failures_total` | counter: ReceiveMessage failures (retried after a pause doubling up to 10 s) | `processor` |
//! | `jobstream_output_lines_dropped_total` | counter: lines the process did not write: its reader did not read (the pipe full, the queue of `shared::out` full) or went away | `stream` (`stdout`, `stderr`) |
//!
//! `/readyz` also answers 503 while a queue's polls have all failed for
//! longer than [`FAILING_NOT_READY`] (the queue gone, credentials, the
//! endpoint down), naming the queue and the cause, and while no call of a
//! stream processor to the engine has succeeded for that long (or a lease
//! duration, if longer), naming the processor and the last failure.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::local::esm::{MappingStats, Snapshot};
use crate::local::sqs_esm::QueueStats;

/// Reads one counter of a processor.
pub type Reader = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What `/metrics` and `/readyz` read: the runtime's counters, shared.
#[derive(Clone, Default)]
pub struct Probe {
    pub streams: Vec<Arc<MappingStats>>,
    /// Queue consumers by name.
    pub queues: Vec<(String, Arc<QueueStats>)>,
    /// Records each processor skipped as bad input, by processor name.
    pub bad_input: Vec<(String, Reader)>,
    /// How long a queue's polls, or a stream processor's calls, may all
    /// fail before `/readyz` says not ready (`None`: [`FAILING_NOT_READY`];
    /// tests shorten it).
    pub failing_bound: Option<std::time::Duration>,
}

impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probe")
            .field("streams", &self.streams.len())
            .field("queues", &self.queues.len())
            .field("bad_input", &self.bad_input.len())
            .finish()
    }
}

/// How long every poll of a queue (or every call of a stream processor)
/// may fail before `/readyz` says not ready (a blip, an endpoint
/// restarting, is not worth a page).
pub const FAILING_NOT_READY: std::time::Duration = std::time::Duration::from_secs(60);

impl Probe {
    /// Every stream mapping listed its shards and read its leases, and
    /// none has stopped.
    pub fn ready(&self) -> bool {
        self.streams.iter().all(|s| s.ready.load(Ordering::Relaxed))
    }

    /// A queue whose polls have all failed for longer than
    /// [`FAILING_NOT_READY`]: its name, for how long, and why.
    pub fn failing_queue(&self) -> Option<(String, std::time::Duration, String)> {
        let bound = self.failing_bound.unwrap_or(FAILING_NOT_READY);
        self.queues.iter().find_map(|(name, q)| {
            q.failing_for()
                .filter(|(d, _)| *d > bound)
                .map(|(d, cause)| (name.clone(), d, cause))
        })
    }

    /// A stream processor none of whose calls to the engine has
    /// succeeded for longer than [`FAILING_NOT_READY`] (or its lease
    /// duration, if longer: a standby reads the leases every third of it):
    /// its name, for how long, and the last failure.
    pub fn unanswered_stream(&self) -> Option<(String, std::time::Duration, Option<String>)> {
        let bound = self.failing_bound.unwrap_or(FAILING_NOT_READY);
        self.streams.iter().find_map(|s| {
            let bound = bound.max(s.lease_ttl().unwrap_or_default());
            let (since, cause) = s.unanswered();
            since
                .filter(|d| *d > bound)
                .map(|d| (s.name.clone(), d, cause))
        })
    }

    /// Leases held by this process, over every mapping.
    pub fn leases_held(&self) -> u64 {
        self.streams.iter().map(|s| s.leases_held()).sum()
    }

    /// The exposition of every metric, as `/metrics` serves it.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(&str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (processor, v) in values {
        ConstCounter::new(*v).encode(family.encode_family(&[("processor", *processor)])?)?;
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(&str, u64)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (processor, v) in values {
        ConstGauge::new(*v).encode(family.encode_family(&[("processor", *processor)])?)?;
    }
    Ok(())
}

impl Collector for Probe {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        fn load(a: &std::sync::atomic::AtomicU64) -> u64 {
            a.load(Ordering::Relaxed)
        }
        // One value per stream mapping, per queue consumer.
        let streams = |f: fn(&MappingStats) -> u64| -> Vec<(&str, u64)> {
            self.streams
                .iter()
                .map(|s| (s.name.as_str(), f(s)))
                .collect()
        };
        let queues = |f: fn(&QueueStats) -> u64| -> Vec<(&str, u64)> {
            self.queues
                .iter()
                .map(|(n, q)| (n.as_str(), f(q)))
                .collect()
        };
        // Each mapping judged once, at one instant: its leases held, shards
        // and iterator ages agree within the scrape.
        let now: Vec<(&str, Snapshot)> = self
            .streams
            .iter()
            .map(|s| (s.name.as_str(), s.snapshot()))
            .collect();
        {
            let mut family = encoder.encode_descriptor(
                "jobstream_iterator_age_milliseconds",
                "Age of the oldest stream record not yet checkpointed, per shard whose lease this process holds (0: caught up); rises while a shard retries a failing record, and while its reads fail or are not answered",
                None,
                MetricType::Gauge,
            )?;
            for (name, snap) in &now {
                for (shard, age) in &snap.iterator_ages {
                    ConstGauge::new(*age).encode(
                        family.encode_family(&[("processor", *name), ("shard", shard.as_str())])?,
                    )?;
                }
            }
        }
        counter(
            &mut encoder,
            "jobstream_records_processed",
            "Stream records whose batch took effect; queue messages deleted after their invocation succeeded",
            &[streams(|s| load(&s.records_processed)), queues(|q| load(&q.deleted))].concat(),
        )?;
        counter(
            &mut encoder,
            "jobstream_invocations",
            "Handler invocations",
            &[
                streams(|s| s.invocations()),
                queues(|q| load(&q.invocations)),
            ]
            .concat(),
        )?;
        counter(
            &mut encoder,
            "jobstream_invocations_failed",
            "Failed invocations (function error, panic, timeout, a failed record in the partial batch response)",
            &[streams(|s| load(&s.failed_invocations)), queues(|q| load(&q.failed_invocations))].concat(),
        )?;
        let bad: Vec<(&str, u64)> = self
            .bad_input
            .iter()
            .map(|(n, read)| (n.as_str(), read()))
            .collect();
        counter(
            &mut encoder,
            "jobstream_records_bad_input",
            "Records skipped as bad input (the log names each key and reason)",
            &bad,
        )?;
        counter(
            &mut encoder,
            "jobstream_records_given_up",
            "Stream records sent to the on-failure destinations (retries exhausted, record too old)",
            &streams(|s| load(&s.records_given_up)),
        )?;
        counter(
            &mut encoder,
            "jobstream_record_ranges_lost",
            "Ranges of stream records lost before processing (trimmed, or in vanished shards): run `jobstream backfill`",
            &streams(|s| s.on_failure.losses()),
        )?;
        gauge(
            &mut encoder,
            "jobstream_leases_held",
            "Shard leases this process holds",
            &now.iter()
                .map(|(name, snap)| (*name, snap.leases_held))
                .collect::<Vec<_>>(),
        )?;
        {
            let mut family = encoder.encode_descriptor(
                "jobstream_leases_lost",
                "Leases this process stopped holding, by reason: taken (the ledger shows another acquisition), ran_out (no renewal or checkpoint succeeded for a lease duration), vanished (the shard left the stream)",
                None,
                MetricType::Counter,
            )?;
            for s in &self.streams {
                for (reason, n) in s.leases_lost() {
                    ConstCounter::new(n).encode(
                        family
                            .encode_family(&[("processor", s.name.as_str()), ("reason", reason)])?,
                    )?;
                }
            }
        }
        {
            let mut family = encoder.encode_descriptor(
                "jobstream_shards",
                "The stream's shards whose turn has come, as this process judges them: held here, elsewhere (another process renews it), stale (not renewed for half a lease duration, or the leases could not be read for that long), unheld (nobody reads it)",
                None,
                MetricType::Gauge,
            )?;
            for (name, snap) in &now {
                for (state, n) in snap.shards.iter().flat_map(|s| s.by_state()) {
                    ConstGauge::new(n)
                        .encode(family.encode_family(&[("processor", *name), ("state", state)])?)?;
                }
            }
        }
        gauge(
            &mut encoder,
            "jobstream_dynamodb_last_success_age_seconds",
            "Seconds since a call of the processor to DynamoDB or DynamoDB Streams (lease reads and writes, DescribeStream, shard reads) last succeeded; a holder reads 4 times a second, a standby reads the leases every third of the lease duration",
            &now
                .iter()
                .map(|(name, snap)| (*name, snap.unanswered.map_or(0, |d| d.as_secs())))
                .collect::<Vec<_>>(),
        )?;
        gauge(
            &mut encoder,
            "jobstream_queue_messages_in_flight",
            "Queue messages whose invocation runs now",
            &queues(|q| load(&q.in_flight)),
        )?;
        counter(
            &mut encoder,
            "jobstream_stream_read_failures",
            "Shard reads (GetShardIterator, GetRecords) that failed; retried after a pause doubling up to 10 s",
            &streams(|s| load(&s.read_failures)),
        )?;
        counter(
            &mut encoder,
            "jobstream_stream_describe_failures",
            "Shard discoveries (DescribeStream) that failed; retried after a jittered pause doubling from 1 s, at most 30 s",
            &streams(|s| load(&s.describe_failures)),
        )?;
        counter(
            &mut encoder,
            "jobstream_queue_poll_failures",
            "Queue polls (ReceiveMessage) that failed; retried after a pause doubling up to 10 s",
            &queues(|q| load(&q.poll_failures)),
        )?;
        {
            let mut family = encoder.encode_descriptor(
                "jobstream_output_lines_dropped",
                "Lines not written to stdout or stderr: their reader did not read them (a full pipe: dropped, never waited for) or went away",
                None,
                MetricType::Counter,
            )?;
            for stream in [shared::out::Stream::Stdout, shared::out::Stream::Stderr] {
                ConstCounter::new(shared::out::dropped(stream))
                    .encode(family.encode_family(&[("stream", stream.name())])?)?;
            }
        }
        Ok(())
    }
}

/// `/metrics`, `/healthz` and `/readyz` of `probe`.
pub fn router(probe: Probe) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(metrics))
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", axum::routing::get(readyz))
        .with_state(Arc::new(probe))
}

async fn metrics(State(probe): State<Arc<Probe>>) -> axum::response::Response {
    match probe.render() {
        Ok(body) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding the metrics failed: {e}\n"),
        )
            .into_response(),
    }
}

async fn readyz(State(probe): State<Arc<Probe>>) -> (StatusCode, String) {
    if !probe.ready() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: shards not listed or leases not read yet, or shutting down\n".into(),
        );
    }
    if let Some((queue, d, cause)) = probe.failing_queue() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: queue {queue}: every poll has failed for {} s ({cause})\n",
                d.as_secs()
            ),
        );
    }
    if let Some((processor, d, cause)) = probe.unanswered_stream() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: processor {processor}: no call to DynamoDB has succeeded for {} s ({})\n",
                d.as_secs(),
                cause.as_deref().unwrap_or("calls not answered")
            ),
        );
    }
    match probe.leases_held() {
        0 => (
            StatusCode::OK,
            "ready: standing by (no lease held)\n".into(),
        ),
        n => (StatusCode::OK, format!("ready: holding {n} lease(s)\n")),
    }
}

/// Serves `probe` on `listener` until `stop` turns true.
pub async fn serve(
    listener: tokio::net::TcpListener,
    probe: Probe,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    axum::serve(listener, router(probe))
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
        .map_err(|e| anyhow::anyhow!("the metrics server failed: {e}"))
}

/// `GET path` on `addr` (HTTP/1.0, the whole answer): status and body. A
/// client of the endpoints [`serve`] answers (tests, scripts' checks).
pub async fn get(addr: std::net::SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    use anyhow::Context as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .context("sending the request")?;
    let mut raw = String::new();
    conn.read_to_string(&mut raw)
        .await
        .context("reading the answer")?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn probes_answer_and_metrics_are_exposed_by_processor() {
        let stats = Arc::new(MappingStats::leased("derive"));
        stats.records_processed.store(7, Ordering::Relaxed);
        stats.records_given_up.store(1, Ordering::Relaxed);
        stats.describe_failures.store(4, Ordering::Relaxed);
        let queue = Arc::new(QueueStats::default());
        queue.in_flight.store(3, Ordering::Relaxed);
        let probe = Probe {
            streams: vec![stats.clone()],
            queues: vec![("timeline".into(), queue)],
            bad_input: vec![("derive".into(), Arc::new(|| 2))],
            failing_bound: None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(listener, probe, stopped));
        assert_eq!(get(addr, "/healthz").await.unwrap(), (200, "ok\n".into()));
        let (status, why) = get(addr, "/readyz").await.unwrap();
        assert_eq!(status, 503, "{why}");
        stats.ready.store(true, Ordering::Relaxed);
        assert_eq!(
            get(addr, "/readyz").await.unwrap(),
            (200, "ready: standing by (no lease held)\n".into())
        );
        stats.hold("s1");
        stats.hold("s2");
        assert_eq!(
            get(addr, "/readyz").await.unwrap(),
            (200, "ready: holding 2 lease(s)\n".into())
        );
        let (status, text) = get(addr, "/metrics").await.unwrap();
        assert_eq!(status, 200);
        for line in [
            "jobstream_records_processed_total{processor=\"derive\"} 7",
            "jobstream_records_processed_total{processor=\"timeline\"} 0",
            "jobstream_records_given_up_total{processor=\"derive\"} 1",
            "jobstream_records_bad_input_total{processor=\"derive\"} 2",
            "jobstream_leases_held{processor=\"derive\"} 2",
            "jobstream_queue_messages_in_flight{processor=\"timeline\"} 3",
            "jobstream_invocations_failed_total{processor=\"derive\"} 0",
            "jobstream_stream_describe_failures_total{processor=\"derive\"} 4",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        stop.send_replace(true);
        server.await.unwrap().unwrap();
    }
}
