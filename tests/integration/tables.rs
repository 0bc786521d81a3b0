//! The CDK stack reads what it deploys from infra/tables.json; this keeps
//! that file identical to what the registry defines.

#[test]
fn infra_tables_json_matches_the_registry() {
    let path = format!("{}/../infra/tables.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("infra/tables.json exists");
    let on_disk: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(
        on_disk,
        jobstream::tools::deploy::definitions(),
        "regenerate with: cargo run -p jobstream -- tables > infra/tables.json"
    );
}
