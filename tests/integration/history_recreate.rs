//! user6's U03: a root deleted and re-created starts its history over at 1,
//! and its `historySequence` never shows an earlier incarnation's count:
//! not when the fold lags behind the writer (the old incarnation's batch
//! folded after the re-creation), not when the write of the new
//! incarnation's mirror fails after its commit (a consumer killed or
//! throttled between the two, its batch delivered again), and `verify`
//! names such a mirror and `--repair` sets it back.
//!
//! Batches are delivered by hand, as Lambda delivers them: a batch that
//! reports a failed record is delivered again from that record on.

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::faults::Fault;
use serde_json::Value;
use shared::item::{n, s, Item, ItemExt};

use crate::items::{
    assert_clean, attrs, delete, get, history_entries, invoke, key, put, records_event,
};
use crate::support::{model_env, model_env_behind_proxy, temp_model, ModelEnv};

/// Orders under their buyer with numbered lines, and a history of each
/// order and its lines (user6's marketplace, cut to its history).
const ORDERS: &str = r#"
jobstream: 1
name: recreate
table: { name: recreate, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  order:
    key: { PK: "CUST#${buyerId}", SK: "ORDER#${orderId}" }
    attributes: { buyerId: id, orderId: id, status: [cart, confirmed, shipped, cancelled] }
  line:
    key: { PK: "CUST#${buyerId}", SK: "ORDER#${orderId}#LINE#${lineNo}" }
    attributes: { buyerId: id, orderId: id, lineNo: int, qty: int }
  order_entry:
    owner: processor
    key: { PK: "CUST#${buyerId:id}", SK: "ORDER#${orderId:id}#HIST#${sequence}" }
history:
  root:
    entity: order
    created: "Order ${orderId} placed"
    updated:
      - { when: "old.status != new.status", say: "Status ${old.status} -> ${new.status}" }
  members:
    line: { list: lines, fields: [lineNo, qty], order: [lineNo], added: "Added ${qty}", updated: "${old.qty} -> ${new.qty}", removed: "Removed line ${lineNo}" }
  entries: { entity: order_entry, digits: 6 }
"#;

fn order(o: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s("CUST#b1")),
        ("SK", s(format!("ORDER#{o}"))),
        ("type", s("order")),
        ("buyerId", s("b1")),
        ("orderId", s(o)),
        ("status", s(status)),
    ])
}

fn line(o: &str, no: i64, qty: i64) -> Item {
    attrs(vec![
        ("PK", s("CUST#b1")),
        ("SK", s(format!("ORDER#{o}#LINE#{no}"))),
        ("type", s("line")),
        ("buyerId", s("b1")),
        ("orderId", s(o)),
        ("lineNo", n(no)),
        ("qty", n(qty)),
    ])
}

/// The order's `historySequence` (`None`: absent, or no order).
async fn mirror(env: &ModelEnv, o: &str) -> Option<i64> {
    get(env, key("CUST#b1", format!("ORDER#{o}")))
        .await
        .and_then(|i| i.opt_i64("historySequence").ok().flatten())
}

/// The order's entries as (sequence, description), in order.
async fn entries(env: &ModelEnv, o: &str) -> Vec<(i64, String)> {
    history_entries(env, "CUST#b1", &format!("ORDER#{o}#HIST#")).await
}

/// The stream records of order `o` (its root, lines and entries).
async fn records_of(env: &ModelEnv, o: &str) -> Vec<Value> {
    let own = format!("ORDER#{o}");
    env.records()
        .await
        .into_iter()
        .filter(|r| {
            r["dynamodb"]["Keys"]["SK"]["S"]
                .as_str()
                .is_some_and(|sk| sk == own || sk.starts_with(&format!("{own}#")))
        })
        .collect()
}

/// `records` delivered to the history processor as Lambda delivers a
/// batch: again from the failed record on while one fails (bounded).
/// Returns how many deliveries failed.
pub(crate) async fn deliver_history(env: &ModelEnv, records: &[Value]) -> usize {
    let mut from = 0;
    for failed in 0..6 {
        let event = records_event(&records[from..]);
        let resp = invoke(env, "history", &event).await.expect("handled");
        let Some(f) = resp.batch_item_failures.first() else {
            return failed;
        };
        let seq = f.item_identifier.clone().expect("a failed record");
        let at = records[from..]
            .iter()
            .position(|r| r["dynamodb"]["SequenceNumber"].as_str() == Some(seq.as_str()))
            .expect("a record of the batch");
        from += at;
    }
    panic!("the batch kept failing");
}

/// The fold lags behind the writer: the order's old incarnation (4
/// entries) is folded after the writer deleted and re-created it. Its
/// mirror must not land on the new incarnation (which differs from the
/// order as folded), neither from the batch's commit nor from a
/// redelivery of that batch; the creation's batch then starts over at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_incarnations_count_never_lands_on_the_re_created_order() {
    let model = temp_model("recreate", ORDERS);
    let env = model_env("recreate", |o| o.model_file = Some(model)).await;
    for status in ["cart", "shipped", "cancelled", "cart"] {
        put(&env, order("o1", status)).await;
    }
    put(&env, line("o1", 1, 2)).await;
    delete(&env, key("CUST#b1", "ORDER#o1")).await;
    put(&env, order("o1", "confirmed")).await;
    let records = records_of(&env, "o1").await;
    assert_eq!(records.len(), 7, "{records:#?}");
    // The old incarnation, folded now (the writer is far ahead).
    assert_eq!(deliver_history(&env, &records[..5]).await, 0);
    assert_eq!(entries(&env, "o1").await.len(), 5);
    assert_eq!(
        mirror(&env, "o1").await,
        None,
        "the old incarnation's count was written onto the re-created order"
    );
    // The same batch delivered again (a replay): still nothing written.
    assert_eq!(deliver_history(&env, &records[..5]).await, 0);
    assert_eq!(mirror(&env, "o1").await, None, "written by the replay");
    // The deletion (its line and entries cascaded), the re-creation.
    assert_eq!(deliver_history(&env, &records[5..]).await, 0);
    assert_eq!(
        entries(&env, "o1").await,
        [(1, "Order o1 placed".to_string())]
    );
    assert_eq!(mirror(&env, "o1").await, Some(1));
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_eq!(mirror(&env, "o1").await, Some(1));
    assert_clean(&env).await;
}

/// The faults tried while an order's re-creation is folded: the n-th
/// request of an operation fails (throttled before it reaches the engine,
/// or its answer lost after it took effect).
fn faults() -> Vec<Fault> {
    let mut out = Vec::new();
    for op in ["TransactWriteItems", "UpdateItem", "BatchGetItem"] {
        for after in 0..3 {
            out.push(Fault::throttle(op, 1).after(after));
            out.push(Fault::server_error(op, 1).after(after).after_effect());
        }
    }
    out
}

/// The re-created order is identical to the order as last folded (no
/// guard can tell them apart), so the lagging batch's count lands on it;
/// then each fault in turn hits the batch folding the deletion and the
/// re-creation (between the commit of the new history and the write of its
/// mirror, say), which is delivered again from the failed record; the
/// new incarnation's next changes follow. Every order ends at its own
/// count (3), whatever failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_created_order_starts_over_at_one_whatever_fails_between_its_commit_and_its_mirror() {
    let model = temp_model("recreate", ORDERS);
    let (env, proxy) = model_env_behind_proxy("recreate", |o| o.model_file = Some(model)).await;
    let faults = faults();
    let orders: Vec<String> = (0..faults.len()).map(|i| format!("o{i}")).collect();
    for o in &orders {
        for status in ["cart", "shipped", "cancelled", "shipped", "cart"] {
            put(&env, order(o, status)).await;
        }
        delete(&env, key("CUST#b1", format!("ORDER#{o}"))).await;
        put(&env, order(o, "cart")).await;
    }
    let mut failed = 0;
    for (o, fault) in orders.iter().zip(faults) {
        let records = records_of(&env, o).await;
        assert_eq!(records.len(), 7, "{o}: {records:#?}");
        // Folded after the re-creation: the old count (5) lands on the
        // identical new order, whose old entries are still there.
        deliver_history(&env, &records[..5]).await;
        assert_eq!(mirror(&env, o).await, Some(5), "{o}");
        proxy.clear();
        let before = proxy.injected();
        proxy.inject(fault.clone());
        failed += deliver_history(&env, &records[5..]).await;
        let hit = proxy.injected() > before;
        proxy.clear();
        assert_eq!(
            entries(&env, o).await,
            [(1, format!("Order {o} placed"))],
            "{o} ({fault:?}, hit: {hit})"
        );
        assert_eq!(
            mirror(&env, o).await,
            Some(1),
            "{o} ({fault:?}, hit: {hit})"
        );
        // The new incarnation's next changes (with the processor's own
        // writes since, as the stream carries them).
        put(&env, order(o, "shipped")).await;
        put(&env, order(o, "confirmed")).await;
        let since = records_of(&env, o).await;
        deliver_history(&env, &since[records.len()..]).await;
        let said: Vec<i64> = entries(&env, o).await.iter().map(|e| e.0).collect();
        assert_eq!(said, [1, 2, 3], "{o} ({fault:?}, hit: {hit})");
        assert_eq!(
            mirror(&env, o).await,
            Some(3),
            "{o} ({fault:?}, hit: {hit})"
        );
    }
    assert!(failed >= 2, "the faults failed {failed} deliveries");
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_clean(&env).await;
}

/// Order o1 after three changes (entries 1..3), its mirror then written by
/// hand past the count: 22.
async fn order_with_a_mirror_of_22() -> ModelEnv {
    let model = temp_model("recreate", ORDERS);
    let mut env = model_env("recreate", |o| o.model_file = Some(model)).await;
    for status in ["cart", "shipped", "cart"] {
        put(&env, order("o1", status)).await;
    }
    env.rt.drain().await.expect("drains");
    assert_eq!(mirror(&env, "o1").await, Some(3));
    crate::items::update(
        &env,
        key("CUST#b1", "ORDER#o1"),
        "SET #historySequence = :h",
        &[(":h", AttributeValue::N("22".into()))],
    )
    .await;
    env
}

/// What U03 left (a re-created order with 3 entries and the earlier
/// incarnation's count, 22, on its mirror) is what `verify` reports as
/// the mirror's drift; `--repair` sets it to 3 and writes no entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_reports_an_earlier_incarnations_count_on_a_re_created_order_and_repair_sets_it_back(
) {
    let mut env = order_with_a_mirror_of_22().await;
    let report = env.rt.verify().await.expect("verify");
    let found = &report.problems;
    assert_eq!(found.len(), 1, "{}", report.render());
    assert!(
        found[0].contains("historySequence is 22, past the last entry 3"),
        "{found:?}"
    );
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(mirror(&env, "o1").await, Some(3));
    let said: Vec<i64> = entries(&env, "o1").await.iter().map(|e| e.0).collect();
    assert_eq!(said, [1, 2, 3]);
    env.rt.drain().await.expect("drains");
    assert_eq!(mirror(&env, "o1").await, Some(3));
    assert_clean(&env).await;
}

/// A writer that writes the mirror itself, past the count (an earlier
/// incarnation's count copied from a read, say): the fold brings it back
/// to the count, whether the change adds no entry (the mirror set lower
/// with the HEAD rewritten under its version guard, the path a re-created
/// root's mirror takes when its creation's commit did not carry it) or
/// one (set in the commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_a_writer_set_past_the_count_is_brought_back() {
    let mut env = order_with_a_mirror_of_22().await;
    env.rt.drain().await.expect("drains");
    assert_eq!(mirror(&env, "o1").await, Some(3), "no entry added");
    let mut copied = order("o1", "shipped");
    copied.insert("historySequence".into(), n(40));
    put(&env, copied).await;
    env.rt.drain().await.expect("drains");
    let said: Vec<i64> = entries(&env, "o1").await.iter().map(|e| e.0).collect();
    assert_eq!(said, [1, 2, 3, 4]);
    assert_eq!(mirror(&env, "o1").await, Some(4), "an entry added");
    assert_clean(&env).await;
}

/// Orders of 150 KB each (a long note), created and changed in one batch:
/// each commit's mirror is guarded by the whole order as folded, and the
/// transactions stay within DynamoDB's limits (the guard counted in their
/// size); every mirror ends at its count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_orders_commit_with_their_guarded_mirrors() {
    let model = temp_model("recreate", ORDERS);
    let mut env = model_env("recreate", |o| o.model_file = Some(model)).await;
    let note = "n".repeat(150_000);
    for i in 0..12 {
        for status in ["cart", "confirmed"] {
            let mut o = order(&format!("big{i}"), status);
            o.insert("note".into(), s(&note));
            put(&env, o).await;
        }
    }
    env.rt.drain().await.expect("drains");
    for i in 0..12 {
        let o = format!("big{i}");
        assert_eq!(mirror(&env, &o).await, Some(2), "{o}");
        assert_eq!(entries(&env, &o).await.len(), 2, "{o}");
    }
    assert_clean(&env).await;
}

/// user6's run, in small: orders placed, changed, deleted and re-created
/// (some identical to what was deleted) and their lines written, in bursts
/// the fold folds behind the writer, its invocations dropped mid-flight
/// (a kill: redelivered from the checkpoint) and faults on every call it
/// makes; at the end every order's mirror is its own count, entries 1..n.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_churned_under_kills_and_faults_keep_their_own_count() {
    let model = temp_model("recreate", ORDERS);
    let (env, proxy) = model_env_behind_proxy("recreate", |o| o.model_file = Some(model)).await;
    let ops = [
        "TransactWriteItems",
        "UpdateItem",
        "PutItem",
        "DeleteItem",
        "BatchWriteItem",
        "BatchGetItem",
        "Query",
    ];
    crate::support::inject_faults(&proxy, &ops);
    let statuses = ["cart", "shipped", "cancelled", "confirmed"];
    let mut env = env;
    for (round, kill_ms) in [40u64, 120, 400, 60, 250].into_iter().enumerate() {
        for step in 0..12usize {
            for k in 0..4usize {
                let o = format!("o{k}");
                let root = key("CUST#b1", format!("ORDER#{o}"));
                match (step * 5 + k * 3 + round) % 7 {
                    0 | 4 => delete(&env, root).await,
                    1 => put(&env, line(&o, (step % 3) as i64 + 1, step as i64 + 1)).await,
                    _ => put(&env, order(&o, statuses[(step + k + round) % 4])).await,
                }
            }
        }
        // The fold behind the writer, killed mid-flight.
        let _ =
            tokio::time::timeout(std::time::Duration::from_millis(kill_ms), env.rt.drain()).await;
    }
    env.rt.drain().await.expect("drains");
    assert!(proxy.injected() > 0, "faults were injected");
    for k in 0..4 {
        let o = format!("o{k}");
        if get(&env, key("CUST#b1", format!("ORDER#{o}")))
            .await
            .is_none()
        {
            continue;
        }
        let said: Vec<i64> = entries(&env, &o).await.iter().map(|e| e.0).collect();
        let count = said.len() as i64;
        assert_eq!(said, (1..=count).collect::<Vec<_>>(), "{o}");
        assert_eq!(mirror(&env, &o).await, Some(count), "{o}: {said:?}");
    }
    assert!(
        env.rt.failed_batches().is_empty(),
        "{:?}",
        env.rt.failed_batches()
    );
    assert_clean(&env).await;
}

/// A consumer that loaded an order's state, then lost its lease (or lags)
/// and folds the order's deletion after another consumer folded the same
/// deletion, the re-creation and the new incarnation's changes: its
/// cascade must not delete the new incarnation's entries (numbered 1..k
/// again) nor its line (identical to the old one). Its cascade request is
/// held by the proxy while the other consumer works, then let through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_consumers_cascade_never_deletes_the_re_created_orders_entries_or_lines() {
    use std::sync::Arc;
    let model = temp_model("recreate", ORDERS);
    let (env, proxy) = model_env_behind_proxy("recreate", |o| o.model_file = Some(model)).await;
    put(&env, order("o1", "cart")).await;
    put(&env, order("o1", "confirmed")).await;
    put(&env, line("o1", 1, 2)).await;
    assert_eq!(
        deliver_history(&env, &records_of(&env, "o1").await).await,
        0
    );
    assert_eq!(entries(&env, "o1").await.len(), 3);
    let folded = records_of(&env, "o1").await.len();
    delete(&env, key("CUST#b1", "ORDER#o1")).await;
    put(&env, order("o1", "confirmed")).await;
    put(&env, order("o1", "shipped")).await;
    let records = records_of(&env, "o1").await;
    let deletion = &records[folded..folded + 1];
    assert_eq!(deletion[0]["eventName"], "REMOVE");
    // The stale consumer's cascade (whatever request it sends first that
    // writes) is held.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    for op in ["BatchWriteItem", "TransactWriteItems", "DeleteItem"] {
        proxy.inject(Fault::held(op, 1, gate.clone()));
    }
    let event = records_event(deletion);
    let stale = invoke(&env, "history", &event);
    let other = async {
        for waited in 0.. {
            if proxy.injected() > 0 {
                break;
            }
            assert!(waited < 3000, "the stale consumer sent no write");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        proxy.clear();
        // The other consumer: the deletion (its cascade), the re-creation,
        // a change, then the new incarnation's line (the old one's twin).
        assert_eq!(deliver_history(&env, &records[folded..]).await, 0);
        put(&env, line("o1", 1, 2)).await;
        let all = records_of(&env, "o1").await;
        assert_eq!(deliver_history(&env, &all[records.len()..]).await, 0);
        let want = [
            (1, "Order o1 placed".to_string()),
            (2, "Status confirmed -> shipped".to_string()),
            (3, "Added 2".to_string()),
        ];
        assert_eq!(entries(&env, "o1").await, want);
        gate.add_permits(3);
        want
    };
    let (stale, want) = tokio::join!(stale, other);
    // Refused or not, the stale consumer's batch is delivered again.
    let failed = stale.expect("handled").batch_item_failures.len();
    assert!(failed <= 1);
    assert_eq!(deliver_history(&env, deletion).await, 0);
    assert_eq!(
        entries(&env, "o1").await,
        want,
        "the stale cascade deleted the new incarnation's entries"
    );
    assert!(
        get(&env, key("CUST#b1", "ORDER#o1#LINE#1")).await.is_some(),
        "the stale cascade deleted the new incarnation's line"
    );
    assert_eq!(mirror(&env, "o1").await, Some(3));
    let mut env = env;
    env.rt.drain().await.expect("drains");
    assert_eq!(entries(&env, "o1").await, want);
    assert_clean(&env).await;
}
