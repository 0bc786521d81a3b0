//! The CDK stack reads the table definitions from infra/tables.json; this
//! keeps that file identical to what the local runtime creates.

use shared::models::{jobboard, table, tracker};

#[test]
fn infra_tables_json_matches_the_rust_definitions() {
    let path = format!("{}/../infra/tables.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("infra/tables.json exists");
    let on_disk: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let current = serde_json::json!({
        "tracker": tracker::table(),
        "jobboard": jobboard::table(),
        "ledger": table::ledger(),
        "jobboardQueues": jobboard::queues::queues(),
    });
    assert_eq!(
        on_disk, current,
        "regenerate with: cargo run -p jobstream -- tables > infra/tables.json"
    );
}
