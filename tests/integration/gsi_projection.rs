//! A GSI's declared projection (`gsis: - { ..., project: }`): the local
//! engine creates the index with it, and the startup check of `run`,
//! `verify`, `backfill`, `create` and `dev --db` holds an existing table's
//! index to it, an INCLUDE's attributes compared as a set (imp11's
//! finding 11: a table OneTable's `createTable()` made from the very schema
//! imported was refused for projecting INCLUDE and KEYS_ONLY, which a model
//! file could not declare).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
};
use jobstream::local::deployed::shape_problems;
use jobstream::local::engine::{ensure_table, sdk_config};
use shared::models::table::{GsiProjection, TableDef};

/// The table of a OneTable CRM schema: gs1 all, gs2 some attributes, gs3
/// the keys.
const CRM: &str = r#"jobstream: 1
table:
  name: crm
  pk: pk
  sk: sk
  gsis:
    - { name: gs1, pk: gs1pk, sk: gs1sk }
    - { name: gs2, pk: gs2pk, sk: gs2sk, project: [gs2pk, gs2sk, name, stage, amount] }
    - { name: gs3, pk: gs3pk, sk: gs3sk, project: keys }
entities:
  Deal:
    key: { pk: "account#${accountId}", sk: "deal#${id}" }
    attributes: { name: string, stage: string, amount: int }
"#;

fn crm() -> TableDef {
    shared::file::compile(CRM, "crm")
        .unwrap_or_else(|p| panic!("{p:#?}"))
        .table
}

async fn describe(
    client: &aws_sdk_dynamodb::Client,
    name: &str,
) -> aws_sdk_dynamodb::types::TableDescription {
    client
        .describe_table()
        .table_name(name)
        .send()
        .await
        .unwrap()
        .table
        .unwrap()
}

fn key(attr: &str, kt: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(attr)
        .key_type(kt)
        .build()
        .unwrap()
}

/// CreateTable as OneTable's `createTable()` sends it for [`CRM`]'s
/// schema: INCLUDE with the index's own keys in NonKeyAttributes (it drops
/// only the table's), KEYS_ONLY, ALL; `gs2` projects `include`.
async fn create_as_onetable(client: &aws_sdk_dynamodb::Client, name: &str, include: &[&str]) {
    let index = |n: &str, pk: &str, sk: &str, p: Projection| {
        GlobalSecondaryIndex::builder()
            .index_name(n)
            .key_schema(key(pk, KeyType::Hash))
            .key_schema(key(sk, KeyType::Range))
            .projection(p)
            .build()
            .unwrap()
    };
    let mut req = client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewAndOldImages)
                .build()
                .unwrap(),
        );
    for a in [
        "pk", "sk", "gs1pk", "gs1sk", "gs2pk", "gs2sk", "gs3pk", "gs3sk",
    ] {
        req = req.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        );
    }
    let all = Projection::builder()
        .projection_type(ProjectionType::All)
        .build();
    let mut some = Projection::builder().projection_type(ProjectionType::Include);
    for a in include {
        some = some.non_key_attributes(*a);
    }
    let keys = Projection::builder()
        .projection_type(ProjectionType::KeysOnly)
        .build();
    req.global_secondary_indexes(index("gs1", "gs1pk", "gs1sk", all))
        .global_secondary_indexes(index("gs2", "gs2pk", "gs2sk", some.build()))
        .global_secondary_indexes(index("gs3", "gs3pk", "gs3sk", keys))
        .send()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_creates_each_index_with_its_declared_projection() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let def = crm();
    ensure_table(&client, &def, "crm").await.unwrap();
    let desc = describe(&client, "crm").await;
    let projection = |n: &str| {
        let i = desc
            .global_secondary_indexes()
            .iter()
            .find(|i| i.index_name() == Some(n))
            .unwrap();
        let p = i.projection().unwrap();
        let mut attrs: Vec<String> = p.non_key_attributes().to_vec();
        attrs.sort();
        (p.projection_type().unwrap().as_str().to_string(), attrs)
    };
    assert_eq!(projection("gs1"), ("ALL".into(), vec![]));
    assert_eq!(
        projection("gs2"),
        (
            "INCLUDE".into(),
            vec!["amount".into(), "name".into(), "stage".into()]
        )
    );
    assert_eq!(projection("gs3"), ("KEYS_ONLY".into(), vec![]));
    // The table it made is the table it checks for.
    assert!(shape_problems(&desc, &def, "crm", "table").is_empty());
    ensure_table(&client, &def, "crm").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_onetable_created_is_adopted_and_an_index_projecting_otherwise_is_named() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let onetable = ["gs2pk", "gs2sk", "name", "stage", "amount"];
    create_as_onetable(&client, "crm", &onetable).await;
    let desc = describe(&client, "crm").await;
    // Declared as OneTable's schema says: adopted as it is.
    let def = crm();
    assert_eq!(
        shape_problems(&desc, &def, "crm", "model table"),
        Vec::<String>::new()
    );
    // Declared otherwise: each index named, with both projections.
    let mut other = def.clone();
    other.gsis[1].projection = GsiProjection::Include(vec!["name", "stage"]);
    other.gsis[2].projection = GsiProjection::All;
    assert_eq!(
        shape_problems(&desc, &other, "crm", "model table"),
        [
            "model table crm's index gs2 projects [amount, name, stage], the definition [name, stage]",
            "model table crm's index gs3 projects keys, the definition all",
        ]
    );
    // An INCLUDE of other attributes than declared is named too.
    create_as_onetable(&client, "crm2", &["name", "stage", "region"]).await;
    let desc = describe(&client, "crm2").await;
    assert_eq!(
        shape_problems(&desc, &def, "crm2", "model table"),
        ["model table crm2's index gs2 projects [name, region, stage], the definition [amount, name, stage]"]
    );
}

/// imp11's finding 11 end to end: a OneTable schema whose indexes project
/// a list and the keys imports with those projections, and the table
/// OneTable's own `createTable()` makes from it is the table the imported
/// model checks for (`run`, `verify`, `backfill`, `create` adopt it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_onetable_schemas_projections_import_and_the_table_onetable_creates_is_adopted() {
    let dir = crate::import::tmp("onetable-project");
    let schema = crate::js::js_dir().join("onetable-schema.json");
    let out = dir.join("billing.yaml");
    let yaml = crate::import::import("onetable", &schema, "billing", &out);
    for line in [
        "- { name: \"gs1\", pk: \"gs1pk\", sk: \"gs1sk\" }",
        "- { name: \"gs2\", pk: \"gs2pk\", sk: \"gs2sk\", project: [\"gs2pk\", \"gs2sk\", \"amount\", \"paid\"] }",
        "- { name: \"gs3\", pk: \"gs3pk\", sk: \"gs3sk\", project: keys }",
    ] {
        assert!(yaml.contains(line), "missing `{line}` in\n{yaml}");
    }
    let model = shared::file::model(&out).expect("loads");
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let endpoint = engine.endpoint();
    tokio::task::spawn_blocking(move || {
        crate::js::node("onetable.mjs", &["create", &endpoint, "billing"])
    })
    .await
    .expect("OneTable created its table");
    let desc = describe(&client, "billing").await;
    assert_eq!(
        shape_problems(&desc, &model.table, "billing", "model table"),
        Vec::<String>::new()
    );
    engine.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// ElectroDB's access-pattern `projection` (attribute names, here their
/// table fields) is the imported index's `project:`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_electrodb_projection_imports_as_the_indexs_project() {
    let dir = crate::import::tmp("electrodb-project");
    let schema = dir.join("taskapp.json");
    std::fs::write(
        &schema,
        crate::js::node("electrodb.mjs", &["schema"]).stdout,
    )
    .expect("writes");
    let out = dir.join("taskapp.yaml");
    let yaml = crate::import::import("electrodb", &schema, "taskapp", &out);
    let line = "- { name: \"gsi3pk-gsi3sk-index\", pk: \"gsi3pk\", sk: \"gsi3sk\", project: [\"firstName\", \"title\"] }";
    assert!(yaml.contains(line), "missing `{line}` in\n{yaml}");
    let _ = std::fs::remove_dir_all(&dir);
}
