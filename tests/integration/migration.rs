//! Issue 26: a table the compiled models kept goes on exactly under the
//! model files. Each seed was a compiled Rust model until 2026-11-27; a user
//! who deployed it upgrades to the file on the same table and ledger, with
//! the derived items and ledger records the compiled code wrote and, maybe,
//! its stream records still in the shard (delivered again) and its jobs
//! still in the queues.
//!
//! `tests/fixtures/migration/<model>.json` is what the compiled model left
//! after its demo (how they were made: that folder's README): the table, the
//! ledger, every stream record its processors consumed (Lambda event shape)
//! and every queue message its consumers received. Per seed, the fixture is
//! loaded into a fresh table and ledger without the processors seeing the
//! loads (they start at LATEST, as a stack deployed next to a table in use),
//! then, under the file model, three ways:
//!
//! - as deployed: (a) `verify` is clean (the job board and Pick'Em: but for
//!   what [`UPGRADE_STEP`] lists, then `verify --repair`), then (c) further
//!   writes of the scenario's kind end exact (their counters, history
//!   numbers and mirrors; `verify` clean, nothing dead-lettered);
//! - after the README's upgrade step (`backfill`, then `verify --repair`):
//!   the table is the fixture's still, then (b) the compiled era's stream
//!   records delivered again to every stream processor write nothing, its
//!   jobs are refused (their bodies are the compiled model's, see the
//!   README) and change nothing, then (c);
//! - (b) before the step: the table unchanged (the ledger too, but where
//!   the compiled model kept other records than the file), then `verify
//!   --repair` and (c).

use std::collections::BTreeMap;

use jobstream::local::esm::StartingPosition;
use jobstream::tools::backfill::ScanOptions;
use serde_json::Value;
use shared::item::{s, Item, ItemExt};

use crate::items::{
    assert_exact, attrs, get, invoke, invoke_jobs, put_all_into, records_event, scan, sqs_event,
};
use crate::support::{model_env, redeploy_model, ModelEnv};

/// What `verify` reports on a table the compiled model left, per seed (the
/// README's upgrade step repairs it). The compiled Pick'Em counted each
/// event's matches into ledger totals (`SK=MATCHES`) no counter of the file
/// has, and listed an event's predictions in a ledger index of its own: the
/// file finds them through its `compute:` index, which lacks them (without
/// them, a match's new result rescores no prediction made before the
/// upgrade).
const UPGRADE_STEP: &[(&str, &[&str])] = &[
    (
        "jobboard",
        &[
            "index: pk=seeker#s1, sk=profile: not listed in the ledger index suggestions#seeker#city#montreal",
            "index: pk=seeker#s2, sk=profile: not listed in the ledger index suggestions#seeker#city#montreal",
            "index: pk=seeker#s3, sk=profile: not listed in the ledger index suggestions#seeker#city#toronto",
        ],
    ),
    (
    "pickem",
    &[
        "index: PK=USER#alex, SK=EVENT#2024-03-03-aew-revolution: not listed in the ledger index compute#scoring#EVENT#2024-03-03-aew-revolution",
        "index: PK=USER#alex, SK=EVENT#2024-05-26-aew-double-or-nothing: not listed in the ledger index compute#scoring#EVENT#2024-05-26-aew-double-or-nothing",
        "index: PK=USER#jo, SK=EVENT#2024-03-03-aew-revolution: not listed in the ledger index compute#scoring#EVENT#2024-03-03-aew-revolution",
        "index: PK=USER#sam, SK=EVENT#2024-03-03-aew-revolution: not listed in the ledger index compute#scoring#EVENT#2024-03-03-aew-revolution",
        "index: PK=USER#sam, SK=EVENT#2024-05-26-aew-double-or-nothing: not listed in the ledger index compute#scoring#EVENT#2024-05-26-aew-double-or-nothing",
        "ledger: totals of PK=EVENT#2024-03-03-aew-revolution, SK=MATCHES: no counter of the model has this key any more",
        "ledger: totals of PK=EVENT#2024-05-26-aew-double-or-nothing, SK=MATCHES: no counter of the model has this key any more",
    ],
    ),
];

/// What a compiled model left after its demo.
pub(crate) struct Fixture {
    pub(crate) table_name: String,
    pub(crate) ledger_table_name: String,
    pub(crate) table: Vec<Item>,
    pub(crate) ledger: Vec<Item>,
    /// Every stream record its processors consumed, as Lambda delivered them.
    pub(crate) stream: Vec<Value>,
    /// Every (queue, body) its queue consumers received.
    pub(crate) jobs: Vec<(String, String)>,
    /// Models with queues: writes made after the demo that the compiled
    /// derive read, whose jobs no consumer received.
    pub(crate) in_flight: Option<InFlight>,
}

/// What writes read by the compiled derive left, their jobs still queued.
pub(crate) struct InFlight {
    /// Table items new or changed, and the keys deleted.
    pub(crate) table: (Vec<Item>, Vec<Item>),
    /// Ledger items new or changed, and the keys deleted.
    pub(crate) ledger: (Vec<Item>, Vec<Item>),
    /// The (queue, body) of each job left in a queue.
    pub(crate) jobs: Vec<(String, String)>,
}

fn items(v: &Value) -> Vec<Item> {
    let list = v.as_array().expect("a list of items");
    list.iter()
        .map(|i| {
            let item: serde_dynamo::Item = serde_json::from_value(i.clone()).expect("an item");
            item.into()
        })
        .collect()
}

fn fixture(model: &str) -> Fixture {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/migration")
        .join(format!("{model}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("fixture json");
    let text_of = |k: &str| v[k].as_str().expect(k).to_string();
    let job = |j: &Value| {
        let field = |k: &str| j[k].as_str().expect(k).to_string();
        (field("queue"), field("body"))
    };
    let jobs = |v: &Value| v.as_array().expect("jobs").iter().map(job).collect();
    let changes = |v: &Value| (items(&v["put"]), items(&v["deleted"]));
    let f = &v["in_flight"];
    let in_flight = (!f.is_null()).then(|| InFlight {
        table: changes(&f["table"]),
        ledger: changes(&f["ledger"]),
        jobs: jobs(&f["jobs"]),
    });
    Fixture {
        table_name: text_of("table_name"),
        ledger_table_name: text_of("ledger_table_name"),
        table: items(&v["table"]),
        ledger: items(&v["ledger"]),
        stream: v["stream"].as_array().expect("stream").clone(),
        jobs: jobs(&v["jobs"]),
        in_flight,
    }
}

/// Items by their (partition, sort) key under these attribute names.
fn by_key<'a>(items: &'a [Item], pk: &str, sk: &str) -> BTreeMap<String, &'a Item> {
    let a = |i: &Item, name: &str| i.s(name).unwrap_or_default().to_string();
    items
        .iter()
        .map(|i| (format!("{} | {}", a(i, pk), a(i, sk)), i))
        .collect()
}

/// Each key of `want` or `got` whose item is missing, extra or different.
fn differences(want: &[Item], got: &[Item], pk: &str, sk: &str) -> Vec<String> {
    let (w, g) = (by_key(want, pk, sk), by_key(got, pk, sk));
    let mut diffs = Vec::new();
    for (k, wi) in &w {
        match g.get(k) {
            None => diffs.push(format!("missing {k}")),
            Some(gi) if gi != wi => diffs.push(format!("changed {k}: {wi:?} -> {gi:?}")),
            Some(_) => {}
        }
    }
    for k in g.keys().filter(|k| !w.contains_key(*k)) {
        diffs.push(format!("extra {k}: {:?}", g[k]));
    }
    diffs
}

pub(crate) async fn scan_ledger(env: &ModelEnv) -> Vec<Item> {
    let rt = &env.rt;
    jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.ledger_table)
        .await
        .expect("ledger scan")
}

/// The table's (PK, SK) attribute names.
fn table_keys(env: &ModelEnv) -> (&'static str, &'static str) {
    (env.rt.model.table.pk, env.rt.model.table.sk)
}

/// The file model `model` deployed on the tables its compiled twin left
/// (with its jobs in flight: `in_flight`): the fixture loaded first (no
/// processor sees the loads), then the processors started at LATEST.
async fn deployed(model: &str, in_flight: bool) -> (ModelEnv, Fixture) {
    let fx = fixture(model);
    let env = model_env(model, |_| {}).await;
    assert_eq!(
        env.rt.config.table, fx.table_name,
        "{model}: the same table"
    );
    assert_eq!(
        env.rt.config.ledger_table, fx.ledger_table_name,
        "{model}: the same ledger table"
    );
    let (table, ledger) = (
        env.rt.config.table.clone(),
        env.rt.config.ledger_table.clone(),
    );
    put_all_into(&env, &table, &fx.table).await;
    put_all_into(&env, &ledger, &fx.ledger).await;
    if in_flight {
        let f = fx.in_flight.as_ref().expect("jobs in flight");
        for (name, (put, deleted)) in [(&table, &f.table), (&ledger, &f.ledger)] {
            put_all_into(&env, name, put).await;
            for k in deleted {
                let req = env.rt.dynamodb.delete_item().table_name(name.as_str());
                req.set_key(Some(k.clone())).send().await.expect("delete");
            }
        }
    }
    let mut env = redeploy_model(env, model, |o| {
        o.mapping.starting_position = StartingPosition::Latest;
    })
    .await;
    env.rt.drain().await.expect("drain");
    assert_eq!(env.rt.processor_writes(), 0, "{model}: no load was seen");
    (env, fx)
}

/// [`deployed`] (nothing in flight): asserts the tables are the fixture's,
/// item by item, and (a): `verify` finds nothing but what [`UPGRADE_STEP`]
/// says.
async fn upgraded(model: &str) -> (ModelEnv, Fixture) {
    let (env, fx) = deployed(model, false).await;
    assert_unchanged(model, &env, &fx, &fx.ledger).await;
    // (a)
    let report = env.rt.verify().await.expect("verify");
    let expected = UPGRADE_STEP
        .iter()
        .find(|(m, _)| *m == model)
        .map_or(&[][..], |(_, problems)| problems);
    assert_eq!(report.problems, expected, "{model}: verify");
    (env, fx)
}

/// The README's upgrade step: `jobstream backfill`, then `jobstream verify
/// --repair`; then `verify` is clean and nothing is dead-lettered.
async fn step(env: &mut ModelEnv) {
    crate::items::backfill(env, &ScanOptions::default()).await;
    env.rt.drain().await.expect("drain");
    repair(env).await;
}

/// `jobstream verify --repair`; then `verify` is clean and nothing is
/// dead-lettered.
async fn repair(env: &mut ModelEnv) {
    let report = env.rt.verify().await.expect("verify");
    crate::items::repair(&env.rt, &report).await;
    env.rt.drain().await.expect("drain");
    assert_exact(&mut env.rt).await;
}

/// [`step`] on the tables the compiled model left: the table is the
/// fixture's still; returns the ledger it left.
async fn upgrade_step(model: &str, env: &mut ModelEnv, fx: &Fixture) -> Vec<Item> {
    step(env).await;
    let (pk, sk) = table_keys(env);
    let table = differences(&fx.table, &scan(env).await, pk, sk);
    assert!(table.is_empty(), "{model}: the step changed {table:#?}");
    scan_ledger(env).await
}

/// The compiled model's jobs delivered to the file's consumers of their
/// queues: each refused (a body of another shape than the file's: bad
/// input, skipped with its log; one of another version: the queue's
/// redrive dead-letters it), never applied.
async fn refused(model: &str, env: &ModelEnv, jobs: &[(String, String)]) {
    use shared::metrics::names;
    let mut queues: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (q, body) in jobs {
        queues.entry(q).or_default().push(body.clone());
    }
    assert!(!queues.is_empty(), "{model}: jobs");
    for (q, bodies) in queues {
        let consumer = env.rt.consumer(q);
        let count = |name| consumer.metrics().get(name);
        let (bad, applied) = (
            count(names::BAD_INPUT),
            count(names::PROCESSED) + count(names::DUPLICATE) + count(names::SKIPPED),
        );
        for (n, batch) in bodies.chunks(10).enumerate() {
            let mut event = sqs_event(batch);
            for (i, m) in event.records.iter_mut().enumerate() {
                m.message_id = Some(format!("{q}-{n}-{i}"));
            }
            invoke_jobs(env, q, &event).await.expect("handled");
        }
        assert_eq!(
            count(names::BAD_INPUT) - bad,
            bodies.len() as u64,
            "{model} {q}: every compiled job is refused as bad input"
        );
        assert_eq!(
            count(names::PROCESSED) + count(names::DUPLICATE) + count(names::SKIPPED),
            applied,
            "{model} {q}: none is taken"
        );
    }
}

/// The table is the fixture's and the ledger is `ledger`, item by item.
async fn assert_unchanged(model: &str, env: &ModelEnv, fx: &Fixture, ledger: &[Item]) {
    let (pk, sk) = table_keys(env);
    let table = differences(&fx.table, &scan(env).await, pk, sk);
    let ledger = differences(ledger, &scan_ledger(env).await, "pk", "sk");
    assert!(
        table.is_empty() && ledger.is_empty(),
        "{model}: the table {table:#?}, the ledger {ledger:#?}"
    );
}

/// Seeds whose compiled model kept other ledger records than the file
/// keeps (HR: no owners of `dept_emp`, which the file declares `shared:`;
/// the job board and Pick'Em: their own indexes, Pick'Em its `MATCHES`
/// totals): a record of theirs delivered again before the upgrade step
/// writes the file's records in the ledger, never in the table.
const OTHER_LEDGER: &[&str] = &["hr", "jobboard", "pickem"];

/// (b) The compiled era's stream records delivered again to every stream
/// processor of the file (as the same stream's records: its ARN), in
/// batches of 100: no failure. Its jobs delivered to their queues'
/// consumers: each refused (a body of the compiled model, of another shape
/// than the file's), never applied. The table unchanged; with `ledger`, no processor write and
/// the ledger is `ledger` still.
async fn redeliver(model: &str, env: &mut ModelEnv, fx: &Fixture, ledger: Option<&[Item]>) {
    let writes = env.rt.processor_writes();
    let arn = jobstream::local::esm::stream_arn(&env.rt.dynamodb, &env.rt.config.table)
        .await
        .expect("stream");
    let records: Vec<Value> = fx
        .stream
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["eventSourceARN"] = Value::String(arn.clone());
            r
        })
        .collect();
    assert!(!records.is_empty());
    for def in env.rt.model.stream_defs() {
        for batch in records.chunks(100) {
            let resp = invoke(env, def.name, &records_event(batch))
                .await
                .expect("handled");
            let failures = resp.batch_item_failures;
            assert!(failures.is_empty(), "{model} {}: {failures:?}", def.name);
        }
    }
    if !fx.jobs.is_empty() {
        refused(model, env, &fx.jobs).await;
    }
    env.rt.drain().await.expect("drain");
    match ledger {
        Some(ledger) => {
            assert_eq!(
                env.rt.processor_writes(),
                writes,
                "{model}: the compiled era's records delivered again wrote nothing"
            );
            assert_unchanged(model, env, fx, ledger).await;
        }
        None => {
            let (pk, sk) = table_keys(env);
            let table = differences(&fx.table, &scan(env).await, pk, sk);
            assert!(table.is_empty(), "{model}: the table {table:#?}");
        }
    }
}

/// The three ways of [the module](self), each followed by (c): as
/// deployed (the job board and Pick'Em take `verify --repair` first: what
/// their `verify` finds, [`UPGRADE_STEP`]); after the upgrade step, (b);
/// (b) before the upgrade step (the ledger left as it is unless the
/// compiled model kept other records, [`OTHER_LEDGER`]), then `verify
/// --repair`.
pub(crate) async fn go_on<F, Fut>(model: &str, writes: F)
where
    F: Fn(ModelEnv, Fixture) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let needs_step = UPGRADE_STEP.iter().any(|(m, _)| *m == model);
    for way in ["as deployed", "step, replay", "replay, repair"] {
        let (mut env, fx) = upgraded(model).await;
        match way {
            "as deployed" => {
                if needs_step {
                    repair(&mut env).await;
                    assert_unchanged(model, &env, &fx, &scan_ledger(&env).await).await;
                }
            }
            "step, replay" => {
                let ledger = upgrade_step(model, &mut env, &fx).await;
                redeliver(model, &mut env, &fx, Some(&ledger)).await;
                assert_exact(&mut env.rt).await;
            }
            _ => {
                let same = (!OTHER_LEDGER.contains(&model)).then_some(&fx.ledger[..]);
                redeliver(model, &mut env, &fx, same).await;
                repair(&mut env).await;
                assert_unchanged(model, &env, &fx, &scan_ledger(&env).await).await;
            }
        }
        writes(env, fx).await;
    }
}

/// A number attribute of the item at `k` (-1 when absent).
pub(crate) async fn num_at(env: &ModelEnv, k: Item, attr: &str) -> i64 {
    get(env, k)
        .await
        .and_then(|i| i.opt_i64(attr).ok().flatten())
        .unwrap_or(-1)
}

/// `item`'s number attribute in the fixture's table (-1 when absent).
pub(crate) fn fixture_num(fx: &Fixture, pk: &str, sk: &str, attr: &str) -> i64 {
    let (pkn, skn) = fx.key_names();
    fx.table
        .iter()
        .find(|i| i.s(pkn).ok() == Some(pk) && i.s(skn).ok() == Some(sk))
        .and_then(|i| i.opt_i64(attr).ok().flatten())
        .unwrap_or(-1)
}

impl Fixture {
    /// The table's key attribute names (`PK`/`SK`, or `pk`/`sk` as the job
    /// board's items have them).
    pub(crate) fn key_names(&self) -> (&'static str, &'static str) {
        match self.table.first() {
            Some(i) if i.contains_key("pk") => ("pk", "sk"),
            _ => ("PK", "SK"),
        }
    }
}

/// An ISO-8601 UTC time of now (milliseconds).
pub(crate) fn now_iso() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Jobs in flight when the file replaced the compiled model: writes the
/// compiled derive read, whose jobs wait in the queues. The file's
/// consumers refuse them (as deployed); `verify` lists what
/// they would have done, and the upgrade step's `verify --repair` does it.
pub(crate) async fn in_flight_repaired(model: &str) -> (ModelEnv, Fixture) {
    let (mut env, fx) = deployed(model, true).await;
    let f = fx.in_flight.as_ref().expect("jobs in flight");
    refused(model, &env, &f.jobs).await;
    env.rt.drain().await.unwrap();
    let report = env.rt.verify().await.unwrap();
    assert!(
        !report.problems.is_empty(),
        "{model}: verify lists what the jobs in flight would have done"
    );
    step(&mut env).await;
    (env, fx)
}

/// The key `{pk, sk}` (the job board's attribute names).
pub(crate) fn lower_key(pk: &str, sk: &str) -> Item {
    attrs(vec![("pk", s(pk)), ("sk", s(sk))])
}

/// The key of `i` under these attribute names.
pub(crate) fn key_of(i: &Item, pk: &str, sk: &str) -> Item {
    [pk, sk]
        .iter()
        .map(|a| (a.to_string(), i.get(*a).expect("a key attribute").clone()))
        .collect()
}
