//! `jobstream graph`: a picture of a model as a Mermaid flowchart (GitHub
//! renders ```` ```mermaid ```` blocks).
//!
//! A model file shows everything it declares: each entity with its key
//! templates (writers as rounded boxes, processor-owned items as boxes,
//! counters as hexagons), what each writer implies (`project` into an index,
//! `derive`, `count`), the join sets (facts in, target out), the once
//! effects (source and preconditions in, puts and deletes out) and the
//! indexes.
//! A compiled model's rules are code: its picture is the table, the indexes,
//! the stream processors (derive, a history fold) and the queue jobs (sets,
//! once effects).

use std::fmt::Write as _;

use shared::file::model::{Entity, FileModel, Value};
use shared::file::sets::{SetExpr, SetWhen};
use shared::file::template::Part;

/// Text for a quoted Mermaid label: the characters its grammar reads
/// (quotes, `#`, angle brackets, pipes) as entity codes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '#' => out.push_str("#35;"),
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '|' => out.push_str("#124;"),
            '&' => out.push_str("#38;"),
            '`' => out.push_str("#96;"),
            _ => out.push(c),
        }
    }
    out
}

/// A node id from a name (letters, digits, `_`).
fn id(prefix: &str, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{prefix}_{clean}")
}

/// A value as written where it is an expression (a count's `add`): one
/// expression alone is shown bare.
fn value_text(v: &Value) -> String {
    if let [Part::Hole(e, _)] = v.0.as_slice() {
        return e.source.clone();
    }
    template_text(v)
}

/// A value as written where it is a template (a projection, a once key):
/// literals and `${expr}`, so `"${documentId}"` is never shown as the
/// literal `documentId`.
fn template_text(v: &Value) -> String {
    v.0.iter()
        .map(|p| match p {
            Part::Lit(l) => l.clone(),
            Part::Hole(e, _) => format!("${{{}}}", e.source),
        })
        .collect()
}

/// An edge `from ARROW|"label"| to` (the label escaped).
fn edge(out: &mut String, from: &str, arrow: &str, label: &str, to: &str) {
    let _ = writeln!(out, "  {from} {arrow}|\"{}\"| {to}", esc(label));
}

fn entity_label(e: &Entity) -> String {
    let keys: Vec<String> = e
        .key
        .iter()
        .map(|k| format!("{}: {}", k.attr, k.template.source))
        .collect();
    let kind = if e.counter.is_some() {
        "counter"
    } else if e.writer {
        "writer"
    } else {
        "processor"
    };
    format!(
        "<b>{}</b> ({kind})<br/>{}",
        esc(e.name),
        keys.iter()
            .map(|k| esc(k))
            .collect::<Vec<_>>()
            .join("<br/>")
    )
}

fn when_suffix(when: Option<&shared::file::expr::Expr>) -> String {
    when.map(|w| format!(" when {}", w.source))
        .unwrap_or_default()
}

/// ` each tag in tags` of a rule applied once per element (`each:`).
fn each_suffix(each: Option<shared::file::model::Each>) -> String {
    each.map(|x| format!(" each {} in {}", x.name, x.attr))
        .unwrap_or_default()
}

/// The Mermaid flowchart of a model file.
pub fn file_graph(m: &FileModel) -> String {
    let mut out = String::from("flowchart LR\n");
    let t = &m.table;
    let ent = |i: usize| id("entity", m.entities[i].name);
    let _ = writeln!(
        out,
        "  table[(\"{}\")]",
        esc(&format!(
            "table {} ({}, {}){}",
            t.name,
            t.pk,
            t.sk,
            t.ttl_attribute
                .map(|a| format!(", TTL {a}"))
                .unwrap_or_default()
        ))
    );
    for g in &t.gsis {
        let _ = writeln!(
            out,
            "  {}[(\"{}\")]",
            id("index", g.name),
            esc(&format!("index {} {}", g.name, g.key_list()))
        );
        let _ = writeln!(out, "  table -.- {}", id("index", g.name));
    }
    for e in &m.entities {
        let label = entity_label(e);
        let node = id("entity", e.name);
        let _ = match (e.counter.is_some(), e.writer) {
            (true, _) => writeln!(out, "  {node}{{{{\"{label}\"}}}}"),
            (false, true) => writeln!(out, "  {node}(\"{label}\")"),
            (false, false) => writeln!(out, "  {node}[\"{label}\"]"),
        };
    }
    for e in &m.entities {
        let node = id("entity", e.name);
        if let Some(p) = &e.project {
            // Each edge names the attributes it is about: an index's edge
            // its keys (not another index's: user15), with the attributes
            // that are no index's key.
            let is_key =
                |a: &str, g: &shared::models::table::Gsi| g.key_attributes().any(|k| k == a);
            let label = |keep: &dyn Fn(&str) -> bool| {
                let attrs: Vec<String> = p
                    .attrs
                    .iter()
                    .filter(|(a, _)| keep(a))
                    .map(|(a, v)| format!("{a} = {}", template_text(v)))
                    .collect();
                format!(
                    "project {}{}",
                    attrs.join(", "),
                    when_suffix(p.when.as_ref())
                )
            };
            let no_index_key = |a: &str| !t.gsis.iter().any(|g| is_key(a, g));
            // Into each index whose keys it projects, else onto the item.
            let indexes: Vec<_> = t
                .gsis
                .iter()
                .filter(|g| p.attrs.iter().any(|(a, _)| is_key(a, g)))
                .collect();
            if indexes.is_empty() {
                edge(&mut out, &node, "-->", &label(&|_| true), &node);
            }
            for g in indexes {
                let own = label(&|a| is_key(a, g) || no_index_key(a));
                edge(&mut out, &node, "-->", &own, &id("index", g.name));
            }
        }
        for d in &e.derive {
            let label = format!(
                "derive{}{}",
                each_suffix(d.each),
                when_suffix(d.when.as_ref())
            );
            edge(&mut out, &node, "-->", &label, &ent(d.target));
        }
        if let Some(c) = &e.compute {
            // The rows feed the item's computed values through a job.
            let values: Vec<&str> = c.values.iter().map(|(a, _)| *a).collect();
            let label = format!("compute {} (queue {})", values.join(", "), c.queue.name);
            edge(&mut out, &ent(c.over), "-->", &label, &node);
        }
        for c in &e.count {
            let target = &m.entities[c.counter];
            let adds: Vec<String> = c
                .add
                .iter()
                .map(|(a, v)| format!("{a} += {}", value_text(v)))
                .collect();
            let label = format!(
                "count {}{}{}{}",
                c.each
                    .map(|x| format!("each {} in {}: ", x.name, x.attr))
                    .unwrap_or_default(),
                adds.join(", "),
                // A parent the source does not key: found by its identity.
                if target.unique.is_empty() {
                    String::new()
                } else {
                    format!(" (found by {})", target.unique.join(", "))
                },
                when_suffix(c.when.as_ref())
            );
            edge(&mut out, &node, "-->", &label, &ent(c.counter));
        }
    }
    for s in &m.sets {
        let node = id("set", s.name);
        let mut label = format!("set {} (queue {})", s.name, s.queue.name);
        for w in &s.when {
            match w {
                SetWhen::Distinct(a, b) => {
                    let _ = write!(label, "<br/>when {}", esc(&format!("{a} != {b}")));
                }
                SetWhen::Expr(e) => {
                    let _ = write!(label, "<br/>when {}", esc(&e.source));
                }
            }
        }
        if let Some(ttl) = &s.ttl {
            let ttl = match ttl {
                SetExpr::Var(v) => v.clone(),
                SetExpr::Attr { fact, attr } => format!("{fact}.{attr}"),
                SetExpr::Expr(e) => e.source.clone(),
            };
            let _ = write!(label, "<br/>ttl {}", esc(&ttl));
        }
        let _ = writeln!(out, "  {node}[/\"{label}\"/]");
        for f in &s.facts {
            let via = f
                .via
                .as_ref()
                .map(|v| format!(" via {}/{}", v.pk, v.sk))
                .unwrap_or_default();
            let from = f
                .from
                .as_ref()
                .map(|(v, x)| format!(" from {v} >= {}", x.source))
                .unwrap_or_default();
            let label = format!("fact {}{via}{from}", f.name);
            edge(&mut out, &ent(f.entity), "-->", &label, &node);
        }
        for f in &s.unless {
            // An `unless` on a once effect's marker: from the effect.
            let from = match &f.once {
                Some(o) => id("once", o),
                None => ent(f.entity),
            };
            edge(
                &mut out,
                &from,
                "-.->",
                &format!("unless {}", f.name),
                &node,
            );
        }
        edge(&mut out, &node, "-->", "set items", &ent(s.target));
    }
    for o in &m.once {
        let node = id("once", o.name);
        let label = format!(
            "once {} (queue {})<br/>key {}",
            o.name,
            o.queue.name,
            esc(&template_text(&o.key))
        );
        let _ = writeln!(out, "  {node}[/\"{label}\"/]");
        let when = format!("when {}", o.when.source);
        edge(&mut out, &ent(o.source), "-->", &when, &node);
        for r in &o.require {
            edge(&mut out, &ent(r.entity), "-.->", "require", &node);
        }
        for w in &o.put {
            edge(&mut out, &node, "-->", "put, with a marker", &ent(w.entity));
        }
        for w in &o.delete {
            edge(&mut out, &node, "-->", "delete", &ent(w.entity));
        }
    }
    if let Some(h) = &m.history {
        let node = id("history", h.processor);
        let _ = writeln!(
            out,
            "  {node}[/\"{}: history fold<br/>mirror {} on the root\"/]",
            esc(h.processor),
            esc(h.mirror)
        );
        edge(&mut out, &ent(h.root.entity), "-->", "root", &node);
        for mb in &h.members {
            let label = format!("member (snapshot list {})", mb.list);
            edge(&mut out, &ent(mb.shape.entity), "-->", &label, &node);
        }
        let label = format!("entries, {} digits", h.digits);
        edge(&mut out, &node, "-->", &label, &ent(h.entries));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBRARY: &str = include_str!("../../../models/examples/library.yaml");

    #[test]
    fn a_file_graph_shows_entities_what_they_imply_and_the_indexes() {
        let m = shared::file::compile(LIBRARY, "library").expect("library.yaml compiles");
        let g = file_graph(&m);
        assert!(g.starts_with("flowchart LR\n"), "{g}");
        for line in [
            "  index_GSI1[(\"index GSI1 (GSI1PK, GSI1SK)\")]",
            "  entity_loans{{\"<b>loans</b> (counter)<br/>PK: M#35;${memberId}<br/>SK: COUNT\"}}",
            "  entity_loan -->|\"derive\"| entity_book_loan",
            "  entity_loan -->|\"count open += state == 'open' ? 1 : 0, total += 1\"| entity_loans",
        ] {
            assert!(g.lines().any(|l| l == line), "missing `{line}` in\n{g}");
        }
        let project = g
            .lines()
            .find(|l| l.starts_with("  entity_loan -->|\"project "))
            .expect("the loan's projection");
        assert!(project.ends_with("| index_GSI1"), "{project}");
        assert!(project.contains("when state == 'open'"), "{project}");
        // A template of one expression keeps its `${}` (user12 finding
        // 9e: `"${documentId}"` was shown as the literal `documentId`).
        assert!(
            project.contains("due = ${epoch(since) + days * 86400}"),
            "{project}"
        );
    }

    /// An entity projecting into two indexes labelled each edge with both
    /// indexes' keys (user15): each edge names its own index's keys, and
    /// the attributes that are no index's key.
    #[test]
    fn each_index_edge_names_its_own_keys() {
        let text = LIBRARY
            .replace(
                "  ttl: ttl\n",
                "    - { name: GSI2, pk: GSI2PK, sk: GSI2SK }\n  ttl: ttl\n",
            )
            .replace(
                "        GSI1SK: \"${since}#${memberId}\"\n",
                "        GSI1SK: \"${since}#${memberId}\"\n        GSI2PK: \"M#${memberId}\"\n        GSI2SK: \"${since}\"\n",
            );
        assert_ne!(text, LIBRARY);
        let m = shared::file::compile(&text, "library").expect("compiles");
        let g = file_graph(&m);
        let edge = |index: &str| {
            g.lines()
                .find(|l| l.starts_with("  entity_loan -->|\"project ") && l.ends_with(index))
                .unwrap_or_else(|| panic!("no edge into {index} in\n{g}"))
                .to_string()
        };
        let (one, two) = (edge("| index_GSI1"), edge("| index_GSI2"));
        assert!(one.contains("GSI1PK") && !one.contains("GSI2PK"), "{one}");
        assert!(two.contains("GSI2SK") && !two.contains("GSI1SK"), "{two}");
        for e in [&one, &two] {
            assert!(e.contains("due = "), "{e}");
        }
    }

    #[test]
    fn a_file_graph_shows_once_effects() {
        let text = r#"jobstream: 1
table: { name: tbl, pk: PK, sk: SK }
entities:
  job:
    key: { PK: "JOB#${jobId}", SK: "INFO" }
  request:
    key: { PK: "JOB#${jobId}", SK: "REQ#${seekerId}" }
    attributes: { status: [pending, approved] }
  suggestion:
    owner: processor
    key: { PK: "S#${seekerId}", SK: "SUG#${jobId}" }
  match:
    owner: processor
    key: { PK: "S#${seekerId}", SK: "MATCH#${jobId}" }
once:
  matches:
    on: request
    when: "status == 'approved'"
    key: "${seekerId}#${jobId}"
    require: [{ entity: job, with: { jobId: jobId } }]
    put: [{ entity: match, with: { seekerId: seekerId, jobId: jobId } }]
    delete: [{ entity: suggestion, with: { seekerId: seekerId, jobId: jobId } }]
"#;
        let m = shared::file::compile(text, "t").expect("compiles");
        let g = file_graph(&m);
        for line in [
            "  once_matches[/\"once matches (queue jobstream-matches-jobs)<br/>key ${seekerId}#35;${jobId}\"/]",
            "  entity_request -->|\"when status == 'approved'\"| once_matches",
            "  entity_job -.->|\"require\"| once_matches",
            "  once_matches -->|\"put, with a marker\"| entity_match",
            "  once_matches -->|\"delete\"| entity_suggestion",
        ] {
            assert!(g.lines().any(|l| l == line), "missing `{line}` in\n{g}");
        }
    }

    #[test]
    fn a_count_into_a_parent_found_by_its_identity_says_so() {
        let text = include_str!("../../../models/examples/invoices.yaml");
        let m = shared::file::compile(text, "invoices").expect("invoices.yaml compiles");
        let g = file_graph(&m);
        let line = "  entity_line -->|\"count total += amount, lines += 1 (found by invoiceId)\"| entity_invoice";
        assert!(g.lines().any(|l| l == line), "missing `{line}` in\n{g}");
    }

    #[test]
    fn a_rule_applied_per_element_says_each() {
        let text = include_str!("../../../models/examples/qa_tags.yaml");
        let m = shared::file::compile(text, "qa_tags").expect("qa_tags.yaml compiles");
        let g = file_graph(&m);
        for line in [
            "  entity_question -->|\"derive each tag in tags\"| entity_tag_question",
            "  entity_question -->|\"count each tag in tags: questions += 1, open += status == 'open' ? 1 : 0\"| entity_tag_stats",
        ] {
            assert!(g.lines().any(|l| l == line), "missing `{line}` in\n{g}");
        }
    }

    #[test]
    fn a_compute_block_is_an_edge_from_its_rows_to_the_item() {
        // The shipped file that computes values over a partition.
        let (path, text) = shared::file::SHIPPED
            .iter()
            .find(|(_, t)| t.contains("\n    compute:"))
            .expect("a shipped file with compute:");
        let m = shared::file::compile(text, "t").unwrap_or_else(|p| panic!("{path}: {p:?}"));
        let g = file_graph(&m);
        // The queue the file names for its compute job (`queue_name:`).
        let queue = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("queue_name: "))
            .expect("the compute job's queue_name");
        let line = format!(
            "  entity_match -->|\"compute points, mcorrect (queue {queue})\"| entity_prediction"
        );
        assert!(g.lines().any(|l| l == line), "missing `{line}` in\n{g}");
        assert!(
            g.lines()
                .any(|l| l.starts_with("  entity_standings -->|\"project ")
                    && l.ends_with("| index_GSI")),
            "a counter's projection into the index:\n{g}"
        );
    }

    #[test]
    fn labels_escape_what_mermaid_reads() {
        assert_eq!(
            esc("A#\"b\"<c>|d&"),
            "A#35;#quot;b#quot;#lt;c#gt;#124;d#38;"
        );
        assert_eq!(id("entity", "book-loan"), "entity_book_loan");
    }
}
