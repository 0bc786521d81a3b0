//! Derived attributes of the tracker: GSI1/GSI2 keys and META/COUNT.

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::{self, Kind};
use super::schema::APPLICATION_STATUS;
use crate::engine::rules::{Contribution, Counter, Projection, Rules};
use crate::error::InputError;
use crate::item::{display_key, key_of, AttrError, Item, ItemExt};

/// The tracker's derive rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackerDerive;

/// Classifies an image by its key; unknown keys are bad input.
pub fn kind_of(image: &Item) -> Result<Kind, InputError> {
    let key = || display_key(&key_of(image, &[keys::PK, keys::SK]));
    let pk = image.s(keys::PK).map_err(|source| InputError::Attribute {
        entity: "item",
        key: key(),
        source,
    })?;
    let sk = image.s(keys::SK).map_err(|source| InputError::Attribute {
        entity: "item",
        key: key(),
        source,
    })?;
    keys::kind(pk, sk).ok_or_else(|| InputError::UnknownEntity { key: key() })
}

fn app_err(image: &Item) -> impl Fn(AttrError) -> InputError + '_ {
    move |source| InputError::Attribute {
        entity: "Application",
        key: display_key(&key_of(image, &[keys::PK, keys::SK])),
        source,
    }
}

/// The META/COUNT counter of non-archived applications (created by the
/// processor on the first count, kept at 0 when nothing counts).
pub fn count_counter() -> Counter {
    Counter {
        key: vec![
            (keys::PK, keys::META_PK.to_string()),
            (keys::SK, keys::COUNT_SK.to_string()),
        ],
        attrs: &[keys::COUNT_ATTR],
        create: Some(vec![]),
        remove_at_zero: false,
    }
}

impl Rules for TrackerDerive {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    /// GSI1 on every application; GSI2 only while not archived (sparse).
    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        if kind_of(image)? != Kind::Application {
            return Ok(None);
        }
        let err = app_err(image);
        let id = image.s("id").map_err(&err)?;
        let status = image.s("status").map_err(&err)?;
        if !APPLICATION_STATUS.contains(&status) {
            return Err(err(AttrError::Invalid {
                name: "status".into(),
                reason: "not one of the allowed values".to_string(),
            }));
        }
        let archived = image.bool("isArchived").map_err(&err)?;
        let updated_at = image.s("updatedAt").map_err(&err)?;
        let sort = AttributeValue::S(keys::updated_sk(updated_at, id));
        let active = (!archived).then(|| AttributeValue::S(keys::GSI2_ACTIVE.to_string()));
        Ok(Some(Projection {
            attrs: vec![
                (
                    keys::GSI1PK,
                    Some(AttributeValue::S(keys::gsi1pk(status, archived))),
                ),
                (keys::GSI1SK, Some(sort.clone())),
                (keys::GSI2PK, active.clone()),
                (keys::GSI2SK, active.map(|_| sort)),
            ],
            sources: vec!["status", "isArchived", "updatedAt", "id"],
        }))
    }

    /// An application contributes 1 to META/COUNT while not archived; only
    /// `isArchived` needs to be readable for that.
    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, InputError> {
        if kind_of(image)? != Kind::Application {
            return Ok(vec![]);
        }
        let archived = image.bool("isArchived").map_err(app_err(image))?;
        Ok(if archived {
            vec![]
        } else {
            vec![Contribution {
                counter: count_counter(),
                values: vec![(keys::COUNT_ATTR, 1)],
            }]
        })
    }

    fn counter(&self, image: &Item) -> Option<Counter> {
        (kind_of(image).ok()? == Kind::Meta).then(count_counter)
    }

    /// History entries imply nothing: skipped without a read.
    fn ignores(&self, keys: &Item) -> bool {
        matches!(kind_of(keys), Ok(Kind::History))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{Change, ChangeKind};
    use crate::engine::derive::projection_update;
    use crate::item::s;
    use crate::models::tracker::schema::tests::{app, stage};

    use crate::change::test_change as change;

    #[test]
    fn active_application_gets_both_gsis() {
        let p = TrackerDerive.projection(&app("a")).unwrap().unwrap();
        assert_eq!(p.attrs.len(), 4);
        assert_eq!(p.attrs[0], ("GSI1PK", Some(s("STATUS#applied#ARCHIVED#0"))));
        assert_eq!(
            p.attrs[1],
            ("GSI1SK", Some(s("UPDATED#2026-01-01T00:00:00.000Z#a")))
        );
        assert_eq!(p.attrs[2], ("GSI2PK", Some(s("ACTIVE"))));
        assert_eq!(
            p.attrs[3],
            ("GSI2SK", Some(s("UPDATED#2026-01-01T00:00:00.000Z#a")))
        );
    }

    #[test]
    fn archived_application_has_no_gsi2() {
        let mut a = app("a");
        a.insert("isArchived".into(), AttributeValue::Bool(true));
        a.insert("GSI2PK".into(), s("ACTIVE"));
        a.insert("GSI2SK".into(), s("x"));
        let p = TrackerDerive.projection(&a).unwrap().unwrap();
        assert_eq!(p.attrs[0], ("GSI1PK", Some(s("STATUS#applied#ARCHIVED#1"))));
        assert_eq!(p.attrs[2], ("GSI2PK", None));
        assert_eq!(p.attrs[3], ("GSI2SK", None));
        let u = projection_update(&["PK", "SK"], &a, &p).unwrap();
        assert_eq!(
            u.update_expression,
            "SET #p0 = :p0, #p1 = :p1 REMOVE #p2, #p3"
        );
    }

    #[test]
    fn projected_image_is_a_fixpoint() {
        let mut a = app("a");
        for (k, v) in TrackerDerive.projection(&a).unwrap().unwrap().attrs {
            a.insert(k.to_string(), v.unwrap());
        }
        let p = TrackerDerive.projection(&a).unwrap().unwrap();
        assert!(projection_update(&["PK", "SK"], &a, &p).is_none());
    }

    #[test]
    fn stages_history_and_meta_have_no_projection_unknown_is_bad_input() {
        assert_eq!(
            TrackerDerive.projection(&stage("a", "s", "x", 0)).unwrap(),
            None
        );
        let mut meta = Item::new();
        meta.insert("PK".into(), s("META"));
        meta.insert("SK".into(), s("COUNT"));
        assert_eq!(TrackerDerive.projection(&meta).unwrap(), None);
        let mut other = Item::new();
        other.insert("PK".into(), s("USER#1"));
        other.insert("SK".into(), s("X"));
        assert_eq!(
            TrackerDerive.projection(&other).unwrap_err().kind(),
            "UnknownEntity"
        );
    }

    #[test]
    fn invalid_status_is_bad_input() {
        let mut a = app("a");
        a.insert("status".into(), s("ghosted"));
        assert_eq!(
            TrackerDerive.projection(&a).unwrap_err().kind(),
            "InvalidValue"
        );
    }

    /// What a change does to the counters: new contributions minus old.
    fn counter_deltas(
        change: &Change,
    ) -> Result<std::collections::BTreeMap<String, i64>, InputError> {
        let mut deltas = std::collections::BTreeMap::new();
        for (image, sign) in [(&change.old, -1), (&change.new, 1)] {
            if let Some(img) = image {
                for c in TrackerDerive.contributions(img)? {
                    for (attr, v) in c.values {
                        *deltas
                            .entry(format!("{:?}|{attr}", c.counter.key))
                            .or_insert(0) += sign * v;
                    }
                }
            }
        }
        deltas.retain(|_, v| *v != 0);
        Ok(deltas)
    }

    #[test]
    fn count_deltas_follow_archiving() {
        let active = app("a");
        let mut archived = app("a");
        archived.insert("isArchived".into(), AttributeValue::Bool(true));
        let d = |c: Change| {
            counter_deltas(&c)
                .unwrap()
                .into_values()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            d(change(ChangeKind::Insert, None, Some(active.clone()))),
            vec![1]
        );
        assert_eq!(
            d(change(
                ChangeKind::Modify,
                Some(active.clone()),
                Some(archived.clone())
            )),
            vec![-1]
        );
        assert_eq!(
            d(change(
                ChangeKind::Modify,
                Some(archived.clone()),
                Some(active.clone())
            )),
            vec![1]
        );
        assert_eq!(
            d(change(
                ChangeKind::Modify,
                Some(active.clone()),
                Some(active.clone())
            )),
            Vec::<i64>::new()
        );
        assert_eq!(d(change(ChangeKind::Remove, Some(active), None)), vec![-1]);
        assert_eq!(
            d(change(ChangeKind::Remove, Some(archived.clone()), None)),
            Vec::<i64>::new()
        );
        assert_eq!(
            d(change(ChangeKind::Insert, None, Some(archived))),
            Vec::<i64>::new()
        );
        assert_eq!(
            d(change(
                ChangeKind::Insert,
                None,
                Some(stage("a", "s", "x", 1))
            )),
            Vec::<i64>::new()
        );
    }
}
