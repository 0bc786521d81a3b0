//! `check-model` on a `history:` block: the problem each mistake gets,
//! with its place, and one message per mistake.

use super::compile;
use super::test_support::problems;

/// The README's example: an order and its lines.
const ORDER: &str = include_str!("../../../models/examples/orders.yaml");

/// `check-model`'s problem for each mistake of a `history:` block: (what
/// of `ORDER` is replaced, by what, a problem `line:col: message` holds).
const MISTAKES: &[(&str, &str, &str)] = &[
    (
        "root: { entity: order,",
        "root: { entity: ordr,",
        "15:19: history: root: unknown entity `ordr` (did you mean `order`?)",
    ),
    (
        "root: { entity: order,",
        "root: { entity: order_entry,",
        "the root `order_entry` is a processor entity",
    ),
    (
        "SK: ORDER }",
        "SK: \"ORDER#${customer}#X\" }",
        "the root `order`'s key must bind its id in the partition key (`PK` = `ORDER#${orderId}`: an aggregate is the partition of one root), or, keyed under its owner,",
    ),
    // Keyed under its owner (the root's sort key binds names of its own):
    // the members' and the entries' sort keys start with the root's.
    (
        "SK: ORDER }",
        "SK: \"ORDER#${customer}\" }",
        "17:19: history: member `line`'s SK `LINE#${sku}` does not start with the root's `ORDER#${customer}` and a literal (e.g. `ORDER#${customer}#LINE#${sku}`)",
    ),
    (
        "SK: ORDER }",
        "SK: \"ORDER#${customer}\" }",
        "18:22: history: entries `order_entry`'s SK `HIST#${sequence}` must be the root's sort key, a literal prefix and `${sequence}` (e.g. `\"ORDER#${customer}#HIST#${sequence}\"`)",
    ),
    (
        "key: { PK: \"ORDER#${orderId}\", SK: \"LINE#${sku}\" }",
        "key: { PK: \"O#${orderId}\", SK: \"LINE#${sku}\" }",
        "17:19: history: member `line`'s PK `O#${orderId}` is not the root's partition `ORDER#${orderId}`",
    ),
    (
        "fields: [sku, qty]",
        "fields: [qty]",
        "member `line`: `sku` of its sort key `LINE#${sku}` must be among its `fields`",
    ),
    (
        "fields: [sku, qty]",
        "fields: [sku, qtty]",
        "17:40: history: member `line` fields: `qtty` is not an attribute of `line` (did you mean `qty`?)",
    ),
    (
        "fields: [sku, qty]",
        "fields: [sku, qty], order: [qyt]",
        "17:54: history: member `line` order: `qyt` is not an attribute of `line`",
    ),
    (
        "    line: { list",
        "    lines: { list",
        "history: members: unknown entity `lines` (did you mean `line`?)",
    ),
    (
        "    line: { list",
        "    order: { list",
        "`order` is the root: a member is another entity of its partition",
    ),
    (
        "{ list: lines,",
        "{ list: customer,",
        "list `customer` is already a name of the snapshot",
    ),
    (
        "${old.qty} -> ${new.qty} of ${sku}",
        "${skus}",
        "unknown name `skus` in `skus` (did you mean `sku`?)",
    ),
    (
        "Order placed by ${customer}",
        "Order placed by ${costumer}",
        "unknown name `costumer` in `costumer` (did you mean `customer`?)",
    ),
    (
        "entries: { entity: order_entry,",
        "entries: { entity: order_entri,",
        "18:22: history: entries: unknown entity `order_entri` (did you mean `order_entry`?)",
    ),
    (
        "entries: { entity: order_entry,",
        "entries: { entity: line,",
        "entries `line` must be `owner: processor`",
    ),
    (
        "SK: \"HIST#${sequence}\"",
        "SK: \"HIST#${seq}\"",
        "entries `order_entry`'s SK `HIST#${seq}` must be a literal prefix and `${sequence}`",
    ),
    (
        "PK: \"ORDER#${orderId}\", SK: \"HIST#",
        "PK: \"H#${orderId}\", SK: \"HIST#",
        "entries `order_entry`'s PK `H#${orderId}` is not the root's partition",
    ),
    (
        "digits: 6",
        "digits: 19",
        "18:43: history: digits 19: 1 to 18",
    ),
    (
        "digits: 6 }",
        "digits: 6 }\n  mirror: status",
        "history: `status` is the processor's (the mirror of the entry count): remove it from `order`'s attributes",
    ),
    (
        "root: { entity: order,",
        "processor: \"his tory\"\n  root: { entity: order,",
        "history: processor `his tory`: letters, digits and `-`",
    ),
    (
        "root: { entity: order,",
        "root: { entity: order, labels: { custmer: Customer },",
        "history: labels: `custmer` is not an attribute of `order` (did you mean `customer`?)",
    ),
    (
        "entries: {",
        "entrys: {",
        "unknown field `entrys`",
    ),
];

#[test]
fn check_model_names_each_mistake_of_a_history_block_with_its_place() {
    let mut misses = Vec::new();
    for &(from, to, want) in MISTAKES {
        assert!(ORDER.contains(from), "{from}");
        let found: Vec<String> = compile(&ORDER.replace(from, to), "t")
            .expect_err("invalid")
            .iter()
            .map(|p| format!("{}:{}: {}", p.line, p.col, p.message))
            .collect();
        if !found.iter().any(|l| l.contains(want)) {
            misses.push(format!("{want}\n  found {found:#?}"));
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// A member's sort key names a snapshot keeps: a declared attribute, or a
/// name only the key binds (import16 #1: ElectroDB's padded part, typed by
/// its format, read from the key); with `fields:`, each among them. A name
/// left out of them gets one problem saying so, never also "is not an
/// attribute" (a user trial's W06).
#[test]
fn a_members_key_name_is_declared_or_key_only_and_among_its_fields() {
    let undeclared = ORDER.replace("SK: \"LINE#${sku}\" }", "SK: \"LINE#${day}#${sku}\" }");
    let listed = undeclared.replace("fields: [sku, qty]", "fields: [day, sku, qty]");
    assert!(problems(&listed).is_empty(), "{:#?}", problems(&listed));
    let about_day: Vec<String> = problems(&undeclared)
        .into_iter()
        .filter(|p| p.message.contains("`day`"))
        .map(|p| format!("{}:{}: {}", p.line, p.col, p.message))
        .collect();
    assert_eq!(about_day.len(), 1, "{about_day:#?}");
    let m = &about_day[0];
    assert!(m.starts_with("17:"), "the member's line: {m}");
    for says in [
        "member `line`",
        "`day` of its sort key `LINE#${day}#${sku}` must be among its `fields`",
    ] {
        assert!(m.contains(says), "{m} should say {says}");
    }
    // Declared, the same.
    let declared = undeclared.replace(
        "sku: string, qty: int",
        "sku: string, day: string, qty: int",
    );
    let p: Vec<String> = problems(&declared).into_iter().map(|p| p.message).collect();
    assert!(
        p.iter()
            .any(|m| m
                .contains("`day` of its sort key `LINE#${day}#${sku}` must be among its `fields`")),
        "{p:#?}"
    );
    let listed = declared.replace("fields: [sku, qty]", "fields: [day, sku, qty]");
    assert!(problems(&listed).is_empty(), "{:#?}", problems(&listed));
}

/// user15's #5: what deleting the root deletes, as `check-model` prints
/// it beside OK: the members and the entries by default, the entries only
/// with `cascade: false`.
#[test]
fn the_notes_say_what_deleting_the_root_deletes() {
    let notes = compile(ORDER, "orders").expect("compiles").notes();
    assert_eq!(
        notes,
        ["history order: deleting an order (or moving it: a delete and a put) deletes its line items and its entries (order_entry items) (cascade: true)"]
    );
    let kept = ORDER.replace(
        "  entries: { entity: order_entry, digits: 6 }",
        "  entries: { entity: order_entry, digits: 6 }\n  cascade: false",
    );
    assert_ne!(kept, ORDER);
    let notes = compile(&kept, "orders").expect("compiles").notes();
    assert_eq!(
        notes,
        ["history order: deleting an order (or moving it: a delete and a put) deletes its entries (order_entry items); its line items stay (cascade: false)"]
    );
}
