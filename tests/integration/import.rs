//! `jobstream import onetable|electrodb`: the model file from a schema of
//! the real library (from npm), checked by `check-model`, and KEY EQUALITY:
//! items written by the library itself into the embedded engine are read
//! back as their entities, and the imported model builds the very keys the
//! library wrote (table keys parse back; GSI keys, sparse ones included,
//! are what the projections compute).

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::engine::{ensure_table, sdk_config, LocalEngine};
use shared::engine::rules::Rules;
use shared::file::rules::{FileRules, Parsed};
use shared::item::Item;

use crate::js::{js_dir, node};
use crate::support::jobstream_bin;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("jobstream-import-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// `jobstream import FROM SCHEMA --table T -o OUT`, then `check-model OUT`.
fn import(from: &str, schema: &Path, table: &str, out: &Path) -> String {
    let o = Command::new(jobstream_bin())
        .args(["import", from])
        .arg(schema)
        .args(["--table", table, "--out"])
        .arg(out)
        .output()
        .expect("jobstream runs");
    assert!(
        o.status.success(),
        "import: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty(), "with --out, nothing on stdout");
    let check = Command::new(jobstream_bin())
        .arg("check-model")
        .arg(out)
        .output()
        .expect("jobstream runs");
    assert!(
        check.status.success(),
        "check-model: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    std::fs::read_to_string(out).expect("the model file")
}

/// A fresh engine with the imported model's table `table` (its file at
/// `model_file`), into which the library's script writes its sample items
/// (off the runtime's thread: the engine serves them on it); the engine
/// and every item of the table.
async fn written_by_the_library(
    model_file: &Path,
    script: &'static str,
    table: &'static str,
) -> (LocalEngine, Vec<Item>) {
    let engine = crate::support::start_engine().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk_config(Some(&engine.endpoint()), 3).await);
    let model = shared::file::model(model_file).expect("loads");
    ensure_table(&client, &model.table, table)
        .await
        .expect("table");
    let endpoint = engine.endpoint();
    tokio::task::spawn_blocking(move || node(script, &["write", &endpoint, table]))
        .await
        .expect("the library wrote its items");
    let items = client.scan().table_name(table).send().await.expect("scan");
    (engine, items.items.unwrap_or_default())
}

/// Every item is its entity (named in `type_attr` by the library) and every
/// projected attribute is exactly what the library wrote (absent = absent).
/// Returns (entity, projected attributes the library left out) per item.
fn same_keys(model_file: &Path, items: &[Item], type_attr: &str) -> Vec<(String, Vec<String>)> {
    let loaded = shared::file::load(model_file).expect("the imported model loads");
    let m = &loaded.model;
    let rules = FileRules(m);
    let mut out = Vec::new();
    for item in items {
        let key = shared::item::display_key(&shared::item::key_of(item, &m.key_names()));
        let named = match item.get(type_attr) {
            Some(AttributeValue::S(s)) => s.clone(),
            other => panic!("{key}: {type_attr} is {other:?}"),
        };
        match m.parse(item) {
            Ok(Parsed::Writer(rec)) => assert_eq!(rec.entity.name, named, "{key}"),
            Ok(Parsed::Processor(e)) => panic!("{key}: read as processor entity {}", e.name),
            Err(e) => panic!("{key}: the imported model rejects the library's item: {e}"),
        }
        let mut absent = Vec::new();
        if let Some(p) = rules.projection(item).expect("projects") {
            for (attr, v) in &p.attrs {
                assert_eq!(
                    v.as_ref(),
                    item.get(*attr),
                    "{key}: {attr} as the imported model builds it vs as the library wrote it"
                );
                if v.is_none() {
                    absent.push(attr.to_string());
                }
            }
        }
        out.push((named, absent));
    }
    out
}

#[tokio::test]
async fn onetable_schema_imports_with_the_keys_onetable_writes() {
    let dir = tmp("onetable");
    let schema = js_dir().join("onetable-schema.json");
    let out = dir.join("billing.yaml");
    let yaml = import("onetable", &schema, "billing", &out);
    // What has no equivalent is a comment saying what to write; an array
    // is a `list`; a number is a `number` (fractions too), an `int` where a
    // key pads it with zeros (`pad()` takes an int).
    for todo in [
        "# TODO: default \"free\"",
        "\"lines?\": \"list\"",
        "\"amount\": \"number\"",
        "\"number\": \"int\"",
    ] {
        assert!(yaml.contains(todo), "missing `{todo}` in\n{yaml}");
    }
    assert!(yaml.contains("entity_type: \"_type\""), "{yaml}");

    let (engine, items) = written_by_the_library(&out, "onetable.mjs", "billing").await;
    assert_eq!(items.len(), 4, "two accounts, two invoices: {items:?}");
    let seen = same_keys(&out, &items, "_type");
    let invoices: Vec<_> = seen.iter().filter(|(e, _)| e == "Invoice").collect();
    assert_eq!(invoices.len(), 2);
    assert!(
        invoices
            .iter()
            .any(|(_, absent)| absent == &["gs2pk".to_string()]),
        "the invoice without a region is not in gs2 (sparse): {seen:?}"
    );
    // A padded number wider than its width is written whole, as OneTable does.
    assert!(
        items
            .iter()
            .any(|i| i.get("sk") == Some(&AttributeValue::S("invoice#1234567".into()))),
        "{items:?}"
    );
    engine.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn electrodb_entities_import_with_the_keys_electrodb_writes() {
    let dir = tmp("electrodb");
    let schema = dir.join("taskapp.json");
    std::fs::write(&schema, node("electrodb.mjs", &["schema"]).stdout).expect("writes");
    let out = dir.join("taskapp.yaml");
    let yaml = import("electrodb", &schema, "taskapp", &out);
    for todo in [
        "default `() => '2026-01-01'`",
        "is written only while `(attr) => attr.status === 'open'` holds",
        "ElectroDB calls it `owner` (field `ownerId` in the table)",
    ] {
        assert!(yaml.contains(todo), "missing `{todo}` in\n{yaml}");
    }
    // Casing: a lower-cased key value binds its own name, tied by a check.
    assert!(
        yaml.contains("lower(employeeId) == employeeId_lower"),
        "{yaml}"
    );

    let (engine, items) = written_by_the_library(&out, "electrodb.mjs", "taskapp").await;
    assert_eq!(
        items.len(),
        5,
        "two employees, an office, two tasks: {items:?}"
    );
    let seen = same_keys(&out, &items, "__edb_e__");
    for e in ["employee", "office", "task"] {
        assert!(seen.iter().any(|(n, _)| n == e), "{e} in {seen:?}");
    }
    // Upper-cased, lower-cased and as-is keys, a collection, padding:
    let has = |attr: &str, v: &str| {
        items
            .iter()
            .any(|i| i.get(attr) == Some(&AttributeValue::S(v.into())))
    };
    assert!(has("gsi2pk", "$TASKAPP#TEAM_DEVELOPMENT"), "{items:?}");
    assert!(has(
        "gsi1sk",
        "$workplaces#employee_1#team_development#title_lead dev#employeeid_e-001"
    ));
    assert!(has("gsi2sk", "P#005#T#Tk-9"), "{items:?}");
    assert!(
        has("gsi3pk", "$taskapp#manager_"),
        "an absent composite stops the key"
    );
    engine.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_schema_that_is_not_one_is_refused_with_what_where_and_why() {
    let dir = tmp("bad");
    let schema = dir.join("bad.json");
    std::fs::write(&schema, r#"{"format":"onetable:1.1.0","indexes":{"primary":{"hash":"pk","sort":"sk"}},"models":{"A":{"pk":{"type":"string","value":"a#${id}"},"sk":{"type":"string","value":"a"},"id":{"type":"rocket"}}}}"#).expect("writes");
    let o = Command::new(jobstream_bin())
        .args(["import", "onetable"])
        .arg(&schema)
        .output()
        .expect("jobstream runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("models.A.id: unknown type `rocket`"), "{err}");
    assert!(o.stdout.is_empty());
}
