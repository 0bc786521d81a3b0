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
    cel_name, enum_of, fresh, holes, ident, number_in_key, pad_number, unnamable, Draft, DraftAttr,
    DraftCheck, DraftEntity, DraftGsi, DraftProjection, DraftTy, ImportError,
};

#[path = "onetable_templates.rs"]
mod templates;
use templates::{is_name, padded_with_zeros, pieces, projection, Piece};

struct Field<'a> {
    /// The attribute OneTable stores it as (its `map:` name, else its own).
    name: &'a str,
    /// The schema's name for it (templates read this one).
    js: &'a str,
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

    /// `ttl: true`: OneTable's TTL field (DynamoDB's, for the table).
    fn ttl(&self) -> bool {
        self.def.get("ttl").and_then(Json::as_bool) == Some(true)
    }
}

/// Imports a OneTable schema's JSON text (`path` names it in errors).
pub fn import(text: &str, path: &str, name: &str, table: &str) -> Result<Draft, ImportError> {
    let err = |at: &str, why: String| ImportError::Schema {
        path: path.to_string(),
        at: at.to_string(),
        why,
    };
    let schema: Json = super::parse_json(text, path, "a JavaScript schema module: export it as JSON first, e.g. `node --input-type=module -e \"import('./schema.mjs').then(m => console.log(JSON.stringify(m.default ?? m.Schema, (k, v) => (typeof v === 'function' ? v.name : v instanceof RegExp ? v.source : v), 2)))\" > schema.json`")?;
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
        // As OneTable's createTable() creates it: a word other than `all`
        // or `keys` is ALL there too.
        let project = DraftProjection::of(i.get("project"), "keys").unwrap_or_else(|w| {
            notes.push(format!("index `{n}`: project {w} is neither `all`, `keys` nor a list: OneTable's createTable() makes it ALL, and so does this file"));
            DraftProjection::All
        });
        gsis.push(DraftGsi {
            name: n.clone(),
            pk: hash,
            sk: sort,
            project,
        });
    }
    let params = schema.get("params").and_then(Json::as_object);
    let param_str = |k: &str| params.and_then(|p| p.get(k)).and_then(Json::as_str);
    let param_bool = |k: &str| params.and_then(|p| p.get(k)).and_then(Json::as_bool);
    let type_field = param_str("typeField").unwrap_or("_type").to_string();
    let iso_dates = param_bool("isoDates");
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
    if models.is_empty() {
        return Err(err(
            "models",
            "no model: nothing to import (a model file declares at least one entity: export the schema with its models)".into(),
        ));
    }
    let mut entities = Vec::new();
    for (model_name, fields) in models {
        let at = format!("models.{model_name}");
        let fields = fields
            .as_object()
            .ok_or_else(|| err(&at, "not an object of fields".into()))?;
        let mut list: Vec<Field> = Vec::new();
        // `map: 'data.city'`: packed into the map `data` (JS name, path).
        let mut packed: Vec<(&str, &str)> = Vec::new();
        for (n, def) in fields {
            let def = def
                .as_object()
                .ok_or_else(|| err(&format!("{at}.{n}"), "not a field definition".into()))?;
            match def.get("map").and_then(Json::as_str) {
                Some(m) if m.contains('.') => packed.push((n, m)),
                Some(m) if !m.is_empty() => list.push(Field {
                    name: m,
                    js: n,
                    def,
                }),
                _ => list.push(Field {
                    name: n,
                    js: n,
                    def,
                }),
            }
        }
        entities.push(entity(
            model_name,
            &list,
            &packed,
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
    // DynamoDB expires items by one attribute per table: OneTable's
    // `ttl: true` field (the first, if models name several).
    let mut ttl: Option<String> = None;
    for (model_name, fields) in models {
        let Some(fields) = fields.as_object() else {
            continue;
        };
        for (n, d) in fields {
            if d.get("ttl").and_then(Json::as_bool) != Some(true) {
                continue;
            }
            match &ttl {
                None => ttl = Some(n.clone()),
                Some(t) if t == n => {}
                Some(t) => notes.push(format!(
                    "models.{model_name}.{n} is a ttl field too, but a table expires items by one attribute (`{t}` here): DynamoDB ignores `{n}`"
                )),
            }
        }
    }
    // OneTable keeps one item per value of a `unique: true` field, keyed
    // `_unique#...` and typed `_Unique` (its model's name, in the type
    // field, as OneTable 2.7.7 writes it): an entity of that name, implying
    // nothing, so that such an item is read and left alone (not bad input)
    // while every other item's type is still checked.
    let unique = models.values().filter_map(Json::as_object).any(|fields| {
        fields
            .values()
            .any(|d| d.get("unique").and_then(Json::as_bool) == Some(true))
    });
    if unique {
        entities.push(DraftEntity {
            name: UNIQUE_MODEL.to_string(),
            notes: vec![],
            key: vec![
                (pk.clone(), "_unique#${value}".to_string()),
                (sk.clone(), "_unique#".to_string()),
            ],
            attributes: vec![],
            checks: vec![],
            project: vec![],
        });
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
        ttl,
        writer_type_free: None,
        entities,
    })
}

/// The most digits a number padded in a key can need (a DynamoDB number's).
pub(super) const MAX_DIGITS: u64 = 38;

/// The model OneTable writes the `_unique#` items of `unique: true` fields
/// as (its name, in the type field).
const UNIQUE_MODEL: &str = "_Unique";

struct Keys<'a> {
    pk: &'a str,
    sk: &'a str,
    type_field: &'a str,
    /// `params.isoDates`, when the schema says.
    iso_dates: Option<bool>,
}

/// What a date stored as epoch milliseconds says when the schema's params
/// do not say `isoDates` (OneTable's default, false, unless the schema given
/// to the Table at run time says otherwise).
const EPOCH_MS_UNSAID: &str = "a date stored as epoch milliseconds: the schema's params do not say isoDates (OneTable's default is false); if the schema the Table is given at run time has `isoDates: true`, type it `iso-utc`";

/// A set's `items` type, lower-cased (`Number`, `{ "type": "number" }`).
fn set_items(f: &Field) -> Option<String> {
    match f.def.get("items")? {
        Json::String(t) => Some(t.to_lowercase()),
        Json::Object(o) => o.get("type").and_then(Json::as_str).map(str::to_lowercase),
        _ => None,
    }
}

fn attr_of(f: &Field, iso_dates: Option<bool>) -> Result<Option<DraftAttr>, String> {
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
        // As OneTable's `transformWriteDate` stores a date: a TTL in epoch
        // seconds; else ISO text when the field's or the schema's
        // `isoDates` says so, epoch milliseconds when neither does.
        "date" if f.ttl() => {
            note = Some(
                "OneTable stores a `ttl: true` date as epoch seconds (a number), whatever isoDates says"
                    .to_string(),
            );
            DraftTy::Named("int")
        }
        "date"
            if iso_dates == Some(true)
                || f.def.get("isoDates").and_then(Json::as_bool) == Some(true) =>
        {
            DraftTy::Named("iso-utc")
        }
        "date" => {
            note = Some(match iso_dates {
                Some(_) => "a date stored as epoch milliseconds (isoDates: false)".to_string(),
                None => EPOCH_MS_UNSAID.to_string(),
            });
            DraftTy::Named("int")
        }
        // `items: Number` (a constructor's name, or `{ type }`): OneTable
        // writes an NS (a BS for binaries), which a model file's `set`
        // (SS) is not: left undeclared (carried, not checked).
        "set" if set_items(f).is_some_and(|t| t != "string") => return Ok(None),
        "set" if set_items(f).is_some() => DraftTy::Named("set"),
        "set" => {
            note = Some(
                "a string set, as OneTable writes one without `items`; a set of numbers or binaries (an NS, a BS) would be bad input: leave it undeclared"
                    .to_string(),
            );
            DraftTy::Named("set")
        }
        "array" | "object" => DraftTy::Named(if f.ty() == "array" { "list" } else { "map" }),
        "binary" | "buffer" | "arraybuffer" => return Ok(None),
        other => return Err(format!("unknown type `{other}`")),
    };
    let mut notes: Vec<String> = note.into_iter().collect();
    // An enum, typed as written (`[1, 2, 3]` numbers, as OneTable stores
    // them); one a model file's enum cannot hold keeps the field's type.
    let ty = match f
        .def
        .get("enum")
        .and_then(Json::as_array)
        .map(|v| enum_of(v))
    {
        Some(Ok(e)) => e,
        Some(Err(why)) => {
            notes.push(why);
            ty
        }
        None => ty,
    };
    if f.def.get("type").is_none() {
        notes.push(format!(
            "`{}` has no type: typed string, as OneTable reads it; if the schema module says `type: Number` (a constructor), export it with the README's replacer (`JSON.stringify` alone drops functions)",
            f.name
        ));
    }
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
    if f.js != f.name {
        notes.push(format!(
            "OneTable calls it `{}` (map: {}); templates reading `{}` read it",
            f.js, f.name, f.js
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
    packed: &[(&str, &str)],
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
    // OneTable fills `${_type}` (its type field) with the model's name.
    let type_hole = format!("${{{}}}", keys.type_field);
    // A `map:`-renamed field is read where OneTable stores it.
    let as_written = |f: &Field| {
        f.str("value").map(|v| {
            let mut v = v.replace(&type_hole, model);
            for r in fields.iter().filter(|r| r.js != r.name) {
                for end in ["}", ":"] {
                    v = v.replace(&format!("${{{}{end}", r.js), &format!("${{{}{end}", r.name));
                }
            }
            v
        })
    };
    // A template reading the item's own keys (`gs1pk: '${sk}'`: OneTable
    // computes templates in order) reads their templates.
    let template_of = |f: &Field| {
        as_written(f).map(|mut v| {
            if f.name != keys.pk && f.name != keys.sk {
                for k in [keys.pk, keys.sk] {
                    let hole = format!("${{{k}}}");
                    if let Some(t) = v
                        .contains(&hole)
                        .then(|| field(k).and_then(&as_written))
                        .flatten()
                    {
                        v = v.replace(&hole, &t);
                    }
                }
            }
            v
        })
    };
    for (js, path) in packed {
        let top = path.split('.').next().unwrap_or(path);
        notes.push(format!(
            "`{js}` is stored in `{path}` (map: {path}): declared as the map `{top}`; a template reading `{js}` is not reproduced"
        ));
        if !attributes.iter().any(|a| a.name == top) && !fields.iter().any(|f| f.name == top) {
            attributes.push(DraftAttr {
                name: top.to_string(),
                ty: DraftTy::Named("map"),
                optional: true,
                note: Some(format!("OneTable packs fields into it (`map: {top}.…`)")),
            });
        }
    }
    // Pad widths (`${n:6:0}`): one that is not a number pads nothing in
    // OneTable (said); a number padded with 0 past 38 digits (DynamoDB's)
    // is a typo, refused (its expression would grow with the width).
    for f in fields {
        let Some(v) = f.str("value") else { continue };
        for (_, inner) in holes(v).0 {
            let mut parts = inner.split(':');
            let name = parts.next().unwrap_or_default();
            let Some(width) = parts.next() else { continue };
            let zeros = parts.next().is_none_or(|p| p == "0");
            match width.parse::<u64>() {
                Err(_) => notes.push(format!(
                    "`{}`: `${{{inner}}}` pads to `{width}`, not a number: OneTable pads nothing (read as `${{{name}}}`)",
                    f.name
                )),
                Ok(w) if w > MAX_DIGITS && zeros && field(name).is_some_and(|f| f.ty() == "number") => {
                    return Err(err(
                        f.name,
                        format!("`${{{inner}}}` pads a number to {w} digits: at most {MAX_DIGITS} (a DynamoDB number's)"),
                    ))
                }
                Ok(_) => {}
            }
        }
    }
    // `encode: [key, separator, index]` (or the key's name alone, resolved
    // as OneTable resolves it): the value is kept only inside that key and
    // never written as an attribute. Where the table's key template holds
    // it as the part OneTable reads, the template binds it (a key name,
    // not an attribute the item must carry); else it is said.
    let mut in_key: Vec<&str> = Vec::new();
    let mut unbound: Vec<&str> = Vec::new();
    for f in fields {
        let Some(enc) = f.def.get("encode") else {
            continue;
        };
        let hole = format!("${{{}}}", f.name);
        let (att, sep, index) = match enc {
            Json::Array(a) => (
                a.first().and_then(Json::as_str),
                a.get(1).and_then(Json::as_str).unwrap_or("#"),
                a.get(2).and_then(Json::as_u64),
            ),
            // OneTable's position of the field among the key's `${...}`.
            Json::String(a) => (
                Some(a.as_str()),
                "#",
                field(a).and_then(&template_of).and_then(|t| {
                    let (hs, _) = holes(&t);
                    hs.iter().position(|(_, n)| *n == f.name).map(|i| i as u64)
                }),
            ),
            _ => (None, "#", None),
        };
        let bound = att
            .filter(|a| *a == keys.pk || *a == keys.sk)
            .and_then(&field)
            .and_then(&template_of)
            .zip(index)
            .is_some_and(|(t, i)| {
                !sep.is_empty() && t.split(sep).nth(i as usize) == Some(hole.as_str())
            });
        if bound {
            in_key.push(f.name);
        } else {
            unbound.push(f.name);
            notes.push(format!(
                "`{}` is encoded in a key (encode: {enc}) where the table's key templates do not hold it as `{hole}` alone: OneTable never writes it as an attribute, so it is not declared; bind it in the key by hand",
                f.name
            ));
        }
    }
    for k in [keys.pk, keys.sk] {
        let Some(f) = field(k) else {
            return Err(err(
                k,
                format!("model {model} has no `{k}` field (the primary index's key)"),
            ));
        };
        let Some(value) = template_of(f) else {
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
        for p in pieces(&value) {
            match p {
                Piece::Lit(l) => t.push_str(&l),
                // A name a key template cannot bind (`first-name`): a name
                // of its own, not tied to the attribute.
                Piece::Var { name, pad: None } if ident(&name) != name => {
                    let b = fresh(&format!("{}_key", ident(&name)), &taken);
                    taken.push(b.clone());
                    t.push_str(&format!("${{{b}}}"));
                    notes.push(format!(
                        "`{k}` holds `{name}`: {}; its part binds `{b}`, not tied to `{name}` by a check (an item whose key disagrees with it is not refused)",
                        unnamable(&name)
                    ));
                }
                Piece::Var { name, pad: None } => {
                    t.push_str(&format!("${{{name}}}"));
                    let note = number_in_key(&name, "OneTable");
                    if field(&name).is_some_and(|f| f.ty() == "number") && !notes.contains(&note) {
                        notes.push(note);
                    }
                }
                Piece::Var {
                    name,
                    pad: Some((len, pad)),
                } => {
                    let b = fresh(&format!("{}_key", ident(&name)), &taken);
                    taken.push(b.clone());
                    t.push_str(&format!("${{{b}}}"));
                    let numeric = field(&name).is_some_and(|f| f.ty() == "number");
                    if numeric && pad == "0" && cel_name(&name) {
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
        if f.name == keys.pk
            || f.name == keys.sk
            || f.name == keys.type_field
            || f.def.get("encode").is_some()
        {
            continue;
        }
        if let Some(value) = template_of(f) {
            let value = value.as_str();
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
            if let Some((js, path)) = packed.iter().find(|(js, _)| {
                pieces(value)
                    .iter()
                    .any(|p| matches!(p, Piece::Var { name, .. } if name == js))
            }) {
                notes.push(format!(
                    "`{}` ({value}) reads `{js}`, stored in `{path}`: not projected (write it by hand)",
                    f.name
                ));
                continue;
            }
            if let Some(n) = pieces(value).iter().find_map(|p| match p {
                Piece::Var { name, .. } if unbound.contains(&name.as_str()) => Some(name.clone()),
                _ => None,
            }) {
                notes.push(format!(
                    "`{}` ({value}) reads `{n}`, encoded in a key this file does not bind it from: not projected (write it by hand)",
                    f.name
                ));
                continue;
            }
            if let Some(n) = pieces(value).iter().find_map(|p| match p {
                Piece::Var { name, .. } if !cel_name(name) => Some(name.clone()),
                _ => None,
            }) {
                notes.push(format!(
                    "`{}` ({value}) reads {}, which a model file cannot name in an expression: not projected (the application keeps it)",
                    f.name,
                    unnamable(&n)
                ));
                continue;
            }
            // OneTable computes templates from the plaintext; the item
            // holds the ciphertext, which a projection would read.
            if let Some(n) = pieces(value).iter().find_map(|p| match p {
                Piece::Var { name, .. }
                    if field(name).is_some_and(|f| {
                        f.def.get("crypt").and_then(Json::as_bool) == Some(true)
                    }) =>
                {
                    Some(name.clone())
                }
                _ => None,
            }) {
                notes.push(format!(
                    "`{}` ({value}) reads `{n}`, which OneTable stores encrypted (crypt: true) but reads in plain text here: not projected (the library keeps it)",
                    f.name
                ));
                continue;
            }
            match projection(f.name, value, fields, &in_key) {
                Ok(p) => project.push(p),
                Err(why) => notes.push(format!(
                    "`{}` ({value}): {why}; not projected (the library keeps it)",
                    f.name
                )),
            }
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
                        "unique: OneTable enforces it with one more item per value (partition key `_unique#{model}...`, written in the writer's transaction); this file reads them as `{UNIQUE_MODEL}` items (OneTable's type for them), implying nothing, and checks nothing of them (a model file's `unique:` is another thing: a parent id found across the table)"
                    );
                    a.note = Some(match a.note.take() {
                        Some(n) => format!("{n}; {unique}"),
                        None => unique,
                    });
                }
                attributes.push(a)
            }
            None if f.ty() == "set" => notes.push(format!(
                "`{}` is a set of {}s (OneTable writes an NS or a BS): model files type string sets only, so it is not declared (carried, not checked)",
                f.name,
                set_items(f).unwrap_or_default()
            )),
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
            ty: DraftTy::Named(if keys.iso_dates == Some(true) {
                "iso-utc"
            } else {
                "int"
            }),
            optional: true,
            note: Some(format!(
                "set by OneTable (params.timestamps) on every {}{}",
                if s == created { "create" } else { "write" },
                if keys.iso_dates.is_none() {
                    format!("; {EPOCH_MS_UNSAID}")
                } else {
                    String::new()
                }
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

#[cfg(test)]
#[path = "onetable_tests.rs"]
mod tests;
