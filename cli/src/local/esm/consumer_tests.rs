//! The mapping as a production consumer: fenced leases in a real ledger
//! table (the embedded engine) over the in-process fake Streams API (many
//! shards, splits, trims and vanished shards, which the engine cannot
//! produce); the deployed mapping semantics (bisect, timeout, record age).
//! No timed assertions: counts, orders, the fake's clock and `time_scale`.

use std::sync::atomic::AtomicUsize;

use super::test_support::{config, lease_table as table, ledger, seqs};
use super::*;
use crate::local::shards::fake::{seq_string, FakeStreams};

/// The sequence numbers each handler call was given, per call.
type Calls = Arc<Mutex<Vec<Vec<u64>>>>;

/// The ledger, and a stream of one shard, `s`.
async fn one_shard() -> (
    crate::local::engine::LocalEngine,
    aws_sdk_dynamodb::Client,
    FakeStreams,
) {
    let (engine, client) = ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    (engine, client, api)
}

/// A handler that records, per call, the sequence numbers it is given.
fn recording(calls: Calls) -> Handler {
    Arc::new(move |event: Event| {
        let calls = calls.clone();
        Box::pin(async move {
            calls.lock().unwrap().push(seqs(&event));
            Ok(DynamoDbEventResponse::default())
        })
    })
}

fn flat(calls: &Calls) -> Vec<u64> {
    calls.lock().unwrap().iter().flatten().copied().collect()
}

fn leased(
    api: &FakeStreams,
    client: &aws_sdk_dynamodb::Client,
    owner: &str,
    calls: &Calls,
) -> StreamMapping<FakeStreams> {
    StreamMapping::with_api(
        config(client, owner, Duration::from_secs(300)),
        api.clone(),
        "arn".into(),
        recording(calls.clone()),
    )
}

async fn item(client: &aws_sdk_dynamodb::Client, shard: &str) -> LeaseItem {
    table(client, "reader")
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.shard_id == shard)
        .expect("lease item")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_share_60_shards_within_one_of_each_other() {
    let (_engine, client) = ledger().await;
    let api = FakeStreams::new(100);
    let mut written = Vec::new();
    for i in 0..60 {
        let id = format!("shard-{i:02}");
        api.add_shard(&id, None);
        written.extend(api.write(&id, 2));
    }
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut ms: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|o| leased(&api, &client, o, &calls))
        .collect();
    for _ in 0..8 {
        for m in &mut ms {
            m.poll_once().await.unwrap();
        }
    }
    let held: Vec<Vec<String>> = ms.iter().map(|m| m.shards()).collect();
    let counts: Vec<usize> = held.iter().map(Vec::len).collect();
    assert_eq!(counts.iter().sum::<usize>(), 60, "{counts:?}");
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "balanced within one: {counts:?}");
    let all: HashSet<&String> = held.iter().flatten().collect();
    assert_eq!(all.len(), 60, "no shard held twice");
    // The ledger agrees: each shard's lease is its holder's.
    let items = table(&client, "reader").list().await.unwrap();
    for (m, owner) in ms.iter().zip(["a", "b", "c"]) {
        for id in m.shards() {
            let i = items.iter().find(|i| i.shard_id == id).unwrap();
            assert_eq!(i.owner.as_deref(), Some(owner), "{id}");
        }
    }
    // Every record once, though leases moved (checkpoints fenced).
    let mut seen = flat(&calls);
    seen.sort_unstable();
    assert_eq!(seen, written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_reads_the_lease_partition_and_writes_nothing() {
    let (_engine, client, api) = one_shard().await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut active = leased(&api, &client, "a", &calls);
    active.poll_once().await.unwrap();
    let before = item(&client, "s").await;
    let mut standby = leased(&api, &client, "b", &calls);
    for _ in 0..5 {
        standby.poll_once().await.unwrap();
    }
    assert!(standby.shards().is_empty());
    let after = item(&client, "s").await;
    assert_eq!(after.counter, before.counter, "no acquisition attempt won");
    assert_eq!(
        after.updated_at_ms, before.updated_at_ms,
        "the standby wrote nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_with_one_owner_string_cannot_both_checkpoint() {
    let (_engine, client, api) = one_shard().await;
    let first = api.write("s", 10);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut old = leased(&api, &client, "same", &calls);
    old.poll_once().await.unwrap();
    assert_eq!(flat(&calls), first[..5]);
    let old_lease = item(&client, "s").await;
    let (old_token, old_acquisition) = (old_lease.counter, old_lease.acquisition.unwrap());
    // A second process with the same owner string (a rolling deploy).
    let mut new = leased(&api, &client, "same", &calls);
    drain(std::slice::from_mut(&mut new)).await.unwrap();
    assert_eq!(
        flat(&calls),
        first,
        "the newcomer resumed at the checkpoint"
    );
    let later = api.write("s", 5);
    let old_calls = old.invocations();
    for _ in 0..3 {
        old.poll_once().await.unwrap();
    }
    assert_eq!(
        old.invocations(),
        old_calls,
        "the old process stopped the shard"
    );
    assert!(old.shards().is_empty());
    // Its token is fenced off: a checkpoint under it is refused (though
    // it carries the owner string the item holds).
    let old_held = Held {
        token: old_token,
        acquisition: &old_acquisition,
    };
    let err = table(&client, "same")
        .checkpoint("s", &old_held, Some(&seq_string(3)))
        .await
        .unwrap_err();
    assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
    drain(std::slice::from_mut(&mut new)).await.unwrap();
    assert_eq!(
        flat(&calls),
        [first, later.clone()].concat(),
        "each record once"
    );
    assert_eq!(
        item(&client, "s").await.checkpoint.sequence_number,
        Some(seq_string(*later.last().unwrap()))
    );
}

/// A handler that, on its `at`-th call, lets `thief` take the shard's lease
/// before returning success.
fn stolen_during(calls: Calls, client: aws_sdk_dynamodb::Client, at: usize, hang: bool) -> Handler {
    let n = Arc::new(AtomicUsize::new(0));
    Arc::new(move |event: Event| {
        let (calls, client, n) = (calls.clone(), client.clone(), n.clone());
        Box::pin(async move {
            calls.lock().unwrap().push(seqs(&event));
            if n.fetch_add(1, Ordering::SeqCst) + 1 == at {
                let seen = item(&client, "s").await.counter;
                let taken = table(&client, "thief").take("s", Some(seen), false).await;
                assert!(matches!(taken, Ok(Some(_))), "{taken:?}");
                if hang {
                    std::future::pending::<()>().await;
                }
            }
            Ok(DynamoDbEventResponse::default())
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_mid_batch_stops_that_shard_before_its_next_invocation() {
    let (_engine, client, api) = one_shard().await;
    let written = api.write("s", 20);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = config(&client, "a", Duration::from_secs(300));
    c.discovery_interval = Duration::from_secs(3600); // no balancing: the checkpoint finds out
    let mut m = StreamMapping::with_api(
        c,
        api.clone(),
        "arn".into(),
        stolen_during(calls.clone(), client.clone(), 2, false),
    );
    for _ in 0..6 {
        m.poll_once().await.unwrap();
    }
    assert_eq!(m.invocations(), 2, "no invocation after the lease was lost");
    assert!(m.shards().is_empty());
    let stored = item(&client, "s").await;
    assert_eq!(stored.owner.as_deref(), Some("thief"));
    assert_eq!(
        stored.checkpoint.sequence_number,
        Some(seq_string(written[4])),
        "the second batch was not checkpointed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_consume_a_lost_lease_cancels_the_invocation_in_flight() {
    let (_engine, client, api) = one_shard().await;
    let written = api.write("s", 20);
    let calls = Arc::new(Mutex::new(Vec::new()));
    // A short lease: the renewer (every third of it) finds the theft.
    let mut c = config(&client, "a", Duration::from_millis(600));
    c.discovery_interval = Duration::from_secs(3600);
    let m = StreamMapping::with_api(
        c,
        api.clone(),
        "arn".into(),
        stolen_during(calls.clone(), client.clone(), 2, true),
    );
    let stats = m.stats();
    let (tx, run) = consuming(m, Duration::from_secs(3600));
    // The shard task ends on its own (the invocation never returns).
    let ages = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if stats.invocations() == 2 && stats.iterator_ages().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(ages.is_ok(), "the shard stopped");
    tx.send_replace(true);
    let m = run.await.unwrap();
    assert_eq!(m.invocations(), 2);
    assert!(m.shards().is_empty());
    let stored = item(&client, "s").await;
    assert_eq!(stored.owner.as_deref(), Some("thief"));
    assert_eq!(
        stored.checkpoint.sequence_number,
        Some(seq_string(written[4]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpointed_shard_that_vanished_is_reported_once_with_its_range() {
    let (_engine, client) = ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("old", None);
    let old = api.write("old", 10);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let path = std::env::temp_dir().join(format!("vanished-{}.jsonl", uuid::Uuid::new_v4()));
    let mut m1 = leased(&api, &client, "a", &calls);
    m1.poll_once().await.unwrap(); // one batch: checkpoint at the 5th record
    m1.release().await.unwrap();
    // Away longer than the retention: the shard closed, split, and left.
    api.close("old");
    api.add_shard("new", Some("old"));
    let new = api.write("new", 3);
    api.remove_shard("old");
    let mut m2 = leased(&api, &client, "b", &calls);
    m2.config_mut().on_failure.file = Some(path.clone());
    drain(std::slice::from_mut(&mut m2)).await.unwrap();
    let lost = m2.on_failure.take();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].condition, Condition::ShardVanished);
    assert_eq!(lost[0].shard_id, "old");
    assert_eq!(lost[0].start_sequence_number, seq_string(old[4]));
    assert!(lost[0].reason.contains("no longer exists"));
    assert_eq!(m2.on_failure.losses(), 1);
    let line: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(line["requestContext"]["condition"], "ShardVanished");
    assert_eq!(line["DDBStreamBatchInfo"]["shardId"], "old");
    assert_eq!(
        line["DDBStreamBatchInfo"]["startSequenceNumber"],
        seq_string(old[4])
    );
    assert_eq!(flat(&calls), [&old[..5], &new[..]].concat());
    // Reported once: another process finds it closed.
    let mut m3 = leased(&api, &client, "c", &calls);
    m3.poll_once().await.unwrap();
    assert!(m3.on_failure.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latest_is_recorded_at_the_first_start_and_a_restart_skips_nothing() {
    let (_engine, client, api) = one_shard().await;
    *api.clock_ms.lock().unwrap() = Some(now_ms() - 60_000);
    api.write("s", 5); // before the mapping ever started
    *api.clock_ms.lock().unwrap() = None;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut first = leased(&api, &client, "p", &calls);
    first.config_mut().starting_position = StartingPosition::Latest;
    first.poll_once().await.unwrap();
    drop(first); // gone before reading anything (no checkpoint yet)
    let during = api.write("s", 3);
    let mut restarted = leased(&api, &client, "p", &calls);
    restarted.config_mut().starting_position = StartingPosition::Latest;
    drain(std::slice::from_mut(&mut restarted)).await.unwrap();
    assert_eq!(
        flat(&calls),
        during,
        "what came while it was down, nothing older"
    );
}

fn failing_shard_handler(calls: Calls, bad: Vec<u64>, hang: bool) -> Handler {
    Arc::new(move |event: Event| {
        let (calls, bad) = (calls.clone(), bad.clone());
        Box::pin(async move {
            let seqs = seqs(&event);
            let failing = seqs.iter().any(|s| bad.contains(s));
            calls.lock().unwrap().push(seqs);
            if failing {
                if hang {
                    std::future::pending::<()>().await;
                }
                return Err("throttled".into());
            }
            Ok(DynamoDbEventResponse::default())
        })
    })
}

#[tokio::test]
async fn one_failing_shard_does_not_delay_another_nor_does_describe_stream() {
    let api = FakeStreams::new(100);
    api.add_shard("bad", None);
    api.add_shard("good", None);
    let bad = api.write("bad", 5);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.batch_size = 5;
    c.bisect_on_error = false;
    c.time_scale = 0.001; // a 0.25 ms polling interval ...
    c.retry_delay = Duration::from_secs(1_000_000); // ... and a 1000 s retry delay
    c.discovery_interval = Duration::ZERO;
    let mut m = StreamMapping::with_api(
        c,
        api.clone(),
        "arn".into(),
        failing_shard_handler(calls.clone(), bad.clone(), false),
    );
    m.poll_once().await.unwrap();
    *api.describe_fails.lock().unwrap() = true;
    let good = api.write("good", 12);
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let r = m.poll_once().await.unwrap();
        assert!(r.pending >= 5, "the bad shard's batch waits for its retry");
    }
    let got = flat(&calls);
    let good_seen: Vec<u64> = got.iter().copied().filter(|s| good.contains(s)).collect();
    assert_eq!(good_seen, good, "the good shard went on");
    assert_eq!(
        calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.iter().any(|s| bad.contains(s)))
            .count(),
        1,
        "the bad shard waits for its retry"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_consume_a_hanging_shard_does_not_delay_another() {
    let api = FakeStreams::new(100);
    api.add_shard("stuck", None);
    api.add_shard("good", None);
    let stuck = api.write("stuck", 3);
    let good = api.write("good", 30);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.batch_size = 5;
    c.function_timeout = Duration::from_secs(3600);
    c.time_scale = 0.001; // 3.6 s timeout, 0.25 ms polling interval
    let m = StreamMapping::with_api(
        c,
        api.clone(),
        "arn".into(),
        failing_shard_handler(calls.clone(), stuck.clone(), true),
    );
    let stats = m.stats();
    let (tx, run) = consuming(m, Duration::ZERO);
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let seen = flat(&calls);
            if good.iter().all(|g| seen.contains(g)) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the good shard is processed while the other hangs");
    let good_seen: Vec<u64> = all.iter().copied().filter(|s| good.contains(s)).collect();
    assert_eq!(good_seen, good, "in order, once");
    tx.send_replace(true);
    let m = run.await.unwrap();
    assert!(stats.invocations() >= 7);
    assert!(m.shards().is_empty(), "stopped and released");
}

#[tokio::test]
async fn bisect_on_each_error_isolates_the_poison_record_and_retries_count_as_lambda_counts() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write("s", 8);
    let poison = written[5]; // the 6th record
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.batch_size = 8;
    c.max_retries = 2;
    c.bisect_on_error = true;
    c.time_scale = 0.0;
    let mut m = StreamMapping::with_api(
        c,
        api,
        "arn".into(),
        failing_shard_handler(calls.clone(), vec![poison], false),
    );
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = calls.lock().unwrap().clone();
    let w = |r: std::ops::Range<usize>| written[r].to_vec();
    assert_eq!(
        got,
        vec![
            w(0..8), // fails: split on this first error
            w(0..4), // ok
            w(4..8), // fails: split
            w(4..6), // fails: split
            w(4..5), // ok
            w(5..8), // fails: split
            w(5..7), // fails: split
            w(5..6), // fails alone: retry 1 of 2 ...
            w(5..6), // retry 1
            w(5..6), // retry 2: exhausted
            w(6..8), // ok
        ]
    );
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].condition, Condition::RetryAttemptsExhausted);
    assert_eq!(failed[0].start_sequence_number, seq_string(poison));
    assert_eq!(failed[0].end_sequence_number, seq_string(poison));
    assert_eq!(failed[0].batch_size, 1);
    assert_eq!(failed[0].function_error.as_deref(), Some("Unhandled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_past_the_function_timeout_is_cancelled_and_counts_as_failed() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write("s", 3);
    let poison = written[2];
    let started = Arc::new(AtomicUsize::new(0));
    let cancelled = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let handler: Handler = {
        let (started, cancelled, seen) = (started.clone(), cancelled.clone(), seen.clone());
        Arc::new(move |event: Event| {
            let (started, cancelled, seen) = (started.clone(), cancelled.clone(), seen.clone());
            Box::pin(async move {
                let seqs = seqs(&event);
                if seqs.contains(&poison) {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _guard = OnDrop(cancelled);
                    std::future::pending::<()>().await;
                }
                seen.lock().unwrap().extend(seqs);
                Ok(DynamoDbEventResponse::default())
            })
        })
    };
    let mut c = MappingConfig::new("m");
    c.batch_size = 3;
    c.max_retries = 1;
    c.function_timeout = Duration::from_secs(60);
    c.time_scale = 0.005; // a 300 ms timeout; counts unchanged
    c.retry_delay = Duration::ZERO;
    let mut m = StreamMapping::with_api(c, api, "arn".into(), handler);
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    // [1,2,3] times out -> split; [1,2] ok; [3] times out twice -> given up.
    assert_eq!(started.load(Ordering::SeqCst), 3);
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        3,
        "each timed-out call was cancelled"
    );
    assert_eq!(*seen.lock().unwrap(), written[..2]);
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].start_sequence_number, seq_string(poison));
    assert!(
        failed[0].reason.contains("timed out after 60s"),
        "{}",
        failed[0].reason
    );
    assert_eq!(failed[0].function_error.as_deref(), Some("Unhandled"));
}

#[tokio::test]
async fn records_past_the_maximum_record_age_are_given_up_without_an_invocation() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    // Ten minutes old: past a one-hour maximum scaled by 0.01 (36 s).
    *api.clock_ms.lock().unwrap() = Some(now_ms() - 600_000);
    let old = api.write("s", 3);
    *api.clock_ms.lock().unwrap() = None;
    let fresh = api.write("s", 2);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.max_record_age = Some(Duration::from_secs(3600));
    c.time_scale = 0.01;
    let mut m = StreamMapping::with_api(c, api, "arn".into(), recording(calls.clone()));
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(flat(&calls), fresh);
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].condition, Condition::RecordAgeExceeded);
    assert_eq!(failed[0].start_sequence_number, seq_string(old[0]));
    assert_eq!(failed[0].end_sequence_number, seq_string(old[2]));
    assert_eq!(failed[0].batch_size, 3);
    assert_eq!(failed[0].invoke_count, 0);
    assert!(failed[0].first_arrival.is_some());
}

#[tokio::test]
async fn each_shard_is_polled_at_most_four_times_a_second() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.time_scale = 1000.0; // one GetRecords per 250 s: tight rounds read once
    let mut m = StreamMapping::with_api(c, api, "arn".into(), recording(calls));
    let mut waited = 0;
    for _ in 0..20 {
        let r = m.poll_once().await.unwrap();
        waited += usize::from(r.wait.is_some());
    }
    assert_eq!(m.api().get_calls.lock().unwrap()["s"], 1);
    assert_eq!(
        waited, 19,
        "the rounds after the first say when the shard is due"
    );
    assert_eq!(
        *m.api().describe_calls.lock().unwrap(),
        1,
        "DescribeStream on its slow timer"
    );
}

#[tokio::test]
async fn iterator_age_is_the_oldest_record_not_checkpointed_rising_while_it_is_retried() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    api.add_shard("ok", None);
    *api.clock_ms.lock().unwrap() = Some(now_ms() - 90_000);
    let bad = api.write("s", 2);
    api.write("ok", 2);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.time_scale = 0.0;
    c.bisect_on_error = false;
    c.max_retries = 1_000;
    let mut m = StreamMapping::with_api(
        c,
        api,
        "arn".into(),
        failing_shard_handler(calls, vec![bad[0]], false),
    );
    m.poll_once().await.unwrap();
    let first = m.stats().iterator_ages()["s"];
    assert!((90_000..600_000).contains(&first), "{first}");
    assert_eq!(m.stats().iterator_ages()["ok"], 0, "caught up");
    // The shard keeps retrying its failing record and reading empty pages:
    // its age keeps rising (a page's last record would say 0).
    tokio::time::sleep(Duration::from_millis(30)).await;
    m.poll_once().await.unwrap();
    let later = m.stats().iterator_ages()["s"];
    assert!(later >= first + 30, "{first} then {later}");
    // The mapping's age is its oldest shard's, read a moment later (each
    // read takes the clock anew: equal only to the millisecond).
    let mapping_age = m.stats().iterator_age();
    assert!(
        (later..later + 1_000).contains(&mapping_age),
        "{later} then {mapping_age}"
    );
    let emf: serde_json::Value = serde_json::from_str(&iterator_age_emf("m", later, 5)).unwrap();
    assert_eq!(emf["IteratorAge"], later);
    assert_eq!(
        emf["_aws"]["CloudWatchMetrics"][0]["Metrics"][0],
        serde_json::json!({"Name": "IteratorAge", "Unit": "Milliseconds"})
    );
}

/// While a shard cannot be read (GetShardIterator and GetRecords fail),
/// records may wait unread: its age grows from the last read that answered
/// instead of saying "caught up" (ops9 #7: 0 for a 150 s outage), and is 0
/// again once a read answers and nothing waits.
#[tokio::test]
async fn iterator_age_grows_while_a_shard_cannot_be_read() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    api.write("s", 2);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.time_scale = 0.0;
    let mut m = StreamMapping::with_api(c, api, "arn".into(), recording(calls));
    m.poll_once().await.unwrap();
    m.poll_once().await.unwrap();
    assert_eq!(m.stats().iterator_ages()["s"], 0, "read and done");
    *m.api().reads_fail.lock().unwrap() = true;
    m.poll_once().await.unwrap();
    tokio::time::sleep(Duration::from_millis(40)).await;
    m.poll_once().await.unwrap();
    let failing = m.stats().iterator_ages()["s"];
    assert!(failing >= 40, "reads failing for 40 ms: age {failing}");
    assert!(
        m.stats()
            .read_failures
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    *m.api().reads_fail.lock().unwrap() = false;
    m.poll_once().await.unwrap();
    assert_eq!(
        m.stats().iterator_ages()["s"],
        0,
        "read again, nothing waits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_vanishes_while_held_is_let_go_and_reported() {
    let (_engine, client, api) = one_shard().await;
    let written = api.write("s", 10);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut m = leased(&api, &client, "a", &calls);
    m.poll_once().await.unwrap(); // checkpoint at the 5th record
    api.remove_shard("s");
    for _ in 0..4 {
        m.poll_once().await.unwrap();
    }
    assert!(m.shards().is_empty());
    let lost = m.on_failure.take();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].condition, Condition::ShardVanished);
    assert_eq!(lost[0].start_sequence_number, seq_string(written[4]));
}

/// `m` consuming in a task of its own until the returned sender says
/// stop (batches in flight get `grace`); the task returns the mapping.
fn consuming<S: StreamsApi + 'static>(
    mut m: StreamMapping<S>,
    grace: Duration,
) -> (
    watch::Sender<bool>,
    tokio::task::JoinHandle<StreamMapping<S>>,
) {
    let (tx, rx) = watch::channel(false);
    let run = tokio::spawn(async move {
        m.consume(rx, grace).await.unwrap();
        m
    });
    (tx, run)
}

/// A leased mapping of one shard whose handler signals each call and then
/// takes `hold` (forever when `None`).
fn slow(
    api: &FakeStreams,
    client: &aws_sdk_dynamodb::Client,
    hold: Option<Duration>,
    started: Arc<tokio::sync::Notify>,
) -> StreamMapping<FakeStreams> {
    let handler: Handler = Arc::new(move |_event: Event| {
        let started = started.clone();
        Box::pin(async move {
            started.notify_one();
            match hold {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
            Ok(DynamoDbEventResponse::default())
        })
    });
    let mut c = config(client, "a", Duration::from_secs(300));
    c.time_scale = 1.0;
    c.function_timeout = Duration::from_secs(3600);
    StreamMapping::with_api(c, api.clone(), "arn".into(), handler)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_stop_the_batch_in_flight_finishes_within_the_grace_and_no_new_one_starts() {
    let (_engine, client, api) = one_shard().await;
    let written = api.write("s", 10);
    let started = Arc::new(tokio::sync::Notify::new());
    let m = slow(
        &api,
        &client,
        Some(Duration::from_millis(300)),
        started.clone(),
    );
    let (tx, run) = consuming(m, Duration::from_secs(60));
    started.notified().await;
    tx.send_replace(true);
    let m = run.await.unwrap();
    assert_eq!(m.invocations(), 1, "no batch after the stop");
    let stored = item(&client, "s").await;
    assert_eq!(
        stored.checkpoint.sequence_number,
        Some(seq_string(written[4])),
        "the batch in flight finished and was checkpointed"
    );
    assert_eq!(stored.expires_at_ms, 0, "released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_grace_the_batch_in_flight_is_abandoned_without_a_checkpoint() {
    let (_engine, client, api) = one_shard().await;
    api.write("s", 10);
    let started = Arc::new(tokio::sync::Notify::new());
    let m = slow(&api, &client, None, started.clone());
    let (tx, run) = consuming(m, Duration::from_millis(100));
    started.notified().await;
    tx.send_replace(true);
    let m = run.await.unwrap();
    assert_eq!(m.invocations(), 1);
    let stored = item(&client, "s").await;
    assert_eq!(
        stored.checkpoint.sequence_number, None,
        "nothing checkpointed"
    );
    assert_eq!(stored.expires_at_ms, 0, "released all the same");
    // A successor takes it at once and reads the abandoned batch again.
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut next = leased(&api, &client, "b", &calls);
    drain(std::slice::from_mut(&mut next)).await.unwrap();
    assert_eq!(flat(&calls).len(), 10);
}
