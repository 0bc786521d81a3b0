//! A literal compared with an enum attribute that is none of its values
//! (user13 #3): `status == 'complete'` with `status: [open, paid,
//! shipped]` is true of no item, a typo that makes a rule never (or
//! always) fire; refused at load where the literal is, naming the enum's
//! values and the closest one. And an attribute of an unknown type reads
//! as any value: its one problem is the type's.

use super::test_support::{assert_at, broken, problems};

/// An order (enums of strings, ints and bools) with a projection's
/// condition, a `compute:` over its lines (a row's enum) and a history
/// whose description reads the images (`old.status`, `new.status`).
const ORDER: &str = r#"jobstream: 1
name: shop
table: { name: shop, pk: PK, sk: SK, gsis: [{ name: GSI1, pk: GSI1PK, sk: GSI1SK }] }
entities:
  order:
    key: { PK: "ORDER#${orderId}", SK: ORDER }
    attributes: { orderId: string, customer: string, status: [open, paid, shipped], tier: [1, 2, 3], gift: [false], total: int }
    project:
      when: "status == 'paid' && tier != 2"
      attributes: { GSI1PK: "'PAID'", GSI1SK: orderId }
    compute:
      over: { entity: line, as: lines }
      values:
        shippedQty: "sum(lines.filter(l, l.state == 'sent').map(l, l.qty))"
      queue: totals
  line:
    key: { PK: "ORDER#${orderId}", SK: "LINE#${sku}" }
    attributes: { orderId: string, sku: string, qty: int, state: [held, sent] }
  order_entry:
    owner: processor
    key: { PK: "ORDER#${orderId}", SK: "HIST#${sequence}" }
history:
  root:
    entity: order
    created: "Order placed by ${customer}"
    updated:
      - { when: "old.status != 'shipped' && new.status == 'shipped'", say: Shipped }
      - { when: "true", say: Updated }
  entries: { entity: order_entry, digits: 6 }
"#;

/// Each (what of `ORDER` is replaced, by what, where in it the problem
/// is (empty: on its line), what the problem says).
const OUTSIDE: &[(&str, &str, &str, &str)] = &[
    (
        "status == 'paid'",
        "status == 'payed'",
        "'payed'",
        "'payed' is not a value of `status`, one of 'open', 'paid', 'shipped' (its enum), so `==` is true of no item (did you mean 'paid'?)",
    ),
    // Case counts: 'Paid' is not 'paid'.
    (
        "status == 'paid'",
        "status == 'Paid'",
        "'Paid'",
        "(did you mean 'paid'?)",
    ),
    // Either side.
    (
        "status == 'paid'",
        "'pad' == status",
        "'pad'",
        "'pad' is not a value of `status`",
    ),
    (
        "status == 'paid'",
        "status != 'shiped'",
        "'shiped'",
        "so `!=` is true of every item (did you mean 'shipped'?)",
    ),
    // Each element of a list `in` looks in.
    (
        "status == 'paid'",
        "status in ['open', 'payd']",
        "'payd'",
        "'payd' is not a value of `status`, one of 'open', 'paid', 'shipped' (its enum), so that element of the list matches no item (did you mean 'paid'?)",
    ),
    // Inside a `? :`.
    (
        "status == 'paid' && tier != 2",
        "(status == 'opne' ? 1 : 2) == 1",
        "'opne'",
        "(did you mean 'open'?)",
    ),
    // Enums of ints and bools.
    (
        "tier != 2",
        "tier != 4",
        "4",
        "4 is not a value of `tier`, one of 1, 2, 3 (its enum)",
    ),
    (
        "tier != 2",
        "gift == true",
        "true",
        "true is not a value of `gift`, one of false (its enum)",
    ),
    // A row of a `compute:` (a computed value's problems are at its
    // start: `at` empty).
    (
        "l.state == 'sent'",
        "l.state == 'shipped'",
        "",
        "'shipped' is not a value of `l.state`, one of 'held', 'sent' (its enum)",
    ),
    // A history's images.
    (
        "new.status == 'shipped'",
        "new.status == 'shiped'",
        "'shiped'",
        "'shiped' is not a value of `new.status`",
    ),
    (
        "old.status != 'shipped'",
        "old.status != 'Shipped'",
        "'Shipped'",
        "'Shipped' is not a value of `old.status`",
    ),
];

#[test]
fn a_literal_outside_an_enum_it_is_compared_with_is_refused_where_it_is() {
    assert_eq!(problems(ORDER), vec![]);
    for (from, to, at, says) in OUTSIDE {
        let (text, pos) = broken(ORDER, from, to, if at.is_empty() { to } else { at });
        let p = problems(&text);
        assert_eq!(p.len(), 1, "{to}: {p:#?}");
        if at.is_empty() {
            assert_eq!(p[0].line, pos.0, "{to}: {p:#?}");
            assert!(p[0].message.contains(says), "{to}: {p:#?}");
        } else {
            assert_at(&p, pos, says);
        }
    }
}

/// What is no typo passes: a value of the enum, a macro's variable named
/// like the attribute, a map's field other than the images', a list `in`
/// does not write out.
#[test]
fn comparisons_an_enum_can_satisfy_load() {
    for (from, to) in [
        ("status == 'paid'", "status in ['open', 'paid']"),
        ("status == 'paid'", "['x'].exists(status, status == 'x')"),
        ("status == 'paid'", "'paid' == status"),
        ("status == 'paid'", "status in [customer, 'paid']"),
        ("tier != 2", "tier in [1, 3]"),
        ("tier != 2", "gift == false"),
    ] {
        let text = ORDER.replace(from, to);
        assert_eq!(problems(&text), vec![], "{to}");
    }
}

/// An attribute of an unknown type (`integer`): one problem, the type's
/// (with its suggestion); where it is read, it is no string (user13 #3's
/// b2: three more errors read `pricePaid` as one).
#[test]
fn an_attribute_of_an_unknown_type_has_one_problem() {
    let (text, pos) = broken(ORDER, "total: int }", "total: integer }", "integer");
    let text = text.replace(
        "tier != 2",
        "total >= 0 && (gift == false ? 0 : total) == 0",
    );
    let p = problems(&text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, pos, "unknown type `integer` (did you mean `int`?)");
}
