//! `queries:` compiled: filters, and what `check-model` reports.

use super::*;

#[test]
fn the_pickem_filter_is_sayable() {
    let f = parse_filter("attribute_not_exists(belongsto) OR belongsto = :u").unwrap();
    assert_eq!(f.expression, "attribute_not_exists(#f0) OR #f0 = :v_u");
    assert_eq!(f.names, [("#f0".to_string(), "belongsto".to_string())]);
    assert_eq!(f.placeholders, ["u"]);
}

#[test]
fn reserved_words_and_paths_are_aliased() {
    let f = parse_filter("status = :s and size(tags) > :n AND a.b[2].status IN (:x, :y)").unwrap();
    assert_eq!(
        f.expression,
        "#f0 = :v_s AND size(#f1) > :v_n AND #f2.#f3[2].#f0 IN (:v_x, :v_y)"
    );
    assert_eq!(f.placeholders, ["s", "n", "x", "y"]);
}

#[test]
fn bad_filters_say_where() {
    assert_eq!(parse_filter("a = 1").unwrap_err().0, 4);
    assert_eq!(parse_filter("#a = :b").unwrap_err().0, 0);
    let (off, msg) = parse_filter("atribute_exists(a)").unwrap_err();
    assert_eq!(off, 0);
    assert!(msg.contains("did you mean `attribute_exists`"), "{msg}");
    assert!(parse_filter("(a = :b").is_err());
    assert!(parse_filter("a = :b)").is_err());
    assert!(parse_filter("a = 'x'").is_err());
}

const BASE: &str = r#"jobstream: 1
table: { name: tbl, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: G1PK, sk: G1SK }] }
entities:
  emp:
    key: { PK: "ORG#${orgId}", SK: "EMP#${empId}" }
    attributes: { email: string }
    project:
      attributes: { G1PK: "EMAIL#${lower(email)}", G1SK: "EMP#${empId}" }
queries:
"#;

fn problems(queries: &str) -> Vec<String> {
    match crate::file::compile(&format!("{BASE}{queries}"), "t") {
        Ok(_) => vec![],
        Err(p) => p
            .iter()
            .map(|p| format!("{}:{}: {}", p.line, p.col, p.message))
            .collect(),
    }
}

fn one_problem(queries: &str, want: &str) {
    let p = problems(queries);
    assert!(
        p.iter().any(|m| m.contains(want)),
        "expected a problem with `{want}`, got {p:#?}"
    );
}

#[test]
fn a_good_query_compiles() {
    let p = problems(
            "  q:\n    params: { org: ulid }\n    key: { PK: \"ORG#${org}\", SK: { begins_with: \"EMP#\" } }\n",
        );
    assert!(p.is_empty(), "{p:#?}");
}

/// An unknown index does not hide the query's other problems (user6's G6:
/// the unused parameter showed only once the index was fixed); its key's
/// templates still use the parameters they name.
#[test]
fn an_unknown_index_and_an_unused_parameter_are_reported_together() {
    let p = problems(
        "  q:\n    index: GSI2\n    params: { org: ulid, extra: string }\n    key: { G1PK: \"ORG#${org}\" }\n",
    );
    let want = [
        "unknown index `GSI2` (did you mean `GSI1`?)",
        "parameter `extra` is used nowhere",
    ];
    for w in want {
        assert!(p.iter().any(|m| m.contains(w)), "expected `{w}` in {p:#?}");
    }
    assert_eq!(p.len(), 2, "only those two: {p:#?}");
}

#[test]
fn check_model_finds_what_a_query_gets_wrong() {
    // Never a scan: the partition key is required.
    one_problem(
        "  q:\n    key: { SK: \"EMP#1\" }\n",
        "needs the partition key `PK` (an equality): without it the query would be a scan",
    );
    one_problem(
        "  q:\n    index: GSI2\n    key: { G1PK: x }\n",
        "unknown index `GSI2` (did you mean `GSI1`?)",
    );
    one_problem(
        "  q:\n    params: { org: ulid }\n    key: { PK: \"ORG#${orgg}\" }\n",
        "unknown name `orgg` in `orgg` (did you mean `org`?)",
    );
    one_problem(
        "  q:\n    params: { n: int }\n    key: { PK: \"ORG#${n + 'x'}\" }\n",
        "query `q`: `n + 'x'`:",
    );
    one_problem(
        "  q:\n    params: { org: ulid, x: string }\n    key: { PK: \"ORG#${org}\" }\n",
        "parameter `x` is used nowhere",
    );
    one_problem(
        "  q:\n    params: { org: uild }\n    key: { PK: \"ORG#${org}\" }\n",
        "unknown type `uild` (did you mean `ulid`?)",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\", SK: { begins: \"EMP#\" } }\n",
        "unknown operator `begins` (did you mean `begins_with`?)",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\", SK: { between: [\"A\"] } }\n",
        "`between` takes a list of two",
    );
    one_problem(
        "  q:\n    key: { PK: { begins_with: \"ORG#\" } }\n",
        "the partition key `PK` takes equality only",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\", email: x }\n",
        "`email` is not a key attribute of the table",
    );
    one_problem(
        "  q:\n    key: { PK: \"USER#1\" }\n",
        "no entity's `PK` template matches this partition key",
    );
    one_problem(
        "  q:\n    index: GSI1\n    key: { G1PK: \"ORG#1\" }\n",
        "no entity projects a `G1PK` this partition key matches",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    filter: \"email = :e\"\n",
        "filter: `:e` is not bound",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    filter: \"SK = :e\"\n    values: { e: x }\n",
        "`SK` is a key attribute of what is queried",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    order: down\n",
        "order `down`: `asc` or `desc`",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    limit: 0\n",
        "`limit` is at least 1",
    );
    one_problem("  q:\n    key: { PK: \"ORG#${\" }\n", "without its closing");
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    values: { u: x }\n",
        "`values: u` is read by no filter placeholder",
    );
    one_problem(
        "  q:\n    key: { PK: \"ORG#1\" }\n    sort: desc\n",
        "unknown field `sort`",
    );
}

/// A `values:` entry is a template, so a string: `min: "1000"` (or an
/// unquoted 1000, which YAML reads and the template keeps as text) compared
/// with a numeric attribute matches nothing, silently (user10 #9). Such a
/// literal must say which it means; `"${1000}"` is the number.
#[test]
fn a_literal_number_or_boolean_in_values_must_say_which_it_means() {
    for lit in ["\"1000\"", "1000", "\"-2.5\"", "true"] {
        one_problem(
            &format!("  q:\n    key: {{ PK: \"ORG#1\" }}\n    filter: \"total > :min\"\n    values: {{ min: {lit} }}\n"),
            "is the string",
        );
    }
    for fine in ["\"${1000}\"", "\"${'1000'}\"", "\"USER#1\""] {
        let p = problems(&format!(
            "  q:\n    key: {{ PK: \"ORG#1\" }}\n    filter: \"total > :min\"\n    values: {{ min: {fine} }}\n"
        ));
        assert!(p.is_empty(), "{fine}: {p:#?}");
    }
}

#[test]
fn problems_say_line_and_column() {
    let p = problems("  q:\n    params: { org: ulid }\n    key: { PK: \"ORG#${orgg}\" }\n");
    // Line 12 of the file, at `orgg` inside the quoted template.
    assert!(p.iter().any(|m| m.starts_with("12:23:")), "{p:#?}");
}

/// A named format is "used like a type" (README): as a query parameter's
/// type too, checked on the value given (it was refused: unknown type).
#[test]
fn a_parameter_may_be_of_a_named_format() {
    let text = BASE.replace(
        "entities:",
        "formats: { uid: { pattern: \"^[a-z0-9]+$\", max_bytes: 8 } }\nentities:",
    ) + "  by_org:\n    params: { org: uid }\n    key: { PK: \"ORG#${org}\" }\n";
    let m = crate::file::compile(&text, "t").unwrap_or_else(|p| panic!("{p:#?}"));
    let arg = |v: &str| vec![("org".to_string(), v.to_string())];
    assert!(super::super::query_run::bind(&m, "by_org", &arg("acme1")).is_ok());
    let e = super::super::query_run::bind(&m, "by_org", &arg("Acme#1"))
        .err()
        .unwrap_or_else(|| panic!("not a uid"));
    assert!(e.to_string().contains("uid"), "{e}");
    one_problem(
        "  q:\n    params: { org: uidd }\n    key: { PK: \"ORG#${org}\" }\n",
        "unknown type `uidd`",
    );
}
