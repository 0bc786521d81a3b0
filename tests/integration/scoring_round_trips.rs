//! What scoring a Pick'Em event costs in round trips, counted by a bill
//! meter between the processors and the engine (never timed): the scores
//! and standings of many predictions come in a few requests per page and
//! per stream batch, not in requests per changed score; and a counter sync
//! that races a concurrent commit still ends on the newest totals.

use aws_sdk_dynamodb::types::Update;
use jobstream::faults::{Fault, FaultProxy};
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use jobstream::meter::Meter;
use shared::engine::derive::{total_attr, total_key, Deriver};
use shared::engine::rules::Counter;
use shared::item::{n, Item, ItemExt};

use crate::items::{assert_clean, get, key, put_all, scan};
use crate::league::{self as write, expected_scores};
use crate::support::{model_env_on, put, ModelEnv};

const EV: &str = "2024-03-03-revolution";

/// Pick'Em's runtime on `engine`, its processors reaching the engine at
/// `processor_endpoint` (a meter, a fault proxy), its queues on the test
/// binary's local SQS.
async fn runtime(engine: LocalEngine, processor_endpoint: String) -> ModelEnv {
    model_env_on(engine, "pickem", |o| {
        o.processor_endpoint = Some(processor_endpoint)
    })
    .await
}

/// `league` of `n` users, processed; the deriver, the users and their
/// standings as counters.
async fn standings_of(rt: &mut Runtime, n: usize) -> (Deriver, Vec<String>, Vec<Counter>) {
    league(rt, n).await;
    rt.drain().await.unwrap();
    let deriver = rt.processors.derive.deriver().clone();
    let users: Vec<String> = (0..n).map(|i| format!("u{i:04}")).collect();
    let counters = users
        .iter()
        .map(|u| deriver.rules.counter(&standings(u)).expect("a counter"))
        .collect();
    (deriver, users, counters)
}

/// The event with two matches (10 and 20 points, no results yet) and
/// `count` predictions, each user's picks (i % 2, i / 2 % 2).
async fn league(rt: &Runtime, count: usize) {
    let event = write::event("2024-03-03", "revolution", "Revolution", "upcoming");
    put(rt, event).await;
    for (id, order, points) in [("m1", 1, 10), ("m2", 2, 20)] {
        let a_match = write::a_match(EV, id, id, order, points, false, &["A", "B"], None);
        put(rt, a_match).await;
    }
    let predictions = (0..count)
        .map(|i| {
            write::prediction(
                &format!("u{i:04}"),
                EV,
                &[("m1", (i % 2) as i64), ("m2", (i / 2 % 2) as i64)],
            )
        })
        .collect();
    put_all(rt, predictions).await;
}

/// Both results in one transaction, as an application sets them.
async fn set_results(rt: &Runtime, results: &[(&str, i64)]) {
    let mut tx = rt.dynamodb.transact_write_items();
    for (id, result) in results {
        tx = tx.transact_items(shared::tx::update_of(
            Update::builder()
                .table_name(&rt.config.table)
                .set_key(Some(key(write::event_key(EV), format!("MATCH#{id}"))))
                .update_expression("SET #r = :r")
                .expression_attribute_names("#r", "result")
                .expression_attribute_values(":r", n(*result)),
        ));
    }
    tx.send().await.expect("results set");
}

/// The standings of `user` (its key).
fn standings(user: &str) -> Item {
    key(write::user_pk(user), "STANDINGS#2024")
}

/// What a source's commit does to the totals of `user`'s standings: one
/// version more, `points` added.
async fn commit(rt: &Runtime, user: &str, points: i64) {
    rt.dynamodb
        .update_item()
        .table_name(&rt.config.ledger_table)
        .set_key(Some(total_key("derive", &standings(user))))
        .update_expression("ADD ver :one, #p :p")
        .expression_attribute_names("#p", total_attr("points"))
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":p", n(points))
        .send()
        .await
        .expect("commit");
}

/// The `points` of `user`'s standings item (which exists).
async fn standing_points(rt: &Runtime, user: &str) -> Option<i64> {
    let st = get(rt, standings(user)).await.expect("standings");
    st.opt_i64("points").ok().flatten()
}

/// Every prediction carries the score the results imply, and each user's
/// standings the sums of that one prediction.
fn assert_scored(items: &[Item], count: usize) {
    let scores = expected_scores(items);
    assert_eq!(scores.len(), count);
    let num = |i: &Item, a: &str| i.opt_i64(a).ok().flatten().unwrap_or(-1);
    for (p, sc) in scores {
        let pk = p.s("PK").unwrap();
        assert_eq!(
            (num(&p, "points"), num(&p, "mcorrect")),
            (sc.points, sc.mcorrect),
            "{pk}"
        );
        let st = items
            .iter()
            .find(|i| i.s("PK").ok() == Some(pk) && i.s("SK").ok() == Some("STANDINGS#2024"))
            .unwrap_or_else(|| panic!("standings of {pk}"));
        assert_eq!(
            (num(st, "points"), num(st, "mcorrect"), num(st, "eplayed")),
            (sc.points, sc.mcorrect, 1),
            "standings of {pk}"
        );
    }
}

/// Results that change the scores of 112 of 150 predictions: the scoring job
/// reads the scope's version once and the predictions by BatchGetItem, and
/// every write (the scores, the derive's ledger commit, the standings)
/// goes in transactions of many items. Before, each standings item was
/// synced alone: two GetItem and one TransactWriteItems per changed score
/// in the prediction's batch, and two GetItem more when its own record
/// came back. Exact scores and standings, `verify` clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoring_an_event_costs_round_trips_per_page_and_batch_not_per_score() {
    let count = 150;
    let engine = crate::support::start_engine().await;
    let meter = Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let ModelEnv { engine, mut rt } = runtime(engine, meter.endpoint()).await;
    league(&rt, count).await;
    rt.drain().await.unwrap();
    let before = meter.bill();

    set_results(&rt, &[("m1", 0), ("m2", 1)]).await;
    rt.drain().await.unwrap();
    let bill = meter.bill().since(&before);
    println!("{}", bill.per_change(112));

    let items = scan(&rt).await;
    assert_scored(&items, count);
    assert_clean(&rt).await;
    // Users with pick 0 on m1 or pick 1 on m2.
    let changed = (0..count).filter(|i| i % 2 == 0 || i / 2 % 2 == 1).count();
    assert_eq!(changed, 112);
    let requests = |op: &str| bill.ops.get(op).map_or(0, |o| o.requests);
    // One GetItem per scoring job (the scope's version): one job per
    // result record, each scope one page.
    assert!(
        requests("GetItem") <= 2,
        "GetItem per changed score: {}",
        bill.per_change(changed)
    );
    // Scores: 2 transactions (112 updates and their guards); the derive's
    // ledger commits and the standings: a few per stream batch.
    assert!(
        requests("TransactWriteItems") <= changed as u64 / 8,
        "TransactWriteItems per changed score: {}",
        bill.per_change(changed)
    );
    assert!(
        requests("BatchGetItem") <= changed as u64 / 4,
        "BatchGetItem per changed score: {}",
        bill.per_change(changed)
    );
    // Reads per changed score (each item under 4 KB, read consistently: 1
    // RRU): the scoring job's of the prediction; the derive's of its
    // ledger record and of the prediction; the sync's of the standings'
    // totals and item; and when the standings' own record comes back, its
    // totals once more: 6, plus the scoring job's reads of the predictions
    // whose score did not change (38 of 150: 0.34 per changed score) and
    // the scopes' shared reads. Not read: the standings' ledger record (a
    // counter that implies nothing has none), the standings item when its
    // record comes back (the record's image is what the totals imply), and
    // the standings' totals before the sync that reads them anyway (10.44
    // RRU before).
    let rru = bill.rru() / changed as f64;
    assert!(
        rru < 6.6,
        "RRU per changed score {rru:.2}: {}",
        bill.per_change(changed)
    );
    engine.stop().await;
}

/// Standings synced together while a source's commit moves one of their
/// totals between the read and the write: the transaction's guard on those
/// totals fails, the others are written as read, and that one is read again
/// and ends on the newest totals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_whose_totals_move_during_a_batched_sync_is_read_again() {
    let engine = crate::support::start_engine().await;
    // The processors -> a fault proxy -> a bill meter -> the engine.
    let meter = Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let proxy = FaultProxy::in_front_of(&meter.endpoint())
        .await
        .expect("proxy starts");
    let ModelEnv { engine, mut rt } = runtime(engine, proxy.endpoint()).await;
    let (deriver, users, counters) = standings_of(&mut rt, 6).await;
    // Every user's totals moved (their counter items now lag).
    for (i, u) in users.iter().enumerate() {
        commit(&rt, u, 10 * (i as i64 + 1)).await;
    }
    let before = meter.bill();
    // The sync's first transaction is held; meanwhile u0002's totals move.
    proxy.inject(Fault::slow(
        "TransactWriteItems",
        1,
        std::time::Duration::from_millis(500),
    ));
    let sync = tokio::spawn({
        let deriver = deriver.clone();
        let counters = counters.clone();
        async move { shared::engine::counts::sync(&deriver, counters).await }
    });
    while proxy.injected() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    commit(&rt, "u0002", 1000).await;
    let (writes, notes) = sync.await.unwrap().expect("synced");
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(writes, 6, "each standings item written once");
    // One transaction of the six, cancelled by u0002's guard; the five
    // others sent again as they were; u0002 read again and written alone.
    let tx = meter.bill().since(&before).ops["TransactWriteItems"].clone();
    assert_eq!((tx.requests, tx.cancelled), (3, 1), "{tx:?}");
    for (i, u) in users.iter().enumerate() {
        let extra = if u == "u0002" { 1000 } else { 0 };
        let want = Some(10 * (i as i64 + 1) + extra);
        assert_eq!(standing_points(&rt, u).await, want, "{u}");
    }
    engine.stop().await;
}

/// A transaction of synced counters DynamoDB rejects (a validation error no
/// retry can fix) is split, each counter alone: the one whose write is
/// rejected again is noted as bad input and left as it is, every other is
/// written; nothing fails the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_counter_in_a_batched_sync_is_bad_input_and_the_others_are_written() {
    let engine = crate::support::start_engine().await;
    let proxy = FaultProxy::in_front_of(&engine.endpoint())
        .await
        .expect("proxy starts");
    let ModelEnv { engine, mut rt } = runtime(engine, proxy.endpoint()).await;
    let (deriver, users, counters) = standings_of(&mut rt, 4).await;
    for u in &users {
        commit(&rt, u, 7).await;
    }
    // The transaction of the four, then the first one sent alone.
    proxy.inject(Fault {
        status: 400,
        error_type: "ValidationException".into(),
        ..Fault::throttle("TransactWriteItems", 2)
    });
    let (writes, notes) = shared::engine::counts::sync(&deriver, counters)
        .await
        .expect("no failure");
    assert_eq!(proxy.injected(), 2);
    assert_eq!(writes, 3);
    assert_eq!(notes.len(), 1, "{notes:?}");
    let (rejected, note) = &notes[0];
    assert_eq!(note.metric, shared::metrics::names::BAD_INPUT);
    assert!(
        note.reason.contains("ValidationException"),
        "{}",
        note.reason
    );
    for u in &users {
        let want = if &standings(u) == rejected { 0 } else { 7 };
        assert_eq!(standing_points(&rt, u).await, Some(want), "{u}");
    }
    engine.stop().await;
}
