//! A `compute:` job writes its values with the projection they imply, and
//! that projection reads attributes of the item besides the values (a
//! booking's `status`). The write lands only on the image it was computed
//! from: a writer's change of such an attribute between the job's read of
//! the item and its write fails the write, and starts the item's job again
//! (SPEC §2.6: exactly once, even for a moment).
//!
//! user15's finding 2: a booking put alternately `confirmed` and `held`
//! showed, to consistent reads, `status: held` with `GSI1PK: DUE#fh` (the
//! "confirmed with a balance due" index) and `computeSequence: 1`: the job
//! had read the confirmed item, the writer's put of `held` came before its
//! write, and the write was guarded only by the attributes the values read,
//! the values and the sequence (absent before and after the put).

use std::sync::Arc;

use jobstream::faults::{Fault, FaultProxy};
use serde_json::Value;
use shared::item::{n, s, Item};

use crate::items::{apply_plan, assert_clean, attrs, delete, get, key, num, put, reads, set_job};
use crate::support::{model_env, model_env_behind_proxy, temp_model, ModelEnv};

/// user15's bookings (hotel.yaml), cut to the balance due and its indexes.
const BOOKINGS: &str = r#"
jobstream: 1
name: compute_image
table:
  name: compute_image
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
    - { name: GSI2, pk: GSI2PK, sk: GSI2SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  booking:
    key: { PK: "GUEST#${guestId:id}", SK: "BOOK#${bookingId:id}" }
    attributes:
      guestId: id
      bookingId: id
      hotelId: id
      status: [held, confirmed]
      amount: int
    compute:
      over: { entity: payment, as: pays }
      values:
        balanceDue: "amount - sum(pays.filter(p, p.bookingId == bookingId).map(p, p.amount))"
      queue: balance
    project:
      attributes:
        GSI1PK: "${status == 'confirmed' && balanceDue > 0 ? 'DUE#' + hotelId : null}"
        GSI1SK: "${status == 'confirmed' && balanceDue > 0 ? bookingId : null}"
        GSI2PK: "HSTAT#${hotelId}#${status}"
        GSI2SK: "${bookingId}"
  payment:
    key: { PK: "GUEST#${guestId:id}", SK: "BOOK#${bookingId:id}#PAY#${paymentId:id}" }
    attributes: { guestId: id, bookingId: id, paymentId: id, amount: int }
"#;

fn booking(id: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s("GUEST#g1")),
        ("SK", s(format!("BOOK#{id}"))),
        ("type", s("booking")),
        ("guestId", s("g1")),
        ("bookingId", s(id)),
        ("hotelId", s("h1")),
        ("status", s(status)),
        ("amount", n(100)),
    ])
}

fn payment(booking: &str, id: &str, amount: i64) -> Item {
    attrs(vec![
        ("PK", s("GUEST#g1")),
        ("SK", s(format!("BOOK#{booking}#PAY#{id}"))),
        ("type", s("payment")),
        ("guestId", s("g1")),
        ("bookingId", s(booking)),
        ("paymentId", s(id)),
        ("amount", n(amount)),
    ])
}

async fn stored(env: &ModelEnv, id: &str) -> Item {
    get(env, key("GUEST#g1", format!("BOOK#{id}")))
        .await
        .expect("the booking")
}

/// (status, balanceDue, GSI1PK, GSI2PK) of booking `id` as stored.
async fn state(env: &ModelEnv, id: &str) -> (String, i64, Option<String>, Option<String>) {
    let b = stored(env, id).await;
    let text = |a: &str| b.get(a).and_then(|v| v.as_s().ok()).cloned();
    (
        text("status").unwrap_or_default(),
        num(&b, "balanceDue"),
        text("GSI1PK"),
        text("GSI2PK"),
    )
}

/// Booking `id`'s job, planned now (its read of the item and the rows):
/// applied later by [`land`].
async fn plan_job(env: &ModelEnv, id: &str) -> shared::engine::setjob::Plan {
    let body = serde_json::json!({ "version": 1, "kind": "items", "scope": { "guestId": "g1" },
        "keys": [["GUEST#g1", format!("BOOK#{id}")]] })
    .to_string();
    let job = set_job(&env.rt.model, "balance");
    let plan = job.plan(&body, &reads(env)).await.expect("plan");
    assert_eq!(plan.updates.len(), 1, "the job has a write to make");
    plan
}

/// Applies the planned job as its consumer does: how many writes landed.
async fn land(env: &ModelEnv, plan: &shared::engine::setjob::Plan) -> usize {
    let job = set_job(&env.rt.model, "balance");
    apply_plan(&*job, &reads(env), plan).await.writes()
}

/// Fails before the fix: the job read the confirmed booking (no
/// `computeSequence`, no `balanceDue`), the writer put it `held` (no
/// sequence, no values either: a put replaces the item), and the job's
/// write landed, guarded by `amount`, `balanceDue` and the sequence alone:
/// `("held", 100, Some("DUE#h1"), Some("HSTAT#h1#confirmed"))`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_never_writes_a_projection_of_a_status_a_writers_put_replaced() {
    let path = temp_model("compute_image", BOOKINGS);
    let mut env = model_env("compute_image", |o| o.model_file = Some(path)).await;
    put(&env, booking("b1", "confirmed")).await;
    let plan = plan_job(&env, "b1").await;
    put(&env, booking("b1", "held")).await;
    let landed = land(&env, &plan).await;
    assert_eq!(
        (landed, state(&env, "b1").await),
        (0, ("held".to_string(), -1, None, None)),
        "the job's write computed from the confirmed image landed on the held one"
    );
    // The held booking's own record starts its job: computed from it.
    env.rt.drain().await.expect("drains");
    assert_eq!(
        state(&env, "b1").await,
        ("held".into(), 100, None, Some("HSTAT#h1#held".into()))
    );
    assert_clean(&env).await;
    env.engine.stop().await;
}

/// The same race through a writer's `UpdateItem` of the status alone, on
/// a booking the job wrote before (`computeSequence` 1, kept by the
/// update). Fails before the fix: the job read the confirmed booking
/// fully paid (`balanceDue` 0) and its payment gone (not yet derived: the
/// scope's version as read), the writer set it `held`, and the job's
/// `balanceDue` 100 landed with `GSI1PK: DUE#h1` on the held booking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_never_writes_a_projection_of_a_status_a_writers_update_changed() {
    let path = temp_model("compute_image", BOOKINGS);
    let mut env = model_env("compute_image", |o| o.model_file = Some(path)).await;
    put(&env, booking("b2", "confirmed")).await;
    put(&env, payment("b2", "p1", 100)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        state(&env, "b2").await,
        (
            "confirmed".into(),
            0,
            None,
            Some("HSTAT#h1#confirmed".into())
        )
    );
    assert_eq!(num(&stored(&env, "b2").await, "computeSequence"), 1);
    delete(&env, key("GUEST#g1", "BOOK#b2#PAY#p1")).await;
    let plan = plan_job(&env, "b2").await;
    crate::items::update(
        &env,
        key("GUEST#g1", "BOOK#b2"),
        "SET #status = :s",
        &[(":s", s("held"))],
    )
    .await;
    let landed = land(&env, &plan).await;
    assert_eq!(
        (landed, state(&env, "b2").await),
        (
            0,
            (
                "held".to_string(),
                0,
                None,
                Some("HSTAT#h1#confirmed".into())
            )
        ),
        "the job's write computed from the confirmed image landed on the held one"
    );
    env.rt.drain().await.expect("drains");
    assert_eq!(
        state(&env, "b2").await,
        ("held".into(), 100, None, Some("HSTAT#h1#held".into()))
    );
    assert_clean(&env).await;
    env.engine.stop().await;
}

/// Waits until the proxy holds `count` requests.
async fn until_held(proxy: &FaultProxy, count: u64) {
    for waited in 0.. {
        if proxy.injected() >= count {
            return;
        }
        assert!(waited < 3000, "the job sent no such request");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The images booking `id` passed through (its stream records' new
/// images) that carry `status: held` with a `GSI1PK`.
fn held_and_due(records: &[Value], id: &str) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["dynamodb"]["Keys"]["SK"]["S"] == format!("BOOK#{id}"))
        .map(|r| r["dynamodb"]["NewImage"].clone())
        .filter(|i| i["status"]["S"] == "held" && !i["GSI1PK"].is_null())
        .collect()
}

/// The race on the live path: the payment's removal starts the booking's
/// job, whose write the proxy holds until the writer has set the booking
/// `held`. Fails before the fix: the write landed and the stream shows
/// the held booking in the balance-due index (`GSI1PK: DUE#h1`) until the
/// derive took the job's record. The write fails its guard on `status`,
/// and the writer's record, which changed only what the projection reads,
/// starts the job again: without that `balanceDue` stayed 0, computed
/// over a payment that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_a_status_change_fails_is_started_again_by_it() {
    let path = temp_model("compute_image", BOOKINGS);
    let (mut env, proxy) =
        model_env_behind_proxy("compute_image", |o| o.model_file = Some(path)).await;
    put(&env, booking("b3", "confirmed")).await;
    put(&env, payment("b3", "p1", 100)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(
        state(&env, "b3").await,
        (
            "confirmed".into(),
            0,
            None,
            Some("HSTAT#h1#confirmed".into())
        )
    );
    delete(&env, key("GUEST#g1", "BOOK#b3#PAY#p1")).await;
    // The job's write (the only request naming the sequence) waits.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    proxy.inject(Fault::held("TransactWriteItems", 1, gate.clone()).matching("computeSequence"));
    let (writer, table) = (env.rt.dynamodb.clone(), env.rt.config.table.clone());
    let held = async {
        until_held(&proxy, 1).await;
        writer
            .update_item()
            .table_name(table)
            .set_key(Some(key("GUEST#g1", "BOOK#b3")))
            .update_expression("SET #status = :s")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":s", s("held"))
            .send()
            .await
            .expect("update");
        gate.add_permits(1);
    };
    let (drained, ()) = tokio::join!(env.rt.drain(), held);
    drained.expect("drains");
    proxy.clear();
    env.rt.drain().await.expect("drains");
    assert_eq!(
        held_and_due(&env.records().await, "b3"),
        Vec::<Value>::new()
    );
    assert_eq!(
        state(&env, "b3").await,
        ("held".into(), 100, None, Some("HSTAT#h1#held".into()))
    );
    assert_clean(&env).await;
    env.engine.stop().await;
}

/// What a writer's change of what the projection reads alone (a booking's
/// status) costs now that it starts the item's job, counted by a bill
/// meter between the processors and the engine (never timed): the derive's
/// record as before, and the job's reads (the item, the scope's version,
/// the rows), with no write (the values are right: the derive writes the
/// projection from the record, as before). The job's write of a changed
/// value costs what it did: the new guards ride in its one update's
/// condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_change_costs_the_items_job_reads_and_no_write_of_it() {
    let engine = crate::support::start_engine().await;
    let meter = jobstream::meter::Meter::in_front_of(&engine.endpoint())
        .await
        .expect("meter starts");
    let path = temp_model("compute_image", BOOKINGS);
    let mut env = crate::support::model_env_on(engine, "compute_image", |o| {
        o.model_file = Some(path);
        o.processor_endpoint = Some(meter.endpoint());
    })
    .await;
    put(&env, booking("b4", "confirmed")).await;
    env.rt.drain().await.expect("drains");
    let sequence = num(&stored(&env, "b4").await, "computeSequence");
    let before = meter.bill();
    crate::items::update(
        &env,
        key("GUEST#g1", "BOOK#b4"),
        "SET #status = :s",
        &[(":s", s("held"))],
    )
    .await;
    env.rt.drain().await.expect("drains");
    let bill = meter.bill().since(&before);
    println!("a status change: {}", bill.per_change(1));
    assert_eq!(
        state(&env, "b4").await,
        ("held".into(), 100, None, Some("HSTAT#h1#held".into()))
    );
    assert_eq!(
        num(&stored(&env, "b4").await, "computeSequence"),
        sequence,
        "the job wrote nothing"
    );
    let requests = |op: &str| bill.ops.get(op).map_or(0, |o| o.requests);
    // The job: one GetItem (the scope's version) and one Query (the rows).
    assert_eq!((requests("GetItem"), requests("Query")), (1, 1), "{bill:?}");
    assert_clean(&env).await;
    env.engine.stop().await;
}
