//! `jobstream query`: a model file's declared access patterns (`queries:`,
//! [`shared::file::queries`]) run against a table: the items as a table or
//! JSON, every page read.

use std::io::Write;

use shared::file::query_run::{self, Bound, Outcome, QueryError};
use shared::file::FileModel;

/// Binds query `name` of `m` to `args` (`param=value`): every usage error
/// before any request.
pub fn prepare(m: &FileModel, name: &str, args: &[String]) -> Result<Bound, QueryError> {
    let args = query_run::split_args(name, args)?;
    query_run::bind(m, name, &args)
}

/// Runs query `name` of `m` with `args` (`param=value`) on `table`, every
/// page (`page_size` items per request; default: 1 MB pages).
pub async fn query(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    m: &FileModel,
    name: &str,
    args: &[String],
    page_size: Option<i32>,
) -> Result<Outcome, QueryError> {
    let bound = prepare(m, name, args)?;
    query_run::run(client, table, &bound, page_size).await
}

/// Prints what a query returned: a table with a count, or JSON.
pub fn print(
    m: &FileModel,
    name: &str,
    out: &Outcome,
    json: bool,
    w: &mut impl Write,
) -> std::io::Result<()> {
    if json {
        return writeln!(
            w,
            "{}",
            serde_json::to_string_pretty(&query_run::to_json(&out.items))?
        );
    }
    let q = query_run::find(m, name).ok();
    if let Some(q) = q {
        writeln!(w, "{}", query_run::render(m, q, &out.items))?;
    }
    writeln!(
        w,
        "({} item{}, {} page{})",
        out.items.len(),
        if out.items.len() == 1 { "" } else { "s" },
        out.pages,
        if out.pages == 1 { "" } else { "s" }
    )?;
    if let Some(note) = q.and_then(|q| query_run::projection_note(m, q)) {
        writeln!(w, "{note}")?;
    }
    Ok(())
}

/// What `--json`'s items lack, for stderr (stdout stays the items): see
/// [`query_run::projection_note`].
pub fn json_note(m: &FileModel, name: &str) -> Option<String> {
    query_run::find(m, name)
        .ok()
        .and_then(|q| query_run::projection_note(m, q))
}

/// Prints the model's queries with their parameters.
pub fn list(m: &FileModel, w: &mut impl Write) -> std::io::Result<()> {
    if m.queries.is_empty() {
        return writeln!(w, "model {} declares no queries (`queries:`)", m.name);
    }
    for line in query_run::listing(m) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn every_shipped_file_compiles() {
        for (path, text) in shared::file::SHIPPED {
            if let Err(p) = shared::file::compile(text, "shipped") {
                panic!("{path}: {p:#?}");
            }
        }
    }

    /// A query answered from an index that projects less than every
    /// attribute prints what the index's items carry and says so, in the
    /// listing and under its items (the JSON on stdout stays items only).
    #[test]
    fn a_query_on_an_index_projecting_less_than_all_says_what_its_items_carry() {
        let m = shared::file::compile(
            "jobstream: 1\ntable: { name: tbl, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: G1PK, sk: G1SK, project: keys }, { name: GSI2, pk: G2PK, sk: G2SK, project: [name] }] }\nentities:\n  a:\n    key: { PK: \"A#${id}\", SK: x }\n    attributes: { name: string }\n    project:\n      attributes: { G1PK: \"A\", G1SK: \"${id}\", G2PK: \"A\", G2SK: \"${id}\" }\nqueries:\n  keys_only:\n    index: GSI1\n    key: { G1PK: \"A\" }\n  some:\n    index: GSI2\n    key: { G2PK: \"A\" }\n",
            "t",
        )
        .unwrap_or_else(|p| panic!("{p:#?}"));
        let mut out = Vec::new();
        list(&m, &mut out).unwrap();
        let listed = String::from_utf8(out).unwrap();
        assert!(
            listed.contains("keys_only  [index GSI1, projects keys]"),
            "{listed}"
        );
        assert!(
            listed.contains("some  [index GSI2, projects [name]]"),
            "{listed}"
        );
        let item: shared::item::Item = [("PK", "A#1"), ("SK", "x"), ("G1PK", "A"), ("G1SK", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), AttributeValue::S(v.to_string())))
            .collect();
        let outcome = Outcome {
            items: vec![item],
            pages: 1,
        };
        let mut out = Vec::new();
        print(&m, "keys_only", &outcome, false, &mut out).unwrap();
        let printed = String::from_utf8(out).unwrap();
        assert!(
            printed.contains("(index GSI1 projects keys: its items carry only the keys; read an item from the table for its other attributes)"),
            "{printed}"
        );
        let mut out = Vec::new();
        print(&m, "keys_only", &outcome, true, &mut out).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json[0]["G1SK"], "1");
    }

    #[test]
    fn listing_a_model_without_queries_says_so() {
        let m = shared::file::compile(
            "jobstream: 1\ntable: { name: tbl, pk: PK, sk: SK }\nentities:\n  a:\n    key: { PK: \"A#${id}\", SK: x }\n",
            "t",
        )
        .unwrap();
        let mut out = Vec::new();
        list(&m, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "model t declares no queries (`queries:`)\n"
        );
    }
}
