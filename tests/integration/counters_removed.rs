//! A counter entity removed from a live model file (its `counter:` block
//! and the counts into it): the items the processor created go (`backfill`,
//! `verify --repair`), never bad input meanwhile; an application's counter
//! items (`created_by: writer`) are never deleted.

use shared::item::{s, Item, ItemExt};

use crate::counters::{ledger_totals, library_env, library_with, loan, rerun, BOOK};
use crate::items::{backfill, bad_input, get, key, put};
use crate::support::temp_model;

/// The library's `count:` into `loans`, and the `loans` entity.
const COUNT: &str = "    count:
      - counter: loans
        with: { memberId: memberId }
        add: { open: \"state == 'open' ? 1 : 0\", total: 1 }
";
const PROCESSOR_LOANS: &str = "  loans:
    owner: processor
    key: { PK: \"M#${memberId}\", SK: \"COUNT\" }
    counter:
      attributes: [open, total]
      created_by: processor
";
const WRITER_LOANS: &str = "  loans:
    key: { PK: \"M#${memberId}\", SK: \"COUNT\" }
    attributes:
      memberId: string
    counter:
      attributes: [open, total]
      created_by: writer
";

/// The library without its counter (the count and the entity).
fn without_counter() -> String {
    library_with(&[(COUNT, ""), (PROCESSOR_LOANS, "")])
}

/// User12 finding 1: the counter items of a removed processor counter were
/// `UnknownEntity` bad input of every later `backfill` and `verify`, and
/// `--repair` deleted their totals but left them, frozen. Now `backfill`
/// deletes them (each unchanged since read) and `--repair` does when no
/// backfill ran; the totals go with `--repair`; no bad input anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_processor_counter_leaves_nothing_behind() {
    for backfill_first in [true, false] {
        let said = format!("backfill first: {backfill_first}");
        let mut env = library_env(&library_with(&[])).await;
        put(&env.rt, loan("m1", BOOK, "open")).await;
        put(&env.rt, loan("m2", BOOK, "returned")).await;
        env.rt.drain().await.unwrap();
        assert!(get(&env, key("M#m1", "COUNT")).await.is_some(), "{said}");
        let mut env = rerun(
            env,
            "library",
            temp_model("counters", &without_counter()),
            false,
        )
        .await;
        if backfill_first {
            let (_, totals) = backfill(&env, &Default::default()).await;
            let bad = totals.bad_input.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(bad, 0, "a removed counter is no bad input: {said}");
            env.rt.drain().await.unwrap();
            for m in ["M#m1", "M#m2"] {
                assert!(get(&env, key(m, "COUNT")).await.is_none(), "{m} {said}");
            }
        }
        let report = env.rt.verify().await.expect("verify");
        assert!(
            report.bad_input.is_empty(),
            "{said}: {:#?}",
            report.bad_input
        );
        crate::items::repair(&env.rt, &report).await;
        env.rt.drain().await.unwrap();
        let after = env.rt.verify().await.expect("verify");
        assert!(after.is_clean(), "{said}: {:#?}", after.problems);
        assert!(after.bad_input.is_empty(), "{said}: {:#?}", after.bad_input);
        for m in ["M#m1", "M#m2"] {
            assert!(get(&env, key(m, "COUNT")).await.is_none(), "{m} {said}");
        }
        assert_eq!(ledger_totals(&env).await, Vec::<Item>::new(), "{said}");
        assert_eq!(bad_input(&env), 0, "the stream met no bad input: {said}");
        assert!(env.rt.failed_batches().is_empty(), "{said}");
    }
}

/// A `created_by: writer` counter removed with its entity: its items are
/// the application's, never deleted (only its ledger totals go); they are
/// items of no entity (bad input) until the file declares their key space
/// (`owner: other`), as for any writer entity removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_writer_counters_items_are_never_deleted() {
    let v1 = library_with(&[(PROCESSOR_LOANS, WRITER_LOANS)]);
    let mut env = library_env(&v1).await;
    let counter: Item = [
        ("PK".to_string(), s("M#m1")),
        ("SK".to_string(), s("COUNT")),
        ("type".to_string(), s("loans")),
        ("memberId".to_string(), s("m1")),
    ]
    .into();
    put(&env.rt, counter).await;
    put(&env.rt, loan("m1", BOOK, "open")).await;
    env.rt.drain().await.unwrap();
    let counted = get(&env, key("M#m1", "COUNT")).await.expect("the writer's");
    assert_eq!(counted.i64("open").unwrap(), 1);
    let v2 = without_counter();
    let mut env = rerun(env, "library", temp_model("counters", &v2), false).await;
    backfill(&env, &Default::default()).await;
    env.rt.drain().await.unwrap();
    let report = env.rt.verify().await.expect("verify");
    assert!(
        !report
            .problems
            .iter()
            .any(|p| p.starts_with("counter:") && p.contains("M#m1")),
        "{:#?}",
        report.problems
    );
    assert!(
        report.bad_input.iter().any(|b| b.contains("M#m1")),
        "{:#?}",
        report.bad_input
    );
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    assert_eq!(
        get(&env, key("M#m1", "COUNT")).await,
        Some(counted.clone()),
        "the writer's item is never deleted"
    );
    assert_eq!(ledger_totals(&env).await, Vec::<Item>::new());
    // Declared another writer's key space: read and left alone.
    let v3 = v2.replace(
        "entities:\n",
        "entities:\n  loans:\n    owner: other\n    key: { PK: \"M#${memberId}\", SK: \"COUNT\" }\n",
    );
    let env = rerun(env, "library", temp_model("counters", &v3), false).await;
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert!(after.bad_input.is_empty(), "{:#?}", after.bad_input);
    assert_eq!(get(&env, key("M#m1", "COUNT")).await, Some(counted));
}
