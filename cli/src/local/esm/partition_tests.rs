//! ops11 #4: a partition from the engine (every call accepted, none
//! answered) of a holder and a standby, each consuming as `jobstream run`
//! does. What their `/metrics` and `/readyz` say meanwhile: the lease view
//! they cannot refresh is not "another process renews it", the holder's
//! iterator age grows while its read hangs, the gauges of one scrape agree,
//! and a process the engine does not answer says so. The ledger is the
//! embedded engine behind a fault proxy per process; bounded waits only.

use super::test_support::{as_runner, config, recorder};
use super::*;
use crate::faults::{Fault, FaultProxy};
use crate::local::engine::sdk_config;
use crate::local::metrics::{get, serve, Probe};
use crate::local::shards::fake::FakeStreams;

const TTL: Duration = Duration::from_secs(3);
const GUARD: Duration = Duration::from_secs(30);

/// One process: its mapping consuming in a task, its ledger behind its own
/// proxy, its metrics server.
struct Process {
    proxy: FaultProxy,
    addr: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Process {
    async fn start(
        engine: &crate::local::engine::LocalEngine,
        api: &FakeStreams,
        owner: &str,
    ) -> Self {
        let proxy = FaultProxy::in_front_of(&engine.endpoint())
            .await
            .expect("proxy");
        let sdk = sdk_config(Some(&proxy.endpoint()), 3).await;
        let client = aws_sdk_dynamodb::Client::new(&as_runner(&sdk));
        let (handler, _) = recorder();
        let m = StreamMapping::with_api(
            config(&client, owner, TTL),
            api.clone(),
            "arn".into(),
            handler,
        );
        let stats = m.stats();
        let (stop, stopped) = watch::channel(false);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let probe = Probe {
            streams: vec![stats.clone()],
            failing_bound: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        tokio::spawn(serve(listener, probe, stopped.clone()));
        let task = tokio::spawn(async move {
            let mut m = m;
            m.consume(stopped, Duration::from_secs(1)).await.unwrap();
        });
        Self {
            proxy,
            addr,
            stop,
            task,
        }
    }

    /// One scrape: every sample as (name with labels, value).
    async fn scrape(&self) -> Vec<(String, i64)> {
        let (status, text) = get(self.addr, "/metrics").await.expect("scrape");
        assert_eq!(status, 200);
        text.lines()
            .filter(|l| l.starts_with("jobstream_"))
            .filter_map(|l| {
                let (name, v) = l.rsplit_once(' ')?;
                Some((name.to_string(), v.parse().ok()?))
            })
            .collect()
    }

    async fn readyz(&self) -> (u16, String) {
        get(self.addr, "/readyz").await.expect("readyz")
    }

    /// Calls from now on are accepted and never answered, until the gate.
    fn cut(&self, gate: &Arc<tokio::sync::Semaphore>) {
        for op in ["UpdateItem", "Query", "GetItem"] {
            self.proxy.inject(Fault::held(op, u32::MAX, gate.clone()));
        }
    }
}

fn value(samples: &[(String, i64)], name: &str) -> Option<i64> {
    samples.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

fn state(samples: &[(String, i64)], state: &str) -> Option<i64> {
    value(
        samples,
        &format!("jobstream_shards{{processor=\"m\",state=\"{state}\"}}"),
    )
}

fn ages(samples: &[(String, i64)]) -> Vec<i64> {
    samples
        .iter()
        .filter(|(n, _)| n.starts_with("jobstream_iterator_age_milliseconds{"))
        .map(|(_, v)| *v)
        .collect()
}

/// In one scrape: `leases_held` is `shards{held}`, and a process holding
/// no lease reports no iterator age.
fn consistent(who: &str, samples: &[(String, i64)]) {
    let held = value(samples, "jobstream_leases_held{processor=\"m\"}");
    if let Some(shards_held) = state(samples, "held") {
        assert_eq!(
            held,
            Some(shards_held),
            "{who}: leases_held vs shards{{held}}: {samples:?}"
        );
    }
    if held == Some(0) {
        assert!(
            ages(samples).is_empty(),
            "{who}: an iterator age without a lease: {samples:?}"
        );
    }
}

/// Polls `p`'s scrapes (each checked for consistency) until `done` says so.
async fn until(
    who: &str,
    p: &Process,
    done: impl Fn(&[(String, i64)]) -> bool,
) -> Vec<(String, i64)> {
    tokio::time::timeout(GUARD, async {
        loop {
            let samples = p.scrape().await;
            consistent(who, &samples);
            if done(&samples) {
                return samples;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{who}: the awaited scrape never came"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_process_never_reports_a_shard_read_elsewhere_and_says_it_is_cut_off() {
    let (engine, _direct) = super::test_support::ledger().await;
    let api = FakeStreams::new(100);
    api.add_shard("s", None);
    api.write("s", 3);
    let a = Process::start(&engine, &api, "a").await;
    until("a", &a, |s| state(s, "held") == Some(1)).await;
    let b = Process::start(&engine, &api, "b").await;
    until("b", &b, |s| state(s, "elsewhere") == Some(1)).await;
    // The partition: the ledger and the stream accept every call and
    // answer none.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    *api.hang.lock().unwrap() = Some(gate.clone());
    a.cut(&gate);
    b.cut(&gate);
    // The holder's read hangs: its age grows (it used to stay 0 until the
    // read failed, 40 s later).
    until("a", &a, |s| ages(s).iter().any(|age| *age >= 1000)).await;
    // Past the staleness bound nobody can say another process renews the
    // shard: both see it stale (b used to say `elsewhere` for as long as
    // the partition lasted), neither holds it, neither reports an age.
    for (who, p) in [("a", &a), ("b", &b)] {
        let s = until(who, p, |s| {
            state(s, "stale") == Some(1) && state(s, "held") == Some(0)
        })
        .await;
        assert_eq!(state(&s, "elsewhere"), Some(0), "{who}: {s:?}");
        assert!(ages(&s).is_empty(), "{who}: {s:?}");
        // And the engine's silence is a metric, and `/readyz` says it.
        until(who, p, |s| {
            value(
                s,
                "jobstream_dynamodb_last_success_age_seconds{processor=\"m\"}",
            )
            .is_some_and(|v| v >= 2)
        })
        .await;
        let (status, why) = tokio::time::timeout(GUARD, async {
            loop {
                let r = p.readyz().await;
                if r.0 == 503 {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{who}: /readyz stayed ready while cut off"));
        assert_eq!(status, 503);
        assert!(
            why.contains("processor m") && why.contains("DynamoDB"),
            "{who}: {why}"
        );
    }
    // Healed: the calls held go on, and a process holds the shard again.
    gate.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    *api.hang.lock().unwrap() = None;
    a.proxy.clear();
    b.proxy.clear();
    let held = |s: &[(String, i64)]| value(s, "jobstream_leases_held{processor=\"m\"}");
    tokio::time::timeout(GUARD, async {
        while held(&a.scrape().await).unwrap_or(0) + held(&b.scrape().await).unwrap_or(0) != 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the shard is held again after the partition");
    for p in [a, b] {
        p.stop.send_replace(true);
        tokio::time::timeout(GUARD, p.task)
            .await
            .expect("stops within its grace")
            .unwrap();
    }
}
