//! `models/examples/invoices.yaml`: lines summed onto an invoice the lines
//! do not key (`unique: [invoiceId]`, SPEC §8). The invoice is found
//! through its id in any arrival order: lines before the invoice, the
//! invoice deleted and re-created, moved to another account, two invoices
//! claiming one id (bad input until one is left), lines changed while the
//! invoice is absent; a replay never moves a total backwards; verify and
//! repair, backfill; concurrent writers under faults and kills. Each ends
//! exact.

use std::collections::BTreeMap;

use shared::item::{n, s, Item, ItemExt};
use shared::store::Store;

use crate::items::{
    assert_clean, bad_input, delete, deliver, get, key, put, put_all, scan, update,
};
use crate::support::{model_env, shipped, ModelEnv};

async fn invoices_env() -> ModelEnv {
    model_env("invoices", |o| {
        o.model_file = Some(shipped("examples/invoices.yaml"))
    })
    .await
}

fn invoice_key(account: &str, id: &str) -> Item {
    key(format!("ACCOUNT#{account}"), format!("INV#{id}"))
}

/// An invoice as its writer puts it (no totals: they are the processor's).
fn invoice(account: &str, id: &str) -> Item {
    let mut i = invoice_key(account, id);
    i.insert("type".into(), s("invoice"));
    i.insert("accountId".into(), s(account));
    i.insert("invoiceId".into(), s(id));
    i.insert("status".into(), s("draft"));
    i
}

fn line_key(id: &str, no: i64) -> Item {
    key(format!("INV#{id}"), format!("LINE#{no}"))
}

fn line(id: &str, no: i64, amount: i64) -> Item {
    let mut i = line_key(id, no);
    i.insert("type".into(), s("line"));
    i.insert("invoiceId".into(), s(id));
    i.insert("lineNo".into(), n(no));
    i.insert("amount".into(), n(amount));
    i
}

/// (total, lines) of the invoice at `key`, `None` when absent; a total not
/// written yet reads as `(None, None)`.
async fn totals(env: &ModelEnv, account: &str, id: &str) -> Option<(Option<i64>, Option<i64>)> {
    get(env, invoice_key(account, id)).await.map(|i| {
        (
            i.opt_i64("total").ok().flatten(),
            i.opt_i64("lines").ok().flatten(),
        )
    })
}

/// No item of the table has a logical counter key (`@invoice`): the
/// ledger's identity is never written as an item.
async fn assert_no_logical_items(env: &ModelEnv) {
    let logical: Vec<Item> = scan(env)
        .await
        .into_iter()
        .filter(|i| i.s("PK").unwrap_or_default().starts_with('@'))
        .collect();
    assert!(logical.is_empty(), "{logical:?}");
}

/// A move of invoice `id` from account `from` to `to` in one transaction
/// (keys are immutable: a delete and a put), through `store`.
async fn move_in(store: &Store, table: &str, from: &str, to: &str, id: &str) {
    let actions = vec![
        shared::tx::delete(table, invoice_key(from, id)),
        shared::tx::put(table, invoice(to, id)),
    ];
    store.transact(actions).await.expect("move");
}

/// [`move_in`] as the application of `env` moves it.
async fn move_atomically(env: &ModelEnv, from: &str, to: &str, id: &str) {
    let store = Store::new(env.rt.dynamodb.clone());
    move_in(&store, &env.rt.config.table, from, to, id).await
}

/// The two records of a move (a delete and a put in one transaction) reach
/// the processor in either order (records of two items may): handled new
/// first, the totals are on the new key and never on the old one, after
/// each record. (The move itself: `tests/scenarios/invoices/`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_records_of_a_move_handled_new_first_leave_the_totals_on_the_new_key() {
    let mut env = invoices_env().await;
    put(&env.rt, invoice("a-2", "i-1")).await;
    put(&env.rt, line("i-1", 1, 10)).await;
    put(&env.rt, line("i-1", 2, 20)).await;
    env.rt.drain().await.unwrap();
    move_atomically(&env, "a-2", "a-3", "i-1").await;
    let records = env.records().await;
    let of = |pk: &str, kind: &str| {
        records
            .iter()
            .rev()
            .find(|r| r["eventName"] == kind && r["dynamodb"]["Keys"]["PK"]["S"] == pk)
            .cloned()
            .unwrap_or_else(|| panic!("{kind} of {pk}"))
    };
    let (insert, remove) = (of("ACCOUNT#a-3", "INSERT"), of("ACCOUNT#a-2", "REMOVE"));
    for r in [insert, remove] {
        deliver(&env, &[r]).await;
        assert_eq!(totals(&env, "a-3", "i-1").await, Some((Some(30), Some(2))));
        assert_eq!(totals(&env, "a-2", "i-1").await, None);
    }
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "a-3", "i-1").await, Some((Some(30), Some(2))));
    assert_no_logical_items(&env).await;
    assert_clean(&env.rt).await;
    assert_eq!(bad_input(&env), 0);
    assert!(env.rt.failed_batches().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_the_whole_stream_never_moves_a_total_and_writes_nothing() {
    let mut env = invoices_env().await;
    // Lines first, the invoice, a move, a deletion and re-creation.
    put(&env.rt, line("i-1", 1, 10)).await;
    put(&env.rt, line("i-1", 2, 20)).await;
    put(&env.rt, invoice("a-1", "i-1")).await;
    env.rt.drain().await.unwrap();
    put(&env.rt, line("i-1", 2, 25)).await;
    move_atomically(&env, "a-1", "a-2", "i-1").await;
    put(&env.rt, line("i-1", 3, 1)).await;
    delete(&env, invoice_key("a-2", "i-1")).await;
    delete(&env, line_key("i-1", 1)).await;
    put(&env.rt, invoice("a-2", "i-1")).await;
    env.rt.drain().await.unwrap();
    let truth = Some((Some(26), Some(2)));
    assert_eq!(totals(&env, "a-2", "i-1").await, truth);
    // A restarted consumer reading from TRIM_HORIZON: every record again,
    // in small batches, older images first. The total after each batch.
    let records = env.records().await;
    assert!(records.len() > 10, "{}", records.len());
    let before = env.rt.processor_writes();
    for chunk in records.chunks(3) {
        deliver(&env, chunk).await;
        assert_eq!(
            totals(&env, "a-2", "i-1").await,
            truth,
            "a replayed older record moved the total"
        );
        assert_eq!(totals(&env, "a-1", "i-1").await, None);
    }
    assert_eq!(env.rt.processor_writes(), before, "a replay writes nothing");
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_reports_a_wrong_total_on_a_located_invoice_and_repair_fixes_it() {
    let mut env = invoices_env().await;
    put(&env.rt, line("i-1", 1, 10)).await;
    put(&env.rt, line("i-1", 2, 20)).await;
    put(&env.rt, invoice("a-7", "i-1")).await;
    env.rt.drain().await.unwrap();
    assert_clean(&env.rt).await;
    // A writer overwrites the totals; verify runs before the stream does.
    let mut wrong = invoice("a-7", "i-1");
    wrong.insert("total".into(), n(999));
    wrong.insert("lines".into(), n(2));
    put(&env.rt, wrong).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(!report.is_clean());
    let said = format!("{:#?}", report.problems);
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("total = 999, the sources sum to 30")),
        "{said}"
    );
    crate::items::repair(&env.rt, &report).await;
    assert_eq!(totals(&env, "a-7", "i-1").await, Some((Some(30), Some(2))));
    assert_clean(&env.rt).await;
    // Missing totals (a writer dropped them): reported, repaired.
    put(&env.rt, invoice("a-7", "i-1")).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("total is absent, the sources sum to 30")),
        "{:#?}",
        report.problems
    );
    crate::items::repair(&env.rt, &report).await;
    assert_clean(&env.rt).await;
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "a-7", "i-1").await, Some((Some(30), Some(2))));
    assert_clean(&env.rt).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_loaded_without_processors_is_exact_after_backfill() {
    let mut env = invoices_env().await;
    let mut items = Vec::new();
    for inv in 0..6 {
        let id = format!("i-{inv}");
        items.extend((1..=4).map(|no| line(&id, no, inv * 10 + no)));
        if inv % 2 == 0 {
            items.push(invoice(&format!("a-{}", inv % 3), &id));
        }
    }
    put_all(&env, items).await;
    // Never read from the stream: backfill alone.
    let opts = jobstream::tools::backfill::ScanOptions {
        segments: 2,
        ..Default::default()
    };
    crate::items::backfill(&env, &opts).await;
    for inv in [0i64, 2, 4] {
        let sum: i64 = (1..=4).map(|no| inv * 10 + no).sum();
        assert_eq!(
            totals(&env, &format!("a-{}", inv % 3), &format!("i-{inv}")).await,
            Some((Some(sum), Some(4))),
            "i-{inv}"
        );
    }
    assert_clean(&env.rt).await;
    // The stream after it changes nothing.
    env.rt.drain().await.unwrap();
    assert_clean(&env.rt).await;
    // The invoices that were missing appear: their totals land.
    put(&env.rt, invoice("a-9", "i-1")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "a-9", "i-1").await, Some((Some(50), Some(4))));
    assert_clean(&env.rt).await;
}

/// One writer's share of the concurrent workload: lines of its invoices
/// written, changed and deleted, its invoices created late, moved (in one
/// transaction) and deleted and re-created.
async fn writer(store: Store, table: String, w: usize) {
    let ids: Vec<String> = (0..3).map(|i| format!("w{w}-{i}")).collect();
    for round in 0..4i64 {
        for (k, id) in ids.iter().enumerate() {
            let lines: Vec<Item> = (1..=3)
                .map(|no| line(id, no, round * 7 + no + k as i64))
                .collect();
            store.put_items(&table, lines).await.expect("lines");
            let account = format!("a{}", (round as usize + k) % 2);
            match round {
                // Lines first; the invoice after.
                0 => {}
                1 => store
                    .put_items(&table, vec![invoice(&account, id)])
                    .await
                    .expect("invoice"),
                2 => {
                    let from = format!("a{}", (1 + k) % 2);
                    move_in(&store, &table, &from, &account, id).await;
                }
                _ => {
                    let from = format!("a{}", (2 + k) % 2);
                    store
                        .delete_keys(&table, vec![invoice_key(&from, id), line_key(id, 2)])
                        .await
                        .expect("delete");
                    store
                        .put_items(&table, vec![invoice(&from, id)])
                        .await
                        .expect("re-create");
                }
            }
        }
    }
}

/// The invoices of the table and what their lines sum to.
async fn expected(env: &ModelEnv) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for i in scan(env).await {
        if i.s("type").ok() == Some("line") {
            let e = out
                .entry(i.s("invoiceId").unwrap().to_string())
                .or_default();
            e.0 += i.i64("amount").unwrap();
            e.1 += 1;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_under_faults_and_kills_end_exact() {
    let (crate::support::ModelEnv { engine, mut rt }, proxy) =
        crate::support::model_env_behind_proxy("invoices", |o| {
            o.model_file = Some(shipped("examples/invoices.yaml"))
        })
        .await;
    let table = rt.config.table.clone();
    let writers_store = Store::new(rt.dynamodb.clone());
    let ops = [
        "TransactWriteItems",
        "UpdateItem",
        "GetItem",
        "BatchGetItem",
        "Query",
    ];
    crate::support::inject_faults(&proxy, &ops);
    let writers: Vec<_> = (0..3)
        .map(|w| tokio::spawn(writer(writers_store.clone(), table.clone(), w)))
        .collect();
    // The consumer killed mid-batch again and again while the writers run
    // (the invocation dropped at any point), then run to the end.
    for ms in [30u64, 150, 600, 2000] {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(ms), rt.drain()).await;
    }
    for w in writers {
        w.await.expect("writer");
    }
    for ms in [50u64, 300] {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(ms), rt.drain()).await;
    }
    rt.drain().await.unwrap();
    assert!(proxy.injected() > 0, "faults were injected");
    assert!(
        proxy.injected_after_effect() > 0,
        "answers were lost after their request took effect"
    );
    assert!(rt.failed_batches().is_empty(), "{:?}", rt.failed_batches());
    let env = ModelEnv { engine, rt };
    let want = expected(&env).await;
    let mut seen = 0;
    for i in scan(&env).await {
        if i.s("type").ok() != Some("invoice") {
            continue;
        }
        seen += 1;
        let id = i.s("invoiceId").unwrap();
        let (total, lines) = want.get(id).copied().unwrap_or_default();
        assert_eq!(
            (i.opt_i64("total").unwrap(), i.opt_i64("lines").unwrap()),
            (Some(total), Some(lines)),
            "{id}"
        );
    }
    assert_eq!(seen, 9, "every invoice exists once");
    assert_no_logical_items(&env).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert!(report.bad_input.is_empty(), "{:?}", report.bad_input);
    assert_eq!(bad_input(&env), 0, "an atomic move is no conflict");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_an_invoices_lines_and_the_totals_of_its_identity() {
    let mut env = invoices_env().await;
    put(&env.rt, line("i-1", 1, 10)).await;
    put(&env.rt, line("i-1", 2, 20)).await;
    put(&env.rt, invoice("a-1", "i-1")).await;
    env.rt.drain().await.unwrap();
    let file = shipped("examples/invoices.yaml");
    let x = crate::explain::ask_in(&env, &file, "ACCOUNT#a-1", "INV#i-1").await;
    assert_eq!(x.kind, "counter", "{:#?}", x.lines);
    crate::explain::says(
        &x,
        &[
            "found by its identity: totals kept under PK=@invoice, SK=[\"i-1\"]",
            "counted by PK=INV#i-1, SK=LINE#2 (line) through `count:` of line: total +20, lines +1",
            "total: the sources imply 30; the item holds 30; the ledger's total is 30",
        ],
    );
    // A line counts into the invoice item its identity finds, not only the
    // ledger's logical key (user10's #8: `counts into PK=@product,
    // SK=["p11"]`); one whose invoice is not written yet says the totals
    // wait.
    let x = crate::explain::ask_in(&env, &file, "INV#i-1", "LINE#2").await;
    crate::explain::says(
        &x,
        &["counts into PK=ACCOUNT#a-1, SK=INV#i-1 (invoice), found by its identity PK=@invoice, SK=[\"i-1\"]: total +20, lines +1"],
    );
    put(&env.rt, line("i-9", 1, 5)).await;
    env.rt.drain().await.unwrap();
    let x = crate::explain::ask_in(&env, &file, "INV#i-9", "LINE#1").await;
    crate::explain::says(
        &x,
        &["counts into PK=@invoice, SK=[\"i-9\"] (no item carries its identity yet: the totals wait in the ledger): total +5, lines +1"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_whose_id_changed_is_never_given_its_old_identitys_totals() {
    let mut env = invoices_env().await;
    put(&env.rt, line("i-1", 1, 10)).await;
    put(&env.rt, line("i-1", 2, 20)).await;
    put(&env.rt, invoice("a-1", "i-1")).await;
    env.rt.drain().await.unwrap();
    // Moved (the ledger index lists the new key), then the writer changes
    // its id attribute and writes a total; before the stream says so,
    // i-1's totals are synced: the listed item no longer carries i-1.
    move_atomically(&env, "a-1", "a-1b", "i-1").await;
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "a-1b", "i-1").await, Some((Some(30), Some(2))));
    let values = [(":i", s("i-2")), (":t", n(7))];
    update(
        &env,
        invoice_key("a-1b", "i-1"),
        "SET invoiceId = :i, #total = :t",
        &values,
    )
    .await;
    let deriver = env.rt.processors.derive.deriver();
    let logical = key("@invoice", "[\"i-1\"]");
    let counter = deriver
        .rules
        .counter(&logical)
        .expect("the identity's counter");
    let (writes, notes) = shared::engine::counts::sync(deriver, vec![counter])
        .await
        .expect("sync");
    assert_eq!((writes, notes.len()), (0, 0), "{notes:?}");
    assert_eq!(
        totals(&env, "a-1b", "i-1").await,
        Some((Some(7), Some(2))),
        "nothing written onto an item of another identity"
    );
    // The stream then: the item is bad input (its key says i-1, its
    // attribute i-2), nothing is written onto it; fixed, it is i-1's again.
    env.rt.drain().await.unwrap();
    assert_eq!(bad_input(&env), 1);
    assert_eq!(totals(&env, "a-1b", "i-1").await, Some((Some(7), Some(2))));
    put(&env.rt, invoice("a-1b", "i-1")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "a-1b", "i-1").await, Some((Some(30), Some(2))));
    assert_clean(&env.rt).await;
}

/// Two invoices claim one id (`z`) while another (`a`) is counted in the
/// same batch: the bad input is logged under the contested identity, never
/// under the other (user8's W05: the conflict was logged with the identity
/// of another event, the counters' syncs finishing out of order).
#[tokio::test]
async fn a_contested_identity_is_logged_under_its_own_key() {
    let (logs, _guard) = crate::support::Captured::start();
    let mut env = invoices_env().await;
    put_all(
        &env,
        vec![
            invoice("acc1", "z"),
            invoice("acc2", "z"),
            invoice("acc1", "a"),
            line("a", 1, 5),
            line("z", 1, 7),
        ],
    )
    .await;
    env.rt.drain().await.unwrap();
    assert_eq!(totals(&env, "acc1", "a").await, Some((Some(5), Some(1))));
    let text = logs.text();
    let noted: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("claim the identity"))
        .collect();
    assert!(!noted.is_empty(), "the contest is logged: {text}");
    for l in noted {
        assert!(
            l.contains("\"z\"") && !l.contains("\"a\""),
            "logged under the contested identity: {l}"
        );
    }
}
