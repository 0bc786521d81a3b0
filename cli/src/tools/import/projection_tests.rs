//! A secondary index's projection in both importers: OneTable's index
//! `project:` and ElectroDB's access-pattern `projection` become the
//! `gsis` entry's `project:` (imp11's finding 11).

use super::{electrodb, onetable, DraftProjection};

#[test]
fn onetable_projections_import_and_an_unknown_word_is_all_as_onetable_makes_it() {
    let schema = r#"{"format":"onetable:1.1.0","version":"0.0.1",
      "indexes":{"primary":{"hash":"pk","sort":"sk"},
                 "gs1":{"hash":"gs1pk","sort":"gs1sk","project":"keys"},
                 "gs2":{"hash":"gs2pk","sort":"gs2sk","project":["gs2pk","name"]},
                 "gs3":{"hash":"gs3pk","sort":"gs3sk","project":"everything"}},
      "models":{"User":{
        "pk":{"type":"string","value":"user#${id}"},
        "sk":{"type":"string","value":"user#"},
        "id":{"type":"string","required":true},
        "name":{"type":"string"}}}}"#;
    let d = onetable::import(schema, "s.json", "s", "tbl").expect("imports");
    let by = |n: &str| d.gsis.iter().find(|g| g.name == n).unwrap().project.clone();
    assert_eq!(by("gs1"), DraftProjection::Keys);
    assert_eq!(
        by("gs2"),
        DraftProjection::Attrs(vec!["gs2pk".into(), "name".into()])
    );
    assert_eq!(by("gs3"), DraftProjection::All);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("index `gs3`: project \"everything\"")),
        "{:?}",
        d.notes
    );
    let yaml = d.render("s.json");
    let m = shared::file::compile(&yaml, "s").unwrap_or_else(|p| panic!("{p:#?}\n{yaml}"));
    let g2 = m.table.gsis.iter().find(|g| g.name == "gs2").unwrap();
    assert_eq!(
        g2.projection,
        shared::models::table::GsiProjection::Include(vec!["name"])
    );
}

/// Two entities of one table that project one index otherwise: a table's
/// index has one projection, so the import says which.
#[test]
fn electrodb_projections_name_table_fields_and_must_agree_across_entities() {
    let entity = |name: &str, projection: &str| {
        format!(
            r#"{{"model":{{"entity":"{name}","service":"s","version":"1"}},"attributes":{{"id":{{"type":"string","required":true}},"title":{{"type":"string","field":"t"}}}},"indexes":{{"p":{{"pk":{{"field":"pk","composite":["id"]}},"sk":{{"field":"sk","composite":[]}}}},"byTitle":{{"index":"gsi1","pk":{{"field":"gsi1pk","composite":["title"]}},"sk":{{"field":"gsi1sk","composite":["id"]}},"projection":{projection}}}}}}}"#
        )
    };
    let one = format!("[{}]", entity("a", r#"["title"]"#));
    let d = electrodb::import(&one, "e.json", "e", "tbl").expect("imports");
    assert_eq!(
        d.gsis[0].project,
        DraftProjection::Attrs(vec!["t".into()]),
        "the table field of `title`"
    );
    let two = format!(
        "[{}, {}]",
        entity("a", r#""keys_only""#),
        entity("b", r#""keys_only""#)
    );
    let d = electrodb::import(&two, "e.json", "e", "tbl").expect("imports");
    assert_eq!(d.gsis[0].project, DraftProjection::Keys);
    let apart = format!(
        "[{}, {}]",
        entity("a", r#""keys_only""#),
        entity("b", r#""all""#)
    );
    let e = electrodb::import(&apart, "e.json", "e", "tbl").unwrap_err();
    assert!(
        e.to_string()
            .contains("index gsi1 projects keys by another entity's `projection`, all here"),
        "{e}"
    );
}
