//! What the benchmarks share: the model's runtime on an embedded engine,
//! the stream read as Lambda receives it, the measures (process CPU, one
//! PutItem, the BatchWriteItem floor) every figure is compared with in the
//! same run and the same engine, and the bill meter.

#![allow(dead_code)] // each benchmark uses part of it

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use jobstream::local::engine::LocalEngine;
use jobstream::local::esm::RecordReader;
use jobstream::local::runtime::RuntimeOptions;
use shared::item::{n, s, Item};

/// Concurrent writers of the floor (the yardstick).
pub const FLOOR_WRITERS: usize = 4;

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The options of `model`'s runtime on `engine`, its records read through
/// the engine's own API (as `jobstream dev` reads them).
pub fn options(model: &str, engine: &LocalEngine) -> RuntimeOptions {
    RuntimeOptions::new(
        model,
        Some(engine.endpoint()),
        RecordReader::Embedded(engine.database().clone()),
    )
}

/// Puts a bill meter between the runtime's processors and the engine at
/// `endpoint`: what they cost as DynamoDB bills it (RRU, WRU), apart from
/// the application's own writes, which do not go through it.
pub async fn meter_processors(
    opts: &mut RuntimeOptions,
    endpoint: &str,
) -> anyhow::Result<jobstream::meter::Meter> {
    let meter = jobstream::meter::Meter::in_front_of(endpoint).await?;
    opts.processor_endpoint = Some(meter.endpoint());
    Ok(meter)
}

/// CPU time (user + system) of this whole process so far: the handlers
/// and the embedded engine they call, which runs in the same process.
/// Linux only (`/proc/self/stat`, in clock ticks of 10 ms); zero elsewhere.
pub fn process_cpu() -> Duration {
    let read = || -> Option<Duration> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces), from field 3.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(Duration::from_millis(ticks * 10))
    };
    read().unwrap_or_default()
}

/// Time of one plain PutItem into `table` (key attributes `keys`), the
/// mean of `puts`.
pub async fn baseline_put(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    keys: [&str; 2],
    puts: usize,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    for i in 0..puts {
        client
            .put_item()
            .table_name(table)
            .item(keys[0], s(format!("BENCH#{i}")))
            .item(keys[1], s("x"))
            .item("v", n(i))
            .send()
            .await?;
    }
    Ok(started.elapsed() / puts.max(1) as u32)
}

/// Writes `items` by plain BatchWriteItem, 25 per request, unprocessed
/// items resent.
pub async fn batch_write(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: &[Item],
) -> anyhow::Result<()> {
    for chunk in items.chunks(25) {
        let mut pending: Vec<WriteRequest> = chunk
            .iter()
            .map(|i| {
                let put = PutRequest::builder().set_item(Some(i.clone())).build()?;
                Ok(WriteRequest::builder().put_request(put).build())
            })
            .collect::<anyhow::Result<_>>()?;
        while !pending.is_empty() {
            let out = client
                .batch_write_item()
                .request_items(table, pending)
                .send()
                .await?;
            pending = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table))
                .unwrap_or_default();
        }
    }
    Ok(())
}

/// Writes `items` with [`batch_write`] by `FLOOR_WRITERS` concurrent
/// writers, each with its share; returns the wall time. The fastest the
/// engine takes these items.
pub async fn batch_write_floor(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<Item>,
) -> anyhow::Result<Duration> {
    let share = items.len().div_ceil(FLOOR_WRITERS).max(1);
    let started = Instant::now();
    let writers = items.chunks(share).map(|part| {
        let (client, table, part) = (client.clone(), table.to_string(), part.to_vec());
        tokio::spawn(async move { batch_write(&client, &table, &part).await })
    });
    for w in futures::future::join_all(writers).await {
        w??;
    }
    Ok(started.elapsed())
}

/// `a` as a multiple of `floor` (`"2.4x"`).
pub fn ratio(a: Duration, floor: Duration) -> String {
    format!("{:.1}x", a.as_secs_f64() / floor.as_secs_f64().max(1e-9))
}

/// The stream of a table read from TRIM_HORIZON, every shard, through the
/// engine's own API; each [`StreamTail::read`] returns the records written
/// since the last one, as Lambda's event records (`eventSourceARN` set).
pub struct StreamTail {
    db: dynoxide::Database,
    arn: String,
    iterators: Vec<Option<String>>,
}

impl StreamTail {
    pub async fn open(
        engine: &LocalEngine,
        client: &aws_sdk_dynamodb::Client,
        table: &str,
    ) -> anyhow::Result<Self> {
        let arn = jobstream::local::esm::stream_arn(client, table).await?;
        let streams = aws_sdk_dynamodbstreams::Client::new(
            &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
        );
        let desc = streams.describe_stream().stream_arn(&arn).send().await?;
        let mut iterators = Vec::new();
        for shard in desc
            .stream_description()
            .map(|d| d.shards())
            .unwrap_or_default()
        {
            let it = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard.shard_id().unwrap_or_default())
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await?;
            iterators.push(it.shard_iterator().map(str::to_string));
        }
        Ok(Self {
            db: engine.database().clone(),
            arn,
            iterators,
        })
    }

    /// The records written since the last read (every record at the first).
    pub fn read(&mut self) -> anyhow::Result<Vec<serde_json::Value>> {
        let mut out = Vec::new();
        for iterator in &mut self.iterators {
            while let Some(i) = iterator.clone() {
                let resp =
                    self.db
                        .get_records(dynoxide::actions::get_records::GetRecordsRequest {
                            shard_iterator: i,
                            limit: Some(1000),
                        })?;
                *iterator = resp.next_shard_iterator;
                if resp.records.is_empty() {
                    break;
                }
                for r in &resp.records {
                    let mut v = serde_json::to_value(r)?;
                    v["eventSourceARN"] = serde_json::json!(self.arn);
                    out.push(v);
                }
            }
        }
        Ok(out)
    }
}

/// `records` as one Lambda event (a stream's or a queue's).
pub fn event<E: serde::de::DeserializeOwned>(records: &[serde_json::Value]) -> anyhow::Result<E> {
    Ok(serde_json::from_value(
        serde_json::json!({ "Records": records }),
    )?)
}

/// Reads a child's stdout up to the first line starting with `last`;
/// returns the value of the line starting with each of `prefixes` (e.g.
/// `DynamoDB endpoint: `), in their order. The rest is read away on a
/// thread of its own (the child never blocks on a full pipe).
pub fn startup_lines(
    child: &mut std::process::Child,
    last: &str,
    prefixes: &[&str],
) -> anyhow::Result<Vec<String>> {
    use anyhow::Context as _;
    use std::io::BufRead as _;
    let stdout = child.stdout.take().context("the child's stdout")?;
    let mut lines = std::io::BufReader::new(stdout).lines();
    let mut values = vec![None; prefixes.len()];
    for line in lines.by_ref() {
        let line = line?;
        for (prefix, value) in prefixes.iter().zip(&mut values) {
            if let Some(v) = line.strip_prefix(prefix) {
                *value = Some(v.trim().to_string());
            }
        }
        if line.starts_with(last) {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    prefixes
        .iter()
        .zip(values)
        .map(|(prefix, v)| v.with_context(|| format!("no `{prefix}` line")))
        .collect()
}

/// A child process, killed however the benchmark ends.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
