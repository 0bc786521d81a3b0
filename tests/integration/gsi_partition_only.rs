//! An index keyed by its partition key alone (a lookup by a unique value:
//! OneTable's `gs3: { hash: 'gs3pk' }`, an ElectroDB index with `pk` only;
//! import13's #3): the local engine creates it, the processors project its
//! key (sparse: dropped while the `when` is false), `query` answers by the
//! partition key, `verify` checks it, and an existing table's index keyed
//! otherwise is named with its in-place step.

use aws_sdk_dynamodb::types::{AttributeValue, KeyType};
use jobstream::local::deployed::shape_problems;
use jobstream::tools::query::query;
use shared::item::ItemExt;

use crate::items::{assert_clean, item, put};

const USERS: &str = r#"jobstream: 1
name: users
table:
  name: users
  pk: pk
  sk: sk
  gsis:
    - { name: byEmail, pk: emailKey, project: keys }
entities:
  User:
    key: { pk: "user#${id}", sk: "user" }
    attributes: { id: string, email: string, status: [open, closed] }
    project:
      when: "status == 'open'"
      attributes:
        emailKey: "email#${lower(email)}"
queries:
  user_by_email:
    index: byEmail
    params: { email: string }
    key:
      emailKey: "email#${lower(email)}"
"#;

fn user(id: &str, email: &str, status: &str) -> shared::item::Item {
    item(&[
        ("pk", &format!("user#{id}")),
        ("sk", "user"),
        ("type", "User"),
        ("id", id),
        ("email", email),
        ("status", status),
    ])
}

/// User `id` as the table holds it.
async fn get(rt: &jobstream::local::runtime::Runtime, id: &str) -> shared::item::Item {
    let out = rt
        .dynamodb
        .get_item()
        .table_name(&rt.config.table)
        .key("pk", AttributeValue::S(format!("user#{id}")))
        .key("sk", AttributeValue::S("user".into()))
        .send()
        .await
        .unwrap();
    out.item.expect("the user is there")
}

/// `user_by_email` of `m` for `email`, on `rt`'s table.
async fn ask(
    rt: &jobstream::local::runtime::Runtime,
    m: &shared::file::FileModel,
    email: &str,
) -> Vec<shared::item::Item> {
    let args = vec![format!("email={email}")];
    query(
        &rt.dynamodb,
        &rt.config.table,
        m,
        "user_by_email",
        &args,
        None,
    )
    .await
    .expect("runs")
    .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_without_a_sort_key_is_created_projected_sparse_queried_and_verified() {
    let path = crate::support::temp_model("users", USERS);
    let loaded = shared::file::load(&path).expect("loads");
    let m = &loaded.model;
    let mut env = crate::support::model_env("users", |o| o.model_file = Some(path)).await;

    // Created by its partition key alone, as declared.
    let desc = env
        .rt
        .dynamodb
        .describe_table()
        .table_name(&env.rt.config.table)
        .send()
        .await
        .unwrap()
        .table
        .unwrap();
    let index = &desc.global_secondary_indexes()[0];
    let keys: Vec<(&str, &KeyType)> = index
        .key_schema()
        .iter()
        .map(|k| (k.attribute_name(), k.key_type()))
        .collect();
    assert_eq!(keys, [("emailKey", &KeyType::Hash)]);
    assert!(shape_problems(&desc, &m.table, &env.rt.config.table, "table").is_empty());

    put(&env, user("ann", "Ann@Example.com", "open")).await;
    put(&env, user("bob", "bob@example.com", "closed")).await;
    env.rt.drain().await.unwrap();
    let ann = get(&env.rt, "ann").await;
    assert_eq!(ann.s("emailKey").ok(), Some("email#ann@example.com"));
    let bob = get(&env.rt, "bob").await;
    assert!(!bob.contains_key("emailKey"), "sparse: {bob:?}");
    assert_clean(&env.rt).await;

    let found = ask(&env.rt, m, "ANN@example.com").await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].s("pk").ok(), Some("user#ann"));
    assert!(ask(&env.rt, m, "bob@example.com").await.is_empty());

    // Closing ann drops her key (out of the index); reopening bob adds his.
    put(&env, user("ann", "Ann@Example.com", "closed")).await;
    put(&env, user("bob", "bob@example.com", "open")).await;
    env.rt.drain().await.unwrap();
    assert!(ask(&env.rt, m, "ann@example.com").await.is_empty());
    assert_eq!(ask(&env.rt, m, "bob@example.com").await.len(), 1);
    assert_clean(&env.rt).await;

    // verify finds a key written by hand where the `when` says none.
    env.rt
        .dynamodb
        .update_item()
        .table_name(&env.rt.config.table)
        .key("pk", AttributeValue::S("user#ann".into()))
        .key("sk", AttributeValue::S("user".into()))
        .update_expression("SET emailKey = :k")
        .expression_attribute_values(":k", AttributeValue::S("email#ann@example.com".into()))
        .send()
        .await
        .unwrap();
    let report = env.rt.verify().await.unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("user#ann"),
        "{:?}",
        report.problems
    );
}

/// The existing table's index keyed otherwise (by both keys) than the
/// file's (by its partition key alone): named in the file's words, with the
/// step that makes it anew in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_index_keyed_otherwise_is_named_by_its_keys() {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(
        &jobstream::local::engine::sdk_config(Some(&engine.endpoint()), 3).await,
    );
    let m = shared::file::compile(USERS, "users").unwrap_or_else(|p| panic!("{p:#?}"));
    let mut both = m.table.clone();
    both.gsis[0].sk = Some("sk");
    jobstream::local::engine::ensure_table(&client, &both, "users")
        .await
        .unwrap();
    let err = jobstream::local::engine::ensure_table(&client, &m.table, "users")
        .await
        .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains(
            "table users's index byEmail has keys (emailKey, sk), the definition (emailKey)"
        ),
        "{err}"
    );
    assert!(
        err.contains(r#"--global-secondary-index-updates '[{"Delete":{"IndexName":"byEmail"}}]'"#),
        "{err}"
    );
    assert!(
        err.contains(r#""KeySchema":[{"AttributeName":"emailKey","KeyType":"HASH"}],"#),
        "{err}"
    );
    engine.stop().await;
}
