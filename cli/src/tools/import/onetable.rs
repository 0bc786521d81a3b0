//! A OneTable schema (`format: onetable:1.1.0`) -> a [`Draft`].
//!
//! What maps one to one: `indexes` (the primary index -> the table's keys,
//! global indexes -> `gsis`), each model -> an entity named like it (OneTable
//! stamps the model's name in `params.typeField`, `_type` by default, which
//! becomes `entity_type`), the primary key fields' `value` templates -> key
//! templates, every other `value` template (GSI keys, computed attributes) ->
//! a projection the processor keeps exact, `type`/`required`/`enum`/
//! `generate: ulid` -> attribute types.
//!
//! OneTable's `${name:size:pad}` pads a value to `size` characters. In a key,
//! the padded text binds a name of its own and a check ties it to the
//! attribute (for numbers padded with `0`: `pad(n, 6)`, or the number whole
//! when it is longer, as OneTable writes it); in a projection it is the
//! same expression in `${...}`. A template whose names may be absent
//! yields no attribute in OneTable (a sparse index): the projection says so
//! with `name != null ? ... : null`.

use serde_json::{Map, Value as Json};

use super::{
    cel_str, fresh, holes, ident, pad_number, Draft, DraftAttr, DraftCheck, DraftEntity, DraftGsi,
    DraftProject, DraftTy, ImportError,
};

/// A piece of a OneTable value template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Lit(String),
    /// `${name}` or `${name:size[:pad]}`.
    Var {
        name: String,
        pad: Option<(usize, String)>,
    },
}

/// Splits `account#${id}` / `${n:6:0}` as OneTable's `runTemplate` reads it
/// (`/\${(.*?)}/g`, then `name:len:pad`).
fn pieces(template: &str) -> Vec<Piece> {
    let (holes, tail) = holes(template);
    let mut out = Vec::new();
    for (lit, inner) in holes {
        if !lit.is_empty() {
            out.push(Piece::Lit(lit));
        }
        let mut parts = inner.split(':');
        let name = parts.next().unwrap_or_default().to_string();
        let pad = parts
            .next()
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .map(|l| (l, parts.next().unwrap_or("0").to_string()));
        out.push(Piece::Var { name, pad });
    }
    if !tail.is_empty() {
        out.push(Piece::Lit(tail));
    }
    out
}

/// Whether a template hole is a field name (not an expression).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

struct Field<'a> {
    name: &'a str,
    def: &'a Map<String, Json>,
}

impl Field<'_> {
    fn str(&self, k: &str) -> Option<&str> {
        self.def.get(k).and_then(Json::as_str)
    }

    fn ty(&self) -> String {
        self.str("type").unwrap_or("string").to_lowercase()
    }

    fn required(&self) -> bool {
        self.def.get("required").and_then(Json::as_bool) == Some(true)
    }
}

/// Imports a OneTable schema's JSON text (`path` names it in errors).
pub fn import(text: &str, path: &str, name: &str, table: &str) -> Result<Draft, ImportError> {
    let err = |at: &str, why: String| ImportError::Schema {
        path: path.to_string(),
        at: at.to_string(),
        why,
    };
    let schema: Json = serde_json::from_str(text).map_err(|source| ImportError::Json {
        path: path.to_string(),
        source,
    })?;
    let format = schema.get("format").and_then(Json::as_str).unwrap_or("");
    if !format.starts_with("onetable:") {
        return Err(err(
            "format",
            format!("`{format}` is not a OneTable schema format (`onetable:1.1.0`)"),
        ));
    }
    let indexes = schema
        .get("indexes")
        .and_then(Json::as_object)
        .ok_or_else(|| err("indexes", "missing (an object of indexes)".into()))?;
    let index_keys = |name: &str, i: &Json| -> Result<(String, Option<String>), ImportError> {
        // A local index shares the table's hash key (OneTable leaves it out).
        let local = i.get("type").and_then(Json::as_str) == Some("local");
        let hash = match i.get("hash").and_then(Json::as_str) {
            Some(h) => h,
            None if local => "",
            None => return Err(err(&format!("indexes.{name}.hash"), "missing".into())),
        };
        Ok((
            hash.to_string(),
            i.get("sort").and_then(Json::as_str).map(str::to_string),
        ))
    };
    let primary = indexes
        .get("primary")
        .ok_or_else(|| err("indexes.primary", "missing".into()))?;
    let (pk, sk) = index_keys("primary", primary)?;
    let sk = sk.ok_or_else(|| {
        err(
            "indexes.primary.sort",
            "missing: a jobstream table has a sort key (single-table designs do)".into(),
        )
    })?;
    let mut notes = Vec::new();
    let mut gsis = Vec::new();
    for (n, i) in indexes {
        if n == "primary" {
            continue;
        }
        let (hash, sort) = index_keys(n, i)?;
        if i.get("type").and_then(Json::as_str) == Some("local") {
            notes.push(format!(
                "local index `{n}` (sort key {}) is not declared: model files declare global indexes only (queries on it are written by hand)",
                sort.unwrap_or_default()
            ));
            continue;
        }
        match sort {
            Some(sort) => gsis.push(DraftGsi {
                name: n.clone(),
                pk: hash,
                sk: sort,
            }),
            None => notes.push(format!(
                "index `{n}` has no sort key: model files declare GSIs with both keys; add it to the table by hand"
            )),
        }
    }
    let params = schema.get("params").and_then(Json::as_object);
    let param_str = |k: &str| params.and_then(|p| p.get(k)).and_then(Json::as_str);
    let param_bool = |k: &str| params.and_then(|p| p.get(k)).and_then(Json::as_bool);
    let type_field = param_str("typeField").unwrap_or("_type").to_string();
    let iso_dates = param_bool("isoDates").unwrap_or(false);
    let timestamps = params.and_then(|p| p.get("timestamps")).cloned();
    let created_field = param_str("createdField").unwrap_or("created").to_string();
    let updated_field = param_str("updatedField").unwrap_or("updated").to_string();
    if params.and_then(|p| p.get("separator")).is_some() {
        notes.push(
            "params.separator only changes the key of unique-value items (`_unique#...`), which this file does not describe".into(),
        );
    }
    let models = schema
        .get("models")
        .and_then(Json::as_object)
        .ok_or_else(|| err("models", "missing (an object of models)".into()))?;
    let mut entities = Vec::new();
    for (model_name, fields) in models {
        let at = format!("models.{model_name}");
        let fields = fields
            .as_object()
            .ok_or_else(|| err(&at, "not an object of fields".into()))?;
        let mut list: Vec<Field> = Vec::new();
        for (n, def) in fields {
            let def = def
                .as_object()
                .ok_or_else(|| err(&format!("{at}.{n}"), "not a field definition".into()))?;
            list.push(Field { name: n, def });
        }
        entities.push(entity(
            model_name,
            &list,
            &Keys {
                pk: &pk,
                sk: &sk,
                type_field: &type_field,
                iso_dates,
            },
            timestamps.as_ref(),
            (&created_field, &updated_field),
            |f, why| err(&format!("{at}.{f}"), why),
        )?);
    }
    // OneTable keeps one item per value of a `unique: true` field, keyed
    // `_unique#...` with no type field: an entity of its own, implying
    // nothing, so that such an item is read and left alone (not bad input).
    let unique = models.values().filter_map(Json::as_object).any(|fields| {
        fields
            .values()
            .any(|d| d.get("unique").and_then(Json::as_bool) == Some(true))
    });
    let mut writer_type_free = None;
    if unique {
        let taken: Vec<String> = entities.iter().map(|e| e.name.clone()).collect();
        entities.push(DraftEntity {
            name: fresh("onetable_unique", &taken),
            notes: vec![],
            key: vec![
                (pk.clone(), "_unique#${value}".to_string()),
                (sk.clone(), "_unique#".to_string()),
            ],
            attributes: vec![],
            checks: vec![],
            project: vec![],
        });
        writer_type_free = Some(format!(
            "OneTable's unique-value items (`onetable_unique`) carry no `{type_field}`: the type of\n\
             a writer's item is not checked (its key says its entity)."
        ));
    }
    Ok(Draft {
        name: name.to_string(),
        about: format!("imported from the OneTable schema {path}"),
        notes,
        table: table.to_string(),
        pk,
        sk,
        gsis,
        entity_type: type_field,
        writer_type_free,
        entities,
    })
}

struct Keys<'a> {
    pk: &'a str,
    sk: &'a str,
    type_field: &'a str,
    iso_dates: bool,
}

/// Whether a template of the model pads `name` with `0` (`${n:6:0}`): then
/// the number is an integer, written with `pad()`.
fn padded_with_zeros(fields: &[Field], name: &str) -> bool {
    fields.iter().filter_map(|f| f.str("value")).any(|t| {
        pieces(t).iter().any(
            |p| matches!(p, Piece::Var { name: n, pad: Some((_, z)) } if n == name && z == "0"),
        )
    })
}

fn attr_of(f: &Field, iso_dates: bool) -> Result<Option<DraftAttr>, String> {
    let mut note = None;
    let ty = match f.ty().as_str() {
        "string" => match f.str("generate") {
            Some("ulid") => DraftTy::Named("ulid"),
            _ => DraftTy::Named("string"),
        },
        // Any number DynamoDB holds, fractions too (an `int` where a key
        // pads it: see `entity`).
        "number" => DraftTy::Named("number"),
        "boolean" => DraftTy::Named("bool"),
        "date" if iso_dates => DraftTy::Named("iso-utc"),
        "date" => {
            note = Some("a date stored as epoch milliseconds (isoDates: false)".to_string());
            DraftTy::Named("int")
        }
        "set" => {
            note = Some("a string set; sets of numbers or binaries are not typed here".to_string());
            DraftTy::Named("set")
        }
        "array" => DraftTy::Named("list"),
        "object" => DraftTy::Named("map"),
        "binary" | "buffer" | "arraybuffer" => return Ok(None),
        other => return Err(format!("unknown type `{other}`")),
    };
    let ty = match f.def.get("enum").and_then(Json::as_array) {
        Some(values) => DraftTy::Enum(
            values
                .iter()
                .map(|v| match v {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
        ),
        None => ty,
    };
    let mut notes: Vec<String> = note.into_iter().collect();
    if let Some(d) = f.def.get("default") {
        notes.push(format!(
            "default {d}: OneTable fills it in on create; here the attribute is read as written (optional)"
        ));
    }
    if let Some(v) = f.def.get("validate") {
        notes.push(format!(
            "validate {v}: write it as a `check:` (a comparison, `size()`, `startsWith`/`endsWith`/`contains`; regular expressions are not available)"
        ));
    }
    if f.def.get("map").is_some() {
        notes.push(format!(
            "map {}: OneTable stores this field under another attribute; declare that attribute instead",
            f.def["map"]
        ));
    }
    if f.def.get("crypt").and_then(Json::as_bool) == Some(true) {
        notes.push("crypt: the stored value is encrypted: only its presence can be checked".into());
    }
    Ok(Some(DraftAttr {
        name: f.name.to_string(),
        ty,
        // A generated id is always present once written (OneTable sets it
        // on create).
        optional: !f.required() && f.str("generate").is_none(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }))
}

fn entity(
    model: &str,
    fields: &[Field],
    keys: &Keys,
    timestamps: Option<&Json>,
    (created, updated): (&str, &str),
    err: impl Fn(&str, String) -> ImportError,
) -> Result<DraftEntity, ImportError> {
    let mut notes = Vec::new();
    let field = |n: &str| fields.iter().find(|f| f.name == n);
    let mut attributes: Vec<DraftAttr> = Vec::new();
    let mut checks = Vec::new();
    let mut project = Vec::new();
    let mut key = Vec::new();
    // Names in use (attributes and binders): a padded key part binds a fresh one.
    let mut taken: Vec<String> = fields.iter().map(|f| f.name.to_string()).collect();
    for k in [keys.pk, keys.sk] {
        let Some(f) = field(k) else {
            return Err(err(
                k,
                format!("model {model} has no `{k}` field (the primary index's key)"),
            ));
        };
        let Some(value) = f.str("value") else {
            // The writer sets the key itself: bound whole.
            let b = fresh(&format!("{}_value", ident(k)), &taken);
            taken.push(b.clone());
            notes.push(format!(
                "`{k}` has no value template: its whole value is bound as `{b}`; name its parts by hand"
            ));
            key.push((k.to_string(), format!("${{{b}}}")));
            continue;
        };
        let mut t = String::new();
        for p in pieces(value) {
            match p {
                Piece::Lit(l) => t.push_str(&l),
                Piece::Var { name, pad: None } => {
                    t.push_str(&format!("${{{name}}}"));
                }
                Piece::Var {
                    name,
                    pad: Some((len, pad)),
                } => {
                    let b = fresh(&format!("{}_key", ident(&name)), &taken);
                    taken.push(b.clone());
                    t.push_str(&format!("${{{b}}}"));
                    let numeric = field(&name).is_some_and(|f| f.ty() == "number");
                    if numeric && pad == "0" {
                        checks.push(DraftCheck {
                            expr: format!("{} == {b}", pad_number(&name, len)),
                            attribute: name.clone(),
                            message: format!("the key holds `{name}` padded to {len} digits"),
                        });
                    } else {
                        notes.push(format!(
                            "`{k}` holds `{name}` padded to {len} with `{pad}` (bound as `{b}`): write a check tying `{b}` to `{name}`"
                        ));
                    }
                }
            }
        }
        key.push((k.to_string(), t));
    }
    // Computed attributes (GSI keys among them): projections.
    for f in fields {
        if f.name == keys.pk || f.name == keys.sk || f.name == keys.type_field {
            continue;
        }
        if let Some(value) = f.str("value") {
            // A template holding an expression (`${a != null ? 'x' + a :
            // null}`) is JavaScript the importer does not translate.
            if pieces(value)
                .iter()
                .any(|p| matches!(p, Piece::Var { name, .. } if !is_name(name)))
            {
                notes.push(format!(
                    "`{}`: its value template holds an expression ({value}): write it as a projection by hand",
                    f.name
                ));
                continue;
            }
            project.push(projection(f.name, value, fields));
            continue;
        }
        if f.def.get("value").is_some() {
            notes.push(format!(
                "`{}`: a value computed by a function (params.value): write it as a projection",
                f.name
            ));
            continue;
        }
        match attr_of(f, keys.iso_dates).map_err(|why| err(f.name, why))? {
            Some(mut a) => {
                if matches!(a.ty, DraftTy::Named("number")) && padded_with_zeros(fields, f.name) {
                    // `pad()` takes an int, and a padded number is one.
                    a.ty = DraftTy::Named("int");
                }
                if f.def.get("unique").and_then(Json::as_bool) == Some(true) {
                    let unique = format!(
                        "unique: OneTable enforces it with one more item per value (partition key `_unique#{model}...`, written in the writer's transaction); this file reads them as `onetable_unique` items, implying nothing, and checks nothing of them (a model file's `unique:` is another thing: a parent id found across the table)"
                    );
                    a.note = Some(match a.note.take() {
                        Some(n) => format!("{n}; {unique}"),
                        None => unique,
                    });
                }
                attributes.push(a)
            }
            None => notes.push(format!(
                "`{}` ({}) is not typed: binary values are not read by model files",
                f.name,
                f.ty()
            )),
        }
    }
    let stamps: Vec<&str> = match timestamps {
        Some(Json::Bool(true)) => vec![created, updated],
        Some(Json::String(s)) if s == "create" => vec![created],
        Some(Json::String(s)) if s == "update" => vec![updated],
        _ => vec![],
    };
    for s in stamps {
        if attributes.iter().any(|a| a.name == s) {
            continue;
        }
        attributes.push(DraftAttr {
            name: s.to_string(),
            ty: DraftTy::Named(if keys.iso_dates { "iso-utc" } else { "int" }),
            optional: true,
            note: Some(format!(
                "set by OneTable (params.timestamps) on every {}",
                if s == created { "create" } else { "write" }
            )),
        });
    }
    Ok(DraftEntity {
        name: model.to_string(),
        notes,
        key,
        attributes,
        checks,
        project,
    })
}

/// A `value` template as a projected attribute: a value template while
/// every name it reads is required, else one expression that is `null`
/// (no attribute: a sparse index) while any is absent.
fn projection(attr: &str, value: &str, fields: &[Field]) -> DraftProject {
    let field = |n: &str| fields.iter().find(|f| f.name == n);
    let ps = pieces(value);
    let mut notes = Vec::new();
    let mut optional: Vec<String> = Vec::new();
    for p in &ps {
        if let Piece::Var { name, .. } = p {
            match field(name) {
                Some(f) if f.required() => {}
                Some(_) => {
                    if !optional.contains(name) {
                        optional.push(name.clone());
                    }
                }
                None => notes.push(format!("`{name}` is not a field of this model")),
            }
        }
    }
    let numeric = |n: &str| field(n).is_some_and(|f| f.ty() == "number");
    let hole = |name: &str, pad: &Option<(usize, String)>, notes: &mut Vec<String>| match pad {
        None => name.to_string(),
        Some((len, p)) if p == "0" && numeric(name) => pad_number(name, *len),
        Some((len, p)) => {
            notes.push(format!(
                "`{name}` padded to {len} with `{p}`: only numbers padded with 0 are written as `pad()`"
            ));
            name.to_string()
        }
    };
    let value = if optional.is_empty() {
        let mut t = String::new();
        for p in &ps {
            match p {
                Piece::Lit(l) => t.push_str(l),
                Piece::Var { name, pad } => {
                    t.push_str(&format!("${{{}}}", hole(name, pad, &mut notes)))
                }
            }
        }
        t
    } else {
        let mut e = Vec::new();
        for p in &ps {
            match p {
                Piece::Lit(l) => e.push(cel_str(l)),
                Piece::Var { name, pad } => {
                    let h = hole(name, pad, &mut notes);
                    e.push(if pad.is_none() && numeric(name) {
                        format!("string({h})")
                    } else {
                        h
                    });
                }
            }
        }
        let cond: Vec<String> = optional.iter().map(|n| format!("{n} != null")).collect();
        format!("${{{} ? {} : null}}", cond.join(" && "), e.join(" + "))
    };
    DraftProject {
        attr: attr.to_string(),
        value,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_as_onetable_reads_them() {
        assert_eq!(
            pieces("order#${num:6:0}#${id}"),
            vec![
                Piece::Lit("order#".into()),
                Piece::Var {
                    name: "num".into(),
                    pad: Some((6, "0".into()))
                },
                Piece::Lit("#".into()),
                Piece::Var {
                    name: "id".into(),
                    pad: None
                },
            ]
        );
        assert_eq!(
            pieces("${n:4}"),
            vec![Piece::Var {
                name: "n".into(),
                pad: Some((4, "0".into()))
            }]
        );
    }

    #[test]
    fn a_schema_that_is_not_onetable_is_refused_with_where_and_why() {
        let e = import(r#"{"format":"x"}"#, "s.json", "s", "tbl").unwrap_err();
        assert!(e.to_string().starts_with("s.json: format: "), "{e}");
        let e = import("{", "s.json", "s", "tbl").unwrap_err();
        assert!(e.to_string().starts_with("s.json: not JSON"), "{e}");
        let e = import(
            r#"{"format":"onetable:1.1.0","indexes":{"primary":{"hash":"pk"}},"models":{}}"#,
            "s.json",
            "s",
            "tbl",
        )
        .unwrap_err();
        assert!(e.to_string().contains("indexes.primary.sort"), "{e}");
    }

    /// R06: a schema a README-only user wrote: a local index, a `validate`,
    /// an array and an object, a template holding an expression, a
    /// generated id. What the importer writes loads, or says what to do in
    /// TODOs; never a file it cannot parse.
    #[test]
    fn what_a_user_writes_imports_into_a_file_that_loads() {
        let schema = r#"{"format":"onetable:1.1.0","version":"0.0.1",
          "indexes":{"primary":{"hash":"pk","sort":"sk"},
                     "gs1":{"hash":"gs1pk","sort":"gs1sk"},
                     "ls1":{"sort":"created","type":"local"}},
          "models":{"User":{
            "pk":{"type":"string","value":"user#${id}"},
            "sk":{"type":"string","value":"user#"},
            "id":{"type":"string","generate":"ulid"},
            "email":{"type":"string","required":true,"validate":"/^[^@]+@[^@]+$/"},
            "roles":{"type":"array"},
            "prefs":{"type":"object"},
            "team":{"type":"string"},
            "gs1pk":{"type":"string","value":"${team != null ? 'team#' + team : null}"},
            "gs1sk":{"type":"string","value":"user#${id}"}}}}"#;
        let d = import(schema, "s.json", "s", "tbl").expect("imports");
        assert!(
            d.notes.iter().any(|n| n.contains("local index `ls1`")),
            "{:?}",
            d.notes
        );
        let u = &d.entities[0];
        let attr = |n: &str| u.attributes.iter().find(|a| a.name == n).unwrap();
        assert!(!attr("id").optional, "a generated id is always present");
        assert_eq!(attr("roles").ty, DraftTy::Named("list"));
        assert_eq!(attr("prefs").ty, DraftTy::Named("map"));
        let validate = attr("email").note.clone().unwrap_or_default();
        assert!(
            validate.contains("validate") && !validate.contains("matches"),
            "{validate}"
        );
        assert!(
            u.notes
                .iter()
                .any(|n| n.contains("`gs1pk`") && n.contains("expression")),
            "{:?}",
            u.notes
        );
        assert!(u.project.iter().all(|p| p.attr != "gs1pk"));
        let yaml = d.render("s.json");
        if let Err(p) = shared::file::compile(&yaml, "s") {
            panic!("{p:#?}\n{yaml}");
        }
    }

    /// E8: `unique: true` was dropped without a word. OneTable keeps one
    /// `_unique#...` item per value (written in the same transaction); the
    /// draft says so on the attribute, and what it means for the file.
    #[test]
    fn a_unique_field_is_noted_never_dropped_silently() {
        let schema = r#"{"format":"onetable:1.1.0",
          "indexes":{"primary":{"hash":"pk","sort":"sk"}},
          "models":{"User":{
            "pk":{"type":"string","value":"user#${id}"},
            "sk":{"type":"string","value":"user#"},
            "id":{"type":"string","required":true},
            "email":{"type":"string","required":true,"unique":true}}}}"#;
        let d = import(schema, "s.json", "s", "tbl").expect("imports");
        let u = &d.entities[0];
        let email = u.attributes.iter().find(|a| a.name == "email").unwrap();
        let note = email.note.clone().unwrap_or_default();
        assert!(
            note.contains("unique") && note.contains("_unique#User"),
            "{note}"
        );
        let yaml = d.render("s.json");
        assert!(yaml.contains("_unique#User"), "{yaml}");
        let model: &'static shared::file::FileModel = match shared::file::compile(&yaml, "s") {
            Ok(m) => Box::leak(Box::new(m)),
            Err(p) => panic!("{p:#?}\n{yaml}"),
        };
        // User finding U04 (after E8): OneTable's own unique item, as it
        // writes it (no type field), is an item of the file, implying
        // nothing: never bad input (`UnknownEntity`), never an alarm.
        let (e, _) = model
            .classify("_unique#User:email:a@b.co", "_unique#")
            .unwrap_or_else(|| panic!("no entity takes OneTable's unique item\n{yaml}"));
        let unique: shared::item::Item = [
            (
                "pk".to_string(),
                shared::item::s("_unique#User:email:a@b.co"),
            ),
            ("sk".to_string(), shared::item::s("_unique#")),
        ]
        .into();
        let rules = shared::file::rules::FileRules(model);
        use shared::engine::rules::Rules as _;
        assert_eq!(
            rules.projection(&unique).map_err(|e| e.to_string()),
            Ok(None),
            "{}",
            e.name
        );
    }

    #[test]
    fn a_javascript_schema_is_refused_saying_how_to_export_it() {
        let e = import(
            "export default { format: 'onetable:1.1.0' }",
            "s.mjs",
            "s",
            "tbl",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("JSON.stringify"), "{e}");
    }
}
