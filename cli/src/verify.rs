//! `jobstream verify`: recomputes every derived datum from the source items
//! and reports drift per kind (checked, wrong, missing, extra, sample keys);
//! `--repair` fixes what can be fixed through the same guarded writes.

use std::collections::{BTreeMap, BTreeSet};

use shared::engine::derive::{projection_update, DeriveRules};
use shared::item::{display_key, key_of, n, s, Item, ItemExt};
use shared::models::jobboard::derive::JobBoardDerive;
use shared::models::jobboard::entities::{
    kind as board_kind, Job, JobStatus, Kind as BoardKind, Pair, Seeker,
};
use shared::models::jobboard::keys as bkeys;
use shared::models::jobboard::relevance::{level, score};
use shared::models::tracker::derive::TrackerDerive;
use shared::models::tracker::history_check::{self, Repair};
use shared::models::tracker::keys::{self, Kind};
use shared::store::{Store, Update};

/// Drift of one kind of derived datum.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KindReport {
    pub checked: u64,
    pub wrong: u64,
    pub missing: u64,
    pub extra: u64,
    /// Up to 5 example keys with what is wrong.
    pub samples: Vec<String>,
}

impl KindReport {
    pub fn drift(&self) -> u64 {
        self.wrong + self.missing + self.extra
    }
}

/// A repair to apply.
#[derive(Debug, Clone, PartialEq)]
pub enum Fix {
    /// A guarded update (projection, sequence mirror, count).
    Update(Update),
    Delete(Item),
    Put(Item),
    /// A history repair, applied through the fold's guards.
    History(Repair),
}

/// What verification found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub kinds: BTreeMap<&'static str, KindReport>,
    pub applications: usize,
    pub stages: usize,
    pub history_entries: usize,
    pub count: Option<i64>,
    /// Every problem: what and where.
    pub problems: Vec<String>,
    pub fixes: Vec<Fix>,
}

#[derive(Clone, Copy)]
enum Drift {
    Wrong,
    Missing,
    Extra,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    fn checked(&mut self, kind: &'static str) {
        self.kinds.entry(kind).or_default().checked += 1;
    }

    fn drift(&mut self, kind: &'static str, d: Drift, what: String, fix: Option<Fix>) {
        let k = self.kinds.entry(kind).or_default();
        match d {
            Drift::Wrong => k.wrong += 1,
            Drift::Missing => k.missing += 1,
            Drift::Extra => k.extra += 1,
        }
        if k.samples.len() < 5 {
            k.samples.push(what.clone());
        }
        self.problems.push(format!("{kind}: {what}"));
        self.fixes.extend(fix);
    }

    /// The drift report as a table.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .kinds
            .iter()
            .map(|(k, r)| {
                vec![
                    k.to_string(),
                    r.checked.to_string(),
                    r.wrong.to_string(),
                    r.missing.to_string(),
                    r.extra.to_string(),
                    r.samples.first().cloned().unwrap_or_default(),
                ]
            })
            .collect();
        crate::demo::render_table(
            &["kind", "checked", "wrong", "missing", "extra", "sample"],
            &rows,
        )
    }
}

/// Every item of a table (Scan, consistent).
pub async fn scan_all(client: &aws_sdk_dynamodb::Client, table: &str) -> anyhow::Result<Vec<Item>> {
    let pages = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send();
    let items: Result<Vec<Item>, _> = pages.collect::<Vec<_>>().await.into_iter().collect();
    Ok(items?)
}

/// Applies the fixes of a report.
pub async fn repair(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    report: &Report,
) -> anyhow::Result<usize> {
    let store = Store::new(client.clone());
    let mut applied = 0;
    for fix in &report.fixes {
        match fix {
            Fix::Update(u) => {
                if store.update(table, u.clone()).await? == shared::store::Written::Applied {
                    applied += 1;
                }
            }
            Fix::Delete(k) => {
                store.delete_keys(table, vec![k.clone()]).await?;
                applied += 1;
            }
            Fix::Put(i) => {
                store.put_items(table, vec![i.clone()]).await?;
                applied += 1;
            }
            Fix::History(r) => {
                if r.apply(&store, table).await? {
                    applied += 1;
                }
            }
        }
    }
    Ok(applied)
}

#[derive(Default)]
struct Partition {
    app: Option<Item>,
    stages: Vec<Item>,
    history: Vec<Item>,
}

/// Verifies the tracker's derived data in `table`.
pub async fn verify_tracker(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> anyhow::Result<Report> {
    Ok(verify_items(&scan_all(client, table).await?))
}

/// The tracker's drift (pure).
pub fn verify_items(items: &[Item]) -> Report {
    let mut report = Report::default();
    let mut parts: BTreeMap<String, Partition> = BTreeMap::new();
    let mut meta: Option<Item> = None;
    for item in items {
        let (Ok(pk), Ok(sk)) = (item.s(keys::PK), item.s(keys::SK)) else {
            continue;
        };
        match keys::kind(pk, sk) {
            Some(Kind::Application) => {
                parts.entry(pk.to_string()).or_default().app = Some(item.clone())
            }
            Some(Kind::Stage) => parts
                .entry(pk.to_string())
                .or_default()
                .stages
                .push(item.clone()),
            Some(Kind::History) => parts
                .entry(pk.to_string())
                .or_default()
                .history
                .push(item.clone()),
            Some(Kind::Meta) => {
                report.count = item.opt_i64(keys::COUNT_ATTR).ok().flatten();
                meta = Some(item.clone());
            }
            None => report.problems.push(format!(
                "unknown item {}",
                display_key(&key_of(item, &[keys::PK, keys::SK]))
            )),
        }
    }
    let mut active = 0;
    for (pk, p) in &parts {
        report.stages += p.stages.len();
        report.history_entries += p.history.len();
        let history = history_check::check_partition(pk, p.app.as_ref(), &p.stages, &p.history);
        for kind in history.checked {
            report.checked(kind);
        }
        for f in history.findings {
            let d = match f.drift {
                history_check::Drift::Wrong => Drift::Wrong,
                history_check::Drift::Missing => Drift::Missing,
                history_check::Drift::Extra => Drift::Extra,
            };
            report.drift(f.kind, d, f.what, f.repair.map(Fix::History));
        }
        let Some(app) = &p.app else {
            continue;
        };
        report.applications += 1;
        if app.opt_bool("isArchived").ok().flatten() == Some(false) {
            active += 1;
        }
        report.checked("gsi-keys");
        match TrackerDerive.projection(app) {
            Ok(Some(proj)) => {
                if let Some(update) = projection_update(TrackerDerive.key_names(), app, &proj) {
                    let what: Vec<&str> = proj
                        .attrs
                        .iter()
                        .filter(|(a, w)| app.get(*a) != w.as_ref())
                        .map(|(a, _)| *a)
                        .collect();
                    report.drift(
                        "gsi-keys",
                        Drift::Wrong,
                        format!("{pk}: {} stale", what.join(", ")),
                        Some(Fix::Update(update)),
                    );
                }
            }
            Ok(None) => {}
            Err(e) => report.problems.push(format!("{pk}: {e}")),
        }
    }
    report.checked("count");
    let count = report.count.unwrap_or(0);
    if count != active {
        let fix = Update {
            key: [
                (keys::PK.to_string(), s(keys::META_PK)),
                (keys::SK.to_string(), s(keys::COUNT_SK)),
            ]
            .into(),
            update_expression: "SET #c = :want".into(),
            condition_expression: Some(match meta {
                Some(_) => "#c = :seen".into(),
                None => "attribute_not_exists(#c)".into(),
            }),
            names: vec![("#c".into(), keys::COUNT_ATTR.into())],
            values: [(":want".to_string(), n(active))]
                .into_iter()
                .chain(report.count.map(|c| (":seen".to_string(), n(c))))
                .collect(),
        };
        let d = if report.count.is_none() {
            Drift::Missing
        } else {
            Drift::Wrong
        };
        report.drift(
            "count",
            d,
            format!("META/COUNT is {count}, expected {active} non-archived applications"),
            Some(Fix::Update(fix)),
        );
    }
    report
}

/// Verifies the job board's derived data in `table`, as of `now`.
pub async fn verify_jobboard(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Report> {
    Ok(verify_board_items(&scan_all(client, table).await?, now))
}

/// The job board's drift (pure): GSI1 keys, suggestions (level, TTL, pairs
/// that must not be suggested), matches (one per pair).
pub fn verify_board_items(items: &[Item], now: chrono::DateTime<chrono::Utc>) -> Report {
    let mut report = Report::default();
    let key = |i: &Item| key_of(i, &[bkeys::PK, bkeys::SK]);
    let mut jobs: BTreeMap<String, Job> = BTreeMap::new();
    let mut seekers: BTreeMap<String, Seeker> = BTreeMap::new();
    let mut requested: BTreeSet<(String, String)> = BTreeSet::new();
    let mut matches: BTreeMap<(String, String), Vec<Item>> = BTreeMap::new();
    let mut suggestions = Vec::new();
    for item in items {
        let Ok(k) = board_kind(item) else { continue };
        report.checked("gsi-keys");
        if let Ok(Some(p)) = JobBoardDerive.projection(item) {
            if k != BoardKind::Suggestion && k != BoardKind::Match {
                if let Some(u) = projection_update(JobBoardDerive.key_names(), item, &p) {
                    report.drift(
                        "gsi-keys",
                        Drift::Wrong,
                        format!("{}: GSI1 keys stale", display_key(&key(item))),
                        Some(Fix::Update(u)),
                    );
                }
            }
        }
        match k {
            BoardKind::Job => {
                if let Ok(j) = Job::parse(item) {
                    jobs.insert(j.job_id.clone(), j);
                }
            }
            BoardKind::Seeker => {
                if let Ok(s) = Seeker::parse(item) {
                    seekers.insert(s.seeker_id.clone(), s);
                }
            }
            BoardKind::Request => {
                if let (Ok(j), Ok(s)) = (item.s("jobId"), item.s("seekerId")) {
                    requested.insert((s.to_string(), j.to_string()));
                }
            }
            BoardKind::Match => {
                if let Ok(p) = Pair::parse("match", item) {
                    matches
                        .entry((p.seeker_id, p.job_id))
                        .or_default()
                        .push(item.clone());
                }
            }
            BoardKind::Suggestion => suggestions.push(item.clone()),
            BoardKind::Employer => {}
        }
    }
    for ((seeker, job), ms) in &matches {
        report.checked("matches");
        for extra in ms.iter().skip(1) {
            report.drift(
                "matches",
                Drift::Extra,
                format!("seeker {seeker} / job {job}: {} matches", ms.len()),
                Some(Fix::Delete(key(extra))),
            );
        }
    }
    let week = chrono::Duration::days(7).num_seconds();
    // Missing: every open job of the last 30 days and every seeker of its
    // city that the function rates R3 or better, unless requested or matched.
    let present: BTreeSet<(String, String)> = suggestions
        .iter()
        .filter_map(|s| {
            Some((
                s.s("seekerId").ok()?.to_string(),
                s.s("jobId").ok()?.to_string(),
            ))
        })
        .collect();
    let window_start = (now
        - chrono::Duration::days(shared::models::jobboard::suggestions::WINDOW_DAYS))
    .date_naive()
    .to_string();
    for j in jobs
        .values()
        .filter(|j| j.status == JobStatus::Open && j.posted_at >= window_start)
    {
        for sk in seekers
            .values()
            .filter(|s| bkeys::normalize_city(&s.city) == bkeys::normalize_city(&j.city))
        {
            let pair = (sk.seeker_id.clone(), j.job_id.clone());
            if present.contains(&pair) || requested.contains(&pair) || matches.contains_key(&pair) {
                continue;
            }
            let points = score(sk, j);
            if let Some(l) = level(points) {
                report.checked("suggestions");
                let item =
                    shared::models::jobboard::suggestions::suggestion_item(sk, j, l, points, now);
                report.drift(
                    "suggestions",
                    Drift::Missing,
                    format!(
                        "seeker {} / job {}: R{l} but no suggestion",
                        sk.seeker_id, j.job_id
                    ),
                    Some(Fix::Put(item)),
                );
            }
        }
    }
    for sug in &suggestions {
        report.checked("suggestions");
        let k = key(sug);
        let label = display_key(&k);
        let Ok(pair) = Pair::parse("suggestion", sug) else {
            report.drift(
                "suggestions",
                Drift::Wrong,
                format!("{label}: unreadable"),
                Some(Fix::Delete(k)),
            );
            continue;
        };
        let pk = (pair.seeker_id.clone(), pair.job_id.clone());
        let (job, seeker) = (jobs.get(&pair.job_id), seekers.get(&pair.seeker_id));
        let why_extra = match (job, seeker) {
            (None, _) => Some("the job no longer exists"),
            (_, None) => Some("the seeker no longer exists"),
            (Some(j), _) if j.status != JobStatus::Open => Some("the job is closed"),
            _ if requested.contains(&pk) => Some("the pair was requested"),
            _ if matches.contains_key(&pk) => Some("the pair is matched"),
            (Some(j), Some(s)) if level(score(s, j)).is_none() => Some("the pair scores below R3"),
            _ => None,
        };
        if let Some(why) = why_extra {
            report.drift(
                "suggestions",
                Drift::Extra,
                format!("{label}: {why}"),
                Some(Fix::Delete(k)),
            );
            continue;
        }
        let (Some(j), Some(sk)) = (job, seeker) else {
            continue;
        };
        let points = score(sk, j);
        let want = level(points).unwrap_or(3);
        let ttl = sug.opt_i64(bkeys::TTL).ok().flatten();
        let ttl_ok = ttl.is_some_and(|t| t <= now.timestamp() + week);
        if sug.i64("relevance").ok() != Some(i64::from(want)) || !ttl_ok {
            let fixed =
                shared::models::jobboard::suggestions::suggestion_item(sk, j, want, points, now);
            report.drift(
                "suggestions",
                Drift::Wrong,
                format!("{label}: relevance/TTL differ from the function (want R{want})"),
                Some(Fix::Put(fixed)),
            );
        }
    }
    report
}
