//! Running a model file's `once:` effects: the jobs a change starts
//! ([`FileModel::once_messages`]), the effect of a job ([`plan`]) and its
//! consumer ([`FileOnce`]). What they mean: [`super::once`].

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::{Expr, Val};
use super::model::{Entity, FileModel, Value};
use super::once::{OnceSpec, RequireCond};
use super::record::Images;
use super::rules::{to_attr, Parsed};
use super::template::Part;
use crate::change::{Change, ChangeKind};
use crate::engine::once::{Once, OncePlan};
use crate::engine::rules::OutMessage;
use crate::engine::setjob::{BoxFut, Guard, Reads};
use crate::error::InputError;
use crate::item::{display_key, Item, ItemExt};
use crate::sqs::MessageError;

/// The job body version this build reads and writes.
pub const VERSION: u64 = 1;
/// Bodies above this size are refused (and never sent).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A once job: the effect's name and the source's values it reads.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OnceJob {
    once: String,
    values: serde_json::Map<String, serde_json::Value>,
}

/// How a message carries a `number` that is not an int: its exact text
/// under this one key (a JSON number would be read back as a double).
const NUMBER_KEY: &str = "number";

/// A value of the source as a message carries it.
fn to_json(v: &Val) -> serde_json::Value {
    match v {
        Val::Str(s) => s.clone().into(),
        Val::Int(i) => (*i).into(),
        Val::Num(n) => serde_json::json!({ NUMBER_KEY: n.to_string() }),
        Val::Bool(b) => (*b).into(),
        Val::Set(v) => v.clone().into(),
        Val::List(l) => serde_json::Value::Array(l.iter().map(to_json).collect()),
        Val::Map(_) | Val::Null => serde_json::Value::Null,
    }
}

fn from_json(name: &str, v: &serde_json::Value) -> Result<Val, String> {
    Ok(match v {
        serde_json::Value::String(s) => Val::Str(s.clone()),
        serde_json::Value::Bool(b) => Val::Bool(*b),
        serde_json::Value::Null => Val::Null,
        serde_json::Value::Number(n) => Val::Int(
            n.as_i64()
                .ok_or_else(|| format!("`{name}` is not an integer"))?,
        ),
        serde_json::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for x in a {
                out.push(
                    x.as_str()
                        .ok_or_else(|| format!("`{name}` is not a string set"))?
                        .to_string(),
                );
            }
            out.sort();
            out.dedup();
            Val::Set(out)
        }
        serde_json::Value::Object(o) => match (o.len(), o.get(NUMBER_KEY)) {
            (1, Some(serde_json::Value::String(n))) => Val::number(
                super::number::Number::parse(n).map_err(|why| format!("`{name}`: {why}"))?,
            ),
            _ => return Err(format!("`{name}` is a map")),
        },
    })
}

pub(super) type Vals = Vec<(String, Val)>;

fn eval(m: &FileModel, v: &Value, vals: &Vals) -> Result<Val, String> {
    m.eval_value(v, |n| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v))
}

/// The key of entity `t` from `with`, which must read back as that entity;
/// and every value bound.
fn key_of<'w>(
    m: &FileModel,
    t: &Entity,
    with: impl IntoIterator<Item = &'w (String, Value)>,
    vals: &Vals,
) -> Result<(Item, Vals), String> {
    let mut bound: Vals = Vec::new();
    for (n, v) in with {
        bound.push((n.clone(), eval(m, v, vals)?));
    }
    let key: Item = (m.key_of_bound(t, &bound)?.into_iter())
        .map(|(attr, v)| (attr.to_string(), AttributeValue::S(v)))
        .collect();
    let [pkn, skn] = m.key_names();
    let reads_back = match (key.s(pkn), key.s(skn)) {
        (Ok(pk), Ok(sk)) => m.classify(pk, sk).is_some_and(|(e, _)| std::ptr::eq(e, t)),
        _ => false,
    };
    if !reads_back {
        return Err(format!(
            "the key {} built for `{}` is not one of its keys (a value holds a separator of its template?)",
            display_key(&key),
            t.name
        ));
    }
    Ok((key, bound))
}

/// The once key. With two or more values in it, none may hold a literal
/// of its template (`#` in `${seekerId}#${jobId}`): else two effects could
/// render one key (`a#b` + `c`, `a` + `b#c`) and the second would be taken
/// for a duplicate.
pub(super) fn once_key(m: &FileModel, spec: &OnceSpec, vals: &Vals) -> Result<String, String> {
    let holes = spec
        .key
        .0
        .iter()
        .filter(|p| matches!(p, Part::Hole(..)))
        .count();
    if holes < 2 {
        let key = eval(m, &spec.key, vals)?.render();
        if key.is_empty() {
            return Err("the key is empty".to_string());
        }
        return Ok(key);
    }
    let look = |n: &str| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v);
    let mut out = String::new();
    for p in &spec.key.0 {
        match p {
            Part::Lit(l) => out.push_str(l),
            Part::Hole(e, _) => {
                let v = m.env.eval(e, look)?.render();
                if v.is_empty() {
                    return Err(format!("`{}` of the key is empty", e.source));
                }
                for p in &spec.key.0 {
                    if let Part::Lit(l) = p {
                        if !l.is_empty() && v.contains(l.as_str()) {
                            return Err(format!(
                                "`{}` of the key holds `{l}`, a separator of its template: two effects could share one key",
                                e.source
                            ));
                        }
                    }
                }
                out.push_str(&v);
            }
        }
    }
    Ok(out)
}

/// The effect of one job, from the source's values (an error says why
/// not, prefixed with the effect's name).
pub fn plan(m: &FileModel, spec: &OnceSpec, vals: &Vals) -> Result<OncePlan, String> {
    plan_of_values(m, spec, vals).map_err(|e| format!("once `{}`: {e}", spec.name))
}

#[cfg(test)]
thread_local! {
    /// Once effects computed on this thread (tests count what a record
    /// costs).
    static PLANS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Once effects computed while `f` runs on this thread.
#[cfg(test)]
pub(super) fn plans<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = PLANS.with(std::cell::Cell::get);
    let out = f();
    (out, PLANS.with(std::cell::Cell::get) - before)
}

fn plan_of_values(m: &FileModel, spec: &OnceSpec, vals: &Vals) -> Result<OncePlan, String> {
    #[cfg(test)]
    PLANS.with(|n| n.set(n.get() + 1));
    let once_key = once_key(m, spec, vals)?;
    let mut plan = OncePlan {
        once_key,
        ..OncePlan::default()
    };
    let mut touched: Vec<Item> = Vec::new();
    let mut touch = |k: &Item| -> Result<(), String> {
        if touched.contains(k) {
            return Err(format!(
                "{} is written or checked twice in one transaction",
                display_key(k)
            ));
        }
        touched.push(k.clone());
        Ok(())
    };
    for r in &spec.require {
        let t = &m.entities[r.entity];
        let (key, _) = key_of(m, t, &r.with, vals)?;
        touch(&key)?;
        let reason = format!("{} ({})", r.message, display_key(&key));
        let g = match &r.cond {
            RequireCond::Exists => Guard::exists(key),
            RequireCond::Absent => Guard::absent(key),
            RequireCond::Equals(a, v) => {
                let ty = t.attr(a).map(|a| &a.ty);
                let v = to_attr(a, eval(m, v, vals)?, ty)?
                    .ok_or_else(|| format!("`{a}` has no value to compare"))?;
                Guard::equals(key, a, v)
            }
        };
        // An item of another entity than the source's may be written
        // later (children before parents): the effect then waits for it.
        // The source's own item makes a new job by changing into `when`.
        if r.entity != spec.source {
            plan.waits.push(plan.checks.len());
        }
        plan.checks.push((g, reason));
    }
    for w in &spec.put {
        let t = &m.entities[w.entity];
        let (mut item, bound) = key_of(m, t, &w.with, vals)?;
        touch(&item)?;
        for a in &t.attrs {
            let v = match bound.iter().find(|(n, _)| n == a.name) {
                Some((_, v)) => to_attr(a.name, v.clone(), Some(&a.ty))?,
                None => t.constants().find(|(n, _)| *n == a.name).map(|(_, v)| v),
            };
            match v {
                Some(v) => {
                    item.insert(a.name.to_string(), v);
                }
                None if a.optional => {}
                None => return Err(format!("`{}` of `{}` has no value", a.name, t.name)),
            }
        }
        item.insert(
            m.entity_type.to_string(),
            AttributeValue::S(t.name.to_string()),
        );
        plan.puts.push(item);
    }
    for w in &spec.delete {
        let (key, _) = key_of(m, &m.entities[w.entity], &w.with, vals)?;
        touch(&key)?;
        plan.deletes.push(key);
    }
    within_limits(m, spec, &plan)?;
    Ok(plan)
}

/// Whether DynamoDB can take the effect's transaction: each item it puts
/// within the table's key and index key limits and 400 KB, each key it
/// checks or deletes one that can exist. Else no job could ever commit it
/// (a `ValidationException`, retried into the dead-letter queue): its
/// source is bad input instead. Names the item's entity and the limit,
/// never the value.
fn within_limits(m: &FileModel, spec: &OnceSpec, plan: &OncePlan) -> Result<(), String> {
    let limits = crate::limits::KeyLimits::of(&m.table);
    for (w, item) in spec.put.iter().zip(&plan.puts) {
        limits
            .check(item)
            .map_err(|why| format!("its `{}` item: {why}", m.entities[w.entity].name))?;
    }
    let keys = (spec.require.iter().map(|r| r.entity))
        .zip(plan.checks.iter().map(|(g, _)| &g.key))
        .chain(spec.delete.iter().map(|w| w.entity).zip(&plan.deletes));
    for (entity, key) in keys {
        if !crate::limits::key_can_exist(key, &m.key_names()) {
            return Err(format!(
                "the key of its `{}` item is empty or over DynamoDB's key limits ({} bytes for the partition key, {} for the sort key)",
                m.entities[entity].name,
                crate::limits::MAX_PARTITION_KEY_BYTES,
                crate::limits::MAX_SORT_KEY_BYTES
            ));
        }
    }
    Ok(())
}

fn holds(m: &FileModel, e: &Expr, vals: &Vals) -> Result<bool, String> {
    m.env
        .eval(e, |n| vals.iter().find(|(k, _)| k == n).map(|(_, v)| v))?
        .bool_of(&e.source)
}

/// The once effects an image asks for, by their index in the model's
/// `once:`, each with its job's body ([`FileModel::once_asked`]).
pub(super) type Asked = Vec<(usize, String)>;

/// The values of a source record that `spec` reads (its `when` and its
/// effect).
fn values_of(spec: &OnceSpec, rec: &super::rules::Record) -> Vals {
    spec.when
        .variables
        .iter()
        .chain(&spec.reads)
        .filter_map(|n| rec.get(n).map(|v| (n.clone(), v.clone())))
        .collect()
}

impl FileModel {
    /// The jobs a change starts: each effect whose `when` the new image
    /// satisfies and the old one did not (absent, bad input, or false).
    /// An image whose effect cannot be computed is bad input as a whole
    /// ([`FileModel::once_asked`]); one the rules reject (`rejected`: the
    /// old and the new image, for any of its rules) starts nothing (its
    /// aspects say why), and an old one so counts as nothing.
    pub fn once_messages(&'static self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        let rules = super::rules::FileRules(self);
        let images = Images::of(self, change);
        let rejected = rules.rejected(&images);
        self.once_messages_of(&images, rejected)
    }

    /// [`FileModel::once_messages`] of a record's images, each parsed and
    /// asked once.
    pub(super) fn once_messages_of(
        &self,
        images: &Images<'_, '_>,
        rejected: [bool; 2],
    ) -> Result<Vec<OutMessage>, InputError> {
        // (A new image the rules reject is bad input of the record's
        // aspects, said there once.)
        if self.once.is_empty() || images.change.kind == ChangeKind::Remove || rejected[1] {
            return Ok(vec![]);
        }
        let Some(asked) = images.once_new() else {
            return Ok(vec![]);
        };
        let asked = asked.as_ref().map_err(Clone::clone)?;
        let before: &[(usize, String)] = match (rejected[0], images.once_old()) {
            (false, Some(Ok(before))) => before,
            _ => &[],
        };
        Ok(asked
            .iter()
            .filter(|(i, _)| !before.iter().any(|(j, _)| j == i))
            .map(|(i, body)| OutMessage {
                queue: self.once[*i].queue.logical,
                body: body.clone(),
            })
            .collect())
    }

    /// The effects an image of a source asks for (its `when` holds), each
    /// computed as its job will be: the once key, each `require`, `put`
    /// and `delete` (keys DynamoDB can hold), the body within its limit.
    /// One that cannot be, or a `when` that fails, makes the image bad
    /// input as a whole (README, `once:`): none of its effects applies.
    /// Not a writer's valid image: none.
    pub(super) fn once_asked(
        &self,
        parsed: Result<&Parsed<'_>, &InputError>,
        image: &Item,
    ) -> Result<Asked, InputError> {
        let Ok(Parsed::Writer(rec)) = parsed else {
            return Ok(vec![]);
        };
        let mut out = Vec::new();
        for (i, spec) in self.once.iter().enumerate() {
            if !std::ptr::eq(&self.entities[spec.source], rec.entity) {
                continue;
            }
            let bad = |e: String| self.bad(rec, image, format!("once `{}`: {e}", spec.name));
            let vals = values_of(spec, rec);
            if !holds(self, &spec.when, &vals).map_err(bad)? {
                continue;
            }
            plan_of_values(self, spec, &vals).map_err(bad)?;
            let values = spec
                .reads
                .iter()
                .filter_map(|n| vals.iter().find(|(k, _)| k == n))
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect();
            let body = crate::engine::body::encode(
                &OnceJob {
                    once: spec.name.to_string(),
                    values,
                },
                VERSION,
            );
            if body.len() > MAX_BODY_BYTES {
                return Err(bad(format!(
                    "its job is {} bytes, over the {MAX_BODY_BYTES}-byte limit",
                    body.len()
                )));
            }
            out.push((i, body));
        }
        Ok(out)
    }
}

impl FileModel {
    /// The once effects whose `put` writes `entity`.
    pub fn once_putting(&self, entity: &str) -> Vec<&OnceSpec> {
        self.once
            .iter()
            .filter(|o| o.put.iter().any(|w| self.entities[w.entity].name == entity))
            .collect()
    }

    /// The effect of `spec` a source item asks for, whatever its `when`
    /// says now (an effect happens once and stays when `when` turns false,
    /// and the values its puts carry may be gone then): its once key, the
    /// keys its puts write, and whether `when` holds now. `None`: not a
    /// valid item of the effect's source entity, or its key cannot be
    /// computed.
    pub fn once_of_source(&self, spec: &OnceSpec, item: &Item) -> Option<OnceAsked> {
        let Ok(Parsed::Writer(rec)) = self.parse(item) else {
            return None;
        };
        if !std::ptr::eq(&self.entities[spec.source], rec.entity) {
            return None;
        }
        let vals = values_of(spec, &rec);
        let once_key = once_key(self, spec, &vals).ok()?;
        // Only the values the keys read: a put's other values may fail.
        let puts = spec
            .put
            .iter()
            .filter_map(|w| {
                let t = &self.entities[w.entity];
                let binders: Vec<&str> = t
                    .key
                    .iter()
                    .flat_map(|k| k.template.binders().map(|b| b.name.as_str()))
                    .collect();
                let with = w.with.iter().filter(|(n, _)| binders.contains(&n.as_str()));
                key_of(self, t, with, &vals).ok().map(|(k, _)| k)
            })
            .collect();
        Some(OnceAsked {
            once_key,
            puts,
            holds: holds(self, &spec.when, &vals).unwrap_or(false),
        })
    }
}

impl FileModel {
    /// Whether `change` may make a `require` hold that an effect waits for
    /// ([`OncePlan::waits`]): an item of an entity a `require` of another
    /// entity's effect names, created (`exists`, `equals`), removed
    /// (`absent: true`) or with the compared attribute changed (`equals`).
    pub fn awaited(&self, change: &Change) -> bool {
        if self.once.is_empty() {
            return false;
        }
        let [pkn, skn] = self.key_names();
        let (Ok(pk), Ok(sk)) = (change.keys.s(pkn), change.keys.s(skn)) else {
            return false;
        };
        let Some((entity, _)) = self.classify(pk, sk) else {
            return false;
        };
        let changed = |a: &str| match (&change.old, &change.new) {
            (Some(o), Some(n)) => o.get(a) != n.get(a),
            _ => true,
        };
        self.once.iter().any(|spec| {
            spec.require.iter().any(|r| {
                r.entity != spec.source
                    && std::ptr::eq(&self.entities[r.entity], entity)
                    && match (&r.cond, change.kind) {
                        (RequireCond::Absent, kind) => kind == ChangeKind::Remove,
                        (_, ChangeKind::Insert) => true,
                        (RequireCond::Equals(a, _), ChangeKind::Modify) => changed(a),
                        _ => false,
                    }
            })
        })
    }

    /// Whether some effect may wait for an item (a `require` of another
    /// entity than its source's): the derive then reads waiting notes.
    pub fn awaits(&self) -> bool {
        self.once
            .iter()
            .any(|spec| spec.require.iter().any(|r| r.entity != spec.source))
    }

    /// The logical queue of once jobs named `queue` (as a waiting note
    /// keeps it); `None`: no effect of this model sends there.
    pub fn once_queue(&self, queue: &str) -> Option<&'static str> {
        (self.once.iter())
            .map(|spec| spec.queue.logical)
            .find(|q| *q == queue)
    }
}

/// What a source item asks of a once effect ([`FileModel::once_of_source`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OnceAsked {
    pub once_key: String,
    /// The keys of the items its puts write.
    pub puts: Vec<Item>,
    /// Whether its `when` holds now.
    pub holds: bool,
}

/// The consumer of one `once:` entry.
#[derive(Debug, Clone, Copy)]
pub struct FileOnce {
    pub model: &'static FileModel,
    pub spec: &'static OnceSpec,
}

impl FileOnce {
    /// The effect of a body (bad body: a permanent failure).
    pub fn plan_of(&self, body: &str) -> Result<OncePlan, MessageError> {
        let job: OnceJob = crate::engine::body::decode(body, VERSION, MAX_BODY_BYTES)?;
        if job.once != self.spec.name {
            return Err(MessageError::invalid(format!(
                "a job of `{}` on the queue of `{}`",
                job.once, self.spec.name
            )));
        }
        let mut vals: Vals = Vec::with_capacity(job.values.len());
        for (k, v) in &job.values {
            if !self.spec.reads.contains(k) {
                return Err(MessageError::invalid(format!("unknown value `{k}`")));
            }
            vals.push((k.clone(), from_json(k, v).map_err(MessageError::invalid)?));
        }
        plan(self.model, self.spec, &vals).map_err(MessageError::invalid)
    }
}

impl Once for FileOnce {
    fn name(&self) -> &'static str {
        self.spec.name
    }

    fn key_names(&self) -> &'static [&'static str] {
        self.model.keys
    }

    fn queue(&self) -> &'static str {
        self.spec.queue.logical
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        _reads: &'a Reads,
    ) -> BoxFut<'a, Result<OncePlan, MessageError>> {
        Box::pin(async move { self.plan_of(body) })
    }
}

#[cfg(test)]
mod number_tests {
    use super::{from_json, to_json, Val};
    use crate::file::number::Number;

    /// A once job carries a fraction as its exact text (a JSON number would
    /// be read back as a double), and reads it back equal.
    #[test]
    fn a_number_travels_in_a_once_message_exactly() {
        for v in [
            Val::number(Number::parse("0.30000000000000000001").unwrap()),
            Val::number(Number::parse("12.1").unwrap()),
            Val::Int(7),
        ] {
            let json = to_json(&v);
            let back = serde_json::from_str(&json.to_string()).unwrap();
            assert_eq!(from_json("n", &back), Ok(v), "{json}");
        }
        let forged = serde_json::json!({ "number": "1e999" });
        assert!(from_json("n", &forged).unwrap_err().contains("`n`"));
        assert!(from_json("n", &serde_json::json!({ "a": 1 })).is_err());
    }
}
