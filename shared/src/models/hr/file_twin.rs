//! `models/hr.yaml` is this model as a file (SPEC §8): its pure rules agree
//! with [`super::rules::HrRules`] on fixtures and on mutations of them (each
//! attribute dropped, of the wrong type, NULL, a bad ULID, an invalid enum,
//! keys that do not match the attributes).

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::build::{app, dept, emp, job, org};
use super::rules::HrRules;
use crate::engine::rules::Rules;
use crate::file::rules::FileRules;
use crate::item::{n, s, Item};

/// The file twin of the HR rules, compiled once.
pub fn file_rules() -> FileRules {
    static MODEL: std::sync::OnceLock<&'static crate::file::FileModel> = std::sync::OnceLock::new();
    FileRules(MODEL.get_or_init(|| {
        let text = include_str!("../../../../models/hr.yaml");
        let m =
            crate::file::compile(text, "hr").unwrap_or_else(|p| panic!("models/hr.yaml: {p:?}"));
        Box::leak(Box::new(m))
    }))
}

const O: &str = "01HXAA0000000000000000000A";
const D: &str = "01HXAB0000000000000000000B";
const D2: &str = "01HXAC0000000000000000000C";
const E: &str = "01HXAD0000000000000000000D";
const J: &str = "01HXAF0000000000000000000F";
const T: &str = "01HXZZ1000000000000000000Z";
const A: &str = "01HXAH0000000000000000000H";

/// Valid items of every entity, and the processor's own.
pub fn fixtures() -> Vec<Item> {
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
pub fn mutations(item: &Item) -> Vec<(String, Item)> {
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

/// What the two rule sets say about one image, comparably.
fn outcome(r: &dyn Rules, item: &Item) -> String {
    let kind = |e: crate::error::InputError| format!("Err({})", e.kind());
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

#[test]
fn the_file_and_the_rust_rules_agree_on_fixtures_and_mutations() {
    let file = file_rules();
    let mut compared = 0;
    let mut errors = 0;
    for f in fixtures() {
        let mut cases = vec![("fixture".to_string(), f.clone())];
        cases.extend(mutations(&f));
        for (what, item) in cases {
            let want = outcome(&HrRules, &item);
            let got = outcome(&file, &item);
            assert_eq!(
                got,
                want,
                "{what} of {}",
                crate::models::hr::entities::key_display(&f)
            );
            compared += 1;
            errors += usize::from(want.contains("Err("));
        }
    }
    assert!(compared > 1000, "{compared} cases");
    assert!(
        errors > compared / 2,
        "mutations are mostly bad input: {errors}/{compared}"
    );
}

#[test]
fn key_names_and_table_are_the_rust_models() {
    let file = file_rules();
    assert_eq!(file.key_names(), HrRules.key_names());
    assert_eq!(file.0.table, super::table());
}
