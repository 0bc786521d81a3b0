//! Outcomes recorded under `tests/fixtures/recorded/`: what the compiled
//! models produced before they retired (SPEC §8.1), which their shipped
//! files must still produce (the same deployed definitions, the same table
//! attribute for attribute, the same writes, the same `verify` findings and
//! repairs), and the harness each model's recorded tests call with its
//! name: [`deploys`], [`scenario`], and the
//! faults helpers ([`inject_faults`], [`redelivered`], [`settled`]).
//!
//! `JOBSTREAM_RECORD=1 cargo test ...` writes the outcomes instead of
//! comparing them: re-record only for an intended change, and review the
//! diff.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::faults::{Fault, FaultProxy};
use jobstream::local::engine::LocalEngine;
use jobstream::local::runtime::Runtime;
use serde_json::{json, Value};
use shared::change::{Change, ChangeKind, Origin, SequenceNumber};
use shared::engine::rules::{Aspects, Counter, Rules};
use shared::file::scenario::{attr, item, play_model, Scenario};
use shared::item::{key_of, Item, ItemExt};
use shared::metrics::names;
use shared::models::Harness as _;

use crate::support::{model_env, ModelEnv};

/// A table by key (partition key, sort key).
pub type Table = BTreeMap<(String, String), Item>;

/// A shipped model's file on disk: `models/<name>.yaml`.
pub fn model_file(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")).join(format!("{name}.yaml"))
}

/// Every item of the runtime's table by its model's key attributes.
pub async fn scan(rt: &Runtime) -> Table {
    let (pk, sk) = (rt.model.table.pk, rt.model.table.sk);
    jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.table)
        .await
        .expect("scan")
        .into_iter()
        .map(|i| {
            let k = (i.s(pk).unwrap_or_default(), i.s(sk).unwrap_or_default());
            ((k.0.to_string(), k.1.to_string()), i)
        })
        .collect()
}

/// `--model NAME` deploys what the compiled model deployed: the shipped file
/// checks, the name runs `models/NAME.yaml` (embedded byte for byte),
/// `jobstream tables` gives the
/// definition infra/tables.json holds, and its table, stream and queue
/// consumers (names, settings, grants) are the recorded `NAME-deploys`.
pub fn deploys(name: &str) {
    shared::file::check(&model_file(name)).expect("checks");
    let of = |m| jobstream::tools::deploy::definitions_of(&[m]);
    let by_name = of(shared::models::find(name).expect("shipped"));
    let file = shared::models::Source::File(model_file(name));
    let by_file = of(shared::models::load(&file).expect("loads"));
    assert_eq!(by_file, by_name, "--model {name} is models/{name}.yaml");
    // The embedded copy of models/NAME.yaml, byte for byte; a file is
    // compiled once per process.
    let shipped = shared::models::file_of(&shared::models::Source::Name(name.into()));
    let loaded = shared::file::load(&model_file(name)).expect("loads");
    assert!(std::ptr::eq(
        loaded,
        shared::file::load(&model_file(name)).expect("loads")
    ));
    assert_eq!(loaded.sha256.len(), 64);
    assert_eq!(
        shipped.expect("shipped").sha256,
        loaded.sha256,
        "{name}: embedded"
    );
    assert_eq!(by_name["defaultModel"], name);
    let path = format!("{}/../infra/tables.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).expect("infra/tables.json");
    let stack: Value = serde_json::from_str(&text).expect("JSON");
    for part in ["ledger", "metrics", "stackNames"] {
        assert_eq!(by_name[part], stack[part], "{part}");
    }
    let models = stack["models"].as_array().expect("models");
    let deployed = models.iter().find(|m| m["name"] == name).expect("deployed");
    let m = &by_name["models"][0];
    assert_eq!(m, deployed, "infra/tables.json holds --model {name}");
    let parts = ["table", "streamConsumers", "queueConsumers"];
    let mut got: serde_json::Map<String, Value> = parts
        .iter()
        .map(|p| (p.to_string(), m[p].clone()))
        .collect();
    // The compiled models deployed every index projecting ALL, unsaid; a
    // definition says its projection now (gsiproj11): ALL is what was
    // recorded, anything else differs.
    if let Some(gsis) = got["table"]["gsis"].as_array_mut() {
        for g in gsis {
            if g["projection"] == serde_json::json!({ "projectionType": "ALL" }) {
                g.as_object_mut().expect("a gsi").remove("projection");
            }
        }
    }
    check(&format!("{name}-deploys"), &Value::Object(got));
}

/// How [`scenario`] plays a shipped model's scenario and what it records.
pub struct Play {
    pub model: &'static str,
    /// How many parts (the opening writes, then each step) to play.
    pub parts: usize,
    /// The table as recorded (what varies run to run blanked), or `None`
    /// when the test asserts on it itself.
    pub table: Option<fn(&Table) -> Value>,
    /// How far each part's processor writes may be from the recorded ones
    /// (the batches' regrouping).
    pub writes_slack: u64,
}

impl Play {
    /// Every part, the table recorded as it is, the writes exact.
    pub fn all(model: &'static str) -> Self {
        Self {
            model,
            parts: usize::MAX,
            table: Some(plain),
            writes_slack: 0,
        }
    }
}

/// The table as recorded: every attribute as it is.
pub fn plain(t: &Table) -> Value {
    table_json(t)
}

/// What [`scenario`] played: the model's runtime and its table at the end.
pub struct Played {
    pub env: ModelEnv,
    pub table: Table,
}

/// Plays `models/<model>.scenario.yaml` (its first `parts`) through
/// `--model <model>`, one poller per queue and the streams drained before
/// the queues (a count of the model, not of an interleaving): every part's
/// expectations met; a fixpoint (draining again writes nothing); `verify`
/// clean; nothing dead-lettered or given up; the whole stream delivered
/// again changes and writes nothing; and the recorded `<model>-scenario`:
/// the processor writes after each part, the `verify` report, the bad input
/// (listed and counted by each stream processor) and the table.
pub async fn scenario(p: Play) -> Played {
    let model = p.model;
    let path = model_file(model).with_file_name(format!("{model}.scenario.yaml"));
    let mut whole = Scenario::read(&path).expect("the scenario reads");
    let loaded = shared::file::load(&model_file(model)).expect("loads");
    let mut env = model_env(model, |o| {
        o.queue_concurrency = Some(1);
        o.drain_in_phases = true;
    })
    .await;
    assert_eq!(env.rt.model.name, model);
    let steps = std::mem::take(&mut whole.steps);
    let mut parts = vec![whole];
    parts.extend(steps.into_iter().map(|step| Scenario {
        steps: vec![step],
        ..Scenario::default()
    }));
    let mut writes = Vec::new();
    for part in parts.iter().take(p.parts) {
        let diffs = play_model(&mut env.rt, part, &loaded.model, false)
            .await
            .expect("plays");
        assert!(diffs.is_empty(), "{model}: {diffs:#?}");
        writes.push(env.rt.processor_writes());
    }
    assert_eq!(
        env.rt.drain().await.expect("drains"),
        0,
        "{model}: a fixpoint"
    );
    let table = scan(&env.rt).await;
    let report = settled(&mut env.rt).await;
    let processors = env.rt.model.stream_processors();
    let bad_input = |s: &&str| env.rt.stream_processor(s).metrics().get(names::BAD_INPUT);
    let counted: Vec<u64> = processors.iter().map(bad_input).collect();
    redelivered(&env.engine, &mut env.rt, &table).await;
    let mut got = json!({
        "verify": report.render(),
        "badInput": report.bad_input,
        "badInputCounted": counted,
        "writes": writes,
    });
    if let Some(f) = p.table {
        got["table"] = f(&table);
    }
    let record = format!("{model}-scenario");
    if !recording() && p.writes_slack > 0 {
        // Writes vary by the batches' regrouping: compared apart.
        let want = recorded(&record)["writes"].clone();
        let want: Vec<u64> = serde_json::from_value(want).expect("writes");
        println!("processor writes: recorded {want:?}, now {writes:?}");
        assert_eq!(want.len(), writes.len(), "{model}: parts");
        for (w, g) in want.iter().zip(&writes) {
            assert!(
                w.abs_diff(*g) <= p.writes_slack,
                "{model}: writes {g}, recorded {w}"
            );
        }
        got["writes"] = json!(want);
    }
    check(&record, &got);
    Played { env, table }
}

/// `verify` clean, nothing dead-lettered, no batch given up: the report.
pub async fn settled(rt: &mut Runtime) -> jobstream::tools::verify::Report {
    let report = Runtime::verify(rt).await.expect("verify");
    assert!(report.is_clean(), "{:#?}", report.problems);
    let dead = rt.dead_letters().await.expect("dead letters");
    assert!(dead.is_empty(), "dead letters: {dead:?}");
    assert!(rt.failed_batches().is_empty(), "{:?}", rt.failed_batches());
    report
}

/// Every stream record delivered again to every stream processor (Lambda's
/// at-least-once), the jobs it starts run again: the table stays `table`
/// and nothing is written. How many records were delivered again.
pub async fn redelivered(engine: &LocalEngine, rt: &mut Runtime, table: &Table) -> usize {
    let writes = rt.processor_writes();
    let records = crate::support::records_of(engine, rt).await;
    for name in rt.model.stream_processors() {
        let event = crate::items::records_event(&records);
        let resp = rt
            .stream_processor(name)
            .handle(event)
            .await
            .expect("handled");
        assert!(resp.batch_item_failures.is_empty(), "{name}");
    }
    rt.drain().await.expect("drain");
    assert_eq!(&scan(rt).await, table, "redelivery changes nothing");
    assert_eq!(rt.processor_writes(), writes, "and writes nothing");
    records.len()
}

/// `verify` on a table whose derived items were forged: what it finds
/// (its `comparable` problems, sorted), how many repairs ran, and what it
/// finds once they ran and the processors drained.
pub async fn repaired(rt: &mut Runtime, comparable: fn(&&String) -> bool) -> Value {
    let sorted = |r: &jobstream::tools::verify::Report| {
        let mut v: Vec<&String> = r.problems.iter().filter(comparable).collect();
        v.sort();
        json!(v)
    };
    let report = Runtime::verify(rt).await.expect("verify");
    let repaired = crate::items::repair(&rt, &report).await;
    rt.drain().await.expect("drain");
    let after = Runtime::verify(rt).await.expect("verify");
    json!({ "found": sorted(&report), "repaired": repaired, "left": sorted(&after) })
}

/// Faults on every kind of call the processors make, some after the
/// request took effect (its answer lost).
pub fn inject_faults(proxy: &FaultProxy) {
    proxy.inject(Fault::throttle("TransactWriteItems", 3).after(2));
    proxy.inject(Fault::server_error("TransactWriteItems", 2).after(8));
    proxy.inject(
        Fault::server_error("TransactWriteItems", 1)
            .after(5)
            .after_effect(),
    );
    proxy.inject(Fault::server_error("UpdateItem", 2).after(3));
    proxy.inject(Fault::reset("UpdateItem", 1).after(4).after_effect());
    proxy.inject(Fault::throttle("BatchGetItem", 2).after(1));
    proxy.inject(Fault::server_error("Query", 2).after(3));
    proxy.inject(Fault::throttle("BatchWriteItem", 1).after(1));
}

/// How [`rules`] varies each fixture, one thing at a time.
pub struct Mutations {
    /// The values every attribute but the keys takes in turn (besides
    /// being removed).
    pub values: Vec<AttributeValue>,
    /// Named attributes set to a value (whether or not the item has one).
    pub sets: Vec<(String, AttributeValue)>,
    /// Text replaced in the partition key, in the sort key and in both
    /// (each where it occurs).
    pub keys: Vec<(String, String)>,
}

impl Mutations {
    /// Each of `item`'s variations: an attribute removed or set, a key
    /// changed, a key with something after it.
    fn of(&self, item: &Item, [pk, sk]: [&str; 2]) -> Vec<Item> {
        let with = |attr: &str, v: Option<&AttributeValue>| {
            let mut i = item.clone();
            match v {
                Some(v) => i.insert(attr.to_string(), v.clone()),
                None => i.remove(attr),
            };
            i
        };
        let mut attrs: Vec<&String> = item
            .keys()
            .filter(|k| ![pk, sk].contains(&k.as_str()))
            .collect();
        attrs.sort();
        let mut out = Vec::new();
        for a in attrs {
            out.push(with(a, None));
            out.extend(self.values.iter().map(|v| with(a, Some(v))));
        }
        out.extend(self.sets.iter().map(|(a, v)| with(a, Some(v))));
        let (p, s) = (
            item.s(pk).unwrap_or_default(),
            item.s(sk).unwrap_or_default(),
        );
        let mut keys = vec![
            (format!("{p}x"), s.to_string()),
            (p.to_string(), format!("{s}#x")),
        ];
        for (from, to) in &self.keys {
            let (p2, s2) = (p.replace(from, to), s.replace(from, to));
            keys.extend([
                (p2.clone(), s.to_string()),
                (p.to_string(), s2.clone()),
                (p2, s2),
            ]);
        }
        keys.sort();
        keys.dedup();
        for (p2, s2) in keys
            .into_iter()
            .filter(|k| k != &(p.to_string(), s.to_string()))
        {
            let mut i = item.clone();
            i.insert(pk.into(), AttributeValue::S(p2));
            i.insert(sk.into(), AttributeValue::S(s2));
            out.push(i);
        }
        out
    }
}

/// A change of one item, as the stream gives it (event `ev`).
pub fn change(
    kind: ChangeKind,
    old: Option<Item>,
    new: Option<Item>,
    keys: &[&str],
    ev: &str,
) -> Change {
    let image = new.as_ref().or(old.as_ref()).expect("one image");
    Change {
        event_id: ev.into(),
        sequence_number: SequenceNumber::parse("1").expect("valid"),
        kind,
        origin: Origin::User,
        keys: key_of(image, keys),
        old,
        new,
        at: chrono::DateTime::from_timestamp(1_767_225_600, 0).expect("a time"),
    }
}

/// Values as JSON text (maps sorted).
fn values<'a>(v: impl IntoIterator<Item = (&'a str, Option<&'a AttributeValue>)>) -> String {
    let m: BTreeMap<&str, Value> = v
        .into_iter()
        .map(|(k, v)| (k, v.map_or(Value::Null, attr_json)))
        .collect();
    json!(m).to_string()
}

/// What `r` makes of an item (and of its insert, remove and modify from
/// `old`): each aspect, errors as "bad" (or "waits": a computed value not
/// there yet).
pub fn aspects(r: &dyn Rules, item: &Item, old: Option<&Item>) -> Vec<String> {
    // The derive processor asks every aspect at once (one parse of a
    // file's image): the same as each asked on its own.
    let each = Aspects {
        projection: r.projection(item),
        derived: r.derived(item),
        contributions: r.contributions(item),
        memberships: r.memberships(item),
    };
    assert_eq!(
        r.aspects(item),
        each,
        "aspects at once differ from each on its own"
    );
    // (An aspect waiting for a `compute:` value not computed yet is no
    // bad input: told apart.)
    let bad = |e: shared::error::InputError| if e.waits() { "waits" } else { "bad" };
    let item_text = |i: &Item| values(i.iter().map(|(k, v)| (k.as_str(), Some(v))));
    let counter = |c: &Counter| {
        let create = c
            .create
            .as_ref()
            .map(|v| values(v.iter().map(|(k, v)| (*k, Some(v)))));
        format!("{:?} {:?} {create:?} {}", c.key, c.attrs, c.remove_at_zero)
    };
    let projection = each.projection.map_err(bad).map(|p| {
        p.map(|p| {
            (
                values(p.attrs.iter().map(|(k, v)| (*k, v.as_ref()))),
                p.sources,
            )
        })
    });
    let keys = r.key_names();
    let mut out = vec![
        format!(
            "derived {:?}",
            each.derived
                .map(|v| v.iter().map(item_text).collect::<Vec<_>>())
                .map_err(bad)
        ),
        format!(
            "contributions {:?}",
            each.contributions
                .map(|v| v
                    .iter()
                    .map(|c| format!("{} {:?}", counter(&c.counter), c.values))
                    .collect::<Vec<_>>())
                .map_err(bad)
        ),
        format!("projection {projection:?}"),
        format!(
            "notes {:?}",
            r.notes(item).iter().map(|n| n.metric).collect::<Vec<_>>()
        ),
        format!("counter {:?}", r.counter(item).map(|c| counter(&c))),
        format!("ignores {}", r.ignores(&key_of(item, keys))),
        format!("memberships {:?}", each.memberships.map_err(bad)),
    ];
    let modified = old.unwrap_or(item).clone();
    let kinds = [
        change(ChangeKind::Insert, None, Some(item.clone()), keys, "ev"),
        change(ChangeKind::Remove, Some(item.clone()), None, keys, "ev"),
        change(
            ChangeKind::Modify,
            Some(modified),
            Some(item.clone()),
            keys,
            "ev",
        ),
    ];
    for c in kinds {
        let jobs = r.messages(&c).map(|ms| {
            let body =
                |b: &str| serde_json::from_str::<Value>(b).map_or(b.to_string(), |v| v.to_string());
            ms.iter()
                .map(|m| format!("{} {}", m.queue, body(&m.body)))
                .collect::<Vec<_>>()
        });
        out.push(format!("messages {:?} {:?}", c.kind, jobs.map_err(bad)));
    }
    out
}

/// A model's fixtures and their mutations as data,
/// `tests/fixtures/rules/<model>.json` (items as a scenario writes them).
pub fn cases(model: &str) -> (Vec<Item>, Mutations) {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/rules"));
    let path = path.join(format!("{model}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("JSON");
    let list = |k: &str| v[k].as_array().cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().expect("text").to_string();
    let fixtures = list("fixtures")
        .iter()
        .map(|f| item(f.as_object().expect("an item")))
        .collect();
    let mutations = Mutations {
        values: list("values").iter().map(attr).collect(),
        sets: list("sets")
            .iter()
            .map(|p| (text(&p[0]), attr(&p[1])))
            .collect(),
        keys: list("keys")
            .iter()
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
    };
    (fixtures, mutations)
}

/// The shipped model's rules on every fixture and each of its mutations
/// (inserted, removed, modified from nothing and from the fixture): what
/// was recorded as `<model>-rules`, case by case (the item and whether it
/// was modified from the fixture: each aspect). Some cases are bad input,
/// some are not.
pub fn rules(model: &str, (fixtures, mutations): (Vec<Item>, Mutations)) {
    let m = shared::models::find(model).expect("shipped");
    let r = m.rules.as_ref();
    let [pk, sk] = [m.table.pk, m.table.sk];
    let mut cases = BTreeMap::new();
    for f in &fixtures {
        let mut items = vec![f.clone()];
        items.extend(mutations.of(f, [pk, sk]));
        for item in items {
            for old in [None, Some(f)] {
                let case = format!(
                    "{} {}",
                    values(item.iter().map(|(k, v)| (k.as_str(), Some(v)))),
                    old.is_some()
                );
                cases.insert(case, aspects(r, &item, old));
            }
        }
    }
    let bad = cases.values().filter(|a| a[2].contains("Err")).count();
    assert!(
        cases.len() > 100 && bad > 0 && bad < cases.len(),
        "{model}: {} cases, {bad} bad",
        cases.len()
    );
    check(&format!("{model}-rules"), &json!(cases));
}

fn path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/recorded"))
        .join(format!("{name}.json"))
}

/// Whether this run records instead of comparing.
pub fn recording() -> bool {
    std::env::var_os("JOBSTREAM_RECORD").is_some()
}

/// An attribute value as JSON (`S` a string, `N` a number, maps and lists
/// as such; sets as lists).
pub fn attr_json(v: &AttributeValue) -> Value {
    match v {
        AttributeValue::S(s) => Value::String(s.clone()),
        AttributeValue::N(n) => serde_json::from_str(n).unwrap_or(Value::String(n.clone())),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::M(m) => Value::Object(
            m.iter()
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .map(|(k, v)| (k.clone(), attr_json(v)))
                .collect(),
        ),
        AttributeValue::L(l) => Value::Array(l.iter().map(attr_json).collect()),
        AttributeValue::Ss(l) => Value::Array(l.iter().cloned().map(Value::String).collect()),
        other => Value::String(format!("{other:?}")),
    }
}

/// A table by key (`PK SK`), each item's attributes as JSON.
pub fn table_json<M>(t: &BTreeMap<(String, String), M>) -> Value
where
    for<'a> &'a M: IntoIterator<Item = (&'a String, &'a AttributeValue)>,
{
    Value::Object(
        t.iter()
            .map(|((pk, sk), attrs)| {
                let item = attrs
                    .into_iter()
                    .map(|(k, v)| (k.clone(), attr_json(v)))
                    .collect();
                (format!("{pk} {sk}"), Value::Object(item))
            })
            .collect(),
    )
}

/// What was recorded as `name`.
pub fn recorded(name: &str) -> Value {
    let p = path(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("recorded json")
}

/// Records `got` as `name` (when [`recording`]) or asserts it equals what
/// was recorded.
pub fn check(name: &str, got: &Value) {
    let p = path(name);
    if recording() {
        let text = serde_json::to_string_pretty(got).expect("json") + "\n";
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        return;
    }
    let want = recorded(name);
    if &want != got {
        if let (Value::Array(w), Value::Array(g)) = (&want, got) {
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                assert_eq!(g, w, "{name}: entry {i} differs from the recording");
            }
            assert_eq!(g.len(), w.len(), "{name}: entries recorded");
        }
        if let (Value::Object(w), Value::Object(g)) = (&want, got) {
            for (k, v) in w {
                assert_eq!(
                    g.get(k),
                    Some(v),
                    "{name}: `{k}` differs from the recording"
                );
            }
            for k in g.keys() {
                assert!(w.contains_key(k), "{name}: `{k}` was not recorded");
            }
        }
        assert_eq!(got, &want, "{name}: differs from {}", p.display());
    }
}
