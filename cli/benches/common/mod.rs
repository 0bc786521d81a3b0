//! What the benchmarks share: the BatchWriteItem floor every figure is
//! compared with, measured in the same run and the same engine.

#![allow(dead_code)] // each benchmark uses part of it

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use shared::item::Item;

/// Concurrent writers of the floor (the yardstick).
pub const FLOOR_WRITERS: usize = 4;

/// Writes `items` with plain BatchWriteItem (25 per request, unprocessed
/// items resent) by `FLOOR_WRITERS` concurrent writers, each with its share;
/// returns the wall time. The fastest the engine takes these items.
pub async fn batch_write_floor(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    items: Vec<Item>,
) -> anyhow::Result<Duration> {
    let share = items.len().div_ceil(FLOOR_WRITERS).max(1);
    let started = Instant::now();
    let writers = items.chunks(share).map(|part| {
        let client = client.clone();
        let table = table.to_string();
        let part = part.to_vec();
        tokio::spawn(async move {
            for chunk in part.chunks(25) {
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
                        .request_items(&table, pending)
                        .send()
                        .await?;
                    pending = out
                        .unprocessed_items
                        .and_then(|mut u| u.remove(&table))
                        .unwrap_or_default();
                }
            }
            anyhow::Ok(())
        })
    });
    for w in futures::future::join_all(writers).await {
        w??;
    }
    Ok(started.elapsed())
}

/// Puts a bill meter between the runtime's processors and the engine at
/// `endpoint`: what they cost as DynamoDB bills it (RRU, WRU), apart from
/// the application's own writes, which do not go through it.
pub async fn meter_processors(
    opts: &mut jobstream::local::runtime::RuntimeOptions,
    endpoint: &str,
) -> anyhow::Result<jobstream::meter::Meter> {
    let meter = jobstream::meter::Meter::in_front_of(endpoint).await?;
    opts.processor_endpoint = Some(meter.endpoint());
    Ok(meter)
}

/// `a` as a multiple of `floor` (`"2.4x"`).
pub fn ratio(a: Duration, floor: Duration) -> String {
    format!("{:.1}x", a.as_secs_f64() / floor.as_secs_f64().max(1e-9))
}

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every record of `rt`'s model table stream so far (its first shard, from
/// TRIM_HORIZON), as Lambda's event records (`eventSourceARN` set).
pub async fn stream_records(
    engine: &jobstream::local::engine::LocalEngine,
    rt: &jobstream::local::runtime::Runtime,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let arn = jobstream::local::esm::stream_arn(&rt.dynamodb, &rt.config.table).await?;
    let streams = aws_sdk_dynamodbstreams::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let desc = streams.describe_stream().stream_arn(&arn).send().await?;
    let shard_id = desc
        .stream_description()
        .and_then(|d| d.shards().first())
        .and_then(|s| s.shard_id())
        .unwrap_or_default()
        .to_string();
    let it = streams
        .get_shard_iterator()
        .stream_arn(&arn)
        .shard_id(shard_id)
        .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
        .send()
        .await?;
    let mut out = Vec::new();
    let mut iterator = it.shard_iterator().map(str::to_string);
    while let Some(i) = iterator.take() {
        let resp =
            engine
                .database()
                .get_records(dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: i,
                    limit: Some(1000),
                })?;
        if resp.records.is_empty() {
            break;
        }
        for r in &resp.records {
            let mut v = serde_json::to_value(r)?;
            v["eventSourceARN"] = serde_json::json!(arn);
            out.push(v);
        }
        iterator = resp.next_shard_iterator;
    }
    Ok(out)
}
