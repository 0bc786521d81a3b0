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
    if let Ok(q) = query_run::find(m, name) {
        writeln!(w, "{}", query_run::render(m, q, &out.items))?;
    }
    writeln!(
        w,
        "({} item{}, {} page{})",
        out.items.len(),
        if out.items.len() == 1 { "" } else { "s" },
        out.pages,
        if out.pages == 1 { "" } else { "s" }
    )
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

    #[test]
    fn every_shipped_file_compiles() {
        for (path, text) in shared::file::SHIPPED {
            if let Err(p) = shared::file::compile(text, "shipped") {
                panic!("{path}: {p:#?}");
            }
        }
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
