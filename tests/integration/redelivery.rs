//! At-least-once delivery: duplicates and retries after a failure in the
//! middle of a batch leave exactly the state of a single delivery.

use crate::apps::play;
use aws_lambda_events::event::dynamodb::Event;
use jobstream::faults::Fault;
use shared::metrics::names;

use crate::items::invoke;
use crate::support::{env, env_behind_proxy, stream_event, Env};

/// The records of `event` from the one whose SequenceNumber is `seq` on:
/// what Lambda redelivers after a partial batch failure.
fn from_sequence(event: &Event, seq: &str) -> Event {
    let mut e = event.clone();
    let pos = e
        .records
        .iter()
        .position(|r| r.change.sequence_number.as_deref() == Some(seq))
        .expect("the failed record is in the batch");
    e.records.drain(..pos);
    e
}

async fn assert_scenario_exact(env: &mut Env, expected: &crate::apps::Expected) {
    env.rt.drain().await.unwrap();
    crate::support::assert_exact(env, expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_batch_delivered_twice_changes_nothing_the_second_time() {
    let mut env = env().await;
    let expected = play(&env.writer).await.unwrap();
    let event = stream_event(&env).await;
    for _ in 0..2 {
        let h = invoke(&env.rt, "history", &event).await.unwrap();
        assert!(h.batch_item_failures.is_empty());
        let d = invoke(&env.rt, "derive", &event).await.unwrap();
        assert!(d.batch_item_failures.is_empty());
    }
    assert!(crate::items::metric_of(&env, "history", names::DUPLICATE) > 0);
    assert!(crate::items::metric_of(&env, "derive", names::DUPLICATE) > 0);
    // The local mappings now deliver everything a third time, plus the
    // processors' own writes.
    assert_scenario_exact(&mut env, &expected).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_mid_batch_is_reported_and_the_retry_is_exact() {
    // Processors talk through the proxy, without SDK retries, so one
    // injected 500 fails a record.
    let (mut env, proxy) = env_behind_proxy(1, 0).await;
    let faulty = &env;
    let expected = play(&env.writer).await.unwrap();
    let event = stream_event(&env).await;

    // history: the first transaction chunk commits, the second fails.
    proxy.inject(Fault::server_error("TransactWriteItems", 1).after(1));
    let resp = invoke(&faulty.rt, "history", &event).await.unwrap();
    assert_eq!(resp.batch_item_failures.len(), 1);
    let failed = resp.batch_item_failures[0].item_identifier.clone().unwrap();
    assert!(!failed.is_empty());
    assert_ne!(
        Some(failed.as_str()),
        event.records[0].change.sequence_number.as_deref(),
        "failure is mid-batch"
    );
    // Lambda resumes at the failed record; then, for good measure, the whole
    // batch arrives once more.
    let retry = from_sequence(&event, &failed);
    assert!(invoke(&faulty.rt, "history", &retry)
        .await
        .unwrap()
        .batch_item_failures
        .is_empty());
    assert!(invoke(&faulty.rt, "history", &event)
        .await
        .unwrap()
        .batch_item_failures
        .is_empty());

    // derive: one of the projection writes (one per application, written
    // concurrently) fails: the response names the first record of that
    // application, and the redelivery from there is exact.
    proxy.inject(Fault::server_error("UpdateItem", 1).after(1));
    let resp = invoke(&faulty.rt, "derive", &event).await.unwrap();
    assert_eq!(resp.batch_item_failures.len(), 1);
    let failed = resp.batch_item_failures[0].item_identifier.clone().unwrap();
    assert!(event
        .records
        .iter()
        .any(|r| r.change.sequence_number.as_deref() == Some(failed.as_str())));
    let retry = from_sequence(&event, &failed);
    assert!(invoke(&faulty.rt, "derive", &retry)
        .await
        .unwrap()
        .batch_item_failures
        .is_empty());
    assert_eq!(proxy.injected(), 2);
    assert_eq!(
        crate::items::metric_of(&faulty, "history", names::FAILED_RECORD),
        1
    );
    assert_eq!(
        crate::items::metric_of(&faulty, "derive", names::FAILED_RECORD),
        1
    );

    // The local mappings now deliver everything again, and the processors'
    // own writes.
    assert_scenario_exact(&mut env, &expected).await;
}
