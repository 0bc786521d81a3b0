//! Key templates whose fixed text alone is over DynamoDB's key limits (a
//! partition key 2048 bytes, a sort key 1024, the same for an index's
//! keys): no item could ever be written, so the file is refused at load,
//! with the byte count (hostile13 #14).

use super::test_support::{assert_at, problems};

fn file(pk: &str, derived_sk: &str, gsi_sk: &str) -> String {
    format!(
        r#"jobstream: 1
name: longkey
table:
  name: longkey
  pk: PK
  sk: SK
  gsis: [{{ name: GSI1, pk: GSI1PK, sk: GSI1SK }}]
entities:
  e:
    key: {{ PK: "{pk}#${{id}}", SK: "E" }}
    attributes: {{ id: string }}
    project:
      attributes: {{ GSI1PK: "ALL", GSI1SK: "{gsi_sk}${{id}}" }}
    derive:
      - entity: c
        with: {{ id: id }}
  c:
    owner: processor
    key: {{ PK: "C#${{id}}", SK: "{derived_sk}" }}
    attributes: {{ id: string }}
"#
    )
}

#[test]
fn key_templates_over_dynamodbs_key_limits_are_refused() {
    assert_eq!(problems(&file("E", "C", "G#")), vec![]);
    // At the limits: a 2047-byte literal and one byte of `${id}`.
    assert_eq!(
        problems(&file(
            &"L".repeat(2046),
            &"Z".repeat(1024),
            &"G".repeat(1023)
        )),
        vec![]
    );
    let p = problems(&file(
        &"L".repeat(3000),
        &"Z".repeat(2000),
        &"G".repeat(1025),
    ));
    assert_eq!(p.len(), 3, "{p:#?}");
    assert_at(
        &p,
        (10, 16),
        "e: key PK: at least 3002 bytes (3001 of its fixed text, 1 for each `${...}`), over DynamoDB's limit of 2048 bytes for a partition key",
    );
    assert_at(
        &p,
        (19, 31),
        "c: key SK: at least 2000 bytes (2000 of its fixed text), over DynamoDB's limit of 1024 bytes for a sort key",
    );
    assert_at(
        &p,
        (13, 44),
        "e: `GSI1SK` (sort key of GSI1): at least 1025 bytes (1025 of its fixed text), over DynamoDB's limit of 1024 bytes",
    );
}
