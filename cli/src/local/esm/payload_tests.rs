//! Lambda's 6 MB payload: a batch ends before the record that would take
//! its event JSON past it (whatever the batch size), a record alone always
//! goes, the rest wait for the next batch in order; checkpoints and bisect
//! work on the cut batch as on any other. Sizes are the serialized events
//! as the handler receives them; no timed assertions.

use super::*;
use crate::local::engine::{ensure_table, sdk_config, LocalEngine};
use crate::local::shards::fake::{seq_string, FakeStreams};

/// Lambda's limit, as the tests state it (not the code's constant).
const SIX_MB: usize = 6 * 1024 * 1024;

/// One invocation as the handler saw it.
#[derive(Debug, Clone)]
struct Call {
    seqs: Vec<String>,
    /// The event's JSON, as Lambda would send it.
    event_bytes: usize,
    /// Its first record's JSON.
    first_record_bytes: usize,
}

type Calls = Arc<Mutex<Vec<Call>>>;

fn call_of(event: &Event) -> Call {
    Call {
        seqs: event.records.iter().map(seq_of).collect(),
        event_bytes: serde_json::to_vec(event).unwrap().len(),
        first_record_bytes: serde_json::to_vec(&event.records[0]).unwrap().len(),
    }
}

/// Records every call; fails (a function error) every batch holding
/// `poison`.
fn recording(calls: Calls, poison: Option<u64>) -> Handler {
    Arc::new(move |event: Event| {
        let calls = calls.clone();
        Box::pin(async move {
            let call = call_of(&event);
            let failed = poison.is_some_and(|p| call.seqs.contains(&seq_string(p)));
            calls.lock().unwrap().push(call);
            if failed {
                return Err("poison record (injected)".into());
            }
            Ok(DynamoDbEventResponse::default())
        })
    })
}

fn config(batch_size: usize) -> MappingConfig {
    let mut c = MappingConfig::new("m");
    c.batch_size = batch_size;
    c.retry_delay = Duration::ZERO;
    c.time_scale = 0.0;
    c
}

fn strings(seqs: &[u64]) -> Vec<String> {
    seqs.iter().copied().map(seq_string).collect()
}

fn sizes(calls: &Calls) -> Vec<usize> {
    calls.lock().unwrap().iter().map(|c| c.seqs.len()).collect()
}

/// The sequence numbers of each call, in order.
fn batches(calls: &Calls) -> Vec<Vec<String>> {
    calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.seqs.clone())
        .collect()
}

/// A mapping of `api` under `c`, its handler recording every call
/// ([`recording`]); the calls.
fn mapping(
    c: MappingConfig,
    api: FakeStreams,
    poison: Option<u64>,
) -> (StreamMapping<FakeStreams>, Calls) {
    let calls: Calls = Arc::default();
    let handler = recording(calls.clone(), poison);
    (
        StreamMapping::with_api(c, api, "arn".into(), handler),
        calls,
    )
}

/// Every event within 6 MB, and every cut as late as it could be: the
/// next batch's first record would have taken the event past 6 MB.
fn assert_cut_at_the_payload(calls: &[Call]) {
    for (i, c) in calls.iter().enumerate() {
        assert!(
            c.event_bytes <= SIX_MB || c.seqs.len() == 1,
            "call {i}: {} records in {} bytes",
            c.seqs.len(),
            c.event_bytes
        );
        if let Some(next) = calls.get(i + 1) {
            // `,` before the next record.
            assert!(
                c.event_bytes + 1 + next.first_record_bytes > SIX_MB,
                "call {i} ended early: {} bytes, the next record {}",
                c.event_bytes,
                next.first_record_bytes
            );
        }
    }
}

#[tokio::test]
async fn a_batch_ends_before_the_record_that_would_take_its_event_past_6_mb() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    // 40 records of ~350 KB: 14 MB, one batch of 100 by count alone.
    let written = api.write_sized("s", 40, Some(350_000));
    let (mut m, calls) = mapping(config(100), api, None);
    // One step: the first batch is cut; the checkpoint is its last record
    // and the others wait, in order.
    let round = m.poll_once().await.unwrap();
    assert_eq!(sizes(&calls), [17]);
    assert_eq!(round.done, 17);
    assert_eq!(round.pending, 23);
    assert_eq!(m.checkpoint("s"), Some(seq_string(written[16])));
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = calls.lock().unwrap().clone();
    assert_eq!(sizes(&calls), [17, 17, 6]);
    assert_cut_at_the_payload(&got);
    assert_eq!(
        batches(&calls).concat(),
        strings(&written),
        "each record once, in order"
    );
    assert_eq!(m.checkpoint("s"), Some(seq_string(written[39])));
}

#[tokio::test]
async fn a_record_alone_past_the_limit_still_goes_alone_and_the_batch_before_it_ends() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let mut written = api.write_sized("s", 1, Some(1_000));
    written.extend(api.write_sized("s", 1, Some(SIX_MB + 10)));
    written.extend(api.write_sized("s", 2, Some(1_000)));
    let (mut m, calls) = mapping(config(100), api, None);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = batches(&calls);
    assert_eq!(
        got,
        [
            strings(&written[0..1]),
            strings(&written[1..2]),
            strings(&written[2..4])
        ]
    );
    assert!(m.on_failure.is_empty());
}

/// Bisect on each error, as Lambda: the batch the payload cut (6 records
/// of ~1 MB, of 10) is what is split, and after the poison record is given
/// up the next batch is cut at the payload again.
#[tokio::test]
async fn bisect_splits_the_batch_the_payload_cut() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write_sized("s", 10, Some(1_000_000));
    let poison = written[3];
    let mut c = config(100);
    c.max_retries = 2;
    c.bisect_on_error = true;
    let (mut m, calls) = mapping(c, api, Some(poison));
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = batches(&calls);
    let w = |r: std::ops::Range<usize>| strings(&written[r]);
    assert_eq!(
        got,
        vec![
            w(0..6),  // cut at the payload; fails: split
            w(0..3),  // ok
            w(3..9),  // cut at the payload again; fails: split
            w(3..6),  // fails: split
            w(3..5),  // fails: split
            w(3..4),  // fails alone
            w(3..4),  // retry 1
            w(3..4),  // retry 2: exhausted, given up
            w(4..10), // the rest, within the payload
        ]
    );
    assert_cut_at_the_payload(&calls.lock().unwrap()[..1]);
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].start_sequence_number, seq_string(poison));
    assert_eq!(failed[0].batch_size, 1);
    assert_eq!(m.checkpoint("s"), Some(seq_string(written[9])));
}

/// The embedded engine's own records (DynamoDB-JSON images, both images
/// of a MODIFY) through the mapping's reader: cut at 6 MB as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_read_from_the_embedded_engine_are_cut_at_6_mb() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let engine = LocalEngine::start("127.0.0.1:0", None)
        .await
        .expect("engine starts");
    let sdk = sdk_config(Some(&engine.endpoint()), 3).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let def = shared::models::find(shared::models::DEFAULT_MODEL)
        .unwrap()
        .table;
    assert!(ensure_table(&client, &def, "big").await.unwrap());
    let arn = stream_arn(&client, "big").await.unwrap();
    // 12 items of ~300 KB, then each rewritten (a MODIFY carries both
    // images): ~11 MB of records.
    for round in ["a", "b"] {
        for i in 0..12 {
            client
                .put_item()
                .table_name("big")
                .item(def.pk, AttributeValue::S(format!("i{i}")))
                .item(def.sk, AttributeValue::S(format!("i{i}")))
                .item("blob", AttributeValue::S(round.repeat(300_000)))
                .send()
                .await
                .unwrap();
        }
    }
    let calls: Calls = Arc::default();
    let mut m = StreamMapping::new(
        config(100),
        aws_sdk_dynamodbstreams::Client::new(&sdk),
        RecordReader::Embedded(engine.database().clone()),
        arn,
        recording(calls.clone(), None),
    );
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = calls.lock().unwrap().clone();
    assert_eq!(got.iter().map(|c| c.seqs.len()).sum::<usize>(), 24);
    assert!(got.len() > 1, "one event of {} bytes", got[0].event_bytes);
    assert_cut_at_the_payload(&got);
    // Sequence numbers of one length (21 digits here): in order as strings.
    let order = batches(&calls).concat();
    assert!(
        order
            .windows(2)
            .all(|w| w[0].len() == w[1].len() && w[0] < w[1]),
        "in order: {order:?}"
    );
    engine.stop().await;
}

/// Lambda gathers records "until it has gathered a full batch, the batching
/// window expires, or the batch reaches the payload limit of 6 MB": a
/// window of an hour does not hold records that already fill 6 MB, and
/// does hold fewer.
#[tokio::test]
async fn a_batching_window_ends_once_the_payload_is_full() {
    let api = FakeStreams::new(100);
    api.add_shard("full", None);
    api.add_shard("light", None);
    let full = api.write_sized("full", 20, Some(350_000));
    api.write_sized("light", 5, Some(350_000));
    let mut c = config(100);
    c.time_scale = 1.0;
    c.batching_window = Duration::from_secs(3600);
    let (mut m, calls) = mapping(c, api, None);
    let round = m.poll_once().await.unwrap();
    let got = batches(&calls);
    assert_eq!(
        got,
        [strings(&full[..17])],
        "only the full shard's batch went"
    );
    assert_eq!(round.pending, 3 + 5);
}
