//! The mapping's own unit tests: shard stepping, quiet detection, parsing.

use super::*;
use crate::local::shards::fake::{seq_string, FakeStreams};

/// A handler that records the sequence numbers it is given, in order,
/// and fails the record named by `fail` (once per listed attempt).
fn recording(seen: Arc<Mutex<Vec<String>>>) -> Handler {
    Arc::new(move |event: Event| {
        let seen = seen.clone();
        Box::pin(async move {
            seen.lock()
                .unwrap()
                .extend(event.records.iter().map(seq_of));
            Ok(DynamoDbEventResponse::default())
        })
    })
}

/// A handler that records the sequence numbers it is given and reports
/// the record `poison` as the batch's failure every time it meets it.
fn failing_at(poison: String, seen: &Arc<Mutex<Vec<String>>>) -> Handler {
    let log = seen.clone();
    Arc::new(move |event: Event| {
        let log = log.clone();
        let poison = poison.clone();
        Box::pin(async move {
            let mut seen = log.lock().unwrap();
            for r in &event.records {
                if seq_of(r) == poison {
                    return Ok(shared::batch::failure_response(&poison));
                }
                seen.push(seq_of(r));
            }
            Ok(DynamoDbEventResponse::default())
        })
    })
}

fn mapping(api: FakeStreams, seen: &Arc<Mutex<Vec<String>>>) -> StreamMapping<FakeStreams> {
    let mut config = MappingConfig::new("test");
    config.batch_size = 10;
    StreamMapping::with_api(config, api, "arn".into(), recording(seen.clone()))
}

fn seen_u64(seen: &Arc<Mutex<Vec<String>>>) -> Vec<u64> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn a_checkpoint_trimmed_from_the_stream_resumes_at_trim_horizon_and_says_so() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    api.write("s", 10);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    m.poll_once().await.unwrap();
    assert_eq!(seen_u64(&seen), (1..=10).collect::<Vec<u64>>());
    // Away longer than the retention: 30 more written, all below 25 gone.
    m.api().write("s", 30);
    m.api().trim_below("s", 25);
    // The first poll meets the expired iterator; the next ones resume.
    let _ = m.poll_once().await;
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let mut want: Vec<u64> = (1..=10).collect();
    want.extend(25..=40);
    assert_eq!(seen_u64(&seen), want, "resumed at the trim horizon");
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1, "the loss is reported");
    assert!(failed[0].reason.contains("trimmed"));
    assert_eq!(failed[0].start_sequence_number, seq_string(10));
}

#[tokio::test]
async fn a_parent_is_processed_to_its_end_before_either_child() {
    let api = FakeStreams::new(100);
    api.add_shard("parent", None);
    api.write("parent", 25);
    api.close("parent");
    // Children listed (and written) before the parent is read.
    api.add_shard("child-a", Some("parent"));
    api.add_shard("child-b", Some("parent"));
    let a = api.write("child-a", 15);
    let b = api.write("child-b", 12);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    let done = drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(done, 25 + 15 + 12);
    let order = seen_u64(&seen);
    assert_eq!(order.len(), 52, "each record once");
    let parent_last = order.iter().rposition(|s| *s <= 25).unwrap();
    let first_child = order.iter().position(|s| *s > 25).unwrap();
    assert!(
        parent_last < first_child,
        "parent before children: {order:?}"
    );
    // Within each shard, in order.
    for shard in [&a, &b] {
        let got: Vec<u64> = order
            .iter()
            .copied()
            .filter(|s| shard.contains(s))
            .collect();
        assert_eq!(&got, shard);
    }
    assert!(m.shards().is_empty() || m.shards().iter().all(|s| s.starts_with("child")));
}

#[tokio::test]
async fn every_record_of_250_shards_over_three_pages_is_read() {
    let api = FakeStreams::new(100);
    let mut written = Vec::new();
    for i in 0..250 {
        let id = format!("shard-{i:04}");
        api.add_shard(&id, None);
        written.extend(api.write(&id, 2));
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let mut got = seen_u64(&seen);
    got.sort_unstable();
    assert_eq!(got, written);
    assert_eq!(m.shards().len(), 250);
}

#[tokio::test]
async fn drain_ends_when_shards_are_read_out_of_phase() {
    // Two mappings whose shards are read half a polling interval apart:
    // every round then finds one of them waiting for its next read, so
    // no round is without a wait (as 250 shards on a loaded machine).
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (a, b) = (FakeStreams::new(100), FakeStreams::new(100));
    a.add_shard("a", None);
    b.add_shard("b", None);
    let mut ms = [mapping(a, &seen), mapping(b, &seen)];
    ms[0].poll_once().await.unwrap();
    tokio::time::sleep(GET_RECORDS_INTERVAL / 2).await;
    ms[1].poll_once().await.unwrap();
    ms[0].api().write("a", 2);
    ms[1].api().write("b", 3);
    let drained = tokio::time::timeout(Duration::from_secs(20), drain(&mut ms)).await;
    assert_eq!(drained.expect("drain never ended").unwrap(), 5);
    assert_eq!(seen_u64(&seen).len(), 5);
}

#[tokio::test]
async fn a_closed_shard_completes_and_its_successor_is_found_without_waiting_for_the_timer() {
    let api = FakeStreams::new(100);
    api.add_shard("s1", None);
    api.write("s1", 3);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    m.config_mut().discovery_interval = Duration::from_secs(3600);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(m.shards(), vec!["s1".to_string()]);
    // Rollover: s1 closes, s2 (its child) takes the writes.
    m.api().close("s1");
    m.api().add_shard("s2", Some("s1"));
    m.api().write("s2", 4);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(seen_u64(&seen), (1..=7).collect::<Vec<_>>());
    assert_eq!(m.shards(), vec!["s2".to_string()]);
}

#[tokio::test]
async fn new_shards_are_discovered_on_the_timer_not_every_round() {
    let api = FakeStreams::new(100);
    api.add_shard("s1", None);
    api.write("s1", 1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    m.config_mut().discovery_interval = Duration::from_millis(300);
    for _ in 0..5 {
        m.poll_once().await.unwrap();
    }
    assert_eq!(*m.api().describe_calls.lock().unwrap(), 1);
    // A shard appearing beside it (no parent) is picked up at the next tick.
    m.api().add_shard("s9", None);
    m.api().write("s9", 2);
    m.poll_once().await.unwrap();
    assert_eq!(seen_u64(&seen), vec![1]);
    tokio::time::sleep(Duration::from_millis(350)).await;
    m.poll_once().await.unwrap();
    assert_eq!(seen_u64(&seen), vec![1, 2, 3]);
}

/// LATEST is where the stream stood when the mapping was created (as
/// Lambda's event source mapping), not where it stands at the first poll: a
/// record written in between is read, none written before. (Pick'Em's backfill test lost a
/// scoring write that way, now and then: its runtime polled the stream only
/// after the queue consumer had written.)
#[tokio::test]
async fn latest_starts_where_the_stream_stood_when_the_mapping_was_created() {
    let api = FakeStreams::new(100);
    api.add_shard("open", None);
    *api.clock_ms.lock().unwrap() = Some(chrono::Utc::now().timestamp_millis() - 10_000);
    api.write("open", 5);
    *api.clock_ms.lock().unwrap() = None;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    m.config_mut().starting_position = StartingPosition::Latest;
    // Created (the runtime pins LATEST as it builds its mappings).
    m.pin_latest().await;
    // Written after the mapping exists, before it first polls.
    let between = m.api().write("open", 2);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(seen_u64(&seen), between);
}

#[tokio::test]
async fn latest_skips_what_was_there_and_reads_new_shards_from_their_start() {
    let api = FakeStreams::new(100);
    // Written well before the mapping (LATEST keeps a second of slack).
    *api.clock_ms.lock().unwrap() = Some(chrono::Utc::now().timestamp_millis() - 10_000);
    api.add_shard("old", None);
    api.write("old", 5);
    api.close("old");
    api.add_shard("open", Some("old"));
    api.write("open", 5);
    *api.clock_ms.lock().unwrap() = None;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut m = mapping(api, &seen);
    m.config_mut().starting_position = StartingPosition::Latest;
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert!(seen_u64(&seen).is_empty());
    let new = m.api().write("open", 2);
    m.api().close("open");
    m.api().add_shard("next", Some("open"));
    let next = m.api().write("next", 3);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(seen_u64(&seen), [new, next].concat());
}

#[tokio::test]
async fn a_failed_record_is_retried_from_itself_then_sent_to_the_file_destination() {
    let api = FakeStreams::new(100);
    api.add_shard("s1", None);
    api.write("s1", 5);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = failing_at(seq_string(3), &seen);
    let path = std::env::temp_dir().join(format!("esm-failures-{}.jsonl", uuid::Uuid::new_v4()));
    let mut config = MappingConfig::new("test");
    config.retry_delay = Duration::ZERO;
    config.max_retries = 1;
    config.on_failure.file = Some(path.clone());
    let mut m = StreamMapping::with_api(config, api, "arn".into(), handler);
    let done = drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(done, 5);
    assert_eq!(seen_u64(&seen), vec![1, 2, 4, 5]);
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].start_sequence_number, seq_string(3));
    assert_eq!(failed[0].end_sequence_number, seq_string(3));
    let line = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).ok();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(
        v["DDBStreamBatchInfo"]["startSequenceNumber"],
        seq_string(3)
    );
    assert_eq!(v["DDBStreamBatchInfo"]["shardId"], "s1");
    assert_eq!(m.checkpoint("s1"), Some(seq_string(5)));
}

/// A destination that fails (an unwritable file) never blocks the
/// shard: the batch is kept in memory, counted as undelivered (status
/// line, exit code, metric), and the records after it are processed.
#[tokio::test]
async fn a_failing_on_failure_destination_never_stops_the_shard_and_is_counted() {
    let api = FakeStreams::new(100);
    api.add_shard("s1", None);
    api.write("s1", 5);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = failing_at(seq_string(2), &seen);
    let mut config = MappingConfig::new("test");
    config.retry_delay = Duration::ZERO;
    config.max_retries = 1;
    config.on_failure.file = Some(
        std::env::temp_dir()
            .join(format!("no-such-dir-{}", uuid::Uuid::new_v4()))
            .join("failures.jsonl"),
    );
    let mut m = StreamMapping::with_api(config, api, "arn".into(), handler);
    let done = tokio::time::timeout(Duration::from_secs(30), drain(std::slice::from_mut(&mut m)))
        .await
        .expect("the shard is not held by the failing destination")
        .unwrap();
    assert_eq!(done, 5);
    assert_eq!(seen_u64(&seen), vec![1, 3, 4, 5]);
    assert_eq!(m.on_failure.undelivered(), 1);
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1, "kept in memory, reported at exit");
    assert_eq!(failed[0].start_sequence_number, seq_string(2));
    assert_eq!(m.checkpoint("s1"), Some(seq_string(5)));
}

#[test]
fn starting_positions_parse_as_the_flag_spells_them() {
    assert_eq!("trim-horizon".parse(), Ok(StartingPosition::TrimHorizon));
    assert_eq!("TRIM_HORIZON".parse(), Ok(StartingPosition::TrimHorizon));
    assert_eq!("latest".parse(), Ok(StartingPosition::Latest));
    assert!("at-timestamp".parse::<StartingPosition>().is_err());
}
