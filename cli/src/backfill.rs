//! `jobstream backfill`: a parallel Scan that feeds every existing item
//! through the same rules and engine as the stream, idempotently, with a
//! rate limit, a resumable checkpoint file and progress output.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use shared::item::Item;
use tokio::sync::Mutex;

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
    let progress = {
        let scanned = scanned.clone();
        tokio::spawn(async move {
            let terminal = std::io::stderr().is_terminal();
            let mut tick =
                tokio::time::interval(Duration::from_millis(if terminal { 250 } else { 2000 }));
            loop {
                tick.tick().await;
                let n = scanned.load(Ordering::Relaxed);
                let rate = n as f64 / started.elapsed().as_secs_f64().max(1e-9);
                let done = n + resumed;
                let eta = if total > done && rate > 0.0 {
                    format!(
                        "ETA {:.0?}",
                        Duration::from_secs_f64((total - done) as f64 / rate)
                    )
                } else {
                    "ETA -".into()
                };
                if terminal {
                    eprint!("\r{done}/{total} items, {rate:.0} items/s, {eta}   ");
                } else {
                    eprintln!("backfill: {done}/{total} items, {rate:.0} items/s, {eta}");
                }
            }
        })
    };
    let mut tasks = Vec::new();
    for segment in 0..opts.segments {
        let (client, table, opts, work) = (
            client.clone(),
            table.to_string(),
            opts.clone(),
            work.clone(),
        );
        let (checkpoint, scanned, pacer) = (checkpoint.clone(), scanned.clone(), pacer.clone());
        tasks.push(tokio::spawn(async move {
            let state = checkpoint.lock().await.segments[segment as usize].clone();
            if state.done {
                return anyhow::Ok(());
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
                    return Ok(());
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
    progress.abort();
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    result?;
    Ok(ScanReport {
        scanned: scanned.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
    })
}

/// Totals of a backfill.
#[derive(Debug, Default)]
pub struct BackfillTotals {
    pub projections: AtomicU64,
    pub counter_writes: AtomicU64,
    pub messages: AtomicU64,
    pub imported: AtomicU64,
    /// Items of deleted aggregates removed (the cascade the stream would have done).
    pub cascaded: AtomicU64,
}

impl BackfillTotals {
    pub fn line(&self, dry_run: bool) -> String {
        let verb = if dry_run { "would write" } else { "wrote" };
        format!(
            "{verb}: {} projections, {} counter contributions, {} history imports, {} cascade deletes, {} queued jobs",
            self.projections.load(Ordering::Relaxed),
            self.counter_writes.load(Ordering::Relaxed),
            self.imported.load(Ordering::Relaxed),
            self.cascaded.load(Ordering::Relaxed),
            self.messages.load(Ordering::Relaxed)
        )
    }
}

/// Backfills the tracker: projections and counts through the derive
/// processor, one "Imported" entry per application without history through
/// the history processor.
pub async fn backfill_tracker(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    derive: Arc<shared::lambda::TrackerDeriveProcessor>,
    history: Arc<shared::lambda::HistoryProcessor>,
    opts: &ScanOptions,
    dry_run: bool,
) -> anyhow::Result<(ScanReport, Arc<BackfillTotals>)> {
    use shared::item::ItemExt;
    use shared::models::tracker::keys;
    let totals = Arc::new(BackfillTotals::default());
    let t = totals.clone();
    let store = shared::store::Store::new(client.clone());
    let table_name = table.to_string();
    let report = parallel_scan(client, table, opts, move |items| {
        let (derive, history, t, store, table) = (
            derive.clone(),
            history.clone(),
            t.clone(),
            store.clone(),
            table_name.clone(),
        );
        async move {
            let (p, c, m) = derive.backfill(&items, dry_run).await?;
            t.projections.fetch_add(p as u64, Ordering::Relaxed);
            t.counter_writes.fetch_add(c as u64, Ordering::Relaxed);
            t.messages.fetch_add(m as u64, Ordering::Relaxed);
            for item in &items {
                let (Ok(pk), Ok(sk)) = (item.s(keys::PK), item.s(keys::SK)) else {
                    continue;
                };
                match keys::kind(pk, sk) {
                    Some(keys::Kind::Application) => {
                        let id = pk.trim_start_matches("APP#");
                        if history.import(id, dry_run).await?
                            == shared::engine::fold::Imported::Imported
                        {
                            t.imported.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Some(keys::Kind::Stage | keys::Kind::History) => {
                        // A child of a deleted application: what the cascade does.
                        let app: Item = [
                            (keys::PK.to_string(), shared::item::s(pk)),
                            (keys::SK.to_string(), shared::item::s(pk)),
                        ]
                        .into();
                        let gone = if dry_run {
                            store.get(&table, app).await?.is_none()
                        } else {
                            // Guarded: only while the application is absent.
                            shared::models::tracker::history_check::Repair::DeleteOrphan {
                                app_key: app,
                                key: shared::item::key_of(item, &[keys::PK, keys::SK]),
                            }
                            .apply(&store, &table)
                            .await?
                        };
                        if gone {
                            t.cascaded.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    _ => {}
                }
            }
            Ok(())
        }
    })
    .await?;
    Ok((report, totals))
}

/// Backfills the job board: GSI1 keys, and the jobs INSERTs start.
pub async fn backfill_jobboard(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    derive: Arc<shared::lambda::JobBoardDeriveProcessor>,
    opts: &ScanOptions,
    dry_run: bool,
) -> anyhow::Result<(ScanReport, Arc<BackfillTotals>)> {
    let totals = Arc::new(BackfillTotals::default());
    let t = totals.clone();
    let report = parallel_scan(client, table, opts, move |items| {
        let (derive, t) = (derive.clone(), t.clone());
        async move {
            let (p, c, m) = derive.backfill(&items, dry_run).await?;
            t.projections.fetch_add(p as u64, Ordering::Relaxed);
            t.counter_writes.fetch_add(c as u64, Ordering::Relaxed);
            t.messages.fetch_add(m as u64, Ordering::Relaxed);
            Ok(())
        }
    })
    .await?;
    Ok((report, totals))
}
