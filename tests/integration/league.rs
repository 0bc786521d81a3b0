//! The Pick'Em league's items as an application writes them (item literals
//! in the shape of `models/pickem.yaml`), and an oracle of what the facts
//! imply (SPEC §5.3): each prediction's score and each user's standings of
//! a year, their sort keys padded and clamped.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_dynamodb::types::AttributeValue;
use shared::item::{n, s, Item, ItemExt};

use crate::items::attrs;

/// `USER#<user>`.
pub fn user_pk(user: &str) -> String {
    format!("USER#{user}")
}

/// `EVENT#<eventId>`: a match's partition, a prediction's sort key, the
/// event's GSI partition.
pub fn event_key(event: &str) -> String {
    format!("EVENT#{event}")
}

/// `STANDINGS#<year>`.
pub fn standings_key(year: &str) -> String {
    format!("STANDINGS#{year}")
}

/// `value` zero-padded to `digits`, clamped to what fits (and to 0).
pub fn pad(value: i64, digits: u32) -> String {
    let max = 10_i64.pow(digits) - 1;
    format!("{:0width$}", value.clamp(0, max), width = digits as usize)
}

/// A prediction's GSI sort key: `SCORE#<points, 3 digits>#<user>`.
pub fn prediction_gsi_sk(points: i64, user: &str) -> String {
    format!("SCORE#{}#{user}", pad(points, 3))
}

/// A standings item's GSI sort key: `SCORE#<points, 5 digits>#<user>`.
pub fn standings_gsi_sk(points: i64, user: &str) -> String {
    format!("SCORE#{}#{user}", pad(points, 5))
}

/// A user profile.
pub fn user(user: &str, name: &str) -> Item {
    attrs(vec![
        ("PK", s(user_pk(user))),
        ("SK", s("USER")),
        ("type", s("user")),
        ("name", s(name)),
    ])
}

/// An event on `date` (YYYY-MM-DD), written `YYYY/MM/DD` as in the seed
/// (the benches' builder: one item shape for both).
pub use crate::seed_items::pickem::event;

/// A match between single-member teams named in `teams`.
#[allow(clippy::too_many_arguments)]
pub fn a_match(
    event: &str,
    id: &str,
    name: &str,
    order: i64,
    points: i64,
    preshow: bool,
    teams: &[&str],
    result: Option<i64>,
) -> Item {
    let teams = teams
        .iter()
        .map(|t| {
            AttributeValue::M([("members".to_string(), AttributeValue::L(vec![s(*t)]))].into())
        })
        .collect();
    let mut m = attrs(vec![
        ("PK", s(event_key(event))),
        ("SK", s(format!("MATCH#{id}"))),
        ("type", s("match")),
        ("id", s(id)),
        ("name", s(name)),
        ("order", n(order)),
        ("points", n(points)),
        ("preshow", AttributeValue::Bool(preshow)),
        ("championships", AttributeValue::L(vec![])),
        ("teams", AttributeValue::L(teams)),
    ]);
    if let Some(r) = result {
        m.insert("result".into(), n(r));
    }
    m
}

/// A user's picks (matchId -> team index) for an event.
pub fn prediction(user: &str, event: &str, picks: &[(&str, i64)]) -> Item {
    attrs(vec![
        ("PK", s(user_pk(user))),
        ("SK", s(event_key(event))),
        ("type", s("prediction")),
        (
            "predictions",
            AttributeValue::M(picks.iter().map(|(m, t)| (m.to_string(), n(t))).collect()),
        ),
    ])
}

/// A score: points and matches predicted right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Score {
    pub points: i64,
    pub mcorrect: i64,
}

/// A match as the oracle reads it: `None` when it is bad input (not a map
/// of at least two teams, points or order not a number, no id).
fn a_valid_match(i: &Item) -> Option<(String, i64, Option<i64>)> {
    let teams = match i.get("teams") {
        Some(AttributeValue::L(l)) if l.len() >= 2 => l,
        _ => return None,
    };
    if !teams.iter().all(|t| matches!(t, AttributeValue::M(_))) {
        return None;
    }
    let points = i.i64("points").ok().filter(|p| *p >= 0)?;
    i.i64("order").ok().filter(|o| *o >= 0)?;
    let id = i.s("id").ok()?.to_string();
    let result = match i.get("result") {
        None => None,
        Some(_) => Some(i.i64("result").ok()?),
    };
    Some((id, points, result))
}

/// The picks of a prediction (`None` when bad input).
fn picks(i: &Item) -> Option<BTreeMap<String, i64>> {
    let Some(AttributeValue::M(m)) = i.get("predictions") else {
        return None;
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let AttributeValue::N(t) = v else {
            return None;
        };
        out.insert(k.clone(), t.parse().ok().filter(|t: &i64| *t >= 0)?);
    }
    Some(out)
}

/// Each valid prediction with the score its event's matches imply (an
/// event with a match that is bad input is not judged: its scores hold).
pub fn expected_scores(items: &[Item]) -> Vec<(Item, Score)> {
    let mut matches: BTreeMap<String, Vec<(String, i64, Option<i64>)>> = BTreeMap::new();
    let mut bad_events = BTreeSet::new();
    let mut predictions = Vec::new();
    for i in items {
        let (Ok(t), Ok(pk)) = (i.s("type"), i.s("PK")) else {
            continue;
        };
        match t {
            "match" => match a_valid_match(i) {
                Some(m) => matches.entry(pk.to_string()).or_default().push(m),
                None => {
                    bad_events.insert(pk.to_string());
                }
            },
            "prediction" => {
                if let Some(p) = picks(i) {
                    predictions.push((i.clone(), p));
                }
            }
            _ => {}
        }
    }
    predictions
        .into_iter()
        .filter_map(|(i, p)| {
            let event = i.s("SK").ok()?.to_string();
            if bad_events.contains(&event) {
                return None;
            }
            let mut sc = Score::default();
            for (id, points, result) in matches.get(&event).map(Vec::as_slice).unwrap_or(&[]) {
                if result.is_some() && p.get(id) == result.as_ref() {
                    sc.points += points;
                    sc.mcorrect += 1;
                }
            }
            Some((i, sc))
        })
        .collect()
}
