//! A `compute:` value never moves backwards, not even for a moment (SPEC
//! §2): two jobs of one scope racing (a `backfill`'s and the stream's, a
//! redelivered one and a fresh one) land in the order of their reads of
//! the rows, whatever the point where the older one pauses.
//!
//! The scope's version is the derive's count of its rows: a row the writer
//! just inserted moves it only when the derive takes its record, so in that
//! window a job that read the rows before the insert and one that read them
//! after both hold the same version. moment12's finding 1: an account's
//! `rows` read 43, then 42 (a job that had read 42 rows wrote after the job
//! that had read 43), then 43 again at the scope's next job.

use std::sync::Arc;

use jobstream::faults::{Fault, FaultProxy};
use shared::item::{n, s, Item};

use crate::items::{apply_plan, assert_clean, attrs, get, key, num, put, reads, set_job};
use crate::support::{model_env_behind_proxy, temp_model, ModelEnv};

/// An account's posting count and its last posting's number, over its
/// postings (inserted in order, never deleted: both only grow).
const POSTINGS: &str = r#"
jobstream: 1
name: moment_compute
table: { name: moment_compute, pk: PK, sk: SK }
entities:
  account:
    key: { PK: "ACCT#${accountId}", SK: "ACCOUNT" }
    attributes: { accountId: string }
    compute:
      over: { entity: posting, as: ps }
      values:
        rows: "size(ps)"
        lastN: "size(ps) == 0 ? 0 : max(ps.map(p, p.seq))"
      queue: stats
  posting:
    key: { PK: "ACCT#${accountId}", SK: "P#${postingId}" }
    attributes: { accountId: string, postingId: string, seq: int }
"#;

fn account(id: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ACCT#{id}"))),
        ("SK", s("ACCOUNT")),
        ("type", s("account")),
        ("accountId", s(id)),
    ])
}

fn posting(id: &str, seq: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("ACCT#{id}"))),
        ("SK", s(format!("P#{seq:04}"))),
        ("type", s("posting")),
        ("accountId", s(id)),
        ("postingId", s(format!("{seq:04}"))),
        ("seq", n(seq)),
    ])
}

/// The account's job (its item alone: no listing of the scope's items).
fn job_of(id: &str) -> String {
    serde_json::json!({ "version": 1, "kind": "items", "scope": { "accountId": id },
        "keys": [[format!("ACCT#{id}"), "ACCOUNT"]] })
    .to_string()
}

/// (rows, lastN) of the account as stored.
async fn values(env: &ModelEnv, id: &str) -> (i64, i64) {
    let item = get(env, key(format!("ACCT#{id}"), "ACCOUNT"))
        .await
        .expect("the account");
    (num(&item, "rows"), num(&item, "lastN"))
}

/// One run of the account's job, planned and applied as its consumer does
/// (through the proxy): how many writes landed.
async fn run_job(env: &ModelEnv, id: &str) -> usize {
    let job = set_job(&env.rt.model, "stats");
    let r = reads(env);
    let plan = job.plan(&job_of(id), &r).await.expect("plan");
    apply_plan(&*job, &r, &plan).await.writes()
}

/// Waits until the proxy holds `count` requests (the paused job's).
async fn until_held(proxy: &FaultProxy, count: u64) {
    for waited in 0.. {
        if proxy.injected() >= count {
            return;
        }
        assert!(waited < 3000, "the job sent no such request");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Fails before the fix (the job read the version, the rows, then the
/// item, and guarded its write on the item's values as read): paused
/// before its read of the item, the older job read the item the newer one
/// had written (3 rows), wrote its own 2 rows over it (the version had not
/// moved: the derive had not taken posting 3 yet), and `rows` read 3, then
/// 2 (`(2, 2)` against `(3, 3)` at `BatchGetItem`). Each of the older
/// job's requests is paused in turn (one account each): the newer
/// computation stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_computation_never_lands_after_a_newer_one_wherever_its_job_pauses() {
    let path = temp_model("moment_compute", POSTINGS);
    let (mut env, proxy) =
        model_env_behind_proxy("moment_compute", |o| o.model_file = Some(path.clone())).await;
    let pauses = ["GetItem", "Query", "BatchGetItem", "TransactWriteItems"];
    // Each account with its first posting, computed.
    for (i, _) in pauses.iter().enumerate() {
        let id = format!("a{i}");
        put(&env, account(&id)).await;
        put(&env, posting(&id, 1)).await;
    }
    env.rt.drain().await.expect("drains");
    for (i, op) in pauses.iter().enumerate() {
        let id = format!("a{i}");
        assert_eq!(values(&env, &id).await, (1, 1));
        // Posting 2, not derived yet (the scope's version says 1 row).
        put(&env, posting(&id, 2)).await;
        // The older job pauses at its first `op` about the account.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        proxy.inject(Fault::held(op, 1, gate.clone()).matching(&format!("ACCT#{id}")));
        let older = run_job(&env, &id);
        let newer = async {
            // One request held per account so far.
            until_held(&proxy, i as u64 + 1).await;
            // Posting 3, not derived either; the newer job reads 3 rows.
            put(&env, posting(&id, 3)).await;
            assert_eq!(run_job(&env, &id).await, 1, "{op}: the newer job writes");
            assert_eq!(values(&env, &id).await, (3, 3), "{op}");
            gate.add_permits(1);
        };
        let (_, ()) = tokio::join!(older, newer);
        assert_eq!(
            values(&env, &id).await,
            (3, 3),
            "paused at {op}, the older job's computation landed after the newer one"
        );
    }
    proxy.clear();
    env.rt.drain().await.expect("drains");
    for (i, _) in pauses.iter().enumerate() {
        assert_eq!(values(&env, &format!("a{i}")).await, (3, 3));
    }
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// The same race where the values come back to what the older job read
/// (a posting deleted, then put back, the derive behind both): the older
/// job read the account (2 rows) and then 1 row, and paused before its
/// write; a job wrote 1 row, another 2 again. Fails before the fix (the
/// write was guarded by the values as read, which were 2 again: the older
/// job's 1 row landed over the newer 2, `(1, 1)` against `(2, 2)`): the
/// job guards the sequence it read too, which every write of a job raises.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_computation_never_lands_over_values_that_came_back_to_what_it_read() {
    let path = temp_model("moment_compute", POSTINGS);
    let (mut env, proxy) =
        model_env_behind_proxy("moment_compute", |o| o.model_file = Some(path.clone())).await;
    put(&env, account("b")).await;
    put(&env, posting("b", 1)).await;
    put(&env, posting("b", 2)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(values(&env, "b").await, (2, 2));
    // Posting 2 deleted, not derived (the version still says 2 rows).
    crate::items::delete(&env, key("ACCT#b", "P#0002")).await;
    // The older job reads the account (2, 2) and 1 row, and pauses at its
    // write.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    proxy.inject(Fault::held("TransactWriteItems", 1, gate.clone()).matching("ACCT#b"));
    let older = run_job(&env, "b");
    let newer = async {
        until_held(&proxy, 1).await;
        assert_eq!(run_job(&env, "b").await, 1, "a job writes 1 row");
        assert_eq!(values(&env, "b").await, (1, 1));
        // Posting 2 put back, not derived either: a job writes 2 rows.
        put(&env, posting("b", 2)).await;
        assert_eq!(run_job(&env, "b").await, 1, "a job writes 2 rows");
        assert_eq!(values(&env, "b").await, (2, 2));
        gate.add_permits(1);
    };
    let (older, ()) = tokio::join!(older, newer);
    assert_eq!(
        (older, values(&env, "b").await),
        (0, (2, 2)),
        "the older job's 1 row landed over the newer 2"
    );
    proxy.clear();
    env.rt.drain().await.expect("drains");
    assert_eq!(values(&env, "b").await, (2, 2));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}
