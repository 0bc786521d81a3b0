//! The `jobstream demo --model pickem` scenario: three users, two events of
//! 2024 with their matches, predictions (one changed), results arriving in
//! two rounds (one corrected). After each round the processors drain; at
//! the end the seed's five screens are printed from the table and compared
//! with what the model's pure rules say the facts imply, and the whole
//! table with the expected one. Returns the differences (empty = exact).

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::entities::{write, Match, Prediction};
use super::keys;
use super::rules::{self, score, standings_counter, EPLAYED, MCORRECT, POINTS};
use super::scoring::wanted_attrs;
use crate::engine::rules::Rules;
use crate::engine::setjob::BoxFut;
use crate::item::{n, s, Item, ItemExt};
use crate::models::{BoxError, Harness};
use crate::report::render_table;

const YEAR: &str = "2024";
const REVOLUTION: (&str, &str, &str) = ("2024-03-03", "aew-revolution", "AEW Revolution");
const DON: (&str, &str, &str) = (
    "2024-05-26",
    "aew-double-or-nothing",
    "AEW Double or Nothing",
);

fn event_id(e: (&str, &str, &str)) -> String {
    keys::event_id(e.0, e.1)
}

/// The application's client and table.
struct Db {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

/// The writer's facts as the scenario left them (the items it put).
#[derive(Default)]
struct Facts(BTreeMap<(String, String), Item>);

impl Facts {
    async fn put(&mut self, h: &Db, item: Item) -> Result<(), BoxError> {
        h.client
            .put_item()
            .table_name(&h.table)
            .set_item(Some(item.clone()))
            .send()
            .await?;
        let k = (
            item.s(keys::PK).unwrap_or_default().to_string(),
            item.s(keys::SK).unwrap_or_default().to_string(),
        );
        self.0.insert(k, item);
        Ok(())
    }

    /// The table the rules imply: the facts with every processor-owned
    /// attribute, and the standings.
    fn expected(&self) -> Vec<Item> {
        let mut out = Vec::new();
        let mut matches: BTreeMap<String, Vec<Match>> = BTreeMap::new();
        for item in self.0.values() {
            if let Ok(m) = Match::parse(item) {
                matches
                    .entry(m.event.as_str().to_string())
                    .or_default()
                    .push(m);
            }
        }
        let mut standings: BTreeMap<(String, String), (i64, i64, i64)> = BTreeMap::new();
        for item in self.0.values() {
            let mut item = item.clone();
            if let Ok(p) = Prediction::parse(&item) {
                let ms = matches
                    .get(p.event.as_str())
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let sc = score(&p.picks, ms).unwrap_or_default();
                for (a, v) in wanted_attrs(&p.user, &p.event, sc) {
                    item.insert(a.to_string(), v);
                }
                let e = standings
                    .entry((p.user.clone(), p.event.year().to_string()))
                    .or_default();
                *e = (e.0 + sc.points, e.1 + sc.mcorrect, e.2 + 1);
            } else if let Ok(Some(p)) = rules::PickemRules.projection(&item) {
                for (a, v) in p.attrs {
                    if let Some(v) = v {
                        item.insert(a.to_string(), v);
                    }
                }
            }
            out.push(item);
        }
        for ((user, year), (points, mcorrect, eplayed)) in standings {
            let c = standings_counter(&user, &year);
            let mut item = c.key_item();
            for (a, v) in c.create.into_iter().flatten() {
                item.insert(a.to_string(), v);
            }
            item.insert(POINTS.into(), n(points));
            item.insert(MCORRECT.into(), n(mcorrect));
            item.insert(EPLAYED.into(), n(eplayed));
            if let Ok(Some(p)) = rules::PickemRules.projection(&item) {
                for (a, v) in p.attrs {
                    if let Some(v) = v {
                        item.insert(a.to_string(), v);
                    }
                }
            }
            out.push(item);
        }
        out
    }
}

/// One of the seed's screens: how to read it from the table, and the same
/// selection over the expected items.
struct Screen {
    title: String,
    index: bool,
    pk: String,
    forward: bool,
    /// `attribute_not_exists(belongsto) OR belongsto = :u`
    only_user: Option<String>,
}

impl Screen {
    fn select(&self, expected: &[Item]) -> Vec<Item> {
        let (pk_name, sk_name) = if self.index {
            (keys::GSI_PK, keys::GSI_SK)
        } else {
            (keys::PK, keys::SK)
        };
        let mut out: Vec<Item> = expected
            .iter()
            .filter(|i| i.s(pk_name).ok() == Some(self.pk.as_str()))
            .filter(|i| match (&self.only_user, i.opt_s(keys::BELONGSTO)) {
                (Some(u), Ok(Some(b))) => b == keys::user_pk(u),
                _ => true,
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| {
            let k = |i: &Item| i.s(sk_name).unwrap_or_default().to_string();
            k(a).cmp(&k(b))
        });
        if !self.forward {
            out.reverse();
        }
        out
    }

    async fn read(&self, h: &Db) -> Result<Vec<Item>, BoxError> {
        let (pk_name, index) = if self.index {
            (keys::GSI_PK, Some(keys::GSI.to_string()))
        } else {
            (keys::PK, None)
        };
        let mut out = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let mut q = h
                .client
                .query()
                .table_name(&h.table)
                .set_index_name(index.clone())
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", pk_name)
                .expression_attribute_values(":pk", s(&self.pk))
                .scan_index_forward(self.forward)
                .set_exclusive_start_key(start.take());
            if let Some(u) = &self.only_user {
                q = q
                    .filter_expression("attribute_not_exists(#b) OR #b = :u")
                    .expression_attribute_names("#b", keys::BELONGSTO)
                    .expression_attribute_values(":u", s(keys::user_pk(u)));
            }
            let page = q.send().await?;
            out.extend(page.items().iter().cloned());
            match page.last_evaluated_key() {
                Some(k) if !k.is_empty() => start = Some(k.clone()),
                _ => break,
            }
        }
        Ok(out)
    }
}

const HEADERS: &[&str] = &[
    "type",
    "SK",
    "GSI_SK",
    "name",
    "points",
    "mcorrect",
    "eplayed/result",
];

fn cell(item: &Item, name: &str) -> String {
    match item.get(name) {
        Some(AttributeValue::S(v)) => v.clone(),
        Some(AttributeValue::N(v)) => v.clone(),
        Some(AttributeValue::Bool(v)) => v.to_string(),
        Some(_) => "...".into(),
        None => String::new(),
    }
}

fn row(item: &Item) -> Vec<String> {
    let t = cell(item, keys::TYPE);
    let last = if t == "match" {
        cell(item, "result")
    } else {
        cell(item, EPLAYED)
    };
    vec![
        t,
        cell(item, keys::SK),
        cell(item, keys::GSI_SK),
        cell(item, "name"),
        cell(item, POINTS),
        cell(item, MCORRECT),
        last,
    ]
}

/// Drops attributes that vary by run (none today) and sorts by key.
fn keyed(items: Vec<Item>) -> BTreeMap<(String, String), Item> {
    items
        .into_iter()
        .map(|i| {
            (
                (
                    i.s(keys::PK).unwrap_or_default().to_string(),
                    i.s(keys::SK).unwrap_or_default().to_string(),
                ),
                i,
            )
        })
        .collect()
}

async fn scan(h: &Db) -> Result<Vec<Item>, BoxError> {
    let mut out = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let page = h
            .client
            .scan()
            .table_name(&h.table)
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await?;
        out.extend(page.items().iter().cloned());
        match page.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => break,
        }
    }
    Ok(out)
}

/// Plays the scenario; returns the differences from what it implies.
pub fn demo(h: &mut dyn Harness) -> BoxFut<'_, Result<Vec<String>, BoxError>> {
    Box::pin(async move {
        let db = Db {
            client: h.dynamodb().clone(),
            table: h.table().to_string(),
        };
        let rev = event_id(REVOLUTION);
        let don = event_id(DON);
        let mut f = Facts::default();

        println!("1. users, two events, their matches, predictions");
        for (u, name) in [
            ("sam", "Sam Hogarth"),
            ("alex", "Alex Moore"),
            ("jo", "Jo Park"),
        ] {
            f.put(&db, write::user(u, name)).await?;
        }
        for e in [REVOLUTION, DON] {
            f.put(&db, write::event(e.0, e.1, e.2, "upcoming")).await?;
        }
        let rev_matches = [
            ("m1", "Tornado Tag Team", 1, 10, true),
            ("m2", "TNT Championship", 2, 25, false),
            ("m3", "Sting's Last Match", 3, 40, false),
        ];
        for (id, name, order, points, preshow) in rev_matches {
            f.put(
                &db,
                write::a_match(&rev, id, name, order, points, preshow, &["A", "B"], None),
            )
            .await?;
        }
        for (id, name, order, points) in [("d1", "Opener", 2, 15), ("d2", "Main Event", 1, 30)] {
            f.put(
                &db,
                write::a_match(&don, id, name, order, points, false, &["A", "B"], None),
            )
            .await?;
        }
        f.put(
            &db,
            write::prediction("sam", &rev, &[("m1", 0), ("m2", 1), ("m3", 0)]),
        )
        .await?;
        f.put(
            &db,
            write::prediction("alex", &rev, &[("m1", 1), ("m2", 1), ("m3", 1)]),
        )
        .await?;
        f.put(
            &db,
            write::prediction("jo", &rev, &[("m1", 0), ("m2", 0), ("m3", 1)]),
        )
        .await?;
        f.put(&db, write::prediction("sam", &don, &[("d1", 1), ("d2", 1)]))
            .await?;
        f.put(
            &db,
            write::prediction("alex", &don, &[("d1", 1), ("d2", 1)]),
        )
        .await?;
        h.drain().await?;

        println!(
            "2. {} is broadcast: results arrive; sam changes a pick for {}",
            REVOLUTION.2, DON.2
        );
        f.put(
            &db,
            write::event(REVOLUTION.0, REVOLUTION.1, REVOLUTION.2, "broadcast"),
        )
        .await?;
        for (id, name, order, points, preshow) in rev_matches {
            let result = match id {
                "m1" => 0,
                "m2" => 1,
                _ => 0,
            };
            f.put(
                &db,
                write::a_match(
                    &rev,
                    id,
                    name,
                    order,
                    points,
                    preshow,
                    &["A", "B"],
                    Some(result),
                ),
            )
            .await?;
        }
        f.put(&db, write::prediction("sam", &don, &[("d1", 0), ("d2", 1)]))
            .await?;
        h.drain().await?;

        println!(
            "3. the main event's result is corrected; {} is scored; {} has a first result",
            REVOLUTION.2, DON.2
        );
        let (id, name, order, points, preshow) = rev_matches[2];
        f.put(
            &db,
            write::a_match(&rev, id, name, order, points, preshow, &["A", "B"], Some(1)),
        )
        .await?;
        f.put(
            &db,
            write::event(REVOLUTION.0, REVOLUTION.1, REVOLUTION.2, "scored"),
        )
        .await?;
        f.put(&db, write::event(DON.0, DON.1, DON.2, "broadcast"))
            .await?;
        f.put(
            &db,
            write::a_match(&don, "d2", "Main Event", 1, 30, false, &["A", "B"], Some(1)),
        )
        .await?;
        h.drain().await?;
        println!("processor item writes: {}", h.processor_writes());

        let expected = f.expected();
        let screens = [
            Screen {
                title: "Events, most recent first (PK = EVENT, ScanIndexForward = false)".into(),
                index: false,
                pk: keys::EVENTS_PK.into(),
                forward: false,
                only_user: None,
            },
            Screen {
                title: format!("Standings {YEAR}, highest first (GSI_PK = STANDINGS#{YEAR}, ScanIndexForward = false)"),
                index: true,
                pk: keys::standings_key(YEAR),
                forward: false,
                only_user: None,
            },
            Screen {
                title: format!("{} with sam's predictions (GSI_PK = EVENT#{don}, attribute_not_exists(belongsto) OR belongsto = USER#sam)", DON.2),
                index: true,
                pk: keys::event_key(&don),
                forward: true,
                only_user: Some("sam".into()),
            },
            Screen {
                title: format!("{} scored, scores highest first (GSI_PK = EVENT#{rev}, ScanIndexForward = false)", REVOLUTION.2),
                index: true,
                pk: keys::event_key(&rev),
                forward: false,
                only_user: None,
            },
            Screen {
                title: "sam's details (PK = USER#sam, ScanIndexForward = false)".into(),
                index: false,
                pk: keys::user_pk("sam"),
                forward: false,
                only_user: None,
            },
        ];
        let mut differences = Vec::new();
        for (i, screen) in screens.iter().enumerate() {
            let got: Vec<Vec<String>> = screen.read(&db).await?.iter().map(row).collect();
            let want: Vec<Vec<String>> = screen.select(&expected).iter().map(row).collect();
            println!(
                "\n{}. {}\n{}",
                i + 1,
                screen.title,
                render_table(HEADERS, &got)
            );
            if got != want {
                differences.push(format!(
                    "screen {} ({}): expected\n{}\ngot\n{}",
                    i + 1,
                    screen.title,
                    render_table(HEADERS, &want),
                    render_table(HEADERS, &got)
                ));
            }
        }
        let actual = keyed(scan(&db).await?);
        let want = keyed(expected);
        for (k, item) in &want {
            match actual.get(k) {
                None => differences.push(format!("missing item PK={}, SK={}", k.0, k.1)),
                Some(a) if a != item => {
                    let mut names: Vec<&String> = a.keys().chain(item.keys()).collect();
                    names.sort();
                    names.dedup();
                    let off: Vec<String> = names
                        .into_iter()
                        .filter(|n| a.get(*n) != item.get(*n))
                        .map(|n| format!("{n}: {} (expected {})", cell(a, n), cell(item, n)))
                        .collect();
                    differences.push(format!("item PK={}, SK={}: {}", k.0, k.1, off.join(", ")));
                }
                Some(_) => {}
            }
        }
        for k in actual.keys().filter(|k| !want.contains_key(*k)) {
            differences.push(format!("unexpected item PK={}, SK={}", k.0, k.1));
        }
        differences.extend(
            h.verify()
                .await?
                .into_iter()
                .map(|p| format!("verify: {p}")),
        );
        println!(
            "\n{}",
            if differences.is_empty() {
                "every screen and item is exactly what the facts imply".to_string()
            } else {
                format!("{} differences", differences.len())
            }
        );
        Ok(differences)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_table_of_a_small_scenario() {
        let mut f = Facts::default();
        let ev = "2024-03-03-x";
        for item in [
            write::event("2024-03-03", "x", "X", "scored"),
            write::a_match(ev, "m1", "A", 1, 10, false, &["a", "b"], Some(0)),
            write::a_match(ev, "m2", "B", 2, 20, false, &["a", "b"], Some(1)),
            write::prediction("sam", ev, &[("m1", 0), ("m2", 1)]),
            write::prediction("jo", ev, &[("m1", 1)]),
        ] {
            let k = (
                item.s("PK").unwrap().to_string(),
                item.s("SK").unwrap().to_string(),
            );
            f.0.insert(k, item);
        }
        let want = keyed(f.expected());
        assert_eq!(want.len(), 7, "5 facts + 2 standings");
        let sam = &want[&("USER#sam".to_string(), "STANDINGS#2024".to_string())];
        assert_eq!(sam.get("points"), Some(&n(30)));
        assert_eq!(sam.get("GSI_SK"), Some(&s("SCORE#00030#sam")));
        assert_eq!(sam.get("type"), Some(&s("standings")));
        assert_eq!(
            sam.len(),
            9,
            "PK SK type belongsto points mcorrect eplayed GSI_PK GSI_SK"
        );
        let jo = &want[&("USER#jo".to_string(), format!("EVENT#{ev}"))];
        assert_eq!(jo.get("GSI_SK"), Some(&s("SCORE#000#jo")));
        let scored = Screen {
            title: String::new(),
            index: true,
            pk: format!("EVENT#{ev}"),
            forward: false,
            only_user: None,
        };
        let order: Vec<String> = scored
            .select(&f.expected())
            .iter()
            .map(|i| i.s("GSI_SK").unwrap().to_string())
            .collect();
        assert_eq!(
            order,
            [
                "SCORE#030#sam",
                "SCORE#000#jo",
                "MATCH#02",
                "MATCH#01",
                "EVENT"
            ]
        );
        let mine = Screen {
            forward: true,
            only_user: Some("jo".into()),
            ..scored
        };
        let order: Vec<String> = mine
            .select(&f.expected())
            .iter()
            .map(|i| i.s("GSI_SK").unwrap().to_string())
            .collect();
        assert_eq!(order, ["EVENT", "MATCH#01", "MATCH#02", "SCORE#000#jo"]);
    }
}
