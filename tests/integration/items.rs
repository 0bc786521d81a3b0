//! One family of item and table helpers for every test: keys, a writer's
//! put/update/delete, consistent reads, scans and partitions, deliveries to
//! a processor, and the exactness checks. Each takes whatever holds a
//! runtime ([`HasRt`]: a [`Runtime`], a [`ModelEnv`], the tracker's [`Env`]).

use aws_lambda_events::event::dynamodb::Event;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::types::AttributeValue;
use jobstream::local::runtime::Runtime;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};
use shared::item::{s, Item, ItemExt};

use crate::support::{Env, ModelEnv};

/// Whatever holds a runtime (and so a table).
pub trait HasRt {
    fn rt(&self) -> &Runtime;
}

impl<T: HasRt> HasRt for &T {
    fn rt(&self) -> &Runtime {
        (*self).rt()
    }
}

impl<T: HasRt> HasRt for &mut T {
    fn rt(&self) -> &Runtime {
        (**self).rt()
    }
}

impl HasRt for Runtime {
    fn rt(&self) -> &Runtime {
        self
    }
}

impl HasRt for ModelEnv {
    fn rt(&self) -> &Runtime {
        &self.rt
    }
}

impl HasRt for Env {
    fn rt(&self) -> &Runtime {
        &self.rt
    }
}

/// The key `{PK, SK}`.
pub fn key(pk: impl Into<String>, sk: impl Into<String>) -> Item {
    [
        ("PK".to_string(), s(pk.into())),
        ("SK".to_string(), s(sk.into())),
    ]
    .into()
}

/// An item of string attributes.
pub fn item(pairs: &[(&str, &str)]) -> Item {
    pairs.iter().map(|(k, v)| (k.to_string(), s(*v))).collect()
}

/// An item of these attributes.
pub fn attrs(pairs: Vec<(&str, AttributeValue)>) -> Item {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// A number attribute, `-1` when absent.
pub fn num(i: &Item, a: &str) -> i64 {
    i.opt_i64(a).ok().flatten().unwrap_or(-1)
}

/// A writer's put (as an application writes).
pub async fn put(t: &impl HasRt, item: Item) {
    let rt = t.rt();
    rt.dynamodb
        .put_item()
        .table_name(&rt.config.table)
        .set_item(Some(item))
        .send()
        .await
        .expect("put");
}

/// A writer's batch puts, 25 at a time, unprocessed items sent again.
pub async fn put_all(t: &impl HasRt, items: Vec<Item>) {
    let rt = t.rt();
    put_all_into(t, &rt.config.table, &items).await;
}

/// Batch puts into `table` (the model's, the ledger or any other), 25 at a
/// time, unprocessed items sent again.
pub async fn put_all_into(t: &impl HasRt, table: &str, items: &[Item]) {
    shared::store::Store::new(t.rt().dynamodb.clone())
        .put_items(table, items.to_vec())
        .await
        .expect("batch write");
}

/// A writer's update of the item at `k`; `#name` placeholders in `expr`
/// stand for the attribute `name`.
pub async fn update(t: &impl HasRt, k: Item, expr: &str, values: &[(&str, AttributeValue)]) {
    let rt = t.rt();
    let mut u = rt
        .dynamodb
        .update_item()
        .table_name(&rt.config.table)
        .set_key(Some(k))
        .update_expression(expr);
    for word in expr.split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '_')) {
        if let Some(name) = word.strip_prefix('#') {
            u = u.expression_attribute_names(word, name);
        }
    }
    for (name, v) in values {
        u = u.expression_attribute_values(*name, v.clone());
    }
    u.send().await.expect("update");
}

/// A writer's delete (as an application, or TTL, removes an item).
pub async fn delete(t: &impl HasRt, k: Item) {
    let rt = t.rt();
    rt.dynamodb
        .delete_item()
        .table_name(&rt.config.table)
        .set_key(Some(k))
        .send()
        .await
        .expect("delete");
}

/// The item at `k` (a consistent read), if any.
pub async fn get(t: &impl HasRt, k: Item) -> Option<Item> {
    let rt = t.rt();
    rt.dynamodb
        .get_item()
        .table_name(&rt.config.table)
        .set_key(Some(k))
        .consistent_read(true)
        .send()
        .await
        .expect("get")
        .item
}

/// Every item of the table, sorted by (PK, SK).
pub async fn scan(t: &impl HasRt) -> Vec<Item> {
    let rt = t.rt();
    let mut items = jobstream::tools::verify::scan_all(&rt.dynamodb, &rt.config.table)
        .await
        .expect("scan");
    items.sort_by_key(pk_sk);
    items
}

/// An item's (PK, SK), empty where absent.
pub fn pk_sk(i: &Item) -> (String, String) {
    let a = |name| i.s(name).unwrap_or_default().to_string();
    (a("PK"), a("SK"))
}

/// Items of one partition (the model's key names), sorted by sort key.
pub async fn partition(t: &impl HasRt, pk: &str) -> Vec<Item> {
    let table = &t.rt().model.table;
    let mut items = scan(t).await;
    items.retain(|i| i.s(table.pk).ok() == Some(pk));
    items.sort_by_key(|i| i.s(table.sk).unwrap_or_default().to_string());
    items
}

/// Items of partition `pk` whose sort key starts with `prefix`, sorted.
pub async fn begins(t: &impl HasRt, pk: &str, prefix: &str) -> Vec<Item> {
    let sk = t.rt().model.table.sk;
    let mut items = partition(t, pk).await;
    items.retain(|i| i.s(sk).unwrap_or_default().starts_with(prefix));
    items
}

/// The entries of a history under `pk` whose sort keys begin with
/// `prefix`, as (sequence, description) in order (-1 and `?` where one
/// lacks them).
pub async fn history_entries(t: &impl HasRt, pk: &str, prefix: &str) -> Vec<(i64, String)> {
    begins(t, pk, prefix)
        .await
        .iter()
        .map(|e| {
            (
                e.opt_i64("sequence").ok().flatten().unwrap_or(-1),
                e.s("description").unwrap_or("?").to_string(),
            )
        })
        .collect()
}

/// The items' `SK`s, in order.
pub fn sks(items: &[Item]) -> Vec<String> {
    items.iter().map(|i| pk_sk(i).1).collect()
}

/// `verify --repair`'s repairs of `report` through `t`'s processors; how
/// many ran.
pub async fn repair(t: &impl HasRt, report: &jobstream::tools::verify::Report) -> usize {
    let processors = &t.rt().processors;
    jobstream::tools::verify::repair(processors, report)
        .await
        .expect("repairs")
}

/// Asserts `verify` finds the derived data exact.
pub async fn assert_clean(t: &impl HasRt) {
    let report = t.rt().verify().await.expect("verify");
    assert!(report.is_clean(), "drift: {:#?}", report.problems);
}

/// [`assert_clean`], and nothing dead-lettered.
pub async fn assert_exact(rt: &mut Runtime) {
    assert_clean(rt).await;
    use shared::models::Harness as _;
    let dead = rt.dead_letters().await.expect("dead letters");
    assert!(dead.is_empty(), "dead letters: {dead:?}");
}

/// Stream records as one Lambda event.
pub fn records_event(records: &[Value]) -> Event {
    serde_json::from_value(json!({ "Records": records })).expect("records form a Lambda event")
}

/// The `derive` handler run over `records`; asserts no failure.
pub async fn deliver(t: &impl HasRt, records: &[Value]) {
    let handler = t.rt().stream_processor("derive");
    let resp = handler
        .handle(records_event(records))
        .await
        .expect("handled");
    assert!(resp.batch_item_failures.is_empty(), "no failure");
}

/// Stream processor `name`'s Lambda handler over `event`, as Lambda invokes
/// it.
pub async fn invoke(
    t: &impl HasRt,
    name: &str,
    event: &Event,
) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
    let processor = t.rt().stream_processor(name);
    let event = LambdaEvent::new(event.clone(), Context::default());
    shared::lambda::stream_handler(&*processor, event).await
}

/// Queue `queue`'s consumer's Lambda handler over `event`, as Lambda invokes
/// it.
pub async fn invoke_jobs(
    t: &impl HasRt,
    queue: &str,
    event: &SqsEvent,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    let consumer = t.rt().consumer(queue);
    let event = LambdaEvent::new(event.clone(), Context::default());
    shared::lambda::sqs_handler(&*consumer, event).await
}

/// SQS messages with these bodies as one Lambda event.
pub fn sqs_event(bodies: &[String]) -> SqsEvent {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({"messageId": format!("m-{i}"), "receiptHandle": "h", "body": b,
                "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"})
        })
        .collect();
    serde_json::from_value(json!({ "Records": records })).expect("an SQS event")
}

/// The consumer of `queue` run over messages with these bodies; asserts no
/// failure.
pub async fn deliver_jobs(t: &impl HasRt, queue: &str, bodies: &[String]) {
    let resp = invoke_jobs(t, queue, &sqs_event(bodies))
        .await
        .expect("handled");
    assert!(resp.batch_item_failures.is_empty(), "no failure");
}

/// The `derive` processor's count of a metric.
pub fn metric(t: &impl HasRt, name: &str) -> u64 {
    metric_of(t, "derive", name)
}

/// Stream processor `processor`'s count of a metric.
pub fn metric_of(t: &impl HasRt, processor: &str, name: &str) -> u64 {
    t.rt().stream_processor(processor).metrics().get(name)
}

/// The `derive` processor's count of bad input.
pub fn bad_input(t: &impl HasRt) -> u64 {
    metric(t, shared::metrics::names::BAD_INPUT)
}

/// What a set job reads through: the runtime's store and tables, now.
pub fn reads(t: &impl HasRt) -> shared::engine::setjob::Reads {
    let rt = t.rt();
    shared::engine::setjob::Reads {
        store: rt.processors.store.clone(),
        table: rt.config.table.clone(),
        ledger_table: rt.config.ledger_table.clone(),
        now: chrono::Utc::now(),
    }
}

/// `plan` applied as `job`'s consumer applies it, through `r`'s store.
pub async fn apply_plan(
    job: &(impl shared::engine::setjob::SetJob + ?Sized),
    r: &shared::engine::setjob::Reads,
    plan: &shared::engine::setjob::Plan,
) -> shared::engine::setjob::Applied {
    let (store, table, ledger) = (&r.store, &r.table, &r.ledger_table);
    let (keys, volatile) = (job.key_names(), job.volatile());
    shared::engine::setjob::apply(store, table, ledger, keys, volatile, plan)
        .await
        .expect("apply")
}

/// The set job of `model`'s consumer of queue `queue`.
pub fn set_job(
    model: &shared::models::Model,
    queue: &str,
) -> std::sync::Arc<dyn shared::engine::setjob::SetJob> {
    let job = model.consumers.iter().find_map(|c| match &c.job {
        shared::models::Job::Set(j) if c.queue.logical == queue => Some(j.clone()),
        _ => None,
    });
    job.unwrap_or_else(|| panic!("a set job on queue {queue}"))
}

/// `jobstream backfill` of the runtime's table with `opts` (no dry run):
/// its scan report and totals.
pub async fn backfill(
    t: &impl HasRt,
    opts: &jobstream::tools::backfill::ScanOptions,
) -> (
    jobstream::tools::backfill::ScanReport,
    std::sync::Arc<jobstream::tools::backfill::BackfillTotals>,
) {
    let rt = t.rt();
    jobstream::tools::backfill::backfill(&rt.dynamodb, &rt.config, &rt.processors, opts, false)
        .await
        .expect("backfill runs")
}

/// A writer of a runtime's table that outlives the borrow (for writers
/// spawned while the runtime runs in the background).
#[derive(Clone)]
pub struct Writer {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl Writer {
    pub fn of(t: &impl HasRt) -> Self {
        let rt = t.rt();
        let (client, table) = (rt.dynamodb.clone(), rt.config.table.clone());
        Self { client, table }
    }

    /// A writer's put.
    pub async fn put(&self, item: Item) {
        let req = self.client.put_item().table_name(&self.table);
        req.set_item(Some(item)).send().await.expect("put");
    }

    /// A writer's delete of the item at `key`.
    pub async fn delete(&self, key: Item) {
        let req = self.client.delete_item().table_name(&self.table);
        req.set_key(Some(key)).send().await.expect("delete");
    }
}

/// Plays the scenario file `file` (under `tests/scenarios/`, see
/// scenarios.rs) with every check on a fresh engine, its runtime's options
/// adjusted by `f`; asserts no difference and hands the environment over
/// for what only Rust can check after it (a metric, a clock).
pub async fn play_scenario(
    file: &str,
    f: impl FnOnce(&mut jobstream::local::runtime::RuntimeOptions),
) -> ModelEnv {
    use shared::file::scenario::{play_checked, Scenario};
    use shared::models::Source;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let s = Scenario::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let source = s
        .model_source(&path)
        .unwrap_or_else(|| panic!("{file}: a scenario file says which `model:` it plays"));
    let loaded = shared::models::file_of(&source).unwrap_or_else(|e| panic!("{file}: {e}"));
    let (model, model_file) = match source {
        Source::Name(n) => (n, None),
        Source::File(p) => ("file".to_string(), Some(p)),
    };
    let mut env = crate::support::model_env(&model, |o| {
        o.model_file = model_file;
        f(o);
    })
    .await;
    let diffs = play_checked(&mut env.rt, &s, &loaded.model, false)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        diffs.is_empty(),
        "{file}: {} difference(s):\n- {}",
        diffs.len(),
        diffs.join("\n- ")
    );
    env
}
