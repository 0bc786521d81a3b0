//! Verification of the tracker's history from the items of one partition
//! (pure), and its repairs, applied through the same guards as the live
//! fold: never a blind put.
//!
//! Checked per application:
//! - numbering: entries 1..=n without gap, `historySequence` = n;
//! - no change applied twice (two entries with one id, a creation that is
//!   not entry 1, a second adoption entry);
//! - each entry's snapshot is the previous one changed as its description
//!   says (stages added/removed/updated, labelled fields changed, archive
//!   flag), so a re-applied or skipped change shows;
//! - the latest snapshot is the current state;
//! - items left behind by a deleted application.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem};

use super::history::{snapshot, snapshot_attributes, stage_snapshot, ENTRY_ID_NAMESPACE, IMPORTED};
use super::keys;
use super::schema::LABELS;
use crate::engine::fold::FoldState;
use crate::item::{display_key, key_of, n, s, Item, ItemExt};
use crate::store::{Store, TxError, Update, Written};

pub use crate::models::Drift;

/// A repair of history, guarded like the live fold's own writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Repair {
    /// A placeholder for lost entry `sequence`, put only while the entry is
    /// absent and the application exists with `historySequence` (the
    /// mirror of the fold's HEAD, written after its commit) at or past it:
    /// a real entry is never overwritten, a deleted partition gets nothing.
    RestoreEntry { app_key: Item, entry: Item },
    /// An item left behind by a deleted application, deleted only while
    /// the application is still absent (not re-created meanwhile).
    DeleteOrphan { app_key: Item, key: Item },
    /// `historySequence` raised (never lowered), as the fold writes it.
    Mirror(Update),
}

impl Repair {
    /// Applies the repair; `false` when its guard no longer held (nothing
    /// written: a later verify sees the new state).
    pub async fn apply(
        &self,
        store: &Store,
        table: &str,
    ) -> Result<bool, crate::error::StoreError> {
        let check = |key: &Item, cond: &str, values: Vec<(&str, AttributeValue)>| {
            let mut c = ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key.clone()))
                .condition_expression(cond)
                .expression_attribute_names("#pk", keys::PK);
            if cond.contains("#hs") {
                c = c.expression_attribute_names("#hs", keys::HISTORY_SEQUENCE);
            }
            for (k, v) in values {
                c = c.expression_attribute_values(k, v);
            }
            TransactWriteItem::builder()
                .condition_check(c.build().expect("set"))
                .build()
        };
        let actions = match self {
            Repair::Mirror(u) => {
                return Ok(store.update(table, u.clone()).await? == Written::Applied)
            }
            Repair::RestoreEntry { app_key, entry } => {
                let seq = entry.get("sequence").cloned().unwrap_or_else(|| n(0));
                let put = Put::builder()
                    .table_name(table)
                    .set_item(Some(entry.clone()))
                    .condition_expression("attribute_not_exists(#pk)")
                    .expression_attribute_names("#pk", keys::PK)
                    .build()
                    .expect("set");
                vec![
                    check(
                        app_key,
                        "attribute_exists(#pk) AND #hs >= :seq",
                        vec![(":seq", seq)],
                    ),
                    TransactWriteItem::builder().put(put).build(),
                ]
            }
            Repair::DeleteOrphan { app_key, key } => {
                let del = Delete::builder()
                    .table_name(table)
                    .set_key(Some(key.clone()))
                    .build()
                    .expect("set");
                vec![
                    check(app_key, "attribute_not_exists(#pk)", vec![]),
                    TransactWriteItem::builder().delete(del).build(),
                ]
            }
        };
        match store.transact(actions).await {
            Ok(()) => Ok(true),
            Err(TxError::ConditionsFailed { .. }) => Ok(false),
            Err(TxError::Store(e)) => Err(e),
        }
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub kind: &'static str,
    pub drift: Drift,
    pub what: String,
    pub repair: Option<Repair>,
}

/// What checking one partition found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct HistoryCheck {
    /// Kinds checked (once per check made).
    pub checked: Vec<&'static str>,
    pub findings: Vec<Finding>,
}

impl HistoryCheck {
    fn found(&mut self, kind: &'static str, drift: Drift, what: String, repair: Option<Repair>) {
        self.findings.push(Finding {
            kind,
            drift,
            what,
            repair,
        });
    }
}

/// The part of a snapshot an entry must reflect: user-visible fields and
/// stages (a later `updatedAt`-only change writes no entry).
pub fn comparable(snapshot: &Item) -> Item {
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

fn snap(entry: &Item) -> Option<&Item> {
    match entry.get("snapshot") {
        Some(AttributeValue::M(m)) => Some(m),
        _ => None,
    }
}

fn stages_of(snapshot: &Item) -> BTreeMap<String, &Item> {
    match snapshot.get("interviewStages") {
        Some(AttributeValue::L(l)) => l
            .iter()
            .filter_map(|v| match v {
                AttributeValue::M(m) => Some((m.s("id").unwrap_or_default().to_string(), m)),
                _ => None,
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

fn present(v: Option<&AttributeValue>) -> Option<&AttributeValue> {
    v.filter(|v| !matches!(v, AttributeValue::Null(_)))
}

/// Why entry `cur` is not the previous snapshot `prev` changed as its
/// description says, if it is not.
pub fn transition_error(prev: &Item, cur: &Item, description: &str) -> Option<String> {
    let (ps, cs) = (stages_of(prev), stages_of(cur));
    let labels_changed: BTreeSet<&str> = LABELS
        .iter()
        .filter(|(a, _)| present(prev.get(*a)) != present(cur.get(*a)))
        .map(|(_, l)| *l)
        .collect();
    let archived = |i: &Item| i.opt_bool("isArchived").ok().flatten().unwrap_or(false);
    let same_stages = ps == cs;
    let ok = if let Some(name) = description.strip_prefix("Added interview stage ") {
        let added: Vec<_> = cs.keys().filter(|k| !ps.contains_key(*k)).collect();
        added.len() == 1
            && cs.len() == ps.len() + 1
            && format!("\"{}\"", cs[added[0]].s("name").unwrap_or_default()) == name
    } else if description.starts_with("Removed interview stage ") {
        ps.len() == cs.len() + 1 && cs.keys().all(|k| ps.contains_key(k))
    } else if description.starts_with("Updated interview stage ") {
        ps.len() == cs.len()
            && ps.keys().eq(cs.keys())
            && ps.iter().filter(|(k, v)| cs[*k] != **v).count() <= 1
    } else if description == "Archived application" {
        !archived(prev) && archived(cur) && same_stages
    } else if description == "Restored from archive" {
        archived(prev) && !archived(cur) && same_stages
    } else if let Some(list) = description.strip_prefix("Updated ") {
        let listed: BTreeSet<&str> = list.split(", ").collect();
        listed == labels_changed && same_stages && archived(prev) == archived(cur)
    } else {
        return Some(format!(
            "`{description}` is not a change of an existing application"
        ));
    };
    (!ok).then(|| format!("`{description}` does not match the change between the snapshots"))
}

/// Checks the history of one application partition `pk` (`app` absent:
/// a deleted application).
pub fn check_partition(
    pk: &str,
    app: Option<&Item>,
    stages: &[Item],
    history: &[Item],
) -> HistoryCheck {
    let mut out = HistoryCheck::default();
    let app_key: Item = [(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(pk))].into();
    let Some(app) = app else {
        for orphan in stages.iter().chain(history) {
            out.checked.push("orphans");
            let key = key_of(orphan, &[keys::PK, keys::SK]);
            out.found(
                "orphans",
                Drift::Extra,
                format!("{} left behind by a deleted application", display_key(&key)),
                Some(Repair::DeleteOrphan {
                    app_key: app_key.clone(),
                    key,
                }),
            );
        }
        return out;
    };
    let mut entries: Vec<(u64, &Item)> = history
        .iter()
        .filter_map(|h| Some((h.opt_i64("sequence").ok().flatten()? as u64, h)))
        .collect();
    entries.sort_by_key(|(seq, _)| *seq);
    check_numbering(pk, app, &app_key, &entries, &mut out);
    check_chain(pk, &entries, &mut out);
    if let Some((_, latest)) = entries.last() {
        out.checked.push("history-snapshot");
        let mut state = FoldState::default();
        state.parts.insert("APP".into(), snapshot_attributes(app));
        for st in stages {
            state.parts.insert(
                st.s(keys::SK).unwrap_or_default().to_string(),
                stage_snapshot(st),
            );
        }
        let want = comparable(&snapshot(&state));
        let have = snap(latest).map(comparable);
        if have.as_ref() != Some(&want) && !latest.contains_key("snapshotOmitted") {
            out.found("history-snapshot", Drift::Wrong, format!("{pk}: the latest snapshot differs from the current state (not repairable: history is append-only)"), None);
        }
    }
    out
}

fn check_numbering(
    pk: &str,
    app: &Item,
    app_key: &Item,
    entries: &[(u64, &Item)],
    out: &mut HistoryCheck,
) {
    out.checked.push("history-sequence");
    let seqs: BTreeSet<u64> = entries.iter().map(|(seq, _)| *seq).collect();
    let mirrored = app
        .opt_i64(keys::HISTORY_SEQUENCE)
        .ok()
        .flatten()
        .unwrap_or(0) as u64;
    let last = seqs.iter().max().copied().unwrap_or(0).max(mirrored);
    let id = pk.trim_start_matches("APP#");
    for gap in (1..=last).filter(|s| !seqs.contains(s)) {
        let mut entry: Item = [
            (keys::PK, s(pk)),
            (keys::SK, s(keys::hist_sk(gap))),
            (
                "id",
                s(uuid::Uuid::new_v5(
                    &ENTRY_ID_NAMESPACE,
                    format!("restored:{pk}:{gap}").as_bytes(),
                )
                .to_string()),
            ),
            ("applicationId", s(id)),
            ("sequence", n(gap)),
            (
                "description",
                s("Entry lost; restored by jobstream verify --repair"),
            ),
            (
                "createdAt",
                s(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
            ),
            ("snapshotOmitted", s("the original entry was lost")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        entry.insert("restored".into(), AttributeValue::Bool(true));
        out.found(
            "history-sequence",
            Drift::Missing,
            format!("{pk}: entry {gap} of 1..={last} is missing"),
            Some(Repair::RestoreEntry {
                app_key: app_key.clone(),
                entry,
            }),
        );
    }
    if mirrored != last {
        let fix = Update {
            key: key_of(app, &[keys::PK, keys::SK]),
            update_expression: "SET #a = :s".into(),
            condition_expression: Some(
                "attribute_exists(#k) AND (attribute_not_exists(#a) OR #a < :s)".into(),
            ),
            names: vec![
                ("#a".into(), keys::HISTORY_SEQUENCE.into()),
                ("#k".into(), keys::PK.into()),
            ],
            values: vec![(":s".into(), n(last))],
        };
        out.found(
            "history-sequence",
            Drift::Wrong,
            format!("{pk}: historySequence is {mirrored}, expected {last}"),
            Some(Repair::Mirror(fix)),
        );
    }
}

/// No change applied twice, and every entry the previous one changed as
/// its description says.
fn check_chain(pk: &str, entries: &[(u64, &Item)], out: &mut HistoryCheck) {
    let mut ids: BTreeMap<&str, u64> = BTreeMap::new();
    let mut adoptions = 0;
    let mut prev: Option<&Item> = None;
    let mut prev_seq = 0;
    for (seq, entry) in entries {
        if *seq != prev_seq + 1 {
            // A lost entry breaks the chain: start again after it.
            prev = None;
        }
        prev_seq = *seq;
        out.checked.push("history-chain");
        let description = entry.s("description").unwrap_or_default();
        let wrong = |what: String| Finding {
            kind: "history-chain",
            drift: Drift::Wrong,
            what: format!("{pk}: entry {seq}: {what}"),
            repair: None,
        };
        if let Some(first) = entry
            .opt_s("id")
            .ok()
            .flatten()
            .and_then(|id| ids.insert(id, *seq))
        {
            out.findings
                .push(wrong(format!("repeats the change of entry {first}")));
        }
        let restored = entry.contains_key("restored");
        let this = snap(entry);
        if description == IMPORTED {
            adoptions += 1;
            if adoptions > 1 {
                out.findings.push(wrong("a second adoption entry".into()));
            }
        } else if description.starts_with("Created application ") {
            if *seq != 1 {
                out.findings.push(wrong(
                    "a creation that is not the first entry (a change applied again)".into(),
                ));
            }
        } else if let (Some(p), Some(c)) = (prev, this) {
            if let Some(why) = transition_error(p, c, description) {
                out.findings.push(wrong(why));
            }
        }
        // A lost or omitted snapshot breaks the chain: start again after it.
        prev = if restored { None } else { this };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{test_change as change, ChangeKind};
    use crate::engine::fold::{FoldRules, FoldState};
    use crate::models::tracker::history::TrackerHistory;
    use crate::models::tracker::schema::tests::{app, stage};

    /// Entries a single consumer writes for `changes`, from the first write.
    fn fold_all(changes: Vec<crate::change::Change>) -> Vec<Item> {
        let mut st = FoldState::default();
        let mut out = Vec::new();
        for (i, mut c) in changes.into_iter().enumerate() {
            c.event_id = format!("ev{i}");
            out.extend(TrackerHistory.fold("a", &mut st, &c).unwrap().entries);
        }
        out
    }

    fn scenario() -> (Item, Item, Vec<Item>) {
        let a = app("a");
        let mut b = a.clone();
        b.insert("notes".into(), s("n"));
        let st = stage("a", "s1", "Screen", 1);
        let entries = fold_all(vec![
            change(ChangeKind::Insert, None, Some(a.clone())),
            change(ChangeKind::Insert, None, Some(st.clone())),
            change(ChangeKind::Modify, Some(a), Some(b.clone())),
        ]);
        (b, st, entries)
    }

    fn kinds(c: &HistoryCheck) -> Vec<&str> {
        c.findings.iter().map(|f| f.kind).collect()
    }

    #[test]
    fn a_single_consumers_history_is_clean() {
        let (app, st, entries) = scenario();
        let mut app = app;
        app.insert(keys::HISTORY_SEQUENCE.into(), n(3));
        let c = check_partition("APP#a", Some(&app), &[st], &entries);
        assert!(c.findings.is_empty(), "{:#?}", c.findings);
    }

    #[test]
    fn a_change_applied_again_after_an_import_is_found() {
        let (mut app, st, entries) = scenario();
        // The race: entry 1 imported (stage included), then the
        // consumer's creation and stage again.
        let mut imported = entries[1].clone();
        imported.insert("description".into(), s(IMPORTED));
        imported.insert("id".into(), s("import"));
        imported.insert("sequence".into(), n(1));
        imported.insert(keys::SK.into(), s(keys::hist_sk(1)));
        let mut again = vec![imported];
        for (i, e) in entries.iter().enumerate() {
            let mut e = e.clone();
            e.insert("sequence".into(), n(i + 2));
            e.insert(keys::SK.into(), s(keys::hist_sk(i as u64 + 2)));
            again.push(e);
        }
        app.insert(keys::HISTORY_SEQUENCE.into(), n(4));
        let c = check_partition("APP#a", Some(&app), &[st], &again);
        assert_eq!(kinds(&c), ["history-chain"], "{:#?}", c.findings);
        assert!(c.findings[0].what.contains("entry 2"));
    }

    #[test]
    fn the_same_change_twice_and_a_snapshot_out_of_step_are_found() {
        let (mut app, st, entries) = scenario();
        let mut dup = entries[1].clone();
        dup.insert("sequence".into(), n(4));
        dup.insert(keys::SK.into(), s(keys::hist_sk(4)));
        let mut all = entries.clone();
        all.push(dup);
        app.insert(keys::HISTORY_SEQUENCE.into(), n(4));
        let c = check_partition("APP#a", Some(&app), &[st], &all);
        let what: Vec<&str> = c.findings.iter().map(|f| f.what.as_str()).collect();
        assert!(
            what.iter()
                .any(|w| w.contains("repeats the change of entry 2")),
            "{what:?}"
        );
        assert!(
            what.iter().any(|w| w.contains("does not match")),
            "{what:?}"
        );
    }

    #[test]
    fn repairs_are_guarded() {
        let (mut app, _, entries) = scenario();
        app.insert(keys::HISTORY_SEQUENCE.into(), n(3));
        let c = check_partition("APP#a", Some(&app), &[], &entries[..2]);
        let restore = c
            .findings
            .iter()
            .find_map(|f| match &f.repair {
                Some(Repair::RestoreEntry { entry, .. }) => Some(entry),
                _ => None,
            })
            .expect("a lost entry is restored");
        assert!(restore.contains_key("restored"));
        let orphans = check_partition("APP#gone", None, &[], &entries);
        assert!(orphans
            .findings
            .iter()
            .all(|f| matches!(f.repair, Some(Repair::DeleteOrphan { .. }))));
    }
}
