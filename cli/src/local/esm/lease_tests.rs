//! Leases whose writes land while their answers are lost (a connection
//! reset after the commit, the SDK's retry of a write that landed): the
//! lone holder keeps its lease, and fencing stays exact. Against the
//! embedded engine through the fault proxy; no timed assertions.

use super::test_support::{config, ledger, recorder, seqs, LEDGER};
use super::*;
use crate::faults::{Fault, FaultProxy};
use crate::local::engine::sdk_config;
use crate::local::shards::fake::{seq_string, FakeStreams};

/// A ledger client through a proxy in front of `engine`, with the SDK
/// making at most `attempts` attempts of a call, checked against `run`'s
/// own grant as `run` checks it by default (the read-back of a write whose
/// answer was lost was denied there, and only there, until the grant had it).
async fn through_proxy(
    engine: &crate::local::engine::LocalEngine,
    attempts: u32,
) -> (FaultProxy, aws_sdk_dynamodb::Client) {
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy");
    let sdk = sdk_config(Some(&proxy.endpoint()), attempts).await;
    let client = aws_sdk_dynamodb::Client::new(&super::test_support::as_runner(&sdk));
    (proxy, client)
}

fn lease_table(client: &aws_sdk_dynamodb::Client, owner: &str) -> LeaseTable {
    super::test_support::lease_table(client, owner)
}

/// Every other UpdateItem of a lone consumer lands and loses its answer
/// (`faults` times): it never stops its shard, and every record is
/// handled once, in order, the checkpoint at the last.
async fn a_lone_consumer_keeps_its_shard_when_answers_are_lost(attempts: u32) {
    const FAULTS: u64 = 8;
    let (engine, _) = ledger().await;
    let (proxy, client) = through_proxy(&engine, attempts).await;
    for _ in 0..FAULTS {
        proxy.inject(Fault::reset("UpdateItem", 1).after_effect().after(1));
    }
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let (handler, calls) = recorder();
    let c = config(&client, "solo", Duration::from_secs(300));
    let mut m = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    let mut written = Vec::new();
    let mut rounds = 0;
    while proxy.injected() < FAULTS {
        rounds += 1;
        assert!(rounds < 5_000, "the faults were not all met");
        if calls.lock().unwrap().len() == written.len() {
            written.extend(api.write("s", 5));
        }
        m.poll_once().await.unwrap();
        assert_eq!(
            m.shards(),
            ["s"],
            "round {rounds} ({} answers lost so far): the lone consumer kept its shard",
            proxy.injected()
        );
    }
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(m.shards(), ["s"], "kept to the end");
    assert_eq!(proxy.injected_after_effect(), FAULTS);
    assert_eq!(
        *calls.lock().unwrap(),
        written,
        "every record once, in order"
    );
    let item = lease_table(&client, "reader")
        .read("s")
        .await
        .unwrap()
        .expect("lease item");
    assert_eq!(item.owner.as_deref(), Some("solo"));
    assert_eq!(
        item.checkpoint.sequence_number,
        Some(seq_string(*written.last().unwrap()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_consumer_keeps_its_shard_when_the_sdk_retries_a_write_that_landed() {
    a_lone_consumer_keeps_its_shard_when_answers_are_lost(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_consumer_keeps_its_shard_when_a_write_that_landed_reported_an_error() {
    a_lone_consumer_keeps_its_shard_when_answers_are_lost(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisition_renewal_and_release_resolve_lost_answers_and_fencing_stays_exact() {
    let (engine, _) = ledger().await;
    for attempts in [1, 3] {
        let (proxy, client) = through_proxy(&engine, attempts).await;
        let shard = format!("s{attempts}");
        let solo = lease_table(&client, "solo");
        // The acquisition lands; its answer is lost.
        proxy.inject(Fault::reset("UpdateItem", 1).after_effect());
        let taken = solo
            .take(&shard, None, false)
            .await
            .unwrap()
            .expect("the acquisition that landed is ours");
        assert_eq!(taken.token, 1);
        let held = Held {
            token: taken.token,
            acquisition: &taken.acquisition,
        };
        // A renewal lands; its answer is lost.
        proxy.inject(Fault::reset("UpdateItem", 1).after_effect());
        let r = solo.renew(&shard, &held).await.unwrap();
        assert_eq!(r.token, 2, "the renewal that landed");
        // A renewal under the stale token (an earlier write whose answer
        // was lost) adopts the counter our own write left and renews.
        let r = solo.renew(&shard, &held).await.unwrap();
        assert_eq!(r.token, 3, "adopted 2, then renewed: {r:?}");
        let item = solo.read(&shard).await.unwrap().unwrap();
        assert_eq!(item.counter, r.token);
        // A second process under the same owner string takes the shard:
        // the first one's writes are refused, whatever its token (even the
        // twin's: the acquisition is part of the condition).
        let twin = lease_table(&client, "solo");
        let stolen = twin.take(&shard, Some(item.counter), false).await.unwrap();
        let stolen = stolen.expect("taken");
        for token in [r.token, stolen.token] {
            let held = Held {
                token,
                acquisition: &taken.acquisition,
            };
            let err = solo.renew(&shard, &held).await.unwrap_err();
            assert!(matches!(err, LeaseError::Lost { .. }), "{err:?}");
        }
        // The twin's release lands and its answer is lost: released.
        proxy.inject(Fault::reset("UpdateItem", 1).after_effect());
        let twin_held = Held {
            token: stolen.token,
            acquisition: &stolen.acquisition,
        };
        twin.release(&shard, &twin_held).await.unwrap();
        let item = solo.read(&shard).await.unwrap().unwrap();
        assert_eq!(item.expires_at_ms, 0, "released");
        assert_eq!(
            item.acquisition.as_deref(),
            Some(stolen.acquisition.as_str())
        );
        assert_eq!(proxy.injected_after_effect(), 3);
    }
}

/// A lone consumer whose lease writes all fail (reset before they reach
/// the ledger) lets its lease run out, and says so (in the log and in
/// `jobstream_leases_lost_total{reason="ran_out"}`): not "another owner
/// reads this shard", which ops9 read with no other process anywhere.
/// Once writes succeed again it takes its own shard back and reads on.
#[tokio::test]
async fn a_lease_that_ran_out_is_reported_as_run_out_not_as_taken() {
    let (engine, _) = ledger().await;
    let (proxy, client) = through_proxy(&engine, 1).await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let (handler, calls) = recorder();
    let c = config(&client, "solo", Duration::from_millis(500));
    let mut m = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    m.poll_once().await.unwrap();
    assert_eq!(m.shards(), ["s"], "taken");
    proxy.inject(Fault::reset("UpdateItem", 0).for_window(Duration::from_secs(600)));
    let mut rounds = 0;
    while !m.shards().is_empty() {
        rounds += 1;
        assert!(rounds < 2_000, "the lease never ran out");
        m.poll_once().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        m.stats().leases_lost(),
        [("taken", 0), ("ran_out", 1), ("vanished", 0)]
    );
    let exposition = crate::local::metrics::Probe {
        streams: vec![m.stats()],
        ..Default::default()
    }
    .render()
    .expect("exposition");
    assert!(
        exposition.contains("jobstream_leases_lost_total{processor=\"m\",reason=\"ran_out\"} 1"),
        "{exposition}"
    );
    proxy.clear();
    let written = api.write("s", 5);
    let mut rounds = 0;
    while calls.lock().unwrap().len() < written.len() {
        rounds += 1;
        assert!(rounds < 2_000, "the shard was never read again");
        m.poll_once().await.unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(m.shards(), ["s"], "its own shard taken back");
    assert_eq!(
        *calls.lock().unwrap(),
        written,
        "every record once, in order"
    );
}

/// The `jobstream_shards` lines of `m`'s exposition.
fn shard_lines(m: &StreamMapping<FakeStreams>) -> Vec<String> {
    let probe = crate::local::metrics::Probe {
        streams: vec![m.stats()],
        ..Default::default()
    };
    probe
        .render()
        .expect("exposition")
        .lines()
        .filter(|l| l.starts_with("jobstream_shards{"))
        .map(str::to_string)
        .collect()
}

/// Two processes, one killed (its lease never released): the survivor's
/// `jobstream_shards` shows the shard another process holds, then as
/// stale while nobody renews it, until the survivor takes it over; an
/// operator's alert on `stale|unheld` sees the gap, which no iterator age
/// series shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_whose_holder_was_killed_shows_as_stale_until_another_takes_it() {
    let (_engine, client) = ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let ttl = Duration::from_millis(1500);
    let mapping = |owner: &str| {
        let mut c = MappingConfig::new("m");
        c.discovery_interval = Duration::ZERO;
        c.time_scale = 0.0001;
        let mut cp = CheckpointConfig::new(client.clone(), LEDGER);
        cp.owner = owner.into();
        cp.lease_ttl = ttl;
        c.checkpoints = Some(cp);
        let handler: Handler =
            Arc::new(|_| Box::pin(async { Ok(DynamoDbEventResponse::default()) }));
        StreamMapping::with_api(c, api.clone(), "arn".into(), handler)
    };
    let mut a = mapping("a");
    a.poll_once().await.unwrap();
    assert_eq!(a.shards(), ["s"]);
    let line =
        |state: &str, n: u64| format!("jobstream_shards{{processor=\"m\",state=\"{state}\"}} {n}");
    assert!(
        shard_lines(&a).contains(&line("held", 1)),
        "{:?}",
        shard_lines(&a)
    );
    let mut b = mapping("b");
    b.poll_once().await.unwrap();
    assert!(b.shards().is_empty(), "b stands by");
    assert!(
        shard_lines(&b).contains(&line("elsewhere", 1)),
        "{:?}",
        shard_lines(&b)
    );
    // `a` is killed: its lease is never renewed nor released.
    drop(a);
    let mut states = Vec::new();
    while b.shards().is_empty() {
        b.poll_once().await.unwrap();
        let lines = shard_lines(&b);
        if states.last() != Some(&lines) {
            states.push(lines);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        states.iter().any(|l| l.contains(&line("stale", 1))),
        "the shard nobody renews is seen: {states:#?}"
    );
    let last = shard_lines(&b);
    for expected in [
        line("held", 1),
        line("stale", 0),
        line("unheld", 0),
        line("elsewhere", 0),
    ] {
        assert!(last.contains(&expected), "{expected} in {last:?}");
    }
}

/// The value of metric `name` in `m`'s EMF lines of a status tick (`None`:
/// no datapoint).
fn emf_value(m: &StreamMapping<FakeStreams>, name: &str) -> Option<u64> {
    m.stats()
        .emf_lines(0)
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("an EMF line is JSON"))
        .find(|v| v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"] == name)
        .map(|v| v[name].as_u64().expect("a count"))
}

/// ops10 #3: `run --emit-metrics` on a standby (it holds no shard) printed
/// `IteratorAge` 0 with every status line, so the CloudWatch lag alarm
/// (Maximum, missing data breaching) saw a steady 0 while nobody read the
/// shard. A process reports `IteratorAge` only for the shards it holds (no
/// datapoint otherwise, as Lambda without invocations), and every process
/// reports `ShardsUnread`: the shards it sees nobody reading (`stale` or
/// `unheld` in `jobstream_shards`), what CloudWatch alarms on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_reports_no_iterator_age_and_every_process_the_shards_nobody_reads() {
    let (_engine, client) = ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let ttl = Duration::from_millis(1500);
    let mapping = |owner: &str| {
        let (handler, _) = recorder();
        let mut c = config(&client, owner, ttl);
        c.batch_size = 100;
        StreamMapping::with_api(c, api.clone(), "arn".into(), handler)
    };
    let mut a = mapping("a");
    a.poll_once().await.unwrap();
    a.poll_once().await.unwrap();
    assert_eq!(a.shards(), ["s"]);
    assert_eq!(
        emf_value(&a, "IteratorAge"),
        Some(0),
        "the holder: caught up"
    );
    let mut b = mapping("b");
    b.poll_once().await.unwrap();
    assert!(b.shards().is_empty(), "b stands by");
    assert_eq!(
        emf_value(&b, "IteratorAge"),
        None,
        "a standby reads no shard"
    );
    assert_eq!(emf_value(&a, "ShardsUnread"), Some(0));
    assert_eq!(emf_value(&b, "ShardsUnread"), Some(0), "a reads it");
    // `a` is killed: nobody renews its lease until b takes the shard over.
    drop(a);
    let mut unread = Vec::new();
    while b.shards().is_empty() {
        b.poll_once().await.unwrap();
        if b.shards().is_empty() {
            assert_eq!(emf_value(&b, "IteratorAge"), None, "b holds no shard yet");
        }
        let n = emf_value(&b, "ShardsUnread");
        if unread.last() != Some(&n) {
            unread.push(n);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        unread.contains(&Some(1)),
        "the shard nobody reads is counted: {unread:?}"
    );
    b.poll_once().await.unwrap();
    assert!(emf_value(&b, "IteratorAge").is_some(), "b reads it now");
    assert_eq!(emf_value(&b, "ShardsUnread"), Some(0));
}

#[test]
fn a_failing_shard_read_is_retried_after_a_pause_doubling_up_to_ten_seconds() {
    let pauses: Vec<u128> = (1..=9).map(|n| read_retry(n).as_millis()).collect();
    assert_eq!(
        pauses,
        [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000]
    );
    assert_eq!(read_retry(u32::MAX), READ_RETRY_MAX);
}

/// During an outage of the stream, each failed read is counted and the
/// next waits longer; once reads succeed the pause is back to Lambda's
/// rate and every record is handled.
#[tokio::test]
async fn an_outage_of_the_stream_is_counted_and_read_with_a_growing_pause() {
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let written = api.write("s", 3);
    *api.reads_fail.lock().unwrap() = true;
    let (handler, calls) = recorder();
    let mut c = MappingConfig::new("m");
    c.discovery_interval = Duration::from_secs(3600);
    // Pauses of minutes: a poll right after a failure is surely within it.
    c.time_scale = 100.0;
    let mut m = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    for failed in 1..=4u32 {
        // The pause has passed (no clock in this test): read again.
        if let Some(s) = m.held.get_mut("s") {
            s.next_get = None;
        }
        let before = Instant::now();
        m.poll_once().await.unwrap();
        let s = &m.held["s"];
        assert_eq!(s.read_failures, failed);
        let next = s.next_get.expect("a pause");
        assert!(
            next >= before + read_retry(failed) * 100,
            "the pause after {failed} failures"
        );
        // Polled again before the pause ends: no read.
        m.poll_once().await.unwrap();
        assert_eq!(
            m.held["s"].read_failures, failed,
            "no read before the pause ends"
        );
    }
    assert_eq!(m.stats().read_failures.load(Ordering::Relaxed), 4);
    *api.reads_fail.lock().unwrap() = false;
    m.config_mut().time_scale = 0.0;
    m.held.get_mut("s").unwrap().next_get = None;
    drain(std::slice::from_mut(&mut m)).await.unwrap();
    assert_eq!(*calls.lock().unwrap(), written);
    assert_eq!(m.held["s"].read_failures, 0);
}

/// The cast of the hung-ledger tests: the ledger (direct, and through a
/// proxy that is made to hang), one shard, and the batches each process
/// handled, under its name.
struct HungLedger {
    _engine: crate::local::engine::LocalEngine,
    direct: aws_sdk_dynamodb::Client,
    proxy: FaultProxy,
    hanging: aws_sdk_dynamodb::Client,
    api: FakeStreams,
    handled: Arc<Mutex<Vec<(&'static str, u64)>>>,
}

/// The hung-ledger tests' lease, and how long they wait for a step.
const TTL: Duration = Duration::from_secs(3);
const GUARD: Duration = Duration::from_secs(15);

impl HungLedger {
    async fn new() -> Self {
        let (engine, direct) = ledger().await;
        // The ledger client as `jobstream run` builds it.
        let (proxy, hanging) = through_proxy(&engine, 5).await;
        let api = FakeStreams::new(100);
        api.add_shard("s", None);
        Self {
            _engine: engine,
            direct,
            proxy,
            hanging,
            api,
            handled: Arc::default(),
        }
    }

    /// A process's mapping, its ledger calls through `client`, recording
    /// each batch it handles under `process`.
    fn mapping(
        &self,
        client: &aws_sdk_dynamodb::Client,
        process: &'static str,
    ) -> StreamMapping<FakeStreams> {
        let handled = self.handled.clone();
        let handler: Handler = Arc::new(move |event: Event| {
            handled
                .lock()
                .unwrap()
                .extend(seqs(&event).into_iter().map(|s| (process, s)));
            Box::pin(async { Ok(DynamoDbEventResponse::default()) })
        });
        StreamMapping::with_api(
            config(client, process, TTL),
            self.api.clone(),
            "arn".into(),
            handler,
        )
    }

    /// The sequence numbers `process` handled.
    fn by(&self, process: &str) -> Vec<u64> {
        self.handled
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| *p == process)
            .map(|(_, s)| *s)
            .collect()
    }

    /// From now on the ledger never answers the calls through the proxy;
    /// the gate that lets them go at the end.
    fn hang(&self) -> Arc<tokio::sync::Semaphore> {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        for op in ["UpdateItem", "Query", "GetItem"] {
            self.proxy.inject(Fault::held(op, u32::MAX, gate.clone()));
        }
        gate
    }

    /// Five more records, and process b (its ledger direct) polling until
    /// it handled them: b, and those records.
    async fn b_takes_over(&self) -> (StreamMapping<FakeStreams>, Vec<u64>) {
        let second = self.api.write("s", 5);
        let mut b = self.mapping(&self.direct, "b");
        tokio::time::timeout(GUARD, async {
            while self.by("b") != second {
                b.poll_once().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("b never took the shard over");
        (b, second)
    }
}

/// The ledger hangs (it accepts the lease calls of a process and never
/// answers them) while that process holds a shard: each lease call gives up
/// within a third of the lease duration, so the process gives the shard up
/// once its lease ran out and another process takes it over. It used to sit
/// in one renewal for the SDK's 40 s call budget (two lease durations),
/// its shard stalled. A guard, not a measurement: the lease is 3 s; the
/// stalled process came back after 40 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_ledger_does_not_hold_a_shard_past_its_lease() {
    let t = HungLedger::new().await;
    let mut a = t.mapping(&t.hanging, "a");
    let first = t.api.write("s", 5);
    tokio::time::timeout(GUARD, async {
        while t.by("a") != first {
            a.poll_once().await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a never read its shard");
    assert_eq!(a.shards(), ["s"]);
    let gate = t.hang();
    let a = tokio::spawn(async move {
        while !a.shards().is_empty() {
            a.poll_once().await.unwrap();
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        a
    });
    let (b, second) = t.b_takes_over().await;
    let a = tokio::time::timeout(GUARD, a)
        .await
        .expect("a lease call held the shard loop past the lease")
        .unwrap();
    assert!(a.shards().is_empty(), "a gave the shard up");
    assert_eq!(b.shards(), ["s"]);
    let item = lease_table(&t.direct, "reader")
        .read("s")
        .await
        .unwrap()
        .expect("lease item");
    assert_eq!(item.owner.as_deref(), Some("b"));
    assert_eq!(
        item.checkpoint.sequence_number,
        Some(seq_string(*second.last().unwrap()))
    );
    gate.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
}

/// The same under `consume` (how `jobstream run` runs a mapping: a task per
/// shard, the renewer beside them): the hung renewal holds the lock the
/// shard's checkpoints take, and a hung coordination the loop that drops
/// lost leases; both now end within a third of the lease, and the process
/// reports the shard no longer held while the ledger is still hung.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_consume_a_hung_ledger_does_not_hold_a_shard_past_its_lease() {
    let t = HungLedger::new().await;
    let mut a = t.mapping(&t.hanging, "a");
    let a_stats = a.stats();
    let (stop, stopped) = watch::channel(false);
    let a = tokio::spawn(async move {
        a.consume(stopped, Duration::from_secs(1)).await.unwrap();
    });
    let first = t.api.write("s", 5);
    tokio::time::timeout(GUARD, async {
        while t.by("a") != first {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a never read its shard");
    assert_eq!(a_stats.leases_held(), 1);
    let gate = t.hang();
    t.b_takes_over().await;
    tokio::time::timeout(GUARD, async {
        while a_stats.leases_held() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a hung lease call kept a holding the shard past its lease");
    stop.send_replace(true);
    tokio::time::timeout(GUARD, a)
        .await
        .expect("a stopped within its grace")
        .unwrap();
    gate.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
}

/// What the invocation of [`a_lease_that_runs_out_cancels_the_invocation_in_flight`]
/// did: its store calls (retries of a write that keeps failing), and
/// whether it ended by returning or was dropped (cancelled) first.
#[derive(Default)]
struct InFlight {
    started: std::sync::atomic::AtomicBool,
    store_calls: AtomicU64,
    returned: std::sync::atomic::AtomicBool,
    dropped: std::sync::atomic::AtomicBool,
}

/// Sets `dropped` when the invocation's future is dropped before it
/// returned.
struct DropWitness(Arc<InFlight>);

impl Drop for DropWitness {
    fn drop(&mut self) {
        if !self.0.returned.load(Ordering::SeqCst) {
            self.0.dropped.store(true, Ordering::SeqCst);
        }
    }
}

/// ops10 #4: the holder's ledger writes fail (503) while its handler runs
/// a long invocation (a write it retries for the rest of its call budget,
/// then fails): once the lease runs out, the invocation is cancelled at
/// once (its future dropped, no store call after), its batch is not
/// checkpointed and not split (no failure handled), and the shard is
/// given up. It used to run on for the rest of its 40 s budget, then
/// bisect the batch, while another process held the shard. Under
/// `consume`, as `jobstream run` runs it; the handler would retry past
/// its 40 s budget, the guard is 15 s, the lease 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_runs_out_cancels_the_invocation_in_flight() {
    const TTL: Duration = Duration::from_secs(2);
    const GUARD: Duration = Duration::from_secs(15);
    let (engine, direct) = ledger().await;
    let (proxy, failing) = through_proxy(&engine, 5).await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    let first_done: Arc<Mutex<Vec<u64>>> = Arc::default();
    let inflight = Arc::new(InFlight::default());
    let handler: Handler = {
        let (first_done, inflight) = (first_done.clone(), inflight.clone());
        Arc::new(move |event: Event| {
            let (first_done, inflight) = (first_done.clone(), inflight.clone());
            Box::pin(async move {
                if first_done.lock().unwrap().is_empty() {
                    first_done.lock().unwrap().extend(seqs(&event));
                    return Ok(DynamoDbEventResponse::default());
                }
                let _witness = DropWitness(inflight.clone());
                inflight.started.store(true, Ordering::SeqCst);
                for _ in 0..1200 {
                    inflight.store_calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                inflight.returned.store(true, Ordering::SeqCst);
                Err("the write kept failing".into())
            })
        })
    };
    let mut c = config(&failing, "a", TTL);
    // Lambda's 40 s call budget, on the real clock (the invocation is not
    // ended by its timeout within the guard).
    c.function_timeout = Duration::from_secs(40);
    c.timeout_scale = Some(1.0);
    let mut a = StreamMapping::with_api(c, api.clone(), "arn".into(), handler);
    let stats = a.stats();
    let (stop, stopped) = watch::channel(false);
    let a = tokio::spawn(async move {
        a.consume(stopped, Duration::from_secs(1)).await.unwrap();
    });
    let first = api.write("s", 5);
    let checkpoint = || async {
        lease_table(&direct, "reader")
            .read("s")
            .await
            .unwrap()
            .and_then(|i| i.checkpoint.sequence_number)
    };
    let first_checkpoint = Some(seq_string(*first.last().unwrap()));
    tokio::time::timeout(GUARD, async {
        while checkpoint().await != first_checkpoint {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a never checkpointed its first batch");
    assert_eq!(*first_done.lock().unwrap(), first);
    // From now on every lease write of a fails (the ledger answers 503).
    proxy.inject(Fault::unavailable("UpdateItem", 0).for_window(Duration::from_secs(600)));
    api.write("s", 5);
    tokio::time::timeout(GUARD, async {
        while !inflight.dropped.load(Ordering::SeqCst) {
            assert!(
                !inflight.returned.load(Ordering::SeqCst),
                "the invocation ran to its end"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the invocation in flight was not cancelled when its lease ran out");
    assert!(inflight.started.load(Ordering::SeqCst));
    let calls = inflight.store_calls.load(Ordering::SeqCst);
    tokio::time::timeout(GUARD, async {
        while stats.leases_held() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a kept the shard whose lease ran out");
    assert_eq!(
        stats.leases_lost(),
        [("taken", 0), ("ran_out", 1), ("vanished", 0)]
    );
    assert_eq!(
        stats.failed_invocations.load(Ordering::Relaxed),
        0,
        "the cancelled batch was not handled as a failure (no split, no retry)"
    );
    assert_eq!(
        inflight.store_calls.load(Ordering::SeqCst),
        calls,
        "no store call after the cancel"
    );
    assert_eq!(checkpoint().await, first_checkpoint, "not checkpointed");
    stop.send_replace(true);
    tokio::time::timeout(GUARD, a)
        .await
        .expect("a stopped within its grace")
        .unwrap();
    proxy.clear();
}

/// A ledger call's failure, as logged and returned: the causes' messages
/// on one line, not the SDK's `Debug` form of the error (the request, the
/// response) that `DisplayErrorContext` ends with.
#[test]
fn a_ledger_failure_says_its_causes_without_the_sdks_debug_form() {
    use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
    let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    let sdk: aws_sdk_dynamodb::error::SdkError<UpdateItemError, _> =
        aws_sdk_dynamodb::error::SdkError::<_, aws_sdk_dynamodb::config::http::HttpResponse>::dispatch_failure(
            aws_sdk_dynamodb::error::ConnectorError::io(refused.into()),
        );
    let e = crate::local::lease::LeaseError::Store {
        op: "renew",
        shard: "shardId-1".into(),
        cause: Box::new(sdk.into()),
    };
    let said = e.to_string();
    assert!(
        said.starts_with("ledger renew on shard shardId-1: "),
        "{said}"
    );
    assert!(said.contains("refused"), "{said}");
    assert!(
        !said.contains('{') && !said.contains("DispatchFailure("),
        "{said}"
    );
}
