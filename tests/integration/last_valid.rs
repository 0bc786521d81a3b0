//! What stays of an item that is bad input now is what its *last valid image
//! in the stream* implied, whatever the derive read and when (SPEC §2: bad
//! input, exactly once, replay never moves a datum backwards): the valid
//! state and the bad put in one batch, the valid record delivered only after
//! the bad put landed, the slow case for contrast; a delete or a re-create
//! between; replays and redeliveries of the older records, and a derive that
//! read the item ahead of its batch, never move anything back.

use serde_json::Value;
use shared::item::{s, Item, ItemExt};

use crate::items::{assert_clean, bad_input, delete, deliver, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// Tasks counted onto their project (by status too), mirrored under their
/// status, and indexed by it: the user's `mini.yaml` with a derived item
/// and a projection.
const TASKS: &str = r#"jobstream: 1
name: tasks
table:
  name: tasks
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$" }
entities:
  task:
    key: { PK: "P#${projectId}", SK: "TASK#${taskId}" }
    attributes: { projectId: id, taskId: id, title: string, status: [todo, done] }
    project:
      attributes: { GSI1PK: "S#${status}", GSI1SK: "${taskId}" }
    derive:
      - entity: mirror
        with: { status: status, projectId: projectId, taskId: taskId, title: title }
    count:
      - counter: pcount
        with: { projectId: projectId }
        add: { tasks: 1, done: "status == 'done' ? 1 : 0" }
  mirror:
    owner: processor
    key: { PK: "S#${status}", SK: "P#${projectId:id}#TASK#${taskId:id}" }
    attributes: { title: string }
  pcount:
    owner: processor
    key: { PK: "P#${projectId:id}", SK: "COUNT" }
    counter: { attributes: [tasks, done], created_by: processor }
"#;

async fn tasks() -> ModelEnv {
    tasks_at().await.0
}

/// [`tasks`] and its model file.
async fn tasks_at() -> (ModelEnv, std::path::PathBuf) {
    let path = temp_model("tasks", TASKS);
    let file = path.clone();
    (
        model_env("tasks", |o| o.model_file = Some(file)).await,
        path,
    )
}

/// A task; `title: None` makes it bad input (a required attribute missing).
fn task(id: &str, status: &str, title: Option<&str>) -> Item {
    let mut item = crate::items::item(&[
        ("PK", "P#q"),
        ("SK", &format!("TASK#{id}")),
        ("type", "task"),
        ("projectId", "q"),
        ("taskId", id),
        ("status", status),
    ]);
    if let Some(t) = title {
        item.insert("title".into(), s(t));
    }
    item
}

/// `P#q/COUNT`'s (tasks, done), 0 when absent.
async fn counts(env: &ModelEnv) -> (i64, i64) {
    let Some(c) = get(env, key("P#q", "COUNT")).await else {
        return (0, 0);
    };
    let n = |a: &str| c.opt_i64(a).ok().flatten().unwrap_or(0);
    (n("tasks"), n("done"))
}

/// The statuses task `id` is mirrored under, with the mirrored title.
async fn mirrors(env: &ModelEnv, id: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for status in ["todo", "done"] {
        if let Some(m) = get(env, key(format!("S#{status}"), format!("P#q#TASK#{id}"))).await {
            out.push((
                status.to_string(),
                m.s("title").unwrap_or_default().to_string(),
            ));
        }
    }
    out
}

/// The stream records of task `id`, in stream order.
async fn records_of_task(env: &ModelEnv, id: &str) -> Vec<Value> {
    let sk = format!("TASK#{id}");
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["SK"]["S"].as_str() == Some(sk.as_str()))
        .collect()
}

/// Nothing is written onto an item its rules reject: the bad task carries
/// no projection (the writer's put replaced the valid one's).
async fn assert_not_projected(env: &ModelEnv, id: &str) {
    let t = get(env, key("P#q", format!("TASK#{id}")))
        .await
        .expect("task");
    assert!(
        !t.contains_key("GSI1PK"),
        "nothing written onto {id}: {t:?}"
    );
}

/// The user's V01: a valid task, then at once the same task without its
/// title. Processed in one batch (the derive reads the item when it is
/// already bad), the valid state counts exactly as it does when the derive
/// saw it in between (the slow task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_state_overwritten_by_bad_input_before_the_derive_reads_it_still_counts() {
    let (mut env, file) = tasks_at().await;
    put(&env, task("fast", "todo", Some("T"))).await;
    put(&env, task("fast", "todo", None)).await;
    put(&env, task("slow", "todo", Some("T"))).await;
    env.rt.drain().await.unwrap();
    put(&env, task("slow", "todo", None)).await;
    env.rt.drain().await.unwrap();
    assert_eq!(counts(&env).await, (2, 0), "both tasks had a valid state");
    for id in ["fast", "slow"] {
        assert_eq!(
            mirrors(&env, id).await,
            [("todo".into(), "T".into())],
            "{id}"
        );
        assert_not_projected(&env, id).await;
    }
    assert_eq!(bad_input(&env), 2, "each bad put counted once");
    // verify judges from the ledger: no drift, the bad items named as such.
    assert_clean(&env.rt).await;
    let report = env.rt.verify().await.unwrap();
    assert_eq!(report.bad_input.len(), 2, "{:?}", report.bad_input);
    // explain, from the same ledger: the fast task's mirror is kept by its
    // last valid state, as the slow one's.
    for id in ["fast", "slow"] {
        let mirror = crate::explain::ask_in(&env, &file, "S#todo", &format!("P#q#TASK#{id}")).await;
        crate::explain::says(
            &mirror,
            &[&format!("kept by PK=P#q, SK=TASK#{id} (task): bad input now, its last valid state derived it (it stays until that item is fixed or deleted)")],
        );
    }
    // Everything delivered again (a replay from the start) moves nothing.
    let all = env.records().await;
    deliver(&env, &all).await;
    assert_eq!(counts(&env).await, (2, 0));
    assert_clean(&env.rt).await;
}

/// The derive gets the valid record's batch only after the bad put landed
/// (its own batch, then the bad one's): the valid state counts once the
/// derive has read the stream up to the item as it is, the bad put is
/// counted once, by its own record (not also by the batch before, which
/// read the item already bad); the old records delivered again (alone,
/// together, a bisected retry) move nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_valid_record_delivered_after_the_bad_put_landed_counts_and_replays_move_nothing() {
    let mut env = tasks().await;
    put(&env, task("g", "todo", Some("T"))).await;
    put(&env, task("g", "done", None)).await;
    let recs = records_of_task(&env, "g").await;
    assert_eq!(recs.len(), 2);
    deliver(&env, &recs[..1]).await;
    assert_eq!(
        bad_input(&env),
        0,
        "the item read bad is its later record's to count"
    );
    deliver(&env, &recs[1..]).await;
    assert_eq!(bad_input(&env), 1, "one bad put, one BadInput");
    assert_eq!(counts(&env).await, (1, 0), "its valid state counts");
    assert_eq!(mirrors(&env, "g").await, [("todo".into(), "T".into())]);
    assert_not_projected(&env, "g").await;
    // Redelivered: alone, both, in the runtime's own drain (it never
    // checkpointed them), twice.
    for batch in [&recs[..1], &recs[..], &recs[1..], &recs[..1]] {
        deliver(&env, batch).await;
        assert_eq!(counts(&env).await, (1, 0));
    }
    env.rt.drain().await.unwrap();
    assert_eq!(counts(&env).await, (1, 0));
    assert_eq!(mirrors(&env, "g").await, [("todo".into(), "T".into())]);
    assert_clean(&env.rt).await;
    // Backfill and repair read the item (bad) and no image: what is
    // recorded stays.
    crate::items::backfill(&env, &jobstream::tools::backfill::ScanOptions::default()).await;
    assert_eq!(counts(&env).await, (1, 0));
    assert_clean(&env.rt).await;
}

/// The last valid state wins (valid, valid, bad in one batch); a delete
/// after the bad put takes everything away, and a re-create as bad input
/// after a delete implies nothing (its last valid state is "absent").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_valid_state_wins_and_a_delete_between_means_nothing_stays() {
    let mut env = tasks().await;
    // Two valid states then bad input, all in one batch: the second counts.
    put(&env, task("a", "todo", Some("T1"))).await;
    put(&env, task("a", "done", Some("T2"))).await;
    put(&env, task("a", "todo", None)).await;
    // Valid, deleted, re-created as bad input: nothing stays.
    put(&env, task("b", "todo", Some("T"))).await;
    delete(&env, key("P#q", "TASK#b")).await;
    put(&env, task("b", "todo", None)).await;
    // Valid, bad, deleted: nothing stays.
    put(&env, task("c", "done", Some("T"))).await;
    put(&env, task("c", "done", None)).await;
    delete(&env, key("P#q", "TASK#c")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(counts(&env).await, (1, 1), "only a's last valid state");
    assert_eq!(mirrors(&env, "a").await, [("done".into(), "T2".into())]);
    assert!(mirrors(&env, "b").await.is_empty());
    assert!(mirrors(&env, "c").await.is_empty());
    assert_clean(&env.rt).await;
    // The first records again: a's first valid state never comes back.
    let a = records_of_task(&env, "a").await;
    deliver(&env, &a[..1]).await;
    deliver(&env, &a[..2]).await;
    assert_eq!(counts(&env).await, (1, 1));
    assert_eq!(mirrors(&env, "a").await, [("done".into(), "T2".into())]);
    let b = records_of_task(&env, "b").await;
    deliver(&env, &b[..1]).await;
    assert_eq!(counts(&env).await, (1, 1), "b's old valid state stays gone");
    assert_clean(&env.rt).await;
}

/// The derive read the item ahead of its batch (a later valid state), then
/// the item became bad input: a batch holding only an older valid record
/// (cut there, or a bisected retry) must not bring that older state back,
/// not even for a moment; the batch that reaches the bad put settles on the
/// last valid state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_valid_record_never_replaces_a_newer_state_the_derive_read_ahead() {
    let env = tasks().await;
    put(&env, task("h", "todo", Some("A"))).await;
    put(&env, task("h", "done", Some("X"))).await;
    put(&env, task("h", "todo", Some("Y"))).await;
    let first = records_of_task(&env, "h").await;
    // The first record's batch, read when the item is already Y.
    deliver(&env, &first[..1]).await;
    assert_eq!(counts(&env).await, (1, 0));
    assert_eq!(mirrors(&env, "h").await, [("todo".into(), "Y".into())]);
    put(&env, task("h", "done", None)).await;
    // A, X, Y, the projection the derive wrote onto Y, the bad put.
    let recs = records_of_task(&env, "h").await;
    assert_eq!(recs.len(), 5);
    // X's record alone (older than Y, which the derive has seen): nothing
    // moves back to X.
    deliver(&env, &recs[1..2]).await;
    assert_eq!(counts(&env).await, (1, 0), "X is older than what counts");
    assert_eq!(mirrors(&env, "h").await, [("todo".into(), "Y".into())]);
    deliver(&env, &recs[2..]).await;
    assert_eq!(counts(&env).await, (1, 0));
    assert_eq!(mirrors(&env, "h").await, [("todo".into(), "Y".into())]);
    // And the other way: a later valid state the derive never read (Z,
    // written after the derive's last read) counts once its batch reaches
    // the bad put, even when its own batch came before.
    put(&env, task("h", "done", Some("Z"))).await;
    put(&env, task("h", "todo", None)).await;
    let recs = records_of_task(&env, "h").await;
    assert_eq!(recs.len(), 7);
    deliver(&env, &recs[5..6]).await;
    deliver(&env, &recs[6..]).await;
    assert_eq!(counts(&env).await, (1, 1), "Z counts");
    assert_eq!(mirrors(&env, "h").await, [("done".into(), "Z".into())]);
    assert_clean(&env.rt).await;
    for batch in [&recs[..1], &recs[1..2], &recs[..], &recs[2..6]] {
        deliver(&env, batch).await;
        assert_eq!(counts(&env).await, (1, 1));
        assert_eq!(mirrors(&env, "h").await, [("done".into(), "Z".into())]);
    }
}

/// Through the runtime's own mapping, one record per batch: every valid
/// record's batch finds its item already bad (the derive is behind), so
/// each state waits pending until the batch of the bad put; the end state
/// is the one-batch end state. Then the whole stream again, one record at a
/// time (a replay from the start): nothing moves, not even for a moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_per_batch_ends_as_one_batch_and_a_replay_moves_nothing() {
    let path = temp_model("tasks", TASKS);
    let mut env = model_env("tasks", |o| {
        o.model_file = Some(path);
        o.mapping.batch_size = 1;
    })
    .await;
    put(&env, task("f", "todo", Some("T"))).await;
    put(&env, task("f", "todo", None)).await;
    put(&env, task("g", "todo", Some("T1"))).await;
    put(&env, task("g", "done", Some("T2"))).await;
    put(&env, task("g", "todo", None)).await;
    put(&env, task("k", "done", Some("T"))).await;
    delete(&env, key("P#q", "TASK#k")).await;
    put(&env, task("k", "done", None)).await;
    env.rt.drain().await.unwrap();
    assert_eq!(counts(&env).await, (2, 1));
    assert_eq!(mirrors(&env, "f").await, [("todo".into(), "T".into())]);
    assert_eq!(mirrors(&env, "g").await, [("done".into(), "T2".into())]);
    assert!(mirrors(&env, "k").await.is_empty());
    assert_clean(&env.rt).await;
    for r in env.records().await {
        deliver(&env, &[r]).await;
        assert_eq!(counts(&env).await, (2, 1));
        assert_eq!(mirrors(&env, "g").await, [("done".into(), "T2".into())]);
    }
    assert_clean(&env.rt).await;
}

/// A state that waits pending beside the recorded one, each near DynamoDB's
/// item limit (a mirror copying a 210 KB title): the source's ledger record
/// would hold both, past 400 KB. The batch still goes through (a write
/// DynamoDB refuses would fail it on every retry, holding the shard), and
/// the pending state applies once a batch reaches the bad put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_state_beside_a_recorded_one_each_near_the_item_limit_never_holds_the_shard() {
    let mut env = tasks().await;
    let big = |c: char| c.to_string().repeat(210 * 1024);
    put(&env, task("p", "todo", Some(&big('a')))).await;
    env.rt.drain().await.unwrap();
    assert_eq!(mirrors(&env, "p").await, [("todo".into(), big('a'))]);
    put(&env, task("p", "done", Some(&big('b')))).await;
    put(&env, task("p", "todo", None)).await;
    let recs = records_of_task(&env, "p").await;
    // A, the projection written onto A, B, the bad put.
    assert_eq!(recs.len(), 4);
    // B's record alone, read when the item is already bad: B waits pending.
    deliver(&env, &recs[2..3]).await;
    assert_eq!(counts(&env).await, (1, 0), "nothing moves yet");
    assert_eq!(mirrors(&env, "p").await, [("todo".into(), big('a'))]);
    // The bad put's batch reaches the item: B, its last valid state, stays.
    assert_eq!(spills(&env).await, 1, "kept beside its record");
    // verify judges from the record (A's state) and reads past the spill.
    assert_clean(&env.rt).await;
    deliver(&env, &recs[3..]).await;
    assert_eq!(counts(&env).await, (1, 1));
    assert_eq!(mirrors(&env, "p").await, [("done".into(), big('b'))]);
    assert_eq!(spills(&env).await, 0, "gone with the pending state");
    env.rt.drain().await.unwrap();
    assert_clean(&env.rt).await;
    for batch in [&recs[..], &recs[2..3]] {
        deliver(&env, batch).await;
        assert_eq!(counts(&env).await, (1, 1));
        assert_eq!(mirrors(&env, "p").await, [("done".into(), big('b'))]);
    }
}

/// How many pending states the ledger keeps beside their records.
async fn spills(env: &ModelEnv) -> usize {
    let rt = &env.rt;
    jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .expect("scan")
        .iter()
        .filter(|i| i.s("sk") == Ok("L"))
        .count()
}

/// A processor's write can still land on an item gone bad: the derive read
/// the task valid and projects it, its write guarded by what the projection
/// reads (`status`, `taskId`); a writer's bad put that keeps those (the
/// title dropped) lands between the read and the write, and the projection
/// lands on the bad item. The MODIFY that comes back changes only
/// processor-owned attributes of an item already known bad: no new bad
/// input (one bad put, one `BadInput`), whichever batch it comes in. A
/// writer's later bad put still is new bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_write_landing_on_an_item_gone_bad_is_not_bad_input_again() {
    projection_lands_on_a_bad_put(None).await;
}

/// [`a_processor_write_landing_on_an_item_gone_bad_is_not_bad_input_again`]
/// with a bad put the rules accept but whose writes cannot exist (a title
/// whose mirror takes the task's ledger record past DynamoDB's limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_processor_write_landing_on_an_item_past_the_limits_is_not_bad_input_again() {
    let huge = "h".repeat(shared::item::MAX_ITEM_BYTES - 100);
    projection_lands_on_a_bad_put(Some(huge)).await;
}

/// The race of the two tests above: the bad put keeps `status` and
/// `taskId` and has the title `bad_title` (`None`: none).
async fn projection_lands_on_a_bad_put(bad_title: Option<String>) {
    use jobstream::faults::Fault;
    use std::sync::Arc;
    let path = temp_model("tasks", TASKS);
    let (env, proxy) =
        crate::support::model_env_behind_proxy("tasks", |o| o.model_file = Some(path)).await;
    put(&env, task("r", "todo", Some("T"))).await;
    let valid = records_of_task(&env, "r").await;
    // The derive's first write is held until the bad put has landed.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    for op in [
        "TransactWriteItems",
        "UpdateItem",
        "BatchWriteItem",
        "PutItem",
    ] {
        proxy.inject(Fault::held(op, 1, gate.clone()));
    }
    let derive = deliver(&env, &valid);
    let bad_put = async {
        for waited in 0.. {
            if proxy.injected() > 0 {
                break;
            }
            assert!(waited < 3000, "the derive sent no write");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        proxy.clear();
        put(&env, task("r", "todo", bad_title.as_deref())).await;
        gate.add_permits(4);
    };
    tokio::join!(derive, bad_put);
    let item = get(&env, key("P#q", "TASK#r")).await.expect("task");
    assert!(
        item.contains_key("GSI1PK") && item.get("title") != Some(&s("T")),
        "the projection landed on the bad item (the case under test): {:?}",
        item.keys().collect::<Vec<_>>()
    );
    // The valid put, the bad put, the projection's MODIFY.
    let recs = records_of_task(&env, "r").await;
    assert_eq!(recs.len(), 3);
    deliver(&env, &recs[1..2]).await;
    assert_eq!(bad_input(&env), 1, "the bad put");
    deliver(&env, &recs[2..]).await;
    assert_eq!(
        bad_input(&env),
        1,
        "the projection's MODIFY is no new bad input"
    );
    assert_eq!(counts(&env).await, (1, 0), "its last valid state counts");
    // A writer's later bad put (a writer attribute changed) is, in a batch
    // behind the projection's MODIFY too.
    put(&env, task("r", "done", bad_title.as_deref())).await;
    let recs = records_of_task(&env, "r").await;
    deliver(&env, &recs[2..]).await;
    assert_eq!(bad_input(&env), 2, "a writer's later bad put");
}

/// A source whose record, as the limit check sizes it (its key, what it
/// implies, its item's key), is right at DynamoDB's item limit: the record
/// written also carries the engine's bookkeeping (its version, the stream
/// position met, the counters it owes), so it cannot be written. Such an
/// item is bad input known before anything is sent, as `verify` knows it
/// too: its last valid state stays, and verify lists it as bad input, not
/// as drift that a repair could never fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_past_the_limit_with_its_bookkeeping_is_bad_input_that_verify_agrees_on() {
    use shared::item::{item_size, MAX_ITEM_BYTES};
    let mut env = tasks().await;
    let small = 300 * 1024;
    let title = |n: usize| "a".repeat(n);
    put(&env, task("w", "todo", Some(&title(small)))).await;
    env.rt.drain().await.unwrap();
    assert_eq!(counts(&env).await, (1, 0));
    // The record as the check sizes it: without the engine's bookkeeping.
    let rt = &env.rt;
    let ledger = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .expect("scan");
    let mut record = ledger
        .into_iter()
        .find(|i| {
            i.s("sk") == Ok("S")
                && i.get("src").and_then(|s| s.as_m().ok()) == Some(&key("P#q", "TASK#w"))
        })
        .expect("the task's record");
    for bookkeeping in ["ver", "o", "q", "l", "lx", "ttl"] {
        record.remove(bookkeeping);
    }
    let checked = item_size(&record);
    assert!(checked < MAX_ITEM_BYTES, "{checked}");
    // The same status and a title that brings the checked record to the
    // limit exactly (the title is in the record once, in the mirror).
    let at_limit = small + MAX_ITEM_BYTES - checked;
    put(&env, task("w", "done", Some(&title(at_limit)))).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty(), "the shard never stalls");
    assert_eq!(bad_input(&env), 1, "one bad record, one BadInput");
    assert_eq!(counts(&env).await, (1, 0), "its last valid state stays");
    assert_eq!(mirrors(&env, "w").await, [("todo".into(), title(small))]);
    assert_clean(&env.rt).await;
}

/// Two consumers of one source whose pending state is kept beside its
/// record (a lease taken over while the first one's requests are still in
/// flight): the first reads the record, the second commits the batch (the
/// pending state applied, the item beside the record deleted), then the
/// first reads beside the record. What it read is a record older than the
/// item beside it, not a corrupt one: it reads again and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_state_beside_its_record_read_while_another_consumer_commits_is_read_again() {
    use jobstream::faults::Fault;
    use std::sync::Arc;
    let path = temp_model("tasks", TASKS);
    let (env, proxy) =
        crate::support::model_env_behind_proxy("tasks", |o| o.model_file = Some(path)).await;
    let big = |c: char| c.to_string().repeat(210 * 1024);
    put(&env, task("p", "todo", Some(&big('a')))).await;
    deliver(&env, &records_of_task(&env, "p").await).await;
    put(&env, task("p", "done", Some(&big('b')))).await;
    put(&env, task("p", "todo", None)).await;
    let recs = records_of_task(&env, "p").await;
    assert_eq!(recs.len(), 4);
    deliver(&env, &recs[2..3]).await;
    assert_eq!(spills(&env).await, 1, "kept beside its record");
    // The first consumer's read beside the record (its second read of the
    // ledger, after the records) is held.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    proxy.inject(Fault::held("BatchGetItem", 1, gate.clone()).after(1));
    let first = env.rt.stream_processor("derive");
    let event = crate::items::records_event(&recs[3..]);
    let first = tokio::spawn(async move { first.handle(event).await });
    for waited in 0.. {
        if proxy.injected() > 0 {
            break;
        }
        assert!(
            waited < 3000,
            "the first consumer never read beside the record"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // The second consumer commits the same batch meanwhile.
    deliver(&env, &recs[3..]).await;
    assert_eq!(spills(&env).await, 0, "gone with the pending state");
    gate.add_permits(1);
    let resp = first.await.expect("joined").expect("handled");
    assert!(
        resp.batch_item_failures.is_empty(),
        "the first consumer's batch goes through"
    );
    assert_eq!(counts(&env).await, (1, 1));
    assert_eq!(mirrors(&env, "p").await, [("done".into(), big('b'))]);
    assert_clean(&env.rt).await;
}

/// Several bad puts of one item close together, delivered in one batch
/// (user9's #8: one `BadInput` and one WARN line, the first reason): each
/// bad record is one `BadInput`, logged with its own reason, as when each
/// comes in a batch of its own; and its last valid state still counts.
#[tokio::test]
async fn each_bad_put_of_one_item_in_one_batch_is_counted_and_logged_with_its_own_reason() {
    let (logs, _guard) = crate::support::Captured::start();
    let env = tasks().await;
    put(&env, task("u", "todo", Some("T"))).await;
    put(&env, task("u", "todo", None)).await;
    put(&env, task("u", "bogus", Some("T"))).await;
    let mut bad_id = task("u", "todo", Some("T"));
    bad_id.insert("taskId".into(), s("u!"));
    put(&env, bad_id).await;
    put(&env, task("u", "nope", Some("T"))).await;
    put(&env, task("u", "todo", None)).await;
    let recs = records_of_task(&env, "u").await;
    assert_eq!(recs.len(), 6);
    deliver(&env, &recs).await;
    assert_eq!(bad_input(&env), 5, "five bad puts, five BadInput");
    assert_eq!(counts(&env).await, (1, 0), "its last valid state counts");
    let logged = logs.text();
    let lines: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("bad input") && l.contains("TASK#u"))
        .collect();
    assert_eq!(lines.len(), 5, "{logged}");
    // Each with its own reason (the values are never logged).
    for (reason, n) in [
        ("`title` is missing", 2),
        ("`status` has an invalid value", 2),
        ("`taskId`", 1),
    ] {
        let found = lines.iter().filter(|l| l.contains(reason)).count();
        assert_eq!(found, n, "{reason}: {lines:#?}");
    }
}
