//! A model file's join sets (`sets:`) on facts whose keys hold typed key
//! names (an int), through the local runtime: every change of a fact, its
//! REMOVE too, starts the jobs it must; a key name a join set cannot carry
//! is bad input, never a silent no-op.

use std::path::PathBuf;

use shared::item::{n, s, Item};
use shared::metrics::names;

use crate::support::{model_env, put};

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

fn seats_file() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("jobstream-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("seats.yaml");
    std::fs::write(&path, SEATS).expect("write");
    path
}

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
    rt.dynamodb
        .query()
        .table_name(&rt.config.table)
        .key_condition_expression("PK = :pk")
        .expression_attribute_values(":pk", s(format!("OPEN#{event}")))
        .consistent_read(true)
        .send()
        .await
        .expect("query")
        .items
        .unwrap_or_default()
}

async fn delete(rt: &jobstream::local::runtime::Runtime, item: &Item) {
    rt.dynamodb
        .delete_item()
        .table_name(&rt.config.table)
        .key("PK", item["PK"].clone())
        .key("SK", item["SK"].clone())
        .send()
        .await
        .expect("delete");
}

fn sks(items: &[Item]) -> Vec<String> {
    items
        .iter()
        .map(|i| i["SK"].as_s().expect("SK").clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removes_of_facts_with_int_key_names_start_their_jobs() {
    let file = seats_file();
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
    let report = rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    env.engine.stop().await;
    let _ = std::fs::remove_dir_all(file.parent().expect("dir"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_name_a_join_set_cannot_carry_is_bad_input_not_silence() {
    let file = seats_file();
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
