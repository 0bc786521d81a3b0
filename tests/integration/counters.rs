//! Counter items as the processor keeps them, whoever else touches them: a
//! counter expired by TTL comes back from its key alone; a counter key the
//! counter's own rules reject is bad input of the source (nothing moved);
//! file edits that re-key a counter leave nothing behind after a repair;
//! sums past 64 bits; an expression failing at run time. (A counter deleted
//! by a writer, an item the rules reject that gets no counter written onto
//! it: `tests/scenarios/library/`, `tests/scenarios/hr/`.)

use std::path::PathBuf;

use shared::item::{n, s, Item, ItemExt};

use crate::items::{assert_clean, bad_input, get, key, put, update};
use crate::support::{model_env, shipped, temp_model, ModelEnv};

pub(crate) const BOOK: &str = "01JD0000000000000000000000";

pub(crate) fn loan(member: &str, book: &str, state: &str) -> Item {
    [
        ("PK".to_string(), s(format!("M#{member}"))),
        ("SK".to_string(), s(format!("LOAN#{book}"))),
        ("type".to_string(), s("loan")),
        ("memberId".to_string(), s(member)),
        ("bookId".to_string(), s(book)),
        ("days".to_string(), n(14)),
        ("state".to_string(), s(state)),
        ("since".to_string(), s("2026-11-01T09:00:00.000Z")),
    ]
    .into()
}

/// A counter expired by TTL (a writer set one) comes back from its key
/// alone: the REMOVE carries the TTL service's identity. (Deleted by a
/// writer: `tests/scenarios/library/`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_files_counter_expired_by_ttl_comes_back() {
    let mut env = model_env("library", |o| {
        o.model_file = Some(shipped("examples/library.yaml"));
    })
    .await;
    put(&env.rt, loan("m1", BOOK, "open")).await;
    env.rt.drain().await.unwrap();
    let loans = key("M#m1", "COUNT");
    // Expired by TTL (a writer set one): the REMOVE carries the TTL
    // service's identity, and the counter comes back all the same.
    update(&env, loans.clone(), "SET #ttl = :t", &[(":t", n(1_000))]).await;
    env.rt.drain().await.unwrap();
    assert_eq!(env.engine.sweep_ttl().await.unwrap(), 1);
    env.rt.drain().await.unwrap();
    assert_eq!(open_total(&env, "M#m1", "COUNT").await, (1, 1), "back");
    let back = get(&env, loans).await.expect("loans re-created after TTL");
    assert!(!back.contains_key("ttl"));
    assert_clean(&env.rt).await;
    assert_eq!(bad_input(&env), 0);
}

/// The shipped library file with each `(from, to)` edit made (each one
/// must apply: an edit that no longer matches the file fails the test).
pub(crate) fn library_with(edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(shipped("examples/library.yaml")).expect("reads");
    for (from, to) in edits {
        assert!(text.contains(from), "the edit applies: {from}");
        text = text.replace(from, to);
    }
    text
}

/// The library model of `text` (a file written for the test), fresh.
pub(crate) async fn library_env(text: &str) -> ModelEnv {
    model_env("library", |o| {
        o.model_file = Some(temp_model("counters", text))
    })
    .await
}

/// `(open, total)` of the counter at `(pk, sk)`, which exists.
async fn open_total(env: &ModelEnv, pk: &str, sk: &str) -> (i64, i64) {
    let c = get(env, key(pk, sk)).await.expect("the counter");
    (c.i64("open").unwrap(), c.i64("total").unwrap())
}

pub(crate) async fn ledger_totals(env: &ModelEnv) -> Vec<Item> {
    jobstream::tools::verify::scan_all(&env.rt.dynamodb, &env.rt.config.ledger_table)
        .await
        .expect("scan")
        .into_iter()
        .filter(|r| r.s("pk").unwrap_or_default().starts_with("TOTAL#"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_key_the_counter_rejects_is_bad_input_of_the_source_and_moves_nothing() {
    // The counter's key takes a ULID; the loan binds it through a template
    // (a type check-model cannot know), and a member id is no ULID.
    let text = library_with(&[
        (
            "key: { PK: \"M#${memberId}\", SK: \"COUNT\" }",
            "key: { PK: \"M#${memberId:ulid}\", SK: \"COUNT\" }",
        ),
        (
            "with: { memberId: memberId }",
            "with: { memberId: \"${memberId}\" }",
        ),
    ]);
    let mut env = library_env(&text).await;
    put(&env.rt, loan("m1", BOOK, "open")).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(bad_input(&env), 1, "the loan is bad input, once");
    assert!(ledger_totals(&env).await.is_empty(), "no totals moved");
    assert!(get(&env, key("M#m1", "COUNT")).await.is_none());
    // Nothing else the loan implies applies either (bad input as a whole:
    // not its derived item while its count is refused), and verify agrees
    // with the engine: the loan is reported as bad input, no drift.
    assert!(get(&env, key(format!("B#{BOOK}"), "M#m1")).await.is_none());
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    assert_eq!(report.bad_input.len(), 1, "{:?}", report.bad_input);
    assert!(
        report.bad_input[0].contains("M#m1"),
        "{:?}",
        report.bad_input
    );
    // A member id that is a ULID counts.
    let ulid = "01JD0000000000000000000001";
    put(&env.rt, loan(ulid, BOOK, "open")).await;
    env.rt.drain().await.unwrap();
    let counted = get(&env, key(format!("M#{ulid}"), "COUNT"))
        .await
        .expect("counter");
    assert_eq!(counted.i64("total").unwrap(), 1);
    assert_eq!(ledger_totals(&env).await.len(), 1);
    assert_eq!(bad_input(&env), 1);
}

/// The processors of a second version of a model file deployed on `env`'s
/// tables (a user who edits the file and runs it again). `replay`: the
/// stream is read again from its start (a `dev` without checkpoints); else
/// from its end (a deployed stack whose stream has moved on).
pub(crate) async fn rerun(env: ModelEnv, model: &str, file: PathBuf, replay: bool) -> ModelEnv {
    crate::support::redeploy_model(env, model, |o| {
        o.model_file = Some(file);
        if !replay {
            o.mapping.starting_position = jobstream::local::esm::StartingPosition::Latest;
        }
    })
    .await
}

/// Issue 24, defect 8: a file edit that re-keys a processor-created counter
/// left the old counter items with their values (reported as bad input,
/// never repaired) and their ledger totals forever. `verify` reports them,
/// `--repair` removes them through guarded writes, and nothing a writer
/// owns is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_rekeyed_by_a_file_edit_leaves_nothing_behind_after_repair() {
    let library = library_with(&[]);
    let v2 = library_with(&[(
        "key: { PK: \"M#${memberId}\", SK: \"COUNT\" }",
        "key: { PK: \"M#${memberId}\", SK: \"LOANS\" }",
    )]);
    for replay in [false, true] {
        // `env.rt` runs the first version; `rt` the edited one, on the
        // same tables.
        let mut env = library_env(&library).await;
        put(&env.rt, loan("m1", BOOK, "open")).await;
        put(&env.rt, loan("m2", BOOK, "returned")).await;
        env.rt.drain().await.unwrap();
        assert_clean(&env.rt).await;
        assert!(get(&env, key("M#m1", "COUNT")).await.is_some());
        let mut env = rerun(env, "library", temp_model("counters", &v2), replay).await;
        env.rt.drain().await.unwrap();
        // A writer's item of the old shape, stamped like the counter but
        // never counted into by the processor: not the processor's to delete.
        let mut stray = key("M#m3", "COUNT");
        stray.insert("type".into(), s("loans"));
        stray.insert("open".into(), n(7));
        put(&env.rt, stray.clone()).await;
        env.rt.drain().await.unwrap();
        let report = env.rt.verify().await.expect("verify");
        let said = format!(
            "replay={replay}: {:#?} {:#?}",
            report.problems, report.bad_input
        );
        for old in ["M#m1", "M#m2"] {
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.starts_with("counter:") && p.contains(old) && p.contains("COUNT")),
                "{said}"
            );
            assert!(
                !report.bad_input.iter().any(|b| b.contains(old)),
                "an old counter is no bad input: {said}"
            );
        }
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.starts_with("ledger:") && p.contains("COUNT")),
            "the old totals are reported: {said}"
        );
        assert!(
            report.bad_input.iter().any(|b| b.contains("M#m3")),
            "{said}"
        );
        crate::items::repair(&env.rt, &report).await;
        env.rt.drain().await.unwrap();
        let after = env.rt.verify().await.expect("verify");
        assert!(after.is_clean(), "replay={replay}: {:#?}", after.problems);
        assert!(
            get(&env, key("M#m1", "COUNT")).await.is_none(),
            "replay={replay}"
        );
        assert!(
            get(&env, key("M#m2", "COUNT")).await.is_none(),
            "replay={replay}"
        );
        assert_eq!(
            get(&env, key("M#m3", "COUNT")).await,
            Some(stray),
            "a writer's item stays: replay={replay}"
        );
        assert_eq!(open_total(&env, "M#m1", "LOANS").await, (1, 1));
        assert_eq!(open_total(&env, "M#m2", "LOANS").await, (0, 1));
        let totals = ledger_totals(&env).await;
        assert_eq!(totals.len(), 2, "replay={replay}: {totals:#?}");
        assert!(
            totals.iter().all(|t| t.s("pk").unwrap().contains("LOANS")),
            "replay={replay}: {totals:#?}"
        );
        assert!(env.rt.failed_batches().is_empty());
    }
}

/// A writer-owned counter (a department's `headcount`) whose key template a
/// file edit changed: the old item is the writer's and stays (bad input of
/// the edited model, never deleted by a repair); its ledger totals go once
/// the employees count into the department's new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_owned_counter_rekeyed_by_a_file_edit_is_never_deleted() {
    use crate::seed_items::hr as build;
    let hr = std::fs::read_to_string(shipped("hr.yaml")).expect("reads");
    let v2 = hr.replace(
        "key: { PK: \"ORG#${orgId}\", SK: \"DEPT#${deptId}\" }",
        "key: { PK: \"ORG#${orgId}\", SK: \"D#${deptId}\" }",
    );
    assert_ne!(v2, hr);
    let id = |n: u64| build::ulid(1_767_600_000_000 + n * 86_400_000, u128::from(n) + 7);
    let (org, dept) = (id(1), id(2));
    let mut env = model_env("hr", |o| o.model_file = Some(temp_model("counters", &hr))).await;
    let old_dept = build::dept(&org, &dept, "Dept", &id(9));
    let old_key = shared::item::key_of(&old_dept, &["PK", "SK"]);
    put(&env.rt, old_dept).await;
    put(&env.rt, build::emp(&org, &id(3), "a@acme.co", "A", &dept)).await;
    env.rt.drain().await.unwrap();
    let counted = get(&env, old_key.clone()).await.unwrap();
    assert_eq!(counted.i64("headcount").unwrap(), 1);
    let mut env = rerun(env, "hr", temp_model("counters", &v2), false).await;
    // The writer moves its department to the new key.
    let mut moved = build::dept(&org, &dept, "Dept", &id(9));
    moved.insert("SK".into(), s(format!("D#{dept}")));
    let new_key = shared::item::key_of(&moved, &["PK", "SK"]);
    put(&env.rt, moved).await;
    env.rt.drain().await.unwrap();
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.starts_with("ledger:") && p.contains(&format!("DEPT#{dept}"))),
        "{:#?}",
        report.problems
    );
    assert!(
        !report
            .problems
            .iter()
            .any(|p| p.starts_with("counter:") && p.contains(&format!("DEPT#{dept}"))),
        "{:#?}",
        report.problems
    );
    assert!(
        report
            .bad_input
            .iter()
            .any(|b| b.contains(&format!("DEPT#{dept}"))),
        "{:#?}",
        report.bad_input
    );
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(
        get(&env, old_key).await,
        Some(counted),
        "the writer's item is never deleted"
    );
    assert_eq!(
        get(&env, new_key).await.unwrap().i64("headcount").unwrap(),
        1
    );
    let totals = ledger_totals(&env).await;
    assert_eq!(totals.len(), 1, "{totals:#?}");
    assert!(totals[0].s("pk").unwrap().contains(&format!("D#{dept}")));
    assert!(env.rt.failed_batches().is_empty());
}

/// A file edit after which a source counts into nothing (a `when` added to
/// its count) while the counter's key still matches its entity: `--repair`
/// reconciles the sources the ledger still counts (read from their
/// records), so the counter comes to the sums, as the stream would leave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_no_source_counts_into_after_a_file_edit_is_brought_to_the_sums() {
    let v2 = library_with(&[(
        "      - counter: loans\n        with: { memberId: memberId }\n",
        "      - counter: loans\n        with: { memberId: memberId }\n        when: \"state == 'open'\"\n",
    )]);
    let mut env = library_env(&library_with(&[])).await;
    put(&env.rt, loan("m1", BOOK, "open")).await;
    put(&env.rt, loan("m2", BOOK, "returned")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(open_total(&env, "M#m2", "COUNT").await, (0, 1));
    let mut env = rerun(env, "library", temp_model("counters", &v2), false).await;
    let report = env.rt.verify().await.expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.starts_with("counter:") && p.contains("M#m2")),
        "{:#?}",
        report.problems
    );
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(open_total(&env, "M#m2", "COUNT").await, (0, 0));
    assert_eq!(open_total(&env, "M#m1", "COUNT").await, (1, 1));
    assert!(env.rt.failed_batches().is_empty());
}

/// A sum past 64 bits (two contributions of 2^62 and one of 5) is exact on
/// the counter item, as DynamoDB's numbers hold it (38 digits); the other
/// sums of the counter keep moving; `verify` agrees and `explain` shows it
/// (both panicked on the addition; the counter item froze, every
/// attribute of it, at the first sum past 2^63).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sum_past_64_bits_is_exact_and_every_other_sum_keeps_counting() {
    let text = library_with(&[
        (
            "      since: iso-utc\n    check:",
            "      since: iso-utc\n      fee?: int\n    check:",
        ),
        (
            "add: { open: \"state == 'open' ? 1 : 0\", total: 1 }",
            "add: { open: \"state == 'open' ? 1 : 0\", total: 1, fees: \"fee == null ? 0 : fee\" }",
        ),
        (
            "attributes: [open, total]",
            "attributes: [open, total, fees]",
        ),
    ]);
    assert_eq!(text.matches("fee").count(), 5, "{text}");
    let path = temp_model("counters", &text);
    let mut env = model_env("library", |o| o.model_file = Some(path.clone())).await;
    let big: i64 = 1 << 62;
    for (book, fee) in [
        (BOOK, big),
        ("01JD0000000000000000000002", big),
        ("01JD0000000000000000000003", 5),
    ] {
        let mut l = loan("m1", book, "open");
        l.insert("fee".into(), n(fee));
        put(&env.rt, l).await;
        env.rt.drain().await.unwrap();
    }
    let counter = get(&env, key("M#m1", "COUNT")).await.expect("counter");
    assert_eq!(counter.i64("total").unwrap(), 3, "{counter:?}");
    assert_eq!(counter.i64("open").unwrap(), 3);
    assert_eq!(
        counter.get("fees"),
        Some(&n("9223372036854775813")),
        "2^63 + 5, exact"
    );
    assert_eq!(bad_input(&env), 0);
    assert_clean(&env.rt).await;
    let x = crate::explain::ask_in(&env, &path, "M#m1", "COUNT").await;
    assert!(
        x.lines.iter().any(|l| l.contains("9223372036854775813")),
        "{:#?}",
        x.lines
    );
    // One returned: the sums fall back, exactly.
    put(&env.rt, {
        let mut l = loan("m1", BOOK, "returned");
        l.insert("fee".into(), n(big));
        l
    })
    .await;
    env.rt.drain().await.unwrap();
    let counter = get(&env, key("M#m1", "COUNT")).await.expect("counter");
    assert_eq!(counter.i64("open").unwrap(), 2);
    assert_eq!(counter.get("fees"), Some(&n("9223372036854775813")));
    assert_clean(&env.rt).await;
}

/// R03: an expression that fails on one item at run time (here `size(note)`
/// while the optional `note` is absent: no load-time check can rule it
/// out) makes the item bad input as a whole through the engine: its count
/// does not move while its derived item is refused; once valid, all apply;
/// bad again, all that its last valid state implied stays; verify agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_an_expression_fails_on_applies_none_of_its_effects() {
    let text = library_with(&[
        (
            "      since: iso-utc\n    check:",
            "      since: iso-utc\n      note?: string\n    check:",
        ),
        (
            "      - entity: book_loan\n",
            "      - entity: book_loan\n        when: \"size(note) > 0\"\n",
        ),
    ]);
    let mut env = library_env(&text).await;
    let derived = key(format!("B#{BOOK}"), "M#m1");
    put(&env.rt, loan("m1", BOOK, "open")).await;
    env.rt.drain().await.unwrap();
    assert_eq!(bad_input(&env), 1, "one bad record, one BadInput");
    assert!(
        get(&env, key("M#m1", "COUNT")).await.is_none(),
        "no count moved"
    );
    assert!(get(&env, derived.clone()).await.is_none());
    assert!(ledger_totals(&env).await.is_empty());
    assert_clean(&env.rt).await;
    // Valid: every effect applies.
    let mut noted = loan("m1", BOOK, "open");
    noted.insert("note".into(), s("x"));
    put(&env.rt, noted).await;
    env.rt.drain().await.unwrap();
    let counted = get(&env, key("M#m1", "COUNT")).await.expect("counter");
    assert_eq!(counted.i64("total").unwrap(), 1);
    assert!(get(&env, derived.clone()).await.is_some());
    // Bad again (the note removed, returned meanwhile): what its last valid
    // state implied stays, whole.
    put(&env.rt, loan("m1", BOOK, "returned")).await;
    env.rt.drain().await.unwrap();
    let counted = get(&env, key("M#m1", "COUNT")).await.expect("counter");
    assert_eq!(counted.i64("open").unwrap(), 1, "the open count stays");
    assert!(get(&env, derived).await.is_some(), "the derived item stays");
    assert_clean(&env.rt).await;
}

/// ops10's finding 2: a sum removed from the model file (`late`) stayed
/// on every processor-created counter item, frozen and soon wrong, and
/// `backfill` + `verify` said "no drift". An attribute the model no longer
/// derives on an item the processors own whole (a `created_by: processor`
/// counter) is drift: `verify` names it, the counter's next write removes
/// it (a source written after the deploy), and `backfill` or
/// `verify --repair` remove it from the others. A writer's counter item
/// (`created_by: writer`) is never touched: its other attributes may be
/// the application's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sum_removed_by_a_file_edit_is_drift_and_backfill_or_repair_removes_it() {
    let v1 = library_with(&[
        (
            "add: { open: \"state == 'open' ? 1 : 0\", total: 1 }",
            "add: { open: \"state == 'open' ? 1 : 0\", total: 1, late: \"days > 7 ? 1 : 0\" }",
        ),
        (
            "attributes: [open, total]",
            "attributes: [open, total, late]",
        ),
    ]);
    let v2 = library_with(&[]);
    for by_backfill in [true, false] {
        let mut env = library_env(&v1).await;
        for m in ["m1", "m2", "m3"] {
            put(&env.rt, loan(m, BOOK, "open")).await;
        }
        env.rt.drain().await.unwrap();
        assert_clean(&env.rt).await;
        let late = |i: &Item| i.get("late").cloned();
        let m2 = get(&env, key("M#m2", "COUNT")).await.expect("counter");
        assert_eq!(late(&m2), Some(n(1)));
        let mut env = rerun(env, "library", temp_model("counters", &v2), false).await;
        // A loan returned after the deploy: its counter's write drops the
        // sum the model no longer has.
        put(&env.rt, loan("m1", BOOK, "returned")).await;
        env.rt.drain().await.unwrap();
        let m1 = get(&env, key("M#m1", "COUNT")).await.expect("counter");
        assert_eq!(
            (late(&m1), open_total(&env, "M#m1", "COUNT").await),
            (None, (0, 1))
        );
        let report = env.rt.verify().await.expect("verify");
        let said = format!("{:#?}", report.problems);
        for m in ["M#m2", "M#m3"] {
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.starts_with("counter:") && p.contains(m) && p.contains("late")),
                "by_backfill={by_backfill}: {said}"
            );
        }
        assert_eq!(report.problems.len(), 2, "{said}");
        if by_backfill {
            crate::items::backfill(&env, &Default::default()).await;
        } else {
            crate::items::repair(&env.rt, &report).await;
        }
        env.rt.drain().await.unwrap();
        assert_clean(&env.rt).await;
        for m in ["M#m2", "M#m3"] {
            let c = get(&env, key(m, "COUNT")).await.expect("counter");
            assert_eq!(late(&c), None, "by_backfill={by_backfill}: {m}");
            assert_eq!(open_total(&env, m, "COUNT").await, (1, 1));
        }
        assert_eq!(bad_input(&env), 0);
        assert!(env.rt.failed_batches().is_empty());
    }
}
