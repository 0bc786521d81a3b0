//! A join set's target entity re-keyed on a live table (ops16 finding 5):
//! the items the set job made under the old key template carry the
//! entity's type stamp and match no entity any more. `backfill` and
//! `verify --repair` delete them if still as read, as they do a derived
//! item of an earlier key template (`derived_rekeyed.rs`); they are never
//! bad input meanwhile.

use std::sync::atomic::Ordering;

use shared::item::{s, Item};

use crate::counters::rerun;
use crate::items::{attrs, backfill, bad_input, get, key, put};
use crate::support::{model_env, temp_model, ModelEnv};

/// Orders, and a reminder per open order (a join set).
const V1: &str = r#"
jobstream: 1
name: shoprem
table: { name: shoprem, pk: PK, sk: SK }
entities:
  order:
    key: { PK: "CUST#${customerId}", SK: "ORDER#${orderId}" }
    attributes: { customerId: string, orderId: string, status: string }
  reminder:
    owner: processor
    key: { PK: "REMIND#${customerId}", SK: "ORDER#${orderId}" }
    attributes: { orderId: string }
sets:
  reminders:
    entity: reminder
    bind: { customerId: c, orderId: o }
    facts:
      order: { entity: order, bind: { customerId: c, orderId: o } }
    when: ["order.status == 'open'"]
    values:
      orderId: o
"#;

const OLD_KEY: &str = "PK: \"REMIND#${customerId}\"";
const NEW_KEY: &str = "PK: \"REMINDER#${customerId}\"";

fn order(id: &str, status: &str) -> Item {
    attrs(vec![
        ("PK", s("CUST#c")),
        ("SK", s(format!("ORDER#{id}"))),
        ("type", s("order")),
        ("customerId", s("c")),
        ("orderId", s(id)),
        ("status", s(status)),
    ])
}

/// The open orders' reminders made by the v1 file, then the file with the
/// reminder's key edited deployed on the same tables (the stream read on
/// from its end, as a deployed stack).
async fn after_edit() -> ModelEnv {
    let mut env = model_env("shoprem", |o| {
        o.model_file = Some(temp_model("shoprem", V1));
    })
    .await;
    for (o, status) in [("o0", "open"), ("o1", "open"), ("o2", "paid")] {
        put(&env.rt, order(o, status)).await;
    }
    env.rt.drain().await.unwrap();
    for o in ["o0", "o1"] {
        let made = get(&env, key("REMIND#c", format!("ORDER#{o}"))).await;
        assert_eq!(
            made.as_ref().map(|i| i.get("type")),
            Some(Some(&s("reminder")))
        );
    }
    crate::items::assert_clean(&env).await;
    let v2 = V1.replace(OLD_KEY, NEW_KEY);
    assert_ne!(v2, V1);
    let mut env = rerun(env, "shoprem", temp_model("shoprem", &v2), false).await;
    env.rt.drain().await.unwrap();
    env
}

/// Ops16 finding 5: `backfill` wrote the new reminders but reported each
/// old one as bad input (`UnknownEntity`), and `verify --repair` never
/// removed them. Now `backfill` (or `verify --repair` alone) deletes
/// them; `verify` is then clean, with no bad input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_set_target_rekeyed_leaves_nothing_behind() {
    for backfill_first in [true, false] {
        let said = format!("backfill first: {backfill_first}");
        let mut env = after_edit().await;
        if backfill_first {
            let (_, totals) = backfill(&env, &Default::default()).await;
            let bad = totals.bad_input.load(Ordering::Relaxed);
            assert_eq!(bad, 0, "an old set item is no bad input: {said}");
            env.rt.drain().await.unwrap();
            for o in ["o0", "o1"] {
                let old = key("REMIND#c", format!("ORDER#{o}"));
                assert!(get(&env, old).await.is_none(), "{o} {said}");
            }
        }
        let report = env.rt.verify().await.expect("verify");
        assert!(
            report.bad_input.is_empty(),
            "{said}: {:#?}",
            report.bad_input
        );
        if !backfill_first {
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.starts_with("derived: PK=REMIND#c, SK=ORDER#o0")),
                "{said}: {:#?}",
                report.problems
            );
        }
        crate::items::repair(&env.rt, &report).await;
        env.rt.drain().await.unwrap();
        let after = env.rt.verify().await.expect("verify");
        assert!(after.is_clean(), "{said}: {:#?}", after.problems);
        assert!(after.bad_input.is_empty(), "{said}: {:#?}", after.bad_input);
        for o in ["o0", "o1"] {
            let sk = format!("ORDER#{o}");
            assert!(
                get(&env, key("REMIND#c", &sk)).await.is_none(),
                "{o} {said}"
            );
            assert!(
                get(&env, key("REMINDER#c", &sk)).await.is_some(),
                "{o} {said}"
            );
        }
        assert!(get(&env, key("REMINDER#c", "ORDER#o2")).await.is_none());
        assert_eq!(bad_input(&env), 0, "the stream met no bad input: {said}");
        assert!(env.rt.failed_batches().is_empty(), "{said}");
    }
}

/// An item under the old key that the set job did not make (stamped with
/// another name, or unstamped) is not the processor's: it stays, bad
/// input as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unstamped_item_under_the_old_key_stays() {
    let mut env = after_edit().await;
    let mut stray = key("REMIND#c", "ORDER#o9");
    stray.insert("orderId".into(), s("o9"));
    put(&env.rt, stray.clone()).await;
    env.rt.drain().await.unwrap();
    backfill(&env, &Default::default()).await;
    env.rt.drain().await.unwrap();
    let report = env.rt.verify().await.expect("verify");
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.unwrap();
    assert!(get(&env, key("REMIND#c", "ORDER#o9")).await.is_some());
    assert!(get(&env, key("REMIND#c", "ORDER#o0")).await.is_none());
    let after = env.rt.verify().await.expect("verify");
    assert!(after.is_clean(), "{:#?}", after.problems);
    assert_eq!(after.bad_input.len(), 1, "{:#?}", after.bad_input);
}
