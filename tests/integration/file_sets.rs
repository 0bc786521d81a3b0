//! A model file's join sets (`sets:`) listed through an index (`via`),
//! through the local runtime: from the ledger, never the lagging GSI.
//! (Typed key names, key names a join set cannot carry:
//! `tests/scenarios/seats/`; a partition value of maximal length:
//! `tests/scenarios/teams/`.)

use shared::item::{key_of, s, Item};
use shared::metrics::names;

use crate::items::{assert_clean, item, partition, put, sks};
use crate::scenarios::model_file;
use crate::support::model_env;

fn member(m: &str, t: &str) -> Item {
    item(&[
        ("PK", &format!("M#{m}")),
        ("SK", &format!("TEAM#{t}")),
        ("type", "member"),
        ("memberId", m),
        ("teamId", t),
    ])
}

/// Notice `id` to team t1.
fn notice(id: &str, body: &str) -> Item {
    item(&[
        ("PK", "T#t1"),
        ("SK", &format!("N#{id}")),
        ("type", "notice"),
        ("teamId", "t1"),
        ("noticeId", id),
        ("body", body),
    ])
}

async fn inbox(rt: &jobstream::local::runtime::Runtime, m: &str) -> Vec<String> {
    let items = partition(rt, &format!("I#{m}")).await;
    sks(&items)
}

/// The GSI is gone from the table (the extreme of a lagging index: it lists
/// nothing): the set still lists a team's members exactly, from the ledger
/// listing the engine keeps with each member's record, read consistently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_via_an_index_lists_from_the_ledger_never_the_lagging_gsi() {
    let file = model_file("teams/teams.yaml");
    let mut env = model_env("teams", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    rt.dynamodb
        .update_table()
        .table_name(&rt.config.table)
        .global_secondary_index_updates(
            aws_sdk_dynamodb::types::GlobalSecondaryIndexUpdate::builder()
                .delete(
                    aws_sdk_dynamodb::types::DeleteGlobalSecondaryIndexAction::builder()
                        .index_name("GSI1")
                        .build()
                        .expect("delete"),
                )
                .build(),
        )
        .send()
        .await
        .expect("the GSI is deleted");
    for (m, t) in [("ann", "t1"), ("bob", "t1"), ("cy", "t2")] {
        put(rt, member(m, t)).await;
    }
    rt.drain().await.expect("drain");
    let gsi = rt
        .dynamodb
        .query()
        .table_name(&rt.config.table)
        .index_name("GSI1")
        .key_condition_expression("GSI1PK = :pk")
        .expression_attribute_values(":pk", s("T#t1"))
        .send()
        .await;
    assert!(gsi.is_err(), "the GSI lists nothing: {gsi:?}");
    // A notice to t1 reaches exactly its members.
    put(rt, notice("n1", "hello")).await;
    rt.drain().await.expect("drain");
    assert_eq!(inbox(rt, "ann").await, ["N#n1#T#t1"]);
    assert_eq!(inbox(rt, "bob").await, ["N#n1#T#t1"]);
    assert!(inbox(rt, "cy").await.is_empty(), "not a member of t1");
    // bob leaves t1 and dan joins: the listing follows at once.
    crate::items::delete(rt, key_of(&member("bob", "t1"), &["PK", "SK"])).await;
    put(rt, member("dan", "t1")).await;
    rt.drain().await.expect("drain");
    assert!(inbox(rt, "bob").await.is_empty(), "bob left");
    assert_eq!(inbox(rt, "dan").await, ["N#n1#T#t1"], "dan joined");
    // A later notice lists the members as they are now.
    put(rt, notice("n2", "again")).await;
    rt.drain().await.expect("drain");
    assert_eq!(inbox(rt, "ann").await, ["N#n1#T#t1", "N#n2#T#t1"]);
    assert!(inbox(rt, "bob").await.is_empty(), "bob is no longer listed");
    assert_eq!(inbox(rt, "dan").await, ["N#n1#T#t1", "N#n2#T#t1"]);
    assert_clean(rt).await;
    let derive = rt.stream_processor("derive");
    assert_eq!(derive.metrics().get(names::BAD_INPUT), 0);
    env.engine.stop().await;
}
