//! `unique:` (counters found through an identity) and `formats:` in a
//! model file: what check-model refuses, with line:col and suggestions,
//! and what the rules make of items.

use super::test_support::{assert_at, assert_says, item, position, problems, rules};
use crate::engine::derive::checked_contributions;
use crate::engine::locate::locate_index;
use crate::engine::rules::Rules;
use crate::item::{n, s, Item};

/// The invoice example (models/examples/invoices.yaml).
pub const INVOICES: &str = include_str!("../../../models/examples/invoices.yaml");

fn invoice(account: &str, id: &str) -> Item {
    item(&[
        ("PK", s(format!("ACCOUNT#{account}"))),
        ("SK", s(format!("INV#{id}"))),
        ("type", s("invoice")),
        ("accountId", s(account)),
        ("invoiceId", s(id)),
        ("status", s("draft")),
    ])
}

fn line(id: &str, no: i64, amount: i64) -> Item {
    item(&[
        ("PK", s(format!("INV#{id}"))),
        ("SK", s(format!("LINE#{no}"))),
        ("type", s("line")),
        ("invoiceId", s(id)),
        ("lineNo", n(no)),
        ("amount", n(amount)),
    ])
}

#[test]
fn the_invoice_example_compiles() {
    assert_eq!(problems(INVOICES), vec![]);
}

#[test]
fn a_line_counts_into_its_invoices_identity_and_the_invoice_is_that_counter() {
    let r = rules(INVOICES);
    let c = r.contributions(&line("i-1", 1, 250)).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].values, vec![("total", 250), ("lines", 1)]);
    let logical = c[0].counter.key_item();
    assert_eq!(
        logical,
        item(&[("PK", s("@invoice")), ("SK", s("[\"i-1\"]"))])
    );
    // The logical key is located through the invoice id.
    let l = r.locate(&logical).expect("located");
    assert_eq!(l.identity, vec![("invoiceId", s("i-1"))]);
    assert!(!r.stale_counter(&logical));
    // Wherever the invoice is, it is that counter.
    for account in ["a-1", "a-2"] {
        let inv = r.counter(&invoice(account, "i-1")).expect("a counter");
        assert_eq!(inv.key_item(), logical);
        assert!(inv.create.is_none(), "the writer's item");
    }
    assert_eq!(
        r.counter(&logical).map(|c| c.key_item()),
        Some(logical.clone())
    );
    // Another invoice id: another counter.
    let other = r.counter(&invoice("a-1", "i-2")).unwrap().key_item();
    assert_ne!(other, logical);
    assert_ne!(locate_index(&other), locate_index(&logical));
    // A plain key of an invoice (no attributes) does not say its identity.
    let key = item(&[("PK", s("ACCOUNT#a-1")), ("SK", s("INV#i-1"))]);
    assert!(r.counter(&key).is_none());
}

#[test]
fn a_line_whose_invoice_id_breaks_its_format_is_bad_input_naming_the_format() {
    let r = rules(INVOICES);
    let bad = line("i 1", 1, 5);
    let e = checked_contributions(&r, &bad).unwrap_err();
    let why = e.to_string();
    assert!(why.contains("not a `id`"), "{why}");
    let reason = why.split("invalid value:").nth(1).expect("a reason");
    assert!(!reason.contains("i 1"), "the value is never logged: {why}");
    // Too long: the byte limit, by name.
    let long = "x".repeat(65);
    let why = checked_contributions(&r, &line(&long, 1, 5))
        .unwrap_err()
        .to_string();
    assert!(why.contains("not a `id` (longer than 64 bytes"), "{why}");
}

#[test]
fn a_count_into_a_unique_entity_must_bind_its_identity() {
    let text = INVOICES.replace(
        "with: { invoiceId: invoiceId }",
        "with: { invoice: invoiceId }",
    );
    let p = problems(&text);
    let at = position(&text, "- counter: invoice");
    assert_at(&p, (at.0, at.1 + 2), "line: count `invoice`: `invoiceId` of its identity (`unique: [invoiceId]`) is unbound: add `invoiceId:` under `with` (e.g. `invoiceId: invoiceId`)");
    let (l, c) = position(&text, "with: { invoice: invoiceId }");
    assert_at(&p, (l, c + "with: { invoice: ".len() as u64), "line: `invoice`: a count into `invoice` binds exactly its identity (`unique: [invoiceId]`), not its key (did you mean `invoiceId`?)");
    assert_eq!(p.len(), 2, "{p:#?}");
}

#[test]
fn a_count_that_cannot_bind_its_parents_key_is_told_about_unique() {
    let text = INVOICES.replace("    unique: [invoiceId]\n", "");
    assert_ne!(text, INVOICES);
    let p = problems(&text);
    let (l, c) = position(&text, "- counter: invoice");
    assert_at(&p, (l, c + 2), "line: count `invoice`: `${accountId}` of its key is unbound: add `accountId:` under `with`; or, if the source cannot know it and [invoiceId] identify one `invoice` across the table, declare `unique: [invoiceId]` on `invoice` and bind only that");
    assert_eq!(p.len(), 1, "{p:#?}");
}

#[test]
fn a_count_binding_the_key_of_a_unique_entity_is_refused() {
    let text = INVOICES.replace(
        "with: { invoiceId: invoiceId }",
        "with: { invoiceId: invoiceId, accountId: invoiceId }",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "accountId: invoiceId }");
    assert_at(
        &p,
        (l, c + "accountId: ".len() as u64),
        "`accountId`: a count into `invoice` binds exactly its identity",
    );
    assert_eq!(p.len(), 1, "{p:#?}");
}

#[test]
fn a_unique_name_that_is_not_a_writer_attribute_is_refused_with_a_suggestion() {
    let text = INVOICES.replace("    unique: [invoiceId]", "    unique: [invoiceID]");
    let p = problems(&text);
    let (l, c) = position(&text, "    unique: [invoiceID]");
    let c = c + "    unique: [".len() as u64;
    assert_at(&p, (l, c), "invoice: `unique:` names `invoiceID`, not an attribute of `invoice` (did you mean `invoiceId`?)");
    assert_eq!(
        p.len(),
        1,
        "no second error where it is counted into: {p:#?}"
    );
    // Bound by the key only: declare it.
    let text = INVOICES.replace("      invoiceId: id\n      status", "      status");
    assert_ne!(text, INVOICES);
    let p = problems(&text);
    let (l, c) = position(&text, "    unique: [invoiceId]");
    let c = c + "    unique: [".len() as u64;
    assert_at(&p, (l, c), "invoice: `unique:` attribute `invoiceId` is bound by the key only: declare `invoiceId` under `attributes:` too");
    // Optional: no identity.
    let text = INVOICES.replace(
        "      invoiceId: id\n      status",
        "      invoiceId: id?\n      status",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "    unique: [invoiceId]");
    let c = c + "    unique: [".len() as u64;
    assert_at(
        &p,
        (l, c),
        "`unique:` attribute `invoiceId` must be a required scalar",
    );
}

#[test]
fn unique_needs_a_counter_the_writer_creates() {
    let text = INVOICES.replace(
        "      created_by: writer\n",
        "      created_by: processor\n",
    );
    assert_ne!(text, INVOICES);
    let p = problems(&text);
    let at = position(&text, "    unique: [invoiceId]");
    let at = (at.0, at.1 + "    unique: ".len() as u64);
    assert_at(
        &p,
        at,
        "invoice: a counter found through `unique:` is the writer's item (`created_by: writer`)",
    );
}

#[test]
fn an_unknown_format_is_refused_with_a_suggestion() {
    let text = INVOICES.replace(
        "      invoiceId: id\n      lineNo",
        "      invoiceId: idd\n      lineNo",
    );
    assert_ne!(text, INVOICES);
    let p = problems(&text);
    let (l, c) = position(&text, "invoiceId: idd");
    assert_at(
        &p,
        (l, c + "invoiceId: ".len() as u64),
        "line.invoiceId: unknown type `idd` (did you mean `id`?)",
    );
    let text = INVOICES.replace("${accountId:id}", "${accountId:ids}");
    let p = problems(&text);
    assert_says(
        &p,
        "account: unknown format `ids` of `${accountId}` (did you mean `id`?)",
    );
}

/// A format's matching time is bounded (hostile13's #6: `^(a{1,3000}){1,20}b$`
/// compiled, and one 390 KB value took over 60 s to match, a derive timed
/// out on it for 15 minutes): a pattern whose program passes 64 KiB is
/// refused at load, and a format with a pattern and no `max_bytes` takes
/// values of at most 4,096 bytes, checked before the pattern.
#[test]
fn a_formats_pattern_and_the_values_it_reads_are_bounded() {
    let slow = INVOICES.replace("\"^[A-Za-z0-9_-]+$\"", "'^(a{1,3000}){1,20}b$'");
    assert_ne!(slow, INVOICES);
    let p = problems(&slow);
    let (l, c) = position(&slow, "'^(a{1,3000}){1,20}b$'");
    assert_at(&p, (l, c), "format `id`: pattern is too large");
    let unbounded = INVOICES.replace(
        "id: { pattern: \"^[A-Za-z0-9_-]+$\", max_bytes: 64 }",
        "id: { pattern: \"^[A-Za-z0-9_-]+$\" }",
    );
    assert_ne!(unbounded, INVOICES);
    let m = super::test_support::model(&unbounded);
    let id = m.formats.iter().find(|f| f.name == "id").expect("id");
    assert_eq!(id.reject(&"a".repeat(4096)), None);
    assert_eq!(
        id.reject(&"a".repeat(4097)).as_deref(),
        Some("not a `id` (longer than 4096 bytes: 4097 bytes)")
    );
}

#[test]
fn a_format_must_compile_and_not_shadow_a_type() {
    let text = INVOICES.replace("\"^[A-Za-z0-9_-]+$\"", "\"^[A-Z\"");
    let p = problems(&text);
    let (l, c) = position(&text, "\"^[A-Z\"");
    assert_at(&p, (l, c), "format `id`: pattern does not compile");
    let text = INVOICES.replace("  id: { pattern", "  ulid: { pattern");
    let p = problems(&text);
    assert_says(
        &p,
        "format `ulid`: a format's name must not be a built-in type",
    );
    let text = INVOICES.replace("max_bytes: 64", "max_bytes: 0");
    let p = problems(&text);
    assert_says(&p, "format `id`: max_bytes must be at least 1");
}

#[test]
fn a_key_binder_of_a_format_rejects_what_does_not_match() {
    let r = rules(INVOICES);
    let bad = item(&[
        ("PK", s("ACCOUNT#a b")),
        ("SK", s("#PROFILE")),
        ("type", s("account")),
        ("name", s("Ann")),
    ]);
    let why = r.projection(&bad).unwrap_err().to_string();
    assert!(
        why.contains("accountId") && why.contains("not a `id`"),
        "{why}"
    );
    let good = item(&[
        ("PK", s("ACCOUNT#a-b")),
        ("SK", s("#PROFILE")),
        ("type", s("account")),
        ("name", s("Ann")),
    ]);
    assert!(r.projection(&good).is_ok());
}
