//! A model as the engine runs it ([`Model`]: its table, rules, queues and
//! consumers), compiled from a model file (`shared/src/file/`); the shipped
//! ones are `models/NAME.yaml`, listed by [`registry`].
//!
//! Everything else (the Lambda binaries, every CLI command, the local event
//! source mappings, the CDK stack through `jobstream tables`) is generic over
//! [`Model`]. Adding a model is adding its file under `models/`.

pub mod filter;
pub mod table;

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::engine::fold::FoldRules;
use crate::engine::once::Once;
use crate::engine::rules::Rules;
use crate::engine::setjob::{BoxFut, SetJob};
use crate::item::Item;
pub use filter::{EventFilter, KeyRule};
use table::{grants, Grant, QueueDef, RunnerGrant, StreamSettings, TableDef};

/// The model commands and the stack use when none is named: the one line
/// of `models/default` (embedded by `shared/build.rs`).
pub const DEFAULT_MODEL: &str = include!(concat!(env!("OUT_DIR"), "/default_model.rs"));

/// Every model jobstream ships, by name: the model files under `models/`
/// (`models/NAME.yaml`, embedded by `shared/build.rs`).
pub fn registry() -> Vec<Model> {
    let mut all = Vec::new();
    for name in crate::file::shipped_names() {
        match crate::file::shipped(name) {
            Some(Ok(loaded)) => all.push(loaded.model()),
            // Every shipped file compiles (a unit test of `file` checks).
            Some(Err(e)) => {
                tracing::error!(model = name, error = %e, "a shipped model file does not compile")
            }
            None => {}
        }
    }
    all
}

/// The shipped model called `name`.
pub fn find(name: &str) -> Result<Model, String> {
    load(&Source::Name(name.to_string()))
}

/// The model file behind a source: the file itself, or the shipped file a
/// name loads.
pub fn file_of(source: &Source) -> Result<&'static crate::file::Loaded, String> {
    match source {
        Source::File(p) => crate::file::load(p).map_err(|e| e.to_string()),
        Source::Name(n) => match crate::file::shipped(n) {
            Some(l) => l.map_err(|e| e.to_string()),
            None => Err(format!(
                "unknown model `{n}` (one of: {})",
                crate::file::shipped_names().collect::<Vec<_>>().join(", ")
            )),
        },
    }
}

/// Where a model comes from: the registry (`--model NAME`, `MODEL`) or a
/// model file (`--model-file PATH`, `MODEL_FILE`; SPEC §8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Name(String),
    File(std::path::PathBuf),
}

impl Source {
    /// The file when one is given, else the name.
    pub fn new(name: &str, file: Option<&std::path::Path>) -> Self {
        match file {
            Some(f) => Source::File(f.to_path_buf()),
            None => Source::Name(name.to_string()),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Name(n) => write!(f, "model {n}"),
            Source::File(p) => write!(f, "model file {}", p.display()),
        }
    }
}

/// The model a source names: a registered one, or a file loaded once per
/// process (every problem of the file in the error, `PATH:LINE:COL: ...`).
pub fn load(source: &Source) -> Result<Model, String> {
    file_of(source).map(|l| l.model())
}

/// A model: its table, its rules, its queues and consumers.
pub struct Model {
    /// `--model` / `MODEL` value.
    pub name: &'static str,
    /// One line for `--help` and the README.
    pub about: &'static str,
    pub table: TableDef,
    /// Stream rules applied by the `derive` processor.
    pub rules: Arc<dyn Rules>,
    /// A fold applied by a second stream processor (at most two read a
    /// stream), e.g. a model file's `history:`.
    pub fold: Option<FoldSpec>,
    /// Queue consumers.
    pub consumers: Vec<Consumer>,
    /// Event filters of the derive consumer (deployed, and applied locally
    /// before the handler); empty = every record. A filter may drop only
    /// records no processor needs or waits for: never an unknown key shape
    /// (bad input, counted) nor an item whose overwrite must be repaired.
    pub derive_filter: Vec<EventFilter>,
}

impl Model {
    /// The queues of the consumers.
    pub fn queues(&self) -> Vec<QueueDef> {
        self.consumers.iter().map(|c| c.queue.clone()).collect()
    }

    /// Names of the stream processors, in the order they run.
    pub fn stream_processors(&self) -> Vec<&'static str> {
        self.stream_defs().iter().map(|d| d.name).collect()
    }

    /// The one definition of each stream processor: filters, mapping and
    /// function settings, grant. The CDK stack (through `jobstream
    /// tables`) and the local runtime both read it.
    pub fn stream_defs(&self) -> Vec<StreamProcessorDef> {
        let sends_to: Vec<&'static str> = self.consumers.iter().map(|c| c.queue.logical).collect();
        let mut out = Vec::new();
        if let Some(f) = &self.fold {
            out.push(StreamProcessorDef {
                name: f.processor,
                binary: "history",
                filters: f.filter.clone(),
                settings: StreamSettings::DEPLOYED,
                grant: Grant {
                    table_actions: grants::FOLD_TABLE.to_vec(),
                    index_actions: vec![],
                    ledger_actions: grants::FOLD_LEDGER.to_vec(),
                    sends_to: vec![],
                },
            });
        }
        out.push(StreamProcessorDef {
            name: "derive",
            binary: "derive",
            filters: self.derive_filter.clone(),
            settings: StreamSettings::DEPLOYED,
            grant: Grant {
                table_actions: grants::DERIVE_TABLE.to_vec(),
                index_actions: vec![],
                ledger_actions: derive_ledger(
                    self.rules.locates(),
                    self.rules.awaits(),
                    self.rules.shares(),
                ),
                sends_to,
            },
        });
        out
    }

    /// The one definition of each queue consumer: its queue (visibility,
    /// receives, batch size, concurrency), function timeout, grant.
    pub fn queue_defs(&self) -> Vec<QueueProcessorDef> {
        let sends_to: Vec<&'static str> = self.consumers.iter().map(|c| c.queue.logical).collect();
        self.consumers
            .iter()
            .map(|c| QueueProcessorDef {
                name: c.queue.consumer,
                binary: "worker",
                queue: c.queue.clone(),
                grant: Grant {
                    table_actions: grants::CONSUMER_TABLE.to_vec(),
                    index_actions: vec![],
                    ledger_actions: grants::CONSUMER_LEDGER.to_vec(),
                    sends_to: sends_to.clone(),
                },
            })
            .collect()
    }

    /// What `jobstream run` needs to run every processor of the model with
    /// its mappings in one process ([`RunnerGrant`]).
    pub fn runner_grant(&self) -> RunnerGrant {
        let (streams, queues) = (self.stream_defs(), self.queue_defs());
        streams
            .iter()
            .map(|d| &d.grant)
            .chain(queues.iter().map(|d| &d.grant))
            .fold(RunnerGrant::mappings(!self.consumers.is_empty()), |r, g| {
                r.with(g)
            })
    }

    /// The grant of the processor called `name` (stream or queue consumer).
    pub fn grant(&self, name: &str) -> Option<Grant> {
        self.stream_defs()
            .into_iter()
            .find(|d| d.name == name)
            .map(|d| d.grant)
            .or_else(|| {
                self.queue_defs()
                    .into_iter()
                    .find(|d| d.name == name)
                    .map(|d| d.grant)
            })
    }
}

/// A stream processor as deployed and as run locally (SPEC §6.1).
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StreamProcessorDef {
    pub name: &'static str,
    /// The Lambda binary (a member crate of the workspace).
    pub binary: &'static str,
    /// Lambda event filter patterns; empty = every record.
    pub filters: Vec<EventFilter>,
    pub settings: StreamSettings,
    pub grant: Grant,
}

/// A queue consumer as deployed and as run locally (SPEC §6.1).
#[derive(Debug, Clone, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueueProcessorDef {
    pub name: &'static str,
    pub binary: &'static str,
    pub queue: QueueDef,
    pub grant: Grant,
}

/// A fold over the stream.
pub struct FoldSpec {
    /// Processor name (markers, state keys, Lambda name), e.g. `history`.
    pub processor: &'static str,
    pub rules: Arc<dyn FoldRules>,
    /// Event filters of the records it needs (or waits for: its adoption
    /// entries); empty = every record.
    pub filter: Vec<EventFilter>,
}

/// A queue and its consumer.
pub struct Consumer {
    pub queue: QueueDef,
    pub job: Job,
}

/// What a queue consumer does.
#[derive(Clone)]
pub enum Job {
    /// Keeps a scope's set of items equal to what the facts imply.
    Set(Arc<dyn SetJob>),
    /// An effect at most once per key.
    Once(Arc<dyn Once>),
}

/// An error of a demo or check run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What `verify` gives model-specific checks: the table and the ledger as
/// scanned (consistent reads), and the time; the checks tally what they
/// checked per kind into it (`verify`'s `checked` column, every kind the
/// model checks listed, 0 included).
pub struct CheckInput<'a> {
    pub items: &'a [Item],
    pub ledger: &'a [Item],
    pub now: DateTime<Utc>,
    checked: std::cell::RefCell<std::collections::BTreeMap<&'static str, u64>>,
    bad_input: std::cell::RefCell<Vec<String>>,
}

impl<'a> CheckInput<'a> {
    pub fn new(items: &'a [Item], ledger: &'a [Item], now: DateTime<Utc>) -> Self {
        Self {
            items,
            ledger,
            now,
            checked: Default::default(),
            bad_input: Default::default(),
        }
    }

    /// Input the rules reject that no item's own check lists (keys and
    /// reason, ending with its kind in parentheses): listed as bad input,
    /// not drift, so no repair is started for it (e.g. a `compute:` scope
    /// past the rows one job can read).
    pub fn bad_input(&self, what: String) {
        self.bad_input.borrow_mut().push(what);
    }

    /// The bad input the checks listed.
    pub fn bad_inputs(&self) -> Vec<String> {
        self.bad_input.borrow().clone()
    }

    /// `n` more of `kind` checked (0: the kind is checked, nothing of it
    /// was there).
    pub fn checked(&self, kind: &'static str, n: u64) {
        *self.checked.borrow_mut().entry(kind).or_default() += n;
    }

    /// What was checked, per kind.
    pub fn tally(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.checked.borrow().clone()
    }
}

/// Kinds of drift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drift {
    Wrong,
    Missing,
    Extra,
}

/// How a finding is repaired: always through the live path's guards.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// Reconcile this source item (projection, derived items, counters).
    Reconcile(Item),
    /// Reconcile these source items, then set this counter item to its
    /// totals.
    Counter { counter: Item, sources: Vec<Item> },
    /// Run this job body through the consumer of `queue`, in process.
    Job { queue: &'static str, body: String },
    /// Delete this processor-owned item, if it is still exactly this.
    DeleteIfUnchanged(Item),
    /// A model's own guarded repair (e.g. a lost history entry).
    Model(ModelRepair),
    /// Reconcile these source items, then delete these ledger totals (their
    /// ledger key) if every sum is then 0 and nothing moved them since:
    /// totals of a key no counter of the model has any more.
    StaleTotals { totals: Item, sources: Vec<Item> },
    /// Reconcile these source items, then delete the ledger's owners of a
    /// derived item no shared entity of the model has any more (its head
    /// and owner records, as read): each record only if still exactly as
    /// read, and, while no entity derives the item's key, only once the
    /// item itself is gone.
    StaleOwners {
        item: Item,
        records: Vec<Item>,
        sources: Vec<Item>,
    },
}

impl Repair {
    /// What it does, for `verify --repair --dry-run`: the keys it touches
    /// (`key_names` of the model's table; ledger totals by the ledger's),
    /// never an item's other attributes or a job's body.
    pub fn describe(&self, key_names: &[&str]) -> String {
        let key = |i: &Item| crate::item::display_key(&crate::item::key_of(i, key_names));
        let keys = |items: &[Item]| items.iter().map(key).collect::<Vec<_>>().join("; ");
        match self {
            Repair::Reconcile(i) => format!("reconcile the item {}", key(i)),
            Repair::Counter { counter, sources } => format!(
                "set the counter {} to its totals after reconciling {} source item(s): {}",
                key(counter),
                sources.len(),
                keys(sources)
            ),
            Repair::Job { queue, body } => {
                format!("run a job through the queue {queue} ({} bytes)", body.len())
            }
            Repair::DeleteIfUnchanged(i) => format!("delete {} if it is still as read", key(i)),
            Repair::Model(m) => m.0.describe(),
            Repair::StaleTotals { totals, sources } => format!(
                "delete the stale ledger totals {} once every sum is 0 (after reconciling {} source item(s))",
                crate::item::display_key(&crate::item::key_of(
                    totals,
                    &[crate::ledger::PK, crate::ledger::SK]
                )),
                sources.len()
            ),
            Repair::StaleOwners {
                item,
                records,
                sources,
            } => format!(
                "delete the ledger owners of {} ({} record(s)), which nothing reads any more, if still as read and the item is gone or still derived (after reconciling {} source item(s))",
                key(item),
                records.len(),
                sources.len()
            ),
        }
    }
}

/// A model-specific repair, guarded by the model like its live writes.
pub trait GuardedRepair: std::fmt::Debug + Send + Sync {
    /// What it does, for `--dry-run` and to tell two repairs apart.
    fn describe(&self) -> String;
    /// Applies it to `table` (guarded, where it must be, by the processors'
    /// state in `ledger`); `false` when its guard no longer held (nothing
    /// written).
    fn apply<'a>(
        &'a self,
        store: &'a crate::store::Store,
        table: &'a str,
        ledger: &'a str,
    ) -> BoxFut<'a, Result<bool, crate::error::StoreError>>;
}

/// A [`GuardedRepair`] in a [`Repair`].
#[derive(Debug, Clone)]
pub struct ModelRepair(pub Arc<dyn GuardedRepair>);

impl PartialEq for ModelRepair {
    fn eq(&self, other: &Self) -> bool {
        self.0.describe() == other.0.describe()
    }
}

/// One piece of drift: what, where, and how to repair it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub kind: &'static str,
    pub drift: Drift,
    pub what: String,
    pub repair: Option<Repair>,
}

/// What a scenario (or a test) drives: the model's tables and processors.
pub trait Harness: Send + Sync {
    /// A client for the application's own writes and reads.
    fn dynamodb(&self) -> &aws_sdk_dynamodb::Client;
    fn table(&self) -> &str;
    fn ledger_table(&self) -> &str;
    /// Runs every processor until the stream and the queues are empty.
    fn drain(&mut self) -> BoxFut<'_, Result<usize, BoxError>>;
    /// Item writes the processors made so far.
    fn processor_writes(&self) -> u64;
    /// Runs `verify` (no repair): the drift and the bad input found.
    fn verify(&mut self) -> BoxFut<'_, Result<Verified, BoxError>>;
    /// What ended in a dead-letter queue or an on-failure destination.
    fn dead_letters(&mut self) -> BoxFut<'_, Result<Vec<String>, BoxError>>;
    /// Records every processor refused as bad input so far.
    fn bad_input(&self) -> u64;
}

/// What `verify` found: drift (what and where), and the items the rules
/// reject (bad input, not drift: keys and reasons).
#[derive(Debug, Clone, Default)]
pub struct Verified {
    pub problems: Vec<String>,
    pub bad_input: Vec<String>,
}

/// A failed write or read of a writer or a demo: what failed, and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Failed(pub String);

/// `.context("what")` for demo and writer code: the error with what failed.
pub trait Context<T> {
    fn context(self, what: &str) -> Result<T, Failed>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, Failed> {
        self.map_err(|e| Failed(format!("{what}: {}", crate::error::causes(&e))))
    }
}

/// The derive's ledger actions: its records and totals, plus the listings
/// of located counters and of once effects waiting for an item (both
/// `Query`, located counters' totals read alone), and the owners of shared
/// derived items (`Query`).
fn derive_ledger(locates: bool, awaits: bool, shares: bool) -> Vec<&'static str> {
    let mut out = grants::DERIVE_LEDGER.to_vec();
    let locate = grants::DERIVE_LEDGER_LOCATE.iter().filter(|_| locates);
    let waiting = grants::DERIVE_LEDGER_WAITING.iter().filter(|_| awaits);
    let shared = grants::DERIVE_LEDGER_SHARED.iter().filter(|_| shares);
    for action in locate.chain(waiting).chain(shared) {
        if !out.contains(action) {
            out.push(action);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One path (SPEC §8.1): `--model NAME` is `models/NAME.yaml`, whose
    /// `name:` is NAME; every registered model has its own name.
    #[test]
    fn every_shipped_model_is_found_by_its_stem() {
        for stem in crate::file::shipped_names() {
            let m = find(stem).expect("a shipped model loads by name");
            assert_eq!(m.name, stem, "models/{stem}.yaml is `--model {stem}`");
        }
        let mut names: Vec<&str> = registry().iter().map(|m| m.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "{names:?}");
        let e = find("no-such-model").err().expect("unknown");
        assert!(e.contains("one of: ") && e.contains(DEFAULT_MODEL), "{e}");
    }
}
