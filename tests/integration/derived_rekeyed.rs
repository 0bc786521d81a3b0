//! A derived entity's key template edited on a live table, or the entity
//! removed from the file (user15 finding 4): the items the old file derived
//! go, and so does the ledger's bookkeeping of them (a shared item's
//! owners), through `backfill` and `verify --repair`, after which `verify`
//! is clean; the old items are never bad input meanwhile.

use std::sync::atomic::Ordering;

use shared::item::{s, Item, ItemExt};

use crate::counters::rerun;
use crate::items::{attrs, backfill, bad_input, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// Bookings that hold a room while `held`; the hold is `shared: true`
/// (its owners are kept in the ledger) unless `SHARED` is edited out.
const V1: &str = r#"
jobstream: 1
name: holds
table: { name: holds, pk: PK, sk: SK }
entities:
  booking:
    key: { PK: "GUEST#${guestId}", SK: "BOOK#${bookingId}" }
    attributes: { guestId: string, bookingId: string, hotelId: string, status: string }
    derive:
      - entity: hold
        when: "status == 'held'"
        with: { hotelId: hotelId, bookingId: bookingId, guestId: guestId }
  hold:
    owner: processor
    shared: true
    key: { PK: "HOLDS#${hotelId}", SK: "B#${bookingId}#G#${guestId}" }
    attributes: { guestId: string }
"#;

const SHARED: &str = "    shared: true\n";
const OLD_KEY: &str = "PK: \"HOLDS#${hotelId}\"";
const NEW_KEY: &str = "PK: \"HOLD#${hotelId}\"";
/// The ledger `pk` prefix of the old holds' owners.
const OLD_OWNERS: &str = "OWN#derive#PK=S:HOLDS#";
/// The derive rule and the derived entity.
const DERIVE: &str = "    derive:
      - entity: hold
        when: \"status == 'held'\"
        with: { hotelId: hotelId, bookingId: bookingId, guestId: guestId }
";
const HOLD: &str = "  hold:
    owner: processor
    shared: true
    key: { PK: \"HOLDS#${hotelId}\", SK: \"B#${bookingId}#G#${guestId}\" }
    attributes: { guestId: string }
";

/// `text` with each `(from, to)` edit made (each must apply).
fn edited(text: &str, edits: &[(&str, &str)]) -> String {
    let mut text = text.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "the edit applies: {from}");
        text = text.replace(from, to);
    }
    text
}

fn booking(guest: &str, id: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s(format!("GUEST#{guest}"))),
        ("SK", s(format!("BOOK#{id}"))),
        ("type", s("booking")),
        ("guestId", s(guest)),
        ("bookingId", s(id)),
        ("hotelId", s("h")),
        ("status", s(status)),
    ])
}

/// The ledger's items under a `pk` starting with `prefix`.
async fn ledger_under(env: &ModelEnv, prefix: &str) -> Vec<Item> {
    jobstream::tools::verify::scan_all(&env.rt.dynamodb, &env.rt.config.ledger_table)
        .await
        .expect("scan")
        .into_iter()
        .filter(|r| r.s("pk").unwrap_or_default().starts_with(prefix))
        .collect()
}

/// The v1 file's holds made for two held bookings, then `v2` deployed on
/// the same tables (the stream read on from its end, as a deployed stack).
async fn after_edit(v1: &str, v2: &str) -> ModelEnv {
    let mut env = model_env("holds", |o| {
        o.model_file = Some(temp_model("holds", v1));
    })
    .await;
    for b in ["b0", "b1"] {
        put(&env.rt, booking("g", b, "held")).await;
    }
    env.rt.drain().await.unwrap();
    for b in ["b0", "b1"] {
        assert!(get(&env, key("HOLDS#h", format!("B#{b}#G#g")))
            .await
            .is_some());
    }
    crate::items::assert_clean(&env).await;
    let mut env = rerun(env, "holds", temp_model("holds", v2), false).await;
    env.rt.drain().await.unwrap();
    env
}

/// `backfill` (when `backfill_first`), then `verify --repair`: `verify`
/// is then clean, nothing was bad input, the old items and their ledger
/// bookkeeping are gone, and `new_pk`'s items (if any) are made.
async fn cleans_up(v1: &str, v2: &str, new_pk: Option<&str>, said: &str) {
    for backfill_first in [true, false] {
        let said = format!("{said}, backfill first: {backfill_first}");
        let mut env = after_edit(v1, v2).await;
        if backfill_first {
            let (_, totals) = backfill(&env, &Default::default()).await;
            let bad = totals.bad_input.load(Ordering::Relaxed);
            assert_eq!(bad, 0, "an old derived item is no bad input: {said}");
            env.rt.drain().await.unwrap();
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
        for b in ["b0", "b1"] {
            let sk = format!("B#{b}#G#g");
            assert!(get(&env, key("HOLDS#h", &sk)).await.is_none(), "{b} {said}");
            if let Some(pk) = new_pk {
                assert!(get(&env, key(pk, &sk)).await.is_some(), "{b} {said}");
            }
        }
        assert_eq!(
            ledger_under(&env, OLD_OWNERS).await,
            Vec::<Item>::new(),
            "{said}"
        );
        // The sources' records name the old items no more.
        let records = format!("{:?}", ledger_under(&env, "SRC#").await);
        assert!(!records.contains("HOLDS#"), "{said}: {records}");
        assert_eq!(bad_input(&env), 0, "the stream met no bad input: {said}");
        assert!(env.rt.failed_batches().is_empty(), "{said}");
    }
}

/// User15 finding 4: a shared derived entity's key edited (`HOLDS#` to
/// `HOLD#`) left the old items' owners in the ledger, reported by every
/// `verify` as drift with no repair (exit 1 for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_derived_entity_rekeyed_leaves_nothing_behind() {
    let v2 = edited(V1, &[(OLD_KEY, NEW_KEY)]);
    cleans_up(V1, &v2, Some("HOLD#h"), "shared, rekeyed").await;
}

/// The same entity removed from the file with its derive rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_derived_entity_removed_leaves_nothing_behind() {
    let v2 = edited(V1, &[(DERIVE, ""), (HOLD, "")]);
    cleans_up(V1, &v2, None, "shared, removed").await;
}

/// A derived entity that is not shared, rekeyed or removed: its sources'
/// records are its only bookkeeping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unshared_derived_entity_rekeyed_or_removed_leaves_nothing_behind() {
    let v1 = edited(V1, &[(SHARED, "")]);
    let rekeyed = edited(&v1, &[(OLD_KEY, NEW_KEY)]);
    cleans_up(&v1, &rekeyed, Some("HOLD#h"), "unshared, rekeyed").await;
    let hold = edited(HOLD, &[(SHARED, "")]);
    let removed = edited(&v1, &[(DERIVE, ""), (hold.as_str(), "")]);
    cleans_up(&v1, &removed, None, "unshared, removed").await;
}

/// `shared: true` taken off an entity: its owners' bookkeeping is read by
/// nothing any more and goes; the items stay, each its one source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_derived_entity_no_longer_shared_leaves_no_owners_behind() {
    let v2 = edited(V1, &[(SHARED, "")]);
    let mut env = after_edit(V1, &v2).await;
    backfill(&env, &Default::default()).await;
    env.rt.drain().await.unwrap();
    let report = env.rt.verify().await.expect("verify");
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    for b in ["b0", "b1"] {
        assert!(get(&env, key("HOLDS#h", format!("B#{b}#G#g")))
            .await
            .is_some());
    }
    assert_eq!(ledger_under(&env, OLD_OWNERS).await, Vec::<Item>::new());
}

/// The owners' repair is guarded: it deletes nothing while the old item
/// is still there, nor a record changed since `verify` read it; once the
/// item is gone and the records are as read, they go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_repair_waits_for_the_item_and_spares_what_changed() {
    use shared::models::Repair;
    let v2 = edited(V1, &[(OLD_KEY, NEW_KEY)]);
    let mut env = after_edit(V1, &v2).await;
    let report = env.rt.verify().await.expect("verify");
    let only_owners = |r: &jobstream::tools::verify::Report| {
        let mut r = r.clone();
        r.repairs
            .retain(|x| matches!(x, Repair::StaleOwners { .. }));
        r
    };
    let owners = only_owners(&report);
    assert_eq!(owners.repairs.len(), 2, "{:#?}", report.repairs);
    // The sources' records still name the old items: their reconcile
    // (part of the repair) deletes them first.
    let old = key("HOLDS#h", "B#b0#G#g");
    assert!(get(&env, old.clone()).await.is_some());
    // An old item put back after the reconcile: the owners stay.
    let Repair::StaleOwners { item, records, .. } = &owners.repairs[0] else {
        unreachable!()
    };
    let derive = env.rt.processors.derive.clone();
    let deriver = derive.deriver();
    let mut back = item.clone();
    back.insert("type".into(), s("hold"));
    put(&env.rt, back.clone()).await;
    env.rt.drain().await.unwrap();
    assert!(!deriver
        .drop_stale_owners(item, records, true)
        .await
        .expect("runs"));
    assert_eq!(ledger_under(&env, OLD_OWNERS).await.len(), 4);
    crate::items::delete(&env.rt, key_of_item(&back)).await;
    env.rt.drain().await.unwrap();
    // An owner changed since it was read: it stays, and so does the head.
    let mut changed = records
        .iter()
        .find(|r| r.s("sk").unwrap_or_default().starts_with("R#"))
        .expect("an owner record")
        .clone();
    let mut d = changed
        .get("d")
        .and_then(|d| d.as_m().ok())
        .expect("d")
        .clone();
    d.insert("guestId".into(), s("g2"));
    changed.insert("d".into(), aws_sdk_dynamodb::types::AttributeValue::M(d));
    env.rt
        .dynamodb
        .put_item()
        .table_name(&env.rt.config.ledger_table)
        .set_item(Some(changed))
        .send()
        .await
        .expect("put");
    assert!(!deriver
        .drop_stale_owners(item, records, true)
        .await
        .expect("runs"));
    assert_eq!(ledger_under(&env, OLD_OWNERS).await.len(), 4);
    // Read again, every repair runs: nothing is left.
    let report = env.rt.verify().await.expect("verify");
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(ledger_under(&env, OLD_OWNERS).await, Vec::<Item>::new());
}

fn key_of_item(i: &Item) -> Item {
    shared::item::key_of(i, &["PK", "SK"])
}
