//! The league's entities, classified by key and validated from items.
//!
//! Writers own users, events, matches and the `predictions` map of a
//! prediction; everything else is the processors'. A writer's item whose key
//! does not match its attributes, whose required attribute is missing or has
//! the wrong type, or whose enum or id format is invalid is bad input
//! ([`InputError`]: entity, key and reason, never the item).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::keys;
use crate::error::InputError;
use crate::item::{display_key, key_of, type_name, AttrError, Item, ItemExt};

/// What an item is, from its key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    User,
    Event,
    Match,
    Prediction,
    Standings,
}

impl Kind {
    /// The `type` attribute of the entity (as in the seed).
    pub fn type_name(self) -> &'static str {
        match self {
            Kind::User => "user",
            Kind::Event => "event",
            Kind::Match => "match",
            Kind::Prediction => "prediction",
            Kind::Standings => "standings",
        }
    }
}

/// Event states (they play no part in scoring).
pub const EVENT_STATES: &[&str] = &["upcoming", "broadcast", "scored"];

pub fn key_display(item: &Item) -> String {
    display_key(&key_of(item, &[keys::PK, keys::SK]))
}

fn attr<'a>(entity: &'static str, item: &'a Item) -> impl Fn(AttrError) -> InputError + 'a {
    move |source| InputError::Attribute {
        entity,
        key: key_display(item),
        source,
    }
}

fn invalid(item: &Item, reason: impl Into<String>) -> InputError {
    InputError::Invalid {
        key: key_display(item),
        reason: reason.into(),
    }
}

fn bad_value(name: &str, reason: impl Into<String>) -> AttrError {
    AttrError::Invalid {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// An opaque id used inside keys: 1..=128 characters, no `#`, no
/// whitespace or control characters.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= 128
        && !id
            .chars()
            .any(|c| c == '#' || c.is_whitespace() || c.is_control())
}

fn valid_date(d: &str) -> bool {
    d.len() == 10 && chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").is_ok()
}

/// A parsed `<YYYY-MM-DD>-<slug>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventId(pub String);

impl EventId {
    pub fn parse(raw: &str) -> Option<Self> {
        let date = raw.get(..10)?;
        let slug = raw.get(11..)?;
        (valid_date(date) && raw.as_bytes().get(10) == Some(&b'-') && valid_id(slug))
            .then(|| Self(raw.to_string()))
    }

    pub fn year(&self) -> &str {
        keys::year_of(&self.0)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Classifies an item (or a key) by its `PK`/`SK`.
pub fn kind(item: &Item) -> Result<Kind, InputError> {
    let e = attr("item", item);
    let pk = item.s(keys::PK).map_err(&e)?;
    let sk = item.s(keys::SK).map_err(&e)?;
    let unknown = || InputError::UnknownEntity {
        key: key_display(item),
    };
    if pk == keys::EVENTS_PK {
        return if sk.starts_with(keys::EVENT_PREFIX) {
            Ok(Kind::Event)
        } else {
            Err(unknown())
        };
    }
    if pk.starts_with(keys::EVENT_PREFIX) && sk.starts_with(keys::MATCH_PREFIX) {
        return Ok(Kind::Match);
    }
    if pk.starts_with(keys::USER_PREFIX) {
        if sk == keys::USER_SK {
            return Ok(Kind::User);
        }
        if sk.starts_with(keys::EVENT_PREFIX) {
            return Ok(Kind::Prediction);
        }
        if sk.starts_with(keys::STANDINGS_PREFIX) {
            return Ok(Kind::Standings);
        }
    }
    Err(unknown())
}

/// The user id of a `USER#<user>` partition key.
fn user_of(item: &Item, entity: &'static str) -> Result<String, InputError> {
    let pk = item.s(keys::PK).map_err(attr(entity, item))?;
    let user = pk.strip_prefix(keys::USER_PREFIX).unwrap_or_default();
    if !valid_id(user) {
        return Err(invalid(
            item,
            "user id in PK is empty or has `#`/whitespace",
        ));
    }
    Ok(user.to_string())
}

/// A writer's item must say what it is.
fn check_type(item: &Item, kind: Kind) -> Result<(), InputError> {
    let t = item.s(keys::TYPE).map_err(attr(kind.type_name(), item))?;
    if t != kind.type_name() {
        return Err(invalid(
            item,
            format!("`type` is `{t}` but the key is a {}", kind.type_name()),
        ));
    }
    Ok(())
}

fn expect_kind(item: &Item, want: Kind) -> Result<(), InputError> {
    let k = kind(item)?;
    if k != want {
        return Err(invalid(item, format!("not a {}", want.type_name())));
    }
    Ok(())
}

/// A non-negative integer attribute.
fn non_negative(item: &Item, entity: &'static str, name: &str) -> Result<i64, InputError> {
    let v = item.i64(name).map_err(attr(entity, item))?;
    if v < 0 {
        return Err(attr(entity, item)(bad_value(name, "negative")));
    }
    Ok(v)
}

/// A user profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub user: String,
    pub name: String,
}

impl User {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        expect_kind(item, Kind::User)?;
        check_type(item, Kind::User)?;
        Ok(User {
            user: user_of(item, "user")?,
            name: item.s("name").map_err(attr("user", item))?.to_string(),
        })
    }
}

/// An event of the `EVENT` partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: EventId,
    pub date: String,
    pub slug: String,
    pub name: String,
    pub state: String,
}

impl Event {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        expect_kind(item, Kind::Event)?;
        check_type(item, Kind::Event)?;
        let e = attr("event", item);
        let sk = item.s(keys::SK).map_err(&e)?;
        let rest = sk.strip_prefix(keys::EVENT_PREFIX).unwrap_or_default();
        let (date, slug) = rest.split_once('#').unwrap_or((rest, ""));
        if !valid_date(date) || !valid_id(slug) {
            return Err(invalid(item, "SK is not EVENT#<YYYY-MM-DD>#<slug>"));
        }
        // `date` may be written 2024/03/03, 2024-03-03 or as a date-time.
        let written = item.s("date").map_err(&e)?;
        let day = written.get(..10).unwrap_or_default().replace('/', "-");
        if day != date {
            return Err(invalid(item, "`date` does not match the date in SK"));
        }
        let state = item.s("state").map_err(&e)?;
        if !EVENT_STATES.contains(&state) {
            return Err(e(bad_value(
                "state",
                format!("`{state}` is not upcoming/broadcast/scored"),
            )));
        }
        Ok(Event {
            id: EventId(keys::event_id(date, slug)),
            date: date.to_string(),
            slug: slug.to_string(),
            name: item.s("name").map_err(&e)?.to_string(),
            state: state.to_string(),
        })
    }
}

/// A match of an event's card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    pub event: EventId,
    pub id: String,
    pub name: String,
    pub order: i64,
    pub points: i64,
    /// Index of the winning team, absent until scored.
    pub result: Option<i64>,
    pub teams: usize,
}

impl Match {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        expect_kind(item, Kind::Match)?;
        check_type(item, Kind::Match)?;
        let e = attr("match", item);
        let pk = item.s(keys::PK).map_err(&e)?;
        let event = EventId::parse(pk.strip_prefix(keys::EVENT_PREFIX).unwrap_or_default())
            .ok_or_else(|| invalid(item, "PK is not EVENT#<YYYY-MM-DD>-<slug>"))?;
        let sk = item.s(keys::SK).map_err(&e)?;
        let id = sk.strip_prefix(keys::MATCH_PREFIX).unwrap_or_default();
        if !valid_id(id) {
            return Err(invalid(
                item,
                "match id in SK is empty or has `#`/whitespace",
            ));
        }
        if item.s("id").map_err(&e)? != id {
            return Err(invalid(item, "`id` does not match the match id in SK"));
        }
        let teams = match item.get("teams") {
            Some(AttributeValue::L(teams)) => teams,
            Some(v) => {
                return Err(e(AttrError::WrongType {
                    name: "teams".into(),
                    expected: "L",
                    found: type_name(v),
                }))
            }
            None => return Err(e(AttrError::Missing("teams".into()))),
        };
        if teams.len() < 2 {
            return Err(e(bad_value("teams", "fewer than 2 teams")));
        }
        for (i, t) in teams.iter().enumerate() {
            let ok = match t {
                AttributeValue::M(team) => match team.get("members") {
                    Some(AttributeValue::L(m)) => {
                        !m.is_empty() && m.iter().all(|v| matches!(v, AttributeValue::S(_)))
                    }
                    _ => false,
                },
                _ => false,
            };
            if !ok {
                return Err(e(bad_value(
                    "teams",
                    format!("team {i} is not a map with a non-empty list of `members`"),
                )));
            }
        }
        item.opt_bool("preshow").map_err(&e)?;
        match item.get("championships") {
            None | Some(AttributeValue::Null(_)) => {}
            Some(AttributeValue::L(l)) if l.iter().all(|v| matches!(v, AttributeValue::S(_))) => {}
            Some(_) => return Err(e(bad_value("championships", "not a list of strings"))),
        }
        let result = item.opt_i64("result").map_err(&e)?;
        if let Some(r) = result {
            if r < 0 || r as usize >= teams.len() {
                return Err(e(bad_value(
                    "result",
                    format!("{r} is not the index of one of its {} teams", teams.len()),
                )));
            }
        }
        Ok(Match {
            event,
            id: id.to_string(),
            name: item.s("name").map_err(&e)?.to_string(),
            order: non_negative(item, "match", "order")?,
            points: non_negative(item, "match", "points")?,
            result,
            teams: teams.len(),
        })
    }
}

/// A user's picks for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    pub user: String,
    pub event: EventId,
    /// matchId -> team index.
    pub picks: BTreeMap<String, i64>,
}

impl Prediction {
    pub fn parse(item: &Item) -> Result<Self, InputError> {
        expect_kind(item, Kind::Prediction)?;
        check_type(item, Kind::Prediction)?;
        let e = attr("prediction", item);
        let user = user_of(item, "prediction")?;
        let sk = item.s(keys::SK).map_err(&e)?;
        let event = EventId::parse(sk.strip_prefix(keys::EVENT_PREFIX).unwrap_or_default())
            .ok_or_else(|| invalid(item, "SK is not EVENT#<YYYY-MM-DD>-<slug>"))?;
        let map = match item.get("predictions") {
            Some(AttributeValue::M(m)) => m,
            Some(v) => {
                return Err(e(AttrError::WrongType {
                    name: "predictions".into(),
                    expected: "M",
                    found: type_name(v),
                }))
            }
            None => return Err(e(AttrError::Missing("predictions".into()))),
        };
        let mut picks = BTreeMap::new();
        for (match_id, v) in map {
            let team = match v {
                AttributeValue::N(n) => n.parse::<i64>().ok().filter(|t| *t >= 0),
                _ => None,
            };
            let Some(team) = team else {
                return Err(e(bad_value(
                    "predictions",
                    "a pick is not a non-negative team index",
                )));
            };
            picks.insert(match_id.clone(), team);
        }
        Ok(Prediction { user, event, picks })
    }
}

/// The (user, year) of a standings key; works on a key-only item.
pub fn standings_of(item: &Item) -> Option<(String, String)> {
    let pk = item.s(keys::PK).ok()?;
    let sk = item.s(keys::SK).ok()?;
    let user = pk.strip_prefix(keys::USER_PREFIX)?;
    let year = sk.strip_prefix(keys::STANDINGS_PREFIX)?;
    (valid_id(user) && year.len() == 4 && year.bytes().all(|b| b.is_ascii_digit()))
        .then(|| (user.to_string(), year.to_string()))
}

/// A processor-owned count (`points`, `mcorrect`) as stored: a non-negative
/// integer, or `None` when absent or not one (a writer's stray value, which
/// the processors bring back to the derived value).
pub fn stored_count(item: &Item, name: &str) -> Option<i64> {
    item.opt_i64(name).ok().flatten().filter(|v| *v >= 0)
}

/// Writers' items, built from the same key functions the rules use.
pub mod write {
    use std::collections::HashMap;

    use aws_sdk_dynamodb::types::AttributeValue;

    use super::super::keys;
    use crate::item::{n, s, Item};

    fn item(pairs: Vec<(&str, AttributeValue)>) -> Item {
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// A user profile.
    pub fn user(user: &str, name: &str) -> Item {
        item(vec![
            (keys::PK, s(keys::user_pk(user))),
            (keys::SK, s(keys::USER_SK)),
            (keys::TYPE, s("user")),
            ("name", s(name)),
        ])
    }

    /// An event on `date` (YYYY-MM-DD), written `YYYY/MM/DD` as in the seed.
    pub fn event(date: &str, slug: &str, name: &str, state: &str) -> Item {
        item(vec![
            (keys::PK, s(keys::EVENTS_PK)),
            (keys::SK, s(keys::event_sk(date, slug))),
            (keys::TYPE, s("event")),
            ("date", s(date.replace('-', "/"))),
            ("name", s(name)),
            ("state", s(state)),
        ])
    }

    /// A match between single-member teams named in `teams`.
    #[allow(clippy::too_many_arguments)]
    pub fn a_match(
        event_id: &str,
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
                AttributeValue::M(HashMap::from([(
                    "members".to_string(),
                    AttributeValue::L(vec![s(*t)]),
                )]))
            })
            .collect();
        let mut m = item(vec![
            (keys::PK, s(keys::event_key(event_id))),
            (keys::SK, s(keys::match_sk(id))),
            (keys::TYPE, s("match")),
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
    pub fn prediction(user: &str, event_id: &str, picks: &[(&str, i64)]) -> Item {
        item(vec![
            (keys::PK, s(keys::user_pk(user))),
            (keys::SK, s(keys::event_key(event_id))),
            (keys::TYPE, s("prediction")),
            (
                "predictions",
                AttributeValue::M(picks.iter().map(|(m, t)| (m.to_string(), n(t))).collect()),
            ),
        ])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::item::{n, s};

    pub fn item(pairs: &[(&str, AttributeValue)]) -> Item {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    pub fn team(members: &[&str]) -> AttributeValue {
        AttributeValue::M(
            [(
                "members".to_string(),
                AttributeValue::L(members.iter().map(|m| s(*m)).collect()),
            )]
            .into(),
        )
    }

    pub fn user(u: &str) -> Item {
        item(&[
            ("PK", s(format!("USER#{u}"))),
            ("SK", s("USER")),
            ("type", s("user")),
            ("name", s("Sam Hogarth")),
        ])
    }

    pub fn event(date: &str, slug: &str) -> Item {
        item(&[
            ("PK", s("EVENT")),
            ("SK", s(format!("EVENT#{date}#{slug}"))),
            ("type", s("event")),
            ("date", s(date.replace('-', "/"))),
            ("name", s("AEW Revolution")),
            ("state", s("upcoming")),
        ])
    }

    pub fn a_match(event_id: &str, id: &str, order: i64, points: i64, result: Option<i64>) -> Item {
        let mut m = item(&[
            ("PK", s(format!("EVENT#{event_id}"))),
            ("SK", s(format!("MATCH#{id}"))),
            ("type", s("match")),
            ("id", s(id)),
            ("name", s("Tag Team")),
            ("order", n(order)),
            ("points", n(points)),
            ("preshow", AttributeValue::Bool(false)),
            ("championships", AttributeValue::L(vec![s("Tag Titles")])),
            (
                "teams",
                AttributeValue::L(vec![team(&["Sting"]), team(&["Bucks"])]),
            ),
        ]);
        if let Some(r) = result {
            m.insert("result".into(), n(r));
        }
        m
    }

    pub fn prediction(u: &str, event_id: &str, picks: &[(&str, i64)]) -> Item {
        item(&[
            ("PK", s(format!("USER#{u}"))),
            ("SK", s(format!("EVENT#{event_id}"))),
            ("type", s("prediction")),
            (
                "predictions",
                AttributeValue::M(picks.iter().map(|(m, t)| (m.to_string(), n(t))).collect()),
            ),
        ])
    }

    const EV: &str = "2024-03-03-aew-revolution";

    #[test]
    fn kinds_by_key() {
        assert_eq!(kind(&user("sam")), Ok(Kind::User));
        assert_eq!(
            kind(&event("2024-03-03", "aew-revolution")),
            Ok(Kind::Event)
        );
        assert_eq!(kind(&a_match(EV, "m1", 1, 5, None)), Ok(Kind::Match));
        assert_eq!(kind(&prediction("sam", EV, &[])), Ok(Kind::Prediction));
        let st = item(&[("PK", s("USER#sam")), ("SK", s("STANDINGS#2024"))]);
        assert_eq!(kind(&st), Ok(Kind::Standings));
        assert_eq!(standings_of(&st), Some(("sam".into(), "2024".into())));
        let other = item(&[("PK", s("EVENT")), ("SK", s("X"))]);
        assert_eq!(kind(&other).unwrap_err().kind(), "UnknownEntity");
        let nokey = item(&[("PK", s("EVENT"))]);
        assert_eq!(kind(&nokey).unwrap_err().kind(), "MissingAttribute");
    }

    #[test]
    fn valid_entities_parse() {
        let e = Event::parse(&event("2024-03-03", "aew-revolution")).unwrap();
        assert_eq!(e.id.as_str(), EV);
        assert_eq!(e.id.year(), "2024");
        let m = Match::parse(&a_match(EV, "m1", 3, 25, Some(1))).unwrap();
        assert_eq!((m.order, m.points, m.result, m.teams), (3, 25, Some(1), 2));
        let p = Prediction::parse(&prediction("sam", EV, &[("m1", 1)])).unwrap();
        assert_eq!(p.user, "sam");
        assert_eq!(p.picks["m1"], 1);
        assert_eq!(User::parse(&user("sam")).unwrap().name, "Sam Hogarth");
    }

    #[test]
    fn bad_input_is_named() {
        let mut e = event("2024-03-03", "aew-revolution");
        e.insert("state".into(), s("cancelled"));
        assert_eq!(Event::parse(&e).unwrap_err().kind(), "InvalidValue");
        let mut e = event("2024-03-03", "aew-revolution");
        e.insert("date".into(), s("2024/03/04"));
        assert_eq!(Event::parse(&e).unwrap_err().kind(), "Invalid");
        let e = event("2024-02-30", "x");
        assert_eq!(Event::parse(&e).unwrap_err().kind(), "Invalid");

        let mut m = a_match(EV, "m1", 1, 5, Some(2));
        assert_eq!(
            Match::parse(&m).unwrap_err().kind(),
            "InvalidValue",
            "result out of range"
        );
        m.insert("result".into(), s("1"));
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "WrongType");
        let mut m = a_match(EV, "m1", 1, 5, None);
        m.insert("points".into(), n(-1));
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "InvalidValue");
        let mut m = a_match(EV, "m1", 1, 5, None);
        m.insert("id".into(), s("m2"));
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "Invalid");
        let mut m = a_match(EV, "m1", 1, 5, None);
        m.insert("teams".into(), AttributeValue::L(vec![team(&["a"])]));
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "InvalidValue");
        let m = a_match("2024-13-03-x", "m1", 1, 5, None);
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "Invalid");
        let mut m = a_match(EV, "m1", 1, 5, None);
        m.insert("type".into(), s("event"));
        assert_eq!(Match::parse(&m).unwrap_err().kind(), "Invalid");

        let mut p = prediction("sam", EV, &[("m1", 1)]);
        p.insert("predictions".into(), s("m1=1"));
        assert_eq!(Prediction::parse(&p).unwrap_err().kind(), "WrongType");
        let p = prediction("sam", EV, &[("m1", -1)]);
        assert_eq!(Prediction::parse(&p).unwrap_err().kind(), "InvalidValue");
        let p = prediction("sa m", EV, &[]);
        assert_eq!(Prediction::parse(&p).unwrap_err().kind(), "Invalid");
        let mut p = prediction("sam", EV, &[]);
        p.remove("type");
        assert_eq!(
            Prediction::parse(&p).unwrap_err().kind(),
            "MissingAttribute"
        );
    }

    #[test]
    fn stored_counts_are_read_leniently() {
        let mut p = prediction("sam", EV, &[]);
        assert_eq!(stored_count(&p, "points"), None);
        p.insert("points".into(), n(12));
        assert_eq!(stored_count(&p, "points"), Some(12));
        p.insert("points".into(), s("12"));
        assert_eq!(stored_count(&p, "points"), None);
        p.insert("points".into(), n(-4));
        assert_eq!(stored_count(&p, "points"), None);
    }
}
