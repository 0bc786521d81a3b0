//! An item whose key fits no entity's types: its bad input is said as the
//! entity its `type` names, when that entity's key templates match the
//! key's shape, with the key part that does not fit (user14's finding: an
//! activity whose key's `at` is `yesterday` was reported as a `deal`, its
//! `type` "expected `deal`", the real reason last).

use super::model::binder_fits;
use super::test_support::{item, model, rules};
use crate::engine::rules::Rules;
use crate::item::{s, Item};

/// A deal and its activities under one account, as user14's `crm.yaml`
/// declares them: `DEAL#${dealId}` and `DEAL#${dealId}#ACT#${at}#...`
/// are told apart by `dealId`'s format, which has no `#`.
const CRM: &str = r#"jobstream: 1
name: crm
table: { name: crm, pk: PK, sk: SK }
formats:
  id: { pattern: "^[A-Za-z0-9_-]+$", max_bytes: 64 }
entities:
  deal:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}" }
    attributes: { accountId: id, dealId: id, stage: [lead, won] }
  activity:
    key: { PK: "ACCT#${accountId}", SK: "DEAL#${dealId}#ACT#${at}#${activityId}" }
    attributes: { accountId: id, dealId: id, activityId: id, at: iso-utc, kind: [call, email] }
"#;

fn activity(at: &str, ty: &str) -> Item {
    item(&[
        ("PK", s("ACCT#bacct")),
        ("SK", s(format!("DEAL#bd1#ACT#{at}#b9"))),
        ("type", s(ty)),
        ("accountId", s("bacct")),
        ("dealId", s("bd1")),
        ("activityId", s("b9")),
        ("at", s(at)),
        ("kind", s("call")),
    ])
}

#[test]
fn an_activity_whose_key_part_is_not_of_its_type_is_said_as_an_activity() {
    let r = rules(CRM);
    let err = r
        .aspects(&activity("yesterday", "activity"))
        .derived
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "activity PK=ACCT#bacct, SK=DEAL#bd1#ACT#yesterday#b9: key part `at` is `yesterday`: \
         not an ISO-8601 UTC time (YYYY-MM-DDTHH:MM:SS[.f]Z)"
    );
    assert_eq!(err.kind(), "InvalidValue");
    // Valid, it is an activity.
    let ok = activity("2026-03-01T00:00:00Z", "activity");
    assert!(r.aspects(&ok).derived.is_ok());
}

/// Classification does not let a format that forbids `#` hold a key part
/// with one: `DEAL#${dealId}` matches the activity's key only textually,
/// `bd1#ACT#...` is no `id`.
#[test]
fn a_format_without_the_separator_does_not_fit_a_part_holding_it() {
    let m = model(CRM);
    let deal = m.entities.iter().find(|e| e.name == "deal").unwrap();
    let binder = deal.key[1].template.binders().next().unwrap();
    assert!(!binder_fits(
        deal,
        binder,
        "bd1#ACT#yesterday#b9",
        &m.formats
    ));
    assert!(binder_fits(deal, binder, "bd1", &m.formats));
    let (e, _) = m
        .classify("ACCT#bacct", "DEAL#bd1#ACT#2026-03-01T00:00:00Z#b9")
        .unwrap();
    assert_eq!(e.name, "activity");
    let (e, _) = m.classify("ACCT#bacct", "DEAL#bd1").unwrap();
    assert_eq!(e.name, "deal");
}

/// The same key stamped `deal`: a deal's error (its `type` names the
/// entity the key was read as), never the activity's.
#[test]
fn a_key_of_no_entity_stamped_as_the_first_match_stays_its_error() {
    let r = rules(CRM);
    let err = r
        .aspects(&activity("yesterday", "deal"))
        .derived
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("deal PK=ACCT#bacct, SK=DEAL#bd1#ACT#yesterday#b9: "),
        "{err}"
    );
}

/// An item whose `type` names an entity its key does not fit says which
/// key value does not fit that entity (user6's U06: a line whose `lineNo`
/// is `abc` was reported as an `order` whose type does not match, with no
/// word of `lineNo`).
#[test]
fn a_key_that_does_not_fit_its_types_entity_says_which_value() {
    let r = rules(
        "jobstream: 1\ntable: { name: shop, pk: PK, sk: SK }\nentities:\n  order:\n    key: { PK: \"CUST#${buyerId}\", SK: \"ORDER#${orderId}\" }\n    attributes: { buyerId: string, orderId: ulid }\n  line:\n    key: { PK: \"CUST#${buyerId}\", SK: \"ORDER#${orderId}#LINE#${lineNo}\" }\n    attributes: { buyerId: string, orderId: ulid, lineNo: int }\n",
    );
    let order = "01JD0000000000000000000000";
    let line = item(&[
        ("PK", s("CUST#b2")),
        ("SK", s(format!("ORDER#{order}#LINE#abc"))),
        ("type", s("line")),
        ("buyerId", s("b2")),
        ("orderId", s(order)),
        ("lineNo", s("abc")),
    ]);
    let why = r.aspects(&line).derived.unwrap_err().to_string();
    assert_eq!(
        why,
        format!("line PK=CUST#b2, SK=ORDER#{order}#LINE#abc: key part `lineNo` is `abc`: not an integer")
    );
}
