//! The history fold of the tracker: one `HIST#` entry per user-visible
//! change, numbered 1, 2, 3... per application, each with a snapshot of the
//! ApplicationResponse right after the change.
//!
//! State parts: `APP` (the application's attributes as they appear in a
//! snapshot) and `STAGE#<id>` (each stage's snapshot fields).

use aws_sdk_dynamodb::types::AttributeValue;
use uuid::Uuid;

use super::derive::kind_of;
use super::keys::{self, Kind};
use super::schema::{validate_application, validate_stage, LABELS, STAGE_FIELDS};
use crate::change::{Change, ChangeKind};
use crate::engine::fold::{
    Adoption, AdoptionRecord, Cascade, CascadeDelete, FoldOutput, FoldRules, FoldState, Restated,
};
use crate::error::InputError;
use crate::item::{display_key, item_size, n, s, Item, ItemExt, MAX_ITEM_BYTES};
use crate::metrics::names;

/// Namespace of history entry ids: `uuid v5(namespace, eventID)`, so a retry
/// writes the same id.
pub const ENTRY_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6a0b_5c4e_1f7d_4c1b_9e53_7b1d_2f30_a8c4);

const APP_PART: &str = "APP";

/// The tracker's history rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackerHistory;

/// Application attributes kept in a snapshot: all but keys, GSI keys and
/// `historySequence`.
pub fn snapshot_attributes(image: &Item) -> Item {
    image
        .iter()
        .filter(|(k, _)| {
            k.as_str() != keys::PK
                && k.as_str() != keys::SK
                && !keys::PROCESSOR_OWNED.contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A stage as it appears in a snapshot: its seven fields, `NULL` when absent.
pub fn stage_snapshot(image: &Item) -> Item {
    STAGE_FIELDS
        .iter()
        .map(|f| {
            (
                f.to_string(),
                image.get(*f).cloned().unwrap_or(AttributeValue::Null(true)),
            )
        })
        .collect()
}

/// The ApplicationResponse of a state: the application's attributes plus
/// `interviewStages` sorted by `order`, then `id`.
pub fn snapshot(state: &FoldState) -> Item {
    let mut snap = state.parts.get(APP_PART).cloned().unwrap_or_default();
    let mut stages: Vec<&Item> = state
        .parts
        .iter()
        .filter(|(k, _)| k.starts_with("STAGE#"))
        .map(|(_, v)| v)
        .collect();
    stages.sort_by_key(|st| {
        (
            st.opt_i64("order").ok().flatten().unwrap_or(i64::MAX),
            st.opt_s("id")
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_string(),
        )
    });
    snap.insert(
        "interviewStages".to_string(),
        AttributeValue::L(
            stages
                .into_iter()
                .map(|st| AttributeValue::M(st.clone()))
                .collect(),
        ),
    );
    snap
}

/// The description of an application MODIFY, or `None` when no labelled
/// field changed (e.g. only `updatedAt` or processor-owned attributes).
pub fn describe_application_modify(old: &Item, new: &Item) -> Option<String> {
    let archived = |i: &Item| i.opt_bool("isArchived").ok().flatten().unwrap_or(false);
    match (archived(old), archived(new)) {
        (false, true) => return Some("Archived application".to_string()),
        (true, false) => return Some("Restored from archive".to_string()),
        _ => {}
    }
    let labels: Vec<&str> = LABELS
        .iter()
        .filter(|(attr, _)| normalized(old.get(*attr)) != normalized(new.get(*attr)))
        .map(|(_, label)| *label)
        .collect();
    (!labels.is_empty()).then(|| format!("Updated {}", labels.join(", ")))
}

/// Absent and `NULL` are the same "null" of the seed.
fn normalized(v: Option<&AttributeValue>) -> Option<&AttributeValue> {
    match v {
        Some(AttributeValue::Null(_)) | None => None,
        other => other,
    }
}

fn stage_changed(old: &Item, new: &Item) -> bool {
    STAGE_FIELDS
        .iter()
        .chain(std::iter::once(&"applicationId"))
        .any(|f| normalized(old.get(*f)) != normalized(new.get(*f)))
}

fn entry(
    app_id: &str,
    seq: u64,
    description: String,
    change: &Change,
    state: &FoldState,
) -> (Item, Option<InputError>) {
    let id = Uuid::new_v5(&ENTRY_ID_NAMESPACE, change.event_id.as_bytes());
    let mut item: Item = [
        (keys::PK, s(keys::app_pk(app_id))),
        (keys::SK, s(keys::hist_sk(seq))),
        ("id", s(id.to_string())),
        ("applicationId", s(app_id)),
        ("sequence", n(seq)),
        ("description", s(description)),
        ("createdAt", s(change.at_iso())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let snap = AttributeValue::M(snapshot(state));
    item.insert("snapshot".to_string(), snap);
    let size = item_size(&item);
    if size > MAX_ITEM_BYTES {
        item.remove("snapshot");
        let reason = format!(
            "snapshot omitted: the entry would be {size} bytes, over the 400 KB item limit"
        );
        item.insert("snapshotOmitted".to_string(), s(&reason));
        let key = display_key(&crate::item::key_of(&item, &[keys::PK, keys::SK]));
        return (item, Some(InputError::Invalid { key, reason }));
    }
    (item, None)
}

/// The state of the items of a partition as they are: the application and
/// its stages that are valid, `seq` the highest entry there.
pub fn table_state(partition: &[Item]) -> FoldState {
    let mut state = FoldState::default();
    for item in partition {
        let sk = item.s(keys::SK).unwrap_or_default();
        match keys::kind(item.s(keys::PK).unwrap_or_default(), sk) {
            Some(Kind::History) => {
                let seq = item.opt_i64("sequence").ok().flatten().unwrap_or(0).max(0) as u64;
                state.seq = state.seq.max(seq);
            }
            Some(Kind::Application) if validate_application(item).is_ok() => {
                state
                    .parts
                    .insert(APP_PART.to_string(), snapshot_attributes(item));
            }
            Some(Kind::Stage) if validate_stage(item).is_ok() => {
                state.parts.insert(sk.to_string(), stage_snapshot(item));
            }
            _ => {}
        }
    }
    state
}

/// Description of the adoption entry: the first entry of an application
/// whose history jobstream did not see from its creation (see [`adoption`]).
pub const IMPORTED: &str = "Imported";

/// The adoption entry of `app_id` from the items of its partition as they
/// are: entry `n + 1` after the `n` entries already there (1 for an
/// application without history), description [`IMPORTED`], `createdAt` the
/// adoption's time, snapshot the application and its stages. `None`
/// without an application item: the state of the stages there instead.
pub fn adoption(
    app_id: &str,
    partition: &[Item],
    at: chrono::DateTime<chrono::Utc>,
    token: &str,
) -> Adoption {
    let mut state = table_state(partition);
    if !state.parts.contains_key(APP_PART) {
        return Adoption::Rootless(state);
    }
    state.seq += 1;
    let change = Change {
        event_id: format!("adopt:{app_id}:{token}"),
        sequence_number: crate::change::SequenceNumber::parse("0").expect("0 is a sequence number"),
        kind: ChangeKind::Insert,
        origin: crate::change::Origin::User,
        keys: Item::new(),
        old: None,
        new: None,
        at,
    };
    let (entry, _) = entry(app_id, state.seq, IMPORTED.to_string(), &change, &state);
    let id = entry.s("id").unwrap_or_default().to_string();
    Adoption::Entry { state, entry, id }
}

impl FoldRules for TrackerHistory {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn partition(&self, aggregate: &str) -> (&'static str, String) {
        (keys::PK, keys::app_pk(aggregate))
    }

    fn adopt(
        &self,
        app_id: &str,
        partition: &[Item],
        at: chrono::DateTime<chrono::Utc>,
        token: &str,
    ) -> Adoption {
        adoption(app_id, partition, at, token)
    }

    fn table_state(&self, partition: &[Item]) -> FoldState {
        table_state(partition)
    }

    fn entry_key(&self, aggregate: &str, seq: u64) -> Item {
        [
            (keys::PK.to_string(), s(keys::app_pk(aggregate))),
            (keys::SK.to_string(), s(keys::hist_sk(seq))),
        ]
        .into()
    }

    fn correct_entry(&self, entry: &Item, part: &str, value: Option<&Item>) -> Option<Item> {
        let Some(AttributeValue::M(snap)) = entry.get("snapshot") else {
            // Omitted (over 400 KB): nothing to correct.
            return None;
        };
        let mut state = FoldState::default();
        let mut app = snap.clone();
        if let Some(AttributeValue::L(stages)) = app.remove("interviewStages") {
            for st in stages {
                if let AttributeValue::M(st) = st {
                    let id = st
                        .opt_s("id")
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                        .to_string();
                    state.parts.insert(keys::stage_sk(&id), st);
                }
            }
        }
        state.parts.insert(APP_PART.to_string(), app);
        match value {
            Some(v) => state.parts.insert(part.to_string(), v.clone()),
            None => state.parts.remove(part),
        };
        let want = AttributeValue::M(snapshot(&state));
        if entry.get("snapshot") == Some(&want) {
            return None;
        }
        let mut fixed = entry.clone();
        fixed.insert("snapshot".to_string(), want);
        (item_size(&fixed) <= MAX_ITEM_BYTES).then_some(fixed)
    }

    fn adoption_record(&self, change: &Change) -> Option<AdoptionRecord> {
        let new = change.new.as_ref()?;
        let pk = new.s(keys::PK).ok()?;
        let sk = new.s(keys::SK).ok()?;
        let is_adoption = change.kind == ChangeKind::Insert
            && keys::kind(pk, sk) == Some(Kind::History)
            && new.opt_s("description").ok().flatten() == Some(IMPORTED);
        is_adoption.then(|| AdoptionRecord {
            aggregate: pk.trim_start_matches("APP#").to_string(),
            sequence: new.opt_i64("sequence").ok().flatten().unwrap_or(0).max(0) as u64,
            id: new
                .opt_s("id")
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_string(),
        })
    }

    fn restate(&self, entry: &Item, state: &FoldState) -> Restated {
        if !state.parts.contains_key(APP_PART) {
            return Restated::RootGone;
        }
        let want = AttributeValue::M(snapshot(state));
        if entry.get("snapshot") == Some(&want) {
            return Restated::Same;
        }
        let mut fixed = entry.clone();
        fixed.remove("snapshotOmitted");
        fixed.insert("snapshot".to_string(), want);
        if item_size(&fixed) > MAX_ITEM_BYTES {
            if entry.contains_key("snapshotOmitted") {
                return Restated::Same;
            }
            fixed.remove("snapshot");
            fixed.insert(
                "snapshotOmitted".to_string(),
                s("snapshot omitted: the entry would exceed the 400 KB item limit"),
            );
        }
        Restated::Rewrite(fixed)
    }

    fn starts_aggregate(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Insert
            && change.new.as_ref().and_then(|i| kind_of(i).ok()) == Some(Kind::Application)
    }

    fn removes_root(&self, change: &Change) -> bool {
        change.kind == ChangeKind::Remove
            && change.old.as_ref().and_then(|i| kind_of(i).ok()) == Some(Kind::Application)
    }

    fn absorb(&self, state: &mut FoldState, change: &Change) -> Result<(), InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        let part = match kind_of(image)? {
            Kind::Application => APP_PART.to_string(),
            Kind::Stage => image.s(keys::SK).unwrap_or_default().to_string(),
            Kind::History | Kind::Meta => return Ok(()),
        };
        match &change.new {
            None => {
                state.parts.remove(&part);
            }
            Some(new) if part == APP_PART => {
                validate_application(new)?;
                state.parts.insert(part, snapshot_attributes(new));
            }
            Some(new) => {
                validate_stage(new)?;
                state.parts.insert(part, stage_snapshot(new));
            }
        }
        Ok(())
    }

    fn aggregate(&self, change: &Change) -> Result<Option<String>, InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        match kind_of(image)? {
            Kind::Application | Kind::Stage => {
                let pk = image.s(keys::PK).unwrap_or_default();
                Ok(pk.strip_prefix("APP#").map(str::to_string))
            }
            Kind::History | Kind::Meta => Ok(None),
        }
    }

    fn cascade(&self, aggregate: &str, state: &FoldState) -> Cascade {
        let pk = keys::app_pk(aggregate);
        let key = |sk: String| -> Item {
            [
                (keys::PK.to_string(), s(&pk)),
                (keys::SK.to_string(), s(sk)),
            ]
            .into()
        };
        // The removed incarnation's stages, as it last had them (a stage of
        // a later incarnation under the same id differs and stays), and its
        // entries 1..=seq (a later incarnation's are written after this).
        let stages = state
            .parts
            .iter()
            .filter(|(name, _)| name.starts_with("STAGE#"))
            .map(|(name, part)| CascadeDelete {
                key: key(name.clone()),
                unchanged: Some(part.clone()),
            });
        let entries = (1..=state.seq).map(|seq| CascadeDelete {
            key: key(keys::hist_sk(seq)),
            unchanged: None,
        });
        Cascade {
            deletes: stages.chain(entries).collect(),
        }
    }

    fn sequence_mirror(&self, aggregate: &str) -> Option<(Item, &'static str)> {
        let key = [
            (keys::PK.to_string(), s(keys::app_pk(aggregate))),
            (keys::SK.to_string(), s(keys::app_sk(aggregate))),
        ]
        .into();
        Some((key, keys::HISTORY_SEQUENCE))
    }

    fn fold(
        &self,
        app_id: &str,
        state: &mut FoldState,
        change: &Change,
    ) -> Result<FoldOutput, InputError> {
        let image = change.latest_image().unwrap_or(&change.keys);
        let kind = kind_of(image)?;
        let description = match (kind, change.kind) {
            (Kind::Application, ChangeKind::Remove) => {
                // The cascade deleted the stages and entries: start afresh.
                *state = FoldState {
                    deleted: true,
                    ..FoldState::default()
                };
                return Ok(FoldOutput::default());
            }
            (Kind::Application, kind) => {
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                validate_application(new)?;
                if state.deleted {
                    *state = FoldState::default();
                }
                state
                    .parts
                    .insert(APP_PART.to_string(), snapshot_attributes(new));
                match (kind, &change.old) {
                    (ChangeKind::Modify, Some(old)) => describe_application_modify(old, new),
                    _ => Some(format!(
                        "Created application {} - {}",
                        new.s("companyName").unwrap_or_default(),
                        new.s("positionTitle").unwrap_or_default()
                    )),
                }
            }
            // A stage of a deleted application: the cascade's own removals.
            (Kind::Stage, _) if state.deleted => return Ok(FoldOutput::default()),
            (Kind::Stage, ChangeKind::Remove) => {
                let old = change
                    .old
                    .as_ref()
                    .expect("decoded REMOVE has an old image");
                let sk = old.s(keys::SK).unwrap_or_default().to_string();
                // A stage this incarnation does not have (e.g. one of a
                // deleted incarnation, removed by the cascade): no entry.
                if state.parts.remove(&sk).is_none() {
                    return Ok(FoldOutput::default());
                }
                Some(format!(
                    "Removed interview stage \"{}\"",
                    old.opt_s("name").ok().flatten().unwrap_or_default()
                ))
            }
            (Kind::Stage, kind) => {
                let new = change
                    .new
                    .as_ref()
                    .expect("decoded INSERT/MODIFY has a new image");
                validate_stage(new)?;
                let id = new.s("id").unwrap_or_default();
                // A MODIFY of a stage this incarnation does not have (a
                // stage of a deleted incarnation overwritten under the same
                // id) adds it.
                let known = state
                    .parts
                    .insert(keys::stage_sk(id), stage_snapshot(new))
                    .is_some();
                match (kind, &change.old) {
                    (ChangeKind::Modify, Some(old)) if known => {
                        stage_changed(old, new).then(|| {
                            format!(
                                "Updated interview stage \"{}\"",
                                old.opt_s("name").ok().flatten().unwrap_or_default()
                            )
                        })
                    }
                    _ => Some(format!(
                        "Added interview stage \"{}\"",
                        new.s("name").unwrap_or_default()
                    )),
                }
            }
            (Kind::History | Kind::Meta, _) => return Ok(FoldOutput::default()),
        };
        // Changes of stages of an application this processor has never seen
        // (adopted without a backfill) fold into the state but write no entry.
        let Some(description) = description.filter(|_| state.parts.contains_key(APP_PART)) else {
            return Ok(FoldOutput::default());
        };
        state.seq += 1;
        let (item, notice) = entry(app_id, state.seq, description, change, state);
        Ok(FoldOutput {
            entries: vec![item],
            notices: notice
                .map(|n| (names::SNAPSHOT_TOO_LARGE, n))
                .into_iter()
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::tracker::schema::tests::{app, stage};

    use crate::change::test_change as change;

    fn fold(state: &mut FoldState, c: Change) -> Vec<String> {
        TrackerHistory
            .fold("a", state, &c)
            .unwrap()
            .entries
            .iter()
            .map(|e| e.s("description").unwrap().to_string())
            .collect()
    }

    #[test]
    fn descriptions_of_every_change() {
        let mut st = FoldState::default();
        let a = app("a");
        assert_eq!(
            fold(&mut st, change(ChangeKind::Insert, None, Some(a.clone()))),
            ["Created application Acme - Engineer"]
        );
        let mut b = a.clone();
        b.insert("status".into(), s("interviewing"));
        b.insert("notes".into(), s("call back"));
        b.insert("companyName".into(), s("Acme Inc"));
        assert_eq!(
            fold(
                &mut st,
                change(ChangeKind::Modify, Some(a.clone()), Some(b.clone()))
            ),
            ["Updated Company Name, Status, Notes"]
        );
        let mut c = b.clone();
        c.insert("isArchived".into(), AttributeValue::Bool(true));
        assert_eq!(
            fold(
                &mut st,
                change(ChangeKind::Modify, Some(b.clone()), Some(c.clone()))
            ),
            ["Archived application"]
        );
        assert_eq!(
            fold(
                &mut st,
                change(ChangeKind::Modify, Some(c), Some(b.clone()))
            ),
            ["Restored from archive"]
        );
        let mut d = b.clone();
        d.insert("updatedAt".into(), s("2027-01-01T00:00:00.000Z"));
        d.insert("GSI1PK".into(), s("x"));
        d.insert("historySequence".into(), n(4));
        assert!(fold(
            &mut st,
            change(ChangeKind::Modify, Some(b), Some(d.clone()))
        )
        .is_empty());
        let s1 = stage("a", "s1", "Phone screen", 1);
        assert_eq!(
            fold(&mut st, change(ChangeKind::Insert, None, Some(s1.clone()))),
            ["Added interview stage \"Phone screen\""]
        );
        let mut s1b = s1.clone();
        s1b.insert("name".into(), s("Onsite"));
        assert_eq!(
            fold(
                &mut st,
                change(ChangeKind::Modify, Some(s1.clone()), Some(s1b.clone()))
            ),
            ["Updated interview stage \"Phone screen\""]
        );
        assert!(fold(
            &mut st,
            change(ChangeKind::Modify, Some(s1b.clone()), Some(s1b.clone()))
        )
        .is_empty());
        assert_eq!(
            fold(&mut st, change(ChangeKind::Remove, Some(s1b), None)),
            ["Removed interview stage \"Onsite\""]
        );
        assert_eq!(st.seq, 7);
    }

    #[test]
    fn snapshot_is_the_fold_with_stages_sorted() {
        let mut st = FoldState::default();
        fold(&mut st, change(ChangeKind::Insert, None, Some(app("a"))));
        fold(
            &mut st,
            change(ChangeKind::Insert, None, Some(stage("a", "z", "Second", 2))),
        );
        fold(
            &mut st,
            change(
                ChangeKind::Insert,
                None,
                Some(stage("a", "b", "First-b", 1)),
            ),
        );
        let out = TrackerHistory
            .fold(
                "a",
                &mut st,
                &change(
                    ChangeKind::Insert,
                    None,
                    Some(stage("a", "a", "First-a", 1)),
                ),
            )
            .unwrap();
        let e = &out.entries[0];
        assert_eq!(e.s("SK").unwrap(), "HIST#00000004");
        assert_eq!(e.i64("sequence").unwrap(), 4);
        assert_eq!(e.s("applicationId").unwrap(), "a");
        assert_eq!(e.s("createdAt").unwrap(), "2023-11-14T22:13:20.000Z");
        assert_eq!(
            e.s("id").unwrap(),
            Uuid::new_v5(&ENTRY_ID_NAMESPACE, b"ev").to_string()
        );
        assert_eq!(e.len(), 8);
        let AttributeValue::M(snap) = &e["snapshot"] else {
            panic!("snapshot is a map")
        };
        assert!(!snap.contains_key("PK") && !snap.contains_key("SK"));
        assert_eq!(snap["companyName"], s("Acme"));
        let AttributeValue::L(stages) = &snap["interviewStages"] else {
            panic!("list")
        };
        let names: Vec<_> = stages
            .iter()
            .map(|v| match v {
                AttributeValue::M(m) => m.s("name").unwrap().to_string(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(names, ["First-a", "First-b", "Second"]);
        let AttributeValue::M(first) = &stages[0] else {
            panic!("map")
        };
        assert_eq!(first.len(), 7);
        assert_eq!(first["performanceRating"], AttributeValue::Null(true));
    }

    #[test]
    fn application_remove_resets_and_ignores_cascaded_stage_removals() {
        let mut st = FoldState::default();
        fold(&mut st, change(ChangeKind::Insert, None, Some(app("a"))));
        fold(
            &mut st,
            change(ChangeKind::Insert, None, Some(stage("a", "s", "X", 0))),
        );
        let rm = change(ChangeKind::Remove, Some(app("a")), None);
        assert!(TrackerHistory.removes_root(&rm));
        let c = TrackerHistory.cascade("a", &st);
        let sks: Vec<&str> = c.deletes.iter().map(|d| d.key.s("SK").unwrap()).collect();
        assert_eq!(sks, ["STAGE#s", "HIST#00000001", "HIST#00000002"]);
        assert_eq!(
            c.deletes[0].unchanged.as_ref(),
            st.parts.get("STAGE#s"),
            "a stage is deleted only while it is the one this incarnation had"
        );
        assert!(fold(&mut st, rm).is_empty());
        assert!(st.deleted);
        assert!(fold(
            &mut st,
            change(ChangeKind::Remove, Some(stage("a", "s", "X", 0)), None)
        )
        .is_empty());
        assert_eq!(
            fold(&mut st, change(ChangeKind::Insert, None, Some(app("a")))),
            ["Created application Acme - Engineer"]
        );
        assert_eq!(st.seq, 1);
        assert!(!st.deleted);
    }

    #[test]
    fn oversized_snapshot_is_omitted_with_a_notice() {
        let mut st = FoldState::default();
        let mut a = app("a");
        a.insert("notes".into(), s("n".repeat(250_000)));
        a.insert("specialRequirements".into(), s("r".repeat(250_000)));
        let out = TrackerHistory
            .fold("a", &mut st, &change(ChangeKind::Insert, None, Some(a)))
            .unwrap_err();
        assert_eq!(
            out.kind(),
            "InvalidValue",
            "seed limits reject 250k-character notes"
        );
        // Within the limits per attribute, a snapshot can still exceed 400 KB
        // through many stages.
        let mut st = FoldState::default();
        fold(&mut st, change(ChangeKind::Insert, None, Some(app("a"))));
        for i in 0..250 {
            let mut stg = stage("a", &format!("s{i:03}"), "Stage", i);
            stg.insert("notes".into(), s("x".repeat(2000)));
            st.parts
                .insert(format!("STAGE#s{i:03}"), stage_snapshot(&stg));
        }
        let out = TrackerHistory
            .fold(
                "a",
                &mut st,
                &change(
                    ChangeKind::Insert,
                    None,
                    Some(stage("a", "new", "Last", 999)),
                ),
            )
            .unwrap();
        assert_eq!(out.notices.len(), 1);
        assert_eq!(out.notices[0].0, names::SNAPSHOT_TOO_LARGE);
        let e = &out.entries[0];
        assert!(!e.contains_key("snapshot"));
        assert!(e.s("snapshotOmitted").unwrap().contains("400 KB"));
        assert_eq!(
            e.s("description").unwrap(),
            "Added interview stage \"Last\""
        );
    }

    #[test]
    fn history_and_meta_items_are_not_folded() {
        let mut h = Item::new();
        h.insert("PK".into(), s("APP#a"));
        h.insert("SK".into(), s("HIST#00000001"));
        assert_eq!(
            TrackerHistory
                .aggregate(&change(ChangeKind::Insert, None, Some(h)))
                .unwrap(),
            None
        );
        assert_eq!(
            TrackerHistory
                .aggregate(&change(
                    ChangeKind::Insert,
                    None,
                    Some(stage("a", "s", "x", 0))
                ))
                .unwrap(),
            Some("a".to_string())
        );
    }
}
