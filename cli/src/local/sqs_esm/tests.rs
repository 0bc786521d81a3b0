//! The queue mapping against the local SQS: deletes retried by cause, a
//! stopped poller's hand-back, a vanished queue's failures.

use super::*;

fn failure(id: &str, sender_fault: bool, code: &str) -> BatchResultErrorEntry {
    BatchResultErrorEntry::builder()
        .id(id)
        .sender_fault(sender_fault)
        .code(code)
        .message("why")
        .build()
        .expect("all required fields")
}

#[test]
fn the_services_failures_are_retried_and_the_requests_are_not() {
    let failed = vec![
        failure("0", false, "InternalError"),
        failure("1", true, "ReceiptHandleIsInvalid"),
        failure("x", false, "InternalError"),
        failure("7", false, "InternalError"),
    ];
    let (retry, give_up) = split_delete_failures(&failed, 3);
    assert_eq!(retry.iter().map(|f| f.id()).collect::<Vec<_>>(), ["0"]);
    assert_eq!(
        give_up.iter().map(|f| f.id()).collect::<Vec<_>>(),
        ["1", "x", "7"]
    );
}

/// A queue that vanished (the local SQS restarted, a queue deleted):
/// each poller's failures are counted, logged with the service's code,
/// and retried after a growing pause; `/readyz` says not ready while
/// every poll fails past the bound, naming the queue and the cause,
/// and ready again once the queue is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_queue_is_counted_backed_off_and_makes_the_process_not_ready() {
    let sqs = crate::local::sqs_server::LocalSqs::start().expect("local SQS");
    let client =
        aws_sdk_sqs::Client::new(&crate::local::engine::sdk_config(Some(&sqs.endpoint()), 1).await);
    let def = QueueDef::standard("jobs", "gone-jobs", "gone-jobs-dlq", "jobs");
    let queue = create_queue(&client, &def, "t-", Duration::from_secs(180))
        .await
        .expect("queue");
    client
        .delete_queue()
        .queue_url(&queue.url)
        .send()
        .await
        .expect("deleted");
    let handler: SqsHandler = Arc::new(|_| Box::pin(async { Ok(SqsBatchResponse::default()) }));
    let m = QueueMapping::new("jobs", client.clone(), queue.clone(), 10, handler);
    let probe = crate::local::metrics::Probe {
        queues: vec![("jobs".into(), m.stats_handle())],
        failing_bound: Some(Duration::ZERO),
        ..Default::default()
    };
    let (stop, stopped) = watch::channel(false);
    let pollers = m.spawn_pollers(Polling::Short, &stopped);
    while m.stats().poll_failures.load(Ordering::Relaxed) < 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, cause) = m.stats().failing_for().expect("failing");
    assert!(
        cause.contains("ReceiveMessage failed: ") && cause.contains("NonExistentQueue"),
        "the service's code is named: {cause}"
    );
    let (queue_name, _, why) = probe.failing_queue().expect("not ready");
    assert_eq!(
        (queue_name.as_str(), why.as_str()),
        ("jobs", cause.as_str())
    );
    let text = probe.render().expect("exposition");
    assert!(
        text.lines().any(|l| l
            .starts_with("jobstream_queue_poll_failures_total{processor=\"jobs\"} ")
            && !l.ends_with(" 0")),
        "{text}"
    );
    // One poller, doubling pauses from 0.5 s: far fewer polls than
    // the 4 a second it used to make.
    let pauses: Vec<Duration> = poll_backoff().take(8).collect();
    assert!(pauses.iter().all(|p| *p >= POLL_RETRY_MIN), "{pauses:?}");
    assert!(pauses[6] >= POLL_RETRY_MAX, "{pauses:?}");
    // The queue comes back: the next poll succeeds, ready again.
    create_queue(&client, &def, "t-", Duration::from_secs(180))
        .await
        .expect("queue again");
    while m.stats().failing_for().is_some() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(probe.failing_queue().is_none());
    stop.send(true).expect("pollers listen");
    for p in pollers {
        p.await.expect("poller ends");
    }
}

/// SQS hands a message to a long poll whose client went away (it stays
/// invisible for the visibility timeout, a receive counted towards the
/// DLQ): a poller stopped mid-poll (SIGTERM, a handover) lets its poll
/// end and gives back what it brought, so the successor gets the job
/// at once. Against the local SQS, which behaves so (as moto does).
#[tokio::test]
async fn a_poller_stopped_mid_poll_gives_back_what_the_poll_brings() {
    let sqs = crate::local::sqs_server::LocalSqs::start().expect("local SQS");
    let client =
        aws_sdk_sqs::Client::new(&crate::local::engine::sdk_config(Some(&sqs.endpoint()), 3).await);
    let def = QueueDef::standard("jobs", "handover-jobs", "handover-jobs-dlq", "jobs");
    let queue = create_queue(&client, &def, "t-", Duration::from_secs(180))
        .await
        .expect("queue");
    let invoked = Arc::new(AtomicU64::new(0));
    let seen = invoked.clone();
    let handler: SqsHandler = Arc::new(move |_| {
        seen.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Ok(SqsBatchResponse::default()) })
    });
    let m = QueueMapping::new("jobs", client.clone(), queue.clone(), 10, handler);
    let (stop, stopped) = watch::channel(false);
    let pollers = m.spawn_pollers(Polling::Long(3), &stopped);
    // The poll is waiting (the queue is empty) when the stop comes; a
    // job arrives right after it.
    while m.stats().receives.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    stop.send(true).expect("pollers listen");
    client
        .send_message()
        .queue_url(&queue.url)
        .message_body("job")
        .send()
        .await
        .expect("sent");
    for p in pollers {
        p.await.expect("poller ends");
    }
    assert_eq!(
        invoked.load(Ordering::Relaxed),
        0,
        "no invocation after the stop"
    );
    assert_eq!(
        depth(&client, &queue.url).await.expect("depth"),
        (1, 0),
        "the job is visible to a successor at once, not held by the stopped poll"
    );
}

/// ops16 #7: an SQS endpoint that accepts and never answers (a black
/// hole) failed a poll only at the end of its call budget (40 s), so
/// `/readyz` said ready for that long plus its 60 s bound, and went 503
/// after the endpoint was back. A poll unanswered past its wait and a
/// grace is failing from when it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_the_endpoint_never_answers_is_failing_from_when_it_was_sent() {
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = hole.local_addr().expect("addr");
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = hole.accept().await {
            conns.push(c);
        }
    });
    let endpoint = format!("http://{addr}");
    // The deployed retries: attempts until the 40 s budget ends.
    let client = aws_sdk_sqs::Client::new(
        &crate::local::engine::sdk_config(Some(&endpoint), shared::retry::MAX_ATTEMPTS).await,
    );
    let queue = Queue {
        url: format!("{endpoint}/000000000000/jobs"),
        arn: "arn:aws:sqs:us-east-1:000000000000:jobs".into(),
        dlq_url: format!("{endpoint}/000000000000/jobs-dlq"),
        visibility: Duration::from_secs(180),
    };
    let handler: SqsHandler = Arc::new(|_| Box::pin(async { Ok(SqsBatchResponse::default()) }));
    let m = QueueMapping::new("jobs", client, queue, 10, handler);
    let probe = crate::local::metrics::Probe {
        queues: vec![("jobs".into(), m.stats_handle())],
        failing_bound: Some(Duration::ZERO),
        ..Default::default()
    };
    let (stop, stopped) = watch::channel(false);
    let pollers = m.spawn_pollers(Polling::Short, &stopped);
    tokio::time::sleep(UNANSWERED_GRACE + Duration::from_secs(2)).await;
    assert_eq!(
        m.stats().poll_failures.load(Ordering::Relaxed),
        0,
        "still unanswered"
    );
    let (queue_name, d, why) = probe.failing_queue().expect("not ready while unanswered");
    assert_eq!(queue_name, "jobs");
    assert!(d > UNANSWERED_GRACE, "{d:?}");
    assert!(why.starts_with("a ReceiveMessage unanswered for "), "{why}");
    stop.send(true).expect("pollers listen");
    for p in pollers {
        p.abort();
    }
    held.abort();
}
