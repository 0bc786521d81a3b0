//! A model file's join sets (`sets:`) on facts whose keys hold typed key
//! names (an int), through the local runtime: every change of a fact, its
//! REMOVE too, starts the jobs it must; a key name a join set cannot carry
//! is bad input, never a silent no-op.

use shared::item::{n, s, Item};
use shared::metrics::names;

use crate::items::{assert_clean, item, partition, put, sks};
use crate::support::{model_env, temp_model};

/// Open rows of an event: a row is open unless it is held. Both facts'
/// keys hold the row number, an int, read by a key-only check.
const SEATS: &str = r#"jobstream: 1
name: seats
table: { name: seats, pk: PK, sk: SK }
entities:
  row:
    key: { PK: "E#${eventId}", SK: "ROW#${seat}" }
    attributes: { eventId: string, seat: int }
    check:
      - { expr: "seat >= 0", attribute: seat, message: "a row number" }
  hold:
    key: { PK: "E#${eventId}", SK: "HOLD#${seat}" }
    attributes: { eventId: string, seat: int }
    check:
      - { expr: "seat >= 0", attribute: seat, message: "a row number" }
  open_row:
    owner: processor
    key: { PK: "OPEN#${eventId}", SK: "ROW#${seat}" }
    attributes: { seat: int, next: int }
sets:
  open:
    entity: open_row
    facts: { row: { entity: row } }
    unless: { hold: { entity: hold } }
    values: { seat: seat, next: "seat + 1" }
"#;

fn fact(kind: &str, event: &str, row: i64) -> Item {
    let sk = if kind == "row" { "ROW" } else { "HOLD" };
    [
        ("PK", s(format!("E#{event}"))),
        ("SK", s(format!("{sk}#{row}"))),
        ("type", s(kind)),
        ("eventId", s(event)),
        ("seat", n(row)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

async fn open_rows(rt: &jobstream::local::runtime::Runtime, event: &str) -> Vec<Item> {
    partition(rt, &format!("OPEN#{event}")).await
}

async fn delete(rt: &jobstream::local::runtime::Runtime, item: &Item) {
    crate::items::delete(rt, shared::item::key_of(item, &["PK", "SK"])).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removes_of_facts_with_int_key_names_start_their_jobs() {
    let file = temp_model("seats", SEATS);
    let mut env = model_env("seats", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    for r in [5, 7] {
        put(rt, fact("row", "e1", r)).await;
    }
    rt.drain().await.expect("drain");
    let open = open_rows(rt, "e1").await;
    assert_eq!(sks(&open), ["ROW#5", "ROW#7"]);
    assert_eq!(open[0]["seat"], n(5), "a variable typed as its key name");
    assert_eq!(open[0]["next"], n(6), "an expression reads it as an int");
    // A hold closes row 7.
    put(rt, fact("hold", "e1", 7)).await;
    rt.drain().await.expect("drain");
    assert_eq!(sks(&open_rows(rt, "e1").await), ["ROW#5"]);
    // The REMOVE of row 5 deletes its target; the removal of the blocker
    // brings row 7 back.
    delete(rt, &fact("row", "e1", 5)).await;
    delete(rt, &fact("hold", "e1", 7)).await;
    rt.drain().await.expect("drain");
    assert_eq!(sks(&open_rows(rt, "e1").await), ["ROW#7"]);
    let derive = rt.stream_processor("derive");
    assert_eq!(derive.metrics().get(names::BAD_INPUT), 0);
    assert_clean(rt).await;
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(file.parent().expect("dir"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_name_a_join_set_cannot_carry_is_bad_input_not_silence() {
    let file = temp_model("seats", SEATS);
    let mut env = model_env("seats", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    // Valid for the entity (`E#${eventId}` binds the rest of the key), but
    // `a#b` cannot be a join set variable.
    put(rt, fact("row", "a#b", 1)).await;
    put(rt, fact("row", "ok", 1)).await;
    rt.drain().await.expect("drain");
    let derive = rt.stream_processor("derive");
    assert_eq!(
        derive.metrics().get(names::BAD_INPUT),
        1,
        "logged and counted"
    );
    assert!(open_rows(rt, "a#b").await.is_empty());
    assert_eq!(
        sks(&open_rows(rt, "ok").await),
        ["ROW#1"],
        "the shard moved on"
    );
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(file.parent().expect("dir"));
}

/// Notices of a team reach its members' inboxes; a team's members are
/// listed by the index `GSI1` the member entity projects (no mirror item).
const TEAMS: &str = r#"jobstream: 1
name: teams
table:
  name: teams
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
entities:
  member:
    key: { PK: "M#${memberId}", SK: "TEAM#${teamId}" }
    attributes: { memberId: string, teamId: string }
    project:
      attributes:
        GSI1PK: "T#${teamId}"
        GSI1SK: "M#${memberId}"
  notice:
    key: { PK: "T#${teamId}", SK: "N#${noticeId}" }
    attributes: { teamId: string, noticeId: string, body: string }
  inbox:
    owner: processor
    key: { PK: "I#${memberId}", SK: "N#${noticeId}#T#${teamId}" }
    attributes: { body: string }
sets:
  inbox:
    entity: inbox
    facts:
      member: { entity: member, via: GSI1 }
      notice: { entity: notice }
    values: { body: notice.body }
"#;

fn member(m: &str, t: &str) -> Item {
    item(&[
        ("PK", &format!("M#{m}")),
        ("SK", &format!("TEAM#{t}")),
        ("type", "member"),
        ("memberId", m),
        ("teamId", t),
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
    let dir = std::env::temp_dir().join(format!("jobstream-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("teams.yaml");
    std::fs::write(&file, TEAMS).expect("write");
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
    put(
        rt,
        item(&[
            ("PK", "T#t1"),
            ("SK", "N#n1"),
            ("type", "notice"),
            ("teamId", "t1"),
            ("noticeId", "n1"),
            ("body", "hello"),
        ]),
    )
    .await;
    rt.drain().await.expect("drain");
    assert_eq!(inbox(rt, "ann").await, ["N#n1#T#t1"]);
    assert_eq!(inbox(rt, "bob").await, ["N#n1#T#t1"]);
    assert!(inbox(rt, "cy").await.is_empty(), "not a member of t1");
    // bob leaves t1 and dan joins: the listing follows at once.
    delete(rt, &member("bob", "t1")).await;
    put(rt, member("dan", "t1")).await;
    rt.drain().await.expect("drain");
    assert!(inbox(rt, "bob").await.is_empty(), "bob left");
    assert_eq!(inbox(rt, "dan").await, ["N#n1#T#t1"], "dan joined");
    // A later notice lists the members as they are now.
    put(
        rt,
        item(&[
            ("PK", "T#t1"),
            ("SK", "N#n2"),
            ("type", "notice"),
            ("teamId", "t1"),
            ("noticeId", "n2"),
            ("body", "again"),
        ]),
    )
    .await;
    rt.drain().await.expect("drain");
    assert_eq!(inbox(rt, "ann").await, ["N#n1#T#t1", "N#n2#T#t1"]);
    assert!(inbox(rt, "bob").await.is_empty(), "bob is no longer listed");
    assert_eq!(inbox(rt, "dan").await, ["N#n1#T#t1", "N#n2#T#t1"]);
    assert_clean(rt).await;
    let derive = rt.stream_processor("derive");
    assert_eq!(derive.metrics().get(names::BAD_INPUT), 0);
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A team whose ids nearly fill a partition key: the index partition it
/// projects (`GSI1PK`, 2,044 bytes, legal) names a ledger listing whose key
/// (`IDX#GSI1#T#...`) would pass DynamoDB's 2,048 bytes unbounded. (Each key
/// name of a join set stays within 1,024 bytes, a documented limit.)
const LONG_TEAMS: &str = r#"jobstream: 1
name: teams
table:
  name: teams
  pk: PK
  sk: SK
  gsis:
    - { name: GSI1, pk: GSI1PK, sk: GSI1SK }
entities:
  member:
    key: { PK: "MT#${orgId}#${teamId}", SK: "M#${memberId}" }
    attributes: { memberId: string, orgId: string, teamId: string }
    project:
      attributes:
        GSI1PK: "T#${orgId}#${teamId}"
        GSI1SK: "M#${memberId}"
  notice:
    key: { PK: "T#${orgId}#${teamId}", SK: "N#${noticeId}" }
    attributes: { orgId: string, teamId: string, noticeId: string, body: string }
  inbox:
    owner: processor
    key: { PK: "I#${memberId}#${orgId}#${teamId}", SK: "N#${noticeId}" }
    attributes: { body: string }
sets:
  inbox:
    entity: inbox
    facts:
      member: { entity: member, via: GSI1 }
      notice: { entity: notice }
    values: { body: notice.body }
"#;

/// Before ledger listings were bounded, each member was bad input (its
/// listing's key too long for DynamoDB) and no notice reached anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_via_an_index_lists_members_of_a_partition_value_of_maximal_length() {
    let dir = std::env::temp_dir().join(format!("jobstream-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("teams.yaml");
    std::fs::write(&file, LONG_TEAMS).expect("write");
    let mut env = model_env("teams", |o| o.model_file = Some(file.clone())).await;
    let rt = &mut env.rt;
    let (org, team) = ("o".repeat(1020), "t".repeat(1020));
    let member = |m: &str| {
        item(&[
            ("PK", &format!("MT#{org}#{team}")),
            ("SK", &format!("M#{m}")),
            ("type", "member"),
            ("memberId", m),
            ("orgId", &org),
            ("teamId", &team),
        ])
    };
    put(rt, member("ann")).await;
    put(rt, member("bob")).await;
    rt.drain().await.expect("drain");
    put(
        rt,
        item(&[
            ("PK", &format!("T#{org}#{team}")),
            ("SK", "N#n1"),
            ("type", "notice"),
            ("orgId", &org),
            ("teamId", &team),
            ("noticeId", "n1"),
            ("body", "hello"),
        ]),
    )
    .await;
    rt.drain().await.expect("drain");
    assert!(rt.failed_batches().is_empty());
    let derive = rt.stream_processor("derive");
    assert_eq!(
        derive.metrics().get(names::BAD_INPUT),
        0,
        "every member is listed"
    );
    assert_eq!(inbox(rt, &format!("ann#{org}#{team}")).await, ["N#n1"]);
    assert_eq!(inbox(rt, &format!("bob#{org}#{team}")).await, ["N#n1"]);
    assert_clean(rt).await;
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
