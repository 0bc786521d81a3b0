//! The ElectroDB importer's unit tests (what it drafts from a schema).

use super::*;

/// The draft of the ElectroDB schema `json` (file `e.json`, model `e`,
/// table `tbl`).
fn imported(json: &str) -> Draft {
    import(json, "e.json", "e", "tbl").expect("imports")
}

/// The draft's model file, which loads.
fn loads(d: &Draft) -> String {
    let yaml = d.render("e.json");
    if let Err(p) = shared::file::compile(&yaml, "e") {
        panic!("{p:#?}\n{yaml}");
    }
    yaml
}

#[test]
fn templates_give_their_labels() {
    assert_eq!(
        template_shape("P#${points}#T#${taskId}"),
        (
            vec![
                ("P#".to_string(), "points".to_string()),
                ("#T#".to_string(), "taskId".to_string())
            ],
            String::new()
        )
    );
}

/// R06: lists and maps are typed (the format has `list` and `map`).
#[test]
fn lists_and_maps_are_typed() {
    let d = imported(
        r#"{"model":{"entity":"a","service":"s","version":"1"},"attributes":{"id":{"type":"string","required":true},"tags":{"type":"list","items":{"type":"string"}},"prefs":{"type":"map","properties":{}}},"indexes":{"p":{"pk":{"field":"pk","composite":["id"]},"sk":{"field":"sk","composite":[]}}}}"#,
    );
    let ty = |n: &str| {
        d.entities[0]
            .attributes
            .iter()
            .find(|a| a.name == n)
            .map(|a| a.ty.clone())
    };
    assert_eq!(ty("tags"), Some(DraftTy::Named("list")));
    assert_eq!(ty("prefs"), Some(DraftTy::Named("map")));
    loads(&d);
}

/// user9's finding 3, for ElectroDB: a map or list whose schema holds
/// numbers imports as it is, without a note (a fraction inside is read
/// as a `number`).
#[test]
fn a_map_or_list_holding_numbers_needs_no_note() {
    let d = imported(
        r#"{"model":{"entity":"a","service":"s","version":"1"},"attributes":{"id":{"type":"string","required":true},"at":{"type":"map","properties":{"lat":{"type":"number"}}},"pts":{"type":"list","items":{"type":"number"}},"tags":{"type":"list","items":{"type":"string"}}},"indexes":{"p":{"pk":{"field":"pk","composite":["id"]},"sk":{"field":"sk","composite":[]}}}}"#,
    );
    let note = |n: &str| {
        d.entities[0]
            .attributes
            .iter()
            .find(|a| a.name == n)
            .and_then(|a| a.note.clone())
            .unwrap_or_default()
    };
    assert!(!note("at").contains("fractional"), "{}", note("at"));
    assert!(!note("pts").contains("fractional"), "{}", note("pts"));
    assert!(!note("tags").contains("fractional"), "{}", note("tags"));
}

/// user9's finding 5: attributes whose names a model file cannot write
/// in an expression (`first-name`, the CEL reserved word `namespace`)
/// made an import that check-model refused. Their key parts bind a name
/// of their own (unchecked, with a TODO) and projections reading them are
/// left out with a TODO: the file always loads.
#[test]
fn names_cel_cannot_write_never_make_an_unparseable_file() {
    let d = imported(
        r#"{"model":{"entity":"acct","service":"aw","version":"2"},"attributes":{"namespace":{"type":"string","required":true},"first-name":{"type":"string","required":true},"orgId":{"type":"string","required":true}},"indexes":{"primary":{"pk":{"field":"pk","composite":["namespace"],"casing":"upper"},"sk":{"field":"sk","composite":["first-name","orgId"],"casing":"none"}},"byOrg":{"index":"gsi1","pk":{"field":"gsi1pk","composite":["orgId"],"template":"ORG#${orgId}"},"sk":{"field":"gsi1sk","composite":["namespace"],"template":"NS#${namespace}"}}}}"#,
    );
    let yaml = loads(&d);
    assert!(yaml.contains("`first-name`"), "{yaml}");
    assert!(yaml.contains("`namespace`"), "{yaml}");
}

/// user9's finding 6: a clustered secondary index was left out of the
/// table's `gsis` (a table created from the file lacked it); it is
/// declared, and only its keys are left to the hand.
#[test]
fn a_clustered_index_is_declared_its_keys_left_to_the_hand() {
    let d = imported(
        r#"{"model":{"entity":"a","service":"s","version":"1"},"attributes":{"id":{"type":"string","required":true},"p":{"type":"string","required":true}},"indexes":{"main":{"pk":{"field":"pk","composite":["id"]},"sk":{"field":"sk","composite":[]}},"clus":{"index":"gsi1","type":"clustered","pk":{"field":"gsi1pk","composite":["p"]},"sk":{"field":"gsi1sk","composite":["id"]}}}}"#,
    );
    assert!(
        d.gsis
            .iter()
            .any(|g| g.name == "gsi1" && g.pk == "gsi1pk" && g.sk == "gsi1sk"),
        "{:?}",
        d.gsis
    );
    assert!(
        d.entities[0].notes.iter().any(|n| n.contains("clustered")),
        "{:?}",
        d.entities[0].notes
    );
    loads(&d);
}

#[test]
fn input_that_is_not_an_entity_is_refused_with_where_and_why() {
    let e = import("[]", "e.json", "e", "tbl").unwrap_err();
    assert!(
        e.to_string().starts_with("e.json: (top): no entity schema"),
        "{e}"
    );
    let e = import(
        r#"{"model":{"entity":"a","service":"s"},"attributes":{},"indexes":{"p":{"pk":{"field":"pk","composite":["id"]},"sk":{"field":"sk","composite":[]}}}}"#,
        "e.json",
        "e",
        "tbl",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("`id`, which is not an attribute"),
        "{e}"
    );
}
