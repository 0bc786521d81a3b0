//! user10's #3: a legal writer item near DynamoDB's 400 KB item limit (an
//! order, a history root and a counter, with a large undeclared `note`).
//! DynamoDB accepts the writer's put; what the processors would add to it
//! (the derive's projection and sums, the history's sequence mirror) or
//! keep of it (the history's state of it in the ledger) cannot exist. Each
//! processor knows it before anything is sent: the record is bad input of
//! its own (logged with its key and the limit, counted once), nothing is
//! written for it, and the shard moves on at once, the next record (a line
//! of the order, a history member) folded as any. `backfill` of such a
//! table lists the item as bad input and goes on; `verify` lists it as bad
//! input, not drift.

use std::sync::atomic::Ordering::Relaxed;

use shared::item::{item_size, s, Item, ItemExt, MAX_ITEM_BYTES};
use shared::metrics::names;

use crate::items::{attrs, get, key, metric_of, put};
use crate::support::{model_env, temp_model, Captured, ModelEnv};

/// Orders counted by their lines, indexed by customer; `HISTORY` appended
/// when the test wants the order's history.
const ORDERS: &str = r#"jobstream: 1
name: bigorders
table:
  name: bigorders
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  order:
    key: { PK: "ORDER#${orderId}", SK: "ORDER" }
    attributes:
      orderId: id
      customerId: id
      status: [placed, paid]
    counter:
      attributes: [total, lineCount]
      created_by: writer
    project:
      attributes:
        GSI1PK: "CUST#${customerId}"
        GSI1SK: "ORDER#${orderId}"
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${lineNo}" }
    attributes:
      orderId: id
      lineNo: int
      qty: int
    count:
      - counter: order
        with: { orderId: orderId }
        add: { total: qty, lineCount: 1 }
"#;

const HISTORY: &str = r#"  order_entry:
    owner: processor
    key: { PK: "ORDER#${orderId}", SK: "HIST#${sequence}" }
history:
  root: { entity: order, created: "Order placed by ${customerId}" }
  members:
    line: { list: lines, fields: [lineNo, qty], order: [lineNo] }
  entries: { entity: order_entry, digits: 6 }
"#;

async fn orders(history: bool) -> ModelEnv {
    let text = if history {
        format!("{ORDERS}{HISTORY}")
    } else {
        ORDERS.to_string()
    };
    let path = temp_model("bigorders", &text);
    model_env("bigorders", |o| o.model_file = Some(path)).await
}

fn order(id: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{id}"))),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s(id)),
        ("customerId", s("c1")),
        ("status", s("placed")),
    ])
}

/// Order `id` with a `note` that takes it to 8 bytes under the item limit:
/// DynamoDB takes it, but not with a `historySequence` or a projection.
fn big_order(id: &str) -> Item {
    let mut o = order(id);
    let base = item_size(&o) + "note".len();
    o.insert("note".into(), s("n".repeat(MAX_ITEM_BYTES - 8 - base)));
    assert_eq!(item_size(&o), MAX_ITEM_BYTES - 8);
    o
}

fn line(order: &str, no: i64, qty: i64) -> Item {
    attrs(vec![
        ("PK", s(format!("ORDER#{order}"))),
        ("SK", s(format!("LINE#{no}"))),
        ("type", s("line")),
        ("orderId", s(order)),
        ("lineNo", shared::item::n(no)),
        ("qty", shared::item::n(qty)),
    ])
}

/// The big order, a line of it, then an order and a line after them.
async fn put_orders(env: &ModelEnv) {
    put(&env.rt, big_order("big")).await;
    put(&env.rt, line("big", 1, 2)).await;
    put(&env.rt, order("after")).await;
    put(&env.rt, line("after", 1, 3)).await;
}

/// The history: the root's record is bad input of its own to the history
/// (its mirror cannot be written onto it, nor its state kept in the
/// ledger), counted once and logged with its key and the limit, never a
/// retried transaction given up to the on-failure destination; the line
/// after it (a member) is folded as any, and so is the order after them.
/// Before: the history retried the root's record ~25 times (a
/// `ValidationException` on its commit), then the line's (its adoption's
/// parts refused), and gave both up.
#[tokio::test]
async fn a_root_whose_history_writes_cannot_exist_is_bad_input_and_the_next_record_folds() {
    let (logs, _guard) = Captured::start();
    let mut env = orders(true).await;
    put_orders(&env).await;
    env.rt.drain().await.unwrap();
    assert!(
        env.rt.failed_batches().is_empty(),
        "no record given up: {:?}",
        env.rt.failed_batches()
    );
    assert_eq!(
        metric_of(&env, "history", names::FAILED_RECORD),
        0,
        "never retried"
    );
    assert_eq!(
        metric_of(&env, "history", names::BAD_INPUT),
        1,
        "the root's record, once"
    );
    // Nothing written for it: no mirror, no entry.
    let big = get(&env, key("ORDER#big", "ORDER")).await.unwrap();
    assert!(!big.contains_key("historySequence"));
    assert!(get(&env, key("ORDER#big", "HIST#000001")).await.is_none());
    // The order after it has its history: its creation and its line.
    let after = get(&env, key("ORDER#after", "ORDER")).await.unwrap();
    assert_eq!(after.opt_i64("historySequence").unwrap(), Some(2));
    let entry = get(&env, key("ORDER#after", "HIST#000002"))
        .await
        .expect("the line's entry");
    assert_eq!(entry.s("description").unwrap(), "Added line");
    assert_eq!(after.i64("total").unwrap(), 3);
    let logged = logs.text();
    let bad = logged
        .lines()
        .find(|l| l.contains("processor=\"history\"") && l.contains("bad input"))
        .unwrap_or_else(|| panic!("no history bad input logged:\n{logged}"));
    assert!(bad.contains("PK=ORDER#big, SK=ORDER"), "{bad}");
    assert!(
        bad.contains("historySequence") && bad.contains(&MAX_ITEM_BYTES.to_string()),
        "names the write and the limit: {bad}"
    );
    assert!(!bad.contains("nnnn"), "never the value: {bad}");
    // verify: the order is bad input, not drift.
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
    assert!(
        report.bad_input.iter().any(|b| b.contains("ORDER#big")),
        "{:?}",
        report.bad_input
    );
}

/// `verify` of a counter whose item cannot hold its sums (the derive
/// classed the order as bad input: the item would pass 400 KB with its
/// projection and sums): listed as bad input, not as drift a repair could
/// never land. Before: `counter: PK=ORDER#big, SK=ORDER: total is absent,
/// the sources sum to 2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_whose_item_cannot_hold_its_sums_is_bad_input_to_verify_not_drift() {
    let mut env = orders(false).await;
    put_orders(&env).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    let big = get(&env, key("ORDER#big", "ORDER")).await.unwrap();
    assert!(!big.contains_key("total") && !big.contains_key("GSI1PK"));
    let after = get(&env, key("ORDER#after", "ORDER")).await.unwrap();
    assert_eq!(after.i64("total").unwrap(), 3);
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
    assert!(
        report.bad_input.iter().any(|b| b.contains("ORDER#big")),
        "{:?}",
        report.bad_input
    );
}

/// `backfill` of a table holding the big order (loaded while no processor
/// ran): the order is bad input, counted in the summary (its key in the
/// log), and the rest is backfilled: the order after it imported, its
/// counter exact. Before: backfill failed at the order (`BatchWriteItem on
/// jobstream-ledger failed (ValidationException)`), no summary, no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_of_a_table_with_a_root_near_400_kb_lists_it_as_bad_input_and_goes_on() {
    let env = orders(true).await;
    put_orders(&env).await;
    let (report, totals) = jobstream::tools::backfill::backfill(
        &env.rt.dynamodb,
        &env.rt.config,
        &env.rt.processors,
        &Default::default(),
        false,
    )
    .await
    .expect("backfill goes on past the big order");
    assert_eq!(report.scanned, 4);
    assert_eq!(totals.imported.load(Relaxed), 1, "the order after it");
    assert_eq!(totals.bad_input.load(Relaxed), 1, "the big order");
    assert!(
        totals.line(false).contains("1 bad input"),
        "{}",
        totals.line(false)
    );
    let after = get(&env, key("ORDER#after", "ORDER")).await.unwrap();
    assert_eq!(after.i64("total").unwrap(), 3);
    assert_eq!(after.opt_i64("historySequence").unwrap(), Some(1));
    let big = get(&env, key("ORDER#big", "ORDER")).await.unwrap();
    assert!(!big.contains_key("historySequence") && !big.contains_key("total"));
    let verified = env.rt.verify().await.expect("verify");
    assert!(verified.is_clean(), "drift: {:#?}", verified.problems);
}

/// A `ValidationException` the limits known before sending did not foresee
/// (injected: DynamoDB refuses the history's first two transactions) is
/// classed by the one error policy: never a failed record retried and
/// given up. The batch is folded again, each record's writes in a
/// transaction of their own; the record whose writes DynamoDB refuses is
/// bad input (its key and the refusal in the log, counted once), and the
/// others fold.
#[tokio::test]
async fn a_validation_exception_that_still_comes_back_is_bad_input_of_its_record_alone() {
    use jobstream::faults::Fault;
    let (logs, _guard) = Captured::start();
    let path = temp_model("bigorders", &format!("{ORDERS}{HISTORY}"));
    let (env, proxy) =
        crate::support::model_env_behind_proxy("bigorders", |o| o.model_file = Some(path)).await;
    put(&env.rt, order("a")).await;
    put(&env.rt, order("b")).await;
    put(&env.rt, line("b", 1, 3)).await;
    let records = env.records().await;
    proxy.inject(Fault::validation("TransactWriteItems", 2));
    let event = crate::items::records_event(&records);
    let resp = crate::items::invoke(&env, "history", &event)
        .await
        .expect("handled");
    assert!(
        resp.batch_item_failures.is_empty(),
        "never a failed record: {resp:?}"
    );
    assert_eq!(metric_of(&env, "history", names::FAILED_RECORD), 0);
    assert_eq!(
        metric_of(&env, "history", names::BAD_INPUT),
        1,
        "the record refused, once"
    );
    // Order a's creation was refused: nothing written for it; b's history
    // is whole.
    assert!(get(&env, key("ORDER#a", "HIST#000001")).await.is_none());
    let b = get(&env, key("ORDER#b", "ORDER")).await.unwrap();
    assert_eq!(b.opt_i64("historySequence").unwrap(), Some(2));
    assert!(get(&env, key("ORDER#b", "HIST#000002")).await.is_some());
    let logged = logs.text();
    let bad = logged
        .lines()
        .find(|l| l.contains("bad input") && l.contains("refuses"))
        .unwrap_or_else(|| panic!("no refusal logged:\n{logged}"));
    assert!(bad.contains("PK=ORDER#a, SK=ORDER"), "{bad}");
    assert!(bad.contains("ValidationException"), "{bad}");
}

/// The big order put again by its writer without its `note`: the first
/// valid state of a root whose creation the history refused is its
/// creation to the history (entry 1, `created`, its lines in the
/// snapshot, the mirror), not an update of a root it never showed.
/// Before: no entry at all (told from the refused image as an update no
/// `updated` rule matched), so the order's history never started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_put_right_after_its_refused_creation_starts_its_history() {
    let mut env = orders(true).await;
    put_orders(&env).await;
    env.rt.drain().await.unwrap();
    assert!(get(&env, key("ORDER#big", "HIST#000001")).await.is_none());
    put(&env.rt, order("big")).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    let entry = get(&env, key("ORDER#big", "HIST#000001"))
        .await
        .expect("entry 1");
    assert_eq!(entry.s("description").unwrap(), "Order placed by c1");
    let lines = entry
        .get("snapshot")
        .and_then(|s| s.as_m().ok())
        .and_then(|s| s.get("lines"))
        .and_then(|l| l.as_l().ok())
        .map(Vec::len);
    assert_eq!(lines, Some(1), "{entry:?}");
    let big = get(&env, key("ORDER#big", "ORDER")).await.unwrap();
    assert_eq!(big.opt_i64("historySequence").unwrap(), Some(1));
    assert_eq!(big.i64("total").unwrap(), 2, "the derive's sums too");
    crate::items::assert_clean(&env.rt).await;
}

/// A member near the limit (a line with a large undeclared `note`): the
/// state the fold keeps of it cannot fit a ledger item, so its record is
/// bad input to the history (counted once, nothing written for it) and the
/// order's history goes on without it; `verify` lists it as bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_state_cannot_be_kept_is_bad_input_and_its_root_history_goes_on() {
    let mut env = orders(true).await;
    put(&env.rt, order("m")).await;
    let mut big = line("m", 1, 2);
    let base = item_size(&big) + "note".len();
    big.insert("note".into(), s("n".repeat(MAX_ITEM_BYTES - 8 - base)));
    put(&env.rt, big).await;
    put(&env.rt, line("m", 2, 5)).await;
    env.rt.drain().await.unwrap();
    assert!(env.rt.failed_batches().is_empty());
    assert_eq!(metric_of(&env, "history", names::FAILED_RECORD), 0);
    assert_eq!(metric_of(&env, "history", names::BAD_INPUT), 1);
    let m = get(&env, key("ORDER#m", "ORDER")).await.unwrap();
    assert_eq!(m.opt_i64("historySequence").unwrap(), Some(2));
    let entry = get(&env, key("ORDER#m", "HIST#000002")).await.unwrap();
    assert_eq!(entry.s("description").unwrap(), "Added line");
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
    assert!(
        report
            .bad_input
            .iter()
            .any(|b| b.contains("LINE#1") && b.contains("ledger item")),
        "{:?}",
        report.bad_input
    );
}
