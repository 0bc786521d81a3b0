//! `jobstream explain PK SK`: what one item means to the model, read from a
//! live table and its ledger.
//!
//! - A source item: what it implies now (projected attributes, index
//!   memberships, derived items, contributions to counters, jobs its write
//!   starts) and what the ledger recorded for it, with the difference.
//! - A derived item or a counter: every source item that implies it, by
//!   which rule, and (a counter) the sum they imply against its value and
//!   the ledger's totals.
//! - Bad input: the rule that rejects it and why.
//!
//! The rules are the model's own (the same functions the processors call);
//! sources are found by a scan of the table (a debugging tool, not a hot
//! path).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::change::Change;
use shared::engine::derive::{source_key, Implied};
use shared::error::InputError;
use shared::file::model::{Entity, FileModel, Ty};
use shared::item::{display_key, key_of, AttrError, Item};
use shared::ledger::item_id;
use shared::models::Model;

/// A value as a user reads it (`"x"`, `5`, `true`, `[a, b]`).
pub(super) fn show(v: &AttributeValue) -> String {
    match v {
        AttributeValue::S(s) => format!("{s:?}"),
        AttributeValue::N(n) => n.clone(),
        AttributeValue::Bool(b) => b.to_string(),
        AttributeValue::Null(_) => "null".into(),
        AttributeValue::Ss(v) => format!("[{}]", v.join(", ")),
        AttributeValue::Ns(v) => format!("[{}]", v.join(", ")),
        AttributeValue::L(v) => format!("[{} values]", v.len()),
        AttributeValue::M(m) => format!("{{{} attributes}}", m.len()),
        _ => "(binary)".into(),
    }
}

/// ` (ENTITY)` after a key, or nothing.
pub(super) fn of(entity: Option<&str>) -> String {
    entity.map(|e| format!(" ({e})")).unwrap_or_default()
}

/// Counted amounts as `a +1, b -2`.
pub(super) fn amounts<A: std::fmt::Display, N: std::fmt::Display>(
    values: impl IntoIterator<Item = (A, N)>,
) -> String {
    values
        .into_iter()
        .map(|(a, n)| format!("{a} {n:+}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `explain` found, one line each (printed as is).
#[derive(Debug, Default)]
pub struct Explanation {
    /// `source`, `derived`, `counter`, `processor`, `bad input`, `absent`.
    pub kind: &'static str,
    pub lines: Vec<String>,
    /// Whether an item has the key (`jobstream explain` exits 1 when not).
    pub present: bool,
}

impl Explanation {
    pub(super) fn line(&mut self, s: impl Into<String>) {
        self.lines.push(s.into());
    }
}

/// Where the model's items and bookkeeping are.
pub struct Tables<'a> {
    pub client: &'a aws_sdk_dynamodb::Client,
    pub table: &'a str,
    pub ledger: &'a str,
}

pub(super) async fn get(t: &Tables<'_>, table: &str, key: &Item) -> anyhow::Result<Option<Item>> {
    Ok(t.client
        .get_item()
        .table_name(table)
        .set_key(Some(key.clone()))
        .consistent_read(true)
        .send()
        .await?
        .item)
}

/// The entity name of a key in a model file (`None` for compiled models).
pub(super) fn entity_of(file: Option<&FileModel>, key: &Item) -> Option<&'static str> {
    let f = file?;
    let [pk, sk] = f.key_names();
    let (Some(AttributeValue::S(p)), Some(AttributeValue::S(s))) = (key.get(pk), key.get(sk))
    else {
        return None;
    };
    f.classify(p, s).map(|(e, _)| e.name)
}

/// A type as the model file writes it.
fn ty_name(t: &Ty) -> String {
    match t {
        Ty::Str => "string".into(),
        Ty::Int => "int".into(),
        Ty::Number => "number".into(),
        Ty::Bool => "bool".into(),
        Ty::Ulid => "ulid".into(),
        Ty::IsoUtc => "iso-utc".into(),
        Ty::Set => "set".into(),
        Ty::Map => "map".into(),
        Ty::List => "list".into(),
        Ty::Enum(v) => format!("one of {}", v.join("|")),
        Ty::IntEnum(v) => format!("one of {}", alternatives(v)),
        Ty::BoolEnum(v) => format!("one of {}", alternatives(v)),
        Ty::Format(f) => f.name.to_string(),
        Ty::Unknown => "an unknown type".into(),
    }
}

/// An enum's values as `a|b|c`.
fn alternatives<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("|")
}

/// The rule of a model file that rejects an item, when the error names one.
fn rejecting_rule(file: Option<&FileModel>, entity: &str, e: &InputError) -> Option<String> {
    let f = file?;
    // The entity the error names: the one the item's `type` says, when its
    // key fits no entity's types (`entity`: the first its key matches).
    let entity = match e {
        InputError::Attribute { entity, .. } => entity,
        _ => entity,
    };
    let ent = f.entities.iter().find(|x| x.name == entity)?;
    match e {
        InputError::Attribute {
            source: AttrError::Invalid { name, reason },
            ..
        } => {
            if let Some(c) = ent
                .checks
                .iter()
                .find(|c| c.attribute == name && c.message == *reason)
            {
                return Some(format!("check `{}` of {entity}", c.expr.source));
            }
            let a = ent.attr(name)?;
            Some(format!("attribute {name} of {entity}: {}", ty_name(&a.ty)))
        }
        InputError::Attribute {
            source: AttrError::Missing(name) | AttrError::WrongType { name, .. },
            ..
        } => ent.attr(name).map(|a| {
            format!(
                "attribute {name} of {entity}: {}{}",
                ty_name(&a.ty),
                if a.optional { " (optional)" } else { "" }
            )
        }),
        InputError::Attribute {
            source: AttrError::KeyPart { .. },
            ..
        } => Some(key_templates(entity, ent)),
        InputError::Invalid { reason, .. } if reason.contains("keys do not match") => {
            Some(key_templates(entity, ent))
        }
        InputError::Invalid { reason, .. } => {
            crate::tools::explain_once::refusing_once(f, entity, reason)
        }
        _ => None,
    }
}

/// An entity's key templates, as the rule a key is refused by.
fn key_templates(entity: &str, ent: &Entity) -> String {
    format!(
        "the key templates of {entity}: {}",
        ent.key
            .iter()
            .map(|k| format!("{} = {}", k.attr, k.template.source))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Why (`pk`, `sk`) cannot be a key of any item (a usage error, before
/// any request): DynamoDB refuses an empty key value and one over its
/// limits (2,048 bytes for a partition key, 1,024 for a sort key).
pub fn key_error(pk: &str, sk: &str) -> Option<String> {
    use shared::limits::{MAX_PARTITION_KEY_BYTES as P, MAX_SORT_KEY_BYTES as S};
    let which = [("partition", pk, P), ("sort", sk, S)];
    which.into_iter().find_map(|(name, v, max)| {
        if v.is_empty() {
            Some(format!(
                "the {name} key value is empty: give `PK SK` of an item"
            ))
        } else if v.len() > max {
            Some(format!(
                "the {name} key value is {} bytes, over DynamoDB's {max}: no item has such a key",
                v.len()
            ))
        } else {
            None
        }
    })
}

/// The key of the item at (`pk`, `sk`) in the model's table.
pub fn key(model: &Model, pk: String, sk: String) -> Item {
    [
        (model.table.pk.to_string(), shared::item::s(pk)),
        (model.table.sk.to_string(), shared::item::s(sk)),
    ]
    .into()
}

/// Explains the item at `key` (read once): its roles, then where it
/// stands in the model's history.
pub async fn explain(
    model: &Model,
    file: Option<&'static FileModel>,
    t: &Tables<'_>,
    key: &Item,
) -> anyhow::Result<Explanation> {
    let item = get(t, t.table, key).await?;
    let image = item.clone().unwrap_or_else(|| key.clone());
    let present = item.is_some();
    let mut x = explain_roles(model, file, t, key, item).await?;
    x.present = present;
    if let Some(f) = file.filter(|f| f.history.is_some()) {
        if let Some(place) = shared::file::history::FileHistory(f).place(&image) {
            x.line(place.what);
            if let Some(entry) = place.latest_entry {
                let present = get(t, t.table, &entry).await?.is_some();
                x.line(format!(
                    "history: the latest entry {} ({})",
                    display_key(&entry),
                    if present { "present" } else { "absent" }
                ));
            }
        }
    }
    Ok(x)
}

async fn explain_roles(
    model: &Model,
    file: Option<&'static FileModel>,
    t: &Tables<'_>,
    key: &Item,
    item: Option<Item>,
) -> anyhow::Result<Explanation> {
    let rules = &model.rules;
    let mut x = Explanation::default();
    let shown_key = display_key(key);
    let entity = entity_of(file, key);
    let image = item.clone().unwrap_or_else(|| key.clone());
    if let Some(counter) = rules.counter(&image) {
        x.kind = "counter";
        x.line(format!(
            "{shown_key}: a counter{} ({})",
            of(entity),
            if item.is_some() { "present" } else { "absent" }
        ));
        // A counter found through its identity: its sources and totals
        // are the identity's.
        let counted = counter.key_item();
        if rules.locate(&counted).is_some() {
            x.line(format!(
                "found by its identity: totals kept under {}",
                display_key(&counted)
            ));
        }
        let mut x = crate::tools::explain_counter::explain_counter(
            model,
            file,
            t,
            &counted,
            item.as_ref(),
            counter.attrs,
            x,
        )
        .await?;
        // A writer's item others count into is also a source: what it
        // implies (or the rule rejecting it) follows.
        if let Some(item) = item.filter(|i| also_source(model, file, entity, i)) {
            x.line(format!("{shown_key}: also a source item{}", of(entity)));
            explain_source(model, file, t, key, &item, entity, &mut x).await?;
        }
        return Ok(x);
    }
    // An item a `once:` effect puts: the effect, its key, its marker and
    // the source asking for it (present or not: why there is none).
    let once = match (file, entity) {
        (Some(f), Some(e)) if !rules.is_derived(key) => f.once_putting(e),
        _ => Vec::new(),
    };
    if let (Some(f), Some(e), false) = (file, entity, once.is_empty()) {
        let present = item.is_some();
        x.kind = if present { "processor" } else { "absent" };
        x.line(if present {
            format!("{shown_key}: an item the processors own ({e}), put by a once effect")
        } else {
            format!("{shown_key}: no item (the key of a {e}), put by a once effect")
        });
        crate::tools::explain_once::explain_once(f, &once, t, key, present, &mut x).await?;
        return Ok(x);
    }
    // A join set's target, present or not (an absent one is the set's to
    // imply, not the derive's: user15 #10): the rows of its key, and the
    // row it carries.
    let set_target = file.filter(|f| !rules.is_derived(key) && f.is_set_target(key));
    if let Some(f) = set_target {
        let items = crate::tools::verify::scan_all(t.client, t.table).await?;
        let ledger = crate::tools::verify::scan_all(t.client, t.ledger).await?;
        let input = shared::models::CheckInput::new(&items, &ledger, chrono::Utc::now());
        if let Some(lines) = f.explain_set_target(key, &input) {
            x.kind = if item.is_some() {
                "processor"
            } else {
                "absent"
            };
            x.line(format!(
                "{shown_key}: {}{} ({})",
                if item.is_some() {
                    "an item the processors own"
                } else {
                    "no item"
                },
                of(entity),
                if item.is_some() { "present" } else { "absent" }
            ));
            for l in lines {
                x.line(l);
            }
            return Ok(x);
        }
    }
    if rules.is_derived(key) || (rules.ignores(key) && item.is_none()) {
        x.kind = "derived";
        x.line(format!(
            "{shown_key}: a derived item{} ({})",
            of(entity),
            if item.is_some() { "present" } else { "absent" }
        ));
        return super::explain_derived::explain_derived(model, file, t, key, item.as_ref(), x)
            .await;
    }
    let Some(item) = item else {
        x.kind = "absent";
        x.line(format!(
            "{shown_key}: no item{}",
            entity
                .map(|e| format!(" (the key of a {e})"))
                .unwrap_or_default()
        ));
        return Ok(x);
    };
    if rules.ignores(key) {
        x.kind = "processor";
        x.line(format!(
            "{shown_key}: an item the processors own{}; it implies nothing",
            of(entity)
        ));
        return Ok(x);
    }
    if rules.projection(&item).is_err_and(|e| !e.waits()) {
        x.kind = "bad input";
    } else {
        x.kind = "source";
        x.line(format!("{shown_key}: a source item{}", of(entity)));
    }
    explain_source(model, file, t, key, &item, entity, &mut x).await?;
    Ok(x)
}

/// Whether a counter item is also a source (a writer's item: its own
/// projection, derived items and counts), not only a sum others keep.
fn also_source(model: &Model, file: Option<&FileModel>, entity: Option<&str>, item: &Item) -> bool {
    if model.rules.ignores(&key_of(item, model.rules.key_names())) {
        return false;
    }
    match (file, entity) {
        (Some(f), Some(e)) => f.entities.iter().any(|x| x.name == e && x.writer),
        _ => {
            let a = model.rules.aspects(item);
            a.projection.map_or(true, |p| p.is_some())
                || a.derived.map_or(true, |d| !d.is_empty())
                || a.contributions.map_or(true, |c| !c.is_empty())
        }
    }
}

/// What a source item implies now and what the ledger recorded for it; a
/// source the rules reject: the rule, why, and what its last valid state
/// still implies (kept by the ledger).
async fn explain_source(
    model: &Model,
    file: Option<&'static FileModel>,
    t: &Tables<'_>,
    key: &Item,
    item: &Item,
    entity: Option<&'static str>,
    x: &mut Explanation,
) -> anyhow::Result<()> {
    let rules = &model.rules;
    let names = rules.key_names();
    let shown_key = display_key(key);
    let item = item.clone();
    let projection = match rules.projection(&item) {
        Ok(p) => p,
        Err(e) if e.waits() => {
            x.line(format!(
                "{e}: what reads them (its projection, derives, counts) keeps what its last state with its values implied; nothing is written onto it until its job writes them"
            ));
            if let Some(f) = file {
                explain_computed(f, t, &item, x).await?;
            }
            return Ok(());
        }
        Err(e) => {
            x.line(format!(
                "{shown_key}: bad input ({}): the rules reject it now; nothing is written onto it",
                e.kind()
            ));
            if let Some(rule) = entity.and_then(|en| rejecting_rule(file, en, &e)) {
                x.line(format!("rejected by: {rule}"));
            }
            x.line(format!("why: {e}"));
            kept_by_the_ledger(t, names, key, x).await?;
            return Ok(());
        }
    };
    // Projected attributes and the indexes they put the item in.
    let mut after = item.clone();
    if let Some(p) = &projection {
        for (a, v) in &p.attrs {
            match v {
                Some(v) => {
                    let held = item.get(*a);
                    x.line(format!(
                        "projects {a} = {}{}",
                        show(v),
                        if held == Some(v) {
                            ""
                        } else {
                            " (the item holds another value: pending or drift)"
                        }
                    ));
                    after.insert(a.to_string(), v.clone());
                }
                None => {
                    x.line(format!(
                        "projects no {a} (absent while its condition is false)"
                    ));
                    after.remove(*a);
                }
            }
        }
    }
    if let Some(f) = file {
        explain_computed(f, t, &item, x).await?;
    }
    for g in &model.table.gsis {
        let at: Option<Vec<String>> = g
            .key_attributes()
            .map(|k| after.get(k).map(|v| format!("{k} = {}", show(v))))
            .collect();
        match at {
            Some(at) => x.line(format!("in index {} at {}", g.name, at.join(", "))),
            None => x.line(format!("not in index {}", g.name)),
        }
    }
    let derived = rules.derived(&item).unwrap_or_default();
    for d in &derived {
        let dk = key_of(d, names);
        let present = get(t, t.table, &dk).await?.is_some();
        let ttl = model.table.ttl_attribute;
        x.line(format!(
            "derives {}{} ({})",
            display_key(&dk),
            of(entity_of(file, &dk)),
            match present {
                true => "present".to_string(),
                false if shared::item::expired(d, ttl, chrono::Utc::now()) => {
                    format!("absent: expired, its {} is past", ttl.unwrap_or_default())
                }
                false => "absent: pending or drift".to_string(),
            }
        ));
        if rules.shared(&dk) {
            x.line(crate::tools::explain_shared::owner_line(t, &dk, key).await?);
        }
    }
    let contributions = rules.contributions(&item).unwrap_or_default();
    for c in &contributions {
        let ck = c.counter.key_item();
        x.line(format!(
            "counts into {}: {}",
            counted_into(rules.as_ref(), file, t, &ck).await?,
            amounts(c.values.iter().map(|(a, n)| (a, n)))
        ));
    }
    let change = Change::synthetic_insert(key.clone(), item.clone(), chrono::Utc::now());
    match rules.messages(&change) {
        Ok(m) if m.is_empty() => x.line("starts no job when written"),
        Ok(m) => {
            let mut per_queue: BTreeMap<&str, usize> = BTreeMap::new();
            for msg in &m {
                *per_queue.entry(msg.queue).or_default() += 1;
            }
            for (q, n) in per_queue {
                x.line(format!("starts {n} job(s) on queue {q} when written"));
            }
        }
        Err(e) => x.line(format!("its jobs cannot be computed: {e}")),
    }
    // What the ledger recorded for it.
    match get(t, t.ledger, &source_key("derive", key)).await? {
        None => x.line("ledger: nothing recorded (not processed yet, or it implies nothing)"),
        Some(record) => match Implied::from_record(&record) {
            Err(e) => x.line(format!("ledger: an unreadable record: {e}")),
            Ok(rec) => {
                let derived_now: Vec<String> =
                    derived.iter().map(|d| item_id(&key_of(d, names))).collect();
                let recorded: Vec<String> = rec.derived.keys().cloned().collect();
                let mut counters_now: Vec<String> = contributions
                    .iter()
                    .map(|c| item_id(&c.counter.key_item()))
                    .collect();
                counters_now.sort();
                counters_now.dedup();
                let counters_rec: Vec<String> = rec.contributions.keys().cloned().collect();
                x.line(format!(
                    "ledger: {} derived item(s), {} counter contribution(s){} recorded",
                    rec.derived.len(),
                    rec.contributions.len(),
                    if rec.indexed.is_empty() {
                        String::new()
                    } else {
                        format!(", {} ledger index entr(ies)", rec.indexed.len())
                    }
                ));
                for (k, v) in rec.contributions.values() {
                    x.line(format!(
                        "ledger: counted into {}: {}",
                        display_key(k),
                        amounts(v)
                    ));
                }
                let mut same_derived = derived_now.clone();
                same_derived.sort();
                x.line(
                    if same_derived == recorded && counters_now == counters_rec {
                        "ledger: agrees with what the rules imply now"
                    } else {
                        "ledger: differs from what the rules imply now (a change in flight, or drift: run `jobstream verify`)"
                    },
                );
            }
        },
    }
    Ok(())
}

/// The counter a contribution lands on: its key, or for a counter found by
/// its identity (`unique:`) the item that carries it beside the ledger's
/// key of the identity (or that none or several do).
async fn counted_into(
    rules: &dyn shared::engine::rules::Rules,
    file: Option<&FileModel>,
    t: &Tables<'_>,
    ck: &Item,
) -> anyhow::Result<String> {
    let logical = display_key(ck);
    let Some(locate) = rules.locate(ck) else {
        return Ok(format!("{logical}{}", of(entity_of(file, ck))));
    };
    let store = shared::store::Store::new(t.client.clone());
    let at = shared::engine::locate::Tables {
        store: &store,
        table: t.table,
        ledger_table: t.ledger,
        key_names: rules.key_names(),
    };
    use shared::engine::locate::{find_in, Located};
    Ok(match find_in(&at, ck, &locate).await? {
        Located::One(key, _) => format!(
            "{}{}, found by its identity {logical}",
            display_key(&key),
            of(entity_of(file, &key))
        ),
        Located::Nowhere => {
            format!("{logical} (no item carries its identity yet: the totals wait in the ledger)")
        }
        Located::Contested(keys) => format!(
            "{logical} ({} items claim its identity: {}; nothing is written to either)",
            keys.len(),
            keys.iter().map(display_key).collect::<Vec<_>>().join("; ")
        ),
    })
}

/// An item's computed values (`compute:`): what the rows of its scope, read
/// now, imply against what it holds.
async fn explain_computed(
    f: &'static FileModel,
    t: &Tables<'_>,
    item: &Item,
    x: &mut Explanation,
) -> anyhow::Result<()> {
    let Some((rows_pk, prefix, rows)) = f.compute_rows(item) else {
        return Ok(());
    };
    let [pkn, skn] = f.key_names();
    let partition = shared::store::Store::new(t.client.clone())
        .query_partition(t.table, pkn, &rows_pk, Some((skn, prefix)))
        .await?;
    let whose = format!(
        "the {rows} rows at {pkn}={rows_pk} ({} item(s) read)",
        partition.len()
    );
    let record_keys = f.bad_row_record_keys(item, &partition);
    let records = if record_keys.is_empty() {
        vec![]
    } else {
        shared::store::Store::new(t.client.clone())
            .batch_get(t.ledger, record_keys)
            .await?
    };
    match f.computed_values(item, &partition, &records) {
        Ok(values) => {
            for (a, v) in values {
                let v = match v {
                    Ok(v) => v,
                    Err(why) => {
                        x.line(format!(
                            "computes {a} from {whose}: bad input, not judged now ({why}): its value is left as it is"
                        ));
                        continue;
                    }
                };
                let held = match item.get(a) {
                    Some(AttributeValue::N(n)) if n.parse::<i64>() == Ok(v) => String::new(),
                    Some(h) => format!(" (the item holds {}: a job pending, or drift)", show(h)),
                    None => " (the item holds none: a job pending, or drift)".to_string(),
                };
                x.line(format!("computes {a} = {v} from {whose}{held}"));
            }
        }
        Err(why) => x.line(format!(
            "computes its values from {whose}: not judged now, {why}"
        )),
    }
    Ok(())
}

/// What a source that is bad input now still implies: what the ledger
/// recorded for its last valid state (the engine keeps it until the item
/// is fixed or deleted).
async fn kept_by_the_ledger(
    t: &Tables<'_>,
    names: &[&str],
    key: &Item,
    x: &mut Explanation,
) -> anyhow::Result<()> {
    let recorded = match get(t, t.ledger, &source_key("derive", key)).await? {
        None => None,
        Some(record) => Some(Implied::from_record(&record).map_err(|e| anyhow::anyhow!(e))?),
    };
    let Some(rec) = recorded
        .filter(|r| !(r.derived.is_empty() && r.contributions.is_empty() && r.indexed.is_empty()))
    else {
        x.line("it changes nothing: no earlier valid state of it is recorded");
        return Ok(());
    };
    x.line("what its last valid state implied stays until it is fixed or deleted:");
    for (k, v) in rec.contributions.values() {
        x.line(format!(
            "still counted into {}: {}",
            display_key(k),
            amounts(v)
        ));
    }
    for d in rec.derived.values() {
        x.line(format!("still derives {}", display_key(&key_of(d, names))));
    }
    if !rec.indexed.is_empty() {
        x.line(format!(
            "still listed in {} ledger index entr(ies)",
            rec.indexed.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod key_tests {
    use super::key_error;

    /// A key DynamoDB refuses is a usage error known before any request:
    /// empty, or over its key limits (hostile13 #12: a 5,000-byte
    /// partition key reached the engine and came back as a raw SDK error).
    #[test]
    fn a_key_dynamodb_refuses_is_a_usage_error() {
        assert_eq!(key_error("M#ann", "LOAN#1"), None);
        assert_eq!(key_error(&"p".repeat(2048), &"s".repeat(1024)), None);
        for (pk, sk, says) in [
            ("", "S", "the partition key value is empty"),
            ("P", "", "the sort key value is empty"),
            (
                &*"p".repeat(2049),
                "S",
                "the partition key value is 2049 bytes, over DynamoDB's 2048",
            ),
            (
                "P",
                &*"s".repeat(1025),
                "the sort key value is 1025 bytes, over DynamoDB's 1024",
            ),
        ] {
            let e = key_error(pk, sk).unwrap_or_default();
            assert!(e.starts_with(says), "{e}");
        }
    }
}
