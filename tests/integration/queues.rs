//! Queues: the local SQS server's behaviour the mappings rely on (batches,
//! visibility, receipt handles, redrive to the DLQ), queue consumers that
//! scale as Lambda's (concurrent pollers bounded by the queue's maximum
//! concurrency, never in the way of a stream consumer), DeleteMessageBatch
//! entries the service fails, and identical jobs of one batch sent once for
//! every model with queues.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::seed_items::social;
use crate::seed_items::social::{follow_item, post_item};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use jobstream::faults::{Fault, FaultProxy};
use jobstream::local::engine::{sdk_config, LocalEngine};
use jobstream::local::runtime::Runtime;
use jobstream::local::sqs_esm::{create_queue, depth, SqsHandler, DELETE_RETRIES};
use shared::item::Item;
use shared::store::Store;

use crate::items::assert_clean;
use crate::social::{iso, post_id};
use crate::support::{model_env, run_in_background, ModelEnv};

/// A guard against hanging: what a test waits for arrives long before.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// A writer's view of a model's table (usable while the runtime runs in
/// the background).
#[derive(Clone)]
struct Db {
    store: Store,
    table: String,
}

fn db(rt: &Runtime) -> Db {
    Db {
        store: Store::new(rt.dynamodb.clone()),
        table: rt.config.table.clone(),
    }
}

async fn put(db: &Db, items: Vec<Item>) {
    db.store.put_items(&db.table, items).await.expect("put");
}

async fn get(db: &Db, key: Item) -> Option<Item> {
    db.store.get(&db.table, key).await.expect("get")
}

async fn timeline_len(db: &Db, user: &str) -> usize {
    crate::social::timeline_len(&db.store, &db.table, user).await
}

async fn sqs_client_for(endpoint: &str) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&sdk_config(Some(endpoint), 3).await)
}

/// Messages waiting in every queue of `rt` (visible + in flight).
async fn queued(rt: &Runtime) -> u64 {
    let mut total = 0;
    for q in &rt.queues {
        let (visible, in_flight) = q.depth().await.expect("depth");
        total += visible + in_flight;
    }
    total
}

// ---------------------------------------------------------------------
// The local SQS server: what the SQS mapping relies on.
// ---------------------------------------------------------------------

/// The message ids of `messages`.
fn ids(messages: &[aws_sdk_sqs::types::Message]) -> BTreeSet<String> {
    let id = |m: &aws_sdk_sqs::types::Message| m.message_id().expect("id").to_string();
    messages.iter().map(id).collect()
}

/// A queue of its own (the social model's timeline queue, with its DLQ,
/// under a fresh prefix) on the local SQS, `visibility` its timeout.
async fn fresh_queue(
    visibility: Duration,
) -> (aws_sdk_sqs::Client, jobstream::local::sqs_esm::Queue) {
    let endpoint = tokio::task::spawn_blocking(crate::support::sqs)
        .await
        .expect("local SQS");
    let client = sqs_client_for(&endpoint).await;
    let def = shared::models::find("social").expect("model").queues()[0].clone();
    let prefix = format!("t{}-", uuid::Uuid::new_v4().simple());
    let q = create_queue(&client, &def, &prefix, visibility)
        .await
        .expect("queue and DLQ");
    (client, q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_sqs_batches_hides_returns_and_redrives_as_sqs_does() {
    let (client, q) = fresh_queue(Duration::from_secs(1)).await;
    let def = shared::models::find("social").expect("model").queues()[0].clone();

    // SendMessageBatch: 10 + 5 entries, every one accepted.
    for chunk in [0..10, 10..15] {
        let entries: Vec<SendMessageBatchRequestEntry> = chunk
            .map(|i| {
                SendMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .message_body(format!("{{\"n\":{i}}}"))
                    .build()
                    .expect("entry")
            })
            .collect();
        let out = client
            .send_message_batch()
            .queue_url(&q.url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("SendMessageBatch");
        assert!(out.failed().is_empty(), "{:?}", out.failed());
    }
    assert_eq!(depth(&client, &q.url).await.expect("depth"), (15, 0));

    let receive = || async {
        client
            .receive_message()
            .queue_url(&q.url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .expect("ReceiveMessage")
            .messages
            .unwrap_or_default()
    };
    // Receives take at most 10; a received message is hidden from others.
    let mut first = receive().await;
    first.extend(receive().await);
    assert_eq!(
        (first.len(), ids(&first).len()),
        (15, 15),
        "each message once"
    );
    assert!(receive().await.is_empty(), "all 15 are in flight");
    assert_eq!(depth(&client, &q.url).await.expect("depth"), (0, 15));

    // DeleteMessageBatch by receipt handle: 10 gone for good.
    let entries: Vec<DeleteMessageBatchRequestEntry> = first[..10]
        .iter()
        .enumerate()
        .map(|(i, m)| {
            DeleteMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .receipt_handle(m.receipt_handle().expect("handle"))
                .build()
                .expect("entry")
        })
        .collect();
    let out = client
        .delete_message_batch()
        .queue_url(&q.url)
        .set_entries(Some(entries))
        .send()
        .await
        .expect("DeleteMessageBatch");
    assert_eq!((out.successful().len(), out.failed().len()), (10, 0));

    // The 5 not deleted come back after the visibility timeout, with a new
    // receipt handle and their receive count; after maxReceiveCount
    // receives the next receive moves them to the DLQ.
    let kept = ids(&first[10..]);
    let old_handles: BTreeSet<String> = first[10..]
        .iter()
        .map(|m| m.receipt_handle().expect("handle").to_string())
        .collect();
    let mut receives = 1;
    let mut in_dlq = Vec::new();
    while in_dlq.len() < kept.len() {
        assert!(receives <= def.max_receive_count + 2, "never redriven");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let again = receive().await;
        if !again.is_empty() {
            receives += 1;
            assert_eq!(ids(&again), kept, "the same messages come back");
            for m in &again {
                assert!(!old_handles.contains(m.receipt_handle().expect("handle")));
                let count = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .expect("receive count");
                assert_eq!(count, &receives.to_string());
            }
            continue;
        }
        let dlq = client
            .receive_message()
            .queue_url(&q.dlq_url)
            .max_number_of_messages(10)
            .send()
            .await
            .expect("ReceiveMessage (DLQ)");
        in_dlq.extend(ids(dlq.messages()));
    }
    assert_eq!(
        receives, def.max_receive_count,
        "redriven after maxReceiveCount"
    );
    assert_eq!(in_dlq.into_iter().collect::<BTreeSet<_>>(), kept);
    assert_eq!(depth(&client, &q.url).await.expect("depth"), (0, 0));
}

// ---------------------------------------------------------------------
// Queue consumers scale as Lambda's.
// ---------------------------------------------------------------------

/// A handler that holds every invocation until `limit` are in flight at
/// once (then lets all through), recording the most seen together and the
/// message bodies it was given.
struct Gate {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    bodies: Mutex<Vec<String>>,
    open: tokio::sync::watch::Sender<bool>,
}

fn gated(limit: usize) -> (Arc<Gate>, SqsHandler) {
    let gate = Arc::new(Gate {
        in_flight: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
        bodies: Mutex::new(Vec::new()),
        open: tokio::sync::watch::channel(false).0,
    });
    let g = gate.clone();
    let handler: SqsHandler = Arc::new(move |event: SqsEvent| {
        let g = g.clone();
        Box::pin(async move {
            let now = g.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            g.most.fetch_max(now, Ordering::SeqCst);
            if now >= limit {
                g.open.send_replace(true);
            }
            let mut open = g.open.subscribe();
            let _ = open.wait_for(|o| *o).await;
            g.bodies
                .lock()
                .expect("lock")
                .extend(event.records.iter().filter_map(|r| r.body.clone()));
            g.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(SqsBatchResponse::default())
        })
    });
    (gate, handler)
}

/// A job body holding characters the local SQS refuses and SQS itself
/// refuses or accepts (an emoji in a user's id, outside the BMP; U+FFFF)
/// was retried for the call's whole budget and stalled the shard (spec15
/// #11): every body is sent as JSON whose text any SQS takes, and read
/// back as the same JSON value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_with_characters_outside_the_bmp_is_sent_and_read_back_as_written() {
    let (client, q) = fresh_queue(Duration::from_secs(30)).await;
    let body = serde_json::json!({ "follower": "\u{1F980}ferris", "odd": "a\u{FFFF}b", "plain": "caf\u{e9}" })
        .to_string();
    let backoff = shared::store::Backoff {
        budget: Duration::from_secs(2),
        ..shared::store::Backoff::default()
    };
    shared::sqs::send_all(&client, &backoff, &q.url, std::slice::from_ref(&body))
        .await
        .map_err(|(_, e)| e.to_string())
        .expect("sent");
    let got = client
        .receive_message()
        .queue_url(&q.url)
        .wait_time_seconds(5)
        .send()
        .await
        .expect("receive");
    let got = got.messages()[0].body().expect("a body");
    let value = |t: &str| serde_json::from_str::<serde_json::Value>(t).expect("JSON");
    assert_eq!(value(got), value(&body));
}

async fn send_bodies(client: &aws_sdk_sqs::Client, url: &str, bodies: &[String]) {
    for (n, chunk) in bodies.chunks(10).enumerate() {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, b)| {
                SendMessageBatchRequestEntry::builder()
                    .id(format!("{n}-{i}"))
                    .message_body(b)
                    .build()
                    .expect("entry")
            })
            .collect();
        client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("send");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_is_consumed_by_concurrent_invocations_up_to_its_max_concurrency() {
    let ModelEnv { engine: _e, mut rt } = model_env("social", |_| {}).await;
    let def = rt.model.queues()[0].clone();
    let limit = def.max_concurrency as usize;
    assert!(limit > 1, "the definition allows concurrency");
    let (gate, handler) = gated(limit);
    rt.queues[0].handler = handler;
    // Each invocation holds at most 10 messages, so `limit` of them can be
    // in flight at once only if the pollers run concurrently.
    let bodies: Vec<String> = (0..limit * 10).map(|i| format!("{{\"m\":{i}}}")).collect();
    let url = rt.queues[0].queue.url.clone();
    send_bodies(rt.sqs.as_ref().expect("sqs"), &url, &bodies).await;
    tokio::time::timeout(HANG_GUARD, rt.drain())
        .await
        .expect("fewer invocations than max_concurrency ever ran at once")
        .expect("drained");
    assert_eq!(
        gate.most.load(Ordering::SeqCst),
        limit,
        "bounded by max_concurrency"
    );
    let mut seen = gate.bodies.lock().expect("lock").clone();
    seen.sort();
    let mut sent = bodies.clone();
    sent.sort();
    assert_eq!(seen, sent, "every message once");
    assert_eq!(queued(&rt).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_limited_to_one_invocation_never_runs_two() {
    let ModelEnv { engine: _e, mut rt } =
        model_env("social", |o| o.queue_concurrency = Some(1)).await;
    // The gate is open from the first invocation: nothing holds the
    // pollers back, and still no two invocations overlap.
    let (gate, handler) = gated(1);
    rt.queues[0].handler = handler;
    let bodies: Vec<String> = (0..30).map(|i| format!("{{\"m\":{i}}}")).collect();
    let url = rt.queues[0].queue.url.clone();
    send_bodies(rt.sqs.as_ref().expect("sqs"), &url, &bodies).await;
    tokio::time::timeout(HANG_GUARD, rt.drain())
        .await
        .expect("not hung")
        .expect("drained");
    assert_eq!(gate.most.load(Ordering::SeqCst), 1);
    assert_eq!(gate.bodies.lock().expect("lock").len(), 30);
}

/// A queue handler that never returns: counts its calls and the calls
/// cancelled (dropped before they finished).
fn hung(calls: Arc<AtomicUsize>, cancelled: Arc<AtomicUsize>) -> SqsHandler {
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    Arc::new(move |_event: SqsEvent| {
        let (calls, cancelled) = (calls.clone(), cancelled.clone());
        Box::pin(async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let _guard = OnDrop(cancelled);
            std::future::pending::<()>().await;
            Ok(SqsBatchResponse::default())
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_queue_handler_is_cut_at_the_deployed_timeout_and_its_message_reaches_the_dlq_after_5_receives(
) {
    // The timeout scaled like every duration (0.5 s for the deployed 30 s).
    let ModelEnv { engine: _e, mut rt } =
        model_env("social", |o| o.function_timeout_scale = None).await;
    let def = rt.model.queues()[0].clone();
    // The deployed timeout, scaled as every duration of the definition.
    assert_eq!(
        rt.queues[0].function_timeout,
        Duration::from_secs_f64(f64::from(def.consumer_timeout_secs) * crate::support::TIME_SCALE)
    );
    let (calls, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    rt.queues[0].handler = hung(calls.clone(), cancelled.clone());
    let url = rt.queues[0].queue.url.clone();
    send_bodies(rt.sqs.as_ref().expect("sqs"), &url, &["{}".to_string()]).await;
    // Drained: nothing visible or in flight, so the message left the queue.
    tokio::time::timeout(HANG_GUARD, rt.drain())
        .await
        .expect("the hung invocation held its message")
        .expect("drained");
    let receives = def.max_receive_count as usize;
    assert_eq!(receives, 5);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        receives,
        "one invocation per receive"
    );
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        receives,
        "each invocation was cut at the timeout"
    );
    assert_eq!(
        rt.queues[0]
            .stats()
            .failed_invocations
            .load(Ordering::SeqCst),
        receives as u64
    );
    assert_eq!(
        rt.dlq_depth(def.consumer).await.expect("DLQ"),
        1,
        "in the DLQ"
    );
    assert_eq!(queued(&rt).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_pollers_stop_within_the_shutdown_grace_even_with_an_invocation_hung() {
    let ModelEnv { engine: _e, mut rt } = model_env("social", |_| {}).await;
    let (calls, cancelled) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    rt.queues[0].handler = hung(calls.clone(), cancelled.clone());
    // Longer than the test's guard: only the grace can end this invocation.
    rt.queues[0].function_timeout = HANG_GUARD * 10;
    rt.shutdown_grace = Duration::from_millis(200);
    let url = rt.queues[0].queue.url.clone();
    send_bodies(rt.sqs.as_ref().expect("sqs"), &url, &["{}".to_string()]).await;
    let bg = run_in_background(rt);
    tokio::time::timeout(HANG_GUARD, async {
        while calls.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the message reached its handler");
    let rt = tokio::time::timeout(HANG_GUARD, bg.stop())
        .await
        .expect("run waited for the hung invocation past the grace");
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "abandoned at the grace"
    );
    assert_eq!(
        rt.queues[0].stats().deleted.load(Ordering::SeqCst),
        0,
        "its message was not deleted: it comes back after the visibility timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_queue_never_delays_the_stream_consumer() {
    let ModelEnv { engine: _e, mut rt } = model_env("social", |_| {}).await;
    // Every queue invocation waits until the test releases it, then runs the
    // real handler.
    let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (release, released) = tokio::sync::watch::channel(false);
    for q in &mut rt.queues {
        let inner = q.handler.clone();
        let entered_tx = entered_tx.clone();
        let released = released.clone();
        q.handler = Arc::new(move |event: SqsEvent| {
            let inner = inner.clone();
            let entered_tx = entered_tx.clone();
            let mut released = released.clone();
            Box::pin(async move {
                let _ = entered_tx.send(());
                let _ = released.wait_for(|r| *r).await;
                inner(event).await
            })
        });
    }
    let at = iso(0);
    let reader = db(&rt);
    put(&reader, vec![post_item("star", &post_id(1), &at, "hi")]).await;
    put(&reader, vec![follow_item("ann", "star", &at)]).await;
    let bg = run_in_background(rt);
    tokio::time::timeout(HANG_GUARD, entered.recv())
        .await
        .expect("no job reached its (held) handler");
    // With a queue invocation held, a new follow's mirror (the stream
    // consumer's work) still appears.
    put(&reader, vec![follow_item("bob", "star", &at)]).await;
    tokio::time::timeout(HANG_GUARD, async {
        while get(&reader, social::mirror_key("bob", "star"))
            .await
            .is_none()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the stream consumer waited for the held queue invocation");
    assert!(!*release.borrow(), "the queue invocation was still held");
    release.send_replace(true);
    let mut rt = bg.stop().await;
    rt.drain().await.expect("drained");
    assert_eq!(
        (
            timeline_len(&reader, "ann").await,
            timeline_len(&reader, "bob").await
        ),
        (1, 1)
    );
    assert_clean(&rt).await;
}

// ---------------------------------------------------------------------
// DeleteMessageBatch entries the service fails (issue 18, item 5).
// ---------------------------------------------------------------------

/// The social runtime with its SQS traffic through a fault proxy in front
/// of the local SQS.
async fn social_behind_sqs_proxy() -> (LocalEngine, Runtime, FaultProxy) {
    let endpoint = tokio::task::spawn_blocking(crate::support::sqs)
        .await
        .expect("local SQS");
    let proxy = FaultProxy::in_front_of(&endpoint).await.expect("proxy");
    let engine = crate::support::start_engine().await;
    let mut opts = crate::support::embedded_options(&engine, "social");
    opts.sqs_endpoint = Some(proxy.endpoint());
    opts.queue_prefix = format!("t{}-", uuid::Uuid::new_v4().simple());
    let rt = Runtime::start(opts).await.expect("runtime");
    (engine, rt, proxy)
}

/// Follows `ann` -> `star` after star's post is processed; returns the
/// timeline queue's (invocations, deleted, retried, given up) of the
/// follow's processing.
async fn follow_after_a_post(rt: &mut Runtime, proxy: &FaultProxy, fault: Fault) -> [u64; 4] {
    let at = iso(0);
    put(&db(rt), vec![post_item("star", &post_id(1), &at, "hi")]).await;
    rt.drain().await.expect("drained");
    let stats = |rt: &Runtime| {
        let s = rt.queues[0].stats();
        [
            s.invocations.load(Ordering::SeqCst),
            s.deleted.load(Ordering::SeqCst),
            s.delete_retries.load(Ordering::SeqCst),
            s.delete_failures.load(Ordering::SeqCst),
        ]
    };
    let before = stats(rt);
    proxy.inject(fault);
    put(&db(rt), vec![follow_item("ann", "star", &at)]).await;
    rt.drain().await.expect("drained");
    let after = stats(rt);
    assert_eq!(
        timeline_len(&db(rt), "ann").await,
        1,
        "the post is on ann's timeline once"
    );
    assert_eq!(queued(rt).await, 0);
    assert_eq!(rt.dlq_depth("timeline").await.expect("DLQ"), 0);
    assert_clean(rt).await;
    std::array::from_fn(|i| after[i] - before[i])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_entry_the_service_fails_is_retried_and_the_job_runs_once() {
    let (_engine, mut rt, proxy) = social_behind_sqs_proxy().await;
    let [invocations, deleted, retried, given_up] = follow_after_a_post(
        &mut rt,
        &proxy,
        Fault::fail_entries("DeleteMessageBatch", 1),
    )
    .await;
    assert_eq!(proxy.injected(), 1);
    assert_eq!((invocations, deleted, retried, given_up), (1, 1, 1, 0));
}

/// Ann follows star, then star posts while `fault` fails the sends of the
/// post's fan-out job (`failed` says how): the post still reaches ann's
/// timeline, nothing is given up, nothing dead-lettered.
async fn a_post_fans_out_despite(fault: Fault, failed: &str) {
    let (_engine, mut rt, proxy) = social_behind_sqs_proxy().await;
    let at = iso(0);
    put(&db(&rt), vec![follow_item("ann", "star", &at)]).await;
    rt.drain().await.expect("drained");
    proxy.inject(fault);
    put(&db(&rt), vec![post_item("star", &post_id(1), &at, "hi")]).await;
    rt.drain().await.expect("drained");
    assert!(proxy.injected() > 0, "{failed}");
    assert_eq!(
        timeline_len(&db(&rt), "ann").await,
        1,
        "the post fanned out"
    );
    assert_eq!(rt.failed_batches(), Vec::new(), "nothing given up");
    assert_eq!(rt.dlq_depth("timeline").await.expect("DLQ"), 0);
}

/// A post's fan-out job cannot be sent for seconds (SQS resets every
/// SendMessageBatch, as an operator's `DispatchFailure` did): the stream
/// consumer's send rides the window out (`shared::retry`), the job is sent,
/// and the follower's timeline has the post; nothing is given up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_whose_job_sends_fail_for_seconds_still_fans_out() {
    a_post_fans_out_despite(
        Fault::reset("SendMessageBatch", 0).for_window(Duration::from_secs(5)),
        "the sends failed for the window",
    )
    .await;
}

/// The same window seen as every entry of SendMessageBatch failed by the
/// service (in a 200 answer, which the SDK does not retry): the send's own
/// retries last the stream consumer's call budget, as the SDK's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_whose_job_entries_fail_for_seconds_still_fans_out() {
    a_post_fans_out_despite(
        Fault::fail_entries("SendMessageBatch", 0).for_window(Duration::from_secs(12)),
        "the entries failed for the window",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_that_keeps_failing_is_counted_and_the_redelivered_job_changes_nothing() {
    let (_engine, mut rt, proxy) = social_behind_sqs_proxy().await;
    let attempts = 1 + DELETE_RETRIES as u32;
    let [invocations, deleted, retried, given_up] = follow_after_a_post(
        &mut rt,
        &proxy,
        Fault::fail_entries("DeleteMessageBatch", attempts),
    )
    .await;
    assert_eq!(proxy.injected(), u64::from(attempts));
    // Given up after the retries (counted, logged with the message id); the
    // message came back after the visibility timeout, ran again (writing
    // nothing new: the timeline has one entry, verify is clean) and was
    // deleted.
    assert_eq!((invocations, deleted, retried, given_up), (2, 1, 0, 1));
    assert!(rt.status().contains("not deleted (processed again): 1"));
}

// ---------------------------------------------------------------------
// Identical jobs of one batch are sent once, for every model with queues.
// ---------------------------------------------------------------------

/// Writes `items` (several records whose jobs are identical), lets the
/// stream consumer process them in one batch, and returns the messages it
/// queued.
async fn jobs_of_one_batch(model: &str, write: impl AsyncFnOnce(&Runtime, &Db)) -> u64 {
    let ModelEnv { engine: _e, mut rt } = model_env(model, |_| {}).await;
    write(&rt, &db(&rt)).await;
    jobstream::local::esm::drain(&mut rt.mappings)
        .await
        .expect("stream drained");
    queued(&rt).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn social_identical_timeline_jobs_of_a_batch_are_sent_once() {
    let n = jobs_of_one_batch("social", async |_, db| {
        let at = iso(0);
        // Follow, unfollow, follow again: three records, one job
        // (follower, author) between them.
        put(db, vec![follow_item("ann", "star", &at)]).await;
        db.store
            .delete_keys(&db.table, vec![social::follow_key("ann", "star")])
            .await
            .expect("delete");
        put(db, vec![follow_item("ann", "star", &at)]).await;
    })
    .await;
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobboard_identical_suggestion_jobs_of_a_batch_are_sent_once() {
    use crate::seed_items::jobboard::{days_ago, NewJob};
    let n = jobs_of_one_batch("jobboard", async |_, db| {
        // One open job written twice with different skills: two records,
        // one "job opened" job between them.
        for skills in [&["rust"][..], &["rust", "aws"][..]] {
            let job = NewJob {
                job_id: "j1",
                employer_id: "e1",
                city: "Montreal",
                posted_at: days_ago(1),
                zip: "H2X",
                title: "Rust engineer",
                skills,
                category: "tech",
                salary_max: 130_000,
            };
            put(db, vec![job.item()]).await;
        }
    })
    .await;
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pickem_identical_scoring_jobs_of_a_batch_are_sent_once() {
    use crate::league as write;
    let n = jobs_of_one_batch("pickem", async |_, db| {
        let ev = "2024-03-03-aew-revolution";
        let (date, slug) = ev.split_at(10);
        put(
            db,
            vec![write::event(date, &slug[1..], "Event", "upcoming")],
        )
        .await;
        // Three match results of one event: one "score the event" job.
        for (id, order) in [("m1", 1), ("m2", 2), ("m3", 3)] {
            put(
                db,
                vec![write::a_match(
                    ev,
                    id,
                    id,
                    order,
                    10,
                    false,
                    &["A", "B"],
                    Some(0),
                )],
            )
            .await;
        }
    })
    .await;
    assert_eq!(n, 1);
}

/// Says every message is a duplicate.
struct AlreadyDone(shared::metrics::Metrics);

impl shared::sqs::MessageProcessor for AlreadyDone {
    fn name(&self) -> &'static str {
        "matches"
    }
    fn metrics(&self) -> &shared::metrics::Metrics {
        &self.0
    }
    async fn process(
        &self,
        _body: &str,
    ) -> Result<shared::sqs::Outcome, shared::sqs::MessageError> {
        Ok(shared::sqs::Outcome::Duplicate)
    }
}

/// A duplicate (an effect already there: a redelivery, or a second job for
/// a once key) is logged at `info` with its message id, besides its count
/// (user5's E4: nothing said why a second order did nothing).
#[tokio::test]
async fn a_duplicate_is_logged_at_info_with_its_message() {
    let (logs, _guard) = crate::support::Captured::start();
    let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
    m.message_id = Some("m-1".into());
    m.body = Some("{}".into());
    let mut event = SqsEvent::default();
    event.records.push(m);
    let done = AlreadyDone(Default::default());
    let r = shared::sqs::handle_sqs_batch(&done, event)
        .await
        .expect("handled");
    assert!(r.batch_item_failures.is_empty());
    assert_eq!(done.0.get(shared::metrics::names::DUPLICATE), 1);
    let logged = logs.text();
    let line = logged
        .lines()
        .find(|l| l.contains("duplicate"))
        .unwrap_or_else(|| panic!("no duplicate logged:\n{logged}"));
    assert!(line.contains(" INFO ") && line.contains("m-1"), "{line}");
    assert!(line.contains("processor=\"matches\""), "{line}");
}
