//! `jobstream backfill`: a parallel Scan that feeds every existing item
//! through the same rules and engine as the stream, idempotently, with a
//! rate limit, a resumable checkpoint file and progress output.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use shared::batch::StreamProcessor as _;
use shared::change::Change;
use shared::engine::fold::Imported;
use shared::error::Policy;
use shared::item::{key_of, Item};
use shared::lambda::{Config, Fold, Processors};
use shared::store::Store;
use tokio::sync::Mutex;

/// Segments scanned at once, whatever `--segments` says.
pub const SEGMENTS_IN_FLIGHT: u32 = 32;

/// How to scan.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Parallel Scan segments (TotalSegments).
    pub segments: u32,
    /// Items per second across all segments (`None`: unlimited). One item
    /// read is about one RCU for items up to 4 KB (half with eventually
    /// consistent reads); writes follow reads.
    pub rate: Option<f64>,
    /// Resume from / save progress to this file.
    pub checkpoint: Option<PathBuf>,
    /// Items per Scan page.
    pub page_size: i32,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            segments: 4,
            rate: None,
            checkpoint: None,
            page_size: 100,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct SegmentState {
    done: bool,
    /// LastEvaluatedKey as DynamoDB JSON.
    last_key: Option<serde_json::Value>,
    scanned: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Checkpoint {
    table: String,
    segments: Vec<SegmentState>,
}

impl Checkpoint {
    fn load(path: &PathBuf, table: &str, segments: u32) -> anyhow::Result<Self> {
        if path.exists() {
            let c: Checkpoint = serde_json::from_str(&std::fs::read_to_string(path)?)
                .with_context(|| format!("reading {}", path.display()))?;
            anyhow::ensure!(
                c.table == table && c.segments.len() == segments as usize,
                "checkpoint {} is for table {} with {} segments",
                path.display(),
                c.table,
                c.segments.len()
            );
            return Ok(c);
        }
        Ok(Checkpoint {
            table: table.into(),
            segments: vec![SegmentState::default(); segments as usize],
        })
    }

    fn save(&self, path: &PathBuf) -> anyhow::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }
}

/// What a scan did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanReport {
    pub scanned: u64,
    pub elapsed: Duration,
}

impl ScanReport {
    pub fn items_per_sec(&self) -> f64 {
        self.scanned as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn to_json(key: &Item) -> anyhow::Result<serde_json::Value> {
    Ok(serde_json::to_value(serde_dynamo::Item::from(key.clone()))?)
}

fn from_json(v: &serde_json::Value) -> anyhow::Result<Item> {
    let item: serde_dynamo::Item = serde_json::from_value(v.clone())?;
    Ok(item.into())
}

/// Scans `table` in parallel and calls `work` with every page of items.
pub async fn parallel_scan<F, Fut>(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    opts: &ScanOptions,
    work: F,
) -> anyhow::Result<ScanReport>
where
    F: Fn(Vec<Item>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let started = Instant::now();
    let checkpoint = match &opts.checkpoint {
        Some(p) => Checkpoint::load(p, table, opts.segments)?,
        None => Checkpoint {
            table: table.into(),
            segments: vec![SegmentState::default(); opts.segments as usize],
        },
    };
    let resumed: u64 = checkpoint.segments.iter().map(|s| s.scanned).sum();
    let checkpoint = Arc::new(Mutex::new(checkpoint));
    let scanned = Arc::new(AtomicU64::new(0));
    let pacer = Arc::new(Mutex::new(Instant::now()));
    let total = client
        .describe_table()
        .table_name(table)
        .send()
        .await
        .ok()
        .and_then(|d| d.table().and_then(|t| t.item_count()))
        .unwrap_or(0) as u64;
    // Drawn only on a terminal (indicatif hides it elsewhere).
    let progress = crate::progress::bar("backfill", total);
    progress.set_position(resumed);
    // Segments are taken in turn by at most SEGMENTS_IN_FLIGHT scanners:
    // `--segments` may be up to DynamoDB's 1,000,000, never as many
    // requests (and their buffers) at once.
    let next = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..opts.segments.min(SEGMENTS_IN_FLIGHT) {
        let (client, table, opts, work) = (
            client.clone(),
            table.to_string(),
            opts.clone(),
            work.clone(),
        );
        let (checkpoint, scanned, pacer) = (checkpoint.clone(), scanned.clone(), pacer.clone());
        let (progress, next) = (progress.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let segment = next.fetch_add(1, Ordering::Relaxed);
                if segment >= opts.segments {
                    return anyhow::Ok(());
                }
                let state = checkpoint.lock().await.segments[segment as usize].clone();
                if state.done {
                    continue;
                }
                let mut start = state.last_key.as_ref().map(from_json).transpose()?;
                loop {
                    let page = client
                        .scan()
                        .table_name(&table)
                        .segment(segment as i32)
                        .total_segments(opts.segments as i32)
                        .limit(opts.page_size)
                        .set_exclusive_start_key(start.clone())
                        .send()
                        .await
                        .with_context(|| format!("Scan segment {segment}"))?;
                    let items = page.items().to_vec();
                    let n = items.len() as u64;
                    if let Some(rate) = opts.rate {
                        let wait = {
                            let mut next = pacer.lock().await;
                            let now = Instant::now();
                            let slot = (*next).max(now);
                            *next = slot + Duration::from_secs_f64(n as f64 / rate);
                            slot - now
                        };
                        tokio::time::sleep(wait).await;
                    }
                    work(items).await?;
                    scanned.fetch_add(n, Ordering::Relaxed);
                    progress.inc(n);
                    start = page.last_evaluated_key().cloned();
                    let mut c = checkpoint.lock().await;
                    let s = &mut c.segments[segment as usize];
                    s.scanned += n;
                    s.last_key = start.as_ref().map(to_json).transpose()?;
                    s.done = start.is_none();
                    if let Some(p) = &opts.checkpoint {
                        c.save(p)?;
                    }
                    if start.is_none() {
                        break;
                    }
                }
            }
        }));
    }
    let mut result = Ok(());
    for t in tasks {
        if let Err(e) = t.await.map_err(anyhow::Error::from).and_then(|r| r) {
            result = Err(e);
        }
    }
    progress.finish_and_clear();
    result?;
    Ok(ScanReport {
        scanned: scanned.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    })
}

/// Totals of a backfill.
#[derive(Debug, Default)]
pub struct BackfillTotals {
    /// Item writes in the model table (projections, derived and counter items).
    pub table_writes: AtomicU64,
    /// Item writes in the ledger (what each item implies, counter totals).
    pub ledger_writes: AtomicU64,
    pub messages: AtomicU64,
    pub imported: AtomicU64,
    /// Items of deleted aggregates removed (the cascade the stream would have done).
    pub cascaded: AtomicU64,
    /// Items that are bad input (each logged once with its key and
    /// reason): nothing written for them, the rest goes on.
    pub bad_input: AtomicU64,
}

impl BackfillTotals {
    pub fn line(&self, dry_run: bool) -> String {
        let verb = if dry_run { "would write" } else { "wrote" };
        format!(
            "{verb}: {} table items, {} ledger items, {} fold imports, {} cascade deletes, {} queued jobs, {} bad input item(s) (logged)",
            self.table_writes.load(Ordering::Relaxed),
            self.ledger_writes.load(Ordering::Relaxed),
            self.imported.load(Ordering::Relaxed),
            self.cascaded.load(Ordering::Relaxed),
            self.messages.load(Ordering::Relaxed),
            self.bad_input.load(Ordering::Relaxed)
        )
    }
}

/// Backfills any model: every scanned item goes through the derive engine's
/// reconcile (projections, derived items, counters) and starts the jobs an
/// INSERT would start; a model with a fold imports each aggregate without
/// state (its first entry is the adoption entry) and removes what is left
/// of aggregates whose root no longer exists, an entry beside it (what the
/// cascade would have done: its entries, and its members unless they stay,
/// `cascade: false`; members alone wait for their root).
pub async fn backfill(
    client: &aws_sdk_dynamodb::Client,
    config: &Config,
    processors: &Processors,
    opts: &ScanOptions,
    dry_run: bool,
) -> anyhow::Result<(ScanReport, Arc<BackfillTotals>)> {
    let totals = Arc::new(BackfillTotals::default());
    let t = totals.clone();
    let derive = processors.derive.clone();
    let fold = processors.fold.clone();
    let store = processors.store.clone();
    let table = config.table.clone();
    let unsure = Arc::new(std::sync::Mutex::new(Vec::new()));
    let u = unsure.clone();
    let report = parallel_scan(client, &config.table, opts, move |items| {
        let (derive, fold, t, store, table, u) = (
            derive.clone(),
            fold.clone(),
            t.clone(),
            store.clone(),
            table.clone(),
            u.clone(),
        );
        async move {
            let mut done = derive.backfill(&items, dry_run).await?;
            u.lock()
                .expect("no page panicked holding it")
                .append(&mut done.unsure);
            t.table_writes
                .fetch_add(done.table_writes as u64, Ordering::Relaxed);
            t.ledger_writes
                .fetch_add(done.ledger_writes as u64, Ordering::Relaxed);
            t.messages
                .fetch_add(done.messages as u64, Ordering::Relaxed);
            t.bad_input
                .fetch_add(done.bad_input as u64, Ordering::Relaxed);
            if let Some(fold) = fold {
                let adopted = adopt(&fold, &store, &table, &items, dry_run).await?;
                t.imported.fetch_add(adopted.imported, Ordering::Relaxed);
                t.cascaded.fetch_add(adopted.cascaded, Ordering::Relaxed);
                t.bad_input.fetch_add(adopted.refused, Ordering::Relaxed);
            }
            Ok(())
        }
    })
    .await?;
    let unsure = std::mem::take(&mut *unsure.lock().expect("the scan is over"));
    let key_names = processors.derive.deriver().rules.key_names();
    let bad = still_there(&processors.store, &config.table, key_names, unsure).await?;
    totals.bad_input.fetch_add(bad, Ordering::Relaxed);
    Ok((report, totals))
}

/// Logs as bad input each item of `unsure` still in `table` (an item no
/// entity matches, stamped with a name no writer entity has), and says how
/// many; one gone was an item derived under an entity removed from the
/// file since, which the reconcile of its sources deleted.
async fn still_there(
    store: &Store,
    table: &str,
    key_names: &[&str],
    unsure: Vec<(Item, shared::error::InputError)>,
) -> anyhow::Result<u64> {
    if unsure.is_empty() {
        return Ok(0);
    }
    let found = store
        .batch_get(table, unsure.iter().map(|(k, _)| k.clone()).collect())
        .await?;
    let there: std::collections::HashSet<String> = found
        .iter()
        .map(|i| shared::ledger::item_id(&key_of(i, key_names)))
        .collect();
    let mut bad = 0;
    for (key, e) in &unsure {
        if there.contains(&shared::ledger::item_id(key)) {
            tracing::warn!(key = %shared::item::display_key(key), kind = e.kind(), reason = %e, "backfill: bad input");
            bad += 1;
        } else {
            tracing::info!(key = %shared::item::display_key(key), "backfill: deleted by the reconcile of its sources (an item derived under an entity the model no longer has)");
        }
    }
    Ok(bad)
}

/// The fold's part of a backfill page.
#[derive(Debug, Default)]
struct Adopted {
    /// Aggregates imported.
    imported: u64,
    /// Items of deleted aggregates removed.
    cascaded: u64,
    /// Aggregates whose import DynamoDB refused (no retry can fix it):
    /// logged with the aggregate and the reason, the rest goes on.
    refused: u64,
}

async fn adopt(
    fold: &Fold,
    store: &Store,
    table: &str,
    items: &[Item],
    dry_run: bool,
) -> anyhow::Result<Adopted> {
    let rules = fold.rules();
    let key_names = rules.key_names();
    let mut aggregates = std::collections::BTreeSet::new();
    for item in items {
        let change = Change::synthetic_insert(key_of(item, key_names), item.clone(), Utc::now());
        if let Ok(Some(agg)) = rules.aggregate(&change) {
            aggregates.insert(agg);
        }
    }
    let mut out = Adopted::default();
    for agg in aggregates {
        let imported = match fold.import(&agg, dry_run).await {
            Ok(i) => i,
            Err(e) if e.policy() == Policy::Skip => {
                tracing::warn!(processor = fold.name(), aggregate = %agg, error = %e, "backfill: bad input (DynamoDB refuses the import's writes)");
                out.refused += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match imported {
            Imported::Imported => out.imported += 1,
            Imported::AlreadyKnown => {}
            Imported::Nothing => {
                // No root. Members alone wait for it (written before it, as
                // on the live path and in `verify`); an entry left behind
                // says the root existed: what is left of the aggregate is
                // removed, as the cascade of its root's REMOVE would have,
                // each delete guarded by the root's absence (a root created
                // meanwhile keeps its items).
                let Some((root, _)) = rules.sequence_mirror(&agg) else {
                    continue;
                };
                let items =
                    shared::engine::fold::aggregate_items(rules, store, table, &agg).await?;
                let state = rules.table_state(&items);
                if state.seq == 0 {
                    continue;
                }
                // When the members stay (`cascade: false`), only what the
                // cascade deletes: the entries (user15's #5).
                let cascaded: Option<std::collections::HashSet<String>> =
                    (!rules.cascades_members()).then(|| {
                        let c = rules.cascade(&agg, &state);
                        c.deletes
                            .iter()
                            .map(|d| shared::ledger::item_id(&d.key))
                            .collect()
                    });
                let left: Vec<Item> = items
                    .into_iter()
                    .map(|i| key_of(&i, key_names))
                    .filter(|k| *k != root)
                    .filter(|k| {
                        cascaded
                            .as_ref()
                            .is_none_or(|c| c.contains(&shared::ledger::item_id(k)))
                    })
                    .collect();
                for key in left {
                    if dry_run || store.delete_while_absent(table, key, &root).await? {
                        out.cascaded += 1;
                    }
                }
            }
        }
    }
    Ok(out)
}
