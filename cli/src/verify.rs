//! Recomputes the tracker's derived data from its source items and reports
//! every difference: GSI keys, history numbering and last snapshot,
//! `historySequence`, META/COUNT, orphans of deleted applications.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use shared::engine::derive::DeriveRules;
use shared::engine::fold::FoldState;
use shared::item::{display_key, key_of, Item, ItemExt};
use shared::models::tracker::derive::TrackerDerive;
use shared::models::tracker::history::{snapshot, snapshot_attributes, stage_snapshot};
use shared::models::tracker::keys::{self, Kind};
use shared::models::tracker::schema::LABELS;

/// What verification found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub applications: usize,
    pub stages: usize,
    pub history_entries: usize,
    pub count: Option<i64>,
    /// One line per problem: what and where.
    pub problems: Vec<String>,
}

impl Report {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
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
    let items = scan_all(client, table).await?;
    Ok(verify_items(&items))
}

/// The part of a snapshot that a history entry must reflect: user-visible
/// fields and stages (a later `updatedAt`-only change writes no entry).
fn comparable(snapshot: &Item) -> Item {
    snapshot
        .iter()
        .filter(|(k, _)| {
            LABELS.iter().any(|(l, _)| l == k)
                || ["id", "isArchived", "interviewStages"].contains(&k.as_str())
        })
        .filter(|(_, v)| !matches!(v, AttributeValue::Null(_)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Verifies a set of items (pure).
pub fn verify_items(items: &[Item]) -> Report {
    let mut report = Report::default();
    let mut parts: BTreeMap<String, Partition> = BTreeMap::new();
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
            Some(Kind::Meta) => report.count = item.opt_i64(keys::COUNT_ATTR).ok().flatten(),
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
        let Some(app) = &p.app else {
            if !p.stages.is_empty() || !p.history.is_empty() {
                report.problems.push(format!(
                    "{pk}: {} stage(s) and {} history entr(ies) left behind by a deleted application",
                    p.stages.len(),
                    p.history.len()
                ));
            }
            continue;
        };
        report.applications += 1;
        if app.opt_bool("isArchived").ok().flatten() == Some(false) {
            active += 1;
        }
        match TrackerDerive.projection(app) {
            Ok(Some(proj)) => {
                for (attr, want) in &proj.attrs {
                    if app.get(*attr) != want.as_ref() {
                        report.problems.push(format!(
                            "{pk}: {attr} is {:?}, expected {:?}",
                            app.get(*attr),
                            want
                        ));
                    }
                }
            }
            Ok(None) => {}
            Err(e) => report.problems.push(format!("{pk}: {e}")),
        }
        let mut seqs: Vec<i64> = p
            .history
            .iter()
            .filter_map(|h| h.opt_i64("sequence").ok().flatten())
            .collect();
        seqs.sort_unstable();
        let expected: Vec<i64> = (1..=p.history.len() as i64).collect();
        if seqs != expected {
            report.problems.push(format!(
                "{pk}: history sequences {seqs:?} are not 1..={}",
                p.history.len()
            ));
        }
        for h in &p.history {
            let seq = h.opt_i64("sequence").ok().flatten().unwrap_or(0);
            if h.s(keys::SK).ok() != Some(keys::hist_sk(seq as u64).as_str()) {
                report.problems.push(format!(
                    "{pk}: entry {seq} has sort key {:?}",
                    h.s(keys::SK).ok()
                ));
            }
        }
        let last = p.history.len() as i64;
        let mirrored = app
            .opt_i64(keys::HISTORY_SEQUENCE)
            .ok()
            .flatten()
            .unwrap_or(0);
        if mirrored != last {
            report.problems.push(format!(
                "{pk}: historySequence is {mirrored}, expected {last}"
            ));
        }
        if let Some(latest) = p
            .history
            .iter()
            .max_by_key(|h| h.opt_i64("sequence").ok().flatten())
        {
            let mut state = FoldState::default();
            state.parts.insert("APP".into(), snapshot_attributes(app));
            for st in &p.stages {
                state.parts.insert(
                    st.s(keys::SK).unwrap_or_default().to_string(),
                    stage_snapshot(st),
                );
            }
            let want = comparable(&snapshot(&state));
            let have = match latest.get("snapshot") {
                Some(AttributeValue::M(m)) => Some(comparable(m)),
                _ => None,
            };
            if have.as_ref() != Some(&want) {
                report.problems.push(format!(
                    "{pk}: the latest history snapshot differs from the current state"
                ));
            }
        }
    }
    let count = report.count.unwrap_or(0);
    if count != active {
        report.problems.push(format!(
            "META/COUNT is {count}, expected {active} non-archived applications"
        ));
    }
    report
}
