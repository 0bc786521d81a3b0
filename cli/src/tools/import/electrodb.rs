//! ElectroDB entities (their `schema`, serialised to JSON) -> a [`Draft`].
//!
//! The input is one entity's schema, a list of them, or an object of them
//! (one table), as `JSON.stringify(entity.schema, (k, v) => typeof v ===
//! 'function' ? v.toString() : v)` writes it: functions arrive as their
//! source text and become comments.
//!
//! Keys are built as ElectroDB's `_makeKey` builds them: a prefix
//! (`$service`, then `#label_value` per composite attribute for the partition
//! key; `$entity_version` or, in a collection, `$collection#entity_version`
//! for the sort key), or the `template` text; the whole key in the index's
//! `casing` (lower case by default); a composite's `padding`; and building
//! stops at the first absent composite. As ElectroDB's put does, an index
//! whose attributes are all optional gets no keys while the item holds none
//! of them (a sparse index), and a key that comes out empty is not written.
//! The primary index -> the table's keys
//! (a cased value binds a name of its own, tied to its attribute by a check
//! such as `lower(id) == id_lower`), every other index -> projected GSI keys.
//! `__edb_e__` (the entity's name) is the entity-type attribute and
//! `__edb_v__` its version, an enum of one value.

use serde_json::{Map, Value as Json};

use super::{
    cel_name, enum_of, fresh, ident, unnamable, Draft, DraftAttr, DraftEntity, DraftGsi,
    DraftProjection, DraftTy, ImportError,
};

#[path = "electrodb_keys.rs"]
mod keys;
#[cfg(test)]
use keys::template_shape;
use keys::{key_template, numbers_in_key, projection, shape};

/// The attribute ElectroDB writes the entity's name to.
pub const ENTITY_FIELD: &str = "__edb_e__";
/// The attribute ElectroDB writes the entity's version to.
pub const VERSION_FIELD: &str = "__edb_v__";

struct Attribute<'a> {
    /// The schema's name (keys' labels use it).
    name: &'a str,
    /// The table attribute (`field`, else the name).
    field: String,
    def: &'a Map<String, Json>,
}

impl Attribute<'_> {
    fn kind(&self) -> &str {
        match self.def.get("type") {
            Some(Json::Array(_)) => "enum",
            Some(Json::String(s)) => s,
            _ => "string",
        }
    }

    fn required(&self) -> bool {
        self.def.get("required").and_then(Json::as_bool) == Some(true)
    }

    /// A string, or an enum of strings (cased in keys).
    fn is_text(&self) -> bool {
        match self.kind() {
            "string" => true,
            "enum" => self
                .def
                .get("type")
                .and_then(Json::as_array)
                .is_some_and(|v| v.iter().all(Json::is_string)),
            _ => false,
        }
    }

    /// The name ElectroDB writes in keys (`#label_value`): its `label`,
    /// else its name.
    fn label(&self) -> &str {
        self.def
            .get("label")
            .and_then(Json::as_str)
            .unwrap_or(self.name)
    }

    /// Padded in keys otherwise than a number with `0` (a string, another
    /// character): what this file cannot reproduce.
    fn padded_otherwise(&self) -> bool {
        self.padding()
            .is_some_and(|(_, ch)| !(ch == "0" && self.kind() == "number"))
    }

    /// `padding: { length, char }`.
    fn padding(&self) -> Option<(u64, String)> {
        let p = self.def.get("padding")?;
        let len = p.get("length")?.as_u64()?;
        let ch = p.get("char")?.as_str()?.to_string();
        (len > 0 && !ch.is_empty()).then_some((len, ch))
    }
}

/// Imports ElectroDB entity schemas (JSON text).
pub fn import(text: &str, path: &str, name: &str, table: &str) -> Result<Draft, ImportError> {
    let err = |at: &str, why: String| ImportError::Schema {
        path: path.to_string(),
        at: at.to_string(),
        why,
    };
    let json: Json = super::parse_json(text, path, "ElectroDB entities in a JavaScript module: serialise each entity's `schema` first, functions as their source, e.g. `JSON.stringify([Employee, Office].map((e) => JSON.parse(JSON.stringify(e.schema, (k, v) => (typeof v === 'function' ? v.toString() : v instanceof RegExp ? v.source : v)))))` (README, import)")?;
    let schemas: Vec<&Json> = match &json {
        Json::Array(a) => a.iter().collect(),
        Json::Object(o) if o.contains_key("model") => vec![&json],
        Json::Object(o) => o.values().collect(),
        _ => vec![],
    };
    if schemas.is_empty() {
        return Err(err(
            "(top)",
            "no entity schema (an object with `model`, `attributes`, `indexes`, or a list of them)"
                .into(),
        ));
    }
    let mut table_keys: Option<(String, String)> = None;
    let mut gsis: Vec<DraftGsi> = Vec::new();
    let mut stated: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    let mut entities = Vec::new();
    let mut writer_type_free = None;
    // Entities left out: their primary index has no sort key.
    let mut no_sort_key: Vec<String> = Vec::new();
    for (i, s) in schemas.iter().enumerate() {
        let model = s
            .get("model")
            .ok_or_else(|| err(&format!("[{i}].model"), "missing".into()))?;
        let entity = model
            .get("entity")
            .and_then(Json::as_str)
            .ok_or_else(|| err(&format!("[{i}].model.entity"), "missing".into()))?;
        let at = entity.to_string();
        let version = model.get("version").and_then(Json::as_str).unwrap_or("1");
        let service = model
            .get("service")
            .and_then(Json::as_str)
            .ok_or_else(|| err(&format!("{at}.model.service"), "missing".into()))?;
        let attrs_json = s
            .get("attributes")
            .and_then(Json::as_object)
            .ok_or_else(|| err(&format!("{at}.attributes"), "missing".into()))?;
        let mut attrs: Vec<Attribute> = Vec::new();
        for (n, d) in attrs_json {
            let def = d
                .as_object()
                .ok_or_else(|| err(&format!("{at}.attributes.{n}"), "not an object".into()))?;
            let field = def
                .get("field")
                .and_then(Json::as_str)
                .unwrap_or(n)
                .to_string();
            let a = Attribute {
                name: n,
                field,
                def,
            };
            // A typo's width would grow the padded key's expression.
            if let Some((len, _)) = a.padding().filter(|_| a.kind() == "number") {
                if len > super::onetable::MAX_DIGITS {
                    return Err(err(
                        &format!("{at}.attributes.{n}.padding"),
                        format!(
                            "pads a number to {len} digits: at most {} (a DynamoDB number's)",
                            super::onetable::MAX_DIGITS
                        ),
                    ));
                }
            }
            attrs.push(a);
        }
        let indexes = s
            .get("indexes")
            .and_then(Json::as_object)
            .ok_or_else(|| err(&format!("{at}.indexes"), "missing".into()))?;
        let mut e = DraftEntity {
            name: entity.to_string(),
            notes: Vec::new(),
            key: Vec::new(),
            attributes: Vec::new(),
            checks: Vec::new(),
            project: Vec::new(),
        };
        let mut taken: Vec<String> = attrs.iter().map(|a| a.field.clone()).collect();
        let attr = |n: &str| attrs.iter().find(|a| a.name == n);
        // The primary index (no `index`, or ElectroDB's table index `""`).
        let is_primary = |i: &Json| {
            i.get("index")
                .and_then(Json::as_str)
                .is_none_or(str::is_empty)
        };
        let Some((primary_name, primary)) = indexes.iter().find(|(_, i)| is_primary(i)) else {
            return Err(err(
                &format!("{at}.indexes"),
                "no primary index (an index without `index`)".into(),
            ));
        };
        let primary_key = |k: &str| {
            primary
                .get(k)
                .filter(|v| v.is_object())
                .and_then(|v| v.get("field"))
                .and_then(Json::as_str)
        };
        let primary_pk = primary_key("pk");
        if primary_key("sk").is_none() {
            notes.push(format!(
                "entity `{entity}` is not imported: its primary index `{primary_name}` has no sort key (partition key `{}` only), and a model file's table has one: DynamoDB refuses an item without the table's sort key, so ElectroDB can write `{entity}` only to a table keyed by its partition key alone, which a model file cannot describe (keep it in a table of its own)",
                primary_pk.unwrap_or("?")
            ));
            no_sort_key.push(entity.to_string());
            continue;
        }
        for (index_name, index) in indexes {
            let ia = format!("{at}.indexes.{index_name}");
            let index = index
                .as_object()
                .ok_or_else(|| err(&ia, "not an object".into()))?;
            let pk = index
                .get("pk")
                .ok_or_else(|| err(&format!("{ia}.pk"), "missing".into()))?;
            let pk_field = pk
                .get("field")
                .and_then(Json::as_str)
                .ok_or_else(|| err(&format!("{ia}.pk.field"), "missing".into()))?;
            let sk = index.get("sk").filter(|v| v.is_object());
            let sk_field = sk.and_then(|k| k.get("field")).and_then(Json::as_str);
            let secondary = index
                .get("index")
                .and_then(Json::as_str)
                .filter(|i| !i.is_empty());
            // A secondary index keyed by the table's partition key is a
            // local one (ElectroDB declares an LSI so): model files declare
            // global indexes only.
            let local = secondary.filter(|_| primary_pk == Some(pk_field));
            if index.get("type").and_then(Json::as_str) == Some("clustered") {
                // The index is declared (a table made from the file has
                // it); its keys are the hand's.
                if let (Some(gsi), Some(sk_field), None) = (secondary, sk_field, local) {
                    let project = index_projection(index, &attrs).map_err(|why| err(&ia, why))?;
                    declare_gsi(
                        &mut gsis,
                        &mut stated,
                        gsi,
                        pk_field,
                        Some(sk_field),
                        project,
                    )
                    .map_err(|why| err(&ia, why))?;
                }
                e.notes.push(format!(
                    "index `{index_name}` is clustered (the entity name after the sort key's attributes): {}its keys are not reproduced; write them by hand",
                    if secondary.is_some() && sk_field.is_some() && local.is_none() { "declared in the table's gsis, " } else { "" }
                ));
                continue;
            }
            // The index's key fields and their definitions, partition key
            // first; a global index may have no sort key (a lookup by a
            // unique value), a local one sorts by definition.
            let mut keyed: Vec<(&str, &Json)> = vec![(pk_field, pk)];
            match (sk_field, sk) {
                (Some(f), Some(k)) => keyed.push((f, k)),
                _ if secondary.is_some() && local.is_none() => {}
                _ => {
                    e.notes.push(format!(
                        "index `{index_name}` has no sort key: a local index sorts by one; not reproduced"
                    ));
                    continue;
                }
            }
            let key_list = keyed.iter().map(|(f, _)| *f).collect::<Vec<_>>().join(", ");
            let shapes: Vec<_> = keyed
                .iter()
                .enumerate()
                .map(|(n, (_, k))| shape(k, entity, version, service, index, n == 0, &attrs))
                .collect();
            for sh in &shapes {
                for (_, n) in &sh.composites {
                    if attr(n).is_none() {
                        return Err(err(
                            &ia,
                            format!("the key reads `{n}`, which is not an attribute of {entity}"),
                        ));
                    }
                }
            }
            let Some(gsi) = secondary else {
                // The primary index: the table's keys (its sort key is
                // there: an entity whose primary index has none is left
                // out above).
                let Some(&(sk_field, _)) = keyed.get(1) else {
                    continue;
                };
                let keys = (pk_field.to_string(), sk_field.to_string());
                match &table_keys {
                    None => table_keys = Some(keys.clone()),
                    Some(k) if *k != keys => {
                        return Err(err(
                            &ia,
                            format!(
                                "the table's keys are ({}, {}) for another entity, ({}, {}) here: one table, one pair",
                                k.0, k.1, keys.0, keys.1
                            ),
                        ))
                    }
                    Some(_) => {}
                }
                for (field, sh) in [(pk_field, &shapes[0]), (sk_field, &shapes[1])] {
                    numbers_in_key(sh, &attrs, &mut e.notes);
                    let t = key_template(sh, &attrs, &mut taken, &mut e.checks, &mut e.notes);
                    e.key.push((field.to_string(), t));
                }
                continue;
            };
            // `cast: 'number'`: ElectroDB writes a number, where a model
            // file's GSI keys are text (a table made from it types them S).
            let cast: Vec<&str> = keyed
                .iter()
                .filter(|(_, k)| k.get("cast").and_then(Json::as_str) == Some("number"))
                .map(|(f, _)| *f)
                .collect();
            if !cast.is_empty() {
                e.notes.push(format!(
                    "index `{index_name}` (`{gsi}`) casts `{}` to a number (`cast: 'number'`): ElectroDB writes a number there, where a model file's index keys are text; not declared (a table made from this file would type it a string) and not projected (the library keeps it)",
                    cast.join("`, `")
                ));
                continue;
            }
            // The keys the file projects: an LSI's sort key only (its
            // partition key is the table's, which its template says).
            let mut keys: Vec<(&str, _)> = keyed.iter().map(|(f, _)| *f).zip(&shapes).collect();
            match local {
                None => {
                    let project = index_projection(index, &attrs).map_err(|why| err(&ia, why))?;
                    let sk_field = keyed.get(1).map(|(f, _)| *f);
                    declare_gsi(&mut gsis, &mut stated, gsi, pk_field, sk_field, project)
                        .map_err(|why| err(&ia, why))?;
                    // An index on the table's own keys (inverted: `sk`,
                    // `pk`): their templates say what they hold.
                    keys.retain(|(f, _)| Some(*f) != primary_pk && Some(*f) != primary_key("sk"));
                    if keys.len() < keyed.len() {
                        e.notes.push(format!(
                            "index `{index_name}` (`{gsi}`) is keyed by the table's own key attributes ({key_list}): declared; {}",
                            if keys.is_empty() {
                                "they are the primary index's, as its templates build them (not projected)".to_string()
                            } else {
                                format!("only `{}` is projected", keys[0].0)
                            }
                        ));
                    }
                    if keys.is_empty() {
                        continue;
                    }
                }
                Some(lsi) => {
                    keys.retain(|(f, _)| Some(*f) != primary_pk && Some(*f) != primary_key("sk"));
                    let primary_pk_shape = primary
                        .as_object()
                        .zip(primary.get("pk"))
                        .map(|(p, k)| shape(k, entity, version, service, p, true, &attrs));
                    let differs = if primary_pk_shape.as_ref() != Some(&shapes[0]) {
                        format!("; its partition key is built otherwise than the primary index's, and both write `{pk_field}`: the primary index's is the one this file reads")
                    } else {
                        String::new()
                    };
                    e.notes.push(format!(
                        "index `{index_name}` (`{lsi}`) is a local secondary index (its partition key is the table's `{pk_field}`): not declared, as model files declare global indexes (queries on it are written by hand){}{differs}",
                        match keys.first() {
                            Some((f, _)) => format!("; its sort key `{f}` is projected"),
                            None => String::new(),
                        }
                    ));
                    if keys.is_empty() {
                        continue;
                    }
                }
            }
            let condition = index.get("condition").and_then(Json::as_str);
            let mut index_reads: Vec<&Attribute> = Vec::new();
            for (_, n) in shapes.iter().flat_map(|sh| &sh.composites) {
                if let Some(a) = attr(n) {
                    if !index_reads.iter().any(|r| r.name == a.name) {
                        index_reads.push(a);
                    }
                }
            }
            if let Some(a) = index_reads.iter().find(|a| !cel_name(&a.field)) {
                e.notes.push(format!(
                    "index `{index_name}`'s keys ({key_list}) read `{}`: {}, which a model file cannot name in an expression; not projected (the application keeps them)",
                    a.field,
                    unnamable(&a.field)
                ));
                continue;
            }
            if index_reads.is_empty() {
                e.notes.push(format!(
                    "index `{index_name}` reads no attribute: ElectroDB's put never writes its keys ({key_list}); not projected"
                ));
                continue;
            }
            // A string padded in a key (or a number padded with other than
            // 0): not reproduced, so not projected (the library keeps it).
            if let Some(a) = index_reads.iter().find(|a| a.padded_otherwise()) {
                e.notes.push(format!(
                    "index `{index_name}`'s keys ({key_list}) read `{}`, padded in keys as only numbers padded with 0 are reproduced here; not projected (the library keeps them)",
                    a.field
                ));
                continue;
            }
            let mut built = Vec::new();
            for (field, sh) in keys {
                numbers_in_key(sh, &attrs, &mut e.notes);
                match projection(field, sh, &index_reads, &attrs) {
                    Ok(p) => built.push(p),
                    Err(why) => e.notes.push(format!(
                        "index `{index_name}`'s `{field}`: {why}; not projected (the library keeps it)"
                    )),
                }
            }
            match condition {
                None => e.project.extend(built),
                // A JS function: projecting the keys regardless would write
                // them where ElectroDB leaves them out.
                Some(c) => e.notes.push(format!(
                    "index `{index_name}` is written only while `{c}` holds: not projected, so that jobstream never writes its keys where ElectroDB leaves them out (the library keeps them); to keep them exact, project each as `${{CONDITION ? VALUE : null}}` (e.g. `status == 'open'`), null = no attribute, with VALUE from{}",
                    built
                        .iter()
                        .map(|p| format!(" `{}`: {}", p.attr, super::q(&p.value)))
                        .collect::<Vec<_>>()
                        .join(",")
                )),
            }
        }
        if e.key.is_empty() {
            return Err(err(
                &format!("{at}.indexes.{primary_name}"),
                "the primary index gives no table keys (a clustered one's are not reproduced)"
                    .into(),
            ));
        }
        for a in &attrs {
            match draft_attr(a) {
                Ok(d) => e.attributes.push(d),
                Err(why) => e.notes.push(why),
            }
        }
        e.attributes.push(DraftAttr {
            name: VERSION_FIELD.to_string(),
            ty: DraftTy::Enum(vec![Json::String(version.to_string())]),
            optional: false,
            note: None,
        });
        // Two services' entities of one name (a shared table): the later
        // one is named after its service; both items carry the same
        // `__edb_e__`, so the type of a writer's item is not checked.
        if entities.iter().any(|x: &DraftEntity| x.name == entity) {
            let taken: Vec<String> = entities.iter().map(|x| x.name.clone()).collect();
            e.name = fresh(&format!("{}_{entity}", ident(service)), &taken);
            notes.push(format!(
                "two entities are named `{entity}` (ElectroDB tells them apart by service and version): the one of service `{service}` is `{}` here",
                e.name
            ));
            writer_type_free = Some(format!(
                "ElectroDB stamps `{ENTITY_FIELD}: {entity}` on the items of `{entity}` and `{}`:\n\
                 the type of a writer's item is not checked (its key says its entity).",
                e.name
            ));
        }
        entities.push(e);
    }
    let (pk, sk) = match (table_keys, no_sort_key.first()) {
        (Some(keys), _) => keys,
        (None, Some(entity)) => {
            return Err(err(
                &format!("{entity}.indexes"),
                format!(
                    "no sort key: the primary index of {} has a partition key only, and a model file's table has a sort key (single-table designs do): nothing to import",
                    no_sort_key.join(", ")
                ),
            ))
        }
        (None, None) => return Err(err("indexes", "no primary index".into())),
    };
    Ok(Draft {
        name: name.to_string(),
        about: format!("imported from the ElectroDB entities {path}"),
        notes,
        table: table.to_string(),
        pk,
        sk,
        gsis,
        entity_type: ENTITY_FIELD.to_string(),
        ttl: None,
        writer_type_free,
        entities,
    })
}

/// An access pattern's `projection` (`all`, `keys_only`, or attribute
/// names, here their table attributes); `None` when it says none.
fn index_projection(
    index: &Map<String, Json>,
    attrs: &[Attribute],
) -> Result<Option<DraftProjection>, String> {
    let Some(given) = index.get("projection") else {
        return Ok(None);
    };
    let p = DraftProjection::of(Some(given), "keys_only")
        .map_err(|w| format!("projection {w}: `all`, `keys_only` or a list of attributes"))?;
    Ok(Some(match p {
        DraftProjection::Attrs(v) => DraftProjection::Attrs(
            v.iter()
                .map(|n| {
                    attrs
                        .iter()
                        .find(|a| a.name == n)
                        .map_or(n.clone(), |a| a.field.clone())
                })
                .collect(),
        ),
        other => other,
    }))
}

/// Declares a secondary index once; the same name keyed otherwise by
/// another entity, or projected otherwise where both entities say their
/// projection, is refused (why). Entities sharing one physical index often
/// say its projection in one of them only: the one said is the index's
/// (`stated` lists the indexes whose projection an entity said; an index
/// no entity says a projection of projects `all`).
fn declare_gsi(
    gsis: &mut Vec<DraftGsi>,
    stated: &mut Vec<String>,
    gsi: &str,
    pk: &str,
    sk: Option<&str>,
    project: Option<DraftProjection>,
) -> Result<(), String> {
    let said = stated.iter().any(|s| s == gsi);
    let keys = |pk: &str, sk: Option<&str>| match sk {
        Some(sk) => format!("({pk}, {sk})"),
        None => format!("({pk}) alone"),
    };
    match gsis.iter_mut().find(|g| g.name == gsi) {
        Some(g) if g.pk != pk || g.sk.as_deref() != sk => Err(format!(
            "index {gsi} is keyed {} by another entity, {} here",
            keys(&g.pk, g.sk.as_deref()),
            keys(pk, sk)
        )),
        Some(g) => match project {
            Some(p) if said && g.project != p => Err(format!(
                "index {gsi} projects {} by another entity's `projection`, {} here: a table's index has one projection",
                g.project.written(),
                p.written()
            )),
            Some(p) => {
                g.project = p;
                stated.push(gsi.to_string());
                Ok(())
            }
            None => Ok(()),
        },
        None => {
            if project.is_some() {
                stated.push(gsi.to_string());
            }
            gsis.push(DraftGsi {
                name: gsi.to_string(),
                pk: pk.to_string(),
                sk: sk.map(str::to_string),
                project: project.unwrap_or(DraftProjection::All),
            });
            Ok(())
        }
    }
}

fn draft_attr(a: &Attribute) -> Result<DraftAttr, String> {
    let mut notes = Vec::new();
    let untyped = || {
        format!(
            "`{}` ({}) is not typed: model files type scalars, string sets, lists and maps",
            a.field,
            a.kind()
        )
    };
    let ty = match a.kind() {
        "string" => DraftTy::Named("string"),
        // Any number DynamoDB holds, fractions too; padded with `0` in keys,
        // an integer (`pad()` takes an int).
        "number" if a.padding().is_some_and(|(_, ch)| ch == "0") => DraftTy::Named("int"),
        "number" => DraftTy::Named("number"),
        "boolean" => DraftTy::Named("bool"),
        "enum" => {
            let values = a.def.get("type").and_then(Json::as_array);
            match enum_of(values.map(Vec::as_slice).unwrap_or_default()) {
                Ok(ty) => ty,
                // Numbers with fractions: a `number`, the values said.
                Err(why) if values.is_some_and(|v| v.iter().all(Json::is_number)) => {
                    notes.push(why);
                    DraftTy::Named("number")
                }
                Err(why) => return Err(format!("`{}`: {why}; not declared", a.field)),
            }
        }
        "set" if a.def.get("items").and_then(Json::as_str) == Some("string") => {
            DraftTy::Named("set")
        }
        "list" | "map" => DraftTy::Named(if a.kind() == "list" { "list" } else { "map" }),
        _ => return Err(untyped()),
    };
    if a.field != a.name {
        notes.push(format!(
            "ElectroDB calls it `{}` (field `{}` in the table)",
            a.name, a.field
        ));
    }
    for f in ["default", "validate", "get", "set", "watch"] {
        if let Some(v) = a.def.get(f) {
            let v = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            notes.push(match f {
                "default" => format!(
                    "default `{v}`: ElectroDB fills it in on put; here the attribute is read as written"
                ),
                // A RegExp that `JSON.stringify` wrote as an object.
                "validate" if v == "{}" => "validate `{}`: a regular expression lost in the export \
                     (`JSON.stringify` writes one as `{}`: export it with \
                     `v instanceof RegExp ? v.source : ...`, as the README shows, to see it here); \
                     write it as a `check:` (CEL)"
                    .to_string(),
                "validate" => format!("validate `{v}`: write it as a `check:` (CEL)"),
                _ => format!("{f} `{v}`: a JS function with no equivalent here"),
            });
        }
    }
    if let Some((len, ch)) = a.padding() {
        if !(ch == "0" && a.kind() == "number") {
            notes.push(format!(
                "padded to {len} with `{ch}` in keys: only numbers padded with 0 are reproduced (`pad()`)"
            ));
        }
    }
    Ok(DraftAttr {
        name: a.field.clone(),
        ty,
        optional: !a.required(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

#[cfg(test)]
#[path = "electrodb_tests.rs"]
mod tests;
