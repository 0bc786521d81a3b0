//! What `verify` checks of a `history:` block, per aggregate partition
//! (pure), and its repairs, applied through the same guards as the fold's
//! own writes: never a blind put.
//!
//! - numbering: entries 1..=n without gap, the mirror = n (a lost entry is
//!   restored as a placeholder only while it is absent and the root's
//!   mirror has reached it, and only below the last entry: a mirror past
//!   the last entry is the mirror's drift, set back to it while the next
//!   entry is absent, never a placeholder for an entry no change produced);
//! - no change applied twice (two entries with one id, a second adoption
//!   entry);
//! - the latest snapshot is the current state, as far as the descriptions
//!   tell changes apart (the attributes the root's `labels` and `updated`
//!   rules name, its key's names and every member; all of them without
//!   labels), naming the attributes that differ. Not checked: an earlier
//!   entry's snapshot, and any entry's description (an entry recording a
//!   change no writer made, ops16 #4, is seen only while it is the latest);
//! - items left behind by a deleted root: its entries, and its members
//!   beside them (deleted only while the root is still absent); members
//!   alone wait for their root and are no drift.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, Update as TxUpdate};

use super::history::{FileHistory, ENTRY_ID_NAMESPACE, SEQUENCE};
use crate::engine::fold::{FoldRules, FoldState};
use crate::engine::setjob::BoxFut;
use crate::item::{display_key, key_of, n, s, Item, ItemExt};
use crate::models::{Drift, Finding, GuardedRepair, ModelRepair, Repair};
use crate::store::{Store, TxError, Update, Written};

/// A repair of history, guarded like the live fold's own writes.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryRepair {
    /// A placeholder for a lost entry (at `key`), put only while the entry
    /// is absent and the root exists with its mirror at or past it.
    RestoreEntry {
        root_key: Item,
        key: Item,
        entry: Item,
        pk: &'static str,
        mirror: &'static str,
    },
    /// An item left behind by a deleted root, deleted only while the root
    /// is still absent.
    DeleteOrphan {
        root_key: Item,
        key: Item,
        pk: &'static str,
    },
    /// The mirror raised to `to`, as the fold writes it: never lowered.
    Mirror {
        root_key: Item,
        pk: &'static str,
        mirror: &'static str,
        to: u64,
    },
    /// A mirror past the last entry (no change produced the entries it
    /// claims, e.g. an earlier incarnation's count): set to the last
    /// entry, only while it still reads `from` and entry `to + 1` is
    /// absent. Never a placeholder for an entry no change produced.
    LowerMirror {
        root_key: Item,
        next_entry: Item,
        pk: &'static str,
        mirror: &'static str,
        from: u64,
        to: u64,
    },
    /// An entry past every entry the history wrote (its state in the
    /// ledger, `head`, and the root's mirror are both below `seq`): no
    /// change produced it (a writer's stray item). Deleted only while the
    /// root's mirror and the history's state are still below it and it is
    /// still the item read (its `id`): an entry the fold writes there
    /// meanwhile is its own and stays.
    DeleteStray {
        root_key: Item,
        key: Item,
        id: Option<String>,
        head: Item,
        pk: &'static str,
        mirror: &'static str,
        seq: u64,
    },
}

impl GuardedRepair for HistoryRepair {
    fn describe(&self) -> String {
        match self {
            HistoryRepair::RestoreEntry {
                root_key,
                key,
                entry,
                mirror,
                ..
            } => {
                let seq = entry.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0);
                format!(
                    "put a placeholder for the lost entry {} while it is absent and {mirror} of {} has reached {seq}",
                    display_key(key),
                    display_key(root_key)
                )
            }
            HistoryRepair::DeleteOrphan { root_key, key, .. } => format!(
                "delete {}, left behind by a deleted root, while {} is absent",
                display_key(key),
                display_key(root_key)
            ),
            HistoryRepair::Mirror {
                root_key,
                mirror,
                to,
                ..
            } => format!(
                "raise {mirror} of {} to {to} (never lowers it)",
                display_key(root_key)
            ),
            HistoryRepair::LowerMirror {
                root_key,
                next_entry,
                mirror,
                from,
                to,
                ..
            } => format!(
                "set {mirror} of {} from {from} back to the last entry {to} while it reads {from} and {} is absent",
                display_key(root_key),
                display_key(next_entry)
            ),
            HistoryRepair::DeleteStray {
                root_key,
                key,
                mirror,
                seq,
                ..
            } => format!(
                "delete the stray entry {} (no change produced it) while it is the item read and neither {mirror} of {} nor the history's state has reached {seq}",
                display_key(key),
                display_key(root_key)
            ),
        }
    }

    fn apply<'a>(
        &'a self,
        store: &'a Store,
        table: &'a str,
        ledger: &'a str,
    ) -> BoxFut<'a, Result<bool, crate::error::StoreError>> {
        Box::pin(async move {
            let check = |key: &Item, pk: &str, cond: &str, mirror: Option<(&str, u64)>| {
                let mut c = ConditionCheck::builder()
                    .table_name(table)
                    .set_key(Some(key.clone()))
                    .condition_expression(cond)
                    .expression_attribute_names("#pk", pk);
                if let Some((attr, seq)) = mirror {
                    c = c
                        .expression_attribute_names("#hs", attr)
                        .expression_attribute_values(":seq", n(seq));
                }
                crate::tx::check_of(c)
            };
            let actions = match self {
                HistoryRepair::Mirror {
                    root_key,
                    pk,
                    mirror,
                    to,
                } => {
                    let raise = Update {
                        key: root_key.clone(),
                        update_expression: "SET #a = :s".into(),
                        condition_expression: Some(
                            "attribute_exists(#k) AND (attribute_not_exists(#a) OR #a < :s)".into(),
                        ),
                        names: vec![
                            ("#a".into(), mirror.to_string()),
                            ("#k".into(), pk.to_string()),
                        ],
                        values: vec![(":s".into(), n(*to))],
                    };
                    return Ok(store.update(table, raise).await? == Written::Applied);
                }
                HistoryRepair::RestoreEntry {
                    root_key,
                    entry,
                    pk,
                    mirror,
                    ..
                } => {
                    let seq = entry.opt_i64(SEQUENCE).ok().flatten().unwrap_or(0).max(0) as u64;
                    let put = Put::builder()
                        .table_name(table)
                        .set_item(Some(entry.clone()))
                        .condition_expression("attribute_not_exists(#pk)")
                        .expression_attribute_names("#pk", *pk);
                    vec![
                        check(
                            root_key,
                            pk,
                            "attribute_exists(#pk) AND #hs >= :seq",
                            Some((mirror, seq)),
                        ),
                        crate::tx::put_of(put),
                    ]
                }
                HistoryRepair::LowerMirror {
                    root_key,
                    next_entry,
                    pk,
                    mirror,
                    from,
                    to,
                } => {
                    let lower = TxUpdate::builder()
                        .table_name(table)
                        .set_key(Some(root_key.clone()))
                        .update_expression("SET #hs = :to")
                        .condition_expression("attribute_exists(#pk) AND #hs = :from")
                        .expression_attribute_names("#pk", *pk)
                        .expression_attribute_names("#hs", *mirror)
                        .expression_attribute_values(":to", n(*to))
                        .expression_attribute_values(":from", n(*from));
                    vec![
                        check(next_entry, pk, "attribute_not_exists(#pk)", None),
                        crate::tx::update_of(lower),
                    ]
                }
                HistoryRepair::DeleteOrphan { root_key, key, pk } => {
                    vec![
                        check(root_key, pk, "attribute_not_exists(#pk)", None),
                        crate::tx::delete(table, key.clone()),
                    ]
                }
                HistoryRepair::DeleteStray {
                    root_key,
                    key,
                    id,
                    head,
                    pk,
                    mirror,
                    seq,
                } => {
                    let head_below = ConditionCheck::builder()
                        .table_name(ledger)
                        .set_key(Some(head.clone()))
                        .condition_expression("attribute_not_exists(#pk) OR #seq < :seq")
                        .expression_attribute_names("#pk", crate::ledger::PK)
                        .expression_attribute_names("#seq", "seq")
                        .expression_attribute_values(":seq", n(*seq));
                    let del = aws_sdk_dynamodb::types::Delete::builder()
                        .table_name(table)
                        .set_key(Some(key.clone()))
                        .expression_attribute_names("#id", "id");
                    let del = match id {
                        Some(id) => del
                            .condition_expression("#id = :id")
                            .expression_attribute_values(":id", s(id)),
                        None => del.condition_expression("attribute_not_exists(#id)"),
                    };
                    vec![
                        check(
                            root_key,
                            pk,
                            "attribute_exists(#pk) AND (attribute_not_exists(#hs) OR #hs < :seq)",
                            Some((mirror, *seq)),
                        ),
                        crate::tx::check_of(head_below),
                        crate::tx::delete_of(del),
                    ]
                }
            };
            match store.transact(actions).await {
                Ok(()) => Ok(true),
                Err(TxError::ConditionsFailed { .. }) => Ok(false),
                Err(TxError::Store(e)) => Err(e),
            }
        })
    }
}

fn finding(
    kind: &'static str,
    drift: Drift,
    what: String,
    repair: Option<HistoryRepair>,
) -> Finding {
    Finding {
        kind,
        drift,
        what,
        repair: repair.map(|r| Repair::Model(ModelRepair(Arc::new(r)))),
    }
}

#[derive(Default)]
struct Partition<'i> {
    root: Option<&'i Item>,
    members: Vec<&'i Item>,
    entries: Vec<&'i Item>,
}

impl FileHistory {
    /// The part of a snapshot its entries tell apart.
    fn comparable(&self, snapshot: &Item) -> Item {
        let h = self.spec();
        snapshot
            .iter()
            .filter(|(k, _)| {
                h.described.as_ref().is_none_or(|d| d.contains(&k.as_str()))
                    || h.members.iter().any(|m| m.list == k.as_str())
            })
            .filter(|(_, v)| !matches!(v, AttributeValue::Null(_)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Every history finding of the table's items (without the ledger:
    /// no entry is known to be past what the history wrote).
    pub fn check(&self, items: &[Item]) -> Vec<Finding> {
        self.check_tallied(items, &[]).1
    }

    /// [`Self::check`], with the ledger read after the table (the
    /// history's state of each aggregate: how many entries it wrote), and
    /// what it checked per kind: each aggregate with its root for its
    /// sequence, chain and snapshots, each without one for orphans.
    pub fn check_tallied(
        &self,
        items: &[Item],
        ledger: &[Item],
    ) -> ([(&'static str, u64); 4], Vec<Finding>) {
        let heads = self.heads(ledger);
        let deleted = self.deleted_states(ledger);
        let mut parts: BTreeMap<String, Partition> = BTreeMap::new();
        for item in items {
            let Ok((role, pk, sk)) = self.classify(item) else {
                continue;
            };
            let Some(agg) = self.aggregate_of(pk, sk) else {
                continue;
            };
            let p = parts.entry(agg).or_default();
            match role {
                super::history::Role::Root => p.root = Some(item),
                super::history::Role::Member(_) => p.members.push(item),
                super::history::Role::Entry => p.entries.push(item),
                super::history::Role::Other => {}
            }
        }
        let mut out = Vec::new();
        for (agg, p) in &parts {
            let state = crate::ledger::state_pk(self.spec().processor, agg);
            if p.root.is_none() && p.entries.is_empty() {
                // With `cascade: false` no member is a deleted root's
                // leftover: every one waits for its root.
                if let Some(known) = deleted.get(&state).filter(|_| self.spec().cascade) {
                    self.check_left_members(p, known, &mut out);
                    continue;
                }
            }
            self.check_partition(agg, p, heads.get(&state).copied(), &mut out);
        }
        let rooted = parts.values().filter(|p| p.root.is_some()).count() as u64;
        let checked = [
            ("history-sequence", rooted),
            ("history-chain", rooted),
            ("history-snapshot", rooted),
            ("orphans", parts.len() as u64 - rooted),
        ];
        (checked, out)
    }

    /// The entries the history wrote so far, by its state's ledger key:
    /// the HEADs of live aggregates (a deleted root's says nothing of the
    /// entries beside a re-created one).
    fn heads(&self, ledger: &[Item]) -> std::collections::HashMap<String, u64> {
        let prefix = format!("STATE#{}#", self.spec().processor);
        ledger
            .iter()
            .filter(|i| i.opt_s(crate::ledger::SK).ok().flatten() == Some("HEAD"))
            .filter(|i| i.opt_bool("deleted").ok().flatten() != Some(true))
            .filter_map(|i| {
                let pk = i.opt_s(crate::ledger::PK).ok().flatten()?;
                let seq = i.opt_i64("seq").ok().flatten()?;
                pk.starts_with(&prefix)
                    .then(|| (pk.to_string(), seq.max(0) as u64))
            })
            .collect()
    }

    /// Of each aggregate whose root's deletion the history folded (its
    /// HEAD says `deleted`, by its state's ledger key): the names of the
    /// parts its state holds, the members written since (their records
    /// folded) and the removed incarnation's members whose delete waits
    /// (`!<id>`), in the HEAD or as part items of its epoch.
    fn deleted_states(
        &self,
        ledger: &[Item],
    ) -> std::collections::HashMap<String, std::collections::BTreeSet<String>> {
        let prefix = format!("STATE#{}#", self.spec().processor);
        let mut out: std::collections::HashMap<String, std::collections::BTreeSet<String>> =
            Default::default();
        let mut epochs: std::collections::HashMap<&str, String> = Default::default();
        for head in ledger.iter().filter(|i| {
            i.opt_s(crate::ledger::SK).ok().flatten() == Some("HEAD")
                && i.opt_bool("deleted").ok().flatten() == Some(true)
        }) {
            let Some(pk) = head.opt_s(crate::ledger::PK).ok().flatten() else {
                continue;
            };
            if !pk.starts_with(&prefix) {
                continue;
            }
            let names = out.entry(pk.to_string()).or_default();
            // The parts in the HEAD, or else the part items of its epoch
            // (those of other epochs, or of none, are left overs).
            if let Some(AttributeValue::M(parts)) = head.get(crate::engine::fold::INLINE) {
                names.extend(parts.keys().cloned());
            } else if let Some(epoch) = head.opt_s("epoch").ok().flatten() {
                if !epoch.is_empty() {
                    epochs.insert(pk, crate::engine::fold::part_sk(epoch, ""));
                }
            }
        }
        for item in ledger {
            let (Some(pk), Some(sk)) = (
                item.opt_s(crate::ledger::PK).ok().flatten(),
                item.opt_s(crate::ledger::SK).ok().flatten(),
            ) else {
                continue;
            };
            let Some(name) = epochs.get(pk).and_then(|e| sk.strip_prefix(e.as_str())) else {
                continue;
            };
            if let Some(names) = out.get_mut(pk) {
                names.insert(name.to_string());
            }
        }
        out
    }

    /// Members under a root that is gone, with no entry beside them, whose
    /// root's deletion the history folded (`known`: the parts its state
    /// holds since, [`Self::deleted_states`]): a member the state holds
    /// (written since, or its delete waiting) waits for the root; any
    /// other was the removed incarnation's and its cascade left it
    /// (user11's finding 3: "members alone, waiting for their root",
    /// although their root came and went). Reported without a repair: a
    /// member written since whose record the history has not read yet
    /// looks the same until it has.
    fn check_left_members(
        &self,
        p: &Partition,
        known: &std::collections::BTreeSet<String>,
        out: &mut Vec<Finding>,
    ) {
        let [pkn, skn] = self.0.key_names();
        for member in &p.members {
            let key = key_of(member, &[pkn, skn]);
            let name = member.opt_s(skn).ok().flatten().unwrap_or_default();
            let pending = format!(
                "{}{}",
                crate::engine::fold::PENDING,
                crate::ledger::item_id(&key)
            );
            if known.contains(name) || known.contains(&pending) {
                continue;
            }
            out.push(finding(
                "orphans",
                Drift::Extra,
                format!(
                    "{} left behind by a deleted {}: the history folded its deletion and no record of this member since (not a member waiting for its root; if it was written since, run verify again once the history has read it)",
                    display_key(&key),
                    self.root_name()
                ),
                None,
            ));
        }
    }

    /// `head`: the entries the history's state says it wrote (its HEAD in
    /// the ledger), when known.
    fn check_partition(&self, agg: &str, p: &Partition, head: Option<u64>, out: &mut Vec<Finding>) {
        let h = self.spec();
        let [pkn, skn] = self.0.key_names();
        let (root_key, mirror) = self
            .sequence_mirror(agg)
            .expect("a file history has a mirror");
        let pk = self.label(agg);
        let Some(root) = p.root else {
            // Members alone wait for their root (written before it, or
            // while it was deleted: its next creation takes them in); an
            // entry left behind says the root existed and its cascade left
            // what it should have deleted.
            // (With `cascade: false` the members stay as written: only the
            // entries are left behind.)
            if p.entries.is_empty() {
                return;
            }
            let members = p.members.iter().filter(|_| h.cascade);
            for orphan in members.chain(&p.entries) {
                let key = key_of(orphan, &[pkn, skn]);
                out.push(finding(
                    "orphans",
                    Drift::Extra,
                    format!(
                        "{} left behind by a deleted {}",
                        display_key(&key),
                        self.root_name()
                    ),
                    Some(HistoryRepair::DeleteOrphan {
                        root_key: root_key.clone(),
                        key,
                        pk: pkn,
                    }),
                ));
            }
            return;
        };
        let mut entries: Vec<(u64, &Item)> = p
            .entries
            .iter()
            .filter_map(|e| Some((e.opt_i64(SEQUENCE).ok().flatten()? as u64, *e)))
            .collect();
        entries.sort_by_key(|(seq, _)| *seq);
        let mirrored = root.opt_i64(mirror).ok().flatten().unwrap_or(0).max(0) as u64;
        // Past both the history's state and the mirror: no change produced
        // the entry (a writer's stray item). An entry above the mirror
        // alone may be the fold's own whose mirror lags (written with the
        // state in one transaction, the mirror after it): only the state
        // tells them apart, so without it none is taken for a stray.
        if let Some(known) = head.map(|h| h.max(mirrored)) {
            let at = entries.partition_point(|(q, _)| *q <= known);
            for (seq, stray) in entries.split_off(at) {
                let key = key_of(stray, &[pkn, skn]);
                out.push(finding(
                    "history-sequence",
                    Drift::Extra,
                    format!(
                        "{pk}: entry {seq} ({}) is past the last entry the history wrote ({known}: its state and {mirror}): no change produced it, repair deletes it",
                        display_key(&key)
                    ),
                    Some(HistoryRepair::DeleteStray {
                        root_key: root_key.clone(),
                        key,
                        id: stray.opt_s("id").ok().flatten().map(str::to_string),
                        head: crate::ledger::key(
                            crate::ledger::state_pk(h.processor, agg),
                            "HEAD",
                        ),
                        pk: pkn,
                        mirror,
                        seq,
                    }),
                ));
            }
        }
        // Numbering and the mirror.
        let seqs: std::collections::BTreeSet<u64> = entries.iter().map(|(q, _)| *q).collect();
        let highest = seqs.iter().max().copied().unwrap_or(0);
        let last = highest.max(mirrored);
        // While the root is bad input nothing is written onto it: its
        // mirror waits for a valid root (the fold sets it then), so it is
        // not judged (a repair would write onto the rejected item); the
        // item is listed as bad input.
        let judged = self.validate(root).is_ok();
        for gap in (highest + 1..=last).take(usize::from(judged)) {
            // Past the last entry: the mirror claims entries no change is
            // known to have produced (an earlier incarnation's count written
            // onto a re-created root, say). The mirror is repaired.
            out.push(finding(
                "history-sequence",
                Drift::Missing,
                format!("{pk}: {mirror} is {mirrored}, past the last entry {highest} (entry {gap} was never written: repair sets {mirror} to {highest}, no placeholder)"),
                Some(HistoryRepair::LowerMirror {
                    root_key: root_key.clone(),
                    next_entry: self.entry_key(agg, gap),
                    pk: pkn,
                    mirror,
                    from: mirrored,
                    to: highest,
                }),
            ));
        }
        // The mirror raised first: a placeholder is put only once the
        // mirror has reached it, so the repairs run in this order.
        if mirrored < last && judged {
            out.push(finding(
                "history-sequence",
                Drift::Wrong,
                format!("{pk}: {mirror} is {mirrored}, expected {last}"),
                Some(HistoryRepair::Mirror {
                    root_key: key_of(root, &[pkn, skn]),
                    pk: pkn,
                    mirror,
                    to: last,
                }),
            ));
        }
        for gap in (1..=highest).filter(|q| !seqs.contains(q)) {
            let key = self.entry_key(agg, gap);
            let mut entry = key.clone();
            let id = uuid::Uuid::new_v5(
                &ENTRY_ID_NAMESPACE,
                format!("restored:{pk}:{gap}").as_bytes(),
            );
            for (k, v) in h.aggregate_attrs.iter().zip(self.values(agg)) {
                entry.insert(k.to_string(), s(v));
            }
            for (k, v) in [
                ("id", s(id.to_string())),
                (SEQUENCE, n(gap)),
                (
                    "description",
                    s("Entry lost; restored by jobstream verify --repair"),
                ),
                (
                    "createdAt",
                    s(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
                ),
                ("snapshotOmitted", s("the original entry was lost")),
                ("restored", AttributeValue::Bool(true)),
            ] {
                entry.insert(k.to_string(), v);
            }
            self.stamp(&mut entry);
            out.push(finding(
                "history-sequence",
                Drift::Missing,
                format!("{pk}: entry {gap} of 1..={last} is missing"),
                Some(HistoryRepair::RestoreEntry {
                    root_key: root_key.clone(),
                    key,
                    entry,
                    pk: pkn,
                    mirror,
                }),
            ));
        }
        // No change applied twice.
        let mut ids: BTreeMap<&str, u64> = BTreeMap::new();
        let mut adoptions = 0;
        for (seq, entry) in &entries {
            let wrong = |what: &str| {
                finding(
                    "history-chain",
                    Drift::Wrong,
                    format!("{pk}: entry {seq}: {what}"),
                    None,
                )
            };
            if let Some(first) = entry
                .opt_s("id")
                .ok()
                .flatten()
                .and_then(|id| ids.insert(id, *seq))
            {
                out.push(wrong(&format!("repeats the change of entry {first}")));
            }
            if entry.opt_s("description").ok().flatten() == Some(h.imported) {
                adoptions += 1;
                if adoptions > 1 {
                    out.push(wrong("a second adoption entry"));
                }
            }
        }
        // The latest snapshot is the current state; while the root or a
        // member is bad input, it holds their last valid state (the fold
        // writes no entry of bad input), and the item is listed as bad
        // input, not drift.
        let bad = !judged || p.members.iter().any(|i| self.validate(i).is_err());
        if let Some((seq, latest)) = entries.last().filter(|_| !bad) {
            let mut state = FoldState::default();
            let partition: Vec<Item> = std::iter::once(root)
                .chain(p.members.iter().copied())
                .cloned()
                .collect();
            state.parts = self.table_state(&partition).parts;
            let want = self.comparable(&self.snapshot(&state));
            let have = match latest.get("snapshot") {
                Some(AttributeValue::M(m)) => Some(self.comparable(m)),
                _ => None,
            };
            if have.as_ref() != Some(&want) && !latest.contains_key("snapshotOmitted") {
                // The attributes that differ, by name (ops16 #4: an older
                // file's fold recorded a newer file's index keys).
                let differ = match &have {
                    Some(have) => {
                        let names: std::collections::BTreeSet<&String> =
                            have.keys().chain(want.keys()).collect();
                        let names: Vec<&str> = names
                            .into_iter()
                            .filter(|a| have.get(*a) != want.get(*a))
                            .map(String::as_str)
                            .collect();
                        format!(" in {}", names.join(", "))
                    }
                    None => " (it has none)".to_string(),
                };
                out.push(finding(
                    "history-snapshot",
                    Drift::Wrong,
                    format!("{pk}: the latest snapshot (entry {seq}) differs from the current state{differ} (not repairable: history is append-only; the next change's entry shows the current state; verify compares no earlier snapshot, and no description)"),
                    None,
                ));
            }
        }
    }
}
