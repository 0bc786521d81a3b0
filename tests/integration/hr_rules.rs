//! The HR rules (`models/hr.yaml`, `--model hr`) on fixtures of every
//! entity and every mutation of them (each attribute dropped, NULL, of the
//! wrong type, a bad ULID, an invalid enum, keys that no longer match the
//! attributes): what each aspect says, pinned. Until the Rust HR model was
//! deleted, a test compared the file with it on exactly these cases (1,000+
//! of them, all equal); the digest below is of those outcomes, so any change
//! of what the file implies or rejects shows here.

use aws_sdk_dynamodb::types::AttributeValue;
use sha2::Digest as _;
use shared::engine::rules::Rules;
use shared::item::{n, s, Item};

use crate::seed_items::hr::{app, dept, emp, job, org};

const O: &str = "01HXAA0000000000000000000A";
const D: &str = "01HXAB0000000000000000000B";
const D2: &str = "01HXAC0000000000000000000C";
const E: &str = "01HXAD0000000000000000000D";
const J: &str = "01HXAF0000000000000000000F";
const T: &str = "01HXZZ1000000000000000000Z";
const A: &str = "01HXAH0000000000000000000H";

/// Valid items of every entity, and the processor's own.
fn fixtures() -> Vec<Item> {
    let mut inactive = emp(O, E, "Bob@Acme.CO", "Bob", D2);
    inactive.insert("status".into(), s("inactive"));
    inactive.insert("terminatedAt".into(), s("2026-02-01"));
    let mut manager = emp(O, D2, "ÉMILE@Café.FR", "Émile", D);
    manager.insert("role".into(), s("manager"));
    let mut closed = job(O, J, T, D, "Engineer", "closed");
    closed.insert("closedAt".into(), s("2026-03-01"));
    let mut items = vec![
        org(O, "Acme", "pro"),
        org(&O.to_lowercase(), "Acme", "free"),
        dept(O, D, "Eng", E),
        emp(O, E, "Alice.Ünal@Acme.CO", "Alice", D),
        inactive,
        manager,
        job(O, J, T, D, "Engineer", "open"),
        job(O, J, T, D, "Engineer", "draft"),
        closed,
        app(J, A, T, E, "applied"),
        app(J, A, T, E, "accepted"),
    ];
    // Processor-written attributes a writer sends anyway.
    let mut e = emp(O, E, "x@y.z", "X", D);
    e.insert("GSI1PK".into(), s("junk"));
    items.push(e);
    let mut d = dept(O, D, "Eng", E);
    d.insert("headcount".into(), n(99));
    items.push(d);
    // The processor's items, bare keys, and keys of no entity.
    for (pk, sk) in [
        (format!("DEPT#{D}"), format!("EMP#{E}")),
        (format!("JOB#{J}"), "#META".to_string()),
        (format!("ORG#{O}"), format!("DEPT#{D}")),
        (format!("ORG#{O}"), "X#1".to_string()),
        ("USER#1".to_string(), "EMP#1".to_string()),
        (format!("JOB#{J}"), "#METADATA".to_string()),
        (format!("ORG#{O}"), "DEPT#eng".to_string()),
    ] {
        items.push([("PK".to_string(), s(pk)), ("SK".to_string(), s(sk))].into());
    }
    items
}

/// Every mutation of one item: each attribute dropped, NULL, of the wrong
/// type, a bad ULID, an invalid enum value, another valid id (keys that no
/// longer match).
fn mutations(item: &Item) -> Vec<(String, Item)> {
    let mut out = Vec::new();
    for (name, value) in item {
        let mut dropped = item.clone();
        dropped.remove(name);
        out.push((format!("{name} dropped"), dropped));
        let mut null = item.clone();
        null.insert(name.clone(), AttributeValue::Null(true));
        out.push((format!("{name} NULL"), null));
        let mut wrong = item.clone();
        wrong.insert(
            name.clone(),
            match value {
                AttributeValue::S(_) => n(5),
                _ => s("5"),
            },
        );
        out.push((format!("{name} wrong type"), wrong));
        for (what, v) in [
            ("bad ULID", "01HXAD000000000000000000UU"),
            ("short", "01HXAD"),
            ("other id", "01HXAE0000000000000000000E"),
            ("invalid enum", "on-leave"),
            ("empty", ""),
            ("blank", "  "),
            ("upper-case", "ACTIVE"),
        ] {
            let mut m = item.clone();
            m.insert(name.clone(), s(v));
            out.push((format!("{name} {what}"), m));
        }
    }
    out
}

/// What the rules say about one image, comparably (the outcome the file
/// and the Rust rules were compared on).
fn outcome(r: &dyn Rules, item: &Item) -> String {
    let kind = |e: shared::error::InputError| format!("Err({})", e.kind());
    format!(
        "projection: {}\nderived: {}\ncontributions: {}\ncounter: {:?}\nignores: {}",
        r.projection(item)
            .map(|p| format!("{p:?}"))
            .unwrap_or_else(kind),
        r.derived(item)
            .map(|d| {
                let mut d: Vec<Vec<(String, AttributeValue)>> = d
                    .into_iter()
                    .map(|i| {
                        let mut v: Vec<_> = i.into_iter().collect();
                        v.sort_by(|a, b| a.0.cmp(&b.0));
                        v
                    })
                    .collect();
                d.sort_by_key(|v| format!("{v:?}"));
                format!("{d:?}")
            })
            .unwrap_or_else(kind),
        r.contributions(item)
            .map(|c| format!("{c:?}"))
            .unwrap_or_else(kind),
        r.counter(item),
        r.ignores(item),
    )
}

fn sorted(item: &Item) -> Vec<(&String, &AttributeValue)> {
    let mut v: Vec<_> = item.iter().collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    v
}

#[test]
fn the_hr_rules_on_fixtures_and_mutations_are_the_rust_models() {
    let rules = shared::models::find("hr").expect("hr loads").rules;
    let mut lines = Vec::new();
    let mut errors = 0;
    for f in fixtures() {
        let mut cases = vec![("fixture".to_string(), f.clone())];
        cases.extend(mutations(&f));
        for (what, item) in cases {
            let got = outcome(rules.as_ref(), &item);
            errors += usize::from(got.contains("Err("));
            lines.push(format!("{:?} {what}:\n{got}", sorted(&item)));
        }
    }
    // Order-free: an item's attributes come in no fixed order.
    lines.sort();
    let digest = sha2::Sha256::digest(lines.join("\n").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(lines.len(), CASES, "cases");
    assert_eq!(errors, ERRORS, "mutations are mostly bad input");
    assert_eq!(hex, DIGEST, "what the rules say changed");
}

/// The cases, those that are bad input, and the digest of every outcome:
/// the Rust HR rules' (the file's were equal to them case by case).
const CASES: usize = 1410;
const ERRORS: usize = 1179;
const DIGEST: &str = "b9b062c56dd95347830269683c035439128334c11ef497c07278e734bc24121e";
