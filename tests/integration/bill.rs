//! What the processors cost as DynamoDB bills it, where the engine saves a
//! read or a write: each measured through a bill meter (the processors'
//! requests, as the handlers benchmark counts them), with the outcome
//! checked exact.

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::runtime::Runtime;
use jobstream::meter::{Bill, Meter};
use lambda_runtime::{Context, LambdaEvent};
use shared::item::{s, Item, ItemExt};

use crate::items::{assert_clean, records_event};
use crate::support::{count, descriptions, env, raw_records, stream_event, Env};

/// A second runtime on `env`'s engine and tables whose processors reach the
/// engine through a bill meter.
pub(crate) async fn metered(env: &Env) -> (Meter, Runtime) {
    let meter = Meter::in_front_of(&env.engine.endpoint())
        .await
        .expect("meter starts");
    let mut opts = crate::support::embedded_options(&env.engine, "tracker");
    opts.table = Some(env.rt.config.table.clone());
    opts.ledger_table = env.rt.config.ledger_table.clone();
    opts.processor_endpoint = Some(meter.endpoint());
    let rt = Runtime::start(opts).await.expect("runtime starts");
    (meter, rt)
}

/// Runs `processor` of `rt` on `event`; returns what it was billed.
pub(crate) async fn billed(rt: &Runtime, meter: &Meter, processor: &str, event: &Event) -> Bill {
    let before = meter.bill();
    let resp = shared::lambda::stream_handler(
        &*rt.stream_processor(processor),
        LambdaEvent::new(event.clone(), Context::default()),
    )
    .await
    .expect("handled");
    assert!(resp.batch_item_failures.is_empty(), "{processor} failed");
    meter.bill().since(&before)
}

/// The stream's records whose sort key `keep` accepts, as one event.
async fn only(env: &Env, keep: impl Fn(&str) -> bool) -> Event {
    let records: Vec<serde_json::Value> = raw_records(env)
        .await
        .into_iter()
        .filter(|r| r["dynamodb"]["Keys"]["SK"]["S"].as_str().is_some_and(&keep))
        .collect();
    serde_json::from_value(serde_json::json!({ "Records": records })).expect("an event")
}

/// A tracker's interview stage implies nothing the derive keeps (no
/// projection, count or derived item): its records cost the derive no read,
/// alone or beside its application's, whose reads are two (its ledger record
/// and the item) however many stage records come with it; the count is
/// exact, and the same batch again writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_imply_nothing_cost_the_derive_no_read() {
    let mut env = env().await;
    let (meter, rt) = metered(&env).await;
    let w = &env.writer;
    w.create("a", "Co", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    w.add_stage("a", "s1", "Screen", 1).await.unwrap();
    w.add_stage("a", "s2", "Onsite", 2).await.unwrap();
    w.set_stage("a", "s1", "isCompleted", AttributeValue::Bool(true))
        .await;
    w.remove_stage("a", "s2").await.unwrap();
    let event = stream_event(&env).await;
    let stages = only(&env, |sk| sk.starts_with("STAGE#")).await;
    assert_eq!(stages.records.len(), 4);

    let bill = billed(&rt, &meter, "derive", &stages).await;
    assert_eq!(bill.requests(), 0, "stage records alone: {bill:?}");

    let bill = billed(&rt, &meter, "derive", &event).await;
    let reads = &bill.ops["BatchGetItem"];
    // The application's ledger record and item, then the count's totals
    // and item (counters are synced together, by BatchGetItem).
    assert_eq!(
        (reads.requests, reads.rru),
        (4, 4.0),
        "one ledger record and one item read, one counter synced: {bill:?}"
    );
    assert!(!bill.ops.contains_key("GetItem"), "{bill:?}");
    assert_eq!(count(&env).await, Some(1));

    let again = billed(&rt, &meter, "derive", &event).await;
    assert_eq!(again.wru(), 0.0, "a redelivery writes nothing: {again:?}");
    // The record, the item, and the count's totals (the record still lists
    // the count as moved by its change, until it changes again).
    assert_eq!(again.ops["BatchGetItem"].rru, 3.0, "{again:?}");
    env.rt.drain().await.unwrap();
    assert_clean(&env).await;
}

/// The processors' own writes coming back cost the derive no read: a
/// MODIFY whose images imply the same and whose new image carries its
/// projection (the derive's projection of a new application) is not read;
/// one whose projection was forged, or removed, is read and the projection
/// repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processors_own_writes_coming_back_cost_the_derive_no_read() {
    let mut env = env().await;
    let (meter, rt) = metered(&env).await;
    env.writer
        .create("a", "Co", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    env.rt.drain().await.unwrap();
    let key = crate::apps::app_key("a");
    let app_sk = key["SK"].as_s().unwrap().clone();
    let of_app = |r: &&serde_json::Value| r["dynamodb"]["Keys"]["SK"]["S"] == app_sk.as_str();
    let records = raw_records(&env).await;
    let echo = records
        .iter()
        .filter(of_app)
        .find(|r| {
            r["eventName"] == "MODIFY"
                && r["dynamodb"]["OldImage"].get("GSI1PK").is_none()
                && r["dynamodb"]["NewImage"].get("GSI1PK").is_some()
        })
        .expect("the derive's projection came back")
        .clone();
    let bill = billed(&rt, &meter, "derive", &records_event(&[echo])).await;
    assert_eq!(bill.requests(), 0, "its projection coming back: {bill:?}");

    // A forged projection (only a processor-owned attribute changed) is
    // read and repaired.
    let projected = crate::items::get(&env, key.clone()).await.unwrap()["GSI1PK"].clone();
    env.rt
        .dynamodb
        .update_item()
        .table_name(&env.rt.config.table)
        .set_key(Some(key.clone()))
        .update_expression("SET GSI1PK = :f")
        .expression_attribute_values(":f", s("STATUS#forged"))
        .send()
        .await
        .unwrap();
    let forged = raw_records(&env)
        .await
        .iter()
        .rfind(of_app)
        .expect("the forged write's record")
        .clone();
    assert_eq!(
        forged["dynamodb"]["NewImage"]["GSI1PK"]["S"],
        "STATUS#forged"
    );
    let bill = billed(&rt, &meter, "derive", &records_event(&[forged])).await;
    assert!(
        bill.ops.get("BatchGetItem").is_some_and(|r| r.requests > 0),
        "read: {bill:?}"
    );
    assert_eq!(
        crate::items::get(&env, key.clone()).await.unwrap()["GSI1PK"],
        projected,
        "the forged projection repaired"
    );

    // So is a removed one.
    env.rt
        .dynamodb
        .update_item()
        .table_name(&env.rt.config.table)
        .set_key(Some(key.clone()))
        .update_expression("REMOVE GSI1PK")
        .send()
        .await
        .unwrap();
    let removed = raw_records(&env)
        .await
        .iter()
        .rfind(of_app)
        .expect("the removal's record")
        .clone();
    assert!(removed["dynamodb"]["NewImage"].get("GSI1PK").is_none());
    let bill = billed(&rt, &meter, "derive", &records_event(&[removed])).await;
    assert!(
        bill.ops.get("BatchGetItem").is_some_and(|r| r.requests > 0),
        "read: {bill:?}"
    );
    assert_eq!(
        crate::items::get(&env, key).await.unwrap()["GSI1PK"],
        projected,
        "the removed projection repaired"
    );
    env.rt.drain().await.unwrap();
    assert_clean(&env).await;
}

/// The fold's state items of one application, in the ledger.
async fn state_items(env: &Env, app: &str) -> Vec<Item> {
    let pk = shared::ledger::state_pk("history", app);
    jobstream::tools::verify::scan_all(&env.rt.dynamodb, &env.rt.config.ledger_table)
        .await
        .expect("scan")
        .into_iter()
        .filter(|i| i.s(shared::ledger::PK).ok() == Some(pk.as_str()))
        .collect()
}

/// While an aggregate's state is small, the fold keeps it in its HEAD: one
/// item written per commit (the HEAD and each changed part item before,
/// each billed at least 1 KB, twice in a transaction). A state that
/// outgrows it moves to part items under a new epoch, and back once small
/// again (the items left are deleted); each batch loads the state from
/// whichever layout, and the history stays exact throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fold_keeps_a_small_state_in_one_item() {
    let mut env = env().await;
    let (meter, rt) = metered(&env).await;
    let w = env.writer.clone();
    w.create("a", "Co", "Engineer", "2026-01-01T00:00:00.000Z")
        .await;
    w.add_stage("a", "s1", "Screen", 1).await.unwrap();
    w.add_stage("a", "s2", "Onsite", 2).await.unwrap();
    let event = stream_event(&env).await;
    let bill = billed(&rt, &meter, "history", &event).await;
    let tx = &bill.ops["TransactWriteItems"];
    // Three entries (about 1 KB each with their snapshots) and one state
    // item, each billed twice: before, the HEAD and three part items.
    assert!(tx.wru <= 12.0, "{bill:?}");
    env.rt.drain().await.unwrap();
    let items = state_items(&env, "a").await;
    assert_eq!(items.len(), 1, "the HEAD alone: {items:?}");
    let AttributeValue::M(parts) = &items[0]["parts"] else {
        panic!("parts in the HEAD: {items:?}")
    };
    assert_eq!(parts.len(), 3, "the application and its two stages");
    assert_clean(&env).await;

    // Notes of 3 KB: the parts leave the HEAD.
    w.set(
        "a",
        "notes",
        s("n".repeat(3000)),
        "2026-01-02T00:00:00.000Z",
    )
    .await;
    env.rt.drain().await.unwrap();
    let items = state_items(&env, "a").await;
    assert_eq!(items.len(), 4, "the HEAD and three parts: {items:?}");
    let head = items
        .iter()
        .find(|i| i[shared::ledger::SK] == s("HEAD"))
        .unwrap();
    assert!(!head.contains_key("parts"));
    assert_clean(&env).await;

    // Still large: only the changed part is written, and the history goes on.
    w.set_stage("a", "s1", "isCompleted", AttributeValue::Bool(true))
        .await;
    env.rt.drain().await.unwrap();
    assert_eq!(state_items(&env, "a").await.len(), 4);
    assert_clean(&env).await;

    // Small again: back in the HEAD, the part items deleted.
    w.set("a", "notes", s("short"), "2026-01-03T00:00:00.000Z")
        .await;
    w.remove_stage("a", "s2").await.unwrap();
    env.rt.drain().await.unwrap();
    let items = state_items(&env, "a").await;
    assert_eq!(items.len(), 1, "the HEAD alone again: {items:?}");
    assert_clean(&env).await;
    assert_eq!(
        descriptions(&env, "a").await,
        [
            "Created application Co - Engineer",
            "Added interview stage \"Screen\"",
            "Added interview stage \"Onsite\"",
            "Updated Notes",
            "Updated interview stage \"Screen\"",
            "Updated Notes",
            "Removed interview stage \"Onsite\"",
        ]
    );
    let head = &items[0];
    assert_eq!(head.i64("seq").unwrap(), 7);
}
