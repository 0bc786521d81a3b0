//! A `compute:` value belongs to the processors (SPEC §8): a writer's put
//! that drops it or sets another value is brought back by the live path,
//! without `verify --repair` (user finding U05; a scored prediction whose
//! projection reads the value: tests/scenarios/pickem/), and the counts
//! that read it follow. The job raises the item's `computeSequence` by one
//! in every write of the values: a change of a value that does not raise it
//! so is a writer's, and starts the item's job.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use shared::change::ChangeKind;
use shared::item::{n, s, Item};

use crate::items::{assert_clean, attrs, get, key, num, put, put_all};
use crate::support::{model_env, ModelEnv};

/// An order's total computed over its lines and counted into its seller's
/// revenue (the shape of user finding U05's file): no projection reads
/// the values.
const ORDERS: &str = r#"
jobstream: 1
name: orders_u05
table: { name: orders_u05, pk: PK, sk: SK }
entities:
  seller_stats:
    owner: processor
    key: { PK: "SELLER#${sellerId}", SK: "STATS" }
    counter: { attributes: [revenue, units], created_by: processor }
  order:
    key: { PK: "ORDER#${orderId}", SK: "ORDER" }
    attributes: { orderId: string, sellerId: string, status: [placed, paid], note: string? }
    compute:
      over: { entity: line, as: lines }
      values:
        total: "sum(lines.map(l, l.qty * l.price))"
        nunits: "sum(lines.map(l, l.qty))"
      queue: totals
    count:
      - counter: seller_stats
        with: { sellerId: sellerId }
        add:
          revenue: "status == 'paid' ? total : 0"
          units: "status == 'paid' ? nunits : 0"
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${lineId}" }
    attributes: { orderId: string, lineId: string, qty: int, price: int }
"#;

/// [`ORDERS`] whose order also projects a key from its total.
fn projected() -> String {
    let text = ORDERS.replace(
        "      queue: totals\n",
        "      queue: totals\n    project:\n      attributes: { totalKey: \"TOTAL#${pad(total, 4)}\" }\n",
    );
    assert_ne!(text, ORDERS);
    text
}

/// Order o1 of seller s1, paid, with these numbers (a writer's own values
/// of the computed attributes, or none).
fn order(extra: &[(&str, i64)]) -> Item {
    let mut o = attrs(vec![
        ("PK", s("ORDER#o1")),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s("o1")),
        ("sellerId", s("s1")),
        ("status", s("paid")),
    ]);
    for (k, v) in extra {
        o.insert(k.to_string(), n(*v));
    }
    o
}

fn line(id: &str, qty: i64, price: i64) -> Item {
    attrs(vec![
        ("PK", s("ORDER#o1")),
        ("SK", s(format!("LINE#{id}"))),
        ("type", s("line")),
        ("orderId", s("o1")),
        ("lineId", s(id)),
        ("qty", n(qty)),
        ("price", n(price)),
    ])
}

/// The model `text` with order o1 computed and counted ([`order_o1`]).
async fn ordered(name: &str, text: &str) -> ModelEnv {
    let path = crate::support::temp_model(name, &text.replace("orders_u05", name));
    let mut env = model_env(name, |o| o.model_file = Some(path)).await;
    order_o1(&mut env.rt).await;
    env
}

/// Order o1 (lines 2 x 10 and 3 x 1) written, computed and counted:
/// (23, 5, 23, 5).
async fn order_o1(rt: &mut jobstream::local::runtime::Runtime) {
    put_all(rt, vec![order(&[]), line("l1", 2, 10), line("l2", 3, 1)]).await;
    rt.drain().await.expect("drains");
    assert_eq!(read(rt).await, (23, 5, 23, 5));
}

/// Updates order o1: `expr` with `values`.
async fn update_order(
    rt: &jobstream::local::runtime::Runtime,
    expr: &str,
    values: &[(&str, AttributeValue)],
) {
    crate::items::update(rt, key("ORDER#o1", "ORDER"), expr, values).await;
}

/// Order o1 as it is.
async fn stored(rt: &jobstream::local::runtime::Runtime) -> Item {
    get(rt, key("ORDER#o1", "ORDER")).await.expect("order")
}

/// (total, nunits) of order o1 and (revenue, units) of seller s1.
async fn read(rt: &jobstream::local::runtime::Runtime) -> (i64, i64, i64, i64) {
    let o = stored(rt).await;
    let st = get(rt, key("SELLER#s1", "STATS")).await.expect("stats");
    (
        num(&o, "total"),
        num(&o, "nunits"),
        num(&st, "revenue"),
        num(&st, "units"),
    )
}

/// The stream records of order o1 whose new image holds `total` = `total`
/// and `computeSequence` = `sequence` (absent: -1).
async fn records_of_order(env: &ModelEnv, total: i64, sequence: i64) -> Vec<Value> {
    let number = |r: &Value, a: &str| {
        r["dynamodb"]["NewImage"][a]["N"]
            .as_str()
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1)
    };
    env.records()
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["SK"]["S"] == "ORDER")
        .filter(|r| number(r, "total") == total && number(r, "computeSequence") == sequence)
        .collect()
}

/// Fails before the fix (user finding U05): with no projection reading
/// the computed values, the live path could not tell a writer's forged
/// value from the job's own write (both change only the values), so
/// nothing started the item's job and the count read the forged total
/// until `verify --repair` (`forged total`: left (7, 5, 7, 5)).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computed_value_a_count_reads_is_brought_back_with_the_count() {
    let mut env = ordered("orders_u05", ORDERS).await;
    assert_eq!(num(&stored(&env.rt).await, "computeSequence"), 1);
    // A full put with values of the writer's own.
    put(&env.rt, order(&[("total", 7), ("nunits", 5)])).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5), "forged total");
    // A full put without them.
    put(&env.rt, order(&[])).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5), "dropped total");
    // An update of the computed value alone.
    update_order(&env.rt, "SET #total = :t", &[(":t", n(9))]).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5), "updated total");
    // A forged value with the sequence the writer read.
    let mut forged = stored(&env.rt).await;
    forged.insert("total".into(), n(8));
    put(&env.rt, forged).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        read(&env.rt).await,
        (23, 5, 23, 5),
        "forged with the sequence"
    );
    assert_clean(&env.rt).await;
    // Every record again, twice (forgeries and the job's own writes, late):
    // nothing moves, nothing is written.
    let table = crate::recorded::scan(&env.rt).await;
    for _ in 0..2 {
        crate::recorded::redelivered(&env.engine, &mut env.rt, &table).await;
    }
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5));
    env.engine.stop().await;
}

/// Where a projection reads the value, a forgery is brought back with its
/// projection as before the sequence (a value whose projection is out of
/// step), and now also when the writer forged the projection in step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_computed_value_a_projection_reads_is_brought_back_with_its_projection() {
    let mut env = ordered("orders_u05p", &projected()).await;
    let key_of = |i: &Item| i.get("totalKey").cloned();
    assert_eq!(key_of(&stored(&env.rt).await), Some(s("TOTAL#0023")));
    let cases: [(&str, &[(&str, AttributeValue)]); 3] = [
        ("SET #total = :t", &[(":t", n(9))]),
        (
            "SET #total = :t, #totalKey = :k",
            &[(":t", n(9)), (":k", s("TOTAL#0009"))],
        ),
        ("REMOVE #total, #totalKey", &[]),
    ];
    for (expr, values) in cases {
        update_order(&env.rt, expr, values).await;
        env.rt.drain().await.expect("drains");
        assert_eq!(read(&env.rt).await, (23, 5, 23, 5), "{expr}");
        assert_eq!(
            key_of(&stored(&env.rt).await),
            Some(s("TOTAL#0023")),
            "{expr}"
        );
    }
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// A forged value's record delivered again twice after the job brought
/// the value back, and the job's own write delivered again after a later
/// change: the jobs they start find the values right, nothing is written,
/// nothing moves back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_forgery_and_of_the_jobs_write_delivered_late_move_nothing() {
    let mut env = ordered("orders_u05r", ORDERS).await;
    update_order(&env.rt, "SET #total = :t", &[(":t", n(7))]).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5));
    let forged = records_of_order(&env, 7, 1).await;
    assert_eq!(forged.len(), 1, "the forgery's record");
    let restored = records_of_order(&env, 23, 2).await;
    assert_eq!(restored.len(), 1, "the job's write bringing it back");
    let writes = env.rt.processor_writes();
    for _ in 0..2 {
        crate::items::deliver(&env.rt, &forged).await;
        env.rt.drain().await.expect("drains");
        assert_eq!(read(&env.rt).await, (23, 5, 23, 5), "forgery redelivered");
    }
    assert_eq!(env.rt.processor_writes(), writes, "nothing written");
    // A line changes (the job writes 33, sequence 3); the job's earlier
    // write comes late, twice.
    put(&env.rt, line("l2", 13, 1)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (33, 15, 33, 15));
    assert_eq!(num(&stored(&env.rt).await, "computeSequence"), 3);
    let writes = env.rt.processor_writes();
    for _ in 0..2 {
        crate::items::deliver(&env.rt, &restored).await;
        env.rt.drain().await.expect("drains");
        assert_eq!(read(&env.rt).await, (33, 15, 33, 15), "late job write");
    }
    assert_eq!(env.rt.processor_writes(), writes, "nothing written");
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// A writer's read-modify-write that copies the values and their sequence
/// as they are is no forgery: its record starts no job and nothing is
/// written. A copy read before the job's latest write (an older value and
/// sequence) is one: the job brings the newer value back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_copying_the_values_with_their_sequence_starts_no_job_unless_the_copy_is_stale() {
    let mut env = ordered("orders_u05c", ORDERS).await;
    let before = stored(&env.rt).await;
    let mut copy = before.clone();
    copy.insert("note".into(), s("gift"));
    // What the record says, before it is written: no job.
    let change = crate::recorded::change(
        ChangeKind::Modify,
        Some(before.clone()),
        Some(copy.clone()),
        &["PK", "SK"],
        "ev",
    );
    assert_eq!(env.rt.model.rules.messages(&change).expect("valid"), vec![]);
    let writes = env.rt.processor_writes();
    put(&env.rt, copy.clone()).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(env.rt.processor_writes(), writes, "nothing written");
    assert_eq!(stored(&env.rt).await, copy);
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5));
    // The job writes 33 (sequence 2); the writer puts its copy of before.
    put(&env.rt, line("l2", 13, 1)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (33, 15, 33, 15));
    put(&env.rt, copy).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (33, 15, 33, 15), "stale copy");
    assert_eq!(num(&stored(&env.rt).await, "computeSequence"), 2);
    assert_eq!(stored(&env.rt).await.get("note"), Some(&s("gift")));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// A job in flight while a writer rewrites the sequence alone (the values
/// as they are): the job guards the sequence it read (a job's write since,
/// even one that left the values as read, was computed from rows read
/// later: `compute_moment.rs`), so its write is dropped; the writer's
/// record (the sequence moved other than by one: a writer's) starts the
/// item's job again, as the line's record does, and the value lands once
/// (`compute_job_tests.rs` proves the writer's record starts it alone).
/// (Before: the sequence was no guard and the write landed; its record
/// then started a job that wrote nothing.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_rewriting_the_sequence_alone_starts_the_job_it_supersedes_again() {
    let mut env = ordered("orders_u05s", ORDERS).await;
    put(&env.rt, line("l2", 13, 1)).await;
    let job = crate::items::set_job(&env.rt.model, "totals");
    let body = serde_json::json!({ "version": 1, "kind": "items", "scope": { "orderId": "o1" },
        "keys": [["ORDER#o1", "ORDER"]] })
    .to_string();
    let reads = crate::items::reads(&env.rt);
    let plan = job.plan(&body, &reads).await.expect("plan");
    assert_eq!(plan.updates.len(), 1, "total 33");
    update_order(&env.rt, "SET #computeSequence = :q", &[(":q", n(7))]).await;
    let applied = crate::items::apply_plan(&*job, &reads, &plan).await;
    assert_eq!((applied.writes(), applied.superseded), (0, 1));
    assert_eq!(num(&stored(&env.rt).await, "computeSequence"), 7);
    env.rt.drain().await.expect("drains");
    assert_eq!(read(&env.rt).await, (33, 15, 33, 15));
    assert_eq!(
        num(&stored(&env.rt).await, "computeSequence"),
        8,
        "one write: the job the writer's record started"
    );
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// What bringing one forged value back costs, counted by a bill meter
/// between the processors and the engine (never timed): the job (its
/// scope's version, its rows, the item, one guarded update) and the
/// derive's two records of the item (the forgery's, the job's), each a
/// read of the item and a ledger commit moving the count, and the counter
/// synced after each. What a change of the rows costs is unchanged: the
/// sequence rides in the job's update (`scoring_round_trips.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bringing_a_forged_value_back_costs_one_job_and_the_records_of_two_writes() {
    let engine = crate::support::start_engine().await;
    let meter = jobstream::meter::Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let name = "orders_u05m";
    let path = crate::support::temp_model(name, &ORDERS.replace("orders_u05", name));
    let mut env = crate::support::model_env_on(engine, name, |o| {
        o.model_file = Some(path);
        o.processor_endpoint = Some(meter.endpoint());
    })
    .await;
    order_o1(&mut env.rt).await;
    let before = meter.bill();
    update_order(&env.rt, "SET #total = :t", &[(":t", n(7))]).await;
    env.rt.drain().await.expect("drains");
    let bill = meter.bill().since(&before);
    println!("one forged value brought back: {}", bill.per_change(1));
    assert_eq!(read(&env.rt).await, (23, 5, 23, 5));
    let requests = |op: &str| bill.ops.get(op).map_or(0, |o| o.requests);
    // The job: one GetItem (the scope's version) and one Query (the rows).
    assert_eq!((requests("GetItem"), requests("Query")), (1, 1), "{bill:?}");
    // The job's update, and per record of the item (the forgery's, the
    // job's) its ledger commit and the seller's sync: 5.
    assert!(requests("TransactWriteItems") <= 5, "{bill:?}");
    // The job's read of the item, and per record of the item the derive's
    // reads (its ledger record, the item, the seller's totals and item,
    // the seller's totals again when its record comes back): 10 measured.
    assert!(requests("BatchGetItem") <= 11, "{bill:?}");
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}
