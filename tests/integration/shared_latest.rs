//! The README's "latest row" pattern: a `shared: true` derived item keyed
//! without its sources' own sort key part holds what the source whose key
//! sorts last implies, exactly, however many sources it has (user13's
//! finding 4: its owners were one ledger item, which reached DynamoDB's
//! 400 KB at ~2,000 sources; valid sources became bad input, the item froze
//! on a stale source, `verify --repair` could not help), under
//! out-of-order writes and deletes, redelivery, replay and concurrent
//! consumers, never moving backwards, not even for a moment.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{s, Item, ItemExt};

use crate::items::{assert_clean, attrs, bad_input, deliver, get, key, put_all};
use crate::support::{model_env, temp_model, ModelEnv};

/// A device's readings; its latest reading, shared by all of them.
const READINGS: &str = r#"
jobstream: 1
name: shared_latest
table: { name: shared_latest, pk: PK, sk: SK }
entities:
  reading:
    key: { PK: "DEV#${deviceId}", SK: "R#${at}" }
    attributes: { deviceId: string, at: string, note: string }
    derive:
      - entity: latest
        with: { deviceId: deviceId, at: at, note: note }
  latest:
    owner: processor
    shared: true
    key: { PK: "DEV#${deviceId}", SK: "LATEST" }
    attributes: { at: string, note: string }
"#;

async fn env() -> ModelEnv {
    let path = temp_model("shared_latest", READINGS);
    model_env("shared_latest", |o| o.model_file = Some(path)).await
}

/// Reading `i` of device `dev`, its note `note_bytes` long.
fn reading(dev: &str, i: usize, note_bytes: usize) -> Item {
    let at = format!("{i:06}");
    attrs(vec![
        ("PK", s(format!("DEV#{dev}"))),
        ("SK", s(format!("R#{at}"))),
        ("type", s("reading")),
        ("deviceId", s(dev)),
        ("at", s(&at)),
        ("note", s(format!("{at}{}", "n".repeat(note_bytes)))),
    ])
}

fn reading_key(dev: &str, i: usize) -> Item {
    key(format!("DEV#{dev}"), format!("R#{i:06}"))
}

/// The `at` of the device's latest item (`None`: no such item).
async fn latest(env: &ModelEnv, dev: &str) -> Option<String> {
    get(env, key(format!("DEV#{dev}"), "LATEST"))
        .await
        .map(|i| i.s("at").expect("at").to_string())
}

/// A deterministic shuffle of `0..n` (out-of-order writes).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = seed;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// Fails before the fix: the owners of `DEV#d1/LATEST` were one ledger
/// item holding every source with what it implies; past 400 KB (here
/// ~1,400 sources of 300-byte notes) each further reading was bad input
/// (`DynamoDB rejects the writes it implies`), and the item stayed on the
/// last reading that fitted. Now 2,500 readings written out of order keep
/// it on the last-sorting one, no bad input; deleting the newest ones (out
/// of order) brings it back to the newest left; a replay of every record
/// writes nothing; `verify` is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_item_of_thousands_of_sources_holds_the_last_sorting_one() {
    let mut env = env().await;
    const N: usize = 2_500;
    let order = shuffled(N, 0x9e37_79b9_7f4a_7c15);
    for chunk in order.chunks(250) {
        put_all(&env, chunk.iter().map(|i| reading("d1", *i, 300)).collect()).await;
        env.rt.drain().await.expect("drains");
    }
    assert_eq!(bad_input(&env), 0, "a valid reading is never bad input");
    assert_eq!(latest(&env, "d1").await.as_deref(), Some("002499"));
    // The newest 100 deleted, newest first in no order.
    for i in shuffled(100, 7) {
        crate::items::delete(&env, reading_key("d1", N - 100 + i)).await;
    }
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d1").await.as_deref(), Some("002399"));
    assert_eq!(bad_input(&env), 0);
    assert_clean(&env.rt).await;
    // Every record delivered again: nothing written.
    let records = env.records().await;
    let before = env.rt.processor_writes();
    deliver(&env, &records).await;
    assert_eq!(env.rt.processor_writes(), before, "a replay writes nothing");
    assert_eq!(latest(&env, "d1").await.as_deref(), Some("002399"));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// Two consumers (the stream's and a backfill's, or two `run` processes)
/// reconciling sources of one shared item at once, readings added and
/// removed in no order: the item ends exact, and while they run it never
/// holds an older reading than it held before (readings are only added
/// during the race, so its latest can only move forward).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_consumers_keep_a_shared_item_exact_and_never_backwards() {
    let mut env = env().await;
    // 300 readings, every third one missing for now.
    put_all(
        &env,
        (0..300)
            .filter(|i| i % 3 != 0)
            .map(|i| reading("d2", i, 50))
            .collect(),
    )
    .await;
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d2").await.as_deref(), Some("000299"));
    // The missing ones and 200 newer, written without a consumer.
    let added: Vec<usize> = (0..300).filter(|i| i % 3 == 0).chain(300..500).collect();
    put_all(&env, added.iter().map(|i| reading("d2", *i, 50)).collect()).await;
    // Two consumers take them at once, in opposite orders, in groups.
    let deriver = env.rt.processors.derive.deriver().clone();
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (client, table) = (env.rt.dynamodb.clone(), env.rt.config.table.clone());
        let watching = watching.clone();
        tokio::spawn(async move {
            let mut seen = String::new();
            let mut reads = 0;
            while watching.load(Ordering::Relaxed) {
                let out = client
                    .get_item()
                    .table_name(&table)
                    .set_key(Some(key("DEV#d2", "LATEST")))
                    .consistent_read(true)
                    .send()
                    .await
                    .expect("get");
                let at = match out.item().and_then(|i| i.get("at")) {
                    Some(AttributeValue::S(at)) => at.clone(),
                    _ => String::new(),
                };
                assert!(at >= seen, "the latest moved back from {seen} to {at}");
                seen = at;
                reads += 1;
            }
            reads
        })
    };
    let keys: Vec<Item> = shuffled(added.len(), 3)
        .into_iter()
        .map(|i| reading_key("d2", added[i]))
        .collect();
    let mut reversed = keys.clone();
    reversed.reverse();
    let consumer = |keys: Vec<Item>| {
        let deriver = deriver.clone();
        async move {
            for group in keys.chunks(40) {
                // A conflict past the engine's attempts: the batch again.
                let mut tries = 0;
                while let Err((_, _, e)) = deriver.reconcile(group, &HashMap::new()).await {
                    tries += 1;
                    assert!(tries < 20, "reconcile keeps failing: {e}");
                }
            }
        }
    };
    tokio::join!(consumer(keys), consumer(reversed));
    watching.store(false, Ordering::Relaxed);
    assert!(watcher.await.expect("watcher") > 0);
    assert_eq!(latest(&env, "d2").await.as_deref(), Some("000499"));
    // Then, concurrently, deletes of the newest and the stream's records.
    let deletes: Vec<usize> = (400..500).collect();
    for i in &deletes {
        crate::items::delete(&env, reading_key("d2", *i)).await;
    }
    let keys: Vec<Item> = deletes.iter().map(|i| reading_key("d2", *i)).collect();
    let mut reversed = keys.clone();
    reversed.reverse();
    tokio::join!(consumer(keys), consumer(reversed));
    assert_eq!(latest(&env, "d2").await.as_deref(), Some("000399"));
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d2").await.as_deref(), Some("000399"));
    assert_eq!(bad_input(&env), 0);
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// The ledger partition of the owners of a device's latest item.
fn owners_pk(pk: &str) -> String {
    let id = shared::ledger::item_id(&key(pk, "LATEST"));
    shared::ledger::bounded_pk("OWN#derive#", &id)
}

/// The owners as a deployed stack kept them before they had an item each:
/// one head holding a map of every source and what it implies.
async fn to_single_map(env: &ModelEnv, dev: &str) {
    let rt = &env.rt;
    let pk = owners_pk(&format!("DEV#{dev}"));
    let items = rt
        .processors
        .store
        .query_partition(&rt.config.ledger_table, "pk", &pk, None)
        .await
        .expect("owners");
    let mut map = HashMap::new();
    let mut ver = 0;
    for i in &items {
        match i.s("sk").expect("sk") {
            "O" => ver = i.i64("ver").expect("ver"),
            sk => {
                map.insert(i.s("src").expect("src").to_string(), i["d"].clone());
                let k = shared::ledger::key(&pk, sk);
                rt.processors
                    .store
                    .delete_keys(&rt.config.ledger_table, vec![k])
                    .await
                    .expect("delete");
            }
        }
    }
    let mut head = shared::ledger::key(&pk, "O");
    head.insert("s".into(), AttributeValue::M(map));
    head.insert("ver".into(), shared::item::n(ver));
    rt.processors
        .store
        .put_items(&rt.config.ledger_table, vec![head])
        .await
        .expect("put");
}

/// A stack upgraded with owners kept the old way (one map): they are read
/// as they are, and each source touched moves to an item of its own: the
/// last one deleted (from the map), newer ones added, one from the middle
/// deleted, then all the rest; exact and `verify` clean all along, the map
/// gone once every source was touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_kept_in_one_map_go_on_exactly_after_the_upgrade() {
    let mut env = env().await;
    put_all(&env, (0..40).map(|i| reading("d3", i, 20)).collect()).await;
    env.rt.drain().await.expect("drains");
    to_single_map(&env, "d3").await;
    assert_clean(&env.rt).await;
    // The last one, in the map, goes: the one before it (in the map too).
    crate::items::delete(&env, reading_key("d3", 39)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d3").await.as_deref(), Some("000038"));
    assert_clean(&env.rt).await;
    // Newer ones (items of their own), then they go too, and one from the
    // middle of the map.
    put_all(&env, (40..45).map(|i| reading("d3", i, 20)).collect()).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d3").await.as_deref(), Some("000044"));
    for i in (40..45).chain([20]) {
        crate::items::delete(&env, reading_key("d3", i)).await;
    }
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d3").await.as_deref(), Some("000038"));
    assert_clean(&env.rt).await;
    // Every other source deleted but the first: it stays, from the map.
    for i in (1..39).filter(|i| *i != 20) {
        crate::items::delete(&env, reading_key("d3", i)).await;
    }
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d3").await.as_deref(), Some("000000"));
    // It changes: the map is empty, gone.
    put_all(&env, vec![reading("d3", 0, 30)]).await;
    env.rt.drain().await.expect("drains");
    let pk = owners_pk("DEV#d3");
    let head = env
        .rt
        .processors
        .store
        .get(&env.rt.config.ledger_table, shared::ledger::key(&pk, "O"))
        .await
        .expect("head")
        .expect("a head");
    assert!(!head.contains_key("s"), "the map is gone: {head:?}");
    assert_eq!(latest(&env, "d3").await.as_deref(), Some("000000"));
    // The last source goes: so does the item.
    crate::items::delete(&env, reading_key("d3", 0)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d3").await, None);
    assert_eq!(bad_input(&env), 0);
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// Reading `i` of device `dev` whose key is too long for its owner to be
/// kept under its own id (the owner is keyed by the id's hash).
fn long_reading(dev: &str, i: usize) -> Item {
    let mut r = reading(dev, i, 10);
    let at = format!("{i:06}{}", "x".repeat(1000));
    r.insert("SK".into(), s(format!("R#{at}")));
    r.insert("at".into(), s(at));
    r
}

/// Sources whose keys are too long to sort their owners by (hashed) and
/// sources of ordinary keys, mixed: the item holds the last-sorting one as
/// each of them goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_of_keys_too_long_to_sort_by_still_give_the_last_one() {
    let mut env = env().await;
    let of = |i: usize| {
        if i.is_multiple_of(2) {
            long_reading("d4", i)
        } else {
            reading("d4", i, 10)
        }
    };
    put_all(&env, (0..7).map(of).collect()).await;
    env.rt.drain().await.expect("drains");
    let prefix = |at: Option<String>| at.map(|a| a[..6].to_string());
    assert_eq!(prefix(latest(&env, "d4").await).as_deref(), Some("000006"));
    for i in (1..7).rev() {
        let k = shared::item::key_of(&of(i), &["PK", "SK"]);
        crate::items::delete(&env, k).await;
        env.rt.drain().await.expect("drains");
        let want = format!("{:06}", i - 1);
        assert_eq!(prefix(latest(&env, "d4").await), Some(want), "{i} deleted");
    }
    assert_eq!(bad_input(&env), 0);
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}

/// An owner lost from the ledger (an edit by hand, or the single map of
/// before that could not take it) is drift `verify` names, and its repair
/// lists it again: the item then falls back to it when the newer go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_an_owner_missing_from_the_ledger_and_repairs_it() {
    let mut env = env().await;
    put_all(&env, (0..5).map(|i| reading("d5", i, 10)).collect()).await;
    env.rt.drain().await.expect("drains");
    let src = shared::ledger::item_id(&reading_key("d5", 3));
    let row = shared::ledger::key(owners_pk("DEV#d5"), shared::engine::derive::owner_sk(&src));
    let path = temp_model("shared_latest", READINGS);
    let says = |x: &jobstream::tools::explain::Explanation, listed: &str| {
        let line = format!(
            "  shared: {listed} among its owners; it holds the values of the one whose key sorts last: PK=DEV#d5, SK=R#000004"
        );
        assert!(x.lines.contains(&line), "{:#?}", x.lines);
    };
    let x = crate::explain::ask_in(&env, &path, "DEV#d5", "R#000003").await;
    says(&x, "listed");
    let (store, ledger) = (&env.rt.processors.store, &env.rt.config.ledger_table);
    store.delete_keys(ledger, vec![row]).await.expect("delete");
    let x = crate::explain::ask_in(&env, &path, "DEV#d5", "R#000003").await;
    says(&x, "not listed (pending or drift)");
    let report = env.rt.verify().await.expect("verify");
    let problems = format!("{:?}", report.problems);
    assert!(
        problems.contains("owners of PK=DEV#d5, SK=LATEST: PK=DEV#d5, SK=R#000003 not listed"),
        "{problems}"
    );
    assert!(crate::items::repair(&env, &report).await > 0);
    assert_clean(&env.rt).await;
    crate::items::delete(&env, reading_key("d5", 4)).await;
    env.rt.drain().await.expect("drains");
    assert_eq!(latest(&env, "d5").await.as_deref(), Some("000003"));
    assert_clean(&env.rt).await;
    env.engine.stop().await;
}
