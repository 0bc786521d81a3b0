//! A file's `history:` (the README's order and its lines) where the
//! application writes a line a moment before its order: the order's
//! history starts with its creation, not with an adoption.

use std::path::PathBuf;

use shared::item::{n, s, Item, ItemExt};

use crate::support::{model_env, put};

const ORDER: &str = include_str!("../../models/examples/orders.yaml");

fn model() -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "jobstream-history-{}.yaml",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&path, ORDER).expect("writes");
    path
}

fn item(pairs: Vec<(&str, aws_sdk_dynamodb::types::AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Found by a user: a line put, then its order at once (one stream batch),
/// gave `HIST#000001` "Imported": the line's record, first of an unknown
/// aggregate, adopted the partition, whose order the application had
/// already written, though the order's creation was still ahead in the
/// stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_written_just_before_its_order_starts_no_adoption() {
    let mut env = model_env("shop", |o| o.model_file = Some(model())).await;
    let line = item(vec![
        ("PK", s("ORDER#o1")),
        ("SK", s("LINE#a")),
        ("type", s("line")),
        ("orderId", s("o1")),
        ("sku", s("a")),
        ("qty", n(2)),
    ]);
    let order = item(vec![
        ("PK", s("ORDER#o1")),
        ("SK", s("ORDER")),
        ("type", s("order")),
        ("orderId", s("o1")),
        ("customer", s("ann")),
        ("status", s("open")),
    ]);
    put(&env.rt, line).await;
    put(&env.rt, order).await;
    env.rt.drain().await.expect("drains");
    let entries = env
        .rt
        .dynamodb
        .query()
        .table_name(&env.rt.config.table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :h)")
        .expression_attribute_values(":pk", s("ORDER#o1"))
        .expression_attribute_values(":h", s("HIST#"))
        .consistent_read(true)
        .send()
        .await
        .expect("query")
        .items
        .unwrap_or_default();
    let said: Vec<&str> = entries
        .iter()
        .map(|e| e.s("description").unwrap_or("?"))
        .collect();
    assert_eq!(said, ["Order placed by ann"], "{said:?}");
    let snapshot = entries[0].get("snapshot").and_then(|v| v.as_m().ok());
    let lines = snapshot
        .and_then(|m| m.get("lines"))
        .and_then(|v| v.as_l().ok())
        .map(Vec::len);
    assert_eq!(
        lines,
        Some(1),
        "the line is in the creation's snapshot: {snapshot:?}"
    );
    let report = env.rt.verify().await.expect("verify");
    assert!(report.is_clean(), "{}", report.render());
}
