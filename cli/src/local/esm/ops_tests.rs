//! The mapping as operators run it: a panicking invocation is a failed
//! invocation of its shard only; the iterator age of a shard stuck on a
//! failing record keeps rising; leases judged by their counter, observed on
//! each process's own clock (never by comparing wall clocks across hosts).
//! No timed assertions: counts, orders, the fake's clock and `time_scale`.

use super::coordination::{DESCRIBE_RETRY_CAP, DESCRIBE_RETRY_MIN};
use super::test_support::{recorder, seqs};
use super::*;
use crate::local::shards::fake::{seq_string, FakeStreams};

/// Panics on every batch holding `poison` (as a bug in a rule would);
/// records the batches it completes.
fn panicking(calls: Arc<Mutex<Vec<Vec<u64>>>>, poison: u64) -> Handler {
    Arc::new(move |event: Event| {
        let calls = calls.clone();
        Box::pin(async move {
            let got = seqs(&event);
            calls.lock().unwrap().push(got.clone());
            assert!(!got.contains(&poison), "a bug in a rule (injected)");
            Ok(DynamoDbEventResponse::default())
        })
    })
}

#[tokio::test]
async fn a_panicking_record_is_given_up_after_the_deployed_retries_while_other_shards_go_on() {
    let api = FakeStreams::new(100);
    api.add_shard("bad", None);
    api.add_shard("good", None);
    let bad = api.write("bad", 4);
    let good = api.write("good", 6);
    let poison = bad[2];
    let calls = Arc::new(Mutex::new(Vec::new()));
    let mut c = MappingConfig::new("m");
    c.batch_size = 4;
    c.max_retries = 2;
    c.bisect_on_error = true;
    c.time_scale = 0.0;
    let mut m = StreamMapping::with_api(c, api, "arn".into(), panicking(calls.clone(), poison));
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    let got = calls.lock().unwrap().clone();
    let done: Vec<u64> = got
        .iter()
        .filter(|b| !b.contains(&poison))
        .flatten()
        .copied()
        .collect();
    let good_done: Vec<u64> = done.iter().copied().filter(|s| good.contains(s)).collect();
    assert_eq!(good_done, good, "the other shard went on");
    let bad_done: Vec<u64> = done.iter().copied().filter(|s| bad.contains(s)).collect();
    assert_eq!(bad_done, vec![bad[0], bad[1], bad[3]]);
    // Alone, the poison record panics once and twice more (the retries).
    let alone = got.iter().filter(|b| **b == vec![poison]).count();
    assert_eq!(alone, 3, "{got:?}");
    let failed = m.on_failure.take();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].condition, Condition::RetryAttemptsExhausted);
    assert_eq!(failed[0].start_sequence_number, seq_string(poison));
    assert_eq!(failed[0].end_sequence_number, seq_string(poison));
    assert_eq!(failed[0].function_error.as_deref(), Some("Unhandled"));
    assert!(
        failed[0].reason.contains("panicked"),
        "{}",
        failed[0].reason
    );
    assert_eq!(m.checkpoint("bad"), Some(seq_string(bad[3])));
}

/// DescribeStream refused for a while (throttled, 5xx): each failure is
/// counted and the next call waits longer (1 s doubling, jittered, at most
/// 30 s), so a fleet of processes does not hammer it; once it answers,
/// discovery resumes and the pause starts over. It used to be called again
/// every second, however long it failed. No timed assertion: the bound on
/// the calls holds however slowly the rounds run.
#[tokio::test]
async fn a_failing_describe_stream_is_called_with_a_growing_pause_then_discovery_resumes() {
    const SCALE: f64 = 0.01;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write("s", 3);
    *api.describe_fails.lock().unwrap() = true;
    let (handler, calls) = recorder();
    let mut c = MappingConfig::new("m");
    c.discovery_interval = Duration::from_secs(3600);
    // 1 s is 10 ms here: two seconds of rounds are 200 s of failing.
    c.time_scale = SCALE;
    let mut m = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        m.poll_once().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let failing_for = started.elapsed().div_f64(SCALE);
    let described = *api.describe_calls.lock().unwrap();
    // The calls a backoff of at least 1, 2, 4, 8, 15, 15... s (jitter
    // only lengthens a pause) leaves room for in that time.
    let mut bound = 1;
    let mut waited = Duration::ZERO;
    while waited <= failing_for {
        waited += DESCRIBE_RETRY_MIN
            .saturating_mul(1 << (bound - 1).min(16))
            .min(DESCRIBE_RETRY_CAP);
        bound += 1;
    }
    assert!(
        (2..=bound).contains(&described),
        "{described} DescribeStream calls in {failing_for:?} of failing (at most {bound})"
    );
    assert_eq!(
        m.stats().describe_failures.load(Ordering::Relaxed),
        described as u64,
        "each failure counted"
    );
    assert!(calls.lock().unwrap().is_empty(), "no shard known yet");
    // DescribeStream answers again: discovery resumes after the pause.
    *api.describe_fails.lock().unwrap() = false;
    m.config_mut().time_scale = 0.0;
    m.next_discovery = None;
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), written, "the shard was read");
    assert!(m.describe.is_none(), "the backoff is reset by a success");
    // Failing again, the pause starts over from 1 s.
    *api.describe_fails.lock().unwrap() = true;
    m.config_mut().time_scale = 1.0;
    m.next_discovery = None;
    let before = Instant::now();
    m.poll_once().await.unwrap();
    assert_eq!(m.describe.as_ref().map(|d| d.failures), Some(1));
    let next = m.next_discovery.expect("a pause");
    assert!(next >= before + DESCRIBE_RETRY_MIN, "{:?}", next - before);
    assert!(next <= Instant::now() + DESCRIBE_RETRY_MIN * 2);
}

mod leases {
    use super::super::test_support::{lease_table, ledger, LEDGER};
    use super::*;
    /// A guard against hanging: what a test waits for arrives long before.
    const GUARD: Duration = Duration::from_secs(40);

    fn idle() -> Handler {
        Arc::new(|_event: Event| Box::pin(async { Ok(DynamoDbEventResponse::default()) }))
    }

    /// A process whose wall clock is `skew_ms` ahead of the host's.
    fn process(
        api: &FakeStreams,
        client: &aws_sdk_dynamodb::Client,
        owner: &str,
        skew_ms: i64,
        ttl: Duration,
    ) -> StreamMapping<FakeStreams> {
        let mut c = MappingConfig::new("m");
        c.time_scale = 0.0001;
        c.discovery_interval = Duration::ZERO;
        let mut cp = CheckpointConfig::new(client.clone(), LEDGER);
        cp.owner = owner.to_string();
        cp.lease_ttl = ttl;
        cp.clock_skew_ms = skew_ms;
        c.checkpoints = Some(cp);
        StreamMapping::with_api(c, api.clone(), "arn".into(), idle())
    }

    async fn poll(m: &mut StreamMapping<FakeStreams>) {
        m.poll_once().await.unwrap();
    }

    /// Shard -> holder, as the ledger says.
    async fn holders(client: &aws_sdk_dynamodb::Client) -> BTreeMap<String, String> {
        lease_table(client, "reader")
            .list()
            .await
            .unwrap()
            .into_iter()
            .filter_map(|i| Some((i.shard_id, i.owner?)))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_processes_with_clocks_60_s_apart_share_the_shards_without_stealing_live_leases() {
        let (_engine, client) = ledger().await;
        let api = FakeStreams::new(100);
        for i in 0..10 {
            api.add_shard(&format!("shard-{i}"), None);
        }
        let ttl = Duration::from_secs(2);
        let mut slow = process(&api, &client, "slow", 0, ttl);
        let mut fast = process(&api, &client, "fast", 60_000, ttl);
        // They share the shards ...
        tokio::time::timeout(GUARD, async {
            while slow.shards().len() != 5 || fast.shards().len() != 5 {
                poll(&mut slow).await;
                poll(&mut fast).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the two processes never shared the shards");
        let shared = holders(&client).await;
        // ... and keep them over three lease durations: renewals keep every
        // lease live whatever the clocks say, and nothing is stolen.
        let until = Instant::now() + ttl * 3;
        let mut rounds = 0;
        while Instant::now() < until {
            poll(&mut slow).await;
            poll(&mut fast).await;
            rounds += 1;
            assert_eq!(
                (slow.shards().len(), fast.shards().len()),
                (5, 5),
                "round {rounds}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(holders(&client).await, shared, "no lease changed hands");
        let counters: Vec<i64> = lease_table(&client, "reader")
            .list()
            .await
            .unwrap()
            .iter()
            .map(|i| i.counter)
            .collect();
        assert!(
            counters.iter().all(|c| *c > 1),
            "renewals move the counter: {counters:?}"
        );
        // The fast-clock process dies without releasing: the slow-clock one
        // takes its shards once their counters stop moving (its own clock
        // says the dead leases' expiry is a minute away).
        drop(fast);
        tokio::time::timeout(GUARD, async {
            while slow.shards().len() != 10 {
                poll(&mut slow).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the dead process's leases were never taken");
        assert!(holders(&client).await.values().all(|o| o == "slow"));
    }
}

/// spec15 #12: `run --from-start` beside a process that holds the stream's
/// one shard replayed nothing and said nothing. It stands by, lists the
/// shard as a replay waiting (said once in the log); once the holder lets
/// the shard go, it takes it, replays from the start and the list empties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_start_beside_the_holder_of_a_shard_says_its_replay_waits() {
    let (_engine, client) = super::test_support::ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write("s", 7);
    let ttl = Duration::from_secs(60);
    let (handler, _) = recorder();
    let mut a = StreamMapping::with_api(
        super::test_support::config(&client, "a", ttl),
        api.clone(),
        "arn".into(),
        handler,
    );
    a.poll_once().await.unwrap();
    a.poll_once().await.unwrap();
    assert_eq!(a.shards(), ["s"]);
    let (handler, replayed) = recorder();
    let mut c = super::test_support::config(&client, "b", ttl);
    c.checkpoints.as_mut().expect("leases").from_start = true;
    let mut b = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    b.poll_once().await.unwrap();
    b.poll_once().await.unwrap();
    assert!(b.shards().is_empty(), "b stands by");
    assert_eq!(b.stats().replays_waiting(), ["s"], "its replay waits, said");
    // `a` stops as `run` does, letting its lease go: b replays.
    release_all(std::slice::from_mut(&mut a)).await;
    while b.shards().is_empty() {
        b.poll_once().await.unwrap();
    }
    for _ in 0..10 {
        b.poll_once().await.unwrap();
    }
    assert_eq!(*replayed.lock().unwrap(), written, "every record again");
    assert!(b.stats().replays_waiting().is_empty());
}
