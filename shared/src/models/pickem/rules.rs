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
use crate::engine::rules::{Contribution, Counter, OutMessage, Projection, Rules};
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
/// match that has a result equal to the pick, and how many.
pub fn score(picks: &BTreeMap<String, i64>, matches: &[Match]) -> Score {
    let mut out = Score::default();
    for m in matches {
        if m.result.is_some() && picks.get(&m.id) == m.result.as_ref() {
            out.points += m.points;
            out.mcorrect += 1;
        }
    }
    out
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

/// A computed sort key; reports the clamp when the image does not carry it
/// yet (that is, when it is about to be written).
fn sort_key(image: &Item, (sk, clamped): (String, bool), what: &'static str, value: i64) -> String {
    if clamped && image.get(keys::GSI_SK) != Some(&AttributeValue::S(sk.clone())) {
        report_overflow(what, &key_display(image), value);
    }
    sk
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
                let sk = sort_key(image, keys::match_gsi_sk(m.order), "match order", m.order);
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
                let sk = sort_key(
                    image,
                    keys::prediction_gsi_sk(points, &p.user),
                    "prediction points",
                    points,
                );
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
                let sk = sort_key(
                    image,
                    keys::standings_gsi_sk(points, &user),
                    "standings points",
                    points,
                );
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

    /// A prediction adds its points, its correct matches and 1 played event
    /// to its user's standings of the event's year; a match adds 1 to the
    /// ledger-only version of its event's set of matches.
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
