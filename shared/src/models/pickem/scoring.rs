//! Prediction scores as a set job.
//!
//! A job names an event and either every prediction of it (`event`: listed
//! through the GSI, scored in chunks, the first inline and the others as
//! follow-up `predictions` jobs) or some users' predictions
//! (`predictions`). For each prediction it reads, consistently:
//!
//! 1. the ledger version of the event's set of matches (read *first*: a
//!    match added after the matches were read bumps it);
//! 2. the event's matches (`result`, `points`);
//! 3. the prediction (`predictions` map, stored `points`/`mcorrect`).
//!
//! It then writes, only where they differ, the prediction's `points`,
//! `mcorrect` and the GSI keys and `belongsto` computed by
//! [`rules::prediction_attrs`] (so the stream record of the write is a
//! fixpoint for the projection): one write per prediction whose score
//! changed. Every write is guarded by the facts read - the version, each
//! match's `result` and `points`, the prediction's picks and stored score -
//! so a late, duplicated or racing job never writes a score computed from
//! facts that no longer hold; the newer fact's own job writes the right one.
//!
//! An event with a match that is bad input is not scored until the match is
//! fixed (its record then starts the event's scoring): what earlier valid
//! facts implied stays.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::{EventId, Match, Prediction};
use super::keys;
use super::messages::{chunks, decode, encode, ScoreJob};
use super::rules::{
    self, matches_version_counter, prediction_attrs, report_overflow, score, Score, MCORRECT,
    POINTS, SCORING_QUEUE,
};
use crate::engine::derive::{index_members, total_key};
use crate::engine::rules::OutMessage;
use crate::engine::setjob::{BoxFut, Guard, GuardedUpdate, Plan, Reads, SetJob};
use crate::error::StoreError;
use crate::item::{n, s, Item, ItemExt};
use crate::sqs::MessageError;

/// The derive processor's name (the ledger namespace of its totals).
const DERIVE: &str = "derive";

/// The scoring set job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scoring;

fn key(pk: String, sk: String) -> Item {
    [(keys::PK.to_string(), s(pk)), (keys::SK.to_string(), s(sk))].into()
}

/// The key of a user's prediction for an event.
pub fn prediction_key(user: &str, event: &str) -> Item {
    key(keys::user_pk(user), keys::event_key(event))
}

/// What a prediction's processor-owned attributes should be for `score`.
pub fn wanted_attrs(user: &str, event: &EventId, sc: Score) -> Vec<(&'static str, AttributeValue)> {
    let mut out = vec![(POINTS, n(sc.points)), (MCORRECT, n(sc.mcorrect))];
    let (gsi_sk, _) = keys::prediction_gsi_sk(sc.points, user);
    for (a, v) in prediction_attrs(user, event, gsi_sk) {
        if let Some(v) = v {
            out.push((a, v));
        }
    }
    out
}

/// The event's facts as read, with the guards that pin them.
pub struct Facts {
    pub matches: Vec<Match>,
    pub guards: Vec<Guard>,
}

/// Why an event cannot be scored now.
#[derive(Debug)]
pub enum NotScorable {
    BadMatch(String),
    Store(StoreError),
}

impl From<StoreError> for NotScorable {
    fn from(e: StoreError) -> Self {
        NotScorable::Store(e)
    }
}

/// Reads the version of the event's set of matches, then its matches.
pub async fn facts(reads: &Reads, event: &EventId) -> Result<Facts, NotScorable> {
    let version_key = total_key(DERIVE, &matches_version_counter(event).key_item());
    let version = reads
        .store
        .get(&reads.ledger_table, version_key.clone())
        .await?;
    let mut guards = vec![match version.as_ref().and_then(|v| v.get("ver")) {
        Some(ver) => Guard::equals(version_key, "ver", ver.clone()).in_ledger(),
        None => Guard::absent(version_key).in_ledger(),
    }];
    let items = reads
        .store
        .query_partition(
            &reads.table,
            keys::PK,
            &keys::event_key(event.as_str()),
            Some((keys::SK, keys::MATCH_PREFIX)),
        )
        .await?;
    let mut matches = Vec::new();
    for item in &items {
        let m = Match::parse(item).map_err(|e| NotScorable::BadMatch(e.to_string()))?;
        let mkey = key(keys::event_key(event.as_str()), keys::match_sk(&m.id));
        guards.push(Guard::same(mkey.clone(), "result", item.get("result")));
        guards.push(Guard::same(mkey, POINTS, item.get(POINTS)));
        matches.push(m);
    }
    Ok(Facts { matches, guards })
}

/// The update of one prediction as read (`None`: already right, or bad
/// input left as it is).
pub fn prediction_update(item: &Item, facts: &Facts) -> Option<GuardedUpdate> {
    let p = Prediction::parse(item).ok()?;
    let Some(sc) = score(&p.picks, &facts.matches) else {
        // Bad input: left as it is, never a wrapped sum.
        tracing::warn!(processor = "scoring", key = %super::entities::key_display(item), kind = "Invalid", reason = "the points of the correct picks overflow a 64-bit integer", "bad input");
        return None;
    };
    let attrs: Vec<(&'static str, Option<AttributeValue>)> = wanted_attrs(&p.user, &p.event, sc)
        .into_iter()
        .filter(|(a, v)| item.get(*a) != Some(v))
        .map(|(a, v)| (a, Some(v)))
        .collect();
    if attrs.is_empty() {
        return None;
    }
    let (gsi_sk, clamped) = keys::prediction_gsi_sk(sc.points, &p.user);
    if rules::clamp_to_report(item, &gsi_sk, clamped) {
        report_overflow(
            "prediction points",
            &super::entities::key_display(item),
            sc.points,
        );
    }
    let pkey = prediction_key(&p.user, p.event.as_str());
    let mut guards = facts.guards.clone();
    guards.push(Guard::same(
        pkey.clone(),
        "predictions",
        item.get("predictions"),
    ));
    guards.push(Guard::same(pkey.clone(), POINTS, item.get(POINTS)));
    guards.push(Guard::same(pkey.clone(), MCORRECT, item.get(MCORRECT)));
    Some(GuardedUpdate {
        key: pkey,
        attrs,
        guards,
        notes: Vec::new(),
    })
}

/// Users with a prediction for the event: the event's prediction index in
/// the ledger, written in the transaction of each prediction's ledger
/// record and read consistently (exact; a GSI listing may lag and miss a
/// prediction scored just before a result changed).
pub async fn listed_users(reads: &Reads, event: &EventId) -> Result<Vec<String>, StoreError> {
    let index = rules::event_predictions_index(event.as_str());
    let mut users = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let (page, next) = index_members(
            &reads.store,
            &reads.ledger_table,
            &index,
            after.as_deref(),
            1000,
        )
        .await?;
        users.extend(page);
        match next {
            Some(n) => after = Some(n),
            None => return Ok(users),
        }
    }
}

impl Scoring {
    async fn score_users(
        reads: &Reads,
        event: &EventId,
        users: &[String],
    ) -> Result<Vec<GuardedUpdate>, MessageError> {
        let facts = match facts(reads, event).await {
            Ok(f) => f,
            Err(NotScorable::Store(e)) => return Err(e.into()),
            Err(NotScorable::BadMatch(reason)) => {
                tracing::warn!(
                    processor = "scoring",
                    event = event.as_str(),
                    %reason,
                    "event has a match that is bad input: not scored until it is fixed"
                );
                return Ok(vec![]);
            }
        };
        let keys: Vec<Item> = users
            .iter()
            .map(|u| prediction_key(u, event.as_str()))
            .collect();
        let items = reads.store.batch_get(&reads.table, keys).await?;
        let by_user: BTreeMap<String, Item> = items
            .into_iter()
            .filter_map(|i| {
                let u = i
                    .s(keys::PK)
                    .ok()?
                    .strip_prefix(keys::USER_PREFIX)?
                    .to_string();
                Some((u, i))
            })
            .collect();
        Ok(by_user
            .values()
            .filter_map(|i| prediction_update(i, &facts))
            .collect())
    }
}

impl SetJob for Scoring {
    fn name(&self) -> &'static str {
        "scoring"
    }

    fn key_names(&self) -> &'static [&'static str] {
        &[keys::PK, keys::SK]
    }

    fn plan<'a>(
        &'a self,
        body: &'a str,
        reads: &'a Reads,
    ) -> BoxFut<'a, Result<Plan, MessageError>> {
        Box::pin(async move {
            let job = decode(body)?;
            let event = EventId::parse(job.event_id()).ok_or_else(|| MessageError::Permanent {
                kind: "InvalidMessage",
                reason: "eventId is not <YYYY-MM-DD>-<slug>".into(),
            })?;
            let mut plan = Plan::default();
            let users = match job {
                ScoreJob::Predictions { users, .. } => users,
                ScoreJob::Event { .. } => {
                    let all = listed_users(reads, &event).await?;
                    let mut parts = chunks(event.as_str(), &all).into_iter();
                    let first = match parts.next() {
                        Some(ScoreJob::Predictions { users, .. }) => users,
                        _ => vec![],
                    };
                    plan.then = parts
                        .map(|j| OutMessage {
                            queue: SCORING_QUEUE,
                            body: encode(&j),
                        })
                        .collect();
                    first
                }
            };
            if !users.is_empty() {
                plan.updates = Self::score_users(reads, &event, &users).await?;
            }
            Ok(plan)
        })
    }
}

/// For `verify`: the score a prediction should carry given every item of
/// the table, or `None` when it cannot be judged (bad input somewhere).
pub fn expected_scores(items: &[Item]) -> Vec<(Item, Score)> {
    let mut matches: BTreeMap<String, Vec<Match>> = BTreeMap::new();
    let mut bad_events: BTreeSet<String> = BTreeSet::new();
    let mut predictions = Vec::new();
    for i in items {
        match super::entities::kind(i) {
            Ok(super::entities::Kind::Match) => match Match::parse(i) {
                Ok(m) => matches
                    .entry(m.event.as_str().to_string())
                    .or_default()
                    .push(m),
                Err(_) => {
                    if let Some(e) = i
                        .s(keys::PK)
                        .ok()
                        .and_then(|pk| pk.strip_prefix(keys::EVENT_PREFIX))
                    {
                        bad_events.insert(e.to_string());
                    }
                }
            },
            Ok(super::entities::Kind::Prediction) => {
                if let Ok(p) = Prediction::parse(i) {
                    predictions.push((i.clone(), p));
                }
            }
            _ => {}
        }
    }
    predictions
        .into_iter()
        .filter(|(_, p)| !bad_events.contains(p.event.as_str()))
        .filter_map(|(i, p)| {
            let ms = matches
                .get(p.event.as_str())
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            // An overflowing sum cannot be judged (bad input).
            Some((i, rules::score(&p.picks, ms)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::setjob::Cond;
    use crate::models::pickem::entities::tests::{a_match, prediction};

    const EV: &str = "2024-03-03-aew-revolution";

    fn facts_of(items: &[Item]) -> Facts {
        let mut guards = vec![Guard::absent(Item::new()).in_ledger()];
        let mut matches = Vec::new();
        for i in items {
            guards.push(Guard::same(Item::new(), "result", i.get("result")));
            matches.push(Match::parse(i).unwrap());
        }
        Facts { matches, guards }
    }

    fn event() -> EventId {
        EventId::parse(EV).unwrap()
    }

    #[test]
    fn an_unscored_prediction_gets_every_processor_attribute() {
        let f = facts_of(&[
            a_match(EV, "m1", 1, 10, Some(0)),
            a_match(EV, "m2", 2, 20, Some(1)),
        ]);
        let p = prediction("sam", EV, &[("m1", 0), ("m2", 0)]);
        let u = prediction_update(&p, &f).unwrap();
        assert_eq!(u.key, prediction_key("sam", EV));
        assert_eq!(
            u.attrs,
            vec![
                ("points", Some(n(10))),
                ("mcorrect", Some(n(1))),
                ("GSI_PK", Some(s(format!("EVENT#{EV}")))),
                ("GSI_SK", Some(s("SCORE#010#sam"))),
                ("belongsto", Some(s("USER#sam"))),
            ]
        );
        // Guards: the event's facts, then the prediction as read.
        assert_eq!(u.guards.len(), f.guards.len() + 3);
        let own: Vec<&Cond> = u.guards[f.guards.len()..].iter().map(|g| &g.cond).collect();
        assert!(matches!(own[0], Cond::Equals("predictions", _)));
        assert_eq!(own[1], &Cond::Missing("points"));
        assert_eq!(own[2], &Cond::Missing("mcorrect"));
    }

    #[test]
    fn only_what_differs_is_written_and_a_right_score_is_left_alone() {
        let f = facts_of(&[a_match(EV, "m1", 1, 10, Some(0))]);
        let mut p = prediction("sam", EV, &[("m1", 0)]);
        for (a, v) in wanted_attrs(
            "sam",
            &event(),
            Score {
                points: 10,
                mcorrect: 1,
            },
        ) {
            p.insert(a.to_string(), v);
        }
        assert_eq!(prediction_update(&p, &f), None, "already right: no write");
        // Result corrected: points, mcorrect and GSI_SK change together.
        let f = facts_of(&[a_match(EV, "m1", 1, 10, Some(1))]);
        let u = prediction_update(&p, &f).unwrap();
        assert_eq!(
            u.attrs,
            vec![
                ("points", Some(n(0))),
                ("mcorrect", Some(n(0))),
                ("GSI_SK", Some(s("SCORE#000#sam"))),
            ]
        );
        assert!(matches!(
            u.guards.last().unwrap().cond,
            Cond::Equals("mcorrect", _)
        ));
    }

    #[test]
    fn clamped_score_keeps_its_true_points() {
        let f = facts_of(&[a_match(EV, "m1", 1, 1500, Some(0))]);
        let u = prediction_update(&prediction("sam", EV, &[("m1", 0)]), &f).unwrap();
        assert_eq!(u.attrs[0], ("points", Some(n(1500))));
        assert_eq!(u.attrs[3], ("GSI_SK", Some(s("SCORE#999#sam"))));
    }

    #[test]
    fn a_bad_prediction_is_left_as_it_is() {
        let f = facts_of(&[]);
        let mut p = prediction("sam", EV, &[]);
        p.insert("predictions".into(), n(1));
        assert_eq!(prediction_update(&p, &f), None);
    }

    #[test]
    fn expected_scores_skip_events_with_a_bad_match() {
        let mut bad = a_match("2024-04-04-other", "m9", 1, 5, Some(0));
        bad.remove("teams");
        let items = vec![
            a_match(EV, "m1", 1, 10, Some(0)),
            prediction("sam", EV, &[("m1", 0)]),
            bad,
            prediction("sam", "2024-04-04-other", &[("m9", 0)]),
        ];
        let got = expected_scores(&items);
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].1,
            Score {
                points: 10,
                mcorrect: 1
            }
        );
        let findings = crate::models::pickem::checks::checks(&crate::models::CheckInput {
            items: &items,
            ledger: &[],
            now: chrono::Utc::now(),
        });
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].repair,
            Some(crate::models::Repair::Job {
                queue: "scoring",
                body: format!(
                    r#"{{"eventId":"{EV}","kind":"predictions","users":["sam"],"version":1}}"#
                ),
            })
        );
    }
}
