//! A GSI's `project:` (what its items carry) and the readers of an index
//! held to it: a `queries:` entry whose filter or `attributes` name an
//! attribute the index does not project is refused by `check-model`.

use super::compile;
use super::test_support::{assert_at, problems};
use crate::models::table::GsiProjection;

/// A OneTable-style table: `gs2` projects some attributes, `gs3` the keys.
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
    attributes: { name: string, stage: string, amount: int, "region?": string }
    project:
      attributes:
        gs2pk: "stage#${stage}"
        gs2sk: "deal#${id}"
        gs3pk: "region#${region}"
        gs3sk: "deal#${id}"
queries:
"#;

#[test]
fn a_gsis_projection_is_declared_by_project() {
    let m = compile(&CRM.replace("queries:\n", ""), "t").unwrap_or_else(|p| panic!("{p:#?}"));
    let by = |n: &str| m.table.gsis.iter().find(|g| g.name == n).unwrap();
    assert_eq!(by("gs1").projection, GsiProjection::All);
    // The keys in the list are dropped (every index item has them).
    assert_eq!(
        by("gs2").projection,
        GsiProjection::Include(vec!["amount", "name", "stage"])
    );
    assert_eq!(by("gs3").projection, GsiProjection::KeysOnly);
}

#[test]
fn a_projection_other_than_all_keys_or_a_list_is_refused_at_its_place() {
    let text = CRM.replace("project: keys", "project: key");
    let p = problems(&text);
    let line = text
        .lines()
        .position(|l| l.contains("project: key "))
        .unwrap() as u64
        + 1;
    let col = text
        .lines()
        .nth(line as usize - 1)
        .unwrap()
        .find("key ")
        .unwrap() as u64
        + 1;
    assert_at(
        &p,
        (line, col),
        "index `gs3`: project `key` (did you mean `keys`?)",
    );
    let text = CRM.replace("project: keys", "project: []");
    assert!(problems(&text)
        .iter()
        .any(|p| p.message.contains("write `keys`")));
}

fn query_problems(query: &str) -> Vec<String> {
    problems(&format!("{CRM}{query}"))
        .into_iter()
        .map(|p| p.message)
        .collect()
}

#[test]
fn a_query_reading_an_attribute_its_index_does_not_project_is_refused() {
    // The filter reads `priority`, which gs2 does not carry: DynamoDB would
    // evaluate it as absent on every item, silently.
    let p = query_problems(
        "  big_deals:\n    index: gs2\n    params: { stage: string, min: int }\n    key: { gs2pk: \"stage#${stage}\" }\n    filter: \"amount >= :min AND priority = :min\"\n",
    );
    assert!(
        p.iter().any(|m| m.contains(
            "query `big_deals`: index gs2 projects [amount, name, stage]: its items carry no `priority` (read by the filter)"
        )),
        "{p:#?}"
    );
    assert!(!p.iter().any(|m| m.contains("`amount`")), "{p:#?}");
    // `attributes:` printed from a keys-only index.
    let p = query_problems(
        "  by_region:\n    index: gs3\n    params: { region: string }\n    key: { gs3pk: \"region#${region}\" }\n    attributes: [name, gs3sk]\n",
    );
    assert!(
        p.iter().any(|m| m.contains(
            "query `by_region`: index gs3 projects keys: its items carry no `name` (in `attributes`)"
        )),
        "{p:#?}"
    );
    assert!(!p.iter().any(|m| m.contains("`gs3sk`")), "{p:#?}");
}

#[test]
fn a_query_reading_what_its_index_projects_compiles() {
    let text = format!(
        "{CRM}  big_deals:\n    index: gs2\n    params: {{ stage: string, min: int }}\n    key: {{ gs2pk: \"stage#${{stage}}\" }}\n    filter: \"amount >= :min\"\n    attributes: [name, amount, pk]\n  by_region:\n    index: gs3\n    params: {{ region: string }}\n    key: {{ gs3pk: \"region#${{region}}\" }}\n"
    );
    compile(&text, "t").unwrap_or_else(|p| panic!("{p:#?}"));
}

#[test]
fn a_filter_reads_the_first_attribute_of_each_path() {
    let f =
        super::query_filter::parse_filter("a.b[2].status = :s AND size(tags) > :n AND status = :s")
            .unwrap();
    assert_eq!(
        super::query_projection::filter_attributes(&f),
        ["a", "status", "tags"]
    );
    let f = super::query_filter::parse_filter("x.y = :s").unwrap();
    assert_eq!(super::query_projection::filter_attributes(&f), ["x"]);
}

/// An index keyed by its partition key alone (OneTable's
/// `gs3: { hash: 'gs3pk' }`, an ElectroDB index with `pk` only: a lookup by
/// a unique value; import13's #3): declared without `sk`, projected onto,
/// queried by its partition key, and a sort key condition on it refused.
const LOOKUP: &str = r#"jobstream: 1
table:
  name: users
  pk: pk
  sk: sk
  gsis:
    - { name: byEmail, pk: emailKey, project: keys }
entities:
  User:
    key: { pk: "user#${id}", sk: "user" }
    attributes: { email: string, status: [open, closed] }
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

#[test]
fn an_index_without_a_sort_key_is_declared_projected_and_queried_by_its_partition_key() {
    let m = compile(LOOKUP, "t").unwrap_or_else(|p| panic!("{p:#?}"));
    let g = &m.table.gsis[0];
    assert_eq!((g.name, g.pk, g.sk), ("byEmail", "emailKey", None));
    assert_eq!(g.projection, GsiProjection::KeysOnly);
    assert_eq!(m.table.key_attributes(), ["pk", "sk", "emailKey"]);
    let q = m
        .queries
        .iter()
        .find(|q| q.name == "user_by_email")
        .unwrap();
    assert_eq!(q.index, Some("byEmail"));
    assert!(q.sk.is_none());
    assert_eq!(q.key_names(&m.table), ("emailKey", None));
}

#[test]
fn a_sort_key_condition_on_an_index_without_one_is_refused_at_its_place() {
    let text = format!("{LOOKUP}      sk: {{ begins_with: \"user\" }}\n");
    let p = problems(&text);
    let line = text
        .lines()
        .position(|l| l.contains("begins_with"))
        .unwrap() as u64
        + 1;
    assert_at(
        &p,
        (line, 11),
        "query `user_by_email`: index byEmail is keyed by its partition key `emailKey` alone: it takes no sort key condition (`sk`)",
    );
}
