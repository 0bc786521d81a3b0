//! The league's stream rules (pure): GSI keys of events, matches,
//! predictions and standings; a prediction's contribution to its standings;
//! the scoring jobs a change starts.
//!
//! A prediction's `points`/`mcorrect` depend on its event's matches, so they
//! are not a projection: the scoring set job ([`super::scoring`]) writes them
//! together with the GSI keys computed by [`prediction_attrs`], the same
//! function the projection uses, so the record of that write is a fixpoint.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::{
    key_display, kind, standings_of, stored_count, Event, EventId, Kind, Match, Prediction, User,
};
use super::keys;
use super::messages::{encode, ScoreJob};
use crate::change::{Change, ChangeKind};
use crate::engine::rules::{Contribution, Counter, Note, OutMessage, Projection, Rules};
use crate::error::InputError;
use crate::item::{s, Item, ItemExt};
use crate::metrics::{names, BatchMetrics, Metrics};

/// Logical name of the scoring queue.
pub const SCORING_QUEUE: &str = "scoring";

/// Attributes of a standings item (and of a prediction's score).
pub const POINTS: &str = "points";
pub const MCORRECT: &str = "mcorrect";
pub const EPLAYED: &str = "eplayed";
pub const STANDINGS_ATTRS: &[&str] = &[POINTS, MCORRECT, EPLAYED];
/// The attribute of the ledger-only version of an event's set of matches.
pub const MATCHES_ATTR: &str = "matches";

/// The league's derive rules.
#[derive(Debug, Clone, Copy, Default)]
pub struct PickemRules;

/// A prediction's score.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Score {
    pub points: i64,
    pub mcorrect: i64,
}

/// The score of `picks` against an event's matches: the points of every
/// match that has a result equal to the pick, and how many; `None` when
/// the points overflow a 64-bit integer (bad input, never a wrapped sum).
pub fn score(picks: &BTreeMap<String, i64>, matches: &[Match]) -> Option<Score> {
    let mut out = Score::default();
    for m in matches {
        if m.result.is_some() && picks.get(&m.id) == m.result.as_ref() {
            out.points = out.points.checked_add(m.points)?;
            out.mcorrect += 1;
        }
    }
    Some(out)
}

static OVERFLOWS: AtomicU64 = AtomicU64::new(0);

/// Values clamped into a sort key by this process so far.
pub fn overflows() -> u64 {
    OVERFLOWS.load(Ordering::Relaxed)
}

/// Logs and counts a value clamped into a sort key (once per write that
/// stores it): a `ScoreOverflow` metric (an EMF line in Lambda).
pub fn report_overflow(what: &'static str, key: &str, value: i64) {
    OVERFLOWS.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        metric = names::SCORE_OVERFLOW,
        what,
        key,
        value,
        "value does not fit its sort key's padding: clamped in the key only"
    );
    let mut batch = BatchMetrics::default();
    batch.incr(names::SCORE_OVERFLOW);
    Metrics::default().record("pickem", &batch);
}

/// Whether a clamped sort key is about to be written (the image does not
/// carry it yet): the clamp is reported once per write, not per read.
pub fn clamp_to_report(image: &Item, sk: &str, clamped: bool) -> bool {
    clamped && image.get(keys::GSI_SK) != Some(&AttributeValue::S(sk.to_string()))
}

/// The note of a value clamped into a sort key (the engine logs and counts
/// it as `ScoreOverflow` when it writes the key).
fn clamp_note(what: &str, value: i64, sk: &str) -> Note {
    Note {
        metric: names::SCORE_OVERFLOW,
        reason: format!(
            "{what} {value} does not fit its sort key's padding: clamped in the key only ({sk})"
        ),
    }
}

/// The processor-owned key attributes of a prediction with `points`
/// (also written by the scoring job, with `points`/`mcorrect`).
pub fn prediction_attrs(
    user: &str,
    event: &EventId,
    gsi_sk: String,
) -> Vec<(&'static str, Option<AttributeValue>)> {
    vec![
        (keys::GSI_PK, Some(s(keys::event_key(event.as_str())))),
        (keys::GSI_SK, Some(s(gsi_sk))),
        (keys::BELONGSTO, Some(s(keys::user_pk(user)))),
    ]
}

/// The standings counter of (user, year).
pub fn standings_counter(user: &str, year: &str) -> Counter {
    Counter {
        key: vec![
            (keys::PK, keys::user_pk(user)),
            (keys::SK, keys::standings_key(year)),
        ],
        attrs: STANDINGS_ATTRS,
        create: Some(vec![
            (keys::TYPE, s(Kind::Standings.type_name())),
            (keys::BELONGSTO, s(keys::user_pk(user))),
        ]),
        remove_at_zero: true,
    }
}

/// The ledger-only counter versioning an event's set of matches (see
/// [`keys::matches_version_key`]): never an item of the table.
pub fn matches_version_counter(event: &EventId) -> Counter {
    let (pk, sk) = keys::matches_version_key(event.as_str());
    Counter {
        key: vec![(keys::PK, pk), (keys::SK, sk)],
        attrs: &[MATCHES_ATTR],
        create: None,
        remove_at_zero: false,
    }
}

fn queue(job: &ScoreJob) -> OutMessage {
    OutMessage {
        queue: SCORING_QUEUE,
        body: encode(job),
    }
}

/// Whether a prediction's stored score was written by someone other than
/// the scoring job: the job writes `points`, `mcorrect` and the matching
/// `GSI_SK` together, so a change of the score that leaves them missing or
/// out of step came from a writer and must be brought back.
fn stray_score(old: Option<&Item>, new: &Item, user: &str) -> bool {
    let changed = |a: &str| old.and_then(|o| o.get(a)) != new.get(a);
    if !changed(POINTS) && !changed(MCORRECT) {
        return false;
    }
    let (Some(points), Some(_)) = (stored_count(new, POINTS), stored_count(new, MCORRECT)) else {
        return true;
    };
    new.get(keys::GSI_SK) != Some(&s(keys::prediction_gsi_sk(points, user).0))
}

/// The ledger index of an event's predictions (members: user ids).
pub fn event_predictions_index(event_id: &str) -> String {
    format!("event-predictions#{event_id}")
}

impl Rules for PickemRules {
    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn projection(&self, image: &Item) -> Result<Option<Projection>, InputError> {
        let none = |a: &'static str| (a, None);
        Ok(Some(match kind(image)? {
            Kind::User => {
                User::parse(image)?;
                Projection {
                    attrs: vec![
                        none(keys::GSI_PK),
                        none(keys::GSI_SK),
                        none(keys::BELONGSTO),
                    ],
                    sources: vec![],
                }
            }
            Kind::Event => {
                let e = Event::parse(image)?;
                Projection {
                    attrs: vec![
                        (keys::GSI_PK, Some(s(keys::event_key(e.id.as_str())))),
                        (keys::GSI_SK, Some(s(keys::EVENT_GSI_SK))),
                        none(keys::BELONGSTO),
                    ],
                    sources: vec![],
                }
            }
            Kind::Match => {
                let m = Match::parse(image)?;
                let (sk, _) = keys::match_gsi_sk(m.order);
                Projection {
                    attrs: vec![
                        (keys::GSI_PK, Some(s(keys::event_key(m.event.as_str())))),
                        (keys::GSI_SK, Some(s(sk))),
                        none(keys::BELONGSTO),
                    ],
                    sources: vec!["order"],
                }
            }
            Kind::Prediction => {
                let p = Prediction::parse(image)?;
                let points = stored_count(image, POINTS).unwrap_or(0);
                let (sk, _) = keys::prediction_gsi_sk(points, &p.user);
                Projection {
                    attrs: prediction_attrs(&p.user, &p.event, sk),
                    sources: vec![POINTS],
                }
            }
            Kind::Standings => {
                let Some((user, year)) = standings_of(image) else {
                    return Err(InputError::Invalid {
                        key: key_display(image),
                        reason: "SK is not STANDINGS#<year> or the user id is invalid".into(),
                    });
                };
                let points = stored_count(image, POINTS).unwrap_or(0);
                let (sk, _) = keys::standings_gsi_sk(points, &user);
                Projection {
                    attrs: vec![
                        (keys::GSI_PK, Some(s(keys::standings_key(&year)))),
                        (keys::GSI_SK, Some(s(sk))),
                        (keys::BELONGSTO, Some(s(keys::user_pk(&user)))),
                    ],
                    sources: vec![POINTS],
                }
            }
        }))
    }

    /// A sort key clamped by [`Rules::projection`] (pure: the engine counts
    /// it when it writes the key).
    fn notes(&self, image: &Item) -> Vec<Note> {
        let clamp = |what: &str, value: i64, (sk, clamped): (String, bool)| {
            clamped.then(|| clamp_note(what, value, &sk))
        };
        let note = match kind(image) {
            Ok(Kind::Match) => Match::parse(image)
                .ok()
                .and_then(|m| clamp("match order", m.order, keys::match_gsi_sk(m.order))),
            Ok(Kind::Prediction) => Prediction::parse(image).ok().and_then(|p| {
                let points = stored_count(image, POINTS).unwrap_or(0);
                clamp(
                    "prediction points",
                    points,
                    keys::prediction_gsi_sk(points, &p.user),
                )
            }),
            Ok(Kind::Standings) => standings_of(image).and_then(|(user, _)| {
                let points = stored_count(image, POINTS).unwrap_or(0);
                clamp(
                    "standings points",
                    points,
                    keys::standings_gsi_sk(points, &user),
                )
            }),
            _ => None,
        };
        note.into_iter().collect()
    }

    /// A prediction adds its points, its correct matches and 1 played event
    /// to its user's standings of the event's year; a match adds 1 to the
    /// ledger-only version of its event's set of matches.
    /// A prediction is a member of its event's prediction index: the
    /// scoring job lists an event's predictions from it (exact), not from
    /// the GSI (which may lag).
    fn memberships(&self, image: &Item) -> Result<Vec<(String, String)>, InputError> {
        Ok(match kind(image) {
            Ok(Kind::Prediction) => {
                let p = Prediction::parse(image)?;
                vec![(event_predictions_index(p.event.as_str()), p.user)]
            }
            _ => vec![],
        })
    }

    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, InputError> {
        Ok(match kind(image)? {
            Kind::Prediction => {
                let p = Prediction::parse(image)?;
                vec![Contribution {
                    counter: standings_counter(&p.user, p.event.year()),
                    values: vec![
                        (POINTS, stored_count(image, POINTS).unwrap_or(0)),
                        (MCORRECT, stored_count(image, MCORRECT).unwrap_or(0)),
                        (EPLAYED, 1),
                    ],
                }]
            }
            Kind::Match => {
                let m = Match::parse(image)?;
                vec![Contribution {
                    counter: matches_version_counter(&m.event),
                    values: vec![(MATCHES_ATTR, 1)],
                }]
            }
            Kind::User => {
                User::parse(image)?;
                vec![]
            }
            Kind::Event => {
                Event::parse(image)?;
                vec![]
            }
            Kind::Standings => vec![],
        })
    }

    /// Standings items are counters (recognised from the key alone).
    fn counter(&self, image: &Item) -> Option<Counter> {
        let (user, year) = standings_of(image)?;
        Some(standings_counter(&user, &year))
    }

    /// - a match added, removed, or whose `result` or `points` changed (or
    ///   that became valid or invalid): score the whole event;
    /// - a prediction inserted, whose picks changed, or whose score a writer
    ///   overwrote: score that prediction.
    ///
    /// Bad input starts nothing here (the reconcile reports it).
    fn messages(&self, change: &Change) -> Result<Vec<OutMessage>, InputError> {
        let Ok(k) = kind(&change.keys) else {
            return Ok(vec![]);
        };
        Ok(match k {
            Kind::Match => {
                let old = change.old.as_ref().map(Match::parse);
                let new = change.new.as_ref().map(Match::parse);
                let same = match (&old, &new) {
                    (Some(Ok(o)), Some(Ok(n))) => o.result == n.result && o.points == n.points,
                    (Some(Err(_)), Some(Err(_))) => true,
                    _ => false,
                };
                let event = change
                    .keys
                    .s(keys::PK)
                    .ok()
                    .and_then(|pk| pk.strip_prefix(keys::EVENT_PREFIX))
                    .and_then(EventId::parse);
                match event {
                    Some(e) if !same => vec![queue(&ScoreJob::Event {
                        event_id: e.as_str().to_string(),
                    })],
                    _ => vec![],
                }
            }
            Kind::Prediction => {
                let Some(new_item) = change
                    .new
                    .as_ref()
                    .filter(|_| change.kind != ChangeKind::Remove)
                else {
                    return Ok(vec![]);
                };
                let Ok(new) = Prediction::parse(new_item) else {
                    return Ok(vec![]);
                };
                let old_valid = change
                    .old
                    .as_ref()
                    .is_some_and(|o| Prediction::parse(o).is_ok());
                let picks_changed = change.old.as_ref().and_then(|o| o.get("predictions"))
                    != new_item.get("predictions");
                if change.kind == ChangeKind::Insert
                    || !old_valid
                    || picks_changed
                    || stray_score(change.old.as_ref(), new_item, &new.user)
                {
                    vec![queue(&ScoreJob::Predictions {
                        event_id: new.event.as_str().to_string(),
                        users: vec![new.user],
                    })]
                } else {
                    vec![]
                }
            }
            Kind::User | Kind::Event | Kind::Standings => vec![],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::test_change as change;
    use crate::engine::derive::projection_update;
    use crate::item::n;
    use crate::models::pickem::entities::tests::{a_match, event, item, prediction, user};

    const EV: &str = "2024-03-03-aew-revolution";

    fn attrs(p: &Projection) -> Vec<(&'static str, Option<AttributeValue>)> {
        p.attrs.clone()
    }

    fn scored(mut p: Item, points: i64, mcorrect: i64) -> Item {
        let user = p.s("PK").unwrap().trim_start_matches("USER#").to_string();
        p.insert("points".into(), n(points));
        p.insert("mcorrect".into(), n(mcorrect));
        p.insert("GSI_PK".into(), s(format!("EVENT#{EV}")));
        p.insert("GSI_SK".into(), s(keys::prediction_gsi_sk(points, &user).0));
        p.insert("belongsto".into(), s(format!("USER#{user}")));
        p
    }

    fn bodies(c: Change) -> Vec<serde_json::Value> {
        PickemRules
            .messages(&c)
            .unwrap()
            .into_iter()
            .map(|m| {
                assert_eq!(m.queue, "scoring");
                serde_json::from_str(&m.body).unwrap()
            })
            .collect()
    }

    #[test]
    fn score_sums_points_of_matches_whose_result_is_the_pick() {
        let ms: Vec<Match> = [
            a_match(EV, "m1", 1, 10, Some(0)),
            a_match(EV, "m2", 2, 25, Some(1)),
            a_match(EV, "m3", 3, 40, None),
        ]
        .iter()
        .map(|m| Match::parse(m).unwrap())
        .collect();
        let picks = |v: &[(&str, i64)]| v.iter().map(|(k, t)| (k.to_string(), *t)).collect();
        assert_eq!(
            score(&picks(&[("m1", 0), ("m2", 1), ("m3", 0)]), &ms),
            Some(Score {
                points: 35,
                mcorrect: 2
            })
        );
        assert_eq!(
            score(&picks(&[("m1", 1), ("m2", 1)]), &ms),
            Some(Score {
                points: 25,
                mcorrect: 1
            })
        );
        assert_eq!(score(&picks(&[("zz", 0)]), &ms), Some(Score::default()));
        assert_eq!(score(&BTreeMap::new(), &ms), Some(Score::default()));
        assert_eq!(score(&picks(&[("m1", 0)]), &[]), Some(Score::default()));
        // Points that overflow an i64 are bad input, never a wrapped sum.
        let huge: Vec<Match> = [
            a_match(EV, "m1", 1, i64::MAX, Some(0)),
            a_match(EV, "m2", 2, 1, Some(0)),
        ]
        .iter()
        .map(|m| Match::parse(m).unwrap())
        .collect();
        assert_eq!(score(&picks(&[("m1", 0), ("m2", 0)]), &huge), None);
    }

    #[test]
    fn gsi_keys_of_each_entity() {
        let p = PickemRules
            .projection(&event("2024-03-03", "aew-revolution"))
            .unwrap()
            .unwrap();
        assert_eq!(
            attrs(&p),
            vec![
                ("GSI_PK", Some(s(format!("EVENT#{EV}")))),
                ("GSI_SK", Some(s("EVENT"))),
                ("belongsto", None),
            ]
        );
        let p = PickemRules
            .projection(&a_match(EV, "m1", 3, 5, None))
            .unwrap()
            .unwrap();
        assert_eq!(
            attrs(&p),
            vec![
                ("GSI_PK", Some(s(format!("EVENT#{EV}")))),
                ("GSI_SK", Some(s("MATCH#03"))),
                ("belongsto", None),
            ]
        );
        assert_eq!(p.sources, vec!["order"]);
        let p = PickemRules
            .projection(&prediction("sam", EV, &[("m1", 0)]))
            .unwrap()
            .unwrap();
        assert_eq!(
            attrs(&p),
            vec![
                ("GSI_PK", Some(s(format!("EVENT#{EV}")))),
                ("GSI_SK", Some(s("SCORE#000#sam"))),
                ("belongsto", Some(s("USER#sam"))),
            ],
            "an unscored prediction sorts as 0"
        );
        let p = PickemRules
            .projection(&scored(prediction("sam", EV, &[]), 140, 10))
            .unwrap()
            .unwrap();
        assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#140#sam"))));
        assert_eq!(p.sources, vec!["points"]);
        let st = item(&[
            ("PK", s("USER#sam")),
            ("SK", s("STANDINGS#2024")),
            ("points", n(140)),
        ]);
        let p = PickemRules.projection(&st).unwrap().unwrap();
        assert_eq!(
            attrs(&p),
            vec![
                ("GSI_PK", Some(s("STANDINGS#2024"))),
                ("GSI_SK", Some(s("SCORE#00140#sam"))),
                ("belongsto", Some(s("USER#sam"))),
            ]
        );
        // Users carry no GSI keys: a writer's are removed.
        let mut u = user("sam");
        u.insert("GSI_PK".into(), s("x"));
        let p = PickemRules.projection(&u).unwrap().unwrap();
        let upd = projection_update(&["PK", "SK"], &u, &p).unwrap();
        assert_eq!(upd.update_expression, "REMOVE #p0");
        assert!(projection_update(&["PK", "SK"], &user("sam"), &p).is_none());
    }

    #[test]
    fn projections_are_fixpoints_once_written() {
        let scored = scored(prediction("sam", EV, &[("m1", 0)]), 35, 2);
        let p = PickemRules.projection(&scored).unwrap().unwrap();
        assert!(projection_update(&["PK", "SK"], &scored, &p).is_none());
        let mut m = a_match(EV, "m1", 3, 5, None);
        m.insert("GSI_PK".into(), s(format!("EVENT#{EV}")));
        m.insert("GSI_SK".into(), s("MATCH#03"));
        let p = PickemRules.projection(&m).unwrap().unwrap();
        assert!(projection_update(&["PK", "SK"], &m, &p).is_none());
        // A writer's belongsto on a match would hide it from pattern 3.
        m.insert("belongsto".into(), s("USER#x"));
        let p = PickemRules.projection(&m).unwrap().unwrap();
        let u = projection_update(&["PK", "SK"], &m, &p).unwrap();
        assert_eq!(u.update_expression, "REMOVE #p2");
    }

    #[test]
    fn clamped_sort_keys_are_noted_by_a_pure_rule() {
        let m = a_match(EV, "m1", 120, 5, None);
        let p = PickemRules.projection(&m).unwrap().unwrap();
        assert_eq!(p.attrs[1], ("GSI_SK", Some(s("MATCH#99"))));
        let notes = PickemRules.notes(&m);
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].metric, "ScoreOverflow");
        assert!(notes[0].reason.contains("match order 120"), "{notes:?}");
        assert!(PickemRules.notes(&a_match(EV, "m1", 5, 5, None)).is_empty());
        assert!(clamp_to_report(&m, "MATCH#99", true), "about to be written");
        let mut written = m.clone();
        written.insert("GSI_SK".into(), s("MATCH#99"));
        assert!(
            !clamp_to_report(&written, "MATCH#99", true),
            "already written"
        );
        assert!(!clamp_to_report(&m, "MATCH#05", false), "fits");
        let p = PickemRules
            .projection(&scored(prediction("sam", EV, &[]), 1234, 3))
            .unwrap()
            .unwrap();
        assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#999#sam"))));
        let st = item(&[
            ("PK", s("USER#sam")),
            ("SK", s("STANDINGS#2024")),
            ("points", n(123_456)),
        ]);
        let p = PickemRules.projection(&st).unwrap().unwrap();
        assert_eq!(p.attrs[1], ("GSI_SK", Some(s("SCORE#99999#sam"))));
    }

    #[test]
    fn predictions_contribute_to_their_standings() {
        let p = scored(prediction("sam", EV, &[("m1", 0)]), 140, 10);
        let c = PickemRules.contributions(&p).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].values,
            vec![("points", 140), ("mcorrect", 10), ("eplayed", 1)]
        );
        let counter = &c[0].counter;
        assert_eq!(
            counter.key,
            vec![
                ("PK", "USER#sam".to_string()),
                ("SK", "STANDINGS#2024".to_string())
            ]
        );
        assert_eq!(counter.attrs, &["points", "mcorrect", "eplayed"]);
        assert_eq!(
            counter.create,
            Some(vec![("type", s("standings")), ("belongsto", s("USER#sam"))])
        );
        assert!(counter.remove_at_zero);
        // Unscored: 0, 0, 1. A stray value counts as 0 until rescored.
        let c = PickemRules
            .contributions(&prediction("sam", EV, &[]))
            .unwrap();
        assert_eq!(
            c[0].values,
            vec![("points", 0), ("mcorrect", 0), ("eplayed", 1)]
        );
        let mut stray = prediction("sam", EV, &[]);
        stray.insert("points".into(), s("lots"));
        assert_eq!(
            PickemRules.contributions(&stray).unwrap()[0].values[0],
            ("points", 0)
        );
        // The counter is recognised from the key alone.
        let key = counter.key_item();
        assert_eq!(PickemRules.counter(&key).as_ref(), Some(counter));
        assert_eq!(PickemRules.counter(&user("sam")), None);
        assert_eq!(PickemRules.counter(&p), None);
    }

    #[test]
    fn matches_version_their_event_in_the_ledger_only() {
        let c = PickemRules
            .contributions(&a_match(EV, "m1", 1, 5, Some(0)))
            .unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].values, vec![("matches", 1)]);
        assert_eq!(
            c[0].counter.key,
            vec![("PK", format!("EVENT#{EV}")), ("SK", "MATCHES".to_string())]
        );
        assert_eq!(c[0].counter.create, None, "never an item of the table");
        assert_eq!(PickemRules.counter(&c[0].counter.key_item()), None);
        assert!(PickemRules.contributions(&user("sam")).unwrap().is_empty());
        assert!(PickemRules
            .contributions(&event("2024-03-03", "aew-revolution"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_input_errs_in_every_aspect() {
        let mut p = prediction("sam", EV, &[]);
        p.insert("predictions".into(), s("x"));
        assert!(PickemRules.projection(&p).is_err());
        assert!(PickemRules.contributions(&p).is_err());
        let mut m = a_match(EV, "m1", 1, 5, None);
        m.remove("points");
        assert!(PickemRules.projection(&m).is_err());
        assert!(PickemRules.contributions(&m).is_err());
        let junk = item(&[("PK", s("SOMETHING")), ("SK", s("ELSE"))]);
        assert_eq!(
            PickemRules.projection(&junk).unwrap_err().kind(),
            "UnknownEntity"
        );
        assert_eq!(
            PickemRules.contributions(&junk).unwrap_err().kind(),
            "UnknownEntity"
        );
        assert!(PickemRules
            .messages(&change(ChangeKind::Insert, None, Some(junk)))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn match_changes_score_the_event() {
        let event_job = serde_json::json!({"version":1,"kind":"event","eventId":EV});
        let m = |r: Option<i64>, pts: i64| a_match(EV, "m1", 1, pts, r);
        assert_eq!(
            bodies(change(ChangeKind::Insert, None, Some(m(None, 5)))),
            vec![event_job.clone()]
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(m(None, 5)),
                Some(m(Some(1), 5))
            )),
            vec![event_job.clone()],
            "result set"
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(m(Some(1), 5)),
                Some(m(Some(0), 5))
            ))
            .len(),
            1,
            "corrected"
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(m(Some(1), 5)),
                Some(m(None, 5))
            ))
            .len(),
            1,
            "withdrawn"
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(m(Some(1), 5)),
                Some(m(Some(1), 9))
            ))
            .len(),
            1,
            "points"
        );
        assert_eq!(
            bodies(change(ChangeKind::Remove, Some(m(Some(1), 5)), None)).len(),
            1,
            "removed"
        );
        // Order or name: GSI key only, no rescoring.
        let mut reordered = m(Some(1), 5);
        reordered.insert("order".into(), n(7));
        reordered.insert("name".into(), s("Main event"));
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(m(Some(1), 5)),
            Some(reordered)
        ))
        .is_empty());
        // Becoming bad input or valid again changes what can be scored.
        let mut bad = m(Some(1), 5);
        bad.remove("teams");
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(m(Some(1), 5)),
                Some(bad.clone())
            ))
            .len(),
            1
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(bad.clone()),
                Some(m(Some(1), 5))
            ))
            .len(),
            1
        );
        assert!(bodies(change(ChangeKind::Modify, Some(bad.clone()), Some(bad))).is_empty());
    }

    #[test]
    fn prediction_changes_score_the_prediction() {
        let job =
            serde_json::json!({"version":1,"kind":"predictions","eventId":EV,"users":["sam"]});
        let p = |picks: &[(&str, i64)]| prediction("sam", EV, picks);
        assert_eq!(
            bodies(change(ChangeKind::Insert, None, Some(p(&[("m1", 0)])))),
            vec![job.clone()]
        );
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(scored(p(&[("m1", 0)]), 5, 1)),
                Some(scored(p(&[("m1", 1)]), 5, 1))
            )),
            vec![job.clone()],
            "picks changed"
        );
        // The scoring job's own write (score + matching GSI_SK): fixpoint.
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(p(&[("m1", 0)])),
            Some(scored(p(&[("m1", 0)]), 5, 1))
        ))
        .is_empty());
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(scored(p(&[("m1", 0)]), 5, 1)),
            Some(scored(p(&[("m1", 0)]), 0, 0))
        ))
        .is_empty());
        // The projection's write (GSI keys only): nothing to score.
        let mut keyed = p(&[("m1", 0)]);
        keyed.insert("GSI_SK".into(), s("SCORE#000#sam"));
        assert!(bodies(change(
            ChangeKind::Modify,
            Some(p(&[("m1", 0)])),
            Some(keyed)
        ))
        .is_empty());
        // A writer's put that drops the score, or a stray score: rescore.
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(scored(p(&[("m1", 0)]), 5, 1)),
                Some(p(&[("m1", 0)]))
            ))
            .len(),
            1
        );
        let mut stray = scored(p(&[("m1", 0)]), 5, 1);
        stray.insert("points".into(), n(500));
        assert_eq!(
            bodies(change(
                ChangeKind::Modify,
                Some(scored(p(&[("m1", 0)]), 5, 1)),
                Some(stray)
            ))
            .len(),
            1
        );
        // Removal: the standings follow through the contributions.
        assert!(bodies(change(
            ChangeKind::Remove,
            Some(scored(p(&[("m1", 0)]), 5, 1)),
            None
        ))
        .is_empty());
        // Bad input starts nothing; fixed input starts scoring.
        let mut bad = p(&[("m1", 0)]);
        bad.insert("predictions".into(), s("x"));
        assert!(bodies(change(ChangeKind::Insert, None, Some(bad.clone()))).is_empty());
        assert_eq!(
            bodies(change(ChangeKind::Modify, Some(bad), Some(p(&[])))).len(),
            1
        );
    }

    #[test]
    fn events_users_and_standings_start_nothing() {
        let e = event("2024-03-03", "aew-revolution");
        let mut scored_e = e.clone();
        scored_e.insert("state".into(), s("scored"));
        assert!(
            bodies(change(ChangeKind::Modify, Some(e), Some(scored_e))).is_empty(),
            "state plays no part"
        );
        assert!(bodies(change(ChangeKind::Insert, None, Some(user("sam")))).is_empty());
        let st = item(&[
            ("PK", s("USER#sam")),
            ("SK", s("STANDINGS#2024")),
            ("points", n(1)),
        ]);
        assert!(bodies(change(ChangeKind::Insert, None, Some(st))).is_empty());
    }
}
