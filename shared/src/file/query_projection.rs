//! What a `queries:` entry reads from the items of the index it queries,
//! held to what that index projects (a GSI's `project:`): DynamoDB
//! evaluates a filter on an attribute the index does not carry as if every
//! item lacked it, and returns no such column, both silently. `check-model`
//! refuses the query instead, naming the index, the query and the
//! attribute. A query without `attributes:` prints what the index's items
//! carry (its keys, and the attributes it projects).

use super::model::{at, Problem};
use super::query_filter::Filter;
use super::raw::Spanned;
use crate::models::table::{Gsi, GsiProjection, TableDef};

/// The top-level attributes `filter` reads (a path `a.b[2].c` reads `a`).
pub fn filter_attributes(filter: &Filter) -> Vec<&str> {
    let e = filter.expression.as_bytes();
    let mut out: Vec<&str> = Vec::new();
    for (alias, attr) in &filter.names {
        let top = filter
            .expression
            .match_indices(alias.as_str())
            .any(|(i, _)| {
                let end = i + alias.len();
                // `#f1` is not `#f10`; a path's later segments follow a `.`.
                let whole = e
                    .get(end)
                    .is_none_or(|c| !c.is_ascii_alphanumeric() && *c != b'_');
                whole && (i == 0 || e[i - 1] != b'.')
            });
        if top && !out.contains(&attr.as_str()) {
            out.push(attr);
        }
    }
    out
}

/// The projection in a message: `keys`, `[a, b]`.
fn says(p: &GsiProjection) -> String {
    p.written()
}

/// Problems of query `name` on index `g` of `table`: each attribute its
/// filter or its `attributes` read that `g`'s items do not carry.
pub fn check(
    name: &str,
    g: &Gsi,
    table: &TableDef,
    filter: Option<(&Filter, &Spanned<String>)>,
    attributes: Option<&Spanned<Vec<Spanned<String>>>>,
    problems: &mut Vec<Problem>,
) {
    if g.projection == GsiProjection::All {
        return;
    }
    let missing = |a: &str| !g.carries(a, table.pk, table.sk);
    let mut say = |pos: (u64, u64), attr: &str, reader: &str| {
        let (line, col) = pos;
        problems.push(Problem::new(
            line,
            col,
            format!(
                "query `{name}`: index {} projects {}: its items carry no `{attr}` ({reader}): add it to the index's `project:` (a new index: DynamoDB cannot change a projection in place), query the table, or read it otherwise",
                g.name,
                says(&g.projection)
            ),
        ));
    };
    if let Some((f, span)) = filter {
        for a in filter_attributes(f).into_iter().filter(|a| missing(a)) {
            say(at(span), a, "read by the filter");
        }
    }
    for a in attributes.iter().flat_map(|a| a.value.iter()) {
        if missing(&a.value) {
            say(at(a), &a.value, "in `attributes`");
        }
    }
}
