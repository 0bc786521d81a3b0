//! The DynamoDB Streams API as the local event source mapping uses it: shard
//! discovery (paginated), shard iterators, GetRecords. The mapping is generic
//! over [`StreamsApi`], so shard lineage and pagination are tested against an
//! in-process fake; [`SdkStreams`] is the real one.
//!
//! Records come back as the Lambda event's typed records
//! ([`EventRecord`]), built field by field from the SDK's (or the embedded
//! engine's) shapes: no JSON round trip.

use std::collections::HashMap;
use std::future::Future;

use anyhow::Context as _;
use aws_lambda_events::event::dynamodb::{EventRecord, StreamRecord, StreamViewType, UserIdentity};
use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use chrono::{DateTime, Utc};

/// One shard as DescribeStream lists it. Whether a shard is closed is not
/// taken from its `EndingSequenceNumber` (the embedded engine reports one on
/// its open shard): a shard is done when GetRecords returns no next iterator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    pub shard_id: String,
    pub parent_shard_id: Option<String>,
}

/// One page of DescribeStream.
#[derive(Debug, Clone, Default)]
pub struct ShardPage {
    pub shards: Vec<ShardInfo>,
    /// Present when more shards follow (pass it as `ExclusiveStartShardId`).
    pub last_evaluated_shard_id: Option<String>,
}

/// Where a shard iterator starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IteratorPosition {
    TrimHorizon,
    Latest,
    AfterSequenceNumber(String),
}

/// One GetRecords response. `next_iterator == None` means the shard is
/// closed and every record of it has been returned.
#[derive(Debug, Clone, Default)]
pub struct RecordsPage {
    pub records: Vec<EventRecord>,
    pub next_iterator: Option<String>,
}

/// The three calls of the Streams API a stream consumer needs.
pub trait StreamsApi: Send + Sync {
    fn describe_stream(
        &self,
        stream_arn: &str,
        exclusive_start_shard_id: Option<&str>,
    ) -> impl Future<Output = anyhow::Result<ShardPage>> + Send;

    /// `Ok(None)`: the shard has no iterator (trimmed away).
    fn shard_iterator(
        &self,
        stream_arn: &str,
        shard_id: &str,
        position: &IteratorPosition,
    ) -> impl Future<Output = anyhow::Result<Option<String>>> + Send;

    fn get_records(
        &self,
        iterator: &str,
        limit: usize,
    ) -> impl Future<Output = anyhow::Result<RecordsPage>> + Send;
}

/// Every shard of a stream, following DescribeStream's pagination.
pub async fn list_shards<S: StreamsApi>(
    api: &S,
    stream_arn: &str,
) -> anyhow::Result<Vec<ShardInfo>> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let page = api.describe_stream(stream_arn, start.as_deref()).await?;
        shards.extend(page.shards);
        match page.last_evaluated_shard_id {
            // A page that names where it stopped but does not move on would
            // loop forever: treat it as the end.
            Some(next) if start.as_deref() != Some(next.as_str()) => start = Some(next),
            _ => return Ok(shards),
        }
    }
}

/// Where stream records are read from.
#[derive(Clone)]
pub enum RecordReader {
    /// GetRecords through `aws-sdk-dynamodbstreams` (any endpoint).
    Sdk,
    /// GetRecords on the embedded engine's own API: Dynoxide spells the TTL
    /// `userIdentity` the way the Lambda event does (`type`,
    /// `principalId`), which the SDK's shape (`Type`, `PrincipalId`) drops.
    Embedded(dynoxide::Database),
}

/// The Streams API through `aws-sdk-dynamodbstreams`, records read as
/// `reader` says.
#[derive(Clone)]
pub struct SdkStreams {
    pub client: aws_sdk_dynamodbstreams::Client,
    pub reader: RecordReader,
}

impl StreamsApi for SdkStreams {
    async fn describe_stream(
        &self,
        stream_arn: &str,
        exclusive_start_shard_id: Option<&str>,
    ) -> anyhow::Result<ShardPage> {
        let out = self
            .client
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(exclusive_start_shard_id.map(str::to_string))
            .send()
            .await
            .context("DescribeStream")?;
        let desc = out.stream_description();
        let shards = desc
            .map(|d| d.shards())
            .unwrap_or_default()
            .iter()
            .filter_map(|s| {
                Some(ShardInfo {
                    shard_id: s.shard_id()?.to_string(),
                    parent_shard_id: s.parent_shard_id().map(str::to_string),
                })
            })
            .collect();
        Ok(ShardPage {
            shards,
            last_evaluated_shard_id: desc
                .and_then(|d| d.last_evaluated_shard_id())
                .map(str::to_string),
        })
    }

    async fn shard_iterator(
        &self,
        stream_arn: &str,
        shard_id: &str,
        position: &IteratorPosition,
    ) -> anyhow::Result<Option<String>> {
        let req = self
            .client
            .get_shard_iterator()
            .stream_arn(stream_arn)
            .shard_id(shard_id);
        let req = match position {
            IteratorPosition::TrimHorizon => {
                req.shard_iterator_type(ShardIteratorType::TrimHorizon)
            }
            IteratorPosition::Latest => req.shard_iterator_type(ShardIteratorType::Latest),
            IteratorPosition::AfterSequenceNumber(seq) => req
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(seq),
        };
        let out = match req.send().await {
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_trimmed_data_access_exception()) =>
            {
                return Err(Trimmed(shard_id.to_string()).into())
            }
            other => other.with_context(|| format!("GetShardIterator {shard_id} {position:?}"))?,
        };
        Ok(out.shard_iterator().map(str::to_string))
    }

    async fn get_records(&self, iterator: &str, limit: usize) -> anyhow::Result<RecordsPage> {
        match &self.reader {
            RecordReader::Embedded(db) => {
                let db = db.clone();
                let req = dynoxide::actions::get_records::GetRecordsRequest {
                    shard_iterator: iterator.to_string(),
                    limit: Some(limit),
                };
                let out = tokio::task::spawn_blocking(move || db.get_records(req))
                    .await?
                    .context("GetRecords (embedded)")?;
                Ok(RecordsPage {
                    records: out.records.into_iter().map(embedded_record).collect(),
                    next_iterator: out.next_shard_iterator,
                })
            }
            RecordReader::Sdk => {
                let out = self
                    .client
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(i32::try_from(limit).unwrap_or(1000))
                    .send()
                    .await
                    .context("GetRecords")?;
                let records = out
                    .records()
                    .iter()
                    .map(sdk_record)
                    .collect::<anyhow::Result<Vec<_>>>()?;
                Ok(RecordsPage {
                    records,
                    next_iterator: out.next_shard_iterator().map(str::to_string),
                })
            }
        }
    }
}

fn epoch_secs(secs: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis((secs * 1000.0) as i64).unwrap_or_default()
}

fn view_type(s: &str) -> Option<StreamViewType> {
    Some(match s {
        "NEW_IMAGE" => StreamViewType::NewImage,
        "OLD_IMAGE" => StreamViewType::OldImage,
        "NEW_AND_OLD_IMAGES" => StreamViewType::NewAndOldImages,
        "KEYS_ONLY" => StreamViewType::KeysOnly,
        _ => return None,
    })
}

/// The Lambda event record of one SDK stream record.
pub fn sdk_record(r: &aws_sdk_dynamodbstreams::types::Record) -> anyhow::Result<EventRecord> {
    let d = r.dynamodb().context("record without dynamodb")?;
    let image = |m: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
        m.map(|m| serde_dynamo::Item::from(m.clone()))
            .unwrap_or_default()
    };
    let mut change = StreamRecord::default();
    change.approximate_creation_date_time = d
        .approximate_creation_date_time()
        .map(|t| epoch_secs(t.as_secs_f64()))
        .unwrap_or_default();
    change.keys = image(d.keys());
    change.new_image = image(d.new_image());
    change.old_image = image(d.old_image());
    change.sequence_number = d.sequence_number().map(str::to_string);
    change.size_bytes = d.size_bytes().unwrap_or_default();
    change.stream_view_type = d.stream_view_type().and_then(|v| view_type(v.as_str()));
    let mut rec = EventRecord::default();
    rec.aws_region = r.aws_region().unwrap_or_default().to_string();
    rec.change = change;
    rec.event_id = r.event_id().unwrap_or_default().to_string();
    rec.event_name = r
        .event_name()
        .map(|e| e.as_str().to_string())
        .unwrap_or_default();
    rec.event_source = r.event_source().map(str::to_string);
    rec.event_version = r.event_version().map(str::to_string);
    rec.user_identity = r.user_identity().map(|id| {
        let mut u = UserIdentity::default();
        u.type_ = id.r#type().unwrap_or_default().to_string();
        u.principal_id = id.principal_id().unwrap_or_default().to_string();
        u
    });
    Ok(rec)
}

fn embedded_value(v: dynoxide::types::AttributeValue) -> serde_dynamo::AttributeValue {
    use dynoxide::types::AttributeValue as D;
    use serde_dynamo::AttributeValue as S;
    match v {
        D::S(s) => S::S(s),
        D::N(n) => S::N(n),
        D::B(b) => S::B(b),
        D::BOOL(b) => S::Bool(b),
        D::NULL(b) => S::Null(b),
        D::SS(v) => S::Ss(v),
        D::NS(v) => S::Ns(v),
        D::BS(v) => S::Bs(v),
        D::L(v) => S::L(v.into_iter().map(embedded_value).collect()),
        D::M(m) => S::M(m.into_iter().map(|(k, v)| (k, embedded_value(v))).collect()),
    }
}

fn embedded_item(item: Option<dynoxide::types::Item>) -> serde_dynamo::Item {
    item.map(|m| {
        m.into_iter()
            .map(|(k, v)| (k, embedded_value(v)))
            .collect::<HashMap<_, _>>()
            .into()
    })
    .unwrap_or_default()
}

/// The Lambda event record of one record read from the embedded engine
/// (TTL `userIdentity` kept).
pub fn embedded_record(r: dynoxide::actions::get_records::Record) -> EventRecord {
    let d = r.dynamodb;
    let mut change = StreamRecord::default();
    change.approximate_creation_date_time = epoch_secs(d.approximate_creation_date_time);
    change.keys = embedded_item(Some(d.keys));
    change.new_image = embedded_item(d.new_image);
    change.old_image = embedded_item(d.old_image);
    change.sequence_number = Some(d.sequence_number);
    change.size_bytes = d.size_bytes;
    change.stream_view_type = view_type(&d.stream_view_type);
    let mut rec = EventRecord::default();
    rec.aws_region = r.aws_region;
    rec.change = change;
    rec.event_id = r.event_id;
    rec.event_name = r.event_name;
    rec.event_source = Some(r.event_source);
    rec.event_version = Some(r.event_version);
    rec.user_identity = r.user_identity.map(|id| {
        let mut u = UserIdentity::default();
        u.type_ = id.identity_type;
        u.principal_id = id.principal_id;
        u
    });
    rec
}

/// The records after a checkpoint were trimmed from the stream (older than
/// its 24 h retention): they can no longer be read.
#[derive(Debug, thiserror::Error)]
#[error("shard {0}: the records after the checkpoint were trimmed from the stream")]
pub struct Trimmed(pub String);

/// An in-process Streams API (pure, deterministic) for tests of shard
/// discovery, lineage and pagination, which the embedded engine (one shard
/// per table) cannot exercise.
#[cfg(test)]
pub mod fake {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;

    #[derive(Default)]
    struct Shard {
        parent: Option<String>,
        /// Sequence numbers written to the shard.
        records: Vec<u64>,
        closed: bool,
        /// Records below this sequence number are gone (trimmed).
        trimmed_below: u64,
        /// Trims so far: iterators from before a trim are expired.
        generation: u64,
        /// Creation time (epoch ms) of each record, by sequence number.
        created: BTreeMap<u64, i64>,
        /// The length of the string attribute `blob` of a record's new
        /// image, by sequence number (records without one carry no image).
        blob: BTreeMap<u64, usize>,
    }

    /// Shards listed in creation order; sequence numbers are global and
    /// increasing; iterators are `shard/index`. A handle: its clones share
    /// one stream (several mappings, processes, a test's writes).
    #[derive(Clone, Default)]
    pub struct FakeStreams(std::sync::Arc<Streams>);

    /// The stream behind a [`FakeStreams`] handle.
    #[derive(Default)]
    pub struct Streams {
        shards: Mutex<(Vec<String>, BTreeMap<String, Shard>)>,
        next_seq: Mutex<u64>,
        pub page_size: usize,
        pub describe_calls: Mutex<usize>,
        /// GetRecords calls per shard.
        pub get_calls: Mutex<BTreeMap<String, usize>>,
        /// DescribeStream fails while this is set.
        pub describe_fails: Mutex<bool>,
        /// GetShardIterator and GetRecords fail while this is set (an
        /// outage).
        pub reads_fail: Mutex<bool>,
        /// The creation time given to records written from now on (epoch
        /// ms; `None`: the wall clock).
        pub clock_ms: Mutex<Option<i64>>,
        /// While set, every call waits for a permit of the gate first (a
        /// stream that accepts calls and does not answer them).
        pub hang: Mutex<Option<std::sync::Arc<tokio::sync::Semaphore>>>,
    }

    impl std::ops::Deref for FakeStreams {
        type Target = Streams;
        fn deref(&self) -> &Streams {
            &self.0
        }
    }

    impl FakeStreams {
        pub fn new(page_size: usize) -> Self {
            Self(std::sync::Arc::new(Streams {
                page_size,
                ..Streams::default()
            }))
        }

        pub fn add_shard(&self, id: &str, parent: Option<&str>) {
            let mut g = self.shards.lock().unwrap();
            g.0.push(id.to_string());
            g.1.insert(
                id.to_string(),
                Shard {
                    parent: parent.map(str::to_string),
                    ..Shard::default()
                },
            );
        }

        /// Writes `n` records to `shard`; returns their sequence numbers.
        pub fn write(&self, shard: &str, n: usize) -> Vec<u64> {
            self.write_sized(shard, n, None)
        }

        /// Writes `n` records to `shard` whose new image carries a string
        /// attribute `blob` of `blob` bytes (`None`: no image); returns
        /// their sequence numbers.
        pub fn write_sized(&self, shard: &str, n: usize, blob: Option<usize>) -> Vec<u64> {
            let mut g = self.shards.lock().unwrap();
            let s = g.1.get_mut(shard).expect("shard exists");
            assert!(!s.closed, "write to a closed shard");
            let mut seq = self.next_seq.lock().unwrap();
            let at = self
                .clock_ms
                .lock()
                .unwrap()
                .unwrap_or_else(|| chrono::Utc::now().timestamp_millis());
            (0..n)
                .map(|_| {
                    *seq += 1;
                    s.records.push(*seq);
                    s.created.insert(*seq, at);
                    if let Some(len) = blob {
                        s.blob.insert(*seq, len);
                    }
                    *seq
                })
                .collect()
        }

        /// The shard leaves the stream (past the retention after it closed).
        pub fn remove_shard(&self, shard: &str) {
            let mut g = self.shards.lock().unwrap();
            g.0.retain(|s| s != shard);
            g.1.remove(shard);
        }

        /// Trims the records of `shard` below sequence number `seq`.
        pub fn trim_below(&self, shard: &str, seq: u64) {
            let mut g = self.shards.lock().unwrap();
            let s = g.1.get_mut(shard).unwrap();
            s.records.retain(|r| *r >= seq);
            s.trimmed_below = seq;
            s.generation += 1;
        }

        pub fn close(&self, shard: &str) {
            self.shards.lock().unwrap().1.get_mut(shard).unwrap().closed = true;
        }

        /// Waits for a permit of the [`Streams::hang`] gate, if set.
        async fn wait_if_hung(&self) {
            let gate = self.hang.lock().unwrap().clone();
            if let Some(gate) = gate {
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
            }
        }
    }

    pub fn seq_string(seq: u64) -> String {
        format!("{seq:021}")
    }

    impl StreamsApi for FakeStreams {
        async fn describe_stream(
            &self,
            _stream_arn: &str,
            exclusive_start_shard_id: Option<&str>,
        ) -> anyhow::Result<ShardPage> {
            self.wait_if_hung().await;
            *self.describe_calls.lock().unwrap() += 1;
            anyhow::ensure!(
                !*self.describe_fails.lock().unwrap(),
                "DescribeStream: InternalServerError (injected)"
            );
            let g = self.shards.lock().unwrap();
            let start = match exclusive_start_shard_id {
                Some(id) => g.0.iter().position(|s| s == id).map_or(0, |p| p + 1),
                None => 0,
            };
            let page: Vec<ShardInfo> =
                g.0.iter()
                    .skip(start)
                    .take(self.page_size)
                    .map(|id| ShardInfo {
                        shard_id: id.clone(),
                        parent_shard_id: g.1[id].parent.clone(),
                    })
                    .collect();
            let more = start + page.len() < g.0.len();
            Ok(ShardPage {
                last_evaluated_shard_id: if more {
                    page.last().map(|s| s.shard_id.clone())
                } else {
                    None
                },
                shards: page,
            })
        }

        async fn shard_iterator(
            &self,
            _stream_arn: &str,
            shard_id: &str,
            position: &IteratorPosition,
        ) -> anyhow::Result<Option<String>> {
            self.wait_if_hung().await;
            anyhow::ensure!(
                !*self.reads_fail.lock().unwrap(),
                "GetShardIterator: InternalServerError (injected)"
            );
            let g = self.shards.lock().unwrap();
            let s = g.1.get(shard_id).context("no such shard")?;
            let index = match position {
                IteratorPosition::TrimHorizon => 0,
                IteratorPosition::Latest => s.records.len(),
                IteratorPosition::AfterSequenceNumber(seq) => {
                    let seq: u64 = seq.parse()?;
                    if seq + 1 < s.trimmed_below {
                        return Err(Trimmed(shard_id.to_string()).into());
                    }
                    s.records
                        .iter()
                        .position(|r| *r > seq)
                        .unwrap_or(s.records.len())
                }
            };
            Ok(Some(format!("{shard_id}/{index}/{}", s.generation)))
        }

        async fn get_records(&self, iterator: &str, limit: usize) -> anyhow::Result<RecordsPage> {
            self.wait_if_hung().await;
            anyhow::ensure!(
                !*self.reads_fail.lock().unwrap(),
                "GetRecords: InternalServerError (injected)"
            );
            let (rest, generation) = iterator.rsplit_once('/').context("bad iterator")?;
            let (shard_id, index) = rest.rsplit_once('/').context("bad iterator")?;
            let index: usize = index.parse()?;
            *self
                .get_calls
                .lock()
                .unwrap()
                .entry(shard_id.to_string())
                .or_default() += 1;
            let g = self.shards.lock().unwrap();
            let s = g.1.get(shard_id).context("ResourceNotFoundException")?;
            anyhow::ensure!(
                generation.parse::<u64>()? == s.generation,
                "ExpiredIteratorException"
            );
            let records: Vec<EventRecord> = s
                .records
                .iter()
                .skip(index)
                .take(limit)
                .map(|seq| {
                    let mut change = StreamRecord::default();
                    change.sequence_number = Some(seq_string(*seq));
                    change.approximate_creation_date_time =
                        DateTime::from_timestamp_millis(s.created[seq]).unwrap_or_default();
                    if let Some(len) = s.blob.get(seq) {
                        let image: HashMap<String, serde_dynamo::AttributeValue> = [
                            (
                                "pk".to_string(),
                                serde_dynamo::AttributeValue::S(format!("k{seq}")),
                            ),
                            (
                                "blob".to_string(),
                                serde_dynamo::AttributeValue::S("x".repeat(*len)),
                            ),
                        ]
                        .into();
                        change.keys = HashMap::from([(
                            "pk".to_string(),
                            serde_dynamo::AttributeValue::S(format!("k{seq}")),
                        )])
                        .into();
                        change.new_image = image.into();
                    }
                    let mut r = EventRecord::default();
                    r.event_id = format!("e{seq}");
                    r.event_name = "INSERT".to_string();
                    r.change = change;
                    r
                })
                .collect();
            let next = index + records.len();
            let next_iterator = if s.closed && next == s.records.len() {
                None
            } else {
                Some(format!("{shard_id}/{next}/{}", s.generation))
            };
            Ok(RecordsPage {
                records,
                next_iterator,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeStreams;
    use super::*;

    #[tokio::test]
    async fn list_shards_follows_pagination_across_250_shards() {
        let api = FakeStreams::new(100);
        for i in 0..250 {
            api.add_shard(&format!("shard-{i:04}"), None);
        }
        let shards = list_shards(&api, "arn").await.unwrap();
        assert_eq!(shards.len(), 250);
        assert_eq!(shards[0].shard_id, "shard-0000");
        assert_eq!(shards[249].shard_id, "shard-0249");
        assert_eq!(*api.describe_calls.lock().unwrap(), 3);
    }

    fn dynoxide_record() -> dynoxide::actions::get_records::Record {
        use dynoxide::actions::get_records::{Record, StreamRecord, UserIdentity};
        use dynoxide::types::AttributeValue as D;
        let keys: dynoxide::types::Item = [
            ("pk".to_string(), D::S("A".into())),
            ("sk".to_string(), D::S("B".into())),
        ]
        .into();
        let mut old = keys.clone();
        old.insert("n".into(), D::N("3".into()));
        old.insert("l".into(), D::L(vec![D::BOOL(true), D::NULL(true)]));
        old.insert(
            "m".into(),
            D::M([("x".to_string(), D::SS(vec!["a".into()]))].into()),
        );
        old.insert("b".into(), D::B(vec![1, 2, 3]));
        Record {
            event_id: "e1".into(),
            event_name: "REMOVE".into(),
            event_version: "1.1".into(),
            event_source: "aws:dynamodb".into(),
            aws_region: "dynoxide".into(),
            dynamodb: StreamRecord {
                keys,
                new_image: None,
                old_image: Some(old),
                sequence_number: "000000000000000000042".into(),
                size_bytes: 10,
                stream_view_type: "NEW_AND_OLD_IMAGES".into(),
                approximate_creation_date_time: 1_700_000_000.5,
            },
            user_identity: Some(UserIdentity {
                identity_type: "Service".into(),
                principal_id: "dynamodb.amazonaws.com".into(),
            }),
        }
    }

    #[test]
    fn embedded_records_convert_as_the_lambda_event_json_would() {
        let mut via_json: EventRecord =
            serde_json::from_value(serde_json::to_value(dynoxide_record()).unwrap()).unwrap();
        let direct = embedded_record(dynoxide_record());
        // The event's serde reads a fraction of a second as microseconds
        // (`.5` as 500 us); the direct conversion keeps the 500 ms.
        assert_eq!(
            direct
                .change
                .approximate_creation_date_time
                .timestamp_millis(),
            1_700_000_000_500
        );
        via_json.change.approximate_creation_date_time =
            direct.change.approximate_creation_date_time;
        assert_eq!(direct, via_json);
        let id = direct.user_identity.expect("TTL identity kept");
        assert_eq!(id.type_, "Service");
        assert_eq!(id.principal_id, "dynamodb.amazonaws.com");
    }
}
